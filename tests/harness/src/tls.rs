//! Throwaway certificates for TLS tests, made with the `openssl` command: a CA, a server
//! certificate for 127.0.0.1 signed by it, and a client certificate for servers that require one
//! (Redis's default, `tls-auth-clients yes`). Removed on drop.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug)]
pub struct TlsFiles {
    dir: PathBuf,
}

impl TlsFiles {
    pub fn generate() -> io::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "rl-harness-tls-{}-{}",
            std::process::id(),
            crate::free_port()?
        ));
        fs::create_dir_all(&dir)?;
        let files = TlsFiles { dir };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        files.openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &[
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.crt",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=rl test CA",
                ],
            ]
            .concat(),
        )?;
        // The server certificate is also a client one: Cluster nodes present it to each other on
        // the TLS cluster bus.
        for (name, cn, usage) in [
            ("server", "127.0.0.1", "serverAuth,clientAuth"),
            ("client", "rl test client", "clientAuth"),
        ] {
            let ext = format!("{name}.ext");
            fs::write(
                files.dir.join(&ext),
                format!("basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n"),
            )?;
            let (key, csr, crt) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.crt"),
            );
            let subj = format!("/CN={cn}");
            files.openssl(
                &[
                    &["req"][..],
                    &ec,
                    &["-keyout", &key, "-out", &csr, "-subj", &subj],
                ]
                .concat(),
            )?;
            files.openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ])?;
        }
        Ok(files)
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("client.crt")
    }

    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client.key")
    }

    /// redis-server flags for a TLS listener on `tls_port` (next to the plain port, which the
    /// harness keeps using for its own commands), requiring client certificates from this CA.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        let path = |f: &str| self.dir.join(f).display().to_string();
        vec![
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            path("server.crt"),
            "--tls-key-file".into(),
            path("server.key"),
            "--tls-ca-cert-file".into(),
            path("ca.crt"),
        ]
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn openssl(&self, args: &[&str]) -> io::Result<()> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("running openssl (install it with `apt-get install -y openssl`): {e}"),
                )
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "openssl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
