//! A memory cgroup's balance sheet (`membloat_cgroup_memory_bytes`) and the charge of its
//! removed descendants (`membloat_cgroup_removed_descendants_bytes`) on this machine's
//! kernel (cgroup v1; the kernels tier runs the same on v2), with the kernel's own
//! counters and the injected amounts as truth. Root: it makes memory cgroups.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::cgroup::TestCgroup;
use crate::common::repro::build;
use crate::common::{needs_root, once_every_process, run, value};

const MIB: i64 = 1 << 20;
const PAGE: i64 = 4096;

/// A cgroup's sheet rows from one exposition; their sum is asserted to be its usage.
fn sheet(text: &str, label: &str) -> BTreeMap<String, i64> {
    let prefix = format!("membloat_cgroup_memory_bytes{{cgroup=\"{label}\",row=\"");
    let rows: BTreeMap<String, i64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let (row, bytes) = rest.split_once("\"} ").unwrap();
            (row.to_string(), bytes.parse::<f64>().unwrap() as i64)
        })
        .collect();
    let usage = value(
        text,
        &format!("membloat_cgroup_memory_usage_bytes{{cgroup=\"{label}\"}}"),
    )
    .unwrap_or_else(|| panic!("no usage of {label}")) as i64;
    assert_eq!(rows.values().sum::<i64>(), usage, "{rows:?}");
    rows
}

fn sum(rows: &BTreeMap<String, i64>, prefix: &str) -> i64 {
    rows.iter()
        .filter(|(r, _)| r.starts_with(prefix))
        .map(|(_, b)| b)
        .sum()
}

/// How far the sheet's `unexplained` row may be from 0 (docs/balance-sheet.md): each CPU's
/// stock of pages charged ahead (`MEMCG_CHARGE_BATCH`, 64 pages), and as much again of
/// statistics not yet folded (5.13+, rstat); for each counter read on older kernels.
fn bound() -> i64 {
    let cpus = std::thread::available_parallelism().unwrap().get() as i64;
    cpus * 64 * PAGE * 2
}

fn rss_anon(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    kib * 1024
}

/// Runs a shell line inside the cgroup `dir`, to its end.
fn inside(dir: &Path, line: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && {line}",
            dir.join("cgroup.procs").display()
        ))
        .status()
        .unwrap();
    assert!(status.success(), "{line}");
}

/// A process with 64 MiB of anonymous memory and one that freed 32 MiB with MADV_FREE,
/// then 16 MiB written to tmpfs and 32 MiB to a file from inside the cgroup: the
/// anonymous rows are the processes' RssAnon, the lazily freed pages their own row and not
/// page cache, shmem and page cache grow by what was written, and the rest is within the
/// bound.
#[test]
#[ignore = "needs root"]
fn a_containers_sheet_holds_what_its_processes_put_there() {
    needs_root("making a memory cgroup");
    let Some(cg) = TestCgroup::new("sheet") else {
        return;
    };
    let burst = cg.spawn("burst", &format!("{} 65536", build("burst").display()));
    let lazy = cg.spawn(
        "lazyfree",
        &format!("{} 48 16", build("lazyfree").display()),
    );
    let before = sheet(&once_every_process(), &cg.label());
    let anon = rss_anon(burst.pid()) + rss_anon(lazy.pid());
    assert!(
        (sum(&before, "anon_") - anon).abs() <= bound(),
        "anon rows {} vs the processes' RssAnon {anon}: {before:?}",
        sum(&before, "anon_")
    );
    assert_eq!(before["anon_lazy_free"], 32 * MIB, "{before:?}");

    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shm = format!("/dev/shm/membloat-sheet-{}", std::process::id());
    let file = dir.path().join("cached");
    inside(
        &cg.dir,
        &format!(
            "dd if=/dev/zero of={shm} bs=1M count=16 status=none && \
             dd if=/dev/zero of={} bs=1M count=32 status=none",
            file.display()
        ),
    );
    let after = sheet(&once_every_process(), &cg.label());
    let _ = std::fs::remove_file(&shm);
    let shmem = after["shmem"] - before["shmem"];
    let cache = sum(&after, "page_cache_") - sum(&before, "page_cache_");
    eprintln!(
        "sheet of {}: shmem +{:.2} MiB (16 written), page cache +{:.2} MiB (32 written), anon {:.1} MiB (RssAnon {:.1}), lazy free {:.1} MiB, unexplained {:+.2} MiB (bound {:.2})",
        cg.label(),
        shmem as f64 / MIB as f64,
        cache as f64 / MIB as f64,
        sum(&after, "anon_") as f64 / MIB as f64,
        anon as f64 / MIB as f64,
        after["anon_lazy_free"] as f64 / MIB as f64,
        after["unexplained"] as f64 / MIB as f64,
        bound() as f64 / MIB as f64
    );
    assert!(
        (shmem - 16 * MIB).abs() <= bound(),
        "shmem +{shmem}: {after:?}"
    );
    assert!(
        (cache - 32 * MIB).abs() <= bound(),
        "page cache +{cache}: {after:?}"
    );
    assert!(after["unexplained"].abs() <= bound(), "{after:?}");
    drop((burst, lazy));
}

/// 300 child cgroups each charged 1 MiB of page cache and removed: the parent's charge
/// of removed descendants is 300 MiB, though no process and no live child holds it; once
/// the parent's pages are reclaimed it falls.
#[test]
#[ignore = "needs root"]
fn removed_childrens_charge_is_named_at_the_parent_until_reclaimed() {
    needs_root("making memory cgroups");
    let Some(parent) = TestCgroup::new("removed") else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for i in 0..300 {
        let child = parent.dir.join(format!("c{i}"));
        std::fs::create_dir(&child).unwrap();
        inside(
            &child,
            &format!(
                "dd if=/dev/zero of={} bs=1M count=1 status=none",
                dir.path().join(format!("f{i}")).display()
            ),
        );
        std::fs::remove_dir(&child).unwrap();
    }
    let series = format!(
        "membloat_cgroup_removed_descendants_bytes{{cgroup=\"{}\"}}",
        parent.label()
    );
    let removed = |text: &str| value(text, &series).unwrap_or_else(|| panic!("no {series}"));
    let text = once_every_process();
    let held = removed(&text) as i64;
    let usage = parent.read("memory.usage_in_bytes") as i64;
    eprintln!(
        "300 removed children: {:.1} MiB at the parent (usage {:.1} MiB)",
        held as f64 / MIB as f64,
        usage as f64 / MIB as f64
    );
    assert!(
        (held - 300 * MIB).abs() <= 300 * MIB / 50 + bound(),
        "{held} at the parent"
    );
    // `explain` names the parent among the holders outside the heaps, with what reclaims
    // it; applied as it says (v1's force_empty takes every page of a cgroup with no
    // process), the charge falls.
    let out = run(&["explain", "--format", "json", "--explain.interval=200ms"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let owner = doc["owners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "removed_cgroups" && o["name"] == parent.label().as_str())
        .unwrap_or_else(|| panic!("no removed_cgroups {} in {doc:#}", parent.label()))
        .clone();
    let named = owner["bytes"].as_i64().unwrap();
    assert!(
        (named - held).abs() <= bound(),
        "{named} named, {held} served"
    );
    let remedy = owner["remedy"].as_str().unwrap();
    assert!(remedy.contains("`echo 0 > memory.force_empty`"), "{remedy}");
    std::fs::write(parent.dir.join("memory.force_empty"), "0").unwrap();
    // Emptied to the page, a cgroup with no children and nothing removed below it is like
    // any other: not served. The kernel's own usage then says it holds next to nothing.
    let text = once_every_process();
    let usage = parent.read("memory.usage_in_bytes") as i64;
    let after = value(&text, &series).map(|v| v as i64);
    eprintln!("after force_empty, as explain says: {after:?} served, usage {usage}");
    assert!(
        after.unwrap_or(usage) <= 2 * MIB,
        "{after:?} left after the reclaim"
    );
    assert!(usage <= 2 * MIB, "usage {usage} after the reclaim");
}
