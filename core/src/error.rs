//! One error type for every backend, so each binding maps three or four kinds, not redis-rs's dozens.

use std::fmt;

/// Why a call failed. Bindings map [`ErrorKind`] to their own exception or status types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed a value the limiter cannot honour. Nothing was sent to the backend.
    #[error("invalid argument `{name}`: {message}")]
    InvalidArgument { name: &'static str, message: String },
    /// Like `InvalidArgument`, for a value of the wrong type (a string where a number goes), so
    /// that hosts with a type-error class (Python's `TypeError`) can raise it. Same kind.
    #[error("invalid argument `{name}`: {message}")]
    InvalidType { name: &'static str, message: String },
    /// The backend could not take the call (connection refused, timeout, dropped connection,
    /// READONLY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, BUSY, OOM). Retrying later may succeed;
    /// with the local fallback on, callers see a `local` decision instead of this.
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// The backend answered with an error (wrong type at the key, script error, auth, ACL ...), or
    /// refused the TLS handshake (certificate, CA): a misconfiguration, never sent to the fallback.
    #[error("backend error: {0}")]
    Backend(String),
    /// A client-supplied time (the explicit client-clock option) is too far from Redis TIME.
    #[error("clock skew: client time {client_ms} ms is {skew_ms} ms away from Redis time {server_ms} ms (allowed: {max_skew_ms} ms)")]
    ClockSkew {
        client_ms: u64,
        server_ms: u64,
        skew_ms: u64,
        max_skew_ms: u64,
    },
}

/// The coarse category of an [`Error`], stable across versions, for bindings and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    BackendUnavailable,
    Backend,
    ClockSkew,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::BackendUnavailable => "backend_unavailable",
            ErrorKind::Backend => "backend_error",
            ErrorKind::ClockSkew => "clock_skew",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument { .. } | Error::InvalidType { .. } => ErrorKind::InvalidArgument,
            Error::BackendUnavailable(_) => ErrorKind::BackendUnavailable,
            Error::Backend(_) => ErrorKind::Backend,
            Error::ClockSkew { .. } => ErrorKind::ClockSkew,
        }
    }

    /// The argument or option an `InvalidArgument`-kind error names.
    pub fn argument(&self) -> Option<&'static str> {
        match self {
            Error::InvalidArgument { name, .. } | Error::InvalidType { name, .. } => Some(name),
            _ => None,
        }
    }

    pub(crate) fn invalid_type(name: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidType {
            name,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            name,
            message: message.into(),
        }
    }
}

/// Server error codes that say "this server cannot take the call right now", not "the call is
/// wrong": a demoted or still-loading primary, a cluster mid-reshard or without quorum, a busy
/// script, memory exhausted under `noeviction`. They are retried once and then, like connection
/// errors, send the limiter to its local fallback.
const UNAVAILABLE_CODES: [&str; 7] = [
    "READONLY",
    "LOADING",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "BUSY",
    "OOM",
];

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        let code_says = e.code().is_some_and(|c| UNAVAILABLE_CODES.contains(&c));
        // Errors raised inside a script may arrive wrapped ("ERR ... script: ..."): look at the text too.
        let text = e.to_string();
        let text_says = UNAVAILABLE_CODES
            .iter()
            .any(|c| text.contains(&format!("{c} ")));
        // A refused password is the caller's configuration, not an outage, whatever wraps it (the
        // cluster client reports it as an I/O error of its initial connections): it reaches the
        // caller instead of sending the limiter local.
        let auth = matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
            || ["AuthenticationFailed", "WRONGPASS", "NOAUTH"]
                .iter()
                .any(|s| text.contains(s));
        // So is a certificate or TLS handshake failure (every topology words it the same way,
        // the cluster client inside its "initial connections" I/O error).
        if auth || handshake_failed(&text) {
            return Error::Backend(text);
        }
        // A script that reads a key the call did not name (the lease HASH `<key>:l`) while its
        // slot is migrating: Redis refuses the read as "non local" until the keys have moved.
        // Like TRYAGAIN, a retry a moment later is routed to the right node.
        let migrating = text.contains("attempted to access a non local key in a cluster node");
        if e.is_timeout()
            || migrating
            || e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.is_cluster_error()
            || code_says
            || text_says
        {
            Error::BackendUnavailable(text)
        } else {
            Error::Backend(text)
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A script call's error for `keys`, naming them where Redis refused one because it holds
/// another type (another program's value): Redis's `WRONGTYPE` names no key, and the caller must
/// learn which key to look at. The script finds the other case, a list that is not an rl window,
/// itself and names the key.
pub(crate) fn naming_keys(e: Error, keys: &[&[u8]]) -> Error {
    match e {
        Error::Backend(text) if text.contains("WRONGTYPE") => {
            let names: Vec<_> = keys.iter().map(|k| String::from_utf8_lossy(k)).collect();
            let which = match names.as_slice() {
                [one] => one.to_string(),
                many => format!("one of {}", many.join(", ")),
            };
            Error::Backend(format!(
                "rl: {which} holds something that is not an rl window ({text})"
            ))
        }
        e => e,
    }
}

/// How rustls words a failed handshake: a certificate the client does not trust (unknown CA,
/// wrong name, expired), the server refusing ours (an alert: certificate required, unknown CA), or
/// a peer that does not speak the same TLS. None of them is an outage: retrying or waiting does not
/// fix them, so they reach the caller as `Backend` errors, like a wrong password, instead of
/// sending the limiter local for good (see `From<redis::RedisError>` above). A connection reset or timeout during the
/// handshake stays an outage: it cannot be told apart from a server going away.
const HANDSHAKE_FAILURES: [&str; 10] = [
    "invalid peer certificate",
    "received fatal alert",
    "peer sent no certificates",
    "peer is incompatible",
    "peer misbehaved",
    "received corrupt message",
    "received unexpected message",
    "received unexpected handshake message",
    "cannot decrypt peer's message",
    "invalid certificate revocation list",
];

/// Whether an error's text says the TLS handshake failed (a misconfiguration).
fn handshake_failed(text: &str) -> bool {
    HANDSHAKE_FAILURES.iter().any(|s| text.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error(line: &str) -> Error {
        let v = redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).expect("a RESP error");
        Error::from(v.extract_error().expect_err("an error reply"))
    }

    #[test]
    fn availability_errors_are_retried_and_send_the_limiter_local() {
        for line in [
            "READONLY You can't write against a read only replica.",
            "LOADING Redis is loading the dataset in memory",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            "BUSY Redis is busy running a script.",
            "OOM command not allowed when used memory > 'maxmemory'.",
            "ERR Error running script (call to f_0): @user_script:221: Script attempted to access a non local key in a cluster node script: f_0, on @user_script:221.",
        ] {
            assert_eq!(
                server_error(line).kind(),
                ErrorKind::BackendUnavailable,
                "{line}"
            );
        }
    }

    #[test]
    fn a_wrongtype_refusal_names_the_calls_keys_and_other_errors_are_kept() {
        let wrongtype = || {
            Error::Backend(
                "\"WRONGTYPE\": Operation against a key holding the wrong kind of value".into(),
            )
        };
        let one = naming_keys(wrongtype(), &[b"rl:{a}"]).to_string();
        assert!(
            one.contains("rl: rl:{a} holds something that is not an rl window ("),
            "{one}"
        );
        assert!(one.contains("WRONGTYPE"), "Redis's words kept: {one}");
        let two = naming_keys(wrongtype(), &[b"rl:{g}{a}", b"rl:{g}{b}"]).to_string();
        assert!(two.contains("one of rl:{g}{a}, rl:{g}{b} holds"), "{two}");
        let other = naming_keys(Error::Backend("NOPERM no permissions".into()), &[b"k"]);
        assert_eq!(
            other.to_string(),
            Error::Backend("NOPERM no permissions".into()).to_string()
        );
        let down = naming_keys(Error::BackendUnavailable("WRONGTYPE?".into()), &[b"k"]);
        assert_eq!(down.kind(), ErrorKind::BackendUnavailable);
        assert!(!down.to_string().contains("rl window"));
    }

    #[test]
    fn other_errors_are_the_callers_to_see() {
        for line in [
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "NOPERM no permissions",
            "ERR unknown command",
            "WRONGPASS invalid username-password pair or user is disabled.",
            "NOAUTH Authentication required.",
        ] {
            assert_eq!(server_error(line).kind(), ErrorKind::Backend, "{line}");
        }
    }

    #[test]
    fn tls_handshake_failures_are_misconfigurations_and_resets_are_outages() {
        let io = |text: &str| {
            Error::from(redis::RedisError::from(std::io::Error::other(
                text.to_string(),
            )))
        };
        for text in [
            "invalid peer certificate: UnknownIssuer",
            "received fatal alert: CertificateRequired",
            "Failed to create initial connections - Io: invalid peer certificate: UnknownIssuer",
        ] {
            assert_eq!(io(text).kind(), ErrorKind::Backend, "{text}");
        }
        let reset = Error::from(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(reset.kind(), ErrorKind::BackendUnavailable);
    }
}
