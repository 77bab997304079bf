//! Every option a limiter takes, declared once in [`OPTIONS`]: its external name (with its unit),
//! type, range, default and one-line doc. Validation, the bindings' option parsing, the generated
//! typed surfaces (`.pyi`, `.d.ts`, Java builder, `rl.h` docs) and the README table all read this
//! table, so adding an option is one row here plus the field it sets.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::keys;
use crate::lease::Leases;
use crate::validate::MAX_WINDOW_MS;

/// How a limiter behaves. `Options::default()` is right for a gateway on a nearby Redis.
/// Rust callers may set the fields directly; [`Options::validate`] (run by `Limiter::open`)
/// checks them against [`OPTIONS`], naming the external key in its errors.
#[derive(Clone)]
pub struct Options {
    /// See [`OPTIONS`] (`key_prefix`).
    pub key_prefix: String,
    /// See [`OPTIONS`] (`connect_timeout_ms`).
    pub connect_timeout: Duration,
    /// See [`OPTIONS`] (`request_timeout_ms`).
    pub request_timeout: Duration,
    /// `None`: Redis decides on its own TIME (recommended), the memory backend on the system clock.
    /// `Some`: decisions use this clock; Redis refuses it when it is further than
    /// `max_clock_skew_ms` from Redis TIME. The `client_clock` option sets this host's clock.
    pub clock: Option<Arc<dyn Clock>>,
    /// See [`OPTIONS`] (`max_clock_skew_ms`).
    pub max_clock_skew_ms: u64,
    /// See [`OPTIONS`] (`retry_delay_ms`).
    pub retry_delay: Duration,
    /// See [`OPTIONS`] (`local_fallback`).
    pub local_fallback: bool,
    /// See [`OPTIONS`] (`degrade_rtt_ms`).
    pub degrade_rtt: Duration,
    /// See [`OPTIONS`] (`degrade_after_ms`).
    pub degrade_after: Duration,
    /// See [`OPTIONS`] (`recover_rtt_ms`).
    pub recover_rtt: Duration,
    /// See [`OPTIONS`] (`recover_after_ms`).
    pub recover_after: Duration,
    /// See [`OPTIONS`] (`instances`); `None` counts live instances from heartbeats.
    pub instances: Option<u64>,
    /// See [`OPTIONS`] (`local_max_keys`).
    pub local_max_keys: usize,
    /// See [`OPTIONS`] (`key_shards`); 1 = one Redis key per limit.
    pub key_shards: u64,
    /// See [`OPTIONS`] (`leases`).
    pub leases: Leases,
    /// See [`OPTIONS`] (`lease_ms`).
    pub lease_ms: u64,
    /// See [`OPTIONS`] (`lease_hot_rate`).
    pub lease_hot_rate: u64,
    /// See [`OPTIONS`] (`denial_cache`).
    pub denial_cache: bool,
    /// See [`OPTIONS`] (`busy_poll_us`).
    pub busy_poll: Duration,
}

/// What an option holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number of milliseconds.
    Millis,
    /// A whole number (a count).
    Count,
    Bool,
    Text,
}

impl Kind {
    /// How a value of this kind is described in errors and docs.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Millis => "a whole number of milliseconds",
            Kind::Count => "a whole number",
            Kind::Bool => "a boolean",
            Kind::Text => "a string",
        }
    }
}

/// An option's value as a binding hands it over (or as [`OptionSpec::get`] reads it back).
/// `Null` means "the default" for every option.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// Wide enough for any integer a host language passes, negative ones included, so that the
    /// range error (not an overflow in a binding) names the value.
    Int(i128),
    /// Hosts whose numbers are floating point (JavaScript); must be a whole number.
    Float(f64),
    Text(String),
}

impl Value {
    fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Text(_) => "a string",
        }
    }
}

/// One option: everything a binding, a generator or a reader needs to know about it.
pub struct OptionSpec {
    /// The external name, snake_case with its unit (`retry_delay_ms`). Bindings derive their
    /// spelling from it (camelCase in Node and Java) and nothing else.
    pub name: &'static str,
    pub kind: Kind,
    /// Inclusive range for `Millis` and `Count`.
    pub min: u64,
    pub max: u64,
    /// The default, as `get` reads it on `Options::default()`; `Null` for "discover" (`instances`).
    pub default: fn() -> Value,
    /// One line for docs and generated stubs.
    pub doc: &'static str,
    get: fn(&Options) -> Value,
    /// Stores an already-checked value (`Int` within range, or `Bool`/`Text`).
    put: fn(&mut Options, Checked),
}

/// A value `OptionSpec::check` accepted, in the shape its kind needs.
#[derive(Debug, Clone)]
enum Checked {
    Default,
    Int(u64),
    Bool(bool),
    Text(String),
}

fn ms(d: Duration) -> Value {
    Value::Int(d.as_millis() as i128)
}

fn dur(c: Checked, default: Duration) -> Duration {
    match c {
        Checked::Int(n) => Duration::from_millis(n),
        _ => default,
    }
}

fn flag(c: Checked, default: bool) -> bool {
    match c {
        Checked::Bool(b) => b,
        _ => default,
    }
}

const MAX_TIMEOUT_MS: u64 = 60_000;
const MAX_INSTANCES: u64 = 1_000_000;
const MAX_LOCAL_KEYS: u64 = 10_000_000;

const DEFAULT_PREFIX: &str = "rl:";
const D_CONNECT: Duration = Duration::from_millis(500);
const D_REQUEST: Duration = Duration::from_millis(500);
const D_SKEW: u64 = 1000;
const D_RETRY: Duration = Duration::from_millis(50);
const D_DEGRADE_RTT: Duration = Duration::from_millis(5);
const D_DEGRADE_AFTER: Duration = Duration::from_millis(100);
const D_RECOVER_RTT: Duration = Duration::from_millis(2);
const D_RECOVER_AFTER: Duration = Duration::from_millis(500);
const D_LOCAL_KEYS: usize = 10_000;
const D_KEY_SHARDS: u64 = 1;
const D_LEASES: Leases = Leases::Off;
const D_LEASE_MS: u64 = 100;
const D_LEASE_HOT_RATE: u64 = 1000;
/// Python, one thread on random keys, client pinned to one core and Redis to the other: 72–82 µs
/// per call sleeping, 41–43 µs polling (with 50, 100 or 200 µs alike); a loopback or same-host
/// reply under load comes in 20–60 µs.
const D_BUSY_POLL_US: u64 = 100;
const MAX_BUSY_POLL_US: u64 = 1000;

/// Every option, in the order docs list them. The C struct (`rl_options`) appends new fields in
/// its own, versioned order and maps each field to its row by name.
pub static OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "key_prefix",
        kind: Kind::Text,
        min: 0,
        max: 1024,
        default: || Value::Text(DEFAULT_PREFIX.into()),
        doc: "Prepended to every Redis key; no braces (the hash tag comes from the user key); at most 1024 bytes.",
        get: |o| Value::Text(o.key_prefix.clone()),
        put: |o, c| {
            o.key_prefix = match c {
                Checked::Text(s) => s,
                _ => DEFAULT_PREFIX.into(),
            }
        },
    },
    OptionSpec {
        name: "connect_timeout_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_CONNECT),
        doc: "Longest wait to establish a connection to Redis.",
        get: |o| ms(o.connect_timeout),
        put: |o, c| o.connect_timeout = dur(c, D_CONNECT),
    },
    OptionSpec {
        name: "request_timeout_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_REQUEST),
        doc: "Longest a caller waits for one decision, connecting and the retry included.",
        get: |o| ms(o.request_timeout),
        put: |o, c| o.request_timeout = dur(c, D_REQUEST),
    },
    OptionSpec {
        name: "client_clock",
        kind: Kind::Bool,
        min: 0,
        max: 0,
        default: || Value::Bool(false),
        doc: "Decide on this host's clock instead of Redis TIME (legacy callers, tests); each call is refused with a clock-skew error when the clocks differ by more than max_clock_skew_ms.",
        get: |o| Value::Bool(o.clock.is_some()),
        put: |o, c| {
            o.clock = flag(c, false).then(|| Arc::new(SystemClock) as Arc<dyn Clock>);
        },
    },
    OptionSpec {
        name: "max_clock_skew_ms",
        kind: Kind::Millis,
        min: 0,
        max: MAX_WINDOW_MS,
        default: || Value::Int(D_SKEW as i128),
        doc: "Allowed distance between the client clock (client_clock) and Redis TIME.",
        get: |o| Value::Int(o.max_clock_skew_ms as i128),
        put: |o, c| {
            o.max_clock_skew_ms = match c {
                Checked::Int(n) => n,
                _ => D_SKEW,
            }
        },
    },
    OptionSpec {
        name: "retry_delay_ms",
        kind: Kind::Millis,
        min: 0,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_RETRY),
        doc: "Wait before the one retry of a call that failed with a connection-class error; the retry happens only if it fits in request_timeout_ms, so a longer delay means no retry (and calls carry no id for retry records).",
        get: |o| ms(o.retry_delay),
        put: |o, c| o.retry_delay = dur(c, D_RETRY),
    },
    OptionSpec {
        name: "local_fallback",
        kind: Kind::Bool,
        min: 0,
        max: 0,
        default: || Value::Bool(true),
        doc: "Decide locally while Redis is unhealthy (true), or fail with backend-unavailable errors (false: no state machine, no local decisions).",
        get: |o| Value::Bool(o.local_fallback),
        put: |o, c| o.local_fallback = flag(c, true),
    },
    OptionSpec {
        name: "degrade_rtt_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_DEGRADE_RTT),
        doc: "normal -> local when real calls' Redis round trips stay above this for degrade_after_ms.",
        get: |o| ms(o.degrade_rtt),
        put: |o, c| o.degrade_rtt = dur(c, D_DEGRADE_RTT),
    },
    OptionSpec {
        name: "degrade_after_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_DEGRADE_AFTER),
        doc: "How long round trips must stay slow (or calls fail) before going local.",
        get: |o| ms(o.degrade_after),
        put: |o, c| o.degrade_after = dur(c, D_DEGRADE_AFTER),
    },
    OptionSpec {
        name: "recover_rtt_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_RECOVER_RTT),
        doc: "local -> normal when probes' median round trip stays below this for recover_after_ms; at most degrade_rtt_ms.",
        get: |o| ms(o.recover_rtt),
        put: |o, c| o.recover_rtt = dur(c, D_RECOVER_RTT),
    },
    OptionSpec {
        name: "recover_after_ms",
        kind: Kind::Millis,
        min: 1,
        max: MAX_TIMEOUT_MS,
        default: || ms(D_RECOVER_AFTER),
        doc: "How long probes must stay fast, with none failing, before returning to normal.",
        get: |o| ms(o.recover_after),
        put: |o, c| o.recover_after = dur(c, D_RECOVER_AFTER),
    },
    OptionSpec {
        name: "instances",
        kind: Kind::Count,
        min: 1,
        max: MAX_INSTANCES,
        default: || Value::Null,
        doc: "How many instances share each limit (the local budget is limit / instances); unset: counted from live instances' heartbeats in Redis.",
        get: |o| o.instances.map_or(Value::Null, |n| Value::Int(n as i128)),
        put: |o, c| {
            o.instances = match c {
                Checked::Int(n) => Some(n),
                _ => None,
            }
        },
    },
    OptionSpec {
        name: "local_max_keys",
        kind: Kind::Count,
        min: 1,
        max: MAX_LOCAL_KEYS,
        default: || Value::Int(D_LOCAL_KEYS as i128),
        doc: "Most keys the local record keeps, and the denial cache too; the least recently used are forgotten.",
        get: |o| Value::Int(o.local_max_keys as i128),
        put: |o, c| {
            o.local_max_keys = match c {
                // In range (at most 10 million), so it fits every usize rl runs on.
                Checked::Int(n) => n as usize,
                _ => D_LOCAL_KEYS,
            }
        },
    },
    OptionSpec {
        name: "key_shards",
        kind: Kind::Count,
        min: 1,
        max: crate::shards::MAX_SHARDS,
        default: || Value::Int(D_KEY_SHARDS as i128),
        doc: "Splits every limit over this many Redis keys on evenly spread Cluster slots (one hot key's load on several masters), each holding its share; exact, one request's cost must fit one share; 1 = off. Every instance must use the same value.",
        get: |o| Value::Int(o.key_shards as i128),
        put: |o, c| {
            o.key_shards = match c {
                Checked::Int(n) => n,
                _ => D_KEY_SHARDS,
            }
        },
    },
    OptionSpec {
        name: "leases",
        kind: Kind::Text,
        min: 0,
        max: 0,
        default: || Value::Text(D_LEASES.as_str().into()),
        doc: "off, auto or on: hot keys take exact leases of permits from Redis and grant them locally (mode lease). auto: a key whose demand here passes lease_hot_rate.",
        get: |o| Value::Text(o.leases.as_str().into()),
        put: |o, c| {
            o.leases = match c {
                // Checked by `check`.
                Checked::Text(s) => Leases::parse("leases", &s).unwrap_or(D_LEASES),
                _ => D_LEASES,
            }
        },
    },
    OptionSpec {
        name: "lease_ms",
        kind: Kind::Millis,
        min: 5,
        max: 60_000,
        default: || Value::Int(D_LEASE_MS as i128),
        doc: "How long a lease lives; it counts in every window that meets its life, so a longer lease costs up to lease_ms/window_ms of the limit in under-admission.",
        get: |o| Value::Int(o.lease_ms as i128),
        put: |o, c| {
            o.lease_ms = match c {
                Checked::Int(n) => n,
                _ => D_LEASE_MS,
            }
        },
    },
    OptionSpec {
        name: "lease_hot_rate",
        kind: Kind::Count,
        min: 1,
        max: 1_000_000_000,
        default: || Value::Int(D_LEASE_HOT_RATE as i128),
        doc: "With leases=auto: permits per second this instance asks of one key before the key leases (it stops below half of that).",
        get: |o| Value::Int(o.lease_hot_rate as i128),
        put: |o, c| {
            o.lease_hot_rate = match c {
                Checked::Int(n) => n,
                _ => D_LEASE_HOT_RATE,
            }
        },
    },
    OptionSpec {
        name: "denial_cache",
        kind: Kind::Bool,
        min: 0,
        max: 0,
        default: || Value::Bool(true),
        doc: "After Redis denies a request, deny the same key (same window, a cost no lower, a limit no higher) from this instance until its retry_after_ms, without a Redis call; exact unless another client resets the key meanwhile.",
        get: |o| Value::Bool(o.denial_cache),
        put: |o, c| o.denial_cache = flag(c, true),
    },
    OptionSpec {
        name: "busy_poll_us",
        kind: Kind::Count,
        min: 0,
        max: MAX_BUSY_POLL_US,
        default: || Value::Int(D_BUSY_POLL_US as i128),
        doc: "Microseconds a blocking caller alone on the limiter polls its socket for the reply before it sleeps, while recent replies came within that (on a VM a sleep and wake-up cost as much as a loopback round trip); 0: it sleeps at once and spends no CPU waiting.",
        get: |o| Value::Int(o.busy_poll.as_micros() as i128),
        put: |o, c| {
            o.busy_poll = Duration::from_micros(match c {
                Checked::Int(n) => n,
                _ => D_BUSY_POLL_US,
            })
        },
    },
];

/// `retry_delay_ms` → `retryDelayMs`: how Node and Java spell an option (and how their errors
/// name it). The one place that rule lives.
pub fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `retryDelayMs` → `retry_delay_ms`: the inverse of [`camel_case`], for hosts that pass
/// camelCase keys.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The row for `name` (the external snake_case name), if there is one.
pub fn spec(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|s| s.name == name)
}

/// The row for `name` as a configuration file may spell it: snake_case (`lease_ms`), kebab-case
/// (`lease-ms`, Spring's and YAML's usual spelling) or camelCase (`leaseMs`, a binding's setter).
pub fn spec_as_spelled(name: &str) -> Option<&'static OptionSpec> {
    spec(name).or_else(|| spec(&snake_case(name).replace('-', "_")))
}

/// `name`'s value read from `text` as [`OptionSpec::parse`] reads it, `name` spelled as
/// [`spec_as_spelled`] takes it; the option's external name with it. An unknown name is passed
/// on with [`Value::Null`], for [`Options::set`] to refuse naming the options there are.
pub fn parse_as_spelled(name: &str, text: &str) -> Result<(String, Value)> {
    match spec_as_spelled(name) {
        Some(s) => Ok((s.name.to_string(), s.parse(text)?)),
        None => Ok((name.to_string(), Value::Null)),
    }
}

impl OptionSpec {
    /// A value from text (a command-line flag, a config file): `true`/`false` for booleans, a
    /// whole number or a duration (`250ms`, `2s`) for milliseconds, a whole number for counts,
    /// the text itself for strings; `default` (or nothing) for the default. The result still goes
    /// through [`Options::set`], which checks the range.
    pub fn parse(&self, text: &str) -> Result<Value> {
        let t = text.trim();
        if t.is_empty() || t == "default" {
            return Ok(Value::Null);
        }
        let wrong = || {
            Error::invalid_type(
                self.name,
                format!("is {text:?}; must be {}", self.kind.describe()),
            )
        };
        match self.kind {
            Kind::Text => Ok(Value::Text(text.to_string())),
            Kind::Bool => match t {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(wrong()),
            },
            Kind::Count => t.parse::<i128>().map(Value::Int).map_err(|_| wrong()),
            Kind::Millis => match t.parse::<i128>() {
                Ok(n) => Ok(Value::Int(n)),
                Err(_) => crate::duration::parse_duration_ms(t)
                    .map(|ms| Value::Int(ms as i128))
                    .map_err(|_| wrong()),
            },
        }
    }

    /// The option's current value in `options`.
    pub fn get(&self, options: &Options) -> Value {
        (self.get)(options)
    }

    /// `value` checked against this row: the right type, a whole number, within range.
    fn check(&self, value: Value) -> Result<Checked> {
        let wrong_type = |v: &Value| {
            Error::invalid_type(
                self.name,
                format!("is {}; must be {}", v.type_name(), self.kind.describe()),
            )
        };
        match (self.kind, value) {
            (_, Value::Null) => Ok(Checked::Default),
            (Kind::Bool, Value::Bool(b)) => Ok(Checked::Bool(b)),
            (Kind::Text, Value::Text(s)) => {
                if self.name == "key_prefix" {
                    keys::check_prefix(&s)?;
                }
                if self.name == "leases" {
                    Leases::parse(self.name, &s)?;
                }
                Ok(Checked::Text(s))
            }
            (Kind::Millis | Kind::Count, Value::Float(f)) => {
                if f.fract() != 0.0 || !f.is_finite() {
                    return Err(Error::invalid(
                        self.name,
                        format!("is {f}; must be {}", self.kind.describe()),
                    ));
                }
                if f < self.min as f64 || f > self.max as f64 {
                    // Checked as a float first, so the message shows the caller's value (a cast
                    // to i128 would saturate 1e300).
                    return Err(self.out_of_range(&f.to_string()));
                }
                self.in_range(f as i128)
            }
            (Kind::Millis | Kind::Count, Value::Int(n)) => self.in_range(n),
            (_, v) => Err(wrong_type(&v)),
        }
    }

    fn in_range(&self, n: i128) -> Result<Checked> {
        if n < self.min as i128 || n > self.max as i128 {
            return Err(self.out_of_range(&n.to_string()));
        }
        Ok(Checked::Int(n as u64))
    }

    fn out_of_range(&self, shown: &str) -> Error {
        let unit = if self.kind == Kind::Millis { " ms" } else { "" };
        Error::invalid(
            self.name,
            format!(
                "is {shown}{unit}; must be between {} and {}{unit}",
                self.min, self.max
            ),
        )
    }
}

impl Default for Options {
    fn default() -> Self {
        let mut o = Options {
            key_prefix: DEFAULT_PREFIX.into(),
            connect_timeout: D_CONNECT,
            request_timeout: D_REQUEST,
            clock: None,
            max_clock_skew_ms: D_SKEW,
            retry_delay: D_RETRY,
            local_fallback: true,
            degrade_rtt: D_DEGRADE_RTT,
            degrade_after: D_DEGRADE_AFTER,
            recover_rtt: D_RECOVER_RTT,
            recover_after: D_RECOVER_AFTER,
            instances: None,
            local_max_keys: D_LOCAL_KEYS,
            key_shards: D_KEY_SHARDS,
            leases: D_LEASES,
            lease_ms: D_LEASE_MS,
            lease_hot_rate: D_LEASE_HOT_RATE,
            denial_cache: true,
            busy_poll: Duration::from_micros(D_BUSY_POLL_US),
        };
        // The table's defaults are the truth; the literal above only gives the struct a shape.
        for s in OPTIONS {
            (s.put)(&mut o, Checked::Default);
        }
        o
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Options");
        for s in OPTIONS {
            d.field(s.name, &s.get(self));
        }
        d.finish()
    }
}

impl Options {
    /// Sets the option named `name` (its external name) from a binding's value. `Null` restores
    /// the default. An unknown name, a wrong type or an out-of-range value is an
    /// `InvalidArgument` naming the option; `options` is unchanged then.
    pub fn set(&mut self, name: &str, value: Value) -> Result<()> {
        let Some(s) = spec(name) else {
            return Err(Error::invalid(
                "options",
                format!(
                    "{name:?} is not an option; the options are {}",
                    OPTIONS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        let c = s.check(value)?;
        (s.put)(self, c);
        Ok(())
    }

    /// Sets options from `name=value` texts (see [`OptionSpec::parse`]), as a command line or a
    /// config file gives them; the error names the option, or `options` for a malformed pair.
    pub fn set_text(&mut self, pair: &str) -> Result<()> {
        let Some((name, text)) = pair.split_once('=') else {
            return Err(Error::invalid(
                "options",
                format!("{pair:?} is not NAME=VALUE"),
            ));
        };
        let name = name.trim();
        let value = match spec(name) {
            Some(s) => s.parse(text)?,
            None => Value::Null,
        };
        self.set(name, value)
    }

    /// Options from `(name, value)` pairs on top of the defaults, then [`Options::validate`]d.
    pub fn from_pairs<N: AsRef<str>>(pairs: impl IntoIterator<Item = (N, Value)>) -> Result<Self> {
        let mut o = Options::default();
        for (name, value) in pairs {
            o.set(name.as_ref(), value)?;
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks every option against its row, and the rules between options. Errors name the
    /// external key (`retry_delay_ms`), whether the value came through `set` or a struct field.
    pub fn validate(&self) -> Result<()> {
        for s in OPTIONS {
            s.check(s.get(self))?;
        }
        if self.recover_rtt > self.degrade_rtt {
            return Err(Error::invalid(
                "recover_rtt_ms",
                format!(
                    "is {} ms, above degrade_rtt_ms ({} ms): recovery must demand a faster Redis than degradation tolerates",
                    self.recover_rtt.as_millis(),
                    self.degrade_rtt.as_millis()
                ),
            ));
        }
        Ok(())
    }
}
