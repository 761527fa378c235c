//! The shipped Grafana dashboards, read from `grafana/*.json`, and the substitution of
//! Grafana's variables in their queries.

use serde_json::Value;
use std::path::{Path, PathBuf};

pub const FILES: [&str; 3] = [
    "membloat-host.json",
    "membloat-thp.json",
    "membloat-processes.json",
];

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
