//! The kubelet's eviction headroom, as the `kubelet` collector read it: each signal, its
//! thresholds, and how much of the kubelet's working set is page cache the kernel would
//! drop before the kubelet evicts (docs/eviction.md).

use serde::Serialize;

use crate::units::kubelet::Kubelet;

/// One of the kubelet's memory signals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Signal {
    /// `memory.available` or `allocatableMemory.available`.
    pub signal: &'static str,
    /// As the kubelet computes it: capacity less working set (negative past it).
    pub available_bytes: i64,
    pub capacity_bytes: u64,
    pub working_set_bytes: u64,
    /// Of the working set, file pages on the active list: reclaimed under pressure before
    /// the kubelet would need to evict.
    pub active_file_bytes: u64,
    pub thresholds: Vec<Threshold>,
}

/// A threshold of a signal.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Threshold {
    /// `hard` or `soft`.
    pub kind: &'static str,
    pub bytes: u64,
    /// The signal less the threshold: below 0 the kubelet has met it.
    pub headroom_bytes: i64,
}

/// The signals of the scan's kubelet collector, node first (none without a kubelet).
pub(crate) fn of(s: &crate::model::derive::Snapshot) -> Vec<Signal> {
    s.host.get::<Kubelet>().map(signals).unwrap_or_default()
}

/// The signals of the collector's latest read, node first.
pub(crate) fn signals(k: &Kubelet) -> Vec<Signal> {
    k.signals
        .iter()
        .map(|s| Signal {
            signal: s.name,
            available_bytes: s.available(),
            capacity_bytes: s.capacity,
            working_set_bytes: s.working_set(),
            active_file_bytes: s.active_file.min(s.working_set()),
            thresholds: s
                .thresholds
                .iter()
                .map(|&(kind, bytes)| Threshold {
                    kind,
                    bytes,
                    headroom_bytes: s.available() - bytes as i64,
                })
                .collect(),
        })
        .collect()
}
