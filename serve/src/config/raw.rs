//! The policies file as written: envoyproxy/ratelimit's YAML schema (its `validKeys`, accepted
//! here key for key) plus rl's extensions, checked while it is read so that every error carries
//! the line it is about. Unknown keys are refused (`deny_unknown_fields`), as ratelimit does.

use serde::{Deserialize, Deserializer};

use super::http::RawHttp;
use crate::decide::Unit;

/// One YAML document: one domain.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDomain {
    #[serde(deserialize_with = "scalar")]
    pub domain: String,
    #[serde(default)]
    pub descriptors: Option<Descriptors>,
    /// rl extension: the Cluster hash tag of this domain's counters (see `Domain::group`).
    #[serde(default, deserialize_with = "opt_scalar")]
    pub key_group: Option<String>,
    /// rl extension: how the HTTP front ends turn a request into descriptors.
    #[serde(default)]
    pub http: Option<RawHttp>,
}

/// Sibling descriptors: checked as a list so a duplicate is reported where the list is.
#[derive(Debug)]
pub struct Descriptors(pub Vec<RawDescriptor>);

impl<'de> Deserialize<'de> for Descriptors {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct List;
        impl<'de> serde::de::Visitor<'de> for List {
            type Value = Descriptors;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of descriptors")
            }
            fn visit_unit<E>(self) -> Result<Descriptors, E> {
                Ok(Descriptors(Vec::new()))
            }
            // Checked inside the list, so the error is placed at it.
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Descriptors, A::Error> {
                let mut list: Vec<RawDescriptor> = Vec::new();
                while let Some(x) = seq.next_element::<RawDescriptor>()? {
                    if list.iter().any(|y| y.map_key() == x.map_key()) {
                        return Err(serde::de::Error::custom(format!(
                            "duplicate descriptor {:?} among its siblings",
                            x.map_key()
                        )));
                    }
                    if x.share_threshold && !x.map_key().contains('*') {
                        return Err(serde::de::Error::custom(format!(
                            "share_threshold can only be used with wildcard values (containing '*'), but found key {:?}",
                            x.map_key()
                        )));
                    }
                    list.push(x);
                }
                Ok(Descriptors(list))
            }
        }
        d.deserialize_any(List)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDescriptor {
    #[serde(deserialize_with = "nonempty_key")]
    pub key: String,
    #[serde(default, deserialize_with = "opt_scalar")]
    pub value: Option<String>,
    #[serde(default)]
    pub rate_limit: Option<RawRateLimit>,
    #[serde(default)]
    pub descriptors: Option<Descriptors>,
    #[serde(default)]
    pub shadow_mode: bool,
    #[serde(default)]
    pub quota_mode: bool,
    /// Accepted for compatibility; rl's metric labels stay one per policy, never per value.
    #[serde(default)]
    #[allow(dead_code)]
    pub detailed_metric: bool,
    /// Accepted for compatibility, as `detailed_metric`.
    #[serde(default)]
    #[allow(dead_code)]
    pub value_to_metric: bool,
    #[serde(default)]
    pub share_threshold: bool,
    /// Free-form, as in ratelimit; rl does not use it.
    #[serde(default)]
    #[allow(dead_code)]
    pub metadata: Option<serde_yaml_ng::Value>,
}

impl RawDescriptor {
    /// The key this node has among its siblings: `key` or `key_value`, as in ratelimit.
    pub fn map_key(&self) -> String {
        match self.value.as_deref() {
            Some(v) if !v.is_empty() => format!("{}_{v}", self.key),
            _ => self.key.clone(),
        }
    }
}

/// `rate_limit:` as written, checked by [`RateLimit::try_from`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitFields {
    #[serde(default)]
    requests_per_unit: Option<u64>,
    #[serde(default)]
    unit: Option<UnitName>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default, deserialize_with = "opt_scalar")]
    name: Option<String>,
    #[serde(default)]
    replaces: Option<Vec<Replaces>>,
    /// rl extension: any window, in milliseconds, instead of `unit`.
    #[serde(default)]
    window_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Replaces {
    #[serde(default, deserialize_with = "opt_scalar")]
    name: Option<String>,
}

/// A checked `rate_limit:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RateLimitFields")]
pub struct RawRateLimit {
    /// 0 means every request is over the limit (ratelimit's way to ban).
    pub requests_per_unit: u64,
    pub unit: Unit,
    /// 0 when `unlimited`.
    pub window_ms: u64,
    pub unlimited: bool,
    pub name: Option<String>,
    pub replaces: Vec<String>,
}

impl TryFrom<RateLimitFields> for RawRateLimit {
    type Error = String;

    fn try_from(f: RateLimitFields) -> Result<Self, String> {
        let replaces = f
            .replaces
            .unwrap_or_default()
            .into_iter()
            .map(|r| match r.name {
                Some(n) if !n.is_empty() => Ok(n),
                _ => Err("an entry of replaces has no name".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(name) = &f.name {
            rl_core::Policy::new(Some(name), 1, 1000).map_err(|e| format!("name: {e}"))?;
            if replaces.contains(name) {
                return Err(format!("replaces names this limit's own name {name:?}"));
            }
        }
        if f.unlimited {
            if f.unit.is_some() || f.window_ms.is_some() {
                return Err("an unlimited rate_limit takes no unit (nor window_ms)".into());
            }
            return Ok(RawRateLimit {
                requests_per_unit: 0,
                unit: Unit::Unknown,
                window_ms: 0,
                unlimited: true,
                name: f.name,
                replaces,
            });
        }
        let (unit, window_ms) = match (f.unit, f.window_ms) {
            (Some(_), Some(_)) => return Err("give unit or window_ms, not both".into()),
            (None, None) => {
                return Err(format!(
                    "rate_limit needs a unit ({}) or window_ms",
                    UNITS.iter().map(|u| u.0).collect::<Vec<_>>().join(", ")
                ))
            }
            (Some(UnitName(u, ms)), None) => (u, ms),
            (None, Some(ms)) => (unit_of(ms), ms),
        };
        if window_ms == 0 || window_ms > rl_core::MAX_WINDOW_MS {
            return Err(format!(
                "the window is {window_ms} ms; rl keeps windows of 1 ms to {} ms (30 days)",
                rl_core::MAX_WINDOW_MS
            ));
        }
        let requests_per_unit = f
            .requests_per_unit
            .ok_or("rate_limit needs requests_per_unit")?;
        if requests_per_unit > rl_core::MAX_PERMITS {
            return Err(format!(
                "requests_per_unit is {requests_per_unit}; at most {}",
                rl_core::MAX_PERMITS
            ));
        }
        Ok(RawRateLimit {
            requests_per_unit,
            unit,
            window_ms,
            unlimited: false,
            name: f.name,
            replaces,
        })
    }
}

/// ratelimit's units (the proto's enum names, any case) and their windows; a month is 30 days
/// and a year 365, as ratelimit counts them.
const UNITS: &[(&str, Unit, u64)] = &[
    ("second", Unit::Second, 1_000),
    ("minute", Unit::Minute, 60_000),
    ("hour", Unit::Hour, 3_600_000),
    ("day", Unit::Day, 86_400_000),
    ("week", Unit::Week, 7 * 86_400_000),
    ("month", Unit::Month, 30 * 86_400_000),
    ("year", Unit::Year, 365 * 86_400_000),
];

/// The unit a window in ms is a whole one of, else `Unknown`.
fn unit_of(ms: u64) -> Unit {
    UNITS
        .iter()
        .find(|(_, _, w)| *w == ms)
        .map_or(Unit::Unknown, |(_, u, _)| *u)
}

#[derive(Debug)]
struct UnitName(Unit, u64);

impl<'de> Deserialize<'de> for UnitName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = scalar(d)?;
        UNITS
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(&s))
            .map(|(_, u, ms)| UnitName(*u, *ms))
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid rate limit unit {s:?}; use one of {}",
                    UNITS.iter().map(|u| u.0).collect::<Vec<_>>().join(", ")
                ))
            })
    }
}

/// A YAML scalar read as text, as ratelimit's Go YAML does (`value: 500` is the string "500").
pub fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_yaml_ng::Value::deserialize(d)? {
        serde_yaml_ng::Value::String(s) => s,
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        serde_yaml_ng::Value::Bool(b) => b.to_string(),
        serde_yaml_ng::Value::Null => String::new(),
        other => {
            return Err(serde::de::Error::custom(format!(
                "expected a string, found {}",
                kind(&other)
            )))
        }
    })
}

pub fn opt_scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    scalar(d).map(|s| (!s.is_empty()).then_some(s))
}

fn nonempty_key<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = scalar(d)?;
    if s.is_empty() {
        return Err(serde::de::Error::custom("descriptor has an empty key"));
    }
    Ok(s)
}

fn kind(v: &serde_yaml_ng::Value) -> &'static str {
    match v {
        serde_yaml_ng::Value::Sequence(_) => "a list",
        serde_yaml_ng::Value::Mapping(_) => "a map",
        serde_yaml_ng::Value::Tagged(_) => "a tagged value",
        _ => "a scalar",
    }
}
