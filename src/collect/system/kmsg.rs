//! The `kmsg` collector: the OOM killer's account of each kill, from `/dev/kmsg` read on
//! a cursor of its own. The cursor starts at the end of the log, so a restarted exporter
//! does not count the kills it had counted before (`explain` starts at the oldest record,
//! to tell the kills of a host it was not watching). Without the right to read the log
//! (`kernel.dmesg_restrict=1` and no `CAP_SYSLOG`) the collector fails with `denied` (the
//! scan's report warns once, with the fix) and tries again each scan; everything else goes
//! on.

use std::sync::Mutex;

use crate::collect::{count, ErrorCounts};
use crate::config::Collector;
use crate::parse::kmsg::{Assembler, OomKill};
use crate::source::{KernelLog, ReadError, Reason, Source};

/// The open log, its cursor and the lines of a kill not yet complete.
#[derive(Debug, Default)]
pub struct Cursor {
    log: Option<KernelLog>,
    assembler: Assembler,
    /// Start at the oldest record instead of the end (once).
    pub from_start: bool,
}

/// The kills written to the log since the last read.
pub(super) fn read(
    source: &Source,
    cursor: &Mutex<Cursor>,
    errs: &mut ErrorCounts,
) -> Result<Vec<OomKill>, Reason> {
    // A reader that panicked mid-read left the cursor consistent: every field is whole.
    let mut c = cursor.lock().unwrap_or_else(|e| e.into_inner());
    let c = &mut *c;
    if c.log.is_none() {
        // No /dev/kmsg at all is a kernel (or container) without it, not a failure.
        let log = source.open_kernel_log(c.from_start).map_err(|e| match e {
            ReadError::Gone(_) => Reason::Unsupported,
            e => e.system_reason(),
        })?;
        c.log = Some(log);
        c.from_start = false;
    }
    let Some(log) = c.log.as_mut() else {
        return Ok(Vec::new());
    };
    let mut kills = Vec::new();
    let before = c.assembler.malformed;
    let assembler = &mut c.assembler;
    let read = log.read(|record| kills.extend(assembler.push(record)));
    count(
        errs,
        Collector::Kmsg,
        Reason::Malformed,
        c.assembler.malformed - before,
    );
    match read {
        Ok(done) => {
            if done.overwritten > 0 {
                crate::log!(
                    Warn,
                    "the kernel log overwrote records before they were read; a kill among them is counted by vmstat only",
                    times = done.overwritten
                );
            }
            Ok(kills)
        }
        Err(e) => {
            // Opened again (at the end) by the next scan.
            c.log = None;
            Err(e.system_reason())
        }
    }
}
