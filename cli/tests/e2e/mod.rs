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

/// `workloadrun run|status|report|cancel` against the fake API server and the controller.
mod cluster;

/// The flag checks of the cluster verbs (no cluster needed).
mod cluster_flags;

/// `measure bandwidth|goodput` on sample logs, thresholds.
mod measure;

/// The CLI's conventions: summary line, completions, man page, `--color`, JSON envelopes,
/// multi-file render, `--version` (issue "A CLI that fits the Kubernetes toolbox").
mod conventions;

/// The `preCommand` shell wrapper run with a real `bash` and stub programs.
mod shell;

/// The bad-input suite: exit codes and exact messages for wrong and hostile input.
mod bad_input;

/// `check` on hand-written Kubeflow / KAI / Kueue / DRA manifests: the `workload-lint` pack
/// (issue 15).
mod lint;
