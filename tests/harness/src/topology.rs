//! A set of servers that together form what a client connects to.
//!
//! Only `Standalone` exists today. A primary+replica+Sentinel trio and a
//! 3-master Cluster will be new `Topology` variants whose `Deployment::start`
//! arms start several `RedisServer`s and wire them up; callers and the CLI
//! already go through `Deployment`, so they will not change shape.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::server::{RedisServer, ServerOptions};

pub const ENV_URL: &str = "RL_TEST_REDIS_URL";
pub const ENV_PORT: &str = "RL_TEST_REDIS_PORT";
pub const ENV_PID: &str = "RL_TEST_REDIS_PID";
/// Holds the server log, for suites that want to show it on failure.
pub const ENV_DIR: &str = "RL_TEST_REDIS_DIR";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    #[default]
    Standalone,
}

impl FromStr for Topology {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standalone" => Ok(Topology::Standalone),
            other => Err(format!(
                "unknown topology {other:?} (supported: standalone)"
            )),
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Topology::Standalone => "standalone",
        })
    }
}

/// Owns every server of one topology; dropping it stops them all.
#[derive(Debug)]
pub struct Deployment {
    topology: Topology,
    servers: Vec<RedisServer>,
}

impl Deployment {
    pub fn start(topology: Topology, options: ServerOptions) -> io::Result<Self> {
        let servers = match topology {
            Topology::Standalone => vec![RedisServer::start_with(options)?],
        };
        Ok(Deployment { topology, servers })
    }

    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The server clients are pointed at (the primary, later; a seed node for Cluster).
    pub fn entry(&self) -> &RedisServer {
        &self.servers[0]
    }

    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        &mut self.servers
    }

    /// What non-Rust test suites read to find the deployment.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let entry = self.entry();
        vec![
            (ENV_URL, entry.url()),
            (ENV_PORT, entry.port().to_string()),
            (ENV_PID, entry.pid().to_string()),
            (ENV_DIR, entry.dir().display().to_string()),
        ]
    }

    /// Stops every server, reporting the first failure but still trying the rest.
    pub fn stop(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for server in &mut self.servers {
            let stopped = server.stop();
            if result.is_ok() {
                result = stopped;
            }
        }
        result
    }
}
