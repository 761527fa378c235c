//! The proof, on this host, that a live command leaves the process it acts on as it found
//! it: the mechanism applied to a throw-away child ([`super::child`]) whose threads wait
//! in `pause`, `nanosleep`, `read` on a pipe and a futex, as a service's do. It holds when
//! every call returned what the probe returns, each woken wait came back as it must (EINTR
//! for the two a signal wakes, the byte for `read`, 0 for the futex: never 512-516, the
//! kernel's internal restart codes), each thread's `xmm8` kept its value, and the child
//! went on to its end. Made once per exporter process and tool (a host's answer changes
//! with its kernel, its CPU or the tool, none of which changes under a running process).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::child::{self, KINDS};
use super::live::{Live, Refusal};
use crate::config::LiveTool;

/// How long the child's threads may take to reach their waits, and the child its end.
const CHILD_WAIT: Duration = Duration::from_secs(20);
/// How long gdb may take to attach, call and detach.
const GDB_WAIT: Duration = Duration::from_secs(60);
/// The system call each waiter waits in (x86-64 numbers), in [`KINDS`]' order.
const WAITS: [i64; 4] = [34, 35, 0, 202];

/// The verdict for `tool` on this host, proven once per process with the child run from
/// `exe` (this binary).
pub(crate) fn verdict(tool: LiveTool, exe: &Path) -> Live {
    static PROVEN: [OnceLock<Live>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match tool {
        LiveTool::Exporter => 0,
        LiveTool::Gdb => 1,
        LiveTool::None => 2,
    };
    PROVEN[slot].get_or_init(|| prove(tool, exe)).clone()
}

/// Runs the canary for `tool` now.
pub fn prove(tool: LiveTool, exe: &Path) -> Live {
    let version = match tool {
        LiveTool::None => {
            return Live::refused(tool, "live commands are off (--explain.live-tool=none)")
        }
        LiveTool::Exporter => format!("membloat_exporter {}", crate::config::build::VERSION),
        LiveTool::Gdb => match gdb_version() {
            Some(v) => v,
            None => {
                return Live::refused(
                    tool,
                    "gdb is not installed on this host (--explain.live-tool=gdb)",
                )
            }
        },
    };
    let refused = run(tool, exe).err().map(|e| Refusal {
        why: match e {
            Failed::Harmed(e) => format!(
                "{version} did not leave a throw-away process on this host as it found it: {e}{}; the next-start remedy applies instead{}",
                amx_note(),
                if tool == LiveTool::Gdb { ", or --explain.live-tool=exporter (the default), which saves and writes back a thread's whole extended state" } else { "" }
            ),
            Failed::Unproven(e) => format!(
                "{version} could not be proven harmless on this host: {e}; `membloat_exporter explain` run as root on the host proves it and prints it"
            ),
        },
    });
    Live {
        tool,
        version,
        exe: exe.to_path_buf(),
        refused,
    }
}

fn gdb_version() -> Option<String> {
    let out = Command::new("gdb").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().next()?.trim().to_string())
}

/// What the CPU adds to a thread's state that older tools cannot write back.
fn amx_note() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    if flags.split_ascii_whitespace().any(|f| f == "amx_tile") {
        " (this CPU has AMX, amx_tile: its extended state is larger than tools written before it expect)".into()
    } else {
        String::new()
    }
}

/// Why the canary did not hold.
enum Failed {
    /// The tool was applied and left the child otherwise than it found it.
    Harmed(String),
    /// The proof could not be made: the child did not start, or ptrace was refused (a
    /// service's seccomp filter, no CAP_SYS_PTRACE).
    Unproven(String),
}

impl From<String> for Failed {
    fn from(e: String) -> Failed {
        Failed::Harmed(e)
    }
}

impl From<&str> for Failed {
    fn from(e: &str) -> Failed {
        Failed::Harmed(e.into())
    }
}

/// The child, killed and reaped when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the child said it is.
struct Started {
    tids: [u32; 4],
    probe: u64,
}

fn run(tool: LiveTool, exe: &Path) -> Result<(), Failed> {
    let mut kid = Kid(Command::new(exe)
        .arg(child::ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            Failed::Unproven(format!("the throw-away child could not be started: {e}"))
        })?);
    let pid = kid.0.id();
    let mut lines = BufReader::new(kid.0.stdout.take().ok_or("no stdout")?).lines();
    let started = started(&mut lines).map_err(Failed::Unproven)?;
    reach_waits(pid, &started.tids).map_err(Failed::Unproven)?;
    // Where the tool failed, the child still says what the failure did to it.
    let applied = apply(tool, pid, &started);
    // Woken: a byte for read (which wakes the futex), SIGUSR1 for pause and nanosleep.
    let mut stdin = kid.0.stdin.take().ok_or("no stdin")?;
    stdin
        .write_all(b"x")
        .map_err(|e| format!("waking the child: {e}"))?;
    for (i, _) in KINDS.iter().enumerate().take(2) {
        // SAFETY: tgkill sends a signal to one thread of our own child; no memory.
        let r = unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                pid as libc::pid_t,
                started.tids[i] as libc::pid_t,
                libc::SIGUSR1,
            )
        };
        if r != 0 {
            return Err(format!("the child's {} thread could not be woken", KINDS[i]).into());
        }
    }
    let calls = match tool {
        LiveTool::Gdb => 1,
        _ => KINDS.len() as u64,
    };
    let judged = judge(&mut lines, calls);
    match (applied, judged) {
        (Err(Failed::Unproven(e)), _) => return Err(Failed::Unproven(e)),
        (Err(Failed::Harmed(a)), Err(j)) => return Err(Failed::Harmed(format!("{a}, and {j}"))),
        (Err(e), Ok(())) => return Err(e),
        (Ok(()), Err(e)) => return Err(Failed::Harmed(e)),
        (Ok(()), Ok(())) => {}
    }
    let deadline = Instant::now() + CHILD_WAIT;
    loop {
        match kid.0.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(format!("the child ended with {s}").into()),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => return Err("the child did not end".into()),
        }
    }
}

fn started(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> Result<Started, String> {
    let mut tids = [0u32; 4];
    let mut probe = 0u64;
    for line in lines.by_ref() {
        let line = line.map_err(|e| format!("reading the child: {e}"))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["thread", kind, tid] => {
                let i = KINDS
                    .iter()
                    .position(|k| k == kind)
                    .ok_or("an unknown wait")?;
                tids[i] = tid.parse().map_err(|_| "a bad thread id")?;
            }
            ["probe", at] => probe = at.parse().map_err(|_| "a bad probe address")?,
            ["ready"] if probe != 0 && tids.iter().all(|&t| t != 0) => {
                return Ok(Started { tids, probe })
            }
            _ => return Err(format!("the child said {line:?}")),
        }
    }
    Err("the throw-away child ended before it was ready".into())
}

/// Waits until each of the child's threads waits in its system call.
fn reach_waits(pid: u32, tids: &[u32; 4]) -> Result<(), String> {
    let deadline = Instant::now() + CHILD_WAIT;
    for (tid, nr) in tids.iter().zip(WAITS) {
        let path = format!("/proc/{pid}/task/{tid}/syscall");
        loop {
            let now: Option<i64> = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.split_whitespace().next()?.parse().ok());
            if now == Some(nr) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the child's thread {tid} did not reach its wait ({now:?})"
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(())
}

/// The mechanism, applied as a live command would apply it.
fn apply(tool: LiveTool, pid: u32, s: &Started) -> Result<(), Failed> {
    match tool {
        LiveTool::Exporter => {
            for (i, &tid) in s.tids.iter().enumerate() {
                let arg = i as u64 + 1;
                let got = super::call(tid, s.probe, arg, Duration::from_secs(5)).map_err(|e| {
                    let what = format!("the call in its {} thread failed: {e}", KINDS[i]);
                    match e {
                        super::CallError::Denied(_) => Failed::Unproven(what),
                        _ => Failed::Harmed(what),
                    }
                })?;
                if got != child::probed(arg) {
                    return Err(format!("the call in its {} thread returned {got:#x}, not what the function returned", KINDS[i]).into());
                }
            }
            Ok(())
        }
        LiveTool::Gdb => {
            let call = format!(
                "call (unsigned long) ((unsigned long (*)(unsigned long)) {:#x})(1)",
                s.probe
            );
            let mut gdb = Command::new("gdb")
                .args([
                    "-nx",
                    "-p",
                    &pid.to_string(),
                    "-batch",
                    "-ex",
                    "set language c",
                    "-ex",
                    &call,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| Failed::Unproven(format!("gdb could not be run: {e}")))?;
            let deadline = Instant::now() + GDB_WAIT;
            while gdb.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = gdb.kill();
                    let _ = gdb.wait();
                    return Err(
                        format!("gdb did not finish within {} s", GDB_WAIT.as_secs()).into(),
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let out = gdb
                .wait_with_output()
                .map_err(|e| Failed::Unproven(e.to_string()))?;
            let said = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let errors: Vec<&str> = said
                .lines()
                .filter(|l| ["rror", "Couldn't", "annot"].iter().any(|w| l.contains(w)))
                .take(2)
                .collect();
            if !out.status.success() || !said.contains(&format!("= {}", child::probed(1))) {
                return Err(format!(
                    "gdb's call failed ({}: {})",
                    out.status,
                    errors.join("; ").trim_end_matches('.')
                )
                .into());
            }
            Ok(())
        }
        LiveTool::None => Err(Failed::Unproven("no tool".into())),
    }
}

/// The child's report: every wait came back as it must, with its `xmm8`; every call
/// counted; the child went on.
fn judge(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    calls: u64,
) -> Result<(), String> {
    let mut seen = 0;
    for line in lines.by_ref() {
        let line = line.map_err(|e| format!("reading the child: {e}"))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["result", kind, came, kept] => {
                if *came != "ok" {
                    let ret: i64 = came.parse().map_err(|_| "a bad result")?;
                    return Err(format!("its {kind}() returned {ret}{} after the call, which the program waiting in it could not expect", restart_code(ret)));
                }
                if *kept != "true" {
                    return Err(format!(
                        "the thread in {kind}() came back with a vector register (xmm8) changed"
                    ));
                }
                seen += 1;
            }
            ["calls", n] => {
                if n.parse::<u64>().ok() != Some(calls) {
                    return Err(format!("the function ran {n} times, not {calls}"));
                }
            }
            ["alive", _] if seen == KINDS.len() => return Ok(()),
            _ => return Err(format!("the child said {line:?}")),
        }
    }
    Err("the throw-away child ended before it said how its waits came back".into())
}

/// What a negative return is, where it is one of the kernel's internal restart codes.
fn restart_code(ret: i64) -> &'static str {
    match -ret {
        512 => " (ERESTARTSYS, a kernel-internal code that must never reach a program)",
        513 => " (ERESTARTNOINTR, a kernel-internal code)",
        514 => " (ERESTARTNOHAND, a kernel-internal code that must never reach a program)",
        516 => " (ERESTART_RESTARTBLOCK, a kernel-internal code)",
        _ => "",
    }
}
