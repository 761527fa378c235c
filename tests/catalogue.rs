//! The metric catalogue (src/expose/catalogue.rs) is the one list of what the exporter
//! serves: every family a real scrape returns has its row (name, type, help), every row is
//! served, and docs/metrics.md and the README's tables are generated from it
//! (MEMBLOAT_UPDATE_GOLDEN=1 regenerates both).

mod common;

use common::*;
use membloat_exporter::expose::catalogue::{all, Kind, Metric, Section, Unit};
use membloat_exporter::family::Collector;
use std::collections::BTreeMap;
use std::path::Path;

/// Rows the fixture and a `--once` of this host cannot show, and why.
const NOT_SERVED_HERE: [(&str, &str); 1] = [(
    "membloat_last_oom_kill_timestamp_seconds",
    "needs an OOM kill between the two scans of one run",
)];

/// Rows only the live host can show: the fixture's SwapFree is absurd (dropped) and a
/// fixture has no process memory for the heap walk to read, nor a JVM (the live run has
/// one of its own).
const LIVE_ONLY: [&str; 35] = [
    "membloat_process_python_arenas",
    "membloat_process_python_allocated_bytes",
    "membloat_process_python_unused_bytes",
    "membloat_process_python_unused_resident_bytes",
    "membloat_process_python_unmeasured",
    "membloat_process_jemalloc_active_bytes",
    "membloat_process_jemalloc_dirty_bytes",
    "membloat_process_jemalloc_muzzy_bytes",
    "membloat_process_jemalloc_kept_resident_bytes",
    "membloat_process_jemalloc_unmeasured",
    "membloat_process_go_heap_in_use_bytes",
    "membloat_process_go_heap_free_bytes",
    "membloat_process_go_heap_free_resident_bytes",
    "membloat_process_go_heap_released_bytes",
    "membloat_process_go_gc_goal_bytes",
    "membloat_process_go_memory_limit_bytes",
    "membloat_process_go_unmeasured",
    "membloat_process_jvm_heap_max_bytes",
    "membloat_process_jvm_unmeasured",
    "membloat_swap_free_bytes",
    "membloat_cgroup_hoarded_bytes",
    "membloat_cgroup_runtime_held_bytes",
    "membloat_group_runtime_held_bytes",
    "membloat_process_runtime_held_bytes",
    "membloat_process_jvm_info",
    "membloat_process_jvm_heap_committed_bytes",
    "membloat_process_jvm_heap_used_bytes",
    "membloat_process_jvm_heap_resident_bytes",
    "membloat_process_jvm_metaspace_committed_bytes",
    "membloat_process_jvm_metaspace_used_bytes",
    "membloat_process_heap_free_bytes",
    "membloat_process_heap_free_resident_bytes",
    "membloat_process_heap_reclaimable_bytes",
    "membloat_process_heap_top_bytes",
    "membloat_process_heap_free_chunks",
];

/// `# TYPE` and `# HELP` of every family in a text-format exposition.
fn families(text: &str) -> BTreeMap<String, (String, String)> {
    let mut out: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            let help = help.replace("\\n", "\n").replace("\\\\", "\\");
            out.entry(name.to_string()).or_default().1 = help;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            out.entry(name.to_string()).or_default().0 = kind.to_string();
        }
    }
    out
}

/// The row a served family belongs to, and the key a pattern row matched.
fn row_of(name: &str) -> Option<(&'static Metric, Option<String>)> {
    if let Some(m) = all().into_iter().find(|m| m.name == name) {
        return Some((m, None));
    }
    all().into_iter().filter(|m| m.is_pattern()).find_map(|m| {
        let (pre, post) = m.name.split_once("<key>").unwrap();
        let key = name.strip_prefix(pre)?.strip_suffix(post)?;
        (!key.is_empty()).then(|| (m, Some(key.to_string())))
    })
}

fn text_type(m: &Metric) -> &'static str {
    match m.kind {
        Kind::Counter => "counter",
        // The text format 0.0.4 has no info type.
        Kind::Gauge | Kind::Info => "gauge",
    }
}

fn check_served(text: &str, served: &mut std::collections::BTreeSet<&'static str>) {
    for (name, (kind, help)) in families(text) {
        let (m, key) =
            row_of(&name).unwrap_or_else(|| panic!("{name} is served but has no catalogue row"));
        served.insert(m.name);
        assert_eq!(kind, text_type(m), "{name}: type differs from its row");
        let want = match &key {
            Some(k) => m.help.replace("<key>", k),
            None => m.help.to_string(),
        };
        assert_eq!(help, want, "{name}: help differs from its row");
    }
}

#[test]
fn every_family_served_has_its_row_and_every_row_is_served() {
    let mut served = std::collections::BTreeSet::new();
    let fixture_text = once(&fixture(), &[]);
    check_served(&fixture_text, &mut served);
    // The fixture is cgroup v1; v2's own rows (peak, events, pressure) from a v2 copy.
    let dir = tempfile::tempdir().unwrap();
    check_served(&once(&v2_fixture(dir.path()), &[]), &mut served);
    let from_fixture = served.clone();
    // This host: every process deep-read, so the heap walk and the deep tier show.
    // A JVM holding freed Java heap, for the JVM's rows.
    let _jvm = common::repro::Repro::java("java", &["-Xms64m", "-Xmx512m"], 200, 20);
    let _unpublished =
        common::repro::Repro::java("java", &["-XX:-UsePerfData", "-Xmx256m"], 100, 10);
    // A Go program holding freed heap under a GOMEMLIMIT, and a stripped one, for the Go
    // rows.
    let gofree = common::repro::go("gofree", &[]);
    let _go = common::repro::Repro::run_env(&gofree, &["7"], &[("GOMEMLIMIT", "2GiB")]);
    let stripped = common::repro::go("gostripped", &["-ldflags=-s -w"]);
    let _stripped = common::repro::Repro::run_env(&stripped, &["8"], &[]);
    // jemalloc linked in (measured), and Debian's stripped one preloaded (unmeasured).
    let _jemalloc = common::repro::Repro::start("jefree", &["3", "2", "64", "10"], &[]);
    let _stripped_jemalloc = common::repro::Repro::start(
        "hoard",
        &["2", "1", "0"],
        &[("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")],
    );
    // CPython with its symbols (measured), and Debian's stripped one (unmeasured).
    let stats = tempfile::tempdir().unwrap();
    let python = |interpreter: &str, name: &str| {
        let path = which(interpreter);
        common::python::pyarenas(&path, &[], (1, 50_000, 50), &stats.path().join(name))
    };
    let _python = python("python3", "measured");
    let _stripped_python = python("/usr/bin/python3.11", "stripped");
    let live = run(&[
        "--once",
        "--once.interval=1s",
        "--collector.processes.deep-min-size=0",
        "--collector.processes.top-k=500",
    ]);
    assert!(
        live.status.success(),
        "{}",
        String::from_utf8_lossy(&live.stderr)
    );
    check_served(&String::from_utf8_lossy(&live.stdout), &mut served);
    for m in all() {
        if NOT_SERVED_HERE.iter().any(|(n, _)| *n == m.name) {
            continue;
        }
        if LIVE_ONLY.contains(&m.name) {
            // Only root can read every process's heap; as a user, the test's own
            // processes may all be too small or too short-lived to walk.
            if !served.contains(m.name) && !is_root() {
                skipped(&format!(
                    "{} is served only by a heap walk (needs root)",
                    m.name
                ));
                continue;
            }
        } else {
            assert!(
                from_fixture.contains(m.name) || m.is_pattern() && served.contains(m.name),
                "{} is in the catalogue but the fixture does not serve it",
                m.name
            );
        }
        assert!(
            served.contains(m.name),
            "{} is in the catalogue but never served",
            m.name
        );
    }
}

fn title(s: Section) -> String {
    match s {
        Section::Exporter => "The exporter itself".to_string(),
        Section::Of(c) => format!("`{}` collector: {}", c.as_str(), c.what()),
    }
}

fn sections() -> Vec<Section> {
    let mut out = vec![Section::Exporter];
    out.extend(Collector::all().map(Section::Of));
    out
}

fn table(section: Section) -> String {
    let mut out = String::from(
        "| metric | type | unit | meaning | source |\n|--------|------|------|---------|--------|\n",
    );
    for m in all().into_iter().filter(|m| m.section == section) {
        let labels = if m.labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", m.labels.join(","))
        };
        let unit = match m.unit {
            Unit::None => "",
            u => u.as_str(),
        };
        let source = if m.source.starts_with('/') {
            format!("`{}`", m.source)
        } else {
            m.source.to_string()
        };
        out.push_str(&format!(
            "| `{}{labels}` | {} | {unit} | {} | {source} |\n",
            m.name,
            m.kind.as_str(),
            m.help.replace('|', "\\|"),
        ));
    }
    out
}

fn key(s: Section) -> &'static str {
    match s {
        Section::Exporter => "exporter",
        Section::Of(c) => c.as_str(),
    }
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The README's summary: a row per section, linking its table in docs/metrics.md.
fn summary() -> String {
    let mut out = String::from(
        "| collector | what it exports | families |\n|-----------|-----------------|----------|\n",
    );
    for s in sections() {
        let (name, what) = match s {
            Section::Exporter => (
                "the exporter itself".to_string(),
                "scans, their cost and errors, the heap walk's work, build info, `process_*`",
            ),
            Section::Of(c) => (format!("`{}`", c.as_str()), c.what()),
        };
        let count = all().into_iter().filter(|m| m.section == s).count();
        out.push_str(&format!(
            "| [{name}](docs/metrics.md#{}) | {what} | {count} |\n",
            slug(&title(s))
        ));
    }
    out
}

/// `text` with each `<!-- catalogue:KEY -->` block holding what `block(KEY)` makes.
fn regenerated(text: &str, keys: &[&str], block: impl Fn(&str) -> String) -> String {
    let mut out = text.to_string();
    for key in keys {
        let open = format!("<!-- catalogue:{key} -->\n");
        let start = out
            .find(&open)
            .unwrap_or_else(|| panic!("no marker {open:?}"))
            + open.len();
        let end = start
            + out[start..]
                .find("<!-- /catalogue -->")
                .expect("a catalogue block is not closed");
        out.replace_range(start..end, &block(key));
    }
    out
}

fn current(path: &Path, want: &str) {
    if std::env::var_os("MEMBLOAT_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, want).unwrap();
    }
    let got = std::fs::read_to_string(path).unwrap();
    assert!(
        got == want,
        "{} is not what the catalogue generates (MEMBLOAT_UPDATE_GOLDEN=1 cargo test --test catalogue)",
        path.display()
    );
}

/// docs/metrics.md: a heading per section, then its table, generated.
#[test]
fn docs_metrics_md_tables_are_generated_from_the_catalogue() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let keys: Vec<&str> = sections().into_iter().map(key).collect();
    let mut last = 0;
    for s in sections() {
        let heading = format!("\n## {}\n", title(s));
        let at = text
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/metrics.md lacks the heading {heading:?}"));
        let block = text
            .find(&format!("<!-- catalogue:{} -->", key(s)))
            .unwrap();
        assert!(at > last && block > at, "{heading:?} out of order");
        last = block;
    }
    let by_key = |k: &str| table(*sections().iter().find(|s| key(**s) == k).unwrap());
    current(&path, &regenerated(&text, &keys, by_key));
}

/// The README's catalogue is one row per section, each linking its table.
#[test]
fn readme_summary_is_generated_from_the_catalogue() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    current(&path, &regenerated(&readme, &["summary"], |_| summary()));
}
