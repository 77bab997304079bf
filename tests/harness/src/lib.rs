//! Real redis-server processes for rl's tests: started on free loopback
//! ports, awaited until they answer, and stopped even when a test panics.

mod binary;
mod cluster;
mod poll;
mod port;
pub mod process;
pub mod resp;
mod sentinel;
mod server;
mod tls;
mod topology;
mod toxiproxy;

pub use binary::{redis_server_available, redis_server_path, ENV_REDIS_SERVER};
pub use cluster::{key_slot, Cluster, SLOT_COUNT};
pub use port::free_port;
pub use resp::{Connection, RespValue};
pub use sentinel::{SentinelTrio, MASTER_NAME};
pub use server::{DetachedServer, RedisServer, ServerOptions};
pub use tls::TlsFiles;
pub use topology::{Deployment, Topology, ENV_DIR, ENV_PID, ENV_PORT, ENV_URL};
pub use toxiproxy::{toxiproxy_path, Proxy, Stream, Toxiproxy, ENV_TOXIPROXY};
