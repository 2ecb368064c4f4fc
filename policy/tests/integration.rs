//! The domain crate's integration tests, one binary (each test binary links the whole dependency
//! tree).

mod measure;
mod placement_props;
mod rule_regexes;
mod rule_suites;
mod schemas;
