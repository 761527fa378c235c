//! Which of a process's files a scan reads again: a pure function of what the last scan
//! knew of it, its `statm` now, whether it is due for its refresh and whether a reader is
//! stuck in it. `files.rs` carries the plan out.

use super::known::Standing;

/// What the last scan knew of a process, as far as the plan needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Prior {
    /// Its `statm` size, resident and shared pages then.
    pub statm: Option<[u64; 3]>,
    /// Its `smaps_rollup` was read (not denied or empty).
    pub rollup: bool,
    /// Its name then is its name now (`stat`, read before the plan).
    pub same_comm: bool,
}

impl Prior {
    /// What `k` says, for a process now named `comm`.
    pub(super) fn of(k: &super::Known, comm: &str) -> Prior {
        Prior {
            statm: k.statm,
            rollup: k.reading.rollup.is_some(),
            same_comm: k.reading.comm == comm,
        }
    }
}

/// The files to read again; what is not read is taken from what was known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Plan {
    pub standing: Standing,
    /// `status`: its memory figures.
    pub status: bool,
    /// `smaps_rollup`, which takes the process's mmap lock.
    pub rollup: bool,
    /// `oom_score`, unless nothing it is a function of moved (RSS, swap, page tables and
    /// `oom_score_adj`: the executor reads it anyway when `oom_score_adj` changed).
    pub oom_score: bool,
    /// `cgroup` or `cmdline`, for the group.
    pub regroup: bool,
}

/// The plan for a process: everything for a new one; for a known one whose memory moved
/// or that is due for its refresh, its memory files; for one that did not move, nothing
/// but what the caller always reads (`stat`, `oom_score_adj`). A reader stuck in the
/// process (its mmap lock held) is never sent back into `smaps_rollup` or `cmdline`, and
/// a rollup that could not be read is tried again.
pub(super) fn plan(prior: Option<Prior>, statm: Option<[u64; 3]>, due: bool, stuck: bool) -> Plan {
    let standing = match prior {
        None => Standing::New,
        Some(p) if statm.is_none() || p.statm != statm => Standing::Moved,
        Some(_) if due => Standing::Due,
        Some(_) => Standing::Unchanged,
    };
    let moved = standing != Standing::Unchanged;
    Plan {
        standing,
        status: moved,
        rollup: !stuck && (moved || prior.is_some_and(|p| !p.rollup)),
        oom_score: moved,
        regroup: standing == Standing::New
            || (due && !stuck)
            || prior.is_some_and(|p| !p.same_comm),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case, as a table: (known, statm, due, stuck) -> the files read.
    #[test]
    fn the_plan_reads_what_can_have_changed_and_nothing_else() {
        const A: Option<[u64; 3]> = Some([100, 50, 10]);
        const B: Option<[u64; 3]> = Some([100, 51, 10]);
        let known = |rollup: bool, same_comm: bool| {
            Some(Prior {
                statm: A,
                rollup,
                same_comm,
            })
        };
        use Standing::*;
        type Row = (
            Option<Prior>,
            Option<[u64; 3]>,
            bool,
            bool,
            Standing,
            [bool; 4],
        );
        #[rustfmt::skip]
        let table: [Row; 12] = [
            //  prior               statm  due    stuck  standing    status rollup oom    regroup
            (None,                  A,     false, false, New,       [true,  true,  true,  true]),
            (None,                  None,  false, false, New,       [true,  true,  true,  true]),
            (None,                  A,     false, true,  New,       [true,  false, true,  true]),
            (known(true, true),     A,     false, false, Unchanged, [false, false, false, false]),
            (known(true, true),     B,     false, false, Moved,     [true,  true,  true,  false]),
            (known(true, true),     None,  false, false, Moved,     [true,  true,  true,  false]),
            (known(true, true),     A,     true,  false, Due,       [true,  true,  true,  true]),
            (known(true, true),     A,     true,  true,  Due,       [true,  false, true,  false]),
            (known(true, true),     B,     false, true,  Moved,     [true,  false, true,  false]),
            (known(false, true),    A,     false, false, Unchanged, [false, true,  false, false]),
            (known(false, true),    A,     false, true,  Unchanged, [false, false, false, false]),
            (known(true, false),    A,     false, false, Unchanged, [false, false, false, true]),
        ];
        for (i, (prior, statm, due, stuck, standing, [status, rollup, oom_score, regroup])) in
            table.into_iter().enumerate()
        {
            let want = Plan {
                standing,
                status,
                rollup,
                oom_score,
                regroup,
            };
            assert_eq!(plan(prior, statm, due, stuck), want, "row {i}");
        }
    }
}
