//! Which exposition a scraper gets: OpenMetrics when its `Accept` asks for it, else the
//! text format 0.0.4 (promtool only parses that).

/// Content type of the OpenMetrics exposition.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the Prometheus text exposition 0.0.4.
pub(crate) const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// True when an `Accept` header asks for OpenMetrics with a non-zero weight.
pub fn wants_openmetrics(accept: &str) -> bool {
    accepts(accept, "application/openmetrics-text")
}

/// True when an `Accept-Encoding` header takes gzip with a non-zero weight: named
/// (`gzip`, `x-gzip`), or through `*` when not named.
pub(crate) fn accepts_gzip(accept_encoding: &str) -> bool {
    let (mut named, mut any) = (None, None);
    for coding in accept_encoding.split(',') {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let weight = parts
            .find_map(|p| p.strip_prefix("q="))
            .map_or(Some(1.0), |q| q.parse::<f64>().ok());
        let ok = weight.is_some_and(|q| q > 0.0);
        if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            named = Some(ok);
        } else if name == "*" {
            any = Some(ok);
        }
    }
    named.or(any).unwrap_or(false)
}

/// True when an `Accept` header names `media` with a non-zero weight.
pub fn accepts(accept: &str, media: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let named = parts.next().unwrap_or("");
        named.eq_ignore_ascii_case(media)
            && !parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn gzip_by_name_or_wildcard_unless_refused() {
        use super::accepts_gzip;
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, GZIP;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("*, gzip;q=0"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip(""));
    }

    use super::*;

    #[test]
    fn accept_negotiation() {
        // What Prometheus 2.x/3.x sends.
        assert!(wants_openmetrics("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
        assert!(accepts(
            "text/html, application/json;q=0.9",
            "application/json"
        ));
        assert!(!accepts("application/json;q=0", "application/json"));
    }
}
