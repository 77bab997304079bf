//! `rl.Stats`: the core's `Stats` (what `Limiter.stats()` returns), immutable, one attribute per
//! row of `rl_core::STATS_FIELDS`, in its order. The attributes are made from that table when
//! the module loads (`install`), so a field added to the core is an attribute here.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyString, PyTuple};

use rl_core::options::Value;
use rl_core::{StatsKind, STATS_FIELDS};

/// A snapshot of a limiter's state and counters (`Limiter.stats()`). Immutable, picklable,
/// `==` by value; `as_dict()` for logs and metrics exporters.
#[pyclass(module = "rl", name = "Stats", frozen, eq)]
#[derive(Clone, PartialEq)]
pub(crate) struct Stats {
    /// One value per row of `STATS_FIELDS`, in its order.
    values: Vec<Value>,
}

impl From<rl_core::Stats> for Stats {
    fn from(s: rl_core::Stats) -> Self {
        Stats {
            values: s.fields().map(|(_, v)| v).collect(),
        }
    }
}

fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Int(n) => n.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
    })
}

/// A constructor argument for the field of this kind.
fn from_py(kind: StatsKind, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    Ok(match kind {
        StatsKind::Mode | StatsKind::Text => Value::Text(obj.extract()?),
        StatsKind::Count => Value::Int(obj.extract::<u64>()?.into()),
    })
}

impl Stats {
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Vec<(&'static str, Bound<'py, PyAny>)>> {
        STATS_FIELDS
            .iter()
            .zip(&self.values)
            .map(|(f, v)| Ok((f.name, to_py(py, v)?)))
            .collect()
    }
}

#[pymethods]
impl Stats {
    /// Stats come from limiters; building one by hand is for tests of code that reads them. The
    /// arguments are the fields, in order or by name.
    #[new]
    #[pyo3(signature = (*args, **kwargs))]
    fn new(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        if args.len() > STATS_FIELDS.len() {
            return Err(PyTypeError::new_err(format!(
                "Stats takes {} fields, not {}",
                STATS_FIELDS.len(),
                args.len()
            )));
        }
        let mut values = Vec::with_capacity(STATS_FIELDS.len());
        let mut named = 0;
        for (i, f) in STATS_FIELDS.iter().enumerate() {
            let by_name = match kwargs {
                Some(kw) => kw.get_item(f.name)?,
                None => None,
            };
            named += usize::from(by_name.is_some());
            let obj = match (args.get_item(i).ok(), by_name) {
                (Some(o), None) | (None, Some(o)) => o,
                (Some(_), Some(_)) => {
                    return Err(PyTypeError::new_err(format!(
                        "Stats: `{}` given twice",
                        f.name
                    )))
                }
                (None, None) => {
                    return Err(PyTypeError::new_err(format!("Stats: `{}` missing", f.name)))
                }
            };
            values.push(from_py(f.kind, &obj).map_err(|e| {
                PyTypeError::new_err(format!("Stats: `{}`: {}", f.name, e.value(obj.py())))
            })?);
        }
        if let Some(kw) = kwargs.filter(|kw| kw.len() > named) {
            return Err(PyTypeError::new_err(format!(
                "Stats: unknown fields among {}",
                kw.keys()
            )));
        }
        Ok(Stats { values })
    }

    #[classattr]
    fn __match_args__(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(py, STATS_FIELDS.iter().map(|f| f.name))
    }

    /// Every attribute in a new dict (for logs and metrics exporters).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.items(py)? {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::with_capacity(STATS_FIELDS.len());
        for (k, v) in self.items(py)? {
            parts.push(format!("{k}={}", v.repr()?.to_string_lossy()));
        }
        Ok(format!("Stats({})", parts.join(", ")))
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let values = slf.get().items(py)?.into_iter().map(|(_, v)| v);
        Ok((slf.get_type().into_any(), PyTuple::new(py, values)?))
    }
}

/// Adds `rl.Stats` to the module with one read-only property per stats field (its doc is the
/// field's doc).
pub(crate) fn install(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Stats>()?;
    let class = py.get_type::<Stats>();
    let property = py.import("builtins")?.getattr("property")?;
    for (i, f) in STATS_FIELDS.iter().enumerate() {
        let get = PyCFunction::new_closure(
            py,
            None,
            None,
            move |args: &Bound<'_, PyTuple>,
                  _: Option<&Bound<'_, PyDict>>|
                  -> PyResult<Py<PyAny>> {
                let slf = args.get_item(0)?;
                let stats = slf.cast::<Stats>()?;
                Ok(to_py(args.py(), &stats.get().values[i])?.unbind())
            },
        )?;
        class.setattr(f.name, property.call1((get, py.None(), py.None(), f.doc))?)?;
    }
    Ok(())
}
