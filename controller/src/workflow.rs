//! Workflow reconcile decisions, as a pure function of what was observed
//! ([`decide_workflow`]): resolve the Workflow for the cluster's nodes and place it once (the
//! same library calls as `nvcre-policy render --nodes-file --expand`; the partition recorded
//! in status is fixed from then on, [`plan_recorded`]), start each group's
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
use nvcre_domain::{
    Group, Node, Placement, PolicyError, RenderRequest, Rendered, expand, place, place_recorded,
    render_workflow, verify_placement,
};
use nvcre_engine::{RuleSet, Source, parse_documents};
use serde_json::{Value, json};

use crate::conditions::{
    self, FAILED, IN_PROGRESS, SUCCEEDED, VALIDATION_FAILED, is_terminal, set_execution,
};
use crate::measure::{JobMeasured, measurement_manifests};
use crate::nodehealth::{
    HARDWARE_SUFFIX, JOB_HARDWARE_FAILED, NODE_HEALTH_CHECK_ERROR, NodeHealthCheck,
    hardware_message,
};
use crate::workloadrun::EventNote;
use nvcre_domain::measure::{Measured, Source as MeasureSource, Thresholds, measured_value};

/// A TrainJob as the reconciler sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedJob {
    /// Name.
    pub name: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: Option<i64>,
    /// `(type, status, message)` of each condition.
    pub conditions: Vec<(String, String, String)>,
    /// When its `Complete`, `Succeeded` or `Failed` condition turned true, seconds since the
    /// Unix epoch (the wait for measurements counts from it).
    pub finished_at: Option<i64>,
    /// The nodes its pods are bound to (read under Unpinned placement only, where the group
    /// records no nodes: what the node health monitor evaluates).
    pub nodes: Vec<String>,
}

/// What [`decide_workflow`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct WorkflowObservation<'a> {
    /// The Workflow.
    pub workflow: &'a WorkflowResource,
    /// Every node of the cluster.
    pub nodes: &'a Arc<Vec<Node>>,
    /// The same nodes as the API server returned them (JSON), by name: what the node health
    /// monitor's expression reads.
    pub node_objects: &'a BTreeMap<String, Value>,
    /// The TrainJobs labelled with this Workflow, by name.
    pub jobs: &'a BTreeMap<String, ObservedJob>,
    /// The final measurements of those TrainJobs, by TrainJob name (what thresholds read).
    pub measurements: &'a BTreeMap<String, JobMeasured>,
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
    /// Events about the Workflow besides its condition transitions (a hardware failure, a node
    /// health expression that fails), published once the status is written.
    pub events: Vec<EventNote>,
}

/// Poll interval while jobs run (timeouts are noticed within it).
pub const ACTIVE_REQUEUE: Duration = Duration::from_secs(15);

/// Default `timeoutPerJob` when the Workflow has none, or one that does not parse: 24 hours.
pub const DEFAULT_TIMEOUT_SECS: i64 = 24 * 3600;

/// Group reason of a TrainJob that reported `Failed`.
pub const JOB_FAILED: &str = "JobFailed";
/// Group reason of a running group whose TrainJob no longer exists (and that this controller
/// did not replace). Retried as a failed job is.
pub const JOB_DELETED: &str = "JobDeleted";
/// Group reason of a running group stopped because its Workflow failed for another cause (its
/// TrainJob deleted): it says nothing about the group's nodes.
pub const WORKFLOW_FAILED: &str = "WorkflowFailed";
/// Group (and Workflow) reason of a TrainJob that ran past `timeoutPerJob`.
pub const JOB_TIMED_OUT: &str = "JobTimedOut";
/// Group reason: a threshold's expression returned false.
pub const THRESHOLD_VIOLATED: &str = "ThresholdViolated";
/// Group reason: a threshold's expression could not be evaluated.
pub const INVALID_THRESHOLD_EXPRESSION: &str = "InvalidThresholdExpression";
/// Group reason: `spec.thresholds` names a key no measurement produces, or does not compile.
pub const UNKNOWN_THRESHOLD_KEY: &str = "UnknownThresholdKey";
/// Group reason: a threshold's value was not measured within `measurementTimeout`.
pub const MEASUREMENT_TIMEOUT: &str = "MeasurementTimeout";
/// Group message while a completed TrainJob waits for the measurements its thresholds read.
pub const AWAITING_MEASUREMENTS: &str = "TrainJob completed; waiting for its measurements";
/// Workflow reason when a failed group failed its performance validation.
pub const JOB_VALIDATION_FAILED: &str = "JobValidationFailed";
/// The Workflow's `ValidationFailed` message.
pub const VALIDATION_FAILED_MESSAGE: &str =
    "One or more Jobs failed performance threshold validation";
/// `measurementTimeout` when the Workflow sets none (or one that does not parse): 5 minutes.
pub const DEFAULT_MEASUREMENT_TIMEOUT_SECS: i64 = 300;

/// Whether a group failure reason is a performance-validation failure.
pub fn is_validation_reason(reason: &str) -> bool {
    matches!(
        reason,
        THRESHOLD_VIOLATED
            | INVALID_THRESHOLD_EXPRESSION
            | UNKNOWN_THRESHOLD_KEY
            | MEASUREMENT_TIMEOUT
    )
}

/// A duration in Go's `time.Duration` notation (`5m0s`, `1h0m0s`, `45s`), as the
/// MeasurementTimeout message prints it.
pub fn go_duration(secs: i64) -> String {
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// What measuring a group's TrainJob takes: the measurement configs of the resolved Workflow's
/// `jobTemplate.spec`, its thresholds (`validation.performance.thresholds.thresholds`) and how
/// long to wait for their values after the job completes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeasurementPlan {
    /// `jobTemplate.spec.bandwidthMeasurement`.
    pub bandwidth: Option<Value>,
    /// `jobTemplate.spec.goodputMeasurement`.
    pub goodput: Option<Value>,
    /// Metric key → CEL over `value`.
    pub thresholds: BTreeMap<String, String>,
    /// `validation.performance.measurementTimeout` (else `jobTemplate.spec.measurementTimeout`,
    /// else [`DEFAULT_MEASUREMENT_TIMEOUT_SECS`]), seconds.
    pub timeout_secs: i64,
}

impl MeasurementPlan {
    /// Reads the plan from a resolved Workflow spec.
    pub fn from_workflow(spec: &nvcre_domain::crd::WorkflowSpec) -> MeasurementPlan {
        let job = spec.job_template.get("spec");
        let perf = spec.validation.as_ref().and_then(|v| v.get("performance"));
        let thresholds = perf
            .and_then(|p| p.pointer("/thresholds/thresholds"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let timeout = perf
            .and_then(|p| p.get("measurementTimeout"))
            .or_else(|| job.and_then(|j| j.get("measurementTimeout")))
            .and_then(Value::as_str)
            .and_then(parse_go_duration)
            .filter(|s| *s > 0)
            .unwrap_or(DEFAULT_MEASUREMENT_TIMEOUT_SECS);
        MeasurementPlan {
            bandwidth: job.and_then(|j| j.get("bandwidthMeasurement")).cloned(),
            goodput: job.and_then(|j| j.get("goodputMeasurement")).cloned(),
            thresholds,
            timeout_secs: timeout,
        }
    }
}

/// The performance validation of a completed TrainJob: `Ok(())` when every threshold holds,
/// `Err(None)` while a value is still awaited, `Err(Some((reason, message)))` when it failed.
///
/// Unknown keys fail at once (`UnknownThresholdKey`); a key without a final measured value
/// waits until `timeout_secs` after the job completed, then fails with
/// `Measurement data not available within 5m0s for keys: [k1 k2]` (keys sorted, so the message
/// is deterministic); otherwise the first violated threshold (keys sorted) fails it with
/// `ThresholdViolated` or `InvalidThresholdExpression` and its message.
pub fn validate_job(
    plan: &MeasurementPlan,
    measured: Option<&JobMeasured>,
    waited_secs: i64,
) -> Result<(), Option<(&'static str, String)>> {
    if plan.thresholds.is_empty() {
        return Ok(());
    }
    let thresholds = Thresholds::compile(&plan.thresholds)
        .map_err(|errors| Some((UNKNOWN_THRESHOLD_KEY, errors.join("; "))))?;
    let bandwidth = measured
        .and_then(|m| m.bandwidth.clone())
        .map(Measured::Bandwidth);
    let goodput = measured
        .and_then(|m| m.goodput.clone())
        .map(|g| Measured::Goodput(Box::new(g)));
    let value = |t: &nvcre_domain::measure::Threshold| {
        let source = match t.key.source {
            MeasureSource::Bandwidth => bandwidth.as_ref(),
            MeasureSource::Goodput => goodput.as_ref(),
        };
        source.and_then(|m| measured_value(m, t.key.key))
    };
    let missing: Vec<&str> = thresholds
        .iter()
        .filter(|t| value(t).is_none())
        .map(|t| t.key.key)
        .collect();
    if !missing.is_empty() {
        if waited_secs > plan.timeout_secs {
            return Err(Some((
                MEASUREMENT_TIMEOUT,
                format!(
                    "Measurement data not available within {} for keys: [{}]",
                    go_duration(plan.timeout_secs),
                    missing.join(" ")
                ),
            )));
        }
        return Err(None);
    }
    for t in thresholds.iter() {
        let r = t.evaluate(value(t));
        if !r.passed {
            let reason = match r.reason {
                Some(nvcre_domain::measure::ViolationReason::ThresholdViolated) => {
                    THRESHOLD_VIOLATED
                }
                _ => INVALID_THRESHOLD_EXPRESSION,
            };
            return Err(Some((reason, r.message.unwrap_or_default())));
        }
    }
    Ok(())
}

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

/// The decision after a collision: the Workflow fails (terminal: a person has to rename or
/// remove the other object; retrying cannot help), cleaned up by [`fail_workflow`] from
/// `status` (the status the pass decided, whose applies stopped at the collision); `created`
/// names the TrainJobs that pass applied before it. The other object is neither deleted nor
/// written.
pub fn collision_decision(
    wf: &WorkflowResource,
    status: WorkflowStatus,
    jobs: &BTreeMap<String, ObservedJob>,
    created: &[String],
    (kind, child): (&str, &str),
    now: &str,
) -> WorkflowDecision {
    let failure = Failure {
        reason: collision_reason(kind),
        message: collision_message(
            kind,
            child,
            &wf.namespace().unwrap_or_default(),
            &wf.name_any(),
        ),
        foreign: Some((kind, child)),
    };
    fail_workflow(wf, status, jobs, created, &failure, now)
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
/// Per pass: on the first, place the Workflow (failing it with the placement's reason) and
/// record the groups; on later ones, render the recorded groups again ([`plan_recorded`]; a
/// failure then fails the Workflow through [`fail_workflow`]). Follow each running group's
/// TrainJob (Complete/Succeeded → Succeeded; Failed, or gone → retried while
/// `retryFailedGroups` allows, else Failed; past `timeoutPerJob` → Failed and the TrainJob
/// deleted; a later attempt this controller made is followed instead), start pending groups
/// within `maxConcurrent` (overflow groups after
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
            events: Vec::new(),
        };
    }
    let mut status = old.clone();
    status.observed_generation = wf.metadata.generation;
    let gen_ = wf.metadata.generation;
    let name = wf.name_any();
    let mut apply = Vec::new();
    let mut delete = Vec::new();

    // Once the groups are recorded the partition is fixed: the nodes are not partitioned
    // again, so a node joining, leaving or cordoned mid-run neither moves a group nor fails
    // the Workflow.
    let planned = match status
        .orchestration
        .as_ref()
        .filter(|o| !o.groups.is_empty())
    {
        Some(recorded) => plan_recorded(rules, wf, obs.nodes, recorded),
        None => plan(rules, wf, obs.nodes),
    };
    let planned = match planned {
        Ok(p) => p,
        Err((reason, message)) => {
            let failure = Failure {
                reason,
                message,
                foreign: None,
            };
            return fail_workflow(wf, status, obs.jobs, &[], &failure, obs.now);
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
                    domains: g.domains.clone(),
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
            hardware_failed_nodes: Vec::new(),
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
    // Compiled once per pass, used for every running group.
    let health = planned.node_health.as_deref().map(NodeHealthCheck::compile);
    let mut events = Vec::new();
    let mut unhealthy_nodes: Vec<String> = Vec::new();

    // Follow each running group's TrainJob.
    for g in &mut orch.groups {
        let Some(mut job_name) = g.job_ref.clone() else {
            continue;
        };
        if done(g) {
            continue;
        }
        let base = planned
            .groups
            .iter()
            .find(|p| p.name == g.name)
            .and_then(|p| p.job_name.as_deref());
        // The recorded job is gone but a later attempt of the group exists: this controller
        // replaced it on a pass whose status write failed. Follow the replacement.
        if !obs.jobs.contains_key(&job_name)
            && let Some((retries, newer)) =
                base.and_then(|b| latest_attempt(b, iteration, g.retries, obs.jobs))
        {
            g.message = Some(format!(
                "retry {retries} after: TrainJob {job_name} was replaced by {newer}"
            ));
            g.retries = retries;
            g.job_ref = Some(newer.clone());
            job_name = newer;
        }
        let failure = match obs.jobs.get(&job_name) {
            Some(job) => match check_nodes(g, job, health.as_ref(), obs.node_objects) {
                Some(NodeVerdict {
                    reason,
                    message,
                    unhealthy,
                }) => {
                    events.push(EventNote {
                        warning: true,
                        reason: if reason == JOB_HARDWARE_FAILED {
                            crate::nodehealth::HARDWARE_FAILURE_DETECTED.into()
                        } else {
                            reason.into()
                        },
                        message: format!("TrainJob {job_name} of {}: {message}", g.name),
                    });
                    unhealthy_nodes.extend(unhealthy);
                    Some((reason, message))
                }
                None => follow_job(g, &job_name, job, &planned.measurement, exec, &obs),
            },
            None => Some(job_gone(g, &job_name, exec, &obs)),
        };
        let Some((reason, message)) = failure else {
            continue;
        };
        // A timeout or an expression that fails would fail the same way again.
        let retry = !matches!(reason, JOB_TIMED_OUT | NODE_HEALTH_CHECK_ERROR)
            && g.retries < exec.retry_failed_groups;
        // A job stopped while running is deleted, so its pods release the GPUs.
        let stopped = matches!(
            reason,
            JOB_TIMED_OUT | JOB_HARDWARE_FAILED | NODE_HEALTH_CHECK_ERROR
        );
        if (retry || stopped) && obs.jobs.contains_key(&job_name) {
            delete.push(train_job_ref(&job_name));
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
    // Failed nodes accumulate: never removed, whatever a retry or a later iteration finds.
    orch.hardware_failed_nodes.extend(unhealthy_nodes);
    orch.hardware_failed_nodes.sort();
    orch.hardware_failed_nodes.dedup();
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
        // A later attempt already exists (a retry whose status write failed): starting the
        // recorded attempt again would re-run a job that already ended.
        if let Some((retries, _)) = pg
            .job_name
            .as_deref()
            .and_then(|b| latest_attempt(b, iteration, g.retries, obs.jobs))
        {
            g.retries = retries;
        }
        for m in &pg.manifests {
            apply.push(for_attempt(m, iteration, g.retries));
        }
        g.job_ref = pg
            .job_name
            .as_ref()
            .map(|j| attempt_job_name(j, iteration, g.retries));
        if let Some(job) = &g.job_ref {
            apply.extend(measurement_manifests(
                wf,
                job,
                planned.measurement.bandwidth.as_ref(),
                planned.measurement.goodput.as_ref(),
            ));
        }
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
                    domains: g.domains.clone(),
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
                let validation = failures.iter().any(|f| is_validation_reason(&f.reason));
                let hardware = failures.iter().any(|f| f.reason == JOB_HARDWARE_FAILED);
                let reason = if hardware {
                    JOB_HARDWARE_FAILED
                } else if failures.iter().all(|f| f.reason == JOB_TIMED_OUT) {
                    JOB_TIMED_OUT
                } else if validation {
                    JOB_VALIDATION_FAILED
                } else {
                    "IterationsFailed"
                };
                if validation {
                    conditions::set(
                        &mut status.conditions,
                        nvcre_domain::crd::Condition {
                            type_: VALIDATION_FAILED.into(),
                            status: "True".into(),
                            reason: JOB_VALIDATION_FAILED.into(),
                            message: VALIDATION_FAILED_MESSAGE.into(),
                            last_transition_time: None,
                            observed_generation: gen_,
                        },
                        obs.now,
                    );
                }
                set_execution(
                    &mut status.conditions,
                    FAILED,
                    reason,
                    &format!(
                        "{} groups failed across {iteration} iterations{}",
                        failures.len(),
                        if hardware { HARDWARE_SUFFIX } else { "" }
                    ),
                    gen_,
                    obs.now,
                );
            }
            requeue = None;
        }
    }
    status.orchestration = Some(orch);
    let mut decision = finish(&old, status, apply, delete, requeue);
    decision.events = events;
    decision
}

/// What the node health monitor found on a running group's nodes.
struct NodeVerdict {
    reason: &'static str,
    message: String,
    unhealthy: Vec<String>,
}

/// Whether `job` has a True `Complete`, `Succeeded` or `Failed` condition.
fn job_finished(job: &ObservedJob) -> bool {
    job.conditions
        .iter()
        .any(|(t, st, _)| st == "True" && matches!(t.as_str(), "Complete" | "Succeeded" | "Failed"))
}

/// The node health monitor on a running group's TrainJob: `None` when there is no monitor, the
/// job has finished (a terminal job is not evaluated) or every node is healthy. The nodes are
/// the group's recorded ones (under Unpinned, those the job's pods are bound to), each
/// evaluated when the cluster still has it.
///
/// A node found unhealthy fails the group with `JobHardwareFailed` and
/// `Hardware failure detected on node(s): [n1 n2]` (every unhealthy node, sorted). An
/// expression that does not compile or evaluate fails it closed with `NodeHealthCheckError`
/// and the error (`node <name>: CEL evaluation error: …` for an evaluation).
fn check_nodes(
    g: &GroupStatus,
    job: &ObservedJob,
    health: Option<&Result<NodeHealthCheck, String>>,
    node_objects: &BTreeMap<String, Value>,
) -> Option<NodeVerdict> {
    let health = health?;
    if job_finished(job) {
        return None;
    }
    let check = match health {
        Ok(c) => c,
        Err(e) => {
            return Some(NodeVerdict {
                reason: NODE_HEALTH_CHECK_ERROR,
                message: e.clone(),
                unhealthy: Vec::new(),
            });
        }
    };
    let mut names: Vec<&String> = if g.nodes.is_empty() {
        job.nodes.iter().collect()
    } else {
        g.nodes.iter().collect()
    };
    names.sort();
    names.dedup();
    let mut unhealthy = Vec::new();
    let mut error = None;
    for name in names {
        let Some(node) = node_objects.get(name) else {
            continue;
        };
        match check.unhealthy(node) {
            Ok(true) => unhealthy.push(name.clone()),
            Ok(false) => {}
            Err(e) => {
                error.get_or_insert_with(|| format!("node {name}: {e}"));
            }
        }
    }
    // An unhealthy node is a finding; an error elsewhere does not hide it.
    if !unhealthy.is_empty() {
        return Some(NodeVerdict {
            reason: JOB_HARDWARE_FAILED,
            message: hardware_message(&unhealthy),
            unhealthy,
        });
    }
    error.map(|message| NodeVerdict {
        reason: NODE_HEALTH_CHECK_ERROR,
        message,
        unhealthy: Vec::new(),
    })
}

/// The failure, if any, a running group's observed TrainJob reports; marks the group Running
/// or Succeeded otherwise.
///
/// Complete/Succeeded → the performance validation decides (a group waiting for its
/// measurements stays Running); Failed → `JobFailed` with the condition's message; running
/// past `timeoutPerJob` since its creation → `JobTimedOut`.
fn follow_job(
    g: &mut GroupStatus,
    job_name: &str,
    job: &ObservedJob,
    measurement: &MeasurementPlan,
    exec: Execution,
    obs: &WorkflowObservation<'_>,
) -> Option<(&'static str, String)> {
    let cond = |t: &str| {
        job.conditions
            .iter()
            .find(|(ty, st, _)| ty == t && st == "True")
            .map(|(_, _, m)| m.clone())
    };
    if cond("Complete").or_else(|| cond("Succeeded")).is_some() {
        // The wait counts from the job's completion; without a transition time on its
        // condition, from when this controller first saw it complete.
        let first_seen = g
            .completion_time
            .as_deref()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_second());
        let waited = job
            .finished_at
            .or(first_seen)
            .map_or(0, |t| obs.now_secs.saturating_sub(t));
        match validate_job(measurement, obs.measurements.get(job_name), waited) {
            Ok(()) => {
                g.phase = "Succeeded".into();
                g.completion_time = Some(obs.now.to_string());
                if g.message.as_deref() == Some(AWAITING_MEASUREMENTS) {
                    g.message = None;
                }
                None
            }
            // The job is done; its measurements are not final yet.
            Err(None) => {
                g.phase = "Running".into();
                g.message = Some(AWAITING_MEASUREMENTS.into());
                g.completion_time.get_or_insert_with(|| obs.now.to_string());
                None
            }
            Err(Some((reason, message))) => Some((reason, message)),
        }
    } else if let Some(m) = cond("Failed") {
        Some((JOB_FAILED, m))
    } else if job
        .created_at
        .is_some_and(|c| obs.now_secs.saturating_sub(c) > exec.timeout_secs)
    {
        Some((JOB_TIMED_OUT, timed_out_message(job_name, exec)))
    } else {
        g.phase = "Running".into();
        None
    }
}

/// The failure of a running group whose TrainJob `job_name` no longer exists: `JobTimedOut`
/// when the job was not seen complete and the group started more than `timeoutPerJob` ago
/// (this controller deleted it for that on a pass whose status write failed, or it was past
/// its time anyway), else `JobDeleted`.
fn job_gone(
    g: &GroupStatus,
    job_name: &str,
    exec: Execution,
    obs: &WorkflowObservation<'_>,
) -> (&'static str, String) {
    let started = g
        .start_time
        .as_deref()
        .filter(|_| g.completion_time.is_none())
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second());
    if started.is_some_and(|s| obs.now_secs.saturating_sub(s) > exec.timeout_secs) {
        (JOB_TIMED_OUT, timed_out_message(job_name, exec))
    } else {
        (
            JOB_DELETED,
            format!("TrainJob {job_name} was deleted before its group finished"),
        )
    }
}

fn timed_out_message(job_name: &str, exec: Execution) -> String {
    format!("TrainJob {job_name} timed out after {}s", exec.timeout_secs)
}

/// The latest attempt of the TrainJob `base` in `iteration` that `jobs` holds, when it is later
/// than attempt `after`: `(retries, name)`.
fn latest_attempt(
    base: &str,
    iteration: i32,
    after: i32,
    jobs: &BTreeMap<String, ObservedJob>,
) -> Option<(i32, String)> {
    let prefix = format!("{}-retry", attempt_job_name(base, iteration, 0));
    jobs.keys()
        .filter_map(|name| {
            let r: i32 = name.strip_prefix(&prefix)?.parse().ok()?;
            // Only the exact spelling this controller makes (`-retry01` is not attempt 1).
            (r > after && attempt_job_name(base, iteration, r) == *name).then(|| (r, name.clone()))
        })
        .max()
}

fn train_job_ref(name: &str) -> ChildRef {
    ChildRef {
        api_version: "trainer.kubeflow.org/v1alpha1".into(),
        kind: "TrainJob".into(),
        name: name.to_string(),
    }
}

/// Why a Workflow fails outside the end of its last iteration (its spec no longer resolves,
/// a child's name is taken): the Failed condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure<'a> {
    /// The Failed reason.
    pub reason: &'a str,
    /// The Failed message.
    pub message: String,
    /// `(kind, name)` of an object of that name that another owner controls: it is neither
    /// deleted nor written.
    pub foreign: Option<(&'a str, &'a str)>,
}

/// Fails the Workflow with `failure` from `status`, cleaning up as the end of the last
/// iteration would: every running TrainJob (`jobs` not finished, and those in `created`,
/// applied on this pass) is deleted, its group fails with reason `WorkflowFailed`, a running
/// group whose TrainJob was never created goes back to Pending, and, once the groups are
/// recorded, the node result ConfigMaps are written (a node whose group did not finish is in
/// neither list).
pub fn fail_workflow(
    wf: &WorkflowResource,
    mut status: WorkflowStatus,
    jobs: &BTreeMap<String, ObservedJob>,
    created: &[String],
    failure: &Failure<'_>,
    now: &str,
) -> WorkflowDecision {
    let old = wf.status.clone().unwrap_or_default();
    let name = wf.name_any();
    let foreign_job = failure
        .foreign
        .filter(|(kind, _)| *kind == "TrainJob")
        .map(|(_, n)| n);
    let finished = job_finished;
    let mut delete: Vec<ChildRef> = Vec::new();
    let mut stop = |job: &str| {
        if Some(job) != foreign_job && !delete.iter().any(|c| c.name == job) {
            delete.push(train_job_ref(job));
        }
    };
    let mut apply = Vec::new();
    if let Some(orch) = status.orchestration.as_mut() {
        for g in orch.groups.iter_mut().filter(|g| g.phase == "Running") {
            let Some(job) = g.job_ref.clone() else {
                continue;
            };
            let observed = jobs.get(&job).filter(|_| Some(job.as_str()) != foreign_job);
            let message = match observed {
                Some(j) if finished(j) => {
                    format!("the Workflow failed before TrainJob {job} was evaluated")
                }
                Some(_) => {
                    stop(&job);
                    format!("TrainJob {job} deleted: the Workflow failed")
                }
                None if created.contains(&job) && Some(job.as_str()) != foreign_job => {
                    stop(&job);
                    format!("TrainJob {job} deleted: the Workflow failed")
                }
                None => {
                    g.phase = "Pending".into();
                    g.job_ref = None;
                    g.start_time = None;
                    continue;
                }
            };
            g.phase = "Failed".into();
            g.reason = Some(WORKFLOW_FAILED.into());
            g.message = Some(message);
            g.completion_time = Some(now.to_string());
        }
    }
    // Any other TrainJob of this Workflow still running (one created on a pass whose status
    // write failed) is stopped too.
    for (job, j) in jobs {
        if !finished(j) {
            stop(job);
        }
    }
    if let Some(orch) = status
        .orchestration
        .as_ref()
        .filter(|o| !o.groups.is_empty())
    {
        let (succeeded_nodes, failed_nodes) = node_results(orch);
        for (suffix, data) in [("succeeded", succeeded_nodes), ("failed", failed_nodes)] {
            let cm = format!("{name}-{suffix}-nodes");
            let slot = if suffix == "succeeded" {
                &mut status.succeeded_nodes_ref
            } else {
                &mut status.failed_nodes_ref
            };
            // Another owner's ConfigMap of that name is not ours to point at.
            if failure.foreign == Some(("ConfigMap", cm.as_str())) {
                *slot = None;
                continue;
            }
            *slot = Some(config_map_ref(&cm));
            apply.push(node_config_map(wf, &cm, data));
        }
    }
    status.observed_generation = wf.metadata.generation;
    set_execution(
        &mut status.conditions,
        FAILED,
        failure.reason,
        &failure.message,
        wf.metadata.generation,
        now,
    );
    finish(&old, status, apply, delete, None)
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
        events: Vec::new(),
    }
}

/// A group as placed: its nodes and the manifests that run it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedGroup {
    /// `group-<i>` or `group-<k>-overflow`.
    pub name: String,
    /// Node names (empty under Unpinned).
    pub nodes: Vec<String>,
    /// Topology domains the nodes span, sorted (topology partitioning only).
    pub domains: Vec<String>,
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
    /// What measuring each group's TrainJob takes.
    pub measurement: MeasurementPlan,
    /// `jobTemplate.spec.nodeHealthMonitor.cel.expression` of the resolved Workflow (`None`:
    /// absent or empty, no node health monitor).
    pub node_health: Option<String>,
}

/// Resolves and places the Workflow: [`render_workflow`] with the nodes, the [`expand`] checks
/// (gang contract on each group's working copy, the manifests stage), then [`place`] for the
/// groups. What the first pass partitions; later passes use [`plan_recorded`].
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
    let rendered = render(rules, wf, node_request(Arc::clone(nodes))).map_err(fail)?;
    expand(rules, &rendered).map_err(fail)?;
    let resolved = resolved_of(&rendered)?;
    let policy = nvcre_domain::placement_policy(rules).map_err(fail)?;
    let placement = place(&resolved, &rendered.nodes, &policy)
        .map_err(|e| ("PartitionError", e.to_string()))?;
    Ok(assemble(wf, &rendered.platform, &resolved, placement))
}

/// Resolves the Workflow again and renders the groups recorded in `orch` for exactly their
/// recorded nodes ([`place_recorded`], checked as [`expand`] checks them), whatever the
/// cluster's nodes are now: the partition is fixed once recorded.
///
/// The resolution (overrides, execution settings, thresholds) sees the recorded nodes that are
/// still in the cluster, cordoned or not (under Unpinned, which records no nodes, every node,
/// cordoned or not); when none of them is a target any more, the recorded platform and GPU
/// architecture. The partition's description (`placement`, `total_nodes`, `nodes_per_job`,
/// `gpu_architecture`, `gpu_products`) is the recorded one; `excluded` is empty.
///
/// # Errors
/// As [`plan`], but never for the nodes alone: they no longer decide the groups.
pub fn plan_recorded(
    rules: &RuleSet,
    wf: &WorkflowResource,
    nodes: &Arc<Vec<Node>>,
    orch: &OrchestrationStatus,
) -> Result<Plan, (&'static str, String)> {
    let placed: std::collections::BTreeSet<&str> = orch
        .groups
        .iter()
        .flat_map(|g| &g.nodes)
        .map(String::as_str)
        .collect();
    // A cordon is the node health monitor's business, not a reason to resolve differently.
    let context: Vec<Node> = nodes
        .iter()
        .filter(|n| placed.is_empty() || placed.contains(n.name.as_str()))
        .map(|n| Node {
            unschedulable: false,
            ..n.clone()
        })
        .collect();
    let rendered = match render(rules, wf, node_request(Arc::new(context))) {
        Ok(r) => r,
        // No target node is left to detect from: resolve for what was detected at partition.
        Err(e) => match e.into_parts().0 {
            PolicyError::Placement(_) => {
                let (Some(platform), Some(arch)) = (
                    orch.detected_platform.clone(),
                    orch.detected_gpu_architecture.clone(),
                ) else {
                    return Err((
                        "NodeDiscoveryError",
                        "no recorded node is left and the status records no platform and GPU architecture to resolve for".to_string(),
                    ));
                };
                let req = RenderRequest {
                    platform: Some(platform),
                    gpu_arch: Some(arch),
                    allow_unknown_arch: true,
                    admitted: true,
                    ..RenderRequest::default()
                };
                render(rules, wf, req).map_err(fail)?
            }
            other => return Err(fail(other)),
        },
    };
    let resolved = resolved_of(&rendered)?;
    let policy = nvcre_domain::placement_policy(rules).map_err(fail)?;
    let groups = orch
        .groups
        .iter()
        .map(|g| Group {
            name: g.name.clone(),
            nodes: g.nodes.clone(),
            overflow: g.overflow,
            ..Group::default()
        })
        .collect();
    let placement = place_recorded(
        &resolved,
        groups,
        orch.gpu_products.clone(),
        i64::from(orch.nodes_per_job),
        &policy,
    )
    .map_err(|e| ("PartitionError", e.to_string()))?;
    verify_placement(rules, &resolved, &placement).map_err(fail)?;
    let mut planned = assemble(wf, &rendered.platform, &resolved, placement);
    planned.total_nodes = orch.total_nodes;
    planned.nodes_per_job = orch.nodes_per_job;
    if let Some(placement) = &orch.placement {
        planned.placement = placement.clone();
    }
    if let Some(arch) = &orch.detected_gpu_architecture {
        planned.gpu_architecture = arch.clone();
    }
    Ok(planned)
}

/// `(reason, message)` of the Failed condition for a render, check or placement error.
fn fail(e: PolicyError) -> (&'static str, String) {
    match e.into_parts().0 {
        e @ PolicyError::Rejected(_) => ("GangSchedulingConflict", e.to_string()),
        PolicyError::Placement(m) => ("PartitionError", m),
        PolicyError::Resolve(r) => ("OverrideError", format!("Failed to apply overrides: {r}")),
        other => ("NodeDiscoveryError", other.to_string()),
    }
}

/// A render for the cluster's `nodes` (platform and architecture detected from them).
fn node_request(nodes: Arc<Vec<Node>>) -> RenderRequest {
    RenderRequest {
        nodes: Some(nodes),
        allow_unknown_arch: true,
        // The API server admitted the object with the CRD's schema and rules, which the
        // admission stage mirrors: a failure here would be reported as a contract conflict.
        admitted: true,
        ..RenderRequest::default()
    }
}

/// [`render_workflow`] of `wf` as a Workflow document.
fn render(
    rules: &RuleSet,
    wf: &WorkflowResource,
    req: RenderRequest,
) -> Result<Rendered, PolicyError> {
    let name = wf.name_any();
    let value = json!({
        "apiVersion": nvcre_domain::crd::API_VERSION,
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": wf.namespace()},
        "spec": wf.spec,
    });
    let text = serde_json::to_string(&value).map_err(|e| PolicyError::Build(e.to_string()))?;
    let source = Source::new(format!("workflow/{name}"), text);
    let docs = parse_documents(&source).map_err(|e| PolicyError::Build(e.to_string()))?;
    let doc = docs
        .first()
        .ok_or_else(|| PolicyError::Build("empty Workflow document".to_string()))?;
    render_workflow(rules, doc, &req)
}

/// The resolved Workflow of a render.
fn resolved_of(rendered: &Rendered) -> Result<nvcre_domain::Workflow, (&'static str, String)> {
    serde_json::from_value(rendered.workflow.clone())
        .map_err(|e| ("NodeDiscoveryError", e.to_string()))
}

/// The [`Plan`] of a placement: every manifest owned by `wf` and labelled with its run.
fn assemble(
    wf: &WorkflowResource,
    platform: &str,
    resolved: &nvcre_domain::Workflow,
    placement: Placement,
) -> Plan {
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
    Plan {
        platform: platform.to_string(),
        gpu_architecture: placement.gpu_architecture.clone(),
        placement: format!("{:?}", placement.mode),
        total_nodes: i32::try_from(placement.total_nodes).unwrap_or(i32::MAX),
        nodes_per_job: i32::try_from(placement.nodes_per_job).unwrap_or(i32::MAX),
        workflow_dependencies: placement.workflow_dependencies.iter().map(owned).collect(),
        excluded: placement.excluded.clone(),
        gpu_products: placement.gpu_products.clone(),
        execution: Execution::from_orchestration(&resolved.spec.orchestration),
        measurement: MeasurementPlan::from_workflow(&resolved.spec),
        node_health: resolved
            .spec
            .job_template
            .pointer("/spec/nodeHealthMonitor/cel/expression")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
            .map(str::to_string),
        groups: placement
            .groups
            .iter()
            .map(|g| PlannedGroup {
                name: g.name.clone(),
                nodes: g.nodes.clone(),
                domains: g.domains.clone(),
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
    }
}

/// The controller ownerReference of `wf` for its children (`blockOwnerDeletion: true`).
pub(crate) fn owner_ref(wf: &WorkflowResource) -> Value {
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

/// Succeeded node names (comma-joined) and failed nodes (`name: <reason>: message` lines,
/// `ThresholdViolation` for a failed performance validation, else `WorkloadFailed`): a node
/// failed when a group holding it failed in any iteration (the latest failure's message). A
/// node of a group that did not finish the current iteration (never started, or stopped with
/// the Workflow: reason `WorkflowFailed`; by its node health expression failing; or for a
/// node's hardware) was not fully tested and is in neither list; every other placed node succeeded. A node the node
/// health monitor found unhealthy is failed for good, `HardwareFailureDetected: Hardware
/// failure detected by node health check`, whatever its group did later.
fn node_results(
    orch: &OrchestrationStatus,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let failed_here = |g: &&GroupStatus| {
        g.phase == "Failed" && !g.reason.as_deref().is_some_and(says_nothing_of_its_nodes)
    };
    // The current iteration is recorded in the history only once it completed; at the end of
    // the last one it repeats the last record.
    let current = orch.groups.iter().filter(failed_here).map(|g| {
        (
            g.name.clone(),
            g.reason.clone().unwrap_or_else(|| JOB_FAILED.into()),
            g.message.clone().unwrap_or_default(),
        )
    });
    let recorded = orch
        .iteration_history
        .iter()
        .flat_map(|r| &r.failed_groups)
        .map(|f| (f.name.clone(), f.reason.clone(), f.message.clone()));
    let mut failed = BTreeMap::new();
    for (name, reason, message) in recorded.chain(current) {
        if says_nothing_of_its_nodes(&reason) {
            continue;
        }
        let Some(g) = orch.groups.iter().find(|g| g.name == name) else {
            continue;
        };
        let reason = if is_validation_reason(&reason) {
            "ThresholdViolation"
        } else {
            "WorkloadFailed"
        };
        for n in &g.nodes {
            failed.insert(n.clone(), (reason, message.clone()));
        }
    }
    for n in &orch.hardware_failed_nodes {
        failed.insert(
            n.clone(),
            (
                crate::nodehealth::HARDWARE_FAILURE_DETECTED,
                crate::nodehealth::HARDWARE_FAILURE_MESSAGE.to_string(),
            ),
        );
    }
    let untested: std::collections::BTreeSet<&String> = orch
        .groups
        .iter()
        .filter(|g| g.phase != "Succeeded" && !failed_here(g))
        .flat_map(|g| &g.nodes)
        .collect();
    let ok: std::collections::BTreeSet<&String> = orch
        .groups
        .iter()
        .flat_map(|g| &g.nodes)
        .filter(|n| !failed.contains_key(*n) && !untested.contains(n))
        .collect();
    let ok = ok.into_iter().cloned().collect::<Vec<_>>().join(",");
    let failed = failed
        .iter()
        .map(|(n, (r, m))| format!("{n}: {r}: {m}"))
        .collect::<Vec<_>>()
        .join("\n");
    (
        BTreeMap::from([("nodes".to_string(), ok)]),
        BTreeMap::from([("nodes".to_string(), failed)]),
    )
}

/// A group failure that fails none of the group's nodes: the Workflow stopped it
/// (`WorkflowFailed`), its node health expression failed (`NodeHealthCheckError`), or another
/// node's hardware stopped it (`JobHardwareFailed`: the unhealthy nodes are listed apart).
fn says_nothing_of_its_nodes(reason: &str) -> bool {
    matches!(
        reason,
        WORKFLOW_FAILED | NODE_HEALTH_CHECK_ERROR | JOB_HARDWARE_FAILED
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

/// Parses a Go duration (`24h`, `1h30m`, `24h0m0s`, `1.5h`, `500ms`) into whole seconds,
/// a fraction of a second rounded up (a `500ms` timeout is not no timeout); `None` for
/// anything Go would not parse (the Workflow default then applies, as in the original).
pub fn parse_go_duration(s: &str) -> Option<i64> {
    let nanos = nvcre_engine::go_duration::parse(s).ok()?;
    Some(nanos.div_euclid(1_000_000_000) + i64::from(nanos.rem_euclid(1_000_000_000) > 0))
}
