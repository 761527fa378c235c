//! Memory cgroups (v1) the root-only tests make and remove: a container for a reproducer,
//! with a limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

const ROOT: &str = "/sys/fs/cgroup/memory";

/// A memory cgroup of a test's, under the v1 hierarchy; removed when dropped, once the
/// processes in it are gone.
pub struct TestCgroup {
    pub name: String,
    pub dir: PathBuf,
}

impl TestCgroup {
    /// `membloat-test-KIND-PID`, or `None` (said with `skipped`) on a host without the v1
    /// memory controller.
    pub fn new(kind: &str) -> Option<TestCgroup> {
        if !Path::new(ROOT).join("memory.limit_in_bytes").exists() {
            super::skipped(&format!("no cgroup v1 memory controller at {ROOT}"));
            return None;
        }
        let name = format!("membloat-test-{kind}-{}", std::process::id());
        let dir = Path::new(ROOT).join(&name);
        std::fs::create_dir(&dir).unwrap();
        Some(TestCgroup { name, dir })
    }

    /// The path the exporter names it by (its `cgroup` label).
    pub fn label(&self) -> String {
        format!("/{}", self.name)
    }

    /// A shell line that moves the shell into the cgroup: `{join} && exec PROGRAM`.
    pub fn join(&self) -> String {
        format!("echo $$ > {}", self.dir.join("cgroup.procs").display())
    }

    /// Runs `command` (a shell line) in the cgroup as a reproducer named `name`: it says
    /// `ready` when it is.
    #[allow(dead_code, reason = "not every test binary runs one")]
    pub fn spawn(&self, name: &str, command: &str) -> super::repro::Repro {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{} && exec {command}", self.join()));
        super::repro::Repro::spawn(name, cmd)
    }

    pub fn set_limit(&self, bytes: u64) {
        std::fs::write(self.dir.join("memory.limit_in_bytes"), bytes.to_string()).unwrap();
        // No swapping out instead of reaching the limit.
        let _ = std::fs::write(self.dir.join("memory.swappiness"), "0");
    }

    /// A v1 file of the cgroup, line by line.
    #[allow(dead_code, reason = "not every test binary reads one")]
    pub fn read_lines(&self, file: &str) -> impl Iterator<Item = String> {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// A v1 file of the cgroup, as a number.
    pub fn read(&self, file: &str) -> u64 {
        std::fs::read_to_string(self.dir.join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
