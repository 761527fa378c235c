//! The reader on crafted memory: CPython 3.10's arenas and pools, and what a process can
//! write into its own to fool the reader.

use super::image::{arena_at, image, layout, pool_at, MAXARENAS, NARENAS, TABLE};
use super::layout::{Layout, State, LARGE};
use super::read::read;
use super::{PythonHeap, Unmeasured};
use crate::heap::image::PAGE;

/// Blocks of size class `c` a 16 KiB pool holds.
fn blocks(c: u64) -> u64 {
    (LARGE.pool - 48) / ((c + 1) * 16)
}

#[test]
fn arenas_pools_and_free_blocks_are_counted_as_debugmallocstats_counts_them() {
    let a0: &[Option<(u64, u64)>] = &[Some((0, 10)), None, Some((31, 3))];
    let a1: &[Option<(u64, u64)>] = &[Some((5, blocks(5)))];
    let mut m = image(&[a0, a1]);
    let h = read(&mut m, &layout(), 0).unwrap();
    let available = (blocks(0) - 10) * 16 + (blocks(31) - 3) * 512;
    assert_eq!(
        h,
        PythonHeap {
            version: "3.10",
            arenas: 2,
            arena_bytes: 1 << 20,
            pool_bytes: 16 << 10,
            used_pools: 3,
            // Arena 0: 61 never carved and one emptied; arena 1: 63 never carved.
            unused_pools: 62 + 63,
            allocated_bytes: 10 * 16 + 3 * 512 + blocks(5) * 96,
            available_bytes: available,
            // Every page is resident in the image: a used pool's free blocks are resident
            // as far as its pages beyond the header and used blocks go.
            unused_resident_bytes: available + 125 * LARGE.pool,
        }
    );
    assert_eq!(h.unused_bytes(), available + 125 * LARGE.pool);
    assert_eq!(h.arenas_bytes(), 2 << 20);
}

#[test]
fn pages_not_resident_are_not_counted_as_resident_unused() {
    let a0: &[Option<(u64, u64)>] = &[Some((0, 1)), None];
    let mut m = image(&[a0]);
    // The emptied pool's four pages, and the last page of the used one.
    let emptied = pool_at(0, 1) / PAGE;
    m.absent = (emptied..emptied + 4)
        .chain([pool_at(0, 0) / PAGE + 3])
        .collect();
    let all = read(&mut image(&[a0]), &layout(), 0).unwrap();
    let h = read(&mut m, &layout(), 0).unwrap();
    assert_eq!(h.unused_bytes(), all.unused_bytes());
    assert_eq!(
        all.unused_resident_bytes - h.unused_resident_bytes,
        LARGE.pool + PAGE
    );
}

#[test]
fn an_interpreter_with_no_arena_is_measured_at_zero() {
    // PYTHONMALLOC=malloc: the table was never made.
    let mut m = image(&[]);
    m.put(MAXARENAS, 0);
    m.put(super::image::ARENAS, 0);
    let h = read(&mut m, &layout(), 0).unwrap();
    assert_eq!((h.arenas, h.unused_bytes()), (0, 0));
}

#[test]
fn a_crafted_or_foreign_table_is_not_believed() {
    let a0: &[Option<(u64, u64)>] = &[Some((3, 7)), None];
    let layout = layout();
    let case = |change: &dyn Fn(&mut crate::heap::image::Image)| {
        let mut m = image(&[a0]);
        change(&mut m);
        read(&mut m, &layout, 0)
    };
    let unknown = Err(Unmeasured::UnknownLayout);
    // A pool that names another arena, a size class past the last, more blocks than fit.
    assert_eq!(case(&|m| m.put(pool_at(0, 0) + 32, 1 | 3 << 32)), unknown);
    assert_eq!(case(&|m| m.put(pool_at(0, 0) + 32, 32 << 32)), unknown);
    assert_eq!(case(&|m| m.put(pool_at(0, 0), blocks(3) + 1)), unknown);
    // Free pools that do not add up to the arena's count, or pools of another size.
    assert_eq!(case(&|m| m.put(TABLE + 16, 10 | 64 << 32)), unknown);
    assert_eq!(case(&|m| m.put(TABLE + 16, 62 | 256 << 32)), unknown);
    // Its carved pools past its end, or not on a pool's boundary.
    assert_eq!(
        case(&|m| m.put(TABLE + 8, arena_at(0) + (2 << 20))),
        unknown
    );
    assert_eq!(case(&|m| m.put(TABLE + 8, arena_at(0) + 100)), unknown);
    // An arena at an address nothing maps.
    assert_eq!(case(&|m| m.put(TABLE, 0x7000_0000_0000)), unknown);
    // More arenas counted than the table holds, or a table larger than any.
    assert_eq!(case(&|m| m.put(NARENAS, 2)), unknown);
    assert_eq!(case(&|m| m.put(MAXARENAS, 1 << 30)), unknown);
}

#[test]
fn versions_without_a_layout_or_without_symbols_are_named() {
    let mut m = image(&[]);
    let version = 0x30_0000;
    m.map(version, 0x1000);
    let at = |v: u64, state: State| {
        let mut m = m.clone();
        m.put(version, v);
        read(&mut m, &Layout::at(Some(version), state, false), 0)
    };
    let runtime = State::Runtime { runtime: 0x40_0000 };
    // 3.11 stripped: its state was in static variables.
    assert_eq!(at(0x030B_07F0, runtime), Err(Unmeasured::Stripped));
    // 3.14, and a version that is not 3.
    assert_eq!(at(0x030E_00F0, runtime), Err(Unmeasured::UnknownVersion));
    assert_eq!(at(0x0207_12F0, runtime), Err(Unmeasured::UnknownVersion));
    // 3.12's statics cannot be: it has none.
    assert_eq!(
        at(0x030C_01F0, layout().state),
        Err(Unmeasured::UnknownVersion)
    );
}
