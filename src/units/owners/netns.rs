//! The socket queues of each network namespace. The kernel charges socket memory for the
//! whole host (`sockstat`'s `mem`: the balance sheet's `sockets` row); which namespace (on
//! Kubernetes, which pod) holds it shows only in each namespace's socket tables, read
//! through one process in it.

use std::collections::HashSet;

use crate::parse::sockstat;
use crate::source::Reason;

use super::super::Reader;

/// The tables summed, each as `/proc/PID/net/NAME`.
const TABLES: [&str; 4] = ["net/tcp", "net/tcp6", "net/udp", "net/udp6"];

/// One network namespace's sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    /// Its inode (`/proc/PID/ns/net` reads `net:[INODE]`).
    pub inode: u64,
    /// The lowest pid in it, through which it was read.
    pub pid: u32,
    /// Written and not yet acknowledged (TCP) or sent (UDP).
    pub send_bytes: u64,
    /// Received and not yet read by the program.
    pub receive_bytes: u64,
}

/// The most of one table read: about 110,000 sockets (TIME_WAIT ones included) at 150
/// bytes a line, read a piece at a time.
const TABLE_BYTES: usize = 16 << 20;

/// Every network namespace `pids` are in, once each. A namespace with a table longer than
/// [`TABLE_BYTES`] is left out and counted as `timeout`, never summed in part.
pub fn read(r: &mut Reader, pids: &[u32]) -> Vec<Netns> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &pid in pids {
        let link = r.source.procfs().join(pid.to_string()).join("ns/net");
        let Some(inode) = std::fs::read_link(&link)
            .ok()
            .and_then(|l| namespace_inode(l.to_str()?))
        else {
            continue;
        };
        if !seen.insert(inode) {
            continue;
        }
        let mut ns = Netns {
            inode,
            pid,
            send_bytes: 0,
            receive_bytes: 0,
        };
        let mut whole = true;
        for table in TABLES {
            let (mut send, mut receive) = (0u64, 0u64);
            let read = r.source.read_pid_lines(pid, table, r.buf, TABLE_BYTES, |line| {
                if let Some((tx, rx)) = sockstat::queue_line(line) {
                    send = send.saturating_add(tx);
                    receive = receive.saturating_add(rx);
                }
            });
            match read {
                Ok(all) => {
                    ns.send_bytes = ns.send_bytes.saturating_add(send);
                    ns.receive_bytes = ns.receive_bytes.saturating_add(receive);
                    whole &= all;
                }
                // No IPv6 in the kernel: no tcp6.
                Err(e) if e.process_reason() == Reason::Vanished && table.ends_with('6') => {}
                Err(e) => {
                    // Gone since it was listed: another process of it may say.
                    seen.remove(&inode);
                    if e.process_reason() != Reason::Vanished {
                        r.count(e.process_reason(), 1);
                    }
                    whole = false;
                    break;
                }
            }
        }
        match whole {
            true => out.push(ns),
            false if seen.contains(&inode) => r.count(Reason::Timeout, 1),
            false => {}
        }
    }
    out
}

/// `net:[4026531840]` -> 4026531840.
fn namespace_inode(link: &str) -> Option<u64> {
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_by_its_inode() {
        assert_eq!(namespace_inode("net:[4026531840]"), Some(4026531840));
        assert_eq!(namespace_inode("mnt:[4026531840]"), None);
        assert_eq!(namespace_inode("net:[x]"), None);
    }
}
