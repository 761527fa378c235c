//! The shipped Grafana dashboards, read from `grafana/*.json`, and the substitution of
//! Grafana's variables in their queries.

use serde_json::Value;
use std::path::{Path, PathBuf};

pub const FILES: [&str; 4] = [
    "membloat-fleet.json",
    "membloat-host.json",
    "membloat-thp.json",
    "membloat-processes.json",
];

/// Panels with nothing to draw until the kernel OOM-kills a process: their queries are
/// asked of a real Prometheus after a real kill by tests/oomkill.rs.
pub const NEEDS_AN_OOM_KILL: [&str; 5] = [
    "Latest OOM kill",
    "Latest victim's memory: at the kill, and measured before",
    "OOM kills by group",
    "Containers with OOM kills",
    "Latest OOM victims",
];

/// Panels with nothing to draw on a host without a memory cgroup that has a limit: their
/// queries are asked of a real Prometheus by tests/headroom.rs, which makes such cgroups.
pub const NEEDS_A_LIMITED_CGROUP: [&str; 3] = [
    "Containers by headroom",
    "Containers holding the most",
    "Containers nearest their limits",
];

/// Panels with nothing to draw without cgroup v2 (this build machine is v1): their
/// queries are asked of a real Prometheus inside Debian's kernels by tests/kernels.rs.
pub const NEEDS_CGROUP_V2: [&str; 1] = ["Memory stalls by container"];

/// Panels with nothing to draw on a host without a kubelet: their queries are asked of a
/// real Prometheus by the cluster tier (tests/cluster/node.py, check `eviction`).
pub const NEEDS_A_KUBELET: [&str; 1] = ["Nodes nearest eviction: kubelet headroom"];

/// Panels with a query that only root's exporter answers (`/proc/slabinfo` and
/// `vmallocinfo` are root's): asked of a real Prometheus by tests/prometheus.rs as root.
pub const NEEDS_ROOT: [&str; 1] = ["Who holds it outside the heaps"];

/// Recording rules that record nothing until the kernel OOM-kills a process in a memory
/// cgroup (tests/oomkill.rs checks them after a real kill).
pub const RULES_NEEDING_AN_OOM_KILL: [&str; 2] = [
    "instance_cgroup:membloat_cgroup_oom_kills:increase1h",
    "job_group:membloat_oom_kills:increase1h",
];

/// Recording rules that record nothing on a host without a memory cgroup that has a limit
/// (tests/headroom.rs checks them beside such cgroups).
pub const RULES_NEEDING_A_LIMITED_CGROUP: [&str; 1] =
    ["instance_cgroup:membloat_working_set_limit:ratio"];

pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("grafana")
}

pub fn load(file: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(file)).expect("read dashboard");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Every panel, including those nested in collapsed rows.
pub fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested.iter());
        }
    }
    out
}

/// Panels that draw data (everything but rows).
pub fn data_panels(d: &Value) -> Vec<&Value> {
    panels(d)
        .into_iter()
        .filter(|p| p["type"] != "row")
        .collect()
}

/// The PromQL of every target of a panel.
pub fn exprs(p: &Value) -> Vec<String> {
    p["targets"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["expr"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn variables(d: &Value) -> &Vec<Value> {
    d["templating"]["list"].as_array().expect("templating.list")
}

/// Replaces Grafana's variables: `vars` are (name, value) pairs for `$name` and `${name}`,
/// applied longest name first so `$instance` is not cut by a shorter variable.
pub fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut vars = vars.to_vec();
    vars.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut out = expr.to_string();
    for (name, value) in vars {
        out = out.replace(&format!("${{{name}}}"), value);
        out = out.replace(&format!("${name}"), value);
    }
    out
}

/// A `label_values(selector, label)` variable query split into its parts.
pub fn label_values(query: &str) -> Option<(String, String)> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    Some((selector.trim().to_string(), label.trim().to_string()))
}

/// Grafana's variables for one instance of job `membloat` (cluster `test`, as relabelling
/// adds it; the fleet dashboard's `node` is that instance) and 1 s scrapes.
pub fn vars(instance: &str) -> [(&'static str, &str); 9] {
    [
        ("datasource", "prometheus"),
        ("cluster", "test"),
        ("job", "membloat"),
        ("instance", instance),
        ("node", instance),
        ("group", ".+"),
        ("__rate_interval", "10s"),
        ("__range", "1m"),
        ("__interval", "1s"),
    ]
}

/// Every query of the panels named `titles`, across the dashboards, with the variables of
/// one instance (job `membloat`) substituted: `(title, query)`.
#[allow(dead_code, reason = "used by the tests that make the panels' data")]
pub fn queries_of(titles: &[&str], instance: &str) -> Vec<(String, String)> {
    let vars = vars(instance);
    let mut out = Vec::new();
    for file in FILES {
        let d = load(file);
        for p in data_panels(&d) {
            let title = p["title"].as_str().unwrap_or("");
            if titles.contains(&title) {
                for e in exprs(p) {
                    out.push((title.to_string(), substitute(&e, &vars)));
                }
            }
        }
    }
    out
}
