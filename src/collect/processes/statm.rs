//! A process's `statm`: the read that says whether its memory moved, and, kept open or
//! beside a watch of the process's end, that it is still the process the last scan saw.

use std::sync::Arc;

use super::dir::Dir;
use super::{progress, Known, ProcessRead, ReadContext};
use crate::collect::pool;
use crate::parse::{statm, ParseError};
use crate::source::{Buffers, Kept, ReadError, Reason, Watch};

/// A `statm` read that vouches for the process `prior` knew, and what it says: the
/// descriptor kept, if any, and its figures.
type Vouched = (Option<Arc<Kept>>, Option<[u64; 3]>);

/// The process's watch, and its `statm` read where that read alone can say that it is
/// the process `prior` knew.
///
/// A watch whose process ended is dropped: the pid may be another process's now. A
/// process without one is watched from now, before its files are read: a process that
/// ends between the two shows as ended at the next scan. The kept statm vouches that this
/// is the process `prior` knew (a reused pid fails the pread), and so does a watch that
/// reported no end when the scan began: an unchanged statm then needs no `stat` to say so.
/// A watched process without a kept statm reads it by path. (A process that ends after
/// the scan began and whose pid is taken at once is told apart by its statm, or by the
/// next scan's report of the end.)
pub(super) fn vouched_statm(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    prior: Option<&Known>,
    pid: u32,
    read: &mut ProcessRead,
) -> Result<(Option<Arc<Watch>>, Option<Vouched>), Reason> {
    let watched = prior
        .and_then(|k| k.watch.clone())
        .filter(|_| ctx.ended.binary_search(&pid).is_err());
    let by_path = watched.is_some() && prior.is_some_and(|k| k.statm_fd.is_none());
    let watch = watched.or_else(|| Some(Arc::new(ctx.exits.as_ref()?.watch(pid)?)));
    if by_path {
        read.unkept = true;
        let m = read_statm(ctx, bufs, at, Dir { pid, tid: None }, read);
        return Ok((watch, Some((None, m))));
    }
    Ok((watch, read_kept_statm(ctx, bufs, at, prior, read)?))
}

/// The kept `statm` of a known process, read with one `pread`: the descriptor and what it
/// says, or `None` when there is none or the process ended (its pid may already be
/// another's).
fn read_kept_statm(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    prior: Option<&Known>,
    read: &mut ProcessRead,
) -> Result<Option<Vouched>, Reason> {
    let Some((k, fd)) = prior.and_then(|k| Some((k, k.statm_fd.as_ref()?))) else {
        return Ok(None);
    };
    progress::at(at, progress::File::Statm);
    match ctx.source.read_kept(fd, &mut bufs.main) {
        Ok(text) => {
            let m = parsed(read, k.pid, "statm", statm::parse(text));
            Ok(Some((Some(fd.clone()), m)))
        }
        Err(ReadError::Gone(_)) => Ok(None),
        Err(e) => Err(e.process_reason()),
    }
}

/// `statm` opened and read: the baseline the next scan compares with, read before anything
/// it vouches for, so a change between two reads shows as a change next time, never as
/// stillness. Not needed when every scan reads every file (`rollup_refresh` 1).
pub(super) fn read_statm(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    dir: Dir,
    read: &mut ProcessRead,
) -> Option<[u64; 3]> {
    if ctx.rollup_refresh <= 1 {
        return None;
    }
    progress::at(at, progress::File::Statm);
    match ctx
        .source
        .read_pid(dir.pid, &dir.file("statm"), &mut bufs.main)
    {
        Ok(text) => parsed(read, dir.pid, "statm", statm::parse(text)),
        // Without a baseline the next scan reads the process again.
        Err(_) => None,
    }
}

/// A file a reader read but could not parse: counted as malformed, and the debug log names
/// the process, the file and what was wrong (a kernel whose format changed shows here
/// first). An empty file is not malformed: it has nothing to say.
pub(super) fn parsed<T>(
    read: &mut ProcessRead,
    pid: u32,
    file: &str,
    r: Result<T, ParseError>,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(ParseError::Empty) => None,
        Err(e) => {
            read.malformed += 1;
            crate::log!(Debug, "malformed file", pid = pid, file = file, error = e);
            None
        }
    }
}
