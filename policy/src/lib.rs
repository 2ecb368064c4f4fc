/*!
The NVCRE domain: WorkloadRun and Workflow types, the build of a WorkloadRun into a Workflow,
detection, override resolution, the post-override contract and placement, driven by the rule
packs under `rules/` through `nvcre-engine`. The `nvcre-policy` command is a thin layer over
this crate.

# Brief overview

- [`default_rules`] (the rules embedded in the crate) and [`load_rules`] (a rule directory, or
  the embedded rules) give the [`nvcre_engine::RuleSet`] every entry point takes.
- [`render_document`] renders one document: a WorkloadRun into the Workflow NVCRE would submit
  ([`render_workload_run`]), or a Workflow resolved for a platform ([`render_workflow`]). The
  node context comes from a [`RenderRequest`]; the result is a [`Rendered`].
- [`expand`] places a [`Rendered`] Workflow on nodes and emits every group's manifests
  ([`Expanded`]); [`place`] is the placement underneath, as a pure function of the Workflow,
  the nodes and a [`PlacementPolicy`] ([`placement_policy`] reads it from a rule set).
- [`check_document`] reports every finding for one document ([`CheckRequest`]).
- [`read_workload_run`] reads a document as a WorkloadRun (kind, API group, types, strict
  field validation, user overrides) before any rule runs.
- [`PolicyError`] says why a render or check produced no clean result.
- [`load_suite`], [`SuiteRunner`] and [`coverage`] run the rule test suites under
  `rules/tests/`.
- [`measure`] reads logs into BandwidthMeasurement / GoodputMeasurement statuses with the
  `LogProfile` documents of a rule set (checked when the set loads), and evaluates thresholds
  (CEL over `value`) on them.

# Example

Render a WorkloadRun for AWS H100 nodes with the embedded rules:

```
use nvcre_domain::{RenderRequest, default_rules, render_document};
use nvcre_engine::{Source, parse_documents};

let rules = default_rules()?;
let source = Source::new(
    "run.yaml",
    "apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata: {name: nccl-all-reduce}
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  numNodes: 2
  framework:
    mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun}
",
);
let docs = parse_documents(&source)?;
let request = RenderRequest {
    platform: Some("aws".into()),
    gpu_arch: Some("h100".into()),
    ..RenderRequest::default()
};
let rendered = render_document(&rules, &docs[0], &request)?;
assert_eq!(rendered.workflow["kind"], "Workflow");
assert_eq!(rendered.platform, "aws");
# Ok::<(), Box<dyn std::error::Error>>(())
```
*/
// Input paths must not panic: every lookup is checked, every error typed.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub use api::{Workflow, WorkloadRun};
pub use build::shell_quote;
pub use builtins::{BUILT_IN_RULES, BuiltInRule, built_in_rule};
pub use check::{
    BUILT_IN, CheckRequest, check_document, check_document_as_reported, check_document_in,
    input_object_values, input_objects, reads_objects,
};
pub use detect::{
    GangDefaults, gang_defaults, gpu_products, placement_policy, scheduling_policy,
    selectable_platforms,
};
pub use digest::rules_digest;
pub use error::{PolicyError, document_place};
pub use hazards::{NULL_QUANTITY_RULE, YAML_QUOTE_RULE, yaml_quote_findings};
pub use nodes::{Discovery, detect_gpu_architecture, discover_targets};
pub use nodes::{GpuProductRule, GpuProducts, Node, NodeError, nodes_from_documents};
pub use nodes_file::{NodesFileError, read_nodes};
pub use packs::{
    SCHEMA_KINDS, WHEN_VARIABLES, contract, default_rules, embedded_rules_digest,
    load_complete_rules, load_rules, rule_file_schema, rule_sources, schema_names,
};
pub use placement::{
    Group, Placement, PlacementError, PlacementPolicy, SchedulingPolicy, place, place_groups,
    place_recorded,
};
pub use render::{
    ANNOTATION_ARCH, ANNOTATION_PLATFORM, Expanded, NIC_DETECTION, Note, RenderRequest, Rendered,
    check_flags, expand, note_line, override_table_lints, read_workload_run, render_document,
    render_workflow, render_workload_run, sort_string_maps, verify_placement,
};
pub use suite::{
    Case, CaseContext, CaseResult, Coverage, DEFAULT_CASES, DEFAULT_SEED, Expectation, Generator,
    PackCoverage, Property, PropertyOptions, Suite, SuiteError, SuiteErrors, SuiteRunner,
    TableCoverage, WantFinding, coverage, discover as discover_suites, load_suite, parse_suite,
    suite_schema, table_values,
};
pub use trial::{cannot_render_lint, trial_render};

mod api;
mod build;
mod builtins;
mod check;
mod contract;
pub mod crd;
mod detect;
mod digest;
mod error;
mod hazards;
pub mod measure;
mod nodes;
mod nodes_file;
mod packs;
mod placement;
mod render;
mod resolve;
mod suite;
mod trial;
