// A Rust program on mimalloc (linked in statically through `libmimalloc-sys`, as the
// `mimalloc` crate links it into Rust services) that keeps freed memory in mimalloc's
// heaps, and what mimalloc itself says of it.
//
// usage: mimalloc-free SEED THREADS MIB KEEP_PERCENT
// Each of THREADS long-lived threads allocates blocks of random sizes (16 B to 4 MiB, by
// SEED) until it has MIB/THREADS MiB, touches every page, and frees all but KEEP_PERCENT %
// of them in random order; then it waits. Once all have, the program prints one line
//   ready version=V rss=B commit=B
// (`mi_version()`, and `mi_process_info`'s current RSS and commit, in bytes), then waits
// for a line on stdin: `collect` has every thread run `mi_collect(true)` on its own heap
// (and the main thread last) and prints the line again; `stats` prints it again.
use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::io::BufRead;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};

/// The `mimalloc` crate's allocator, as it calls mimalloc.
struct MiMalloc;

// SAFETY: mimalloc's aligned calls honour the layout; this is the `mimalloc` crate's code.
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        mi::mi_malloc_aligned(l.size(), l.align()).cast()
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        mi::mi_zalloc_aligned(l.size(), l.align()).cast()
    }
    unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
        mi::mi_free(p.cast())
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        mi::mi_realloc_aligned(p.cast(), n, l.align()).cast()
    }
}

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn print_stats() {
    let (mut elapsed, mut user, mut sys) = (0usize, 0usize, 0usize);
    let (mut rss, mut peak_rss, mut commit, mut peak_commit, mut faults) = (0, 0, 0, 0, 0);
    // SAFETY: every pointer is to a live usize.
    unsafe {
        mi::mi_process_info(
            &mut elapsed,
            &mut user,
            &mut sys,
            &mut rss,
            &mut peak_rss,
            &mut commit,
            &mut peak_commit,
            &mut faults,
        )
    };
    // SAFETY: no arguments.
    let v = unsafe { mi::mi_version() };
    let version = if v >= 10000 {
        format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 100, v / 10 % 10, v % 10)
    };
    println!("ready version={version} rss={rss} commit={commit}");
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let [seed, threads, mib, keep] = args[..] else {
        panic!("usage: mimalloc-free SEED THREADS MIB KEEP_PERCENT");
    };
    let all = Arc::new(Barrier::new(threads as usize + 1));
    let (done_tx, done) = mpsc::channel::<()>();
    let mut asks = Vec::new();
    for t in 0..threads {
        let all = Arc::clone(&all);
        let done_tx = done_tx.clone();
        let (ask, asked) = mpsc::channel::<()>();
        asks.push(ask);
        std::thread::spawn(move || {
            let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t + 1) | 1;
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            let mut total = 0u64;
            while total < (mib << 20) / threads {
                // Sizes over mimalloc's small, medium, large and huge classes.
                let size = 16usize << (next(&mut state) % 19);
                let size = size + (next(&mut state) as usize % size);
                let mut b = vec![0u8; size];
                for i in (0..size).step_by(4096) {
                    b[i] = 1;
                }
                total += size as u64;
                blocks.push(b);
            }
            let n = blocks.len();
            let kept = n * keep as usize / 100;
            for _ in kept..n {
                let i = next(&mut state) as usize % blocks.len();
                drop(blocks.swap_remove(i));
            }
            all.wait();
            // Long-lived: the thread and its heap stay, each collect run on its own heap.
            while asked.recv().is_ok() {
                // SAFETY: collects this thread's own heap.
                unsafe { mi::mi_collect(true) };
                done_tx.send(()).unwrap();
            }
            drop(blocks);
        });
    }
    all.wait();
    print_stats();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if line.trim() == "collect" {
            for a in &asks {
                a.send(()).unwrap();
                done.recv().unwrap();
            }
            // SAFETY: the main thread's own heap, and the abandoned segments.
            unsafe { mi::mi_collect(true) };
        }
        print_stats();
    }
}
