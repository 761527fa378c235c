//! membloat_exporter: a Prometheus exporter that finds memory bloat on Linux hosts and
//! warns before the OOM killer strikes.
//!
//! Data flows one way, from the foundations up: [`log`], [`parse`] (pure) and [`family`]
//! (what a metric family and a collector are) -> [`source`] (the only I/O) -> [`units`] (a
//! system collector in one file) and [`heap`] (the heap readers, a folder each) ->
//! [`config`] -> [`collect`] -> [`model`] (pure) ->
//! [`expose`] and [`explain`] -> [`serve`] -> [`daemon`]. Each room uses only the rooms
//! below it, and no module of a room uses, through its siblings, one that uses it back
//! (docs/architecture.md; enforced by tests/layers.rs).

pub mod attach;
pub mod collect;
pub mod config;
pub mod daemon;
pub mod explain;
pub mod expose;
pub mod family;
pub mod heap;
pub mod log;
pub mod model;
pub mod parse;
pub mod serve;
pub mod source;
pub mod units;
