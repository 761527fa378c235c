//! Finding the heap's range: the symbol hashes, and the learnt places believed only
//! where a JVM's mappings tile the range they lead to.

use super::{find_with, gnu_hash, Learnt, Places, Reserved};
use crate::heap::image::Image;
use crate::parse::smaps::{Library, Vma};

const LIB: u64 = 0x7f00_0000_0000;
const HEAP: u64 = 0x8_0000_0000;

/// A JVM whose libjvm (no symbols: its table cannot be read) is loaded at `LIB`, whose
/// collected heap object at `LIB + 0x1000` says its range starts at `HEAP` and is
/// `words` long, and whose mappings reserve `[HEAP, HEAP + mapped)`.
fn jvm(words: u64, mapped: u64) -> (Image, Vec<Vma>) {
    let mut t = Image::default();
    t.map(LIB, 0x3000);
    t.put(LIB + 0x1000, LIB + 0x2000); // Universe::_collectedHeap
    t.put(LIB + 0x2000 + 0x10, HEAP); // _reserved._start
    t.put(LIB + 0x2000 + 0x18, words); // _reserved._word_size
    let lib = Vma {
        start: LIB,
        end: LIB + 0x3000,
        file_id: Some((8, 42)),
        library: Some(Library::JvmLibrary),
        ..Vma::default()
    };
    let half = |start, end| Vma {
        start,
        end,
        anonymous: true,
        ..Vma::default()
    };
    let mid = HEAP + mapped / 2;
    (t, vec![half(HEAP, mid), half(mid, HEAP + mapped), lib])
}

fn places() -> Places {
    Places {
        heap_static: 0x1000,
        reserved: 0x10,
        start_at: 0,
        words_at: 8,
    }
}

#[test]
fn learnt_places_are_believed_only_where_the_mappings_tile_their_range() {
    let learnt = Learnt::new(4);
    learnt.put((8, 42, 0, 0), places());
    // The range the hint leads to is mapped end to end: believed.
    let (mut t, vmas) = jvm(1 << 20, 8 << 20);
    let want = Reserved {
        start: HEAP,
        end: HEAP + (8 << 20),
    };
    assert_eq!(find_with(&mut t, &vmas, &learnt), Some(want));
    // A hint (taught by another process of the same libjvm) that leads past the
    // mappings is not believed; the table read in its place finds nothing here.
    let (mut t, vmas) = jvm(1 << 30, 8 << 20);
    assert_eq!(find_with(&mut t, &vmas, &learnt), None);
    // A gap inside the range fails it as well.
    let (mut t, mut vmas) = jvm(1 << 20, 8 << 20);
    vmas[1].start += 0x1000;
    assert_eq!(find_with(&mut t, &vmas, &learnt), None);
    // Without a hint, nothing is taken on trust either.
    let (mut t, vmas) = jvm(1 << 20, 8 << 20);
    assert_eq!(find_with(&mut t, &vmas, &Learnt::new(4)), None);
}

#[test]
fn sysv_hash_is_the_gabis() {
    // The gABI algorithm; that it finds real symbols is tests/jvm.rs (JDK 11 has only
    // this table).
    assert_eq!(super::sysv_hash(b""), 0);
    assert_eq!(super::sysv_hash(b"printf"), 0x0779_05a6);
    assert_eq!(super::sysv_hash(b"exit"), 0x0006_cf04);
    assert_eq!(super::sysv_hash(b"syscall"), 0x0b09_985c);
}

#[test]
fn gnu_hash_is_glibcs() {
    // Values from the ELF gABI's GNU hash examples (dl_new_hash).
    assert_eq!(gnu_hash(b""), 0x0000_1505);
    assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
    assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
    assert_eq!(gnu_hash(b"syscall"), 0xbac2_12a0);
}
