//! How the one line a heap reader takes (`readers!` in `heap/mod.rs`) becomes its module
//! and its place in `heap::list`: what one process's reading holds (`Measurement`), the
//! reads counted per reader (`ReadCounts`), the per-binary caches (`Caches`), the reading
//! itself (`read_all`), and each reader's name, share and families, in the order listed (the
//! order of their series).

/// Declares each reader's module (`src/heap/NAME/`) and makes `heap::list` from them:
/// `readers! { glibc::Glibc, ... }`, a reader by its folder and its type.
macro_rules! readers {
    ($($module:ident::$reader:ident,)*) => {
        $(pub mod $module;)*

        /// The heap readers, in the order of `readers!`, and what is made from them.
        pub mod list {
            super::registry::list! {
                $($module: $reader => super::$module::$reader,)*
            }

            /// How many readers there are.
            pub(crate) const COUNT: usize = NAMES.len();
        }
    };
}

/// The items of `heap::list`, from each reader's field name, variant and type.
macro_rules! list {
    ($($field:ident: $variant:ident => $reader:ty,)*) => {
        use $crate::family::Metric;
        use super::memory::ProcessMemory;
        use super::registry::outcome;
        use super::shape::{
            run, Ceiling, Counts, Figure, Process, HeapReader, NoFigure, Says, Share,
        };
        use super::words::{Gap, Said, Samples, Subject};

        /// One reader's measurement of a process: its figure, or why there is none.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Measurement {
            $($variant(Result<<$reader as HeapReader>::Figure, <$reader as HeapReader>::Reason>),)*
        }

        /// A registered reader: its measurement, picked out of a [`Measurement`].
        pub trait Registered: HeapReader {
            fn pick(
                reading: &Measurement,
            ) -> Option<&Result<<Self as HeapReader>::Figure, <Self as HeapReader>::Reason>>;
        }

        $(impl Registered for $reader {
            fn pick(
                reading: &Measurement,
            ) -> Option<&Result<<Self as HeapReader>::Figure, <Self as HeapReader>::Reason>> {
                #[allow(unreachable_patterns)]
                match reading {
                    Measurement::$variant(r) => Some(r),
                    _ => None,
                }
            }
        })*

        impl Measurement {
            /// The reader's name: the `runtime` label of the held series.
            pub fn reader(&self) -> &'static str {
                match self {
                    $(Measurement::$variant(_) => <$reader as HeapReader>::NAME,)*
                }
            }

            /// The `outcome` label: `measured`, a partial figure's, or the reason.
            pub fn outcome(&self) -> &'static str {
                match self {
                    $(Measurement::$variant(r) => outcome::<$reader>(r),)*
                }
            }

            /// Resident memory the reader's allocator or runtime holds unused (`None`:
            /// no figure, or one without it).
            pub fn held_bytes(&self) -> Option<u64> {
                match self {
                    $(Measurement::$variant(r) => r.as_ref().ok().and_then(Figure::held_bytes),)*
                }
            }

            /// What its figure is to the process's hoarding.
            pub fn share(&self) -> Share {
                match self {
                    $(Measurement::$variant(_) => <$reader as HeapReader>::SHARE,)*
                }
            }

            /// The samples of the reader's families of the top processes.
            pub fn samples(&self, out: &mut Samples) {
                match self {
                    $(Measurement::$variant(r) => <$reader as Says>::samples(r, out),)*
                }
            }

            /// What the reader's figure says of the process (`None`: no figure), which
            /// holds `held` bytes it could have back.
            pub fn said(&self, held: u64, process: Subject) -> Option<Said> {
                match self {
                    $(Measurement::$variant(r) => r
                        .as_ref()
                        .ok()
                        .map(|f| <$reader as Says>::said(f, held, process)),)*
                }
            }

            /// Why the reader has no whole figure, where that is a finding of its own.
            pub fn gap(&self) -> Option<Gap> {
                match self {
                    $(Measurement::$variant(r) => match r {
                        Err(why) => <$reader as Says>::gap(Some(*why)),
                        Ok(f) if f.held_bytes().is_none()
                            && <$reader as HeapReader>::Reason::PARTIAL.is_some() =>
                        {
                            <$reader as Says>::gap(None)
                        }
                        Ok(_) => None,
                    },)*
                }
            }

            /// Whether the read found the process moving (or starting): read again on
            /// the retry schedule.
            pub(crate) fn is_transient(&self) -> bool {
                match self {
                    $(Measurement::$variant(r) => r.as_ref().is_err_and(|e| e.is_transient()),)*
                }
            }

            /// Whether the process's memory could not be read.
            pub(crate) fn is_unreadable(&self) -> bool {
                match self {
                    $(Measurement::$variant(r) => r.as_ref().is_err_and(|e| {
                        *e == <$reader as HeapReader>::Reason::UNREADABLE
                    }),)*
                }
            }

            /// Whether the figure did not fit the process's memory: not believed.
            pub fn is_implausible(&self) -> bool {
                match self {
                    $(Measurement::$variant(r) => r.as_ref().is_err_and(|e| {
                        *e == <$reader as HeapReader>::Reason::IMPLAUSIBLE
                    }),)*
                }
            }

            /// Whether the read stopped at its budget.
            pub(crate) fn is_over_budget(&self) -> bool {
                match self {
                    $(Measurement::$variant(r) => r.as_ref().is_err_and(|e| e.is_over_budget()),)*
                }
            }
        }

        /// Every reader's name, in the list's order.
        pub const NAMES: &[&str] = &[$(<$reader as HeapReader>::NAME,)*];

        /// Every reader's counter of reads by outcome, in the list's order.
        pub const READS: &[&Metric] = &[$(&<$reader as Says>::READS,)*];

        /// Every reader's families of the top processes, in the list's order.
        pub const ROWS: &[&[Metric]] = &[$(<$reader as Says>::ROWS,)*];

        /// What a reader's figure is to the process's hoarding, by its name.
        pub(crate) fn share_of(name: &str) -> Option<Share> {
            $(if name == <$reader as HeapReader>::NAME {
                return Some(<$reader as HeapReader>::SHARE);
            })*
            None
        }

        /// Whether a reader's held bytes may be `MADV_FREE`'d pages, by its name.
        pub(crate) fn holds_lazy_free(name: &str) -> bool {
            $(if name == <$reader as HeapReader>::NAME {
                return <$reader as HeapReader>::HOLDS_LAZY_FREE;
            })*
            false
        }

        /// Reads by reader and outcome.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct ReadCounts {
            $(pub $field: Counts<<$reader as HeapReader>::Reason>,)*
        }

        impl ReadCounts {
            pub fn count(&mut self, reading: &Measurement) {
                match reading {
                    $(Measurement::$variant(r) => self.$field.count(r),)*
                }
            }

            /// These counts plus `other`'s (running totals across scans).
            #[must_use]
            pub fn plus(self, other: &ReadCounts) -> ReadCounts {
                ReadCounts { $($field: self.$field.plus(&other.$field),)* }
            }

            /// Each reader's name and its counts by outcome label, in the list's order.
            pub fn each(&self) -> Vec<(&'static str, Vec<(&'static str, u64)>)> {
                vec![$((<$reader as HeapReader>::NAME, self.$field.outcomes().collect()),)*]
            }
        }

        /// What every reader learns once per binary, owned by the scanner that reads
        /// the processes (its deep tier), each bounded.
        #[derive(Default)]
        pub struct Caches {
            $(pub $field: <$reader as HeapReader>::Cache,)*
        }

        /// Runs every reader that applies to `process`, on its memory (opened once, when
        /// one of them reads it), within the ceiling.
        pub(crate) fn read_all(
            process: &Process,
            open: impl FnOnce() -> Option<ProcessMemory>,
            caches: &Caches,
            ceiling: &mut Ceiling,
        ) -> Vec<Measurement> {
            #[allow(non_snake_case)]
            struct Applies {
                $($field: Result<bool, <$reader as HeapReader>::Reason>,)*
            }
            let applies = Applies {
                $($field: <$reader as HeapReader>::applies(process, &caches.$field),)*
            };
            let mut memory = [$(matches!(applies.$field, Ok(true)),)*]
                .contains(&true)
                .then(open)
                .flatten();
            let mut readings = Vec::new();
            $(match applies.$field {
                Ok(true) => readings.push(Measurement::$variant(run::<$reader>(
                    process,
                    memory.as_mut(),
                    &caches.$field,
                    ceiling,
                ))),
                Err(why) => readings.push(Measurement::$variant(Err(why))),
                Ok(false) => {}
            })*
            readings
        }
    };
}

pub(crate) use {list, readers};

use super::shape::{Figure, HeapReader, NoFigure};

/// A read's `outcome` label.
pub fn outcome<R: HeapReader>(read: &Result<R::Figure, R::Reason>) -> &'static str {
    match read {
        Ok(f) if f.held_bytes().is_none() => R::Reason::PARTIAL.unwrap_or("measured"),
        Ok(_) => "measured",
        Err(e) => e.as_str(),
    }
}
