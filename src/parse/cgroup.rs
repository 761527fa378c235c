//! `/proc/PID/cgroup`.

use super::ParseError;

/// The cgroup that holds the process's memory: the v1 line whose controllers include
/// `memory`, else the v2 line `0::/path`. An error when neither is there.
pub fn memory_cgroup(text: &str) -> Result<&str, ParseError> {
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "memory") {
            return Ok(path);
        }
        if id == "0" && controllers.is_empty() {
            unified = Some(path);
        }
    }
    unified.ok_or(ParseError::Missing("memory or unified cgroup line"))
}

/// What a cgroup path says about its owner, in labels that join with kube-state-metrics
/// (`kube_pod_info{uid}`, `kube_pod_container_info{container_id}`) and with systemd.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The pod's UID with dashes (systemd's cgroup driver writes underscores).
    pub pod_uid: String,
    /// The container's 64-hex ID, without the runtime's `containerd://` scheme.
    pub container_id: String,
    /// `containerd`, `cri-o` or `docker` when the path names it.
    pub runtime: &'static str,
    /// `guaranteed`, `burstable` or `besteffort` for a pod's cgroups.
    pub qos_class: &'static str,
    /// The systemd unit (`nginx.service`) of a cgroup that is not a container.
    pub systemd_unit: String,
}

fn is_hex_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID as Kubernetes writes it: 8-4-4-4-12 hex.
fn pod_uid(s: &str) -> Option<String> {
    let uid = s.replace('_', "-");
    let groups: Vec<usize> = uid.split('-').map(str::len).collect();
    let hex = uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    (hex && groups == [8, 4, 4, 4, 12]).then_some(uid)
}

/// Reads the owner out of a cgroup path, for cgroup v1 and v2, the cgroupfs and systemd
/// drivers, and containerd, CRI-O and Docker:
///
/// - `/kubepods/burstable/pod<uid>/<id>` (cgroupfs driver; the runtime is not named)
/// - `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<u_i_d>.slice/
///   cri-containerd-<id>.scope` (systemd driver; `crio-<id>.scope`, `docker-<id>.scope`)
/// - `/docker/<id>`, `/system.slice/docker-<id>.scope` (Docker without Kubernetes)
/// - `/system.slice/nginx.service` (a systemd unit)
pub fn identity(path: &str) -> Identity {
    let mut id = Identity::default();
    let mut kube = false;
    let mut parent = "";
    for c in path.split('/').filter(|c| !c.is_empty()) {
        let slice = c.strip_suffix(".slice");
        if c == "kubepods" || c == "kubepods.slice" {
            kube = true;
        } else if kube && matches!(c, "burstable" | "kubepods-burstable.slice") {
            id.qos_class = "burstable";
        } else if kube && matches!(c, "besteffort" | "kubepods-besteffort.slice") {
            id.qos_class = "besteffort";
        } else if let Some(uid) = kube
            .then(|| {
                c.strip_prefix("pod")
                    .or_else(|| slice.and_then(|s| s.rsplit_once("-pod")).map(|(_, u)| u))
            })
            .flatten()
            .and_then(pod_uid)
        {
            id.pod_uid = uid;
            if id.qos_class.is_empty() {
                id.qos_class = "guaranteed";
            }
        } else if let Some(scope) = c.strip_suffix(".scope") {
            let named = [
                ("cri-containerd-", "containerd"),
                ("crio-", "cri-o"),
                ("docker-", "docker"),
            ];
            match named.iter().find_map(|(p, rt)| {
                scope
                    .strip_prefix(p)
                    .filter(|i| is_hex_id(i))
                    .map(|i| (i, *rt))
            }) {
                Some((cid, rt)) => {
                    id.container_id = cid.to_string();
                    id.runtime = rt;
                    id.systemd_unit.clear();
                }
                None => id.systemd_unit = c.to_string(),
            }
        } else if is_hex_id(c) && (!id.pod_uid.is_empty() || parent == "docker") {
            id.container_id = c.to_string();
            if parent == "docker" {
                id.runtime = "docker";
            }
        } else if c.ends_with(".service") {
            id.systemd_unit = c.to_string();
        }
        parent = c;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_memory_controller_wins() {
        // cgroup v1 as on this build machine (kernel 6.18).
        let v1 = "9:name=systemd:/\n4:memory:/docker/abc\n1:cpu:/\n";
        assert_eq!(memory_cgroup(v1), Ok("/docker/abc"));
    }

    #[test]
    fn v2_unified_line() {
        assert_eq!(
            memory_cgroup("0::/system.slice/sshd.service\n"),
            Ok("/system.slice/sshd.service")
        );
        assert!(memory_cgroup("").is_err());
        assert!(memory_cgroup("garbage").is_err());
    }

    #[test]
    fn kubernetes_docker_and_systemd_paths_name_their_owner() {
        let uid = "0d5b3b24-5f6a-4c1e-9a0b-3c2d1e0f9a8b";
        let u = uid.replace('-', "_");
        let cid = "4f2a".repeat(16);
        let cases = [
            // cgroupfs driver (v1 and v2 alike): the runtime is not in the path.
            (format!("/kubepods/burstable/pod{uid}/{cid}"), (uid, cid.as_str(), "", "burstable", "")),
            (format!("/kubepods/pod{uid}/{cid}"), (uid, cid.as_str(), "", "guaranteed", "")),
            (format!("/kubepods/besteffort/pod{uid}"), (uid, "", "", "besteffort", "")),
            // systemd driver: containerd, CRI-O, Docker.
            (
                format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{cid}.scope"),
                (uid, cid.as_str(), "containerd", "burstable", ""),
            ),
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{cid}.scope"),
                (uid, cid.as_str(), "cri-o", "besteffort", ""),
            ),
            (
                format!("/kubepods.slice/kubepods-pod{u}.slice/docker-{cid}.scope"),
                (uid, cid.as_str(), "docker", "guaranteed", ""),
            ),
            // Docker alone, and systemd units.
            (format!("/docker/{cid}"), ("", cid.as_str(), "docker", "", "")),
            (format!("/system.slice/docker-{cid}.scope"), ("", cid.as_str(), "docker", "", "")),
            ("/system.slice/nginx.service".into(), ("", "", "", "", "nginx.service")),
            ("/user.slice/user-1000.slice/session-3.scope".into(), ("", "", "", "", "session-3.scope")),
            // Look-alikes: no pod without kubepods, no container without a 64-hex ID.
            (format!("/pod{uid}/{cid}"), ("", "", "", "", "")),
            ("/kubepods/burstable/podnot-a-uid/abc".into(), ("", "", "", "burstable", "")),
            ("/".into(), ("", "", "", "", "")),
        ];
        for (path, (pod, container, runtime, qos, unit)) in cases {
            let id = identity(&path);
            assert_eq!(
                (
                    id.pod_uid.as_str(),
                    id.container_id.as_str(),
                    id.runtime,
                    id.qos_class,
                    id.systemd_unit.as_str()
                ),
                (pod, container, runtime, qos, unit),
                "{path}"
            );
        }
    }
}
