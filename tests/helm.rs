//! The Helm chart (deploy/helm/membloat-exporter): `helm lint`, its default render is the
//! plain manifests of deploy/kubernetes/ byte for byte and object for object, its rules
//! and dashboards are the mixin's files (links, never copies), and every value set here
//! renders objects that kubernetes-validate accepts and whose arguments start the real
//! exporter.

use crate::common;

use common::*;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    deploy("helm/membloat-exporter")
}

const PLAIN: [&str; 6] = [
    "daemonset",
    "service",
    "serviceaccount",
    "priorityclass",
    "servicemonitor",
    "prometheusrule",
];

/// `helm template RELEASE chart --namespace NS -f values`, as parsed objects.
fn render(release: &str, namespace: &str, values: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values).unwrap();
    let out = tool("helm")
        .args(["template", release])
        .arg(chart())
        .args(["--namespace", namespace, "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    documents(&String::from_utf8(out.stdout).unwrap())
}

fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], k: &str) -> &'a Value {
    let found = kind(objects, k);
    assert_eq!(found.len(), 1, "one {k}: {objects:?}");
    found[0]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|a| a.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn the_chart_follows_the_exporters_version_and_lints_clean() {
    let meta = yaml(&chart().join("Chart.yaml"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(meta["version"].as_str(), Some(version));
    assert_eq!(meta["appVersion"].as_str(), Some(version));
    let out = tool("helm")
        .args(["lint", "--strict"])
        .arg(chart())
        .output()
        .unwrap();
    let text = succeeded(out, "helm lint --strict");
    assert!(text.contains("0 chart(s) failed"), "{text}");
}

/// deploy/kubernetes/render.sh, run in a copy of the repository's deploy/, scripts/ and
/// grafana/, writes the committed files byte for byte; and `helm template` with default
/// values gives the same objects, no more and no fewer.
#[test]
fn the_default_render_is_the_plain_manifests() {
    let dir = repository_copy(&["deploy", "scripts", "grafana"]);
    succeeded(
        Command::new("bash")
            .arg(dir.path().join("deploy/kubernetes/render.sh"))
            .output()
            .unwrap(),
        "deploy/kubernetes/render.sh",
    );
    let mut plain = Vec::new();
    for f in PLAIN {
        let path = format!("kubernetes/{f}.yaml");
        let rendered = std::fs::read_to_string(dir.path().join("deploy").join(&path)).unwrap();
        let committed = std::fs::read_to_string(deploy(&path)).unwrap();
        assert!(
            rendered == committed,
            "{path} is stale: run deploy/kubernetes/render.sh"
        );
        plain.extend(documents(&committed));
    }
    let key = |o: &Value| {
        format!(
            "{}/{}",
            o["kind"].as_str().unwrap(),
            o["metadata"]["name"].as_str().unwrap()
        )
    };
    let mut chart = render("membloat", "monitoring", "{}\n");
    chart.sort_by_key(key);
    plain.sort_by_key(key);
    assert_eq!(chart.len(), PLAIN.len());
    assert_eq!(chart, plain);
}

/// The chart's rules and dashboards are links to the mixin's rendered files, and what it
/// renders from them is those files' content.
#[test]
fn rules_and_dashboards_are_the_mixins_files() {
    let rules = chart().join("files/membloat.rules.yml");
    assert!(rules.symlink_metadata().unwrap().is_symlink());
    assert_eq!(
        rules.canonicalize().unwrap(),
        rules_file().canonicalize().unwrap()
    );
    let mut grafana: Vec<PathBuf> = std::fs::read_dir(root().join("grafana"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    grafana.sort();
    assert!(grafana.len() >= 3);
    for g in &grafana {
        let link = chart().join("dashboards").join(g.file_name().unwrap());
        assert!(
            link.symlink_metadata().is_ok_and(|m| m.is_symlink()),
            "{} is not linked from the chart's dashboards/",
            g.display()
        );
        assert_eq!(link.canonicalize().unwrap(), g.canonicalize().unwrap());
    }

    let objects = render(
        "membloat",
        "monitoring",
        "dashboards:\n  enabled: true\n  namespace: grafana\n  annotations:\n    grafana_folder: Memory\n",
    );
    let maps = kind(&objects, "ConfigMap");
    assert_eq!(maps.len(), grafana.len());
    for g in &grafana {
        let name = g.file_name().unwrap().to_str().unwrap();
        let map = maps
            .iter()
            .find(|m| m["data"][name].is_string())
            .unwrap_or_else(|| panic!("no ConfigMap holds {name}"));
        let want = std::fs::read_to_string(g).unwrap();
        assert_eq!(map["data"][name].as_str().unwrap(), want.trim_end());
        assert_eq!(map["metadata"]["namespace"].as_str(), Some("grafana"));
        assert_eq!(
            map["metadata"]["labels"]["grafana_dashboard"].as_str(),
            Some("1")
        );
        assert_eq!(
            map["metadata"]["annotations"]["grafana_folder"].as_str(),
            Some("Memory")
        );
        assert!(map["metadata"]["name"].as_str().unwrap().len() <= 63);
    }
    let pr = one(&objects, "PrometheusRule");
    assert_eq!(pr["spec"], yaml(&rules_file()));
}

/// A NetworkPolicy asked for with no client named is refused with a message saying so,
/// not rendered open to every pod.
#[test]
fn a_network_policy_without_clients_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, "networkPolicy:\n  enabled: true\n").unwrap();
    let out = tool("helm")
        .args(["template", "membloat"])
        .arg(chart())
        .arg("-f")
        .arg(&values)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("networkPolicy.from"), "{err}");
}

/// What each value set is, and what its render must show.
struct Case {
    name: &'static str,
    release: &'static str,
    namespace: &'static str,
    values: String,
}

fn cases() -> Vec<Case> {
    let hash = bcrypt::hash("pw", 4).unwrap();
    vec![
        Case {
            name: "defaults",
            release: "membloat",
            namespace: "monitoring",
            values: "{}\n".into(),
        },
        Case {
            name: "kube-prometheus-stack, dashboards, no heap walk",
            release: "membloat",
            namespace: "monitoring",
            values: "collectors:\n  heapWalk:\n    enabled: false\n  kmsg:\n    enabled: true\n\
                     serviceMonitor:\n  labels:\n    release: kps\n  interval: 15s\n\
                     prometheusRule:\n  labels:\n    release: kps\n\
                     dashboards:\n  enabled: true\n\
                     extraArgs:\n  - --collector.processes.group-by=cgroup\n  - --collector.processes.top-k=3\n"
                .into(),
        },
        Case {
            name: "basic auth from values, another release and namespace",
            release: "node-memory",
            namespace: "kube-system",
            values: format!(
                "webConfig:\n  content:\n    basic_auth_users:\n      prometheus: '{hash}'\n\
                 priorityClass:\n  create: false\n  name: system-node-critical\n\
                 serviceAccount:\n  create: false\n  name: node-agents\n\
                 image:\n  registry: registry.example.com\n  repository: tools/membloat_exporter\n  tag: 0.1.0-rc1\n\
                 nodeSelector:\n  node-role.kubernetes.io/worker: \"\"\n\
                 tolerations: []\n\
                 resources:\n  limits:\n    memory: 128Mi\n\
                 serviceMonitor:\n  basicAuth:\n    username:\n      name: scrape-creds\n      key: user\n    password:\n      name: scrape-creds\n      key: password\n\
                 networkPolicy:\n  enabled: true\n  from:\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: monitoring\n      podSelector:\n        matchLabels:\n          app.kubernetes.io/name: prometheus\n"
            ),
        },
        Case {
            name: "fewest privileges, no operator",
            release: "membloat-exporter",
            namespace: "monitoring",
            values: "collectors:\n  processes:\n    enabled: false\n\
                     podSecurityContext:\n  runAsUser: 65534\n  runAsGroup: 65534\n  runAsNonRoot: true\n\
                     serviceMonitor:\n  enabled: false\n\
                     prometheusRule:\n  enabled: false\n"
                .into(),
        },
    ]
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one pass per value set: render, validate, check, run"
)]
fn every_value_set_validates_and_says_what_it_was_asked() {
    for case in cases() {
        let name = case.name;
        let objects = render(case.release, case.namespace, &case.values);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rendered.yaml");
        let core: Vec<String> = objects
            .iter()
            .filter(|o| {
                !o["apiVersion"]
                    .as_str()
                    .unwrap()
                    .starts_with("monitoring.coreos.com")
            })
            .map(|o| serde_yaml_ng::to_string(o).unwrap())
            .collect();
        std::fs::write(&file, core.join("---\n")).unwrap();
        let out = tool("kubernetes-validate")
            .arg("--strict")
            .arg(&file)
            .output()
            .unwrap();
        let text = succeeded(out, &format!("kubernetes-validate --strict ({name})"));
        assert_eq!(
            text.matches("passed for resource").count(),
            core.len(),
            "{name}: {text}"
        );

        let ds = one(&objects, "DaemonSet");
        let pod = &ds["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let args = strings(&container["args"]);
        let caps = strings(&container["securityContext"]["capabilities"]["add"]);
        let has = |a: &str| args.iter().any(|x| x == a);
        let values: Value = serde_yaml_ng::from_str(&case.values).unwrap();
        let off = |c: &str| values["collectors"][c]["enabled"] == Value::Bool(false);
        // Each collector switched off drops the capability only it needs.
        let want_caps: Vec<&str> = if off("processes") {
            assert!(has("--no-collector.processes"), "{name}: {args:?}");
            vec![]
        } else if off("heapWalk") {
            assert!(has("--no-collector.processes.heap-walk"), "{name}");
            vec!["SYS_PTRACE"]
        } else {
            vec!["SYS_PTRACE", "DAC_READ_SEARCH"]
        };
        assert_eq!(caps, want_caps, "{name}");
        // The kernel log: off by default; on, a privileged container with /dev/kmsg alone.
        let kmsg = values["collectors"]["kmsg"]["enabled"] == Value::Bool(true);
        assert_eq!(has("--no-collector.kmsg"), !kmsg, "{name}");
        assert_eq!(
            container["securityContext"]["privileged"],
            Value::Bool(kmsg),
            "{name}"
        );
        // The API server refuses `allowPrivilegeEscalation: false` beside `privileged:
        // true` (found by the cluster tier's `helm upgrade`); unprivileged, it is false.
        let escalation = &container["securityContext"]["allowPrivilegeEscalation"];
        if kmsg {
            assert!(
                escalation.is_null(),
                "{name}: {escalation:?} beside privileged"
            );
        } else {
            assert_eq!(escalation, &Value::Bool(false), "{name}");
        }
        let mounted: Vec<&str> = container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| m["mountPath"].as_str().unwrap())
            .collect();
        assert_eq!(mounted.contains(&"/host/dev/kmsg"), kmsg, "{name}");
        for extra in strings(&values["extraArgs"]) {
            assert!(has(&extra), "{name}: {extra} missing");
        }
        // Selectors find what they select, whatever the release is called.
        let svc = one(&objects, "Service");
        for (k, v) in ds["spec"]["selector"]["matchLabels"].as_mapping().unwrap() {
            assert_eq!(
                &ds["spec"]["template"]["metadata"]["labels"][k], v,
                "{name}"
            );
            assert_eq!(&svc["spec"]["selector"][k], v, "{name}");
        }
        if let Some(sm) = kind(&objects, "ServiceMonitor").first() {
            // The job label is membloat, which MembloatExporterDown matches.
            let label = sm["spec"]["jobLabel"].as_str().unwrap();
            assert_eq!(svc["metadata"]["labels"][label].as_str(), Some("membloat"));
            for (k, v) in sm["spec"]["selector"]["matchLabels"].as_mapping().unwrap() {
                assert_eq!(&svc["metadata"]["labels"][k], v, "{name}");
            }
            for (k, v) in values["serviceMonitor"]["labels"]
                .as_mapping()
                .into_iter()
                .flatten()
            {
                assert_eq!(&sm["metadata"]["labels"][k], v, "{name}");
            }
        } else {
            assert_eq!(values["serviceMonitor"]["enabled"], Value::Bool(false));
        }
        assert_eq!(
            kind(&objects, "PrometheusRule").is_empty(),
            values["prometheusRule"]["enabled"] == Value::Bool(false),
            "{name}"
        );
        // The NetworkPolicy: only when asked, selecting the exporter's pods, open to the
        // clients named and to the metrics port alone.
        let policies = kind(&objects, "NetworkPolicy");
        if values["networkPolicy"]["enabled"] == Value::Bool(true) {
            let np = policies[0];
            assert_eq!(policies.len(), 1, "{name}");
            assert_eq!(
                np["spec"]["podSelector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"],
                "{name}"
            );
            let ingress = &np["spec"]["ingress"];
            assert_eq!(ingress.as_sequence().unwrap().len(), 1, "{name}");
            assert_eq!(
                ingress[0]["from"], values["networkPolicy"]["from"],
                "{name}"
            );
            assert_eq!(ingress[0]["ports"][0]["port"].as_str(), Some("metrics"));
            let port = &container["ports"][0];
            assert_eq!(port["name"].as_str(), Some("metrics"), "{name}");
        } else {
            assert!(policies.is_empty(), "{name}");
        }
        for o in &objects {
            if o["kind"] != "PriorityClass" {
                assert_eq!(
                    o["metadata"]["namespace"].as_str(),
                    Some(case.namespace),
                    "{name}"
                );
            }
        }
        let sa = pod["serviceAccountName"].as_str().unwrap();
        match values["serviceAccount"]["name"].as_str() {
            Some(given) => {
                assert_eq!(sa, given);
                assert!(kind(&objects, "ServiceAccount").is_empty());
            }
            None => assert_eq!(one(&objects, "ServiceAccount")["metadata"]["name"], sa),
        }
        let pc = pod["priorityClassName"].as_str().unwrap();
        match values["priorityClass"]["name"].as_str() {
            Some(given) => {
                assert_eq!(pc, given);
                assert!(kind(&objects, "PriorityClass").is_empty());
            }
            None => assert_eq!(one(&objects, "PriorityClass")["metadata"]["name"], pc),
        }
        if let Some(registry) = values["image"]["registry"].as_str() {
            assert_eq!(
                container["image"].as_str().unwrap(),
                format!("{registry}/tools/membloat_exporter:0.1.0-rc1")
            );
        }

        // The rendered arguments (and web config) start the real exporter on this
        // machine's /proc and /sys.
        let host = dir.path().join("host");
        std::fs::create_dir(&host).unwrap();
        std::os::unix::fs::symlink("/proc", host.join("proc")).unwrap();
        std::os::unix::fs::symlink("/sys", host.join("sys")).unwrap();
        let web = dir.path().join("web");
        let secret = kind(&objects, "Secret");
        let auth = !secret.is_empty();
        if auth {
            std::fs::create_dir(&web).unwrap();
            for (k, v) in secret[0]["stringData"].as_mapping().unwrap() {
                std::fs::write(web.join(k.as_str().unwrap()), v.as_str().unwrap()).unwrap();
            }
            let mount = container["volumeMounts"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "web-config")
                .unwrap();
            assert_eq!(mount["mountPath"].as_str(), Some("/etc/membloat_exporter"));
            // /healthz needs the credentials too: the probes check the port.
            assert!(
                container["readinessProbe"]["tcpSocket"].is_mapping(),
                "{name}"
            );
            assert!(
                container["livenessProbe"]["tcpSocket"].is_mapping(),
                "{name}"
            );
        } else {
            assert_eq!(
                container["readinessProbe"]["httpGet"]["path"].as_str(),
                Some("/healthz")
            );
        }
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("/host", host.to_str().unwrap())
                    .replace("/etc/membloat_exporter", web.to_str().unwrap())
            })
            .filter(|a| !a.starts_with("--web.listen-address"))
            .collect();
        let port = free_port();
        let mut child = Command::new(bin())
            .args(&args)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let token = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode("prometheus:pw")
        };
        let basic = format!("Basic {token}");
        let headers: &[(&str, &str)] = if auth {
            &[("Authorization", &basic)]
        } else {
            &[]
        };
        // Until the first scan completes the exporter serves only its own metrics: wait
        // for a host figure.
        let mut body = String::new();
        for _ in 0..100 {
            let r = get(port, "/metrics", headers);
            if r.status == 200 && r.body.contains("\nmembloat_memory_total_bytes ") {
                body = r.body;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if auth {
            assert_eq!(get(port, "/metrics", &[]).status, 401, "{name}");
        }
        child.kill().ok();
        child.wait().ok();
        assert!(!body.is_empty(), "{name}: the exporter did not serve");
        assert_eq!(
            body.contains("\nmembloat_processes_scanned "),
            !off("processes"),
            "{name}"
        );
    }
}
