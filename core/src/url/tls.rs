//! TLS files named in a `rediss*` URL's query: `tls_ca=<PEM file>` trusts a private CA instead of
//! the public web roots (most Redis TLS deployments use their own CA), and `tls_cert=` with
//! `tls_key=` present a client certificate, which Redis asks for by default
//! (`tls-auth-clients yes`). The files are read once, when the limiter opens, so a wrong path is
//! an `InvalidArgument` then and not an outage later.

use std::path::PathBuf;

use redis::{ClientTlsConfig, TlsCertificates};

const PARAMS: [&str; 3] = ["tls_ca", "tls_cert", "tls_key"];

/// The TLS files a URL names (percent-decoded paths; `cert` and `key` come together).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }

    /// The files' contents for redis-rs, `None` when the URL names none. `Err` is a message about
    /// the URL.
    pub(crate) fn read(&self) -> Result<Option<TlsCertificates>, String> {
        if self.is_empty() {
            return Ok(None);
        }
        let read = |name: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| format!("`{name}` file {path:?}: {e}"))
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some(ClientTlsConfig {
                client_cert: read("tls_cert", c)?,
                client_key: read("tls_key", k)?,
            }),
            _ => None,
        };
        let root_cert = self.ca.as_ref().map(|p| read("tls_ca", p)).transpose()?;
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// The URL without the TLS parameters (other query parameters are kept, for redis-rs), and the
/// files they name. `Err` is a message about the URL.
pub(crate) fn take(url: &str, tls: bool) -> Result<(String, TlsFiles), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), TlsFiles::default()));
    };
    let mut files = TlsFiles::default();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "tls_ca" => &mut files.ca,
            "tls_cert" => &mut files.cert,
            "tls_key" => &mut files.key,
            _ => {
                kept.push(pair);
                continue;
            }
        };
        if value.is_empty() {
            return Err(format!("`{name}` needs a file path"));
        }
        if slot.replace(super::decode(value).into()).is_some() {
            return Err(format!("`{name}` is given twice"));
        }
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    if files.is_empty() {
        return Ok((rest, files));
    }
    if !tls {
        return Err(format!(
            "{} apply to TLS only; use a rediss:// URL",
            PARAMS.join(", ")
        ));
    }
    if files.cert.is_some() != files.key.is_some() {
        return Err("`tls_cert` and `tls_key` go together".into());
    }
    Ok((rest, files))
}

#[cfg(test)]
mod tests {
    use super::take;

    /// `take` then `read`, as opening a limiter does.
    fn certs(url: &str, tls: bool) -> Result<(String, Option<redis::TlsCertificates>), String> {
        let (rest, files) = take(url, tls)?;
        Ok((rest, files.read()?))
    }

    #[test]
    fn no_query_or_other_parameters_pass_through() {
        assert_eq!(certs("rediss://h:1/0", true).unwrap().0, "rediss://h:1/0");
        let (rest, certs) = certs("redis://h:1/0?protocol=resp3", false).unwrap();
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
        let (rest, certs) = certs(&url, true).unwrap();
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
            let e = certs(url, tls).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
