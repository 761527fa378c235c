//! The kernels tier (`cargo test --test kernels`): Debian's 5.10, 6.1 and 6.12 kernels
//! booted in QEMU with cgroup v2, the exporter run inside each.

#[path = "../common/mod.rs"]
mod common;
#[path = "../kernels.rs"]
mod kernels;
