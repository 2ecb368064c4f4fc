//! The main job: a WorkloadRun (or a Workflow) in, the Workflow that would be submitted out.
//!
//! A WorkloadRun render ([`render_workload_run`]) runs, in order: parse and admission
//! ([`parse`]) → node context (`--platform`/`--gpu-arch` or the nodes given, else the
//! architecture from `target.nodeSelector["nvidia.com/gpu.product"]`; [`context`]) → per-node
//! defaults and the platform override table ([`platform`]) → build → construction label checks
//! → with a platform: resolve overrides, clear `spec.overrides`, enforce placement, workload
//! labels and the gang contract ([`enforce`]) → the output document with its annotations.
//!
//! A Workflow render ([`render_workflow`]) resolves an already built Workflow for a platform
//! through the same [`enforce`] stage; [`expand`] then places a rendered Workflow on nodes and
//! emits every group's manifests.

mod context;
mod enforce;
mod expand;
mod parse;
mod platform;
mod strict;
mod workflow;
mod workloadrun;

use nvcre_engine::{Document, RuleSet};
use serde_json::Value;

use crate::error::PolicyError;
use crate::nodes::Node;
use crate::resolve::AppliedOverride;

pub use context::{NIC_DETECTION, NO_TARGET_NODES, RenderRequest, check_flags};
pub(crate) use context::{NIC_TABLE, NicRow};
pub use enforce::note_line;
pub use expand::{Expanded, Verify, expand, expand_verifying, verify_placement};
pub(crate) use parse::{
    api_version_error, check_user_overrides, check_workflow_thresholds, input_error,
    override_when_findings, parse_typed, plain_serde_message, prepare_document,
};
pub use parse::{override_table_lints, read_workload_run};
pub(crate) use platform::PlatformOverride;
pub(crate) use strict::validate_object;
pub use workflow::render_workflow;
pub(crate) use workloadrun::render_admitted_run;
pub use workloadrun::render_workload_run;

/// Name of the WorkloadRun platform override table.
pub const OVERRIDE_TABLE: &str = "workloadrun-platform-overrides";

/// Annotation with the architecture the render used.
pub const ANNOTATION_ARCH: &str = "nvcrectl.nvidia.com/detected-gpu-architecture";

/// Annotation with the platform the render used (only with a platform).
pub const ANNOTATION_PLATFORM: &str = "nvcrectl.nvidia.com/detected-platform";

/// Annotation listing the overrides applied (Workflow render).
pub const ANNOTATION_APPLIED: &str = "nvcrectl.nvidia.com/applied-overrides";

/// A line `render` prints on stderr about a render that went through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// How the line is led: `Warning:` for [`nvcre_engine::Severity::Warning`] (and error),
    /// `Info:` for [`nvcre_engine::Severity::Info`].
    pub severity: nvcre_engine::Severity,
    /// The text after the lead.
    pub text: String,
    /// `file:line:col` (or `file`) of what the note is about, when it came from a finding:
    /// among several documents, `render` leads the text with it ([`Note::located`]).
    pub at: Option<String>,
}

impl Note {
    /// The note with its text led by its place (`file:line:col: text`), when it has one.
    pub fn located(&self) -> Note {
        match &self.at {
            Some(at) => Note {
                text: format!("{at}: {}", self.text),
                ..self.clone()
            },
            None => self.clone(),
        }
    }
}

impl From<String> for Note {
    /// A warning (its text says where it is about, if anywhere).
    fn from(text: String) -> Self {
        Note {
            severity: nvcre_engine::Severity::Warning,
            text,
            at: None,
        }
    }
}

/// A rendered Workflow and what the render decided.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The Workflow document.
    pub workflow: Value,
    /// Notes for stderr, in the order the render made them: the legacy API group, NIC
    /// detection, and the findings below error of the rules (see [`note_line`]).
    pub warnings: Vec<Note>,
    /// What NIC resource detection said when it requested no NIC resource (none, or several,
    /// allocatable on every target node); also among `warnings`, led by [`NIC_DETECTION`].
    pub nic_detection: Option<String>,
    /// The findings below error (warnings, info) of the render: the admission stage's (when
    /// the render ran it), the input's, and the stages' after construction and after the
    /// overrides, located in the input where their field was written. `check` reports them;
    /// `render` prints them in `warnings`; the controller records them as Events.
    pub findings: Vec<nvcre_engine::Finding>,
    /// Overrides applied (empty without a platform).
    pub applied: Vec<AppliedOverride>,
    /// The platform used ("" without one).
    pub platform: String,
    /// The GPU architecture used.
    pub gpu_architecture: String,
    /// The target nodes from `--nodes-file` (empty for flags).
    pub nodes: Vec<Node>,
}

/// Renders one document by its kind: a `Workflow` is resolved for the node context
/// ([`render_workflow`]); anything else is rendered as a WorkloadRun ([`render_workload_run`]).
///
/// # Errors
/// As [`render_workflow`] and [`render_workload_run`].
pub fn render_document(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    if doc.value.get("kind").and_then(Value::as_str) == Some("Workflow") {
        render_workflow(rules, doc, req)
    } else {
        render_workload_run(rules, doc, req)
    }
}

/// Puts the keys of every string map Kubernetes types declare as a Go `map[string]string`
/// (`labels`, `annotations`, `nodeSelector`, `matchLabels`), at any depth of `value`, in
/// ascending order, as Go (and so the original `nvcrectl`, and the API server) writes maps.
/// The pipeline inserts keys where its rules write them (a queue label after the user's), so
/// without this a printed manifest would differ in order from the original's.
pub fn sort_string_maps(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if let Value::Object(m) = v
                    && matches!(
                        key.as_str(),
                        "labels" | "annotations" | "nodeSelector" | "matchLabels"
                    )
                    && m.values().all(Value::is_string)
                {
                    m.sort_keys();
                }
                sort_string_maps(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(sort_string_maps),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_maps_are_sorted_as_go_writes_them_and_nothing_else() {
        let mut v = serde_json::json!({
            "metadata": {"name": "w", "labels": {"zeta": "1", "kai.scheduler/queue": "q", "alpha": "2"}},
            "spec": {"template": {"spec": {
                "nodeSelector": {"zz": "1", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "containers": [{"name": "node", "env": [{"name": "B", "value": "1"}, {"name": "A", "value": "2"}],
                                "resources": {"limits": {"z": 1, "a": 2}}}]
            }}},
            "data": {"z": "1", "a": "2"},
            "labels": {"z": {"not": "a string map"}, "a": "b"}
        });
        sort_string_maps(&mut v);
        assert_eq!(
            serde_json::to_string(&v).expect("json"),
            r#"{"metadata":{"name":"w","labels":{"alpha":"2","kai.scheduler/queue":"q","zeta":"1"}},"spec":{"template":{"spec":{"nodeSelector":{"nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3","zz":"1"},"containers":[{"name":"node","env":[{"name":"B","value":"1"},{"name":"A","value":"2"}],"resources":{"limits":{"z":1,"a":2}}}]}}},"data":{"z":"1","a":"2"},"labels":{"z":{"not":"a string map"},"a":"b"}}"#
        );
    }
}
