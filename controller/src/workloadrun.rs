//! WorkloadRun reconcile decisions, as a pure function of what was observed
//! ([`decide_workload_run`]): build and create the Workflow once, then only mirror it.
//!
//! Order, per observation: a terminal run (Succeeded or Failed True) is left alone; a run with
//! `status.workflowRef` mirrors its Workflow (never rebuilt); a run without a framework fails
//! with `BuildFailed`; a same-named Workflow is adopted, waited for or refused
//! (`WorkflowNameCollision`); otherwise the Workflow is built with the rules (the same library
//! call as `nvcre-policy render --nodes-file`) and created.

use std::sync::Arc;
use std::time::Duration;

use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};
use nvcre_domain::crd::{
    Condition, TypedLocalObjectReference, WorkflowReference, WorkflowResource, WorkloadRunResource,
    WorkloadRunStatus, workload_run_labels,
};
use nvcre_domain::{Node, PolicyError, RenderRequest, render_workload_run};
use nvcre_engine::{RuleSet, Source, parse_documents};
use serde_json::{Value, json};

use crate::conditions::{
    self, FAILED, IN_PROGRESS, SUCCEEDED, VALIDATION_FAILED, is_terminal, set_execution,
};

/// How often an active run is looked at again even without a watch event.
pub const ACTIVE_REQUEUE: Duration = Duration::from_secs(15);

/// The message of a run whose spec names no framework.
pub fn no_framework_message(run: &str) -> String {
    format!("workloadrun {run}: exec framework selected but spec.framework.exec is nil")
}

/// The message of a same-named Workflow this run does not control.
pub fn collision_message(workflow: &str, namespace: &str, run: &str) -> String {
    format!(
        "Workflow {workflow:?} already exists in namespace {namespace:?} and is not controlled by WorkloadRun {run:?}; refusing to adopt it"
    )
}

/// A Kubernetes Event to emit for a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// `true` for a Warning event, `false` for Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// What the WorkloadRun reconciler does after a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum RunAction {
    /// Nothing to write (terminal, or nothing changed).
    None,
    /// Create (server-side apply) this Workflow, then write the status.
    CreateWorkflow(Box<WorkflowResource>),
    /// Write the status only.
    UpdateStatus,
    /// The name is held by an object that is going away: look again later.
    Wait,
}

/// A decision: the action, the status to write (when it changed), the Event to emit, and when
/// to look again.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDecision {
    /// What to do.
    pub action: RunAction,
    /// The complete new status, when it differs from the observed one.
    pub status: Option<WorkloadRunStatus>,
    /// The Event for a transition of the True execution condition.
    pub event: Option<EventNote>,
    /// Events about the Workflow this decision creates, recorded once it is created (before
    /// `event`): a Normal `NICResourceDetection` when detection requested no NIC resource,
    /// and one per finding below error of the rules (Warning `PolicyWarning`, Normal
    /// `PolicyInfo`; the message ends with the rule id in brackets).
    pub notes: Vec<EventNote>,
    /// Requeue after this long (`None`: only on watch events).
    pub requeue_after: Option<Duration>,
}

/// What [`decide_workload_run`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct RunObservation<'a> {
    /// The run.
    pub run: &'a WorkloadRunResource,
    /// The Workflow named like the run in its namespace (an uncached read), if any.
    pub workflow: Option<&'a WorkflowResource>,
    /// Every node of the cluster (target discovery runs on them).
    pub nodes: &'a Arc<Vec<Node>>,
    /// Now, RFC 3339 (condition transition times).
    pub now: &'a str,
}

/// Decides what to do for one observation of a WorkloadRun. Pure: the caller performs the
/// action.
pub fn decide_workload_run(rules: &RuleSet, obs: RunObservation<'_>) -> RunDecision {
    let run = obs.run;
    let old = run.status.clone().unwrap_or_default();
    if is_terminal(&old.conditions) {
        return RunDecision {
            action: RunAction::None,
            status: None,
            event: None,
            notes: Vec::new(),
            requeue_after: None,
        };
    }
    let mut status = old.clone();
    status.observed_generation = run.metadata.generation;
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let gen_ = run.metadata.generation;
    let mut action = RunAction::UpdateStatus;
    let mut requeue = Some(ACTIVE_REQUEUE);
    let mut notes = Vec::new();

    if status.workflow_ref.is_some() {
        mirror(&mut status, obs.workflow, gen_, obs.now);
    } else if run.spec.framework.torch.is_none()
        && run.spec.framework.mpi.is_none()
        && run.spec.framework.exec.is_none()
    {
        set_execution(
            &mut status.conditions,
            FAILED,
            "BuildFailed",
            &no_framework_message(&name),
            gen_,
            obs.now,
        );
    } else if let Some(existing) = obs.workflow {
        match ownership(existing, run) {
            Ownership::Terminating | Ownership::Predecessor => {
                return finish(&old, status, RunAction::Wait, Some(Duration::from_secs(5)));
            }
            Ownership::Foreign => {
                set_execution(
                    &mut status.conditions,
                    FAILED,
                    "WorkflowNameCollision",
                    &collision_message(&existing.name_any(), &namespace, &name),
                    gen_,
                    obs.now,
                );
            }
            Ownership::Ours => {
                // Our Workflow, but the status that names it was not written (or was written
                // from a stale read): what the build resolved is read back from the Workflow.
                status.workflow_ref = Some(WorkflowReference {
                    name: existing.name_any(),
                    namespace: namespace.clone(),
                });
                if status.resolved_gpus_per_node.is_none() {
                    status.resolved_gpus_per_node = gpus_per_node(&existing.spec.job_template);
                }
                detection_from_annotations(&mut status, existing.meta());
                set_execution(
                    &mut status.conditions,
                    IN_PROGRESS,
                    "WorkflowCreated",
                    &format!("Workflow {} created", existing.name_any()),
                    gen_,
                    obs.now,
                );
            }
        }
    } else {
        match build_workflow(rules, run, obs.nodes) {
            Ok(built) => {
                status.workflow_ref = Some(WorkflowReference {
                    name: name.clone(),
                    namespace: namespace.clone(),
                });
                status.detected_platform = Some(built.platform);
                status.detected_gpu_architecture = Some(built.gpu_architecture);
                status.resolved_gpus_per_node = built.gpus_per_node;
                set_execution(
                    &mut status.conditions,
                    IN_PROGRESS,
                    "WorkflowCreated",
                    &format!("Workflow {name} created"),
                    gen_,
                    obs.now,
                );
                action = RunAction::CreateWorkflow(Box::new(built.workflow));
                notes = built.notes;
            }
            Err(message) => {
                set_execution(
                    &mut status.conditions,
                    FAILED,
                    "BuildFailed",
                    &format!("workloadrun {name}: {message}"),
                    gen_,
                    obs.now,
                );
            }
        }
    }
    if is_terminal(&status.conditions) {
        requeue = None;
    }
    RunDecision {
        notes,
        ..finish(&old, status, action, requeue)
    }
}

fn finish(
    old: &WorkloadRunStatus,
    mut status: WorkloadRunStatus,
    action: RunAction,
    requeue_after: Option<Duration>,
) -> RunDecision {
    status.phase = conditions::true_execution(&status.conditions).map(|c| c.type_.clone());
    let event = transition_event(&old.conditions, &status.conditions);
    let changed = status != *old;
    let action = match action {
        RunAction::UpdateStatus if !changed => RunAction::None,
        other => other,
    };
    RunDecision {
        action,
        status: changed.then_some(status),
        event,
        notes: Vec::new(),
        requeue_after,
    }
}

/// The Event for a change of the True execution condition (its type or reason): reason and
/// message equal the condition's; Warning for `Failed`.
pub fn transition_event(old: &[Condition], new: &[Condition]) -> Option<EventNote> {
    let after = conditions::true_execution(new)?;
    let before = conditions::true_execution(old);
    if before.is_some_and(|b| b.type_ == after.type_ && b.reason == after.reason) {
        return None;
    }
    Some(EventNote {
        warning: after.type_ == FAILED,
        reason: after.reason.clone(),
        message: after.message.clone(),
    })
}

/// The Warning `BuildFailedStatusUpdateFailed` when the status write of a decision that failed
/// the build did not succeed: `Failed to update status after build failure: <error>; the build
/// failed with: <the BuildFailed message>`. `None` for any other decision.
pub fn build_failed_status_update_failed(decision: &RunDecision, error: &str) -> Option<EventNote> {
    let failed = decision
        .status
        .as_ref()
        .and_then(|s| conditions::true_execution(&s.conditions))
        .filter(|c| c.type_ == FAILED && c.reason == "BuildFailed")?;
    Some(EventNote {
        warning: true,
        reason: "BuildFailedStatusUpdateFailed".into(),
        message: format!(
            "Failed to update status after build failure: {error}; the build failed with: {}",
            failed.message
        ),
    })
}

enum Ownership {
    Terminating,
    Predecessor,
    Foreign,
    Ours,
}

fn ownership(workflow: &WorkflowResource, run: &WorkloadRunResource) -> Ownership {
    let controller = workflow
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    let ours = controller.is_some_and(|o| Some(&o.uid) == run.metadata.uid.as_ref());
    let predecessor = controller.is_some_and(|o| {
        o.kind == "WorkloadRun"
            && o.name == run.name_any()
            && Some(&o.uid) != run.metadata.uid.as_ref()
    });
    if workflow.metadata.deletion_timestamp.is_some() {
        Ownership::Terminating
    } else if ours {
        Ownership::Ours
    } else if predecessor {
        Ownership::Predecessor
    } else {
        Ownership::Foreign
    }
}

/// The processes per node a Workflow's `jobTemplate` gives its TrainJob (the GPUs per node the
/// build resolved), when it gives a count.
fn gpus_per_node(job_template: &Value) -> Option<i32> {
    job_template
        .pointer("/spec/workload/trainJob/trainer/numProcPerNode")
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
}

/// The platform and GPU architecture the render detected, read back from the annotations it
/// wrote on the Workflow, where the status lost them (a status written from a read older than
/// the one that named the Workflow); the Workflow's own status, mirrored later, wins.
/// Every render writes the architecture annotation, and the platform one only with a platform:
/// without the latter the status says `unknown`, as the build's own status does. A Workflow
/// without the architecture annotation tells nothing.
fn detection_from_annotations(status: &mut WorkloadRunStatus, meta: &ObjectMeta) {
    let Some(annotations) = meta
        .annotations
        .as_ref()
        .filter(|a| a.contains_key(nvcre_domain::ANNOTATION_ARCH))
    else {
        return;
    };
    let annotation = |key: &str| {
        Some(or_unknown(
            annotations.get(key).cloned().unwrap_or_default(),
        ))
    };
    if status.detected_platform.is_none() {
        status.detected_platform = annotation(nvcre_domain::ANNOTATION_PLATFORM);
    }
    if status.detected_gpu_architecture.is_none() {
        status.detected_gpu_architecture = annotation(nvcre_domain::ANNOTATION_ARCH);
    }
}

/// A detected platform or architecture as the status reports it: `unknown` when none was.
fn or_unknown(detected: String) -> String {
    if detected.is_empty() {
        "unknown".to_string()
    } else {
        detected
    }
}

/// Mirrors the Workflow into the run's status: the resolved GPUs per node when the status lost
/// them, detection, node ConfigMap refs, ValidationFailed
/// (before the terminal conditions), Succeeded / Failed; a vanished Workflow fails the run.
fn mirror(
    status: &mut WorkloadRunStatus,
    workflow: Option<&WorkflowResource>,
    generation: Option<i64>,
    now: &str,
) {
    let Some(wf) = workflow else {
        set_execution(
            &mut status.conditions,
            FAILED,
            "WorkflowDeleted",
            "Workflow was deleted",
            generation,
            now,
        );
        return;
    };
    if status.resolved_gpus_per_node.is_none() {
        status.resolved_gpus_per_node = gpus_per_node(&wf.spec.job_template);
    }
    detection_from_annotations(status, wf.meta());
    let Some(ws) = &wf.status else { return };
    if let Some(o) = &ws.orchestration {
        if o.detected_platform.is_some() {
            status.detected_platform.clone_from(&o.detected_platform);
        }
        if o.detected_gpu_architecture.is_some() {
            status
                .detected_gpu_architecture
                .clone_from(&o.detected_gpu_architecture);
        }
    }
    let cm = |r: &Option<TypedLocalObjectReference>| r.clone();
    if ws.succeeded_nodes_ref.is_some() {
        status.succeeded_nodes_ref = cm(&ws.succeeded_nodes_ref);
    }
    if ws.failed_nodes_ref.is_some() {
        status.failed_nodes_ref = cm(&ws.failed_nodes_ref);
    }
    if let Some(v) =
        conditions::get(&ws.conditions, VALIDATION_FAILED).filter(|c| c.status == "True")
    {
        conditions::set(
            &mut status.conditions,
            Condition {
                type_: VALIDATION_FAILED.into(),
                status: "True".into(),
                reason: "ThresholdViolation".into(),
                message: v.message.clone(),
                last_transition_time: None,
                observed_generation: generation,
            },
            now,
        );
    }
    if conditions::is_true(&ws.conditions, SUCCEEDED) {
        set_execution(
            &mut status.conditions,
            SUCCEEDED,
            "WorkflowSucceeded",
            "Workflow completed successfully",
            generation,
            now,
        );
    } else if let Some(f) = conditions::get(&ws.conditions, FAILED).filter(|c| c.status == "True") {
        let reason = if f.reason == "JobValidationFailed" {
            "WorkflowValidationFailed"
        } else {
            "WorkflowFailed"
        };
        set_execution(
            &mut status.conditions,
            FAILED,
            reason,
            &f.message,
            generation,
            now,
        );
    }
}

/// The Workflow a run builds and what the build detected.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltWorkflow {
    /// The Workflow to create: named like the run, labelled, controlled by the run.
    pub workflow: WorkflowResource,
    /// Detected platform (`unknown` when no target node was visible).
    pub platform: String,
    /// Detected GPU architecture (`unknown` when none).
    pub gpu_architecture: String,
    /// GPUs per node the build used (the trainer's `numProcPerNode`).
    pub gpus_per_node: Option<i32>,
    /// The Events the render asks for (see [`RunDecision::notes`]).
    pub notes: Vec<EventNote>,
}

/// Builds the run's Workflow with the rules: the target nodes among `nodes` give the platform and
/// architecture (best effort: with no target node visible the build uses the unknown platform
/// and the architecture from `target.nodeSelector`, as the original does).
///
/// # Errors
/// The build's message (label composition, placement, contract conflicts), without the
/// `workloadrun <name>: ` prefix.
pub fn build_workflow(
    rules: &RuleSet,
    run: &WorkloadRunResource,
    nodes: &Arc<Vec<Node>>,
) -> Result<BuiltWorkflow, String> {
    let name = run.name_any();
    let doc_value = json!({
        "apiVersion": nvcre_domain::crd::API_VERSION,
        "kind": "WorkloadRun",
        "metadata": {"name": name, "namespace": run.namespace()},
        "spec": run.spec,
    });
    let text = serde_json::to_string(&doc_value).map_err(|e| e.to_string())?;
    let source = Source::new(format!("workloadrun/{name}"), text);
    let docs = parse_documents(&source).map_err(|e| e.to_string())?;
    let doc = docs.first().ok_or("empty WorkloadRun document")?;
    let with_nodes = RenderRequest {
        nodes: Some(Arc::clone(nodes)),
        allow_unknown_arch: true,
        ..RenderRequest::default()
    };
    let rendered = match render_workload_run(rules, doc, &with_nodes) {
        Err(e)
            if matches!(e.cause(), PolicyError::Placement(m) if m.starts_with("No target nodes found")) =>
        {
            let blind = RenderRequest {
                allow_unknown_arch: true,
                ..RenderRequest::default()
            };
            render_workload_run(rules, doc, &blind)
        }
        other => other,
    }
    .map_err(|e| e.to_string())?;
    let mut workflow: WorkflowResource =
        serde_json::from_value(rendered.workflow.clone()).map_err(|e| e.to_string())?;
    let annotations = workflow.metadata.annotations.take();
    workflow.metadata = ObjectMeta {
        name: Some(name.clone()),
        namespace: run.namespace(),
        labels: Some(workload_run_labels(&name)),
        annotations,
        // Deleting the run with foreground propagation waits for the Workflow.
        owner_references: run.controller_owner_ref(&()).map(|mut o| {
            o.block_owner_deletion = Some(true);
            vec![o]
        }),
        ..ObjectMeta::default()
    };
    let gpus_per_node = rendered
        .workflow
        .get("spec")
        .and_then(|s| s.get("jobTemplate"))
        .and_then(gpus_per_node);
    let notes = render_notes(&rendered);
    Ok(BuiltWorkflow {
        notes,
        workflow,
        platform: or_unknown(rendered.platform),
        gpu_architecture: or_unknown(rendered.gpu_architecture),
        gpus_per_node,
    })
}

/// The Events a render asks for: its NIC detection note, then its findings below error.
fn render_notes(rendered: &nvcre_domain::Rendered) -> Vec<EventNote> {
    let nic = rendered.nic_detection.iter().map(|message| EventNote {
        warning: false,
        reason: nvcre_domain::NIC_DETECTION.to_string(),
        message: message.clone(),
    });
    let findings = rendered.findings.iter().map(|f| {
        let warning = f.severity != nvcre_engine::Severity::Info;
        EventNote {
            warning,
            reason: if warning {
                "PolicyWarning"
            } else {
                "PolicyInfo"
            }
            .to_string(),
            // Cut before the rule id, so a long message keeps it.
            message: {
                let rule = format!(" [{}]", f.rule_id);
                let room = crate::controller::EVENT_NOTE_MAX.saturating_sub(rule.len());
                format!("{}{rule}", crate::controller::cut_to(&f.message, room))
            },
        }
    });
    nic.chain(findings).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: nvcre_engine::Severity, message: String) -> nvcre_engine::Finding {
        nvcre_engine::Finding {
            rule_id: "quota".into(),
            pack: "p".into(),
            severity,
            message,
            file: "f".into(),
            document: 0,
            object: None,
            field_path: None,
            line: None,
            column: None,
            rule_file: "r".into(),
            rule_line: 1,
            stage: None,
            rule_error: false,
            at_key: false,
        }
    }

    #[test]
    fn a_long_rule_message_is_cut_before_its_rule_id() {
        let rendered = nvcre_domain::Rendered {
            workflow: Value::Null,
            warnings: Vec::new(),
            nic_detection: Some("no NIC".into()),
            findings: vec![
                finding(nvcre_engine::Severity::Warning, "é".repeat(600)),
                finding(nvcre_engine::Severity::Info, "short".into()),
            ],
            applied: Vec::new(),
            platform: String::new(),
            gpu_architecture: String::new(),
            nodes: Vec::new(),
        };
        let notes = render_notes(&rendered);
        let reasons: Vec<(&str, bool)> = notes
            .iter()
            .map(|n| (n.reason.as_str(), n.warning))
            .collect();
        assert_eq!(
            reasons,
            [
                ("NICResourceDetection", false),
                ("PolicyWarning", true),
                ("PolicyInfo", false)
            ]
        );
        let long = &notes[1].message;
        assert!(
            long.len() <= crate::controller::EVENT_NOTE_MAX,
            "{}",
            long.len()
        );
        // 'é' is two bytes: 1,024 − " [quota]" (8) − '…' (3) leaves 1,013, so 506 of them.
        assert_eq!(*long, format!("{}… [quota]", "é".repeat(506)));
        assert_eq!(notes[2].message, "short [quota]");
    }
}
