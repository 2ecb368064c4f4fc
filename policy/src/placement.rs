//! Placement: from a resolved Workflow and the cluster's nodes to job groups and the
//! manifests each group applies.
//!
//! This is the Workflow controller's `discoverAndPartition` → `createJobForGroup` path
//! (render-pipeline.md §1.3 steps 1, 5, 7, 8 and 9) and its placement rules (§7), as a pure
//! function: [`place`] takes the Workflow *after* override resolution and the node list, and
//! returns a [`Placement`] whose [`Group`]s carry their dependency copies and TrainJob in apply
//! order. Nothing here talks to a cluster.
//!
//! Pipeline of [`place`]:
//! 1. read `spec.orchestration` ([`PlacementSpec`]) and reject Unpinned with `diagnose` or
//!    `topology.strictDomain` (§7.2);
//! 2. discover the target nodes ([`crate::nodes::discover_targets`], §3.4);
//! 3. keep the majority GPU architecture (§3.2), recording the others as excluded;
//! 4. drop nodes whose allocatable `nvidia.com/gpu` is a positive integer below
//!    [`gpu_need`] (§1.3 step 5);
//! 5. nodesPerJob = `trainer.numNodes`; shortfall check (§7.3); groups: Pinned partition
//!    ([`place_groups`], §7.1) or one Unpinned group (§7.2);
//! 6. per group: renamed dependency copies (§6.4) and the TrainJob with required node affinity
//!    ([`node_affinity`], §7.4) and tolerations ([`tolerations`], §7.5).

// Input paths must not panic: every lookup is checked.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::{Map, Value, json};

use crate::api::{GangSchedulerSpec, TargetSpec, Workflow};
use crate::nodes::{HOSTNAME_LABEL, Node, detect_gpu_architecture, discover_targets};

/// The GPU extended resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// `manager` of the TrainJob runtimePatches entry NVCRE owns.
pub const CONTROLLER_PATCH_MANAGER: &str = "nvcre.nvidia.com/controller";
/// Label key identifying the managing controller.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "nvcre";
/// TrainJob label naming the Workflow.
pub const WORKFLOW_LABEL: &str = "nvcre.nvidia.com/workflow";
/// TrainJob label naming the group.
pub const GROUP_LABEL: &str = "nvcre.nvidia.com/group";
/// TrainJob annotation listing a pinned group's nodes, comma-joined.
pub const GROUP_NODES_ANNOTATION: &str = "nvcre.nvidia.com/group-nodes";
/// apiVersion of the TrainJob each group creates.
pub const TRAINJOB_API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";

/// Message of the Unpinned + `diagnose` rejection (§7.2).
const UNPINNED_DIAGNOSE: &str = "orchestration.placement: Unpinned is incompatible with orchestration.diagnose: diagnose isolates faults by partitioning nodes into groups and bisecting the failures, which requires the node pinning Unpinned removes; drop one of the two";
/// Message of the Unpinned + `topology.strictDomain` rejection (§7.2).
const UNPINNED_STRICT_DOMAIN: &str = "orchestration.placement: Unpinned is incompatible with orchestration.topology.strictDomain: strictDomain runs one job per topology domain, Unpinned runs exactly one job; to confine a single unpinned job to one domain, name the domain label in target.matchExpressions instead";

/// Why placement could not produce groups.
///
/// `Display` is the exact status message NVCRE writes (render-pipeline.md §1.3 and §7), so
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
    /// Unpinned together with `orchestration.diagnose` (§7.2).
    #[error("{UNPINNED_DIAGNOSE}")]
    UnpinnedWithDiagnose,
    /// Unpinned together with `orchestration.topology.strictDomain` (§7.2).
    #[error("{UNPINNED_STRICT_DOMAIN}")]
    UnpinnedWithStrictDomain,
    /// `orchestration.diagnose` under Pinned: diagnose stages build their own groups, which
    /// this module does not implement.
    #[error(
        "orchestration.diagnose is not supported by placement: diagnose groups are built by the diagnose stages"
    )]
    DiagnoseUnsupported,
    /// Discovery found no eligible node.
    #[error("No target nodes found matching orchestration target")]
    NoTargetNodes,
    /// Every node was excluded by the GPU-capacity filter (§1.3 step 5).
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
    /// More nodes per job than eligible nodes (§7.3); `message` is the full text.
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
    /// One job of exactly nodesPerJob nodes, placed by the scheduler (ADR-089).
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
    ///
    /// # Example
    /// ```
    /// use nvcre_domain::placement::{PlacementMode, PlacementSpec};
    /// let orch = serde_json::json!({"placement": "Unpinned", "topology": {"topologyKey": "rack"}});
    /// let spec = PlacementSpec::from_orchestration(orch.as_object().ok_or("object")?)?;
    /// assert_eq!(spec.mode, PlacementMode::Unpinned);
    /// assert_eq!(spec.topology_key.as_deref(), Some("rack"));
    /// assert!(spec.validate().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_orchestration(orch: &Map<String, Value>) -> Result<PlacementSpec, PlacementError> {
        let invalid = |field: &str, reason: String| PlacementError::InvalidOrchestration {
            field: field.to_string(),
            reason,
        };
        let target = match orch.get("target") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                serde_json::from_value::<TargetSpec>(v.clone())
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

    /// The post-override placement check (`ValidatePlacement`, §7.2): Unpinned rejects
    /// `diagnose`, then `topology.strictDomain`; `topology.topologyKey` is ignored.
    ///
    /// # Errors
    /// [`PlacementError::UnpinnedWithDiagnose`], [`PlacementError::UnpinnedWithStrictDomain`].
    pub fn validate(&self) -> Result<(), PlacementError> {
        if self.mode != PlacementMode::Unpinned {
            return Ok(());
        }
        if self.diagnose {
            return Err(PlacementError::UnpinnedWithDiagnose);
        }
        if self.strict_domain {
            return Err(PlacementError::UnpinnedWithStrictDomain);
        }
        Ok(())
    }
}

/// Parses and validates a post-override orchestration map (§7.2); see
/// [`PlacementSpec::from_orchestration`] and [`PlacementSpec::validate`].
///
/// # Errors
/// As those two functions.
///
/// # Example
/// ```
/// use nvcre_domain::placement::validate_placement;
/// let orch = serde_json::json!({"placement": "Unpinned", "diagnose": {"minGroupSize": 2}});
/// let err = validate_placement(orch.as_object().ok_or("object")?).unwrap_err();
/// assert!(err.to_string().starts_with("orchestration.placement: Unpinned is incompatible with orchestration.diagnose"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_placement(orch: &Map<String, Value>) -> Result<(), PlacementError> {
    PlacementSpec::from_orchestration(orch)?.validate()
}

/// One job group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// `group-<i>` or `group-<k>-overflow`.
    pub name: String,
    /// Pinned: the group's nodes, sorted. Unpinned: empty.
    pub nodes: Vec<String>,
    /// Topology domains the group spans, sorted (topology partitioning only).
    pub domains: Vec<String>,
    /// An overflow group (re-uses nodes of earlier groups to fill up).
    pub overflow: bool,
    /// In apply order: the group's renamed dependency copies, then its TrainJob.
    pub manifests: Vec<Value>,
}

/// The result of [`place`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// The groups, in launch order.
    pub groups: Vec<Group>,
    /// Eligible nodes after discovery, architecture and capacity filters.
    pub total_nodes: usize,
    /// The resolved nodes per job (Pinned `< 1` resolves to `total_nodes`).
    pub nodes_per_job: i64,
    /// Nodes that matched the target but were left out, with the reason: cordoned first,
    /// then other GPU architectures, then insufficient GPU capacity.
    pub excluded: Vec<(String, String)>,
    /// Pinned or Unpinned.
    pub mode: PlacementMode,
    /// The detected (majority) GPU architecture, `unknown` when no node is labelled.
    pub gpu_architecture: String,
    /// Distinct raw `nvidia.com/gpu.product` values of the eligible nodes, sorted.
    pub gpu_products: Vec<String>,
    /// Dependencies no job references: created once for the whole Workflow (not per group).
    pub workflow_dependencies: Vec<Value>,
}

/// The per-node GPU need: the largest `nvidia.com/gpu` found under any `requests` or
/// `limits` map anywhere in `spec.jobTemplate` or any dependency (§1.3 step 5).
///
/// Values may be strings holding a Kubernetes quantity (`"8"`, `"8.0"`, `"1k"`) or numbers;
/// an unparseable value is skipped, a negative one counts as 0. `None` when no such entry
/// exists.
///
/// # Example
/// ```
/// use nvcre_domain::{api::Workflow, placement::gpu_need};
/// let wf: Workflow = serde_json::from_value(serde_json::json!({
///     "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
///     "spec": {"jobTemplate": {"spec": {}}, "dependencies": [
///         {"kind": "TrainingRuntime", "spec": {"resources": {"limits": {"nvidia.com/gpu": "8"}}}}]}
/// }))?;
/// assert_eq!(gpu_need(&wf), Some(8));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gpu_need(workflow: &Workflow) -> Option<i64> {
    std::iter::once(&workflow.spec.job_template)
        .chain(workflow.spec.dependencies.iter())
        .filter_map(max_gpu_request)
        .max()
}

/// Largest GPU request in one document.
fn max_gpu_request(doc: &Value) -> Option<i64> {
    match doc {
        Value::Object(map) => {
            let mut found: Option<i64> = None;
            for (key, val) in map {
                if key == "requests" || key == "limits" {
                    if let Some(q) = val.get(GPU_RESOURCE).and_then(gpu_quantity) {
                        found = found.max(Some(q));
                    }
                }
                found = found.max(max_gpu_request(val));
            }
            found
        }
        Value::Array(items) => items.iter().filter_map(max_gpu_request).max(),
        _ => None,
    }
}

/// A GPU count from a JSON quantity: negative counts as 0, unparseable is `None`.
fn gpu_quantity(v: &Value) -> Option<i64> {
    let n = match v {
        Value::String(s) => quantity_as_int(s)?,
        Value::Number(n) => match n.as_i64() {
            Some(i) => i,
            // Fractional or huge numbers: truncated like the original's int64(float64).
            None => n
                .as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)?,
        },
        _ => return None,
    };
    Some(n.max(0))
}

/// The exact integer value of a Kubernetes quantity (`"8"`, `"+8"`, `"8.0"`, `"2k"`, `"1Ki"`,
/// `"4000m"`, `"1e3"`), or `None` when it does not parse or is not a whole number.
///
/// # Example
/// ```
/// use nvcre_domain::placement::quantity_as_int;
/// assert_eq!(quantity_as_int("8"), Some(8));
/// assert_eq!(quantity_as_int("2Ki"), Some(2048));
/// assert_eq!(quantity_as_int("1500m"), None);
/// ```
pub fn quantity_as_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at_checked(split)?;
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = digits.parse().ok()?;
    let frac_len = i32::try_from(frac_part.len()).ok()?;
    // (base, exponent) of the suffix.
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        other => {
            let e = other.strip_prefix(['e', 'E'])?;
            (
                10,
                e.parse::<i32>().ok().filter(|e| (-40..=40).contains(e))?,
            )
        }
    };
    let pow10 = |n: i32| 10_i128.checked_pow(u32::try_from(n).ok()?);
    let value = if base == 10 {
        let total = exp.checked_sub(frac_len)?;
        if total >= 0 {
            mantissa.checked_mul(pow10(total)?)?
        } else {
            let div = pow10(-total)?;
            if mantissa % div != 0 {
                return None;
            }
            mantissa / div
        }
    } else {
        let scaled = mantissa.checked_mul(2_i128.checked_pow(u32::try_from(exp).ok()?)?)?;
        let div = pow10(frac_len)?;
        if scaled % div != 0 {
            return None;
        }
        scaled / div
    };
    i64::try_from(if negative { -value } else { value }).ok()
}

/// Pinned partitioning (§7.1) of `nodes` (any order; sorted by name first) into groups of
/// `nodes_per_job`. The returned groups have no manifests.
///
/// - No `topology_key`: consecutive chunks `group-0..`; a remainder forms
///   `group-<k>-overflow` from the leftover nodes plus the last nodes of the last full group
///   (sorted), or, when no full group exists, a single partial `group-0` of all nodes.
/// - `topology_key` with `strict_domain`: one group per domain at its natural size, domains
///   by size descending then name.
/// - `topology_key`: groups packed into as few domains as possible, overflow groups re-using
///   tested nodes of the same domains until every node is covered; when the largest domains
///   cannot fill even one group, a single partial `group-0` of all nodes (which may exceed
///   nodesPerJob). Every overflow group is full: its domain pools are refreshed per overflow
///   group, where the original drains them and can leave a later overflow group short.
///
/// Every node appears in at least one group.
///
/// # Errors
/// `nodesPerJob must be >= 1, got <n>`, `no nodes provided`,
/// `node "<n>" missing topology label "<key>"`.
///
/// # Example
/// ```
/// use nvcre_domain::{nodes::Node, placement::place_groups};
/// let nodes: Vec<Node> = (0..5).map(|i| Node { name: format!("node-{i}"), ..Node::default() }).collect();
/// let groups = place_groups(&nodes, 2, None, false)?;
/// let names: Vec<_> = groups.iter().map(|g| g.name.as_str()).collect();
/// assert_eq!(names, ["group-0", "group-1", "group-2-overflow"]);
/// assert_eq!(groups[2].nodes, ["node-3", "node-4"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn place_groups(
    nodes: &[Node],
    nodes_per_job: i64,
    topology_key: Option<&str>,
    strict_domain: bool,
) -> Result<Vec<Group>, PlacementError> {
    if nodes_per_job < 1 {
        return Err(PlacementError::InvalidNodesPerJob { got: nodes_per_job });
    }
    if nodes.is_empty() {
        return Err(PlacementError::NoNodes);
    }
    let npj = usize::try_from(nodes_per_job).unwrap_or(usize::MAX);
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    match topology_key.filter(|k| !k.is_empty()) {
        None => Ok(partition_simple(&sorted, npj)),
        Some(key) => partition_topology(&sorted, npj, key, strict_domain),
    }
}

/// A group without manifests.
fn group(name: String, nodes: Vec<String>, domains: Vec<String>, overflow: bool) -> Group {
    Group {
        name,
        nodes,
        domains,
        overflow,
        manifests: Vec::new(),
    }
}

/// Chunking by name order (§7.1 "Simple").
fn partition_simple(sorted: &[&Node], npj: usize) -> Vec<Group> {
    let names: Vec<String> = sorted.iter().map(|n| n.name.clone()).collect();
    let full = names.len() / npj;
    let remainder = names.len() % npj;
    let mut groups: Vec<Group> = names
        .chunks(npj)
        .take(full)
        .enumerate()
        .map(|(i, chunk)| group(format!("group-{i}"), chunk.to_vec(), Vec::new(), false))
        .collect();
    if remainder > 0 {
        if full == 0 {
            groups.push(group("group-0".to_string(), names, Vec::new(), false));
        } else {
            let leftover = names.iter().skip(full.saturating_mul(npj)).cloned();
            let borrowed: Vec<String> = groups
                .last()
                .map(|g| g.nodes.iter().skip(remainder).cloned().collect())
                .unwrap_or_default();
            let mut overflow: Vec<String> = leftover.chain(borrowed).collect();
            overflow.sort();
            groups.push(group(
                format!("group-{full}-overflow"),
                overflow,
                Vec::new(),
                true,
            ));
        }
    }
    groups
}

/// Topology-aware packing (§7.1 "StrictDomain" and "Topology").
fn partition_topology(
    sorted: &[&Node],
    npj: usize,
    key: &str,
    strict_domain: bool,
) -> Result<Vec<Group>, PlacementError> {
    let mut by_domain: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut domain_of: BTreeMap<String, String> = BTreeMap::new();
    for node in sorted {
        let domain = node
            .labels
            .get(key)
            .filter(|d| !d.is_empty())
            .ok_or_else(|| PlacementError::MissingTopologyLabel {
                node: node.name.clone(),
                key: key.to_string(),
            })?;
        by_domain
            .entry(domain.clone())
            .or_default()
            .push(node.name.clone());
        domain_of.insert(node.name.clone(), domain.clone());
    }
    // Domains by size descending, then name (BTreeMap order is by name; the sort is stable).
    let mut domains: Vec<(String, Vec<String>)> = by_domain.into_iter().collect();
    domains.sort_by_key(|d| std::cmp::Reverse(d.1.len()));

    if strict_domain {
        return Ok(domains
            .into_iter()
            .enumerate()
            .map(|(i, (d, nodes))| group(format!("group-{i}"), nodes, vec![d], false))
            .collect());
    }

    let largest = domains.first().map_or(1, |d| d.1.len()).max(1);
    let max_domains = npj.div_ceil(largest);
    let mut pools: BTreeMap<String, VecDeque<String>> = domains
        .iter()
        .map(|(d, nodes)| (d.clone(), nodes.iter().cloned().collect()))
        .collect();

    let mut groups = Vec::new();
    loop {
        let mut available: Vec<(String, usize)> = pools
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(d, p)| (d.clone(), p.len()))
            .collect();
        available.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let total: usize = available.iter().map(|a| a.1).sum();
        if total == 0 || total < npj {
            break;
        }
        let top: usize = available.iter().take(max_domains).map(|a| a.1).sum();
        if top < npj {
            break;
        }
        let mut nodes = Vec::with_capacity(npj);
        let mut used = Vec::new();
        for (domain, _) in available.iter().take(max_domains) {
            let remaining = npj.saturating_sub(nodes.len());
            if remaining == 0 {
                break;
            }
            if let Some(pool) = pools.get_mut(domain) {
                let take = remaining.min(pool.len());
                nodes.extend(pool.drain(..take));
                used.push(domain.clone());
            }
        }
        nodes.sort();
        used.sort();
        groups.push(group(format!("group-{}", groups.len()), nodes, used, false));
    }

    let untested: BTreeSet<String> = pools.values().flatten().cloned().collect();
    if untested.is_empty() {
        return Ok(groups);
    }
    if groups.is_empty() {
        let nodes: Vec<String> = untested.iter().cloned().collect();
        let doms: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| domain_of.get(n).cloned())
            .collect();
        groups.push(group(
            "group-0".to_string(),
            nodes,
            doms.into_iter().collect(),
            false,
        ));
        return Ok(groups);
    }
    let full = groups.len();
    groups.extend(overflow_groups(&domains, untested, npj, full));
    Ok(groups)
}

/// Overflow groups for the nodes full groups left untested: each fills from the domains with
/// the most untested nodes, untested nodes first, then already-tested nodes of those domains.
///
/// Each overflow group draws from fresh per-domain pools, so every overflow group has
/// exactly `npj` nodes (at least one full group exists, so the fleet holds `npj` nodes). The
/// original drains its pools across overflow groups, which can leave a later overflow group
/// short of nodesPerJob; the first overflow group is the same either way.
fn overflow_groups(
    domains: &[(String, Vec<String>)],
    mut untested: BTreeSet<String>,
    npj: usize,
    first_index: usize,
) -> Vec<Group> {
    let mut out = Vec::new();
    while !untested.is_empty() {
        // (domain, untested count, pool: untested first then re-usable, both in name order)
        let mut racks: Vec<(&String, usize, Vec<&String>)> = domains
            .iter()
            .map(|(d, nodes)| {
                let (fresh, reused): (Vec<&String>, Vec<&String>) =
                    nodes.iter().partition(|n| untested.contains(*n));
                let count = fresh.len();
                (d, count, fresh.into_iter().chain(reused).collect())
            })
            .collect();
        racks.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| b.2.len().cmp(&a.2.len()))
                .then_with(|| a.0.cmp(b.0))
        });
        let mut nodes: Vec<String> = Vec::with_capacity(npj);
        let mut used = Vec::new();
        for (domain, _, pool) in &racks {
            if nodes.len() >= npj {
                break;
            }
            if pool.is_empty() {
                continue;
            }
            let take = npj.saturating_sub(nodes.len()).min(pool.len());
            nodes.extend(pool.iter().take(take).map(|n| (*n).clone()));
            used.push((*domain).clone());
        }
        let before = untested.len();
        for n in &nodes {
            untested.remove(n);
        }
        if untested.len() == before {
            break;
        }
        nodes.sort();
        used.sort();
        out.push(group(
            format!("group-{}-overflow", first_index.saturating_add(out.len())),
            nodes,
            used,
            true,
        ));
    }
    out
}

/// The required node affinity of a job (§7.4): one NodeSelectorTerm whose matchExpressions
/// are `kubernetes.io/hostname In <hostnames>` (when any), each `target.nodeSelector` entry as
/// `<key> In [<value>]` (keys sorted), `target.matchExpressions` verbatim, then
/// `nvidia.com/gpu.product In <distinct sorted non-empty gpu_products>`; exact duplicates
/// (key, operator, values) are dropped keeping the first. `None` when there is nothing to
/// constrain. `nodeNames` and `taintSelectors` are not translated.
///
/// Shape: `{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms:
/// [{matchExpressions: [{key, operator, values?}]}]}}`.
///
/// # Example
/// ```
/// use nvcre_domain::placement::node_affinity;
/// let a = node_affinity(&["n1".to_string()], None, &["NVIDIA-GB200".to_string()]).ok_or("none")?;
/// let terms = &a["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
/// assert_eq!(terms[0]["key"], "kubernetes.io/hostname");
/// assert_eq!(terms[1]["values"][0], "NVIDIA-GB200");
/// assert!(node_affinity(&[], None, &[]).is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn node_affinity(
    hostnames: &[String],
    target: Option<&TargetSpec>,
    gpu_products: &[String],
) -> Option<Value> {
    let mut reqs: Vec<(String, String, Vec<String>)> = Vec::new();
    if !hostnames.is_empty() {
        reqs.push((
            HOSTNAME_LABEL.to_string(),
            "In".to_string(),
            hostnames.to_vec(),
        ));
    }
    if let Some(t) = target {
        for (k, v) in &t.node_selector {
            reqs.push((k.clone(), "In".to_string(), vec![v.clone()]));
        }
        for r in &t.match_expressions {
            reqs.push((r.key.clone(), r.operator.clone(), r.values.clone()));
        }
    }
    let products: BTreeSet<&String> = gpu_products.iter().filter(|p| !p.is_empty()).collect();
    if !products.is_empty() {
        reqs.push((
            crate::nodes::GPU_PRODUCT_LABEL.to_string(),
            "In".to_string(),
            products.into_iter().cloned().collect(),
        ));
    }
    let mut seen = BTreeSet::new();
    reqs.retain(|r| seen.insert(r.clone()));
    if reqs.is_empty() {
        return None;
    }
    let exprs: Vec<Value> = reqs
        .into_iter()
        .map(|(key, operator, values)| {
            let mut m = Map::new();
            m.insert("key".to_string(), Value::String(key));
            m.insert("operator".to_string(), Value::String(operator));
            if !values.is_empty() {
                m.insert(
                    "values".to_string(),
                    Value::Array(values.into_iter().map(Value::String).collect()),
                );
            }
            Value::Object(m)
        })
        .collect();
    Some(json!({
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs}]
        }
    }))
}

/// Tolerations appended to every targeted replicated job (§7.5):
/// 1. `target.taintSelectors` set → one per selector: `key`; `operator: Equal` + `value` when a
///    value is given, else `operator: Exists`; `effect` when given;
/// 2. else no launcher target (not MPI) → none;
/// 3. else Pinned → `[{operator: Exists}]`;
/// 4. else Unpinned → `nvidia.com/gpu=present:NoSchedule` and
///    `kubernetes.io/arch=arm64:NoSchedule` (`Equal`).
///
/// # Example
/// ```
/// use nvcre_domain::placement::{tolerations, PlacementMode};
/// assert_eq!(tolerations(None, true, PlacementMode::Pinned), vec![serde_json::json!({"operator": "Exists"})]);
/// assert!(tolerations(None, false, PlacementMode::Pinned).is_empty());
/// ```
pub fn tolerations(
    target: Option<&TargetSpec>,
    has_launcher: bool,
    mode: PlacementMode,
) -> Vec<Value> {
    if let Some(t) = target.filter(|t| !t.taint_selectors.is_empty()) {
        return t
            .taint_selectors
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("key".to_string(), Value::String(s.key.clone()));
                match s.value.as_deref().filter(|v| !v.is_empty()) {
                    Some(v) => {
                        m.insert("operator".to_string(), json!("Equal"));
                        m.insert("value".to_string(), Value::String(v.to_string()));
                    }
                    None => {
                        m.insert("operator".to_string(), json!("Exists"));
                    }
                }
                if let Some(e) = s.effect.as_deref().filter(|e| !e.is_empty()) {
                    m.insert("effect".to_string(), Value::String(e.to_string()));
                }
                Value::Object(m)
            })
            .collect();
    }
    if !has_launcher {
        return Vec::new();
    }
    match mode {
        PlacementMode::Pinned => vec![json!({"operator": "Exists"})],
        PlacementMode::Unpinned => vec![
            json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}),
            json!({"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}),
        ],
    }
}

/// Places a resolved Workflow on the cluster's nodes (§1.3 steps 1, 5, 7, 8, 9 and §7).
///
/// `workflow` is the Workflow after override resolution; `nodes` are all cluster nodes (the
/// target is applied here). See the module docs for the pipeline.
///
/// Pinned with `trainer.numNodes < 1` means "all eligible nodes in one group"; Unpinned
/// never clamps: the size is honoured exactly or placement fails.
///
/// # Errors
/// In pipeline order: orchestration shape and the Unpinned rejections,
/// [`PlacementError::NoTargetNodes`], [`PlacementError::NoCapacity`],
/// [`PlacementError::NodesPerJob`], [`PlacementError::InvalidNodesPerJob`] (Unpinned),
/// [`PlacementError::Shortfall`], [`PlacementError::DiagnoseUnsupported`], partition errors,
/// and [`PlacementError::InvalidDocument`] when the job template or a dependency is not
/// shaped as expected. Messages are NVCRE's, e.g.
/// `Not enough schedulable nodes: need 8, found 6`.
///
/// # Example
/// ```
/// use nvcre_domain::{api::Workflow, nodes::Node, placement::place};
/// let wf: Workflow = serde_json::from_value(serde_json::json!({
///     "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
///     "spec": {"orchestration": {}, "jobTemplate": {"spec": {"workload": {"trainJob": {
///         "runtimeRef": {"name": "wf-runtime", "kind": "TrainingRuntime"},
///         "trainer": {"numNodes": 2}}}}}}
/// }))?;
/// let nodes: Vec<Node> = (0..4).map(|i| Node {
///     name: format!("node-{i}"),
///     labels: [("nvidia.com/gpu.present".to_string(), "true".to_string())].into(),
///     ..Node::default()
/// }).collect();
/// let placement = place(&wf, &nodes)?;
/// assert_eq!(placement.groups.len(), 2);
/// assert_eq!(placement.groups[1].manifests[0]["metadata"]["name"], "wf-group-1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn place(workflow: &Workflow, nodes: &[Node]) -> Result<Placement, PlacementError> {
    let spec = PlacementSpec::from_orchestration(&workflow.spec.orchestration)?;
    spec.validate()?;

    // 1. discovery and the architecture filter.
    let discovery = discover_targets(nodes, spec.target.as_ref());
    if discovery.nodes.is_empty() {
        return Err(PlacementError::NoTargetNodes);
    }
    let mut excluded: Vec<(String, String)> = discovery
        .cordoned
        .iter()
        .map(|n| (n.clone(), "cordoned (spec.unschedulable)".to_string()))
        .collect();
    let arch = detect_gpu_architecture(&discovery.nodes);
    let (eligible, other_arch): (Vec<Node>, Vec<Node>) = discovery
        .nodes
        .into_iter()
        .partition(|n| n.gpu_architecture() == arch);
    let arch_excluded: Vec<String> = other_arch.iter().map(|n| n.name.clone()).collect();
    excluded.extend(other_arch.iter().map(|n| {
        (
            n.name.clone(),
            format!(
                "GPU architecture {} is not the detected architecture {arch}",
                n.gpu_architecture()
            ),
        )
    }));

    // 5. the GPU-capacity filter.
    let need = gpu_need(workflow).unwrap_or(0);
    let (eligible, short) = filter_capacity(eligible, need);
    excluded.extend(short.iter().map(|(n, have)| {
        (
            n.clone(),
            format!("allocatable nvidia.com/gpu {have} is fewer than the {need} the workload requests per node"),
        )
    }));
    if eligible.is_empty() {
        let best = short.iter().map(|s| s.1).max().unwrap_or(0);
        return Err(PlacementError::NoCapacity { need, best });
    }
    let gpu_products: Vec<String> = eligible
        .iter()
        .map(|n| n.gpu_product().to_string())
        .filter(|p| !p.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    // 7. nodesPerJob and the shortfall check.
    let requested = nodes_per_job(&workflow.spec.job_template)?;
    let found = eligible.len();
    let found_i64 = i64::try_from(found).unwrap_or(i64::MAX);
    let npj = match spec.mode {
        PlacementMode::Pinned if requested < 1 => found_i64,
        PlacementMode::Unpinned if requested < 1 => {
            return Err(PlacementError::InvalidNodesPerJob { got: requested });
        }
        _ => requested,
    };
    if npj > found_i64 {
        return Err(PlacementError::Shortfall {
            need: npj,
            found,
            message: shortfall_message(npj, found, &arch, &arch_excluded, &short, need),
        });
    }

    // 8. groups.
    let mut groups = match spec.mode {
        PlacementMode::Unpinned => {
            vec![group("group-0".to_string(), Vec::new(), Vec::new(), false)]
        }
        PlacementMode::Pinned => {
            if spec.diagnose {
                return Err(PlacementError::DiagnoseUnsupported);
            }
            place_groups(
                &eligible,
                npj,
                spec.topology_key.as_deref(),
                spec.strict_domain,
            )?
        }
    };

    // 9. per-group manifests.
    let render = GroupRender::new(workflow, &spec, &gpu_products, npj)?;
    let single = groups.len() <= 1;
    for g in &mut groups {
        g.manifests = render.manifests(g, single)?;
    }
    let workflow_dependencies = render.workflow_dependencies();

    Ok(Placement {
        groups,
        total_nodes: found,
        nodes_per_job: npj,
        excluded,
        mode: spec.mode,
        gpu_architecture: arch,
        gpu_products,
        workflow_dependencies,
    })
}

/// Splits nodes into those that can supply `need` GPUs and `(name, allocatable)` of those
/// whose allocatable `nvidia.com/gpu` is a positive integer below it (absent or zero is kept:
/// the device plugin may be restarting).
fn filter_capacity(nodes: Vec<Node>, need: i64) -> (Vec<Node>, Vec<(String, i64)>) {
    if need <= 0 {
        return (nodes, Vec::new());
    }
    let mut kept = Vec::with_capacity(nodes.len());
    let mut short = Vec::new();
    for n in nodes {
        match n
            .allocatable
            .get(GPU_RESOURCE)
            .and_then(|q| quantity_as_int(q))
        {
            Some(have) if have > 0 && have < need => short.push((n.name.clone(), have)),
            _ => kept.push(n),
        }
    }
    (kept, short)
}

/// The shortfall message (§7.3).
fn shortfall_message(
    need: i64,
    found: usize,
    arch: &str,
    arch_excluded: &[String],
    capacity_excluded: &[(String, i64)],
    gpus_per_node: i64,
) -> String {
    let head = format!("Not enough schedulable nodes: need {need}, found {found}");
    let mut causes = Vec::new();
    let mut remedies = Vec::new();
    if !arch_excluded.is_empty() {
        causes.push(format!(
            "{} node(s) matched the target but were excluded for not being GPU architecture {arch}: {}",
            arch_excluded.len(),
            arch_excluded.join(", ")
        ));
        remedies.push("narrow the target to one architecture");
    }
    if !capacity_excluded.is_empty() {
        let detail: Vec<String> = capacity_excluded
            .iter()
            .map(|(n, have)| format!("{n} has {have}"))
            .collect();
        causes.push(format!(
            "{} node(s) matched the target but were excluded for having fewer than the {gpus_per_node} allocatable nvidia.com/gpu the workload requests per node: {}",
            capacity_excluded.len(),
            detail.join(", ")
        ));
        remedies.push("lower gpusPerNode");
    }
    if causes.is_empty() {
        return head;
    }
    format!(
        "{head}. {}. Set nodesPerJob to {found}, or {}",
        causes.join(". "),
        remedies.join(", or ")
    )
}

/// Path of the job size inside `spec.jobTemplate`.
const NUM_NODES_PATH: &str = "spec.jobTemplate.spec.workload.trainJob.trainer.numNodes";

/// `trainer.numNodes` of the resolved job template.
fn nodes_per_job(job_template: &Value) -> Result<i64, PlacementError> {
    let train_job = job_template
        .pointer("/spec/workload/trainJob")
        .filter(|v| !v.is_null())
        .ok_or_else(|| PlacementError::NodesPerJob {
            reason: "spec.jobTemplate.spec.workload.trainJob is not set".to_string(),
        })?;
    match train_job.pointer("/trainer/numNodes") {
        None | Some(Value::Null) => Err(PlacementError::NodesPerJob {
            reason: "TrainJob.Trainer.NumNodes not set".to_string(),
        }),
        Some(v) => v.as_i64().ok_or_else(|| PlacementError::NodesPerJob {
            reason: format!("{NUM_NODES_PATH} must be an integer, got {v}"),
        }),
    }
}

/// What every group's manifests are built from.
struct GroupRender<'a> {
    workflow: &'a Workflow,
    spec: &'a PlacementSpec,
    gpu_products: &'a [String],
    nodes_per_job: i64,
    /// `spec.jobTemplate.spec`.
    job_spec: Value,
    /// Job-scoped dependencies, in creation order.
    job_deps: Vec<&'a Value>,
    /// Dependencies no job references (created once for the Workflow).
    workflow_deps: Vec<&'a Value>,
    /// Names every group suffixes: job-scoped dependency names, then shared internal names.
    renamed: Vec<String>,
    /// Resolved gang intent (the §6.4 preserve rule is a no-op without one).
    gang: Option<GangSchedulerSpec>,
    namespace: Option<String>,
}

impl<'a> GroupRender<'a> {
    fn new(
        workflow: &'a Workflow,
        spec: &'a PlacementSpec,
        gpu_products: &'a [String],
        nodes_per_job: i64,
    ) -> Result<GroupRender<'a>, PlacementError> {
        let job_spec = workflow
            .spec
            .job_template
            .get("spec")
            .cloned()
            .unwrap_or(Value::Null);
        if !job_spec.is_object() {
            return Err(PlacementError::InvalidDocument {
                path: "spec.jobTemplate.spec".to_string(),
                reason: "must be an object".to_string(),
            });
        }
        for (i, dep) in workflow.spec.dependencies.iter().enumerate() {
            if !dep.is_object() {
                return Err(PlacementError::InvalidDocument {
                    path: format!("spec.dependencies[{i}]"),
                    reason: "must be an object".to_string(),
                });
            }
        }
        let deps: Vec<&Value> = workflow.spec.dependencies.iter().collect();
        let scoped = job_scoped(&deps, &job_spec);
        let job_deps: Vec<&Value> = creation_order(
            &deps
                .iter()
                .enumerate()
                .filter(|(i, _)| scoped.contains(i))
                .map(|(_, d)| *d)
                .collect::<Vec<_>>(),
        );
        let workflow_deps: Vec<&Value> = deps
            .iter()
            .enumerate()
            .filter(|(i, _)| !scoped.contains(i))
            .map(|(_, d)| *d)
            .collect();
        let mut renamed: Vec<String> = job_deps.iter().filter_map(|d| metadata_name(d)).collect();
        for s in cross_refs(&job_deps) {
            if !renamed.contains(&s) {
                renamed.push(s);
            }
        }
        let namespace = workflow
            .spec
            .namespace
            .clone()
            .or_else(|| workflow.metadata.namespace.clone())
            .filter(|n| !n.is_empty());
        Ok(GroupRender {
            workflow,
            spec,
            gpu_products,
            nodes_per_job,
            job_spec,
            job_deps,
            workflow_deps,
            renamed,
            gang: workflow
                .spec
                .gang_scheduler
                .as_ref()
                .and_then(GangSchedulerSpec::resolved),
            namespace,
        })
    }

    /// Dependencies created once for the Workflow.
    fn workflow_dependencies(&self) -> Vec<Value> {
        self.workflow_deps
            .iter()
            .map(|d| strip_when((*d).clone()))
            .collect()
    }

    /// The group's manifests: renamed dependency copies, then the TrainJob.
    fn manifests(&self, g: &Group, single: bool) -> Result<Vec<Value>, PlacementError> {
        let wf_name = &self.workflow.metadata.name;
        let job_name = if single {
            format!("{wf_name}-job")
        } else {
            format!("{wf_name}-{}", g.name)
        };
        let size = match self.spec.mode {
            PlacementMode::Pinned => i64::try_from(g.nodes.len()).unwrap_or(i64::MAX),
            PlacementMode::Unpinned => self.nodes_per_job,
        };
        let renames: BTreeMap<String, String> = self
            .renamed
            .iter()
            .map(|old| (old.clone(), format!("{old}-{job_name}")))
            .collect();

        let mut out = Vec::with_capacity(self.job_deps.len().saturating_add(1));
        for dep in &self.job_deps {
            let mut copy = strip_when(rename((*dep).clone(), &renames));
            if let Some(gang) = &self.gang {
                preserve_scheduling_fields(dep, &mut copy, gang);
            }
            if is_compute_domain(&copy) {
                if let Some(obj) = copy.as_object_mut() {
                    let spec = object_entry(obj, "spec", "ComputeDomain.spec")?;
                    spec.insert("numNodes".to_string(), json!(size));
                }
            }
            if let (Some(ns), Some(meta)) = (
                &self.namespace,
                copy.get_mut("metadata").and_then(Value::as_object_mut),
            ) {
                meta.entry("namespace")
                    .or_insert_with(|| Value::String(ns.clone()));
            }
            out.push(copy);
        }
        out.push(self.train_job(g, &job_name, size, &renames)?);
        Ok(out)
    }

    /// The group's TrainJob.
    fn train_job(
        &self,
        g: &Group,
        job_name: &str,
        size: i64,
        renames: &BTreeMap<String, String>,
    ) -> Result<Value, PlacementError> {
        let job_spec = rename(self.job_spec.clone(), renames);
        let mut train_job = match job_spec.pointer("/workload/trainJob") {
            Some(Value::Object(t)) => t.clone(),
            _ => {
                return Err(PlacementError::InvalidDocument {
                    path: "spec.jobTemplate.spec.workload.trainJob".to_string(),
                    reason: "must be an object".to_string(),
                });
            }
        };
        const TJ: &str = "spec.jobTemplate.spec.workload.trainJob";
        if self.spec.mode == PlacementMode::Pinned {
            let trainer = object_entry(&mut train_job, "trainer", &format!("{TJ}.trainer"))?;
            trainer.insert("numNodes".to_string(), json!(size));
        }
        let target = self.spec.target.as_ref();
        let hostnames: Vec<String> = match self.spec.mode {
            PlacementMode::Pinned => g.nodes.clone(),
            PlacementMode::Unpinned => target.map(|t| t.node_names.clone()).unwrap_or_default(),
        };
        let affinity = node_affinity(&hostnames, target, self.gpu_products);
        let targets = patch_targets(&train_job);
        let tols = tolerations(
            target,
            targets.iter().any(|t| t == "launcher"),
            self.spec.mode,
        );
        write_pod_placement(&mut train_job, &targets, affinity.as_ref(), &tols)?;

        let wf_name = &self.workflow.metadata.name;
        let meta = self.workflow.spec.job_template.get("metadata");
        let mut labels = string_map(
            meta.and_then(|m| m.get("labels")),
            "spec.jobTemplate.metadata.labels",
        )?;
        labels.extend(string_map(
            job_spec.pointer("/workloadMetadata/labels"),
            "spec.jobTemplate.spec.workloadMetadata.labels",
        )?);
        labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string());
        labels.insert(WORKFLOW_LABEL.to_string(), wf_name.clone());
        labels.insert(GROUP_LABEL.to_string(), g.name.clone());
        let mut annotations = string_map(
            meta.and_then(|m| m.get("annotations")),
            "spec.jobTemplate.metadata.annotations",
        )?;
        if self.spec.mode == PlacementMode::Pinned {
            annotations.insert(GROUP_NODES_ANNOTATION.to_string(), g.nodes.join(","));
        }

        let mut metadata = Map::new();
        metadata.insert("name".to_string(), Value::String(job_name.to_string()));
        if let Some(ns) = &self.namespace {
            metadata.insert("namespace".to_string(), Value::String(ns.clone()));
        }
        metadata.insert("labels".to_string(), to_json_map(labels));
        if !annotations.is_empty() {
            metadata.insert("annotations".to_string(), to_json_map(annotations));
        }
        Ok(json!({
            "apiVersion": TRAINJOB_API_VERSION,
            "kind": "TrainJob",
            "metadata": metadata,
            "spec": train_job,
        }))
    }
}

/// `{string: string}` as a JSON object (sorted keys).
fn to_json_map(m: BTreeMap<String, String>) -> Value {
    Value::Object(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

/// Reads an optional `{string: string}` map.
fn string_map(v: Option<&Value>, path: &str) -> Result<BTreeMap<String, String>, PlacementError> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o,
        Some(_) => {
            return Err(PlacementError::InvalidDocument {
                path: path.to_string(),
                reason: "must be a map of strings".to_string(),
            });
        }
    };
    obj.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            _ => Err(PlacementError::InvalidDocument {
                path: format!("{path}[\"{k}\"]"),
                reason: "must be a string".to_string(),
            }),
        })
        .collect()
}

/// `obj[key]` as an object, created when absent or null.
fn object_entry<'m>(
    obj: &'m mut Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'m mut Map<String, Value>, PlacementError> {
    let slot = obj.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.to_string(),
            reason: "must be an object".to_string(),
        })
}

/// `obj[key]` as a list, created when absent or null.
fn array_entry<'m>(
    obj: &'m mut Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'m mut Vec<Value>, PlacementError> {
    let slot = obj.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.to_string(),
            reason: "must be a list".to_string(),
        })
}

/// The replicated job names the TrainJob's runtimePatches name (any manager), in first-seen
/// order; `["node"]` when none.
fn patch_targets(train_job: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let patches = train_job
        .get("runtimePatches")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for patch in patches {
        let jobs = patch
            .pointer("/trainingRuntimeSpec/template/spec/replicatedJobs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for job in jobs {
            if let Some(name) = job.get("name").and_then(Value::as_str) {
                if !name.is_empty() && !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
    }
    if names.is_empty() {
        names.push("node".to_string());
    }
    names
}

/// Writes affinity (replacing `affinity.nodeAffinity`) and appends tolerations into the
/// controller-owned runtimePatches entry, for every target replicated job. Nothing is
/// written when there is nothing to write.
fn write_pod_placement(
    train_job: &mut Map<String, Value>,
    targets: &[String],
    affinity: Option<&Value>,
    tolerations: &[Value],
) -> Result<(), PlacementError> {
    if affinity.is_none() && tolerations.is_empty() {
        return Ok(());
    }
    const RP: &str = "spec.jobTemplate.spec.workload.trainJob.runtimePatches";
    let patches = array_entry(train_job, "runtimePatches", RP)?;
    let pos = patches
        .iter()
        .position(|p| p.get("manager").and_then(Value::as_str) == Some(CONTROLLER_PATCH_MANAGER));
    let idx = match pos {
        Some(i) => i,
        None => {
            patches.push(json!({"manager": CONTROLLER_PATCH_MANAGER}));
            patches.len().saturating_sub(1)
        }
    };
    let path = format!("{RP}[{idx}]");
    let entry = patches
        .get_mut(idx)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.clone(),
            reason: "must be an object".to_string(),
        })?;
    let rts = object_entry(
        entry,
        "trainingRuntimeSpec",
        &format!("{path}.trainingRuntimeSpec"),
    )?;
    let tmpl = object_entry(
        rts,
        "template",
        &format!("{path}.trainingRuntimeSpec.template"),
    )?;
    let spec = object_entry(
        tmpl,
        "spec",
        &format!("{path}.trainingRuntimeSpec.template.spec"),
    )?;
    let jobs_path = format!("{path}.trainingRuntimeSpec.template.spec.replicatedJobs");
    let jobs = array_entry(spec, "replicatedJobs", &jobs_path)?;
    for target in targets {
        let pos = jobs
            .iter()
            .position(|j| j.get("name").and_then(Value::as_str) == Some(target.as_str()));
        let j = match pos {
            Some(i) => i,
            None => {
                jobs.push(json!({"name": target}));
                jobs.len().saturating_sub(1)
            }
        };
        let jp = format!("{jobs_path}[{j}]");
        let job = jobs
            .get_mut(j)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| PlacementError::InvalidDocument {
                path: jp.clone(),
                reason: "must be an object".to_string(),
            })?;
        let t = object_entry(job, "template", &format!("{jp}.template"))?;
        let s = object_entry(t, "spec", &format!("{jp}.template.spec"))?;
        let pt = object_entry(s, "template", &format!("{jp}.template.spec.template"))?;
        let pod = object_entry(pt, "spec", &format!("{jp}.template.spec.template.spec"))?;
        if let Some(a) = affinity {
            let aff = object_entry(
                pod,
                "affinity",
                &format!("{jp}.template.spec.template.spec.affinity"),
            )?;
            aff.insert("nodeAffinity".to_string(), a.clone());
        }
        if !tolerations.is_empty() {
            array_entry(
                pod,
                "tolerations",
                &format!("{jp}.template.spec.template.spec.tolerations"),
            )?
            .extend(tolerations.iter().cloned());
        }
    }
    Ok(())
}

/// `metadata.name` of a document, when a non-empty string.
fn metadata_name(doc: &Value) -> Option<String> {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `kind` of a document, or `""`.
fn kind_of(doc: &Value) -> &str {
    doc.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// True for `resource.nvidia.com/*` `ComputeDomain`.
fn is_compute_domain(doc: &Value) -> bool {
    kind_of(doc) == "ComputeDomain"
        && doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("resource.nvidia.com/"))
}

/// True for `trainer.kubeflow.org/*` `TrainingRuntime`.
fn is_training_runtime(doc: &Value) -> bool {
    kind_of(doc) == "TrainingRuntime"
        && doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("trainer.kubeflow.org/"))
}

/// Drops the dependency-level `when` (not part of the Kubernetes object).
fn strip_when(mut doc: Value) -> Value {
    if let Some(obj) = doc.as_object_mut() {
        obj.shift_remove("when");
    }
    doc
}

/// True for strings shaped like a Kubernetes resource name (`^[a-z0-9][-a-z0-9.]*[a-z0-9]$`).
fn is_resource_name(s: &str) -> bool {
    let ok_edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut chars = s.chars();
    match (chars.next(), chars.next_back()) {
        (Some(first), Some(last)) => {
            ok_edge(first) && ok_edge(last) && chars.all(|c| ok_edge(c) || c == '-' || c == '.')
        }
        _ => false,
    }
}

/// Every string value in a document (map keys excluded). With `skip_meta`, values under any
/// `labels` or `annotations` key are left out.
fn strings_of(doc: &Value, skip_meta: bool, out: &mut Vec<String>) {
    match doc {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, skip_meta, out)),
        Value::Object(map) => {
            for (k, v) in map {
                if skip_meta && (k == "labels" || k == "annotations") {
                    continue;
                }
                strings_of(v, skip_meta, out);
            }
        }
        _ => {}
    }
}

/// All string values of a document.
fn all_strings(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    strings_of(doc, false, &mut out);
    out
}

/// Indices of the job-scoped dependencies: those whose name the job spec references,
/// transitively through references between dependencies and through resource names two
/// dependencies share. `Cluster*` kinds are never job-scoped (a per-job copy would collide
/// cluster-wide).
fn job_scoped(deps: &[&Value], job_spec: &Value) -> BTreeSet<usize> {
    let names: Vec<Option<String>> = deps.iter().map(|d| metadata_name(d)).collect();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(n) = n {
            by_name.insert(n.as_str(), i);
        }
    }
    let cluster = |i: usize| {
        deps.get(i)
            .is_none_or(|d| kind_of(d).starts_with("Cluster"))
    };
    let mut shared: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (i, dep) in deps.iter().enumerate() {
        if cluster(i) {
            continue;
        }
        for s in all_strings(dep) {
            if is_resource_name(&s) && !by_name.contains_key(s.as_str()) {
                shared.entry(s).or_default().insert(i);
            }
        }
    }
    let mut visited = BTreeSet::new();
    let mut queue = VecDeque::new();
    let promote = |i: usize, visited: &mut BTreeSet<usize>, queue: &mut VecDeque<usize>| {
        if !cluster(i) && visited.insert(i) {
            queue.push_back(i);
        }
    };
    for s in all_strings(job_spec) {
        if let Some(&i) = by_name.get(s.as_str()) {
            promote(i, &mut visited, &mut queue);
        }
    }
    while let Some(i) = queue.pop_front() {
        let Some(dep) = deps.get(i) else { continue };
        for s in all_strings(dep) {
            if let Some(&j) = by_name.get(s.as_str()) {
                promote(j, &mut visited, &mut queue);
            }
            if let Some(peers) = shared.get(&s) {
                for &p in peers {
                    promote(p, &mut visited, &mut queue);
                }
            }
        }
    }
    visited
}

/// Resource names (outside labels and annotations) that two or more job-scoped dependencies
/// share without being any dependency's name, e.g. a ComputeDomain's channel template name
/// that the TrainingRuntime's resource claim also names. Each group suffixes them too.
fn cross_refs(job_deps: &[&Value]) -> Vec<String> {
    let names: BTreeSet<String> = job_deps.iter().filter_map(|d| metadata_name(d)).collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for dep in job_deps {
        let mut strings = Vec::new();
        strings_of(dep, true, &mut strings);
        let unique: BTreeSet<String> = strings
            .into_iter()
            .filter(|s| is_resource_name(s) && !names.contains(s))
            .collect();
        for s in unique {
            *counts.entry(s).or_insert(0) += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, c)| *c >= 2)
        .map(|(s, _)| s)
        .collect()
}

/// Creation order: a dependency whose strings name another dependency comes after it;
/// otherwise the original order is kept (a cycle leaves the rest in original order).
fn creation_order<'v>(deps: &[&'v Value]) -> Vec<&'v Value> {
    let names: Vec<Option<String>> = deps.iter().map(|d| metadata_name(d)).collect();
    let n = deps.len();
    // needs[i]: dependencies i must come after.
    let mut needs: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (i, dep) in deps.iter().enumerate() {
        let strings: BTreeSet<String> = all_strings(dep).into_iter().collect();
        for (j, name) in names.iter().enumerate() {
            if let (Some(name), Some(set)) = (name, needs.get_mut(i)) {
                if j != i && strings.contains(name) {
                    set.insert(j);
                }
            }
        }
    }
    let mut placed: Vec<usize> = Vec::with_capacity(n);
    let mut done = BTreeSet::new();
    loop {
        let ready: Vec<usize> = (0..n)
            .filter(|i| !done.contains(i))
            .filter(|i| {
                needs
                    .get(*i)
                    .is_none_or(|s| s.iter().all(|j| done.contains(j)))
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        for i in ready {
            done.insert(i);
            placed.push(i);
        }
    }
    placed.extend((0..n).filter(|i| !done.contains(i)));
    placed
        .iter()
        .filter_map(|&i| deps.get(i).copied())
        .collect()
}

/// Keys whose string value refers to another object by name.
const REFERENCE_KEYS: &[&str] = &[
    "name",
    "claimName",
    "resourceClaimName",
    "resourceClaimTemplateName",
    "secretName",
];

/// Subtrees that hold free text or data, never references: left untouched.
const DATA_KEYS: &[&str] = &["labels", "annotations", "env", "args", "command", "data"];

/// Renames references: a string value equal to an old dependency name is replaced by its new
/// name where it sits under a reference key (`name`, `claimName`,
/// `resourceClaimTemplateName`, …), never inside labels, annotations, env, args, command or
/// data. A queue label, an env value or a program argument that happens to equal a dependency
/// name is therefore left as written.
fn rename(doc: Value, renames: &BTreeMap<String, String>) -> Value {
    match doc {
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| rename(v, renames)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        _ if DATA_KEYS.contains(&k.as_str()) => v,
                        Value::String(s) if REFERENCE_KEYS.contains(&k.as_str()) => {
                            Value::String(renames.get(&s).cloned().unwrap_or(s))
                        }
                        other => rename(other, renames),
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

/// The §6.4 preserve rule: on a TrainingRuntime copy, the queue label values (job and pod
/// template) and `schedulerName` of every replicated job are copied back from the
/// pre-rename document. Absent stays absent; nothing is inserted.
fn preserve_scheduling_fields(original: &Value, copy: &mut Value, gang: &GangSchedulerSpec) {
    if !is_training_runtime(original) {
        return;
    }
    let key = gang.queue_label_key().replace('~', "~0").replace('/', "~1");
    let Some(jobs) = original
        .pointer("/spec/template/spec/replicatedJobs")
        .and_then(Value::as_array)
    else {
        return;
    };
    for (i, job) in jobs.iter().enumerate() {
        for field in [
            format!("/template/metadata/labels/{key}"),
            format!("/template/spec/template/metadata/labels/{key}"),
            "/template/spec/template/spec/schedulerName".to_string(),
        ] {
            if let Some(before) = job.pointer(&field) {
                let at = format!("/spec/template/spec/replicatedJobs/{i}{field}");
                if let Some(slot) = copy.pointer_mut(&at) {
                    *slot = before.clone();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::{GPU_PRESENT_LABEL, GPU_PRODUCT_LABEL};

    fn gpu_node(name: &str, product: &str) -> Node {
        let mut labels = BTreeMap::new();
        labels.insert(GPU_PRESENT_LABEL.to_string(), "true".to_string());
        labels.insert(GPU_PRODUCT_LABEL.to_string(), product.to_string());
        Node {
            name: name.to_string(),
            labels,
            ..Node::default()
        }
    }

    fn fleet(n: usize, product: &str) -> Vec<Node> {
        (0..n)
            .map(|i| gpu_node(&format!("node-{i}"), product))
            .collect()
    }

    fn h100(n: usize) -> Vec<Node> {
        fleet(n, "NVIDIA-H100-80GB-HBM3")
    }

    fn runtime(name: &str) -> Value {
        json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": format!("{name}-runtime"), "labels": {"app": name}},
            "spec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"metadata": {"labels": {"app": name}},
                 "spec": {"template": {"spec": {"containers": [{"name": "node",
                   "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}]}}}}},
                {"name": "launcher", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}
            ]}}}
        })
    }

    /// An MPI Workflow named `name` with `numNodes` and the given orchestration.
    fn mpi_workflow(name: &str, num_nodes: i64, orchestration: Value) -> Workflow {
        serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "jobTemplate": {
                    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                    "spec": {
                        "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                        "workload": {"trainJob": {
                            "runtimeRef": {"name": format!("{name}-runtime"), "kind": "TrainingRuntime"},
                            "trainer": {"numNodes": num_nodes, "numProcPerNode": 8},
                            "runtimePatches": [{"manager": CONTROLLER_PATCH_MANAGER,
                                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}, {"name": "launcher"}]}}}}]
                        }}
                    }
                },
                "orchestration": orchestration,
                "dependencies": [runtime(name)]
            }
        }))
        .unwrap()
    }

    fn group_names(p: &Placement) -> Vec<&str> {
        p.groups.iter().map(|g| g.name.as_str()).collect()
    }

    fn train_job(g: &Group) -> &Value {
        g.manifests.last().unwrap()
    }

    fn patch_job<'v>(tj: &'v Value, name: &str) -> &'v Value {
        tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .unwrap()
    }

    fn match_expressions<'v>(tj: &'v Value, job: &str) -> &'v Vec<Value> {
        patch_job(tj, job)["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
            .as_array()
            .unwrap()
    }

    // ---- partitioning -------------------------------------------------------------------

    macro_rules! partition {
        ($($name:ident: $nodes:expr, $npj:expr => [$($group:expr),*];)*) => {$(
            #[test]
            fn $name() {
                let wf = mpi_workflow("wf", $npj, json!({}));
                let p = place(&wf, &h100($nodes)).unwrap();
                let want: Vec<&str> = vec![$($group),*];
                assert_eq!(group_names(&p), want);
            }
        )*};
    }

    partition! {
        part_18_by_2: 18, 2 => ["group-0", "group-1", "group-2", "group-3", "group-4", "group-5", "group-6", "group-7", "group-8"];
        part_16_by_4: 16, 4 => ["group-0", "group-1", "group-2", "group-3"];
        part_5_by_2: 5, 2 => ["group-0", "group-1", "group-2-overflow"];
        part_3_by_3: 3, 3 => ["group-0"];
        part_all_nodes: 3, 0 => ["group-0"];
    }

    #[test]
    fn overflow_borrows_from_last_full_group() {
        let groups = place_groups(&h100(5), 2, None, false).unwrap();
        assert_eq!(groups[0].nodes, ["node-0", "node-1"]);
        assert_eq!(groups[1].nodes, ["node-2", "node-3"]);
        assert_eq!(groups[2].nodes, ["node-3", "node-4"]);
        assert!(groups[2].overflow && !groups[1].overflow);
        let groups = place_groups(&h100(7), 3, None, false).unwrap();
        assert_eq!(groups[2].name, "group-2-overflow");
        assert_eq!(groups[2].nodes, ["node-4", "node-5", "node-6"]);
    }

    #[test]
    fn single_partial_group_when_no_full_group() {
        let groups = place_groups(&h100(3), 5, None, false).unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].name, "group-0");
        assert_eq!(groups[0].nodes.len(), 3);
        assert!(!groups[0].overflow);
    }

    macro_rules! partition_error {
        ($($name:ident: $nodes:expr, $npj:expr, $key:expr => $msg:expr;)*) => {$(
            #[test]
            fn $name() {
                let err = place_groups(&$nodes, $npj, $key, false).unwrap_err();
                assert_eq!(err.to_string(), $msg);
            }
        )*};
    }

    partition_error! {
        perr_zero: h100(4), 0, None => "nodesPerJob must be >= 1, got 0";
        perr_negative: h100(4), -2, None => "nodesPerJob must be >= 1, got -2";
        perr_no_nodes: Vec::<Node>::new(), 2, None => "no nodes provided";
        perr_missing_label: h100(2), 2, Some("topology.kubernetes.io/rack") => "node \"node-0\" missing topology label \"topology.kubernetes.io/rack\"";
    }

    fn racked(spec: &[(&str, &str)]) -> Vec<Node> {
        spec.iter()
            .map(|(name, rack)| {
                let mut n = gpu_node(name, "NVIDIA-GB200");
                n.labels
                    .insert("topology.kubernetes.io/rack".into(), rack.to_string());
                n
            })
            .collect()
    }

    fn summary(groups: &[Group]) -> Vec<(String, Vec<String>, Vec<String>, bool)> {
        groups
            .iter()
            .map(|g| {
                (
                    g.name.clone(),
                    g.nodes.clone(),
                    g.domains.clone(),
                    g.overflow,
                )
            })
            .collect()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn topology_overflow_reuses_largest_rack() {
        let nodes = racked(&[
            ("node-r1-0", "rack-1"),
            ("node-r1-1", "rack-1"),
            ("node-r1-2", "rack-1"),
            ("node-r1-3", "rack-1"),
            ("node-r2-0", "rack-2"),
            ("node-r2-1", "rack-2"),
            ("node-r2-2", "rack-2"),
            ("node-r2-3", "rack-2"),
            ("node-r3-0", "rack-3"),
            ("node-r3-1", "rack-3"),
        ]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&["node-r1-0", "node-r1-1", "node-r1-2", "node-r1-3"]),
                    s(&["rack-1"]),
                    false
                ),
                (
                    "group-1".into(),
                    s(&["node-r2-0", "node-r2-1", "node-r2-2", "node-r2-3"]),
                    s(&["rack-2"]),
                    false
                ),
                (
                    "group-2-overflow".into(),
                    s(&["node-r1-0", "node-r1-1", "node-r3-0", "node-r3-1"]),
                    s(&["rack-1", "rack-3"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_packs_into_fewest_domains() {
        let nodes = racked(&[
            ("node-r1-0", "rack-1"),
            ("node-r1-1", "rack-1"),
            ("node-r2-0", "rack-2"),
            ("node-r2-1", "rack-2"),
            ("node-r3-0", "rack-3"),
            ("node-r3-1", "rack-3"),
            ("node-r4-0", "rack-4"),
            ("node-r4-1", "rack-4"),
            ("node-r5-0", "rack-5"),
            ("node-r5-1", "rack-5"),
            ("node-r6-0", "rack-6"),
            ("node-r6-1", "rack-6"),
        ]);
        let groups = place_groups(&nodes, 5, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&[
                        "node-r1-0",
                        "node-r1-1",
                        "node-r2-0",
                        "node-r2-1",
                        "node-r3-0"
                    ]),
                    s(&["rack-1", "rack-2", "rack-3"]),
                    false
                ),
                (
                    "group-1".into(),
                    s(&[
                        "node-r4-0",
                        "node-r4-1",
                        "node-r5-0",
                        "node-r5-1",
                        "node-r6-0"
                    ]),
                    s(&["rack-4", "rack-5", "rack-6"]),
                    false
                ),
                (
                    "group-2-overflow".into(),
                    s(&[
                        "node-r1-0",
                        "node-r3-0",
                        "node-r3-1",
                        "node-r6-0",
                        "node-r6-1"
                    ]),
                    s(&["rack-1", "rack-3", "rack-6"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_later_overflow_groups_stay_full() {
        // The original drains its pools across overflow groups, which would make the third
        // overflow group [a3, c1]; refreshed pools keep it at nodesPerJob.
        let nodes = racked(&[
            ("a0", "A"),
            ("a1", "A"),
            ("a2", "A"),
            ("a3", "A"),
            ("a4", "A"),
            ("b0", "B"),
            ("b1", "B"),
            ("b2", "B"),
            ("c0", "C"),
            ("c1", "C"),
        ]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                (
                    "group-0".into(),
                    s(&["a0", "a1", "a2", "a3"]),
                    s(&["A"]),
                    false
                ),
                (
                    "group-1-overflow".into(),
                    s(&["b0", "b1", "b2", "c0"]),
                    s(&["B", "C"]),
                    true
                ),
                (
                    "group-2-overflow".into(),
                    s(&["a0", "a1", "a2", "a4"]),
                    s(&["A"]),
                    true
                ),
                (
                    "group-3-overflow".into(),
                    s(&["a0", "a1", "c0", "c1"]),
                    s(&["A", "C"]),
                    true
                ),
            ]
        );
    }

    #[test]
    fn topology_partial_group_when_nothing_fills() {
        let nodes = racked(&[("a", "r1"), ("b", "r2"), ("c", "r2")]);
        let groups = place_groups(&nodes, 4, Some("topology.kubernetes.io/rack"), false).unwrap();
        assert_eq!(
            summary(&groups),
            vec![(
                "group-0".into(),
                s(&["a", "b", "c"]),
                s(&["r1", "r2"]),
                false
            )]
        );
    }

    #[test]
    fn strict_domain_one_group_per_domain() {
        let nodes = racked(&[
            ("a", "r2"),
            ("b", "r1"),
            ("c", "r1"),
            ("d", "r3"),
            ("e", "r3"),
        ]);
        let groups = place_groups(&nodes, 2, Some("topology.kubernetes.io/rack"), true).unwrap();
        assert_eq!(
            summary(&groups),
            vec![
                ("group-0".into(), s(&["b", "c"]), s(&["r1"]), false),
                ("group-1".into(), s(&["d", "e"]), s(&["r3"]), false),
                ("group-2".into(), s(&["a"]), s(&["r2"]), false),
            ]
        );
    }

    #[test]
    fn topology_key_from_orchestration_drives_pinned_partition() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"topology": {"topologyKey": "topology.kubernetes.io/rack"}}),
        );
        let nodes = racked(&[("a", "r1"), ("b", "r2"), ("c", "r1"), ("d", "r2")]);
        let p = place(&wf, &nodes).unwrap();
        assert_eq!(p.groups[0].nodes, ["a", "c"]);
        assert_eq!(p.groups[0].domains, ["r1"]);
    }

    // ---- shortfall and filters ----------------------------------------------------------

    macro_rules! place_error {
        ($($name:ident: $wf:expr, $nodes:expr => $msg:expr;)*) => {$(
            #[test]
            fn $name() {
                let err = place(&$wf, &$nodes).unwrap_err();
                assert_eq!(err.to_string(), $msg);
            }
        )*};
    }

    fn mixed_arch() -> Vec<Node> {
        let mut nodes = h100(6);
        nodes.push(gpu_node("node-6", "NVIDIA-A100-SXM4-40GB"));
        nodes.push(gpu_node("node-7", "NVIDIA-A100-SXM4-40GB"));
        nodes
    }

    fn with_allocatable(mut nodes: Vec<Node>, gpus: &[(usize, &str)]) -> Vec<Node> {
        for (i, q) in gpus {
            nodes[*i]
                .allocatable
                .insert(GPU_RESOURCE.into(), q.to_string());
        }
        nodes
    }

    place_error! {
        unpinned_shortfall: mpi_workflow("wf", 8, json!({"placement": "Unpinned"})), h100(6)
            => "Not enough schedulable nodes: need 8, found 6";
        pinned_shortfall: mpi_workflow("wf", 8, json!({})), h100(6)
            => "Not enough schedulable nodes: need 8, found 6";
        unpinned_shortfall_arch: mpi_workflow("wf", 8, json!({"placement": "Unpinned"})), mixed_arch()
            => "Not enough schedulable nodes: need 8, found 6. 2 node(s) matched the target but were excluded for not being GPU architecture h100: node-6, node-7. Set nodesPerJob to 6, or narrow the target to one architecture";
        shortfall_capacity: mpi_workflow("wf", 4, json!({})), with_allocatable(h100(4), &[(1, "4"), (3, "2")])
            => "Not enough schedulable nodes: need 4, found 2. 2 node(s) matched the target but were excluded for having fewer than the 8 allocatable nvidia.com/gpu the workload requests per node: node-1 has 4, node-3 has 2. Set nodesPerJob to 2, or lower gpusPerNode";
        shortfall_both: mpi_workflow("wf", 8, json!({})), with_allocatable(mixed_arch(), &[(0, "4")])
            => "Not enough schedulable nodes: need 8, found 5. 2 node(s) matched the target but were excluded for not being GPU architecture h100: node-6, node-7. 1 node(s) matched the target but were excluded for having fewer than the 8 allocatable nvidia.com/gpu the workload requests per node: node-0 has 4. Set nodesPerJob to 5, or narrow the target to one architecture, or lower gpusPerNode";
        no_capacity: mpi_workflow("wf", 1, json!({})), with_allocatable(h100(2), &[(0, "4"), (1, "6")])
            => "No node can supply the 8 nvidia.com/gpu the workload requests per node; best available is 6";
        unpinned_zero: mpi_workflow("wf", 0, json!({"placement": "Unpinned"})), h100(2)
            => "nodesPerJob must be >= 1, got 0";
        no_targets: mpi_workflow("wf", 1, json!({"target": {"nodeSelector": {"x": "y"}}})), h100(2)
            => "No target nodes found matching orchestration target";
        unpinned_diagnose: mpi_workflow("wf", 1, json!({"placement": "Unpinned", "diagnose": {"minGroupSize": 2}})), h100(2)
            => UNPINNED_DIAGNOSE;
        unpinned_strict: mpi_workflow("wf", 1, json!({"placement": "Unpinned", "topology": {"topologyKey": "rack", "strictDomain": true}})), h100(2)
            => UNPINNED_STRICT_DOMAIN;
        unknown_placement: mpi_workflow("wf", 1, json!({"placement": "Spread"})), h100(2)
            => "spec.orchestration.placement: unsupported value \"Spread\": must be Pinned or Unpinned";
        bad_target: mpi_workflow("wf", 1, json!({"target": {"nodeSelector": "x"}})), h100(2)
            => "spec.orchestration.target: invalid type: string \"x\", expected a map";
        pinned_diagnose: mpi_workflow("wf", 1, json!({"diagnose": {}})), h100(2)
            => "orchestration.diagnose is not supported by placement: diagnose groups are built by the diagnose stages";
    }

    #[test]
    fn exact_rejection_messages() {
        assert_eq!(
            PlacementError::UnpinnedWithDiagnose.to_string(),
            "orchestration.placement: Unpinned is incompatible with orchestration.diagnose: diagnose isolates faults by partitioning nodes into groups and bisecting the failures, which requires the node pinning Unpinned removes; drop one of the two"
        );
        assert_eq!(
            PlacementError::UnpinnedWithStrictDomain.to_string(),
            "orchestration.placement: Unpinned is incompatible with orchestration.topology.strictDomain: strictDomain runs one job per topology domain, Unpinned runs exactly one job; to confine a single unpinned job to one domain, name the domain label in target.matchExpressions instead"
        );
    }

    #[test]
    fn unpinned_ignores_topology_key() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "topology": {"topologyKey": "rack"}}),
        );
        let p = place(&wf, &h100(3)).unwrap();
        assert_eq!(group_names(&p), ["group-0"]);
        assert!(p.groups[0].nodes.is_empty());
    }

    #[test]
    fn missing_num_nodes_is_an_error() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"]
            .as_object_mut()
            .unwrap()
            .remove("numNodes");
        assert_eq!(
            place(&wf, &h100(2)).unwrap_err().to_string(),
            "Failed to detect nodesPerJob: TrainJob.Trainer.NumNodes not set"
        );
    }

    #[test]
    fn exclusions_are_recorded_with_reasons() {
        let mut nodes = with_allocatable(mixed_arch(), &[(0, "4"), (1, "0")]);
        let mut cordoned = gpu_node("node-9", "NVIDIA-H100-80GB-HBM3");
        cordoned.unschedulable = true;
        nodes.push(cordoned);
        let p = place(&mpi_workflow("wf", 1, json!({})), &nodes).unwrap();
        assert_eq!(p.total_nodes, 5);
        assert_eq!(p.gpu_architecture, "h100");
        assert_eq!(
            p.excluded,
            vec![
                ("node-9".to_string(), "cordoned (spec.unschedulable)".to_string()),
                ("node-6".to_string(), "GPU architecture a100 is not the detected architecture h100".to_string()),
                ("node-7".to_string(), "GPU architecture a100 is not the detected architecture h100".to_string()),
                ("node-0".to_string(), "allocatable nvidia.com/gpu 4 is fewer than the 8 the workload requests per node".to_string()),
            ]
        );
    }

    #[test]
    fn unlabelled_nodes_are_excluded_when_others_are_labelled() {
        let mut nodes = h100(2);
        nodes.push(gpu_node("node-2", ""));
        nodes[2].labels.remove(GPU_PRODUCT_LABEL);
        let p = place(&mpi_workflow("wf", 1, json!({})), &nodes).unwrap();
        assert_eq!(p.total_nodes, 2);
        let p = place(&mpi_workflow("wf", 1, json!({})), &[nodes[2].clone()]).unwrap();
        assert_eq!(p.gpu_architecture, "unknown");
        assert_eq!(p.total_nodes, 1);
        assert!(p.gpu_products.is_empty());
    }

    // ---- gpu need and quantities --------------------------------------------------------

    macro_rules! quantity {
        ($($name:ident: $q:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(quantity_as_int($q), $want); }
        )*};
    }

    quantity! {
        q_plain: "8" => Some(8);
        q_plus: "+4" => Some(4);
        q_negative: "-2" => Some(-2);
        q_decimal_whole: "8.0" => Some(8);
        q_decimal_fraction: "1.5" => None;
        q_kilo: "2k" => Some(2000);
        q_kibi: "1Ki" => Some(1024);
        q_frac_kibi: "0.5Ki" => Some(512);
        q_milli_whole: "4000m" => Some(4);
        q_milli_fraction: "1500m" => None;
        q_exponent: "1e3" => Some(1000);
        q_garbage: "eight" => None;
        q_empty: "" => None;
        q_bad_suffix: "8x" => None;
        q_spaces: " 8 " => Some(8);
    }

    fn wf_with(job_template: Value, deps: Value) -> Workflow {
        serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
            "spec": {"jobTemplate": job_template, "dependencies": deps}
        }))
        .unwrap()
    }

    macro_rules! need {
        ($($name:ident: $jt:expr, $deps:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() { assert_eq!(gpu_need(&wf_with($jt, $deps)), $want); }
        )*};
    }

    need! {
        need_none: json!({"spec": {}}), json!([]) => None;
        need_dep_string: json!({"spec": {}}), json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Some(4);
        need_largest: json!({"spec": {"trainer": {"resourcesPerNode": {"requests": {"nvidia.com/gpu": 8}}}}}),
            json!([{"spec": {"limits": {"nvidia.com/gpu": "4"}}}]) => Some(8);
        need_only_requests_limits: json!({"spec": {"labels": {"nvidia.com/gpu": "16"}, "x": {"nvidia.com/gpu": 32}}}), json!([]) => None;
        need_nested_list: json!({"spec": {"a": [{"b": {"requests": {"nvidia.com/gpu": "2"}}}]}}), json!([]) => Some(2);
        need_zero: json!({"spec": {"limits": {"nvidia.com/gpu": "0"}}}), json!([]) => Some(0);
        need_negative_counts_zero: json!({"spec": {"limits": {"nvidia.com/gpu": -3}}}), json!([]) => Some(0);
        need_unparseable_skipped: json!({"spec": {"limits": {"nvidia.com/gpu": "lots"}}}), json!([]) => None;
    }

    // ---- affinity and tolerations -------------------------------------------------------

    #[test]
    fn pinned_affinity_and_labels() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "a": "b"}}}),
        );
        let mut nodes = h100(4);
        for n in &mut nodes {
            n.labels.insert("a".into(), "b".into());
        }
        let p = place(&wf, &nodes).unwrap();
        let tj = train_job(&p.groups[1]);
        assert_eq!(tj["metadata"]["name"], "wf-group-1");
        assert_eq!(tj["metadata"]["namespace"], "team");
        assert_eq!(
            tj["metadata"]["labels"],
            json!({
                "app.kubernetes.io/managed-by": "nvcre",
                "kueue.x-k8s.io/queue-name": "q",
                "nvcre.nvidia.com/group": "group-1",
                "nvcre.nvidia.com/workflow": "wf",
                "team": "a"
            })
        );
        assert_eq!(
            tj["metadata"]["annotations"],
            json!({"note": "x", "nvcre.nvidia.com/group-nodes": "node-2,node-3"})
        );
        assert_eq!(tj["spec"]["trainer"]["numNodes"], 2);
        for job in ["node", "launcher"] {
            assert_eq!(
                match_expressions(tj, job),
                &vec![
                    json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-2", "node-3"]}),
                    json!({"key": "a", "operator": "In", "values": ["b"]}),
                    // nodeSelector's gpu.product term equals the products term: kept once.
                    json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}),
                ]
            );
            assert_eq!(
                patch_job(tj, job)["template"]["spec"]["template"]["spec"]["tolerations"],
                json!([{"operator": "Exists"}])
            );
        }
    }

    #[test]
    fn unpinned_clique_target_reaches_both_patches_without_hostname() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "target": {"matchExpressions": [
                {"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["clique-0"]}]}}),
        );
        let mut nodes = fleet(4, "NVIDIA-GB200");
        for (i, n) in nodes.iter_mut().enumerate() {
            n.labels
                .insert("nvidia.com/gpu.clique".into(), format!("clique-{}", i % 2));
        }
        let p = place(&wf, &nodes).unwrap();
        assert_eq!(p.total_nodes, 2);
        assert_eq!(group_names(&p), ["group-0"]);
        let tj = train_job(&p.groups[0]);
        assert_eq!(tj["metadata"]["name"], "wf-job");
        assert!(
            tj["metadata"]["annotations"]
                .get(GROUP_NODES_ANNOTATION)
                .is_none()
        );
        assert_eq!(tj["spec"]["trainer"]["numNodes"], 2);
        for job in ["launcher", "node"] {
            let exprs = match_expressions(tj, job);
            assert_eq!(
                exprs,
                &vec![
                    json!({"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["clique-0"]}),
                    json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-GB200"]}),
                ]
            );
            assert!(exprs.iter().all(|e| e["key"] != HOSTNAME_LABEL));
            assert_eq!(
                patch_job(tj, job)["template"]["spec"]["template"]["spec"]["tolerations"],
                json!([
                    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
                    {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
                ])
            );
        }
    }

    #[test]
    fn unpinned_node_names_become_the_hostname_term() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "target": {"nodeNames": ["node-3", "node-1"]}}),
        );
        let p = place(&wf, &h100(4)).unwrap();
        let exprs = match_expressions(train_job(&p.groups[0]), "node");
        assert_eq!(
            exprs[0],
            json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-3", "node-1"]})
        );
    }

    macro_rules! affinity {
        ($($name:ident: $hosts:expr, $target:expr, $products:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                let t: Option<TargetSpec> = $target;
                let hosts: Vec<String> = $hosts.iter().map(|h: &&str| h.to_string()).collect();
                let products: Vec<String> = $products.iter().map(|h: &&str| h.to_string()).collect();
                let got = node_affinity(&hosts, t.as_ref(), &products).map(|a|
                    a["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"].clone());
                let want: Option<Value> = $want;
                assert_eq!(got, want);
            }
        )*};
    }

    fn tspec(v: Value) -> Option<TargetSpec> {
        Some(serde_json::from_value(v).unwrap())
    }

    affinity! {
        aff_nothing: [] as [&str; 0], None, [] as [&str; 0] => None;
        aff_empty_products_skipped: [] as [&str; 0], None, [""] => None;
        aff_selector_sorted: [] as [&str; 0], tspec(json!({"nodeSelector": {"z": "1", "a": "2"}})), [] as [&str; 0]
            => Some(json!([{"key": "a", "operator": "In", "values": ["2"]}, {"key": "z", "operator": "In", "values": ["1"]}]));
        aff_products_distinct_sorted: ["h"], None, ["P2", "P1", "P2"]
            => Some(json!([{"key": "kubernetes.io/hostname", "operator": "In", "values": ["h"]},
                           {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["P1", "P2"]}]));
        aff_dedupe_first_kept: [] as [&str; 0], tspec(json!({"nodeSelector": {"k": "v"}, "matchExpressions": [
                {"key": "k", "operator": "In", "values": ["v"]}, {"key": "e", "operator": "Exists"}, {"key": "e", "operator": "Exists"}]})), [] as [&str; 0]
            => Some(json!([{"key": "k", "operator": "In", "values": ["v"]}, {"key": "e", "operator": "Exists"}]));
        aff_same_key_different_values_kept: [] as [&str; 0], tspec(json!({"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]}]})), ["B"]
            => Some(json!([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]},
                           {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["B"]}]));
        aff_names_and_taints_not_translated: [] as [&str; 0], tspec(json!({"nodeNames": ["a"], "taintSelectors": [{"key": "k"}]})), [] as [&str; 0] => None;
    }

    macro_rules! toleration {
        ($($name:ident: $target:expr, $launcher:expr, $mode:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                let t: Option<TargetSpec> = $target;
                assert_eq!(Value::Array(tolerations(t.as_ref(), $launcher, $mode)), $want);
            }
        )*};
    }

    toleration! {
        tol_selectors_win: tspec(json!({"taintSelectors": [{"key": "a", "value": "v", "effect": "NoSchedule"}, {"key": "b"}, {"key": "c", "value": "", "effect": "NoExecute"}]})), false, PlacementMode::Unpinned
            => json!([{"key": "a", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                      {"key": "b", "operator": "Exists"},
                      {"key": "c", "operator": "Exists", "effect": "NoExecute"}]);
        tol_non_mpi_none: None, false, PlacementMode::Pinned => json!([]);
        tol_non_mpi_unpinned_none: None, false, PlacementMode::Unpinned => json!([]);
        tol_mpi_pinned: None, true, PlacementMode::Pinned => json!([{"operator": "Exists"}]);
        tol_mpi_unpinned: None, true, PlacementMode::Unpinned => json!([
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]);
    }

    #[test]
    fn torch_job_without_patches_gets_a_node_entry() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]
            .as_object_mut()
            .unwrap()
            .remove("runtimePatches");
        let p = place(&wf, &h100(1)).unwrap();
        let tj = train_job(&p.groups[0]);
        let jobs = &tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"];
        assert_eq!(
            tj["spec"]["runtimePatches"][0]["manager"],
            CONTROLLER_PATCH_MANAGER
        );
        assert_eq!(jobs.as_array().unwrap().len(), 1);
        assert_eq!(jobs[0]["name"], "node");
        // non-MPI: affinity but no tolerations
        assert!(
            jobs[0]["template"]["spec"]["template"]["spec"]
                .get("tolerations")
                .is_none()
        );
        assert!(
            jobs[0]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"].is_object()
        );
    }

    #[test]
    fn existing_affinity_is_replaced_and_tolerations_appended() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]["runtimePatches"][0]["trainingRuntimeSpec"]
            ["template"]["spec"]["replicatedJobs"][0] = json!({
            "name": "node",
            "template": {"spec": {"template": {"spec": {
                "affinity": {"nodeAffinity": {"old": true}, "podAffinity": {"keep": true}},
                "tolerations": [{"key": "mine", "operator": "Exists"}]}}}}
        });
        let p = place(&wf, &h100(1)).unwrap();
        let pod =
            &patch_job(train_job(&p.groups[0]), "node")["template"]["spec"]["template"]["spec"];
        assert_eq!(pod["affinity"]["podAffinity"], json!({"keep": true}));
        assert!(pod["affinity"]["nodeAffinity"].get("old").is_none());
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "mine", "operator": "Exists"}, {"operator": "Exists"}])
        );
    }

    // ---- dependencies per group ---------------------------------------------------------

    fn gb200_workflow(num_nodes: i64) -> Workflow {
        let mut rt = runtime("wf");
        rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            ["resourceClaims"] =
            json!([{"name": "compute-domain", "resourceClaimTemplateName": "wf-channel"}]);
        let cd = json!({
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": "wf-compute-domain", "labels": {"app": "wf"}},
            "spec": {"numNodes": 4, "channel": {"allocationMode": "Single", "resourceClaimTemplate": {"name": "wf-channel"}}}
        });
        let mut wf = mpi_workflow("wf", num_nodes, json!({}));
        wf.spec.dependencies = vec![
            rt,
            cd,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated"}, "data": {"k": "v"}}),
        ];
        wf
    }

    #[test]
    fn compute_domain_per_group_sized_to_group() {
        let p = place(&gb200_workflow(4), &fleet(8, "NVIDIA-GB200")).unwrap();
        assert_eq!(group_names(&p), ["group-0", "group-1"]);
        assert_eq!(p.workflow_dependencies.len(), 1);
        assert_eq!(p.workflow_dependencies[0]["metadata"]["name"], "unrelated");
        for g in &p.groups {
            let job = format!("wf-{}", g.name);
            assert_eq!(g.manifests.len(), 3);
            let (rt, cd, tj) = (&g.manifests[0], &g.manifests[1], &g.manifests[2]);
            assert_eq!(rt["kind"], "TrainingRuntime");
            assert_eq!(rt["metadata"]["name"], format!("wf-runtime-{job}"));
            assert_eq!(rt["metadata"]["namespace"], "team");
            assert_eq!(cd["kind"], "ComputeDomain");
            assert_eq!(cd["metadata"]["name"], format!("wf-compute-domain-{job}"));
            assert_eq!(cd["spec"]["numNodes"], 4);
            assert_eq!(
                cd["spec"]["channel"]["resourceClaimTemplate"]["name"],
                format!("wf-channel-{job}")
            );
            assert_eq!(
                rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                    ["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
                format!("wf-channel-{job}")
            );
            // Structural names and labels stay.
            assert_eq!(
                rt["spec"]["template"]["spec"]["replicatedJobs"][0]["name"],
                "node"
            );
            assert_eq!(rt["metadata"]["labels"]["app"], "wf");
            assert_eq!(tj["kind"], "TrainJob");
            assert_eq!(tj["metadata"]["name"], job);
            assert_eq!(
                tj["spec"]["runtimeRef"]["name"],
                format!("wf-runtime-{job}")
            );
        }
    }

    #[test]
    fn compute_domain_sized_to_all_nodes_group() {
        let p = place(&gb200_workflow(0), &fleet(3, "NVIDIA-GB200")).unwrap();
        assert_eq!(p.nodes_per_job, 3);
        let g = &p.groups[0];
        assert_eq!(g.manifests[1]["spec"]["numNodes"], 3);
        assert_eq!(
            g.manifests[1]["metadata"]["name"],
            "wf-compute-domain-wf-job"
        );
        assert_eq!(g.manifests[2]["spec"]["trainer"]["numNodes"], 3);
    }

    #[test]
    fn compute_domain_unpinned_sized_to_nodes_per_job() {
        let mut wf = gb200_workflow(2);
        wf.spec
            .orchestration
            .insert("placement".into(), json!("Unpinned"));
        let p = place(&wf, &fleet(5, "NVIDIA-GB200")).unwrap();
        assert_eq!(p.groups[0].manifests[1]["spec"]["numNodes"], 2);
    }

    #[test]
    fn dependency_creation_order_follows_references() {
        let a = json!({"kind": "A", "metadata": {"name": "a"}, "ref": "b"});
        let b = json!({"kind": "B", "metadata": {"name": "b"}});
        let c = json!({"kind": "C", "metadata": {"name": "c"}});
        let order: Vec<&str> = creation_order(&[&a, &b, &c])
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["B", "C", "A"]);
        let x = json!({"kind": "X", "metadata": {"name": "x"}, "ref": "y"});
        let y = json!({"kind": "Y", "metadata": {"name": "y"}, "ref": "x"});
        let order: Vec<&str> = creation_order(&[&x, &y])
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["X", "Y"]);
    }

    #[test]
    fn cluster_kinds_are_never_job_scoped() {
        let crt = json!({"kind": "ClusterTrainingRuntime", "metadata": {"name": "wf-runtime"}});
        let spec = json!({"workload": {"trainJob": {"runtimeRef": {"name": "wf-runtime"}}}});
        assert!(job_scoped(&[&crt], &spec).is_empty());
    }

    #[test]
    fn gang_fields_survive_renaming() {
        // The queue is spelled like the runtime's name, so renaming would rewrite it.
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.gang_scheduler = Some(crate::api::GangSchedulerSpec {
            scheduler_name: "wf-runtime".into(),
            queue: Some("wf-runtime".into()),
            queue_label_key: None,
        });
        let rj = &mut wf.spec.dependencies[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        rj["metadata"]["labels"]["kai.scheduler/queue"] = json!("wf-runtime");
        rj["spec"]["template"]["spec"]["schedulerName"] = json!("wf-runtime");
        let p = place(&wf, &h100(1)).unwrap();
        let rt = &p.groups[0].manifests[0];
        assert_eq!(rt["metadata"]["name"], "wf-runtime-wf-job");
        let job = &rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        assert_eq!(
            job["metadata"]["labels"]["kai.scheduler/queue"],
            "wf-runtime"
        );
        assert_eq!(
            job["spec"]["template"]["spec"]["schedulerName"],
            "wf-runtime"
        );
        // Absent stays absent.
        let launcher = &rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"];
        assert!(
            launcher["spec"]["template"]["spec"]
                .get("schedulerName")
                .is_none()
        );

        // Only references are renamed: a schedulerName or label spelled like a dependency is
        // not a reference, with or without a gang intent.
        wf.spec.gang_scheduler = None;
        let p = place(&wf, &h100(1)).unwrap();
        let job =
            &p.groups[0].manifests[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        assert_eq!(
            job["spec"]["template"]["spec"]["schedulerName"],
            "wf-runtime"
        );
        let train_job = p.groups[0].manifests.last().unwrap();
        assert_eq!(train_job["spec"]["runtimeRef"]["name"], "wf-runtime-wf-job");
    }

    #[test]
    fn dependency_when_is_stripped() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.dependencies[0]["when"] = json!({"platform": {"equals": "aws"}});
        let p = place(&wf, &h100(1)).unwrap();
        assert!(p.groups[0].manifests[0].get("when").is_none());
    }

    #[test]
    fn resource_name_shape() {
        for (s, want) in [
            ("wf-channel", true),
            ("a", false),
            ("ab", true),
            ("A-b", false),
            ("a.b-c", true),
            ("-a", false),
            ("a/b", false),
        ] {
            assert_eq!(is_resource_name(s), want, "{s}");
        }
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
}
