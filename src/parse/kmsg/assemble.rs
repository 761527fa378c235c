//! Whole kills from the records of `/dev/kmsg`, in the order the kernel writes them: the
//! summary (4.20+), or the choice and the memory cgroup line (before), then the kill. Only
//! the kill line completes one; what came before it is kept while it names the same pid
//! (the choice may name a parent whose child is killed, so its reason still counts).

use super::{oom_line, record, Choice, Constraint, Continuation, Kill, OomLine, Summary};

/// One kill, as the kernel told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomKill {
    /// The kill line's sequence number and time since boot (microseconds).
    pub sequence: u64,
    pub micros: u64,
    /// From the summary, else from the reason of the choice or the kill; `None` when no
    /// line said (a kill line without reason on a kernel before 4.20).
    pub constraint: Option<Constraint>,
    /// The memory cgroup whose limit was reached; `None` for a host-wide kill or when no
    /// line said.
    pub oom_memcg: Option<String>,
    /// The victim's memory cgroup, when a line said.
    pub task_memcg: Option<String>,
    /// The victim and its memory as the kernel counted it when killing it.
    pub kill: Kill,
}

/// Turns records into kills; holds what a kill line will complete.
#[derive(Debug, Default)]
pub struct Assembler {
    summary: Option<Summary>,
    choice: Option<Choice>,
    memcg: Option<(String, String)>,
    /// A line split over records (`c`, then `+`), until its last part.
    partial: Option<String>,
    /// The latest `oom-kill:` line, for a tail some kernels wrote as a record of its own.
    summary_head: Option<String>,
    /// Records that were not records (counted by the reader as malformed).
    pub malformed: u64,
    /// The latest kill, for the group kill that may follow it.
    last: Option<OomKill>,
    /// A `memory.oom.group` kill under way: its members' kill lines follow.
    group: Option<Group>,
}

/// A group kill: the cgroup all its members are killed in, what the first kill said of the
/// OOM, and the pids already told (the first victim is logged again among the members).
#[derive(Debug)]
struct Group {
    memcg: String,
    constraint: Option<Constraint>,
    oom_memcg: Option<String>,
    killed: Vec<u32>,
}

/// Pids remembered per group kill; a larger group's later members are not checked for a
/// repeat (the kernel repeats only the first victim).
const MAX_GROUP: usize = 4096;

/// More than one line of a kill is never this long; a longer split line is dropped.
const MAX_LINE: usize = 4096;

impl Assembler {
    /// Takes one record as one `read` returned it; returns the kill it completes.
    pub fn push(&mut self, text: &str) -> Option<OomKill> {
        let Ok(r) = record(text) else {
            self.malformed += 1;
            return None;
        };
        // Only the kernel logs with facility 0: a record a process wrote to /dev/kmsg is
        // given LOG_USER (or its own facility) by the kernel, whatever it asked for, so no
        // process can write the kernel's OOM lines, even a root one where the device is.
        if r.priority >> 3 != 0 {
            return None;
        }
        let joined;
        let message = match r.continuation {
            Continuation::Whole => {
                self.partial = None;
                r.message
            }
            Continuation::Begins => {
                self.partial = Some(r.message.to_string());
                return None;
            }
            Continuation::Continues => {
                let mut line = self.partial.take()?;
                line.push_str(r.message);
                if line.len() > MAX_LINE {
                    return None;
                }
                joined = line;
                joined.as_str()
            }
        };
        self.line(message, r.sequence, r.micros)
    }

    fn line(&mut self, message: &str, sequence: u64, micros: u64) -> Option<OomKill> {
        let joined;
        let message = if super::continues_summary(message) {
            // Some 4.20 to 5.2 kernels wrote the summary's tail as a record of its own.
            let head = self.summary_head.take()?;
            joined = format!("{head}{message}");
            joined.as_str()
        } else {
            if message.starts_with("oom-kill:") && message.len() <= MAX_LINE {
                self.summary_head = Some(message.to_string());
            }
            message
        };
        match oom_line(message)? {
            OomLine::Summary(s) => {
                self.summary = Some(s);
                self.choice = None;
                self.memcg = None;
                self.group = None;
            }
            OomLine::Choice(c) => {
                self.choice = Some(c);
                self.summary = None;
                self.memcg = None;
                self.group = None;
            }
            OomLine::MemcgLimit {
                task_memcg,
                oom_memcg,
            } => self.memcg = Some((task_memcg, oom_memcg)),
            OomLine::GroupKill { memcg } => {
                let last = self.last.take();
                self.group = Some(Group {
                    memcg,
                    constraint: last.as_ref().and_then(|k| k.constraint),
                    oom_memcg: last.as_ref().and_then(|k| k.oom_memcg.clone()),
                    killed: last.map(|k| k.kill.pid).into_iter().collect(),
                });
            }
            OomLine::Kill(kill) => {
                if let Some(g) = &mut self.group {
                    if g.killed.contains(&kill.pid) {
                        // The first victim, told again among the members: one kill.
                        return None;
                    }
                    if g.killed.len() < MAX_GROUP {
                        g.killed.push(kill.pid);
                    }
                    return Some(OomKill {
                        sequence,
                        micros,
                        constraint: g.constraint.or(kill.constraint()),
                        oom_memcg: g.oom_memcg.clone(),
                        task_memcg: Some(g.memcg.clone()),
                        kill,
                    });
                }
                let k = self.complete(kill, sequence, micros);
                self.last = Some(k.clone());
                return Some(k);
            }
        }
        None
    }

    fn complete(&mut self, kill: Kill, sequence: u64, micros: u64) -> OomKill {
        let summary = self.summary.take().filter(|s| s.pid == kill.pid);
        let choice = self.choice.take();
        let memcg = self.memcg.take();
        let (constraint, oom_memcg, task_memcg) = match (summary, memcg) {
            (Some(s), _) => (Some(s.constraint), s.oom_memcg, s.task_memcg),
            (None, Some((task, oom))) => (Some(Constraint::MemoryCgroup), Some(oom), Some(task)),
            (None, None) => (
                kill.constraint().or(choice.map(|c| c.constraint)),
                None,
                None,
            ),
        };
        OomKill {
            sequence,
            micros,
            constraint,
            oom_memcg,
            task_memcg,
            kill,
        }
    }
}
