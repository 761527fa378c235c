//! Edge coverage from LLVM's SanitizerCoverage (`trace-pc-guard` at level 3, which splits
//! critical edges so each guard is an edge), which stable rustc adds with
//! `-C passes=sancov-module` (scripts/fuzz.sh). Each guard gets its own slot in a 256 KiB
//! map of hit counts, as libFuzzer does; no "previous block" is kept, so threads running
//! the exporter's code at once (its reader pools) cannot invent edges by interleaving.
//!
//! The map is a byte a slot, kept in atomic words that every thread loads and stores
//! with relaxed ordering: no data race, and no locked instruction on the hot path. Two
//! threads counting in one word at once may lose a count, as AFL's plain bytes may; an
//! edge is never lost with it, since the other thread's store holds its own.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const MAP_SIZE: usize = 1 << 18;

/// The hit counts, eight slots a word (slot `i` is byte `i % 8` of word `i / 8`).
static MAP: [AtomicU64; MAP_SIZE / 8] = [const { AtomicU64::new(0) }; MAP_SIZE / 8];
/// Which words of [`MAP`] the execution touched, a bit each: `Seen::absorb` and
/// `discard` visit those alone (the scan is instrumented code too, a callback a step).
static TOUCHED: [AtomicU64; MAP_SIZE / 8 / 64] = [const { AtomicU64::new(0) }; MAP_SIZE / 8 / 64];

/// Takes the touched words of the map, each cleared as it is taken.
fn take_touched(mut each: impl FnMut(usize, u64)) {
    for (t, touched) in TOUCHED.iter().enumerate() {
        let mut bits = touched.swap(0, Ordering::Relaxed);
        while bits != 0 {
            let w = t * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            each(w, MAP[w].swap(0, Ordering::Relaxed));
        }
    }
}
/// Guards handed an id so far: zero when the binary is not instrumented.
static GUARDS: AtomicU32 = AtomicU32::new(0);

/// Called once per instrumented object (before `main`) with its guards.
///
/// # Safety
/// LLVM passes a valid `[start, stop)` range of guards.
#[no_mangle]
pub unsafe extern "C" fn __sanitizer_cov_trace_pc_guard_init(start: *mut u32, stop: *mut u32) {
    let mut guard = start;
    while guard < stop {
        if *guard == 0 {
            // Slots 1.. in order; past the map's end (more edges than slots) they share.
            let n = GUARDS.fetch_add(1, Ordering::Relaxed) as usize;
            *guard = (n % (MAP_SIZE - 1) + 1) as u32;
        }
        guard = guard.add(1);
    }
}

/// Called on every instrumented edge.
///
/// # Safety
/// LLVM passes a guard initialised by [`__sanitizer_cov_trace_pc_guard_init`].
#[no_mangle]
pub unsafe extern "C" fn __sanitizer_cov_trace_pc_guard(guard: *mut u32) {
    let i = (*guard as usize) & (MAP_SIZE - 1);
    let (word, shift) = (&MAP[i / 8], (i % 8) * 8);
    let w = word.load(Ordering::Relaxed);
    if w == 0 {
        TOUCHED[i / 512].fetch_or(1 << (i / 8 % 64), Ordering::Relaxed);
    }
    let hits = ((w >> shift) as u8).wrapping_add(1);
    word.store(
        (w & !(0xff << shift)) | (u64::from(hits) << shift),
        Ordering::Relaxed,
    );
}

/// True when the binary was built with coverage (scripts/fuzz.sh).
pub fn instrumented() -> bool {
    GUARDS.load(Ordering::Relaxed) > 0
}

/// AFL's hit-count classes: 1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+, one bit each.
fn class(hits: u8) -> u8 {
    match hits {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 4,
        4..=7 => 8,
        8..=15 => 16,
        16..=31 => 32,
        32..=127 => 64,
        _ => 128,
    }
}

/// The (edge, hit class) pairs seen over a whole run.
pub struct Seen {
    classes: Vec<u8>,
    pub edges: usize,
}

impl Seen {
    pub fn new() -> Seen {
        Seen {
            classes: vec![0; MAP_SIZE],
            edges: 0,
        }
    }

    /// Folds the last execution's map into what was seen and clears it; true when it
    /// showed an edge or a hit class never seen before.
    pub fn absorb(&mut self) -> bool {
        self.fold(false)
    }

    /// As `absorb`, but only a never-seen edge counts as new (hit counts aside): what a
    /// corpus minimisation keeps.
    pub fn absorb_edges(&mut self) -> bool {
        self.fold(true)
    }

    fn fold(&mut self, edges_only: bool) -> bool {
        let mut new = false;
        // Only the words the execution touched are visited. A reader thread still
        // finishing at worst counts into the next execution.
        take_touched(|w, taken| {
            for (k, hits) in taken.to_le_bytes().into_iter().enumerate() {
                let c = class(hits);
                let seen = &mut self.classes[w * 8 + k];
                if c != 0 && *seen & c == 0 {
                    if *seen == 0 {
                        self.edges += 1;
                        new = true;
                    }
                    *seen |= c;
                    new |= !edges_only;
                }
            }
        });
        new
    }

    /// Clears the map without looking at it (before a run whose coverage does not count).
    pub fn discard() {
        take_touched(|_, _| {});
    }
}
