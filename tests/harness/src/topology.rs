//! A set of servers that together form what a client connects to: one
//! server, a primary+replica+Sentinel trio, or a 3-master Cluster. Callers
//! and the CLI go through `Deployment`, so they do not care which.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::cluster::Cluster;
use crate::sentinel::SentinelTrio;
use crate::server::{RedisServer, ServerOptions};

/// The URL clients should use: `redis://`, `redis+sentinel://` or `redis+cluster://`.
pub const ENV_URL: &str = "RL_TEST_REDIS_URL";
/// These three describe the entry server (the primary, or Cluster node 0).
pub const ENV_PORT: &str = "RL_TEST_REDIS_PORT";
pub const ENV_PID: &str = "RL_TEST_REDIS_PID";
/// Holds the server log, for suites that want to show it on failure.
pub const ENV_DIR: &str = "RL_TEST_REDIS_DIR";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Topology {
    #[default]
    Standalone,
    /// Primary, replica and three Sentinels (`SentinelTrio`).
    Sentinel,
    /// Three masters without replicas (`Cluster`).
    Cluster,
}

impl Topology {
    pub const ALL: [Topology; 3] = [Topology::Standalone, Topology::Sentinel, Topology::Cluster];
}

impl FromStr for Topology {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Topology::ALL
            .into_iter()
            .find(|t| t.to_string() == s)
            .ok_or_else(|| {
                format!("unknown topology {s:?} (supported: standalone, sentinel, cluster)")
            })
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Topology::Standalone => "standalone",
            Topology::Sentinel => "sentinel",
            Topology::Cluster => "cluster",
        })
    }
}

/// Owns every server of one topology; dropping it stops them all.
#[derive(Debug)]
pub struct Deployment {
    members: Members,
}

#[derive(Debug)]
enum Members {
    Standalone(RedisServer),
    Sentinel(SentinelTrio),
    Cluster(Cluster),
}

impl Deployment {
    /// `options` apply to every data node; Sentinels get only its process
    /// settings. Sentinel and Cluster reject `requirepass`.
    pub fn start(topology: Topology, options: ServerOptions) -> io::Result<Self> {
        let members = match topology {
            Topology::Standalone => Members::Standalone(RedisServer::start_with(options)?),
            Topology::Sentinel => Members::Sentinel(SentinelTrio::start_with(options)?),
            Topology::Cluster => Members::Cluster(Cluster::start_with(options)?),
        };
        Ok(Deployment { members })
    }

    pub fn topology(&self) -> Topology {
        match self.members {
            Members::Standalone(_) => Topology::Standalone,
            Members::Sentinel(_) => Topology::Sentinel,
            Members::Cluster(_) => Topology::Cluster,
        }
    }

    /// The server holding the data at start: the primary, or Cluster node 0
    /// (a seed node). Clients should use `url()`, which names all of them.
    pub fn entry(&self) -> &RedisServer {
        &self.servers()[0]
    }

    /// What clients connect to: the server, the Sentinels, or every Cluster node.
    pub fn url(&self) -> String {
        match &self.members {
            Members::Standalone(server) => server.url(),
            Members::Sentinel(trio) => trio.url(),
            Members::Cluster(cluster) => cluster.url(),
        }
    }

    /// Every process, entry first: for Sentinel primary, replica, then the
    /// Sentinels; for Cluster the nodes in order.
    pub fn servers(&self) -> &[RedisServer] {
        match &self.members {
            Members::Standalone(server) => std::slice::from_ref(server),
            Members::Sentinel(trio) => trio.servers(),
            Members::Cluster(cluster) => cluster.nodes(),
        }
    }

    pub fn servers_mut(&mut self) -> &mut [RedisServer] {
        match &mut self.members {
            Members::Standalone(server) => std::slice::from_mut(server),
            Members::Sentinel(trio) => trio.servers_mut(),
            Members::Cluster(cluster) => cluster.nodes_mut(),
        }
    }

    pub fn sentinel(&self) -> Option<&SentinelTrio> {
        match &self.members {
            Members::Sentinel(trio) => Some(trio),
            _ => None,
        }
    }

    pub fn sentinel_mut(&mut self) -> Option<&mut SentinelTrio> {
        match &mut self.members {
            Members::Sentinel(trio) => Some(trio),
            _ => None,
        }
    }

    pub fn cluster(&self) -> Option<&Cluster> {
        match &self.members {
            Members::Cluster(cluster) => Some(cluster),
            _ => None,
        }
    }

    pub fn cluster_mut(&mut self) -> Option<&mut Cluster> {
        match &mut self.members {
            Members::Cluster(cluster) => Some(cluster),
            _ => None,
        }
    }

    /// What non-Rust test suites read to find the deployment.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let entry = self.entry();
        vec![
            (ENV_URL, self.url()),
            (ENV_PORT, entry.port().to_string()),
            (ENV_PID, entry.pid().to_string()),
            (ENV_DIR, entry.dir().display().to_string()),
        ]
    }

    /// Stops every server, reporting the first failure but still trying the rest.
    pub fn stop(&mut self) -> io::Result<()> {
        match &mut self.members {
            Members::Standalone(server) => server.stop(),
            Members::Sentinel(trio) => trio.stop(),
            Members::Cluster(cluster) => cluster.stop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_names_round_trip() {
        for topology in Topology::ALL {
            assert_eq!(topology.to_string().parse(), Ok(topology));
        }
        assert_eq!("cluster".parse(), Ok(Topology::Cluster));
        assert!("mesh"
            .parse::<Topology>()
            .unwrap_err()
            .contains("sentinel, cluster"));
    }
}
