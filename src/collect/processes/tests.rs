use super::*;
use crate::collect::{Grouping, Scanner};
use crate::config::{DeepConfig, ReadConfig};
use crate::source::Source;
use crate::units::Collectors;
use std::path::{Path, PathBuf};
use std::time::Duration;

const STATUS: &str = "Name:\tidle\nVmSize:\t    5744 kB\nVmHWM:\t    3000 kB\nVmRSS:\t    3000 kB\nRssAnon:\t    2000 kB\nRssFile:\t    1000 kB\nRssShmem:\t       0 kB\nVmSwap:\t       0 kB\nThreads:\t1\n";

fn rollup(pss_kib: u64) -> String {
    format!("00-ff ---p 00000000 00:00 0 [rollup]\nRss: 3000 kB\nPss: {pss_kib} kB\nAnonymous: 2000 kB\nAnonHugePages: 0 kB\nSwap: 0 kB\n")
}

/// One process, pid 78, in a tree of its own.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("78");
    std::fs::create_dir_all(&p).unwrap();
    let stat = "78 (idle) S 1 78 78 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 4242 5881856 750 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    for (f, text) in [
        ("stat", stat.to_string()),
        ("status", STATUS.to_string()),
        ("statm", "1436 750 250 1 0 600 0\n".to_string()),
        ("smaps_rollup", rollup(2500)),
        ("oom_score", "666\n".to_string()),
        ("oom_score_adj", "0\n".to_string()),
    ] {
        std::fs::write(p.join(f), text).unwrap();
    }
    (dir, p)
}

fn scanner(root: &Path, refresh: u64) -> Scanner {
    let deep = DeepConfig {
        interval: Duration::from_secs(3600),
        budget: Duration::from_millis(200),
        min_bytes: u64::MAX,
        heap_walk: true,
        focus: Vec::new(),
    };
    scanner_with(root, refresh, deep)
}

fn scanner_with(root: &Path, refresh: u64, deep: DeepConfig) -> Scanner {
    let collectors = Collectors::only(&[Collector::Processes]);
    let defaults = crate::config::Config::from_args(["membloat_exporter"])
        .map_err(|_| "default flags")
        .unwrap();
    let reading = ReadConfig {
        rollup_refresh: refresh,
        ..defaults.reading
    };
    Scanner::new(
        Source::new(root, root),
        collectors,
        Grouping::Comm,
        deep,
        reading,
    )
}

fn pss_and_reads(s: &mut Scanner) -> (Option<u64>, u64) {
    let sample = s.scan();
    let p = &sample.processes[0];
    (
        p.rollup.and_then(|r| r.pss_bytes.map(|b| b >> 10)),
        sample.reads.unwrap().rollups_read,
    )
}

#[test]
fn unchanged_statm_keeps_the_last_rollup_until_the_staggered_refresh() {
    let (dir, p) = tree();
    // pid 78 with a refresh of 3: scans 0 and 3 are its refresh scans.
    let mut s = scanner(dir.path(), 3);
    assert_eq!(pss_and_reads(&mut s), (Some(2500), 1), "new: read");
    std::fs::write(p.join("smaps_rollup"), rollup(2600)).unwrap();
    std::fs::write(p.join("oom_score"), "700\n").unwrap();
    assert_eq!(
        pss_and_reads(&mut s),
        (Some(2500), 0),
        "statm unchanged: kept"
    );
    assert_eq!(s.scan().processes[0].oom_score, Some(666));
    // Scan 3 is the refresh.
    assert_eq!(pss_and_reads(&mut s), (Some(2600), 1), "refreshed");
    std::fs::write(p.join("smaps_rollup"), rollup(2700)).unwrap();
    assert_eq!(pss_and_reads(&mut s), (Some(2600), 0));
    // One more resident page: everything is read again at once.
    std::fs::write(p.join("statm"), "1436 751 250 1 0 600 0\n").unwrap();
    let sample = s.scan();
    assert_eq!(sample.reads.unwrap().rollups_read, 1);
    assert_eq!(sample.processes[0].oom_score, Some(700));
    let pss = sample.processes[0].rollup.unwrap().pss_bytes;
    assert_eq!(pss, Some(2700 << 10));
    // A changed oom_score_adj alone makes oom_score be read again.
    std::fs::write(p.join("oom_score_adj"), "500\n").unwrap();
    std::fs::write(p.join("oom_score"), "1200\n").unwrap();
    assert_eq!(s.scan().processes[0].oom_score, Some(1200));
}

/// The deep tier's schedule lives in the process's record: read when never read, then
/// again only once the interval passed and its memory moved, or after ten intervals;
/// a reused pid is a process never read.
#[test]
fn deep_reads_follow_the_schedule_kept_in_the_process_record() {
    let (dir, p) = tree();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-6.18");
    std::fs::copy(fixture.join("proc/1406/smaps"), p.join("smaps")).unwrap();
    let interval = Duration::from_millis(150);
    let deep = DeepConfig {
        interval,
        budget: Duration::from_secs(1),
        min_bytes: 0,
        heap_walk: false,
        focus: Vec::new(),
    };
    let mut s = scanner_with(dir.path(), 1, deep);
    let covered = |s: &mut Scanner| s.scan().deep.unwrap().covered;
    assert_eq!(covered(&mut s), 1, "never read: read");
    assert_eq!(covered(&mut s), 0, "within the interval: not read");
    std::thread::sleep(interval + Duration::from_millis(20));
    assert_eq!(covered(&mut s), 0, "memory unchanged: not read");
    std::fs::write(
        p.join("status"),
        STATUS.replace("3000 kB\nRssAnon", "3100 kB\nRssAnon"),
    )
    .unwrap();
    assert_eq!(covered(&mut s), 1, "memory moved after the interval: read");
    assert_eq!(covered(&mut s), 0);
    let stat = std::fs::read_to_string(p.join("stat")).unwrap();
    std::fs::write(p.join("stat"), stat.replace(" 4242 ", " 9999 ")).unwrap();
    assert_eq!(covered(&mut s), 1, "a reused pid: never read");
    std::thread::sleep(interval * 10 + Duration::from_millis(20));
    assert_eq!(
        covered(&mut s),
        1,
        "ten intervals: read whatever its memory"
    );
}

#[test]
fn a_reused_pid_is_a_new_process() {
    let (dir, p) = tree();
    let mut s = scanner(dir.path(), 1000);
    assert_eq!(pss_and_reads(&mut s).1, 1);
    // Same pid, same statm, another start time: nothing is carried over.
    let stat = std::fs::read_to_string(p.join("stat")).unwrap();
    std::fs::write(p.join("stat"), stat.replace(" 4242 ", " 9999 ")).unwrap();
    std::fs::write(p.join("smaps_rollup"), rollup(100)).unwrap();
    assert_eq!(pss_and_reads(&mut s), (Some(100), 1));
}

#[test]
fn refresh_of_one_reads_every_file_every_scan_without_statm() {
    let (dir, p) = tree();
    std::fs::remove_file(p.join("statm")).unwrap();
    let mut s = scanner(dir.path(), 1);
    assert_eq!(pss_and_reads(&mut s), (Some(2500), 1));
    std::fs::write(p.join("smaps_rollup"), rollup(2600)).unwrap();
    assert_eq!(pss_and_reads(&mut s), (Some(2600), 1));
}

#[test]
fn kept_descriptors_are_bounded_by_the_flag_and_the_open_files_limit() {
    use super::descriptor_budget;
    // Half of a small limit, the limit less 1,024 above 2,048: kept first, then watched.
    assert_eq!(descriptor_budget(Some(128), None), (64, 0));
    // At most 2,048 kept and 8,192 watched without the flag: 17 MiB of kernel memory
    // charged to the exporter.
    assert_eq!(descriptor_budget(Some(20_000), None), (2048, 8192));
    assert_eq!(descriptor_budget(Some(1 << 20), None), (2048, 8192));
    assert_eq!(descriptor_budget(Some(4096), None), (2048, 1024));
    assert_eq!(
        descriptor_budget(Some(20_000), Some(10_000)),
        (10_000, 8976)
    );
    // The flag lowers both, never raises them past the limit.
    assert_eq!(descriptor_budget(Some(20_000), Some(500)), (500, 2000));
    assert_eq!(descriptor_budget(Some(128), Some(500)), (64, 0));
    assert_eq!(descriptor_budget(Some(20_000), Some(0)), (0, 0));
}

/// A kernel thread (no memory) is read once; later scans read only its `stat` to tell it
/// is the same one, and a pid taken by another process is read whole again.
#[test]
fn a_process_without_memory_is_known_by_its_start_time() {
    let (dir, _) = tree();
    let k = dir.path().join("2");
    std::fs::create_dir_all(&k).unwrap();
    let stat = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    std::fs::write(k.join("stat"), stat).unwrap();
    std::fs::write(k.join("statm"), "0 0 0 0 0 0 0\n").unwrap();
    std::fs::write(k.join("status"), "Name:\tkthreadd\nThreads:\t1\n").unwrap();
    let mut s = scanner(dir.path(), 1000);
    let malformed = |s: &mut Scanner| {
        let sample = s.scan();
        let pids: Vec<u32> = sample.processes.iter().map(|p| p.pid).collect();
        let bad = sample
            .errors
            .get(&(Collector::Processes, Reason::Malformed))
            .copied()
            .unwrap_or(0);
        (pids, bad)
    };
    assert_eq!(malformed(&mut s), (vec![78], 0));
    // Were its statm read again, this would be counted.
    std::fs::write(k.join("statm"), "garbage\n").unwrap();
    assert_eq!(malformed(&mut s), (vec![78], 0), "stat alone read");
    assert_eq!(malformed(&mut s), (vec![78], 0));
    // Another process on the pid: read whole, its statm counted.
    std::fs::write(k.join("stat"), stat.replace(" 2 0 0 1844", " 777 0 0 1844")).unwrap();
    assert_eq!(
        malformed(&mut s),
        (vec![78], 1),
        "a new process: read whole"
    );
}

/// A pid taken by another process while the deep tier read it: the smaps it read may be
/// either's, so the read is dropped as vanished, never shown as the first process's.
/// `smaps` is a FIFO: the test's write end opens when the deep reader is inside the read,
/// and the start time in `stat` changes before the mappings come.
#[test]
fn a_pid_reused_under_a_deep_read_drops_the_read() {
    use std::io::Write;
    let (dir, p) = tree();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-6.18");
    let smaps = std::fs::read(fixture.join("proc/1406/smaps")).unwrap();
    let fifo = p.join("smaps");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let deep = DeepConfig {
        interval: Duration::ZERO,
        budget: Duration::from_secs(1),
        min_bytes: 0,
        heap_walk: false,
        focus: Vec::new(),
    };
    let mut s = scanner_with(dir.path(), 1, deep);
    let scan = std::thread::spawn(move || s.scan());
    // Opens once the deep reader opened its end: the fast tier read stat before.
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let stat = std::fs::read_to_string(p.join("stat")).unwrap();
    std::fs::write(p.join("stat"), stat.replace(" 4242 ", " 9999 ")).unwrap();
    w.write_all(&smaps).unwrap();
    drop(w);
    let sample = scan.join().unwrap();
    assert_eq!(sample.processes[0].start_ticks, 4242);
    assert!(sample.processes[0].smaps.is_none(), "the read was dropped");
    let vanished = sample.errors.get(&(Collector::Processes, Reason::Vanished));
    assert_eq!(vanished, Some(&1));
}
