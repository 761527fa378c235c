//! membloat_exporter: a Prometheus exporter that finds memory bloat on Linux hosts and
//! warns before the OOM killer strikes.
//!
//! Data flows one way: [`config`] -> [`source`] (the only I/O) -> [`parse`] (pure) ->
//! [`sample`] -> [`derive`] (pure) -> [`expose`] -> [`http`], driven by [`daemon`].

pub mod config;
pub mod daemon;
pub mod derive;
pub mod explain;
pub mod expose;
pub mod heap;
pub mod http;
pub mod log;
pub mod matcher;
pub mod parse;
pub mod pool;
pub mod sample;
pub mod signals;
pub mod source;
pub mod webconfig;
