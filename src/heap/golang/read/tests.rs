//! A Go runtime's structures crafted in memory (`golang::image`): the page allocator's
//! ranges and bitmaps, the Ps' page caches, and `heapFree` agreeing with them, honestly or
//! by a program that repeats a range or a P to have its pages counted twice (and writes
//! the total it wants).

use super::super::image::{layout, process, Caches};
use super::*;

#[test]
fn the_free_heap_is_what_the_bitmaps_and_caches_say() {
    for caches in [Caches::Apart, Caches::OneBlock] {
        let mut m = process(1, 2, caches);
        let h = read(&mut m, &layout(), 0).unwrap();
        assert_eq!(h.free_bytes, 16 * GO_PAGE, "{caches:?}");
        assert_eq!(h.free_resident_bytes, 16 * GO_PAGE, "{caches:?}");
    }
}

#[test]
fn a_range_a_p_or_a_page_given_twice_is_not_counted_twice() {
    let l = layout();
    for (ranges, caches) in [
        (2, Caches::Apart),
        (1, Caches::SameP),
        (1, Caches::SamePages),
    ] {
        let got = read(&mut process(ranges, 2, caches), &l, 0);
        assert_eq!(got, Err(Unmeasured::Moving), "{ranges} ranges, {caches:?}");
    }
}
