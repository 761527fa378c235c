//! The x86-64 steps of a call into another thread (the parent module says how).

use super::error::CallError;
use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// The call's own stack: mapped in the target for the call, unmapped after.
const STACK_BYTES: u64 = 1 << 20;
/// `NT_X86_XSTATE`: the XSAVE area as the kernel lays it out for ptrace.
const NT_X86_XSTATE: usize = 0x202;
/// Room for the largest XSAVE area a CPU has (AMX's tile data puts today's at about
/// 11 KiB); the kernel says how much it filled.
const XSTATE_ROOM: usize = 64 << 10;
/// `syscall`, as it lies in memory.
const SYSCALL: u64 = 0x050f;
const SYS_MMAP: u64 = 9;
const SYS_MUNMAP: u64 = 11;
const SYS_FUTEX: u64 = 202;
/// The trap flag and the direction flag: a function is entered with both clear.
const EFLAGS_TF_DF: u64 = 0x100 | 0x400;
/// How long a stop the thread was asked for may take to come.
const STOP_WAIT: Duration = Duration::from_secs(10);

fn denied(e: Errno) -> CallError {
    match e {
        Errno::ESRCH => CallError::Gone,
        e => CallError::Denied(e.desc().to_string()),
    }
}

fn failed(what: &str) -> impl Fn(Errno) -> CallError + '_ {
    move |e| match e {
        Errno::ESRCH => CallError::Gone,
        e => CallError::Failed(format!("{what}: {}", e.desc())),
    }
}

pub fn call(tid: u32, func: u64, arg: u64, lock_wait: Duration) -> Result<u64, CallError> {
    let t = Pid::from_raw(tid as i32);
    ptrace::seize(t, Options::PTRACE_O_TRACESYSGOOD).map_err(denied)?;
    let outcome = stop(t).and_then(|()| {
        let saved = Saved::take(t)?;
        if saved.regs.orig_rax as i64 <= -1 {
            return Err(CallError::NotInSyscall);
        }
        let word = ptrace::read(t, saved.regs.rip.wrapping_sub(2) as ptrace::AddressType)
            .map_err(failed("reading the thread's code"))?;
        if word as u64 & 0xffff != SYSCALL {
            return Err(CallError::NotInSyscall);
        }
        let ran = run(t, &saved, func, arg, lock_wait);
        // The saved state goes back whatever happened, as long as the thread is there.
        match (ran, saved.put_back(t)) {
            (Err(CallError::Gone), _) | (_, Err(CallError::Gone)) => Err(CallError::Gone),
            (_, Err(e)) => Err(e),
            (ran, Ok(())) => ran,
        }
    });
    release(t);
    outcome
}

/// Waits until the thread is in the stop `PTRACE_INTERRUPT` asked for; signals that come
/// first are delivered as they would have been.
fn stop(t: Pid) -> Result<(), CallError> {
    ptrace::interrupt(t).map_err(denied)?;
    loop {
        match wait(t)? {
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_STOP) => return Ok(()),
            WaitStatus::Stopped(_, sig) => {
                ptrace::cont(t, sig).map_err(failed("delivering a signal"))?;
                ptrace::interrupt(t).map_err(denied)?;
            }
            _ => ptrace::cont(t, None).map_err(failed("resuming"))?,
        }
    }
}

/// The thread's next stop (or its end), waited for at most [`STOP_WAIT`].
fn wait(t: Pid) -> Result<WaitStatus, CallError> {
    let deadline = Instant::now() + STOP_WAIT;
    let got = poll(deadline, || {
        match waitpid(t, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => None,
            other => Some(other),
        }
    });
    match got {
        None => Err(CallError::Failed(format!(
            "the thread did not stop within {} s",
            STOP_WAIT.as_secs()
        ))),
        Some(Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..))) | Some(Err(Errno::ECHILD)) => {
            Err(CallError::Gone)
        }
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(failed("waiting for the thread")(e)),
    }
}

/// Detaches, stopping the thread first if it runs (ptrace detaches only a stopped one).
fn release(t: Pid) {
    if ptrace::detach(t, None).is_ok() {
        return;
    }
    if ptrace::interrupt(t).is_ok() {
        while let Ok(s) = wait(t) {
            match s {
                WaitStatus::PtraceEvent(..) => break,
                WaitStatus::Stopped(_, sig) => {
                    let _ = ptrace::detach(t, sig);
                    return;
                }
                _ => {}
            }
        }
    }
    let _ = ptrace::detach(t, None);
}

/// The thread's registers and whole extended state as it was stopped.
struct Saved {
    regs: libc::user_regs_struct,
    /// The XSAVE area (`NT_X86_XSTATE`), as long as the kernel filled it; else the
    /// FXSAVE area (`PTRACE_GETFPREGS`), on a CPU without XSAVE.
    extended: Vec<u8>,
    xsave: bool,
}

impl Saved {
    /// Saves the state, then writes it back once as it is: where the kernel refuses
    /// its own state back, nothing has changed yet and nothing will.
    fn take(t: Pid) -> Result<Saved, CallError> {
        let regs = ptrace::getregs(t).map_err(failed("reading the registers"))?;
        let mut extended = vec![0u8; XSTATE_ROOM];
        let (xsave, len) = match regset(t, libc::PTRACE_GETREGSET, &mut extended) {
            Ok(len) => (true, len),
            Err(Errno::EINVAL | Errno::ENODEV | Errno::EIO) => {
                extended.truncate(512);
                (false, fpregs(t, libc::PTRACE_GETFPREGS, &mut extended)?)
            }
            Err(e) => return Err(CallError::State(format!("reading it: {}", e.desc()))),
        };
        extended.truncate(len);
        let saved = Saved {
            regs,
            extended,
            xsave,
        };
        saved.put_extended(t)?;
        Ok(saved)
    }

    fn put_extended(&self, t: Pid) -> Result<(), CallError> {
        let mut copy = self.extended.clone();
        let put = if self.xsave {
            regset(t, libc::PTRACE_SETREGSET, &mut copy).map_err(|e| {
                CallError::State(format!(
                    "the kernel refused {} bytes of extended state back: {}",
                    copy.len(),
                    e.desc()
                ))
            })?
        } else {
            fpregs(t, libc::PTRACE_SETFPREGS, &mut copy)?
        };
        if put != self.extended.len() {
            return Err(CallError::State(format!(
                "the kernel took {put} of {} bytes of extended state",
                self.extended.len()
            )));
        }
        Ok(())
    }

    fn put_back(&self, t: Pid) -> Result<(), CallError> {
        self.put_extended(t)?;
        ptrace::setregs(t, self.regs).map_err(failed("writing the registers back"))
    }
}

/// `PTRACE_GETREGSET`/`PTRACE_SETREGSET` of `NT_X86_XSTATE` with `buf`: the bytes the
/// kernel filled or took.
fn regset(t: Pid, request: ptrace::RequestType, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` points at `buf`, which outlives the call and is exclusively
    // borrowed; the kernel writes (GET) or reads (SET) at most `iov_len` bytes of it
    // and stores the length it used in `iov_len`.
    let r = unsafe {
        libc::ptrace(
            request,
            t.as_raw(),
            NT_X86_XSTATE as *mut libc::c_void,
            (&mut iov as *mut libc::iovec).cast::<libc::c_void>(),
        )
    };
    if r < 0 {
        return Err(Errno::last());
    }
    Ok(iov.iov_len)
}

/// `PTRACE_GETFPREGS`/`PTRACE_SETFPREGS` with a 512-byte `buf` (`user_fpregs_struct`).
fn fpregs(t: Pid, request: ptrace::RequestType, buf: &mut [u8]) -> Result<usize, CallError> {
    if buf.len() != std::mem::size_of::<libc::user_fpregs_struct>() {
        return Err(CallError::State("the FXSAVE area is not 512 bytes".into()));
    }
    // SAFETY: `buf` is exactly `user_fpregs_struct`'s 512 bytes, exclusively borrowed
    // for the call; the kernel reads or writes no more than that.
    let r = unsafe {
        libc::ptrace(
            request,
            t.as_raw(),
            std::ptr::null_mut::<libc::c_void>(),
            buf.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    if r < 0 {
        return Err(CallError::State(format!(
            "its x87/SSE state: {}",
            Errno::last().desc()
        )));
    }
    Ok(buf.len())
}

/// The call proper: a stack of its own, the function on it, the stack given back.
fn run(t: Pid, saved: &Saved, func: u64, arg: u64, lock_wait: Duration) -> Result<u64, CallError> {
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64;
    let stack = syscall(
        t,
        saved,
        SYS_MMAP,
        [0, STACK_BYTES, prot, flags, u64::MAX, 0],
    )?;
    if stack > -4096i64 as u64 {
        return Err(CallError::Failed(format!(
            "mapping a stack for the call failed (errno {})",
            stack.wrapping_neg()
        )));
    }
    let called = call_on(t, saved, func, arg, stack + STACK_BYTES, lock_wait);
    let unmapped = syscall(t, saved, SYS_MUNMAP, [stack, STACK_BYTES, 0, 0, 0, 0]);
    let returned = called?;
    unmapped?;
    Ok(returned)
}

/// Runs system call `nr` with `args` at the `syscall` instruction the thread stopped
/// after; returns what it returned (`rax`).
fn syscall(t: Pid, saved: &Saved, nr: u64, args: [u64; 6]) -> Result<u64, CallError> {
    let mut r = saved.regs;
    r.rip = saved.regs.rip - 2;
    r.rax = nr;
    // No system call to restart: the kernel leaves rax and rip as they are set here.
    r.orig_rax = u64::MAX;
    [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9] = args;
    ptrace::setregs(t, r).map_err(failed("setting up a system call"))?;
    let mut exits = 0;
    ptrace::syscall(t, None).map_err(failed("resuming"))?;
    loop {
        match wait(t)? {
            WaitStatus::PtraceSyscall(_) => {
                exits += 1;
                if exits == 2 {
                    let after = ptrace::getregs(t).map_err(failed("reading the registers"))?;
                    return Ok(after.rax);
                }
                ptrace::syscall(t, None).map_err(failed("resuming"))?;
            }
            WaitStatus::Stopped(_, sig) => {
                ptrace::syscall(t, sig).map_err(failed("delivering a signal"))?
            }
            _ => ptrace::syscall(t, None).map_err(failed("resuming"))?,
        }
    }
}

/// `func(arg)` on the stack that ends at `top`, returning to address 0.
fn call_on(
    t: Pid,
    saved: &Saved,
    func: u64,
    arg: u64,
    top: u64,
    lock_wait: Duration,
) -> Result<u64, CallError> {
    // At a function's first instruction rsp + 8 is a multiple of 16 (the System V ABI).
    let sp = top - 8;
    ptrace::write(t, sp as ptrace::AddressType, 0).map_err(failed("writing the return address"))?;
    let mut r = saved.regs;
    r.rsp = sp;
    r.rip = func;
    r.rdi = arg;
    r.rax = 0;
    r.orig_rax = u64::MAX;
    r.eflags &= !EFLAGS_TF_DF;
    ptrace::setregs(t, r).map_err(failed("setting up the call"))?;
    ptrace::cont(t, None).map_err(failed("resuming"))?;
    let mut deadline = Instant::now() + lock_wait;
    let mut asked = false;
    loop {
        let status = poll(deadline, || {
            match waitpid(t, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => None,
                other => Some(other),
            }
        });
        let status = match status {
            None if !asked => {
                // Past the limit: stopped and looked at.
                ptrace::interrupt(t).map_err(failed("stopping the call"))?;
                asked = true;
                deadline = Instant::now() + Duration::from_secs(10);
                continue;
            }
            None => {
                return Err(CallError::Failed(
                    "the thread did not stop when asked".into(),
                ))
            }
            Some(Err(Errno::ECHILD)) => return Err(CallError::Gone),
            Some(Err(e)) => return Err(failed("waiting for the call")(e)),
            Some(Ok(s)) => s,
        };
        match status {
            WaitStatus::Exited(..) | WaitStatus::Signaled(..) => return Err(CallError::Gone),
            WaitStatus::Stopped(_, Signal::SIGSEGV) => {
                let r = ptrace::getregs(t).map_err(failed("reading the registers"))?;
                if r.rip == 0 && r.rsp == top {
                    return Ok(r.rax);
                }
                return Err(CallError::Failed(format!(
                    "the call faulted at {:#x} (its heap may be corrupt); the fault was not delivered",
                    r.rip
                )));
            }
            WaitStatus::Stopped(_, Signal::SIGABRT) => {
                return Err(CallError::Failed(
                    "glibc aborted the call (its heap is corrupt); the abort was not delivered"
                        .into(),
                ))
            }
            WaitStatus::Stopped(_, sig) => {
                ptrace::cont(t, sig).map_err(failed("delivering a signal"))?
            }
            WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_STOP) if asked => {
                let r = ptrace::getregs(t).map_err(failed("reading the registers"))?;
                if r.orig_rax == SYS_FUTEX {
                    return Err(CallError::Abandoned);
                }
                // Still working (a large heap given back): let it finish.
                asked = false;
                deadline = Instant::now() + lock_wait;
                ptrace::cont(t, None).map_err(failed("resuming"))?;
            }
            _ => ptrace::cont(t, None).map_err(failed("resuming"))?,
        }
    }
}

/// Waits for `done` to say something, checking every few milliseconds until `deadline`.
fn poll<T>(deadline: Instant, mut done: impl FnMut() -> Option<T>) -> Option<T> {
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(v) = done() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}
