//! `/proc/net/sockstat`: the memory the kernel has charged to socket buffers, by protocol.
//! TCP's and UDP's `mem` are pages, counted for the whole kernel (not per network
//! namespace); `FRAG`'s `memory` is bytes of IP fragments waiting to be reassembled, in the
//! reader's namespace. And `/proc/PID/net/{tcp,tcp6,udp,udp6}`: the bytes in each socket's
//! queues, per network namespace.

use super::ParseError;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sockstat {
    /// `TCP: ... mem N`: pages charged to TCP sockets' buffers.
    pub tcp_pages: Option<u64>,
    /// `UDP: ... mem N`: pages charged to UDP sockets' buffers (UDP-Lite's included).
    pub udp_pages: Option<u64>,
    /// `FRAG: ... memory N`: bytes of fragments held for reassembly.
    pub frag_bytes: Option<u64>,
}

impl Sockstat {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut s = Sockstat::default();
        for line in text.lines() {
            let Some((proto, rest)) = line.split_once(':') else {
                continue;
            };
            let (slot, key) = match proto {
                "TCP" => (&mut s.tcp_pages, "mem"),
                "UDP" => (&mut s.udp_pages, "mem"),
                "FRAG" => (&mut s.frag_bytes, "memory"),
                _ => continue,
            };
            let mut words = rest.split_ascii_whitespace();
            while let Some(word) = words.next() {
                if word == key {
                    *slot = words.next().and_then(|n| n.parse().ok());
                    break;
                }
            }
        }
        if s == Sockstat::default() {
            return Err(ParseError::Missing("TCP mem"));
        }
        Ok(s)
    }

    /// The bytes charged to socket buffers: TCP's and UDP's pages and the fragments.
    pub fn bytes(&self, page: u64) -> u64 {
        let pages = self
            .tcp_pages
            .unwrap_or(0)
            .saturating_add(self.udp_pages.unwrap_or(0));
        pages
            .saturating_mul(page)
            .saturating_add(self.frag_bytes.unwrap_or(0))
    }
}

/// One socket's send and receive queue bytes: the `tx_queue:rx_queue` column of its line
/// of a socket table, in hex. A listening socket's (state `0A`) are connections waiting to
/// be accepted, not bytes: `None`, as for the header and a line that fits no shape.
pub fn queue_line(line: &str) -> Option<(u64, u64)> {
    let mut words = line.split_ascii_whitespace().skip(3);
    let (state, q) = (words.next()?, words.next()?);
    let (tx, rx) = q.split_once(':')?;
    let (tx, rx) = (
        u64::from_str_radix(tx, 16).ok()?,
        u64::from_str_radix(rx, 16).ok()?,
    );
    (state != "0A").then_some((tx, rx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_6_18_in_pages_and_bytes() {
        let text = "sockets: used 7\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 10\n\
                    UDP: inuse 0 mem 3\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 1 memory 2048\n";
        let s = Sockstat::parse(text).unwrap();
        assert_eq!(
            (s.tcp_pages, s.udp_pages, s.frag_bytes),
            (Some(10), Some(3), Some(2048))
        );
        assert_eq!(s.bytes(4096), 13 * 4096 + 2048);
    }

    #[test]
    fn garbage_and_absurd_values_give_nothing() {
        assert!(Sockstat::parse("").is_err());
        assert!(Sockstat::parse("TCP: inuse 1 mem\n").is_err());
        let s = Sockstat::parse("TCP: mem 99999999999999999999\nUDP: mem 2\n").unwrap();
        assert_eq!((s.tcp_pages, s.udp_pages), (None, Some(2)));
        assert_eq!(s.bytes(4096), 8192);
        let huge = Sockstat {
            tcp_pages: Some(u64::MAX),
            ..Sockstat::default()
        };
        assert_eq!(huge.bytes(4096), u64::MAX);
    }

    #[test]
    fn socket_queues_in_hex_without_listeners() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
                       0: 0100007F:9525 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 3888795 1
                       1: 0100007F:86F0 0100007F:9525 01 0039B600:00000000 04:0000004A 00000000     0        1 3888796 2
                       2: 0100007F:9525 0100007F:86F0 01 00000000:0007D800 00:00000000 00000000     0        0 3888797 1
                       3: garbage
                       4: 0100007F:1 0100007F:2 01 FFFFFFFFFFFFFFFF:1 x
                       5: 0100007F:1 0100007F:2 01 1:zz x
";
        // The listener's 3 waiting connections are not bytes; an absurd queue saturates.
        let queues = |t: &str| {
            t.lines()
                .filter_map(queue_line)
                .fold((0u64, 0u64), |(s, r), (tx, rx)| {
                    (s.saturating_add(tx), r.saturating_add(rx))
                })
        };
        assert_eq!(queues(text), (u64::MAX, 0x7D800 + 1));
        let sane: String = text.lines().take(4).map(|l| format!("{l}\n")).collect();
        assert_eq!(queues(&sane), (0x39B600, 0x7D800));
        assert_eq!(queues(""), (0, 0));
    }
}
