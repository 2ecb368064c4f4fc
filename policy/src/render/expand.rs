//! Expansion: a rendered Workflow placed on nodes, every group's dependencies and TrainJob
//! emitted for `kubectl apply -f -`, each checked again (gang contract on the group's working
//! copy, the `manifests` stage on every object) before it is emitted.

use nvcre_engine::{Origin, RuleSet};
use serde_json::Value;
use std::borrow::Cow;

use crate::api::{TargetSpec, Workflow};
use crate::contract::{self, enforce};
use crate::error::PolicyError;
use crate::placement::{Group, Placement};

use super::Rendered;
use super::context::synthetic_nodes;

/// Every child manifest of every group, ready for `kubectl apply -f -`, and one summary line
/// per group.
#[derive(Debug, Clone, Default)]
pub struct Expanded {
    /// Workflow-scoped dependencies first, then per group its dependency copies and TrainJob.
    pub manifests: Vec<Value>,
    /// `group-0: 2 node(s) [n1, n2]; domains [d]` lines; a list of more than ten names shows
    /// the first ten and `… and N more`.
    pub summary: Vec<String>,
    /// The `manifests` stage's findings below error (warnings, info) on the emitted objects,
    /// in emission order; each finding's `object` names the object (`group-0 TrainJob x`), its
    /// field path a path in that object.
    pub findings: Vec<nvcre_engine::Finding>,
}

/// Partitions the target nodes into groups and emits each group's TrainJob and dependencies
/// (the controller's partition-and-create path), checking the gang contract again on every group's
/// working copy before it is emitted.
///
/// Nodes come from `--nodes-file`; with only `--platform`/`--gpu-arch`, `numNodes` synthetic
/// nodes stand in (one group).
///
/// # Errors
/// [`PolicyError::Placement`] with NVCRE's message (shortfall, capacity);
/// [`PolicyError::Rejected`] when a group's working copy breaks the contract;
/// [`PolicyError::Usage`] without any node context.
pub fn expand(rules: &RuleSet, rendered: &Rendered) -> Result<Expanded, PolicyError> {
    expand_verifying(rules, rendered, Verify::EveryGroup)
}

/// Which groups [`expand_verifying`] runs the contract and manifest checks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Every group (what `render --expand` emits is checked object by object).
    EveryGroup,
    /// The first and the last group: the groups differ only in names and nodes, and the last
    /// has the longest names (`check --nodes-file` on many documents).
    FirstAndLast,
}

/// [`expand`], choosing how many groups are re-checked.
///
/// # Errors
/// As [`expand`].
pub fn expand_verifying(
    rules: &RuleSet,
    rendered: &Rendered,
    verify: Verify,
) -> Result<Expanded, PolicyError> {
    let workflow: Workflow = serde_json::from_value(rendered.workflow.clone())
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let synthetic = rendered.nodes.is_empty();
    // Stand-in nodes named as the target names its nodes (not placeholders).
    let mut named = false;
    let nodes = if synthetic {
        if rendered.platform.is_empty() {
            return Err(PolicyError::Usage(
                "--expand needs nodes: give --nodes-file, or --platform and --gpu-arch".into(),
            ));
        }
        let count = workflow
            .spec
            .job_template
            .pointer("/spec/workload/trainJob/trainer/numNodes")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(1);
        let target: Option<TargetSpec> = workflow
            .spec
            .orchestration
            .get("target")
            .and_then(|t| serde_json::from_value(t.clone()).ok());
        let limit = nvcre_engine::limits::limits().expand_nodes;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count > limit {
            return Err(PolicyError::Usage(format!(
                "--expand without --nodes-file makes up spec.numNodes ({count}) nodes, more than the limit of {limit} (--max-expand-nodes); give --nodes-file with the real nodes, or raise --max-expand-nodes"
            )));
        }
        named = target
            .as_ref()
            .is_some_and(|t| !super::context::pinned_names(t).is_empty());
        let mut nodes = synthetic_nodes(
            rules,
            &rendered.platform,
            &rendered.gpu_architecture,
            count,
            target.as_ref(),
        )?;
        // One synthetic topology domain, so a platform's topology key can partition them.
        if let Some(key) = workflow
            .spec
            .orchestration
            .get("topology")
            .and_then(|t| t.get("topologyKey"))
            .and_then(Value::as_str)
        {
            for n in &mut nodes {
                n.labels
                    .insert(key.to_string(), "synthetic-domain-0".to_string());
            }
        }
        nodes
    } else {
        rendered.nodes.clone()
    };
    let topology = workflow.spec.orchestration.get("topology");
    let strict = topology
        .and_then(|t| t.get("strictDomain"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let key = topology
        .and_then(|t| t.get("topologyKey"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if strict && key.is_empty() {
        return Err(PolicyError::Placement(
            "orchestration.topology.strictDomain needs orchestration.topology.topologyKey to find the domains, and no platform row supplies one here; add it with spec.overrides[].orchestration.topology".into(),
        ));
    }
    let policy = crate::detect::placement_policy(rules)?;
    let placement = crate::placement::place(&workflow, &nodes, &policy)
        .map_err(|e| PolicyError::Placement(e.to_string()))?;
    let mut out = Expanded {
        manifests: placement.workflow_dependencies.clone(),
        summary: Vec::new(),
        findings: Vec::new(),
    };
    check_dependencies(rules, &workflow, &placement, &mut out.findings)?;
    if synthetic {
        let names = if named {
            "named as the target names its nodes"
        } else {
            "their hostnames are placeholders"
        };
        out.summary.push(format!(
            "note: {} synthetic {}/{} node(s) stand in for the fleet; {names} (give --nodes-file to place on real nodes)",
            nodes.len(),
            rendered.platform,
            rendered.gpu_architecture
        ));
    }
    for (node, reason) in &placement.excluded {
        out.summary.push(format!("note: excluded {node}: {reason}"));
    }
    let last = placement.groups.len().saturating_sub(1);
    for (i, group) in placement.groups.iter().enumerate() {
        if verify == Verify::EveryGroup || i == 0 || i == last {
            check_placed_group(rules, &workflow, &placement, group, &mut out.findings)?;
        }
        out.manifests.extend(group.manifests.iter().cloned());
        let nodes = if group.nodes.is_empty() {
            "unpinned".to_string()
        } else {
            format!("{} node(s) [{}]", group.nodes.len(), abridged(&group.nodes))
        };
        let domains = if group.domains.is_empty() {
            String::new()
        } else {
            format!("; domains [{}]", abridged(&group.domains))
        };
        let overflow = if group.overflow { " (overflow)" } else { "" };
        out.summary
            .push(format!("{}: {nodes}{domains}{overflow}", group.name));
    }
    Ok(out)
}

/// The checks [`expand`] runs on every group, for a placement made elsewhere (a Workflow
/// controller's recorded partition, [`crate::place_recorded`]): the `manifests` stage on each
/// Workflow dependency, then per group the gang contract on its working copy and the
/// `manifests` stage on each of its objects. Returns the findings below error.
///
/// # Errors
/// [`PolicyError::Rejected`] with the findings so far, at the first check that rejects.
pub fn verify_placement(
    rules: &RuleSet,
    workflow: &Workflow,
    placement: &Placement,
) -> Result<Vec<nvcre_engine::Finding>, PolicyError> {
    let mut findings = Vec::new();
    check_dependencies(rules, workflow, placement, &mut findings)?;
    for group in &placement.groups {
        check_placed_group(rules, workflow, placement, group, &mut findings)?;
    }
    Ok(findings)
}

/// The `manifests` stage on each Workflow-scoped dependency of `placement`.
fn check_dependencies(
    rules: &RuleSet,
    workflow: &Workflow,
    placement: &Placement,
    notes: &mut Vec<nvcre_engine::Finding>,
) -> Result<(), PolicyError> {
    for m in &placement.workflow_dependencies {
        check_manifest(rules, m, &workflow.metadata.name, notes)?;
    }
    Ok(())
}

/// The gang contract on `group`'s working copy, then the `manifests` stage on each of its
/// objects.
fn check_placed_group(
    rules: &RuleSet,
    workflow: &Workflow,
    placement: &Placement,
    group: &Group,
    notes: &mut Vec<nvcre_engine::Finding>,
) -> Result<(), PolicyError> {
    check_group(
        rules,
        workflow,
        &placement.workflow_dependencies,
        group,
        notes,
    )?;
    for m in &group.manifests {
        check_manifest(rules, m, &group.name, notes)?;
    }
    Ok(())
}

/// Names shown in a summary line before the rest are counted: a group of thousands of nodes is
/// one readable line (every name is in the manifests).
const SUMMARY_NAMES: usize = 10;

/// `a, b, c`, or the first [`SUMMARY_NAMES`] names and `… and N more`.
fn abridged(names: &[String]) -> String {
    if names.len() <= SUMMARY_NAMES {
        return names.join(", ");
    }
    format!(
        "{}, … and {} more",
        names[..SUMMARY_NAMES].join(", "),
        names.len() - SUMMARY_NAMES
    )
}

/// `findings` on an emitted object, each naming it in its `object`: `<group> <kind> <name>`
/// (the group, or the Workflow's name for its own dependencies).
fn about(
    group: &str,
    object: &Value,
    findings: Vec<nvcre_engine::Finding>,
) -> impl Iterator<Item = nvcre_engine::Finding> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let about = format!("{group} {kind} {name}").trim_end().to_string();
    findings.into_iter().map(move |mut f| {
        f.object = Some(about.clone());
        f
    })
}

/// The `manifests` stage on one emitted object: its findings below error are added to `notes`;
/// an error rejects with every finding so far (`notes` taken).
fn check_manifest(
    rules: &RuleSet,
    manifest: &Value,
    group: &str,
    notes: &mut Vec<nvcre_engine::Finding>,
) -> Result<(), PolicyError> {
    let out = contract::run_stage(
        rules,
        contract::MANIFESTS,
        Cow::Borrowed(manifest),
        Origin {
            file: group,
            document: 0,
            spans: None,
        },
        &Value::Null,
    )?;
    let rejects = out.rejects();
    notes.extend(about(group, manifest, out.findings));
    if rejects {
        Err(PolicyError::Rejected(std::mem::take(notes)))
    } else {
        Ok(())
    }
}

/// The post-override contract on one group's working copy: the Workflow with the group's
/// TrainJob spec and renamed dependencies. A rejection carries `notes` (taken) and the copy's
/// errors.
fn check_group(
    rules: &RuleSet,
    workflow: &Workflow,
    workflow_deps: &[Value],
    group: &Group,
    notes: &mut Vec<nvcre_engine::Finding>,
) -> Result<(), PolicyError> {
    let mut copy = workflow.clone();
    let mut deps = workflow_deps.to_vec();
    for m in &group.manifests {
        if m.get("kind").and_then(Value::as_str) == Some("TrainJob") {
            if let (Some(spec), Some(slot)) = (
                m.get("spec"),
                copy.spec
                    .job_template
                    .pointer_mut("/spec/workload/trainJob"),
            ) {
                *slot = spec.clone();
            }
        } else {
            deps.push(m.clone());
        }
    }
    copy.spec.dependencies = deps;
    let value = serde_json::to_value(&copy).map_err(|e| PolicyError::Build(e.to_string()))?;
    // The Workflow's own run of these stages reported their warnings: a group's copy adds
    // only its errors.
    match enforce(
        rules,
        &[contract::WORKLOAD_LABELS, contract::GANG_CONTRACT],
        Cow::Borrowed(&value),
        Origin {
            file: &group.name,
            document: 0,
            spans: None,
        },
        &Value::Null,
        contract::Report::First,
    ) {
        Ok(_) => Ok(()),
        Err(PolicyError::Rejected(findings)) => {
            let errors = findings
                .into_iter()
                .filter(|f| f.severity == nvcre_engine::Severity::Error)
                .collect();
            let mut all = std::mem::take(notes);
            all.extend(about(&group.name, &value, errors));
            Err(PolicyError::Rejected(all))
        }
        Err(e) => Err(e),
    }
}
