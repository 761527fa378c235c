//! A heap reader is its folder and one line. A toy allocator's reader
//! (tests/fixtures/planted/toyalloc.rs) is planted in a copy of the tree as
//! `src/heap/toyalloc/` plus its line in `heap/mod.rs`'s `readers!`, and nothing else is
//! edited: without what it says (`shape::Says`) the compiler names the trait; with it,
//! the copy builds, its catalogue and docs/metrics.md carry the reader's rows, the layer
//! test accepts it, and against a real toy allocator (tests/reproducers/toyalloc.c) its
//! series show exactly what the toy keeps, `explain` names it with the reader's remedy,
//! and the remedy, applied as printed, gives it back.

use crate::common;

use common::repro::{self, Repro};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Where the reader is cut for the first build: what it says follows this line.
const SAYS_MARKER: &str = "// -- what the reader says";

/// The line the reader takes in `readers!`, after the last reader listed.
const LAST_LINE: &str = "    python::Python,\n";
const ITS_LINE: &str = "    toyalloc::Toyalloc,\n";

#[test]
#[ignore = "needs root"]
fn a_reader_planted_as_its_folder_and_one_line_is_served_documented_and_explained() {
    needs_root("reading another process's memory");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("planted");
    let (copy, target) = (scratch.join("tree"), scratch.join("target"));
    tracked_copy(repo, &copy);
    seeded(&target);
    let reader = std::fs::read_to_string(repo.join("tests/fixtures/planted/toyalloc.rs")).unwrap();
    let folder = copy.join("src/heap/toyalloc");
    std::fs::create_dir_all(&folder).unwrap();
    let list = copy.join("src/heap/mod.rs");
    let text = std::fs::read_to_string(&list).unwrap();
    assert_eq!(text.matches(LAST_LINE).count(), 1, "readers! has moved");
    std::fs::write(
        &list,
        text.replace(LAST_LINE, &format!("{LAST_LINE}{ITS_LINE}")),
    )
    .unwrap();

    // Its folder without what it says: the compiler names what it owes.
    let cut = &reader[..reader.find(SAYS_MARKER).unwrap()];
    std::fs::write(folder.join("mod.rs"), cut).unwrap();
    let out = cargo(
        &copy,
        &target,
        &["build", "--bin", "membloat_exporter"],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "built without Says");
    assert!(
        err.contains("the trait bound `Toyalloc: Says` is not satisfied"),
        "{err}"
    );

    // The whole reader: it builds, its rows are generated into the docs, the layers hold.
    std::fs::write(folder.join("mod.rs"), &reader).unwrap();
    let built = cargo(
        &copy,
        &target,
        &["build", "--bin", "membloat_exporter"],
        &[],
    );
    succeeded(built, "building the copy with the reader");
    let docs = cargo(
        &copy,
        &target,
        &["test", "--test", "fast", "--", "catalogue", "layers"],
        &[("MEMBLOAT_UPDATE_GOLDEN", "1")],
    );
    succeeded(docs, "the copy's catalogue and layer tests");
    let metrics_md = std::fs::read_to_string(copy.join("docs/metrics.md")).unwrap();
    for row in [
        "`membloat_toyalloc_reads_total{outcome}` | counter",
        "`membloat_process_toyalloc_held_bytes{pid,comm}` | gauge | bytes",
    ] {
        assert!(metrics_md.contains(row), "docs/metrics.md lacks {row}");
    }
    // Nothing else was edited: beside its folder, its one line, and what the docs
    // generate from the catalogue.
    let changed = differing(repo, &copy);
    assert_eq!(
        changed,
        ["README.md", "docs/metrics.md", "src/heap/mod.rs"],
        "files that differ from the tree"
    );
    let before = std::fs::read_to_string(repo.join("src/heap/mod.rs")).unwrap();
    let after = std::fs::read_to_string(&list).unwrap();
    assert_eq!(after.lines().count(), before.lines().count() + 1);

    served_and_explained(&target.join("debug/membloat_exporter"));
}

/// The planted exporter against a real toy allocator: its series, its finding, its remedy.
fn served_and_explained(planted: &Path) {
    let toy = repro::build("toyalloc");
    let mut r = Repro::run_env(&toy, &["96", "32", "16"], &[]);
    let held: f64 = r.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(held, (48u64 << 20) as f64);
    let pid = r.pid();
    let d = Daemon::start_with(
        Command::new(planted),
        &[
            "--scan.interval=1s",
            "--collector.processes.top-k=100000",
            "--collector.processes.deep-interval=1s",
            // Given back, the toy's 32 MiB in use stay a deep-read candidate.
            "--collector.processes.deep-min-size=16MiB",
        ],
    );
    let labels = format!("{{pid=\"{pid}\",comm=\"toyalloc\"}}");
    let series = format!("membloat_process_toyalloc_held_bytes{labels}");
    let mut text = String::new();
    d.wait_until(Duration::from_secs(60), || {
        text = d.metrics();
        value(&text, &series).is_some()
    });
    // Counted page by page from pagemap: exactly what the toy keeps.
    assert_eq!(value(&text, &series), Some(held), "{series}");
    let pool = format!("membloat_process_toyalloc_pool_bytes{labels}");
    assert_eq!(value(&text, &pool), Some((96u64 << 20) as f64));
    let runtime = format!(
        "membloat_process_runtime_held_bytes{{pid=\"{pid}\",comm=\"toyalloc\",runtime=\"toyalloc\"}}"
    );
    assert_eq!(value(&text, &runtime), Some(held), "{runtime}");
    let measured = value(&text, "membloat_toyalloc_reads_total{outcome=\"measured\"}");
    assert!(measured.is_some_and(|n| n >= 1.0), "no measured read");

    // `explain` names it in the reader's words, with the reader's remedy.
    let f = explained_by(planted, pid, "toyalloc_pool");
    assert_eq!(f["bytes"].as_f64(), Some(held), "{f:#}");
    assert_eq!(f["certainty"], "measured");
    let remedy = f["remedy"].as_str().unwrap();
    let want = format!("kill -USR2 {pid}");
    assert!(remedy.starts_with(&want), "{remedy}");

    // The remedy as printed gives it back, and the next scans see it.
    succeeded(
        Command::new("sh").arg("-c").arg(&want).output().unwrap(),
        "the remedy",
    );
    let mut line = String::new();
    std::io::BufRead::read_line(&mut r.out, &mut line).unwrap();
    assert_eq!(line.trim(), "released");
    d.wait_until(Duration::from_secs(60), || {
        value(&d.metrics(), &series) == Some(0.0)
    });
}

/// The cargo that runs this test, in the copy, with its own target directory.
fn cargo(copy: &Path, target: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(option_env!("CARGO").unwrap_or("cargo"))
        .args(args)
        .current_dir(copy)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// A fresh copy of the repository's tracked files at `copy`.
fn tracked_copy(repo: &Path, copy: &Path) {
    let _ = std::fs::remove_dir_all(copy);
    std::fs::create_dir_all(copy).unwrap();
    let files = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(files.status.success(), "git ls-files");
    for f in files.stdout.split(|&b| b == 0).filter(|f| !f.is_empty()) {
        let rel = Path::new(std::str::from_utf8(f).unwrap());
        let (from, to) = (repo.join(rel), copy.join(rel));
        // A tracked file deleted in the work tree is not part of it.
        if from.symlink_metadata().is_ok() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// The copy's target directory, seeded with this build's compiled dependencies (hard
/// links: the copy's own crate has other file names, so only the dependencies are
/// shared, and they are not rebuilt): the copy builds in seconds, not minutes.
fn seeded(target: &Path) {
    let debug = target.join("debug");
    if debug.join("deps").exists() {
        return;
    }
    let ours = std::env::current_exe().unwrap();
    let ours = ours.parent().and_then(Path::parent).unwrap();
    std::fs::create_dir_all(&debug).unwrap();
    for dir in ["deps", "build", ".fingerprint"] {
        let linked = Command::new("cp")
            .arg("-al")
            .arg(ours.join(dir))
            .arg(debug.join(dir))
            .status()
            .unwrap();
        assert!(linked.success(), "linking {dir}");
    }
}

/// The files under `copy` that differ from `repo`'s, outside the planted folder and what
/// building wrote (relative paths, sorted).
fn differing(repo: &Path, copy: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![copy.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(copy).unwrap();
            if rel.starts_with("src/heap/toyalloc") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).ok() != std::fs::read(repo.join(rel)).ok() {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}
