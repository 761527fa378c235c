//! The node's kubelet, and what its command line and files say of eviction: found once,
//! and again only when it restarts (the kubelet reads its configuration at its start).

use std::collections::BTreeMap;
use std::path::Path;

use crate::parse::kubelet::{self as k, Value};
use crate::source::{PidFile, Reason};

use super::super::Reader;

/// The configuration files and drop-ins read at most (a kubelet's are a few KiB).
const MAX_CONFIG_BYTES: usize = 1 << 20;
/// Drop-in files read at most.
const MAX_DROP_INS: usize = 64;

/// The one kubelet of the host: a process named `kubelet` outside every pod's cgroup
/// (a tenant's process of that name in a pod is not believed), with its start time.
/// `Ok(None)` where there is none; two or more outside pods are counted malformed and
/// none is used.
pub(super) fn search(r: &mut Reader) -> Option<(u32, u64)> {
    let (pids, _) = r.source.pids().ok()?;
    let mut found = None;
    for pid in pids {
        let Ok(comm) = r.source.read_pid(pid, "comm", r.buf) else {
            continue;
        };
        if comm.trim_end() != "kubelet" {
            continue;
        }
        let in_pod = r
            .source
            .read_pid(pid, "cgroup", r.buf)
            .map_or(true, |c| c.contains("kubepods"));
        if in_pod {
            continue;
        }
        let Some(start) = start_time(r, pid) else {
            continue;
        };
        if found.is_some() {
            r.count(Reason::Malformed, 1);
            return None;
        }
        found = Some((pid, start));
    }
    found
}

/// `/proc/PID/stat`'s start time (field 22): a pid reused by another process differs.
pub(super) fn start_time(r: &mut Reader, pid: u32) -> Option<u64> {
    let text = r.source.read_pid(pid, "stat", r.buf).ok()?;
    let (_, after_comm) = text.rsplit_once(')')?;
    after_comm.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// What the kubelet evicts on, as it computed it at its start.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Plan {
    /// `memory.available`'s hard and soft thresholds.
    pub hard: Option<Value>,
    pub soft: Option<Value>,
    /// `enforceNodeAllocatable` has `pods`: the hard one applies to
    /// `allocatableMemory.available` too.
    pub allocatable: bool,
    /// The pods' cgroup (`/kubepods`, `/kubepods.slice`), under the hierarchy's root;
    /// `None` without QoS cgroups.
    pub pods: Option<String>,
    /// Where the thresholds came from: `config`, `flags` or `none` (no configuration file
    /// and no flag: the kubelet has no hard threshold).
    pub from: &'static str,
}

/// The kubelet `pid`'s plan, from its command line and files, as the kubelet merges them:
/// the configuration file (with the default `memory.available<100Mi` where it sets no
/// `evictionHard`, merged in where `mergeDefaultEvictionSettings` asks), its drop-ins in
/// name order, then the flags.
pub(super) fn plan(r: &mut Reader, pid: u32) -> Result<Plan, Reason> {
    let cmdline = r
        .source
        .read_pid(pid, "cmdline", r.buf)
        .map_err(|e| e.process_reason())?;
    let c = k::command_line(cmdline).map_err(|_| Reason::Malformed)?;
    let remote = r.source.remote_mounts(pid, &mut crate::source::Buffer::default());
    let mut doc = None;
    if let Some(path) = &c.config {
        let mut d = k::document(&read_file(r, pid, path, remote.as_ref())?)
            .map_err(|_| Reason::Malformed)?;
        let s = k::settings(&d).map_err(|_| Reason::Malformed)?;
        let hard = match s.eviction_hard {
            None => Some(BTreeMap::new()),
            Some(h) if s.merge_default_eviction == Some(true) => Some(h),
            Some(_) => None,
        };
        if let Some(mut hard) = hard {
            hard.entry("memory.available".to_string())
                .or_insert_with(|| k::DEFAULT_MEMORY_AVAILABLE.to_string());
            let patch = serde_yaml_ng::to_value(BTreeMap::from([("evictionHard", hard)]))
                .map_err(|_| Reason::Malformed)?;
            k::merge(&mut d, &patch);
        }
        doc = Some(d);
    }
    if let Some(dir) = &c.config_dir {
        for name in drop_ins(r, pid, dir) {
            let text = read_file(r, pid, &format!("{dir}/{name}"), remote.as_ref())?;
            let patch = k::document(&text).map_err(|_| Reason::Malformed)?;
            k::merge(doc.get_or_insert(serde_yaml_ng::Value::Null), &patch);
        }
    }
    let files = match &doc {
        Some(d) => k::settings(d).map_err(|_| Reason::Malformed)?,
        None => k::Settings::default(),
    };
    let s = files.clone().overridden_by(&c.flags);
    let from = if c.flags.eviction_hard.is_some() || c.flags.eviction_soft.is_some() {
        "flags"
    } else if doc.is_some() {
        "config"
    } else {
        "none"
    };
    let memory = |m: &Option<BTreeMap<String, String>>| -> Result<Option<Value>, Reason> {
        match m.as_ref().and_then(|m| m.get("memory.available")) {
            Some(v) => k::threshold(v).map_err(|_| Reason::Malformed),
            None => Ok(None),
        }
    };
    Ok(Plan {
        hard: memory(&s.eviction_hard)?,
        soft: memory(&s.eviction_soft)?,
        allocatable: s
            .enforce_node_allocatable
            .as_ref()
            .is_none_or(|e| e.iter().any(|x| x == "pods")),
        pods: s
            .cgroups_per_qos
            .unwrap_or(true)
            .then(|| pods_cgroup(s.cgroup_root.as_deref(), s.cgroup_driver.as_deref())),
        from,
    })
}

/// The pods' cgroup as the kubelet names it: `kubepods` under `--cgroup-root` (default
/// `/`) with the cgroupfs driver; with systemd's, `kubepods.slice`, or under a root
/// slice `a-b.slice` the nested `a.slice/a-b.slice/a-b-kubepods.slice`.
pub(crate) fn pods_cgroup(root: Option<&str>, driver: Option<&str>) -> String {
    let root = root.unwrap_or("/").trim_end_matches('/');
    if driver != Some("systemd") {
        return format!("{root}/kubepods");
    }
    let last = root.rsplit('/').next().unwrap_or("");
    let mut parts: Vec<&str> = last
        .strip_suffix(".slice")
        .unwrap_or(last)
        .split('-')
        .filter(|p| !p.is_empty())
        .collect();
    parts.push("kubepods");
    let mut path = String::new();
    for i in 1..=parts.len() {
        path.push('/');
        path.push_str(&parts[..i].join("-"));
        path.push_str(".slice");
    }
    path
}

/// A path of the kubelet's, as it resolves it: absolute in its root, relative to its
/// working directory; never on a FUSE or network mount; at most [`MAX_CONFIG_BYTES`].
fn read_file(
    r: &mut Reader,
    pid: u32,
    path: &str,
    remote: Option<&crate::parse::mountinfo::Remote>,
) -> Result<String, Reason> {
    let link = match path.strip_prefix('/') {
        Some(abs) => format!("root/{abs}"),
        None => format!("cwd/{path}"),
    };
    let file: PidFile = r
        .source
        .open_pid_local(pid, &link, remote)
        .map_err(|e| e.process_reason())?
        .ok_or(Reason::Denied)?;
    let mut buf = vec![0u8; MAX_CONFIG_BYTES + 1];
    let mut len = 0;
    while len < buf.len() {
        match file.read_at(len as u64, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(_) => return Err(Reason::Io),
        }
    }
    if len > MAX_CONFIG_BYTES {
        return Err(Reason::Malformed);
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|_| Reason::Malformed)
}

/// The `.conf` files of the kubelet's drop-in directory, in name order (at most
/// [`MAX_DROP_INS`]).
fn drop_ins(r: &mut Reader, pid: u32, dir: &str) -> Vec<String> {
    let link = match dir.strip_prefix('/') {
        Some(abs) => format!("root/{abs}"),
        None => format!("cwd/{dir}"),
    };
    let path = r.source.procfs().join(pid.to_string()).join(link);
    let mut names: Vec<String> = std::fs::read_dir(Path::new(&path))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".conf"))
        .take(MAX_DROP_INS)
        .collect();
    names.sort();
    names
}
