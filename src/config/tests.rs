//! Flags: defaults, bad flags as one line, durations and sizes, collectors.

use super::*;

fn parse(args: &[&str]) -> Result<Config, FlagsOutcome> {
    Config::from_args(std::iter::once("membloat_exporter").chain(args.iter().copied()))
}

fn bad(args: &[&str]) -> String {
    match parse(args) {
        Err(FlagsOutcome::Bad(line)) => line,
        other => panic!("expected a bad flag, got {other:?}"),
    }
}

#[test]
fn defaults() {
    let c = parse(&[]).unwrap();
    assert_eq!(c.listen_address, ":10293");
    assert_eq!(c.scan_interval, Duration::from_secs(10));
    assert_eq!(c.top_k, 5);
    assert_eq!(c.group_by, GroupBy::Comm);
    assert!(
        c.collectors.enabled(Collector::Processes)
            && c.collectors.enabled(crate::units::thp::COLLECTOR)
    );
}

#[test]
fn collectors_switch_off_and_back_on_last_wins() {
    let c = parse(&[
        "--no-collector.thp",
        "--no-collector.processes",
        "--collector.processes",
    ])
    .unwrap();
    assert!(!c.collectors.enabled(crate::units::thp::COLLECTOR));
    assert!(c.collectors.enabled(Collector::Processes));
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert!(parse_duration("10").is_err());
    assert!(parse_duration("1.5s").is_err());
    assert!(parse_duration("99999999999999999999h").is_err());
}

#[test]
fn bad_flags_are_one_line_naming_the_flag() {
    for (args, flag) in [
        (&["--web.listen-adress=:1"][..], "--web.listen-adress"),
        (&["--scan.interval=0s"][..], "--scan.interval"),
        (&["--scan.interval=fast"][..], "--scan.interval"),
        (&["--web.listen-address=:99999"][..], "--web.listen-address"),
        (
            &["--collector.processes.group-by=user"][..],
            "--collector.processes.group-by",
        ),
        (
            &["--collector.processes.group-by=matcher"][..],
            "--collector.processes.matcher-file",
        ),
        (
            &["--web.telemetry-path=metrics"][..],
            "--web.telemetry-path",
        ),
    ] {
        let line = bad(args);
        assert!(line.contains(flag), "{line:?} does not name {flag}");
        assert!(!line.contains('\n'));
    }
}

#[test]
fn sizes() {
    assert_eq!(parse_size("64MiB"), Ok(64 << 20));
    assert_eq!(parse_size("0"), Ok(0));
    assert_eq!(parse_size("2GiB"), Ok(2 << 30));
    assert!(parse_size("64MB").is_err());
    assert!(parse_size("99999999999GiB").is_err());
    assert!(bad(&["--collector.processes.deep-min-size=lots"])
        .contains("--collector.processes.deep-min-size"));
}

#[test]
fn matcher_file_implies_matcher_grouping() {
    let c = parse(&["--collector.processes.matcher-file=/etc/m.yml"]).unwrap();
    assert_eq!(c.group_by, GroupBy::Matcher("/etc/m.yml".into()));
}
