//! RFC 3339 UTC timestamps without a date library (shared with `build.rs`).

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `2026-11-23T03:04:05Z`, or with `millis` `2026-11-23T03:04:05.678Z`.
pub fn format(secs: i64, millis: Option<u32>) -> String {
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let t = secs.rem_euclid(86_400);
    let (h, mi, s) = (t / 3600, t / 60 % 60, t % 60);
    match millis {
        Some(ms) => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z"),
        None => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_instants() {
        assert_eq!(super::format(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::format(951_782_400, Some(5)),
            "2000-02-29T00:00:00.005Z"
        );
        assert_eq!(super::format(1_795_402_984, None), "2026-11-23T03:03:04Z");
        assert_eq!(super::format(-1, None), "1969-12-31T23:59:59Z");
    }
}
