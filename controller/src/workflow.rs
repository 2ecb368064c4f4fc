//! Workflow reconcile decisions, as a pure function of what was observed
//! ([`decide_workflow`]): resolve the Workflow for the cluster's nodes and place it (the same
//! library calls as `nvcre-policy render --nodes-file --expand`), start each group's
//! TrainingRuntime + TrainJob within `maxConcurrent`, follow each TrainJob's conditions, time
//! jobs out after `timeoutPerJob`, run `iterations` rounds, and publish the succeeded / failed
//! node lists as ConfigMaps.
//!
//! Group state lives in `status.orchestration.groups`. Iteration `i > 1` names its TrainJobs
//! `<job>-iter<i>`; the group's TrainingRuntime is shared by every iteration.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use nvcre_domain::crd::{
    GroupStatus, OrchestrationStatus, TypedLocalObjectReference, WORKLOAD_RUN_LABEL,
    WorkflowResource, WorkflowStatus,
};
use nvcre_domain::{Node, PolicyError, RenderRequest, expand, place, render_workflow};
use nvcre_engine::{RuleSet, Source, parse_documents};
use serde_json::{Value, json};

use crate::conditions::{self, FAILED, IN_PROGRESS, SUCCEEDED, is_terminal, set_execution};

/// A TrainJob as the reconciler sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedJob {
    /// Name.
    pub name: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: Option<i64>,
    /// `(type, status, message)` of each condition.
    pub conditions: Vec<(String, String, String)>,
}

/// What [`decide_workflow`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct WorkflowObservation<'a> {
    /// The Workflow.
    pub workflow: &'a WorkflowResource,
    /// Every node of the cluster.
    pub nodes: &'a Arc<Vec<Node>>,
    /// The TrainJobs labelled with this Workflow, by name.
    pub jobs: &'a BTreeMap<String, ObservedJob>,
    /// Now, seconds since the Unix epoch.
    pub now_secs: i64,
    /// Now, RFC 3339.
    pub now: &'a str,
}

/// A decision: objects to apply (in order), the new status, when to look again.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDecision {
    /// Manifests to server-side apply, in order (dependencies before the TrainJob that uses
    /// them; ConfigMaps of node results last). Each carries the Workflow as controller owner.
    pub apply: Vec<Value>,
    /// The complete new status, when it differs from the observed one.
    pub status: Option<WorkflowStatus>,
    /// Requeue after this long (`None`: only on watch events).
    pub requeue_after: Option<Duration>,
}

/// Poll interval while jobs run (timeouts are noticed within it).
pub const ACTIVE_REQUEUE: Duration = Duration::from_secs(15);

/// Default `timeoutPerJob` when the Workflow has none: 24 hours.
pub const DEFAULT_TIMEOUT_SECS: i64 = 24 * 3600;

/// Decides what to do for one observation of a Workflow. Pure: the caller applies.
pub fn decide_workflow(rules: &RuleSet, obs: WorkflowObservation<'_>) -> WorkflowDecision {
    let wf = obs.workflow;
    let old = wf.status.clone().unwrap_or_default();
    if is_terminal(&old.conditions) {
        return WorkflowDecision {
            apply: Vec::new(),
            status: None,
            requeue_after: None,
        };
    }
    let mut status = old.clone();
    status.observed_generation = wf.metadata.generation;
    let gen_ = wf.metadata.generation;
    let name = wf.name_any();
    let mut apply = Vec::new();

    let planned = match plan(rules, wf, obs.nodes) {
        Ok(p) => p,
        Err((reason, message)) => {
            set_execution(
                &mut status.conditions,
                FAILED,
                reason,
                &message,
                gen_,
                obs.now,
            );
            return finish(&old, status, apply, None);
        }
    };
    let iterations = orchestration_int(wf, &["iterations"]).unwrap_or(1).max(1);
    let max_concurrent = orchestration_int(wf, &["execution", "maxConcurrent"]).unwrap_or(0);
    let timeout = wf
        .spec
        .orchestration
        .get("execution")
        .and_then(|e| e.get("timeoutPerJob"))
        .and_then(Value::as_str)
        .and_then(parse_go_duration)
        .unwrap_or(DEFAULT_TIMEOUT_SECS);

    let mut orch = status.orchestration.clone().unwrap_or_default();
    if orch.groups.is_empty() {
        orch = OrchestrationStatus {
            total_nodes: planned.total_nodes,
            nodes_per_job: planned.nodes_per_job,
            total_groups: i32::try_from(planned.groups.len()).unwrap_or(i32::MAX),
            current_iteration: 1,
            completed_iterations: 0,
            detected_platform: Some(planned.platform.clone()),
            detected_gpu_architecture: Some(planned.gpu_architecture.clone()),
            placement: Some(planned.placement.clone()),
            groups: planned
                .groups
                .iter()
                .map(|g| GroupStatus {
                    name: g.name.clone(),
                    nodes: g.nodes.clone(),
                    overflow: g.overflow,
                    phase: "Pending".into(),
                    iteration: 1,
                    ..GroupStatus::default()
                })
                .collect(),
        };
        set_execution(
            &mut status.conditions,
            IN_PROGRESS,
            "GroupsPartitioned",
            &format!(
                "Discovered {} nodes, partitioned into {} groups ({} nodes/job)",
                orch.total_nodes, orch.total_groups, orch.nodes_per_job
            ),
            gen_,
            obs.now,
        );
    }
    let iteration = orch.current_iteration.max(1);
    apply.extend(planned.workflow_dependencies.iter().cloned());

    // Follow the jobs that exist.
    for g in &mut orch.groups {
        let Some(job_name) = g.job_ref.clone() else {
            continue;
        };
        if g.phase == "Succeeded" || g.phase == "Failed" {
            continue;
        }
        let Some(job) = obs.jobs.get(&job_name) else {
            continue;
        };
        let cond = |t: &str| {
            job.conditions
                .iter()
                .find(|(ty, st, _)| ty == t && st == "True")
                .map(|(_, _, m)| m.clone())
        };
        if cond("Complete").or_else(|| cond("Succeeded")).is_some() {
            g.phase = "Succeeded".into();
            g.completion_time = Some(obs.now.to_string());
        } else if let Some(m) = cond("Failed") {
            g.phase = "Failed".into();
            g.message = Some(m);
            g.completion_time = Some(obs.now.to_string());
        } else if job
            .created_at
            .is_some_and(|c| obs.now_secs.saturating_sub(c) > timeout)
        {
            g.phase = "Failed".into();
            g.message = Some(format!("TrainJob {job_name} timed out after {timeout}s"));
            g.completion_time = Some(obs.now.to_string());
        } else {
            g.phase = "Running".into();
        }
    }
    // Start pending groups within maxConcurrent; overflow groups wait for the full groups.
    let mut running = orch.groups.iter().filter(|g| g.phase == "Running").count();
    let full_done = orch
        .groups
        .iter()
        .filter(|g| !g.overflow)
        .all(|g| g.phase == "Succeeded" || g.phase == "Failed");
    for g in &mut orch.groups {
        if g.phase != "Pending" || (g.overflow && !full_done) {
            continue;
        }
        if max_concurrent > 0 && running >= usize::try_from(max_concurrent).unwrap_or(usize::MAX) {
            break;
        }
        let Some(pg) = planned.groups.iter().find(|p| p.name == g.name) else {
            continue;
        };
        for m in &pg.manifests {
            apply.push(for_iteration(m, iteration));
        }
        g.job_ref = pg.job_name.as_ref().map(|j| job_name(j, iteration));
        g.phase = "Running".into();
        g.iteration = iteration;
        g.start_time = Some(obs.now.to_string());
        running += 1;
    }
    // Iteration bookkeeping.
    let all_done = orch
        .groups
        .iter()
        .all(|g| g.phase == "Succeeded" || g.phase == "Failed");
    let mut requeue = Some(ACTIVE_REQUEUE);
    if all_done {
        let failed: Vec<&GroupStatus> =
            orch.groups.iter().filter(|g| g.phase == "Failed").collect();
        let (succeeded_nodes, failed_nodes) = node_results(&orch.groups);
        apply.push(node_config_map(
            wf,
            &format!("{name}-succeeded-nodes"),
            succeeded_nodes,
        ));
        apply.push(node_config_map(
            wf,
            &format!("{name}-failed-nodes"),
            failed_nodes,
        ));
        status.succeeded_nodes_ref = Some(config_map_ref(&format!("{name}-succeeded-nodes")));
        status.failed_nodes_ref = Some(config_map_ref(&format!("{name}-failed-nodes")));
        if !failed.is_empty() {
            let names: Vec<String> = failed
                .iter()
                .map(|g| format!("{}: {}", g.name, g.message.clone().unwrap_or_default()))
                .collect();
            let reason = if failed.iter().all(|g| {
                g.message
                    .as_deref()
                    .is_some_and(|m| m.contains("timed out"))
            }) {
                "JobTimedOut"
            } else {
                "IterationsFailed"
            };
            set_execution(
                &mut status.conditions,
                FAILED,
                reason,
                &format!(
                    "{} of {} groups failed in iteration {iteration}: {}",
                    failed.len(),
                    orch.groups.len(),
                    names.join("; ")
                ),
                gen_,
                obs.now,
            );
            requeue = None;
        } else {
            orch.completed_iterations = iteration;
            if i64::from(iteration) >= iterations {
                set_execution(
                    &mut status.conditions,
                    SUCCEEDED,
                    "IterationCompleted",
                    &format!("Completed {iteration} of {iterations} iteration(s)"),
                    gen_,
                    obs.now,
                );
                requeue = None;
            } else {
                orch.current_iteration = iteration + 1;
                for g in &mut orch.groups {
                    *g = GroupStatus {
                        name: g.name.clone(),
                        nodes: g.nodes.clone(),
                        overflow: g.overflow,
                        phase: "Pending".into(),
                        iteration: iteration + 1,
                        ..GroupStatus::default()
                    };
                }
                requeue = Some(Duration::from_secs(1));
            }
        }
    }
    status.orchestration = Some(orch);
    finish(&old, status, apply, requeue)
}

fn finish(
    old: &WorkflowStatus,
    mut status: WorkflowStatus,
    apply: Vec<Value>,
    requeue_after: Option<Duration>,
) -> WorkflowDecision {
    status.phase = conditions::true_execution(&status.conditions).map(|c| c.type_.clone());
    let changed = status != *old;
    WorkflowDecision {
        apply,
        status: changed.then_some(status),
        requeue_after,
    }
}

fn orchestration_int(wf: &WorkflowResource, path: &[&str]) -> Option<i64> {
    let (first, rest) = path.split_first()?;
    let mut v = wf.spec.orchestration.get(*first)?;
    for p in rest {
        v = v.get(*p)?;
    }
    v.as_i64()
}

/// A group as placed: its nodes and the manifests that run it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedGroup {
    /// `group-<i>` or `group-<k>-overflow`.
    pub name: String,
    /// Node names (empty under Unpinned).
    pub nodes: Vec<String>,
    /// Overflow group.
    pub overflow: bool,
    /// The group's TrainJob name.
    pub job_name: Option<String>,
    /// Dependency copies, then the TrainJob, each owned by the Workflow.
    pub manifests: Vec<Value>,
}

/// The placement of a Workflow on the cluster's nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Platform the overrides were resolved for.
    pub platform: String,
    /// GPU architecture.
    pub gpu_architecture: String,
    /// `Pinned` or `Unpinned`.
    pub placement: String,
    /// Eligible nodes.
    pub total_nodes: i32,
    /// Nodes per job.
    pub nodes_per_job: i32,
    /// Workflow-scoped dependencies (created once), each owned by the Workflow.
    pub workflow_dependencies: Vec<Value>,
    /// The groups, in launch order.
    pub groups: Vec<PlannedGroup>,
}

/// Resolves and places the Workflow: [`render_workflow`] with the nodes, the [`expand`] checks
/// (gang contract on each group's working copy, the manifests stage), then [`place`] for the
/// groups.
///
/// # Errors
/// `(reason, message)` of the Failed condition: `GangSchedulingConflict` (contract findings),
/// `PartitionError` (placement), `OverrideError` (`Failed to apply overrides: …`),
/// `NodeDiscoveryError` (anything else).
pub fn plan(
    rules: &RuleSet,
    wf: &WorkflowResource,
    nodes: &Arc<Vec<Node>>,
) -> Result<Plan, (&'static str, String)> {
    let fail = |e: PolicyError| match e {
        PolicyError::Rejected(_) => ("GangSchedulingConflict", e.to_string()),
        PolicyError::Placement(m) => ("PartitionError", m),
        PolicyError::Resolve(r) => ("OverrideError", format!("Failed to apply overrides: {r}")),
        other => ("NodeDiscoveryError", other.to_string()),
    };
    let name = wf.name_any();
    let value = json!({
        "apiVersion": nvcre_domain::crd::API_VERSION,
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": wf.namespace()},
        "spec": wf.spec,
    });
    let text = serde_json::to_string(&value).map_err(|e| ("NodeDiscoveryError", e.to_string()))?;
    let source = Source::new(format!("workflow/{name}"), text);
    let docs = parse_documents(&source).map_err(|e| ("NodeDiscoveryError", e.to_string()))?;
    let doc = docs
        .first()
        .ok_or(("NodeDiscoveryError", "empty Workflow document".to_string()))?;
    let req = RenderRequest {
        nodes: Some(Arc::clone(nodes)),
        allow_unknown_arch: true,
        ..RenderRequest::default()
    };
    let rendered = render_workflow(rules, doc, &req).map_err(fail)?;
    expand(rules, &rendered).map_err(fail)?;
    let resolved: nvcre_domain::Workflow = serde_json::from_value(rendered.workflow.clone())
        .map_err(|e| ("NodeDiscoveryError", e.to_string()))?;
    let policy = nvcre_domain::placement_policy(rules).map_err(fail)?;
    let placement = place(&resolved, &rendered.nodes, &policy)
        .map_err(|e| ("PartitionError", e.to_string()))?;
    let owner = owner_ref(wf);
    let run_label = wf.labels().get(WORKLOAD_RUN_LABEL).cloned();
    let owned = |m: &Value| {
        let mut m = m.clone();
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("ownerReferences".into(), json!([owner]));
            // The WorkloadRun controller finds TrainJobs (its grandchildren) by this label.
            if let Some(run) = &run_label {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert(WORKLOAD_RUN_LABEL.into(), Value::String(run.clone()));
                }
            }
            if let Some(ns) = wf.namespace() {
                meta.entry("namespace").or_insert(Value::String(ns));
            }
        }
        m
    };
    Ok(Plan {
        platform: rendered.platform.clone(),
        gpu_architecture: placement.gpu_architecture.clone(),
        placement: format!("{:?}", placement.mode),
        total_nodes: i32::try_from(placement.total_nodes).unwrap_or(i32::MAX),
        nodes_per_job: i32::try_from(placement.nodes_per_job).unwrap_or(i32::MAX),
        workflow_dependencies: placement.workflow_dependencies.iter().map(owned).collect(),
        groups: placement
            .groups
            .iter()
            .map(|g| PlannedGroup {
                name: g.name.clone(),
                nodes: g.nodes.clone(),
                overflow: g.overflow,
                job_name: g
                    .manifests
                    .iter()
                    .find(|m| m.get("kind").and_then(Value::as_str) == Some("TrainJob"))
                    .and_then(|m| m.pointer("/metadata/name"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                manifests: g.manifests.iter().map(owned).collect(),
            })
            .collect(),
    })
}

fn owner_ref(wf: &WorkflowResource) -> Value {
    json!({
        "apiVersion": nvcre_domain::crd::API_VERSION,
        "kind": "Workflow",
        "name": wf.name_any(),
        "uid": wf.metadata.uid.clone().unwrap_or_default(),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The TrainJob name of `base` in iteration `iteration` (`<base>-iter<i>` from the second on).
pub fn job_name(base: &str, iteration: i32) -> String {
    if iteration <= 1 {
        base.to_string()
    } else {
        format!("{base}-iter{iteration}")
    }
}

fn for_iteration(m: &Value, iteration: i32) -> Value {
    let mut m = m.clone();
    if m.get("kind").and_then(Value::as_str) == Some("TrainJob")
        && let Some(n) = m.pointer_mut("/metadata/name")
        && let Some(base) = n.as_str()
    {
        *n = Value::String(job_name(base, iteration));
    }
    m
}

/// Succeeded node names (comma-joined) and failed nodes (`name: reason: message` lines).
fn node_results(groups: &[GroupStatus]) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut ok = std::collections::BTreeSet::new();
    let mut failed = BTreeMap::new();
    for g in groups {
        for n in &g.nodes {
            if g.phase == "Succeeded" {
                ok.insert(n.clone());
            } else {
                failed.insert(n.clone(), g.message.clone().unwrap_or_default());
            }
        }
    }
    for n in failed.keys() {
        ok.remove(n);
    }
    let ok = ok.into_iter().collect::<Vec<_>>().join(",");
    let failed = failed
        .iter()
        .map(|(n, m)| format!("{n}: WorkloadFailed: {m}"))
        .collect::<Vec<_>>()
        .join("\n");
    (
        BTreeMap::from([("nodes".to_string(), ok)]),
        BTreeMap::from([("nodes".to_string(), failed)]),
    )
}

fn node_config_map(wf: &WorkflowResource, name: &str, data: BTreeMap<String, String>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": wf.namespace(),
            "labels": {
                nvcre_domain::crd::MANAGED_BY_LABEL: nvcre_domain::crd::MANAGED_BY_VALUE,
                nvcre_domain::crd::WORKFLOW_LABEL: wf.name_any(),
            },
            "ownerReferences": [owner_ref(wf)],
        },
        "data": data,
    })
}

fn config_map_ref(name: &str) -> TypedLocalObjectReference {
    TypedLocalObjectReference {
        api_group: None,
        kind: "ConfigMap".into(),
        name: name.into(),
    }
}

/// Parses a Go duration (`24h`, `1h30m`, `24h0m0s`, `90s`, `500ms`) into whole seconds;
/// `None` for anything else (the Workflow default then applies, as in the original).
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let mut total_ms: i64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let n: i64 = rest.get(..digits)?.parse().ok()?;
        rest = rest.get(digits..)?;
        let (unit_ms, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1000, 1)
        } else {
            return None;
        };
        total_ms = total_ms.checked_add(n.checked_mul(unit_ms)?)?;
        rest = rest.get(len..)?;
    }
    Some(total_ms / 1000)
}
