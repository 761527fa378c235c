//! Acting on a running process: `malloc_trim(0)` called inside it (`trim`), and the proof,
//! on a throw-away child of this host, that the mechanism that does it leaves a process as
//! it found it ([`canary`]). `explain` prints a live command only where that proof holds.
//!
//! Every step reads what another process wrote (its mappings, its libc's symbol table,
//! its threads' state), so each is checked before it is believed: the function's address
//! must lie in an executable mapping of the libc it was found in, and the thread must be
//! waiting in a system call.

mod call;
pub mod canary;
pub mod child;
mod live;
mod threads;

pub use call::{call, CallError};
pub use live::{Live, Refusal};

use std::time::Duration;

use crate::heap::dynsym::Symbols;
use crate::heap::memory::ProcessMemory;
use crate::parse::smaps::{self, Library};
use crate::source::{Buffer, Source};

/// What a trim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trimmed {
    /// The thread the call ran in.
    pub tid: u32,
    /// What `malloc_trim` returned: 1 when it gave memory back.
    pub returned: u64,
    /// `RssAnon` of `/proc/PID/status`, before and after.
    pub rss_anon_before_bytes: Option<u64>,
    pub rss_anon_after_bytes: Option<u64>,
}

/// Why a trim was not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrimError {
    /// The process maps no `libc.so.6`, or its libc exports no `malloc_trim`.
    NotGlibc(String),
    /// None of its threads waits in a system call (all are running): try again while it
    /// idles.
    NoWaitingThread,
    Call(CallError),
}

impl std::fmt::Display for TrimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrimError::NotGlibc(why) => write!(f, "{why}"),
            TrimError::NoWaitingThread => write!(f, "none of its threads waits in a system call (all are running): try again while it idles"),
            TrimError::Call(e) => write!(f, "{e}"),
        }
    }
}

/// `malloc_trim(0)` in process `pid`, in its first thread that waits in a system call
/// (the main thread first).
pub fn trim(source: &Source, pid: u32, lock_wait: Duration) -> Result<Trimmed, TrimError> {
    let func = malloc_trim_address(source, pid)?;
    let before = rss_anon(source, pid);
    let mut last = TrimError::NoWaitingThread;
    for tid in threads::waiting(source, pid) {
        match call(tid, func, 0, lock_wait) {
            Ok(returned) => {
                return Ok(Trimmed {
                    tid,
                    returned,
                    rss_anon_before_bytes: before,
                    rss_anon_after_bytes: rss_anon(source, pid),
                })
            }
            // It ran before it stopped: the next one may wait.
            Err(CallError::NotInSyscall) => continue,
            Err(e) => {
                last = TrimError::Call(e);
                break;
            }
        }
    }
    Err(last)
}

/// Where `malloc_trim` is in process `pid`: found in the dynamic symbol table of the
/// `libc.so.6` it maps, and believed only inside an executable mapping of that file.
fn malloc_trim_address(source: &Source, pid: u32) -> Result<u64, TrimError> {
    let mut buf = Buffer::default();
    let gone = |_| TrimError::Call(CallError::Gone);
    let maps = source.read_pid(pid, "maps", &mut buf).map_err(gone)?;
    let vmas = smaps::parse(maps)
        .map_err(|_| TrimError::NotGlibc("its mappings could not be read".into()))?
        .vmas;
    let libc: Vec<_> = vmas
        .iter()
        .filter(|v| v.library == Some(Library::Glibc))
        .collect();
    let Some(base) = libc.iter().map(|v| v.start).min() else {
        return Err(TrimError::NotGlibc(
            "it maps no libc.so.6: not a dynamically linked glibc program".into(),
        ));
    };
    let unreadable = || {
        TrimError::NotGlibc("its libc's symbols could not be read from its memory (run as root, or with CAP_SYS_PTRACE)".into())
    };
    let mut mem = ProcessMemory::open(source, pid).ok_or_else(unreadable)?;
    let symbols = Symbols::of(&mut mem, base).ok_or_else(unreadable)?;
    let at = symbols
        .find(&mut mem, "malloc_trim")
        .ok_or_else(|| TrimError::NotGlibc("its libc.so.6 exports no malloc_trim".into()))?;
    let inside = libc
        .iter()
        .any(|v| v.perms[2] == b'x' && (v.start..v.end).contains(&at));
    if !inside {
        return Err(TrimError::NotGlibc(format!(
            "malloc_trim's address {at:#x} lies outside its libc's code"
        )));
    }
    Ok(at)
}

/// `RssAnon` of `/proc/PID/status`, in bytes.
fn rss_anon(source: &Source, pid: u32) -> Option<u64> {
    let mut buf = Buffer::default();
    let text = source.read_pid(pid, "status", &mut buf).ok()?;
    crate::parse::status::Status::parse(text)
        .ok()?
        .rss_anon_bytes
}
