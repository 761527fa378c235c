//! The admission rules on crafted connections, and on real sockets where a head waits
//! unread.

use super::*;
use std::time::Duration;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}

/// Whether `signal` resolves within 10 ms: the connection was told to go.
fn told(signal: impl std::future::Future<Output = ()>) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(10), signal)
            .await
            .is_ok()
    })
}

fn is_evicted(slot: &Slot) -> bool {
    told(slot.evicted())
}

#[test]
fn at_the_cap_the_oldest_waiting_connection_of_the_heaviest_client_goes() {
    let c = Connections::new(4);
    let a1 = c.admit(ip(1), None, false).unwrap();
    let a2 = c.admit(ip(1), None, false).unwrap();
    let b1 = c.admit(ip(2), None, false).unwrap();
    let b2 = c.admit(ip(2), None, false).unwrap();
    // b has both in requests: only a's can go; a1 is the oldest.
    b1.request_started();
    b2.request_started();
    let _c1 = c.admit(ip(3), None, false).unwrap();
    assert!(is_evicted(&a1));
    assert!(!is_evicted(&a2));
    assert_eq!(c.len(), 4);
    // A connection that finished its request waits again, from now: b holds the
    // most connections, so b1 goes although a2 has waited longer.
    b1.request_ended();
    let _c2 = c.admit(ip(3), None, false).unwrap();
    assert!(is_evicted(&b1));
    assert!(!is_evicted(&a2));
}

#[test]
fn a_client_past_its_share_loses_its_own_oldest_waiting_connection() {
    let c = Connections::new(4);
    let a1 = c.admit(ip(1), None, false).unwrap();
    let a2 = c.admit(ip(1), None, false).unwrap();
    let _a3 = c.admit(ip(1), None, false).unwrap();
    assert!(is_evicted(&a1));
    assert!(!is_evicted(&a2));
    assert_eq!(c.len(), 2);
}

#[test]
fn a_scrapers_idle_connection_outlasts_half_sent_requests_from_its_address() {
    let c = Connections::new(4);
    let scraper = c.admit(ip(1), None, false).unwrap();
    scraper.request_started();
    scraper.request_ended();
    // Half-sent requests from the same address, reconnecting as they are closed.
    let mut flood = Vec::new();
    for _ in 0..20 {
        flood.push(c.admit(ip(1), None, false).unwrap());
    }
    assert!(!is_evicted(&scraper), "the served connection was evicted");
    assert_eq!(c.len(), 2);
    // When only served connections wait, the cap still holds: the oldest goes.
    let other = c.admit(ip(1), None, false).unwrap();
    other.request_started();
    other.request_ended();
    let _next = c.admit(ip(1), None, false).unwrap();
    assert!(is_evicted(&scraper));
    assert!(!is_evicted(&other));
}

/// On real sockets: a flood whose half-sent heads the server has not read yet still
/// goes before a scraper's idle kept-alive connection, and a connection whose whole
/// request head waits unread is never the one evicted.
#[test]
fn half_sent_heads_unread_do_not_protect_a_flood_but_a_whole_head_does() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    let c = Connections::new(8);
    let pair = || UnixStream::pair().unwrap();
    let (scraper_fd, _scraper_peer) = pair();
    let scraper = c.admit(ip(1), Some(scraper_fd.as_raw_fd()), false).unwrap();
    scraper.request_started();
    scraper.request_ended();
    let mut flood = Vec::new();
    for _ in 0..20 {
        let (fd, mut peer) = pair();
        peer.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        let slot = c.admit(ip(1), Some(fd.as_raw_fd()), false).unwrap();
        flood.push((slot, fd, peer));
    }
    assert!(
        !is_evicted(&scraper),
        "the idle scraper went before the flood"
    );
    // A newcomer whose whole head waits unread takes a flood connection's place and
    // is kept when the next half-sent one arrives: another flood connection goes.
    let (ready_fd, mut ready_peer) = pair();
    ready_peer
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let ready = c
        .admit(
            ip(1),
            Some(ready_fd.as_raw_fd()),
            head_ready(ready_fd.as_raw_fd()),
        )
        .unwrap();
    let (fd, mut peer) = pair();
    peer.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    let _next = c.admit(ip(1), Some(fd.as_raw_fd()), false).unwrap();
    assert!(
        !is_evicted(&ready),
        "a whole head waiting unread was evicted"
    );
    assert!(!is_evicted(&scraper));
}

#[test]
fn when_every_connection_is_in_a_request_a_newcomer_is_refused() {
    let c = Connections::new(2);
    let a = c.admit(ip(1), None, false).unwrap();
    let b = c.admit(ip(2), None, false).unwrap();
    a.request_started();
    b.request_started();
    assert!(c.admit(ip(3), None, false).is_none());
    drop(a);
    assert!(c.admit(ip(3), None, false).is_some());
}

#[test]
fn arriving_connections_hold_no_slot_and_past_their_cap_the_busiest_address_loses_its_oldest() {
    let c = Connections::new(2);
    // Eight may arrive (four times the cap) while both slots are taken.
    let _a = c.admit(ip(8), None, false).unwrap();
    let _b = c.admit(ip(9), None, false).unwrap();
    let flood: Vec<Arrival> = (0..7).map(|_| c.arrive(ip(1))).collect();
    let scraper = c.arrive(ip(2));
    assert_eq!(c.len(), 2);
    let dropped = |a: &Arrival| told(a.dropped());
    // A ninth: the address with the most arriving loses its oldest.
    let _ninth = c.arrive(ip(2));
    assert!(dropped(&flood[0]));
    assert!(!dropped(&flood[1]));
    assert!(!dropped(&scraper));
    // A ready arrival takes a slot from a waiting connection.
    let slot = scraper.admit(None, true).unwrap();
    assert_eq!(c.len(), 2);
    assert!(c.lock().arriving.len() == 7);
    drop(slot);
    drop(flood);
    assert_eq!(c.lock().arriving.len(), 1);
}

#[test]
fn a_head_is_complete_at_its_blank_line_and_a_tls_record_at_its_length() {
    assert!(head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert!(!head_complete(b"GET / HTTP/1.1\r\nHost: x\r\n"));
    assert!(!head_complete(b""));
    // A ClientHello record of 3 bytes, whole and cut.
    assert!(head_complete(&[0x16, 0x03, 0x01, 0x00, 0x03, 1, 2, 3]));
    assert!(!head_complete(&[0x16, 0x03, 0x01, 0x00, 0x03, 1, 2]));
}
