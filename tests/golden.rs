//! The real binary on the captured fixture tree (tests/fixtures/README.md), diffed against
//! a golden file and linted by promtool, node_exporter style.

use crate::common;

use common::*;
use std::path::Path;

/// Self metrics that change from run to run.
const VOLATILE: [&str; 11] = [
    "process_",
    "membloat_deep_cpu_seconds_total",
    "membloat_heap_walk_cpu_seconds_total",
    "membloat_scan_slowest_process_read_seconds",
    "membloat_deep_scan_duration_seconds",
    "membloat_deep_scan_cpu_seconds",
    "membloat_last_scan_timestamp_seconds",
    "membloat_oom_last_victim_measured_timestamp_seconds",
    "membloat_scan_duration_seconds",
    "membloat_scrape_collector_duration_seconds",
    "membloat_build_info",
];

fn stable(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let name = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .unwrap_or(l);
            !VOLATILE.iter().any(|v| name.starts_with(v))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn fixture_exposition_matches_golden_and_passes_promtool() {
    let text = once(&fixture(), &[]);
    promtool_check(&text);
    let got = stable(&text);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden.prom");
    if std::env::var_os("MEMBLOAT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want =
        std::fs::read_to_string(&golden).expect("golden.prom (MEMBLOAT_UPDATE_GOLDEN=1 makes it)");
    if got != want {
        let diff: Vec<String> = diff_lines(&want, &got);
        panic!(
            "exposition differs from golden.prom (MEMBLOAT_UPDATE_GOLDEN=1 regenerates):\n{}",
            diff.join("\n")
        );
    }
}

fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let w: std::collections::BTreeSet<&str> = want.lines().collect();
    let g: std::collections::BTreeSet<&str> = got.lines().collect();
    w.difference(&g)
        .map(|l| format!("- {l}"))
        .chain(g.difference(&w).map(|l| format!("+ {l}")))
        .take(40)
        .collect()
}

#[test]
fn the_fixture_kill_is_joined_with_what_the_scan_read_of_its_victim() {
    let text = once(&fixture(), &[]);
    // The kernel log is a regular file here, read once: its kill counted once, with the
    // kernel's anon-rss and what the scan read of pid 18266 (VmRSS 79072 kB); its record
    // that is no record counted once.
    assert_eq!(
        value(
            &text,
            "membloat_oom_kills_total{constraint=\"memory_cgroup\",group=\"python3\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_oom_last_victim_killed_bytes{kind=\"anon_rss\"}"
        ),
        Some(72424.0 * 1024.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_oom_last_victim_measured_bytes{kind=\"rss\"}"
        ),
        Some(79072.0 * 1024.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"kmsg\",reason=\"malformed\"}"
        ),
        Some(1.0)
    );
    // btime 1795282885 plus 900 s.
    assert_eq!(
        value(&text, "membloat_oom_last_victim_timestamp_seconds"),
        Some(1795283785.0)
    );
}

#[test]
fn fixture_values_are_in_bytes_and_bad_input_is_counted() {
    let text = once(&fixture(), &[]);
    // --once scans twice, so each bad input is counted twice.
    // meminfo: kB -> bytes; the absurd SwapFree is dropped, not wrapped.
    assert_eq!(
        value(&text, "membloat_memory_total_bytes"),
        Some(24684084.0 * 1024.0)
    );
    assert_eq!(value(&text, "membloat_swap_free_bytes"), None);
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"meminfo\",reason=\"malformed\"}"
        ),
        Some(2.0)
    );
    // Truncated stat (90001) in both scans, absurd VmSwap (90004) in the first only: its
    // statm is unchanged, so the second scan keeps the status it read. 90002 vanished.
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"processes\",reason=\"malformed\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"processes\",reason=\"vanished\"}"
        ),
        Some(2.0)
    );
    // 1406, 18265, 18266, 90003, 90004 have memory; the kworker does not count.
    assert_eq!(value(&text, "membloat_processes_scanned"), Some(5.0));
    assert!(!text.contains("kworker"));
    // The python3 holding 64 MiB: RSS 79072 kB, its own group.
    let python = "{pid=\"18266\",comm=\"python3\"}";
    assert_eq!(
        value(&text, "membloat_group_resident_bytes{group=\"python3\"}"),
        Some(79072.0 * 1024.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("membloat_process_resident_anon_bytes{python}")
        ),
        Some(72424.0 * 1024.0)
    );
    // It is the one deep-tier candidate (RssAnon >= 64 MiB); its smaps gives a commit
    // charge that covers at least its anonymous memory, and it has no glibc arena heaps.
    assert_eq!(value(&text, "membloat_deep_scan_candidates"), Some(1.0));
    let commit = value(&text, &format!("membloat_process_commit_bytes{python}")).unwrap();
    assert!(commit >= 72424.0 * 1024.0, "commit {commit}");
    assert_eq!(
        value(&text, &format!("membloat_process_arena_heaps{python}")),
        Some(0.0)
    );
    // 90004 is kept without its absurd VmSwap.
    assert_eq!(
        value(&text, "membloat_group_processes{group=\"sleep\"}"),
        Some(2.0)
    );
    // Hidden THP memory: 3 partially mapped 2 MiB pages.
    assert_eq!(
        value(&text, "membloat_thp_hidden_bytes"),
        Some(3.0 * 2097152.0)
    );
    assert_eq!(
        value(&text, "membloat_khugepaged_max_ptes_none"),
        Some(511.0)
    );
    assert_eq!(
        value(&text, "membloat_khugepaged_scan_sleep_seconds"),
        Some(10.0)
    );
    assert!(text.contains("membloat_thp_settings_info{enabled=\"madvise\",defrag=\"madvise\",shmem_enabled=\"never\"} 1\n"));
    // commit ratio = Committed_AS / CommitLimit of the captured meminfo.
    let ratio = value(&text, "membloat_commit_ratio").unwrap();
    let expect = value(&text, "membloat_memory_committed_bytes").unwrap()
        / value(&text, "membloat_memory_commit_limit_bytes").unwrap();
    assert!((ratio - expect).abs() < 1e-12, "{ratio} vs {expect}");
}

#[test]
fn hostile_name_in_fixture_is_escaped_in_both_formats() {
    let text = once(&fixture(), &[]);
    assert!(
        text.contains("membloat_group_processes{group=\"x\\\"} 1\\nevil 9\\n#\"} 1\n"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("evil")));
}

fn copy_tree(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// What a broken kernel could print: a vmstat key twice, pid directories that are not
/// written as the kernel writes pids, a mapping whose Size is absurd. The exposition stays
/// valid (one family per name, one series per process) and each problem is counted.
#[test]
fn malformed_kernel_output_keeps_the_exposition_valid_and_is_counted() {
    let malformed = |text: &str, collector: &str| {
        let series =
            format!("membloat_scan_errors_total{{collector=\"{collector}\",reason=\"malformed\"}}");
        value(text, &series).unwrap_or(0.0)
    };
    let base = once(&fixture(), &[]);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    copy_tree(&fixture(), &root);
    let proc = root.join("proc");
    let mut vmstat = std::fs::read_to_string(proc.join("vmstat")).unwrap();
    vmstat.push_str("oom_kill 7\nthp_fault_alloc 1\n");
    std::fs::write(proc.join("vmstat"), vmstat).unwrap();
    copy_tree(&proc.join("18266"), &proc.join("018266"));
    copy_tree(&proc.join("18265"), &proc.join("+18265"));
    let smaps = std::fs::read_to_string(proc.join("18266/smaps")).unwrap();
    let heap = smaps.find("[heap]").unwrap();
    let size = heap + smaps[heap..].find("Size:").unwrap();
    let end = size + smaps[size..].find('\n').unwrap();
    let absurd = format!(
        "{}Size: 18014398509481983 kB{}",
        &smaps[..size],
        &smaps[end..]
    );
    std::fs::write(proc.join("18266/smaps"), absurd).unwrap();

    let text = once(&root, &[]);
    promtool_check(&text);
    assert_eq!(
        text.matches("# HELP membloat_vmstat_oom_kill_total ")
            .count(),
        1
    );
    assert_eq!(
        value(&text, "membloat_vmstat_oom_kill_total"),
        Some(0.0),
        "the first is kept"
    );
    let rss = text
        .lines()
        .filter(|l| l.starts_with("membloat_process_resident_bytes{pid=\"18266\""))
        .count();
    assert_eq!(rss, 1, "one series for pid 18266");
    assert!(!text.contains("pid=\"018266\"") && !text.contains("pid=\"+18265\""));
    // --once scans twice: two duplicated keys and two odd pids a scan; the deep tier
    // reads 18266's smaps once and rejects its absurd Size.
    assert_eq!(malformed(&text, "vmstat") - malformed(&base, "vmstat"), 4.0);
    assert_eq!(
        malformed(&text, "processes") - malformed(&base, "processes"),
        5.0
    );
    assert_eq!(
        value(
            &text,
            "membloat_process_heap_size_bytes{pid=\"18266\",comm=\"python3\"}"
        ),
        Some(0.0),
        "the absurd Size is dropped, not summed"
    );
}

/// The real binary with a cap of one group: the largest stays, the rest are `other`.
#[test]
fn max_groups_folds_the_smaller_groups_into_other() {
    let all = once(&fixture(), &[]);
    let groups = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("membloat_group_processes{group=\""))
            .map(|l| l.split('"').next().unwrap().to_string())
            .collect()
    };
    let before = groups(&all);
    assert!(before.len() >= 3, "{before:?}");
    let capped = once(&fixture(), &["--collector.processes.max-groups=1"]);
    promtool_check(&capped);
    let after = groups(&capped);
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.contains(&"other".to_string()));
    assert_eq!(
        value(&capped, "membloat_groups_folded"),
        Some(before.len() as f64 - 1.0)
    );
    let processes = |text: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("membloat_group_processes{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(processes(&capped), processes(&all), "no process lost");
    assert_eq!(value(&all, "membloat_groups_folded"), Some(0.0));
}

/// A kernel without THP or PSI is not a failing collector: `MembloatCollectorFailing`
/// (`success == 0`) would fire forever on such hosts. It is counted as unsupported.
#[test]
fn kernel_without_thp_or_psi_is_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    copy_tree(&fixture(), &root);
    std::fs::remove_dir_all(root.join("sys/kernel/mm/transparent_hugepage")).unwrap();
    std::fs::remove_dir_all(root.join("proc/pressure")).unwrap();
    let text = once(&root, &[]);
    promtool_check(&text);
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"thp\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"pressure\"}"
        ),
        Some(1.0)
    );
    // Two scans in --once, one per scan.
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"thp\",reason=\"unsupported\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"meminfo\"}"
        ),
        Some(1.0)
    );
    assert!(!text.contains("membloat_khugepaged"));
    assert!(!text.contains("membloat_thp_hidden_bytes"));
}

#[test]
fn group_by_cgroup_uses_the_memory_controller_path() {
    let text = once(&fixture(), &["--collector.processes.group-by=cgroup"]);
    promtool_check(&text);
    // All captured processes sit in one v1 memory cgroup.
    let group = "membloat_group_processes{group=\"/process_api/b28b386e67c6a598b8f53cf6a9036230\"}";
    assert_eq!(value(&text, group), Some(5.0), "{text}");
}

#[test]
fn group_by_matcher_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("matchers.yml");
    std::fs::write(&file, "process_names:\n  - name: \"py:{{.Comm}}\"\n    exe: [python3]\n  - comm: [sleep]\n    name: sleepers\n").unwrap();
    let flag = format!("--collector.processes.matcher-file={}", file.display());
    let text = once(&fixture(), &[&flag]);
    assert_eq!(
        value(&text, "membloat_group_processes{group=\"py:python3\"}"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "membloat_group_processes{group=\"sleepers\"}"),
        Some(2.0)
    );
    // bash matches no entry: in no group, yet still a top process.
    assert!(!text.contains("group=\"bash\""));
    assert!(text.contains("comm=\"bash\""));
}

#[test]
fn disabled_collectors_are_not_read() {
    let text = once(
        &fixture(),
        &["--no-collector.processes", "--no-collector.vmstat"],
    );
    assert!(!text.contains("collector=\"processes\""));
    assert!(!text.contains("membloat_vmstat_"));
    assert!(!text.contains("membloat_group_"));
    assert!(text.contains("membloat_memory_total_bytes"));
}

/// Family names in a text exposition, from its `# TYPE` lines.

#[test]
fn cgroup_v2_reports_leaf_cgroups_only_so_nothing_is_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    copy_tree(&fixture(), &root);
    let cg = root.join("sys/fs/cgroup");
    std::fs::remove_dir_all(&cg).unwrap();
    // A v2 tree as on a systemd host: parents' memory.stat include their children.
    let write = |rel: &str, text: &str| {
        let p = cg.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("cgroup.controllers", "cpu io memory pids\n");
    write("system.slice/memory.stat", "anon 300\nfile 0\nanon_thp 0\n");
    write(
        "system.slice/a.service/memory.stat",
        "anon 100\nfile 0\nanon_thp 0\n",
    );
    write(
        "system.slice/b.service/memory.stat",
        "anon 200\nfile 0\nanon_thp 0\n",
    );
    write(
        "kubepods/pod1/ctr/memory.stat",
        "anon 4194304\nfile 0\nanon_thp 2097152\n",
    );
    write(
        "kubepods/pod1/memory.stat",
        "anon 4194304\nfile 0\nanon_thp 2097152\n",
    );
    let text = once(&root, &[]);
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("membloat_cgroup_anon_bytes"))
        .collect();
    assert_eq!(
        series,
        [
            "membloat_cgroup_anon_bytes{cgroup=\"/kubepods/pod1/ctr\"} 4194304",
            "membloat_cgroup_anon_bytes{cgroup=\"/system.slice/a.service\"} 100",
            "membloat_cgroup_anon_bytes{cgroup=\"/system.slice/b.service\"} 200",
        ]
    );
    assert_eq!(
        value(
            &text,
            "membloat_cgroup_anon_huge_bytes{cgroup=\"/kubepods/pod1/ctr\"}"
        ),
        Some(2097152.0)
    );
}

/// cgroup v2's own figures of a container, as its files say: peak, the high and max
/// events, its memory pressure in seconds, its bounds, protections and swap, and its
/// pod's charge of removed containers. A kernel without memory.peak (5.10) or
/// without PSI (psi=0) has no such series and no error; an unparseable memory.pressure is
/// counted as malformed and the container's other series stay.
#[test]
fn cgroup_v2_peak_events_pressure_and_bounds_are_the_files_values() {
    let dir = tempfile::tempdir().unwrap();
    let root = v2_fixture(dir.path());
    let series = |m: &str| format!("{m}{{cgroup=\"/{V2_CONTAINER}\"}}");
    let text = once(&root, &[]);
    for (metric, want) in [
        ("membloat_cgroup_memory_peak_bytes", 130023424.0),
        ("membloat_cgroup_memory_usage_bytes", 115343360.0),
        ("membloat_cgroup_memory_limit_bytes", 134217728.0),
        ("membloat_cgroup_memory_high_events_total", 17.0),
        ("membloat_cgroup_memory_max_events_total", 42.0),
        ("membloat_cgroup_limit_ooms_total", 1.0),
        ("membloat_cgroup_oom_kills_total", 2.0),
        (
            "membloat_cgroup_pressure_memory_waiting_seconds_total",
            2.75,
        ),
        (
            "membloat_cgroup_pressure_memory_stalled_seconds_total",
            1.25,
        ),
    ] {
        assert_eq!(value(&text, &series(metric)), Some(want), "{metric}");
    }
    // Its bounds as their files say (max: absent), and its pod's charge of removed
    // containers: its usage less its live child's.
    for (metric, want) in [
        ("membloat_cgroup_memory_high_bytes", Some(125829120.0)),
        ("membloat_cgroup_memory_min_bytes", Some(0.0)),
        ("membloat_cgroup_memory_low_bytes", Some(16777216.0)),
        ("membloat_cgroup_swap_bytes", Some(4096.0)),
        ("membloat_cgroup_swap_limit_bytes", Some(268435456.0)),
        ("membloat_cgroup_zswap_bytes", Some(0.0)),
        ("membloat_cgroup_zswap_limit_bytes", Some(67108864.0)),
        ("membloat_cgroup_dying_descendants", Some(0.0)),
    ] {
        assert_eq!(value(&text, &series(metric)), want, "{metric}");
    }
    let pod = V2_CONTAINER.rsplit_once('/').unwrap().0;
    let of_pod = |m: &str| value(&text, &format!("{m}{{cgroup=\"/{pod}\"}}"));
    assert_eq!(
        of_pod("membloat_cgroup_removed_descendants_bytes"),
        Some(8388608.0)
    );
    assert_eq!(of_pod("membloat_cgroup_dying_descendants"), Some(3.0));
    assert_eq!(
        of_pod("membloat_cgroup_memory_usage_bytes"),
        None,
        "not a container"
    );
    // The container's sheet sums to its usage: no kernel parts named, so kernel_other is
    // all of v2's kernel.
    let row = |r: &str| {
        value(
            &text,
            &format!("membloat_cgroup_memory_bytes{{cgroup=\"/{V2_CONTAINER}\",row=\"{r}\"}}"),
        )
    };
    assert_eq!(row("kernel_other"), Some(1048576.0));
    assert_eq!(
        row("unexplained"),
        Some(115343360.0 - 104857600.0 - 8388608.0 - 1048576.0)
    );
    promtool_check(&text);
    let malformed = "membloat_scan_errors_total{collector=\"cgroup\",reason=\"malformed\"}";
    assert_eq!(value(&text, malformed).unwrap_or(0.0), 0.0);

    // 5.10: no memory.peak; psi=0: no memory.pressure.
    let ctr = root.join("sys/fs/cgroup").join(V2_CONTAINER);
    std::fs::remove_file(ctr.join("memory.peak")).unwrap();
    std::fs::remove_file(ctr.join("memory.pressure")).unwrap();
    let text = once(&root, &[]);
    for metric in [
        "membloat_cgroup_memory_peak_bytes",
        "membloat_cgroup_pressure_memory_waiting_seconds_total",
        "membloat_cgroup_pressure_memory_stalled_seconds_total",
    ] {
        assert_eq!(value(&text, &series(metric)), None, "{metric}");
        assert!(
            !text.lines().any(|l| l.starts_with(&format!("{metric}{{"))),
            "{metric}"
        );
    }
    assert_eq!(value(&text, malformed).unwrap_or(0.0), 0.0);
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"cgroup\"}"
        ),
        Some(1.0)
    );

    // A pressure file that is not PSI's: counted, and the rest of the container stays.
    std::fs::write(ctr.join("memory.pressure"), "some total=soon\n").unwrap();
    let text = once(&root, &[]);
    // Once per scan that read it.
    let scans = value(&text, "membloat_scans_total");
    assert!(scans >= Some(1.0));
    assert_eq!(value(&text, malformed), scans);
    assert_eq!(
        value(&text, &series("membloat_cgroup_memory_max_events_total")),
        Some(42.0)
    );
}

/// Container cgroups from containerd, CRI-O and Docker under cgroup v1 and v2, and systemd
/// units: `membloat_cgroup_info` names the pod UID, container ID, runtime and QoS class a
/// user joins with kube-state-metrics (docs/kubernetes.md).
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one cgroup path per container runtime, each with its expected labels"
)]
fn cgroup_paths_of_every_runtime_give_labels_to_join_on() {
    let uid = "0d5b3b24-5f6a-4c1e-9a0b-3c2d1e0f9a8b";
    let u = uid.replace('-', "_");
    let (c1, c2, c3) = ("a1".repeat(32), "b2".repeat(32), "c3".repeat(32));
    let v1 = [
        format!("kubepods/burstable/pod{uid}/{c1}"),
        format!("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{c2}.scope"),
        format!("docker/{c3}"),
        "system.slice/nginx.service".to_string(),
    ];
    let v2 = [
        format!("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{c1}.scope"),
        format!("kubepods.slice/kubepods-pod{u}.slice/docker-{c2}.scope"),
        format!("system.slice/docker-{c3}.scope"),
        "system.slice/sshd.service".to_string(),
    ];
    let info = |path: &str, pod: &str, cid: &str, rt: &str, qos: &str, unit: &str| {
        format!("membloat_cgroup_info{{cgroup=\"/{path}\",pod_uid=\"{pod}\",container_id=\"{cid}\",runtime=\"{rt}\",qos_class=\"{qos}\",systemd_unit=\"{unit}\"}} 1")
    };
    for (version, paths, want) in [
        (
            "v1",
            &v1,
            vec![
                info(&v1[0], uid, &c1, "", "burstable", ""),
                info(&v1[1], uid, &c2, "cri-o", "besteffort", ""),
                info(&v1[2], "", &c3, "docker", "", ""),
                info(&v1[3], "", "", "", "", "nginx.service"),
            ],
        ),
        (
            "v2",
            &v2,
            vec![
                info(&v2[0], uid, &c1, "containerd", "burstable", ""),
                info(&v2[1], uid, &c2, "docker", "guaranteed", ""),
                info(&v2[2], "", &c3, "docker", "", ""),
                info(&v2[3], "", "", "", "", "sshd.service"),
            ],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = fixture_copy(dir.path());
        let cgroup = root.join("sys/fs/cgroup");
        std::fs::remove_dir_all(&cgroup).unwrap();
        let base = if version == "v1" {
            cgroup.join("memory")
        } else {
            std::fs::create_dir_all(&cgroup).unwrap();
            std::fs::write(cgroup.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
            cgroup.clone()
        };
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("memory.stat"), "rss 4096\nanon 4096\n").unwrap();
        for p in paths.iter() {
            let d = base.join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("memory.stat"),
                "rss 1048576\nrss_huge 0\nanon 1048576\nanon_thp 0\n",
            )
            .unwrap();
            // The OOM counters: v2 tells limit OOMs (oom) from kills (oom_kill).
            let (file, text) = if version == "v1" {
                (
                    "memory.oom_control",
                    "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
                )
            } else {
                ("memory.events", "low 0\nhigh 0\nmax 9\noom 1\noom_kill 2\n")
            };
            std::fs::write(d.join(file), text).unwrap();
        }
        let text = once(&root, &[]);
        let kills = format!(
            "membloat_cgroup_oom_kills_total{{cgroup=\"/{}\"}}",
            paths[0]
        );
        let limit = format!(
            "membloat_cgroup_limit_ooms_total{{cgroup=\"/{}\"}}",
            paths[0]
        );
        if version == "v1" {
            assert_eq!(value(&text, &kills), Some(3.0));
            assert_eq!(value(&text, &limit), None, "v1 has no limit OOM counter");
        } else {
            assert_eq!(value(&text, &kills), Some(2.0));
            assert_eq!(value(&text, &limit), Some(1.0));
        }
        promtool_check(&text);
        let got: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("membloat_cgroup_info{"))
            .collect();
        for w in &want {
            assert!(
                got.contains(&w.as_str()),
                "{version}: no {w} in\n{}",
                got.join("\n")
            );
        }
        // Intermediate cgroups that name a pod (v1 walks every cgroup) may add lines; none
        // names a container it does not hold.
        for g in &got {
            assert!(!g.contains("container_id=\"\",runtime=\"docker\""), "{g}");
        }
    }
}

/// Every PromQL example of docs/kubernetes.md parses.
#[test]
fn the_kubernetes_joins_parse() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/kubernetes.md"))
            .unwrap();
    let blocks: Vec<&str> = doc
        .split("```promql\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .collect();
    assert!(blocks.len() >= 5);
    for b in blocks {
        promql_parser::parser::parse(b).unwrap_or_else(|e| panic!("{e}:\n{b}"));
        assert!(b.contains("membloat_cgroup_info"), "{b}");
    }
}
