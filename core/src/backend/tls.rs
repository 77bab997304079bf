//! TLS files named in a `rediss*` URL's query: `tls_ca=<PEM file>` trusts a private CA instead of
//! the public web roots (most Redis TLS deployments use their own CA), and `tls_cert=` with
//! `tls_key=` present a client certificate, which Redis asks for by default
//! (`tls-auth-clients yes`). The files are read once, when the limiter opens, so a wrong path is
//! an `InvalidArgument` then and not an outage later.

use redis::{ClientTlsConfig, TlsCertificates};

const PARAMS: [&str; 3] = ["tls_ca", "tls_cert", "tls_key"];

/// The URL without the TLS parameters (other query parameters are kept, for redis-rs), and the
/// certificates they name, if any. `Err` is a message about the URL.
pub(crate) fn take(url: &str, tls: bool) -> Result<(String, Option<TlsCertificates>), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let (mut ca, mut cert, mut key) = (None, None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "tls_ca" => &mut ca,
            "tls_cert" => &mut cert,
            "tls_key" => &mut key,
            _ => {
                kept.push(pair);
                continue;
            }
        };
        if value.is_empty() {
            return Err(format!("`{name}` needs a file path"));
        }
        if slot.replace(super::topology::decode(value)).is_some() {
            return Err(format!("`{name}` is given twice"));
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    if ca.is_none() && cert.is_none() && key.is_none() {
        return Ok((rest, None));
    }
    if !tls {
        return Err(format!(
            "{} apply to TLS only; use a rediss:// URL",
            PARAMS.join(", ")
        ));
    }
    let read = |name: &str, path: &str| {
        std::fs::read(path).map_err(|e| format!("`{name}` file {path:?}: {e}"))
    };
    let client_tls = match (cert, key) {
        (Some(c), Some(k)) => Some(ClientTlsConfig {
            client_cert: read("tls_cert", &c)?,
            client_key: read("tls_key", &k)?,
        }),
        (None, None) => None,
        _ => return Err("`tls_cert` and `tls_key` go together".into()),
    };
    let root_cert = ca.map(|p| read("tls_ca", &p)).transpose()?;
    Ok((
        rest,
        Some(TlsCertificates {
            client_tls,
            root_cert,
        }),
    ))
}

/// How rustls words a failed handshake: a certificate the client does not trust (unknown CA,
/// wrong name, expired), the server refusing ours (an alert: certificate required, unknown CA), or
/// a peer that does not speak the same TLS. None of them is an outage: retrying or waiting does not
/// fix them, so they reach the caller as `Backend` errors, like a wrong password, instead of
/// sending the limiter local for good (see `error.rs`). A connection reset or timeout during the
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
pub(crate) fn handshake_failed(text: &str) -> bool {
    HANDSHAKE_FAILURES.iter().any(|s| text.contains(s))
}

#[cfg(test)]
mod tests {
    use super::take;

    #[test]
    fn no_query_or_other_parameters_pass_through() {
        assert_eq!(take("rediss://h:1/0", true).unwrap().0, "rediss://h:1/0");
        let (rest, certs) = take("redis://h:1/0?protocol=resp3", false).unwrap();
        assert_eq!(
            (rest.as_str(), certs.is_none()),
            ("redis://h:1/0?protocol=resp3", true)
        );
    }

    #[test]
    fn files_are_read_and_the_parameters_removed() {
        let dir = std::env::temp_dir().join(format!("rl-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["ca.pem", "c.pem", "k.pem"] {
            std::fs::write(dir.join(f), f).unwrap();
        }
        let d = dir.display();
        let url = format!(
            "rediss://h:1/?tls_ca={d}/ca.pem&protocol=resp3&tls_cert={d}/c.pem&tls_key={d}/k.pem"
        );
        let (rest, certs) = take(&url, true).unwrap();
        assert_eq!(rest, "rediss://h:1/?protocol=resp3");
        let certs = certs.unwrap();
        assert_eq!(certs.root_cert.as_deref(), Some(&b"ca.pem"[..]));
        let client = certs.client_tls.unwrap();
        assert_eq!(
            (client.client_cert.as_slice(), client.client_key.as_slice()),
            (&b"c.pem"[..], &b"k.pem"[..])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        for (url, tls, says) in [
            ("redis://h:1/?tls_ca=/x", false, "rediss://"),
            ("rediss://h:1/?tls_ca=", true, "`tls_ca` needs a file path"),
            (
                "rediss://h:1/?tls_ca=/a&tls_ca=/b",
                true,
                "`tls_ca` is given twice",
            ),
            ("rediss://h:1/?tls_cert=/a", true, "go together"),
            (
                "rediss://h:1/?tls_ca=/nonexistent/ca.pem",
                true,
                "\"/nonexistent/ca.pem\"",
            ),
        ] {
            let e = take(url, tls).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
