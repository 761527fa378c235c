//! Memory that no process's RSS shows, made for the tests of the balance sheet and its
//! owners: a SysV segment no process attaches, a memfd nobody maps.

/// A SysV segment, removed when dropped.
pub struct Segment(pub i32);

impl Segment {
    /// A new private segment of `len` bytes, every byte written, then detached: resident,
    /// attached by no process.
    pub fn touched(len: usize) -> Segment {
        // SAFETY: a new private segment of `len` bytes, attached, written inside its
        // length, detached; its id is removed once, by Drop.
        unsafe {
            let id = libc::shmget(libc::IPC_PRIVATE, len, libc::IPC_CREAT | 0o600);
            assert!(id >= 0);
            let p = libc::shmat(id, std::ptr::null(), 0);
            assert_ne!(p as isize, -1);
            std::ptr::write_bytes(p.cast::<u8>(), 7, len);
            assert_eq!(libc::shmdt(p), 0);
            Segment(id)
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the segment made by `touched`, no longer attached.
        unsafe { libc::shmctl(self.0, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// A memfd named `name` with `bytes` written to it and never mapped, closed when dropped.
pub fn memfd(name: &str, bytes: usize) -> std::fs::File {
    let flags = nix::sys::memfd::MFdFlags::MFD_CLOEXEC;
    let mut f = std::fs::File::from(nix::sys::memfd::memfd_create(name, flags).unwrap());
    let chunk = vec![7u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        std::io::Write::write_all(&mut f, &chunk[..n]).unwrap();
        left -= n;
    }
    f
}
