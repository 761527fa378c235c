use super::*;

fn vma(header: &str, size_kb: u64, rss_kb: u64, flags: &str) -> String {
    format!("{header}\nSize: {size_kb} kB\nRss: {rss_kb} kB\nAnonymous: {rss_kb} kB\nAnonHugePages: 0 kB\nTHPeligible: 0\nVmFlags: {flags}\n")
}

// Shapes as seen on kernel 6.18 / glibc 2.36 for a process with one arena thread.
fn glibc_process() -> String {
    [
        vma(
            "55d0c0a4d000-55d0c0a4e000 r--p 00000000 fd:01 1234                       /usr/bin/app",
            4,
            4,
            "rd mr mw me dw sd",
        ),
        vma(
            "55d0c1000000-55d0c9000000 rw-p 00000000 00:00 0                          [heap]",
            131072,
            131000,
            "rd wr mr mw me ac sd",
        ),
        // Arena heap: rw part of 132 kB then the ---p rest of the 64 MiB.
        vma(
            "7f0a04000000-7f0a04021000 rw-p 00000000 00:00 0 ",
            132,
            12,
            "rd wr mr mw me nr sd",
        ),
        vma(
            "7f0a04021000-7f0a08000000 ---p 00000000 00:00 0 ",
            65404,
            0,
            "mr mw me nr sd",
        ),
        // A fully grown arena heap: exactly 64 MiB rw.
        vma(
            "7f0a08000000-7f0a0c000000 rw-p 00000000 00:00 0 ",
            65536,
            65536,
            "rd wr mr mw me nr sd",
        ),
        // A thread stack: anonymous, accountable, not a heap.
        vma(
            "7f0a0c000000-7f0a0c800000 rw-p 00000000 00:00 0 ",
            8192,
            16,
            "rd wr mr mw me ac sd",
        ),
    ]
    .concat()
}

#[test]
fn finds_brk_heap_arena_heaps_and_commit() {
    let s = summarize(&glibc_process()).unwrap();
    let rejected = s.rejected;
    assert_eq!(rejected, 0);
    assert_eq!(s.brk_heap_rss_bytes, 131000 << 10);
    assert_eq!(s.brk_heap_size_bytes, 131072 << 10);
    assert_eq!(s.arena_heaps, 2);
    assert_eq!(s.arena_reserved_bytes, 2 * ARENA_HEAP_BYTES);
    assert_eq!(s.arena_rss_bytes, (12 + 65536) << 10);
    assert_eq!(s.commit_bytes, (131072 + 8192) << 10);
    assert_eq!(s.heap_rss_bytes(), (131000 + 12 + 65536) << 10);
}

#[test]
fn heaps_without_noreserve_and_merged_heaps_are_counted() {
    // glibc 2.41 maps heaps without MAP_NORESERVE: `ac`, no `nr` (seen on Debian 13).
    // Two full heaps side by side are one 128 MiB mapping; a third, partly grown, ends
    // in its `---p` rest.
    let text = [
        vma(
            "7f0a00000000-7f0a08000000 rw-p 00000000 00:00 0 ",
            131072,
            131072,
            "rd wr mr mw me ac sd",
        ),
        vma(
            "7f0a0c000000-7f0a10021000 rw-p 00000000 00:00 0 ",
            65668,
            132,
            "rd wr mr mw me ac sd",
        ),
        vma(
            "7f0a10021000-7f0a14000000 ---p 00000000 00:00 0 ",
            65404,
            0,
            "mr mw me sd",
        ),
    ]
    .concat();
    let s = summarize(&text).unwrap();
    assert_eq!(s.arena_heaps, 2 + 2);
    assert_eq!(s.arena_reserved_bytes, 4 * ARENA_HEAP_BYTES);
    // A mapping that is no whole number of heaps is not one.
    let odd = vma(
        "7f0a00000000-7f0a05000000 rw-p 00000000 00:00 0 ",
        81920,
        4,
        "rd wr ac",
    );
    assert_eq!(summarize(&odd).unwrap().arena_heaps, 0);
}

#[test]
fn misaligned_or_named_mappings_are_not_arenas() {
    let misaligned = vma(
        "7f0a04001000-7f0a08001000 rw-p 00000000 00:00 0 ",
        65536,
        4,
        "rd wr nr",
    );
    let named = vma(
        "7f0a04000000-7f0a08000000 rw-p 00000000 00:05 77  /SYSV00000000 (deleted)",
        65536,
        4,
        "rd wr nr",
    );
    assert_eq!(summarize(&misaligned).unwrap().arena_heaps, 0);
    assert_eq!(summarize(&named).unwrap().arena_heaps, 0);
}

#[test]
fn hostile_names_and_garbage_never_panic() {
    for text in [
        "7f0a04000000-7f0a08000000 rw-p 00000000 00:05 77 /SYSVx\nSize: 4 kB\n",
        "ffff-0000 rw-p 0 0 0\n",
        "Size: 4 kB\n",
        "-\n- - - - -\n",
        "7f-7g rw-p 0 0 0\n",
        "1-2 rw 0 0 0\n",
    ] {
        let _ = summarize(text);
    }
    assert!(summarize("garbage\n").is_err());
    assert_eq!(summarize("").unwrap(), SmapsSummary::default());
}

/// Two heap mappings whose Size is absurd once summed used to wrap to 1 KiB; a figure
/// above a mapping's own range is now rejected and counted, and sums saturate.
#[test]
fn absurd_sizes_are_counted_not_wrapped() {
    let huge = (u64::MAX >> 10) / 2 + 1;
    let text = format!(
        "{}{}",
        vma(
            "55d0c1000000-55d0c1001000 rw-p 00000000 00:00 0 [heap]",
            huge,
            4,
            "ac"
        ),
        vma(
            "55d0c2000000-55d0c2001000 rw-p 00000000 00:00 0 [heap]",
            huge,
            4,
            "ac"
        ),
    );
    let s = summarize(&text).unwrap();
    let rejected = s.rejected;
    assert_eq!(rejected, 2, "each absurd Size counted");
    assert_eq!(s.brk_heap_size_bytes, 0);
    assert_eq!(s.brk_heap_rss_bytes, 8 << 10);
    assert_eq!(s.commit_bytes, 8 << 10);
    // An arena candidate at the top of the address space does not overflow.
    let top = vma(
        "fffffffffc000000-fffffffffc001000 rw-p 00000000 00:00 0",
        4,
        4,
        "nr",
    );
    assert_eq!(summarize(&top).unwrap().arena_heaps, 0);
}

#[test]
fn a_jvms_perf_data_file_is_told_by_its_directory_and_pid_name() {
    // As a JDK 17 JVM maps it (`rw-s`), in its own mount namespace; also once deleted.
    for name in [
        "/tmp/hsperfdata_root/32515",
        "/tmp/hsperfdata_app/1 (deleted)",
    ] {
        assert_eq!(Library::of(name), Some(Library::JvmPerfData), "{name}");
    }
    for name in [
        "/tmp/hsperfdata_root/x1",
        "/tmp/perf/123",
        "/tmp/hsperfdata_root/",
    ] {
        assert_eq!(Library::of(name), None, "{name}");
    }
}

#[test]
fn a_python_interpreter_is_told_as_executable_library_or_free_threaded() {
    for (name, want) in [
        ("/usr/bin/python3.11", Some(Library::Python)),
        ("/usr/local/bin/python3", Some(Library::Python)),
        ("/opt/py/bin/python", Some(Library::Python)),
        (
            "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
            Some(Library::PythonLibrary),
        ),
        (
            "/root/.pyenv/versions/3.9.18/lib/libpython3.9.so.1.0",
            Some(Library::PythonLibrary),
        ),
        (
            "/usr/lib/libpython3.13t.so.1.0",
            Some(Library::PythonFreeThreaded),
        ),
        ("/usr/bin/python3.13t", Some(Library::PythonFreeThreaded)),
        ("/usr/lib/libpython2.7.so.1.0", None),
        ("/usr/bin/pythonista", None),
        ("/usr/bin/pythont", None),
    ] {
        assert_eq!(Library::of(name), want, "{name}");
    }
}
