//! Whether a live command is printed on this host, and with what: the verdict of the
//! canary (`canary.rs`), and the command it allows.

use std::path::{Path, PathBuf};

use crate::config::LiveTool;

/// Whether live commands are printed on this host, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub tool: LiveTool,
    /// The tool as it names itself (`membloat_exporter 0.1.0`, `GNU gdb (Debian 13.1-3)
    /// 13.1`); empty when it could not be run.
    pub version: String,
    /// This binary's path, for the exporter's own `trim`.
    pub exe: PathBuf,
    /// Why no live command is printed; `None`: the canary held.
    pub refused: Option<Refusal>,
}

/// Why live commands are not printed on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
}

impl Live {
    /// The command that calls `malloc_trim(0)` in `pid`, where the canary held.
    pub fn malloc_trim(&self, pid: u32) -> Option<String> {
        if self.refused.is_some() {
            return None;
        }
        match self.tool {
            LiveTool::Exporter => Some(format!("{} trim --pid {pid}", quoted(&self.exe))),
            LiveTool::Gdb => Some(format!(
                "gdb -p {pid} -batch -ex 'call (int) malloc_trim(0)'"
            )),
            LiveTool::None => None,
        }
    }

    /// The cost of a live command, as an operator weighs it.
    pub fn cost(&self) -> &'static str {
        match self.tool {
            LiveTool::Gdb => "gdb stops every thread of the process while it attaches and calls (tens of milliseconds to seconds); proven harmless on this host on a throw-away child",
            _ => "one thread of the process is stopped for the call (milliseconds, and the time glibc takes to give the pages back); proven harmless on this host on a throw-away child",
        }
    }

    /// A verdict for tests and callers that prove nothing: no live command, and why.
    pub fn refused(tool: LiveTool, why: &str) -> Live {
        Live {
            tool,
            version: String::new(),
            exe: PathBuf::new(),
            refused: Some(Refusal { why: why.into() }),
        }
    }
}

impl Default for Live {
    /// Nothing proven: no live command.
    fn default() -> Live {
        Live::refused(
            LiveTool::None,
            "no live command was proven harmless on this host",
        )
    }
}

/// A path as a POSIX shell reads it back.
fn quoted(p: &Path) -> String {
    let s = p.to_string_lossy();
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
