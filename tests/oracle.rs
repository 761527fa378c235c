//! The procfs crate (eminence/procfs, the reference Rust parser of /proc) as the oracle of
//! our parsers, on the live /proc of this machine: every process, each file read once and
//! the same bytes given to both, compared field by field. Ours convert kB to bytes at the
//! boundary; procfs keeps status in kB and gives meminfo and smaps_rollup in bytes.
//!
//! procfs-core 0.18's parsers panic on some inputs (`stat` on truncated text, `maps` on a
//! mapping named like `/SYSVx`, which any local user can create), so it only ever sees
//! what the kernel wrote, under catch_unwind.

use membloat_exporter::parse::{meminfo, smaps_rollup, stat, statm, status};
use procfs::FromRead;

fn read(path: &str) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

fn oracle<T: FromRead>(bytes: &[u8]) -> Option<T> {
    std::panic::catch_unwind(|| T::from_read(bytes).ok())
        .ok()
        .flatten()
}

#[test]
fn meminfo_agrees_with_procfs() {
    let text = read("/proc/meminfo").unwrap();
    let ours = meminfo::Meminfo::parse(std::str::from_utf8(&text).unwrap()).unwrap();
    let theirs: procfs::Meminfo = oracle(&text).unwrap();
    assert_eq!(ours.mem_total_bytes, Some(theirs.mem_total));
    assert_eq!(ours.mem_free_bytes, Some(theirs.mem_free));
    assert_eq!(ours.mem_available_bytes, theirs.mem_available);
    assert_eq!(ours.committed_as_bytes, Some(theirs.committed_as));
    assert_eq!(ours.commit_limit_bytes, theirs.commit_limit);
    assert_eq!(ours.swap_total_bytes, Some(theirs.swap_total));
    assert_eq!(ours.anon_pages_bytes, theirs.anon_pages);
    assert_eq!(ours.anon_huge_pages_bytes, theirs.anon_hugepages);
    assert_eq!(ours.page_tables_bytes, theirs.page_tables);
    assert_eq!(ours.hugetlb_bytes, theirs.hugetlb);
}

#[test]
fn every_process_agrees_with_procfs_field_by_field() {
    let kb = |v: Option<u64>| v.map(|k| k * 1024);
    let mut compared = [0u32; 4];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let file = |name: &str| read(&format!("/proc/{pid}/{name}"));
        // A process may exit between listing and reading: skip what is gone.
        if let Some(text) = file("stat") {
            let ours = stat::Stat::parse(std::str::from_utf8(&text).unwrap()).unwrap();
            let theirs: procfs::process::Stat = oracle(&text).unwrap();
            assert_eq!(ours.comm, theirs.comm, "pid {pid} comm");
            assert_eq!(ours.state, theirs.state, "pid {pid} state");
            assert_eq!(ours.utime_ticks, theirs.utime, "pid {pid} utime");
            assert_eq!(ours.stime_ticks, theirs.stime, "pid {pid} stime");
            assert_eq!(ours.start_ticks, theirs.starttime, "pid {pid} starttime");
            compared[0] += 1;
        }
        if let Some(text) = file("status") {
            let ours = status::Status::parse(std::str::from_utf8(&text).unwrap()).unwrap();
            let theirs: procfs::process::Status = oracle(&text).unwrap();
            assert_eq!(ours.vm_rss_bytes, kb(theirs.vmrss), "pid {pid} VmRSS");
            assert_eq!(ours.vm_hwm_bytes, kb(theirs.vmhwm), "pid {pid} VmHWM");
            assert_eq!(ours.vm_size_bytes, kb(theirs.vmsize), "pid {pid} VmSize");
            assert_eq!(ours.vm_swap_bytes, kb(theirs.vmswap), "pid {pid} VmSwap");
            assert_eq!(ours.vm_pte_bytes, kb(theirs.vmpte), "pid {pid} VmPTE");
            assert_eq!(ours.rss_anon_bytes, kb(theirs.rssanon), "pid {pid} RssAnon");
            assert_eq!(ours.rss_file_bytes, kb(theirs.rssfile), "pid {pid} RssFile");
            assert_eq!(
                ours.rss_shmem_bytes,
                kb(theirs.rssshmem),
                "pid {pid} RssShmem"
            );
            assert_eq!(ours.threads, Some(theirs.threads), "pid {pid} Threads");
            compared[1] += 1;
        }
        if let Some(text) = file("statm") {
            let ours = statm::parse(std::str::from_utf8(&text).unwrap()).unwrap();
            let theirs: procfs::process::StatM = oracle(&text).unwrap();
            assert_eq!(
                ours,
                [theirs.size, theirs.resident, theirs.shared],
                "pid {pid} statm"
            );
            compared[2] += 1;
        }
        if let Some(text) = file("smaps_rollup").filter(|t| !t.is_empty()) {
            let ours =
                smaps_rollup::SmapsRollup::parse(std::str::from_utf8(&text).unwrap()).unwrap();
            let theirs: procfs::process::SmapsRollup = oracle(&text).unwrap();
            let map = &theirs.memory_map_rollup.0[0].extension.map;
            let get = |k: &str| map.get(k).copied();
            assert_eq!(ours.rss_bytes, get("Rss"), "pid {pid} Rss");
            assert_eq!(ours.pss_bytes, get("Pss"), "pid {pid} Pss");
            assert_eq!(
                ours.anonymous_bytes,
                get("Anonymous"),
                "pid {pid} Anonymous"
            );
            assert_eq!(
                ours.anon_huge_pages_bytes,
                get("AnonHugePages"),
                "pid {pid} AnonHugePages"
            );
            assert_eq!(ours.swap_bytes, get("Swap"), "pid {pid} Swap");
            compared[3] += 1;
        }
    }
    eprintln!(
        "compared with procfs: {} stat, {} status, {} statm, {} smaps_rollup",
        compared[0], compared[1], compared[2], compared[3]
    );
    // This test process itself is always there, and readable.
    assert!(compared.iter().all(|&n| n >= 1), "{compared:?}");
}
