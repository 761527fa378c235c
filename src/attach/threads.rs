//! Which of a process's threads a call can run in: one that waits in a system call, as
//! `/proc/PID/task/TID/syscall` says (a number first; `running` or `-1` otherwise), the
//! main thread first.

use crate::source::{Buffer, Source};

/// At most this many threads are looked at: a process with more is tried in the first.
const MAX_THREADS: usize = 4096;

/// The threads of `pid` that wait in a system call now, the main thread first.
pub fn waiting(source: &Source, pid: u32) -> Vec<u32> {
    let dir = source.procfs().join(pid.to_string()).join("task");
    let Ok(names) = source.dir_names(&dir) else {
        return Vec::new();
    };
    let mut tids: Vec<u32> = names
        .iter()
        .filter_map(|n| n.parse().ok())
        .take(MAX_THREADS)
        .collect();
    tids.sort_by_key(|&t| (t != pid, t));
    let mut buf = Buffer::default();
    tids.into_iter()
        .filter(|&tid| {
            source
                .read_pid(pid, &format!("task/{tid}/syscall"), &mut buf)
                .is_ok_and(in_syscall)
        })
        .collect()
}

/// `/proc/PID/task/TID/syscall` names a system call the thread waits in.
pub(crate) fn in_syscall(text: &str) -> bool {
    text.split_ascii_whitespace()
        .next()
        .and_then(|nr| nr.parse::<i64>().ok())
        .is_some_and(|nr| nr >= 0)
}

#[cfg(test)]
mod tests {
    use super::in_syscall;

    #[test]
    fn a_number_first_is_a_system_call_waited_in() {
        // As found on 6.18: a thread in pause(), one running, one stopped outside a call.
        assert!(in_syscall(
            "34 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd6b3c1e28 0x7f3a2c0e5f03\n"
        ));
        assert!(!in_syscall("running\n"));
        assert!(!in_syscall("-1 0x7ffd6b3c1e28 0x55d4c0a01139\n"));
        assert!(!in_syscall(""));
    }
}
