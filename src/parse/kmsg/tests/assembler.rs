//! The assembler: the records of one kill made into one, across kernels' wordings.

use super::super::*;

/// The records of one kill, as `/dev/kmsg` gave them on this machine (kernel 6.18), with
/// the lines the kernel writes between the summary and the kill (the memory report).
#[test]
fn the_assembler_makes_one_kill_of_the_summary_and_the_kill_line() {
    let mut a = Assembler::default();
    let records = [
        "4,420,1574183100,-;python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n",
        "6,425,1574183330,-;Tasks state (memory values in pages):\n",
        "6,426,1574183335,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/membloat-test-oom-14951,task_memcg=/membloat-test-oom-14951,task=python3,pid=14955,uid=0\n",
        "3,427,1574183358,-;Memory cgroup out of memory: Killed process 14955 (python3) total-vm:147640kB, anon-rss:32384kB, file-rss:6216kB, shmem-rss:0kB, UID:0 pgtables:128kB oom_score_adj:0\n",
    ];
    let kills: Vec<OomKill> = records.iter().filter_map(|r| a.push(r)).collect();
    assert_eq!(kills.len(), 1);
    let k = &kills[0];
    assert_eq!((k.sequence, k.micros), (427, 1_574_183_358));
    assert_eq!(k.constraint, Some(Constraint::MemoryCgroup));
    assert_eq!(k.oom_memcg.as_deref(), Some("/membloat-test-oom-14951"));
    assert_eq!((k.kill.pid, k.kill.comm.as_str()), (14955, "python3"));
    assert_eq!(k.kill.anon_rss_bytes, Some(32_384 * 1024));
    // A kill line alone (a cursor placed between the two) still counts, by its reason.
    let alone = a.push(records[3]).unwrap();
    assert_eq!(alone.constraint, Some(Constraint::MemoryCgroup));
    assert_eq!(alone.oom_memcg, None);
    assert_eq!(a.malformed, 0);
    assert_eq!(a.push("not a record"), None);
    assert_eq!(a.malformed, 1);
    // The same lines written to /dev/kmsg by a process: the kernel gives them LOG_USER
    // (facility 1: priority 8 + level), or the facility the writer named, never 0.
    let mut a = Assembler::default();
    for facility in [1u32, 3, 23] {
        for r in &records {
            let (prio, rest) = r.split_once(',').unwrap();
            let prio: u32 = prio.parse().unwrap();
            let forged = format!("{},{rest}", facility * 8 + prio);
            assert_eq!(a.push(&forged), None, "{forged}");
        }
    }
    assert_eq!(a.malformed, 0);
}

/// Kernel 4.19's three lines (see `a_memory_cgroup_kill_on_kernel_4_19`) make one kill with
/// the cgroups of the middle line; a summary split in two records (4.20 to 5.2) is joined;
/// a line split with the `c` and `+` flags (before 4.9) is joined.
#[test]
fn the_assembler_joins_older_kernels_lines() {
    let mut a = Assembler::default();
    assert_eq!(a.push("3,1,10,-;Memory cgroup out of memory: Kill process 4242 (python3) score 1001 or sacrifice child\n"), None);
    assert_eq!(
        a.push("6,2,11,-;Task in /docker/8b1c killed as a result of limit of /docker/8b1c\n"),
        None
    );
    let k = a.push("3,3,12,-;Killed process 4242 (python3) total-vm:1261868kB, anon-rss:1046996kB, file-rss:5244kB, shmem-rss:0kB\n").unwrap();
    assert_eq!(k.constraint, Some(Constraint::MemoryCgroup));
    assert_eq!(k.task_memcg.as_deref(), Some("/docker/8b1c"));

    a.push(
        "6,4,20,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0\n",
    );
    a.push("6,5,21,-;,global_oom,task_memcg=/user.slice,task=java,pid=77,uid=1000\n");
    let k = a.push("3,6,22,-;Out of memory: Killed process 77 (java) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:4kB oom_score_adj:0\n").unwrap();
    assert_eq!(k.constraint, Some(Constraint::Host));
    assert_eq!(
        (k.oom_memcg, k.task_memcg.as_deref()),
        (None, Some("/user.slice"))
    );

    a.push("3,7,30,c;Out of memory: Killed process 78 (ja");
    let k = a
        .push("3,8,30,+;va) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB\n")
        .unwrap();
    assert_eq!((k.kill.pid, k.kill.comm.as_str()), (78, "java"));
    // A summary for another pid does not lend its cgroups to this kill.
    a.push("6,9,40,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a,task_memcg=/a,task=x,pid=5,uid=0\n");
    let k = a.push("3,10,41,-;Killed process 6 (y) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB\n").unwrap();
    assert_eq!((k.constraint, k.oom_memcg), (None, None));
}

/// A `memory.oom.group` kill as Debian's 6.1 logged it (captured by tests/kernels.rs): the
/// summary and the chosen victim, the group line, then every member, the first victim
/// again among them. Five processes, five kills: the repeat is not counted, and each
/// member carries the group's cgroup and constraint.
#[test]
fn a_group_kill_is_one_kill_per_process_with_the_groups_cgroup() {
    let records = [
        "6,489,66129905,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2222.slice/cri-containerd-efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef.scope,task_memcg=/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2222.slice/cri-containerd-efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef.scope,task=vmgrouphog,pid=209,uid=0\n",
        "3,490,66130064,-;Memory cgroup out of memory: Killed process 209 (vmgrouphog) total-vm:84396kB, anon-rss:64540kB, file-rss:1176kB, shmem-rss:12kB, UID:0 pgtables:176kB oom_score_adj:0\n",
        "6,491,66130571,-;Tasks in /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2222.slice/cri-containerd-efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef.scope are going to be killed due to memory.oom.group set\n",
        "3,492,66130708,-;Memory cgroup out of memory: Killed process 204 (vmmember0) total-vm:10664kB, anon-rss:8048kB, file-rss:1024kB, shmem-rss:8kB, UID:0 pgtables:64kB oom_score_adj:0\n",
        "3,493,66131351,-;Memory cgroup out of memory: Killed process 205 (vmmember1) total-vm:10664kB, anon-rss:8296kB, file-rss:1160kB, shmem-rss:12kB, UID:0 pgtables:60kB oom_score_adj:0\n",
        "3,494,66134259,-;Memory cgroup out of memory: Killed process 206 (vmmember2) total-vm:10664kB, anon-rss:8292kB, file-rss:1232kB, shmem-rss:12kB, UID:0 pgtables:64kB oom_score_adj:0\n",
        "3,495,66135022,-;Memory cgroup out of memory: Killed process 207 (vmmember3) total-vm:10664kB, anon-rss:8292kB, file-rss:1180kB, shmem-rss:12kB, UID:0 pgtables:60kB oom_score_adj:0\n",
        "3,496,66135450,-;Memory cgroup out of memory: Killed process 209 (vmgrouphog) total-vm:84396kB, anon-rss:64540kB, file-rss:1176kB, shmem-rss:12kB, UID:0 pgtables:176kB oom_score_adj:0\n",
    ];
    let mut a = Assembler::default();
    let kills: Vec<OomKill> = records.iter().filter_map(|r| a.push(r)).collect();
    let pids: Vec<u32> = kills.iter().map(|k| k.kill.pid).collect();
    assert_eq!(pids, [209, 204, 205, 206, 207]);
    let ctr = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2222.slice/cri-containerd-efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef.scope";
    for k in &kills {
        assert_eq!(
            k.constraint,
            Some(Constraint::MemoryCgroup),
            "{}",
            k.kill.pid
        );
        assert_eq!(k.oom_memcg.as_deref(), Some(ctr));
        assert_eq!(k.task_memcg.as_deref(), Some(ctr));
    }
    assert_eq!(kills[4].kill.comm, "vmmember3");
    assert_eq!(kills[1].kill.anon_rss_bytes, Some(8048 * 1024));
    assert_eq!(a.malformed, 0);
    // The next OOM's summary ends the group: its kill is its own, with its own cgroup.
    a.push("6,497,70000000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/b,task_memcg=/b,task=x,pid=209,uid=0\n");
    let k = a.push("3,498,70000001,-;Memory cgroup out of memory: Killed process 209 (x) total-vm:10kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n").unwrap();
    assert_eq!(k.oom_memcg.as_deref(), Some("/b"));
    // A group line without a kill before it (a cursor placed between them) still groups
    // the members' kills under its cgroup.
    let mut a = Assembler::default();
    a.push(records[2]);
    let k = a.push(records[3]).unwrap();
    assert_eq!(
        (k.kill.pid, k.task_memcg.as_deref(), k.oom_memcg),
        (204, Some(ctr), None)
    );
}
