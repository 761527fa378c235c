//! Hoarding as the process's memory shows it: suspected from the shape of its mappings,
//! then measured from its heap readers (glibc's free pages, jemalloc's kept pages, a JVM's
//! held heap, a Go program's free resident heap), the runtimes' figures joining the
//! allocator's.

use super::{
    Method, Signals, ARENAS_PER_CPU, HOARD_MIN_HEAP_BYTES, HOARD_MIN_HEAP_DENSITY,
    HOARD_MIN_HEAP_SHARE, HOARD_MIN_MEASURED_BYTES, HOARD_MIN_RETAINED,
};
use crate::collect::ProcessSample;
use crate::heap::shape::{HeapReader, Share};
use crate::heap::{Glibc, HeapMeasure, HeapReading};
use crate::parse::smaps::SmapsSummary;

/// What the mappings say (`smaps`): the heap's resident and mapped size, glibc's arenas as
/// their shape shows them, commit and what of it was never touched, and hoarding as
/// suspected from the heap's shape in an idle process.
pub(super) fn from_mappings(
    sig: &mut Signals,
    m: &SmapsSummary,
    p: &ProcessSample,
    glibc_arenas: bool,
    online_cpus: u64,
) {
    let st = &p.status;
    let rss_anon = st.rss_anon_bytes.unwrap_or(0);
    let heap_rss = m.heap_rss_bytes();
    let heap_size = m.heap_size_bytes();
    sig.heap_resident_bytes = Some(heap_rss);
    sig.heap_size_bytes = Some(heap_size);
    if glibc_arenas {
        // Until a walk finds the arenas from glibc's own structures: the shape of the
        // mappings (which merged neighbouring heaps can hide).
        sig.arena_heaps = Some(m.arena_heaps);
        sig.arena_reserved_bytes = Some(m.arena_reserved_bytes);
        sig.arena_at_ceiling = Some(m.arena_heaps >= ARENAS_PER_CPU * online_cpus.max(1) - 1);
    } else {
        // A Go or JVM heap, or another allocator: no glibc arenas, whatever the maps.
        sig.arena_heaps = Some(0);
        sig.arena_reserved_bytes = Some(0);
        sig.arena_at_ceiling = Some(false);
    }
    sig.commit_bytes = Some(m.commit_bytes);
    let backed = rss_anon.saturating_add(st.vm_swap_bytes.unwrap_or(0));
    sig.untouched_commit_bytes = Some(m.commit_bytes.saturating_sub(backed));
    let suspected = heap_rss >= HOARD_MIN_HEAP_BYTES
        && heap_rss as f64 >= HOARD_MIN_HEAP_SHARE * rss_anon as f64
        && heap_rss as f64 >= HOARD_MIN_HEAP_DENSITY * heap_size as f64
        && sig
            .retained_peak_ratio
            .is_some_and(|r| r >= HOARD_MIN_RETAINED)
        && sig.idle == Some(true);
    sig.hoarded_bytes = Some(if suspected { heap_rss } else { 0 });
    sig.hoard_method = Some(Method::Suspected);
}

/// glibc's heap as a walk measured it: the arena ring from glibc's own structures (every
/// arena and heap, whatever the mappings look like), and the resident free pages glibc
/// could give back, busy or idle, which beat a suspicion.
pub(super) fn measured_heap(sig: &mut Signals, m: HeapMeasure, online_cpus: u64) {
    sig.arena_heaps = Some(m.arenas.heaps);
    sig.arena_reserved_bytes = Some(m.arena_reserved_bytes);
    sig.arena_at_ceiling = Some(m.arena_count + 1 >= ARENAS_PER_CPU * online_cpus.max(1));
    let free = m.reclaimable_bytes();
    sig.heap = Some(Box::new(m));
    sig.hoarded_bytes = Some(if free >= HOARD_MIN_MEASURED_BYTES {
        free
    } else {
        0
    });
    sig.hoard_method = Some(Method::Measured);
}

/// The figures of the readers other than glibc's: an allocator that stands in for glibc's
/// (jemalloc) first, whose held pages are the process's measured hoarding; then the
/// managed runtimes, whose held heap joins it.
pub(super) fn held_heaps(sig: &mut Signals, h: &HeapReading) {
    let others = || h.readings.iter().filter(|r| r.reader() != Glibc::NAME);
    for r in others().filter(|r| r.share() == Share::Allocator) {
        allocator_heap(sig, r.reader(), r.held_bytes());
    }
    for r in others() {
        if let Share::Runtime { alone } = r.share() {
            runtime_heap(sig, r.reader(), r.held_bytes(), alone);
        }
    }
}

/// An allocator's kept pages (jemalloc's resident dirty and muzzy pages, which an arena
/// purge gives back): measured, the process's hoarding; not measured, the suspicion the
/// mappings give stands.
fn allocator_heap(sig: &mut Signals, by: &'static str, held: Option<u64>) {
    let Some(held) = held else {
        return;
    };
    sig.runtime_held_bytes = Some(held);
    sig.runtime_held_by = Some(by);
    if !sig.hoard_pending {
        sig.hoarded_bytes = Some(if held >= HOARD_MIN_MEASURED_BYTES {
            held
        } else {
            0
        });
        sig.hoard_method = Some(Method::Measured);
    }
}

/// A managed runtime's held heap (a JVM's, read from its perf data; a Go program's free
/// resident heap, from its runtime's variables): measured, it joins glibc's measured free
/// pages (a suspected native figure gives way to it); not measured, the process has no
/// measured figure at all, since glibc's alone would leave out the largest holder (and a
/// runtime `alone`, Go, has no other: the mappings' shape says nothing of its heap).
fn runtime_heap(sig: &mut Signals, by: &'static str, held: Option<u64>, alone: bool) {
    if let Some(held) = held {
        sig.runtime_held_bytes = Some(held);
        sig.runtime_held_by = Some(by);
    }
    if held.is_none() && (sig.hoard_method == Some(Method::Measured) || alone) {
        sig.hoarded_bytes = None;
        sig.hoard_method = None;
    }
    if let (Some(held), false) = (held, sig.hoard_pending) {
        let native = match sig.hoard_method {
            Some(Method::Measured) => sig.hoarded_bytes.unwrap_or(0),
            _ => 0,
        };
        let held = if held >= HOARD_MIN_MEASURED_BYTES {
            held
        } else {
            0
        };
        sig.hoarded_bytes = Some(native.saturating_add(held));
        sig.hoard_method = Some(Method::Measured);
    }
}
