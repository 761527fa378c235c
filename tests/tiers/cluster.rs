//! The cluster tier (`cargo test --test cluster -- --ignored`, as root): the chart
//! installed by Helm on a real single-node Kubernetes cluster.

#[path = "../cluster.rs"]
mod cluster;
#[path = "../common/mod.rs"]
mod common;
