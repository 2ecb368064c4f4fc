/*!
The NVCRE domain: WorkloadRun and Workflow types, the build of a WorkloadRun into a Workflow,
detection, override resolution, the post-override contract and placement, driven by the rule
packs under `rules/` through `nvcre-engine`; [`suite`] runs the rule test suites under
`rules/tests/`.
*/
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Input paths must not panic: every lookup is checked, every error typed.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod api;
pub mod build;
pub mod check;
pub mod contract;
pub mod detect;
pub mod error;
pub mod nodes;
pub mod packs;
pub mod placement;
pub mod render;
pub mod resolve;
pub mod suite;
