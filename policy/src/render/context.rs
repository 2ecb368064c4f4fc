//! The node context of a render: which platform and GPU architecture the render is for, and
//! which nodes it places on.
//!
//! It comes from the flags (`--platform`, `--gpu-arch`) or from a node list (`--nodes-file`):
//! the first target node by name names the platform, the GPU architecture is a majority vote
//! over the target nodes. With flags only, [`synthetic_nodes`] stands in for the fleet when
//! nodes are needed (`--expand`). NIC resource detection reads the nodes too.

use nvcre_engine::{Document, RuleSet};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::TargetSpec;
use crate::detect;
use crate::error::PolicyError;
use crate::nodes::{self, Node};

/// The node context of a render.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderRequest {
    /// `--platform`: resolve overrides for this platform and enforce the contract.
    pub platform: Option<String>,
    /// `--gpu-arch`, in any accepted spelling.
    pub gpu_arch: Option<String>,
    /// Use the unknown architecture ("") instead of failing when none can be determined
    /// (`check` does not need one for the construction checks).
    pub allow_unknown_arch: bool,
    /// The caller already ran the admission stage on this document and checked its overrides'
    /// `when` values (`check` does, to report every admission finding): skip both.
    pub admitted: bool,
    /// Report every failing post-override check (`check`) instead of the first (`render`).
    pub report_all: bool,
    /// `--nodes-file`: the cluster's nodes (a NodeList or Node documents). Platform and
    /// architecture are detected from the target nodes among them; exclusive with
    /// `platform` / `gpu_arch`.
    pub nodes: Option<std::sync::Arc<Vec<Node>>>,
    /// The caller reads the render's findings and warnings, not the Workflow (`check` without
    /// `--nodes-file`): a render without a platform then leaves the platform rows out of
    /// `spec.overrides` when no rule of the construction `workload-labels` stage can read that
    /// list, and fills in only the part of each row the build reads (its `when`, `preCommand`
    /// and `mpiArgs`). Every row is still rendered and decoded, so its errors are the same.
    pub findings_only: bool,
}

/// The node context a render resolved: from flags (one synthetic node per job slot, made on
/// demand) or from the nodes given.
#[derive(Debug, Clone, Default)]
pub struct NodeContext {
    /// Platform ("" when unknown and no platform was forced).
    pub platform: String,
    /// GPU architecture ("" when unknown).
    pub gpu_architecture: String,
    /// The target nodes (given nodes after discovery, sorted by name); empty for flags.
    pub nodes: Vec<Node>,
    /// True when the context came from `--nodes-file`.
    pub from_nodes: bool,
    /// What the discovery of the target nodes noted (architecture unknown, cordoned nodes left
    /// out): `render` prints each, `check` and the controller report each as a finding of its
    /// rule.
    pub notes: Vec<ContextNote>,
}

impl NodeContext {
    /// Its notes as `render` prints them, led by `doc`'s place among several documents.
    pub(super) fn notes_of(&self, doc: &Document) -> impl Iterator<Item = super::Note> + '_ {
        let place = crate::document_place(doc);
        self.notes.iter().map(move |n| super::Note {
            at: Some(place.clone()),
            ..super::Note::from(n.text.clone())
        })
    }

    /// Its notes as warnings of their built-in rules, at `path` (the target) of `doc` when
    /// `doc` has it, else at its start: what `check` and the controller report.
    pub(super) fn findings_of(
        &self,
        doc: &Document,
        path: &nvcre_engine::FieldPath,
    ) -> Vec<nvcre_engine::Finding> {
        self.notes
            .iter()
            .map(|n| {
                let pack = crate::builtins::built_in_rule(n.rule).map_or("input", |r| r.pack);
                crate::check::built_in_finding(
                    doc,
                    (n.rule, pack, nvcre_engine::Severity::Warning),
                    n.text.clone(),
                    Some(path).filter(|p| p.get(&doc.value).is_some()),
                    doc.spans.lookup(&nvcre_engine::FieldPath::root()),
                )
            })
            .collect()
    }
}

/// A note of node discovery: the built-in rule it is reported under, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextNote {
    /// Its `ruleId` (one of [`crate::builtins::BUILT_IN_RULES`]).
    pub rule: &'static str,
    /// The message.
    pub text: String,
}

/// How the placement error for a target that selects no node begins (the controller's words).
pub const NO_TARGET_NODES: &str = "No target nodes found matching orchestration target";

/// The exact message for `--nodes-file` combined with `--platform` / `--gpu-arch` (the
/// original's sentence, then what to do instead).
pub const NODES_FILE_EXCLUSIVE: &str = "--nodes-file and --platform/--gpu-arch are mutually exclusive: give --nodes-file FILE to detect both from the nodes, or --platform and --gpu-arch without it";

/// Checks the flag combination and detects platform / architecture from the nodes (the first
/// target node by name names the platform, the GPU architecture is a majority vote).
///
/// # Errors
/// [`PolicyError::Usage`] for `--nodes-file` with `--platform`/`--gpu-arch`, for bad flag
/// values, and when the nodes hold no target node.
pub fn node_context(
    rules: &RuleSet,
    req: &RenderRequest,
    target: Option<&TargetSpec>,
) -> Result<NodeContext, PolicyError> {
    if req.nodes.is_some() && (req.platform.is_some() || req.gpu_arch.is_some()) {
        return Err(PolicyError::Usage(NODES_FILE_EXCLUSIVE.to_string()));
    }
    if let Some(p) = &req.platform {
        detect::check_platform(rules, p)?;
    }
    let flag_arch = req
        .gpu_arch
        .as_deref()
        .map(|a| detect::check_gpu_arch(rules, a))
        .transpose()?;
    let Some(all) = &req.nodes else {
        return Ok(NodeContext {
            platform: req.platform.clone().unwrap_or_default(),
            gpu_architecture: flag_arch.unwrap_or_default(),
            ..NodeContext::default()
        });
    };
    let discovery = nodes::discover_targets(all, target);
    let Some(first) = discovery.nodes.first() else {
        // The cordoned ones are why, when there are any: name them.
        let cordoned = if discovery.cordoned.is_empty() {
            String::new()
        } else {
            format!(
                "; cordoned GPU nodes left out: {}",
                discovery.cordoned.join(", ")
            )
        };
        return Err(PolicyError::Placement(format!(
            "{NO_TARGET_NODES} ({} node(s) given; a target node matches spec.target, carries {}=true and is schedulable){cordoned}",
            all.len(),
            nodes::GPU_PRESENT_LABEL
        )));
    };
    let labels: Map<String, Value> = first
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let platform = detect::detect_platform(rules, &first.provider_id, &labels)?;
    let arch = nodes::detect_gpu_architecture(&discovery.nodes, &*detect::gpu_products(rules)?);
    let mut notes = Vec::new();
    if arch == nodes::UNKNOWN_ARCH {
        notes.push(ContextNote {
            rule: crate::builtins::UNKNOWN_ARCH_RULE,
            text: format!(
                "no target node carries {}: the GPU architecture is unknown, so no architecture override applies and the per-node defaults of an unknown architecture are used (set spec.gpusPerNode)",
                nodes::GPU_PRODUCT_LABEL
            ),
        });
    }
    if !discovery.cordoned.is_empty() {
        notes.push(ContextNote {
            rule: crate::builtins::CORDONED_NODES_RULE,
            text: format!(
                "cordoned GPU nodes left out: {}",
                discovery.cordoned.join(", ")
            ),
        });
    }
    Ok(NodeContext {
        platform,
        gpu_architecture: arch,
        nodes: discovery.nodes,
        from_nodes: true,
        notes,
    })
}

/// Checks the node-context flags alone (before any file is read): `--platform` and `--gpu-arch`
/// values, and `--nodes-file` exclusivity; with a nodes file, that the rule set has the
/// detection tables.
///
/// # Errors
/// [`PolicyError::Usage`] with the exact messages of the original `nvcrectl`; a missing or
/// malformed detection table.
pub fn check_flags(rules: &RuleSet, req: &RenderRequest) -> Result<(), PolicyError> {
    if req.nodes.is_some() && (req.platform.is_some() || req.gpu_arch.is_some()) {
        return Err(PolicyError::Usage(NODES_FILE_EXCLUSIVE.to_string()));
    }
    if req.nodes.is_some() {
        // Detection from the nodes reads these tables: a set without one is refused once, up
        // front, as for --platform, not once per document.
        detect::platform_names(rules)?;
        detect::gpu_products(rules)?;
    }
    node_context(
        rules,
        &RenderRequest {
            nodes: None,
            ..req.clone()
        },
        None,
    )
    .map(|_| ())
}

/// `count` synthetic nodes for `--platform P --gpu-arch A` (or, for a target that names its
/// nodes by `nodeNames` or the hostname label, one of each name): `nvidia.com/gpu.present=true`, the
/// platform's providerID, labels and allocatable from the `platform-detection` table, and labels
/// that satisfy the target (nodeSelector values, the first value of each `In` requirement, a
/// value for each `Exists`), so they are targets.
///
/// They carry no `nvidia.com/gpu.product` but the one the target asks for: a synthesized
/// product must not reach the required node affinity, where it would match no real node, and
/// without the target's they would not be targets. A target asking only that a product exist
/// gets `NVIDIA-<ARCH>`, when the gpu-products table reads that back as the architecture.
///
/// # Errors
/// A missing or malformed detection table.
pub fn synthetic_nodes(
    rules: &RuleSet,
    platform: &str,
    arch: &str,
    count: usize,
    target: Option<&TargetSpec>,
) -> Result<Vec<Node>, PolicyError> {
    let synthetic = detect::check_platform(rules, platform)?;
    let products = detect::gpu_products(rules)?;
    let stand_in_product = Some(format!("NVIDIA-{}", arch.to_uppercase()))
        .filter(|p| !arch.is_empty() && products.architecture(p) == arch);
    // A target that names its nodes (`nodeNames`, or the hostname label selected) is stood in
    // for by nodes of those names, and only them: nodes of other names would be filtered out,
    // or get a hostname affinity term no node satisfies beside the target's.
    let pinned = target.map(pinned_names).unwrap_or_default();
    let names: Vec<String> = if pinned.is_empty() {
        (0..count)
            .map(|i| format!("{platform}-{arch}-node-{i}"))
            .collect()
    } else {
        pinned
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let mut labels: std::collections::BTreeMap<String, String> = Default::default();
        if let Some(t) = target {
            for (k, v) in &t.node_selector {
                labels.insert(k.clone(), v.clone());
            }
            for req in &t.match_expressions {
                match (req.operator.as_str(), req.values.first()) {
                    ("In", Some(v)) => {
                        labels.insert(req.key.clone(), v.clone());
                    }
                    ("Exists", _) => {
                        labels.insert(req.key.clone(), "true".into());
                    }
                    _ => {}
                }
            }
        }
        for (k, v) in &synthetic.labels {
            labels.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
        labels.insert(nodes::HOSTNAME_LABEL.into(), name.clone());
        labels.insert(nodes::GPU_PRESENT_LABEL.into(), "true".into());
        let asked = target.and_then(|t| {
            t.node_selector
                .get(nodes::GPU_PRODUCT_LABEL)
                .cloned()
                .or_else(|| {
                    t.match_expressions
                        .iter()
                        .find(|r| r.key == nodes::GPU_PRODUCT_LABEL && r.operator == "In")
                        .and_then(|r| r.values.first().cloned())
                })
        });
        // A target that only asks for a product to exist gets one the gpu-products table reads
        // as the architecture given (it reaches neither the affinity, which carries the
        // requirement, nor the detection, which reads it back as that architecture).
        let made_up = asked.is_none();
        let asked = asked.or_else(|| {
            let exists = target.is_some_and(|t| {
                t.match_expressions
                    .iter()
                    .any(|r| r.key == nodes::GPU_PRODUCT_LABEL && r.operator == "Exists")
            });
            exists.then(|| stand_in_product.clone()).flatten()
        });
        let made_up_product = made_up && asked.is_some();
        match asked {
            Some(product) => labels.insert(nodes::GPU_PRODUCT_LABEL.into(), product),
            None => labels.remove(nodes::GPU_PRODUCT_LABEL),
        };
        out.push(Node {
            name,
            labels,
            provider_id: synthetic.provider_id.clone(),
            allocatable: synthetic
                .allocatable
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect(),
            // The taints the target selects, so that discovery keeps the node; cordoned when
            // the target selects cordoned nodes on purpose.
            unschedulable: target.is_some_and(TargetSpec::includes_cordoned),
            taints: target
                .map(|t| {
                    t.taint_selectors
                        .iter()
                        .map(|s| nodes::Taint {
                            key: s.key.clone(),
                            value: s.value.clone().unwrap_or_default(),
                            effect: s
                                .effect
                                .clone()
                                .filter(|e| !e.is_empty())
                                .unwrap_or_else(|| "NoSchedule".into()),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            made_up_product,
        });
    }
    Ok(out)
}

/// The node names a target pins, in order and once each: `nodeNames`, else the
/// `kubernetes.io/hostname` its nodeSelector selects, else the values of an `In` requirement on
/// that label; empty when it pins none.
pub(super) fn pinned_names(target: &TargetSpec) -> Vec<String> {
    let names: Vec<String> = if !target.node_names.is_empty() {
        target.node_names.clone()
    } else if let Some(host) = target.node_selector.get(nodes::HOSTNAME_LABEL) {
        vec![host.clone()]
    } else {
        target
            .match_expressions
            .iter()
            .find(|r| r.key == nodes::HOSTNAME_LABEL && r.operator == "In")
            .map(|r| r.values.clone())
            .unwrap_or_default()
    };
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|n| !n.is_empty() && seen.insert(n.clone()))
        .collect()
}

/// How `render` leads its note about NIC resource detection (`NICResourceDetection: …`), and
/// the reason of the Normal Event the controller records for it.
pub const NIC_DETECTION: &str = "NICResourceDetection";

/// Name of the NIC detection table.
pub const NIC_TABLE: &str = "nic-detection";

/// A row of the `nic-detection` table.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NicRow {
    /// Resource names that qualify (an entry ending in `/` is a prefix).
    resources: Vec<String>,
}

/// NIC resource auto-detection: where the `nic-detection` table says so, exactly one candidate
/// resource allocatable at ≥ `mlnx` on every node → that name; otherwise nothing, with a note
/// saying why.
///
/// # Errors
/// A malformed table row.
pub(super) fn detect_nic_resource(
    rules: &RuleSet,
    ctx: &NodeContext,
    mlnx: i64,
) -> Result<(Option<String>, Option<String>), PolicyError> {
    let Some(table) = rules.table(NIC_TABLE).filter(|_| ctx.from_nodes) else {
        return Ok((None, None));
    };
    let params = crate::packs::params::nic_detection(&ctx.platform, &ctx.gpu_architecture);
    let mut patterns = Vec::new();
    for (id, value) in table.render(&params)? {
        let row: NicRow = detect::decode_row(table, &id, &value)?;
        patterns.extend(row.resources);
    }
    if patterns.is_empty() {
        return Ok((None, None));
    }
    let qualifies = |k: &str| {
        patterns.iter().any(|p| {
            if p.ends_with('/') {
                k.starts_with(p.as_str())
            } else {
                k == p
            }
        })
    };
    let candidates: std::collections::BTreeSet<&String> = ctx
        .nodes
        .iter()
        .flat_map(|n| n.allocatable.keys())
        .filter(|k| qualifies(k))
        .collect();
    let eligible: Vec<&String> = candidates
        .into_iter()
        .filter(|c| {
            ctx.nodes.iter().all(|n| {
                n.allocatable
                    .get(*c)
                    .and_then(|v| crate::placement::quantity_as_int(v))
                    .is_some_and(|have| have >= mlnx)
            })
        })
        .collect();
    let described = patterns
        .iter()
        .map(|p| {
            if p.ends_with('/') {
                format!("{p}*")
            } else {
                p.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" or ");
    Ok(match eligible.as_slice() {
        [one] => (Some((*one).clone()), None),
        [] => (
            None,
            Some(format!(
                "no {described} resource is allocatable at {mlnx} on every target node; no NIC resource is requested (set spec.nicResourceName)"
            )),
        ),
        many => (
            None,
            Some(format!(
                "several NIC resources are allocatable on every target node ({}); no NIC resource is requested (set spec.nicResourceName)",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
    })
}
