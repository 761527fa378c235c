//! Edge coverage from LLVM's SanitizerCoverage (`trace-pc-guard` at level 3, which splits
//! critical edges so each guard is an edge), which stable rustc adds with
//! `-C passes=sancov-module` (scripts/fuzz.sh). Each guard gets its own slot in a 256 KiB
//! map of hit counts, as libFuzzer does; no "previous block" is kept, so threads running
//! the exporter's code at once (its reader pools) cannot invent edges by interleaving.
//!
//! The map is plain bytes shared without synchronisation, as in AFL: a lost increment
//! costs one count, never memory safety, since every index is below the map's size.

use std::sync::atomic::{AtomicU32, Ordering};

pub const MAP_SIZE: usize = 1 << 18;

/// Aligned for the word-wise scan in `Seen::absorb`.
#[repr(C, align(8))]
struct Map([u8; MAP_SIZE]);

static mut MAP: Map = Map([0; MAP_SIZE]);
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
    let map = &raw mut MAP.0 as *mut u8;
    *map.add(i) = (*map.add(i)).wrapping_add(1);
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
        // SAFETY: the map is only ever indexed within its size, and a u64 view of it is
        // aligned (the static is read whole words at a time, never past its end);
        // concurrent writers (reader threads still finishing) at worst lose a count.
        // Only the slots handed out are scanned.
        let used = (GUARDS.load(Ordering::Relaxed) as usize + 1).min(MAP_SIZE);
        let words =
            unsafe { std::slice::from_raw_parts_mut(&raw mut MAP as *mut u64, used.div_ceil(8)) };
        // Most of the map is zero: whole words are skipped, so this costs little even
        // though the fuzzer's own code is instrumented too.
        for (w, word) in words.iter_mut().enumerate() {
            if *word == 0 {
                continue;
            }
            for (k, hits) in word.to_le_bytes().into_iter().enumerate() {
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
            *word = 0;
        }
        new
    }

    /// Clears the map without looking at it (before a run whose coverage does not count).
    pub fn discard() {
        // SAFETY: as in `absorb`.
        unsafe { std::ptr::write_bytes(&raw mut MAP.0 as *mut u8, 0, MAP_SIZE) };
    }
}
