//! A real Prometheus (Debian's package) started by a test.

use super::{free_port, tool};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A Prometheus server started by the test; killed (by its PID) when dropped.
pub struct Prometheus {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` every second as job `membloat`, evaluating `rules` if given.
    pub fn start(target: &str, rules: Option<&Path>) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 rule_files: [{}]\n\
                 scrape_configs:\n  - job_name: membloat\n    static_configs:\n      - targets: [\"{target}\"]\n\
                 \x20   relabel_configs:\n      - target_label: cluster\n        replacement: test\n",
                rules.map_or(String::new(), |r| format!("{:?}", r.display().to_string()))
            ),
        )
        .unwrap();
        let port = free_port();
        let child = tool("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    /// GET on the HTTP API; HTTP/1.0 so the body is sent plain, not chunked.
    pub fn api(&self, path_and_query: &str) -> Option<Value> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(
            s,
            "GET {path_and_query} HTTP/1.0\r\nHost: localhost\r\n\r\n"
        )
        .ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).ok()?;
        let raw = String::from_utf8_lossy(&raw);
        let (_, body) = raw.split_once("\r\n\r\n")?;
        serde_json::from_str(body).ok()
    }

    /// An instant query: the result vector, or the error Prometheus gave.
    pub fn query(&self, q: &str) -> Result<Vec<Value>, String> {
        self.query_path(&format!("/api/v1/query?query={}", encode(q)))
    }

    /// An instant query at Unix time `at`.
    pub fn query_at(&self, q: &str, at: f64) -> Result<Vec<Value>, String> {
        self.query_path(&format!("/api/v1/query?query={}&time={at:.3}", encode(q)))
    }

    fn query_path(&self, path: &str) -> Result<Vec<Value>, String> {
        let v = self.api(path).ok_or("no answer")?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    pub fn wait_until(&self, limit: Duration, what: &str, mut ok: impl FnMut(&Self) -> bool) {
        let start = Instant::now();
        while !ok(self) {
            assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
