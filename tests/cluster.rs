//! The cluster tier (`cargo test --test cluster`, as root): a real single-node Kubernetes
//! cluster (tests/cluster/node.py: etcd, the API server, controller manager, scheduler
//! and kubelet of k8s.io/kubernetes, Debian's containerd, runc and CNI plugins), the
//! chart installed on it by `helm install` with its defaults, and what only a real node
//! shows: the pod starts and reads other pods' memory, names pods as the kubelet made
//! them, and its OOM victim is the container the kubelet reports `OOMKilled`.

use crate::common;

use common::repro;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The checks node.py must report, in order.
const CHECKS: &[&str] = &[
    "node",
    "install",
    "hoarding_pod",
    "scrape",
    "jvm_pod",
    "go_pod",
    "prometheus",
    "oom_kill",
    "eviction",
];

/// The prometheus-operator release whose CRDs (ServiceMonitor, PrometheusRule) the
/// chart's objects are checked against.
const OPERATOR: &str = "v0.85.0";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The path a script prints on its last line.
fn script(name: &str) -> PathBuf {
    let out = Command::new(root().join("scripts").join(name))
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = common::succeeded(out, name);
    PathBuf::from(text.lines().last().unwrap().trim())
}

/// A Go module's directory in the module cache, downloaded if need be.
fn go_module(module: &str) -> PathBuf {
    let out = common::tool("go")
        .args(["mod", "download", "-json", module])
        .env("GOFLAGS", "-mod=mod")
        .current_dir(root().join("tests/cluster/node"))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&common::succeeded(out, module)).unwrap();
    PathBuf::from(json["Dir"].as_str().unwrap())
}

/// The random Go program of tests/reproducers/gofree.go, static.
fn gofree(dir: &Path) -> PathBuf {
    let out = dir.join("gofree");
    let status = common::tool("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(root().join("tests/reproducers/gofree.go"))
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .status()
        .unwrap();
    assert!(status.success(), "go build gofree.go");
    out
}

/// The host settings the kubelet sets at its start (its defaults for a node): the node
/// must give them back when it goes.
fn kubelet_settings() -> [(&'static str, String); 6] {
    [
        "vm/overcommit_memory",
        "vm/panic_on_oom",
        "kernel/panic",
        "kernel/panic_on_oops",
        "kernel/keys/root_maxkeys",
        "kernel/keys/root_maxbytes",
    ]
    .map(|k| {
        (
            k,
            std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default(),
        )
    })
}
#[test]
#[ignore = "needs root"]
fn the_chart_on_a_real_node() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the cluster tier runs as root (it starts a kubelet and containerd)"
    );
    for tool in ["containerd", "runc", "ctr", "openssl", "gcc", "ldd"] {
        common::tool(tool);
    }
    let kubenode = script("kubenode.sh");
    let helm = script("helm.sh");
    let image = script("image.sh");
    let k8s = go_module(&format!(
        "k8s.io/kubernetes@{}",
        std::fs::read_to_string(root().join("tests/cluster/node/go.mod"))
            .unwrap()
            .lines()
            .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes "))
            .expect("k8s.io/kubernetes in go.mod")
    ));
    let crds = go_module(&format!(
        "github.com/prometheus-operator/prometheus-operator@{OPERATOR}"
    ))
    .join("example/prometheus-operator-crd");
    let heap = repro::build("heap");
    let dir = tempfile::Builder::new()
        .prefix("mbk")
        .tempdir_in("/tmp")
        .unwrap();
    let programs = heap.parent().unwrap();
    gofree(programs);
    let jdk = common::java::jdks()
        .iter()
        .find(|j| j.feature == 21)
        .expect("JDK 21 (scripts/jdks.sh)");
    let java_home = jdk.java.parent().unwrap().parent().unwrap();
    let out = dir.path().join("results.json");
    let host = kubelet_settings();
    let status = Command::new("python3")
        .arg(root().join("tests/cluster/node.py"))
        .arg("--kubenode")
        .arg(&kubenode)
        .arg("--helm")
        .arg(&helm)
        .arg("--chart")
        .arg(root().join("deploy/helm/membloat-exporter"))
        .arg("--image")
        .arg(&image)
        .arg("--crds")
        .arg(&crds)
        .arg("--k8s-source")
        .arg(&k8s)
        .arg("--repro")
        .arg(programs)
        .arg("--java-home")
        .arg(java_home)
        .arg("--classes")
        .arg(common::java::classes())
        .arg("--work")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&out)
            .unwrap_or_else(|e| panic!("node.py ended ({status}) without its results: {e}")),
    )
    .unwrap();
    let checks = results["checks"].as_array().unwrap();
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c["ok"] != true)
        .map(|c| format!("{}: {}", c["name"], c["detail"].as_str().unwrap_or("")))
        .collect();
    if !failed.is_empty() {
        for part in ["kubelet", "apiserver", "containerd"] {
            let log = std::fs::read_to_string(dir.path().join(format!("logs/{part}.log")))
                .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!(
                "--- {part} (last lines)\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
    assert_eq!(
        kubelet_settings(),
        host,
        "the host's settings after the node"
    );
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
    assert!(status.success(), "node.py: {status}");
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS, "the checks that ran");
    eprintln!(
        "cluster: {} checks passed; facts {}",
        names.len(),
        results["facts"]
    );
}
