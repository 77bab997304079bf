//! The node binding's generated surface. (Filled in by the node binding's work; empty until then.)

use crate::Output;

pub fn outputs() -> Vec<Output> {
    Vec::new()
}
