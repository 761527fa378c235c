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

/// The test's own mounts as the exporter tells them (its mountinfo, the host's, the
/// kernel's shared memory).
fn mounts() -> Remote {
    Source::new("/proc", "/sys")
        .remote_mounts(std::process::id(), &mut crate::source::Buffer::default())
        .expect("a mountinfo of a few lines")
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
    let mut m = m.with_mappings(&vmas, Some(&mounts()));
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
    let mut m = m.with_mappings(&vmas, Some(&mounts()));
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
    let mut mem = mem.with_mappings(&vmas, Some(&mounts()));
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
    let m = m.with_mappings(&vmas, Some(&mounts()));
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
    let mut remote = mounts();
    remote.local_devices.retain(|&d| d != dev);
    remote.devices.push(dev);
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
    // A mount no mountinfo lists (detached with umount -l): not read either.
    let (m, vmas) = own_memory();
    let mut unlisted = m.with_mappings(&vmas, Some(&Remote::default()));
    assert_eq!(unlisted.read(exe.start, &mut b), Err(Fault::Remote));
    assert_eq!(unlisted.read(anon.0, &mut b), Ok(()));
    // Mounts that could not be read at all (the process gone or denied): unreadable.
    let (m, vmas) = own_memory();
    let denied = Remote {
        unreadable: true,
        ..Remote::default()
    };
    let mut denied = m.with_mappings(&vmas, Some(&denied));
    assert_eq!(denied.read(exe.start, &mut b), Err(Fault::Unreadable));
    let (m, vmas) = own_memory();
    let mut local = m.with_mappings(&vmas, Some(&mounts()));
    assert_eq!(local.read(exe.start, &mut b), Ok(()));
}

/// A memfd's pages (the kernel's shared memory, mounted nowhere) are read: its device is
/// the one the exporter tells from a memfd of its own.
#[test]
fn a_memfd_mapping_is_read_though_no_mountinfo_lists_its_device() {
    use std::os::fd::AsRawFd;
    let fd =
        nix::sys::memfd::memfd_create("membloat-test", nix::sys::memfd::MFdFlags::empty()).unwrap();
    nix::unistd::ftruncate(&fd, PAGE as i64).unwrap();
    // SAFETY: a fresh shared mapping of the memfd's one page, written inside it and
    // unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the first byte of the page mapped above.
    unsafe { p.cast::<u8>().write_volatile(7) };
    let (m, vmas) = own_memory();
    let v = vmas.iter().find(|v| v.start == p as u64).unwrap();
    let (dev, _) = v.file_id.unwrap();
    assert_eq!(crate::source::own::shared_memory_device(), Some(dev));
    let mut m = m.with_mappings(&vmas, Some(&mounts()));
    let mut b = [0u8; 1];
    let read = m.read(p as u64, &mut b);
    // SAFETY: the mapping made above, unmapped once.
    unsafe { libc::munmap(p, PAGE as usize) };
    assert_eq!((read, b[0]), (Ok(()), 7));
}
