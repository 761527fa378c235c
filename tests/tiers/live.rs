//! The live tier (`cargo test --test live`): the exporter beside real processes on this
//! machine's kernel (C and Python reproducers, a real Prometheus, the web server under
//! attack, the deployment files, the chart, the package and the image). Its tests marked
//! `needs root` run in the root tier (`cargo test --test live -- --ignored`, as root).

#[path = "../cgroup_sheet.rs"]
mod cgroup_sheet;
#[path = "../common/mod.rs"]
mod common;
#[path = "../compare.rs"]
mod compare;
#[path = "../deploy.rs"]
mod deploy;
#[path = "../explain.rs"]
mod explain;
#[path = "../fleet.rs"]
mod fleet;
#[path = "../headroom.rs"]
mod headroom;
#[path = "../heap.rs"]
mod heap;
#[path = "../helm.rs"]
mod helm;
#[path = "../hostile.rs"]
mod hostile;
#[path = "../image.rs"]
mod image;
#[path = "../kmsg.rs"]
mod kmsg;
#[path = "../live.rs"]
mod live;
#[path = "../oomkill.rs"]
mod oomkill;
#[path = "../package.rs"]
mod package;
#[path = "../phenomena.rs"]
mod phenomena;
#[path = "../planted.rs"]
mod planted;
#[path = "../privileges.rs"]
mod privileges;
#[path = "../prometheus.rs"]
mod prometheus;
#[path = "../reading.rs"]
mod reading;
#[path = "../sheet.rs"]
mod sheet;
#[path = "../web.rs"]
mod web;
