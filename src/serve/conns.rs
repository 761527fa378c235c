//! Who keeps a connection when `--web.max-connections` is reached.
//!
//! A client that opens connections and never finishes a request head (slowloris) would
//! hold every slot until the header timeout closes them, then open them again. So a
//! connection that is waiting for a request head (new, in the TLS handshake, or idle
//! between keep-alive requests) can be evicted: when the cap is reached, the oldest such
//! connection of the client address holding the most goes, and the newcomer gets in. One
//! address may hold at most half the cap; past that, its own oldest waiting connection
//! goes. A connection in the middle of a request is never evicted; when every connection
//! is, the newcomer is refused. Nor is one whose whole request head sits unread in its
//! socket (a scraper that connected and sent its request a moment ago, not yet read by
//! the server). A half-sent head does not protect a connection: under a flood the server
//! lags in reading them, and were unread bytes enough, a scraper's idle kept-alive
//! connection, the one connection with nothing unread, would be the one evicted.
//!
//! Among the connections that may go, one that has never completed a request goes before
//! one that has: a scraper's kept-alive connection, idle between two scrapes, outlasts a
//! flood of half-sent requests from its own address (a NAT, a sidecar, a compromised pod
//! on the node).
//!
//! A new connection first *arrives*: for a short grace (a second, at most half the header
//! timeout) it holds no slot while the server waits for its whole request head (or TLS
//! ClientHello). One whose head comes in that time is *ready*: it gets in whenever some
//! connection is waiting, evicting the oldest waiting one even if bytes wait in it. One
//! whose grace runs out takes a slot as any waiting connection. A flood of reconnecting
//! half-sent requests from one address, evicted at once, would reconnect as fast as the
//! CPU lets it and cycle through its slots in milliseconds: a scraper whose head followed
//! its connect by a few milliseconds (curl, a probe, a client descheduled on a loaded
//! node) was evicted before its head came. Arriving, the flood's connections wait out
//! their grace instead, which also slows its reconnecting to its size per second. Arriving
//! connections are capped at four times `--web.max-connections`; past that, the oldest
//! arriving connection of the address with the most goes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

/// The open connections.
pub(crate) struct Connections {
    max: usize,
    per_client: usize,
    max_arriving: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    by_id: HashMap<u64, Entry>,
    /// Connections in their grace, holding no slot: address and the signal to go.
    arriving: HashMap<u64, (IpAddr, Arc<Notify>)>,
}

struct Entry {
    addr: IpAddr,
    /// The socket, to see whether a whole request head waits unread in it.
    fd: Option<RawFd>,
    /// Since when it has been waiting for a request head; `None` while in a request.
    waiting_since: Option<Instant>,
    /// It has completed a request: a scraper's, not a slowloris's.
    served: bool,
    evict: Arc<Notify>,
}

/// A connection in its grace, before it takes a slot: told when to go (the arriving cap
/// was reached). Leaves the registry when dropped.
pub(crate) struct Arrival {
    id: u64,
    addr: IpAddr,
    connections: Arc<Connections>,
    dropped: Arc<Notify>,
}

/// One admitted connection: tells the registry when a request starts and ends, and is
/// told when to go. Leaves the registry when dropped.
pub(crate) struct Slot {
    id: u64,
    connections: Arc<Connections>,
    evicted: Arc<Notify>,
}

impl Connections {
    pub fn new(max: usize) -> Arc<Connections> {
        let max = max.max(1);
        Arc::new(Connections {
            max,
            per_client: (max / 2).max(1),
            max_arriving: max.saturating_mul(4),
            open: Mutex::new(Open::default()),
        })
    }

    /// A connection from `addr` was accepted: it arrives, holding no slot, while its
    /// head is awaited. At the arriving cap, the oldest arriving connection of the
    /// address with the most arriving goes.
    pub(crate) fn arrive(self: &Arc<Self>, addr: IpAddr) -> Arrival {
        let mut open = self.lock();
        if open.arriving.len() >= self.max_arriving {
            let mut per_addr: HashMap<IpAddr, (usize, u64)> = HashMap::new();
            for (&id, &(a, _)) in &open.arriving {
                let e = per_addr.entry(a).or_insert((0, id));
                e.0 += 1;
                e.1 = e.1.min(id);
            }
            // The most arriving, then the oldest (ids grow with time).
            let victim = per_addr
                .values()
                .max_by_key(|&&(n, oldest)| (n, std::cmp::Reverse(oldest)))
                .map(|&(_, oldest)| oldest);
            if let Some((_, go)) = victim.and_then(|id| open.arriving.remove(&id)) {
                go.notify_one();
            }
        }
        open.next_id += 1;
        let id = open.next_id;
        let dropped = Arc::new(Notify::new());
        open.arriving.insert(id, (addr, dropped.clone()));
        Arrival {
            id,
            addr,
            connections: self.clone(),
            dropped,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a connection from `addr` (`ready`: its whole head waits in its socket),
    /// evicting a waiting one if the cap or the address's share requires it; `None` when
    /// no connection can make room.
    fn admit(self: &Arc<Self>, addr: IpAddr, fd: Option<RawFd>, ready: bool) -> Option<Slot> {
        let mut open = self.lock();
        let mine = open.by_id.values().filter(|e| e.addr == addr).count();
        if ready && (mine >= self.per_client || open.by_id.len() >= self.max) {
            // Within the address's share when it is used up, else from anyone: the oldest
            // waiting connection, one with a whole head unread only when there is no other.
            let share = |e: &Entry| mine < self.per_client || e.addr == addr;
            let victim = oldest(&open, share, true).or_else(|| oldest(&open, share, false))?;
            evict(&mut open, victim);
        } else if mine >= self.per_client {
            let victim = oldest(&open, |e| e.addr == addr, true)?;
            evict(&mut open, victim);
        } else if open.by_id.len() >= self.max {
            // The address holding the most connections gives up its oldest waiting one
            // (among equals, the address whose waiting connection is oldest).
            let mut per_addr: HashMap<IpAddr, (usize, Option<EvictionOrder>)> = HashMap::new();
            for (&id, e) in &open.by_id {
                let slot = per_addr.entry(e.addr).or_default();
                slot.0 += 1;
                if let Some(since) = e.waiting_since {
                    let key = e.eviction_order(since, id);
                    slot.1 = Some(slot.1.map_or(key, |o| o.min(key)));
                }
            }
            let heaviest = per_addr
                .iter()
                .filter_map(|(&a, &(n, first))| Some((n, std::cmp::Reverse(first?), a)))
                .max()
                .map(|(_, _, a)| a)?;
            let victim = oldest(&open, |e| e.addr == heaviest, true)
                .or_else(|| oldest(&open, |_| true, true))?;
            evict(&mut open, victim);
        }
        open.next_id += 1;
        let id = open.next_id;
        let evicted = Arc::new(Notify::new());
        open.by_id.insert(
            id,
            Entry {
                addr,
                fd,
                waiting_since: Some(Instant::now()),
                served: false,
                evict: evicted.clone(),
            },
        );
        Some(Slot {
            id,
            connections: self.clone(),
            evicted,
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}

/// Served before, waiting since, id: the smallest goes first.
type EvictionOrder = (bool, Instant, u64);

impl Entry {
    /// Which of two waiting connections goes first: one that never completed a request,
    /// then the one waiting longest.
    fn eviction_order(&self, since: Instant, id: u64) -> EvictionOrder {
        (self.served, since, id)
    }
}

/// Bytes looked at for a whole request head or TLS record: a head larger than this is
/// never *ready*, and is served as any waiting connection.
pub(crate) const HEAD_PEEK_BYTES: usize = 4096;

/// Whether `seen`, the start of what a client sent, holds a whole HTTP/1 request head or
/// a whole TLS record (the ClientHello).
pub(crate) fn head_complete(seen: &[u8]) -> bool {
    match seen {
        [0x16, 0x03, _, hi, lo, ..] => seen.len() >= 5 + ((*hi as usize) << 8 | *lo as usize),
        _ => seen.windows(4).any(|w| w == b"\r\n\r\n"),
    }
}

/// Whether a whole HTTP/1 request head, or a whole TLS record (the ClientHello), waits
/// in the socket.
fn head_ready(fd: RawFd) -> bool {
    let mut buf = [0u8; HEAD_PEEK_BYTES];
    // SAFETY: recv writes at most buf.len() bytes into buf; MSG_PEEK leaves them in the
    // socket for the connection to read, MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).is_ok_and(|n| head_complete(&buf[..n]))
}

/// The connection among `which` to evict first: one that never completed a request, then
/// the one that has waited longest for a request head; with `protect_ready`, not one whose
/// whole request head waits unread in its socket. Candidates are tried in that order, so
/// the socket of the first is usually the only one looked at.
fn oldest(open: &Open, which: impl Fn(&Entry) -> bool, protect_ready: bool) -> Option<u64> {
    let mut candidates: Vec<EvictionOrder> = open
        .by_id
        .iter()
        .filter(|(_, e)| which(e))
        .filter_map(|(&id, e)| Some(e.eviction_order(e.waiting_since?, id)))
        .collect();
    candidates.sort_unstable();
    candidates
        .into_iter()
        .map(|(_, _, id)| id)
        .find(|id| !protect_ready || !open.by_id[id].fd.is_some_and(head_ready))
}

fn evict(open: &mut Open, id: u64) {
    if let Some(e) = open.by_id.remove(&id) {
        e.evict.notify_one();
    }
}

impl Arrival {
    /// The grace is over: the connection takes a slot (`ready`: its whole head came in
    /// the grace, and waits in the socket `fd`), or `None` when none can be made.
    pub(crate) fn admit(self, fd: Option<RawFd>, ready: bool) -> Option<Slot> {
        self.connections.lock().arriving.remove(&self.id);
        self.connections.admit(self.addr, fd, ready)
    }

    /// Resolves when the connection must go to make room for newer arrivals.
    pub async fn dropped(&self) {
        self.dropped.notified().await
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        self.connections.lock().arriving.remove(&self.id);
    }
}

impl Slot {
    /// A request head arrived: the connection cannot be evicted until its response is
    /// sent.
    pub(crate) fn request_started(&self) {
        if let Some(e) = self.connections.lock().by_id.get_mut(&self.id) {
            e.waiting_since = None;
        }
    }

    /// The response was sent (or dropped): waiting for the next head from now on.
    pub(crate) fn request_ended(&self) {
        if let Some(e) = self.connections.lock().by_id.get_mut(&self.id) {
            e.waiting_since = Some(Instant::now());
            e.served = true;
        }
    }

    /// Resolves when the connection was evicted to make room.
    pub async fn evicted(&self) {
        self.evicted.notified().await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.connections.lock().by_id.remove(&self.id);
    }
}

#[cfg(test)]
mod tests;
