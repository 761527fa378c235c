//! `tests/reproducers/jemalloc/main.rs` built against each jemalloc that
//! `tikv-jemallocator` links in statically, as Rust services are: a cargo project per
//! version under the test target directory, built once and kept.

use std::path::{Path, PathBuf};

/// jemalloc's versions and the releases of `tikv-jemallocator`, `tikv-jemalloc-ctl` and
/// `tikv-jemalloc-sys` (which builds jemalloc) that link each, pinned (the program prints
/// the version it runs, and the tests check it).
pub const VERSIONS: [(&str, [&str; 3]); 3] = [
    ("5.2.1", ["0.4.3", "0.4.2", "0.4.3"]),
    ("5.3.0", ["0.5.4", "0.5.4", "0.5.4"]),
    ("5.3.1", ["0.7.0", "0.7.0", "0.7.1"]),
];

/// The program linked with jemalloc `version` (one of [`VERSIONS`]); `debug`: with DWARF
/// (`debug = 2`), otherwise the same build without it, as a plain release build is
/// (symbols, no DWARF: [`super::without_dwarf`]).
pub fn program(version: &str, debug: bool) -> PathBuf {
    let (_, [allocator, ctl, sys]) = VERSIONS
        .iter()
        .find(|v| v.0 == version)
        .expect("a version of VERSIONS");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("jemalloc")
        .join(version);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/jemalloc/main.rs");
    let manifest = format!(
        "[package]\nname = \"jemalloc-free\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         [dependencies]\ntikv-jemallocator = \"={allocator}\"\n\
         tikv-jemalloc-ctl = \"={ctl}\"\ntikv-jemalloc-sys = \"={sys}\"\n\
         [profile.release]\ndebug = 2\n[workspace]\n"
    );
    let built = super::cargo_program(&dir, &manifest, &src, "jemalloc-free");
    if debug {
        built
    } else {
        super::without_dwarf(&built)
    }
}
