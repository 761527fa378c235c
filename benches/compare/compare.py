#!/usr/bin/env python3
"""Side by side: CPU per scan, memory and scrape latency of membloat_exporter, a minimal C
reader of the same files (the floor), Debian's prometheus-process-exporter and
prometheus-node-exporter, on one population of idle processes in a private PID namespace.

    python3 benches/compare/compare.py [--procs 1000,5000] [--json out.json]

Needs root (unshare), gcc, cargo, and the Debian packages prometheus-process-exporter and
prometheus-node-exporter. Every process it starts lives in the private PID namespace and
is killed by pid; when the namespace's first process exits the kernel ends the rest.

CPU is read from /proc/PID/task/*/schedstat (nanoseconds, every thread). Every figure is
reported as min / median / max over windows, and ratios use medians from the same run.
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PORT_OURS = 19293
PORT_PE = 19256
PORT_NE = 19100
SMALL_KIB = 2048  # ~3 MiB RSS with the binary's own pages
LARGE_KIB = 1 << 20  # 1 GiB each, in 4 KiB pages

PER_PROCESS = """process_names:
  - name: "{{.Comm}}-{{.PID}}"
    cmdline: ['.+']
"""
GROUPED = """process_names:
  - name: "{{.Comm}}"
    cmdline: ['.+']
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build(work, exporter):
    """The exporter in release mode (unless given), and the two C programs."""
    if not exporter:
        subprocess.run(
            ["cargo", "build", "--release", "--quiet", "--bin", "membloat_exporter"],
            cwd=ROOT,
            check=True,
        )
        exporter = os.path.join(ROOT, "target", "release", "membloat_exporter")
    for name in ("floor", "idle"):
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-o", os.path.join(work, name), os.path.join(HERE, f"{name}.c")],
            check=True,
        )
    return exporter


def cpu_ns(pid):
    """CPU time of every live thread of pid, in nanoseconds."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def unreclaimable_kib():
    """The kernel's unreclaimable slab (/proc/meminfo SUnreclaim): what a reader's kept
    descriptors hold (a page of read buffer each) is released here when it stops."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("SUnreclaim:"):
                return int(line.split()[1])
    return 0


def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


class Population:
    """COUNT idle processes of KIB each, children of one parent that this kills."""

    def __init__(self, idle, count, kib):
        self.proc = subprocess.Popen([idle, str(count), str(kib)], stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"population of {count} did not start")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class GoPrograms:
    """COUNT random Go programs (tests/reproducers/gofree.go), each holding freed heap."""

    def __init__(self, work, count):
        exe = os.path.join(work, "gofree")
        if not os.path.exists(exe):
            src = os.path.join(ROOT, "tests", "reproducers", "gofree.go")
            env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod")
            subprocess.run(["go", "build", "-o", exe, src], check=True, env=env)
        self.procs = []
        for i in range(count):
            p = subprocess.Popen([exe, str(1000 + i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if not p.stdout.readline().startswith("ready"):
                raise RuntimeError("a Go program did not start")
            self.procs.append(p)

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def reap():
    """Children of a killed population are reparented to us (pid 1 of the namespace)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_port(port, proc, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            # process-exporter takes seconds to answer its first scrape of 5,000 processes.
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/metrics")
            c.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answered on port {port}")


def scrape(port, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        raise RuntimeError(f"scrape of {port}: {r.status}")
    return body.decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


class Daemon:
    def __init__(self, args, port, **popen):
        # A file, not a pipe nobody reads: a reader that logs much (process-exporter at
        # 5,000 processes) would block on a full pipe and never answer.
        self.log = tempfile.NamedTemporaryFile(prefix="compare-reader-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log, **popen)
        self.port = port
        wait_port(port, self.proc)

    def stop(self):
        if self.proc.poll() is not None:
            log(f"{self.proc.args[0]} had exited with {self.proc.returncode}; its log: {self.log.name}")
        else:
            os.unlink(self.log.name)
        self.proc.kill()
        self.proc.wait()


def ours(exe, interval, extra):
    return Daemon(
        [exe, f"--web.listen-address=127.0.0.1:{PORT_OURS}", f"--scan.interval={interval}s", *extra],
        PORT_OURS,
    )


class Floor:
    """The C floor reader, run for a couple of scans beside each window of another reader,
    so every ratio compares two measurements taken a moment apart on this noisy machine."""

    def __init__(self, work):
        self.exe = os.path.join(work, "floor")
        self.full, self.no_rollup = [], []
        self.window()  # warms the dentry cache

    def scans(self, extra, n):
        out = subprocess.run(
            [self.exe, "/proc", "/sys", str(n), *extra], capture_output=True, text=True, check=True
        ).stdout.split("\n")
        return [int(v) / 1e6 for v in out if v.isdigit()]

    def window(self):
        """Mean CPU ms per scan over two scans, remembered for the floor rows."""
        full = statistics.mean(self.scans([], 2))
        self.full.append(full)
        self.no_rollup.append(statistics.mean(self.scans(["--no-rollup"], 2)))
        return full


def per_scan(daemon, interval, windows, floor):
    """CPU of each scan of our daemon, sampled in the idle gaps just after scans; a floor
    window runs in each gap, so every scan is bracketed by a floor window on each side.
    Returns (ms of the scan, mean of the two floor windows) pairs, and the share of the
    daemon's CPU its deep tier took."""
    def after_scan():
        t = scrape(daemon.port)
        start = metric(t, "membloat_last_scan_timestamp_seconds")
        took = metric(t, "membloat_scan_duration_seconds")
        now = time.time()
        k = int((now - start) / interval)
        target = start + k * interval + took + 0.05
        if target < now:
            target += interval
        time.sleep(max(0.0, target - now))
        cpu = cpu_ns(daemon.proc.pid)
        t = scrape(daemon.port)
        deep = metric(t, "membloat_deep_cpu_seconds_total") * 1e9
        return cpu, metric(t, "membloat_scans_total"), deep

    time.sleep(2 * interval)
    out = []
    cpu0, scans0, deep0 = after_scan()
    first_cpu, first_deep = cpu0, deep0
    f0 = floor.window()
    while len(out) < windows:
        cpu1, scans1, deep1 = after_scan()
        f1 = floor.window()
        if scans1 > scans0:
            out.append(((cpu1 - cpu0) / (scans1 - scans0) / 1e6, (f0 + f1) / 2))
        cpu0, scans0, f0 = cpu1, scans1, f1
    return out, (deep1 - first_deep) / max(1, cpu1 - first_cpu)


def per_scrape(daemon, windows, scrapes_per_window, pause, floor=None):
    """CPU per scrape of an exporter that reads /proc when scraped."""
    out = []
    for _ in range(windows):
        cpu0 = cpu_ns(daemon.proc.pid)
        for _ in range(scrapes_per_window):
            scrape(daemon.port)
            time.sleep(pause)
        ms = (cpu_ns(daemon.proc.pid) - cpu0) / scrapes_per_window / 1e6
        out.append((ms, floor.window()) if floor else ms)
    return out


def paired(windows):
    """Absolute figures and the ratio to the floor window measured beside each."""
    ms = [m for m, _ in windows]
    ratio = [m / f for m, f in windows]
    return {**spread(ms), "ratio": spread(ratio)}


def latency(port, threads, seconds):
    """Four (or N) scrapers in a loop on kept-alive connections: latency of each scrape."""
    times, stop = [], time.time() + seconds
    lock = threading.Lock()

    def run():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        while time.time() < stop:
            t0 = time.perf_counter()
            scrape(port, c)
            mine.append((time.perf_counter() - t0) * 1e3)
        with lock:
            times.extend(mine)

    ts = [threading.Thread(target=run) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    times.sort()
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    return {"scrapes": len(times), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": times[-1]}


def measure(exe, work, n, args):
    res = {"procs": n}
    # The gap after a full scan must hold a floor window (two floor scans).
    interval = 1 if n <= 1500 else 3
    win, spw = args.windows, 3
    log(f"population: {n} idle processes of {SMALL_KIB} KiB, {args.large} of {LARGE_KIB >> 10} MiB")
    pops = [Population(os.path.join(work, "idle"), n, SMALL_KIB)]
    if args.large:
        pops.append(Population(os.path.join(work, "idle"), args.large, LARGE_KIB))
    if args.go:
        log(f"with {args.go} Go programs holding freed heap")
        pops.append(GoPrograms(work, args.go))
    try:
        res["visible_pids"] = sum(1 for e in os.listdir("/proc") if e.isdigit())
        floor = Floor(work)
        nodeep = ["--collector.processes.deep-min-size=1000000GiB"]
        configs = {
            # Every file of every process each scan, as the floor reads them.
            "ours_full": ["--collector.processes.rollup-refresh=1", *nodeep],
            # As shipped; the deep tier keeps its default 60 s : 10 s ratio to the scan.
            "ours_steady": [f"--collector.processes.deep-interval={6 * interval}s"],
        }
        for name, extra in configs.items():
            log(f"  {name}")
            d = ours(exe, interval, extra)
            try:
                pairs, deep = per_scan(d, interval, win * spw, floor)
                res[name] = paired(pairs)
                res[f"{name}_deep_share"] = deep
                if name == "ours_steady":
                    res["ours_rss_mib"] = status_kib(d.proc.pid, "VmRSS") / 1024
                    res["ours_hwm_mib"] = status_kib(d.proc.pid, "VmHWM") / 1024
                    log("  scrape latency, 4 scrapers")
                    res["latency"] = latency(d.port, 4, args.latency_seconds)
                    held = unreclaimable_kib()
            finally:
                d.stop()
            if name == "ours_steady":
                time.sleep(0.5)
                res["ours_kernel_mib"] = (held - unreclaimable_kib()) / 1024
        log("  scrape CPU with nothing to scan")
        d = ours(exe, 3600, [])
        try:
            time.sleep(1)
            res["ours_scrape_cpu"] = spread(per_scrape(d, win, 50, 0.0))
        finally:
            d.stop()
        pe = shutil.which("prometheus-process-exporter")
        for name, cfg in (("pe_per_process", PER_PROCESS), ("pe_grouped", GROUPED)):
            if not pe:
                break
            log(f"  {name}")
            path = os.path.join(work, f"{name}.yml")
            with open(path, "w") as f:
                f.write(cfg)
            d = Daemon([pe, f"-web.listen-address=127.0.0.1:{PORT_PE}", f"-config.path={path}"], PORT_PE)
            try:
                res[name] = paired(per_scrape(d, win, spw, 0.2, floor))
                res[f"{name}_rss_mib"] = status_kib(d.proc.pid, "VmRSS") / 1024
                res[f"{name}_hwm_mib"] = status_kib(d.proc.pid, "VmHWM") / 1024
            finally:
                d.stop()
        ne = shutil.which("prometheus-node-exporter")
        if ne:
            log("  node_exporter")
            d = Daemon([ne, f"--web.listen-address=127.0.0.1:{PORT_NE}"], PORT_NE)
            try:
                res["node_exporter"] = paired(per_scrape(d, win, spw, 0.2, floor))
                res["node_exporter_rss_mib"] = status_kib(d.proc.pid, "VmRSS") / 1024
            finally:
                d.stop()
        res["floor"] = {**spread(floor.full), "ratio": spread([1.0])}
        res["floor_no_rollup"] = {
            **spread(floor.no_rollup),
            "ratio": spread([n / f for n, f in zip(floor.no_rollup, floor.full)]),
        }
    finally:
        for p in pops:
            p.stop()
        time.sleep(0.5)
        reap()
    return res


def churn(exe, work, args):
    """RSS of our daemon while processes come and go: a new set of pids every scan."""
    log(f"churn: {args.churn_seconds} s, {args.churn_size} new processes every second")
    base = Population(os.path.join(work, "idle"), args.churn_size, 64)
    d = ours(exe, 1, [])
    rss = []
    try:
        end = time.time() + args.churn_seconds
        while time.time() < end:
            p = Population(os.path.join(work, "idle"), args.churn_size, 64)
            time.sleep(1)
            p.stop()
            reap()
            rss.append(status_kib(d.proc.pid, "VmRSS") / 1024)
        scans = metric(scrape(d.port), "membloat_scans_total")
        hwm = status_kib(d.proc.pid, "VmHWM") / 1024
    finally:
        d.stop()
        base.stop()
        reap()
    third = max(1, len(rss) // 3)
    return {
        "scans": scans,
        "rss_first_third_mib": statistics.median(rss[:third]),
        "rss_last_third_mib": statistics.median(rss[-third:]),
        "hwm_mib": hwm,
    }


def fmt(s):
    return f"{s['min']:.1f} / {s['median']:.1f} / {s['max']:.1f}"


def fmt2(s):
    return f"{s['min']:.2f} / **{s['median']:.2f}x** / {s['max']:.2f}"


def fmt3(s):
    return f"{s['min']:.3f} / {s['median']:.3f} / {s['max']:.3f}"


def report(results, churned):
    lines = []
    rows = [
        ("floor", "C floor: stat, status, smaps_rollup, oom_score, oom_score_adj"),
        ("floor_no_rollup", "C floor without smaps_rollup"),
        ("ours_full", "membloat_exporter, every file every scan"),
        ("ours_steady", "membloat_exporter as shipped (steady state)"),
        ("pe_per_process", "process-exporter, one group per process"),
        ("pe_grouped", "process-exporter, grouped by comm"),
        ("node_exporter", "node-exporter, default collectors (no processes)"),
    ]
    for r in results:
        steady = r["ours_steady"]["ratio"]["median"]
        lines.append(f"\n### {r['procs']} idle processes (+ large ones; {r['visible_pids']} pids visible)\n")
        lines.append("| reader | CPU ms per scan or scrape (min / median / max) | / floor (min / median / max) | / ours as shipped |")
        lines.append("|---|---|---|---|")
        for key, label in rows:
            if key in r:
                ratio = r[key]["ratio"]
                lines.append(
                    f"| {label} | {fmt(r[key])} | {fmt2(ratio)} | {ratio['median'] / steady:.2f}x |"
                )
        lines.append("")
        lines.append(
            f"- the deep tier took {r['ours_steady_deep_share'] * 100:.1f} % of the CPU as shipped "
            f"(membloat_deep_cpu_seconds_total over the daemon's CPU)"
        )
        lines.append(f"- membloat_exporter RSS {r['ours_rss_mib']:.1f} MiB (peak {r['ours_hwm_mib']:.1f} MiB); "
                 f"kernel memory it held, released when it stopped (SUnreclaim): {r['ours_kernel_mib']:.1f} MiB")
        for k in ("pe_per_process", "pe_grouped"):
            if f"{k}_rss_mib" in r:
                lines.append(f"- {k} RSS {r[k + '_rss_mib']:.1f} MiB (peak {r[k + '_hwm_mib']:.1f} MiB)")
        lat = r["latency"]
        lines.append(
            f"- scrape latency, 4 concurrent scrapers while scanning: p50 {lat['p50_ms']:.2f} ms, "
            f"p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.2f} ms over {lat['scrapes']} scrapes"
        )
        lines.append(f"- CPU per scrape with nothing to scan: {fmt3(r['ours_scrape_cpu'])} ms")
    if churned:
        lines.append(
            f"\nChurn: {churned['scans']:.0f} scans; RSS {churned['rss_first_third_mib']:.1f} MiB in the "
            f"first third, {churned['rss_last_third_mib']:.1f} MiB in the last (peak {churned['hwm_mib']:.1f} MiB)"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", default="1000,5000", help="population sizes, comma separated")
    ap.add_argument("--large", type=int, default=2, help="processes of 1 GiB in the population")
    ap.add_argument("--go", type=int, default=0, help="random Go programs (gofree.go) in the population")
    ap.add_argument("--windows", type=int, default=6, help="measurement windows per reader")
    ap.add_argument("--latency-seconds", type=float, default=10)
    ap.add_argument("--churn-seconds", type=int, default=60, help="0 skips the churn run")
    ap.add_argument("--churn-size", type=int, default=200)
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--exporter", help="this membloat_exporter binary instead of a release build")
    ap.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.in_namespace:
        if os.geteuid() != 0:
            sys.exit("compare.py: needs root for a private PID namespace (unshare --pid)")
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, os.path.abspath(__file__),
               "--in-namespace", *sys.argv[1:]]
        sys.exit(subprocess.run(cmd).returncode)
    work = tempfile.mkdtemp(prefix="membloat-compare-")
    try:
        exe = build(work, args.exporter and os.path.abspath(args.exporter))
        results = []
        for n in args.procs.split(","):
            results.append(measure(exe, work, int(n), args))
            # A later population's failure does not lose this one's figures.
            log(report(results[-1:], None))
        churned = churn(exe, work, args) if args.churn_seconds > 0 else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "churn": churned}, f, indent=1)
    print(report(results, churned))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
