//! `/proc/buddyinfo`: each zone's free blocks by order, and the bytes they hold.

use super::ParseError;

/// A zone's free blocks by order, as one line of /proc/buddyinfo gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub node: String,
    pub zone: String,
    pub blocks: Vec<u64>,
}

/// Every zone of /proc/buddyinfo, and the lines that were not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buddyinfo {
    pub zones: Vec<Zone>,
    pub rejected: u64,
}

/// `Node 0, zone   Normal  35218  12089 ...`; a line that is not one is counted, and a
/// file with lines but no zone at all is an error.
pub fn parse(text: &str) -> Result<Buddyinfo, ParseError> {
    let mut zones = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let zone = (|| {
            let rest = line.strip_prefix("Node ")?;
            let (node, rest) = rest.split_once(',')?;
            let rest = rest.trim_start().strip_prefix("zone")?;
            let mut words = rest.split_whitespace();
            let zone = words.next()?;
            let digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
            if !digits(node) || !zone.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return None;
            }
            let blocks = words
                .map(|w| digits(w).then(|| w.parse::<u64>().ok()).flatten())
                .collect::<Option<Vec<u64>>>()?;
            (!blocks.is_empty() && blocks.len() <= 64).then(|| Zone {
                node: node.to_string(),
                zone: zone.to_string(),
                blocks,
            })
        })();
        match zone {
            Some(z) => zones.push(z),
            None => bad += 1,
        }
    }
    if zones.is_empty() && bad > 0 {
        return Err(ParseError::Missing("zone"));
    }
    Ok(Buddyinfo {
        zones,
        rejected: bad,
    })
}

/// Bytes of free memory in blocks of `min_order` and above, and in all blocks.
pub fn free_bytes(z: &Zone, page: u64, min_order: usize) -> (u64, u64) {
    let mut all = 0u64;
    let mut huge = 0u64;
    for (order, &n) in z.blocks.iter().enumerate() {
        let bytes = (page << order).saturating_mul(n);
        all = all.saturating_add(bytes);
        if order >= min_order {
            huge = huge.saturating_add(bytes);
        }
    }
    (all, huge)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's /proc/buddyinfo (kernel 6.18, one node).
    const HOST: &str = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \nNode 0, zone    DMA32      1      2      4      2      5      4      3      3      4      2    752 \nNode 0, zone   Normal  35218  12089   4519   1857   1178   2894   2636   1683    914    486   1722 \n";

    #[test]
    fn free_memory_and_what_a_huge_page_can_take_per_zone() {
        let Buddyinfo { zones, rejected } = parse(HOST).unwrap();
        assert_eq!(rejected, 0);
        assert_eq!(zones.len(), 3);
        let normal = &zones[2];
        assert_eq!(
            (normal.node.as_str(), normal.zone.as_str()),
            ("0", "Normal")
        );
        let (free, huge) = free_bytes(normal, 4096, 9);
        // Orders 9 and 10: 486 blocks of 2 MiB and 1722 of 4 MiB.
        assert_eq!(huge, 486 * (2 << 20) + 1722 * (4 << 20));
        let small: u64 = [35218u64, 12089, 4519, 1857, 1178, 2894, 2636, 1683, 914]
            .iter()
            .enumerate()
            .map(|(o, n)| n * (4096 << o))
            .sum();
        assert_eq!(free, small + huge);
        // With 64 KiB pages a huge page is 512 MiB: order 13, beyond what this zone lists.
        assert_eq!(free_bytes(normal, 65536, 13).1, 0);
    }

    #[test]
    fn lines_that_are_not_zones_are_counted_not_trusted() {
        let b = parse("Node 0, zone Normal 1 2 3\nNode x, zone Normal 1\nNode 0, zone Normal 1 -2\nNode 0, zone Normal\ngarbage\n").unwrap();
        assert_eq!(b.zones.len(), 1);
        assert_eq!(b.rejected, 4);
        assert_eq!(parse("garbage\n"), Err(ParseError::Missing("zone")));
        assert_eq!(parse("").map(|b| b.zones.len()), Ok(0));
        let (all, _) = free_bytes(
            &Zone {
                node: "0".into(),
                zone: "N".into(),
                blocks: vec![u64::MAX; 11],
            },
            4096,
            9,
        );
        assert_eq!(all, u64::MAX, "saturates, never wraps");
    }
}
