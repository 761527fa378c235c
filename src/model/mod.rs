//! The model: pure functions from what a scan read to what it means. `derive` turns
//! (state, sample) into the next state and the snapshot scrapes and `explain` read;
//! `state` is what is remembered between scans; `groups` sums processes by group; `sheet` partitions memory into rows; `signals` holds the per-process signals
//! and every threshold they and the alerts share.

pub mod derive;
pub mod groups;
pub mod kills;
pub mod sheet;
pub mod signals;
pub mod snapshot;
pub mod state;
