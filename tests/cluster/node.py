#!/usr/bin/env python3
"""A single-node Kubernetes cluster made of real parts, the chart installed on it by Helm
with its defaults, and the checks only a real node answers (tests/cluster.rs runs this as
root and asserts what it writes).

    node.py --kubenode BIN --helm BIN --chart DIR --image OCI_TAR --crds DIR \
            --repro DIR --java-home DIR --classes DIR --work DIR --out FILE

The node: etcd, the API server, controller manager, scheduler and kubelet of
`kubenode` (tests/cluster/node: k8s.io/kubernetes built as one binary), Debian's
containerd, runc and CNI plugins (bridge, host-local), on this host's cgroups with the
kubelet's cgroupfs driver. Images are written here as OCI archives (the exporter's by
scripts/image.sh) and imported into containerd: no registry is reached.

Writes OUT: one entry per check (name, ok, detail, seconds) and the facts of the node.
A check that raises is a failed check, never a missing one.
"""

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import urllib.parse
import urllib.request

# The exposition parser the kernels tier's guest uses.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm"))
from guest import parse  # noqa: E402

MIB = 1 << 20
NODE = "membloat-node"
NS = "membloat-test"
RELEASE = "membloat"
MONITORING = "monitoring"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pick(samples, name, **labels):
    return [(l, v) for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]


def one(samples, name, **labels):
    got = pick(samples, name, **labels)
    assert len(got) == 1, f"{name}{labels}: {len(got)} series: {got[:4]}"
    return got[0][1]


def wait_for(seconds, what, ok, every=0.5):
    """ok()'s first true value within `seconds`; an AssertionError naming `what` if none."""
    deadline = time.monotonic() + seconds
    while True:
        got = ok()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(every)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def restrict_oom():
    """Whether this root cannot lower an OOM score adjustment (no CAP_SYS_RESOURCE)."""
    with open("/proc/self/status") as f:
        eff = int(re.search(r"CapEff:\s*([0-9a-f]+)", f.read()).group(1), 16)
    return not eff & (1 << 24)


def node_ip():
    out = subprocess.run(["ip", "-4", "route", "get", "1.1.1.1"], capture_output=True, text=True).stdout
    m = re.search(r"\bsrc (\S+)", out)
    assert m, f"no IPv4 source address for the node: {out!r}"
    return m.group(1)


# --- images -----------------------------------------------------------------------

def oci_archive(out, name, files, entrypoint, env=(), workdir="/", texts=None):
    """An OCI image archive at `out` of one uncompressed layer holding `files` (image
    path -> host path, directories whole, symlinks followed) and `texts` (image path ->
    contents), named `name` for containerd (`ctr images import`)."""
    blobs = {}

    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": "sha256:" + digest, "size": len(data)}

    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", dereference=True) as t:
        for d in ["tmp", "proc", "sys", "dev", "etc"]:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        for dest, src in files.items():
            t.add(src, arcname=dest.lstrip("/"))
        for dest, text in (texts or {}).items():
            info = tarfile.TarInfo(dest.lstrip("/"))
            info.size, info.mode = len(text), 0o644
            t.addfile(info, io.BytesIO(text.encode()))
    layer = blob(layer.getvalue())
    config = blob(json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin", *env], "WorkingDir": workdir},
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]},
    }).encode())
    manifest = blob(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
    }).encode())
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest,
        "annotations": {"io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}]}
    with tarfile.open(out, "w") as t:
        def put(path, data):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            put(f"blobs/sha256/{digest}", data)
    return out


def with_libraries(binary):
    """binary and the shared libraries ld.so loads for it, at their own paths."""
    files = {}
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            files[m.group(1)] = m.group(1)
    return files


# --- the node -----------------------------------------------------------------------

class Node:
    def __init__(self, a):
        self.a = a
        self.w = a.work
        self.procs = []
        self.ip = node_ip()
        self.api_port = free_port()
        self.etcd_port, self.peer_port = free_port(), free_port()
        self.sock = os.path.join(self.w, "c.sock")
        self.admin = os.path.join(self.w, "admin.kubeconfig")
        self.facts = {"node_ip": self.ip}
        # The kubelet's top cgroups (kubepods under each v1 hierarchy) it will make.
        self.made_cgroups = [os.path.join("/sys/fs/cgroup", c, "kubepods") for c in os.listdir("/sys/fs/cgroup")
                             if not os.path.exists(os.path.join("/sys/fs/cgroup", c, "kubepods"))]

    def path(self, *p):
        return os.path.join(self.w, *p)

    def start(self, name, argv):
        logf = open(self.path("logs", name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, p))
        return p

    def alive(self):
        for name, p in self.procs:
            assert p.poll() is None, f"{name} exited with {p.returncode}: {self.tail(name)}"

    def tail(self, name, n=20):
        try:
            with open(self.path("logs", name + ".log")) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def kubectl(self, *args, input=None, check=True, timeout=120):
        r = subprocess.run([self.a.kubenode, "kubectl", f"--kubeconfig={self.admin}", *args],
                           input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def get(self, *args):
        return json.loads(self.kubectl("get", "-o", "json", *args))

    def ctr(self, *args):
        subprocess.run(["ctr", f"--address={self.sock}", "-n", "k8s.io", *args], check=True,
                       capture_output=True, timeout=600)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def files(self):
        for d in ["logs", "etcd", "cni", "ipam", "kubelet", "containerd", "state", "cert"]:
            os.makedirs(self.path(d), exist_ok=True)
        # The API server reaches the kubelet (logs, attach) with a client certificate of
        # this CA; the kubelet lets in nobody else.
        ssl = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True)
        ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.path("ca.key"), "-out",
            self.path("ca.crt"), "-subj", "/CN=membloat-test-ca", "-days", "2")
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", self.path("kubelet-client.key"), "-out",
            self.path("kubelet-client.csr"), "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client")
        ssl("x509", "-req", "-in", self.path("kubelet-client.csr"), "-CA", self.path("ca.crt"), "-CAkey",
            self.path("ca.key"), "-CAcreateserial", "-out", self.path("kubelet-client.crt"), "-days", "2")
        subprocess.run(["openssl", "genrsa", "-out", self.path("sa.key"), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", self.path("sa.key"), "-pubout", "-out", self.path("sa.pub")],
                       check=True, capture_output=True)
        self.write("tokens.csv", f'admin-token,admin,admin,"system:masters"\n'
                                 f'node-token,system:node:{NODE},node,"system:nodes"\n')
        for who, token in [("admin", "admin-token"), ("node", "node-token")]:
            self.write(f"{who}.kubeconfig", json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{self.api_port}",
                                                       "insecure-skip-tls-verify": True}}],
                "users": [{"name": who, "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": who}}]}))
        self.write("containerd.toml", f"""version = 2
root = "{self.path('containerd')}"
state = "{self.path('state')}"
[grpc]
  address = "{self.sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/membloat-pause:1"
  # Never below this process's own OOM score adjustment: lowering it needs
  # CAP_SYS_RESOURCE, which a machine's root may lack (a VM sandbox's does here).
  restrict_oom_score_adj = {'true' if restrict_oom() else 'false'}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{self.path('cni')}"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
""")
        self.write("cni/10-membloat.conflist", json.dumps({
            "cniVersion": "0.4.0", "name": "membloat",
            "plugins": [{"type": "bridge", "bridge": "mbk0", "isGateway": True, "ipMasq": False,
                         "ipam": {"type": "host-local", "dataDir": self.path("ipam"),
                                  "ranges": [[{"subnet": "10.244.7.0/24"}]],
                                  "routes": [{"dst": "0.0.0.0/0"}]}}]}))
        self.kubelet_config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs", "failSwapOn": False, "failCgroupV1": False,
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": self.path("ca.crt")}},
            "authorization": {"mode": "AlwaysAllow"},
            "address": self.ip, "port": free_port(), "healthzPort": 0, "readOnlyPort": 0,
            # This machine's disk is shared: the test's pods must not be evicted for it.
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False, "resolvConf": "", "cgroupsPerQOS": True,
            "enforceNodeAllocatable": ["pods"], "podPidsLimit": -1,
            # True: cAdvisor then reads the file systems' usage, without which the
            # kubelet's eviction manager cannot start a round (it asks whether the image
            # file system is the node's) and never sets MemoryPressure.
            "localStorageCapacityIsolation": True, "protectKernelDefaults": False,
            "makeIPTablesUtilChains": False, "maxPods": 40,
            "nodeStatusReportFrequency": "5s", "nodeStatusUpdateFrequency": "5s"}
        self.write("kubelet.yaml", json.dumps(self.kubelet_config))

    def images(self):
        a = self.a
        pause = self.path("pause")
        src = os.path.join(a.k8s_source, "build/pause/linux/pause.c")
        subprocess.run(["gcc", "-Os", "-static", "-DVERSION=membloat", "-o", pause, src], check=True)
        made = [oci_archive(self.path("pause.tar"), "localhost/membloat-pause:1", {"/pause": pause}, ["/pause"])]
        heap = os.path.join(a.repro, "heap")
        made.append(oci_archive(self.path("heap.tar"), "docker.io/library/membloat-heap:1",
                                {"/heap": heap, **with_libraries(heap)}, ["/heap"]))
        gofree = os.path.join(a.repro, "gofree")
        made.append(oci_archive(self.path("gofree.tar"), "docker.io/library/membloat-gofree:1",
                                {"/gofree": gofree}, ["/gofree"]))
        # The JDK's launcher and libraries are linked against this machine's glibc.
        libs = {}
        for d, _, names in os.walk(a.java_home):
            for name in names:
                if name.endswith(".so") or d.endswith("/bin"):
                    libs.update(with_libraries(os.path.join(d, name)))
        made.append(oci_archive(self.path("java.tar"), "docker.io/library/membloat-java:1",
                                {"/jdk": a.java_home, "/classes": a.classes, **libs},
                                ["/jdk/bin/java", "-cp", "/classes", "JavaHeap"],
                                # HotSpot publishes its perf data under /tmp/hsperfdata_<user>
                                # only when its uid has a name: a JVM image has /etc/passwd.
                                texts={"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
                                       "/etc/group": "root:x:0:\n"}))
        for t in made + [a.image]:
            self.ctr("images", "import", t)
        version = re.search(r"-([0-9][^/]*)\.oci\.tar$", a.image).group(1)
        # scripts/image.sh names it by its archive's ref (membloat_exporter:VERSION): the
        # name the chart's defaults ask for is Docker Hub's normal form of that.
        out = subprocess.run(["ctr", f"--address={self.sock}", "-n", "k8s.io", "images", "ls", "-q"],
                             capture_output=True, text=True, check=True).stdout.split()
        want = f"docker.io/library/membloat_exporter:{version}"
        if want not in out:
            have = [i for i in out if i.endswith(f"membloat_exporter:{version}")]
            assert have, f"the exporter's image not imported: {out}"
            self.ctr("images", "tag", have[0], want)
        self.facts["images"] = sorted(out)

    def up(self):
        a, kn = self.a, self.a.kubenode
        self.files()
        t0 = time.monotonic()
        self.start("containerd", ["containerd", "--config", self.path("containerd.toml")])
        self.start("etcd", [kn, "etcd", self.path("etcd"), f"http://127.0.0.1:{self.etcd_port}",
                            f"http://127.0.0.1:{self.peer_port}"])
        self.start("apiserver", [
            kn, "apiserver", f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.api_port}", f"--advertise-address={self.ip}",
            f"--cert-dir={self.path('cert')}", "--service-cluster-ip-range=10.233.0.0/24",
            f"--service-account-key-file={self.path('sa.pub')}",
            f"--service-account-signing-key-file={self.path('sa.key')}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--token-auth-file={self.path('tokens.csv')}", "--authorization-mode=Node,RBAC",
            "--allow-privileged=true", "--enable-priority-and-fairness=false",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={self.path('kubelet-client.crt')}",
            f"--kubelet-client-key={self.path('kubelet-client.key')}"])
        self.facts["restrict_oom_score_adj"] = restrict_oom()
        wait_for(60, "containerd's socket", lambda: self.alive() or os.path.exists(self.sock))
        self.images()
        self.facts["images_seconds"] = round(time.monotonic() - t0, 1)

        def ready():
            self.alive()
            return self.kubectl("get", "--raw", "/readyz", check=False).strip() == "ok"
        wait_for(120, "the API server ready", ready)
        self.start("controller-manager", [
            kn, "controller-manager", f"--kubeconfig={self.admin}", "--leader-elect=false",
            f"--service-account-private-key-file={self.path('sa.key')}",
            "--use-service-account-credentials=false", "--controllers=*,-nodeipam,-cloud-node-lifecycle"])
        self.start("scheduler", [kn, "scheduler", f"--kubeconfig={self.admin}", "--leader-elect=false"])
        # Run as a file named kubelet (its process name, as on any node; the exporter
        # finds the kubelet by it).
        os.makedirs(self.path("bin"), exist_ok=True)
        if not os.path.lexists(self.path("bin", "kubelet")):
            os.symlink(kn, self.path("bin", "kubelet"))
        self.kubelet_argv = [
            self.path("bin", "kubelet"), "kubelet", f"--config={self.path('kubelet.yaml')}",
            f"--kubeconfig={self.path('node.kubeconfig')}", f"--root-dir={self.path('kubelet')}",
            f"--hostname-override={NODE}", f"--node-ip={self.ip}"]
        self.start("kubelet", self.kubelet_argv)
        self.wait_ready()
        self.facts["up_seconds"] = round(time.monotonic() - t0, 1)
        # The default service account, which pods are admitted with.
        self.kubectl("create", "namespace", NS)
        wait_for(60, "the default service account", lambda: self.kubectl(
            "get", "serviceaccount", "default", "-n", NS, check=False))

    def restart_kubelet(self, config):
        """The kubelet stopped by its PID and started again with `config` (pods keep
        running)."""
        for i, (name, p) in enumerate(self.procs):
            if name == "kubelet" and p.poll() is None:
                p.terminate()
                p.wait(timeout=120)
                del self.procs[i]
                break
        self.kubelet_config = config
        self.write("kubelet.yaml", json.dumps(config))
        self.start("kubelet", self.kubelet_argv)
        self.wait_ready()

    def wait_ready(self):
        def node_ready():
            self.alive()
            try:
                n = self.get("node", NODE)
            except AssertionError:
                return False
            return any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) and n
        n = wait_for(180, "the node Ready", node_ready, every=1)
        self.facts["kubelet"] = n["status"]["nodeInfo"]["kubeletVersion"]
        self.facts["runtime"] = n["status"]["nodeInfo"]["containerRuntimeVersion"]

    def down(self):
        """Deletes what the test made, then stops every part by its PID: the pods first
        (the kubelet stops their containers), so nothing of theirs outlives the node."""
        try:
            if any(n == "kubelet" and p.poll() is None for n, p in self.procs):
                self.kubectl("delete", "namespace", NS, MONITORING, "--wait=true", "--timeout=90s",
                             check=False, timeout=120)
                wait_for(60, "the pods gone", lambda: not self.pods_running(), every=1)
        except Exception as e:  # noqa: BLE001: the stop below must still run
            log(f"cleanup: {e}")
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # The shims our containerd started, by their socket's address.
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().split(b"\0")
                except OSError:
                    continue
                if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and self.sock.encode() in cmd:
                    os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "link", "delete", "mbk0"], capture_output=True)
        # The kubelet's cgroups, emptied above, where it made them.
        for top in self.made_cgroups:
            for d, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        subprocess.run(["umount", "-R", self.path("kubelet")], capture_output=True)
        for d in ["containerd", "state"]:
            subprocess.run(["sh", "-c", f"grep ' {self.path(d)}' /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r umount"],
                           capture_output=True)

    def pods_running(self):
        out = subprocess.run(["ctr", f"--address={self.sock}", "-n", "k8s.io", "tasks", "ls", "-q"],
                             capture_output=True, text=True).stdout.split()
        return out

    # The exporter's pod

    def exporter_pod(self):
        pods = self.get("pods", "-n", MONITORING, "-l", "app.kubernetes.io/name=membloat-exporter")["items"]
        return pods[0] if len(pods) == 1 else None

    def scrape(self):
        pod = self.exporter_pod()
        return parse(http_get(f"http://{pod['status']['podIP']}:10293/metrics"))

    def scans(self, samples):
        return one(samples, "membloat_scans_total")

    def after_scans(self, n=2):
        """A scrape taken after `n` more of the exporter's scans have ended (the truth of
        a figure is the scan that read it, never a quiet interval)."""
        start = self.scans(self.scrape())
        return wait_for(120, f"{n} scans", lambda: (lambda s: self.scans(s) >= start + n and s)(self.scrape()), every=1)


def container_cgroup(n, pod, name):
    """The memory cgroup of the pod's container `name` (as the kubelet made it) and the
    container's ID, from the pod's status."""
    st = [c for c in pod["status"]["containerStatuses"] if c["name"] == name][0]
    cid = st["containerID"].split("://", 1)[1]
    uid = pod["metadata"]["uid"]
    qos = pod["status"]["qosClass"].lower()
    parent = "kubepods" if qos == "guaranteed" else f"kubepods/{qos}"
    return f"/{parent}/pod{uid}/{cid}", cid, uid, qos


def cgroup_pids(cg):
    with open(f"/sys/fs/cgroup/memory{cg}/cgroup.procs") as f:
        return [int(l) for l in f.read().split()]


def pod_manifest(name, image, args=(), limit=None, stdin=False, env=None):
    c = {"name": name, "image": image, "imagePullPolicy": "Never", "args": list(args)}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if limit:
        c["resources"] = {"limits": {"memory": limit}, "requests": {"memory": limit, "cpu": "10m"}}
    if stdin:
        c["stdin"] = True
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": NS},
                       "spec": {"restartPolicy": "Never", "containers": [c],
                                "terminationGracePeriodSeconds": 1}})


def running_pod(n, name):
    def up():
        p = n.get("pod", name, "-n", NS)
        st = p["status"].get("containerStatuses") or []
        ended = st and st[0].get("state", {}).get("terminated")
        assert not ended, f"pod {name} ended: {ended}; logs: {n.kubectl('logs', '-n', NS, name, check=False)[-2000:]}"
        return st and st[0].get("state", {}).get("running") and p
    return wait_for(180, f"pod {name} running", up, every=1)


def logs_line(n, name, prefix, seconds=120):
    def line():
        text = n.kubectl("logs", "-n", NS, name, check=False)
        for l in text.splitlines():
            if l.startswith(prefix):
                return l
        st = n.get("pod", name, "-n", NS)["status"].get("containerStatuses") or [{}]
        ended = st[0].get("state", {}).get("terminated")
        assert not ended, f"pod {name} ended: {ended}; logs: {text[-2000:]}"
    return wait_for(seconds, f"{name} printing {prefix!r}", line, every=1)


# --- the checks -------------------------------------------------------------------

class Run:
    def __init__(self):
        self.checks = []

    def check(self, name, fn):
        t = time.monotonic()
        try:
            detail, ok = fn(), True
        except Exception:  # noqa: BLE001: a failed check is reported, never lost
            detail, ok = traceback.format_exc(), False
        secs = round(time.monotonic() - t, 1)
        self.checks.append({"name": name, "ok": ok, "detail": str(detail), "seconds": secs})
        log(f"{'ok  ' if ok else 'FAIL'} {name} ({secs} s): {str(detail)[-1500:]}")
        return ok


def check_install(n, a):
    """The CRDs, then `helm install` with the chart's defaults; the DaemonSet's pod Ready."""
    for crd in ["monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"]:
        n.kubectl("apply", "--server-side", "-f", os.path.join(a.crds, crd))
    n.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com",
              "crd/prometheusrules.monitoring.coreos.com", "--timeout=60s")
    r = subprocess.run([a.helm, "install", RELEASE, a.chart, "--kubeconfig", n.admin, "-n", MONITORING,
                        "--create-namespace", "--wait", "--timeout", "5m"], capture_output=True, text=True)
    assert r.returncode == 0, f"helm install: {r.stderr}"
    # Helm's --wait takes a DaemonSet whose status is not yet written for ready.
    def ready():
        pod = n.exporter_pod()
        conditions = pod and pod["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and pod
    try:
        pod = wait_for(180, "the exporter's pod Ready", ready, every=1)
    except AssertionError:
        raise AssertionError(f"not Ready: {n.exporter_pod()}; events: {n.kubectl('get', 'events', '-n', MONITORING)}")
    kinds = n.kubectl("get", "daemonset,service,servicemonitor,prometheusrule,serviceaccount", "-n", MONITORING,
                      "-o", "name").split()
    return f"helm install (defaults): pod {pod['metadata']['name']} Ready on {pod['spec']['nodeName']}; objects {kinds}"


def check_scrape(n, a, state):
    """/metrics through the Service's endpoints; every collector succeeds; another pod's
    process is read to its heap (hostPID, the two capabilities under the runtime's default
    seccomp profile: /proc/PID/mem, pagemap)."""
    svc = n.get("endpointslices", "-n", MONITORING, "-l", f"kubernetes.io/service-name={RELEASE}")["items"]
    addrs = [(e["addresses"][0], p["port"]) for s in svc for e in s["endpoints"] for p in s["ports"] if p["name"] == "metrics"]
    assert len(addrs) == 1, f"service endpoints: {addrs}"
    ip, port = addrs[0]
    s = parse(http_get(f"http://{ip}:{port}/metrics"))
    collectors = {l["collector"]: v for l, v in pick(s, "membloat_scrape_collector_success")}
    failed = {c: v for c, v in collectors.items() if v != 1}
    # kmsg is off in the chart's defaults: it needs a privileged container.
    assert len(collectors) >= 8 and not failed and "kmsg" not in collectors, f"collectors: {collectors}"
    pause = pick(s, "membloat_group_processes", group="pause")
    assert pause and pause[0][1] >= 2, f"pause processes seen: {pause}"
    pid = state["hoarder_pid"]
    free = pick(s, "membloat_process_heap_free_bytes", pid=str(pid))
    allocator = pick(s, "membloat_process_allocator_info", pid=str(pid))
    assert free and allocator, f"the hoarder's (pid {pid}) heap not read: {free} {allocator}"
    errors = {l.get("reason"): v for l, v in pick(s, "membloat_scan_errors_total") if v}
    # The node's own stripped Go binaries (containerd, the kubelet) are a vendor's builds:
    # /explain tells them in coverage, never as a finding below 1 GiB of RSS.
    d = json.loads(http_get(f"http://{ip}:{port}/explain", accept="application/json"))
    small = [f for f in d["findings"] if f["kind"].endswith("_unmeasured")
             and (f["process"]["rss_bytes"] or 0) < 1 << 30]
    assert not small, f"unmeasured heaps below 1 GiB as findings: {small}"
    unread = d["coverage"]["unmeasured_heaps"]
    return (f"{ip}:{port} through service {RELEASE}: {len(collectors)} collectors succeed {sorted(collectors)}; "
            f"{pause[0][1]:.0f} pause processes; the hoarder's heap read (pid {pid}, {allocator[0][0]}); scan errors {errors}; "
            f"unmeasured heaps in coverage: {[(u['runtime'], u['reason'], u['processes'], u['comms']) for u in unread]}")


def check_hoarding_pod(n, a, state):
    """A pod hoarding glibc memory under a memory limit: named as Kubernetes names it, its
    limit the pod spec's, its hoarded bytes glibc's own count."""
    n.kubectl("apply", "-f", "-", input=pod_manifest("hoarder", "membloat-heap:1", ["main", "48", "160"], limit="384Mi"))
    pod = running_pod(n, "hoarder")
    fordblks = int(logs_line(n, "hoarder", "ready").split()[1])
    cg, cid, uid, qos = container_cgroup(n, pod, "hoarder")
    pids = cgroup_pids(cg)
    def measured():
        s = n.after_scans(1)
        h = pick(s, "membloat_cgroup_hoarded_bytes", cgroup=cg)
        return h and h[0][1] > 0 and s
    s = wait_for(180, "the hoarder measured", measured, every=1)
    info = pick(s, "membloat_cgroup_info", cgroup=cg)
    assert len(info) == 1, f"cgroup_info for {cg}: {pick(s, 'membloat_cgroup_info')}"
    l = info[0][0]
    assert (l["pod_uid"], l["container_id"], l["qos_class"]) == (uid, cid, qos), f"{l} against kubectl's {uid} {cid} {qos}"
    limit = one(s, "membloat_cgroup_memory_limit_bytes", cgroup=cg)
    spec = 384 * MIB
    assert limit == spec, f"limit {limit}, pod spec {spec}"
    hoarded = one(s, "membloat_cgroup_hoarded_bytes", cgroup=cg)
    free = one(s, "membloat_group_heap_free_bytes", group="heap")
    assert fordblks - 4096 - 32 <= free <= fordblks, f"heap free {free} against glibc's fordblks {fordblks}"
    assert 0.9 * fordblks <= hoarded <= fordblks, f"hoarded {hoarded} against fordblks {fordblks}"
    state["hoarder"] = (cg, hoarded)
    state["hoarder_pid"] = pids[0]
    return (f"pod {uid} container {cid[:12]} qos {qos} pid {pids}: cgroup_info equal to kubectl's; "
            f"limit {limit / MIB:.0f} MiB = spec; hoarded {hoarded / MIB:.1f} MiB, heap free {free / MIB:.1f}, fordblks {fordblks / MIB:.1f}")


def present_bytes(pid, start, end):
    """Bytes of pages present in [start, end) of `pid`, from its pagemap."""
    present = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            a, b = (int(x, 16) for x in line.split()[0].split("-"))
            lo, hi = max(a, start), min(b, end)
            if lo >= hi:
                continue
            pm.seek(lo // 4096 * 8)
            raw = pm.read((hi - lo) // 4096 * 8)
            present += sum(1 for k in range(0, len(raw), 8) if raw[k + 7] & 0x80) * 4096
    return present


def jcmd_range(jcmd, pid):
    """The Java heap's reserved range as `jcmd PID GC.heap_info` prints it (G1:
    `[start, end)`), asked from the host of a JVM in a container."""
    out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
    addrs = []
    for line in out.splitlines():
        if line.strip().startswith("Metaspace"):
            break
        addrs += [int(w, 16) for w in re.findall(r"0x[0-9a-f]+", line)]
    assert addrs, f"jcmd {pid} GC.heap_info: {out!r}"
    return min(addrs), max(addrs)


def check_jvm_pod(n, a):
    """A JVM pod (JDK 21, G1): its held heap measured through the pod as on the host,
    against the truth the host's JVM test takes: the pages present in the heap's range
    (jcmd from the host, pagemap) less the bytes its MemoryPoolMXBeans count used."""
    n.kubectl("apply", "-f", "-", input=pod_manifest(
        "jvm", "membloat-java:1", ["256", "32"], limit="1536Mi",
        env={"JDK_JAVA_OPTIONS": "-Xms16m -Xmx1g -XX:+UseG1GC"}))
    pod = running_pod(n, "jvm")
    ready = logs_line(n, "jvm", "ready", seconds=180)
    pools = [p.split(":") for p in ready.split()[1:]]
    heap = [(name, int(c), int(u)) for name, kind, c, u, _ in pools if kind == "Heap_memory"]
    assert heap, f"no heap pool in {ready!r}"
    used = sum(u for _, _, u in heap)
    cg, cid, uid, qos = container_cgroup(n, pod, "jvm")
    (pid,) = cgroup_pids(cg)
    start, end = jcmd_range(os.path.join(a.java_home, "bin", "jcmd"), pid)

    def measured():
        s = n.after_scans(1)
        h = pick(s, "membloat_process_runtime_held_bytes", pid=str(pid), runtime="jvm")
        return h and (s, h[0][1])
    s, held = wait_for(240, "the JVM's held heap measured", measured, every=1)
    truth = present_bytes(pid, start, end) - used
    assert abs(held - truth) <= 0.05 * truth + 4 * MIB, f"held {held} against {truth} ({heap})"
    by_cgroup = one(s, "membloat_cgroup_runtime_held_bytes", cgroup=cg)
    assert by_cgroup == held, f"the container's held {by_cgroup}, its JVM's {held}"
    return (f"pid {pid} in pod {uid}: held {held / MIB:.1f} MiB, truth {truth / MIB:.1f} MiB (present in "
            f"[{start:#x}, {end:#x}) less used; pools {', '.join(f'{p} {c / MIB:.0f}/{u / MIB:.0f}' for p, c, u in heap)}); "
            f"the container's held equal")


class Attached:
    """`kubectl attach -i` to a pod's container: lines written to its stdin, lines read
    from its stdout (through the API server and the kubelet)."""

    def __init__(self, n, pod):
        self.p = subprocess.Popen([n.a.kubenode, "kubectl", f"--kubeconfig={n.admin}", "attach", "-i", "-q",
                                   "-n", NS, pod], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            with self.cv:
                self.lines.append(line.strip())
                self.cv.notify_all()

    def ask(self, line, seconds=60):
        with self.cv:
            before = len(self.lines)
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        with self.cv:
            assert self.cv.wait_for(lambda: any(l.startswith("{") for l in self.lines[before:]), seconds), \
                f"no answer to {line!r} in {seconds} s: {self.lines[-3:]}"
            return json.loads([l for l in self.lines[before:] if l.startswith("{")][0])

    def close(self):
        self.p.kill()
        self.p.wait()


def check_go_pod(n, a):
    """A Go pod: its free heap measured through the pod as on the host, equal to what the
    runtime's own runtime/metrics said before and after the read."""
    n.kubectl("apply", "-f", "-", input=pod_manifest("gofree", "membloat-gofree:1", ["4"], limit="1Gi", stdin=True))
    pod = running_pod(n, "gofree")
    logs_line(n, "gofree", "ready", seconds=180)
    cg, cid, uid, qos = container_cgroup(n, pod, "gofree")
    (pid,) = cgroup_pids(cg)
    prog = Attached(n, "gofree")
    try:
        seen = []
        for _ in range(12):
            before = prog.ask("")["/memory/classes/heap/free:bytes"]
            s = n.after_scans(2)
            after = prog.ask("")["/memory/classes/heap/free:bytes"]
            served = pick(s, "membloat_process_go_heap_free_bytes", pid=str(pid))
            served = served and served[0][1]
            seen.append((before, served, after))
            if before == after == served:
                held = one(s, "membloat_cgroup_runtime_held_bytes", cgroup=cg)
                return (f"pid {pid} in pod {uid}: free heap {served / MIB:.1f} MiB = runtime/metrics "
                        f"before and after; container's held {held / MIB:.1f} MiB")
        raise AssertionError(f"the served free heap never equalled the runtime's (before, served, after): {seen}")
    finally:
        prog.close()


class Prometheus:
    """Debian's Prometheus, configured from the chart's objects as the API server holds
    them, the way the Prometheus Operator turns them into configuration: each endpoint of
    the ServiceMonitor a scrape job over the endpoints of the Services its selector
    picks (file_sd here: Debian's build has no Kubernetes discovery), with the operator's
    target labels and the ServiceMonitor's relabelings; the PrometheusRule's groups as a
    rule file."""

    def __init__(self, n, a):
        self.n = n
        self.dir = n.path("prometheus")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        sm = n.get("servicemonitor", "-n", MONITORING, RELEASE)
        rule = n.get("prometheusrule", "-n", MONITORING, RELEASE)
        with open(os.path.join(self.dir, "rules.json"), "w") as f:
            json.dump({"groups": rule["spec"]["groups"]}, f)
        self.sm = sm
        jobs = []
        for i, ep in enumerate(sm["spec"]["endpoints"]):
            names = {"sourceLabels": "source_labels", "targetLabel": "target_label", "action": "action",
                     "regex": "regex", "replacement": "replacement", "separator": "separator"}
            relabel = [{names[k]: v for k, v in r.items()} for r in ep.get("relabelings", [])]
            jobs.append({"job_name": f"serviceMonitor/{MONITORING}/{RELEASE}/{i}",
                         "scrape_interval": ep.get("interval", "30s"),
                         "scrape_timeout": ep.get("scrapeTimeout", "10s"),
                         "file_sd_configs": [{"files": [os.path.join(self.dir, f"targets-{i}.json")],
                                              "refresh_interval": "1s"}],
                         "relabel_configs": [{"source_labels": ["__meta_job"], "target_label": "job"}, *relabel]})
        self.targets()
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            json.dump({"global": {"evaluation_interval": "5s"},
                       "rule_files": [os.path.join(self.dir, "rules.json")], "scrape_configs": jobs}, f)
        self.p = n.start("prometheus", ["prometheus", f"--config.file={self.dir}/prometheus.yml",
                                        f"--storage.tsdb.path={self.dir}/data",
                                        f"--web.listen-address=127.0.0.1:{self.port}"])

    def targets(self):
        """The ServiceMonitor's targets as the API server has them now: its Services'
        EndpointSlices, each ready endpoint with its pod's meta labels."""
        sm = self.sm["spec"]
        ns = sm.get("namespaceSelector", {}).get("matchNames", [MONITORING])
        sel = ",".join(f"{k}={v}" for k, v in sm["selector"]["matchLabels"].items())
        for i, ep in enumerate(sm["endpoints"]):
            groups = []
            for namespace in ns:
                for svc in self.n.get("services", "-n", namespace, "-l", sel)["items"]:
                    job = svc["metadata"]["labels"].get(sm.get("jobLabel", ""), svc["metadata"]["name"])
                    slices = self.n.get("endpointslices", "-n", namespace, "-l",
                                        f"kubernetes.io/service-name={svc['metadata']['name']}")["items"]
                    for sl in slices:
                        for port in sl["ports"]:
                            if port["name"] != ep["port"]:
                                continue
                            for e in sl["endpoints"]:
                                if not e.get("conditions", {}).get("ready"):
                                    continue
                                groups.append({"targets": [f"{e['addresses'][0]}:{port['port']}"], "labels": {
                                    "__meta_job": job, "namespace": namespace, "service": svc["metadata"]["name"],
                                    "endpoint": ep["port"], "pod": e.get("targetRef", {}).get("name", ""),
                                    "__meta_kubernetes_pod_node_name": e.get("nodeName", "")}})
            path = os.path.join(self.dir, f"targets-{i}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(groups, f)
            os.rename(path + ".tmp", path)
        return groups

    def api(self, path):
        return json.loads(http_get(f"http://127.0.0.1:{self.port}{path}"))

    def query(self, q):
        return self.api("/api/v1/query?" + urllib.parse.urlencode({"query": q}))["data"]["result"]

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait()


def check_prometheus(n, prom, state):
    """Prometheus scrapes the exporter's pod through the ServiceMonitor; the rules of the
    PrometheusRule load and evaluate."""
    def up():
        try:
            got = prom.query('up{job="membloat"}')
        except OSError:
            return False
        return got and got[0]["value"][1] == "1" and got
    got = wait_for(120, "the exporter's target up", up, every=1)
    labels = got[0]["metric"]
    assert labels["instance"] == NODE, f"instance {labels}: the ServiceMonitor's relabeling names the node"
    pod = n.exporter_pod()
    assert labels["pod"] == pod["metadata"]["name"] and labels["namespace"] == MONITORING, labels
    rules = prom.api("/api/v1/rules")["data"]["groups"]
    bad = [r["name"] for g in rules for r in g["rules"] if r.get("health") != "ok" and r.get("lastError")]
    count = sum(len(g["rules"]) for g in rules)
    assert count > 0 and not bad, f"rules: {count}, failing {bad}"
    cg, hoarded = state["hoarder"]
    def stored():
        got = prom.query(f'membloat_cgroup_hoarded_bytes{{cgroup="{cg}"}}')
        return got and got
    got = wait_for(90, "the hoarder's series in Prometheus", stored, every=1)
    return f"up{{job=membloat}} 1 with {labels}; {count} rules loaded, none failing; hoarder's hoarded {float(got[0]['value'][1]) / MIB:.1f} MiB stored"


def check_oom_kill(n, a, prom):
    """A pod pushed past its limit: the kubelet reports it OOMKilled; the exporter's
    victim is that pod's container with what was measured of it before; the project's
    alert fires in Prometheus for it. Naming a victim needs the kernel log: the chart's
    collectors.kmsg.enabled (a privileged container), set here by `helm upgrade`."""
    r = subprocess.run([a.helm, "upgrade", RELEASE, a.chart, "--kubeconfig", n.admin, "-n", MONITORING,
                        "--set", "collectors.kmsg.enabled=true", "--wait", "--timeout", "5m"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"helm upgrade: {r.stderr}"
    def rolled():
        pod = n.exporter_pod()
        c = pod and pod["spec"]["containers"][0]
        ok = c and "--no-collector.kmsg" not in c["args"] and any(
            x["type"] == "Ready" and x["status"] == "True" for x in pod["status"].get("conditions", []))
        return ok and pod
    wait_for(180, "the exporter's pod rolled with kmsg", rolled, every=1)
    prom.targets()
    n.kubectl("apply", "-f", "-", input=pod_manifest("victim", "membloat-heap:1", ["grow", "48", "64"],
                                                     limit="192Mi", stdin=True))
    pod = running_pod(n, "victim")
    fordblks = int(logs_line(n, "victim", "ready").split()[1])
    cg, cid, uid, qos = container_cgroup(n, pod, "victim")
    (pid,) = cgroup_pids(cg)

    def measured():
        s = n.after_scans(1)
        h = pick(s, "membloat_group_hoarded_bytes", group="heap", method="measured")
        c = pick(s, "membloat_cgroup_hoarded_bytes", cgroup=cg)
        ok = pick(s, "membloat_scrape_collector_success", collector="kmsg")
        return h and c and c[0][1] > 0 and ok and ok[0][1] == 1 and (s, c[0][1])
    s, before = wait_for(180, "the victim measured", measured, every=1)
    prog = subprocess.Popen([a.kubenode, "kubectl", f"--kubeconfig={n.admin}", "attach", "-i", "-q", "-n", NS,
                             "victim"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        prog.stdin.write("256\n")
        prog.stdin.flush()

        def killed():
            p = n.get("pod", "victim", "-n", NS)
            t = (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated")
            return t and (p, t)
        p, term = wait_for(120, "the victim terminated", killed, every=1)
    finally:
        prog.kill()
        prog.wait()
    assert term["reason"] == "OOMKilled", f"the kubelet says {term}"

    def named():
        s = n.scrape()
        v = pick(s, "membloat_oom_last_victim_info", pid=str(pid))
        return v and (s, v[0][0])
    s, info = wait_for(120, "the victim named", named, every=1)
    assert info["memory_cgroup"] == cg, f"victim's cgroup {info['memory_cgroup']}, kubectl's container {cg}"
    assert info["constraint"] == "memory_cgroup" and info["comm"] == "heap", info
    at_kill = one(s, "membloat_oom_last_victim_measured_bytes", kind="hoarded")
    assert at_kill == before, f"hoarded at the kill {at_kill}, measured before {before}"

    def firing():
        got = prom.query('ALERTS{alertname="MembloatContainerOOMKill",alertstate="firing"}')
        return got and got
    alerts = wait_for(180, "MembloatContainerOOMKill firing", firing, every=2)
    assert len(alerts) == 1, alerts
    m = alerts[0]["metric"]
    assert m["cgroup"] == cg and m["pid"] == str(pid) and m["instance"] == NODE, m
    return (f"pod {uid} container {cid[:12]}: kubelet {term['reason']} (exit {term.get('exitCode')}); exporter's victim "
            f"pid {pid} in {cg[:40]}..., hoarded before {before / MIB:.1f} MiB (fordblks {fordblks / MIB:.1f}); "
            f"MembloatContainerOOMKill firing for it")


def summary_memory(n):
    """The kubelet's own eviction signals, from its /stats/summary: the node's
    availableBytes and the pods' system container's (allocatableMemory.available)."""
    st = json.loads(n.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/stats/summary?only_cpu_and_memory=true"))
    pods = [c for c in st["node"].get("systemContainers", []) if c["name"] == "pods"]
    return {"memory.available": st["node"]["memory"]["availableBytes"],
            "allocatableMemory.available": pods[0]["memory"]["availableBytes"] if pods else None}


def node_condition(n, kind):
    c = [c for c in n.get("node", NODE)["status"]["conditions"] if c["type"] == kind][0]
    return c["status"], c.get("lastTransitionTime")


def check_eviction(n, a, prom):
    """The kubelet's eviction signals as the exporter computes them equal the kubelet's
    own (/stats/summary, read before and after one scan) within 1 % or 8 MiB, and the
    thresholds are the kubelet's configuration. Then the kubelet is restarted with a soft
    memory.available threshold 700 MiB under the current value (grace period 1 h: nothing
    is evicted): the exporter reads it, and its warning fires while the kubelet's
    MemoryPressure is false; 1.5 GiB allocated on the host then takes the exporter's
    headroom below 0, and the kubelet sets MemoryPressure."""
    said = []
    # A file kept hot in the page cache beside the pods' memory: read twice, it is active.
    hot = n.path("hot-file")
    with open(hot, "wb") as f:
        f.write(os.urandom(1 << 20) * 256)
    for _ in range(2):
        with open(hot, "rb") as f:
            while f.read(1 << 20):
                pass
    for signal in ("memory.available", "allocatableMemory.available"):
        for attempt in range(5):
            before = summary_memory(n)[signal]
            s = n.after_scans(1)
            after = summary_memory(n)[signal]
            ours = one(s, "membloat_kubelet_memory_available_bytes", signal=signal)
            off = min(abs(ours - before), abs(ours - after))
            if off <= max(0.01 * max(before, after), 8 * MIB):
                break
        else:
            raise AssertionError(f"{signal}: exporter {ours}, kubelet {before} then {after}")
        said.append(f"{signal} {ours / MIB:.0f} MiB, kubelet's {before / MIB:.0f}/{after / MIB:.0f} (off {off / MIB:.1f})")
    info = pick(s, "membloat_kubelet_info")
    assert len(info) == 1 and info[0][0]["thresholds_from"] == "config" and info[0][0]["pods_cgroup"] == "/kubepods", info
    hard = one(s, "membloat_kubelet_eviction_threshold_bytes", signal="memory.available", kind="hard")
    assert hard == 100 * MIB, f"hard threshold {hard}: the configuration says 100Mi"
    assert one(s, "membloat_kubelet_eviction_threshold_bytes", signal="allocatableMemory.available", kind="hard") == hard
    active = one(s, "membloat_kubelet_working_set_bytes", signal="memory.available", part="active_file")
    assert active >= 200 * MIB, f"the hot file is not in the node's active page cache: {active}"

    # A soft threshold 700 MiB under memory.available, as the kubelet computes it.
    available = summary_memory(n)["memory.available"]
    threshold = available - 700 * MIB
    config = dict(n.kubelet_config, evictionSoft={"memory.available": str(threshold)},
                  evictionSoftGracePeriod={"memory.available": "1h"})
    old_pid = info[0][0]["pid"]
    n.restart_kubelet(config)
    def read_again():
        s = n.after_scans(1)
        got = pick(s, "membloat_kubelet_eviction_threshold_bytes", signal="memory.available", kind="soft")
        return got and pick(s, "membloat_kubelet_info")[0][0]["pid"] != old_pid and s
    s = wait_for(120, "the exporter reading the restarted kubelet", read_again, every=1)
    soft = one(s, "membloat_kubelet_eviction_threshold_bytes", signal="memory.available", kind="soft")
    assert soft == threshold, f"soft threshold {soft}, configured {threshold}"
    # The fleet dashboard's panel of the nodes nearest eviction draws this node
    # (tests/common/dashboards.rs NEEDS_A_KUBELET), once Prometheus has the new threshold.
    grafana = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "grafana", "membloat-fleet.json")
    with open(grafana) as f:
        panel = [p for p in json.load(f)["panels"] if p.get("title") == "Nodes nearest eviction: kubelet headroom"]
    assert len(panel) == 1, "the fleet dashboard's eviction panel"
    for t in panel[0]["targets"]:
        q = t["expr"].replace("$cluster", ".*").replace("$job", "membloat").replace("$node", NODE)
        drawn = wait_for(120, f"the panel's query {q}", lambda: prom.query(q), every=2)
        assert [r["metric"].get("instance") for r in drawn] == [NODE], drawn
    def warned():
        got = prom.query('ALERTS{alertname="MembloatKubeletEvictionHeadroomLow",alertstate="firing",signal="memory.available",kind="soft"}')
        return got and got
    wait_for(300, "MembloatKubeletEvictionHeadroomLow firing", warned, every=2)
    pressure, _ = node_condition(n, "MemoryPressure")
    assert pressure == "False", f"MemoryPressure {pressure} before the exporter warned"
    headroom = one(n.after_scans(1), "membloat_kubelet_eviction_headroom_bytes", signal="memory.available", kind="soft")
    said.append(f"soft threshold {threshold / MIB:.0f} MiB read; warned at headroom {headroom / MIB:.0f} MiB, MemoryPressure False")

    # 1.5 GiB more on the host: below the threshold.
    eater = subprocess.Popen([sys.executable, "-c",
                              "import sys, time\nb = bytearray(1536 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
                              "print('ready', flush=True)\nsys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert eater.stdout.readline().strip() == "ready"
        def met():
            h = one(n.after_scans(1), "membloat_kubelet_eviction_headroom_bytes", signal="memory.available", kind="soft")
            return h < 0 and h
        headroom = wait_for(120, "the exporter's headroom below 0", met, every=1)
        def pressed():
            status, at = node_condition(n, "MemoryPressure")
            return status == "True" and at
        at = wait_for(120, "the kubelet's MemoryPressure", pressed, every=1)
        kubelet = summary_memory(n)["memory.available"]
        assert kubelet < threshold, f"the kubelet's memory.available {kubelet} is not under {threshold}"
        said.append(f"1.5 GiB allocated: headroom {headroom / MIB:.0f} MiB, kubelet's memory.available "
                    f"{(kubelet - threshold) / MIB:.0f} MiB from the threshold, MemoryPressure True at {at}")
    finally:
        eater.kill()
        eater.wait()
        os.unlink(hot)
    return "; ".join(said)


# The kubelet sets these at its start, as its defaults for a node (--protect-kernel-defaults
# off); the host gets its own back when the node goes.
KUBELET_SYSCTLS = ["vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"]


def sysctls():
    saved = {}
    for k in KUBELET_SYSCTLS:
        try:
            with open(f"/proc/sys/{k}") as f:
                saved[k] = f.read().strip()
        except OSError:
            pass
    return saved


def restore(saved):
    for k, v in saved.items():
        try:
            with open(f"/proc/sys/{k}", "w") as f:
                f.write(v)
        except OSError as e:
            log(f"could not restore {k}={v}: {e}")


def main():
    ap = argparse.ArgumentParser()
    for f in ["kubenode", "helm", "chart", "image", "crds", "repro", "java-home", "classes", "work", "out", "k8s-source"]:
        ap.add_argument("--" + f, required=True)
    a = ap.parse_args()
    n = Node(a)
    r = Run()
    state = {}
    prom = None
    host = sysctls()
    try:
        ok = r.check("node", lambda: (n.up(), f"node Ready: {n.facts}")[1])
        if ok and r.check("install", lambda: check_install(n, a)):
            r.check("hoarding_pod", lambda: check_hoarding_pod(n, a, state))
            r.check("scrape", lambda: check_scrape(n, a, state))
            r.check("jvm_pod", lambda: check_jvm_pod(n, a))
            r.check("go_pod", lambda: check_go_pod(n, a))
            prom = Prometheus(n, a)
            r.check("prometheus", lambda: check_prometheus(n, prom, state))
            r.check("oom_kill", lambda: check_oom_kill(n, a, prom))
            r.check("eviction", lambda: check_eviction(n, a, prom))
        hold = os.environ.get("MEMBLOAT_CLUSTER_HOLD")
        if hold:
            # For a person looking into a failure: the node stays until this file goes.
            open(hold, "w").close()
            log(f"holding the node: KUBECONFIG={n.admin}; rm {hold} to end")
            while os.path.exists(hold):
                time.sleep(1)
    finally:
        if prom:
            prom.stop()
        n.down()
        restore(host)
        with open(a.out, "w") as f:
            json.dump({"facts": n.facts, "checks": r.checks}, f, indent=1)
    sys.exit(0 if all(c["ok"] for c in r.checks) else 1)


if __name__ == "__main__":
    main()
