#!/usr/bin/env python3
"""The checks run inside a Debian kernel booted by scripts/vm.sh, with cgroup v2 as the
only hierarchy (tests/kernels.rs boots each kernel and asserts what this writes).

    guest.py --exporter BIN --repro DIR --out DIR --mode full|psi0 --seed N

Starts the exporter as the host's root inside the VM, makes the processes and containers
each check needs, and compares the exporter's figures with the kernel's own files and log
and with glibc's own count. Writes OUT/results.json: the kernel's facts, and one entry per
check (name, ok, detail, seconds). A check that raises is a failed check, never a missing
one: the host knows which checks each mode must report.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import urllib.request

MIB = 1 << 20
# The guest's writable scratch (scripts/vm.sh): this machine's /tmp is seen read-only.
SCRATCH = os.environ.get("TMPDIR", "/tmp")
OUT = "/run/vm-out"
CG = "/sys/fs/cgroup"
PORT = 10293
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """The samples of a text exposition: a list of (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, labels = series.partition("{")
        out.append((name, dict(LABEL.findall(labels)), float(value)))
    return out


def pick(samples, name, **labels):
    """The values of `name` whose labels include `labels`."""
    return [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]


def one(samples, name, **labels):
    got = pick(samples, name, **labels)
    return got[0] if len(got) == 1 else None


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def keyed(path):
    """A file of `key value` lines (memory.events, /proc/vmstat) as a dict."""
    out = {}
    for line in read(path).splitlines():
        k, _, v = line.partition(" ")
        out[k] = int(v)
    return out


def meminfo(key):
    for line in read("/proc/meminfo").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def psi_total(path, kind):
    for line in read(path).splitlines():
        if line.startswith(kind + " "):
            return int(line.rpartition("total=")[2]) / 1e6
    return None


def wait_for(seconds, what, ok):
    """Calls ok() every half second until it returns something truthy, and returns that;
    a server not answering yet is not an answer."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            got = ok()
            if got:
                return got
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {seconds} s")


class Exporter:
    def __init__(self, binary, args):
        self.log = open(os.path.join(OUT, "exporter.log"), "w")
        self.proc = subprocess.Popen(
            [binary, f"--web.listen-address=127.0.0.1:{PORT}"] + args,
            stdout=self.log, stderr=subprocess.STDOUT)
        self.wait(60, "the first scan", lambda s: one(s, "membloat_scans_total"))

    def samples(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=30) as r:
            return parse(r.read().decode())

    def wait(self, seconds, what, ok):
        """Scrapes until ok(samples) is truthy; returns it."""
        return wait_for(seconds, what, lambda: ok(self.samples()))

    def scans_after(self, n=2):
        """Waits until n more scans have finished, so what follows is fresh."""
        at = one(self.samples(), "membloat_scans_total")
        return self.wait(60, f"{n} scans", lambda s: one(s, "membloat_scans_total") >= at + n and s)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Prometheus:
    """A real Prometheus (this machine's) scraping the exporter every second and evaluating
    the project's rules."""

    def __init__(self, rules):
        prom = os.path.join(SCRATCH, "prom")
        os.makedirs(prom, exist_ok=True)
        with open(os.path.join(prom, "prometheus.yml"), "w") as fh:
            fh.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                     f"rule_files: [{json.dumps(rules)}]\n"
                     "scrape_configs:\n  - job_name: membloat\n    static_configs:\n"
                     f"      - targets: [\"127.0.0.1:{PORT}\"]\n"
                     "    relabel_configs:\n      - target_label: cluster\n        replacement: test\n")
        self.log = open(os.path.join(OUT, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={prom}/prometheus.yml",
             f"--storage.tsdb.path={prom}/data", "--web.listen-address=127.0.0.1:9090",
             "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, q):
        url = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(q)
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.load(r)["data"]["result"]

    def wait(self, seconds, what, ok):
        return wait_for(seconds, what, ok)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Container:
    """A memory cgroup at a kubelet's path, its controllers enabled from the root down."""

    def __init__(self, path, files=None):
        self.path = path
        parts = path.split("/")
        for i in range(len(parts)):
            d = os.path.join(CG, *parts[: i + 1])
            os.makedirs(d, exist_ok=True)
            parent = os.path.dirname(d)
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                f.write("+memory")
        self.dir = os.path.join(CG, path)
        for name, value in (files or {}).items():
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(str(value))

    def run(self, argv, stdin=False):
        """Starts argv inside the cgroup (joined before exec, so every page is charged
        here). Waits for its "ready" line when it prints one."""
        p = subprocess.Popen(
            ["/bin/sh", "-c", f'echo $$ > {self.dir}/cgroup.procs && exec "$@"', "sh"] + argv,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, text=True)
        p.ready = p.stdout.readline()
        return p

    def file(self, name):
        return read(os.path.join(self.dir, name))

    def label(self):
        return "/" + self.path


class Run:
    def __init__(self, a):
        self.a = a
        self.results = []
        self.facts = {}
        self.children = []
        self.prometheus = None

    def check(self, name, fn):
        start = time.time()
        try:
            detail = fn()
            ok = True
        except Exception as e:  # a failed check, with why
            detail = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
            ok = False
        took = round(time.time() - start, 1)
        self.results.append({"name": name, "ok": ok, "detail": str(detail), "seconds": took})
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({took} s): {detail}", flush=True)

    def prometheus_started(self):
        """The guest's Prometheus, started at the first check that needs it and kept for
        the others (stopped at the end)."""
        if self.prometheus is None:
            self.prometheus = Prometheus(self.a.rules)
            self.prometheus.wait(60, "Prometheus scraping", lambda: self.prometheus.query('up{job="membloat"} == 1'))
        return self.prometheus

    def repro(self, name):
        return os.path.join(self.a.repro, name)

    def alias(self, name, alias):
        """A reproducer copied under another name: its comm, and so its group."""
        dest = os.path.join(SCRATCH, alias)
        if not os.path.exists(dest):
            shutil.copy(self.repro(name), dest)
            os.chmod(dest, 0o755)
        return dest

    def spawn(self, argv, stdin=False):
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, text=True)
        p.ready = p.stdout.readline()
        self.children.append(p)
        return p

    def end(self):
        if self.prometheus and self.prometheus.proc.poll() is None:
            self.prometheus.stop()
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait()


def kernel_facts(r):
    f = r.facts
    f["release"] = os.uname().release
    mounts = read("/proc/mounts")
    f["cgroup_v1_mounted"] = any(l.split()[2] == "cgroup" for l in mounts.splitlines())
    f["thp_enabled"] = re.search(r"\[(\w+)\]", read("/sys/kernel/mm/transparent_hugepage/enabled")).group(1)
    f["psi"] = os.path.exists("/proc/pressure/memory")
    try:
        read("/proc/pressure/memory")
        f["psi_readable"] = True
    except OSError as e:
        f["psi_readable"] = False
        f["psi_error"] = str(e)
    vm = keyed("/proc/vmstat")
    f["vmstat_thp_scan_exceed"] = "thp_scan_exceed_none_pte" in vm
    probe = os.path.join(CG, "membloat-probe")
    os.makedirs(probe, exist_ok=True)
    with open(os.path.join(CG, "cgroup.subtree_control"), "w") as fh:
        fh.write("+memory")
    f["memory_peak"] = os.path.exists(os.path.join(probe, "memory.peak"))
    f["memory_pressure_file"] = os.path.exists(os.path.join(probe, "memory.pressure"))
    f["oom_group_kill_event"] = "oom_group_kill" in read(os.path.join(probe, "memory.events"))
    os.rmdir(probe)
    f["cpu_psi_full"] = f["psi_readable"] and "full" in read("/proc/pressure/cpu")
    f["mem_total_bytes"] = meminfo("MemTotal")
    f["cpus"] = os.cpu_count()


def check_host_files(r, e):
    """Values as the kernel's own files say, read around one scan."""
    s = e.scans_after(2)
    got = {}
    for name, key in [("membloat_memory_total_bytes", "MemTotal"),
                      ("membloat_swap_total_bytes", "SwapTotal"),
                      ("membloat_memory_commit_limit_bytes", "CommitLimit")]:
        want = meminfo(key)
        have = one(s, name)
        assert have == want, f"{name} {have} != {key} {want}"
        got[name] = have
    # Counters of /proc/vmstat: between the values read before and after.
    before = keyed("/proc/vmstat")
    s = e.scans_after(1)
    after = keyed("/proc/vmstat")
    for name, key in [("membloat_vmstat_oom_kill_total", "oom_kill"),
                      ("membloat_vmstat_thp_fault_alloc_total", "thp_fault_alloc")]:
        have = one(s, name)
        assert have is not None and before[key] <= have + 0 and have <= after[key], \
            f"{name} {have} not within {key} {before[key]}..{after[key]}"
    thp = read("/sys/kernel/mm/transparent_hugepage/enabled")
    mode = re.search(r"\[(\w+)\]", thp).group(1)
    assert pick(s, "membloat_thp_settings_info", enabled=mode) == [1.0], f"THP enabled={mode}"
    mpn = int(read("/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none"))
    assert one(s, "membloat_khugepaged_max_ptes_none") == mpn
    om = int(read("/proc/sys/vm/overcommit_memory"))
    assert one(s, "membloat_vm_overcommit_memory") == om
    return f"MemTotal {got['membloat_memory_total_bytes']:.0f}, vmstat and THP settings as the files say (enabled={mode})"


SHEET_FIELDS = {"kernel_reclaimable_other": "KReclaimable", "page_tables_secondary": "SecPageTables",
                "percpu": "Percpu", "zswap": "Zswap", "balloon": "Balloon", "swap_cache": "SwapCached"}


def sheet_rows(s):
    return {l["row"]: v for n, l, v in s if n == "membloat_host_memory_bytes"}


def check_sheet(r, e):
    """The host's balance sheet: its rows sum to MemTotal at every scan, a row is served
    exactly where this kernel has its field, and a file written to a tmpfs lands in
    the shmem row while unexplained moves by less than the per-CPU drift bound."""
    rows = sheet_rows(e.scans_after(2))
    total = meminfo("MemTotal")
    assert sum(rows.values()) == total, f"rows sum {sum(rows.values())} != MemTotal {total}: {rows}"
    text = read("/proc/meminfo")
    for row, field in SHEET_FIELDS.items():
        has = re.search(rf"^{re.escape(field)}:", text, re.M) is not None
        assert (row in rows) == has, f"{row}: served {row in rows}, kernel has {field}: {has}"
    zi = read("/proc/zoneinfo")
    thresholds = [int(x) for x in re.findall(r"vm stats threshold:\s+(\d+)", zi)]
    bound = 16 * max(thresholds) * len(thresholds) * 4096 + 4 * 63 * 4096
    mnt = "/run/membloat-sheet"
    os.makedirs(mnt, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", mnt], check=True)
    path, size = mnt + "/f", 64 << 20
    seen = []
    for _ in range(3):
        # Two scans after each change: the first may have read meminfo before it.
        write("/proc/sys/vm/stat_refresh", "1")
        before = sheet_rows(e.scans_after(2))
        with open(path, "wb") as f:
            f.write(b"\1" * size)
        write("/proc/sys/vm/stat_refresh", "1")
        after = sheet_rows(e.scans_after(2))
        os.unlink(path)
        grew = after["shmem"] - before["shmem"]
        drift = after["unexplained"] - before["unexplained"]
        seen.append((grew, drift))
        if abs(grew - size) <= 0.02 * size + (2 << 20) and abs(drift) <= bound:
            break
    else:
        subprocess.run(["umount", mnt])
        raise AssertionError(f"shmem (grew, unexplained moved) {seen}, bound {bound}")
    subprocess.run(["umount", mnt], check=True)
    absent = sorted(r for r in SHEET_FIELDS if r not in rows)
    return (f"{len(rows)} rows sum to MemTotal; absent here: {absent or 'none'}; "
            f"tmpfs 64 MiB: shmem +{grew / 2**20:.1f} MiB, unexplained {drift / 2**20:+.1f} MiB (bound {bound / 2**20:.1f})")


def check_cgroup_sheet(r, e):
    """A container's balance sheet on cgroup v2: its rows sum to memory.current; its
    process's anonymous memory is its RssAnon, 16 MiB written to tmpfs and 32 MiB of a
    file read from inside land in shmem and the page cache rows, and unexplained stays
    within the per-CPU bound (docs/balance-sheet.md). Then 300 child cgroups each read 1 MiB
    of a file and are removed: the parent holds ~300 MiB and 300 dying descendants, no live
    child or process holding them; after the parent's reclaim it falls."""
    cpus = os.cpu_count()
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    bound = (2 * cpus * 64 if release >= (5, 13) else 18 * cpus * 32) * 4096
    c = Container("membloat-sheet/ctr")
    p = c.run([r.repro("burst"), "65536"])
    r.children.append(p)
    lab = c.label()

    def rows(s):
        got = {l["row"]: v for n, l, v in s if n == "membloat_cgroup_memory_bytes" and l.get("cgroup") == lab}
        usage = one(s, "membloat_cgroup_memory_usage_bytes", cgroup=lab)
        assert not got or sum(got.values()) == usage, f"rows sum {sum(got.values())} != usage {usage}: {got}"
        return got

    def part(rows, prefix):
        return sum(v for k, v in rows.items() if k.startswith(prefix))

    e.wait(60, "the container's sheet", lambda s: rows(s))
    before = rows(e.scans_after(2))
    rss_anon = next(int(l.split()[1]) * 1024 for l in read(f"/proc/{p.pid}/status").splitlines()
                    if l.startswith("RssAnon:"))
    assert abs(part(before, "anon_") - rss_anon) <= bound, f"anon rows {part(before, 'anon_')} vs RssAnon {rss_anon}: {before}"
    cached = os.path.join(r.a.cache_dir, "cache-32m")
    subprocess.run(["/bin/sh", "-c", f"echo $$ > {c.dir}/cgroup.procs && "
                    "dd if=/dev/zero of=/dev/shm/membloat-sheet bs=1M count=16 status=none && "
                    f"cat {cached} > /dev/null"], check=True)
    after = rows(e.scans_after(2))
    os.unlink("/dev/shm/membloat-sheet")
    shmem = after["shmem"] - before["shmem"]
    cache = part(after, "page_cache_") - part(before, "page_cache_")
    assert abs(shmem - (16 << 20)) <= bound, f"shmem +{shmem}: {after}"
    # Readahead past the file's end reads nothing: the 32 MiB and no more.
    assert abs(cache - (32 << 20)) <= bound, f"page cache +{cache}: {after}"
    assert abs(after["unexplained"]) <= bound, f"unexplained: {after}"
    p.kill()
    p.wait()
    said = (f"container: anon {part(after, 'anon_') / MIB:.1f} MiB (RssAnon {rss_anon / MIB:.1f}), "
            f"shmem +{shmem / MIB:.2f}, page cache +{cache / MIB:.2f}, unexplained "
            f"{after['unexplained'] / MIB:+.2f} MiB (bound {bound / MIB:.2f})")

    parent = Container("membloat-removed")
    write(os.path.join(parent.dir, "cgroup.subtree_control"), "+memory")
    # This process reads each child's MiB from inside it (a process per child is slow
    # under QEMU's TCG), then goes back to the root so that the child can be removed.
    big = os.open(os.path.join(r.a.cache_dir, "cache-300m"), os.O_RDONLY)
    pid = str(os.getpid())
    try:
        for i in range(300):
            child = os.path.join(parent.dir, f"c{i}")
            os.mkdir(child)
            write(os.path.join(child, "cgroup.procs"), pid)
            os.pread(big, 1 << 20, i << 20)
            write(os.path.join(CG, "cgroup.procs"), pid)
            os.rmdir(child)
    finally:
        write(os.path.join(CG, "cgroup.procs"), pid)
        os.close(big)
    lab = parent.label()
    s = e.scans_after(2)
    removed = one(s, "membloat_cgroup_removed_descendants_bytes", cgroup=lab)
    dying = one(s, "membloat_cgroup_dying_descendants", cgroup=lab)
    current = int(parent.file("memory.current"))
    assert abs(removed - (300 << 20)) <= 0.05 * (300 << 20) + bound, f"removed {removed} (memory.current {current})"
    assert dying == 300, f"dying {dying}"
    # The parent's reclaim: memory.high lowered (which reclaims at once, on every kernel
    # here), then raised again.
    write(os.path.join(parent.dir, "memory.high"), "0")
    write(os.path.join(parent.dir, "memory.high"), "max")
    s = e.scans_after(2)
    after_removed = one(s, "membloat_cgroup_removed_descendants_bytes", cgroup=lab)
    after_dying = one(s, "membloat_cgroup_dying_descendants", cgroup=lab)
    after_current = int(parent.file("memory.current"))
    # Once the kernel freed every dying child, the parent is an empty leaf like any other,
    # and not served: then its memory.current says it holds next to nothing.
    if after_removed is None:
        assert after_dying is None and after_current <= 0.1 * removed, f"after reclaim: no series, memory.current {after_current}"
    else:
        assert after_removed <= 0.1 * removed, f"after reclaim {after_removed} of {removed}"
    os.rmdir(parent.dir)
    return (f"{said}; 300 removed children: {removed / MIB:.1f} MiB at the parent "
            f"(memory.current {current / MIB:.1f}), {dying:.0f} dying; after its reclaim "
            f"{after_removed} served, {after_dying} dying, memory.current {after_current / MIB:.1f} MiB")


def check_collectors(r, e, mode):
    s = e.scans_after(2)
    ok = {l["collector"]: v for n, l, v in s if n == "membloat_scrape_collector_success"}
    failing = [c for c, v in ok.items() if v != 1.0]
    assert len(ok) >= 9 and not failing, f"collectors {ok}"
    bad = [(l, v) for n, l, v in s if n == "membloat_scan_errors_total"
           and l.get("reason") in ("malformed", "io") and v > 0]
    assert not bad, f"errors counted: {bad}"
    if mode == "psi0":
        assert not [n for n, _, _ in s if n.startswith("membloat_pressure_memory")], \
            "PSI series with psi=0"
        assert not [n for n, _, _ in s if n.startswith("membloat_cgroup_pressure_memory")], \
            "cgroup PSI series with psi=0"
    return f"{len(ok)} collectors succeed: {sorted(ok)}; nothing malformed"


def check_absent_not_error(r, e):
    """What this kernel lacks is an absent series; what it has is served."""
    f = r.facts
    c = Container("membloat.slice/absent.service")
    p = c.run([r.alias("burst", "vmabsent"), "8192"])
    r.children.append(p)
    s = e.scans_after(2)
    lab = c.label()
    said = []
    for name, has in [("membloat_cgroup_memory_peak_bytes", f["memory_peak"]),
                      ("membloat_cgroup_oom_group_kills_total", f["oom_group_kill_event"]),
                      ("membloat_cgroup_pressure_memory_waiting_seconds_total", f["memory_pressure_file"] and f["psi_readable"])]:
        served = one(s, name, cgroup=lab) is not None
        assert served == has, f"{name}: served {served}, kernel has it {has}"
        said.append(f"{name.removeprefix('membloat_cgroup_')}={'yes' if served else 'absent'}")
    served = bool(pick(s, "membloat_vmstat_thp_scan_exceed_none_pte_total"))
    assert served == f["vmstat_thp_scan_exceed"], "thp_scan_exceed"
    said.append(f"thp_scan_exceed={'yes' if served else 'absent'}")
    served = one(s, "membloat_pressure_memory_waiting_seconds_total") is not None
    assert served == f["psi_readable"], f"host PSI served {served}"
    said.append(f"host_psi={'yes' if served else 'absent'}")
    if f["memory_peak"]:
        have = one(s, "membloat_cgroup_memory_peak_bytes", cgroup=lab)
        want = int(c.file("memory.peak"))
        assert have == want, f"peak {have} != {want}"
    p.kill()
    p.wait()
    return ", ".join(said)


def check_watch(r, e):
    """Every process is watched for its end with a pidfd, and a quiet one rests between
    reads. New pids are asked with pidfd_open, which this kernel must answer for a
    thread's id with ENOENT (EINVAL before 6.9), not a process; and a process that ends
    while the others rest is gone by the next scan."""
    before = e.samples()
    listed = one(before, "membloat_scan_proc_listings_total")
    p = r.spawn([r.alias("arenas", "vmthreads")])
    assert p.ready.startswith("ready"), p.ready
    series = dict(pid=str(p.pid), comm="vmthreads")
    e.wait(30, "the threaded program", lambda s: one(s, "membloat_process_resident_bytes", **series))
    s = e.scans_after(5)
    named = len(pick(s, "membloat_process_resident_bytes", comm="vmthreads"))
    assert named == 1, f"{named} processes named vmthreads: a thread's id read as a process"
    watched = one(s, "membloat_scan_watched_processes") or 0
    assert watched >= 1, f"{watched} processes watched"
    e.wait(60, "a scan that rests", lambda s: (one(s, "membloat_scan_rested_processes") or 0) >= 1)
    at = one(e.samples(), "membloat_scans_total")
    p.kill()
    p.wait()
    gone = e.wait(30, "the ended program gone", lambda s: one(s, "membloat_process_resident_bytes", **series) is None and s)
    after = one(gone, "membloat_scans_total") - at
    assert after <= 2, f"an ended process gone {after} scans later"
    relisted = one(gone, "membloat_scan_proc_listings_total") - listed
    return (f"1 process for 17 tasks, {watched:.0f} watched, "
            f"{one(gone, 'membloat_scan_rested_processes'):.0f} resting when the ended one went "
            f"{after:.0f} scans after, {relisted:.0f} listings of /proc meanwhile")


def maps_and_exe(pid):
    """The dev:ino /proc/PID/maps gives the executable's first mapping, and the ones a
    stat of /proc/PID/exe gives."""
    exe = os.readlink(f"/proc/{pid}/exe")
    st = os.stat(f"/proc/{pid}/exe")
    mapped = next((l.split()[3:5] for l in read(f"/proc/{pid}/maps").splitlines()
                   if l.rstrip().endswith(" " + exe)), None)
    return (":".join(mapped) if mapped else "none",
            f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")


def check_overlay(r, e):
    """Programs run from an overlayfs root, as a container's image is: a Go program, a
    C program that links jemalloc in, CPython with its symbols and a Rust program on
    mimalloc 2.3.2 are each measured by their reader, as from any other file system. /proc/PID/maps names the executable by
    the file overlayfs maps (before 6.8 its lower layer's device, not the overlay's)."""
    base = os.path.join(SCRATCH, "ovl")
    lower, upper, work, root = (os.path.join(base, d) for d in ("lower", "upper", "work", "root"))
    for d in (lower, upper, work, root):
        os.makedirs(d, exist_ok=True)
    shutil.copy(r.repro("goheap"), os.path.join(lower, "vmgo"))
    shutil.copy(r.repro("jefree"), os.path.join(lower, "vmje"))
    shutil.copy(r.a.mimalloc, os.path.join(lower, "vmmi"))
    # CPython as a file named python3 beside a lib/ that is its tree's, so that it finds
    # its standard library from where it lies (scripts/pythons.sh).
    os.makedirs(os.path.join(lower, "usr/bin"), exist_ok=True)
    shutil.copy(r.a.python, os.path.join(lower, "usr/bin/python3"))
    os.symlink(os.path.realpath(os.path.join(os.path.dirname(r.a.python), "../lib")),
               os.path.join(lower, "usr/lib"))
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={upper},workdir={work}", root], check=True)
    try:
        script = ("import time\nkept = [str(i) * 8 for i in range(400000)]\ndel kept[::2]\n"
                  "print('ready', flush=True)\ntime.sleep(600)\n")
        programs = [
            ("go", [os.path.join(root, "vmgo")], "membloat_process_go_heap_in_use_bytes",
             "membloat_process_go_unmeasured"),
            ("jemalloc", [os.path.join(root, "vmje"), "1", "1", "64", "10"],
             "membloat_process_jemalloc_active_bytes", "membloat_process_jemalloc_unmeasured"),
            ("python", [os.path.join(root, "usr/bin/python3"), "-c", script],
             "membloat_process_python_arenas", "membloat_process_python_unmeasured"),
            ("mimalloc", [os.path.join(root, "vmmi"), "1", "2", "64", "10"],
             "membloat_process_mimalloc_held_bytes", "membloat_process_mimalloc_unmeasured"),
        ]
        said, wrong = [], []
        for name, argv, measured, unmeasured in programs:
            # jefree and vmmi end at the end of their input: kept open.
            p = r.spawn(argv, stdin=True)
            assert p.ready.startswith("ready"), f"{name}: {p.ready!r}"
            maps, exe = maps_and_exe(p.pid)

            # What the reader made of it: measured, or its reason; read again while the
            # reason is one that passes (moving, budget), up to 60 s. Any other reason is
            # the answer once it held for 5 s: a newcomer read as it started is read again
            # (the deep tier's retry of an unreadable newcomer), and that read decides.
            deadline, got, since, history = time.time() + 60, None, None, []
            while time.time() < deadline:
                s = e.samples()
                if one(s, measured, pid=str(p.pid)) is not None:
                    got = "measured"
                    break
                reasons = [l["reason"] for n, l, v in s
                           if n == unmeasured and l.get("pid") == str(p.pid) and v == 1]
                info = [l.get("allocator", "") + "/" + l.get("runtime", "") for n, l, v in s
                        if n == "membloat_process_allocator_info" and l.get("pid") == str(p.pid)]
                now = f"{'|'.join(reasons) or 'no reading'} as {'|'.join(info) or 'unnamed'}"
                if now != got:
                    got, since = now, time.time()
                    history.append(now)
                if reasons and reasons[0] not in ("moving", "budget") and time.time() - since >= 5:
                    break
                time.sleep(0.5)
            # What it said before, if anything but waiting: a reading that changed.
            before = [h for h in history if h != got and not h.startswith("no reading")]
            said.append(f"{name} {got}{' after ' + ', '.join(before) if before else ''} (maps {maps}, exe {exe})")
            if got != "measured":
                # Its mappings as the reader was left with them, to tell why.
                with open(f"/proc/{p.pid}/maps") as fh:
                    wrong.append(f"{name}: {got}; its maps:\n{fh.read()}")
            p.kill()
            p.wait()
        assert not wrong, "; ".join(wrong) + " | " + "; ".join(said)
        return "; ".join(said)
    finally:
        subprocess.run(["umount", root])


def check_regrowth(r, e):
    """khugepaged regrowth under THP always: memory released with MADV_DONTNEED grows
    back in huge pages while the program sleeps."""
    base = "/sys/kernel/mm/transparent_hugepage/khugepaged/"

    def khugepaged(settings):
        for k, v in settings:
            with open(base + k, "w") as fh:
                fh.write(v)
    # Slow until the exporter has seen the program idle at its trough, then fast.
    khugepaged([("max_ptes_none", "511"), ("pages_to_scan", "8"), ("scan_sleep_millisecs", "60000")])
    p = r.spawn([r.alias("regrowth", "vmregrowth")])
    series = dict(pid=str(p.pid), comm="vmregrowth")
    e.wait(60, "the trough, idle", lambda s: (one(s, "membloat_process_resident_anon_bytes", **series) or 1e18) < 64 * MIB and one(s, "membloat_process_idle", **series) == 1.0)
    khugepaged([("pages_to_scan", "65536"), ("scan_sleep_millisecs", "100")])
    try:
        e.wait(120, "regrown bytes", lambda s: (one(s, "membloat_process_regrown_since_trough_bytes", **series) or 0) >= 0.9 * 256 * MIB)
    except AssertionError as ex:
        # What the kernel did and what the exporter saw, for whoever reads the failure.
        rollup = {l.split(":")[0]: " ".join(l.split()[1:]) for l in
                  read(f"/proc/{p.pid}/smaps_rollup").splitlines()[1:] if ":" in l}
        s = e.samples()
        raise AssertionError(
            f"{ex}: the program's AnonHugePages {rollup.get('AnonHugePages')}, Rss "
            f"{rollup.get('Rss')}; served regrown "
            f"{one(s, 'membloat_process_regrown_since_trough_bytes', **series)}, anon huge "
            f"{one(s, 'membloat_process_anon_huge_bytes', **series)}, idle "
            f"{one(s, 'membloat_process_idle', **series)}; vmstat thp_collapse_alloc "
            f"{keyed('/proc/vmstat').get('thp_collapse_alloc')}, "
            f"thp_collapse_alloc_failed {keyed('/proc/vmstat').get('thp_collapse_alloc_failed')}") from ex
    # khugepaged goes on over the last ranges; what it has regrown a few scans later.
    s = e.scans_after(3)
    got = one(s, "membloat_process_regrown_since_trough_bytes", **series)
    risk = one(s, "membloat_thp_regrowth_risk")
    assert abs(got - 256 * MIB) <= 25.6 * MIB, f"regrown {got}"
    assert risk == 1.0, f"regrowth risk {risk}"
    p.kill()
    p.wait()
    return f"{got / MIB:.1f} MiB regrown while idle (256 MiB released)"


def check_hoarding(r, e, seed, programs):
    """Random glibc programs (tests/reproducers/mallocfuzz.c), three at a time so the
    largest fit the VM: each one's measured free heap is glibc's own fordblks, exactly."""
    rng = random.Random(seed)
    seeds = [rng.randrange(1 << 31) for _ in range(programs)]
    wrong, shown = [], []
    for at in range(0, programs, 3):
        runs = []
        for i in range(at, min(at + 3, programs)):
            name = f"vmfuzz{i:02d}"
            p = r.spawn([r.alias("mallocfuzz", name), str(seeds[i])])
            words = p.ready.split()
            assert words and words[0] == "ready", f"{name} seed {seeds[i]}: {p.ready!r}"
            runs.append((name, seeds[i], int(words[1]), p))

        # A newcomer's first walks may land while it still allocates (TCG is slow): right
        # for the heap they read, and read again each scan until its memory holds still
        # (src/collect/deep.rs). So: every program shows glibc's own figure within a
        # minute of its "ready", and 45 s more per GiB of the largest free heap (6.12
        # under TCG once took 58.9 s for 1.5 GiB), and once it has, never another.
        limit = 60 + 45 * max(f for _, _, f, _ in runs) / (1 << 30)
        ready_at = time.time()
        right = {}
        while time.time() - ready_at < limit and len(right) < len(runs):
            s = e.samples()
            for name, sd, fordblks, p in runs:
                have = one(s, "membloat_group_heap_free_bytes", group=name)
                if name in right and have != fordblks:
                    wrong.append(f"{name} (seed {sd}): {have} shown after {fordblks}")
                elif have == fordblks and name not in right:
                    right[name] = time.time() - ready_at
            time.sleep(0.5)
        s = e.scans_after(2)
        for name, sd, fordblks, p in runs:
            have = one(s, "membloat_group_heap_free_bytes", group=name)
            if name not in right:
                wrong.append(f"{name} (seed {sd}): {have} shown, never glibc's {fordblks} within {limit:.0f} s")
            elif have != fordblks:
                wrong.append(f"{name} (seed {sd}): {have} shown after {fordblks}")
            shown.append(f"{sd}:{fordblks}@{right.get(name, -1):.1f}s")
            p.kill()
            p.wait()
    assert not wrong, "; ".join(wrong)
    return f"{programs} programs (seed {seed}) measured exactly, seed:fordblks@shown after ready " + " ".join(shown)


def dump_kmsg(path):
    """The kernel's log records as /dev/kmsg gives them, for the parser's fixtures."""
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    with open(path, "w") as out:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError:
                continue
            out.write(rec.decode(errors="replace"))
    os.close(fd)


def check_headroom(r, e):
    """Container headroom at the kubelet's paths of both cgroup drivers: pod and container
    named, limit, usage and working set as the files say, measured hoarding."""
    uid = "0d5b3b24-5f6a-4c1e-9a0b-3c2d1e0f9a8b"
    cid = "ab" * 32
    said = []
    for driver, path in [
        ("systemd", f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/cri-containerd-{cid}.scope"),
        ("cgroupfs", f"kubepods/burstable/pod{uid}/{cid}"),
    ]:
        c = Container(path, {"memory.max": 256 * MIB})
        p = c.run([r.alias("heap", f"vmhead{driver[:3]}"), "main", "48", "32"])
        r.children.append(p)
        fordblks = int(p.ready.split()[1])
        lab = c.label()
        s = e.wait(120, f"{driver}: hoarding measured", lambda smp: (one(smp, "membloat_cgroup_hoarded_bytes", cgroup=lab) or 0) > 0 and smp)
        # memory.current moves by a huge page now and then under THP "always" (seen on
        # 6.12: a scan read 2 MiB more than the file said just after it, twice): the
        # scan's figure is compared with every value the file had while it could read it.
        s, cur = during(lambda: int(c.file("memory.current")), lambda: e.scans_after(2))
        info = pick(s, "membloat_cgroup_info", cgroup=lab, pod_uid=uid, container_id=cid, qos_class="burstable")
        assert info == [1.0], f"{driver}: no cgroup_info naming the pod and container"
        assert one(s, "membloat_cgroup_memory_limit_bytes", cgroup=lab) == 256 * MIB
        usage = one(s, "membloat_cgroup_memory_usage_bytes", cgroup=lab)
        assert min(cur) * 0.98 <= usage <= max(cur) * 1.02, f"usage {usage} vs memory.current {min(cur)}..{max(cur)} ({len(cur)} reads)"
        inactive = keyed(os.path.join(c.dir, "memory.stat"))["inactive_file"]
        ws = one(s, "membloat_cgroup_working_set_bytes", cgroup=lab)
        assert abs(ws - (usage - inactive)) <= 0.02 * usage, f"working set {ws}"
        # The process's free heap is glibc's own count; the container's hoarded bytes are
        # its one process's measured hoarding (the free pages trim would return).
        comm = f"vmhead{driver[:3]}"
        free = one(s, "membloat_group_heap_free_bytes", group=comm)
        assert stdio_close(free, fordblks), f"heap free {free} vs fordblks {fordblks}"
        hoarded = one(s, "membloat_cgroup_hoarded_bytes", cgroup=lab)
        own = one(s, "membloat_group_hoarded_bytes", group=comm, method="measured")
        assert hoarded == own and 0.9 * fordblks <= hoarded <= fordblks, f"hoarded {hoarded}, its process {own}, fordblks {fordblks}"
        said.append(f"{driver}: usage {usage / MIB:.1f} MiB of 256, hoarded {hoarded / MIB:.1f} MiB (fordblks {fordblks / MIB:.1f})")
        p.kill()
        p.wait()
    return "; ".join(said)


def during(read, action):
    """action()'s result, and every value read() gave while it ran: once before, every
    20 ms meanwhile (in a thread), once after."""
    seen, done = [read()], threading.Event()

    def poll():
        while not done.wait(0.02):
            seen.append(read())

    t = threading.Thread(target=poll)
    t.start()
    try:
        result = action()
    finally:
        done.set()
        t.join()
    seen.append(read())
    return result, seen


def stdio_close(free, fordblks):
    """heap.c asks glibc, then prints with stdio, whose first printf mallocs stdout's
    buffer (a page and a chunk header on a pipe): the heap then has that much less free
    than the fordblks it printed, never more."""
    return free is not None and fordblks - 4096 - 32 <= free <= fordblks


def kills_logged():
    """The kernel's own "Killed process" lines so far, from its log."""
    out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if "Killed process" in l]


def check_oom_kill(r, e):
    """A real OOM kill at memory.max: named with its container and what was measured of
    it before."""
    path = "kubepods.slice/kubepods-pod1111.slice/cri-containerd-" + "cd" * 32 + ".scope"
    c = Container(path, {"memory.max": 128 * MIB})
    victim = c.run([r.alias("heap", "vmvictim"), "main", "48", "32"])
    fordblks = int(victim.ready.split()[1])
    lab = c.label()
    e.wait(120, "the victim measured", lambda smp: (one(smp, "membloat_cgroup_hoarded_bytes", cgroup=lab) or 0) > 0)
    s = e.scans_after(2)
    free = one(s, "membloat_group_heap_free_bytes", group="vmvictim")
    assert stdio_close(free, fordblks), f"heap free {free} vs fordblks {fordblks}"
    measured = one(s, "membloat_group_hoarded_bytes", group="vmvictim", method="measured")
    before = len(kills_logged())
    pusher = c.run([r.alias("burst", "vmpusher"), "4"], stdin=True)
    r.children.append(pusher)
    # The pusher is never the kernel's pick: 5.10 once chose it too, 4 ms after the
    # victim, while the victim's memory was still charged. Unkillable, it waits in its
    # charge until the victim's memory is uncharged, and the one kill is the victim's.
    with open(f"/proc/{pusher.pid}/oom_score_adj", "w") as f:
        f.write("-1000")
    pusher.stdin.write("70\n")
    pusher.stdin.flush()
    victim.wait(timeout=60)
    logged = kills_logged()[before:]
    assert logged and "vmvictim" in logged[-1], f"kernel log: {logged}"
    s = e.wait(60, "the kill recorded", lambda smp: pick(smp, "membloat_oom_last_victim_info", comm="vmvictim") and smp)
    info = [l for n, l, v in s if n == "membloat_oom_last_victim_info"][0]
    assert info["constraint"] == "memory_cgroup", info
    assert info["memory_cgroup"] == lab, info
    assert info["pid"] == str(victim.pid), info
    hoarded = one(s, "membloat_oom_last_victim_measured_bytes", kind="hoarded")
    assert hoarded == measured and hoarded > 0, f"hoarded at the kill {hoarded}, measured before {measured}"
    # The container's counters, fresh, as its memory.events says (nothing moves now).
    s = e.scans_after(2)
    events = keyed(os.path.join(c.dir, "memory.events"))
    for name, key in [("membloat_cgroup_oom_kills_total", "oom_kill"),
                      ("membloat_cgroup_limit_ooms_total", "oom"),
                      ("membloat_cgroup_memory_max_events_total", "max")]:
        have = one(s, name, cgroup=lab)
        assert have == events[key] and have >= 1, f"{name} {have}, memory.events {key} {events[key]}"
    assert events["oom_kill"] == 1, events
    pusher.kill()
    pusher.wait()
    return f"vmvictim (pid {victim.pid}) killed at {lab}'s memory.max, {hoarded / MIB:.1f} MiB measured hoarded before (fordblks {fordblks / MIB:.1f}); kernel: {logged[-1].split(']', 1)[-1].strip()[:120]}"


def check_group_kill(r, e):
    """memory.oom.group=1: every process of the container killed, each counted, the
    latest named, the group kill told apart where the kernel counts it."""
    path = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2222.slice/cri-containerd-" + "ef" * 32 + ".scope"
    c = Container(path, {"memory.max": 96 * MIB, "memory.oom.group": 1})
    lab = c.label()
    members = [c.run([r.alias("burst", f"vmmember{i}"), "8192"]) for i in range(4)]
    prom = r.prometheus_started()
    e.scans_after(2)
    s0 = e.samples()
    kills_before = sum(pick(s0, "membloat_oom_kills_total", constraint="memory_cgroup"))
    logged_before = len(kills_logged())
    pusher = c.run([r.alias("burst", "vmgrouphog"), "4"], stdin=True)
    pusher.stdin.write("80\n")
    pusher.stdin.flush()
    for p in members + [pusher]:
        p.wait(timeout=60)
    logged = kills_logged()[logged_before:]
    # The kernel logs the victim it chose, then every member of the group, that victim
    # again among them: five processes, six lines.
    victims = {re.search(r"Killed process (\d+)", l).group(1) for l in logged}
    assert len(victims) == 5, f"kernel logged {len(victims)} victims: {logged}"
    events = keyed(os.path.join(c.dir, "memory.events"))
    s = e.wait(60, "five kills counted", lambda smp: sum(pick(smp, "membloat_oom_kills_total", constraint="memory_cgroup")) >= kills_before + 5 and smp)
    s = e.scans_after(2)
    counted = sum(pick(s, "membloat_oom_kills_total", constraint="memory_cgroup")) - kills_before
    assert counted == 5, f"{counted} kills counted for 5 victims ({len(logged)} lines logged)"
    assert one(s, "membloat_cgroup_oom_kills_total", cgroup=lab) == events["oom_kill"], events
    info = [l for n, l, v in s if n == "membloat_oom_last_victim_info"]
    assert len(info) == 1 and info[0]["memory_cgroup"] == lab, info
    # The latest victim is the last one first told: the repeat is not a new kill.
    told = []
    for line in logged:
        pid, comm = re.search(r"Killed process (\d+) \(([^)]+)\)", line).groups()
        if pid not in [p for p, _ in told]:
            told.append((pid, comm))
    last = told[-1][1]
    assert info[0]["comm"] == last, f"latest victim {info[0]['comm']}, kernel's last {last}"
    # One OOM in the container: the fallback alert (without the kernel log) counts it
    # once, as the kernel does.
    assert one(s, "membloat_cgroup_limit_ooms_total", cgroup=lab) == events["oom"] == 1, events
    # The project's alert, on a real Prometheus: one alert for the container, naming
    # the latest victim, never one per process.
    alert = 'ALERTS{alertname="MembloatContainerOOMKill",alertstate="firing"}'
    prom.wait(60, "the alert firing", lambda: prom.query(alert))
    time.sleep(5)
    # (The earlier check's kill, in another container, has its own.)
    fired = [f for f in prom.query(f"count_over_time({alert}[5m])") if f["metric"].get("cgroup") == lab]
    assert len(fired) == 1, f"{len(fired)} alerts: {[f['metric'] for f in fired]}"
    labels = fired[0]["metric"]
    assert labels.get("cgroup") == lab and labels.get("comm") == last, labels
    group = one(s, "membloat_cgroup_oom_group_kills_total", cgroup=lab)
    if r.facts["oom_group_kill_event"]:
        assert group == events["oom_group_kill"] == 1, f"group kills {group}, {events}"
    else:
        assert group is None, "oom_group_kill served on a kernel without it"
    return f"5 processes killed by one group kill ({len(logged)} kernel lines), 5 counted, memory.events oom_kill {events['oom_kill']} oom {events['oom']}, latest {last}, oom_group_kill {group}, one MembloatContainerOOMKill alert"


def check_pressure(r, e):
    """A container over its memory.high is throttled: its own memory stall time, high
    events and peak as its files say."""
    path = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3333.slice/cri-containerd-" + "12" * 32 + ".scope"
    c = Container(path, {"memory.high": 24 * MIB})
    lab = c.label()
    p = c.run([r.alias("burst", "vmthrottled"), "4"], stdin=True)
    r.children.append(p)
    # 48 MiB against a 24 MiB memory.high: it grows on, throttled, while the counters
    # move; each served value lies between the file's values read around its scan.
    p.stdin.write("48\n")
    p.stdin.flush()
    e.wait(60, "stall time served", lambda smp: (one(smp, "membloat_cgroup_pressure_memory_waiting_seconds_total", cgroup=lab) or 0) > 0.2)
    before_peak = int(c.file("memory.peak")) if r.facts["memory_peak"] else None
    before_some = psi_total(os.path.join(c.dir, "memory.pressure"), "some")
    before = keyed(os.path.join(c.dir, "memory.events"))
    s = e.scans_after(2)
    after_some = psi_total(os.path.join(c.dir, "memory.pressure"), "some")
    after = keyed(os.path.join(c.dir, "memory.events"))
    some = one(s, "membloat_cgroup_pressure_memory_waiting_seconds_total", cgroup=lab)
    full = one(s, "membloat_cgroup_pressure_memory_stalled_seconds_total", cgroup=lab)
    assert before_some <= some <= after_some, f"some {some} not in {before_some}..{after_some}"
    assert full is not None and full <= some
    high = one(s, "membloat_cgroup_memory_high_events_total", cgroup=lab)
    assert before["high"] <= high <= after["high"] and high > 0, f"high {high} vs {before['high']}..{after['high']}"
    said = f"{some:.3f} s some, {full:.3f} s full stalled, {high:.0f} high events"
    # The dashboard's panels that only cgroup v2 feeds, as Grafana asks them: the
    # container is among their series, stalled some of the time.
    prom = r.prometheus_started()
    for panel in json.load(open(os.path.join(OUT, "panels.json"))):
        got = prom.wait(60, panel["title"], lambda: [x for x in prom.query(panel["query"]) if x["metric"].get("cgroup") == lab and float(x["value"][1]) > 0])
        said += f"; panel {panel['title']!r}: {float(got[0]['value'][1]):.2f}"
    if r.facts["memory_peak"]:
        peak = one(s, "membloat_cgroup_memory_peak_bytes", cgroup=lab)
        after_peak = int(c.file("memory.peak"))
        assert before_peak <= peak <= after_peak and peak >= 24 * MIB, f"peak {peak} vs {before_peak}..{after_peak}"
        said += f", peak {peak / MIB:.1f} MiB"
    p.kill()
    p.wait()
    return said


# The checks every run makes, even one told to make only some (--only).
FIRST = ("kernel", "cgroup_v2_only", "collectors", "absent_not_error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--repro", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", choices=["full", "psi0"], required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--programs", type=int, default=6)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--mimalloc", required=True)
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--only", default="", help="CHECK,...: only those of the full mode")
    a = ap.parse_args()
    global OUT
    OUT = a.out
    r = Run(a)
    if a.only:
        only = set(a.only.split(","))
        check = r.check
        r.check = lambda name, fn: check(name, fn) if name in only or name in FIRST else None
    start = time.time()
    r.check("kernel", lambda: kernel_facts(r) or r.facts)
    r.check("cgroup_v2_only", lambda: (not r.facts["cgroup_v1_mounted"] and os.path.exists(CG + "/cgroup.controllers")) or (_ for _ in ()).throw(AssertionError("a v1 hierarchy is mounted")))
    e = None
    try:
        e = Exporter(a.exporter, ["--scan.interval=1s", "--collector.processes.deep-min-size=0",
                                  "--collector.processes.top-k=1000"])
        r.facts["exporter_started_s"] = round(time.time() - start, 1)
        r.check("collectors", lambda: check_collectors(r, e, a.mode))
        r.check("absent_not_error", lambda: check_absent_not_error(r, e))
        if a.mode == "full":
            r.check("kernel_files", lambda: check_host_files(r, e))
            r.check("sheet", lambda: check_sheet(r, e))
            r.check("cgroup_sheet", lambda: check_cgroup_sheet(r, e))
            r.check("watch", lambda: check_watch(r, e))
            r.check("overlay", lambda: check_overlay(r, e))
            r.check("hoarding", lambda: check_hoarding(r, e, a.seed, a.programs))
            r.check("headroom", lambda: check_headroom(r, e))
            r.check("pressure", lambda: check_pressure(r, e))
            r.check("oom_kill", lambda: check_oom_kill(r, e))
            r.check("group_kill", lambda: check_group_kill(r, e))
            r.check("regrowth", lambda: check_regrowth(r, e))
            r.check("collectors_after", lambda: check_collectors(r, e, a.mode))
    except Exception as ex:
        r.check("exporter", lambda: (_ for _ in ()).throw(ex))
    finally:
        r.end()
        if e:
            e.stop()
        dump_kmsg(os.path.join(a.out, "kmsg.txt"))
    r.facts["guest_seconds"] = round(time.time() - start, 1)
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump({"facts": r.facts, "checks": r.results}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
