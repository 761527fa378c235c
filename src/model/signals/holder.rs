//! Who holds the part of a process's measured hoarding that is not glibc's free chunks.

/// Who holds a process's measured held memory apart from glibc's free chunks: a managed
/// runtime's collector, or a malloc that keeps freed pages (the `runtime` label of the
/// held series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Holder {
    Jvm,
    Go,
    Jemalloc,
}

impl Holder {
    /// Every holder, in the order of the groups' samples.
    pub const ALL: [Holder; 3] = [Holder::Jvm, Holder::Go, Holder::Jemalloc];

    pub fn as_str(self) -> &'static str {
        match self {
            Holder::Jvm => "jvm",
            Holder::Go => "go",
            Holder::Jemalloc => "jemalloc",
        }
    }
}
