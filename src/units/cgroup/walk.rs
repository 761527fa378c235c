//! The walk over a cgroup hierarchy: each container's memory and the files beside it, and
//! every cgroup's charge that no live child and no own process holds.

use std::path::{Path, PathBuf};

use crate::parse::memory_stat::{Bounds, MemoryStat};
use crate::source::{ReadError, Reason};

use super::super::Reader;

/// Memory cgroups with anonymous memory (or OOM kills), by path under the hierarchy root,
/// in path order; then the other cgroups with children or with charge of removed
/// descendants, with what the walk found of those; and whether it is v2's.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cgroups(
    pub Vec<(String, MemoryStat)>,
    pub Vec<(String, Parent)>,
    /// The hierarchy is v2's.
    pub bool,
);

/// A cgroup that is not reported as a container, but holds others or the memory of
/// removed ones: its usage and its charge of removed descendants (`Bounds::removed` and
/// `Bounds::dying`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Parent {
    pub usage: Option<u64>,
    pub bounds: Bounds,
}

/// Cgroups walked at most: a deeper tree is counted as malformed and cut.
const MAX_CGROUPS: usize = 10_000;

/// A cgroup the walk passed: what the charge of its removed descendants is computed from.
#[derive(Debug, Default)]
pub(super) struct Node {
    pub rel: String,
    pub parent: Option<usize>,
    /// It has children (or its listing was cut).
    pub children: bool,
    /// Its listing was cut: its children's sum is not known.
    pub cut: bool,
    /// v2: `memory.current`. v1: the pages charged to it and its descendants
    /// (`total_rss` + `total_cache`), and of those its own (`rss` + `cache`).
    pub charge: Option<u64>,
    pub own: Option<u64>,
    /// v2: `cgroup.stat`'s `nr_dying_descendants`.
    pub dying: Option<u64>,
    /// v2: a leaf with no process (read only where it has dying descendants).
    pub empty: bool,
    /// Its index among the reported cgroups.
    pub reported: Option<usize>,
}

pub(super) fn walk(r: &mut Reader, base: &Path, v2: bool) -> Cgroups {
    let mut out: Vec<(String, MemoryStat)> = Vec::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut stack: Vec<(PathBuf, Option<usize>)> = vec![(base.to_path_buf(), None)];
    while let Some((dir, parent)) = stack.pop() {
        if nodes.len() >= MAX_CGROUPS {
            r.count(Reason::Malformed, 1);
            break;
        }
        // A cgroup removed while walking simply has no children and no memory.stat. The
        // listing itself stops at what the walk may still visit.
        let room = MAX_CGROUPS.saturating_sub(nodes.len() + 1 + stack.len());
        let (children, cut) = r.source.subdirs(&dir, room).unwrap_or_default();
        if cut {
            r.count(Reason::Malformed, 1);
        }
        let me = nodes.len();
        let rel = dir
            .strip_prefix(base)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A cut listing has children even when none fit: never read as a leaf (v2's
        // counts are hierarchical).
        let mut node = Node {
            rel: format!("/{rel}"),
            parent,
            children: !children.is_empty() || cut,
            cut,
            ..Node::default()
        };
        stack.extend(children.into_iter().map(|c| (c, Some(me))));
        if v2 {
            // Every cgroup's usage (a leaf's with its memory.stat, below) and count of
            // dying descendants; the root has neither.
            if node.children {
                node.charge = read_number(r, &dir.join("memory.current"));
            }
            if let Ok(text) = r.source.read_path(&dir.join("cgroup.stat"), r.buf) {
                node.dying = crate::parse::memory_stat::dying_descendants(text);
            }
            if !node.children && node.dying.unwrap_or(0) > 0 {
                node.empty = r
                    .source
                    .read_path(&dir.join("cgroup.procs"), r.buf)
                    .is_ok_and(|t| t.trim().is_empty());
            }
        }
        if !(v2 && node.children) {
            if let Some(stat) = container(r, &dir, v2) {
                if v2 {
                    node.charge = stat.usage_bytes;
                } else {
                    let f = |k| stat.field(k);
                    node.charge = f("anon").zip(f("file")).map(|(a, c)| a.saturating_add(c));
                    node.own = f("own_rss").zip(f("own_cache")).map(|(a, c)| a + c);
                }
                // An empty cgroup is left out, unless the OOM killer emptied it.
                let killed = stat.oom_kills.unwrap_or(0) + stat.limit_ooms.unwrap_or(0) > 0;
                if stat.anon_bytes > 0 || stat.anon_huge_bytes > 0 || killed {
                    node.reported = Some(out.len());
                    let stat = with_bounds(r, &dir, v2, stat);
                    out.push((node.rel.clone(), stat));
                }
            }
        }
        nodes.push(node);
    }
    let removed = removed(&nodes, v2);
    let mut parents = Vec::new();
    for (node, removed) in nodes.iter().zip(removed) {
        match node.reported {
            Some(i) => {
                out[i].1.bounds.removed = removed;
                out[i].1.bounds.dying = node.dying;
            }
            None if node.children || removed.unwrap_or(0) > 0 => {
                let mut p = Parent {
                    usage: if v2 { node.charge } else { None },
                    ..Parent::default()
                };
                p.bounds.removed = removed;
                p.bounds.dying = node.dying;
                parents.push((node.rel.clone(), p));
            }
            None => {}
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    parents.sort_by(|a, b| a.0.cmp(&b.0));
    Cgroups(out, parents, v2)
}

/// Each cgroup's charge that no live child and no own process holds: the memory of its
/// removed descendants, which the kernel keeps charged to them (v1: to their pages) below
/// it until it is reclaimed. v2: its usage less its live children's, where it can have no
/// process of its own (it has children; or it is a leaf with no process and dying
/// descendants). v1: the pages charged to it and its descendants, less its own and its
/// live children's. `None` where it is not known (its listing was cut, a count missing).
pub(super) fn removed(nodes: &[Node], v2: bool) -> Vec<Option<u64>> {
    let mut children = vec![Some(0u64); nodes.len()];
    for n in nodes {
        if let Some(p) = n.parent {
            children[p] = children[p].zip(n.charge).map(|(a, b)| a.saturating_add(b));
        }
    }
    nodes
        .iter()
        .zip(children)
        .map(|(n, kids)| {
            let kids = kids.filter(|_| !n.cut)?;
            if v2 {
                if n.children {
                    n.charge.map(|c| c.saturating_sub(kids))
                } else if n.empty {
                    n.charge
                } else {
                    None
                }
            } else {
                Some(n.charge?.saturating_sub(n.own?).saturating_sub(kids))
            }
        })
        .collect()
}

fn read_number(r: &mut Reader, path: &Path) -> Option<u64> {
    r.source
        .read_path(path, r.buf)
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// A cgroup's `memory.stat` and the files read for every container: its OOM counters,
/// usage and limit, and on v2 its peak and pressure. `None` when it has none (removed
/// while walking, the v2 root) or it is malformed (counted).
fn container(r: &mut Reader, dir: &Path, v2: bool) -> Option<MemoryStat> {
    let mut stat = match r.source.read_path(&dir.join("memory.stat"), r.buf) {
        Ok(text) => match MemoryStat::parse(text) {
            Ok(stat) => stat,
            Err(_) => {
                r.count(Reason::Malformed, 1);
                return None;
            }
        },
        Err(ReadError::Gone(_)) => return None,
        Err(e) => {
            r.count(e.system_reason(), 1);
            return None;
        }
    };
    // The OOM counters; a kernel without the file (v1 before 4.13) has none.
    let events = if v2 {
        "memory.events"
    } else {
        "memory.oom_control"
    };
    if let Ok(text) = r.source.read_path(&dir.join(events), r.buf) {
        stat.add_events(text);
    }
    // Headroom: what is charged to the cgroup against its limit.
    let (usage, limit) = if v2 {
        ("memory.current", "memory.max")
    } else {
        ("memory.usage_in_bytes", "memory.limit_in_bytes")
    };
    if let Ok(text) = r.source.read_path(&dir.join(usage), r.buf) {
        stat.add_usage(text);
    }
    if let Ok(text) = r.source.read_path(&dir.join(limit), r.buf) {
        stat.add_limit(text);
    }
    if v2 {
        // Absent before 5.19.
        if let Ok(text) = r.source.read_path(&dir.join("memory.peak"), r.buf) {
            stat.add_peak(text);
        }
        // Absent, or refused to be read, without PSI (psi=0): then no series.
        if let Ok(text) = r.source.read_path(&dir.join("memory.pressure"), r.buf) {
            if stat.add_pressure(text).is_err() {
                r.count(Reason::Malformed, 1);
            }
        }
    }
    Some(stat)
}

/// v2's files that bound or protect a reported cgroup, each where the kernel has it; v1's
/// kernel memory, for its sheet.
fn with_bounds(r: &mut Reader, dir: &Path, v2: bool, mut stat: MemoryStat) -> MemoryStat {
    if !v2 {
        if let Ok(text) = r.source.read_path(&dir.join("memory.kmem.usage_in_bytes"), r.buf) {
            stat.set_field("kernel", text);
        }
        return stat;
    }
    for file in [
        "memory.high",
        "memory.min",
        "memory.low",
        "memory.swap.current",
        "memory.swap.max",
        "memory.zswap.current",
        "memory.zswap.max",
    ] {
        if let Ok(text) = r.source.read_path(&dir.join(file), r.buf) {
            stat.add_bound(file, text);
        }
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::{removed, Node};

    fn node(parent: Option<usize>, charge: u64, own: Option<u64>) -> Node {
        Node {
            parent,
            charge: Some(charge),
            own,
            ..Node::default()
        }
    }

    /// v2: a parent's usage less its live children's; a leaf only when it is empty with
    /// dying descendants; a cut listing or a missing usage: not known.
    #[test]
    fn v2_removed_charge_is_usage_less_live_children() {
        let mut nodes = vec![
            Node {
                children: true,
                charge: None,
                ..Node::default()
            },
            node(Some(0), 400, None),
            node(Some(1), 50, None),
            node(Some(1), 30, None),
            node(Some(0), 70, None),
        ];
        nodes[1].children = true;
        nodes[4].empty = true;
        assert_eq!(
            removed(&nodes, true),
            [None, Some(320), None, None, Some(70)]
        );
        nodes[1].cut = true;
        nodes[3].charge = None;
        assert_eq!(removed(&nodes, true)[1], None);
    }

    /// v1: the pages charged to it and below, less its own and its live children's.
    #[test]
    fn v1_removed_charge_is_the_totals_less_own_and_live_children() {
        let nodes = vec![
            node(None, 1000, Some(100)),
            node(Some(0), 600, Some(0)),
            node(Some(1), 200, Some(200)),
            node(Some(0), 50, None),
        ];
        assert_eq!(
            removed(&nodes, false),
            [Some(250), Some(400), Some(0), None]
        );
    }
}
