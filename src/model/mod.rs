//! The model: pure functions from what a scan read to what it means. `derive` turns
//! (previous snapshot, sample) into the snapshot scrapes and `explain` read; `signals`
//! holds the per-process signals and every threshold they and the alerts share.

pub mod derive;
pub mod signals;
