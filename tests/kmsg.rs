//! The kernel's own account of a real OOM kill, read from `/dev/kmsg` and parsed by
//! `parse::kmsg`: a process that outgrows its memory cgroup's limit (cgroup v1 here) is
//! killed by the kernel, and the parsed summary and kill name that process, that cgroup,
//! and a resident size the limit bounds; the cgroup's own `oom_kill` count agrees.

use crate::common;

use common::*;
use membloat_exporter::parse::kmsg::{self, Constraint, OomLine};
use std::time::Duration;

const LIMIT: u64 = 32 << 20;

#[test]
#[ignore = "needs root"]
fn a_real_kill_at_a_memory_cgroup_limit_reads_back_from_the_kernel_log() {
    needs_root("making a memory cgroup with a limit and reading /dev/kmsg");
    let Some(cg) = common::cgroup::TestCgroup::new("kmsg") else {
        return;
    };
    cg.set_limit(LIMIT);

    // Our own cursor at the end: only what the kernel writes from now on.
    let mut log = common::kmsg::at_end();

    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} && exec python3 -c 'b = bytearray(128 << 20)'",
            cg.join()
        ))
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the process outlived its 32 MiB limit");

    let mut summary = None;
    let mut kill = None;
    for _ in 0..50 {
        for text in common::kmsg::records(&mut log) {
            let r = kmsg::record(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            match kmsg::oom_line(r.message) {
                Some(OomLine::Summary(s)) if s.pid == pid => summary = Some(s),
                Some(OomLine::Kill(k)) if k.pid == pid => kill = Some((r.priority, k)),
                _ => {}
            }
        }
        if summary.is_some() && kill.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let summary = summary.expect("no oom-kill summary for the victim in /dev/kmsg");
    let (priority, kill) = kill.expect("no 'Killed process' line for the victim");
    let cgroup = cg.label();
    assert_eq!(summary.constraint, Constraint::MemoryCgroup);
    assert_eq!(summary.oom_memcg.as_deref(), Some(cgroup.as_str()));
    assert_eq!(summary.task_memcg.as_deref(), Some(cgroup.as_str()));
    assert_eq!(summary.task, "python3");
    assert_eq!(summary.uid, Some(0));
    assert_eq!(priority & 7, 3, "the kill is logged at err");
    assert_eq!(kill.reason.as_deref(), Some("Memory cgroup out of memory"));
    assert_eq!(kill.constraint(), Some(Constraint::MemoryCgroup));
    assert_eq!(kill.comm, "python3");
    assert_eq!(kill.uid, Some(0));
    // What the kernel counted at the kill: anonymous memory near the limit, never above.
    let anon = kill.anon_rss_bytes.unwrap();
    assert!((LIMIT / 2..=LIMIT).contains(&anon), "anon-rss {anon}");
    assert!(kill.total_vm_bytes.unwrap() > anon);
    // The cgroup's own count agrees that one process was killed there.
    let control = std::fs::read_to_string(cg.dir.join("memory.oom_control")).unwrap();
    let kills: u64 = control
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .map(|n| n.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no oom_kill in memory.oom_control: {control}"));
    assert_eq!(kills, 1);
}
