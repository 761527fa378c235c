//! `tests/reproducers/mimalloc/main.rs` built against each mimalloc that `libmimalloc-sys`
//! (the `mimalloc` crate's) links in statically, as Rust services are: a cargo project per
//! version under the test target directory, built once and kept.

use std::path::{Path, PathBuf};

/// mimalloc's versions, the release of `libmimalloc-sys` that builds each, and whether it
/// is that release's `v2` feature (0.1.49 builds 3.3.2 by default and 2.3.2 with `v2`),
/// pinned: the program prints the version it runs, and the tests check it.
pub const VERSIONS: [(&str, &str, bool); 4] = [
    ("2.1.7", "0.1.39", false),
    ("2.2.5", "0.1.43", false),
    ("2.3.2", "0.1.49", true),
    ("3.3.2", "0.1.49", false),
];

/// The program linked with mimalloc `version` (one of [`VERSIONS`]); `debug`: with DWARF
/// (`debug = 2`), otherwise a plain release build (symbols, no DWARF).
pub fn program(version: &str, debug: bool) -> PathBuf {
    let &(_, sys, v2) = VERSIONS
        .iter()
        .find(|v| v.0 == version)
        .expect("a version of VERSIONS");
    let kind = if debug { "debug" } else { "plain" };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mimalloc")
        .join(format!("{version}-{kind}"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/mimalloc/main.rs");
    let features = if v2 {
        "\"extended\", \"v2\""
    } else {
        "\"extended\""
    };
    let manifest = format!(
        "[package]\nname = \"mimalloc-free\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         [dependencies]\nlibmimalloc-sys = {{ version = \"={sys}\", features = [{features}] }}\n\
         [profile.release]\ndebug = {}\n[workspace]\n",
        if debug { 2 } else { 0 }
    );
    super::cargo_program(&dir, &manifest, &src, "mimalloc-free")
}
