//! membloat_exporter: a Prometheus exporter that finds memory bloat on Linux hosts and
//! warns before the OOM killer strikes.
//!
//! Data flows one way: [`config`] -> [`source`] (the only I/O) -> [`parse`] (pure) ->
//! [`units`] (a system collector in one file) -> [`collect`] -> [`model`] (pure) -> [`expose`] and [`explain`] -> [`serve`], driven by
//! [`daemon`]. Each room above layer 0 uses only its own layer and the ones below it;
//! the rooms of layer 0 (config, log, source, parse, family, units) use one another
//! (docs/architecture.md; enforced by tests/layers.rs).

pub mod collect;
pub mod config;
pub mod daemon;
pub mod explain;
pub mod expose;
pub mod family;
pub mod log;
pub mod model;
pub mod parse;
pub mod serve;
pub mod source;
pub mod units;
