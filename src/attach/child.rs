//! The canary's throw-away child: this binary run with [`ARG`]. Four threads wait in the
//! four kinds of system call a service waits in (`pause`, `nanosleep`, `read` on a pipe, a
//! futex), each with a known value in a vector register (`xmm8`) that the call it is woken
//! from must not have changed. [`probe`] is what a mechanism calls in it: it clobbers
//! vector registers, as `malloc_trim`'s `memset` does, and counts its calls.
//!
//! It prints, one per line: `thread KIND TID` for each waiter, `probe ADDRESS`, `ready`;
//! once woken (a byte on stdin wakes `read`, which wakes the futex; `SIGUSR1` wakes
//! `pause` and `nanosleep`): `result KIND RETURNED XMM_KEPT` for each, `calls N`, `alive`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The argument that makes this binary the canary's child.
pub const ARG: &str = "__membloat-canary-child";

/// The waits, in the order of their lines; `pause` is the main thread's (gdb calls there).
pub(crate) const KINDS: [&str; 4] = ["pause", "nanosleep", "read", "futex"];

/// What [`probe`] returns for `arg`: proof that it ran to its end and returned.
pub(crate) fn probed(arg: u64) -> u64 {
    arg.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5a5a_5a5a
}

static CALLS: AtomicU64 = AtomicU64::new(0);
static FUTEX_WORD: AtomicU32 = AtomicU32::new(0);
/// The child gives up after this long, should its parent never wake it.
const WATCHDOG: Duration = Duration::from_secs(60);

/// The function a mechanism calls in the child.
pub extern "C" fn probe(arg: u64) -> u64 {
    clobber_vectors();
    CALLS.fetch_add(1, Ordering::SeqCst);
    probed(arg)
}

#[cfg(target_arch = "x86_64")]
fn clobber_vectors() {
    // SAFETY: only vector registers are written, each declared clobbered; SSE2 is part of
    // x86-64.
    unsafe {
        std::arch::asm!(
            "pcmpeqd xmm8, xmm8",
            "pxor xmm0, xmm0",
            out("xmm0") _,
            out("xmm8") _,
            options(nostack, nomem)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn clobber_vectors() {}

/// System call `nr` with `args`, `xmm8` holding a known value across it: what it returned
/// (a negative errno on failure, as the kernel gives it) and whether `xmm8` came back.
#[cfg(target_arch = "x86_64")]
fn wait_in(nr: u64, args: [u64; 4]) -> (i64, bool) {
    use std::arch::x86_64::__m128i;
    let words: [u64; 2] = [0x0123_4567_89ab_cdef, 0x1122_3344_5566_7788];
    // SAFETY: `__m128i` is 16 plain bytes, as is `[u64; 2]`.
    let pattern: __m128i = unsafe { std::mem::transmute(words) };
    let ret: i64;
    let out: __m128i;
    // SAFETY: a raw system call whose pointer arguments (the callers') point at live,
    // exclusively owned memory of the size the call takes; `syscall` clobbers rcx and r11,
    // declared; xmm8 is an operand in and out.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as i64 => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            inlateout("xmm8") pattern => out,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        );
    }
    // SAFETY: as above.
    let back: [u64; 2] = unsafe { std::mem::transmute(out) };
    (ret, back == words)
}

#[cfg(not(target_arch = "x86_64"))]
fn wait_in(_nr: u64, _args: [u64; 4]) -> (i64, bool) {
    (-(libc::ENOSYS as i64), true)
}

static WOKEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr1(_: libc::c_int) {
    WOKEN.store(true, Ordering::SeqCst);
}

fn tid() -> u32 {
    nix::unistd::gettid().as_raw() as u32
}

/// How a waiter's waits came back: the first return a program would not expect (`None`:
/// none), and whether `xmm8` came back from every one.
type Came = (Option<i64>, bool);

/// Repeats the wait `nr(args)` as a program does until `done` says it was woken; a return
/// that is none of `fine` is kept.
fn waits(nr: i64, args: [u64; 4], fine: &[i64], done: impl Fn(i64) -> bool) -> Came {
    let (mut bad, mut kept) = (None, true);
    loop {
        let (ret, k) = wait_in(nr as u64, args);
        kept &= k;
        if !fine.contains(&ret) && bad.is_none() {
            bad = Some(ret);
        }
        if done(ret) {
            return (bad, kept);
        }
    }
}

/// Runs the child; returns its exit code.
pub fn run() -> i32 {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    // No SA_RESTART: a woken pause and nanosleep return EINTR, as they must.
    let usr1 = SigAction::new(
        SigHandler::Handler(on_usr1),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler stores to an atomic, which is async-signal-safe.
    if unsafe { sigaction(Signal::SIGUSR1, &usr1) }.is_err() {
        return 3;
    }
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        std::process::exit(3);
    });
    let (tx, rx) = mpsc::channel::<(usize, u32)>();
    let mut waiters = Vec::new();
    for (i, kind) in KINDS.iter().enumerate().skip(1) {
        let tx = tx.clone();
        let kind = *kind;
        waiters.push(std::thread::spawn(move || {
            let _ = tx.send((i, tid()));
            waiter(kind)
        }));
    }
    let mut tids = [tid(), 0, 0, 0];
    for _ in 1..KINDS.len() {
        let Ok((i, t)) = rx.recv() else { return 3 };
        tids[i] = t;
    }
    let mut out = std::io::stdout().lock();
    for (kind, t) in KINDS.iter().zip(tids) {
        let _ = writeln!(out, "thread {kind} {t}");
    }
    let _ = writeln!(out, "probe {}", probe as extern "C" fn(u64) -> u64 as usize);
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    let mut results = vec![(KINDS[0], waiter(KINDS[0]))];
    for (kind, w) in KINDS.iter().skip(1).zip(waiters) {
        let Ok(r) = w.join() else { return 3 };
        results.push((kind, r));
    }
    for (kind, (bad, kept)) in results {
        let came = bad.map_or("ok".to_string(), |r| r.to_string());
        let _ = writeln!(out, "result {kind} {came} {kept}");
    }
    let _ = writeln!(out, "calls {}", CALLS.load(Ordering::SeqCst));
    // It goes on: it allocates and frees as a program does.
    let v: Vec<u64> = (0..4096).collect();
    let _ = writeln!(out, "alive {}", v.iter().sum::<u64>());
    let _ = out.flush();
    0
}

/// One waiter's waits, repeated as a program repeats them until it is woken: `pause` and
/// `nanosleep` until SIGUSR1's handler ran (EINTR is what they return then), `read` until
/// its byte came, the futex until its word changed (EAGAIN where it changed first).
fn waiter(kind: &str) -> Came {
    const EINTR: i64 = -(libc::EINTR as i64);
    const EAGAIN: i64 = -(libc::EAGAIN as i64);
    let woken = |_| WOKEN.load(Ordering::SeqCst);
    match kind {
        "pause" => waits(libc::SYS_pause, [0; 4], &[EINTR], woken),
        "nanosleep" => {
            let long = libc::timespec {
                tv_sec: WATCHDOG.as_secs() as _,
                tv_nsec: 0,
            };
            let mut rem = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let req = &long as *const libc::timespec as u64;
            let rem = &mut rem as *mut libc::timespec as u64;
            waits(libc::SYS_nanosleep, [req, rem, 0, 0], &[EINTR, 0], woken)
        }
        "read" => {
            let mut byte = [0u8; 1];
            let at = byte.as_mut_ptr() as u64;
            let came = waits(libc::SYS_read, [0, at, 1, 0], &[1], |r| r != EINTR);
            FUTEX_WORD.store(1, Ordering::SeqCst);
            // SAFETY: FUTEX_WAKE on a static word: no memory is written.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    FUTEX_WORD.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    1,
                );
            }
            came
        }
        _ => {
            let word = FUTEX_WORD.as_ptr() as u64;
            let op = (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as u64;
            waits(libc::SYS_futex, [word, op, 0, 0], &[0, EAGAIN], |_| {
                FUTEX_WORD.load(Ordering::SeqCst) != 0
            })
        }
    }
}
