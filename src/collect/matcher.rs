//! Process-exporter-style group matchers (`--collector.processes.matcher-file`).
//!
//! The file is the `process_names` list of process-exporter's YAML config:
//!
//! ```yaml
//! process_names:
//!   - name: "{{.Comm}}"            # group name template (default "{{.ExeBase}}")
//!     comm: [postgres, redis-server]
//!   - name: "java:{{.Matches.App}}"
//!     exe: [java, /usr/bin/java]    # argv[0], by base name unless it holds a "/"
//!     cmdline: ['-jar\s+(?P<App>\S+)']
//! ```
//!
//! The first entry that matches names the group. Within one entry every given selector
//! (`comm`, `exe`, `cmdline`) must match: `comm` and `exe` match when any listed value
//! does, `cmdline` when every regex matches the arguments joined by spaces. Templates:
//! `{{.Comm}}`, `{{.ExeBase}}`, `{{.ExeFull}}`, `{{.Matches.NAME}}` (a named capture).
//! A process no entry matches is in no group (it can still be a top-K process).

use regex::Regex;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum MatcherError {
    #[error("{0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("entry {entry}: bad cmdline regex: {err}")]
    Regex { entry: usize, err: regex::Error },
    #[error("entry {entry}: {what}")]
    Entry { entry: usize, what: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    process_names: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    name: Option<String>,
    #[serde(default)]
    comm: Vec<String>,
    #[serde(default)]
    exe: Vec<String>,
    #[serde(default)]
    cmdline: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Comm,
    ExeBase,
    ExeFull,
    Match(String),
}

#[derive(Debug, Clone)]
struct Entry {
    template: Vec<Piece>,
    comm: Vec<String>,
    exe: Vec<String>,
    cmdline: Vec<Regex>,
}

/// What a matcher may look at for one process.
pub struct Candidate<'a> {
    pub comm: &'a str,
    /// The NUL-separated `/proc/PID/cmdline`.
    pub cmdline: &'a str,
}

/// Compiled matcher list.
#[derive(Debug, Clone)]
pub struct Matchers {
    entries: Vec<Entry>,
    needs_cmdline: bool,
}

impl Matchers {
    pub fn parse(yaml: &str) -> Result<Self, MatcherError> {
        let file: File = serde_yaml_ng::from_str(yaml)?;
        let mut entries = Vec::new();
        for (i, raw) in file.process_names.into_iter().enumerate() {
            let entry = i + 1;
            if raw.comm.is_empty() && raw.exe.is_empty() && raw.cmdline.is_empty() {
                return Err(MatcherError::Entry {
                    entry,
                    what: "needs at least one of comm, exe, cmdline".into(),
                });
            }
            let cmdline = raw
                .cmdline
                .iter()
                .map(|r| Regex::new(r).map_err(|err| MatcherError::Regex { entry, err }))
                .collect::<Result<Vec<_>, _>>()?;
            let template = parse_template(raw.name.as_deref().unwrap_or("{{.ExeBase}}"))
                .map_err(|what| MatcherError::Entry { entry, what })?;
            entries.push(Entry {
                template,
                comm: raw.comm,
                exe: raw.exe,
                cmdline,
            });
        }
        let needs_cmdline = entries.iter().any(|e| {
            !e.exe.is_empty()
                || !e.cmdline.is_empty()
                || e.template
                    .iter()
                    .any(|p| matches!(p, Piece::ExeBase | Piece::ExeFull))
        });
        Ok(Matchers {
            entries,
            needs_cmdline,
        })
    }

    /// True when some entry needs `/proc/PID/cmdline` (exe or cmdline selectors, or a
    /// template that names the executable), so the sampler reads it only then.
    pub fn needs_cmdline(&self) -> bool {
        self.needs_cmdline
    }

    /// The group name of the first matching entry, or `None`.
    pub fn group(&self, c: &Candidate) -> Option<String> {
        let mut args = c.cmdline.split('\0').filter(|a| !a.is_empty());
        let exe_full = args.next().unwrap_or("");
        let exe_base = exe_full.rsplit('/').next().unwrap_or(exe_full);
        let joined = c
            .cmdline
            .split('\0')
            .filter(|a| !a.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        'entries: for e in &self.entries {
            if !e.comm.is_empty() && !e.comm.iter().any(|x| x == c.comm) {
                continue;
            }
            if !e.exe.is_empty()
                && !e.exe.iter().any(|x| {
                    if x.contains('/') {
                        x == exe_full
                    } else {
                        x == exe_base
                    }
                })
            {
                continue;
            }
            let mut captures = Vec::new();
            for re in &e.cmdline {
                let Some(caps) = re.captures(&joined) else {
                    continue 'entries;
                };
                for name in re.capture_names().flatten() {
                    if let Some(m) = caps.name(name) {
                        captures.push((name.to_string(), m.as_str().to_string()));
                    }
                }
            }
            let mut name = String::new();
            for piece in &e.template {
                match piece {
                    Piece::Text(t) => name.push_str(t),
                    Piece::Comm => name.push_str(c.comm),
                    Piece::ExeBase => name.push_str(exe_base),
                    Piece::ExeFull => name.push_str(exe_full),
                    Piece::Match(key) => {
                        if let Some((_, v)) = captures.iter().find(|(k, _)| k == key) {
                            name.push_str(v);
                        }
                    }
                }
            }
            return Some(name);
        }
        None
    }
}

fn parse_template(t: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut rest = t;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            pieces.push(Piece::Text(rest[..start].to_string()));
        }
        let end = rest[start..]
            .find("}}")
            .ok_or_else(|| format!("unclosed {{{{ in name {t:?}"))?;
        let field = rest[start + 2..start + end].trim();
        pieces.push(match field {
            ".Comm" => Piece::Comm,
            ".ExeBase" => Piece::ExeBase,
            ".ExeFull" => Piece::ExeFull,
            _ => match field.strip_prefix(".Matches.") {
                Some(key) if !key.is_empty() => Piece::Match(key.to_string()),
                _ => return Err(format!("unknown template field {field:?} in name {t:?}")),
            },
        });
        rest = &rest[start + end + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
process_names:
  - name: "{{.Comm}}"
    comm: [postgres, redis-server]
  - name: "java:{{.Matches.App}}"
    exe: [java]
    cmdline: ['-jar\s+(?P<App>\S+)']
  - exe: [/usr/bin/python3]
"#;

    fn group(m: &Matchers, comm: &str, cmdline: &str) -> Option<String> {
        m.group(&Candidate { comm, cmdline })
    }

    #[test]
    fn first_matching_entry_names_the_group() {
        let m = Matchers::parse(CONFIG).unwrap();
        assert!(m.needs_cmdline());
        assert_eq!(
            group(&m, "postgres", "postgres: writer\0"),
            Some("postgres".into())
        );
        assert_eq!(
            group(&m, "java", "/usr/lib/jvm/bin/java\0-Xmx1g\0-jar\0app.jar\0"),
            Some("java:app.jar".into())
        );
        // exe matches but the cmdline regex does not: all selectors of an entry must match.
        assert_eq!(group(&m, "java", "java\0-version\0"), None);
        // Full-path exe entries compare the full argv[0]; default template is ExeBase.
        assert_eq!(
            group(&m, "python3", "/usr/bin/python3\0x.py\0"),
            Some("python3".into())
        );
        assert_eq!(group(&m, "python3", "/opt/python3\0x.py\0"), None);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let err = |y: &str| Matchers::parse(y).unwrap_err().to_string();
        assert!(err("process_names:\n  - name: x\n").contains("entry 1: needs at least one"));
        assert!(err("process_names:\n  - cmdline: ['(']\n").contains("entry 1: bad cmdline regex"));
        assert!(err("process_names:\n  - comm: [a]\n    name: '{{.Pid}}'\n")
            .contains("unknown template field"));
        assert!(err("process_names:\n  - comm: [a]\n    cgroup: x\n").contains("unknown field"));
        assert!(err("nope: 1").contains("unknown field"));
    }
}
