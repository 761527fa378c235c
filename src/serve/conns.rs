//! Who keeps a connection when `--web.max-connections` is reached.
//!
//! A client that opens connections and never finishes a request head (slowloris) would
//! hold every slot until the header timeout closes them, then open them again. So a
//! connection that is waiting for a request head (new, in the TLS handshake, or idle
//! between keep-alive requests) can be evicted: when the cap is reached, the oldest such
//! connection of the client address holding the most goes, and the newcomer gets in. One
//! address may hold at most half the cap; past that, its own oldest waiting connection
//! goes. A connection in the middle of a request is never evicted; when every connection
//! is, the newcomer is refused. Nor is one whose request head sits unread in its socket
//! (a scraper that connected and sent its request a moment ago, not yet read by the
//! server).
//!
//! Among the connections that may go, one that has never completed a request goes before
//! one that has: a scraper's kept-alive connection, idle between two scrapes, outlasts a
//! flood of half-sent requests from its own address (a NAT, a sidecar, a compromised pod
//! on the node).
//!
//! A newcomer whose whole request head (or TLS ClientHello) is already in its socket when
//! it is accepted is *ready*: it gets in whenever some connection is waiting, evicting
//! the oldest waiting one even if bytes wait in it. A flood of reconnecting half-sent
//! requests runs as fast as the CPU lets it and would otherwise evict a scraper's
//! connection before the server read its head; a scraper sends its head with the
//! connection, a slowloris never does.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::Notify;

/// The open connections.
pub struct Connections {
    max: usize,
    per_client: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    by_id: HashMap<u64, Entry>,
}

struct Entry {
    addr: IpAddr,
    /// The socket, to see whether bytes wait unread in it.
    fd: Option<RawFd>,
    /// Since when it has been waiting for a request head; `None` while in a request.
    waiting_since: Option<Instant>,
    /// It has completed a request: a scraper's, not a slowloris's.
    served: bool,
    evict: Arc<Notify>,
}

/// One admitted connection: tells the registry when a request starts and ends, and is
/// told when to go. Leaves the registry when dropped.
pub struct Slot {
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
            open: Mutex::new(Open::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a connection from `addr`, evicting a waiting one if the cap or the
    /// address's share requires it; `None` when no connection can make room.
    pub fn admit(self: &Arc<Self>, addr: IpAddr, fd: Option<RawFd>) -> Option<Slot> {
        let ready = fd.is_some_and(head_ready);
        let mut open = self.lock();
        let mine = open.by_id.values().filter(|e| e.addr == addr).count();
        if ready && (mine >= self.per_client || open.by_id.len() >= self.max) {
            // Within the address's share when it is used up, else from anyone: the oldest
            // waiting connection, one with bytes unread only when there is no other.
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
                if let Some(since) = e.evictable() {
                    let key = e.eviction_order(since, id);
                    slot.1 = Some(slot.1.map_or(key, |o| o.min(key)));
                }
            }
            let victim = per_addr
                .values()
                .filter_map(|&(n, first)| Some((n, std::cmp::Reverse(first?))))
                .max()
                .map(|(_, std::cmp::Reverse((_, _, id)))| id)?;
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
    /// Since when it has been waiting for a request head, if it may be evicted.
    fn evictable(&self) -> Option<Instant> {
        let since = self.waiting_since?;
        (!self.fd.is_some_and(unread)).then_some(since)
    }

    /// Which of two waiting connections goes first: one that never completed a request,
    /// then the one waiting longest.
    fn eviction_order(&self, since: Instant, id: u64) -> EvictionOrder {
        (self.served, since, id)
    }
}

/// Whether a whole HTTP/1 request head, or a whole TLS record (the ClientHello), waits
/// in the socket.
fn head_ready(fd: RawFd) -> bool {
    let mut buf = [0u8; 4096];
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
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    let seen = &buf[..n];
    match seen {
        [0x16, 0x03, _, hi, lo, ..] => seen.len() >= 5 + ((*hi as usize) << 8 | *lo as usize),
        _ => seen.windows(4).any(|w| w == b"\r\n\r\n"),
    }
}

/// Whether bytes wait unread in the socket.
fn unread(fd: RawFd) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int. The fd belongs to an open connection; were it
    // closed and reused a moment ago, the answer is about another socket and only makes
    // this one more or less likely to be evicted.
    let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    rc == 0 && n > 0
}

/// The connection among `which` to evict first: one that never completed a request, then
/// the one that has waited longest for a request head; with `evictable_only`, not one
/// whose bytes wait unread.
fn oldest(open: &Open, which: impl Fn(&Entry) -> bool, evictable_only: bool) -> Option<u64> {
    open.by_id
        .iter()
        .filter(|(_, e)| which(e))
        .filter_map(|(&id, e)| {
            let since = if evictable_only {
                e.evictable()?
            } else {
                e.waiting_since?
            };
            Some(e.eviction_order(since, id))
        })
        .min()
        .map(|(_, _, id)| id)
}

fn evict(open: &mut Open, id: u64) {
    if let Some(e) = open.by_id.remove(&id) {
        e.evict.notify_one();
    }
}

impl Slot {
    /// A request head arrived: the connection cannot be evicted until its response is
    /// sent.
    pub fn request_started(&self) {
        if let Some(e) = self.connections.lock().by_id.get_mut(&self.id) {
            e.waiting_since = None;
        }
    }

    /// The response was sent (or dropped): waiting for the next head from now on.
    pub fn request_ended(&self) {
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
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn is_evicted(slot: &Slot) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(10), slot.evicted())
                .await
                .is_ok()
        })
    }

    #[test]
    fn at_the_cap_the_oldest_waiting_connection_of_the_heaviest_client_goes() {
        let c = Connections::new(4);
        let a1 = c.admit(ip(1), None).unwrap();
        let a2 = c.admit(ip(1), None).unwrap();
        let b1 = c.admit(ip(2), None).unwrap();
        let b2 = c.admit(ip(2), None).unwrap();
        // b has both in requests: only a's can go; a1 is the oldest.
        b1.request_started();
        b2.request_started();
        let _c1 = c.admit(ip(3), None).unwrap();
        assert!(is_evicted(&a1));
        assert!(!is_evicted(&a2));
        assert_eq!(c.len(), 4);
        // A connection that finished its request waits again, from now: b holds the
        // most connections, so b1 goes although a2 has waited longer.
        b1.request_ended();
        let _c2 = c.admit(ip(3), None).unwrap();
        assert!(is_evicted(&b1));
        assert!(!is_evicted(&a2));
    }

    #[test]
    fn a_client_past_its_share_loses_its_own_oldest_waiting_connection() {
        let c = Connections::new(4);
        let a1 = c.admit(ip(1), None).unwrap();
        let a2 = c.admit(ip(1), None).unwrap();
        let _a3 = c.admit(ip(1), None).unwrap();
        assert!(is_evicted(&a1));
        assert!(!is_evicted(&a2));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_scrapers_idle_connection_outlasts_half_sent_requests_from_its_address() {
        let c = Connections::new(4);
        let scraper = c.admit(ip(1), None).unwrap();
        scraper.request_started();
        scraper.request_ended();
        // Half-sent requests from the same address, reconnecting as they are closed.
        let mut flood = Vec::new();
        for _ in 0..20 {
            flood.push(c.admit(ip(1), None).unwrap());
        }
        assert!(!is_evicted(&scraper), "the served connection was evicted");
        assert_eq!(c.len(), 2);
        // When only served connections wait, the cap still holds: the oldest goes.
        let other = c.admit(ip(1), None).unwrap();
        other.request_started();
        other.request_ended();
        let _next = c.admit(ip(1), None).unwrap();
        assert!(is_evicted(&scraper));
        assert!(!is_evicted(&other));
    }

    #[test]
    fn when_every_connection_is_in_a_request_a_newcomer_is_refused() {
        let c = Connections::new(2);
        let a = c.admit(ip(1), None).unwrap();
        let b = c.admit(ip(2), None).unwrap();
        a.request_started();
        b.request_started();
        assert!(c.admit(ip(3), None).is_none());
        drop(a);
        assert!(c.admit(ip(3), None).is_some());
    }
}
