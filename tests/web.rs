//! The HTTP server under abuse, and `--web.config.file` (TLS, client certificates, bcrypt
//! basic auth) checked with real clients: curl and openssl, and promtool for the file.

use crate::common;

use common::prometheus::Prometheus;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

const FAST: &[&str] = &["--scan.interval=200ms"];

/// A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with
/// the openssl command line.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = tool("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        run(&[
            &["req", "-x509"],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=membloat test CA",
            ],
        ]
        .concat());
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        for who in ["server", "client"] {
            run(&[
                &["req"],
                &ec[..],
                &[
                    "-keyout",
                    &format!("{who}.key"),
                    "-out",
                    &format!("{who}.csr"),
                    "-subj",
                    &format!("/CN={who}"),
                ],
            ]
            .concat());
            run(&[
                "x509",
                "-req",
                "-in",
                &format!("{who}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{who}.ext"),
                "-out",
                &format!("{who}.crt"),
            ]);
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a web config beside the certificates (relative paths resolve against it).
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// curl's view of a request for /metrics: (exit code, HTTP status, response headers).
fn curl(port: u16, pki: &Pki, extra: &[&str]) -> (i32, u16, String) {
    curl_path(port, pki, "/metrics", extra)
}

fn curl_path(port: u16, pki: &Pki, path: &str, extra: &[&str]) -> (i32, u16, String) {
    let headers = pki.path(&format!("headers-{}", std::process::id()));
    let out = tool("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg("--cacert")
        .arg(pki.path("ca.crt"))
        .arg("-D")
        .arg(&headers)
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let head = std::fs::read_to_string(&headers).unwrap_or_default();
    (out.status.code().unwrap_or(-1), status, head)
}

fn hash(password: &str) -> String {
    bcrypt::hash(password, 10).unwrap()
}

/// An exporter whose one user, prometheus:pw, has a cost-12 hash: each check takes long
/// enough (a few hundred ms) to hold requests in flight.
fn start_with_slow_auth(extra: &[&str]) -> (Pki, Daemon) {
    let pki = Pki::new();
    let config = pki.config(
        "web.yml",
        &format!(
            "basic_auth_users:\n  prometheus: '{}'\n",
            bcrypt::hash("pw", 12).unwrap()
        ),
    );
    let d = start(&config, extra);
    (pki, d)
}

/// Starts the exporter on a web config and waits until it accepts TCP connections.
fn start(config: &Path, extra: &[&str]) -> Daemon {
    let mut cmd = Command::new(bin());
    cmd.arg(format!("--web.config.file={}", config.display()))
        .args(FAST)
        .args(extra);
    let port = free_port();
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = cmd.spawn().unwrap();
    let d = Daemon { child, port };
    d.wait_until(Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    d
}

#[test]
fn tls_with_basic_auth_as_curl_sees_it() {
    let pki = Pki::new();
    let config = pki.config(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             http_server_config:\n  headers:\n    Strict-Transport-Security: max-age=31536000\n\
             basic_auth_users:\n  prometheus: '{}'\n",
            hash("scrape-secret")
        ),
    );
    promtool_ok(&["check", "web-config"], &config);
    let d = start(&config, &[]);

    let (_, status, head) = curl(d.port, &pki, &[]);
    assert_eq!(status, 401, "no credentials");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: basic"),
        "{head}"
    );
    assert_eq!(curl(d.port, &pki, &["-u", "prometheus:wrong"]).1, 401);
    assert_eq!(curl(d.port, &pki, &["-u", "nobody:scrape-secret"]).1, 401);
    let (code, status, head) = curl(d.port, &pki, &["-u", "prometheus:scrape-secret"]);
    assert_eq!((code, status), (0, 200), "good credentials");
    // /explain tells what runs on the host: the same TLS and authentication.
    assert_eq!(
        curl_path(d.port, &pki, "/explain", &[]).1,
        401,
        "/explain without credentials"
    );
    assert_eq!(
        curl_path(d.port, &pki, "/explain", &["-u", "prometheus:wrong"]).1,
        401
    );
    // With them, 200 once the first scan has completed (503 before it, by design; a busy
    // machine can be asked before).
    let mut status = 0;
    d.wait_until(Duration::from_secs(30), || {
        status = curl_path(
            d.port,
            &pki,
            "/explain",
            &["-u", "prometheus:scrape-secret"],
        )
        .1;
        status != 503
    });
    assert_eq!(status, 200);
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );

    // Plain HTTP to the TLS port gets no HTTP answer.
    assert_eq!(get(d.port, "/metrics", &[]).status, 0);
    let plain = tool("curl")
        .args(["-s", "--max-time", "5"])
        .arg(format!("http://127.0.0.1:{}/metrics", d.port))
        .status()
        .unwrap();
    assert!(!plain.success(), "plain HTTP succeeded on the TLS port");
    // TLS 1.1 is refused by the server even when the client offers it.
    let out = tool("openssl")
        .args(["s_client", "-tls1_1", "-connect"])
        .arg(format!("127.0.0.1:{}", d.port))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "a TLS 1.1 handshake succeeded");
}

#[test]
fn min_version_tls13_and_client_certificates() {
    let pki = Pki::new();
    let config = pki.config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n\
         \x20 client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    );
    let d = start(&config, &[]);
    let (crt, key) = (pki.path("client.crt"), pki.path("client.key"));
    let cert = [
        "--cert",
        crt.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    let (code, status, _) = curl(d.port, &pki, &cert);
    assert_eq!((code, status), (0, 200), "client certificate over TLS 1.3");
    assert_ne!(
        curl(d.port, &pki, &[]).0,
        0,
        "no client certificate was accepted"
    );
    let mut tls12 = vec!["--tls-max", "1.2"];
    tls12.extend_from_slice(&cert);
    assert_ne!(
        curl(d.port, &pki, &tls12).0,
        0,
        "TLS 1.2 accepted with min_version TLS13"
    );
    // A certificate the CA did not sign is refused.
    let other = Pki::new();
    let (crt, key) = (other.path("client.crt"), other.path("client.key"));
    let foreign = [
        "--cert",
        crt.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ];
    assert_ne!(
        curl(d.port, &pki, &foreign).0,
        0,
        "foreign client certificate accepted"
    );
}

#[test]
fn bad_web_configs_exit_1_naming_the_problem() {
    let pki = Pki::new();
    for (text, expected) in [
        ("basic_auth_users:\n  alice: plaintext\n", "alice: not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suite: []\n", "cipher_suite"),
        ("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n", "missing.crt"),
        ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS10\n", "TLS10"),
    ] {
        let config = pki.config("bad.yml", text);
        let out = run(&[&format!("--web.config.file={}", config.display()), "--web.listen-address=127.0.0.1:0"]);
        assert_eq!(out.status.code(), Some(1), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected) && err.contains("--web.config.file"), "{text}: {err}");
    }
}

/// Unknown users cost one bcrypt check like known ones, and checks run one at a time.
#[test]
fn auth_checks_take_the_same_time_for_unknown_users_and_run_one_at_a_time() {
    let (_pki, d) = start_with_slow_auth(&["--web.max-requests=100"]);
    let auth = |user: &str| {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:bad"));
        let started = Instant::now();
        let r = get(
            d.port,
            "/metrics",
            &[("Authorization", &format!("Basic {token}"))],
        );
        assert_eq!(r.status, 401);
        started.elapsed()
    };
    // The fastest of five: other tests of this file run beside it and can slow any one.
    let min = |f: &dyn Fn() -> Duration| (0..5).map(|_| f()).min().unwrap();
    let known = min(&|| auth("prometheus"));
    let unknown = min(&|| auth("mallory"));
    eprintln!("wrong password {known:?}, unknown user {unknown:?}");
    assert!(
        unknown * 2 > known && known * 2 > unknown,
        "known {known:?} vs unknown {unknown:?}"
    );

    // Eight wrong guesses at once take at least five single checks: they are serialised
    // (on this 2-CPU machine, eight checks side by side would take about four).
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| auth("prometheus"));
        }
    });
    let eight = started.elapsed();
    eprintln!("8 concurrent checks {eight:?}");
    assert!(
        eight >= known * 5,
        "8 checks in {eight:?}, one takes {known:?}"
    );
}

/// 100 connections that never finish their request headers are closed after the timeout,
/// and scrapes succeed meanwhile.
#[test]
fn half_sent_requests_are_closed_after_the_timeout_while_scrapes_succeed() {
    let d = Daemon::start(&["--scan.interval=200ms", "--web.read-header-timeout=2s"]);
    let quiet = quiet_p99(|| {
        let started = Instant::now();
        (d.get("/metrics").status, started.elapsed())
    });
    let opened = Instant::now();
    let mut slow: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    for _ in 0..5 {
        let started = Instant::now();
        assert_eq!(d.get("/metrics").status, 200);
        let took = started.elapsed();
        assert!(took < under_attack(quiet), "{took:?}, quiet p99 {quiet:?}");
    }
    let mut closed_after = Vec::new();
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let mut buf = [0u8; 512];
        // EOF, an error status then EOF, or a reset: all mean the server let go.
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
        closed_after.push(opened.elapsed());
    }
    let last = *closed_after.iter().max().unwrap();
    let first = *closed_after.iter().min().unwrap();
    eprintln!("half-sent requests closed between {first:?} and {last:?}");
    assert!(
        first >= Duration::from_millis(1500),
        "closed before the timeout"
    );
    assert!(last < Duration::from_secs(6), "still open after {last:?}");
    assert_eq!(d.get("/metrics").status, 200);
}

/// A fixture tree of `n` processes (hard links to one fixture process): an exposition
/// of about 1.3 KB per process.
fn tree_of_many_processes(dir: &Path, n: u32) -> PathBuf {
    let root = dir.join("tree");
    let from = fixture().join("proc/18265");
    std::fs::create_dir_all(root.join("sys")).unwrap();
    for f in ["meminfo", "vmstat", "stat"] {
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::copy(fixture().join("proc").join(f), root.join("proc").join(f)).unwrap();
    }
    for pid in 1000..1000 + n {
        let to = root.join("proc").join(pid.to_string());
        std::fs::create_dir(&to).unwrap();
        for f in [
            "cgroup",
            "cmdline",
            "oom_score",
            "oom_score_adj",
            "smaps_rollup",
            "stat",
            "statm",
            "status",
        ] {
            std::fs::hard_link(from.join(f), to.join(f)).unwrap();
        }
    }
    root
}

/// Beyond --web.max-requests, scrapes get 503 at once; when they end, the next succeeds.
/// A scrape holds its slot until its response is on the wire: clients that do not read
/// a response larger than the socket buffers keep theirs.
#[test]
fn scrapes_beyond_the_limit_get_503_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree_of_many_processes(dir.path(), 5000);
    let d = Daemon::start(&[
        &format!("--path.procfs={}", root.join("proc").display()),
        &format!("--path.sysfs={}", root.join("sys").display()),
        "--collector.processes.top-k=100000",
        "--collector.processes.deep-min-size=1000GiB",
        "--scan.interval=5s",
        "--web.max-requests=2",
    ]);
    let size = d.metrics().len();
    let quiet = quiet_p99(|| {
        let started = Instant::now();
        (d.get("/healthz").status, started.elapsed())
    });
    assert!(
        size > 6_000_000,
        "{size} bytes: more than the socket buffers hold"
    );
    // Two scrapes that never read their response past its status line. That line read is
    // the event: each scrape holds its slot by then, with megabytes still to send.
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut status = [0u8; 12];
            s.read_exact(&mut status).unwrap();
            assert_eq!(&status, b"HTTP/1.1 200");
            s
        })
        .collect();
    let started = Instant::now();
    let r = d.get("/metrics");
    assert_eq!(
        (r.status, r.body.as_str()),
        (503, "too many concurrent scrapes\n")
    );
    let took = started.elapsed();
    assert!(
        took < under_attack(quiet),
        "refused in {took:?}, not at once (a quiet request's p99 {quiet:?})"
    );
    // Other paths are not capped.
    assert_eq!(d.get("/healthz").status, 200);
    drop(held);
    d.wait_until(Duration::from_secs(5), || d.get("/metrics").status == 200);
}

/// One real scrape, as Prometheus makes it: a new connection, basic auth, the whole
/// response read, within Prometheus's default 10 s timeout. Its status and latency.
fn scrape(port: u16, auth: &str) -> (u16, Duration) {
    let started = Instant::now();
    let r = get(port, "/metrics", &[("Authorization", auth)]);
    (r.status, started.elapsed())
}

/// Share of 200s, and the 99th percentile latency of the scrapes.
fn summary(results: &[(u16, Duration)]) -> (f64, Duration) {
    let ok = results.iter().filter(|r| r.0 == 200).count() as f64 / results.len() as f64;
    let mut latencies: Vec<Duration> = results.iter().map(|r| r.1).collect();
    latencies.sort();
    let p99 = latencies[((latencies.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)];
    (ok, p99)
}

/// The 99th percentile of 20 scrapes made by `scrape` now, with nobody attacking: the
/// baseline a test under attack is measured against, in the same sitting, so a busy
/// machine raises both.
fn quiet_p99(mut scrape: impl FnMut() -> (u16, Duration)) -> Duration {
    let results: Vec<(u16, Duration)> = (0..20).map(|_| scrape()).collect();
    let (ok, p99) = summary(&results);
    assert_eq!(ok, 1.0, "quiet scrapes failed: {results:?}");
    p99
}

/// The most the 99th percentile of scrapes under an attack may take: ten times what it
/// takes quiet beside it, plus half a second. What an attack that held a scrape would
/// cost is the read-header timeout (10 s here), far above it on any machine.
fn under_attack(quiet: Duration) -> Duration {
    quiet * 10 + Duration::from_millis(500)
}

/// 40 clients guessing passwords as fast as the exporter answers them do not lock out
/// the scraper: its credentials pass from memory once checked, and the guesses wait for
/// bcrypt on their own queue, one check at a time, without taking its scrape slots.
#[test]
fn forty_password_guessers_do_not_lock_out_prometheus() {
    let pki = Pki::new();
    let config = pki.config(
        "web.yml",
        &format!("basic_auth_users:\n  prometheus: '{}'\n", hash("pw")),
    );
    let d = start(&config, &[]);
    let right = basic("prometheus", "pw");
    // The baseline, in the same sitting: one bcrypt check (a wrong guess alone), and the
    // scrapes' p99 with nobody guessing, once the scraper's credentials are in memory.
    let started = Instant::now();
    assert_eq!(scrape(d.port, &basic("prometheus", "alone")).0, 401);
    let check = started.elapsed();
    assert_eq!(scrape(d.port, &right).0, 200);
    let quiet: Vec<_> = (0..20).map(|_| scrape(d.port, &right)).collect();
    let (_, quiet_p99) = summary(&quiet);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let guesses = std::sync::atomic::AtomicU64::new(0);
    let (cold, warm) = std::thread::scope(|s| {
        for i in 0..40 {
            let (stop, guesses) = (&stop, &guesses);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let wrong = basic("prometheus", &format!("guess-{i}-{n}"));
                    let r = get(d.port, "/metrics", &[("Authorization", &wrong)]);
                    assert_ne!(r.status, 200);
                    n += 1;
                    guesses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs(1));
        // The first scrape under attack pays its one bcrypt check behind the queue.
        let cold = scrape(d.port, &right);
        let mut warm = Vec::new();
        for _ in 0..60 {
            warm.push(scrape(d.port, &right));
            std::thread::sleep(Duration::from_millis(250));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (cold, warm)
    });
    let (ok, p99) = summary(&warm);
    let guessed = guesses.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "40 guessers ({guessed} guesses): first scrape {} in {:?}; then {:.0}% ok, p99 {p99:?}",
        cold.0,
        cold.1,
        ok * 100.0
    );
    assert_eq!(cold.0, 200, "the first scrape under attack");
    assert!(cold.1 < Duration::from_secs(10), "{:?}", cold.1);
    assert!(ok >= 0.95, "{:.0}% of scrapes succeeded", ok * 100.0);
    // A scrape that waited behind the guesses' queue would wait for tens of checks; one
    // that passes from memory waits for a few at most (the CPUs are shared).
    eprintln!("baseline: a bcrypt check {check:?}, quiet p99 {quiet_p99:?}");
    assert!(
        p99 < quiet_p99 + 5 * check,
        "p99 {p99:?} under attack; quiet {quiet_p99:?}, one check {check:?}"
    );
    assert!(guessed >= 100, "the guessers were answered ({guessed})");
    // A changed password misses the memory: the old one no longer passes after a reload.
    std::fs::write(
        &config,
        format!("basic_auth_users:\n  prometheus: '{}'\n", hash("new")),
    )
    .unwrap();
    hup(&d);
    d.wait_until(Duration::from_secs(10), || scrape(d.port, &right).0 == 401);
    assert_eq!(scrape(d.port, &basic("prometheus", "new")).0, 200);
}

/// `threads` x 30 connections that send half a request head and reconnect as soon as the
/// server closes them, until `stop`; counts the connections opened in `opened`.
fn slowloris(port: u16, threads: usize, stop: &AtomicBool, opened: &AtomicU64) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                let open = || -> Option<TcpStream> {
                    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
                    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").ok()?;
                    c.set_nonblocking(true).ok()?;
                    opened.fetch_add(1, Ordering::Relaxed);
                    Some(c)
                };
                let mut conns: Vec<Option<TcpStream>> = (0..30).map(|_| open()).collect();
                while !stop.load(Ordering::Relaxed) {
                    for c in conns.iter_mut() {
                        let closed = match c {
                            None => true,
                            Some(stream) => {
                                let mut buf = [0u8; 256];
                                match stream.read(&mut buf) {
                                    Ok(0) => true,
                                    Ok(_) => false,
                                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                                }
                            }
                        };
                        if closed {
                            *c = open();
                        }
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
    });
}

/// 300 connections that send half a request head and reconnect as soon as they are
/// closed do not keep the scraper out: at the connection cap the oldest connection still
/// waiting for its head is evicted for the newcomer.
#[test]
fn a_sustained_reconnecting_slowloris_does_not_keep_scrapes_out() {
    let d = Daemon::start(&["--scan.interval=1s", "--web.read-header-timeout=10s"]);
    let quiet = quiet_p99(|| {
        let started = Instant::now();
        (d.get("/metrics").status, started.elapsed())
    });
    let stop = AtomicBool::new(false);
    let opened = AtomicU64::new(0);
    let results = std::thread::scope(|s| {
        s.spawn(|| slowloris(d.port, 10, &stop, &opened));
        std::thread::sleep(Duration::from_secs(2));
        let mut results = Vec::new();
        for _ in 0..60 {
            let started = Instant::now();
            let status = d.get("/metrics").status;
            results.push((status, started.elapsed()));
            std::thread::sleep(Duration::from_millis(500));
        }
        stop.store(true, Ordering::Relaxed);
        results
    });
    let (ok, p99) = summary(&results);
    let opened = opened.load(Ordering::Relaxed);
    eprintln!(
        "slowloris of 300 ({opened} connections opened in all): {:.0}% of scrapes ok, p99 {p99:?} (quiet {quiet:?})",
        ok * 100.0
    );
    assert!(opened > 300, "the attack reconnected ({opened})");
    assert!(ok >= 0.95, "{:.0}% of scrapes succeeded", ok * 100.0);
    assert!(p99 < under_attack(quiet), "p99 {p99:?}, quiet {quiet:?}");
}

/// One scrape by curl, a new process and connection each time, as a blackbox probe or a
/// health check makes it: its HTTP status (0 when it got none) and latency.
fn curl_scrape(port: u16) -> (u16, Duration) {
    let started = Instant::now();
    let out = tool("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .arg(format!("http://127.0.0.1:{port}/metrics"))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (status, started.elapsed())
}

/// One scrape on a new connection whose request head follows the connect by `gap`, as
/// from a client descheduled between the two on a loaded node: status and latency.
fn scrape_after(port: u16, gap: Duration) -> (u16, Duration) {
    let started = Instant::now();
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, started.elapsed());
    };
    std::thread::sleep(gap);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let mut raw = Vec::new();
    if s.write_all(head).is_ok() {
        let _ = s.read_to_end(&mut raw);
    }
    let status = String::from_utf8_lossy(&raw)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, started.elapsed())
}

/// One scrape by some client of the exporter on a port: its status and latency.
type Scraper = fn(u16) -> (u16, Duration);

/// Scrapers that open a new connection for every scrape, one scrape a second each,
/// through the same flood from their own address: curl, a plain client sending its head
/// with the connection, and one sending it 50 ms after connecting. A new connection has
/// completed no request yet, but it must not be as evictable as the flood's while it is
/// still sending its head. Each gets at least 29 of 30 scrapes, its p99 within
/// [`under_attack`] of its own quiet p99, measured just before.
#[test]
fn fresh_connection_scrapers_get_through_a_slowloris_from_their_own_address() {
    let d = Daemon::start(&["--scan.interval=1s", "--web.read-header-timeout=10s"]);
    d.wait_until(Duration::from_secs(10), || d.get("/metrics").status == 200);
    let stop = AtomicBool::new(false);
    let opened = AtomicU64::new(0);
    let every_second = |scrape: Scraper| {
        let mut results = Vec::new();
        for _ in 0..30 {
            let started = Instant::now();
            results.push(scrape(d.port));
            std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
        }
        results
    };
    let scrapers: [(&str, Scraper); 3] = [
        ("curl", curl_scrape),
        ("plain client", |port| scrape_after(port, Duration::ZERO)),
        ("plain client, head 50 ms after connecting", |port| {
            scrape_after(port, Duration::from_millis(50))
        }),
    ];
    let quiet: Vec<Duration> = scrapers
        .iter()
        .map(|&(_, scrape)| quiet_p99(|| scrape(d.port)))
        .collect();
    let results: Vec<Vec<(u16, Duration)>> = std::thread::scope(|s| {
        s.spawn(|| slowloris(d.port, 10, &stop, &opened));
        std::thread::sleep(Duration::from_secs(2));
        let running: Vec<_> = scrapers
            .iter()
            .map(|&(_, scrape)| s.spawn(move || every_second(scrape)))
            .collect();
        let results = running.into_iter().map(|r| r.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        results
    });
    let opened = opened.load(Ordering::Relaxed);
    assert!(opened > 300, "the attack reconnected ({opened})");
    for (((who, _), results), quiet) in scrapers.iter().zip(results).zip(quiet) {
        let ok = results.iter().filter(|r| r.0 == 200).count();
        let (_, p99) = summary(&results);
        eprintln!(
            "{who}, through a slowloris of 300 ({opened} connections opened): {ok} of 30 \
             scrapes ok, p99 {p99:?} (quiet {quiet:?}); failed: {:?}",
            results.iter().filter(|r| r.0 != 200).collect::<Vec<_>>()
        );
        assert!(ok >= 29, "{who}: {ok} of 30 scrapes succeeded");
        assert!(
            p99 < under_attack(quiet),
            "{who}: p99 {p99:?}, quiet {quiet:?}"
        );
    }
}

/// The same flood from Prometheus's own address (a NAT, a sidecar, a pod on the node): a
/// real Prometheus scraping every second, with its kept-alive connection idle between
/// scrapes, gets at least 29 of 30 scrapes through, its p99 within [`under_attack`] of its
/// own quiet p99 just before, by its own account (`up`, `scrape_duration_seconds`).
#[test]
fn a_real_prometheus_scrapes_through_a_slowloris_from_its_own_address() {
    let d = Daemon::start(&["--scan.interval=1s", "--web.read-header-timeout=10s"]);
    let prom = Prometheus::start(&format!("127.0.0.1:{}", d.port), None);
    let up = "up{job=\"membloat\"}";
    prom.wait_until(Duration::from_secs(30), "first scrape", |p| {
        p.query(up)
            .is_ok_and(|r| r.len() == 1 && r[0]["value"][1] == "1")
    });
    let now = || {
        SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    // Prometheus's own p99 over 15 s of quiet scrapes, just before the attack: the baseline.
    std::thread::sleep(Duration::from_secs(16));
    let quiet_at = now() - 0.5;
    let stop = AtomicBool::new(false);
    let opened = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| slowloris(d.port, 10, &stop, &opened));
        std::thread::sleep(Duration::from_secs(32));
        stop.store(true, Ordering::Relaxed);
    });
    let opened = opened.load(Ordering::Relaxed);
    // The 30 s that ended a second ago, the attack's second and last seconds left out.
    let when = now() - 1.0;
    let at = |q: &str, t: f64| -> f64 {
        let r = prom.query_at(q, t).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        r[0]["value"][1].as_str().unwrap().parse().unwrap()
    };
    let one = |q: &str| at(q, when);
    let quiet = at(
        "quantile_over_time(0.99, scrape_duration_seconds{job=\"membloat\"}[15s])",
        quiet_at,
    );
    let scrapes = one(&format!("count_over_time({up}[30s])"));
    let succeeded = one(&format!("sum_over_time({up}[30s])"));
    let p99 = one("quantile_over_time(0.99, scrape_duration_seconds{job=\"membloat\"}[30s])");
    eprintln!(
        "slowloris of 300 from Prometheus's address ({opened} connections opened): \
         {succeeded} of {scrapes} scrapes up, p99 {p99:.3} s (quiet {quiet:.3} s)"
    );
    assert!(opened > 300, "the attack reconnected ({opened})");
    assert!(
        scrapes >= 29.0,
        "Prometheus scraped {scrapes} times in 30 s"
    );
    assert!(
        succeeded >= scrapes - 1.0,
        "{succeeded} of {scrapes} scrapes succeeded"
    );
    let bound = under_attack(Duration::from_secs_f64(quiet)).as_secs_f64();
    assert!(p99 < bound, "p99 scrape duration {p99} s, quiet {quiet} s");
}

/// The exporter is watched like any other target from its first response on: while the
/// first scan is still running (held here by a process file that never answers), `/metrics`
/// already has the exporter's own `process_*` metrics, with this process's real values.
#[test]
fn the_first_response_has_the_exporters_own_process_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    make_fifo(&root.join("proc/1406/smaps_rollup"));
    let d = Daemon::spawn(
        Command::new(bin()),
        &[
            &format!("--path.procfs={}", root.join("proc").display()),
            &format!("--path.sysfs={}", root.join("sys").display()),
            "--collector.processes.read-timeout=60s",
        ],
    );
    let text = d.metrics();
    assert_eq!(
        value(&text, "membloat_scans_total"),
        Some(0.0),
        "the first scan should still be held by the FIFO"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    let vm_size_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(value(&text, name).is_some(), "{name} missing:\n{text}");
    }
    let virt = value(&text, "process_virtual_memory_bytes").unwrap();
    assert!(
        (virt - vm_size_kib * 1024.0).abs() < 64.0 * 1048576.0,
        "process_virtual_memory_bytes {virt}, VmSize {vm_size_kib} kB"
    );
    let started = value(&text, "process_start_time_seconds").unwrap();
    let now = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (now - 60.0..=now).contains(&started),
        "started at {started}, now {now}"
    );
}

#[test]
fn request_limits_and_methods() {
    let d = Daemon::start(FAST);
    let big = request(d.port, "GET", "/metrics", &[("Content-Length", "100000")]);
    assert_eq!(big.status, 413);
    let head = "x".repeat(20_000);
    let r = get(d.port, "/metrics", &[("X-Filler", &head)]);
    assert!(
        r.status == 431 || r.status == 0,
        "a 20 KB header was accepted: {}",
        r.status
    );
    assert_eq!(request(d.port, "DELETE", "/metrics", &[]).status, 405);
    assert_eq!(request(d.port, "POST", "/healthz", &[]).status, 405);
    assert_eq!(d.get("/metrics/extra").status, 404);
    assert_eq!(request(d.port, "HEAD", "/metrics", &[]).status, 200);
    // HTTP/2 prior knowledge is not spoken.
    let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(!answer.starts_with("HTTP/2"), "{answer}");
    assert_eq!(d.get("/metrics").status, 200);
}

/// The example in deploy/, beside a certificate and key as it says: promtool accepts it
/// and the exporter serves it with the documented example password.
#[test]
fn shipped_example_web_config_passes_promtool_and_works() {
    let pki = Pki::new();
    std::fs::copy(pki.path("server.crt"), pki.path("tls.crt")).unwrap();
    std::fs::copy(pki.path("server.key"), pki.path("tls.key")).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/web-config.yml");
    let config = pki.path("web-config.yml");
    std::fs::copy(example, &config).unwrap();
    promtool_ok(&["check", "web-config"], &config);
    let d = start(&config, &[]);
    assert_eq!(curl(d.port, &pki, &["-u", "prometheus:change-me"]).1, 200);
    assert_eq!(curl(d.port, &pki, &[]).1, 401);
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

fn hup(d: &Daemon) {
    let status = Command::new("kill")
        .args(["-HUP", &d.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// SIGHUP re-reads the web config and never ends the exporter; a bad file keeps the last
/// good config; a changed file is picked up without a signal; TLS can be turned on live.
#[test]
fn sighup_and_file_changes_reload_the_web_config_and_a_bad_one_keeps_the_last_good() {
    let pki = Pki::new();
    let users = |pw: &str| format!("basic_auth_users:\n  prometheus: '{}'\n", hash(pw));
    let config = pki.config("web.yml", &users("first"));
    let mut d = start(&config, &[]);
    let status = |pw: &str| {
        get(
            d.port,
            "/metrics",
            &[("Authorization", &basic("prometheus", pw))],
        )
        .status
    };
    assert_eq!(status("first"), 200);

    std::fs::write(&config, users("second")).unwrap();
    hup(&d);
    d.wait_until(Duration::from_secs(5), || status("second") == 200);
    assert_eq!(status("first"), 401, "the old password is gone");

    std::fs::write(&config, "basic_auth_users: [not, a, map\n").unwrap();
    hup(&d);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "SIGHUP ended the exporter"
    );
    assert_eq!(
        status("second"),
        200,
        "a bad file keeps the last good config"
    );

    // No signal: the file's change is noticed by polling.
    std::fs::write(&config, users("third")).unwrap();
    d.wait_until(Duration::from_secs(15), || status("third") == 200);

    // TLS turned on by a reload: plain HTTP stops, HTTPS with the password works.
    let tls = format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{}",
        users("fourth")
    );
    std::fs::write(&config, tls).unwrap();
    hup(&d);
    d.wait_until(Duration::from_secs(5), || {
        curl(d.port, &pki, &["-u", "prometheus:fourth"]).1 == 200
    });
    assert!(d.child.try_wait().unwrap().is_none());
}

/// Without a web config SIGHUP is logged and ignored: `systemctl reload` and log rotation
/// never end the exporter.
#[test]
fn sighup_without_a_web_config_does_not_end_the_exporter() {
    let mut d = Daemon::start(FAST);
    for _ in 0..3 {
        hup(&d);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "SIGHUP ended the exporter"
    );
    assert_eq!(d.get("/healthz").status, 200);
}

/// A scraper that accepts gzip (Prometheus does) gets the same exposition gzipped, about a
/// fifth of the bytes; one that does not, or refuses it, gets it plain.
#[test]
fn metrics_are_gzipped_for_scrapers_that_accept_it() {
    let d = Daemon::start(&["--scan.interval=1h"]);
    let url = format!("http://127.0.0.1:{}/metrics", d.port);
    let fetch = |encoding: Option<&str>| {
        let mut c = tool("curl");
        c.args(["-s", "-D", "-", &url]);
        if let Some(e) = encoding {
            c.args(["-H", &format!("Accept-Encoding: {e}")]);
        }
        let out = c.output().unwrap();
        let split = out
            .stdout
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap();
        let head = String::from_utf8_lossy(&out.stdout[..split]).to_lowercase();
        (head, out.stdout[split + 4..].to_vec())
    };
    let (head, plain) = fetch(None);
    assert!(!head.contains("content-encoding"), "{head}");
    for accept in ["gzip", "deflate, gzip;q=0.8", "*"] {
        let (head, gz) = fetch(Some(accept));
        assert!(head.contains("content-encoding: gzip"), "{accept}: {head}");
        assert!(head.contains("vary: accept, accept-encoding"), "{head}");
        assert_eq!(&gz[..2], b"\x1f\x8b", "{accept}: not gzip");
        let mut unzipped = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, plain, "{accept}: not the same exposition");
        assert!(
            gz.len() * 4 < plain.len(),
            "{} of {} bytes",
            gz.len(),
            plain.len()
        );
    }
    for refused in ["gzip;q=0", "identity", "*, gzip;q=0"] {
        let (head, body) = fetch(Some(refused));
        assert!(!head.contains("content-encoding"), "{refused}: {head}");
        assert_eq!(body, plain, "{refused}");
    }
    let (_, gz) = fetch(Some("gzip"));
    eprintln!(
        "exposition {} bytes, gzipped {} bytes",
        plain.len(),
        gz.len()
    );
}
