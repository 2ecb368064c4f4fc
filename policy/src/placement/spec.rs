//! What placement reads from a resolved Workflow: `spec.orchestration` as a [`PlacementSpec`]
//! (target, Pinned/Unpinned, topology, diagnose), and [`PlacementError`], whose messages are the
//! status messages NVCRE writes. Which combinations are refused (Unpinned with `diagnose` or
//! `topology.strictDomain`) is rule data, the `placement` stage, run before placement.

use serde_json::{Map, Value};

use crate::api::TargetSpec;

/// Why placement could not produce groups.
///
/// `Display` is the exact status message NVCRE writes, so
/// it carries no layer prefix; callers that need one add it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// An orchestration field does not have the CRD's shape.
    #[error("spec.orchestration.{field}: {reason}")]
    InvalidOrchestration {
        /// Field under `spec.orchestration`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// `orchestration.placement` is neither `Pinned` nor `Unpinned`.
    #[error(
        "spec.orchestration.placement: unsupported value \"{value}\": must be Pinned or Unpinned"
    )]
    UnknownPlacement {
        /// The value found.
        value: String,
    },
    /// `orchestration.diagnose` under Pinned: diagnose stages build their own groups, which
    /// this module does not implement.
    #[error(
        "orchestration.diagnose is not supported by placement: diagnose groups are built by the diagnose stages"
    )]
    DiagnoseUnsupported,
    /// Discovery found no eligible node.
    #[error("No target nodes found matching orchestration target")]
    NoTargetNodes,
    /// Every node was excluded by the GPU-capacity filter.
    #[error(
        "No node can supply the {need} nvidia.com/gpu the workload requests per node; best available is {best}"
    )]
    NoCapacity {
        /// GPUs requested per node.
        need: i64,
        /// Largest allocatable count among the excluded nodes.
        best: i64,
    },
    /// `trainer.numNodes` is missing or not an integer.
    #[error("Failed to detect nodesPerJob: {reason}")]
    NodesPerJob {
        /// What is wrong with `spec.jobTemplate.spec.workload.trainJob.trainer.numNodes`.
        reason: String,
    },
    /// nodesPerJob below 1 where a size is required (partitioning, Unpinned).
    #[error("nodesPerJob must be >= 1, got {got}")]
    InvalidNodesPerJob {
        /// The value found.
        got: i64,
    },
    /// Partitioning was asked to split zero nodes.
    #[error("no nodes provided")]
    NoNodes,
    /// Topology partitioning met a node without the topology label.
    #[error("node \"{node}\" missing topology label \"{key}\"")]
    MissingTopologyLabel {
        /// Node name.
        node: String,
        /// The topology key.
        key: String,
    },
    /// More nodes per job than eligible nodes; `message` is the full text.
    #[error("{message}")]
    Shortfall {
        /// Nodes needed per job.
        need: i64,
        /// Eligible nodes.
        found: usize,
        /// `Not enough schedulable nodes: need <N>, found <M>` plus causes and remedies.
        message: String,
    },
    /// A document the manifests are built from does not have the expected shape.
    #[error("{path}: {reason}")]
    InvalidDocument {
        /// Field path, e.g. `spec.jobTemplate.spec.workload.trainJob.runtimePatches`.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// `orchestration.placement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlacementMode {
    /// Partition every eligible node into groups of nodesPerJob (the default; `""` or `Pinned`).
    #[default]
    Pinned,
    /// One job of exactly nodesPerJob nodes, placed by the scheduler.
    Unpinned,
}

/// The orchestration fields placement reads, parsed from `Workflow.spec.orchestration`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlacementSpec {
    /// `target`.
    pub target: Option<TargetSpec>,
    /// `placement`.
    pub mode: PlacementMode,
    /// `topology.topologyKey` (empty string counts as unset).
    pub topology_key: Option<String>,
    /// `topology.strictDomain`.
    pub strict_domain: bool,
    /// `diagnose` is present.
    pub diagnose: bool,
}

impl PlacementSpec {
    /// Reads `target`, `placement`, `topology` and `diagnose` from an orchestration map.
    ///
    /// # Errors
    /// [`PlacementError::InvalidOrchestration`] when a field has the wrong shape,
    /// [`PlacementError::UnknownPlacement`] for a placement other than `""`, `Pinned`,
    /// `Unpinned`.
    pub fn from_orchestration(orch: &Map<String, Value>) -> Result<PlacementSpec, PlacementError> {
        let invalid = |field: &str, reason: String| PlacementError::InvalidOrchestration {
            field: field.to_string(),
            reason,
        };
        let target = match orch.get("target") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                <TargetSpec as serde::Deserialize>::deserialize(nvcre_engine::MappingValue(v))
                    .map_err(|e| invalid("target", e.to_string()))?,
            ),
        };
        let mode = match orch.get("placement") {
            None | Some(Value::Null) => PlacementMode::Pinned,
            Some(Value::String(s)) => match s.as_str() {
                "" | "Pinned" => PlacementMode::Pinned,
                "Unpinned" => PlacementMode::Unpinned,
                other => {
                    return Err(PlacementError::UnknownPlacement {
                        value: other.to_string(),
                    });
                }
            },
            Some(other) => {
                return Err(invalid(
                    "placement",
                    format!("must be a string, got {other}"),
                ));
            }
        };
        let (topology_key, strict_domain) = match orch.get("topology") {
            None | Some(Value::Null) => (None, false),
            Some(Value::Object(t)) => {
                let key = match t.get("topologyKey") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) if s.is_empty() => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(other) => {
                        return Err(invalid(
                            "topology.topologyKey",
                            format!("must be a string, got {other}"),
                        ));
                    }
                };
                let strict = match t.get("strictDomain") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(invalid(
                            "topology.strictDomain",
                            format!("must be a boolean, got {other}"),
                        ));
                    }
                };
                (key, strict)
            }
            Some(other) => {
                return Err(invalid(
                    "topology",
                    format!("must be an object, got {other}"),
                ));
            }
        };
        let diagnose = !matches!(orch.get("diagnose"), None | Some(Value::Null));
        Ok(PlacementSpec {
            target,
            mode,
            topology_key,
            strict_domain,
            diagnose,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Parses a post-override orchestration map.
    fn validate_placement(orch: &Map<String, Value>) -> Result<(), PlacementError> {
        PlacementSpec::from_orchestration(orch).map(|_| ())
    }

    #[test]
    fn placement_spec_parses_fields() {
        let orch = json!({"placement": "Pinned", "topology": {"topologyKey": "", "strictDomain": true}, "diagnose": null});
        let spec = PlacementSpec::from_orchestration(orch.as_object().unwrap()).unwrap();
        assert_eq!(spec.mode, PlacementMode::Pinned);
        assert_eq!(spec.topology_key, None);
        assert!(spec.strict_domain && !spec.diagnose);
        assert!(matches!(
            validate_placement(orch.as_object().unwrap()),
            Ok(())
        ));
        let bad = json!({"topology": {"strictDomain": "yes"}});
        assert_eq!(
            validate_placement(bad.as_object().unwrap())
                .unwrap_err()
                .to_string(),
            "spec.orchestration.topology.strictDomain: must be a boolean, got \"yes\""
        );
    }

    #[test]
    fn example_from_orchestration() -> Result<(), Box<dyn std::error::Error>> {
        use crate::placement::{PlacementMode, PlacementSpec};
        let orch =
            serde_json::json!({"placement": "Unpinned", "topology": {"topologyKey": "rack"}});
        let spec = PlacementSpec::from_orchestration(orch.as_object().ok_or("object")?)?;
        assert_eq!(spec.mode, PlacementMode::Unpinned);
        assert_eq!(spec.topology_key.as_deref(), Some("rack"));
        Ok(())
    }
}
