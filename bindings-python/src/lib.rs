//! `rl._rl`: the native half of the `rl` Python package. It converts Python arguments and core
//! errors, and moves calls between Python and the core's runtime; every rate-limiting rule lives
//! in `rl-core`. The Python half (`python/rl`) defines the exception classes and the coroutine
//! face of `AsyncLimiter`.

mod aio;
mod convert;
mod decision;
mod errors;
mod lifecycle;
mod options;
mod stats;
mod sync;

use pyo3::prelude::*;

#[pymodule]
fn _rl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<decision::Decision>()?;
    m.add_class::<stats::Stats>()?;
    m.add_class::<sync::Limiter>()?;
    m.add_class::<aio::AsyncCore>()?;
    m.add_class::<aio::Bridge>()?;
    m.add_function(wrap_pyfunction!(lifecycle::_at_exit, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_WINDOW_MS", rl_core::MAX_WINDOW_MS)?;
    m.add("MAX_PERMITS", rl_core::MAX_PERMITS)?;
    m.add("MAX_KEY_BYTES", rl_core::MAX_KEY_BYTES)?;
    lifecycle::install(m)?;
    Ok(())
}
