//! One test per wording of the OOM killer, each saying where the line comes from: this
//! machine's kernel for what it can produce, and otherwise the format strings of
//! `mm/oom_kill.c` and `mm/memcontrol.c` at the kernel version named, filled in.

use super::*;

const MIB: u64 = 1 << 20;

fn kill_of(message: &str) -> Kill {
    match oom_line(message) {
        Some(OomLine::Kill(k)) => k,
        other => panic!("not a kill: {other:?}"),
    }
}

fn summary_of(message: &str) -> Summary {
    match oom_line(message) {
        Some(OomLine::Summary(s)) => s,
        other => panic!("not a summary: {other:?}"),
    }
}

/// Read from `/dev/kmsg` on the test machine (kernel 6.18, cgroup v1) after
/// tests/phenomena.rs had a process killed at a memory cgroup's limit.
#[test]
fn a_memory_cgroup_kill_on_kernel_6_18() {
    let summary = "6,426,1574183335,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/membloat-test-oom-14951,task_memcg=/membloat-test-oom-14951,task=python3,pid=14955,uid=0\n";
    let killed = "3,427,1574183358,-;Memory cgroup out of memory: Killed process 14955 (python3) total-vm:147640kB, anon-rss:32384kB, file-rss:6216kB, shmem-rss:0kB, UID:0 pgtables:128kB oom_score_adj:0\n";
    let r = record(summary).unwrap();
    assert_eq!((r.priority, r.sequence, r.micros), (6, 426, 1_574_183_335));
    assert_eq!(r.continuation, Continuation::Whole);
    assert_eq!(
        summary_of(r.message),
        Summary {
            constraint: Constraint::MemoryCgroup,
            oom_memcg: Some("/membloat-test-oom-14951".into()),
            task_memcg: Some("/membloat-test-oom-14951".into()),
            task: "python3".into(),
            pid: 14955,
            uid: Some(0),
        }
    );
    let r = record(killed).unwrap();
    assert_eq!(r.priority, 3);
    assert_eq!(
        kill_of(r.message),
        Kill {
            reason: Some("Memory cgroup out of memory".into()),
            pid: 14955,
            comm: "python3".into(),
            total_vm_bytes: Some(147_640 * 1024),
            anon_rss_bytes: Some(32_384 * 1024),
            file_rss_bytes: Some(6_216 * 1024),
            shmem_rss_bytes: Some(0),
            uid: Some(0),
            pgtables_bytes: Some(128 * 1024),
            oom_score_adj: Some(0),
        }
    );
    assert_eq!(
        kill_of(r.message).constraint(),
        Some(Constraint::MemoryCgroup)
    );
    // The other lines of the report are not OOM lines.
    for other in [
        "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        " oom_kill_process.cold+0x8/0x8a",
        "Memory cgroup stats for /membloat-test-oom-14951:",
        "oom_reaper: reaped process 14955 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    ] {
        assert_eq!(oom_line(other), None, "{other}");
    }
}

/// A host-wide kill, kernels 5.1 to 6.x: `dump_oom_summary` (constraint, nodemask, cpuset,
/// mems_allowed, then `mem_cgroup_print_oom_context`'s `,global_oom,task_memcg=`) and
/// `__oom_kill_process`'s `"%s: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB,
/// file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd"` with the
/// message "Out of memory" (Android common kernel 5.10, mm/oom_kill.c).
#[test]
fn a_host_wide_kill_on_kernels_5_and_6() {
    let s = summary_of("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/session-2.scope,task=stress-ng,pid=2211,uid=1000");
    assert_eq!(s.constraint, Constraint::Host);
    assert_eq!(s.oom_memcg, None);
    assert_eq!(
        s.task_memcg.as_deref(),
        Some("/user.slice/user-1000.slice/session-2.scope")
    );
    assert_eq!(
        (s.task.as_str(), s.pid, s.uid),
        ("stress-ng", 2211, Some(1000))
    );
    let k = kill_of("Out of memory: Killed process 2211 (stress-ng) total-vm:4204888kB, anon-rss:3995104kB, file-rss:4kB, shmem-rss:0kB, UID:1000 pgtables:7876kB oom_score_adj:0");
    assert_eq!(k.constraint(), Some(Constraint::Host));
    assert_eq!(k.anon_rss_bytes, Some(3_995_104 * 1024));
    assert_eq!(k.uid, Some(1000));
    let k = kill_of("Out of memory (oom_kill_allocating_task): Killed process 7 (a) total-vm:8kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:-17");
    assert_eq!(k.constraint(), Some(Constraint::Host));
    assert_eq!(k.oom_score_adj, Some(-17));
}

/// A Kubernetes container at its limit on cgroup v2 (same format strings): the cgroup
/// paths are systemd slices, and `mems_allowed` a node list that holds commas.
#[test]
fn a_container_kill_on_cgroup_v2() {
    let scope = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e.slice/cri-containerd-4f2a.scope";
    let s = summary_of(&format!(
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri-containerd-4f2a.scope,mems_allowed=0-1,3,oom_memcg={scope},task_memcg={scope},task=java,pid=9001,uid=1001"
    ));
    assert_eq!(s.constraint, Constraint::MemoryCgroup);
    assert_eq!(s.oom_memcg.as_deref(), Some(scope));
    assert_eq!(s.task_memcg.as_deref(), Some(scope));
    assert_eq!((s.task.as_str(), s.pid, s.uid), ("java", 9001, Some(1001)));
    let k = kill_of("Memory cgroup out of memory: Killed process 9001 (java) total-vm:9872344kB, anon-rss:2095104kB, file-rss:18224kB, shmem-rss:0kB, UID:1001 pgtables:4624kB oom_score_adj:936");
    assert_eq!(k.oom_score_adj, Some(936));
    assert!(k.anon_rss_bytes.unwrap() > 2000 * MIB);
}

/// Kernel 4.19 (mm/oom_kill.c, mm/memcontrol.c of a 4.19 tree): the choice names the
/// reason, the kill has four sizes and no reason, the memory cgroups come in a line of
/// their own.
#[test]
fn a_memory_cgroup_kill_on_kernel_4_19() {
    match oom_line(
        "Memory cgroup out of memory: Kill process 4242 (python3) score 1001 or sacrifice child",
    ) {
        Some(OomLine::Choice(c)) => {
            assert_eq!(c.constraint, Constraint::MemoryCgroup);
            assert_eq!((c.pid, c.comm.as_str()), (4242, "python3"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        oom_line("Task in /docker/8b1c killed as a result of limit of /docker/8b1c"),
        Some(OomLine::MemcgLimit {
            task_memcg: "/docker/8b1c".into(),
            oom_memcg: "/docker/8b1c".into()
        })
    );
    let k = kill_of("Killed process 4242 (python3) total-vm:1261868kB, anon-rss:1046996kB, file-rss:5244kB, shmem-rss:0kB");
    assert_eq!(k.reason, None);
    assert_eq!(k.constraint(), None);
    assert_eq!(k.anon_rss_bytes, Some(1_046_996 * 1024));
    assert_eq!(
        (k.uid, k.pgtables_bytes, k.oom_score_adj),
        (None, None, None)
    );
    match oom_line("Out of memory: Kill process 1 (a b) score 900 or sacrifice child") {
        Some(OomLine::Choice(c)) => {
            assert_eq!(c.constraint, Constraint::Host);
            assert_eq!(c.comm, "a b");
        }
        other => panic!("{other:?}"),
    }
}

/// Red Hat's 3.10 kernels: `Killed process PID (COMM), UID N, total-vm:…` (the shape seen in
/// public bug reports from RHEL 7 and CentOS 7 hosts).
#[test]
fn red_hat_3_10_puts_the_uid_first() {
    let k = kill_of("Killed process 3111 (memhog), UID 1000, total-vm:2101248kB, anon-rss:2048100kB, file-rss:120kB, shmem-rss:0kB");
    assert_eq!(
        (k.pid, k.comm.as_str(), k.uid),
        (3111, "memhog", Some(1000))
    );
    assert_eq!(k.anon_rss_bytes, Some(2_048_100 * 1024));
}

/// Some 4.20 to 5.2 kernels printed the memory cgroups of the summary with `pr_info`,
/// which starts a record of its own (fixed upstream by making it `pr_cont`).
#[test]
fn a_summary_split_in_two_records_is_joined() {
    let first = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0";
    let rest = ",oom_memcg=/a,task_memcg=/a/b,task=x,pid=5,uid=7";
    assert!(!continues_summary(first));
    assert!(continues_summary(rest));
    assert!(continues_summary(
        ",global_oom,task_memcg=/,task=x,pid=5,uid=7"
    ));
    let s = summary_of(&format!("{first}{rest}"));
    assert_eq!(s.oom_memcg.as_deref(), Some("/a"));
    assert_eq!(s.task_memcg.as_deref(), Some("/a/b"));
    assert_eq!((s.pid, s.uid), (5, Some(7)));
}

#[test]
fn names_with_parentheses_spaces_and_commas_stay_whole() {
    let k = kill_of("Out of memory: Killed process 77 (tmux: server) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0");
    assert_eq!(k.comm, "tmux: server");
    let k = kill_of("Out of memory: Killed process 78 (a) b)) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0");
    assert_eq!(k.comm, "a) b)");
    let s = summary_of("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=a,pid=3,b,pid=4,uid=0");
    assert_eq!((s.task.as_str(), s.pid), ("a,pid=3,b", 4));
}

#[test]
fn records_flags_dictionaries_and_bad_input() {
    let r = record("4,1,2,c;oom-kill:constraint=CONSTRAINT_NONE\n SUBSYSTEM=memory\n").unwrap();
    assert_eq!(r.continuation, Continuation::Begins);
    assert_eq!(r.message, "oom-kill:constraint=CONSTRAINT_NONE");
    assert_eq!(
        record("4,2,3,+;,global_oom").unwrap().continuation,
        Continuation::Continues
    );
    assert_eq!(record("6,3,4,-,caller=T1;x").unwrap().message, "x");
    assert_eq!(record("no semicolon"), Err(ParseError::Missing(";")));
    assert_eq!(record("x,1,2,-;m"), Err(ParseError::Malformed("priority")));
    assert_eq!(record("6,1;m"), Err(ParseError::Missing("microseconds")));
    // Absurd values are dropped, not trusted.
    let k = kill_of("Killed process 9 (x) total-vm:99999999999999999999kB, anon-rss:18446744073709551615kB, file-rss:1kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:5000");
    assert_eq!(
        (k.total_vm_bytes, k.anon_rss_bytes, k.oom_score_adj),
        (None, None, None)
    );
    assert_eq!(
        oom_line("Killed process x (y) total-vm:1kB, anon-rss:1kB"),
        None
    );
    assert_eq!(
        oom_line("oom-kill:constraint=CONSTRAINT_SOMETHING,task=a,pid=1"),
        None
    );
    // Numbers are digits as the kernel prints them (the fuzzer found `pid=+1` taken as 1).
    let plus = "oom-kill:constraint=CONSTRAINT_NONE,global_oom,task_memcg=/,task=a,pid=+1,uid=0";
    assert_eq!(oom_line(plus), None);
    assert_eq!(
        oom_line("Killed process +9 (x) total-vm:1kB, anon-rss:1kB"),
        None
    );
}

/// No prefix of a real line, nor any single byte changed in it, makes the parser panic.
#[test]
fn truncated_and_mangled_lines_never_panic() {
    let lines = [
        "3,427,1574183358,-;Memory cgroup out of memory: Killed process 14955 (python3) total-vm:147640kB, anon-rss:32384kB, file-rss:6216kB, shmem-rss:0kB, UID:0 pgtables:128kB oom_score_adj:0",
        "6,426,1574183335,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/m,task_memcg=/m,task=python3,pid=14955,uid=0",
        "3,1,1,-;Memory cgroup out of memory: Kill process 4242 (python3) score 1001 or sacrifice child",
    ];
    for line in lines {
        for end in 0..=line.len() {
            if let Ok(r) = record(&line[..end]) {
                let _ = oom_line(r.message);
            }
        }
        for at in 0..line.len() {
            for b in [b'(', b')', b',', b':', b' ', b'=', b';', b'9', b'\xff'] {
                let mut bytes = line.as_bytes().to_vec();
                bytes[at] = b;
                let text = String::from_utf8_lossy(&bytes);
                if let Ok(r) = record(&text) {
                    let _ = oom_line(r.message);
                }
            }
        }
    }
}

/// A process's own name and a file's name reach the kernel log in a segfault's line
/// (`show_signal_msg`: `COMM[PID]: segfault at ADDR ip IP sp SP error E in FILE[…]`), so a
/// tenant can write `: Killed process` text there: it is no kill, nor a choice, whatever
/// follows. Only the reasons the OOM killer prints stand before it.
#[test]
fn a_kill_written_by_a_process_into_the_log_is_no_kill() {
    let forged = [
        "x[4242]: segfault at 0 ip 0000000000401136 sp 00007ffc8f5e0a60 error 6 in x: Killed process 777 (postgres) total-vm:1024kB, anon-rss:512kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0[401000+1000]",
        "evil[1]: Out of memory: Killed process 777 (postgres) total-vm:1024kB, anon-rss:512kB, file-rss:0kB, shmem-rss:0kB",
        "x[4242]: segfault at 0 ip 0 sp 0 error 6 in y: Kill process 777 (postgres) score 900 or sacrifice child",
        "Out of memory (x[1]: segfault): Killed process 777 (postgres) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
    ];
    for line in forged {
        assert_eq!(oom_line(line), None, "{line}");
    }
    // Kernels before 4.19 name the cgroups of a memory cgroup kill in a line of their own;
    // a program named "Task in /a" (15 bytes, a whole comm) that segfaults in a file named
    // for the rest would write it too.
    let forged_limit = "Task in /a[4242]: segfault at 0 ip 0000000000401136 sp 00007ffc8f5e0a60 error 6 in x killed as a result of limit of /b[401000+1000]";
    assert_eq!(oom_line(forged_limit), None);
    assert_eq!(
        oom_line("Task in /docker/8b1c killed as a result of limit of /docker/8b1c"),
        Some(OomLine::MemcgLimit {
            task_memcg: "/docker/8b1c".into(),
            oom_memcg: "/docker/8b1c".into()
        })
    );
    // The kernel's own, each reason it prints.
    for reason in [
        "Out of memory",
        "Memory cgroup out of memory",
        "Out of memory (oom_kill_allocating_task)",
    ] {
        let k = kill_of(&format!("{reason}: Killed process 7 (a) total-vm:8kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0"));
        assert_eq!((k.pid, k.reason.as_deref()), (7, Some(reason)));
    }
}

mod assembler;
