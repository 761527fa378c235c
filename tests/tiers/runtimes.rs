//! The runtimes tier (`cargo test --test runtimes`): the heap readers against each
//! runtime's own count on several versions of it: glibc 2.31, 2.36 and 2.41, JDK 11 to 25
//! with every collector, Go 1.21 to 1.26, jemalloc 5.2.1 to 5.3.1, CPython 3.8 to 3.13;
//! explain's JVM remedies applied to real JVMs; the catalogue served by this host. Its
//! tests marked `needs root` run in the root tier.

#[path = "../catalogue_live.rs"]
mod catalogue_live;
#[path = "../common/mod.rs"]
mod common;
#[path = "../differential.rs"]
mod differential;
#[path = "../explain_jvm.rs"]
mod explain_jvm;
#[path = "../golang.rs"]
mod golang;
#[path = "../jemalloc.rs"]
mod jemalloc;
#[path = "../jvm.rs"]
mod jvm;
#[path = "../mimalloc.rs"]
mod mimalloc;
#[path = "../python.rs"]
mod python;
