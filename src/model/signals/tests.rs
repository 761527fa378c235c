use super::*;
use crate::heap::runtime::Identity;
use crate::heap::{Measurement, Unmeasured as Outcome};
use crate::model::derive::tests_support::process;
use crate::parse::smaps_rollup::SmapsRollup;

const MIB: u64 = 1 << 20;
/// One tick of a 100 Hz `CLK_TCK`, the kernel's usual.
const TICK: f64 = 0.01;

fn sample(cpu: f64, rss_anon_mib: u64, huge_mib: u64, hwm_mib: u64) -> ProcessSample {
    let mut p = process(10, "app");
    p.cpu_seconds = Some(cpu);
    p.status.vm_rss_bytes = Some((rss_anon_mib + 4) * MIB);
    p.status.vm_hwm_bytes = Some(hwm_mib * MIB);
    p.status.rss_anon_bytes = Some(rss_anon_mib * MIB);
    p.status.vm_size_bytes = Some(300 * MIB);
    p.rollup = Some(SmapsRollup {
        anon_huge_pages_bytes: Some(huge_mib * MIB),
        ..SmapsRollup::default()
    });
    p
}

#[test]
fn regrowth_while_idle_is_counted_in_2_mib_steps() {
    // DONTNEED left 1 MiB; khugepaged then collapses 2 MiB ranges while it sleeps.
    let (s0, _) = advance(None, &sample(1.0, 1, 0, 260), 0.0, 2, TICK);
    let (s1, g1) = advance(Some(&s0), &sample(1.0, 9, 8, 260), 1.0, 2, TICK);
    assert_eq!(g1.regrown_since_trough_bytes, 8 * MIB);
    let (s2, g2) = advance(Some(&s1), &sample(1.0, 257, 256, 260), 1.0, 2, TICK);
    assert_eq!(g2.regrown_since_trough_bytes, 256 * MIB);
    assert_eq!(g2.regrown_total_bytes, 256 * MIB);
    assert!((g2.thp_anon_ratio.unwrap() - 256.0 / 257.0).abs() < 1e-9);
    // The program wakes up and works: growth is its own, the stretch restarts.
    let (_, g3) = advance(Some(&s2), &sample(3.0, 300, 290, 300), 1.0, 2, TICK);
    assert_eq!(g3.regrown_since_trough_bytes, 0);
    assert_eq!(
        g3.regrown_total_bytes,
        256 * MIB,
        "the counter never goes back"
    );
}

#[test]
fn idleness_is_judged_over_the_time_since_cpu_was_last_read() {
    let still = |p: ProcessSample| ProcessSample {
        cpu_seconds: None,
        ..p
    };
    let (s0, _) = advance(None, &sample(1.0, 1, 0, 260), 0.0, 2, TICK);
    // Busy: 0.5 s of CPU in one 1 s scan.
    let (s1, g1) = advance(Some(&s0), &sample(1.5, 1, 0, 260), 1.0, 2, TICK);
    assert_eq!(g1.idle, Some(false));
    // CPU time not read for 29 scans: the verdict is kept, not made up from a stale 0.
    let mut s = s1;
    for _ in 0..29 {
        let (next, g) = advance(Some(&s), &still(sample(0.0, 1, 0, 260)), 1.0, 2, TICK);
        assert_eq!(g.idle, Some(false));
        assert_eq!(g.cpu_seconds, 1.5, "the last CPU time read is shown");
        s = next;
    }
    // Read again when memory moved: 0.2 s over the 30 s since the last read is idle,
    // though it would be busy over this scan's 1 s alone, and regrowth is counted.
    let (s31, g31) = advance(Some(&s), &sample(1.7, 9, 8, 260), 1.0, 2, TICK);
    assert_eq!(g31.idle, Some(true));
    assert_eq!(g31.regrown_since_trough_bytes, 8 * MIB);
    assert_eq!(s31.cpu_age_seconds, 0.0);
    // 0.5 s over the next 1 s is busy again.
    let (_, g32) = advance(Some(&s31), &sample(2.2, 9, 8, 260), 1.0, 2, TICK);
    assert_eq!(g32.idle, Some(false));
}

#[test]
fn growth_without_huge_pages_is_not_regrowth() {
    let (s0, _) = advance(None, &sample(1.0, 1, 0, 10), 0.0, 2, TICK);
    let (_, g) = advance(Some(&s0), &sample(1.0, 100, 0, 100), 1.0, 2, TICK);
    assert_eq!(g.regrown_since_trough_bytes, 0);
}

fn with_heap(mut p: ProcessSample, heap_rss_mib: u64, heap_size_mib: u64) -> ProcessSample {
    p.smaps = Some(Box::new(SmapsSummary {
        brk_heap_rss_bytes: heap_rss_mib * MIB,
        brk_heap_size_bytes: heap_size_mib * MIB,
        commit_bytes: (heap_size_mib + 4096) * MIB,
        ..SmapsSummary::default()
    }));
    p
}

#[test]
fn hoarding_needs_a_dense_large_heap_kept_near_the_peak_while_idle() {
    let (s0, _) = advance(None, &sample(2.0, 1100, 0, 1110), 0.0, 2, TICK);
    let (_, g) = advance(
        Some(&s0),
        &with_heap(sample(2.0, 1100, 0, 1110), 1090, 1090),
        10.0,
        2,
        TICK,
    );
    assert_eq!(g.hoarded_bytes, Some(1090 * MIB));
    // Trimmed heap (Size >> Rss): not hoarding.
    let (_, g) = advance(
        Some(&s0),
        &with_heap(sample(2.0, 1100, 0, 1110), 100, 1090),
        10.0,
        2,
        TICK,
    );
    assert_eq!(g.hoarded_bytes, Some(0));
    // Busy: the memory may be in use.
    let (_, g) = advance(
        Some(&s0),
        &with_heap(sample(9.0, 1100, 0, 1110), 1090, 1090),
        10.0,
        2,
        TICK,
    );
    assert_eq!(g.hoarded_bytes, Some(0));
    // RSS well below the peak: the allocator already gave memory back.
    let (_, g) = advance(
        Some(&s0),
        &with_heap(sample(2.0, 500, 0, 1110), 490, 490),
        10.0,
        2,
        TICK,
    );
    assert_eq!(g.hoarded_bytes, Some(0));
    // First sight: idleness unknown, so no verdict either way on hoarding.
    let (_, g) = advance(
        None,
        &with_heap(sample(2.0, 1100, 0, 1110), 1090, 1090),
        0.0,
        2,
        TICK,
    );
    assert_eq!(g.hoarded_bytes, Some(0));
    assert_eq!(g.idle, None);
}

#[test]
fn untouched_commit_and_arena_ceiling() {
    let mut p = with_heap(sample(2.0, 100, 0, 100), 10, 10);
    p.smaps.as_mut().unwrap().arena_heaps = 15;
    let (_, g) = advance(None, &p, 0.0, 2, TICK);
    assert_eq!(g.untouched_commit_bytes, Some((10 + 4096 - 100) * MIB));
    assert_eq!(g.arena_at_ceiling, Some(true));
    let (_, g) = advance(None, &p, 0.0, 4, TICK);
    assert_eq!(g.arena_at_ceiling, Some(false));
}

#[test]
fn deep_data_is_carried_between_deep_reads() {
    let p = with_heap(sample(2.0, 100, 0, 100), 10, 10);
    let (s0, _) = advance(None, &p, 0.0, 2, TICK);
    let (_, g) = advance(Some(&s0), &sample(2.0, 100, 0, 100), 10.0, 2, TICK);
    assert_eq!(g.heap_resident_bytes, Some(10 * MIB));
}

fn walked(
    mut p: ProcessSample,
    walk: Result<HeapMeasure, Outcome>,
    runtime: Runtime,
) -> ProcessSample {
    p.heap = Some(Arc::new(HeapReading {
        identity: Identity {
            allocator: Allocator::Glibc,
            runtime,
            version: String::new(),
        },
        memory_cgroup: None,
        readings: vec![Measurement::Glibc(walk)],
        read_at_unix_seconds: 0.0,
    }));
    p
}

fn hoard(free_mib: u64) -> HeapMeasure {
    let mut m = HeapMeasure::default();
    m.main.free_bytes = free_mib * MIB;
    m.main.free_resident_bytes = free_mib * MIB;
    m.main.reclaimable_bytes = free_mib * MIB;
    m
}

#[test]
fn a_walkable_heap_shows_no_figure_until_it_is_measured() {
    // The smaps shape alone would suspect 1090 MiB; the heap is walkable, so until a
    // walk succeeds there is no figure, and the process is counted as pending.
    let idle = with_heap(sample(2.0, 1100, 0, 1110), 1090, 1090);
    let (s0, _) = advance(None, &idle, 0.0, 2, TICK);
    let moving = walked(idle.clone(), Err(Outcome::Inconsistent), Runtime::Native);
    let (s1, g) = advance(Some(&s0), &moving, 10.0, 2, TICK);
    assert_eq!((g.hoarded_bytes, g.hoard_method), (None, None));
    assert!(g.hoard_pending);
    let measured = walked(idle.clone(), Ok(hoard(300)), Runtime::Native);
    let (s2, g) = advance(Some(&s1), &measured, 10.0, 2, TICK);
    assert_eq!(g.hoarded_bytes, Some(300 * MIB));
    assert_eq!(g.hoard_method, Some(Method::Measured));
    assert!(!g.hoard_pending);
    // A later walk that meets a moving heap keeps the last measurement meanwhile.
    let (_, g) = advance(Some(&s2), &moving, 10.0, 2, TICK);
    assert_eq!(g.hoarded_bytes, Some(300 * MIB));
    assert!(!g.hoard_pending);
    // A heap that cannot be walked (no privilege) is suspected, as before.
    let denied = walked(idle, Err(Outcome::Unreadable), Runtime::Native);
    let (_, g) = advance(Some(&s0), &denied, 10.0, 2, TICK);
    assert_eq!(g.hoarded_bytes, Some(1090 * MIB));
    assert_eq!(g.hoard_method, Some(Method::Suspected));
}

#[test]
fn arenas_come_from_glibc_ring_when_measured() {
    // The mappings show 2 heaps (merged neighbours hide the rest); the ring holds 15
    // arenas in 40 heaps: on 2 CPUs that is glibc's ceiling (16 with the main one).
    let mut p = with_heap(sample(2.0, 100, 0, 100), 10, 10);
    p.smaps.as_mut().unwrap().arena_heaps = 2;
    let mut m = hoard(0);
    m.arena_count = 15;
    m.arenas.heaps = 40;
    m.arena_reserved_bytes = 40 * 64 * MIB;
    let (_, g) = advance(
        None,
        &walked(p.clone(), Ok(m), Runtime::Native),
        0.0,
        2,
        TICK,
    );
    assert_eq!(g.arena_heaps, Some(40));
    assert_eq!(g.arena_reserved_bytes, Some(40 * 64 * MIB));
    assert_eq!(g.arena_at_ceiling, Some(true));
    let (_, g) = advance(
        None,
        &walked(p.clone(), Ok(m), Runtime::Native),
        0.0,
        4,
        TICK,
    );
    assert_eq!(g.arena_at_ceiling, Some(false));
    // A Go heap looks like arena heaps in the maps; it is not one.
    let go = walked(p, Err(Outcome::NotGlibc), Runtime::Go);
    let (_, g) = advance(None, &go, 0.0, 2, TICK);
    assert_eq!(g.arena_heaps, Some(0));
    assert_eq!(g.arena_at_ceiling, Some(false));
}

/// The slack for idleness is one tick of the CPU clock the kernel counts in, not 10 ms
/// whatever it is: 5 ms over 0.1 s is idle at 100 Hz (under one tick past 1 %), busy at
/// 1000 Hz.
#[test]
fn the_idle_slack_is_one_tick_of_the_kernels_clock() {
    for (tick, idle) in [(0.01, true), (0.001, false)] {
        let (s0, _) = advance(None, &sample(1.0, 1, 0, 260), 0.0, 2, tick);
        let (_, g) = advance(Some(&s0), &sample(1.005, 1, 0, 260), 0.1, 2, tick);
        assert_eq!(g.idle, Some(idle), "tick {tick}");
    }
}

/// A heap figure older than its freshness bound is not served as measured: the process
/// falls back to what its mappings say, until a deep read measures it again.
#[test]
fn a_stale_heap_figure_is_not_served_as_measured() {
    let idle = with_heap(sample(2.0, 1100, 0, 1110), 1090, 1090);
    let (s0, _) = advance(None, &idle, 0.0, 2, TICK);
    let measured = walked(idle.clone(), Ok(hoard(300)), Runtime::Native);
    let (s1, g) = advance(Some(&s0), &measured, 10.0, 2, TICK);
    assert_eq!(g.hoard_method, Some(Method::Measured));
    // Read at 0 s; at 100 s within a bound of 1,000 s the figure stands.
    let later = sample(2.0, 1100, 0, 1110);
    assert!(without_stale_heap(&s1, &later, Some(100.0), Some(1000.0)).is_none());
    assert!(without_stale_heap(&s1, &later, Some(5000.0), None).is_none());
    let (_, g) = advance(Some(&s1), &later, 10.0, 2, TICK);
    assert_eq!(g.hoarded_bytes, Some(300 * MIB));
    // Past it, not as measured; a reading of this scan is always fresh.
    let stale = without_stale_heap(&s1, &later, Some(1001.0), Some(1000.0)).unwrap();
    let (_, g) = advance(Some(&stale), &later, 10.0, 2, TICK);
    assert_ne!(g.hoard_method, Some(Method::Measured));
    assert!(without_stale_heap(&s1, &measured, Some(1001.0), Some(1000.0)).is_none());
}
