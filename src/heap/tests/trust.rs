//! What a process controls in its own memory, against the rules that keep it from
//! misleading the walk: overlapping free chunks, and a rewritten libc version banner.

use super::super::glibc::{Layout, PREV_INUSE};
use super::super::image::{Builder, Image, MAIN_ARENA};
use super::super::target::Fault;
use super::super::{measure, process};
use super::KIB;

/// Chunks that glibc's every rule accepts one by one (each in its arena's heap, linked
/// both ways, its footer where its size says) but that overlap: counted, they would give
/// one heap's pages many times over. Laid apart, the same chunks are measured.
#[test]
fn overlapping_free_chunks_give_no_number() {
    let layout = Layout::of(36).unwrap();
    for (stride, overlapping) in [(0x40u64, true), (0xc000, false)] {
        let mut b = Builder::new(layout, 256 * KIB);
        b.used(0, 0x290);
        let room = b.used(0, 128 * KIB);
        b.used(0, 0x100);
        let (mut m, bounds) = b.finish();
        let before = measure(&mut m, &layout, &bounds, 1000, 0).unwrap();
        let (size, bin) = (0x8000u64, MAIN_ARENA + 0x60);
        let chunk = |i: u64| room + 0x100 + i * stride;
        for i in 0..2 {
            let c = chunk(i);
            m.put(c + 8, size | PREV_INUSE);
            m.put(c + 16, if i == 0 { bin } else { chunk(i - 1) });
            m.put(c + 24, if i == 1 { bin } else { chunk(i + 1) });
            m.put(c + size, size);
            m.put(c + size + 8, 0);
        }
        m.put(bin + 16, chunk(1));
        m.put(bin + 24, chunk(0));
        let r = measure(&mut m, &layout, &bounds, 1000, 0);
        if overlapping {
            assert_eq!(r, Err(Fault::Inconsistent));
        } else {
            let r = r.unwrap();
            assert_eq!(r.free_bytes(), before.free_bytes() + 2 * size);
        }
    }
}

/// Processes mapping one libc file: one that rewrote its own copy of the banner reads as
/// it says, and changes no other process's reading, whatever place it put its banner at.
#[test]
fn a_rewritten_libc_banner_misleads_no_other_process() {
    use crate::parse::smaps::Vma;
    let base = 0x7f00_0000_0000u64;
    let vma = Vma {
        start: base,
        end: base + 0x4000,
        perms: *b"r--p",
        file_id: Some((0xfe01, 4242_4242)),
        ..Vma::default()
    };
    let process = |at: u64, banner: &[u8]| {
        let mut m = Image::default();
        m.map(base, 0x4000);
        for (i, b) in banner.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            m.put(base + at + 8 * i as u64, u64::from_le_bytes(w));
        }
        m
    };
    let mut crafted = process(0x2000, b"GNU C Library release version 2.99.\0");
    let mut honest = process(0x1000, b"GNU C Library release version 2.36.\0");
    let mut same_place = process(0x2000, b"GNU C Library release version 2.36.\0");
    assert_eq!(process::libc_version(&mut crafted, &[&vma]), Some(99));
    assert_eq!(process::libc_version(&mut honest, &[&vma]), Some(36));
    assert_eq!(process::libc_version(&mut same_place, &[&vma]), Some(36));
    assert_eq!(process::libc_version(&mut crafted, &[&vma]), Some(99));
}
