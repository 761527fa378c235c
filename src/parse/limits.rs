//! `/proc/PID/limits`: the soft limit on open files, for `process_max_fds`.

/// The soft `Max open files` limit; `None` when absent, `unlimited` or not a number.
pub fn max_open_files(text: &str) -> Option<u64> {
    let rest = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn soft_limit_of_open_files() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             95863                95863                processes \n\
                    Max open files            1024                 524288               files     \n";
        assert_eq!(super::max_open_files(text), Some(1024));
        assert_eq!(
            super::max_open_files("Max open files  unlimited  unlimited  files\n"),
            None
        );
        assert_eq!(super::max_open_files(""), None);
    }
}
