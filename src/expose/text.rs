//! The Prometheus text format 0.0.4 (what promtool and curl get), rewritten from the
//! OpenMetrics exposition once per scan.

use std::fmt::Write;

/// Rewrites an OpenMetrics exposition as Prometheus text format 0.0.4, which is what
/// promtool and scrapers that do not ask for OpenMetrics parse. Sample lines and label
/// escaping are the same in both; only the metadata differs: counters are named with
/// `_total` in `# HELP`/`# TYPE`, info families become `_info` gauges, `# UNIT` and `# EOF`
/// do not exist.
pub fn text_from_openmetrics(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            pending_help = rest.split_once(' ');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" => ("", "gauge"),
                _ => ("", "untyped"),
            };
            if let Some((help_name, help)) = pending_help.take().filter(|(n, _)| *n == name) {
                let _ = writeln!(out, "# HELP {help_name}{suffix} {help}");
            }
            let _ = writeln!(out, "# TYPE {name}{suffix} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
