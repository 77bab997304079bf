//! Which Redis a benchmark runs against. Without `--redis` a private redis-server is started so
//! that `rl bench` works out of the box and never touches a Redis someone else depends on.

use rl_harness::{RedisServer, ServerOptions};

use crate::{CliResult, Failure};

pub struct Target {
    /// `None`: the memory backend (no redis-server installed).
    pub url: Option<String>,
    /// Set when this process started the server; stopped by [`Target::stop`] or on drop.
    server: Option<RedisServer>,
}

impl Target {
    /// Must run on the main thread: the private server is tied to the launching thread's life
    /// (PR_SET_PDEATHSIG), so even a SIGKILLed `rl` does not leave it behind.
    pub fn resolve(redis: Option<String>) -> CliResult<Target> {
        if let Some(url) = redis {
            return Ok(Target {
                url: Some(url),
                server: None,
            });
        }
        if !rl_harness::redis_server_available() {
            eprintln!(
                "rl: note: no --redis and no redis-server installed (install one with \
                 `apt-get install redis-server`, or pass --redis URL); running on the in-process \
                 memory backend, so the Redis-only figures read n/a"
            );
            return Ok(Target {
                url: None,
                server: None,
            });
        }
        // Own session: a terminal Ctrl-C reaches only `rl`, which then stops the server itself.
        let options = ServerOptions::default()
            .die_with_parent(true)
            .new_session(true);
        let server = RedisServer::start_with(options)
            .map_err(|e| Failure::new(format!("cannot start a private redis-server: {e}")))?;
        eprintln!(
            "rl: started a private redis-server on 127.0.0.1:{} (pid {}); it is stopped when the run ends",
            server.port(),
            server.pid()
        );
        Ok(Target {
            url: Some(server.url()),
            server: Some(server),
        })
    }

    /// For the report header: where the numbers come from.
    pub fn describe(&self) -> String {
        match (&self.url, &self.server) {
            (None, _) => "memory backend (no Redis)".to_string(),
            (Some(_), Some(s)) => format!("private redis-server 127.0.0.1:{}", s.port()),
            (Some(url), None) => rl_core::redact(url),
        }
    }

    pub fn is_private(&self) -> bool {
        self.server.is_some()
    }

    pub fn stop(&mut self) -> CliResult<()> {
        if let Some(mut s) = self.server.take() {
            s.stop().map_err(|e| {
                Failure::new(format!(
                    "cannot stop the private redis-server (pid {}): {e}",
                    s.pid()
                ))
            })?;
        }
        Ok(())
    }
}
