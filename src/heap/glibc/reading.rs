//! The reader of glibc's heaps as every heap reader is read (`shape::HeapReader`): which
//! processes it reads, and its figure from the arenas' bounds and the measurement.

use super::{measure, process};

/// The reader of glibc's heaps: every process whose malloc is glibc's.
pub struct Glibc;

impl super::super::shape::HeapReader for Glibc {
    type Figure = measure::HeapMeasure;
    type Reason = measure::Unmeasured;
    type Cache = ();
    const NAME: &'static str = "glibc";
    const SHARE: super::super::shape::Share = super::super::shape::Share::Allocator;
    // glibc gives pages back with MADV_DONTNEED (malloc_trim) or munmap, never MADV_FREE.
    const HOLDS_LAZY_FREE: bool = false;

    fn applies(
        p: &super::super::shape::Process,
        _: &(),
    ) -> Result<bool, measure::Unmeasured> {
        use crate::parse::smaps::Library;
        if p.identity.allocator != super::super::runtime::Allocator::Glibc {
            return Err(measure::Unmeasured::NotGlibc);
        }
        let remote = p
            .vmas
            .iter()
            .any(|v| v.library == Some(Library::Glibc) && p.on_remote(v));
        if remote {
            return Err(measure::Unmeasured::RemoteFile);
        }
        Ok(true)
    }

    fn read(
        p: &super::super::shape::Process,
        memory: &mut super::super::memory::ProcessMemory,
        _: &(),
        _: &mut super::super::shape::Ceiling,
    ) -> Result<measure::HeapMeasure, measure::Unmeasured> {
        let (bounds, libc) = process::bounds(p.vmas);
        measure::measure_process(memory, &bounds, &libc)
    }
}
