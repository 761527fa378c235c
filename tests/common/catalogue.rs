//! The metric catalogue's check shared by the fast tier (the fixture trees) and the
//! runtimes tier (this host, with a process of each kind the heap readers read).

use super::*;
use membloat_exporter::expose::catalogue::{all, Kind, Metric};
use std::collections::BTreeMap;

/// Rows the fixture and a `--once` of this host cannot show, and why.
pub const NOT_SERVED_HERE: [(&str, &str); 1] = [(
    "membloat_last_oom_kill_timestamp_seconds",
    "needs an OOM kill between the two scans of one run",
)];

/// Rows only the live host can show: the fixture's SwapFree is absurd (dropped) and a
/// fixture has no process memory for the heap walk to read, nor a JVM (the live run has
/// one of its own). Every heap reader's families of the top processes are live-only too
/// ([`live_only`]: they are read from a process's memory).
pub const LIVE_ONLY: [&str; 13] = [
    // A live process's socket tables.
    "membloat_netns_socket_queue_bytes",
    // statvfs of a real tmpfs mount.
    "membloat_tmpfs_used_bytes",
    // A memfd the live run holds open.
    "membloat_unlinked_file_bytes",
    "membloat_swap_free_bytes",
    "membloat_cgroup_hoarded_bytes",
    "membloat_cgroup_runtime_held_bytes",
    "membloat_group_runtime_held_bytes",
    "membloat_process_runtime_held_bytes",
    "membloat_process_heap_free_bytes",
    "membloat_process_heap_free_resident_bytes",
    "membloat_process_heap_reclaimable_bytes",
    "membloat_process_heap_top_bytes",
    "membloat_process_heap_free_chunks",
];

/// Whether only the live host can show the row: one of [`LIVE_ONLY`], or a heap reader's
/// family of the top processes.
pub fn live_only(name: &str) -> bool {
    let readers = membloat_exporter::heap::list::ROWS
        .iter()
        .flat_map(|r| r.iter());
    LIVE_ONLY.contains(&name) || readers.map(|m| m.name).any(|n| n == name)
}

/// `# TYPE` and `# HELP` of every family in a text-format exposition.
pub fn families(text: &str) -> BTreeMap<String, (String, String)> {
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
pub fn row_of(name: &str) -> Option<(&'static Metric, Option<String>)> {
    if let Some(m) = all().into_iter().find(|m| m.name == name) {
        return Some((m, None));
    }
    all().into_iter().filter(|m| m.is_pattern()).find_map(|m| {
        let (pre, post) = m.name.split_once("<key>").unwrap();
        let key = name.strip_prefix(pre)?.strip_suffix(post)?;
        (!key.is_empty()).then(|| (m, Some(key.to_string())))
    })
}

pub fn text_type(m: &Metric) -> &'static str {
    match m.kind {
        Kind::Counter => "counter",
        // The text format 0.0.4 has no info type.
        Kind::Gauge | Kind::Info => "gauge",
    }
}

pub fn check_served(text: &str, served: &mut std::collections::BTreeSet<&'static str>) {
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

/// Every family served has its row, and every row is served: by the fixture trees alone
/// (`live` false: rows only a live host shows are not asked for), or by them and this host
/// with a process of each kind the heap readers read.
pub fn check(live: bool) {
    let mut served = std::collections::BTreeSet::new();
    let fixture_text = once(&fixture(), &[]);
    check_served(&fixture_text, &mut served);
    // The fixture is cgroup v1; v2's own rows (peak, events, pressure) from a v2 copy.
    let dir = tempfile::tempdir().unwrap();
    check_served(&once(&v2_fixture(dir.path()), &[]), &mut served);
    let from_fixture = served.clone();
    if live {
        // This host: every process deep-read, so the heap walk and the deep tier show.
        // A JVM holding freed Java heap, for the JVM's rows.
        let _jvm = super::repro::Repro::java("java", &["-Xms64m", "-Xmx512m"], 200, 20);
        let _unpublished =
            super::repro::Repro::java("java", &["-XX:-UsePerfData", "-Xmx256m"], 100, 10);
        // A Go program holding freed heap under a GOMEMLIMIT, and a stripped one, for the Go
        // rows.
        let gofree = super::repro::go("gofree", &[]);
        let _go = super::repro::Repro::run_env(&gofree, &["7"], &[("GOMEMLIMIT", "2GiB")]);
        let stripped = super::repro::go("gostripped", &["-ldflags=-s -w"]);
        let _stripped = super::repro::Repro::run_env(&stripped, &["8"], &[]);
        // jemalloc linked in (measured), and Debian's stripped one preloaded (unmeasured).
        let _jemalloc = super::repro::Repro::start("jefree", &["3", "2", "64", "10"], &[]);
        let _stripped_jemalloc = super::repro::Repro::start(
            "hoard",
            &["2", "1", "0"],
            &[("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")],
        );
        // mimalloc linked in with its symbols (measured), and stripped (unmeasured).
        let mimalloc = super::mimalloc::program("3.3.2", false);
        let _mimalloc = super::repro::Repro::run_env(&mimalloc, &["4", "2", "64", "10"], &[]);
        let stripped_mimalloc = super::stripped(&mimalloc, "mimalloc-stripped");
        let _stripped_mimalloc =
            super::repro::Repro::run_env(&stripped_mimalloc, &["4", "1", "16", "10"], &[]);
        // Debian's CPython 3.13 as shipped (measured through what it exports), and its
        // 3.11 as shipped (stripped: unmeasured).
        let stats = tempfile::tempdir().unwrap();
        let python = |path: &std::path::Path, name: &str| {
            super::python::pyarenas(path, &[], (1, 50_000, 50), &stats.path().join(name))
        };
        let _python = python(&super::python::debian_of("3.13").stripped, "measured");
        let _stripped_python = python(&super::python::debian_of("3.11").stripped, "stripped");
        // A memfd written and held open by this test, for the unlinked files' row.
        let _memfd = super::owners::memfd("catalogue", 4096);
        let live = run(&[
            "--once",
            "--once.interval=1s",
            "--collector.processes.deep-min-size=0",
            // Every process read, whatever else runs beside the test: no CPU budget, and
            // the deep reads' deadline (one read timeout) past any busy host's batch.
            "--collector.processes.deep-budget=1h",
            "--collector.processes.read-timeout=2m",
            "--collector.processes.top-k=500",
        ]);
        assert!(
            live.status.success(),
            "{}",
            String::from_utf8_lossy(&live.stderr)
        );
        check_served(&String::from_utf8_lossy(&live.stdout), &mut served);
    }
    for m in all() {
        if NOT_SERVED_HERE.iter().any(|(n, _)| *n == m.name) {
            continue;
        }
        if live_only(m.name) {
            if !live {
                continue;
            }
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
