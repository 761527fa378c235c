//! Why a call into another process was not made, or not completed.

/// Why a call was not made, or not completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The process or thread went.
    Gone,
    /// ptrace refused: no `CAP_SYS_PTRACE` over the process, Yama, another tracer.
    Denied(String),
    /// The thread was not waiting in a system call when it stopped.
    NotInSyscall,
    /// The thread's state could not be saved and written back whole: nothing was changed.
    State(String),
    /// The call waited on a lock past its limit: abandoned (it held none), the thread put
    /// back as it was.
    Abandoned,
    /// The call did not complete (a fault in it, a failed step): the thread was put back
    /// as it was; the reason says what happened.
    Failed(String),
    /// Not on this architecture.
    Unsupported,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Gone => write!(f, "the process exited"),
            CallError::Denied(e) => write!(f, "ptrace refused ({e}): run as root, or with CAP_SYS_PTRACE over the process"),
            CallError::NotInSyscall => write!(f, "the thread was not waiting in a system call"),
            CallError::State(e) => write!(f, "the thread's register state could not be saved and written back whole ({e}); nothing was changed"),
            CallError::Abandoned => write!(f, "the call waited for a heap's lock past its limit and was abandoned, holding none; the thread was put back as it was"),
            CallError::Failed(e) => write!(f, "{e}; the thread was put back as it was"),
            CallError::Unsupported => write!(f, "calls into another process are made on x86-64 only"),
        }
    }
}
