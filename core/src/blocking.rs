//! A synchronous limiter for callers without an async runtime: the C ABI, Java and synchronous
//! Python use it. Each call runs the async core on the calling thread under the shared runtime
//! (see `runtime.rs`), so it is thread-safe and adds no hop for the memory backend.

use crate::decision::Decision;
use crate::error::Result;
use crate::limiter::{Limiter as AsyncLimiter, Options};
use crate::runtime;
use crate::BackendKind;

/// The blocking twin of [`crate::Limiter`]; same semantics, same errors.
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: AsyncLimiter,
}

impl Limiter {
    pub fn open(url: Option<&str>, options: Options) -> Result<Limiter> {
        Ok(Limiter { inner: AsyncLimiter::open(url, options)? })
    }

    pub fn from_async(inner: AsyncLimiter) -> Limiter {
        Limiter { inner }
    }

    /// The async limiter behind this one (shares its connection and state).
    pub fn as_async(&self) -> &AsyncLimiter {
        &self.inner
    }

    pub fn backend(&self) -> BackendKind {
        self.inner.backend()
    }

    pub fn redis_key(&self, key: impl AsRef<[u8]>) -> Vec<u8> {
        self.inner.redis_key(key)
    }

    pub fn acquire(&self, key: impl AsRef<[u8]>, limit: u64, window_ms: u64, cost: u64) -> Result<Decision> {
        let (l, k) = (self.inner.clone(), key.as_ref().to_vec());
        runtime::block_on(async move { l.acquire(k, limit, window_ms, cost).await })?
    }

    pub fn peek(&self, key: impl AsRef<[u8]>, limit: u64, window_ms: u64) -> Result<Decision> {
        let (l, k) = (self.inner.clone(), key.as_ref().to_vec());
        runtime::block_on(async move { l.peek(k, limit, window_ms).await })?
    }

    pub fn reset(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let (l, k) = (self.inner.clone(), key.as_ref().to_vec());
        runtime::block_on(async move { l.reset(k).await })?
    }

    pub fn ping(&self) -> Result<()> {
        let l = self.inner.clone();
        runtime::block_on(async move { l.ping().await })?
    }
}
