//! mimalloc, linked in statically (Rust services on the `mimalloc` crate), stripped, linked
//! as Debian's shared `libmimalloc2.0` or preloaded: named mimalloc by what the binary
//! holds, and never given glibc's measured figure. The programs are real: mimalloc 2.1.7,
//! 2.2.5, 2.3.2 and 3.3.2 as `libmimalloc-sys` links them (`tests/common/mimalloc.rs`), and
//! a C program on Debian's `libmimalloc2.0`. Reading another process's memory needs
//! ptrace access: CI runs as root.

use crate::common;

use common::mimalloc::{program, VERSIONS};
use common::repro::Repro;

use membloat_exporter::heap::{self, runtime::Allocator, Unmeasured as Outcome};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::path::Path;

/// What the exporter's heap readers make of process `pid`.
fn read(pid: u32) -> heap::HeapReading {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true)
}

/// A copy of `built` with its symbol table removed, as slim images ship binaries.
fn stripped(built: &Path) -> std::path::PathBuf {
    common::stripped(built, "mimalloc-stripped")
}

/// Each version, with its symbols and stripped: mimalloc, not glibc. The builds keep only
/// the mimalloc functions the program calls (the linker drops `mi_malloc` itself from
/// 3.x's), which is how a 3.x Rust service was once taken for glibc and given glibc's
/// measured figure of 0.
#[test]
fn statically_linked_mimalloc_is_mimalloc_on_every_version_stripped_or_not() {
    for (version, _, _) in VERSIONS {
        let built = program(version, false);
        for exe in [built.clone(), stripped(&built)] {
            let r = Repro::run_env(&exe, &["1", "2", "64", "5"], &[]);
            assert!(
                r.ready.contains(&format!(" version={version} ")),
                "mimalloc {version}: {}",
                r.ready
            );
            let h = read(r.pid());
            let name = exe.file_name().unwrap().to_string_lossy();
            assert_eq!(
                h.identity.allocator,
                Allocator::Mimalloc,
                "mimalloc {version}, {name}: it maps libc.so.6 and is not glibc's"
            );
            assert_eq!(
                h.get::<heap::Glibc>().cloned(),
                Some(Err(Outcome::NotGlibc)),
                "mimalloc {version}, {name}: never glibc's figure"
            );
            assert!(h.measured().is_none(), "{version} {name}: {:?}", h.readings);
        }
    }
}

/// Debian's `libmimalloc2.0` (./scripts/test.sh installs libmimalloc-dev, which brings it).
const DEBIAN_MIMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";

/// The C program that hoards under glibc, preloading Debian's mimalloc and linked against
/// it: mimalloc's frees, whatever glibc's heap holds; the library is stripped, so named
/// with no figure.
#[test]
fn debians_libmimalloc_preloaded_or_linked_is_mimalloc() {
    assert!(
        Path::new(DEBIAN_MIMALLOC).exists(),
        "{DEBIAN_MIMALLOC}: run ./scripts/test.sh, which installs libmimalloc-dev"
    );
    let preloaded = Repro::start(
        "hoard",
        &["2", "1", "0"],
        &[("LD_PRELOAD", DEBIAN_MIMALLOC)],
    );
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mimalloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("hoard-mimalloc");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/hoard.c");
    let status = common::repro::cc(&exe, &src)
        .arg("-lmimalloc")
        .status()
        .unwrap();
    assert!(status.success(), "linking hoard.c with -lmimalloc");
    let linked = Repro::run_env(&exe, &["2", "1", "0"], &[]);
    for (how, r) in [("preloaded", &preloaded), ("linked", &linked)] {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", r.pid())).unwrap();
        assert!(
            maps.contains("libmimalloc.so"),
            "{how}: maps no libmimalloc"
        );
        let h = read(r.pid());
        assert_eq!(h.identity.allocator, Allocator::Mimalloc, "{how}");
        assert_eq!(
            h.get::<heap::Glibc>().cloned(),
            Some(Err(Outcome::NotGlibc)),
            "{how}: never glibc's figure"
        );
        assert!(h.measured().is_none(), "{how}: {:?}", h.readings);
    }
    // The same program without it is glibc's, measured.
    let plain = Repro::start("hoard", &["2", "1", "0"], &[]);
    let h = read(plain.pid());
    assert_eq!(h.identity.allocator, Allocator::Glibc);
    assert!(h.measured().is_some(), "{:?}", h.readings);
}

/// CPython 3.13 bundles mimalloc (for `PYTHONMALLOC=mimalloc` and free-threading) with its
/// names local, and allocates with pymalloc on glibc's malloc: glibc's, and measured.
#[test]
fn cpython_3_13_bundling_mimalloc_is_glibcs() {
    let python = &common::python::debian_of("3.13").symbols;
    let script = "import time\nkept = [bytes(4096) for _ in range(20000)]\nprint('ready', flush=True)\ntime.sleep(600)\n";
    let r = Repro::run_env(python, &["-c", script], &[]);
    let h = read(r.pid());
    assert_eq!(h.identity.allocator, Allocator::Glibc, "{:?}", h.identity);
    assert!(
        matches!(h.get::<heap::Glibc>(), Some(Ok(_))),
        "{:?}",
        h.readings
    );
}
