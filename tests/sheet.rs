//! The host's balance sheet (`membloat_host_memory_bytes`) on this machine's kernel, with the
//! kernel's own counters as truth: the rows sum to `MemTotal` at every scan, and memory no
//! process's RSS shows, injected one kind at a time, lands in its own row by the injected
//! amount while `unexplained` moves by less than the per-CPU counters' drift bound
//! (docs/balance-sheet.md). Root: a tmpfs mount, SysV memory, huge pages, `stat_refresh`.

use std::collections::BTreeMap;
use std::io::Write;

use crate::common::owners::Segment;
use crate::common::repro::Repro;
use crate::common::{needs_root, run, skipped, value};

const MIB: i64 = 1 << 20;
const PAGE: i64 = 4096;

/// One scan's sheet, after the kernel folded its per-CPU counters (`stat_refresh`).
struct Sheet {
    rows: BTreeMap<String, i64>,
}

impl Sheet {
    fn read(extra: &[&str]) -> Sheet {
        std::fs::write("/proc/sys/vm/stat_refresh", "1").unwrap();
        let mut args = vec!["--once", "--once.interval=0s"];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut rows = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("membloat_host_memory_bytes{row=\"") else {
                continue;
            };
            let (row, bytes) = rest.split_once("\"} ").unwrap();
            rows.insert(row.to_string(), bytes.parse::<f64>().unwrap() as i64);
        }
        let total = value(&text, "membloat_memory_total_bytes").unwrap() as i64;
        assert_eq!(
            rows.values().sum::<i64>(),
            total,
            "the rows sum to MemTotal: {rows:?}"
        );
        Sheet { rows }
    }

    fn row(&self, name: &str) -> i64 {
        *self
            .rows
            .get(name)
            .unwrap_or_else(|| panic!("no row {name}: {:?}", self.rows))
    }
}

/// How far `unexplained` may move with no memory changing hands: 16 counters, each off by
/// up to its fold threshold on every CPU of every zone (`/proc/zoneinfo`), plus four
/// batches of the per-CPU lists read a moment after meminfo.
fn drift_bound() -> i64 {
    let zoneinfo = std::fs::read_to_string("/proc/zoneinfo").unwrap();
    let mut threshold = 0i64;
    let mut entries = 0i64;
    for line in zoneinfo.lines().map(str::trim) {
        if let Some(n) = line.strip_prefix("vm stats threshold:") {
            threshold = threshold.max(n.trim().parse().unwrap());
            entries += 1;
        }
    }
    16 * threshold * entries * PAGE + 4 * 63 * PAGE
}

/// Injects memory with `inject` (its guard removes it when dropped) and checks that `row`
/// grows by `bytes` (within `tolerance` of it, and 2 MiB) and `unexplained` by less than the
/// drift bound; then that removing it as `explain` says (the file deleted, the segment
/// removed, the pool lowered, the queue closed) gives the row back. The machine runs other
/// tests beside this one: a check that misses is tried again, three times in all, before it
/// fails.
fn lands<G>(
    what: &str,
    row: &str,
    tolerance: f64,
    extra: &[&str],
    mut inject: impl FnMut() -> (G, i64),
) {
    let bound = drift_bound();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let before = Sheet::read(extra);
        let (guard, bytes) = inject();
        let after = Sheet::read(extra);
        drop(guard);
        let removed = Sheet::read(extra);
        let grew = after.row(row) - before.row(row);
        let back = after.row(row) - removed.row(row);
        let drift = after.row("unexplained") - before.row("unexplained");
        let near =
            |got: i64| (got - bytes).abs() as f64 <= tolerance * bytes as f64 + 2.0 * MIB as f64;
        if near(grew) && near(back) && drift.abs() <= bound {
            eprintln!(
                "{what}: {row} +{:.1} MiB for {:.1} MiB injected, -{:.1} MiB once removed, unexplained {:+.1} MiB (bound {:.1})",
                grew as f64 / MIB as f64,
                bytes as f64 / MIB as f64,
                back as f64 / MIB as f64,
                drift as f64 / MIB as f64,
                bound as f64 / MIB as f64
            );
            return;
        }
        seen.push((grew, back, bytes, drift));
    }
    panic!("{what}: {row} (grew, given back, injected, unexplained moved) {seen:?}, drift bound {bound}");
}

/// Only processes and what the test injects: no other collector's cost.
const SYSTEM: &[&str] = &["--no-collector.processes", "--no-collector.kmsg"];

#[test]
#[ignore = "needs root"]
fn memory_no_process_shows_lands_in_its_own_row() {
    needs_root("a tmpfs mount, SysV memory, huge pages and vm.stat_refresh");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();

    // A file on a tmpfs mount of the test's.
    lands("tmpfs file", "shmem", 0.02, SYSTEM, || {
        let mnt = dir.path().join("tmpfs");
        std::fs::create_dir_all(&mnt).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=512m", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(status.success());
        let guard = Unmount(mnt.clone());
        write_mib(&mut std::fs::File::create(mnt.join("f")).unwrap(), 256);
        (guard, 256 * MIB)
    });

    // A memfd written and never mapped.
    lands("memfd", "shmem", 0.02, SYSTEM, || {
        (crate::common::owners::memfd("sheet", 128 << 20), 128 * MIB)
    });

    // A SysV segment touched, then left with no process attached.
    lands("SysV segment", "shmem", 0.02, SYSTEM, || {
        let seg = Segment::touched(64 * MIB as usize);
        (seg, 64 * MIB)
    });

    // 400,000 negative dentries (a stat of a name that does not exist): reclaimable slab,
    // by as much as the dentry cache's slabs grew (/proc/slabinfo).
    let names = dir.path().join("negative");
    lands(
        "negative dentries",
        "slab_reclaimable",
        0.10,
        SYSTEM,
        || {
            std::fs::create_dir_all(&names).unwrap();
            let before = dentry_slab_bytes();
            for i in 0..400_000 {
                let _ = std::fs::symlink_metadata(names.join(format!("absent-{i}")));
            }
            // Removing the directory frees its negative children.
            (RemoveDir(names.clone()), dentry_slab_bytes() - before)
        },
    );

    // 1,000 threads blocked on a channel: one 16 KiB kernel stack each (x86-64).
    lands("blocked threads", "kernel_stacks", 0.02, SYSTEM, || {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let threads: Vec<_> = (0..1000)
            .map(|_| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || {
                        let _ = rx.lock().map(|r| r.recv());
                    })
                    .unwrap()
            })
            .collect();
        (Threads(Some(tx), threads), 1000 * 16 * 1024)
    });

    // 8 GiB reserved and touched once per 2 MiB: a page-table page per 2 MiB.
    lands("sparse mapping", "page_tables", 0.05, SYSTEM, || {
        let m = Sparse::touched(8 << 30);
        (m, 4096 * PAGE)
    });

    // 32 more huge pages reserved in the pool, none used.
    let pool = "/proc/sys/vm/nr_hugepages";
    let had: i64 = std::fs::read_to_string(pool)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let size = huge_page_bytes();
    let _restore = Restore(pool, had.to_string());
    std::fs::write(pool, (had + 32).to_string()).unwrap();
    let got: i64 = std::fs::read_to_string(pool)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(pool, had.to_string()).unwrap();
    if got == had + 32 {
        lands("free huge pages", "hugetlb_free", 0.0, SYSTEM, || {
            std::fs::write(pool, (had + 32).to_string()).unwrap();
            (Restore(pool, had.to_string()), 32 * size)
        });
    } else {
        skipped("free huge pages: the kernel could not find 32 of them");
    }

    // Eight loopback connections whose receivers never read: their queues are socket
    // buffers (page fragments), by as much as sockstat's TCP pages grew.
    lands("unread TCP queues", "sockets", 0.10, SYSTEM, || {
        let before = tcp_mem_bytes();
        let queues = Queues::filled(8);
        (queues, tcp_mem_bytes() - before)
    });

    // A glibc hoarder: its resident free heap, as its own mallinfo2 counts it.
    let deep = [
        "--no-collector.kmsg",
        "--collector.processes.deep-min-size=0",
        "--collector.processes.deep-budget=1h",
        "--collector.processes.read-timeout=2m",
    ];
    lands("glibc hoarder", "anon_held_glibc", 0.05, &deep, || {
        let r = Repro::start("hoard", &["3", "1", "0"], &[]);
        let fordblks: f64 = r.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
        (r, fordblks as i64)
    });
}

/// Memory a program freed with `MADV_FREE` (`tests/reproducers/lazyfree.c`) lands in
/// `anon_lazy_free`, and not in the page cache, though the kernel lists those pages with
/// the inactive file pages (docs/balance-sheet.md).
#[test]
#[ignore = "needs root"]
fn lazily_freed_memory_is_anonymous_not_page_cache() {
    needs_root("vm.stat_refresh");
    // Memory a program freed with MADV_FREE: anonymous and lazily freed, its LazyFree.
    let procs = ["--no-collector.kmsg"];
    lands("lazily freed memory", "anon_lazy_free", 0.0, &procs, || {
        (Repro::start("lazyfree", &["128", "0"], &[]), 128 * MIB)
    });
    // ... and not page cache, though the kernel lists those pages with the inactive file
    // pages: Inactive(file), read just after the scan, is above the row by at least them.
    let _lazy = Repro::start("lazyfree", &["256", "0"], &[]);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let sheet = Sheet::read(&procs);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let inactive = crate::common::field_bytes(&meminfo, "Inactive(file)").unwrap() as i64;
        let gap = inactive - sheet.row("page_cache_inactive");
        if gap >= 256 * MIB - 16 * MIB {
            eprintln!(
                "lazily freed memory: Inactive(file) {:.1} MiB above page_cache_inactive",
                gap as f64 / MIB as f64
            );
            seen.clear();
            break;
        }
        seen.push(gap);
    }
    assert!(
        seen.is_empty(),
        "Inactive(file) above page_cache_inactive: {seen:?}, 256 MiB lazily freed"
    );
}

fn write_mib(f: &mut std::fs::File, mib: usize) {
    let chunk = vec![7u8; MIB as usize];
    for _ in 0..mib {
        f.write_all(&chunk).unwrap();
    }
}

fn huge_page_bytes() -> i64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = meminfo
        .lines()
        .find(|l| l.starts_with("Hugepagesize:"))
        .unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<i64>()
        .unwrap()
        * 1024
}

/// The dentry cache's slabs, in bytes (`/proc/slabinfo`: num_slabs x pagesperslab).
fn dentry_slab_bytes() -> i64 {
    let slabinfo = std::fs::read_to_string("/proc/slabinfo").unwrap();
    let line = slabinfo.lines().find(|l| l.starts_with("dentry ")).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    let pages_per_slab: i64 = f[5].parse().unwrap();
    let slabs: i64 = f[f.iter().position(|&w| w == "slabdata").unwrap() + 2]
        .parse()
        .unwrap();
    slabs * pages_per_slab * PAGE
}

/// TCP's socket memory as `/proc/net/sockstat` counts it (pages charged).
fn tcp_mem_bytes() -> i64 {
    let s = std::fs::read_to_string("/proc/net/sockstat").unwrap();
    let line = s.lines().find(|l| l.starts_with("TCP:")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|&w| w == "mem").unwrap();
    words[at + 1].parse::<i64>().unwrap() * PAGE
}

struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Writes its value back to a kernel setting when dropped.
struct Restore(&'static str, String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0, &self.1);
    }
}

struct Threads(
    Option<std::sync::mpsc::Sender<()>>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Drop for Threads {
    fn drop(&mut self) {
        drop(self.0.take());
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// An anonymous reservation touched once every 2 MiB, unmapped when dropped.
struct Sparse(*mut libc::c_void, usize);

impl Sparse {
    fn touched(len: usize) -> Sparse {
        // SAFETY: a fresh private anonymous reservation, written one byte per 2 MiB
        // inside its length, unmapped once by Drop.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
            for at in (0..len).step_by(2 << 20) {
                p.cast::<u8>().add(at).write_volatile(1);
            }
            Sparse(p, len)
        }
    }
}

impl Drop for Sparse {
    fn drop(&mut self) {
        // SAFETY: the mapping made by `touched`, unmapped once.
        unsafe { libc::munmap(self.0, self.1) };
    }
}

/// Loopback connections whose senders wrote until the kernel refused more and whose
/// receivers never read.
struct Queues {
    _open: Vec<(std::net::TcpStream, std::net::TcpStream)>,
}

impl Queues {
    fn filled(n: usize) -> Queues {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let chunk = vec![1u8; 64 << 10];
        let mut pairs = Vec::new();
        for _ in 0..n {
            let mut tx = std::net::TcpStream::connect(at).unwrap();
            let (rx, _) = listener.accept().unwrap();
            tx.set_nonblocking(true).unwrap();
            // Written until the kernel says the queues are full (WouldBlock).
            while tx.write(&chunk).is_ok() {}
            pairs.push((tx, rx));
        }
        Queues { _open: pairs }
    }
}

/// The owners behind the rows (`owners` collector): a tmpfs mount at a kubelet volume's
/// path with its bytes and its pod and volume, a tmpfs only another mount namespace has,
/// a memfd and a removed tmpfs file held open with this test's pid and their bytes, a SysV
/// segment no process attaches marked orphaned with its resident bytes, negative dentries
/// counted, and a network namespace's unread TCP queues by the bytes written into them,
/// each as the kernel counts it (`statvfs`, the pages written, `/proc/sysvipc/shm`,
/// `dentry-state`, the writes).
#[test]
#[ignore = "needs root"]
fn the_owners_behind_the_rows_are_named() {
    needs_root("a tmpfs mount and SysV memory");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let volume = dir
        .path()
        .join("pods/6c1a-22/volumes/kubernetes.io~empty-dir/cache");
    std::fs::create_dir_all(&volume).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&volume)
        .status()
        .unwrap();
    assert!(status.success());
    let _mounted = Unmount(volume.clone());
    write_mib(&mut std::fs::File::create(volume.join("f")).unwrap(), 32);
    let seg = Segment::touched(16 * MIB as usize);
    let private = dir.path().join("private");
    let other = private_tmpfs(&private);
    // Unread TCP queues in a network namespace of their own, beside 10,000 idle sockets:
    // a table of over 1 MiB, summed whole.
    let net = Repro::start("netqueue", &["4", "10000"], &[]);
    let written: f64 = net
        .ready
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    // A memfd written and never mapped, and a file removed from the mount while open.
    let memfd = crate::common::owners::memfd("owners", 8 << 20);
    let removed = volume.join("removed");
    let mut held = std::fs::File::create(&removed).unwrap();
    write_mib(&mut held, 4);
    std::fs::remove_file(&removed).unwrap();
    let names = dir.path().join("negative");
    let t = negative_dentries_counted(&names);
    let mount = format!(
        "membloat_tmpfs_used_bytes{{mount=\"{}\",mntns=\"{}\",pod=\"6c1a-22\",volume=\"cache\"}}",
        volume.display(),
        mount_namespace(std::process::id())
    );
    // The removed file still takes its mount's room until closed.
    assert_eq!(value(&t, &mount), Some(36.0 * MIB as f64), "{t}");
    let other_ns = mount_namespace(other.pid());
    let series = format!(
        "membloat_tmpfs_used_bytes{{mount=\"{}\",mntns=\"{other_ns}\",pod=\"\",volume=\"\"}}",
        private.display()
    );
    assert_eq!(value(&t, &series), Some(3.0 * MIB as f64), "{t}");
    let pid = std::process::id();
    let file = |kind: &str, name: &str| {
        format!("membloat_unlinked_file_bytes{{kind=\"{kind}\",pid=\"{pid}\",name=\"{name}\"}}")
    };
    assert_eq!(
        value(&t, &file("memfd", "owners")),
        Some(8.0 * MIB as f64),
        "{t}"
    );
    let removed = removed.display().to_string();
    assert_eq!(
        value(&t, &file("deleted", &removed)),
        Some(4.0 * MIB as f64),
        "{t}"
    );
    // Every byte written is in a send or a receive queue of its namespace.
    let link = std::fs::read_link(format!("/proc/{}/ns/net", net.pid())).unwrap();
    let inode = link
        .to_str()
        .unwrap()
        .trim_start_matches("net:[")
        .trim_end_matches(']');
    let queue = |q: &str| {
        let series = format!(
            "membloat_netns_socket_queue_bytes{{netns=\"{inode}\",pid=\"{}\",queue=\"{q}\"}}",
            net.pid()
        );
        value(&t, &series).unwrap_or_else(|| panic!("no {series} in {t}"))
    };
    assert_eq!(queue("send") + queue("receive"), written);
    explain_names_the_owners(
        pid,
        seg.0,
        &volume.display().to_string(),
        (inode, net.pid()),
    );
    let shm = format!(
        "membloat_sysv_shm_resident_bytes{{shmid=\"{}\",key=\"0\",creator_pid=\"{}\",orphaned=\"true\"}}",
        seg.0,
        std::process::id()
    );
    assert_eq!(value(&t, &shm), Some(16.0 * MIB as f64), "{t}");
    assert!(
        value(&t, "membloat_slab_cache_bytes{cache=\"dentry\"}").is_some(),
        "{t}"
    );
    drop(seg);
    drop((memfd, held));
    let _ = std::fs::remove_dir(&names);
}

/// `explain` names the owners the test made, each with what frees it.
fn explain_names_the_owners(pid: u32, seg: i32, volume: &str, netns: (&str, u32)) {
    let out = run(&["explain", "--format", "json", "--explain.interval=200ms"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let owners = doc["owners"].as_array().unwrap();
    let named = |kind: &str, name: &str| {
        owners
            .iter()
            .find(|o| o["kind"] == kind && o["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in {owners:#?}"))
    };
    let m = named("memfd", "owners");
    assert_eq!(
        (m["pid"].as_u64(), m["bytes"].as_u64()),
        (Some(pid.into()), Some(8 << 20))
    );
    let seg_id = seg.to_string();
    let remedy = named("sysv", &seg_id)["remedy"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(remedy.contains(&format!("ipcrm -m {seg_id}")), "{remedy}");
    the_printed_command_frees_the_segment(&remedy, &seg_id);
    let v = named("tmpfs", volume);
    assert_eq!(v["bytes"].as_u64(), Some(36 << 20));
    let n = named("sockets", &format!("netns {}", netns.0));
    assert_eq!(n["pid"].as_u64(), Some(netns.1.into()));
}

/// The remedy's command, run as printed (between backticks), removes the segment: the
/// kernel's own list no longer has it.
fn the_printed_command_frees_the_segment(remedy: &str, shmid: &str) {
    let listed = || {
        std::fs::read_to_string("/proc/sysvipc/shm")
            .unwrap()
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1) == Some(shmid))
    };
    assert!(listed(), "the segment {shmid} before the remedy");
    let command = remedy.split('`').nth(1).unwrap();
    let words: Vec<&str> = command.split_whitespace().collect();
    let status = std::process::Command::new(words[0])
        .args(&words[1..])
        .status()
        .unwrap();
    assert!(status.success(), "{command}");
    assert!(!listed(), "{command} left the segment {shmid}");
}

/// The exposition of a `--once` run after 100,000 lookups of names that do not exist under
/// `names`, having checked that the negative dentries it counts grew by them. Reclaim under
/// another test's memory pressure may free some before the read: tried three times.
fn negative_dentries_counted(names: &std::path::Path) -> String {
    let negative = |text: &str| value(text, "membloat_dentries{state=\"negative\"}");
    let owners = || {
        let out = run(&[
            "--once",
            "--once.interval=0s",
            "--no-collector.processes",
            "--no-collector.kmsg",
        ]);
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    std::fs::create_dir_all(names).unwrap();
    let mut grew = Vec::new();
    let mut t = String::new();
    for round in 0..3 {
        let before = owners();
        for i in 0..100_000 {
            let _ = std::fs::symlink_metadata(names.join(format!("absent-{round}-{i}")));
        }
        t = owners();
        grew.push(negative(&t).unwrap() - negative(&before).unwrap());
        if grew[round] >= 90_000.0 {
            break;
        }
    }
    assert!(
        grew.iter().any(|&g| g >= 90_000.0),
        "negative dentries grew by {grew:?}"
    );
    t
}

/// The inode of a process's mount namespace.
fn mount_namespace(pid: u32) -> u64 {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
    let link = link.to_str().unwrap();
    link.trim_start_matches("mnt:[")
        .trim_end_matches(']')
        .parse()
        .unwrap()
}

/// A process in a mount namespace of its own, with a tmpfs at `point` that only its
/// namespace has and 3 MiB written to it.
fn private_tmpfs(point: &std::path::Path) -> Repro {
    std::fs::create_dir_all(point).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=16m tmpfs {0} && head -c 3145728 /dev/zero > {0}/f && echo ready && exec sleep 600",
        point.display()
    );
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
    Repro::spawn("unshare", cmd)
}
