//! `buddyinfo`: how fragmented each zone's free memory is. A transparent huge page needs a
//! free block of its own size (order 9 with 4 KiB pages); a zone with much free memory but
//! little of it in such blocks makes THP faults compact memory (stalls) or fall back to
//! small pages (`thp_fault_fallback`), and khugepaged collapse fail.

use crate::family::Collector;
use crate::family::{Family, Metric, Section, Value};
use crate::parse::ParseError;
use crate::source::Reason;

use super::{Reader, Unit};

pub const UNIT: Unit = Unit {
    name: "buddyinfo",
    what: "free memory per zone, and how much of it lies in blocks a huge page can take, from /proc/buddyinfo",
    rows: &ROWS,
    fixes: &[],
    start: || super::stateless(read),
};

const SECTION: Section = Section::Of(Collector::Unit("buddyinfo"));

const ROWS: [Metric; 2] = [
    crate::family::metric!(
        membloat "buddyinfo_free",
        Gauge,
        Bytes,
        ["node", "zone"],
        SECTION,
        "/proc/buddyinfo",
        "Free memory of a zone as the buddy allocator holds it: its free blocks of every order times their size.",
    ),
    crate::family::metric!(
        membloat "buddyinfo_free_huge_capable",
        Gauge,
        Bytes,
        ["node", "zone"],
        SECTION,
        "/proc/buddyinfo, /sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
        "Free memory of a zone in blocks at least a transparent huge page large (order 9 with 4 KiB pages): what a huge page can be taken from without compaction. Much free memory but little here is fragmentation: THP faults compact or fall back to small pages.",
    ),
];

/// A zone's free blocks by order, as one line of /proc/buddyinfo gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Zone {
    node: String,
    zone: String,
    blocks: Vec<u64>,
}

/// Every zone of /proc/buddyinfo, and the lines that were not one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Buddyinfo {
    zones: Vec<Zone>,
    rejected: u64,
}

/// `Node 0, zone   Normal  35218  12089 ...`; a line that is not one is counted, and a
/// file with lines but no zone at all is an error.
fn parse(text: &str) -> Result<Buddyinfo, ParseError> {
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
fn free_bytes(z: &Zone, page: u64, min_order: usize) -> (u64, u64) {
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

fn read(r: &mut Reader) -> Result<Vec<Family>, Reason> {
    let page = crate::source::own::page_size();
    // The huge page's size: 2 MiB with 4 KiB pages on x86-64, 512 MiB with 64 KiB on arm64.
    let pmd = r
        .source
        .sysfs()
        .join("kernel/mm/transparent_hugepage/hpage_pmd_size");
    let huge = r
        .source
        .read_path(&pmd, r.buf)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .filter(|h| h.is_power_of_two() && *h >= page)
        .unwrap_or(2 << 20);
    let min_order = (huge / page).trailing_zeros() as usize;
    r.source.feature(&r.source.procfs().join("buddyinfo"))?;
    let text = r
        .source
        .read_proc("buddyinfo", r.buf)
        .map_err(|e| e.system_reason())?;
    let Buddyinfo { zones, rejected } = parse(text).map_err(|e| {
        crate::log!(Debug, "malformed file", file = "/proc/buddyinfo", error = e);
        Reason::Malformed
    })?;
    r.count(Reason::Malformed, rejected);
    let mut all = Family::new(&ROWS[0]);
    let mut capable = Family::new(&ROWS[1]);
    for z in &zones {
        let (free, huge) = free_bytes(z, page, min_order);
        let labels = vec![("node", z.node.clone()), ("zone", z.zone.clone())];
        all.push(labels.clone(), Value::U(free));
        capable.push(labels, Value::U(huge));
    }
    Ok(vec![all, capable])
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
