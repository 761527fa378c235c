//! Lints the shipped Grafana dashboards with the rules of grafana/dashboard-linter (which
//! cannot be installed here), plus the conventions users expect of an exporter's dashboards:
//! - template-datasource-rule: one `datasource` variable of type datasource, Prometheus;
//! - template-job-rule, template-instance-rule: `job` and `instance` query variables on
//!   `${datasource}`, multi-select, "All" meaning `.+`; `instance` offers no "All", so a
//!   fleet's dashboard opens on one host, not a stat per host;
//! - a `cluster` variable ("All" meaning `.*`, which matches series without the label), as
//!   kube-prometheus dashboards have;
//! - panel-datasource-rule: every panel and target uses `${datasource}`, no hard-coded uid;
//! - panel-title-description-rule, panel-units-rule: a title, a description and a valid unit;
//! - target-promql-rule: every query parses as PromQL;
//! - target-job-rule, target-instance-rule: every selector has `cluster=~"$cluster"`,
//!   `job=~"$job"` and `instance=~"$instance"`;
//! - target-rate-interval-rule: `rate`/`irate` use `$__rate_interval` (`increase` may also
//!   use `$__range`);
//! - target-counter-agg-rule: a `_total` counter only inside `rate`, `irate` or `increase`.
//!
//! The linter is itself tested on panels that break each rule, so a rule that lets
//! everything pass fails here.

use crate::common;

use common::dashboards::{self, data_panels, exprs, label_values, substitute, variables};
use common::tool;
use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, VectorSelector};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

// Stand-ins for Grafana's interval variables, so the parsed AST shows which was used.
const RATE_INTERVAL: Duration = Duration::from_secs(7777);
const RANGE: Duration = Duration::from_secs(8888);

/// Units Grafana knows (a subset of its value formats: the ones that fit this exporter).
const UNITS: &[&str] = &[
    "none",
    "short",
    "percent",
    "percentunit",
    "bytes",
    "decbytes",
    "Bps",
    "binBps",
    "s",
    "ms",
    "ops",
    "cps",
    "dateTimeAsIso",
    "dateTimeFromNow",
];

fn parse(expr: &str) -> Result<Expr, String> {
    let vars = [
        ("__rate_interval", "7777s"),
        ("__range", "8888s"),
        ("__interval", "9999s"),
    ];
    parser::parse(&substitute(expr, &vars))
}

/// Walks the AST; `f` sees each vector selector with the function call (if any) whose
/// range argument it is, and the range.
fn selectors(e: &Expr, f: &mut impl FnMut(&VectorSelector, Option<(&str, Duration)>)) {
    match e {
        Expr::Aggregate(a) => {
            selectors(&a.expr, f);
            if let Some(p) = &a.param {
                selectors(p, f);
            }
        }
        Expr::Unary(u) => selectors(&u.expr, f),
        Expr::Binary(b) => {
            selectors(&b.lhs, f);
            selectors(&b.rhs, f);
        }
        Expr::Paren(p) => selectors(&p.expr, f),
        Expr::Subquery(s) => selectors(&s.expr, f),
        Expr::VectorSelector(vs) => f(vs, None),
        Expr::MatrixSelector(ms) => f(&ms.vs, Some(("", ms.range))),
        Expr::Call(c) => {
            for arg in &c.args.args {
                match arg.as_ref() {
                    Expr::MatrixSelector(ms) => f(&ms.vs, Some((c.func.name, ms.range))),
                    other => selectors(other, f),
                }
            }
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn has_matcher(vs: &VectorSelector, label: &str, value: &str) -> bool {
    vs.matchers
        .matchers
        .iter()
        .any(|m| m.name == label && m.value == value && matches!(m.op, MatchOp::Re(_)))
}

/// Which dashboard a query is on: one host's (an `instance` variable) or the fleet's (a
/// `node` variable, with "All" nodes by default).
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Host,
    Fleet,
}

impl Scope {
    fn of(d: &Value) -> Scope {
        if d["uid"] == "membloat-fleet" {
            Scope::Fleet
        } else {
            Scope::Host
        }
    }
}

/// Series recorded per cluster and job (`job:`, `job_group:`, `job_runtime:`): they carry
/// no instance label for a node variable to narrow.
fn per_job(name: &str) -> bool {
    name.split_once(':')
        .is_some_and(|(level, _)| level == "job" || level.starts_with("job_"))
}

/// Every problem the lint finds in one query.
fn lint_expr(expr: &str, scope: Scope) -> Vec<String> {
    let ast = match parse(expr) {
        Ok(ast) => ast,
        Err(e) => return vec![format!("does not parse: {e}")],
    };
    let mut problems = Vec::new();
    selectors(&ast, &mut |vs, call| {
        let name = vs.name.clone().unwrap_or_default();
        let node = match scope {
            Scope::Host => Some(("instance", "$instance")),
            Scope::Fleet if per_job(&name) => None,
            Scope::Fleet => Some(("instance", "$node")),
        };
        for (label, var) in [("cluster", "$cluster"), ("job", "$job")]
            .into_iter()
            .chain(node)
        {
            if !has_matcher(vs, label, var) {
                problems.push(format!("{name}: no {label}=~\"{var}\" matcher"));
            }
        }
        match call {
            Some((f @ ("rate" | "irate"), range)) if range != RATE_INTERVAL => {
                problems.push(format!("{f}({name}) does not use $__rate_interval"))
            }
            Some(("increase", range)) if range != RATE_INTERVAL && range != RANGE => problems.push(
                format!("increase({name}) uses neither $__rate_interval nor $__range"),
            ),
            _ => {}
        }
        let counted = matches!(call, Some(("rate" | "irate" | "increase", _)));
        if name.ends_with("_total") && !counted {
            problems.push(format!("counter {name} not inside rate, irate or increase"));
        }
    });
    problems
}

fn uses_datasource_variable(v: &Value) -> bool {
    v["uid"] == "${datasource}" || v["uid"] == "$datasource"
}

/// Every problem the lint finds in one dashboard.
#[allow(clippy::too_many_lines, reason = "the linter's rules, one block each")]
fn lint(d: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let title = d["title"].as_str().unwrap_or("?").to_string();
    let mut say = |what: String| problems.push(format!("{title}: {what}"));

    let vars = variables(d);
    let sources: Vec<&Value> = vars.iter().filter(|v| v["type"] == "datasource").collect();
    match sources.as_slice() {
        [ds] if ds["name"] == "datasource" && ds["query"] == "prometheus" => {}
        _ => {
            say("needs exactly one `datasource` variable of type datasource for Prometheus".into())
        }
    }
    let scope = Scope::of(d);
    let node = match scope {
        Scope::Host => ("instance", "Instance", false, ".+"),
        Scope::Fleet => ("node", "Node", true, ".+"),
    };
    for (name, label, all, all_value) in [
        ("cluster", "Cluster", true, ".*"),
        ("job", "Job", true, ".+"),
        node,
    ] {
        match vars.iter().find(|v| v["name"] == name) {
            None => say(format!("no `{name}` variable")),
            Some(v) => {
                if v["type"] != "query" || !uses_datasource_variable(&v["datasource"]) {
                    say(format!("`{name}` must be a query on ${{datasource}}"));
                }
                if v["multi"] != true || v["allValue"] != all_value || v["label"] != label {
                    say(format!(
                        "`{name}` must be multi-select, allValue {all_value}, labelled {label}"
                    ));
                }
                if v["includeAll"] != all {
                    say(format!("`{name}`: includeAll must be {all}"));
                }
            }
        }
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        let q = v["query"].as_str().unwrap_or("");
        match label_values(q) {
            Some((selector, _)) if parse(&selector).is_ok() => {}
            _ => say(format!("variable {}: bad query {q:?}", v["name"])),
        }
    }

    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in dashboards::panels(d) {
        let pt = p["title"].as_str().unwrap_or("");
        if !ids.insert(p["id"].as_u64()) {
            say(format!("panel {pt:?}: duplicate id"));
        }
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap_or(99),
            g["y"].as_u64().unwrap_or(0),
            g["w"].as_u64().unwrap_or(0),
            g["h"].as_u64().unwrap_or(0),
        );
        if w == 0 || h == 0 || x + w > 24 {
            say(format!(
                "panel {pt:?}: gridPos {g} outside the 24-column grid"
            ));
        }
        for cx in x..x + w {
            for cy in y..y + h {
                if !cells.insert((cx, cy)) {
                    say(format!("panel {pt:?} overlaps another panel"));
                }
            }
        }
    }

    for p in data_panels(d) {
        let pt = p["title"].as_str().unwrap_or("").to_string();
        if pt.is_empty() {
            say("a panel has no title".into());
        }
        if p["description"].as_str().unwrap_or("").len() < 20 {
            say(format!(
                "panel {pt:?}: no description telling how to read it"
            ));
        }
        let unit = p["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or("");
        if !UNITS.contains(&unit) {
            say(format!("panel {pt:?}: no or unknown unit {unit:?}"));
        }
        if !uses_datasource_variable(&p["datasource"]) {
            say(format!("panel {pt:?}: datasource is not ${{datasource}}"));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if targets.is_empty() {
            say(format!("panel {pt:?}: no queries"));
        }
        for t in targets {
            if !uses_datasource_variable(&t["datasource"]) {
                say(format!(
                    "panel {pt:?}: a target's datasource is not ${{datasource}}"
                ));
            }
        }
        for e in exprs(p) {
            for problem in lint_expr(&e, scope) {
                say(format!("panel {pt:?}: {problem} in {e}"));
            }
        }
    }
    problems
}

/// Where variable `name` is in a dashboard's templating list.
fn var(d: &Value, name: &str) -> usize {
    variables(d)
        .iter()
        .position(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variable {name}"))
}

#[test]
fn shipped_dashboards_pass_the_lint() {
    let mut problems = Vec::new();
    let mut uids = BTreeSet::new();
    for file in dashboards::FILES {
        let d = dashboards::load(file);
        assert!(uids.insert(d["uid"].to_string()), "{file}: duplicate uid");
        assert!(
            data_panels(&d).len() >= 10,
            "{file}: only {} panels",
            data_panels(&d).len()
        );
        problems.extend(lint(&d));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
#[allow(clippy::too_many_lines, reason = "one broken dashboard per rule")]
fn the_lint_rejects_each_broken_rule() {
    let good = dashboards::load("membloat-host.json");
    assert!(lint(&good).is_empty());
    let first = good["panels"]
        .as_array()
        .unwrap()
        .iter()
        .position(|p| p["type"] != "row")
        .unwrap();
    let with_panel = |f: &dyn Fn(&mut Value)| {
        let mut d = good.clone();
        f(&mut d["panels"][first]);
        lint(&d)
    };
    let with_expr = |e: &str| {
        let e = e.to_string();
        with_panel(&move |p| p["targets"][0]["expr"] = json!(e))
    };
    let sel = r#"cluster=~"$cluster",job=~"$job",instance=~"$instance""#;
    assert!(
        with_expr(&format!("membloat_memory_free_bytes{{{sel}}}")).is_empty(),
        "the lint rejects a good query"
    );
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "no job matcher",
            with_expr(r#"membloat_memory_free_bytes{cluster=~"$cluster",instance=~"$instance"}"#),
        ),
        (
            "job by equality",
            with_expr(
                r#"membloat_memory_free_bytes{cluster=~"$cluster",job="$job",instance=~"$instance"}"#,
            ),
        ),
        (
            "no instance matcher",
            with_expr(r#"membloat_memory_free_bytes{cluster=~"$cluster",job=~"$job"}"#),
        ),
        (
            "no cluster matcher",
            with_expr(r#"membloat_memory_free_bytes{job=~"$job",instance=~"$instance"}"#),
        ),
        (
            "fixed rate window",
            with_expr(&format!(
                "rate(membloat_vmstat_oom_kill_total{{{sel}}}[5m])"
            )),
        ),
        (
            "bare counter",
            with_expr(&format!("membloat_vmstat_oom_kill_total{{{sel}}}")),
        ),
        (
            "counter in sum",
            with_expr(&format!("sum(membloat_vmstat_oom_kill_total{{{sel}}})")),
        ),
        ("unparseable", with_expr("rate(membloat_x{")),
        (
            "no unit",
            with_panel(&|p| p["fieldConfig"]["defaults"]["unit"] = json!("")),
        ),
        (
            "bad unit",
            with_panel(&|p| p["fieldConfig"]["defaults"]["unit"] = json!("MiB")),
        ),
        (
            "no description",
            with_panel(&|p| p["description"] = json!("")),
        ),
        (
            "hard-coded uid",
            with_panel(&|p| p["datasource"]["uid"] = json!("P1809F7CD0C75ACF3")),
        ),
        (
            "target uid",
            with_panel(&|p| p["targets"][0]["datasource"]["uid"] = json!("prom")),
        ),
        (
            "overlap",
            with_panel(&|p| p["gridPos"] = json!({"x": 0, "y": 0, "w": 24, "h": 30})),
        ),
    ];
    for (what, problems) in cases {
        assert!(!problems.is_empty(), "the lint let {what:?} pass");
    }

    let mut single = good.clone();
    let i = var(&single, "job");
    single["templating"]["list"][i]["multi"] = json!(false);
    assert!(!lint(&single).is_empty(), "single-select job passed");
    let mut all_hosts = good.clone();
    let i = var(&all_hosts, "instance");
    all_hosts["templating"]["list"][i]["includeAll"] = json!(true);
    assert!(
        !lint(&all_hosts).is_empty(),
        "instance defaulting to All passed"
    );
    let mut no_cluster = good.clone();
    let i = var(&no_cluster, "cluster");
    no_cluster["templating"]["list"]
        .as_array_mut()
        .unwrap()
        .remove(i);
    assert!(!lint(&no_cluster).is_empty(), "no cluster variable passed");
    let mut no_ds = good.clone();
    no_ds["templating"]["list"]
        .as_array_mut()
        .unwrap()
        .retain(|v| v["type"] != "datasource");
    assert!(
        !lint(&no_ds).is_empty(),
        "missing datasource variable passed"
    );
}

/// On the fleet dashboard, a node's series must follow the node variable; series recorded
/// per cluster and job have no node to follow, and "All" nodes is the default.
#[test]
fn the_lint_holds_the_fleet_to_its_node_variable() {
    let fleet = dashboards::load("membloat-fleet.json");
    assert!(lint(&fleet).is_empty());
    let seln = r#"cluster=~"$cluster",job=~"$job",instance=~"$node""#;
    let selj = r#"cluster=~"$cluster",job=~"$job""#;
    for good in [
        format!("topk(20, membloat_cgroup_hoarded_bytes{{{seln}}})"),
        format!("sum by (group) (job_group:membloat_hoarded_bytes:sum{{{selj}}})"),
        format!("sum(job:membloat_vmstat_oom_kill:increase1h{{{selj}}})"),
    ] {
        assert!(lint_expr(&good, Scope::Fleet).is_empty(), "{good}");
    }
    for bad in [
        // A node's series that ignores the node variable.
        format!("topk(20, membloat_cgroup_hoarded_bytes{{{selj}}})"),
        format!("sum(instance:membloat_hoarded_bytes:sum{{{selj}}})"),
        // The host dashboards' variable, which the fleet dashboard does not have.
        r#"membloat_memory_free_bytes{cluster=~"$cluster",job=~"$job",instance=~"$instance"}"#
            .to_string(),
        // A recorded per-job series still needs the cluster and job.
        "sum by (group) (job_group:membloat_hoarded_bytes:sum)".to_string(),
    ] {
        assert!(!lint_expr(&bad, Scope::Fleet).is_empty(), "passed: {bad}");
    }
    let mut one_node = fleet.clone();
    let i = var(&one_node, "node");
    one_node["templating"]["list"][i]["includeAll"] = json!(false);
    assert!(
        !lint(&one_node).is_empty(),
        "a fleet opening on one node passed"
    );
}

/// The fleet dashboard's links lead down to a shipped dashboard, with the node of the row
/// or line they are on: every table that lists nodes or containers, and every time series
/// with a line per node.
#[test]
fn the_fleet_links_down_to_the_host_dashboard() {
    let uids: BTreeSet<String> = dashboards::FILES
        .iter()
        .map(|f| dashboards::load(f)["uid"].as_str().unwrap().to_string())
        .collect();
    let fleet = dashboards::load("membloat-fleet.json");
    let mut linked = 0;
    for p in data_panels(&fleet) {
        let mut links: Vec<&Value> = Vec::new();
        links.extend(
            p["fieldConfig"]["defaults"]["links"]
                .as_array()
                .into_iter()
                .flatten(),
        );
        for o in p["fieldConfig"]["overrides"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for prop in o["properties"].as_array().unwrap() {
                if prop["id"] == "links" {
                    links.extend(prop["value"].as_array().unwrap());
                }
            }
        }
        let by_node = exprs(p)
            .iter()
            .any(|e| !e.contains("sum(") || e.contains("topk"))
            && (p["type"] == "table" || p["targets"][0]["legendFormat"] == "{{instance}}");
        assert_eq!(
            !links.is_empty(),
            by_node,
            "{}: links {links:?}",
            p["title"]
        );
        for l in links {
            let url = l["url"].as_str().unwrap();
            let uid = url
                .strip_prefix("/d/")
                .and_then(|u| u.split('/').next())
                .unwrap_or("");
            assert!(uids.contains(uid), "{}: {url}", p["title"]);
            assert!(url.contains("var-instance=$"), "{}: {url}", p["title"]);
            assert!(url.contains("${__url_time_range}"), "{url}");
            linked += 1;
        }
    }
    assert!(linked >= 8, "{linked} links");
}

/// The committed JSON is what the mixin renders (./mixin/render.sh).
#[test]
fn committed_json_matches_the_jsonnet_source() {
    let out = tempfile::tempdir().unwrap();
    let status = tool("jsonnet")
        .current_dir(dashboards::dir().join(".."))
        .arg("-m")
        .arg(out.path())
        .args(["-e", "(import 'mixin/mixin.libsonnet').grafanaDashboards"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "jsonnet failed");
    for file in dashboards::FILES {
        let rendered: Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join(file)).unwrap()).unwrap();
        assert!(
            rendered == dashboards::load(file),
            "grafana/{file} differs from the mixin: run ./mixin/render.sh"
        );
    }
}

/// Every metric a dashboard or rule names is exported (docs/metrics.md) or recorded.
#[test]
fn dashboards_and_rules_name_only_real_metrics() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("docs/metrics.md")).unwrap();
    let rules = common::rules();
    let recorded: BTreeSet<&str> = rules.iter().filter_map(|r| r["record"].as_str()).collect();
    let known = |name: &str| {
        recorded.contains(name)
            || readme.contains(&format!("`{name}`"))
            || readme.contains(&format!("`{name}{{"))
            || name.starts_with("membloat_vmstat_")
            || name.starts_with("membloat_mthp_")
            || name == "up"
    };
    let mut unknown = BTreeSet::new();
    let mut check = |expr: &str| {
        let ast = parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        selectors(&ast, &mut |vs, _| {
            let name = vs.name.clone().unwrap_or_default();
            if !known(&name) {
                unknown.insert(name);
            }
        });
    };
    for file in dashboards::FILES {
        for p in data_panels(&dashboards::load(file)) {
            exprs(p).iter().for_each(|e| check(e));
        }
    }
    for rule in &rules {
        check(rule["expr"].as_str().unwrap());
    }
    assert!(unknown.is_empty(), "not exported or recorded: {unknown:?}");
}

/// The alert thresholds are drawn where their signal is plotted (the same constants the
/// rules and explain use), and OOM kills mark every dashboard's time axis.
#[test]
fn alert_thresholds_and_oom_kills_show_on_the_dashboards() {
    use membloat_exporter::model::signals;
    let steps = |file: &str, title: &str| -> Vec<f64> {
        let d = dashboards::load(file);
        let p = data_panels(&d)
            .into_iter()
            .find(|p| p["title"] == title && p["type"] == "timeseries")
            .cloned()
            .unwrap_or_else(|| panic!("{file}: no time series {title:?}"));
        let defaults = &p["fieldConfig"]["defaults"];
        assert_eq!(
            defaults["custom"]["thresholdsStyle"]["mode"], "dashed",
            "{title}"
        );
        defaults["thresholds"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["value"].as_f64())
            .collect()
    };
    assert_eq!(
        steps("membloat-host.json", "Commit ratio"),
        [signals::COMMIT_NEAR_LIMIT_RATIO, 1.0]
    );
    assert_eq!(
        steps("membloat-host.json", "Memory pressure"),
        [signals::PRESSURE_STALLED_RATIO]
    );
    for file in dashboards::FILES {
        let d = dashboards::load(file);
        let list = d["annotations"]["list"].as_array().unwrap();
        let oom = list
            .iter()
            .find(|a| a["name"] == "OOM kills")
            .unwrap_or_else(|| panic!("{file}: no OOM kill annotation"));
        let expr = oom["expr"].as_str().unwrap();
        assert!(expr.contains("membloat_vmstat_oom_kill_total"), "{expr}");
        let problems = lint_expr(expr, Scope::of(&d));
        assert!(problems.is_empty(), "{file}: {problems:?}");
        assert_eq!(oom["datasource"]["uid"], "${datasource}");
    }
}
