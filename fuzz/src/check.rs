//! What Prometheus demands of an exposition, checked line by line: each family's HELP and
//! TYPE once and before its samples, its samples together, no series twice, names and label
//! values well formed, every value a number. The fuzz targets that encode call it, so an
//! input that would make Prometheus reject a scrape is a finding.

use std::collections::HashSet;

fn name_ok(s: &str, colon: bool) -> bool {
    let mut b = s.bytes();
    let first = b.next();
    first.is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || (colon && c == b':'))
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || (colon && c == b':'))
}

/// Splits `name{labels} value` and checks the labels; returns (name, labels as written).
fn sample(line: &str) -> Result<(&str, &str, &str), String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| format!("no value: {line:?}"))?;
    let name = &line[..name_end];
    if !name_ok(name, true) {
        return Err(format!("bad metric name {name:?}"));
    }
    let rest = &line[name_end..];
    let (labels, value) = match rest.strip_prefix('{') {
        None => ("", rest),
        Some(inner) => {
            let close = labels_end(inner).ok_or_else(|| format!("unclosed labels: {line:?}"))?;
            (&inner[..close], &inner[close + 1..])
        }
    };
    let value = value
        .strip_prefix(' ')
        .ok_or_else(|| format!("no space before the value: {line:?}"))?;
    let number = matches!(value, "NaN" | "+Inf" | "-Inf")
        || (value.parse::<f64>().is_ok_and(f64::is_finite)
            && !value.contains(['i', 'I', 'n', 'N', '_']));
    if !number {
        return Err(format!("value {value:?} is not a number: {line:?}"));
    }
    Ok((name, labels, value))
}

/// Index of the `}` closing a label set, honouring `\"`, `\\` and `\n` escapes; checks
/// each `name="value"` on the way.
fn labels_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut names = HashSet::new();
    loop {
        if b.get(i) == Some(&b'}') {
            return Some(i);
        }
        let eq = i + s[i..].find('=')?;
        let name = &s[i..eq];
        if !name_ok(name, false) || !names.insert(name) || b.get(eq + 1) != Some(&b'"') {
            return None;
        }
        i = eq + 2;
        loop {
            match b.get(i)? {
                b'\\' => {
                    if !matches!(b.get(i + 1)?, b'\\' | b'"' | b'n') {
                        return None;
                    }
                    i += 2;
                }
                b'"' => break,
                b'\n' => return None,
                _ => i += 1,
            }
        }
        i += 1;
        match b.get(i)? {
            b',' => i += 1,
            b'}' => return Some(i),
            _ => return None,
        }
    }
}

/// Checks a text (0.0.4) or OpenMetrics exposition; `Err` names the first problem.
pub fn exposition(text: &str, openmetrics: bool) -> Result<(), String> {
    let mut helped = HashSet::new();
    let mut typed = HashSet::new();
    let mut series = HashSet::new();
    let mut closed: HashSet<String> = HashSet::new();
    let mut family: Option<String> = None;
    let mut ended = false;
    for line in text.split_terminator('\n') {
        if ended {
            return Err(format!("a line after # EOF: {line:?}"));
        }
        if line == "# EOF" {
            if !openmetrics {
                return Err("# EOF in the text format".into());
            }
            ended = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# UNIT ").filter(|_| openmetrics) {
            let (name, unit) = rest.split_once(' ').unwrap_or((rest, ""));
            if family.as_deref() != Some(name) || !name.ends_with(&format!("_{unit}")) {
                return Err(format!(
                    "UNIT {unit:?} for {name}, not the family's or its suffix"
                ));
            }
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| (r, true))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| (r, false)));
        if let Some((rest, help)) = meta {
            let name = rest.split(' ').next().unwrap_or("");
            if !name_ok(name, true) {
                return Err(format!("bad family name {name:?}"));
            }
            if closed.contains(name) {
                return Err(format!("family {name} appears again after others"));
            }
            if family.as_deref() != Some(name) {
                if let Some(done) = family.take() {
                    closed.insert(done);
                }
                family = Some(name.to_string());
            }
            let seen = if help { &mut helped } else { &mut typed };
            if !seen.insert(name.to_string()) {
                return Err(format!(
                    "a second {} for {name}",
                    if help { "HELP" } else { "TYPE" }
                ));
            }
            if !help {
                let kind = rest[name.len()..].trim();
                let known = [
                    "counter",
                    "gauge",
                    "histogram",
                    "summary",
                    "untyped",
                    "info",
                    "stateset",
                    "unknown",
                    "gaugehistogram",
                ];
                if !known.contains(&kind) {
                    return Err(format!("family {name} has type {kind:?}"));
                }
            }
            continue;
        }
        if line.starts_with('#') {
            return Err(format!("stray comment {line:?}"));
        }
        let (name, labels, _) = sample(line)?;
        let fam = family
            .as_deref()
            .ok_or_else(|| format!("sample before any family: {line:?}"))?;
        if !name.starts_with(fam) {
            return Err(format!("sample {name} inside family {fam}"));
        }
        if !series.insert(format!("{name}{{{labels}}}")) {
            return Err(format!("series twice: {line:?}"));
        }
    }
    if openmetrics && !ended {
        return Err("OpenMetrics without # EOF".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catches_what_prometheus_rejects() {
        let ok = "# HELP a_total x\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 1\n";
        assert_eq!(exposition(ok, false), Ok(()));
        for bad in [
            "# HELP a x\n# HELP a y\n",
            "# TYPE a gauge\na 1\na 2\n",
            "# TYPE a gauge\na{k=\"v\"} x\n",
            "# TYPE a gauge\na{k=\"v\\q\"} 1\n",
            "# TYPE a gauge\na{k=\"v\",k=\"w\"} 1\n",
            "# TYPE a gauge\n# TYPE b gauge\n# HELP a x\n",
            "# TYPE a gauge\nb 1\n",
        ] {
            assert!(exposition(bad, false).is_err(), "{bad}");
        }
    }
}
