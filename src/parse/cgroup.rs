//! `/proc/PID/cgroup`.

/// The cgroup that holds the process's memory: the v1 line whose controllers include
/// `memory`, else the v2 line `0::/path`. `None` when neither is there.
pub fn memory_cgroup(text: &str) -> Option<&str> {
    let mut unified = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "memory") {
            return Some(path);
        }
        if id == "0" && controllers.is_empty() {
            unified = Some(path);
        }
    }
    unified
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_memory_controller_wins() {
        // cgroup v1 as on this build machine (kernel 6.18).
        let v1 = "9:name=systemd:/\n4:memory:/docker/abc\n1:cpu:/\n";
        assert_eq!(memory_cgroup(v1), Some("/docker/abc"));
    }

    #[test]
    fn v2_unified_line() {
        assert_eq!(
            memory_cgroup("0::/system.slice/sshd.service\n"),
            Some("/system.slice/sshd.service")
        );
        assert_eq!(memory_cgroup(""), None);
        assert_eq!(memory_cgroup("garbage"), None);
    }
}
