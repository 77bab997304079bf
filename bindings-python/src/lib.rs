//! `rl._rl`: the native half of the `rl` Python package. It converts Python arguments and core
//! errors, and moves calls between Python and the core's runtime; every rate-limiting rule lives
//! in `rl-core`. The Python half (`python/rl`) defines the exception classes and the coroutine
//! face of `AsyncLimiter`.

mod aio;
mod bridge;
mod composite;
mod convert;
mod decision;
mod errors;
mod lifecycle;
mod open;
mod options;
mod policies;
mod prepared;
mod slot;
mod stats;
mod sync;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pymodule]
fn _rl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<decision::Decision>()?;
    m.add_class::<composite::Rule>()?;
    m.add_class::<composite::CompositeDecision>()?;
    m.add_class::<policies::Policy>()?;
    m.add_function(wrap_pyfunction!(policies::parse_policies, m)?)?;
    m.add_function(wrap_pyfunction!(policies::render_headers, m)?)?;
    m.add_function(wrap_pyfunction!(policies::problem_body, m)?)?;
    m.add_class::<prepared::PreparedPolicies>()?;
    m.add_function(wrap_pyfunction!(prepared::prepare_policies, m)?)?;
    m.add(
        "PROBLEM_CONTENT_TYPE",
        rl_core::headers::PROBLEM_CONTENT_TYPE,
    )?;
    m.add("MAX_RULES", rl_core::MAX_RULES)?;
    stats::install(m)?;
    m.add_class::<sync::Limiter>()?;
    m.add_class::<aio::AsyncCore>()?;
    m.add_class::<bridge::Bridge>()?;
    m.add_function(wrap_pyfunction!(lifecycle::_at_exit, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_WINDOW_MS", rl_core::MAX_WINDOW_MS)?;
    m.add("MAX_PERMITS", rl_core::MAX_PERMITS)?;
    m.add("MAX_KEY_BYTES", rl_core::MAX_KEY_BYTES)?;
    // The keyword options and the decision modes, from the core's tables.
    let options = rl_core::OPTIONS.iter().map(|s| s.name);
    m.add("OPTIONS", PyTuple::new(py, options)?)?;
    let modes = rl_core::Mode::ALL.iter().map(|m| m.as_str());
    m.add("MODES", PyTuple::new(py, modes)?)?;
    lifecycle::install(m)?;
    Ok(())
}
