use super::*;

#[test]
fn the_pods_cgroup_is_named_as_the_kubelet_names_it() {
    assert_eq!(pods_cgroup(None, None), "/kubepods");
    assert_eq!(pods_cgroup(Some("/"), Some("cgroupfs")), "/kubepods");
    assert_eq!(pods_cgroup(Some("/custom/"), None), "/custom/kubepods");
    assert_eq!(pods_cgroup(None, Some("systemd")), "/kubepods.slice");
    assert_eq!(
        pods_cgroup(Some("/a.slice/a-b.slice"), Some("systemd")),
        "/a.slice/a-b.slice/a-b-kubepods.slice"
    );
}

#[test]
fn the_working_set_parts_sum_to_it_and_headroom_is_signed() {
    let s = Signal {
        name: "allocatableMemory.available",
        capacity: 1000,
        usage: 900,
        inactive_file: 100,
        active_file: 300,
        slab_reclaimable: Some(50),
        thresholds: vec![("hard", 250)],
    };
    assert_eq!(s.working_set(), 800);
    assert_eq!(s.available(), 200);
    let k = Kubelet {
        pid: 7,
        from: "config",
        pods: "/kubepods".into(),
        signals: vec![s],
    };
    let f = k.families();
    let values = |name: &str| -> Vec<(String, Value)> {
        f.iter()
            .filter(|f| f.metric.name == name)
            .flat_map(|f| f.samples.iter().map(|(l, v)| (format!("{l:?}"), *v)))
            .collect()
    };
    let parts = values("membloat_kubelet_working_set_bytes");
    let sum: u64 = parts
        .iter()
        .map(|(_, v)| match v {
            Value::U(u) => *u,
            _ => panic!("{v:?}"),
        })
        .sum();
    assert_eq!(sum, 800, "{parts:?}");
    assert_eq!(parts.len(), 3);
    assert_eq!(
        values("membloat_kubelet_eviction_headroom_bytes")[0].1,
        Value::I(-50)
    );
    // A working set with no inactive pages to subtract and usage past capacity.
    let over = Signal {
        capacity: 100,
        usage: 150,
        inactive_file: 200,
        ..Signal::default()
    };
    assert_eq!(over.working_set(), 0);
    assert_eq!(over.available(), 100);
}

#[test]
fn memory_stat_fields_are_found_by_whole_key() {
    let text = "anon 10\nanon_thp 4\nfile 20\ninactive_file 5\n";
    assert_eq!(field(text, "anon"), Some(10));
    assert_eq!(field(text, "file"), Some(20));
    assert_eq!(field(text, "active_file"), None);
}

#[test]
fn a_host_without_a_kubelet_serves_nothing() {
    assert!(Kubelet::default().families().is_empty());
}
