//! `/dev/kmsg` records, and the OOM killer's account of a kill in them.
//!
//! One `read` of `/dev/kmsg` returns one record: `PRIORITY,SEQUENCE,MICROSECONDS,FLAGS[,…]`
//! then `;` and the message, then optional dictionary lines that start with a space
//! (`SUBSYSTEM=…`), ignored here. The microseconds count from boot. Bytes that are not
//! printable arrive escaped as `\xNN`. Kernels before 4.9 may split one line into records
//! flagged `c` (a line begins, more follows) and `+` (it goes on).
//!
//! The OOM killer tells a kill in up to three lines, whose wording changed over the years
//! (the tests carry one per wording, each with where it comes from):
//! - the choice, kernels before 5.1: `Memory cgroup out of memory: Kill process 42453
//!   (memcg_test_1) score 0 or sacrifice child`;
//! - the summary, kernels 4.20 and later: `oom-kill:constraint=CONSTRAINT_MEMCG,
//!   nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a,task_memcg=/a/b,task=python3,
//!   pid=14955,uid=0` (`global_oom` in place of `oom_memcg=` for a host-wide kill);
//! - the kill: `Memory cgroup out of memory: Killed process 14955 (python3)
//!   total-vm:147640kB, anon-rss:32384kB, file-rss:6216kB, shmem-rss:0kB, UID:0
//!   pgtables:128kB oom_score_adj:0` (5.1 and later; before, `Killed process …` without
//!   the reason and with fewer fields, and Red Hat's 3.10 writes `…(comm), UID 0, …`).
//!
//! Task names and cgroup paths are chosen by users, so nothing here trusts their shape:
//! a line that does not parse is `None`, never a panic.

use super::ParseError;

mod assemble;
pub use assemble::{Assembler, OomKill};

/// How a record continues a line (kernels before 4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuation {
    /// A whole line (flag `-`).
    Whole,
    /// The first part of a line whose rest comes in the next records (flag `c`).
    Begins,
    /// The rest of the line the previous record began (flag `+`).
    Continues,
}

/// One `/dev/kmsg` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The syslog priority: facility × 8 + level (3 is `err`).
    pub priority: u32,
    pub sequence: u64,
    /// Time since boot, microseconds.
    pub micros: u64,
    pub continuation: Continuation,
    /// The message, still escaped (`\xNN`).
    pub message: &'a str,
}

/// Parses one record as one `read` of `/dev/kmsg` returns it.
pub fn record(text: &str) -> Result<Record<'_>, ParseError> {
    let (prefix, rest) = text.split_once(';').ok_or(ParseError::Missing(";"))?;
    let message = rest.split('\n').next().unwrap_or("");
    let mut fields = prefix.split(',');
    let mut number = |what| -> Result<u64, ParseError> {
        fields
            .next()
            .ok_or(ParseError::Missing(what))?
            .parse()
            .map_err(|_| ParseError::Malformed(what))
    };
    let priority =
        u32::try_from(number("priority")?).map_err(|_| ParseError::Malformed("priority"))?;
    let sequence = number("sequence")?;
    let micros = number("microseconds")?;
    let continuation = match fields.next() {
        Some(f) if f.starts_with('c') => Continuation::Begins,
        Some(f) if f.starts_with('+') => Continuation::Continues,
        Some(_) | None => Continuation::Whole,
    };
    Ok(Record {
        priority,
        sequence,
        micros,
        continuation,
        message,
    })
}

/// What limited the allocation that failed, as `oom-kill:constraint=` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// `CONSTRAINT_NONE`: the host ran out.
    Host,
    /// `CONSTRAINT_MEMCG`: a memory cgroup reached its limit.
    MemoryCgroup,
    /// `CONSTRAINT_CPUSET`: the memory nodes of a cpuset ran out.
    Cpuset,
    /// `CONSTRAINT_MEMORY_POLICY`: the nodes a memory policy allows ran out.
    MemoryPolicy,
}

impl Constraint {
    fn parse(word: &str) -> Option<Constraint> {
        Some(match word {
            "CONSTRAINT_NONE" => Constraint::Host,
            "CONSTRAINT_MEMCG" => Constraint::MemoryCgroup,
            "CONSTRAINT_CPUSET" => Constraint::Cpuset,
            "CONSTRAINT_MEMORY_POLICY" => Constraint::MemoryPolicy,
            _ => return None,
        })
    }

    /// The label value: `host`, `memory_cgroup`, `cpuset`, `mempolicy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Constraint::Host => "host",
            Constraint::MemoryCgroup => "memory_cgroup",
            Constraint::Cpuset => "cpuset",
            Constraint::MemoryPolicy => "mempolicy",
        }
    }

    /// What the reason before `: Kill(ed) process` says, on kernels without a summary.
    fn of_reason(reason: &str) -> Constraint {
        if reason.starts_with("Memory cgroup") {
            Constraint::MemoryCgroup
        } else {
            Constraint::Host
        }
    }
}

/// `oom-kill:constraint=…`: why and where, printed just before the kill (4.20+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub constraint: Constraint,
    /// The memory cgroup whose limit was reached (`oom_memcg=`); `None` for a host-wide
    /// kill (`global_oom`).
    pub oom_memcg: Option<String>,
    /// The victim's memory cgroup (`task_memcg=`).
    pub task_memcg: Option<String>,
    pub task: String,
    pub pid: u32,
    pub uid: Option<u32>,
}

/// `[REASON: ]Killed process PID (COMM) total-vm:…kB, anon-rss:…kB, …`: the kill, with
/// the victim's memory as the kernel counted it at that moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kill {
    /// `Out of memory`, `Memory cgroup out of memory`, `Out of memory
    /// (oom_kill_allocating_task)`; kernels before 5.1 say it in the choice line instead.
    pub reason: Option<String>,
    pub pid: u32,
    pub comm: String,
    pub total_vm_bytes: Option<u64>,
    pub anon_rss_bytes: Option<u64>,
    pub file_rss_bytes: Option<u64>,
    pub shmem_rss_bytes: Option<u64>,
    pub uid: Option<u32>,
    pub pgtables_bytes: Option<u64>,
    pub oom_score_adj: Option<i64>,
}

impl Kill {
    /// The constraint its reason implies, for kernels that print no summary.
    pub fn constraint(&self) -> Option<Constraint> {
        self.reason.as_deref().map(Constraint::of_reason)
    }
}

/// `REASON: Kill process PID (COMM) score N or sacrifice child` (before 5.1): the choice,
/// which says why; the kill that follows may be a child of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub reason: String,
    pub constraint: Constraint,
    pub pid: u32,
    pub comm: String,
}

/// A line of the OOM killer's account of a kill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OomLine {
    Choice(Choice),
    Summary(Summary),
    /// `Task in TASK_MEMCG killed as a result of limit of OOM_MEMCG` (memory cgroup kills
    /// before 4.19): the cgroups, which later kernels put in the summary.
    MemcgLimit {
        task_memcg: String,
        oom_memcg: String,
    },
    Kill(Kill),
    /// `Tasks in MEMCG are going to be killed due to memory.oom.group set` (4.19+): the
    /// kill just logged is followed by one of every process of MEMCG, that victim again
    /// among them.
    GroupKill {
        memcg: String,
    },
}

/// The OOM line a message is, if it is one.
pub fn oom_line(message: &str) -> Option<OomLine> {
    if let Some(rest) = message.strip_prefix("oom-kill:") {
        return summary(rest).map(OomLine::Summary);
    }
    if let Some(rest) = message.strip_prefix("Tasks in ") {
        let memcg = rest
            .trim_end()
            .strip_suffix(" are going to be killed due to memory.oom.group set")?;
        return Some(OomLine::GroupKill {
            memcg: memcg.to_string(),
        });
    }
    if let Some(rest) = message.strip_prefix("Task in ") {
        let (task, oom) = rest.split_once(" killed as a result of limit of ")?;
        // Both are cgroup paths. A line a process made the kernel print, a segfault's by
        // a program named "Task in /x" with the rest in its file's name, holds the
        // kernel's `comm[pid]: ` before it.
        if !task.starts_with('/') || !oom.starts_with('/') || task.contains("]: ") {
            return None;
        }
        return Some(OomLine::MemcgLimit {
            task_memcg: task.to_string(),
            oom_memcg: oom.trim_end().to_string(),
        });
    }
    if let Some((reason, rest)) = message.split_once(": Kill process ") {
        if !kernels_reason(reason) {
            return None;
        }
        let (pid, comm, _) = pid_and_comm(rest, " score ")?;
        return Some(OomLine::Choice(Choice {
            constraint: Constraint::of_reason(reason),
            reason: reason.to_string(),
            pid,
            comm: comm.to_string(),
        }));
    }
    let (reason, rest) = match message.split_once(": Killed process ") {
        Some((reason, rest)) if kernels_reason(reason) => (Some(reason), rest),
        Some(_) => return None,
        None => (None, message.strip_prefix("Killed process ")?),
    };
    kill(reason, rest).map(OomLine::Kill)
}

/// A reason the OOM killer itself prints before `: Kill(ed) process` (`mm/oom_kill.c`,
/// `mm/memcontrol.c`): only these. Any process can have its own name and a file's name put
/// into the kernel log (a segfault's line names both), so `x[7]: segfault at 0 ... in
/// y: Killed process 1 (postgres) total-vm:…` is no kill.
fn kernels_reason(reason: &str) -> bool {
    matches!(reason, "Out of memory" | "Memory cgroup out of memory")
        || reason.strip_prefix("Out of memory (").is_some_and(|r| {
            r.ends_with(')')
                && r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b')')
        })
}

/// True for the record that carries the rest of a summary a kernel split in two (some
/// 4.20 to 5.2 kernels printed `,oom_memcg=` or `,global_oom` with `pr_info`, which
/// starts a record): the collector appends it to the `oom-kill:` record before it.
pub(crate) fn continues_summary(message: &str) -> bool {
    message.starts_with(",oom_memcg=") || message.starts_with(",global_oom")
}

/// A number as the kernel prints it: ASCII digits only (Rust's `parse` also takes `+`).
fn digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `PID (COMM)` followed by `marker`: the name ends at the last `)` before the marker,
/// since a name may hold parentheses and spaces.
fn pid_and_comm<'a>(text: &'a str, marker: &str) -> Option<(u32, &'a str, &'a str)> {
    let (pid, rest) = text.split_once(" (")?;
    let pid = digits(pid)?;
    let end = rest.find(marker)?;
    let close = rest[..end].rfind(')')?;
    Some((pid, &rest[..close], &rest[close + 1..]))
}

fn kill(reason: Option<&str>, text: &str) -> Option<Kill> {
    let (pid, comm, rest) = pid_and_comm(text, "total-vm:")?;
    let mut k = Kill {
        reason: reason.map(str::to_string),
        pid,
        comm: comm.to_string(),
        ..Kill::default()
    };
    let mut words = rest.split([',', ' ']).filter(|w| !w.is_empty()).peekable();
    while let Some(word) = words.next() {
        // Red Hat's 3.10: `UID 0`, a word apart.
        if word == "UID" {
            k.uid = words.next().and_then(digits);
            continue;
        }
        let Some((key, value)) = word.split_once(':') else {
            continue;
        };
        match key {
            "total-vm" => k.total_vm_bytes = super::kib_to_bytes(value),
            "anon-rss" => k.anon_rss_bytes = super::kib_to_bytes(value),
            "file-rss" => k.file_rss_bytes = super::kib_to_bytes(value),
            "shmem-rss" => k.shmem_rss_bytes = super::kib_to_bytes(value),
            "pgtables" => k.pgtables_bytes = super::kib_to_bytes(value),
            "UID" => k.uid = digits(value),
            "oom_score_adj" => {
                k.oom_score_adj = value
                    .parse()
                    .ok()
                    .filter(|adj: &i64| (-1000..=1000).contains(adj))
            }
            _ => {}
        }
    }
    Some(k)
}

/// The fields after `oom-kill:`. The task name and the cgroup paths are the user's, so
/// the fixed fields are taken from both ends: `constraint=` first, then from the right
/// `uid=`, `pid=`, `task=`, `task_memcg=`, and `oom_memcg=` or `global_oom`.
fn summary(text: &str) -> Option<Summary> {
    let rest = text.strip_prefix("constraint=")?;
    let (constraint, rest) = rest.split_once(',')?;
    let constraint = Constraint::parse(constraint)?;
    let (rest, uid) = match rest.rsplit_once(",uid=") {
        Some((r, uid)) => (r, digits(uid.trim_end())),
        None => (rest, None),
    };
    let (rest, pid) = rest.rsplit_once(",pid=")?;
    let pid = digits(pid)?;
    let (rest, task) = rest.rsplit_once(",task=")?;
    let (rest, task_memcg) = match rest.rsplit_once(",task_memcg=") {
        Some((r, m)) => (r, Some(m.to_string())),
        None => (rest, None),
    };
    let oom_memcg = rest.rsplit_once(",oom_memcg=").map(|(_, m)| m.to_string());
    Some(Summary {
        constraint,
        oom_memcg,
        task_memcg,
        task: task.to_string(),
        pid,
        uid,
    })
}

#[cfg(test)]
mod tests;
