//! The cross-crate suites, one binary (each test binary links the whole dependency tree).

mod broken_rule;
mod fuzz_regressions;
mod properties;
