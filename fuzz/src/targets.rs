//! The fuzz targets: every parser of text the kernel, another user or an operator writes,
//! the heap walk over memory a process controls, and the whole path from a /proc tree to
//! both expositions and the diagnosis. Each takes bytes, must not panic, and checks what
//! must hold of its output whatever the input (a `panic!` there is a finding too).
//!
//! Shared by the fuzzer (`membloat-fuzz`) and by `tests/fuzz_corpus.rs`, which replays the
//! corpus and every past finding on each `cargo test`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use membloat_exporter::collect::matcher::{Candidate, Matchers};
use membloat_exporter::config::{self, Config};
use membloat_exporter::daemon::Pipeline;
use membloat_exporter::heap::glibc::Layout;
use membloat_exporter::heap::walk::HeapKind;
use membloat_exporter::heap::{
    self as heap, golang, image, jemalloc, linked, mimalloc, python, runtime,
};
use membloat_exporter::parse::{
    cgroup, hsperfdata, kmsg, loadavg,
    meminfo::{self, Meminfo},
    memory_stat::MemoryStat,
    mountinfo, owners,
    pressure::Pressure,
    smaps,
    smaps_rollup::SmapsRollup,
    sockstat::Sockstat,
    stat::Stat,
    statm,
    status::Status,
    sysfs,
    vmstat::Vmstat,
    zoneinfo::Pagesets,
};
use membloat_exporter::serve::webconfig::WebConfig;
use membloat_exporter::serve::{auth, negotiate, shared};

pub struct FuzzTarget {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// Longest input tried.
    pub max_len: usize,
    /// Inputs are memory images, not lines of text.
    pub binary: bool,
    /// Files under the repository root that seed the corpus (`*` matches one component).
    pub seeds: &'static [&'static str],
}

macro_rules! targets {
    ($($name:literal => $run:ident, $max:expr, $binary:expr, [$($seed:expr),*];)*) => {
        pub const TARGETS: &[FuzzTarget] = &[$(FuzzTarget {
            name: $name, run: $run, max_len: $max, binary: $binary, seeds: &[$($seed),*],
        }),*];
    };
}

targets! {
    "meminfo" => meminfo, 8 << 10, false, ["tests/fixtures/kernel-6.18/proc/meminfo"];
    "vmstat" => vmstat, 16 << 10, false, ["tests/fixtures/kernel-6.18/proc/vmstat"];
    "status" => status, 8 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/status"];
    "stat" => stat, 4 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/stat"];
    "statm" => statm, 1 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/statm"];
    "smaps" => smaps, 64 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/smaps"];
    "smaps_rollup" => smaps_rollup, 4 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/smaps_rollup"];
    "pressure" => pressure, 1 << 10, false, ["tests/fixtures/kernel-6.18/proc/pressure/memory"];
    "kmsg" => kmsg, 1 << 10, false, ["tests/fixtures/kmsg/records/*"];
    "memory_stat" => memory_stat, 8 << 10, false, ["tests/fixtures/kernel-6.18/sys/fs/cgroup/memory/*/memory.stat"];
    "cgroup" => cgroup, 4 << 10, false, ["tests/fixtures/kernel-6.18/proc/*/cgroup"];
    "sysfs" => sysfs, 1 << 10, false, ["tests/fixtures/kernel-6.18/sys/kernel/mm/transparent_hugepage/enabled"];
    "mountinfo" => mountinfo, 16 << 10, false, [];
    "sockstat" => sockstat, 1 << 10, false, [];
    "loadavg" => loadavg_stat, 4 << 10, false, ["tests/fixtures/kernel-6.18/proc/stat"];
    "zoneinfo" => zoneinfo, 32 << 10, false, [];
    "buddyinfo" => buddyinfo, 4 << 10, false, ["tests/fixtures/kernel-6.18/proc/buddyinfo"];
    "owners" => owners_files, 16 << 10, false, ["tests/fixtures/kernel-6.18/proc/sysvipc/shm", "tests/fixtures/kernel-6.18/proc/slabinfo", "tests/fixtures/kernel-6.18/proc/vmallocinfo", "tests/fixtures/kernel-6.18/proc/sys/fs/dentry-state"];
    "matcher" => matcher, 2 << 10, false, [];
    "webconfig" => webconfig, 4 << 10, false, ["deploy/web-config.yml"];
    "http_headers" => http_headers, 1 << 10, false, [];
    "flags" => flags, 2 << 10, false, [];
    "heap_walk" => heap_walk, 64 << 10, true, [];
    "go_buildinfo" => go_buildinfo, 16 << 10, true, [];
    "go_layout" => go_layout, 64 << 10, true, [];
    "go_heap" => go_heap, 16 << 10, true, [];
    "allocator_linked" => allocator_linked, 64 << 10, true, [];
    "jemalloc_read" => jemalloc_read, 16 << 10, true, [];
    "python_read" => python_read, 16 << 10, true, [];
    "mimalloc_read" => mimalloc_read, 16 << 10, true, [];
    "hsperfdata" => hsperfdata, 64 << 10, true, ["tests/fixtures/hsperfdata/*"];
    "pipeline" => pipeline, 256 << 10, false, [];
}

pub fn find(name: &str) -> Option<&'static FuzzTarget> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Text as the exporter's reader hands it over: invalid UTF-8 replaced.
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

fn bytes_from_kib(v: Option<u64>, what: &str) {
    if let Some(v) = v {
        assert!(v % 1024 == 0, "{what} = {v}: not kB times 1024");
    }
}

fn meminfo(data: &[u8]) {
    if let Ok(b) = meminfo::moving_bytes(&text(data)) {
        bytes_from_kib(Some(b), "AnonPages + Shmem + Mapped");
    }
    if let Ok(m) = Meminfo::parse(&text(data)) {
        for (v, what) in [
            (m.mem_total_bytes, "MemTotal"),
            (m.mem_available_bytes, "MemAvailable"),
            (m.committed_as_bytes, "Committed_AS"),
            (m.swap_free_bytes, "SwapFree"),
            (m.hugetlb_bytes, "Hugetlb"),
        ] {
            bytes_from_kib(v, what);
        }
    }
}

/// `/proc/buddyinfo`: a zone per line at most, its node and zone the line's, and its free
/// bytes at least those of its huge-page orders (the sums saturate, never wrap).
fn buddyinfo(data: &[u8]) {
    let t = text(data);
    if let Ok(b) = membloat_exporter::parse::buddyinfo::parse(&t) {
        assert!(b.zones.len() + b.rejected as usize <= t.lines().count());
        for z in &b.zones {
            assert!(t.contains(&format!("Node {},", z.node)), "node {}", z.node);
            assert!(t.contains(&z.zone), "zone {}", z.zone);
            for (page, order) in [(4096, 9), (65536, 13)] {
                let (all, huge) = membloat_exporter::parse::buddyinfo::free_bytes(z, page, order);
                assert!(huge <= all, "{huge} > {all}");
            }
        }
    }
}

/// `/proc/loadavg`'s last pid and `/proc/stat`'s task count: a number or an error.
fn loadavg_stat(data: &[u8]) {
    let t = text(data);
    let _ = loadavg::parse(&t);
    if let Ok(n) = loadavg::forks(&t) {
        assert!(t.contains(&n.to_string()), "{n} is not in the text");
    }
}

fn vmstat(data: &[u8]) {
    if let Ok(v) = Vmstat::parse(&text(data)) {
        // Each key becomes a series name: once each, and only characters a name may hold.
        let mut keys = std::collections::HashSet::new();
        for (k, _) in &v.counters {
            assert!(keys.insert(k.as_str()), "{k} twice");
            assert!(
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "key {k:?}"
            );
        }
    }
}

fn status(data: &[u8]) {
    if let Ok(s) = Status::parse(&text(data)) {
        bytes_from_kib(s.vm_rss_bytes, "VmRSS");
        bytes_from_kib(s.vm_hwm_bytes, "VmHWM");
        bytes_from_kib(s.rss_anon_bytes, "RssAnon");
        bytes_from_kib(s.vm_swap_bytes, "VmSwap");
    }
}

/// A JVM's perf-data file, which the JVM (so the program it runs) writes: every entry
/// comes from inside the bytes, with a name, and never more of them than 20-byte headers
/// fit.
fn hsperfdata(data: &[u8]) {
    if let Ok(p) = hsperfdata::parse(data) {
        assert!(
            p.entries.len() <= data.len() / 20,
            "{} entries",
            p.entries.len()
        );
        for (name, _) in &p.entries {
            assert!(!name.is_empty() && !name.contains('\0'), "name {name:?}");
        }
    }
}

fn stat(data: &[u8]) {
    let t = text(data);
    if let Ok(s) = Stat::parse(&t) {
        assert!(t.contains(&s.comm), "comm {:?} is not in the input", s.comm);
    }
}

fn statm(data: &[u8]) {
    let _ = statm::parse(&text(data));
}

fn smaps(data: &[u8]) {
    let t = text(data);
    if let Ok(smaps::Smaps { vmas, .. }) = smaps::parse(&t) {
        for v in &vmas {
            assert!(
                v.start <= v.end,
                "mapping {:x}-{:x} ends before it starts",
                v.start,
                v.end
            );
        }
        let s = smaps::SmapsSummary::from_vmas(&vmas);
        let _ = (s.heap_rss_bytes(), s.heap_size_bytes());
        let _ = heap::bounds(&vmas);
    }
    let _ = smaps::summarize(&t);
}

fn smaps_rollup(data: &[u8]) {
    if let Ok(r) = SmapsRollup::parse(&text(data)) {
        bytes_from_kib(r.rss_bytes, "Rss");
        bytes_from_kib(r.pss_bytes, "Pss");
        bytes_from_kib(r.swap_bytes, "Swap");
    }
}

fn pressure(data: &[u8]) {
    if let Ok(p) = Pressure::parse(&text(data)) {
        for v in [p.some_seconds, p.full_seconds].into_iter().flatten() {
            assert!(v.is_finite() && v >= 0.0, "pressure total {v}");
        }
    }
}

fn kmsg(data: &[u8]) {
    let t = text(data);
    // The input as a stream of records, one a line, through the assembler: every kill it
    // completes comes from a line of the input, and no record is both a kill and malformed.
    let mut a = kmsg::Assembler::default();
    let lines = t.split_inclusive('\n').count() as u64;
    let mut kills = 0;
    for line in t.split_inclusive('\n') {
        if let Some(k) = a.push(line) {
            kills += 1;
            assert!(t.contains(&format!("{} (", k.kill.pid)), "{k:?}");
        }
    }
    assert!(kills + a.malformed <= lines);
    let Ok(r) = kmsg::record(&t) else { return };
    assert!(t.contains(r.message));
    match kmsg::oom_line(r.message) {
        Some(kmsg::OomLine::Kill(k)) => {
            assert!(
                r.message.contains(&format!("{} ({}", k.pid, k.comm)),
                "{k:?}"
            );
            for b in [
                k.total_vm_bytes,
                k.anon_rss_bytes,
                k.file_rss_bytes,
                k.shmem_rss_bytes,
                k.pgtables_bytes,
            ]
            .into_iter()
            .flatten()
            {
                assert!(b % 1024 == 0, "{k:?}");
            }
            if let Some(adj) = k.oom_score_adj {
                assert!((-1000..=1000).contains(&adj));
            }
        }
        Some(kmsg::OomLine::Summary(s)) => {
            assert!(
                r.message.contains(&format!(",task={},pid=", s.task)),
                "{s:?}"
            );
        }
        Some(kmsg::OomLine::Choice(c)) => assert!(r.message.contains(&c.comm)),
        Some(kmsg::OomLine::GroupKill { memcg }) => assert!(r.message.contains(&memcg)),
        Some(kmsg::OomLine::MemcgLimit { .. }) | None => {}
    }
}

fn memory_stat(data: &[u8]) {
    let _ = MemoryStat::parse(&text(data));
}

fn cgroup(data: &[u8]) {
    let t = text(data);
    if let Ok(path) = cgroup::memory_cgroup(&t) {
        assert!(t.contains(path));
    }
}

fn sysfs(data: &[u8]) {
    let t = text(data);
    if let Ok(word) = sysfs::selected(&t) {
        // The word is a label value: nothing that needs escaping.
        assert!(
            !word.is_empty() && !word.contains(['"', '\\', '\n', ' ']),
            "{word:?}"
        );
    }
    for line in t.lines() {
        if let Some(b) = sysfs::hugepage_dir_size_bytes(line) {
            assert!(b % 1024 == 0);
        }
    }
}

fn mountinfo(data: &[u8]) {
    let t = text(data);
    mountinfo_mounts(&t);
    let _ = mountinfo::hides_processes(&t, "/proc");
    if let Some(point) = t.lines().next() {
        let _ = mountinfo::hides_processes(&t, point);
    }
}

/// Every mount's path is walked up to the root or refused, whatever parents the lines
/// claim (a loop among them included).
fn mountinfo_mounts(t: &str) {
    let m = mountinfo::mounts(t);
    for one in &m {
        let _ = mountinfo::local_path(&m, one);
        assert!(!one.fs.contains(' '), "fs {:?}", one.fs);
    }
}

fn sockstat(data: &[u8]) {
    let t = text(data);
    if let Ok(s) = Sockstat::parse(&t) {
        assert!(s.tcp_pages.is_some() || s.udp_pages.is_some() || s.frag_bytes.is_some());
        let _ = s.bytes(u64::MAX);
    }
    // The socket tables' queues: a line gives its fifth word's two hex numbers, never a
    // listening socket's.
    for line in t.lines() {
        if let Some(q) = membloat_exporter::parse::sockstat::queue_line(line) {
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            assert_ne!(words[3], "0A");
            let (tx, rx) = words[4].split_once(':').unwrap();
            let hex = |h: &str| u64::from_str_radix(h, 16).unwrap();
            assert_eq!(q, (hex(tx), hex(rx)));
        }
    }
}

fn zoneinfo(data: &[u8]) {
    if let Ok(p) = Pagesets::parse(&text(data)) {
        assert!(p.cpus >= 1);
    }
}

/// The owners collector's four files, one parser each on the same input.
fn owners_files(data: &[u8]) {
    let t = text(data);
    if let Ok(segments) = owners::sysv_shm(&t) {
        assert!(
            segments.len() < t.lines().count().max(1),
            "a segment per line at most"
        );
    }
    if let Ok(caches) = owners::slab_caches(&t, 4096) {
        for (name, _) in caches {
            // A label value may hold any character; a name is one word of the line.
            assert!(
                !name.is_empty() && !name.contains(|c: char| c.is_ascii_whitespace()),
                "{name:?}"
            );
        }
    }
    let callers = owners::vmalloc_callers(&t, 4096);
    let names: std::collections::HashSet<&str> = callers.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names.len(), callers.len(), "a caller once");
    let _ = owners::dentry_state(&t);
    for line in t.lines() {
        match owners::unlinked(line) {
            Some(owners::Unlinked::Memfd(n) | owners::Unlinked::Deleted(n)) => {
                assert!(
                    n.len() <= owners::NAME_BYTES && line.contains(n.as_str()),
                    "{n:?}"
                );
            }
            None => assert!(!line.ends_with(" (deleted)")),
        }
    }
}

fn matcher(data: &[u8]) {
    let t = text(data);
    // The last two lines (after a `---` line) name a process to match: comm, then cmdline.
    let (yaml, probe) = t
        .split_once("\n---\n")
        .unwrap_or((&t, "bash\n/bin/bash\0-c\0x"));
    let mut probe = probe.lines();
    let comm = probe.next().unwrap_or("");
    let cmdline = probe.next().unwrap_or("");
    if let Ok(m) = Matchers::parse(yaml) {
        let _ = m.needs_cmdline();
        let _ = m.group(&Candidate { comm, cmdline });
    }
}

fn webconfig(data: &[u8]) {
    let t = text(data);
    // Paths would be opened for real (a certificate at /dev/zero reads forever), and a
    // bcrypt cost is 2^cost rounds by design: neither is worth the fuzzer's time.
    if t.contains("/dev") || t.contains("/proc") || t.contains("/sys") || costly(&t) {
        return;
    }
    let _ = WebConfig::parse(&t, Path::new("/nonexistent/membloat-fuzz"));
}

/// A `$2?$NN$` bcrypt prefix with a cost above 6.
fn costly(t: &str) -> bool {
    t.match_indices("$2").any(|(i, _)| {
        let cost = t.get(i + 4..i + 6).and_then(|c| c.parse::<u32>().ok());
        cost.is_some_and(|c| c > 6)
    })
}

fn http_headers(data: &[u8]) {
    for value in text(data).lines() {
        if let Some((user, _)) = auth::credentials(value) {
            assert!(!user.contains(':'), "user {user:?} holds the separator");
        }
        let _ = negotiate::wants_openmetrics(value);
        let _ = negotiate::accepts(value, "text/plain");
    }
}

fn flags(data: &[u8]) {
    let t = text(data);
    for line in t.lines() {
        let _ = config::parse_duration(line);
        let _ = config::parse_size(line);
        let _ = config::socket_addrs(line);
    }
    let args = std::iter::once("membloat_exporter").chain(t.lines());
    let _ = Config::from_args(args);
}

/// The input patches a crafted server-shaped process (`image::server`: a brk heap and a
/// worker arena of three heaps, every kind of free list): each 11 bytes are a region
/// (1 byte), a word offset in it (2 bytes) and the word to write there (8 bytes). The
/// patched process is measured as glibc 2.31 and 2.41 lay it out.
fn heap_walk(data: &[u8]) {
    for minor in [31, 41] {
        let Some(layout) = Layout::of(minor) else {
            return;
        };
        let mut s = image::server(layout, 64 << 10);
        let heap_bytes: u64 = s
            .image
            .regions
            .iter()
            .skip(1)
            .map(|r| r.1.len() as u64)
            .sum();
        patch(&mut s.image, data);
        // A page whose first patch byte is odd is not resident.
        if let Some(&b) = data.first() {
            if b % 2 == 1 {
                s.image
                    .absent
                    .push(image::BRK / image::PAGE + u64::from(b % 16));
            }
        }
        if let Ok(m) = heap::measure(&mut s.image, &layout, &s.bounds, 100_000, 100_000) {
            assert!(m.free_bytes() <= heap_bytes, "{m:?}");
            for kind in HeapKind::ALL {
                let t = m.of(kind);
                assert!(t.free_resident_bytes <= t.free_bytes, "{kind:?}: {t:?}");
                assert!(
                    t.reclaimable_bytes <= t.free_resident_bytes,
                    "{kind:?}: {t:?}"
                );
                assert!(t.top_bytes <= t.free_bytes, "{kind:?}: {t:?}");
                assert!(t.fast_bytes <= t.free_bytes, "{kind:?}: {t:?}");
            }
        }
    }
}

/// Writes the input into `m`: each 11 bytes are a region (1 byte), a word offset in it
/// (2 bytes) and the word to write there (8 bytes).
fn patch(m: &mut image::Image, data: &[u8]) {
    for patch in data.chunks_exact(11) {
        let region = patch[0] as usize % m.regions.len();
        let (base, len) = (m.regions[region].0, m.regions[region].1.len() as u64);
        let word_at = u64::from(u16::from_le_bytes([patch[1], patch[2]])) * 8 % len;
        let word = u64::from_le_bytes(patch[3..11].try_into().unwrap_or([0; 8]));
        m.put(base + word_at, word);
    }
}

/// Any bytes as a Go executable: a layout or a reason (sizes checked before reads, names
/// compared in place), never a panic.
fn go_layout(data: &[u8]) {
    let _ = golang::layout(data);
}

/// The input patches the miniature Go process (`golang::image::process`: a page
/// allocator with one chunk, two Ps with page caches), read with its layout: what it
/// reports free in resident pages is never more than free.
fn go_heap(data: &[u8]) {
    let mut m = golang::image::process(1, 2, golang::image::Caches::OneBlock);
    patch(&mut m, data);
    if let Ok(h) = golang::read(&mut m, &golang::image::layout(), 0) {
        assert!(h.free_resident_bytes <= h.free_bytes, "{h:?}");
    }
}

/// Any bytes as an executable: the allocator it links in and jemalloc's layout, or a
/// reason (tables read in pieces within their caps), never a panic.
fn allocator_linked(data: &[u8]) {
    let _ = linked::linked(data);
    let _ = mimalloc::layout::of(data);
    let _ = jemalloc::layout::of(data);
    let _ = python::layout::of(data);
}

/// The input patches the miniature CPython process (`python::image::image`: two arenas,
/// pools in use and emptied), read with 3.10's layout: what it reports unused in resident
/// pages is never more than unused, nor its figures more than its arenas hold.
fn python_read(data: &[u8]) {
    let a0: &[Option<(u64, u64)>] = &[Some((0, 10)), None, Some((31, 3))];
    let a1: &[Option<(u64, u64)>] = &[Some((5, 20))];
    let mut m = python::image::image(&[a0, a1]);
    patch(&mut m, data);
    if let Ok(h) = python::read::read(&mut m, &python::image::layout(), 0) {
        assert!(h.unused_resident_bytes <= h.unused_bytes(), "{h:?}");
        let pools = h.used_pools + h.unused_pools;
        assert!(pools * h.pool_bytes <= h.arenas_bytes(), "{h:?}");
        assert!(
            h.allocated_bytes + h.available_bytes <= h.used_pools * h.pool_bytes,
            "{h:?}"
        );
    }
}

/// The input patches the miniature jemalloc process (`jemalloc::image::image`: one arena,
/// a ring of dirty extents), read with its layout: what it reports resident is never
/// more than what it reports kept, and every figure is whole pages.
fn jemalloc_read(data: &[u8]) {
    let mut m = jemalloc::image::image(100, &[3, 5, 8]);
    patch(&mut m, data);
    if let Ok(h) = jemalloc::read(&mut m, &jemalloc::image::layout(), 0) {
        assert!(h.dirty_resident_bytes <= h.dirty_bytes, "{h:?}");
        assert!(h.muzzy_resident_bytes <= h.muzzy_bytes, "{h:?}");
        for b in [h.active_bytes, h.dirty_bytes, h.muzzy_bytes] {
            assert_eq!(b % 4096, 0, "{h:?}");
        }
    }
}

/// The input patches the miniature mimalloc 2.3.2 process (`mimalloc::image::image`: one
/// arena of two blocks, a segment of a header, live pages, an empty one and a free span)
/// and the 3.3.2 one (`image_v3`: an arena of metadata, live and empty pages and free
/// slices, one scheduled for purging), each read with its symbols: what it reports in use and held is never more than resident,
/// resident never more than reserved, what is pending purge never more than held, the
/// committed count within the address space, and every figure is whole pages.
fn mimalloc_read(data: &[u8]) {
    use mimalloc::image::Span;
    let live = Span {
        slices: 2,
        block_size: 64,
        used: 3,
    };
    let empty = Span {
        slices: 1,
        block_size: 64,
        used: 0,
    };
    let free = Span {
        slices: 3,
        block_size: 0,
        used: 0,
    };
    let two = mimalloc::image::image(&[live, empty, live]);
    let three = mimalloc::image::image_v3(&[live, empty, free, live], &[5]);
    for (mut m, symbols) in [
        (two, mimalloc::image::symbols()),
        (three, mimalloc::image::symbols_v3()),
    ] {
        patch(&mut m, data);
        if let Ok(h) = mimalloc::read(&mut m, &symbols, 0) {
            assert!(h.in_use_bytes + h.held() <= h.resident_bytes, "{h:?}");
            assert!(h.resident_bytes <= h.reserved_bytes, "{h:?}");
            assert!(h.pending_purge_bytes <= h.held(), "{h:?}");
            assert!(h.committed_bytes.is_none_or(|c| c <= 1 << 47), "{h:?}");
            let pending = h.pending_purge_bytes;
            for b in [
                h.reserved_bytes,
                h.resident_bytes,
                h.in_use_bytes,
                h.held(),
                pending,
            ] {
                assert_eq!(b % 4096, 0, "{h:?}");
            }
        }
    }
}

fn go_buildinfo(data: &[u8]) {
    let read = |offset: u64, buf: &mut [u8]| {
        let Ok(at) = usize::try_from(offset) else {
            return false;
        };
        match data.get(at..at.saturating_add(buf.len())) {
            Some(src) if src.len() == buf.len() => {
                buf.copy_from_slice(src);
                true
            }
            _ => false,
        }
    };
    if let Some(v) = runtime::go_version(read) {
        // The version becomes a label value.
        assert!(!v.contains(['"', '\\', '\n']), "version {v:?}");
    }
}

static TREES: AtomicUsize = AtomicUsize::new(0);

/// The whole path: the input unpacked as a /proc and /sys tree, two scans, then both
/// expositions (checked as Prometheus would) and the diagnosis in text and JSON.
fn pipeline(data: &[u8]) {
    let n = TREES.fetch_add(1, Ordering::Relaxed);
    // tmpfs when there is one: a tree is written and read twice per input.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = tmp.join(format!("membloat-fuzz-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("proc")).unwrap();
    std::fs::create_dir_all(root.join("sys")).unwrap();
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _remove = Remove(root.clone());
    crate::tree::unpack(data, &root);
    let args = [
        "membloat_exporter".to_string(),
        format!("--path.procfs={}", root.join("proc").display()),
        format!("--path.sysfs={}", root.join("sys").display()),
        "--collector.processes.top-k=1000".into(),
        "--collector.processes.deep-interval=0s".into(),
        "--collector.processes.deep-min-size=0".into(),
    ];
    let cfg = Config::from_args(args).unwrap_or_else(|_| panic!("the fuzz flags are valid"));
    let mut p = Pipeline::new(&cfg).unwrap();
    p.step();
    let published = shared::publish_all(p.step(), &Default::default());
    let text = std::str::from_utf8(&published.text).expect("text exposition is UTF-8");
    let om = std::str::from_utf8(&published.openmetrics).expect("OpenMetrics is UTF-8");
    if let Err(e) = crate::check::exposition(text, false) {
        panic!("text exposition: {e}");
    }
    if let Err(e) = crate::check::exposition(om, true) {
        panic!("OpenMetrics exposition: {e}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&published.explain_json).expect("/explain JSON parses");
    assert!(json.is_object());
}
