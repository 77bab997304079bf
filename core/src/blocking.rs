//! A synchronous limiter for callers without an async runtime: the C ABI, Java and synchronous
//! Python use it. A Redis call runs the async core on the calling thread under the shared runtime
//! (see `runtime.rs`); a memory-backend call never waits, so it is decided in place and skips the
//! runtime altogether ([`runtime::run_or_block`]).

use crate::decision::Decision;
use crate::error::Result;
use crate::limiter::Limiter as AsyncLimiter;
use crate::options::Options;
use crate::runtime;
use crate::BackendKind;

/// The blocking twin of [`crate::Limiter`]; same semantics, same errors.
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: AsyncLimiter,
}

impl Limiter {
    pub fn open(url: Option<&str>, options: Options) -> Result<Limiter> {
        Ok(Limiter {
            inner: AsyncLimiter::open(url, options)?,
        })
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

    pub fn acquire(
        &self,
        key: impl AsRef<[u8]>,
        limit: u64,
        window_ms: u64,
        cost: u64,
    ) -> Result<Decision> {
        self.run(self.inner.acquire(key.as_ref(), limit, window_ms, cost))?
    }

    /// See [`crate::Limiter::acquire_all`]: all rules or none, in one atomic decision.
    pub fn acquire_all(
        &self,
        rules: &[crate::Rule],
        group: Option<&[u8]>,
    ) -> Result<crate::CompositeDecision> {
        self.run(self.inner.acquire_all(rules, group))?
    }

    /// See [`crate::Limiter::rule_key`].
    pub fn rule_key(&self, key: impl AsRef<[u8]>, group: Option<&[u8]>) -> Vec<u8> {
        self.inner.rule_key(key, group)
    }

    /// See [`crate::Limiter::reset_in_group`].
    pub fn reset_in_group(&self, key: impl AsRef<[u8]>, group: Option<&[u8]>) -> Result<()> {
        self.run(self.inner.reset_in_group(key.as_ref(), group))?
    }

    pub fn peek(&self, key: impl AsRef<[u8]>, limit: u64, window_ms: u64) -> Result<Decision> {
        self.run(self.inner.peek(key.as_ref(), limit, window_ms))?
    }

    pub fn reset(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.run(self.inner.reset(key.as_ref()))?
    }

    pub fn ping(&self) -> Result<()> {
        self.run(self.inner.ping())?
    }

    /// See [`crate::Limiter::close`]: returns unused leases to Redis (one call per leased key).
    pub fn close(&self) -> Result<()> {
        self.run(self.inner.close())?
    }

    /// See [`crate::Limiter::stats`]; never waits.
    pub fn stats(&self) -> crate::Stats {
        self.inner.stats()
    }

    pub fn instance_id(&self) -> Option<&str> {
        self.inner.instance_id()
    }

    /// Only Redis calls wait (and need the runtime).
    fn run<F: std::future::Future + Send>(&self, fut: F) -> Result<F::Output>
    where
        F::Output: Send,
    {
        runtime::run_or_block(fut, self.inner.backend() == BackendKind::Redis)
    }
}
