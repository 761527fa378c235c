use super::*;
use std::sync::mpsc::Receiver;
use std::sync::Mutex;

fn pool_run(
    pool: &mut Pool,
    pids: Vec<u32>,
    stall: Duration,
    f: impl Fn(u32) -> u32 + Send + Sync + 'static,
) -> Batch<u32> {
    pool.run(
        pids,
        stall,
        Arc::new(move |_: &mut Buffers, _: &Progress, pid, _| f(pid)),
    )
}

#[test]
fn every_item_is_read_once_in_order_of_the_input() {
    let mut pool = Pool::new(2, 4);
    let batch = pool_run(
        &mut pool,
        (1..=1000).collect(),
        Duration::from_secs(5),
        |p| p * 2,
    );
    let got: Vec<u32> = batch.results.iter().map(|r| r.unwrap()).collect();
    assert_eq!(got, (1..=1000).map(|p| p * 2).collect::<Vec<_>>());
    assert!(batch.stalled.is_empty());
    assert_eq!(batch.unread, 0);
    assert_eq!(pool.threads(), 2);
    // The same threads serve the next batch.
    pool_run(&mut pool, vec![7], Duration::from_secs(5), |p| p);
    assert_eq!(pool.threads(), 2);
}

/// A read that blocks until released stands for a smaps_rollup behind a held mmap lock.
fn blocker() -> (Arc<Mutex<Receiver<()>>>, Sender<()>) {
    let (tx, rx) = mpsc::channel();
    (Arc::new(Mutex::new(rx)), tx)
}

#[test]
fn a_stuck_read_is_left_behind_and_the_others_are_read() {
    let (gate, release) = blocker();
    let mut pool = Pool::new(1, 4);
    let started = Instant::now();
    let g = gate.clone();
    let batch = pool_run(
        &mut pool,
        (1..=100).collect(),
        Duration::from_millis(500),
        move |pid| {
            if pid == 13 {
                let _ = g.lock().unwrap().recv();
            }
            pid
        },
    );
    let elapsed = started.elapsed();
    assert_eq!(batch.stalled, vec![13]);
    assert_eq!(batch.unread, 0);
    let read = batch.results.iter().flatten().count();
    assert_eq!(read, 99, "every other pid is read");
    // The batch waited for the stuck read once: not again after the others were done.
    assert!(elapsed < Duration::from_millis(900), "{elapsed:?}");
    assert_eq!(pool.stuck_items(), vec![13]);
    // The next batch runs on a new thread beside the stuck one.
    let batch = pool_run(&mut pool, vec![1, 2, 3], Duration::from_millis(200), |p| p);
    assert_eq!(batch.results.iter().flatten().count(), 3);
    assert!(pool.threads() <= 4);
    release.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pool.stuck_items().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(pool.stuck_items().is_empty(), "the worker is free again");
}

#[test]
fn when_every_worker_is_stuck_a_new_one_takes_the_rest_up_to_the_cap() {
    let (gate, release) = blocker();
    let mut pool = Pool::new(2, 3);
    let g = gate.clone();
    let batch = pool_run(
        &mut pool,
        (1..=50).collect(),
        Duration::from_millis(100),
        move |pid| {
            if pid <= 3 {
                let _ = g.lock().unwrap().recv();
            }
            pid
        },
    );
    // Pids 1 and 2 block the first two workers, the third thread blocks on pid 3;
    // the cap of 3 leaves the rest unread.
    let mut stalled = batch.stalled.clone();
    stalled.sort();
    assert_eq!(stalled, vec![1, 2, 3]);
    assert_eq!(batch.unread, 47);
    assert_eq!(pool.threads(), 3);
    for _ in 0..3 {
        release.send(()).unwrap();
    }
}
