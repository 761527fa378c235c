//! The metric catalogue against this host: every row the fixture trees cannot show (the
//! heap readers' series, a JVM's, a Go program's, jemalloc's, CPython's, mimalloc's) is
//! served by a `--once` of this machine with a process of each kind running.

use crate::common;

#[test]
fn every_row_is_served_by_the_fixtures_or_this_host() {
    common::catalogue::check(true);
}
