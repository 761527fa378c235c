#!/usr/bin/env python3
"""The fleet dashboard and its recording rules at scale, on a real Prometheus.

1. Takes the real exporter's own exposition (the binary run with --once on the captured
   fixture tree, tests/fixtures/kernel-6.18, which has every kind of series: host,
   groups, top processes, containers, an OOM victim) and, with a seeded generator, makes
   NODES synthetic nodes of it: their instance and cluster, their groups, processes and
   containers, and values that vary per node and over time (counters rise; a few nodes
   and containers see OOM kills). Families the fixture cannot show (a JVM's held heap,
   the containers' hoarded bytes) are added in the exporter's own label schema.
2. Streams the samples as OpenMetrics text, a batch of nodes at a time (each file a few
   GB at most), into `promtool tsdb create-blocks-from openmetrics`.
3. Starts Prometheus on the blocks and backfills the shipped recording rules
   (deploy/prometheus/membloat.rules.yml) with `promtool tsdb create-blocks-from rules`,
   one level at a time (a rule that reads another rule's series waits for its level),
   restarting Prometheus between levels so it loads the new blocks.
4. Times every query of the fleet dashboard (grafana/membloat-fleet.json), its variables
   at "All", as instant queries at the data's end, RUNS times each; the same panels
   written on raw series (each recorded series replaced by its rule's expression, the
   panel's matchers pushed down) as the baseline in the same sitting; every per-host
   panel (the other dashboards) for one node; and, on a second data set of RANGE_NODES
   nodes over RANGE_HOURS, the fleet's time series panels as range queries at a 5-minute
   step.

Prints a table and writes --json. Exits 1 when a fleet query returns no data or a p99 is
over its budget (instant fleet panel 1 s, range 2 s, per-host panel 200 ms).

    scripts/fleet-bench.py                # 1,000 nodes x 3 h, 100 nodes x 24 h (~30 min)
    scripts/fleet-bench.py --short        # 100 nodes x 2 h, both kinds (CI, ~3 min)

Needs python3 with PyYAML, prometheus and promtool (Debian's prometheus package), and
the exporter binary (--exporter; default target/release, else target/debug).
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zlib

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests/fixtures/kernel-6.18")
RULES = os.path.join(ROOT, "deploy/prometheus/membloat.rules.yml")
FLEET = os.path.join(ROOT, "grafana/membloat-fleet.json")
HOSTS = [os.path.join(ROOT, "grafana", f) for f in
         ("membloat-host.json", "membloat-thp.json", "membloat-processes.json")]
STEP = 60  # seconds between samples: a 60 s scrape
BUDGET = {"fleet": 1.0, "range": 2.0, "host": 0.2}  # p99 limits, seconds

# Group names a fleet runs, most common first (a node picks from the head more often).
GROUPS = ["java", "python3", "postgres", "node", "ruby", "nginx", "envoy", "containerd",
          "kubelet", "redis-server", "mysqld", "dockerd", "prometheus", "php-fpm", "gunicorn",
          "celery", "sidekiq", "puma", "elasticsearch", "kafka", "zookeeper", "haproxy",
          "memcached", "mongod", "coredns", "fluent-bit", "vector", "otelcol", "etcd",
          "systemd", "sshd", "rsyslogd", "cron", "chronyd", "node_exporter", "grafana",
          "airflow", "spark", "flink", "cassandra"]
JAVA = {"java", "elasticsearch", "kafka", "zookeeper", "spark", "flink", "cassandra"}
QOS = ["burstable", "besteffort", "guaranteed"]


# ---------------------------------------------------------------------------------------
# The exporter's exposition, as a template.

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def exposition(exporter):
    out = subprocess.run(
        [exporter, "--once", "--once.interval=0s",
         "--path.procfs=" + os.path.join(FIXTURE, "proc"),
         "--path.sysfs=" + os.path.join(FIXTURE, "sys")],
        check=True, capture_output=True, text=True)
    series = []
    for line in out.stdout.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            sys.exit(f"unparsed exposition line: {line}")
        labels = LABEL.findall(m.group(3) or "")
        series.append((m.group(1), labels, float(m.group(4))))
    return series


def template(series):
    """Splits the exposition by what a series is of: the host, one group, one process,
    one container, or the OOM killer's latest victim. Keeps one group's, one process's
    and one container's series as the pattern for every other."""
    t = {"host": [], "group": [], "process": [], "cgroup": [], "victim": []}
    by_group, by_pid, by_cgroup = {}, {}, {}
    for name, labels, value in series:
        keys = dict(labels)
        if name.startswith("membloat_oom_"):
            t["victim"].append((name, labels, value))
        elif "pid" in keys:
            by_pid.setdefault(keys["pid"], []).append((name, labels, value))
        elif "group" in keys:
            by_group.setdefault(keys["group"], []).append((name, labels, value))
        elif "cgroup" in keys:
            by_cgroup.setdefault(keys["cgroup"], []).append((name, labels, value))
        else:
            t["host"].append((name, labels, value))
    pick = lambda d: max(d.values(), key=len)  # noqa: E731: the fullest example
    strip = lambda rows, key: [(n, [(k, v) for k, v in ls if k != key], v)  # noqa: E731
                               for n, ls, v in rows]
    t["group"] = strip(pick(by_group), "group")
    t["process"] = strip(strip(pick(by_pid), "pid"), "comm")
    t["cgroup"] = strip(pick(by_cgroup), "cgroup")
    # What the fixture cannot show: a JVM's held heap (per group, process and container)
    # and the containers' measured hoarding. Same label schema as the exporter's.
    t["group"].append(("membloat_group_runtime_held_bytes", [("runtime", "jvm")], 0.0))
    t["process"].append(("membloat_process_runtime_held_bytes", [("runtime", "jvm")], 0.0))
    t["cgroup"].append(("membloat_cgroup_hoarded_bytes", [], 0.0))
    t["cgroup"].append(("membloat_cgroup_runtime_held_bytes", [("runtime", "jvm")], 0.0))
    return t


# ---------------------------------------------------------------------------------------
# Synthetic nodes.

GiB = 1 << 30


def esc(v):
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fmt(labels):
    return ",".join(f'{k}="{v}"' for k, v in labels)


class Series:
    """One series of one node: its text up to the value, and how its value moves."""
    __slots__ = ("name", "prefix", "base", "rate", "start", "jump", "at")

    def __init__(self, name, labels, base, rate=0.0, start=0, jump=0.0, at=None):
        self.name = name
        self.prefix = f"{name}{{{fmt(labels)}}} "
        self.base, self.rate, self.start, self.jump, self.at = base, rate, start, jump, at


def node(i, t, rng, samples, clusters):
    """Every series of node `i` (seeded by `rng`)."""
    cluster = f"c{i % clusters + 1}"
    inst = f"node-{i:04d}:9101"
    own = [("cluster", cluster), ("job", "membloat"), ("instance", inst)]
    ram = rng.choice([16, 32, 64, 128, 256]) * GiB
    avail = rng.choice([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]) * rng.uniform(0.8, 1.2)
    # An OOM kill on one node in twenty, 5 to 50 minutes before the end (so the last
    # hour's panels have kills to show at any size).
    killed = i % 20 == 7
    kill_at = rng.randrange(max(0, samples - 50), samples - 5) if killed else None
    out = []

    def add(name, labels, base, **kw):
        out.append(Series(name, own + labels, base, **kw))

    for name, labels, value in t["host"]:
        if name == "membloat_memory_total_bytes":
            add(name, labels, ram)
        elif name == "membloat_memory_available_bytes":
            add(name, labels, ram * avail)
        elif name == "membloat_vmstat_oom_kill_total":
            add(name, labels, value, jump=1.0 if killed else 0.0, at=kill_at)
        elif name.endswith("_total"):
            add(name, labels, value, rate=rng.uniform(0.0, 50.0))
        elif name.endswith("_bytes"):
            add(name, labels, value * ram / (16 * GiB) * rng.uniform(0.5, 1.5))
        else:
            add(name, labels, value)

    weights = [1.0 / (k + 1) for k in range(len(GROUPS))]
    groups = set()
    while len(groups) < NODE_GROUPS:
        groups.add(rng.choices(GROUPS, weights)[0])
    groups = sorted(groups)
    for g in groups:
        java = g in JAVA
        held = rng.choice([0, 0, 0.25, 1, 4]) * GiB * rng.random()
        for name, labels, value in t["group"]:
            keys = dict(labels)
            if name == "membloat_group_runtime_held_bytes":
                if java:
                    add(name, [("group", g)] + labels, held * 0.8)
                continue
            if name == "membloat_group_hoarded_bytes":
                v = held if keys.get("method") == "measured" else (
                    0 if java else rng.choice([0, 0, 0.5 * GiB]) * rng.random())
                add(name, [("group", g)] + labels, v)
            elif name.endswith("_total"):
                add(name, [("group", g)] + labels, value, rate=rng.uniform(0, 10))
            elif name.endswith("_bytes"):
                add(name, [("group", g)] + labels, rng.uniform(0.01, 2) * GiB)
            else:
                add(name, [("group", g)] + labels, value)

    for k in range(NODE_PROCESSES):
        g = groups[k % len(groups)]
        ident = [("pid", str(rng.randrange(300, 4_000_000))), ("comm", esc(g[:15]))]
        for name, labels, value in t["process"]:
            if name == "membloat_process_runtime_held_bytes":
                if g in JAVA:
                    add(name, ident + labels, rng.uniform(0, 2) * GiB)
                continue
            if name.endswith("_total"):
                add(name, ident + labels, value, rate=rng.uniform(0, 1))
            elif name.endswith("_bytes"):
                add(name, ident + labels, rng.uniform(0.01, 4) * GiB)
            else:
                add(name, ident + labels, value)

    for k in range(NODE_CONTAINERS):
        qos = rng.choice(QOS)
        uid = "%08x_%04x_%04x_%04x_%012x" % tuple(rng.getrandbits(b) for b in (32, 16, 16, 16, 48))
        cid = "%064x" % rng.getrandbits(256)
        path = (f"/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{uid}.slice/"
                f"cri-containerd-{cid}.scope")
        limit = rng.choice([0.5, 1, 2, 4, 8]) * GiB if rng.random() < 0.7 else None
        ws = (limit if limit else 4 * GiB) * rng.uniform(0.3, 0.99)
        hoarded = ws * rng.uniform(0, 0.4) if rng.random() < 0.3 else None
        java = hoarded is not None and rng.random() < 0.3
        kills = rng.random() < 0.02 or (killed and k == 0)
        for name, labels, value in t["cgroup"]:
            if name == "membloat_cgroup_info":
                labels = [("cgroup", path), ("pod_uid", uid.replace("_", "-")),
                          ("container_id", cid), ("runtime", "containerd"),
                          ("qos_class", qos), ("systemd_unit", "")]
                add(name, labels, 1)
                continue
            ls = [("cgroup", path)] + labels
            if name == "membloat_cgroup_memory_limit_bytes":
                if limit:
                    add(name, ls, limit)
            elif name == "membloat_cgroup_working_set_bytes":
                add(name, ls, ws)
            elif name == "membloat_cgroup_memory_usage_bytes":
                add(name, ls, ws * 1.15)
            elif name == "membloat_cgroup_hoarded_bytes":
                if hoarded is not None:
                    add(name, ls, hoarded)
            elif name == "membloat_cgroup_runtime_held_bytes":
                if java:
                    add(name, ls, hoarded * 0.7)
            elif name == "membloat_cgroup_oom_kills_total":
                # A container killed in the window was killed before too: its counter
                # starts above 0, so increase() extrapolates it the same wherever in the
                # minute a rule is evaluated (from 0 it cuts the extrapolation at zero).
                add(name, ls, rng.randrange(1, 4) if kills else 0, jump=1.0 if kills else 0.0,
                    at=(kill_at or rng.randrange(max(0, samples - 50), samples - 5)) if kills else None)
            elif name.endswith("_bytes"):
                add(name, ls, ws * rng.uniform(0.2, 0.9))
            else:
                add(name, ls, value)

    if killed:
        victim_group = rng.choice(groups)
        for name, labels, value in t["victim"]:
            keys = dict(labels)
            if "group" in keys:
                labels = [(k, esc(victim_group) if k in ("group", "comm") else v)
                          for k, v in labels]
            if name == "membloat_oom_kills_total":
                add(name, labels, 1, start=kill_at)
            elif name == "membloat_oom_last_victim_timestamp_seconds":
                add(name, labels, 0, start=kill_at, at=-1)  # the kill's own time
            else:
                add(name, labels, value, start=kill_at)
    return out


def write_batch(path, nodes, t, seed, samples, end, clusters):
    """OpenMetrics text for nodes `nodes`, family by family; returns series written."""
    first = end - (samples - 1) * STEP
    wobble = [1 + 0.05 * math.sin(k / 7.0) for k in range(97)]
    per_node = {}
    count = 0
    for i in nodes:
        per_node[i] = node(i, t, random.Random(seed * 1_000_003 + i), samples, clusters)
    families = {}
    for i in nodes:
        for s in per_node[i]:
            families.setdefault(s.name, []).append(s)
    with open(path, "w", buffering=1 << 22) as f:
        for name in families:
            for s in families[name]:
                count += 1
                phase = zlib.crc32(s.prefix.encode()) % 97
                rows = []
                for k in range(s.start, samples):
                    ts = first + k * STEP
                    if s.at == -1:
                        v = first + s.start * STEP
                    elif s.rate or s.jump:
                        v = s.base + s.rate * k * STEP + (s.jump if s.at is not None and k >= s.at else 0)
                    else:
                        # Gauges move until the last 70 minutes, then hold still: every
                        # rule evaluation of the last hour (promtool evaluates each group
                        # at its own offset into the minute) and the raw form asked at the
                        # end then read the same inputs, so they must agree exactly.
                        kk = min(k, samples - 71)
                        v = s.base * wobble[(kk + phase) % 97] if s.base > 1 else s.base
                    rows.append(f"{s.prefix}{v:.17g} {ts}\n" if v != int(v) else f"{s.prefix}{int(v)} {ts}\n")
                f.write("".join(rows))
        f.write("# EOF\n")
    return count


# ---------------------------------------------------------------------------------------
# Prometheus.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    started = []  # stopped on the way out, whatever happens

    def __init__(self, data, work):
        self.data, self.work = data, work
        self.proc = None
        self.port = None

    def start(self):
        config = os.path.join(self.work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  evaluation_interval: 1m\n")
        self.port = free_port()
        Prometheus.started.append(self)
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.data}",
             "--storage.tsdb.retention.time=3650d", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.work, "prometheus.log"), "a"))
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if self.get("/-/ready", raw=True).startswith(b"Prometheus"):
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                sys.exit("prometheus exited; see " + os.path.join(self.work, "prometheus.log"))
            time.sleep(0.2)
        sys.exit("prometheus did not get ready")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def get(self, path, raw=False, **params):
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(self.url() + path + ("?" + q if q else ""), timeout=120) as r:
            body = r.read()
        return body if raw else json.loads(body)

    def metric(self, name):
        text = self.get("/metrics", raw=True).decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def settle(self, quiet=75):
        """Waits until the compactor has merged the backfilled blocks: the loaded blocks
        and the compactions done stay the same for `quiet` seconds (more than one of its
        one-minute ticks)."""
        last, since = None, time.time()
        while True:
            now = (self.metric("prometheus_tsdb_blocks_loaded"),
                   self.metric("prometheus_tsdb_compactions_total"),
                   self.metric("prometheus_tsdb_vertical_compactions_total"))
            if now != last:
                last, since = now, time.time()
            elif time.time() - since >= quiet:
                return
            time.sleep(5)

    def memory(self):
        status = open(f"/proc/{self.proc.pid}/status").read()
        field = lambda k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M).group(1)) * 1024  # noqa: E731
        return {"rss_bytes": field("VmRSS"), "peak_rss_bytes": field("VmHWM")}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:5])} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def move_blocks(src, data):
    for b in os.listdir(src):
        if os.path.isdir(os.path.join(src, b)) and b != "wal":
            shutil.move(os.path.join(src, b), os.path.join(data, b))


# ---------------------------------------------------------------------------------------
# Rules: their levels, and the raw form of a query.

def recording_rules():
    doc = yaml.safe_load(open(RULES))
    rules = []
    for g in doc["groups"]:
        for r in g["rules"]:
            if "record" in r:
                rules.append((g["name"], r["record"], r["expr"]))
    return rules


def metric_names(expr):
    """Metric names in a PromQL expression: identifiers outside strings and braces that
    contain a colon (recorded) or start with membloat_."""
    names, i, depth = [], 0, 0
    while i < len(expr):
        c = expr[i]
        if c == '"':
            j = i + 1
            while expr[j] != '"':
                j += 2 if expr[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and (c.isalpha() or c == "_"):
            j = i
            while j < len(expr) and (expr[j].isalnum() or expr[j] in "_:"):
                j += 1
            word = expr[i:j]
            if ":" in word or word.startswith("membloat_"):
                names.append((i, j, word))
            i = j
            continue
        i += 1
    return names


def levels(rules):
    recorded = {name for _, name, _ in rules}
    level = {}

    def of(name):
        if name not in level:
            deps = [w for _, n, e in rules if n == name for _, _, w in metric_names(e) if w in recorded]
            level[name] = 1 + max((of(d) for d in deps), default=-1)
        return level[name]

    for _, name, _ in rules:
        of(name)
    return level


def raw(expr, defs, extra=""):
    """`expr` with each recorded series replaced by its rule's expression; the matchers
    of the recorded selector (and `extra`) are added to every selector inside it."""
    out, pos = [], 0
    for start, end, name in metric_names(expr):
        out.append(expr[pos:start])
        matchers, after = "", end
        if end < len(expr) and expr[end] == "{":
            close = expr.index("}", end)
            matchers, after = expr[end + 1:close], close + 1
        merged = ",".join(m for m in (matchers, extra) if m)
        if name in defs:
            out.append("(" + raw(defs[name], defs, merged) + ")")
        else:
            out.append(f"{name}{{{merged}}}" if merged else name)
        pos = after
    out.append(expr[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------
# Queries.

def panels(path):
    d = json.load(open(path))
    for p in d["panels"]:
        for q in [p] + p.get("panels", []):
            if q.get("type") != "row":
                yield q


def substitute(expr, values):
    for k in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + k + "}", values[k]).replace("$" + k, values[k])
    return expr


def timed(prom, runs, path, **params):
    times, result, error = [], None, None
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            body = prom.get(path, **params)
            result = body["data"]["result"]
        except Exception as e:  # a query that fails is reported, not fatal
            error = str(e)[:200]
            result = None
        times.append(time.perf_counter() - t0)
    times.sort()
    p99 = times[min(len(times) - 1, math.ceil(0.99 * len(times)) - 1)]
    return {"p50": times[len(times) // 2], "p99": p99,
            "series": len(result) if result is not None else 0, "error": error,
            "result": result}


def answer(result):
    """A query's answer as {labels without the name: values}."""
    out = {}
    for s in result or []:
        key = tuple(sorted((k, v) for k, v in s["metric"].items() if k != "__name__"))
        vals = [s["value"]] if "value" in s else s["values"]
        out[key] = [(float(t), float(v)) for t, v in vals]
    return out


def same(a, b):
    """Whether two answers agree: the same series with the same values (relative 1e-9),
    or, where topk/bottomk cut between equal values, the same values."""
    close = lambda x, y: abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1.0) or (x != x and y != y)  # noqa: E731
    pairs = lambda ps, qs: len(ps) == len(qs) and all(  # noqa: E731
        p[0] == q[0] and close(p[1], q[1]) for p, q in zip(ps, qs))
    if a.keys() == b.keys():
        return all(pairs(a[k], b[k]) for k in a)
    flat = lambda d: sorted(v for ps in d.values() for _, v in ps)  # noqa: E731
    va, vb = flat(a), flat(b)
    return len(va) == len(vb) and all(close(x, y) for x, y in zip(va, vb))


def bench(prom, runs, end, kind, queries, step=None, start=None):
    rows = []
    for title, expr in queries:
        if kind == "range":
            r = timed(prom, runs, "/api/v1/query_range", query=expr, start=start, end=end, step=step)
        else:
            r = timed(prom, runs, "/api/v1/query", query=expr, time=end)
        r.update(panel=title, query=expr)
        rows.append(r)
    return rows


def fleet_queries(values):
    out = []
    for p in panels(FLEET):
        for t in p.get("targets", []):
            out.append((p["title"], substitute(t["expr"], values), p["type"]))
    return out


# ---------------------------------------------------------------------------------------

def build(work, name, nodes, hours, seed, t, clusters, batch):
    """Blocks of `nodes` nodes over `hours`, raw then every rule level; returns the data
    directory, the end time and what it cost."""
    samples = hours * 3600 // STEP
    end = (int(time.time()) // STEP) * STEP - 600
    data = os.path.join(work, name, "data")
    os.makedirs(data)
    info = {"nodes": nodes, "hours": hours, "series": 0, "text_bytes_max": 0}
    t0 = time.time()
    # `batch` nodes a file over 3 hours, fewer over longer: each file stays under ~2 GB.
    batch = max(1, batch * 3 // max(hours, 3))
    for b in range(0, nodes, batch):
        text = os.path.join(work, name, f"batch{b}.om")
        info["series"] += write_batch(text, range(b, min(nodes, b + batch)), t, seed, samples, end, clusters)
        info["text_bytes_max"] = max(info["text_bytes_max"], os.path.getsize(text))
        out = os.path.join(work, name, "blocks")
        run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", text, out])
        os.remove(text)
        move_blocks(out, data)
    info["raw_seconds"] = round(time.time() - t0, 1)
    info["series_per_node"] = round(info["series"] / nodes, 1)

    rules = recording_rules()
    level = levels(rules)
    prom = Prometheus(data, os.path.join(work, name))
    t0 = time.time()
    for lv in range(max(level.values()) + 1):
        groups = {}
        for g, rname, expr in rules:
            if level[rname] == lv:
                groups.setdefault(g, []).append({"record": rname, "expr": expr})
        file = os.path.join(work, name, f"rules{lv}.yml")
        with open(file, "w") as f:
            yaml.safe_dump({"groups": [{"name": g, "rules": r} for g, r in groups.items()]}, f)
        prom.start()
        out = os.path.join(work, name, f"rules{lv}")
        run(["promtool", "tsdb", "create-blocks-from", "rules", "--quiet",
             f"--start={end - (samples - 1) * STEP}", f"--end={end}", f"--url={prom.url()}",
             f"--output-dir={out}", "--eval-interval=60s", file])
        prom.stop()
        move_blocks(out, data)
    info["rule_levels"] = max(level.values()) + 1
    info["rules_seconds"] = round(time.time() - t0, 1)
    return prom, end, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hours", type=int, default=3)
    ap.add_argument("--range-nodes", type=int, default=100)
    ap.add_argument("--range-hours", type=int, default=24)
    ap.add_argument("--short", action="store_true", help="100 nodes x 2 h for both (CI)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--batch", type=int, default=100,
                    help="nodes per OpenMetrics file over 3 hours (fewer over longer)")
    ap.add_argument("--exporter", default=None)
    ap.add_argument("--work", default=None, help="keep the data here (default: a temporary dir)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.short:
        a.nodes, a.hours, a.range_nodes, a.range_hours = 100, 2, 100, 2
    exporter = a.exporter or next(
        (p for p in (os.path.join(ROOT, "target/release/membloat_exporter"),
                     os.path.join(ROOT, "target/debug/membloat_exporter")) if os.path.exists(p)),
        None)
    if not exporter:
        sys.exit("no exporter binary: cargo build --release, or pass --exporter")
    work = a.work or tempfile.mkdtemp(prefix="fleet-bench-")
    os.makedirs(work, exist_ok=True)
    t = template(exposition(exporter))
    clusters = max(1, a.nodes // 250)
    report = {"runs": a.runs, "budget_seconds": BUDGET}
    failures = []
    try:
        all_values = {"cluster": ".*", "job": ".+", "node": ".+", "instance": ".+", "group": ".+",
                      "__rate_interval": "4m", "__range": "1h", "__interval": "1m"}
        defs = {name: expr for _, name, expr in recording_rules()}

        prom, end, info = build(work, "instant", a.nodes, a.hours, a.seed, t, clusters, a.batch)
        report["instant"] = info
        prom.start()
        prom.settle()
        info["tsdb_bytes"] = dir_bytes(prom.data)
        queries = fleet_queries(all_values)
        # Asked half a minute before the last sample, between two samples as a rule
        # group's evaluation is (each group runs at its own offset into the minute): a
        # window then holds the same samples for the rule and for the raw form, and
        # increase() extrapolates them alike.
        at = end - STEP // 2
        # What the rules add: recorded series per node (they keep `instance`) and per
        # cluster and job (they do not).
        count = lambda q: float(prom.get("/api/v1/query", query=q, time=at)["data"]["result"][0]["value"][1])  # noqa: E731
        info["recorded_per_node"] = round(count('count({__name__=~"instance[a-z_]*:.+"})') / a.nodes, 1)
        info["recorded_per_job"] = round(count('count({__name__=~"job[a-z_]*:.+"})') / clusters, 1)
        report["fleet"] = bench(prom, a.runs, at, "instant", [(ti, e) for ti, e, _ in queries])
        report["fleet_raw"] = bench(prom, a.runs, at, "instant",
                                    [(ti, raw(e, defs)) for ti, e, _ in queries])
        one = dict(all_values, instance="node-0000:9101", node="node-0000:9101",
                   __range="1h")
        host = []
        for path in HOSTS:
            for p in panels(path):
                for tg in p.get("targets", []):
                    host.append((os.path.basename(path) + ": " + p["title"], substitute(tg["expr"], one)))
        report["host"] = bench(prom, a.runs, at, "instant", host)
        info["prometheus"] = prom.memory()
        prom.stop()

        if (a.range_nodes, a.range_hours) == (a.nodes, a.hours):
            prom.start()
            rinfo, rend = info, end
        else:
            prom, rend, rinfo = build(work, "range", a.range_nodes, a.range_hours, a.seed, t,
                                      max(1, a.range_nodes // 250), a.batch)
            report["range_set"] = rinfo
            prom.start()
            prom.settle()
            rinfo["tsdb_bytes"] = dir_bytes(prom.data)
        series = [(ti, e) for ti, e, ty in queries if ty in ("timeseries", "stat")]
        rstart = rend - a.range_hours * 3600 + STEP
        report["range"] = bench(prom, a.runs, rend, "range", series, step=300, start=rstart)
        report["range_raw"] = bench(prom, a.runs, rend, "range", [(ti, raw(e, defs)) for ti, e in series],
                                    step=300, start=rstart)
        rinfo["prometheus"] = prom.memory()
        prom.stop()
    finally:
        for p in Prometheus.started:
            p.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)

    # The oracle: each panel on recorded series answers at the end what it answers on raw
    # series. (Over a range the two differ by design: a rule's sample is its evaluation
    # at its group's offset into the minute, up to a minute before the step.)
    for kind in ("fleet",):
        for r, b in zip(report[kind], report[kind + "_raw"]):
            if b["error"]:  # the raw form failed (too many samples, a timeout): no oracle
                r["matches_raw"] = None
                continue
            ours, theirs = answer(r["result"]), answer(b["result"])
            r["matches_raw"] = same(ours, theirs)
            if not r["matches_raw"]:
                diff = [(k, ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs))
                        if ours.get(k) != theirs.get(k)][:3]
                failures.append(f"{kind} {r['panel']}: differs from the raw series' answer: "
                                f"{r['query']}: {diff}")
    for kind in ("fleet", "fleet_raw", "range", "range_raw", "host"):
        for r in report[kind]:
            r.pop("result", None)
    for kind in ("fleet", "range", "host"):
        for r in report[kind]:
            if kind != "host" and (r["error"] or r["series"] == 0):
                failures.append(f"{kind} {r['panel']}: no data ({r['error']}): {r['query']}")
            if r["p99"] > BUDGET[kind]:
                failures.append(f"{kind} {r['panel']}: p99 {r['p99']:.3f} s over {BUDGET[kind]} s")
    report["failures"] = failures
    print_report(report, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    if failures:
        print("\n".join(["FAILED:"] + failures))
        sys.exit(1)


def print_report(r, a):
    i = r["instant"]
    print(f"instant set: {i['nodes']} nodes x {i['hours']} h, {i['series']} series "
          f"({i['series_per_node']} per node), largest text file {i['text_bytes_max'] / 1e9:.2f} GB, "
          f"raw blocks {i['raw_seconds']} s, {i['rule_levels']} rule levels {i['rules_seconds']} s, "
          f"TSDB {i['tsdb_bytes'] / 1e6:.0f} MB, Prometheus RSS {i['prometheus']['rss_bytes'] / 1e6:.0f} MB "
          f"(peak {i['prometheus']['peak_rss_bytes'] / 1e6:.0f} MB); the rules record "
          f"{i['recorded_per_node']} series per node and {i['recorded_per_job']} per cluster and job")
    if "range_set" in r:
        s = r["range_set"]
        print(f"range set: {s['nodes']} nodes x {s['hours']} h, {s['series']} series, "
              f"TSDB {s['tsdb_bytes'] / 1e6:.0f} MB, Prometheus RSS {s['prometheus']['rss_bytes'] / 1e6:.0f} MB")

    def table(title, rows, base=None):
        print(f"\n{title}")
        print(f"{'panel':58} {'series':>6} {'p50 ms':>8} {'p99 ms':>8}" + (
            f" {'raw p50':>8} {'raw p99':>8} {'raw/rules':>9}" if base else ""))
        for k, x in enumerate(rows):
            line = f"{x['panel'][:58]:58} {x['series']:>6} {x['p50'] * 1e3:>8.1f} {x['p99'] * 1e3:>8.1f}"
            if base:
                b = base[k]
                line += f" {b['p50'] * 1e3:>8.1f} {b['p99'] * 1e3:>8.1f} {b['p50'] / max(x['p50'], 1e-9):>8.1f}x"
                if b["error"]:
                    line += " raw: " + b["error"][:60]
            print(line)

    table(f"fleet panels, instant, {i['nodes']} nodes (rules; raw series baseline)", r["fleet"], r["fleet_raw"])
    table(f"fleet time series, range {a.range_hours} h at 5 min, {a.range_nodes} nodes", r["range"], r["range_raw"])
    worst = max(r["host"], key=lambda x: x["p99"])
    p99s = sorted(x["p99"] for x in r["host"])
    print(f"\nper-host panels for one node, {len(r['host'])} queries, instant, {i['nodes']} nodes: "
          f"median p99 {p99s[len(p99s) // 2] * 1e3:.1f} ms, worst p99 {worst['p99'] * 1e3:.1f} ms ({worst['panel']})")


NODE_GROUPS = 8       # groups per node (--collector.processes.group-by name)
NODE_PROCESSES = 5    # top processes per node (--collector.processes.top-k=5, the default)
NODE_CONTAINERS = 10  # memory cgroups per node

if __name__ == "__main__":
    main()
