//! The reader on crafted memory: jemalloc's arenas and lists as 5.3.0 lays them out, and
//! what a process can write into its own to fool or hold the reader.

use super::image::{image, layout, ARENA, EXTENTS, MEMORY, TOTAL};
use super::layout::VERSIONS;
use super::{read, JemallocHeap, Unmeasured};
use crate::heap::image::PAGE;

#[test]
fn an_arenas_kept_extents_are_counted_and_their_resident_pages() {
    let mut m = image(100, &[3, 5, 8]);
    m.absent = vec![MEMORY / PAGE, MEMORY / PAGE + 1];
    let h = read(&mut m, &layout(), 0).unwrap();
    assert_eq!(
        h,
        JemallocHeap {
            version: "5.3.0",
            arenas: 1,
            active_bytes: 100 * PAGE,
            dirty_bytes: 16 * PAGE,
            muzzy_bytes: 0,
            dirty_resident_bytes: 14 * PAGE,
            muzzy_resident_bytes: 0,
        }
    );
    assert_eq!(h.held_bytes(), 14 * PAGE);
    // No arena kept anything: all zero, measured.
    let h = read(&mut image(7, &[]), &layout(), 0).unwrap();
    assert_eq!((h.active_bytes, h.dirty_bytes), (7 * PAGE, 0));
}

#[test]
fn a_layout_that_does_not_fit_gives_no_figure() {
    // Another build's arena: the sets do not say what they hold.
    let mut m = image(100, &[3]);
    m.put(ARENA + VERSIONS[1].1.muzzy[0] + 16, 0);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::UnknownLayout));
    // No arenas, or more than jemalloc can have.
    for n in [0, 4096] {
        let mut m = image(1, &[]);
        m.put(TOTAL, n);
        assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::UnknownLayout));
    }
}

#[test]
fn crafted_lists_are_not_believed() {
    let o = VERSIONS[1].1;
    // The count says fewer pages than the extents hold.
    let mut m = image(1, &[3, 5]);
    m.put(ARENA + o.dirty[0] + 8, 4);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    // An extent of another arena, or of another state.
    let mut m = image(1, &[3, 5]);
    m.put(EXTENTS + 128 + o.e_bits, 1 << o.state_shift | 1);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    let mut m = image(1, &[3, 5]);
    m.put(EXTENTS + o.e_bits, 2 << o.state_shift);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    // A list that loops short of its head (e -> e) is cut at its page count.
    let mut m = image(1, &[3, 5]);
    m.put(EXTENTS + 128 + o.e_next, EXTENTS + 128);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    // A list that loops short of its head, with a claimed count of a TiB, is cut at the
    // extent budget, never followed for hours.
    let mut m = image(1, &[1, 1]);
    m.put(EXTENTS + 128 + o.e_next, EXTENTS + 128);
    m.put(ARENA + o.dirty[0] + 8, 1 << 28);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Budget));
    // An extent that wraps past the top of memory.
    let mut m = image(1, &[1]);
    m.put(EXTENTS + o.e_addr, !(PAGE - 1));
    assert!(read(&mut m, &layout(), 0).is_err());
}

/// One memory listed as two extents, or an extent over a shared mapping (which every
/// process that maps it would count: 21 forks made 21x their memory measured), is not
/// believed.
#[test]
fn extents_listed_twice_or_outside_private_anonymous_memory_are_not_believed() {
    let o = VERSIONS[1].1;
    let mut m = image(1, &[3, 3]);
    m.put(EXTENTS + 128 + o.e_addr, MEMORY);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    // Overlapping by one page is overlapping.
    let mut m = image(1, &[3, 3]);
    m.put(EXTENTS + 128 + o.e_addr, MEMORY + 2 * PAGE);
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Moving));
    let mut m = image(1, &[3, 3]);
    m.shared = vec![(MEMORY + 5 * PAGE, MEMORY + 6 * PAGE)];
    assert_eq!(read(&mut m, &layout(), 0), Err(Unmeasured::Implausible));
    // Side by side, in private memory: counted.
    let mut m = image(1, &[3, 3]);
    m.shared = vec![(MEMORY + 6 * PAGE, MEMORY + 7 * PAGE)];
    assert_eq!(read(&mut m, &layout(), 0).unwrap().dirty_bytes, 6 * PAGE);
}

#[test]
fn every_version_says_its_sets_apart() {
    // Each version's places are distinct and inside an arena of its size (DWARF: 29,496,
    // 78,952 and 80,704 bytes).
    let sizes = [29_496, 78_952, 80_704];
    for ((v, o), size) in VERSIONS.iter().zip(sizes) {
        let mut places: Vec<u64> = [o.nactive]
            .iter()
            .chain(o.dirty)
            .chain(o.muzzy)
            .copied()
            .collect();
        places.sort_unstable();
        places.dedup();
        assert_eq!(places.len(), 1 + o.dirty.len() + o.muzzy.len(), "{v}");
        assert!(places.iter().all(|&p| p + 24 <= size), "{v}");
    }
}
