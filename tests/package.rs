//! The Debian package (scripts/deb.sh), installed as a host installs it: in a Debian 12
//! tree (scripts/debian-tree.sh, debootstrap) booted with systemd as PID 1 by
//! `systemd-nspawn --boot`, over a throw-away overlay. The package's postinst adds the
//! user and starts the unit; the exporter answers as that user with the unit's
//! sandbox; an upgrade restarts it and keeps the administrator's /etc/default; purge
//! leaves the tree as it was.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one of the repository's scripts and returns the path it prints last.
fn script(name: &str, env: &[(&str, &str)]) -> PathBuf {
    let out = Command::new(root().join("scripts").join(name))
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let text = succeeded(out, name);
    PathBuf::from(text.lines().last().unwrap().trim())
}

/// A booted container, powered off when dropped.
struct Booted {
    nspawn: Child,
    leader: u32,
}

impl Booted {
    fn boot(tree: &Path, debs: &Path) -> Booted {
        let mut nspawn = tool("systemd-nspawn")
            .arg("--directory")
            .arg(tree)
            .args([
                "--boot",
                "--register=no",
                "--keep-unit",
                "--private-network",
                "--volatile=overlay",
                "--machine=membloat-package-test",
            ])
            .arg(format!("--bind-ro={}:/debs", debs.display()))
            // The host's kernel log, as a host has it: the device and the capability the
            // unit grants its exporter to read it (nspawn gives neither by default).
            .args([
                "--bind-ro=/dev/kmsg",
                "--capability=CAP_SYSLOG",
                "--property=DeviceAllow=/dev/kmsg r",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let leader = loop {
            if let Some(pid) = child_of(nspawn.id()) {
                break pid;
            }
            if let Ok(Some(status)) = nspawn.try_wait() {
                panic!("systemd-nspawn exited: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no init in the container"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let c = Booted { nspawn, leader };
        // Until its bus is up, systemctl cannot ask (it prints nothing, or "offline" while
        // the manager is not running yet, as under load); then --wait waits for the boot.
        let state = loop {
            let out = c.sh("systemctl is-system-running --wait || true");
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let asked = !state.is_empty() && state != "offline";
            if asked || started.elapsed() > Duration::from_secs(60) {
                break state;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(
            state == "running" || state == "degraded",
            "the container's systemd is {state:?}: {}",
            String::from_utf8_lossy(&c.sh("systemctl --failed --no-legend").stdout)
        );
        c
    }

    /// `sh -c CMD` inside the container, as its root.
    fn sh(&self, cmd: &str) -> Output {
        Command::new("nsenter")
            .args(["-t", &self.leader.to_string(), "-a", "-r", "-w"])
            .args([
                "env",
                "-i",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "sh",
                "-c",
                cmd,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `sh -c CMD`, asserted to succeed; its stdout.
    fn out(&self, cmd: &str) -> String {
        let out = self.sh(cmd);
        succeeded(out.clone(), cmd);
        String::from_utf8(out.stdout).unwrap()
    }

    /// Waits until the exporter in the container serves `/metrics` on `port`.
    fn metrics(&self, port: u16) -> String {
        let started = Instant::now();
        loop {
            let out = self.sh(&format!("curl -sf http://127.0.0.1:{port}/metrics"));
            if out.status.success() {
                let text = String::from_utf8(out.stdout).unwrap();
                if text.contains("\nmembloat_processes_scanned ") {
                    return text;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "nothing on :{port}: {}",
                self.out("systemctl status membloat-exporter --no-pager -l || true")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn main_pid(&self) -> u32 {
        self.out("systemctl show -p MainPID --value membloat-exporter")
            .trim()
            .parse()
            .unwrap()
    }

    /// Every path under the places a package may write, and the users and groups: what
    /// purge must give back. dpkg's own records and logs are its business, and the
    /// `-` backups that adduser's tools leave of passwd, group and shadow are not the
    /// package's.
    fn snapshot(&self) -> String {
        self.out(
            "find /etc /usr /lib /var/lib /var/cache /opt /srv /home /root -xdev \
               \\( -path /var/lib/dpkg -o -path /var/cache/debconf \\) -prune -o -print \
               | grep -Ev '^/etc/(passwd|group|shadow|gshadow)-$' | sort; \
             getent passwd; getent group",
        )
    }
}

impl Drop for Booted {
    fn drop(&mut self) {
        // SIGTERM asks systemd-nspawn to shut the container down.
        // SAFETY: kill(2) takes two integers; the pid is our own child's, not yet reaped.
        unsafe { libc::kill(self.nspawn.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.nspawn.kill().ok();
        self.nspawn.wait().ok();
    }
}

/// The container's init: the child of `pid` once it has become systemd (systemd-nspawn
/// forks through helpers first).
fn child_of(pid: u32) -> Option<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    list.split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "systemd")
        })
}

fn value_in(text: &str, name: &str) -> f64 {
    value(text, name).unwrap_or_else(|| panic!("no {name}"))
}

/// `systemd-analyze security`'s overall exposure, from its last line.
fn exposure(text: &str) -> f64 {
    text.lines()
        .find_map(|l| l.split("Overall exposure level for ").nth(1))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {text}"))
}

#[test]
#[ignore = "needs root"]
fn the_package_installs_runs_upgrades_and_purges_in_a_booted_debian_12() {
    let debs = tempfile::tempdir().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let first = script("deb.sh", &[]);
    let next_version = format!("{version}+1");
    let next = script("deb.sh", &[("MEMBLOAT_DEB_VERSION", &next_version)]);
    for deb in [&first, &next] {
        std::fs::copy(deb, debs.path().join(deb.file_name().unwrap())).unwrap();
    }
    let tree = script("debian-tree.sh", &[]);

    // Today's exposure: the plain unit of deploy/systemd, scored offline on this host.
    let plain = tool("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(deploy("systemd/membloat_exporter.service"))
        .output()
        .unwrap();
    let plain = exposure(&String::from_utf8_lossy(&plain.stdout));

    let c = Booted::boot(&tree, debs.path());
    let before = c.snapshot();
    let name = |p: &Path| format!("/debs/{}", p.file_name().unwrap().to_str().unwrap());
    c.out(&format!("dpkg -i {}", name(&first)));

    // Started by the postinst, enabled, as the package's system user.
    let text = c.metrics(10293);
    assert!(
        value_in(&text, "membloat_processes_scanned") >= 3.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "membloat_scan_errors_total{collector=\"processes\",reason=\"permission_denied\"}"
        ),
        Some(0.0),
        "the unit's capabilities read every process: {text}"
    );
    kernel_log_is_read(&c, &text);
    assert!(text.contains(&format!("version=\"{version}\"")));
    assert_eq!(
        c.out("systemctl is-enabled membloat-exporter").trim(),
        "enabled"
    );
    let pid = c.main_pid();
    let status = c.out(&format!("cat /proc/{pid}/status"));
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .unwrap_or_else(|| panic!("no {k}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let uid = c.out("id -u membloat-exporter").trim().to_string();
    assert_eq!(field("Uid"), uid, "runs as the package's user");
    assert_ne!(uid, "0");
    // CAP_DAC_READ_SEARCH (2), CAP_SYS_PTRACE (19) and CAP_SYSLOG (34), nothing else; no
    // new privileges; a seccomp filter.
    assert_eq!(field("CapEff"), "0000000400080004");
    assert_eq!(field("CapBnd"), "0000000400080004");
    assert_eq!(field("NoNewPrivs"), "1");
    assert_eq!(field("Seccomp"), "2");
    let online = exposure(
        &c.out("systemd-analyze security --no-pager membloat-exporter.service 2>&1 || true"),
    );
    eprintln!("exposure: packaged unit {online} (booted), deploy/systemd unit {plain} (offline)");
    assert!(online <= plain, "{online} > {plain}");

    // The administrator's flags survive an upgrade, which restarts the exporter on them.
    c.out("echo 'ARGS=\"--web.listen-address=:10294 --scan.interval=2s\"' >> /etc/default/membloat-exporter");
    c.out(&format!("dpkg -i {}", name(&next)));
    let text = c.metrics(10294);
    assert!(value_in(&text, "membloat_processes_scanned") >= 3.0);
    assert_ne!(c.main_pid(), pid, "the upgrade restarted it");
    assert_eq!(
        c.out("dpkg-query -W -f '${Version}' membloat-exporter"),
        next_version
    );
    assert!(c
        .out("cat /etc/default/membloat-exporter")
        .contains("--scan.interval=2s"));

    // Purge stops it and gives back every file, link and user it made.
    c.out("dpkg --purge membloat-exporter");
    assert_ne!(
        c.out("systemctl is-active membloat-exporter || true")
            .trim(),
        "active"
    );
    assert!(!c
        .sh("curl -sf http://127.0.0.1:10294/metrics")
        .status
        .success());
    let after = c.snapshot();
    if before != after {
        let b: std::collections::BTreeSet<&str> = before.lines().collect();
        let a: std::collections::BTreeSet<&str> = after.lines().collect();
        panic!(
            "purge left: {:?}; removed: {:?}",
            a.difference(&b).collect::<Vec<_>>(),
            b.difference(&a).collect::<Vec<_>>()
        );
    }
}

/// The kernel log, through the unit's private /dev and CAP_SYSLOG, whatever
/// kernel.dmesg_restrict says: read, never denied, never missing.
fn kernel_log_is_read(c: &Booted, text: &str) {
    eprintln!(
        "kmsg in the booted package: {:?}, /dev/kmsg {}",
        text.lines()
            .filter(|l| l.contains("collector=\"kmsg\""))
            .collect::<Vec<_>>(),
        c.out("ls -l /dev/kmsg 2>&1; cat /proc/sys/kernel/dmesg_restrict")
            .trim()
    );
    assert_eq!(
        value(
            text,
            "membloat_scrape_collector_success{collector=\"kmsg\"}"
        ),
        Some(1.0)
    );
    for reason in ["permission_denied", "unsupported"] {
        assert_eq!(
            value(
                text,
                &format!("membloat_scan_errors_total{{collector=\"kmsg\",reason=\"{reason}\"}}")
            ),
            None,
            "{reason}"
        );
    }
}
