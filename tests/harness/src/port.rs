//! Free loopback ports.

use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// Asks the kernel for a port that is free right now. Another process may take
/// it before redis-server binds it, which is why starting a server retries.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
