//! The reader on crafted memory: mimalloc 2.3.2's arena and segment, and what a process
//! can write into its own to fool or hold the reader.

use super::image::{
    image, image_v3, symbols, symbols_v3, Span, ARENA, COOKIE, COUNT, META, START, STATS,
    V3_ARENA, V3_SLICES, VERSION,
};
use super::layout::{version_of, SEGMENT, SLICE, VERSIONS};
use super::{read, Unmeasured};
use crate::heap::image::PAGE;

const LIVE: Span = Span {
    slices: 2,
    block_size: 64,
    used: 3,
};
const EMPTY: Span = Span {
    slices: 1,
    block_size: 64,
    used: 0,
};

#[test]
fn pages_in_use_and_the_header_are_kept_an_empty_page_is_held() {
    let mut m = image(&[LIVE, EMPTY, LIVE]);
    // Two pages of the second live span are not resident, nor one of the free span.
    m.absent = vec![(START + 4 * SLICE) / PAGE, (START + 4 * SLICE) / PAGE + 1];
    m.absent.push((START + 10 * SLICE) / PAGE);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.version, h.arenas, h.segments), ("2.3.2", 1, 1));
    assert_eq!(h.reserved_bytes, 2 * SEGMENT);
    assert_eq!(h.resident_bytes, 2 * SEGMENT - 3 * PAGE);
    // The header (one slice) and the two live spans (two slices each).
    assert_eq!(h.in_use_bytes, 5 * SLICE - 2 * PAGE);
    // The empty page between them; the free rest was never scheduled for purging, nor
    // is the arena's second block: stranded, not held.
    assert_eq!(h.held(), SLICE);
    assert_eq!(h.pending_purge_bytes, 0);
    assert_eq!(h.stranded_bytes(), 2 * SEGMENT - 6 * SLICE - PAGE);
    // mimalloc's own count, as its statistics keep it.
    assert_eq!(h.committed_bytes, Some(2 * SEGMENT));
}

#[test]
fn committed_is_mimallocs_own_count_where_its_statistics_are() {
    let o = VERSIONS[2].2;
    let mut m = image(&[LIVE]);
    m.put(STATS + o.stats_committed, 3 * SEGMENT);
    assert_eq!(read(&mut m, &symbols(), 0).unwrap().committed_bytes, Some(3 * SEGMENT));
    // No statistics symbol: no committed figure, the rest as before.
    let mut without = symbols();
    without.stats = 0;
    let h = read(&mut m, &without, 0).unwrap();
    assert_eq!((h.committed_bytes, h.held()), (None, 0));
    // A count beyond the address space is not a count: the layout is not this one.
    m.put(STATS + o.stats_committed, u64::MAX - 4095);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Moving));
}

#[test]
fn an_empty_page_purges_the_free_spans_it_joins_and_a_schedule_what_it_names() {
    let o = VERSIONS[2].2;
    // The empty page beside the free rest: the whole rest is purged with it.
    let mut m = image(&[LIVE, EMPTY]);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!(h.held(), SEGMENT - 3 * SLICE);
    assert_eq!(h.pending_purge_bytes, 0);
    // Of which the slices its segment scheduled are pending, once a purge is due.
    m.put(START + o.purge_mask, 0b1_1000_0000);
    m.put(START + o.purge_expire, 1);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.held(), h.pending_purge_bytes), (SEGMENT - 3 * SLICE, 2 * SLICE));
    // No empty page: only the slices its segment scheduled (slices 3 and 4, bits of the
    // purge mask) once a purge is due.
    let mut m = image(&[LIVE]);
    m.put(START + o.purge_mask, 0b11000);
    assert_eq!(read(&mut m, &symbols(), 0).unwrap().held(), 0);
    m.put(START + o.purge_expire, 1);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.held(), h.pending_purge_bytes), (2 * SLICE, 2 * SLICE));
    // The arena's free block, scheduled for purging.
    let mut m = image(&[LIVE]);
    m.map(0x30_0000, 8);
    m.put(0x30_0000, 0b10);
    m.put(ARENA + o.arena_purge, 0x30_0000);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.held(), h.pending_purge_bytes), (SEGMENT, SEGMENT));
    // A segment with no page in use is given back whole, its header too; what it
    // scheduled of it is pending.
    let mut m = image(&[EMPTY]);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.held(), h.pending_purge_bytes), (SEGMENT, 0));
    m.put(START + o.purge_mask, 0b1100);
    m.put(START + o.purge_expire, 1);
    let h = read(&mut m, &symbols(), 0).unwrap();
    assert_eq!((h.held(), h.pending_purge_bytes), (SEGMENT, 2 * SLICE));
}

#[test]
fn the_version_is_read_from_mi_versions_code() {
    let code = |b: &[u8]| {
        let mut c = [0u8; 10];
        c[..b.len()].copy_from_slice(b);
        c
    };
    assert_eq!(version_of(&code(&[0xb8, 0xd9, 0, 0, 0, 0xc3])), Some(217));
    let endbr = [0xf3, 0x0f, 0x1e, 0xfa, 0xb8, 0x4e, 0x4f, 0, 0, 0xc3];
    assert_eq!(version_of(&code(&endbr)), Some(20302));
    // Anything else is no version: a call, a load from memory.
    assert_eq!(version_of(&code(&[0xe8, 0, 0, 0, 0, 0xc3])), None);
    assert_eq!(version_of(&code(&[0xb8, 1, 0, 0, 0, 0x90])), None);
    // mimalloc 3.1.5 (30105) or 2.0.9 (209): no layout; 3.3.2 (30302) in a binary
    // without mimalloc 3's symbol: not its layout.
    for (v, why) in [
        (30105u32, Unmeasured::UnknownVersion),
        (209, Unmeasured::UnknownVersion),
        (30302, Unmeasured::UnknownLayout),
    ] {
        let mut m = image(&[]);
        let b = v.to_le_bytes();
        m.regions[0].1[..6].copy_from_slice(&[0xb8, b[0], b[1], b[2], b[3], 0xc3]);
        assert_eq!(read(&mut m, &symbols(), 0), Err(why), "{v}");
    }
    let _ = VERSION;
}

#[test]
fn crafted_segments_are_not_believed() {
    let o = VERSIONS[2].2;
    // A header whose cookie is not its address's.
    let mut m = image(&[LIVE]);
    m.put(START + o.cookie, START ^ COOKIE ^ 1);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Moving));
    // Spans that do not tile the segment: a span of no slices.
    let mut m = image(&[LIVE]);
    m.put(START + o.slices + o.page_bytes, 0);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Moving));
    // Sizes that disagree, or more entries than slices.
    for (off, v) in [(o.segment_size, SEGMENT + SLICE), (o.slice_entries, 513), (o.info_slices, 0)] {
        let mut m = image(&[LIVE]);
        m.put(START + off, v);
        assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::UnknownLayout), "{off}");
    }
    // A segment larger than the arena's blocks in use.
    let mut m = image(&[LIVE]);
    m.put(START + o.segment_size, 2 * SEGMENT);
    m.put(START + o.segment_slices, 2 * SEGMENT / SLICE);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Moving));
    // An arena whose bitmap is not of its blocks, or more arenas than mimalloc has.
    let mut m = image(&[LIVE]);
    m.put(ARENA + o.arena_start + 16, 5);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::UnknownLayout));
    let mut m = image(&[LIVE]);
    m.put(COUNT, 133);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::UnknownLayout));
    // An arena in a shared mapping: not the process's own memory.
    let mut m = image(&[LIVE]);
    m.shared = vec![(START, START + PAGE)];
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Implausible));
}

#[test]
fn an_arena_listed_twice_is_counted_once_or_not_believed() {
    let mut m = image(&[LIVE]);
    let super::image::ARENAS = super::image::ARENAS else {
        unreachable!()
    };
    m.put(COUNT, 2);
    m.put(super::image::ARENAS + 8, ARENA);
    assert_eq!(read(&mut m, &symbols(), 0), Err(Unmeasured::Moving));
}

const FREE: Span = Span {
    slices: 3,
    block_size: 0,
    used: 0,
};

#[test]
fn mimalloc_3_keeps_its_metadata_and_live_pages_and_gives_back_empty_pages_and_purges() {
    // Metadata (slice 0), a live page (1-2), an empty one (3), free slices 4-6 of which 5
    // is scheduled for purging, a live page (7-8); the rest free, never scheduled.
    let mut m = image_v3(&[LIVE, EMPTY, FREE, LIVE], &[5]);
    m.absent = vec![(V3_ARENA + 7 * SLICE) / PAGE];
    let h = read(&mut m, &symbols_v3(), 0).unwrap();
    assert_eq!((h.version, h.arenas), ("3.3.2", 1));
    assert_eq!(h.reserved_bytes, V3_SLICES * SLICE);
    assert_eq!(h.resident_bytes, V3_SLICES * SLICE - PAGE);
    assert_eq!(h.in_use_bytes, 5 * SLICE - PAGE);
    assert_eq!(h.held(), 2 * SLICE);
    assert_eq!(h.pending_purge_bytes, SLICE);
    assert_eq!(h.stranded_bytes(), (V3_SLICES - 7) * SLICE);
    // mimalloc 3's count is its sub-process's statistics'.
    assert_eq!(h.committed_bytes, Some(0));
}

#[test]
fn mimalloc_3s_crafted_pages_and_arenas_are_not_believed() {
    let o = super::layout::V3_VERSIONS[0].2;
    // A page whose metadata names another arena, or another place, or runs past the end.
    for (off, v) in [
        (o.page_memid, V3_ARENA + SLICE),
        (o.page_memid + 8, 2 | 2 << 32),
        (o.page_memid + 8, 1 | (V3_SLICES << 32)),
        (o.page_block_size, 0),
    ] {
        let mut m = image_v3(&[LIVE], &[]);
        m.put(META + o.page_bytes + off, v);
        assert_eq!(read(&mut m, &symbols_v3(), 0), Err(Unmeasured::Moving), "{off}");
    }
    // An arena of no slices, metadata as large as it, or a bitmap too short for it.
    for (at, v) in [
        (V3_ARENA + o.slice_count, 0),
        (V3_ARENA + o.info_slices, V3_SLICES),
        (super::image::PAGES, 0),
    ] {
        let mut m = image_v3(&[LIVE], &[]);
        m.put(at, v);
        assert_eq!(read(&mut m, &symbols_v3(), 0), Err(Unmeasured::UnknownLayout));
    }
    // No sub-process symbol: mimalloc 3's code in a binary read as 2's.
    let mut m = image_v3(&[LIVE], &[]);
    let mut no_subproc = symbols_v3();
    no_subproc.subproc = 0;
    assert_eq!(read(&mut m, &no_subproc, 0), Err(Unmeasured::UnknownLayout));
}
