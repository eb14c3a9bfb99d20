//! Device names: parsing, merging and printing, after TensorFlow's `DeviceNameUtils`
//! (`device_name_utils.cc`) and Python's `DeviceSpec` (`device_spec.py`).

use crate::error::{OxiflowError, Result};
use std::fmt;

/// A possibly partial device specification `/job:J/replica:R/task:T/device:TYPE:ID`;
/// each field is optional (`None` = unset, which is also what `*` means).
///
/// Accepted spellings: the full grammar with components in any order, legacy `/cpu:0` and
/// `/gpu:1`, `/device:GPU:0`, local names `GPU:0` / `gpu:0` (as Python's `tf.device` accepts),
/// `*` wildcards, `""` and `"/"` (nothing set). The types `cpu`, `gpu` and `tpu` are
/// upper-cased in any case (`/device:Gpu:0` is `GPU:0`; TF's C++ parser keeps `cpu`
/// verbatim and then never matches it, a quirk not copied).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceSpec {
    pub job: Option<String>,
    pub replica: Option<u32>,
    pub task: Option<u32>,
    pub device_type: Option<String>,
    pub id: Option<u32>,
}

/// The local job every device of this process belongs to.
pub const LOCAL_JOB: &str = "localhost";

fn bad(spec: &str, reason: impl Into<String>) -> OxiflowError {
    OxiflowError::MalformedDevice { spec: spec.to_string(), reason: reason.into() }
}

fn parse_num(spec: &str, field: &str, v: &str) -> Result<Option<u32>> {
    if v == "*" {
        return Ok(None);
    }
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(spec, format!("{field} must be a non-negative integer or '*', got '{v}'")));
    }
    v.parse::<u32>().map(Some).map_err(|_| bad(spec, format!("{field} '{v}' is out of range")))
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic()) && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

fn canonical_type(t: &str) -> String {
    let up = t.to_ascii_uppercase();
    if matches!(up.as_str(), "CPU" | "GPU" | "TPU") {
        up
    } else {
        t.to_string()
    }
}

impl DeviceSpec {
    /// A fully specified local device `/job:localhost/replica:0/task:0/device:TYPE:ID`.
    pub fn local(device_type: &str, id: u32) -> DeviceSpec {
        DeviceSpec { job: Some(LOCAL_JOB.into()), replica: Some(0), task: Some(0), device_type: Some(canonical_type(device_type)), id: Some(id) }
    }

    /// Parses a device string. Errors (`MalformedDevice`) quote the string and say which part
    /// is wrong: `foobar`, `/job:123`, `/replica:-1`, `/device:GPU:3/extra`, `/gpu:`.
    pub fn parse(spec: &str) -> Result<DeviceSpec> {
        let mut d = DeviceSpec::default();
        let s = spec.trim();
        if s.is_empty() || s == "/" {
            return Ok(d);
        }
        if !s.starts_with('/') {
            // Python's local form: TYPE[:ID|*]
            let parts: Vec<&str> = s.split(':').collect();
            let known = |t: &str| matches!(t.to_ascii_uppercase().as_str(), "CPU" | "GPU" | "TPU");
            return match parts.as_slice() {
                [t] if known(t) => Ok(DeviceSpec { device_type: Some(canonical_type(t)), ..d }),
                [t, id] if known(t) => Ok(DeviceSpec { device_type: Some(canonical_type(t)), id: parse_num(spec, "device id", id)?, ..d }),
                _ => Err(bad(spec, "expected '/job:J/replica:R/task:T/device:TYPE:ID' or a local name such as 'GPU:0'")),
            };
        }
        let mut seen = std::collections::HashSet::new();
        for comp in s[1..].split('/') {
            let mut kv = comp.splitn(2, ':');
            let key = kv.next().unwrap_or("");
            let val = kv.next();
            let lkey = key.to_ascii_lowercase();
            let field = match lkey.as_str() {
                "cpu" | "gpu" | "tpu" => "device",
                "job" | "replica" | "task" | "device" => lkey.as_str(),
                _ => return Err(bad(spec, format!("unknown component '/{comp}'"))),
            };
            if !seen.insert(field.to_string()) {
                return Err(bad(spec, format!("'{field}' given twice")));
            }
            let Some(val) = val else {
                return Err(bad(spec, format!("component '/{comp}' has no value")));
            };
            match lkey.as_str() {
                "job" => {
                    if val != "*" {
                        if !is_ident(val) {
                            return Err(bad(spec, format!("job name '{val}' must start with a letter")));
                        }
                        d.job = Some(val.to_string());
                    }
                }
                "replica" => d.replica = parse_num(spec, "replica", val)?,
                "task" => d.task = parse_num(spec, "task", val)?,
                "device" => {
                    let mut tv = val.splitn(2, ':');
                    let t = tv.next().unwrap_or("");
                    if t != "*" {
                        if !is_ident(t) {
                            return Err(bad(spec, format!("device type '{t}' is not a name")));
                        }
                        d.device_type = Some(canonical_type(t));
                    }
                    if let Some(id) = tv.next() {
                        d.id = parse_num(spec, "device id", id)?;
                    }
                }
                _ => {
                    // legacy /cpu:N, /gpu:N
                    d.device_type = Some(canonical_type(key));
                    d.id = parse_num(spec, "device id", val)?;
                }
            }
        }
        Ok(d)
    }

    /// `true` when no field is set (the empty string).
    pub fn is_empty(&self) -> bool {
        *self == DeviceSpec::default()
    }

    /// `true` when every field is set.
    pub fn is_full(&self) -> bool {
        self.job.is_some() && self.replica.is_some() && self.task.is_some() && self.device_type.is_some() && self.id.is_some()
    }

    /// TF's scope rule (`DeviceSpec.make_merged_spec`): fields set in `inner` win, fields
    /// unset in `inner` are taken from `self` (the outer scope).
    pub fn merged_with(&self, inner: &DeviceSpec) -> DeviceSpec {
        DeviceSpec {
            job: inner.job.clone().or_else(|| self.job.clone()),
            replica: inner.replica.or(self.replica),
            task: inner.task.or(self.task),
            device_type: inner.device_type.clone().or_else(|| self.device_type.clone()),
            id: inner.id.or(self.id),
        }
    }

    /// `DeviceNameUtils::IsCompleteSpecification(self, full)`: every field set here equals
    /// the one in `full`.
    pub fn matches(&self, full: &DeviceSpec) -> bool {
        fn ok<T: PartialEq>(p: &Option<T>, f: &Option<T>) -> bool {
            p.is_none() || p == f
        }
        ok(&self.job, &full.job)
            && ok(&self.replica, &full.replica)
            && ok(&self.task, &full.task)
            && ok(&self.device_type, &full.device_type)
            && ok(&self.id, &full.id)
    }

    /// `AreCompatibleDevNames`: no field set in both with different values.
    pub fn compatible(&self, other: &DeviceSpec) -> bool {
        fn ok<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> bool {
            a.is_none() || b.is_none() || a == b
        }
        ok(&self.job, &other.job)
            && ok(&self.replica, &other.replica)
            && ok(&self.task, &other.task)
            && ok(&self.device_type, &other.device_type)
            && ok(&self.id, &other.id)
    }

    /// `MergeDevNames(self, other, soft)`: fill unset fields from `other`; a conflict is an
    /// error (TF's `Cannot merge devices with incompatible types: '<a>' and '<b>'`) unless
    /// `soft`, where a type conflict clears type and id and an id conflict clears the id.
    pub fn merge_constraint(&self, other: &DeviceSpec, soft: bool) -> Result<DeviceSpec> {
        let mut m = self.clone();
        let conflict = |what: &str| OxiflowError::InvalidArgument(format!("Cannot merge devices with incompatible {what}: '{self}' and '{other}'"));
        macro_rules! strict {
            ($f:ident, $what:expr) => {
                match (&m.$f, &other.$f) {
                    (Some(a), Some(b)) if a != b => return Err(conflict($what)),
                    (None, Some(_)) => m.$f = other.$f.clone(),
                    _ => {}
                }
            };
        }
        strict!(job, "jobs");
        strict!(replica, "replicas");
        strict!(task, "tasks");
        match (&m.device_type, &other.device_type) {
            (Some(a), Some(b)) if a != b => {
                if soft {
                    m.device_type = None;
                    m.id = None;
                    return Ok(m);
                }
                return Err(conflict("types"));
            }
            (None, Some(_)) => m.device_type = other.device_type.clone(),
            _ => {}
        }
        match (m.id, other.id) {
            (Some(a), Some(b)) if a != b => {
                if soft {
                    m.id = None;
                    return Ok(m);
                }
                return Err(conflict("ids"));
            }
            (None, Some(_)) => m.id = other.id,
            _ => {}
        }
        Ok(m)
    }

    /// The spec without device type and id: what soft placement falls back to.
    pub fn without_type_and_id(&self) -> DeviceSpec {
        DeviceSpec { device_type: None, id: None, ..self.clone() }
    }

    /// Short local name `/device:TYPE:ID` (or the canonical string when partial).
    pub fn local_name(&self) -> String {
        match (&self.device_type, self.id) {
            (Some(t), Some(i)) => format!("/device:{t}:{i}"),
            _ => self.to_string(),
        }
    }
}

impl fmt::Display for DeviceSpec {
    /// Canonical form (`ParsedNameToString`): `/job:J/replica:R/task:T/device:TYPE:ID`,
    /// unset fields omitted, `/device:TYPE:*` when only the type is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(j) = &self.job {
            write!(f, "/job:{j}")?;
        }
        if let Some(r) = self.replica {
            write!(f, "/replica:{r}")?;
        }
        if let Some(t) = self.task {
            write!(f, "/task:{t}")?;
        }
        if let Some(t) = &self.device_type {
            match self.id {
                Some(i) => write!(f, "/device:{t}:{i}")?,
                None => write!(f, "/device:{t}:*")?,
            }
        }
        Ok(())
    }
}

/// Parses and prints back in canonical form (`/cpu:0` -> `/device:CPU:0`).
pub fn canonicalize(spec: &str) -> Result<String> {
    Ok(DeviceSpec::parse(spec)?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    fn c(s: &str) -> String {
        canonicalize(s).unwrap()
    }
    #[test]
    fn canonical_forms() {
        assert_eq!(c("/cpu:0"), "/device:CPU:0");
        assert_eq!(c("/gpu:1"), "/device:GPU:1");
        assert_eq!(c("/GPU:0"), "/device:GPU:0");
        assert_eq!(c("/device:GPU:0"), "/device:GPU:0");
        assert_eq!(c("GPU:0"), "/device:GPU:0");
        assert_eq!(c("gpu:2"), "/device:GPU:2");
        assert_eq!(c(""), "");
        assert_eq!(c("/device:GPU:*"), "/device:GPU:*");
        assert_eq!(c("/gpu:*/job:*/replica:4"), "/replica:4/device:GPU:*");
        assert_eq!(c("/job:localhost/replica:0/task:0/device:CPU:0"), "/job:localhost/replica:0/task:0/device:CPU:0");
        assert_eq!(c("/task:0/job:localhost/device:cpu:3"), "/job:localhost/task:0/device:CPU:3");
    }
    #[test]
    fn malformed_names_are_rejected_with_the_string() {
        for s in ["foobar", "/job:123/replica:1", "/job:foo/replica:-1/task:0", "/device:GPU:3/extra", "/gpu:", "/bar:3", "/cpu:0/cpu:1"] {
            let e = DeviceSpec::parse(s).unwrap_err().to_string();
            assert!(e.contains(&format!("'{s}'")), "{e}");
        }
    }
    #[test]
    fn scope_merge_inner_wins_per_field() {
        let outer = DeviceSpec::parse("/job:worker/replica:2/device:CPU:1").unwrap();
        let inner = DeviceSpec::parse("/device:GPU:2").unwrap();
        assert_eq!(outer.merged_with(&inner).to_string(), "/job:worker/replica:2/device:GPU:2");
        let o = DeviceSpec::parse("/device:GPU:7").unwrap();
        let i = DeviceSpec::parse("/device:GPU:*").unwrap();
        assert_eq!(o.merged_with(&i).to_string(), "/device:GPU:7");
    }
    #[test]
    fn constraint_merge_and_soft() {
        let a = DeviceSpec::parse("/device:GPU:0").unwrap();
        let b = DeviceSpec::parse("/device:CPU:0").unwrap();
        let e = a.merge_constraint(&b, false).unwrap_err().to_string();
        assert!(e.contains("incompatible types"), "{e}");
        assert_eq!(a.merge_constraint(&b, true).unwrap().to_string(), "");
        let full = DeviceSpec::local("GPU", 0);
        assert!(a.matches(&full));
        assert!(!b.matches(&full));
    }
}
