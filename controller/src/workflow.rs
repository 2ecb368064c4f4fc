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
    FailedGroup, GroupStatus, IterationRecord, OrchestrationStatus, TypedLocalObjectReference,
    WORKLOAD_RUN_LABEL, WorkflowResource, WorkflowStatus,
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

/// A child object to delete: a TrainJob that failed and is retried, or that timed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    /// `group/version` (`trainer.kubeflow.org/v1alpha1`).
    pub api_version: String,
    /// Kind (`TrainJob`).
    pub kind: String,
    /// Name, in the Workflow's namespace.
    pub name: String,
}

/// A decision: objects to apply (in order), objects to delete, the new status, when to look
/// again.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowDecision {
    /// Manifests to server-side apply, in order (dependencies before the TrainJob that uses
    /// them; ConfigMaps of node results last). Each carries the Workflow as controller owner.
    pub apply: Vec<Value>,
    /// TrainJobs to delete (background propagation) before applying: a failed job whose group
    /// is retried, a job past `timeoutPerJob` (its pods would hold the GPUs otherwise).
    pub delete: Vec<ChildRef>,
    /// The complete new status, when it differs from the observed one.
    pub status: Option<WorkflowStatus>,
    /// Requeue after this long (`None`: only on watch events).
    pub requeue_after: Option<Duration>,
}

/// Poll interval while jobs run (timeouts are noticed within it).
pub const ACTIVE_REQUEUE: Duration = Duration::from_secs(15);

/// Default `timeoutPerJob` when the Workflow has none, or one that does not parse: 24 hours.
pub const DEFAULT_TIMEOUT_SECS: i64 = 24 * 3600;

/// Group reason of a TrainJob that reported `Failed`.
pub const JOB_FAILED: &str = "JobFailed";
/// Group (and Workflow) reason of a TrainJob that ran past `timeoutPerJob`.
pub const JOB_TIMED_OUT: &str = "JobTimedOut";

/// The Failed reason of a child of the deterministic name that another owner controls:
/// `JobNameCollision` for a TrainJob, `DependencyNameCollision` for anything else.
pub fn collision_reason(kind: &str) -> &'static str {
    if kind == "TrainJob" {
        "JobNameCollision"
    } else {
        "DependencyNameCollision"
    }
}

/// The Failed message of that collision.
pub fn collision_message(kind: &str, child: &str, namespace: &str, workflow: &str) -> String {
    format!(
        "{kind} {child:?} already exists in namespace {namespace:?} and is not controlled by Workflow {workflow:?}; refusing to adopt it"
    )
}

/// The status after a collision: the observed one with `Failed` True (terminal: a person has
/// to rename or remove the other object; retrying cannot help).
pub fn collision_status(
    wf: &WorkflowResource,
    kind: &str,
    child: &str,
    now: &str,
) -> WorkflowStatus {
    let mut status = wf.status.clone().unwrap_or_default();
    status.observed_generation = wf.metadata.generation;
    set_execution(
        &mut status.conditions,
        FAILED,
        collision_reason(kind),
        &collision_message(
            kind,
            child,
            &wf.namespace().unwrap_or_default(),
            &wf.name_any(),
        ),
        wf.metadata.generation,
        now,
    );
    status.phase = conditions::true_execution(&status.conditions).map(|c| c.type_.clone());
    status
}

/// The execution settings of the resolved Workflow (after overrides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execution {
    /// `iterations` (at least 1): rounds of every group.
    pub iterations: i32,
    /// `execution.maxConcurrent`: TrainJobs running at once, 0 for no limit.
    pub max_concurrent: usize,
    /// `execution.timeoutPerJob` in seconds ([`DEFAULT_TIMEOUT_SECS`] when unset or unparseable).
    pub timeout_secs: i64,
    /// `execution.retryFailedGroups`: how often a failed group is retried per iteration (a
    /// timed-out group is not retried).
    pub retry_failed_groups: i32,
}

impl Execution {
    /// Reads the settings from a Workflow's `spec.orchestration`.
    pub fn from_orchestration(o: &serde_json::Map<String, Value>) -> Execution {
        let exec = o.get("execution");
        let int = |v: Option<&Value>| v.and_then(Value::as_i64);
        Execution {
            iterations: int(o.get("iterations"))
                .map_or(1, |n| i32::try_from(n.max(1)).unwrap_or(i32::MAX)),
            max_concurrent: int(exec.and_then(|e| e.get("maxConcurrent")))
                .map_or(0, |n| usize::try_from(n.max(0)).unwrap_or(usize::MAX)),
            timeout_secs: exec
                .and_then(|e| e.get("timeoutPerJob"))
                .and_then(Value::as_str)
                .and_then(parse_go_duration)
                .filter(|s| *s > 0)
                .unwrap_or(DEFAULT_TIMEOUT_SECS),
            retry_failed_groups: int(exec.and_then(|e| e.get("retryFailedGroups")))
                .map_or(0, |n| i32::try_from(n.max(0)).unwrap_or(i32::MAX)),
        }
    }
}

fn done(g: &GroupStatus) -> bool {
    g.phase == "Succeeded" || g.phase == "Failed"
}

/// Decides what to do for one observation of a Workflow. Pure: the caller applies.
///
/// Per pass: place the Workflow (failing it with the placement's reason), record the groups on
/// the first pass, follow each running group's TrainJob (Complete/Succeeded → Succeeded; Failed
/// → retried while `retryFailedGroups` allows, else Failed; past `timeoutPerJob` → Failed and
/// the TrainJob deleted), start pending groups within `maxConcurrent` (overflow groups after
/// every full group), and when every group is done record the iteration, start the next one or
/// finish: `Succeeded`/`JobCompleted` when no group failed in any iteration, `Failed` otherwise
/// (`JobTimedOut` when every failure was a timeout, else `IterationsFailed`), with the node
/// result ConfigMaps.
pub fn decide_workflow(rules: &RuleSet, obs: WorkflowObservation<'_>) -> WorkflowDecision {
    let wf = obs.workflow;
    let old = wf.status.clone().unwrap_or_default();
    if is_terminal(&old.conditions) {
        return WorkflowDecision {
            apply: Vec::new(),
            delete: Vec::new(),
            status: None,
            requeue_after: None,
        };
    }
    let mut status = old.clone();
    status.observed_generation = wf.metadata.generation;
    let gen_ = wf.metadata.generation;
    let name = wf.name_any();
    let mut apply = Vec::new();
    let mut delete = Vec::new();

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
            return finish(&old, status, apply, delete, None);
        }
    };
    let exec = planned.execution;

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
            excluded_nodes: planned.excluded.iter().map(|(n, _)| n.clone()).collect(),
            exclusion_reason: (!planned.excluded.is_empty()).then(|| {
                planned
                    .excluded
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }),
            gpu_products: planned.gpu_products.clone(),
            iteration_history: Vec::new(),
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
        if done(g) {
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
        let failure = if cond("Complete").or_else(|| cond("Succeeded")).is_some() {
            g.phase = "Succeeded".into();
            g.completion_time = Some(obs.now.to_string());
            None
        } else if let Some(m) = cond("Failed") {
            Some((JOB_FAILED, m))
        } else if job
            .created_at
            .is_some_and(|c| obs.now_secs.saturating_sub(c) > exec.timeout_secs)
        {
            Some((
                JOB_TIMED_OUT,
                format!("TrainJob {job_name} timed out after {}s", exec.timeout_secs),
            ))
        } else {
            g.phase = "Running".into();
            None
        };
        let Some((reason, message)) = failure else {
            continue;
        };
        let retry = reason == JOB_FAILED && g.retries < exec.retry_failed_groups;
        if retry || reason == JOB_TIMED_OUT {
            delete.push(ChildRef {
                api_version: "trainer.kubeflow.org/v1alpha1".into(),
                kind: "TrainJob".into(),
                name: job_name.clone(),
            });
        }
        if retry {
            g.retries += 1;
            g.phase = "Pending".into();
            g.job_ref = None;
            g.start_time = None;
            g.reason = None;
            g.message = Some(format!("retry {} after: {message}", g.retries));
        } else {
            g.phase = "Failed".into();
            g.reason = Some(reason.to_string());
            g.message = Some(message);
            g.completion_time = Some(obs.now.to_string());
        }
    }
    // Start pending groups within maxConcurrent; overflow groups wait for the full groups.
    let mut running = orch.groups.iter().filter(|g| g.phase == "Running").count();
    let full_done = orch.groups.iter().filter(|g| !g.overflow).all(done);
    for g in &mut orch.groups {
        if g.phase != "Pending" || (g.overflow && !full_done) {
            continue;
        }
        if exec.max_concurrent > 0 && running >= exec.max_concurrent {
            break;
        }
        let Some(pg) = planned.groups.iter().find(|p| p.name == g.name) else {
            continue;
        };
        for m in &pg.manifests {
            apply.push(for_attempt(m, iteration, g.retries));
        }
        g.job_ref = pg
            .job_name
            .as_ref()
            .map(|j| attempt_job_name(j, iteration, g.retries));
        g.phase = "Running".into();
        g.iteration = iteration;
        g.start_time = Some(obs.now.to_string());
        running += 1;
    }
    // Iteration bookkeeping.
    let mut requeue = Some(ACTIVE_REQUEUE);
    if orch.groups.iter().all(done) {
        orch.iteration_history.push(IterationRecord {
            iteration,
            succeeded_groups: i32::try_from(
                orch.groups
                    .iter()
                    .filter(|g| g.phase == "Succeeded")
                    .count(),
            )
            .unwrap_or(i32::MAX),
            failed_groups: orch
                .groups
                .iter()
                .filter(|g| g.phase == "Failed")
                .map(|g| FailedGroup {
                    name: g.name.clone(),
                    reason: g.reason.clone().unwrap_or_else(|| JOB_FAILED.into()),
                    message: g.message.clone().unwrap_or_default(),
                })
                .collect(),
            completion_time: Some(obs.now.to_string()),
        });
        orch.completed_iterations = iteration;
        if iteration < exec.iterations {
            set_execution(
                &mut status.conditions,
                IN_PROGRESS,
                "IterationCompleted",
                &format!(
                    "Iteration {iteration} of {} completed; starting iteration {}",
                    exec.iterations,
                    iteration + 1
                ),
                gen_,
                obs.now,
            );
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
        } else {
            let (succeeded_nodes, failed_nodes) = node_results(&orch);
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
            let failures: Vec<&FailedGroup> = orch
                .iteration_history
                .iter()
                .flat_map(|r| &r.failed_groups)
                .collect();
            if failures.is_empty() {
                set_execution(
                    &mut status.conditions,
                    SUCCEEDED,
                    "JobCompleted",
                    &format!("All {iteration} iterations completed successfully"),
                    gen_,
                    obs.now,
                );
            } else {
                let reason = if failures.iter().all(|f| f.reason == JOB_TIMED_OUT) {
                    JOB_TIMED_OUT
                } else {
                    "IterationsFailed"
                };
                set_execution(
                    &mut status.conditions,
                    FAILED,
                    reason,
                    &format!(
                        "{} groups failed across {iteration} iterations",
                        failures.len()
                    ),
                    gen_,
                    obs.now,
                );
            }
            requeue = None;
        }
    }
    status.orchestration = Some(orch);
    finish(&old, status, apply, delete, requeue)
}

fn finish(
    old: &WorkflowStatus,
    mut status: WorkflowStatus,
    apply: Vec<Value>,
    delete: Vec<ChildRef>,
    requeue_after: Option<Duration>,
) -> WorkflowDecision {
    status.phase = conditions::true_execution(&status.conditions).map(|c| c.type_.clone());
    let changed = status != *old;
    WorkflowDecision {
        apply,
        delete,
        status: changed.then_some(status),
        requeue_after,
    }
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
    /// Target nodes left out, with the reason (cordoned, other GPU architecture, capacity).
    pub excluded: Vec<(String, String)>,
    /// Distinct raw `nvidia.com/gpu.product` values of the placed nodes, sorted.
    pub gpu_products: Vec<String>,
    /// The execution settings of the resolved Workflow (overrides may change them).
    pub execution: Execution,
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
        excluded: placement.excluded.clone(),
        gpu_products: placement.gpu_products.clone(),
        execution: Execution::from_orchestration(&resolved.spec.orchestration),
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
    attempt_job_name(base, iteration, 0)
}

/// The TrainJob name of `base` in iteration `iteration` after `retries` retries of its group:
/// [`job_name`], then `-retry<r>` from the first retry on (a retried job never reuses the name
/// of the one being deleted).
pub fn attempt_job_name(base: &str, iteration: i32, retries: i32) -> String {
    let mut name = if iteration <= 1 {
        base.to_string()
    } else {
        format!("{base}-iter{iteration}")
    };
    if retries > 0 {
        name.push_str(&format!("-retry{retries}"));
    }
    name
}

fn for_attempt(m: &Value, iteration: i32, retries: i32) -> Value {
    let mut m = m.clone();
    if m.get("kind").and_then(Value::as_str) == Some("TrainJob")
        && let Some(n) = m.pointer_mut("/metadata/name")
        && let Some(base) = n.as_str()
    {
        *n = Value::String(attempt_job_name(base, iteration, retries));
    }
    m
}

/// Succeeded node names (comma-joined) and failed nodes (`name: WorkloadFailed: message`
/// lines): a node failed when a group holding it failed in any iteration (the latest failure's
/// message); every other placed node succeeded.
fn node_results(
    orch: &OrchestrationStatus,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut failed = BTreeMap::new();
    for f in orch.iteration_history.iter().flat_map(|r| &r.failed_groups) {
        let Some(g) = orch.groups.iter().find(|g| g.name == f.name) else {
            continue;
        };
        for n in &g.nodes {
            failed.insert(n.clone(), f.message.clone());
        }
    }
    let ok: std::collections::BTreeSet<&String> = orch
        .groups
        .iter()
        .flat_map(|g| &g.nodes)
        .filter(|n| !failed.contains_key(*n))
        .collect();
    let ok = ok.into_iter().cloned().collect::<Vec<_>>().join(",");
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
