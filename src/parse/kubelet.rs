//! The kubelet's eviction settings, as the kubelet itself reads them: its command line
//! (`--config`, `--config-dir`, `--eviction-hard`, `--eviction-soft`,
//! `--enforce-node-allocatable`, `--cgroup-root`, `--cgroup-driver`, `--cgroups-per-qos`),
//! its configuration file (a `KubeletConfiguration`, YAML or JSON) and its drop-ins, each
//! merged over the one before as a JSON merge patch (RFC 7386), flags last. Thresholds are
//! Kubernetes quantities (`100Mi`, `1.5G`, `1e9`) or percentages of the signal's capacity
//! (`10%`), kept as the kubelet keeps them so that a percentage resolves to the same byte
//! (`pkg/kubelet/eviction/helpers.go`, `api/types.go` in Kubernetes 1.34).
//!
//! The files are the node's administrator's, read through the kubelet's `/proc/PID/root`;
//! still, nothing here trusts their shape: what does not parse is an error, never a panic.

use std::collections::BTreeMap;

use super::ParseError;

/// What a threshold is, as the kubelet keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// Bytes, a quantity rounded up to a whole byte (the kubelet compares the exact
    /// quantity with a whole number of bytes: the same outcome).
    Bytes(u64),
    /// A share of the signal's capacity, as the kubelet parses it: `float32(p) / 100`.
    Share(f32),
}

impl Value {
    /// The threshold in bytes for a signal of `capacity` bytes, as
    /// `GetThresholdQuantity` computes it: `int64(float64(capacity) * float64(share))`.
    pub fn bytes(self, capacity: u64) -> u64 {
        match self {
            Value::Bytes(b) => b,
            Value::Share(s) => (capacity as f64 * f64::from(s)) as u64,
        }
    }
}

/// The kubelet's default hard thresholds on Linux (`eviction.DefaultEvictionHard`): the
/// memory one is all this exporter uses.
pub const DEFAULT_MEMORY_AVAILABLE: &str = "100Mi";

/// A threshold statement's value (`parseThresholdStatement`): `Ok(None)` for one the
/// kubelet ignores (`0%`, `100%`); an error where the kubelet would refuse to start.
pub fn threshold(text: &str) -> Result<Option<Value>, ParseError> {
    if text.ends_with('%') {
        if text == "0%" || text == "100%" {
            return Ok(None);
        }
        let share = text
            .trim_end_matches('%')
            .parse::<f32>()
            .map_err(|_| ParseError::Malformed("eviction percentage"))?
            / 100.0;
        if !(0.0..=1.0).contains(&share) {
            return Err(ParseError::Malformed("eviction percentage out of 0-100%"));
        }
        return Ok(Some(Value::Share(share)));
    }
    match quantity(text)? {
        0 => Err(ParseError::Malformed("eviction threshold not positive")),
        b => Ok(Some(Value::Bytes(b))),
    }
}

/// A Kubernetes quantity (`resource.ParseQuantity`) in whole units, rounded up: a sign,
/// digits with at most one point, then a binary suffix (`Ki` .. `Ei`), a decimal one
/// (`n u m k M G T P E`) or an exponent (`e3`, `E-2`). Negative quantities and ones past
/// 2^63 are errors here (no threshold can be either).
pub fn quantity(text: &str) -> Result<u64, ParseError> {
    let bad = || ParseError::Malformed("quantity");
    let body = text.strip_prefix('+').unwrap_or(text);
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || whole.len() + fraction.len() > 30 {
        return Err(bad());
    }
    // number = digits × 10^-(fraction's length).
    let digits: u128 = format!("{whole}{fraction}").parse().map_err(|_| bad())?;
    let mut ten: i32 = -(fraction.len() as i32);
    let mut two: u32 = 0;
    match suffix {
        "" => {}
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            two = 10 * (1 + "KMGTPE".find(&suffix[..1]).ok_or_else(bad)? as u32);
        }
        "n" => ten -= 9,
        "u" => ten -= 6,
        "m" => ten -= 3,
        "k" => ten += 3,
        "M" => ten += 6,
        "G" => ten += 9,
        "T" => ten += 12,
        "P" => ten += 15,
        "E" => ten += 18,
        _ => {
            let exp = suffix
                .strip_prefix(['e', 'E'])
                .and_then(|e| e.parse::<i32>().ok())
                .filter(|e| e.abs() <= 40)
                .ok_or_else(bad)?;
            ten += exp;
        }
    }
    let too_big = || ParseError::Malformed("quantity too large");
    let mut v = digits.checked_mul(1u128 << two).ok_or_else(too_big)?;
    if ten >= 0 {
        v = v
            .checked_mul(10u128.checked_pow(ten as u32).ok_or_else(too_big)?)
            .ok_or_else(too_big)?;
    } else {
        // Rounded up, as Quantity.Value() does.
        let d = 10u128.checked_pow(ten.unsigned_abs()).unwrap_or(u128::MAX);
        v = v.div_ceil(d);
    }
    u64::try_from(v)
        .ok()
        .filter(|&v| v <= i64::MAX as u64)
        .ok_or_else(too_big)
}

/// The kubelet's settings this exporter uses, before defaults: `None` where nothing set
/// them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `evictionHard` / `--eviction-hard`, by signal.
    pub eviction_hard: Option<BTreeMap<String, String>>,
    pub eviction_soft: Option<BTreeMap<String, String>>,
    pub merge_default_eviction: Option<bool>,
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub cgroup_root: Option<String>,
    pub cgroup_driver: Option<String>,
    pub cgroups_per_qos: Option<bool>,
}

/// The flags of a kubelet's command line this exporter reads, with the paths of its
/// configuration file and drop-in directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandLine {
    pub config: Option<String>,
    pub config_dir: Option<String>,
    pub flags: Settings,
}

/// A kubelet's `/proc/PID/cmdline` (arguments separated by NUL). Flags are read where
/// they stand, as `--name=value` or `--name value` (single dash too, as Go's flag package
/// takes them); the last of a repeated flag wins, as with pflag. A map flag of the wrong
/// shape is an error: the kubelet would not have started with it.
pub fn command_line(text: &str) -> Result<CommandLine, ParseError> {
    let args: Vec<&str> = text.split('\0').filter(|a| !a.is_empty()).collect();
    let mut c = CommandLine::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i];
        i += 1;
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        let boolean = name == "cgroups-per-qos";
        if !matches!(
            name,
            "config"
                | "config-dir"
                | "eviction-hard"
                | "eviction-soft"
                | "enforce-node-allocatable"
                | "cgroup-root"
                | "cgroup-driver"
                | "cgroups-per-qos"
        ) {
            continue;
        }
        let value = match inline {
            Some(v) => v.to_string(),
            None if boolean => "true".to_string(),
            None => {
                let v = args
                    .get(i)
                    .ok_or(ParseError::Malformed("kubelet flag without a value"))?;
                i += 1;
                (*v).to_string()
            }
        };
        let f = &mut c.flags;
        match name {
            "config" => c.config = Some(value),
            "config-dir" => c.config_dir = Some(value),
            "eviction-hard" => f.eviction_hard = Some(langle_map(&value)?),
            "eviction-soft" => f.eviction_soft = Some(langle_map(&value)?),
            "enforce-node-allocatable" => {
                f.enforce_node_allocatable = Some(
                    value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|s| s.trim().to_string())
                        .collect(),
                );
            }
            "cgroup-root" => f.cgroup_root = Some(value),
            "cgroup-driver" => f.cgroup_driver = Some(value),
            _ => {
                f.cgroups_per_qos = Some(match value.as_str() {
                    "true" | "1" | "t" | "T" | "TRUE" | "True" => true,
                    "false" | "0" | "f" | "F" | "FALSE" | "False" => false,
                    _ => return Err(ParseError::Malformed("--cgroups-per-qos")),
                });
            }
        }
    }
    Ok(c)
}

/// `memory.available<100Mi,nodefs.available<10%` (cliflag's LangleSeparatedMapStringString).
fn langle_map(text: &str) -> Result<BTreeMap<String, String>, ParseError> {
    let mut m = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('<')
            .ok_or(ParseError::Malformed("eviction threshold flag"))?;
        m.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(m)
}

/// A configuration file or drop-in, as a document to merge.
pub fn document(text: &str) -> Result<serde_yaml_ng::Value, ParseError> {
    serde_yaml_ng::from_str(text).map_err(|_| ParseError::Malformed("kubelet configuration"))
}

/// `patch` merged over `base` as a JSON merge patch (RFC 7386), as the kubelet merges its
/// drop-ins over its configuration: maps key by key, `null` removes, anything else
/// replaces.
pub fn merge(base: &mut serde_yaml_ng::Value, patch: &serde_yaml_ng::Value) {
    use serde_yaml_ng::Value as Y;
    let Y::Mapping(p) = patch else {
        *base = patch.clone();
        return;
    };
    if !matches!(base, Y::Mapping(_)) {
        *base = Y::Mapping(Default::default());
    }
    let Y::Mapping(b) = base else { return };
    for (k, v) in p {
        if v.is_null() {
            b.remove(k);
        } else if let Some(old) = b.get_mut(k) {
            merge(old, v);
        } else {
            let mut fresh = Y::Null;
            merge(&mut fresh, v);
            b.insert(k.clone(), fresh);
        }
    }
}

/// The settings a merged configuration document gives. A field of the wrong type is an
/// error: the kubelet would not have started with it.
pub fn settings(doc: &serde_yaml_ng::Value) -> Result<Settings, ParseError> {
    let field = |name: &str| doc.get(name).filter(|v| !v.is_null());
    let wrong = |_: &str| ParseError::Malformed("kubelet configuration field");
    let map = |name: &str| -> Result<Option<BTreeMap<String, String>>, ParseError> {
        let Some(v) = field(name) else {
            return Ok(None);
        };
        let m = v.as_mapping().ok_or_else(|| wrong(name))?;
        m.iter()
            .map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
            .collect::<Option<BTreeMap<_, _>>>()
            .map(Some)
            .ok_or_else(|| wrong(name))
    };
    let string = |name: &str| -> Result<Option<String>, ParseError> {
        field(name)
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| wrong(name)))
            .transpose()
    };
    let boolean = |name: &str| -> Result<Option<bool>, ParseError> {
        field(name)
            .map(|v| v.as_bool().ok_or_else(|| wrong(name)))
            .transpose()
    };
    let list = field("enforceNodeAllocatable")
        .map(|v| {
            v.as_sequence()
                .and_then(|s| {
                    s.iter()
                        .map(|e| e.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| wrong("enforceNodeAllocatable"))
        })
        .transpose()?;
    Ok(Settings {
        eviction_hard: map("evictionHard")?,
        eviction_soft: map("evictionSoft")?,
        merge_default_eviction: boolean("mergeDefaultEvictionSettings")?,
        enforce_node_allocatable: list,
        cgroup_root: string("cgroupRoot")?,
        cgroup_driver: string("cgroupDriver")?,
        cgroups_per_qos: boolean("cgroupsPerQOS")?,
    })
}

impl Settings {
    /// These settings with `over`'s where it has them (flags over the files).
    pub fn overridden_by(mut self, over: &Settings) -> Settings {
        macro_rules! take {
            ($($f:ident),*) => {$(if over.$f.is_some() { self.$f = over.$f.clone(); })*};
        }
        take!(
            eviction_hard,
            eviction_soft,
            merge_default_eviction,
            enforce_node_allocatable,
            cgroup_root,
            cgroup_driver,
            cgroups_per_qos
        );
        self
    }
}

#[cfg(test)]
mod tests;
