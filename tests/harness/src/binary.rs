//! Locating the redis-server executable.

use std::io;
use std::path::{Path, PathBuf};

/// Overrides the lookup, e.g. to test against a locally built Redis.
pub const ENV_REDIS_SERVER: &str = "RL_REDIS_SERVER";

/// /usr/sbin and /usr/bin are checked even when not on PATH because CI and
/// sudo-less shells often have a trimmed PATH while Debian's package is there.
pub fn redis_server_path() -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_REDIS_SERVER).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{ENV_REDIS_SERVER}={} is not an executable file",
                    p.display()
                ),
            ))
        };
    }
    let path_dirs = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    path_dirs
        .unwrap_or_default()
        .into_iter()
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|dir| dir.join("redis-server"))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "redis-server not found on PATH, /usr/bin or /usr/sbin; install it with \
                 `apt-get update && apt-get install -y redis-server` \
                 or point RL_REDIS_SERVER at the binary",
            )
        })
}

/// Lets suites skip cleanly instead of failing where Redis is not installed.
pub fn redis_server_available() -> bool {
    redis_server_path().is_ok()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
