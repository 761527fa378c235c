//! Reading and classifying on temporary trees and on the real /proc: one read per file,
//! growing and cut buffers, the reasons a read fails.

use super::*;

#[test]
fn missing_file_is_gone_and_its_reason_depends_on_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let source = Source::new(dir.path(), dir.path());
    let err = source
        .read_pid(1, "status", &mut Buffer::default())
        .unwrap_err();
    assert!(matches!(err, ReadError::Gone(_)));
    assert_eq!(err.process_reason(), Reason::Vanished);
    assert_eq!(err.system_reason(), Reason::Unsupported);
}

/// A kernel booted `psi=0` may show `/proc/pressure/memory` and refuse to read it
/// (EOPNOTSUPP): the kernel lacks the source, as when the file is missing. Other I/O
/// errors stay `io`.
#[test]
fn a_file_the_kernel_refuses_with_eopnotsupp_is_unsupported() {
    let refused = ReadError::new(
        Path::new("/proc/pressure/memory"),
        std::io::Error::from_raw_os_error(95),
    );
    assert_eq!(refused.system_reason(), Reason::Unsupported);
    let eio = ReadError::new(
        Path::new("/proc/meminfo"),
        std::io::Error::from_raw_os_error(5),
    );
    assert_eq!(eio.system_reason(), Reason::Io);
}

#[test]
fn read_and_parse_classifies_once_for_processes_and_for_the_system() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("7")).unwrap();
    std::fs::write(dir.path().join("7/oom_score"), "666\n").unwrap();
    std::fs::write(dir.path().join("meminfo"), "garbage\n").unwrap();
    let source = Source::new(dir.path(), dir.path());
    let mut buf = Buffer::default();
    let number = crate::parse::parse_u64;
    assert_eq!(source.parse_pid(7, "oom_score", &mut buf, number), Ok(666));
    // The same fact, a missing file, read two ways: the process exited; the kernel
    // lacks the file.
    assert_eq!(
        source.parse_pid(8, "oom_score", &mut buf, number),
        Err(Reason::Vanished)
    );
    assert_eq!(
        source.parse_proc("pressure/memory", &mut buf, number),
        Err(Reason::Unsupported)
    );
    assert_eq!(
        source.parse_proc("meminfo", &mut buf, number),
        Err(Reason::Malformed)
    );
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("comm"), b"a\xffb\n").unwrap();
    let source = Source::new(dir.path(), dir.path());
    let mut buf = Buffer::default();
    assert_eq!(source.read_proc("comm", &mut buf).unwrap(), "a\u{fffd}b\n");
    // The buffer is whole again for the next file.
    std::fs::write(dir.path().join("x"), b"x\n").unwrap();
    assert_eq!(source.read_proc("x", &mut buf).unwrap(), "x\n");
}

#[test]
fn files_larger_than_the_buffer_grow_it_and_large_ones_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("7")).unwrap();
    let big: String = (0..30_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("7/smaps"), &big).unwrap();
    std::fs::write(dir.path().join("7/status"), &big).unwrap();
    let source = Source::new(dir.path(), dir.path());
    let mut buf = Buffer::default();
    // smaps comes a line at a time, in pieces smaller than the file.
    let mut lines = String::new();
    let whole = source.read_smaps(7, &mut buf, |l| {
        lines.push_str(l);
        lines.push('\n');
    });
    assert!(whole.unwrap());
    assert_eq!(lines, big);
    assert!(!buf.was_cut());
    // A file read in one go still grows the buffer when a read fills it.
    assert_eq!(source.read_pid(7, "status", &mut buf).unwrap(), big);
    let huge = "y".repeat(MAX_FILE_BYTES + 10);
    std::fs::write(dir.path().join("7/status"), &huge).unwrap();
    assert_eq!(
        source.read_pid(7, "status", &mut buf).unwrap().len(),
        MAX_FILE_BYTES
    );
    assert!(buf.was_cut());
    buf.shrink();
    assert_eq!(
        source.read_pid(7, "status", &mut buf).unwrap().len(),
        MAX_FILE_BYTES
    );
}

/// smaps read in pieces: a line across two pieces comes whole, a line longer than a piece
/// comes in pieces, text without a last newline comes, and a file past the limit is cut.
#[test]
fn smaps_comes_a_line_at_a_time_whatever_the_pieces() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("7")).unwrap();
    let source = Source::new(dir.path(), dir.path());
    let mut buf = Buffer::default();
    let mut read = |text: &str| {
        std::fs::write(dir.path().join("7/smaps"), text).unwrap();
        let mut lines = Vec::new();
        let whole = source.read_smaps(7, &mut buf, |l| lines.push(l.len()));
        (whole.unwrap(), lines)
    };
    let long = "z".repeat(LINE_PIECE_BYTES * 2 + 5);
    let (whole, lines) = read(&format!("a\n{long}\nbc"));
    assert!(whole);
    assert_eq!(lines, [1, LINE_PIECE_BYTES, LINE_PIECE_BYTES, 5, 2]);
    let across = format!("{}\n{}\n", "x".repeat(LINE_PIECE_BYTES - 3), "y".repeat(10));
    assert_eq!(read(&across), (true, vec![LINE_PIECE_BYTES - 3, 10]));
    assert_eq!(read(""), (true, vec![]));
    let past: String = "w\n".repeat(MAX_SMAPS_BYTES / 2 + LINE_PIECE_BYTES);
    let (whole, lines) = read(&past);
    assert!(!whole);
    assert!(lines.len() >= MAX_SMAPS_BYTES / 2 && lines.len() < past.len() / 2);
}

/// The one-read discipline against the real kernel: every file read in one read equals
/// the same file read until a read returns 0.
#[test]
fn one_read_gives_the_whole_file_on_the_real_proc() {
    let source = Source::new("/proc", "/sys");
    let mut buf = Buffer::default();
    let pid = std::process::id();
    for file in WHOLE_IN_ONE_READ {
        let path = format!("/proc/{pid}/{file}");
        let Ok(expected) = std::fs::read_to_string(&path) else {
            continue;
        };
        let got = source.read_pid(pid, file, &mut buf).unwrap();
        // stat, statm and status carry sizes and counters of this very process (other
        // tests allocate in parallel) that move between reads: compare each line's key,
        // or for a line of numbers how many there are.
        let keys = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| match l.split_whitespace().next().unwrap_or("") {
                    k if k.bytes().all(|b| b.is_ascii_digit()) => {
                        format!("{} numbers", l.split_whitespace().count())
                    }
                    k => k.to_string(),
                })
                .collect()
        };
        assert_eq!(keys(got), keys(&expected), "{path}");
        assert!(got.ends_with('\n'), "{path}");
    }
}

#[test]
fn pids_lists_canonical_pids_only_and_counts_the_odd_ones() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "1",
        "42",
        "18266",
        "018266",
        "+90003",
        "0",
        "99999999999",
        "self",
        "sys",
    ] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
    }
    let (pids, odd) = Source::new(dir.path(), dir.path()).pids().unwrap();
    assert_eq!(pids, [1, 42, 18266]);
    assert_eq!(odd, 4, "018266, +90003, 0 and an out-of-range number");
}

/// A directory of anyone's to fill (a delegated cgroup subtree) is listed no further than
/// the caller may walk: the first `max` subdirectories and a flag, never the rest.
#[test]
fn subdirectories_are_listed_up_to_a_cap() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::create_dir(dir.path().join(format!("d{i}"))).unwrap();
    }
    std::fs::write(dir.path().join("memory.stat"), "anon 0\n").unwrap();
    let source = Source::new(dir.path(), dir.path());
    let (some, cut) = source.subdirs(dir.path(), 3).unwrap();
    assert_eq!((some.len(), cut), (3, true));
    let (all, cut) = source.subdirs(dir.path(), 5).unwrap();
    assert_eq!((all.len(), cut), (5, false));
    assert_eq!(source.subdirs(dir.path(), 0).unwrap(), (Vec::new(), true));
}

/// A memfd of the test's own, held open and filled with 3 pages: counted by
/// `open_file_bytes` as the kernel allocated it. A file of the same name that a
/// directory still names is not a memfd, and neither is a file on another device.
#[test]
fn a_memfd_held_open_is_counted_from_the_kernels_cache_and_a_named_file_is_not() {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
    let fd = nix::sys::memfd::memfd_create("membloat-sized", nix::sys::memfd::MFdFlags::empty())
        .unwrap();
    let raw = fd.as_raw_fd();
    // SAFETY: the descriptor was just made and is owned by `file` alone from here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd.into_raw_fd()) };
    file.write_all(&[1u8; 3 * 4096]).unwrap();
    let source = Source::new("/proc", "/sys");
    let pid = std::process::id();
    assert_eq!(
        source.open_file_bytes(pid, "/memfd:membloat-sized (deleted)"),
        Some(3 * 4096)
    );
    let link = std::path::PathBuf::from(format!("/proc/self/fd/{raw}"));
    let st = own::cached_stat(&link).unwrap();
    assert_eq!(
        (Some(st.dev), st.blocks, st.links),
        (own::shared_memory_device(), 24, 0)
    );
    let ino = nix::sys::stat::fstat(&file).unwrap().st_ino;
    assert_eq!(st.ino, ino);
    // A named file, open: linked, so not a memfd.
    let named = tempfile::NamedTempFile::new().unwrap();
    let name = named.path().to_string_lossy().into_owned();
    assert_eq!(source.open_file_bytes(pid, &name), None);
    drop(file);
}

#[test]
fn a_path_in_a_process_root_follows_no_link_and_stays_inside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::os::unix::fs::symlink("/proc", dir.path().join("link")).unwrap();
    let fd = own::open_in_root(dir.path(), "/a/b").unwrap();
    let want = std::fs::metadata(dir.path().join("a/b")).unwrap();
    let got = nix::sys::stat::fstat(&fd).unwrap();
    assert_eq!(got.st_ino, std::os::unix::fs::MetadataExt::ino(&want));
    // A link on the way is refused, not followed.
    let refused = own::open_in_root(dir.path(), "/link/self").unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::ELOOP));
    // `..` past the root stays at the root.
    let up = own::open_in_root(dir.path(), "/../../a").unwrap();
    let a = std::fs::metadata(dir.path().join("a")).unwrap();
    assert_eq!(
        nix::sys::stat::fstat(&up).unwrap().st_ino,
        std::os::unix::fs::MetadataExt::ino(&a)
    );
}

/// A cgroup removed after its file was opened answers ENODEV: gone, like a missing one,
/// never an I/O error. Checked on a real cgroup where the test may make one (root), and
/// on the error the kernel gives everywhere.
#[test]
fn a_cgroup_file_removed_after_it_was_opened_is_gone() {
    let enodev = ReadError::new(
        Path::new("/sys/fs/cgroup/x/memory.stat"),
        std::io::Error::from_raw_os_error(19),
    );
    assert!(matches!(enodev, ReadError::Gone(_)));
    assert_eq!(enodev.system_reason(), Reason::Unsupported);
    let base = ["/sys/fs/cgroup/memory", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|b| b.join("memory.stat").exists() || b.join("cgroup.controllers").exists());
    let dir = base.map(|b| b.join(format!("membloat-enodev-{}", std::process::id())));
    let Some(dir) = dir.filter(|d| std::fs::create_dir(d).is_ok()) else {
        eprintln!("skipped the real cgroup: no memory cgroup this test may create (needs root)");
        return;
    };
    let file = ["memory.stat", "cgroup.procs"]
        .into_iter()
        .find_map(|f| std::fs::File::open(dir.join(f)).ok());
    std::fs::remove_dir(&dir).unwrap();
    let mut file = file.expect("a file of the new cgroup");
    let err = std::io::Read::read_to_end(&mut file, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(ReadError::new(&dir, err), ReadError::Gone(_)),
        "a removed cgroup's file read as other than gone"
    );
}
