//! The c binding's generated surface. (Filled in by the c binding's work; empty until then.)

use crate::Output;

pub fn outputs() -> Vec<Output> {
    Vec::new()
}
