//! The bounded reader on the real kernel: the test's own memory, read as the exporter
//! reads another process's (`/proc/PID/mem`, `pagemap`, smaps for the shortcuts).

use super::*;
use crate::parse::mountinfo::Remote;
use crate::parse::smaps;
use crate::source::Source;

const PAGE: u64 = 4096;

/// A private anonymous mapping of `pages`, the listed ones touched; unmapped when dropped.
struct Mapping(u64, usize);

impl Mapping {
    fn new(pages: usize, touched: &[usize]) -> Mapping {
        let len = pages * PAGE as usize;
        // SAFETY: a fresh private anonymous mapping, written only inside its length and
        // unmapped once, by Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        for &i in touched {
            // SAFETY: page i lies inside the mapping made above.
            unsafe { p.cast::<u8>().add(i * PAGE as usize).write_volatile(1) };
        }
        Mapping(p as u64, len)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made by `new`, unmapped once.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
    }
}

fn own_memory() -> (ProcessMemory, Vec<Vma>) {
    let pid = std::process::id();
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    let source = Source::new("/proc", "/sys");
    let m = ProcessMemory::open(&source, pid).expect("a process reads its own memory");
    (m, vmas)
}

#[test]
fn residency_from_the_mappings_equals_pagemap_and_costs_no_entry() {
    let map = Mapping::new(64, &[0, 3, 4, 40]);
    let (m, vmas) = own_memory();
    let end = map.0 + 64 * PAGE;
    let mut by_pagemap = m;
    let truth = by_pagemap.resident_bytes(map.0, end).unwrap();
    assert_eq!(truth, 4 * PAGE);
    let (m, _) = own_memory();
    let mut m = m.with_mappings(&vmas, Some(&Remote::default()));
    // The whole mapping: its Rss, not a single pagemap entry.
    m.budget(Budget {
        time: Duration::from_secs(60),
        pages: 0,
    });
    assert_eq!(m.resident_bytes(map.0, end).unwrap(), truth);
    // A part of it needs pagemap, and the budget of entries says no.
    assert_eq!(m.resident_bytes(map.0 + PAGE, end), Err(Fault::Budget));
    assert!(m.exhausted());
    // Every read fails for the rest of that reader's budget; a new budget reads again.
    let mut word = [0u8; 8];
    assert_eq!(m.read(map.0, &mut word), Err(Fault::Budget));
    m.budget(Budget {
        time: Duration::from_secs(60),
        pages: 64,
    });
    assert_eq!(m.resident_bytes(map.0 + PAGE, end).unwrap(), 3 * PAGE);
    assert_eq!(word, [0; 8]);
    m.read(map.0, &mut word).unwrap();
    assert_eq!(word[0], 1);
}

#[test]
fn an_untouched_reservation_is_free_to_look_at_and_time_is_checked_on_every_read() {
    // A terabyte reserved, no page touched: its Rss (0) says it whatever its size. A page
    // of no access on each side keeps the kernel from merging it with a neighbour (a
    // thread's arena heap is MAP_NORESERVE too).
    let len = (1u64 << 40) + 2 * PAGE;
    // SAFETY: a reservation that is never written, unmapped at the end of the test.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let (start, end) = (p as u64 + PAGE, p as u64 + len - PAGE);
    for guard in [p as u64, end] {
        // SAFETY: a page of the reservation above.
        let r =
            unsafe { libc::mprotect(guard as *mut libc::c_void, PAGE as usize, libc::PROT_NONE) };
        assert_eq!(r, 0);
    }
    let (m, vmas) = own_memory();
    let mut m = m.with_mappings(&vmas, Some(&Remote::default()));
    m.budget(Budget {
        time: Duration::from_secs(60),
        pages: 0,
    });
    assert_eq!(m.resident_bytes(start + PAGE, end), Ok(0));
    // A budget of no time: the first read fails, and says why.
    m.budget(Budget {
        time: Duration::ZERO,
        pages: u64::MAX,
    });
    let mut word = [0u8; 8];
    assert_eq!(m.read(vmas[0].start, &mut word), Err(Fault::Budget));
    assert!(m.exhausted());
    // SAFETY: the reservation made above, unmapped once.
    unsafe { libc::munmap(p, len as usize) };
}

/// Pages only read map the zero page: pagemap says present, smaps' Rss does not count them,
/// and they are no RAM of the process's. Only written pages are held, by pagemap and by
/// the shortcut through smaps alike.
#[test]
fn the_zero_page_is_not_resident() {
    let m = Mapping::new(64, &[0, 1, 2, 3, 10, 11]);
    for i in 20..40 {
        // SAFETY: page i lies inside the mapping; a read of never-written memory.
        let v = unsafe { (m.0 as *const u8).add(i * PAGE as usize).read_volatile() };
        assert_eq!(v, 0);
    }
    let (mut mem, vmas) = own_memory();
    let end = m.0 + 64 * PAGE;
    // Through pagemap (no shortcut).
    assert_eq!(mem.resident_bytes(m.0, end).unwrap(), 6 * PAGE);
    assert_eq!(
        mem.resident_bytes(m.0 + 20 * PAGE, m.0 + 40 * PAGE)
            .unwrap(),
        0
    );
    // Through smaps: the whole mapping, as its private pages say.
    let mut mem = mem.with_mappings(&vmas, Some(&Remote::default()));
    assert_eq!(mem.resident_bytes(m.0, end).unwrap(), 6 * PAGE);
    assert_eq!(
        mem.resident_bytes(m.0 + 20 * PAGE, m.0 + 40 * PAGE)
            .unwrap(),
        0
    );
}

/// What the kernel maps private and anonymous is a heap's ground; a shared anonymous
/// mapping, a file's mapping and the gap past a mapping are not.
#[test]
fn only_private_anonymous_mappings_are_a_heaps_ground() {
    let private = Mapping::new(16, &[0]);
    // SAFETY: a fresh shared anonymous mapping of 16 pages, unmapped below.
    let shared = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            16 * PAGE as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(shared, libc::MAP_FAILED);
    let shared = shared as u64;
    let (m, vmas) = own_memory();
    let exe = vmas.iter().find(|v| v.file_backed).unwrap();
    let m = m.with_mappings(&vmas, Some(&Remote::default()));
    let inside = m.private_anonymous(private.0, private.0 + 16 * PAGE);
    let partly = m.private_anonymous(private.0 + 8 * PAGE, private.0 + 17 * PAGE);
    let in_shared = m.private_anonymous(shared, shared + PAGE);
    let in_file = m.private_anonymous(exe.start, exe.start + PAGE);
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(shared as *mut libc::c_void, 16 * PAGE as usize) };
    assert!(inside);
    assert!(!in_shared && !in_file);
    // Past the mapping's end lies a gap, or another mapping the kernel did not merge.
    let next = vmas.iter().find(|v| v.start == private.0 + 16 * PAGE);
    if next.is_none_or(|v| v.file_backed || v.perms[3] != b'p') {
        assert!(!partly);
    }
}

/// A mapping of a file on a FUSE or network mount is never read (a page not in memory
/// would be asked of its server), nor any file's when the mounts cannot be told;
/// anonymous memory still is.
#[test]
fn a_mapping_of_a_remote_file_is_never_read() {
    let anon = Mapping::new(1, &[0]);
    let (m, vmas) = own_memory();
    let exe = vmas.iter().find(|v| v.file_backed).unwrap();
    let (dev, _) = exe.file_id.unwrap();
    let remote = Remote {
        mount_ids: vec![1],
        devices: vec![dev],
    };
    let mut m = m.with_mappings(&vmas, Some(&remote));
    let mut b = [0u8; 8];
    assert_eq!(m.read(exe.start, &mut b), Err(Fault::Remote));
    assert_eq!(
        m.read_many(&[(anon.0, 8), (exe.start, 8)], &mut [0u8; 16]),
        Err(Fault::Remote)
    );
    assert_eq!(m.read(anon.0, &mut b), Ok(()));
    let (m, vmas) = own_memory();
    let mut unknown = m.with_mappings(&vmas, None);
    assert_eq!(unknown.read(exe.start, &mut b), Err(Fault::Remote));
    let (m, vmas) = own_memory();
    let mut local = m.with_mappings(&vmas, Some(&Remote::default()));
    assert_eq!(local.read(exe.start, &mut b), Ok(()));
}
