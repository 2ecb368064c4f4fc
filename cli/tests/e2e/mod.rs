//! End-to-end tests of the `nvcre-policy` binary, one module per area.

/// Shared helpers.
mod util;

/// `render` on the seed examples (issue "Spine").
mod render;

/// `--nodes-file`, `--expand`, Workflow render (issues "Full fidelity", "Placement").
mod nodes;

/// `check -o` formats and `rules lint|list|explain` (issue "Rule authoring").
mod report;

/// `nvcre-policy test` (issue "Rule authoring").
mod suite;

/// Whole-output golden renders (snapshots): cells, examples, `--expand`.
mod golden;

/// `crd`: the generated CRDs.
mod crd;

/// Rule sets checked against the pipeline contract at load.
mod contract;

/// The policy is data: edits to a copy of the rules change the behaviour.
mod data;

/// `rules schema`: the JSON Schemas of rule files.
mod schema;

/// `measure bandwidth|goodput` on sample logs, thresholds (issue "Measurements and thresholds").
mod measure;
