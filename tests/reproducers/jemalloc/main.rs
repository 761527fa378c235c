// A Rust program on tikv-jemallocator (jemalloc linked in statically, as Rust services
// and Redis's image have it) that keeps freed memory in jemalloc's arenas, and what
// jemalloc itself says of it.
//
// usage: jemalloc-free SEED THREADS MIB KEEP_PERCENT
// Each of THREADS long-lived threads allocates blocks of random sizes (16 B to 4 MiB,
// by SEED) until it has MIB/THREADS MiB, touches every page, and frees all but
// KEEP_PERCENT % of them in random order; then it waits. Once all have, the program
// advances jemalloc's epoch and prints one line
//   ready version=V pactive=N pdirty=N pmuzzy=N
// (`stats.arenas.<all>.*`, in pages), then waits for a line on stdin: `purge` purges every
// arena (`arena.<all>.purge`) and prints the line again; `stats` prints it again.
use std::io::BufRead;
use std::sync::{Arc, Barrier};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `MALLCTL_ARENAS_ALL`: every arena.
const ALL: usize = 4096;

fn pages(what: &str) -> usize {
    let name = format!("stats.arenas.{ALL}.{what}\0");
    // SAFETY: the name is NUL-terminated and each of these statistics is a size_t.
    unsafe { tikv_jemalloc_ctl::raw::read::<usize>(name.as_bytes()) }.expect(what)
}

fn print_stats() {
    tikv_jemalloc_ctl::epoch::advance().expect("epoch");
    println!(
        "ready version={} pactive={} pdirty={} pmuzzy={}",
        tikv_jemalloc_ctl::version::read().expect("version"),
        pages("pactive"),
        pages("pdirty"),
        pages("pmuzzy")
    );
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
        panic!("usage: jemalloc-free SEED THREADS MIB KEEP_PERCENT");
    };
    let all = Arc::new(Barrier::new(threads as usize + 1));
    for t in 0..threads {
        let all = Arc::clone(&all);
        std::thread::spawn(move || {
            let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t + 1) | 1;
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            let mut total = 0u64;
            while total < (mib << 20) / threads {
                // Sizes spread over jemalloc's small, large and huge classes.
                let size = 16usize << (next(&mut state) % 19);
                let size = size + (next(&mut state) as usize % size);
                let mut b = vec![0u8; size];
                for i in (0..size).step_by(4096) {
                    b[i] = 1;
                }
                total += size as u64;
                blocks.push(b);
            }
            // Free all but KEEP_PERCENT %, in random order.
            let n = blocks.len();
            let kept = n * keep as usize / 100;
            for _ in kept..n {
                let i = next(&mut state) as usize % blocks.len();
                drop(blocks.swap_remove(i));
            }
            all.wait();
            // Long-lived: the thread and its cache stay.
            loop {
                std::thread::park();
                std::hint::black_box(&blocks);
            }
        });
    }
    all.wait();
    print_stats();
    for line in std::io::stdin().lock().lines() {
        match line.expect("stdin").trim() {
            "purge" => {
                let name = format!("arena.{ALL}.purge\0");
                // SAFETY: a NUL-terminated name; purge takes no value.
                unsafe { tikv_jemalloc_ctl::raw::write(name.as_bytes(), ()) }.expect("purge");
                print_stats();
            }
            _ => print_stats(),
        }
    }
}
