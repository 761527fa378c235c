#!/usr/bin/env python3
"""Past the usual population: the exporter on 20,000 and 50,000 idle processes in a private
PID namespace, as shipped (defaults), with CPU per scan (the first, which reads every
file of every process, and the steady state), the C floor beside it, RSS and its peak,
series served, scrape latency, and the statm descriptors kept or not.

usage: python3 benches/compare/scale.py [--procs 20000,50000] [--kib 64] [--json out.json]

Needs root (unshare --pid, pid_max raised inside the namespace and put back), gcc and
cargo; about 200 KiB of memory per process. Processes beyond the exporter's open-files
limit are read by opening their files (membloat_scan_unkept_processes): run it under
`prlimit --nofile=1048576` to see the cost with every descriptor kept.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import shutil
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (the population, the floor and the probes)

PID_MAX = "/proc/sys/kernel/pid_max"


def scans(port):
    return compare.metric(compare.scrape(port), "membloat_scans_total")


def cpu_per_scan(d, n_scans, timeout):
    """CPU ms of each of the next `n_scans` scans: read just after each one completes."""
    out = []
    s0 = scans(d.port)
    deadline = time.time() + timeout
    while scans(d.port) == s0:
        if time.time() > deadline:
            raise RuntimeError("no scan completed")
        time.sleep(0.02)
    cpu, s = compare.cpu_ns(d.proc.pid), scans(d.port)
    while len(out) < n_scans and time.time() < deadline:
        time.sleep(0.02)
        s1 = scans(d.port)
        if s1 > s:
            cpu1 = compare.cpu_ns(d.proc.pid)
            out.append((cpu1 - cpu) / (s1 - s) / 1e6)
            cpu, s = cpu1, s1
    return out


def scrape_latency(port, n=60):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        compare.scrape(port)
        times.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.05)
    times.sort()
    return {"p50_ms": times[len(times) // 2], "p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))]}


def measure(exe, work, n, kib, interval):
    res = {"procs": n}
    compare.log(f"population: {n} idle processes of {kib} KiB")
    t0 = time.time()
    pop = compare.Population(os.path.join(work, "idle"), n, kib)
    res["spawn_seconds"] = time.time() - t0
    try:
        res["visible_pids"] = sum(1 for e in os.listdir("/proc") if e.isdigit())
        floor = compare.Floor(work)
        res["floor_ms"] = statistics.median([floor.window() for _ in range(3)])
        d = compare.ours(exe, interval, [])
        try:
            # The first scan reads every file of every (new) process.
            t = time.time()
            while scans(d.port) < 1:
                time.sleep(0.05)
                if time.time() - t > 600:
                    raise RuntimeError("first scan did not complete")
            res["first_scan_cpu_ms"] = compare.cpu_ns(d.proc.pid) / 1e6
            steady = cpu_per_scan(d, 6, 20 * interval)
            res["steady_ms"] = compare.spread(steady)
            text = compare.scrape(d.port)
            res["series"] = sum(1 for l in text.splitlines() if l and not l.startswith("#"))
            for name in ("membloat_scan_kept_descriptors", "membloat_scan_unkept_processes",
                         "membloat_processes_scanned", "membloat_scan_rollup_reads",
                         "membloat_scan_duration_seconds"):
                res[name] = compare.metric(text, name)
            res["latency"] = scrape_latency(d.port)
            res["rss_mib"] = compare.status_kib(d.proc.pid, "VmRSS") / 1024
            res["hwm_mib"] = compare.status_kib(d.proc.pid, "VmHWM") / 1024
            held = compare.unreclaimable_kib()
        finally:
            d.stop()
        time.sleep(0.5)
        res["kernel_mib"] = (held - compare.unreclaimable_kib()) / 1024
        res["floor_after_ms"] = statistics.median([floor.window() for _ in range(3)])
    finally:
        pop.stop()
        time.sleep(0.5)
        compare.reap()
    return res


def report(results):
    rows = ["| processes | floor ms/scan | first scan (every file) ms | steady ms/scan (min / median / max) | steady / floor | per process, steady | RSS (peak) MiB | kernel memory held MiB | series | scrape p50 / p99 ms | descriptors kept / processes unkept |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        floor = (r["floor_ms"] + r["floor_after_ms"]) / 2
        s = r["steady_ms"]
        rows.append(
            f"| {r['procs']} | {floor:.0f} | {r['first_scan_cpu_ms']:.0f} ({r['first_scan_cpu_ms'] / floor:.2f}x) "
            f"| {s['min']:.1f} / {s['median']:.1f} / {s['max']:.1f} | **{s['median'] / floor:.3f}x** "
            f"| {s['median'] * 1000 / r['procs']:.2f} µs | {r['rss_mib']:.1f} ({r['hwm_mib']:.1f}) | {r['kernel_mib']:.1f} | {r['series']:.0f} "
            f"| {r['latency']['p50_ms']:.2f} / {r['latency']['p99_ms']:.2f} "
            f"| {r['membloat_scan_kept_descriptors']:.0f} / {r['membloat_scan_unkept_processes']:.0f} |"
        )
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", default="20000,50000")
    ap.add_argument("--kib", type=int, default=64, help="anonymous memory each process touches")
    ap.add_argument("--json")
    ap.add_argument("--exporter")
    ap.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(n) for n in args.procs.split(",")]
    # Every pid of the namespace is a pid of the host's too: both limits are raised (the
    # namespace's is its own on Linux 6.14+), and the host's put back.
    old_pid_max = open(PID_MAX).read().strip()
    want = str(max(int(old_pid_max), 2 * max(sizes) + 1000))
    if not args.in_namespace:
        if os.geteuid() != 0:
            sys.exit("scale.py: needs root for a private PID namespace (unshare --pid)")
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, os.path.abspath(__file__),
               "--in-namespace", *sys.argv[1:]]
        try:
            with open(PID_MAX, "w") as f:
                f.write(want)
            code = subprocess.run(cmd).returncode
        finally:
            with open(PID_MAX, "w") as f:
                f.write(old_pid_max)
        sys.exit(code)
    work = tempfile.mkdtemp(prefix="membloat-scale-")
    results = []
    try:
        with open(PID_MAX, "w") as f:
            f.write(want)
        exe = compare.build(work, args.exporter and os.path.abspath(args.exporter))
        for n in sizes:
            results.append(measure(exe, work, n, args.kib, 10 if n > 30000 else 5))
            compare.log(json.dumps(results[-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(report(results))


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
