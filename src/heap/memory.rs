//! The memory of a live process, read through `process_vm_readv` (many small reads in one
//! system call) or `/proc/PID/mem`, and `/proc/PID/pagemap` for which pages are resident.
//! Both need ptrace access to the process (CAP_SYS_PTRACE for other users' processes).
//!
//! What the process holds is its owner's to write, so every read is bounded while it runs,
//! not only before it starts: each reader is given a [`Budget`] of wall time and of
//! pagemap entries, checked on every read; once it is spent every read fails with
//! [`Fault::Budget`] and the reader's figure is given up. Residency is taken from the
//! mappings' `Rss` (smaps, read just before) where that alone says it: a range over a
//! mapping with no page resident, a mapping wholly resident, or a whole mapping. Only the
//! rest costs pagemap entries, so a reservation of TiBs that no page backs costs nothing.

use std::time::{Duration, Instant};

use super::target::{Fault, Target};
use crate::parse::mountinfo::Remote;
use crate::parse::smaps::Vma;
use crate::source::PidFile;

/// What one reader may spend on one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall time from when the budget is given.
    pub time: Duration,
    /// Pagemap entries (pages whose presence is looked up one by one).
    pub pages: u64,
}

/// A mapping as smaps gave it: its range and the resident bytes it holds (see
/// [`ProcessMemory::resident_bytes`]).
#[derive(Debug, Clone, Copy)]
struct Mapped {
    start: u64,
    end: u64,
    rss: u64,
    /// Private anonymous memory (no file, not shared).
    private_anonymous: bool,
    /// Not a file of a FUSE or network mount: its pages may be read.
    readable: bool,
}

pub struct ProcessMemory {
    pid: u32,
    mem: PidFile,
    pagemap: PidFile,
    page: u64,
    /// The mappings in address order, when known: residency shortcuts.
    mapped: Vec<Mapped>,
    /// What a read of a mapping that is not `readable` fails with: `Remote`, or
    /// `Unreadable` when the process's mounts could not be read at all.
    refused: Fault,
    /// When the current reader's time runs out, and the pagemap entries it has left.
    deadline: Option<Instant>,
    pages_left: u64,
    /// The current reader's budget ran out: every read since failed.
    exhausted: bool,
    /// `process_vm_readv` failed as unsupported or filtered: `pread` from now on.
    no_vm_readv: bool,
    /// A window of pagemap entries: `entries[i]` is page `first_page + i`.
    entries: Vec<u64>,
    first_page: u64,
    raw: Vec<u8>,
}

/// Pagemap entries read at once: 64 KiB of entries cover 32 MiB of 4 KiB pages.
const PAGEMAP_WINDOW: usize = 8192;
/// The fewest entries read at once: free chunks follow each other in address order, so
/// the next one's pages are usually in the same read.
const PAGEMAP_READ_AHEAD: usize = 512;
const PRESENT: u64 = 1 << 63;
/// The page is mapped by this process alone (`PM_MMAP_EXCLUSIVE`).
const EXCLUSIVE: u64 = 1 << 56;
/// A file or shared-memory page (`PM_FILE`), not an anonymous one.
const FILE: u64 = 1 << 61;

/// Whether a pagemap entry is a page the process holds: present, and a file page or an
/// anonymous page no other process maps. A present anonymous page another process maps
/// too is the zero page (what a read of never-written memory maps: no RAM) or a page
/// shared copy-on-write after a fork: giving it back frees no RAM.
fn held(entry: u64) -> bool {
    entry & PRESENT != 0 && entry & (EXCLUSIVE | FILE) != 0
}
/// `IOV_MAX`: the most remote pieces one `process_vm_readv` takes.
const IOV_MAX: usize = 1024;

impl ProcessMemory {
    /// Opens the memory and pagemap of process `pid` under `source`'s procfs; `None` when
    /// either cannot be opened (no ptrace access, or the process is gone).
    pub fn open(source: &crate::source::Source, pid: u32) -> Option<ProcessMemory> {
        let mem = source.open_pid(pid, "mem").ok()?;
        let pagemap = source.open_pid(pid, "pagemap").ok()?;
        Some(ProcessMemory::new(
            pid,
            mem,
            pagemap,
            crate::source::own::page_size(),
            source.pids_are_ours(),
        ))
    }

    /// `vm_readv`: `pid` is a pid of the exporter's own namespace, so `process_vm_readv`
    /// reaches the same process as `mem`.
    pub fn new(
        pid: u32,
        mem: PidFile,
        pagemap: PidFile,
        page: u64,
        vm_readv: bool,
    ) -> ProcessMemory {
        ProcessMemory {
            pid,
            mem,
            pagemap,
            page,
            no_vm_readv: !vm_readv,
            entries: Vec::new(),
            first_page: 0,
            raw: Vec::new(),
            mapped: Vec::new(),
            refused: Fault::Remote,
            deadline: None,
            pages_left: u64::MAX,
            exhausted: false,
        }
    }

    /// The process's mappings as smaps gave them (in address order): a range's residency
    /// is then read from pagemap only where their `Rss` cannot say it.
    /// A mapping of a file on one of `remote`'s mounts (every file's, when the mounts
    /// cannot be told) is never read.
    pub(crate) fn with_mappings(mut self, vmas: &[Vma], remote: Option<&Remote>) -> ProcessMemory {
        if remote.is_some_and(|r| r.unreadable) {
            self.refused = Fault::Unreadable;
        }
        self.mapped = vmas
            .iter()
            .map(|v| Mapped {
                start: v.start,
                end: v.end,
                // A shared mapping's pages are counted wherever they are mapped; a private
                // one's only where no other process maps them (pagemap's rule below).
                rss: if v.perms[3] == b's' {
                    v.rss_bytes
                } else {
                    v.private_bytes()
                },
                private_anonymous: !v.file_backed && v.perms[3] == b'p',
                readable: match v.file_id {
                    Some((dev, _)) => remote.is_some_and(|r| !r.has_device(dev)),
                    None => true,
                },
            })
            .collect();
        // smaps lists mappings in address order; anything else is not believed, and no
        // address is read then.
        if !self.mapped.windows(2).all(|w| w[0].end <= w[1].start) {
            self.mapped = vec![Mapped {
                start: 0,
                end: u64::MAX,
                rss: 0,
                private_anonymous: false,
                readable: false,
            }];
        }
        self
    }

    /// Gives the next reader its budget, from now.
    pub fn budget(&mut self, b: Budget) {
        self.deadline = Instant::now().checked_add(b.time);
        self.pages_left = b.pages;
        self.exhausted = false;
    }

    /// Whether the current reader's budget ran out (a read failed for it).
    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Fails once the current reader's time is spent, and from then on.
    fn check_time(&mut self) -> Result<(), Fault> {
        if !self.exhausted && self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.exhausted = true;
        }
        if self.exhausted {
            return Err(Fault::Budget);
        }
        Ok(())
    }

    /// Bytes of `[start, end)` in pages the process holds ([`held`]), from pagemap, within
    /// the budget.
    fn pagemap_resident(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        let page_size = self.page;
        let mut total = 0u64;
        let mut page = start / page_size;
        // Checked: a range may end at the top of the address space.
        while let Some(at) = page.checked_mul(page_size).filter(|&at| at < end) {
            let cached =
                page >= self.first_page && page < self.first_page + self.entries.len() as u64;
            if !cached {
                self.check_time()?;
                let last = end.div_ceil(page_size);
                let n = ((last - page) as usize).clamp(PAGEMAP_READ_AHEAD, PAGEMAP_WINDOW);
                self.raw.resize(n * 8, 0);
                let got = self
                    .pagemap
                    .read_at(page * 8, &mut self.raw)
                    .map_err(|_| Fault::Unreadable)?;
                if got < 8 {
                    return Err(Fault::Unreadable);
                }
                self.entries.clear();
                self.entries.extend(
                    self.raw[..got - got % 8]
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
                );
                self.first_page = page;
            }
            if self.pages_left == 0 {
                self.exhausted = true;
                return Err(Fault::Budget);
            }
            self.pages_left -= 1;
            if held(self.entries[(page - self.first_page) as usize]) {
                let lo = start.max(at);
                let hi = end.min(at.saturating_add(page_size));
                total += hi - lo;
            }
            page += 1;
        }
        Ok(total)
    }

    /// One `process_vm_readv` of each `(address, length)`; `false` when it did not read
    /// them all (the caller then reads them one by one to learn which failed).
    fn vm_readv(&mut self, at: &[(u64, usize)], out: &mut [u8]) -> bool {
        let mut local = Vec::with_capacity(at.len());
        let mut rest = &mut *out;
        for &(_, len) in at {
            let (o, tail) = std::mem::take(&mut rest).split_at_mut(len);
            local.push(libc::iovec {
                iov_base: o.as_mut_ptr().cast(),
                iov_len: len,
            });
            rest = tail;
        }
        let remote: Vec<libc::iovec> = at
            .iter()
            .map(|&(a, len)| libc::iovec {
                iov_base: a as usize as *mut libc::c_void,
                iov_len: len,
            })
            .collect();
        let want: usize = at.iter().map(|r| r.1).sum();
        // SAFETY: every local iovec points into `out`, which outlives the call and is
        // exclusively borrowed; the remote ones are only read by the kernel, in the other
        // process, and a bad address there fails the call rather than touching ours.
        let n = unsafe {
            libc::process_vm_readv(
                self.pid as libc::pid_t,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            if matches!(e, Some(libc::ENOSYS) | Some(libc::EPERM)) {
                self.no_vm_readv = true;
            }
            return false;
        }
        n as usize == want
    }
}

impl ProcessMemory {
    /// Whether `[addr, addr + len)` may be read: outside every known mapping the kernel
    /// fails the read itself; in a mapping of a FUSE or network mount's file it could
    /// wait on that file's server for good, so it is never asked.
    fn may_read(&self, addr: u64, len: usize) -> Result<(), Fault> {
        let end = addr.saturating_add(len as u64);
        let first = self.mapped.partition_point(|m| m.end <= addr);
        let remote = self.mapped[first..]
            .iter()
            .take_while(|m| m.start < end)
            .any(|m| !m.readable);
        if remote {
            return Err(self.refused);
        }
        Ok(())
    }
}

impl Target for ProcessMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.check_time()?;
        self.may_read(addr, buf.len())?;
        self.mem
            .read_exact_at(addr, buf)
            .map_err(|_| Fault::Unreadable)
    }

    fn read_many(&mut self, at: &[(u64, usize)], out: &mut [u8]) -> Result<(), Fault> {
        self.check_time()?;
        for &(addr, len) in at {
            self.may_read(addr, len)?;
        }
        let mut rest = out;
        for at in at.chunks(IOV_MAX) {
            let len: usize = at.iter().map(|r| r.1).sum();
            let (out, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            if self.no_vm_readv || !self.vm_readv(at, out) {
                let mut o = out;
                for &(a, len) in at {
                    let (one, t) = std::mem::take(&mut o).split_at_mut(len);
                    self.read(a, one)?;
                    o = t;
                }
            }
        }
        Ok(())
    }

    fn page_size(&self) -> u64 {
        self.page
    }

    /// Mappings that cover `[start, end)` without a gap, each private and anonymous.
    fn private_anonymous(&self, start: u64, end: u64) -> bool {
        if self.mapped.is_empty() {
            return true;
        }
        let mut at = start;
        let first = self.mapped.partition_point(|m| m.end <= start);
        for m in &self.mapped[first..] {
            if at >= end {
                break;
            }
            if m.start > at || !m.private_anonymous {
                return false;
            }
            at = m.end;
        }
        at >= end
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        if self.mapped.is_empty() {
            return self.pagemap_resident(start, end);
        }
        // Outside every mapping nothing is resident; inside one, its Rss says it where
        // it is 0, the whole mapping, or the range covers it whole.
        let mut total = 0u64;
        let first = self.mapped.partition_point(|m| m.end <= start);
        for i in first..self.mapped.len() {
            let m = self.mapped[i];
            if m.start >= end {
                break;
            }
            let (lo, hi) = (start.max(m.start), end.min(m.end));
            total = total.saturating_add(if m.rss == 0 {
                0
            } else if lo == m.start && hi == m.end {
                m.rss
            } else if m.rss >= m.end - m.start {
                hi - lo
            } else {
                self.pagemap_resident(lo, hi)?
            });
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests;
