//! jemalloc, linked in statically (Rust services on `tikv-jemallocator`, Redis's and
//! Valkey's images), stripped, or preloaded: told apart from glibc by what the binary
//! holds, and never given glibc's measured figure. The programs are real: jemalloc 5.2.1,
//! 5.3.0 and 5.3.1 as `tikv-jemallocator` links them (`tests/common/jemalloc.rs`), and
//! Debian's `libjemalloc2` preloaded into a C program and linked by Debian's Redis. Reading
//! another process's memory needs ptrace access: CI runs as root.

use crate::common;

use common::jemalloc::{program, VERSIONS};
use common::repro::Repro;
use common::*;
use membloat_exporter::heap::jemalloc::JemallocHeap;
use membloat_exporter::heap::{self, runtime::Allocator, Unmeasured as Outcome};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// What the exporter's heap readers make of process `pid`.
fn read(pid: u32) -> heap::HeapReading {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true)
}

/// jemalloc's own figures as the program printed them: (pactive, pdirty, pmuzzy) pages.
fn stats(line: &str) -> (u64, u64, u64) {
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name} in {line:?}"))
            .parse()
            .unwrap()
    };
    (field("pactive"), field("pdirty"), field("pmuzzy"))
}

/// The exporter's read of jemalloc in `r`, and jemalloc's own figures (pages) as the
/// program printed them just before and just after it, when those agree (nothing moved
/// in between; tried up to ten times).
fn read_between(r: &mut Repro) -> (JemallocHeap, (u64, u64, u64)) {
    for _ in 0..10 {
        let before = stats(&r.ask("stats"));
        let h = read(r.pid());
        let after = stats(&r.ask("stats"));
        if before == after {
            let h = h
                .get::<heap::jemalloc::Jemalloc>()
                .cloned()
                .expect("jemalloc read")
                .unwrap_or_else(|e| panic!("{e:?}"));
            return (*h, before);
        }
    }
    panic!("jemalloc's figures moved around ten reads");
}

/// A copy of `built` with its symbol table removed, as slim images ship binaries.
fn stripped(built: &Path) -> std::path::PathBuf {
    common::stripped(built, "jemalloc-stripped")
}

#[test]
fn statically_linked_jemalloc_is_jemalloc_on_every_version_stripped_or_not() {
    for (version, _) in VERSIONS {
        let built = program(version, false);
        for exe in [built.clone(), stripped(&built)] {
            let r = Repro::run_env(&exe, &["1", "4", "64", "5"], &[]);
            assert!(
                r.ready.contains(&format!(" version={version}-")),
                "jemalloc {version}: {}",
                r.ready
            );
            let (_, dirty, _) = stats(&r.ready);
            assert!(
                dirty > 1000,
                "{version}: jemalloc keeps {dirty} dirty pages"
            );
            let h = read(r.pid());
            let name = exe.file_name().unwrap().to_string_lossy();
            assert_eq!(
                h.identity.allocator,
                Allocator::Jemalloc,
                "jemalloc {version}, {name}: it maps libc.so.6 and is not glibc's"
            );
            assert_eq!(
                h.get::<heap::Glibc>().cloned(),
                Some(Err(Outcome::NotGlibc)),
                "jemalloc {version}, {name}: never glibc's figure"
            );
        }
    }
}

/// Debian's `libjemalloc2`, where it is installed (./scripts/test.sh installs
/// libjemalloc-dev, which brings it).
const DEBIAN_JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

#[test]
fn preloaded_jemalloc_is_never_given_glibcs_figure() {
    assert!(
        Path::new(DEBIAN_JEMALLOC).exists(),
        "{DEBIAN_JEMALLOC}: run ./scripts/test.sh, which installs libjemalloc2"
    );
    // The C program that hoards 256 MiB under glibc: under jemalloc the same frees are
    // jemalloc's, whatever glibc's heap holds.
    let r = Repro::start(
        "hoard",
        &["2", "1", "0"],
        &[("LD_PRELOAD", DEBIAN_JEMALLOC)],
    );
    let h = read(r.pid());
    assert_eq!(h.identity.allocator, Allocator::Jemalloc);
    assert_eq!(
        h.get::<heap::Glibc>().cloned(),
        Some(Err(Outcome::NotGlibc))
    );
    // Debian's libjemalloc2 is stripped: named, with its reason and no figure.
    assert_eq!(
        h.get::<heap::jemalloc::Jemalloc>().cloned(),
        Some(Err(heap::jemalloc::Unmeasured::Stripped))
    );
    // The same program without it is glibc's, measured.
    let plain = Repro::start("hoard", &["2", "1", "0"], &[]);
    let h = read(plain.pid());
    assert_eq!(h.identity.allocator, Allocator::Glibc);
    assert!(h.measured().is_some(), "{:?}", h.readings);
}

/// Debian's Redis, whose server links Debian's stripped `libjemalloc2` (Redis's own
/// allocator choice): told jemalloc by the library it maps, named `stripped` with no
/// figure, and never given glibc's.
#[test]
fn debians_redis_server_is_jemalloc_stripped() {
    // redis-tools ships the server as redis-check-rdb, which serves when its name is
    // redis-server (the redis-server package only adds the link and a service).
    let server = Path::new("/usr/bin/redis-check-rdb");
    assert!(
        server.exists(),
        "{}: run ./scripts/test.sh, which installs redis-tools",
        server.display()
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("redis.sock");
    let args = [
        "--port",
        "0",
        "--unixsocket",
        socket.to_str().unwrap(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir.to_str().unwrap(),
    ];
    let mut cmd = std::process::Command::new(server);
    cmd.arg0("redis-server")
        .args(args)
        .stdout(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    // Ready once its socket is there: it listens on it when it has started.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !socket.exists() {
        assert!(child.try_wait().unwrap().is_none(), "redis-server exited");
        assert!(
            std::time::Instant::now() < deadline,
            "no socket from redis-server in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let h = read(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(h.identity.allocator, Allocator::Jemalloc);
    assert_eq!(
        h.get::<heap::jemalloc::Jemalloc>().cloned(),
        Some(Err(heap::jemalloc::Unmeasured::Stripped))
    );
    assert_eq!(
        h.get::<heap::Glibc>().cloned(),
        Some(Err(Outcome::NotGlibc))
    );
}

/// Through the running exporter: jemalloc named, its kept pages served as jemalloc counts
/// them, its resident kept pages as the process's measured hoarding (never glibc's
/// figure), and `explain` names it with jemalloc's remedy, above nothing of glibc's.
#[test]
fn the_exporter_serves_jemallocs_kept_pages_as_measured_hoarding() {
    let mut r = Repro::start("jefree", &["9", "4", "192", "10"], &[]);
    let pid = r.pid();
    let d = Daemon::start(&["--scan.interval=1s", "--collector.processes.top-k=100000"]);
    let labels = format!("{{pid=\"{pid}\",comm=\"jefree\"}}");
    let kept = format!("membloat_process_jemalloc_kept_resident_bytes{labels}");
    let mut t = String::new();
    d.wait_until(std::time::Duration::from_secs(30), || {
        t = d.metrics();
        value(&t, &kept).is_some()
    });
    // The process is parked: what jemalloc says now is what it said at the read.
    let (active, dirty, muzzy) = stats(&r.ask("stats"));
    let series = |name: &str| {
        value(
            &t,
            &format!("membloat_process_jemalloc_{name}_bytes{labels}"),
        )
    };
    assert_eq!(series("dirty"), Some((dirty * 4096) as f64));
    assert_eq!(series("muzzy"), Some((muzzy * 4096) as f64));
    assert_eq!(series("active"), Some((active * 4096) as f64));
    let held = value(&t, &kept).unwrap();
    assert!(held > 0.0 && held <= (dirty * 4096) as f64, "{held}");
    let info = format!(
        "membloat_process_allocator_info{{allocator=\"jemalloc\",runtime=\"native\",version=\"\",pid=\"{pid}\",comm=\"jefree\"}}"
    );
    assert_eq!(value(&t, &info), Some(1.0));
    let measured = format!(
        "membloat_process_hoarded_bytes{{pid=\"{pid}\",comm=\"jefree\",method=\"measured\"}}"
    );
    assert_eq!(value(&t, &measured), Some(held));
    // Its share of the measured hoarding, as the fleet view splits it by holder.
    let share = format!(
        "membloat_process_runtime_held_bytes{{pid=\"{pid}\",comm=\"jefree\",runtime=\"jemalloc\"}}"
    );
    assert_eq!(value(&t, &share), Some(held));
    let f = explained(pid, "hoarding");
    assert_eq!(f["certainty"], "measured", "{f}");
    assert!(
        f["evidence"].as_str().unwrap().contains("jemalloc 5.3.0"),
        "{f}"
    );
    assert!(
        f["remedy"]
            .as_str()
            .unwrap()
            .contains("background_thread:true"),
        "{f}"
    );
}

/// Random programs (block sizes over jemalloc's small, large and huge classes, 1 and 8
/// long-lived threads, a random share kept) on every version, plain and with DWARF: the
/// dirty, muzzy and active pages read from outside equal jemalloc's own, page for page;
/// the resident dirty pages are at most the dirty ones, and a purge gives back what was
/// measured. `MEMBLOAT_JEMALLOC_PROGRAMS` sets the programs per version (4 by default).
#[test]
fn kept_pages_equal_jemallocs_own_on_every_version() {
    let programs: u64 = std::env::var("MEMBLOAT_JEMALLOC_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut wrong = Vec::new();
    // Debian's libjemalloc.a (5.3.0, its own configuration), linked into a C program.
    let jefree = common::repro::build("jefree");
    let debian = [("5.3.0", None)];
    let tikv = VERSIONS
        .iter()
        .flat_map(|v| [(v.0, Some(false)), (v.0, Some(true))]);
    for (version, debug) in debian.into_iter().chain(tikv) {
        {
            let built = debug.map_or(jefree.clone(), |d| program(version, d));
            for seed in 1..=programs {
                let threads = if seed % 2 == 0 { 8 } else { 1 };
                let mib = 32 + seed * 37 % 160;
                let keep = seed * 13 % 60;
                let args = [seed, threads, mib, keep].map(|a| a.to_string());
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut r = Repro::run_env(&built, &args, &[]);
                let (h, (active, dirty, muzzy)) = read_between(&mut r);
                let page = 4096;
                let got = (
                    h.active_bytes / page,
                    h.dirty_bytes / page,
                    h.muzzy_bytes / page,
                );
                let name = format!("jemalloc {version} {built:?} {args:?}");
                eprintln!(
                    "{name}: active {active} dirty {dirty} muzzy {muzzy} pages; read {got:?}, dirty resident {} MiB",
                    h.dirty_resident_bytes >> 20
                );
                assert_eq!(h.version, version, "{name}");
                if got != (active, dirty, muzzy) {
                    wrong.push(format!(
                        "{name}: jemalloc {:?}, read {got:?}",
                        (active, dirty, muzzy)
                    ));
                }
                assert!(h.dirty_resident_bytes <= h.dirty_bytes, "{name}");
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// `VmRSS` of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    common::status_bytes(pid, "VmRSS") as u64
}

/// What is measured as kept is what a purge gives back: after `arena.<all>.purge`, RSS
/// falls by at least 95 % of the resident dirty pages measured before, and none are left.
#[test]
fn a_purge_gives_back_what_was_measured() {
    for threads in ["1", "8"] {
        let mut r = Repro::start("jefree", &["5", threads, "192", "10"], &[]);
        let (h, _) = read_between(&mut r);
        assert!(h.dirty_resident_bytes > 16 << 20, "{h:?}");
        let before = rss(r.pid());
        let after_purge = stats(&r.ask("purge"));
        let after = rss(r.pid());
        let fell = before.saturating_sub(after);
        eprintln!(
            "{threads} threads: dirty resident {} MiB measured; RSS {} -> {} MiB after the purge",
            h.dirty_resident_bytes >> 20,
            before >> 20,
            after >> 20
        );
        assert!(
            fell as f64 >= 0.95 * h.dirty_resident_bytes as f64,
            "RSS fell {fell} of {} measured",
            h.dirty_resident_bytes
        );
        assert_eq!(
            after_purge.1, 0,
            "jemalloc keeps no dirty page after a purge"
        );
        let (h, _) = read_between(&mut r);
        assert_eq!((h.dirty_bytes, h.dirty_resident_bytes), (0, 0));
    }
}

/// With `dirty_decay_ms:0` freed pages go back at once: no dirty page is measured, and
/// the muzzy ones are as jemalloc counts them (this jemalloc keeps none: it purges them
/// whole, whatever `muzzy_decay_ms` says).
#[test]
fn with_dirty_decay_0_nothing_is_dirty() {
    let conf = "dirty_decay_ms:0,muzzy_decay_ms:1000000";
    let mut r = Repro::start("jefree", &["6", "4", "128", "10"], &[("MALLOC_CONF", conf)]);
    let (h, (_, dirty, muzzy)) = read_between(&mut r);
    assert_eq!((h.dirty_bytes, dirty), (0, 0));
    assert_eq!(h.muzzy_bytes / 4096, muzzy);
    assert!(h.muzzy_resident_bytes <= h.muzzy_bytes);
}

/// A static musl program maps no libc at all: musl's, told by its symbols, never glibc's.
#[test]
fn a_static_musl_program_is_musl() {
    let r = Repro::start("idle_musl", &["0"], &[]);
    let h = read(r.pid());
    assert_eq!(h.identity.allocator, Allocator::Musl);
    assert_eq!(
        h.get::<heap::Glibc>().cloned(),
        Some(Err(Outcome::NotGlibc))
    );
}

/// The places each version's layout reads (`jemalloc::layout::VERSIONS`) are the ones
/// the DWARF of a build of that version gives, as `gdb` reads it: the table is derived
/// from these builds, and a new version joins it the same way.
#[test]
fn each_versions_layout_is_its_dwarfs() {
    use membloat_exporter::heap::jemalloc::layout::VERSIONS as LAYOUTS;
    for (version, o) in LAYOUTS {
        let built = program(version, true);
        // 5.2's arena keeps its extents in extents_t; 5.3's in its page allocator's ecaches,
        // each with a set for guarded extents beside.
        let (arena, extent, link, dirty, muzzy): (_, _, _, Vec<String>, Vec<String>) =
            if version == "5.2.1" {
                (
                    "nactive",
                    "extent_t",
                    "ql_link",
                    vec!["extents_dirty".into()],
                    vec!["extents_muzzy".into()],
                )
            } else {
                let sets = |e: &str| {
                    ["eset", "guarded_eset"]
                        .map(|s| format!("pa_shard.pac.ecache_{e}.{s}"))
                        .to_vec()
                };
                (
                    "pa_shard.nactive",
                    "edata_t",
                    "ql_link_inactive",
                    sets("dirty"),
                    sets("muzzy"),
                )
            };
        let mut asked = vec![(format!("((arena_t*)0)->{arena}"), o.nactive)];
        for (sets, places) in [(&dirty, o.dirty), (&muzzy, o.muzzy)] {
            assert_eq!(sets.len(), places.len(), "{version}");
            for (s, &lru) in sets.iter().zip(places) {
                asked.push((format!("((arena_t*)0)->{s}.lru"), lru));
                asked.push((format!("((arena_t*)0)->{s}.npages"), lru + 8));
                asked.push((format!("((arena_t*)0)->{s}.state"), lru + 16));
            }
        }
        for (field, at) in [
            ("e_bits", o.e_bits),
            ("e_addr", o.e_addr),
            ("e_size_esn", o.e_size),
            (&format!("{link}.qre_next") as &str, o.e_next),
        ] {
            asked.push((format!("(({extent}*)0)->{field}"), at));
        }
        let asked: Vec<(String, u64)> = asked
            .into_iter()
            .map(|(e, at)| (format!("&{e}"), at))
            .collect();
        common::assert_dwarf(&built, &format!("jemalloc {version}"), &asked);
    }
}

/// The remedy `explain` prints for an idle jemalloc, applied as printed (its `MALLOC_CONF`
/// given to the same program): the dirty pages the plain run keeps go back while the
/// program idles. The truth is jemalloc's own count, as read from outside (exact, as
/// `kept_pages_equal_jemallocs_own_on_every_version` shows) without touching the process;
/// the bound on time only stops a run that would never get there.
#[test]
fn the_printed_remedy_gives_back_what_an_idle_jemalloc_keeps() {
    let args = ["11", "4", "192", "10"];
    let mut plain = Repro::start("jefree", &args, &[]);
    let (kept, _) = read_between(&mut plain);
    assert!(kept.dirty_resident_bytes > 16 << 20, "{kept:?}");
    let f = explained(plain.pid(), "hoarding");
    // The environment for the next start, as printed.
    let next = f["next_start"].as_str().unwrap_or_else(|| panic!("{f:#}"));
    let conf = next
        .strip_prefix("MALLOC_CONF=")
        .unwrap_or_else(|| panic!("no MALLOC_CONF in {next:?}"));
    let fixed = Repro::start("jefree", &args, &[("MALLOC_CONF", conf)]);
    let started = std::time::Instant::now();
    let dirty = loop {
        // While its background thread purges, a read may find the lists moving.
        match read(fixed.pid())
            .get::<heap::jemalloc::Jemalloc>()
            .cloned()
            .expect("jemalloc")
        {
            Ok(h) if h.dirty_resident_bytes as f64 <= 0.05 * kept.dirty_resident_bytes as f64 => {
                break h.dirty_resident_bytes;
            }
            Ok(_) | Err(heap::jemalloc::Unmeasured::Moving) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{conf}: the dirty pages did not go back within a minute"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let gave = rss(plain.pid()).saturating_sub(rss(fixed.pid()));
    eprintln!(
        "{conf}: {} MiB kept dirty without it, {} MiB with it after {:.1} s; RSS {} MiB lower",
        kept.dirty_resident_bytes >> 20,
        dirty >> 20,
        started.elapsed().as_secs_f64(),
        gave >> 20
    );
    assert!(
        gave as f64 >= 0.8 * kept.dirty_resident_bytes as f64,
        "RSS {gave} lower, {} promised",
        kept.dirty_resident_bytes
    );
}

/// jefree (128 MiB, 10 % kept) under `conf`, once jemalloc's own stats say its background
/// threads have decayed every dirty page (to muzzy pages, or given back).
fn decayed(conf: &[(&str, &str)]) -> Repro {
    let mut r = Repro::start("jefree", &["5", "2", "128", "10"], conf);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while stats(&r.ask("stats")).1 > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "dirty pages after 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    r
}

/// jemalloc's muzzy pages are pages it gave back with `MADV_FREE`: with dirty pages
/// decayed by its background threads within a millisecond and muzzy ones never
/// (`MALLOC_CONF`), the process's `LazyFree` as the exporter serves it is jemalloc's
/// resident kept pages, within the kernel's per-CPU batches (31 pages on 6.x, 15 before):
/// a page faulted in on another CPU and not yet on an LRU list, or freed and not yet
/// marked (`tests/reproducers/lazyfree.c`); and they are jemalloc's hoarding, not a second
/// finding.
#[test]
fn muzzy_pages_are_the_processs_lazy_free() {
    let conf = [(
        "MALLOC_CONF",
        "background_thread:true,dirty_decay_ms:1,muzzy_decay_ms:-1",
    )];
    let mut r = decayed(&conf);
    let pid = r.pid();
    let t = once_every_process();
    let (_, dirty, muzzy) = stats(&r.ask("stats"));
    assert!(muzzy > 4096, "jemalloc keeps {muzzy} muzzy pages");
    let labels = format!("{{pid=\"{pid}\",comm=\"jefree\"}}");
    let served = |name: &str| {
        let series = format!("membloat_process_{name}_bytes{labels}");
        value(&t, &series).unwrap_or_else(|| panic!("no {series}"))
    };
    let (lazy, kept) = (served("lazy_free"), served("jemalloc_kept_resident"));
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    let slack = 2.0 * 31.0 * cpus * 4096.0;
    let dirty = (dirty * 4096) as f64;
    assert!(
        lazy <= kept + slack && lazy >= kept - dirty - slack,
        "LazyFree {lazy}, jemalloc's resident kept pages {kept} ({dirty} dirty), {muzzy} muzzy pages"
    );
    eprintln!(
        "muzzy: LazyFree {:.1} MiB, resident kept {:.1} MiB, {:.1} MiB muzzy",
        lazy / 1048576.0,
        kept / 1048576.0,
        (muzzy * 4096) as f64 / 1048576.0
    );
    let kinds = explained_kinds(pid);
    assert!(kinds.iter().any(|k| k == "hoarding"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "lazy_free"), "{kinds:?}");

    // The `lazy_free` remedy for jemalloc, applied as printed (`muzzy_decay_ms:0`) to the
    // same program: its decayed pages are freed at once, none lazily, and RSS shows it.
    let conf = [(
        "MALLOC_CONF",
        "background_thread:true,dirty_decay_ms:1,muzzy_decay_ms:0",
    )];
    let fixed = decayed(&conf);
    let rollup = |pid: u32| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
        (
            field_bytes(&text, "LazyFree").unwrap(),
            field_bytes(&text, "Rss").unwrap(),
        )
    };
    let ((lazy_before, rss_before), (lazy_after, rss_after)) = (rollup(pid), rollup(fixed.pid()));
    assert!(
        lazy_after <= slack,
        "LazyFree {lazy_after} with muzzy_decay_ms:0"
    );
    assert!(
        rss_before - rss_after >= 0.95 * lazy_before,
        "RSS {rss_before} kept lazily, {rss_after} with the remedy, LazyFree {lazy_before}"
    );
    eprintln!(
        "muzzy_decay_ms:0: LazyFree {:.1} MiB, RSS {:.1} MiB (was {:.1} and {:.1})",
        lazy_after / 1048576.0,
        rss_after / 1048576.0,
        lazy_before / 1048576.0,
        rss_before / 1048576.0
    );
}
