//! `buddyinfo`: how fragmented each zone's free memory is. A transparent huge page needs a
//! free block of its own size (order 9 with 4 KiB pages); a zone with much free memory but
//! little of it in such blocks makes THP faults compact memory (stalls) or fall back to
//! small pages (`thp_fault_fallback`), and khugepaged collapse fail.

use crate::family::Collector;
use crate::family::{Family, Metric, Section, Value};
use crate::parse::buddyinfo::{free_bytes, parse, Buddyinfo};
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
