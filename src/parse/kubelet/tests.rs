use super::*;

#[test]
fn quantities_are_the_bytes_kubernetes_gives_them_rounded_up() {
    for (text, want) in [
        ("100Mi", 100 << 20),
        ("1Gi", 1 << 30),
        ("1.5Gi", 3 << 29),
        ("500M", 500_000_000),
        ("1k", 1000),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2.5", 3),
        ("100m", 1),
        ("1500m", 2),
        ("+7Ki", 7 << 10),
        ("0.5Ki", 512),
        ("104857600", 104_857_600),
    ] {
        assert_eq!(quantity(text), Ok(want), "{text}");
    }
    for text in [
        "", "Mi", "-1Gi", "1.2.3", "1Zi", "1x", "1e", "1e999", "16Ei", "1Mi ",
    ] {
        assert!(quantity(text).is_err(), "{text} parsed");
    }
}

#[test]
fn thresholds_take_the_kubelets_rules() {
    assert_eq!(threshold("100Mi"), Ok(Some(Value::Bytes(100 << 20))));
    assert_eq!(threshold("0%"), Ok(None));
    assert_eq!(threshold("100%"), Ok(None));
    assert!(threshold("0").is_err(), "a zero quantity stops the kubelet");
    assert!(threshold("101%").is_err());
    assert!(threshold("-5%").is_err());
    // float32(10) / 100 times the capacity as float64, truncated: as the kubelet does.
    let Ok(Some(share)) = threshold("10%") else {
        panic!("10%")
    };
    let capacity = 25_154_220_032_u64;
    assert_eq!(
        share.bytes(capacity),
        (capacity as f64 * f64::from(10f32 / 100.0)) as u64
    );
    assert_ne!(
        share.bytes(capacity),
        capacity / 10,
        "float32's 0.1 is not 0.1"
    );
}

#[test]
fn the_command_line_gives_flags_in_both_shapes_and_the_last_wins() {
    let line = "/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0--eviction-hard\0memory.available<200Mi,nodefs.available<10%\0--cgroups-per-qos\0-cgroup-driver=systemd\0--eviction-soft=memory.available<1Gi\0--eviction-soft=memory.available<2Gi\0--enforce-node-allocatable=pods,kube-reserved\0--v=2\0";
    let c = command_line(line).unwrap();
    assert_eq!(c.config.as_deref(), Some("/var/lib/kubelet/config.yaml"));
    let hard = c.flags.eviction_hard.unwrap();
    assert_eq!(hard["memory.available"], "200Mi");
    assert_eq!(hard["nodefs.available"], "10%");
    assert_eq!(c.flags.eviction_soft.unwrap()["memory.available"], "2Gi");
    assert_eq!(c.flags.cgroups_per_qos, Some(true));
    assert_eq!(c.flags.cgroup_driver.as_deref(), Some("systemd"));
    assert_eq!(
        c.flags.enforce_node_allocatable.unwrap(),
        ["pods", "kube-reserved"]
    );
    assert!(command_line("kubelet\0--eviction-hard=memory.available=1Gi\0").is_err());
    assert!(command_line("kubelet\0--config\0").is_err());
    assert_eq!(command_line("kubelet\0").unwrap(), CommandLine::default());
}

#[test]
fn drop_ins_merge_over_the_file_key_by_key_and_null_removes() {
    let mut doc = document(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: 10%\ncgroupDriver: systemd\nenforceNodeAllocatable: [pods]\n",
    )
    .unwrap();
    merge(
        &mut doc,
        &document(r#"{"evictionHard": {"memory.available": "500Mi", "nodefs.available": null}, "evictionSoft": {"memory.available": "1Gi"}, "cgroupsPerQOS": true}"#).unwrap(),
    );
    let s = settings(&doc).unwrap();
    let hard = s.eviction_hard.unwrap();
    assert_eq!(hard.len(), 1);
    assert_eq!(hard["memory.available"], "500Mi");
    assert_eq!(s.eviction_soft.unwrap()["memory.available"], "1Gi");
    assert_eq!(s.cgroup_driver.as_deref(), Some("systemd"));
    assert_eq!(s.cgroups_per_qos, Some(true));
    assert_eq!(s.enforce_node_allocatable.unwrap(), ["pods"]);
    assert!(settings(&document("evictionHard: [1, 2]").unwrap()).is_err());
    assert!(settings(&document("cgroupsPerQOS: maybe").unwrap()).is_err());
    assert_eq!(
        settings(&document("{}").unwrap()).unwrap(),
        Settings::default()
    );
    assert!(document("evictionHard: {").is_err());
}
