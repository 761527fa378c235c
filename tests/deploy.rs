//! The deployment files: the systemd unit scored by `systemd-analyze security`, the
//! Kubernetes manifests validated offline (kubernetes-validate, yamllint, promtool) and
//! checked against each other, and the DaemonSet's own arguments run for real.

use crate::common;

use common::*;
use serde_yaml_ng::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn systemd_unit_scores_at_most_2_5_and_verifies_clean() {
    let unit = deploy("systemd/membloat_exporter.service");
    let out = tool("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&unit)
        .output()
        .unwrap();
    let text = succeeded(out, "systemd-analyze security");
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for membloat_exporter.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no score in:\n{text}"));
    eprintln!("systemd-analyze security exposure: {score}");
    assert!(score <= 2.5, "exposure {score} > 2.5");

    // `verify` with the binary where the unit expects it: unknown keys and bad values
    // are reported as warnings, which must not appear.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("membloat_exporter.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/membloat_exporter", bin()),
    )
    .unwrap();
    let out = tool("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    let said = succeeded(out, "systemd-analyze verify");
    assert!(said.trim().is_empty(), "systemd-analyze verify:\n{said}");

    let directives: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let has = |d: &str| directives.iter().any(|l| l.trim() == d);
    assert!(has("DynamicUser=yes"));
    assert!(has(
        "AmbientCapabilities=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYSLOG"
    ));
    assert!(has(
        "CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH CAP_SYSLOG"
    ));
    // The kmsg collector's log: readable, and nothing else of /dev.
    assert!(has("BindReadOnlyPaths=-/dev/kmsg"));
    assert!(has("DeviceAllow=/dev/kmsg r"));
    assert!(has("PrivateDevices=yes"));
    assert!(has("ProtectSystem=strict"));
    for forbidden in ["ProtectProc=", "ProcSubset=", "PrivateUsers="] {
        assert!(
            !directives.iter().any(|l| l.starts_with(forbidden)),
            "{forbidden} hides the processes the exporter reads"
        );
    }
    let env = std::fs::read_to_string(deploy("systemd/membloat_exporter.env")).unwrap();
    assert!(env.lines().any(|l| l.starts_with("ARGS=")));
    assert!(text.contains("ExecStart=/usr/local/bin/membloat_exporter $ARGS"));
}

#[test]
fn kubernetes_manifests_validate_offline() {
    let files = [
        "daemonset.yaml",
        "service.yaml",
        "serviceaccount.yaml",
        "priorityclass.yaml",
        "servicemonitor.yaml",
        "prometheusrule.yaml",
    ];
    let out = tool("kubernetes-validate")
        .arg("--strict")
        .args(files.iter().map(|f| deploy(&format!("kubernetes/{f}"))))
        .output()
        .unwrap();
    let text = succeeded(out, "kubernetes-validate --strict");
    for kind in [
        "daemonset/membloat-exporter",
        "service/membloat",
        "serviceaccount/membloat-exporter",
        "priorityclass/membloat-exporter",
    ] {
        assert!(
            text.contains(&format!("passed for resource {kind}")),
            "{text}"
        );
    }
    // The operator's custom resources have no schema in kubernetes-validate; they are
    // checked against the resources they refer to below.
    let out = tool("yamllint")
        .arg("-s")
        .arg("-c")
        .arg(".yamllint.yml")
        // Relative paths: the config's ignore patterns (the Helm templates) are.
        .args(["deploy", "grafana/provisioning.yml"])
        .current_dir(root())
        .output()
        .unwrap();
    succeeded(out, "yamllint -s");
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "every cross-reference between the manifests, checked in one place"
)]
fn kubernetes_resources_agree_with_each_other_and_the_rules() {
    let ds = yaml(&deploy("kubernetes/daemonset.yaml"));
    let svc = yaml(&deploy("kubernetes/service.yaml"));
    let sm = yaml(&deploy("kubernetes/servicemonitor.yaml"));
    let pr = yaml(&deploy("kubernetes/prometheusrule.yaml"));
    let pod = &ds["spec"]["template"]["spec"];
    let container = &pod["containers"][0];

    assert_eq!(pod["hostPID"], Value::Bool(true));
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--path.procfs=/host/proc") && args.contains(&"--path.sysfs=/host/sys"));
    for (volume, host, mount) in [
        ("proc", "/proc", "/host/proc"),
        ("sys", "/sys", "/host/sys"),
    ] {
        let v = pod["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"].as_str() == Some(volume))
            .unwrap();
        assert_eq!(v["hostPath"]["path"].as_str(), Some(host));
        let m = container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["name"].as_str() == Some(volume))
            .unwrap();
        assert_eq!(m["mountPath"].as_str(), Some(mount));
        assert_eq!(
            m["readOnly"],
            Value::Bool(true),
            "{volume} must be read-only"
        );
    }
    // Linux nodes only; its own account without a token; a priority class that exists in
    // any namespace (system-node-critical is refused outside kube-system on some clusters).
    assert_eq!(
        pod["nodeSelector"]["kubernetes.io/os"].as_str(),
        Some("linux")
    );
    let sa = yaml(&deploy("kubernetes/serviceaccount.yaml"));
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    assert_eq!(sa["automountServiceAccountToken"], Value::Bool(false));
    assert_eq!(pod["automountServiceAccountToken"], Value::Bool(false));
    let pc = yaml(&deploy("kubernetes/priorityclass.yaml"));
    assert_eq!(pod["priorityClassName"], pc["metadata"]["name"]);
    assert!(
        pc["value"].as_u64().unwrap() <= 1_000_000_000,
        "user classes stop at 1e9"
    );
    // The recommended labels on every resource, one version everywhere.
    let version = env!("CARGO_PKG_VERSION");
    for (what, labels) in [
        ("DaemonSet", &ds["metadata"]["labels"]),
        (
            "pod template",
            &ds["spec"]["template"]["metadata"]["labels"],
        ),
        ("Service", &svc["metadata"]["labels"]),
        ("ServiceMonitor", &sm["metadata"]["labels"]),
        ("PrometheusRule", &pr["metadata"]["labels"]),
        ("ServiceAccount", &sa["metadata"]["labels"]),
        ("PriorityClass", &pc["metadata"]["labels"]),
    ] {
        assert_eq!(
            labels["app.kubernetes.io/name"].as_str(),
            Some("membloat-exporter"),
            "{what}"
        );
        assert_eq!(
            labels["app.kubernetes.io/part-of"].as_str(),
            Some("membloat"),
            "{what}"
        );
        assert_eq!(
            labels["app.kubernetes.io/version"].as_str(),
            Some(version),
            "{what}"
        );
    }
    assert!(container["image"]
        .as_str()
        .unwrap()
        .ends_with(&format!(":{version}")));
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
    assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
    let caps = |k: &str| -> Vec<String> {
        sc["capabilities"][k]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(caps("drop"), ["ALL"]);
    assert_eq!(caps("add"), ["SYS_PTRACE", "DAC_READ_SEARCH"]);
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            container[probe]["httpGet"]["path"].as_str(),
            Some("/healthz")
        );
    }

    // Service -> pods, ServiceMonitor -> Service, by labels and port name.
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(
            &pod_labels[k.as_str().unwrap()],
            v,
            "Service selects no pod"
        );
    }
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_mapping().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k.as_str().unwrap()],
            v,
            "ServiceMonitor selects no Service"
        );
    }
    let port = sm["spec"]["endpoints"][0]["port"].as_str().unwrap();
    assert_eq!(svc["spec"]["ports"][0]["name"].as_str(), Some(port));
    assert_eq!(container["ports"][0]["name"].as_str(), Some("metrics"));
    // The ServiceMonitor takes the job label from a Service label whose value is the job
    // MembloatExporterDown matches.
    let rules = yaml(&rules_file());
    let job_label = sm["spec"]["jobLabel"].as_str().unwrap();
    assert_eq!(
        svc["metadata"]["labels"][job_label].as_str(),
        Some("membloat")
    );
    assert!(serde_yaml_ng::to_string(&rules)
        .unwrap()
        .contains("up{job=\"membloat\"}"));

    // The PrometheusRule holds exactly the rules of deploy/prometheus, and promtool
    // accepts its groups.
    assert_eq!(pr["spec"], rules, "run deploy/kubernetes/render.sh");
    let dir = tempfile::tempdir().unwrap();
    let groups = dir.path().join("groups.yml");
    std::fs::write(&groups, serde_yaml_ng::to_string(&pr["spec"]).unwrap()).unwrap();
    promtool_ok(&["check", "rules", "--lint=all", "--lint-fatal"], &groups);
    // tests/helm.rs checks that deploy/kubernetes/render.sh reproduces every file.
}

/// The DaemonSet's arguments, with /host/proc and /host/sys pointing at this machine's,
/// start the real exporter, and its probes answer.
#[test]
fn daemonset_arguments_run_the_exporter_and_probes_answer() {
    let ds = yaml(&deploy("kubernetes/daemonset.yaml"));
    let host = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/proc", host.path().join("proc")).unwrap();
    std::os::unix::fs::symlink("/sys", host.path().join("sys")).unwrap();
    let args: Vec<String> = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("/host", host.path().to_str().unwrap())
        })
        .filter(|a| !a.starts_with("--web.listen-address"))
        .collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = Command::new(bin());
    cmd.stderr(Stdio::null());
    let d = Daemon::start_with(cmd, &refs);
    let text = d.metrics();
    promtool_check(&text);
    assert!(value(&text, "membloat_processes_scanned").unwrap() >= 1.0);
    d.wait_until(Duration::from_secs(5), || d.get("/healthz").status == 200);
}

/// The README's `docker run` line grants what the DaemonSet grants: the host's PID
/// namespace, the two capabilities and no others, read-only mounts of /proc and /sys at
/// the paths the flags name, and the image of this version.
#[test]
fn the_docker_run_line_matches_the_daemonset() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.starts_with("docker run"))
        .expect("a docker run line in the README");
    let args: Vec<&str> = block.split_whitespace().filter(|a| *a != "\\").collect();
    for want in [
        "--pid=host",
        "--cap-drop=ALL",
        "--cap-add=SYS_PTRACE",
        "--cap-add=DAC_READ_SEARCH",
        "--read-only",
        "/proc:/host/proc:ro",
        "/sys:/host/sys:ro",
        "--path.procfs=/host/proc",
        "--path.sysfs=/host/sys",
    ] {
        assert!(args.contains(&want), "{want} missing from: {block}");
    }
    let caps: Vec<&&str> = args.iter().filter(|a| a.starts_with("--cap-add")).collect();
    assert_eq!(caps.len(), 2, "{block}");
    let image = format!("membloat_exporter:{}", env!("CARGO_PKG_VERSION"));
    assert!(args.contains(&image.as_str()), "{block}");
    // The exporter accepts the flags after the image.
    let at = args.iter().position(|a| *a == image).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_membloat_exporter"));
    cmd.args(&args[at + 1..])
        .args(["--once", "--once.interval=0s"]);
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "no /host/proc here, so exit 1 naming it, not 2 for a bad flag: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("/host/proc"));
}
