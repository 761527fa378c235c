//! A cursor of the test's own on the kernel log: the oracle the kmsg tests compare the
//! exporter with.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

/// `/dev/kmsg`, non-blocking, with the cursor at the end: only what the kernel writes from
/// now on.
pub fn at_end() -> std::fs::File {
    let mut log = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .unwrap();
    log.seek(SeekFrom::End(0)).unwrap();
    log
}

/// Every record `/dev/kmsg` holds after the cursor, as text.
pub fn records(kmsg: &mut std::fs::File) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match kmsg.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            // The ring overwrote records the cursor had not read: go on from the oldest.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("reading /dev/kmsg: {e}"),
        }
    }
    out
}
