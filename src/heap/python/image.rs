//! A crafted CPython process for tests and the fuzzer: 3.10's static variables, an arena
//! table and 1 MiB arenas whose pools are in use or empty as given. Not used by the
//! exporter itself.

use super::layout::{Layout, State, ARENA_OBJECT, LARGE};
use crate::heap::image::Image;

pub(crate) const ARENAS: u64 = 0x10_0000;
pub(crate) const MAXARENAS: u64 = 0x10_0010;
pub(crate) const NARENAS: u64 = 0x10_0020;
pub(crate) const TABLE: u64 = 0x20_0000;
/// The first arena; each next one 2 MiB further.
pub(crate) const MEMORY: u64 = 0x1000_0000;
/// Records in the table that hold no arena, after the arenas'.
pub(crate) const SPARE_RECORDS: u64 = 2;

/// 3.10's layout, its variables where [`image`] puts them.
pub fn layout() -> Layout {
    Layout::at(
        None,
        State::Statics {
            arenas: ARENAS,
            maxarenas: MAXARENAS,
            narenas: NARENAS,
        },
        true,
    )
}

/// Where arena `i` starts.
pub fn arena_at(i: usize) -> u64 {
    MEMORY + i as u64 * 2 * LARGE.arena
}

/// Where pool `k` of arena `i` starts.
pub(crate) fn pool_at(i: usize, k: usize) -> u64 {
    arena_at(i) + k as u64 * LARGE.pool
}

/// One arena per item of `arenas`, each carved pool `Some((size class, blocks in use))`,
/// or `None` for one emptied; the rest of the arena never carved.
pub fn image(arenas: &[&[Option<(u64, u64)>]]) -> Image {
    let mut m = Image::default();
    m.map(ARENAS, 0x1000);
    let records = arenas.len() as u64 + SPARE_RECORDS;
    m.map(TABLE, records * ARENA_OBJECT);
    m.put(ARENAS, TABLE);
    m.put(MAXARENAS, records);
    m.put(NARENAS, arenas.len() as u64);
    for (i, pools) in arenas.iter().enumerate() {
        let address = arena_at(i);
        m.map(address, LARGE.arena);
        let record = TABLE + i as u64 * ARENA_OBJECT;
        let carved = pools.len() as u64;
        let empty = pools.iter().filter(|p| p.is_none()).count() as u64;
        m.put(record, address);
        m.put(record + 8, address + carved * LARGE.pool);
        m.put(
            record + 16,
            (LARGE.pools() - carved + empty) | LARGE.pools() << 32,
        );
        for (k, pool) in pools.iter().enumerate() {
            let at = pool_at(i, k);
            let (class, count) = pool.unwrap_or((0, 0));
            m.put(at, count);
            m.put(at + 32, i as u64 | class << 32);
        }
    }
    m
}
