//! The kernel log, `/dev/kmsg`, read from a cursor of our own: one `read` of the device
//! returns one record; a read past the newest record fails with `EAGAIN` (the file is
//! opened non-blocking), and one whose record the ring overwrote fails once with `EPIPE`
//! and goes on from the oldest record left. A regular file in its place (a fixture tree)
//! holds records one per line.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;

use super::{ReadError, Source};

/// A record is at most 8 KiB (`PRINTK_MESSAGE_MAX` plus the prefix and dictionary).
const RECORD_BYTES: usize = 8 << 10;

/// Records read in one call at most: a log flooded by another subsystem cannot hold a
/// scan; what is left is read by the next one.
const MAX_RECORDS: usize = 100_000;

/// An open kernel log and its cursor.
#[derive(Debug)]
pub struct KernelLog {
    file: File,
    device: bool,
    buf: Vec<u8>,
    /// A regular file's bytes not yet split into records.
    rest: Vec<u8>,
    path: PathBuf,
}

/// What one [`KernelLog::read`] went through.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LogRead {
    pub records: u64,
    /// Times the ring overwrote records before the cursor reached them.
    pub overwritten: u64,
}

impl Source {
    /// `/dev/kmsg` beside the proc root: `/proc` gives `/dev/kmsg`, `/host/proc` (a
    /// container with the host's `/dev/kmsg` mounted there) `/host/dev/kmsg`.
    pub(crate) fn kernel_log_path(&self) -> PathBuf {
        self.procfs.with_file_name("dev").join("kmsg")
    }

    /// Opens the kernel log with the cursor at its end (`from_start` false: only what
    /// the kernel writes from now on) or at its oldest record.
    pub(crate) fn open_kernel_log(&self, from_start: bool) -> Result<KernelLog, ReadError> {
        let path = self.kernel_log_path();
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| ReadError::new(&path, e))?;
        let device = file
            .metadata()
            .map_err(|e| ReadError::new(&path, e))?
            .file_type()
            .is_char_device();
        let mut log = KernelLog {
            file,
            device,
            buf: vec![0; RECORD_BYTES],
            rest: Vec::new(),
            path,
        };
        if device && !from_start {
            log.file
                .seek(SeekFrom::End(0))
                .map_err(|e| ReadError::new(&log.path, e))?;
        }
        Ok(log)
    }
}

impl KernelLog {
    /// Hands every record after the cursor to `each`, oldest first, and moves the cursor
    /// past them.
    pub fn read(&mut self, mut each: impl FnMut(&str)) -> Result<LogRead, ReadError> {
        let mut done = LogRead::default();
        while (done.records as usize) < MAX_RECORDS {
            let n = match self.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::BrokenPipe => {
                        done.overwritten += 1;
                        continue;
                    }
                    _ => return Err(ReadError::new(&self.path, e)),
                },
            };
            if self.device {
                done.records += 1;
                each(&String::from_utf8_lossy(&self.buf[..n]));
            } else {
                self.rest.extend_from_slice(&self.buf[..n]);
            }
        }
        if !self.device {
            let text = std::mem::take(&mut self.rest);
            let text = String::from_utf8_lossy(&text);
            // A record's dictionary lines start with a space and belong to it.
            let mut record = String::new();
            for line in text.split_inclusive('\n') {
                if line.starts_with(' ') {
                    record.push_str(line);
                    continue;
                }
                if !record.is_empty() {
                    done.records += 1;
                    each(&record);
                }
                record = line.to_string();
            }
            if !record.trim().is_empty() {
                done.records += 1;
                each(&record);
            }
        }
        Ok(done)
    }
}
