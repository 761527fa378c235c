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
/// (`debug = 2`), otherwise the same build without it, as a plain release build is
/// (symbols, no DWARF: [`super::without_dwarf`]).
pub fn program(version: &str, debug: bool) -> PathBuf {
    let &(_, sys, v2) = VERSIONS
        .iter()
        .find(|v| v.0 == version)
        .expect("a version of VERSIONS");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mimalloc")
        .join(version);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/mimalloc/main.rs");
    let features = if v2 {
        "\"extended\", \"v2\""
    } else {
        "\"extended\""
    };
    let manifest = format!(
        "[package]\nname = \"mimalloc-free\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         [dependencies]\nlibmimalloc-sys = {{ version = \"={sys}\", features = [{features}] }}\n\
         [profile.release]\ndebug = 2\n[workspace]\n"
    );
    let built = super::cargo_program(&dir, &manifest, &src, "mimalloc-free");
    if debug {
        built
    } else {
        super::without_dwarf(&built)
    }
}

/// mimalloc `version` (one of [`VERSIONS`]) built from the sources `libmimalloc-sys`
/// vendors as a shared library that overrides malloc, with its symbols (as a distribution
/// that keeps them, or a program's own build, ships it), and `collect.c` linked against it:
/// the program's path. Built once and kept.
pub fn c_program(version: &str) -> PathBuf {
    let &(_, sys, v2) = VERSIONS
        .iter()
        .find(|v| v.0 == version)
        .expect("a version of VERSIONS");
    // The crate's sources: cargo has them once the Rust program is built.
    let rust = program(version, true);
    let project = rust.ancestors().nth(3).unwrap();
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "libmimalloc-sys" && p["version"] == sys)
        .and_then(|p| p["manifest_path"].as_str())
        .expect("libmimalloc-sys in the program's dependencies");
    let mut src = Path::new(manifest).parent().unwrap().join("c_src/mimalloc");
    if src.join("v2").is_dir() {
        src = src.join(if v2 { "v2" } else { "v3" });
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mimalloc")
        .join(format!("{version}-shared"));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libmimalloc.so.2");
    let exe = dir.join("mimalloc-collect");
    let run = |cmd: &mut std::process::Command, what: &str| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if !lib.exists() {
        run(
            super::tool("cc")
                .args([
                    "-shared",
                    "-fPIC",
                    "-O2",
                    "-DNDEBUG",
                    "-DMI_MALLOC_OVERRIDE",
                ])
                .args([
                    "-DMI_SHARED_LIB",
                    "-DMI_SHARED_LIB_EXPORT",
                    "-ftls-model=initial-exec",
                ])
                .arg("-Wl,-soname,libmimalloc.so.2")
                .arg("-I")
                .arg(src.join("include"))
                .arg(src.join("src/static.c"))
                .arg("-o")
                .arg(&lib)
                .arg("-pthread"),
            &format!("building mimalloc {version} as a shared library"),
        );
    }
    let code = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/mimalloc/collect.c");
    run(
        super::repro::cc(&exe, &code)
            .arg(&lib)
            .arg(format!("-Wl,-rpath,{}", dir.display())),
        &format!("linking collect.c against mimalloc {version}"),
    );
    exe
}
