//! The fast tier, what `cargo test` runs: the parsers against fixtures and the procfs
//! crate, the golden exposition, the catalogue and the docs generated from it, the
//! dashboards, rules and mixin, the layering of the source, the fuzz corpus and the log
//! format. No JVM, Go toolchain, virtual machine or root; a couple of minutes on two CPUs
//! after the build.

#[path = "../common/mod.rs"]
mod common;
// The fuzzer's own modules, for tests/fuzz_corpus.rs (its fields, seeds and lengths, are
// unused here).
#[path = "../catalogue.rs"]
mod catalogue;
#[path = "../../fuzz/src/check.rs"]
mod check;
#[path = "../dashboards.rs"]
mod dashboards;
#[path = "../docs.rs"]
mod docs;
#[path = "../fuzz_corpus.rs"]
mod fuzz_corpus;
#[path = "../golden.rs"]
mod golden;
#[path = "../layers.rs"]
mod layers;
#[path = "../logs.rs"]
mod logs;
#[path = "../mixin.rs"]
mod mixin;
#[path = "../oracle.rs"]
mod oracle;
#[path = "../rules.rs"]
mod rules;
#[allow(dead_code)]
#[path = "../../fuzz/src/targets.rs"]
mod targets;
#[path = "../../fuzz/src/tree.rs"]
mod tree;
