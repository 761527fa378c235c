//! Every fuzz target (fuzz/src/targets.rs) on its whole corpus and on every past finding
//! (fuzz/regressions), without instrumentation: what the fuzzer once found stays fixed, and
//! a change that breaks a parser on an input the corpus holds fails here, on `cargo test`.

// The fuzzer's targets, its checks and its tree packing sit at the tier's root
// (tests/tiers/fast.rs), where they refer to each other as the fuzzer's own crate does.
use crate::{targets, tree};

use std::path::Path;
use std::sync::Mutex;

static PANIC: Mutex<Option<String>> = Mutex::new(None);

#[test]
fn every_target_passes_its_corpus_and_past_findings() {
    membloat_exporter::log::set_level(membloat_exporter::log::LogLevel::Error);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    // A panic on a reader thread is a failure too: the hook sees every thread's. The
    // other tests of the tier run beside this one in the same process: a panic on one of
    // their threads (named after the test) is theirs, passed on to the default hook.
    let default = std::sync::Arc::new(std::panic::take_hook());
    let theirs = default.clone();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let other_test = thread
            .name()
            .is_some_and(|n| n.contains("::") && !n.starts_with("fuzz_corpus::"));
        if other_test {
            theirs(info);
        } else {
            PANIC.lock().unwrap().get_or_insert(info.to_string());
        }
    }));
    let mut failures = Vec::new();
    let mut total = 0;
    for t in targets::TARGETS {
        let corpus = tree::files(&root.join("corpus").join(t.name));
        assert!(
            !corpus.is_empty(),
            "{}: no corpus (membloat-fuzz seed)",
            t.name
        );
        for file in corpus
            .iter()
            .chain(&tree::files(&root.join("regressions").join(t.name)))
        {
            let data = std::fs::read(file).unwrap();
            let _ = std::panic::catch_unwind(|| (t.run)(&data));
            total += 1;
            if let Some(msg) = PANIC.lock().unwrap().take() {
                failures.push(format!("{}: {msg}", file.display()));
            }
        }
    }
    std::panic::set_hook(Box::new(move |info| default(info)));
    eprintln!("{total} inputs replayed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_tree_survives_packing() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-6.18");
    let packed = tree::pack(&fixture, usize::MAX);
    let out = tempfile::tempdir().unwrap();
    let files = tree::unpack(&packed, out.path());
    assert!(files > 200, "{files} files");
    for f in [
        "proc/meminfo",
        "proc/1406/smaps",
        "sys/kernel/mm/transparent_hugepage/enabled",
    ] {
        let same =
            std::fs::read(out.path().join(f)).unwrap() == std::fs::read(fixture.join(f)).unwrap();
        assert!(same, "{f} differs after pack and unpack");
    }
    // Paths that leave the tree are not written.
    let hostile = b"=== proc/../../escape\nx\n=== /etc/x\ny\n=== sys/ok\nz\n";
    assert_eq!(tree::unpack(hostile, out.path()), 1);
    assert!(!out.path().join("../escape").exists());
}
