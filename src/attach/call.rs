//! One function called inside one thread of another process, with the thread left exactly
//! as it was found: its general registers, its whole extended state (x87, SSE, AVX,
//! AVX-512, AMX: as many bytes as the kernel says the state has) and the system call it
//! was blocked in, which the kernel then restarts as after any signal it ignores.
//!
//! How (x86-64): the thread is seized and interrupted (`PTRACE_SEIZE`, `PTRACE_INTERRUPT`)
//! while it waits in a system call, so its next instruction follows a `syscall`. Its state
//! is saved, and written back once at once: a kernel or CPU that refuses its own state back
//! (what breaks gdb 13's inferior calls on CPUs with AMX) is found before anything
//! changed. That `syscall` instruction then runs `mmap` for a stack of the call's own (a
//! thread may be on a small stack: a goroutine's, a signal stack), the function runs on it
//! and returns to address 0, where the fault stops it; `munmap` gives the stack back, and
//! the saved state goes back whole before the thread is let go. Other threads run all the
//! while, so one that holds a heap's lock lets it go. A call that waits on a lock past its
//! limit holds none (glibc's `malloc_trim` takes one arena's lock at a time): it is
//! abandoned, the thread put back as it was.

use std::time::Duration;

mod error;
pub use error::CallError;

/// Calls `func(arg)` in thread `tid` of process `pid` and returns what it returned. A call
/// that waits on a lock for longer than `lock_wait` is abandoned.
#[cfg(target_arch = "x86_64")]
pub fn call(tid: u32, func: u64, arg: u64, lock_wait: Duration) -> Result<u64, CallError> {
    x86::call(tid, func, arg, lock_wait)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn call(_tid: u32, _func: u64, _arg: u64, _lock_wait: Duration) -> Result<u64, CallError> {
    Err(CallError::Unsupported)
}

#[cfg(target_arch = "x86_64")]
mod x86;
