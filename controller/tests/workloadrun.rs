//! WorkloadRun reconcile decisions, case by case.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::ObjectMeta;
use nvcre_controller::workloadrun::{
    EventNote, RunAction, RunObservation, build_failed_status_update_failed, decide_workload_run,
};
use nvcre_domain::crd::{
    Condition, OrchestrationStatus, TypedLocalObjectReference, WorkflowReference, WorkflowResource,
    WorkflowStatus, WorkloadRunResource, WorkloadRunStatus,
};

fn decide(
    run: &WorkloadRunResource,
    wf: Option<&WorkflowResource>,
    nodes: &Arc<Vec<nvcre_domain::Node>>,
) -> nvcre_controller::workloadrun::RunDecision {
    decide_workload_run(
        &rules(),
        RunObservation {
            run,
            workflow: wf,
            nodes,
            now: NOW,
        },
    )
}

fn workflow_named(name: &str, owner_uid: Option<&str>, owner_name: &str) -> WorkflowResource {
    let mut wf = WorkflowResource::new(name, Default::default());
    wf.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("team-a".into()),
        owner_references: owner_uid.map(|uid| {
            vec![OwnerReference {
                api_version: "nvcre.nvidia.com/v1alpha1".into(),
                kind: "WorkloadRun".into(),
                name: owner_name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        }),
        ..ObjectMeta::default()
    };
    wf
}

fn running(run: &mut WorkloadRunResource) {
    let mut st = WorkloadRunStatus {
        workflow_ref: Some(WorkflowReference {
            name: "nccl".into(),
            namespace: "team-a".into(),
        }),
        ..WorkloadRunStatus::default()
    };
    nvcre_controller::conditions::set_execution(
        &mut st.conditions,
        "InProgress",
        "WorkflowCreated",
        "Workflow nccl created",
        Some(1),
        "t0",
    );
    run.status = Some(st);
}

#[test]
fn builds_and_creates_the_workflow_with_labels_owner_and_detection() {
    let run = run("nccl", MPI_SPEC);
    let d = decide(&run, None, &aws_h100(2));
    let RunAction::CreateWorkflow(wf) = &d.action else {
        panic!("expected CreateWorkflow, got {:?}", d.action)
    };
    assert_eq!(wf.metadata.name.as_deref(), Some("nccl"));
    assert_eq!(wf.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        wf.metadata.labels.clone().unwrap_or_default(),
        [
            (
                "app.kubernetes.io/managed-by".to_string(),
                "nvcre".to_string()
            ),
            (
                "nvcre.nvidia.com/workload-run".to_string(),
                "nccl".to_string()
            ),
        ]
        .into()
    );
    let owner = &wf.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("WorkloadRun", "nccl", "run-uid", Some(true), Some(true))
    );
    let status = d.status.expect("status");
    assert_eq!(
        status.workflow_ref,
        Some(WorkflowReference {
            name: "nccl".into(),
            namespace: "team-a".into()
        })
    );
    assert_eq!(status.detected_platform.as_deref(), Some("aws"));
    assert_eq!(status.detected_gpu_architecture.as_deref(), Some("h100"));
    assert_eq!(status.resolved_gpus_per_node, Some(8));
    assert_eq!(status.phase.as_deref(), Some("InProgress"));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(
        conds(&status.conditions),
        vec![
            c(
                "InProgress",
                "True",
                "WorkflowCreated",
                "Workflow nccl created"
            ),
            c("Succeeded", "False", "Superseded", ""),
            c("Failed", "False", "Superseded", ""),
        ]
    );
    assert_eq!(
        d.event,
        Some(EventNote {
            warning: false,
            reason: "WorkflowCreated".into(),
            message: "Workflow nccl created".into()
        })
    );
    assert_eq!(d.requeue_after, Some(Duration::from_secs(15)));
}

#[test]
fn no_visible_target_node_builds_for_the_unknown_platform() {
    let run = run("nccl", MPI_SPEC);
    let d = decide(&run, None, &Arc::new(Vec::new()));
    assert!(matches!(d.action, RunAction::CreateWorkflow(_)));
    let status = d.status.expect("status");
    assert_eq!(status.detected_platform.as_deref(), Some("unknown"));
    assert_eq!(status.detected_gpu_architecture.as_deref(), Some("unknown"));
}

#[test]
fn no_framework_fails_with_build_failed() {
    let run = run("nccl", "image: img\nnumNodes: 1\nframework: {}\n");
    let d = decide(&run, None, &aws_h100(1));
    assert_eq!(d.action, RunAction::UpdateStatus);
    let status = d.status.expect("status");
    assert_eq!(
        conds(&status.conditions),
        vec![
            c("InProgress", "False", "Superseded", ""),
            c("Succeeded", "False", "Superseded", ""),
            c(
                "Failed",
                "True",
                "BuildFailed",
                "workloadrun nccl: exec framework selected but spec.framework.exec is nil"
            ),
        ]
    );
    assert_eq!(
        d.event.map(|e| (e.warning, e.reason)),
        Some((true, "BuildFailed".into()))
    );
    assert_eq!(d.requeue_after, None);
}

/// The status write of a BuildFailed decision that fails is the Warning
/// `BuildFailedStatusUpdateFailed`; any other decision's failed write is only retried.
#[test]
fn a_failed_status_write_after_build_failed_is_a_warning_event() {
    let failing = run("nccl", "image: img\nnumNodes: 1\nframework: {}\n");
    let d = decide(&failing, None, &aws_h100(1));
    assert_eq!(
        build_failed_status_update_failed(&d, "the server is gone"),
        Some(EventNote {
            warning: true,
            reason: "BuildFailedStatusUpdateFailed".into(),
            message: "Failed to update status after build failure: the server is gone; the build failed with: workloadrun nccl: exec framework selected but spec.framework.exec is nil".into(),
        })
    );
    let built = decide(&run("nccl", MPI_SPEC), None, &aws_h100(2));
    assert_eq!(
        build_failed_status_update_failed(&built, "the server is gone"),
        None
    );
}

#[test]
fn a_queue_conflict_fails_the_build_with_the_cli_text() {
    let spec = format!(
        "{MPI_SPEC}gangScheduler: {{schedulerName: kai-scheduler, queue: team-a}}
overrides:
  - when: {{platform: {{equals: aws}}}}
    jobTemplate:
      spec:
        workloadMetadata:
          labels: {{kai.scheduler/queue: team-b}}
"
    );
    let run = run("nccl", &spec);
    let d = decide(&run, None, &aws_h100(2));
    assert_eq!(d.action, RunAction::UpdateStatus);
    let failed = d
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .expect("Failed");
    assert_eq!(failed.reason, "BuildFailed");
    assert_eq!(
        failed.message,
        "workloadrun nccl: spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\""
    );
}

#[test]
fn adopts_its_own_workflow() {
    let run = run("nccl", MPI_SPEC);
    let wf = workflow_named("nccl", Some("run-uid"), "nccl");
    let d = decide(&run, Some(&wf), &aws_h100(2));
    assert_eq!(d.action, RunAction::UpdateStatus);
    let status = d.status.expect("status");
    assert_eq!(status.workflow_ref.map(|r| r.name), Some("nccl".into()));
    assert_eq!(
        conds(&status.conditions)[0],
        c(
            "InProgress",
            "True",
            "WorkflowCreated",
            "Workflow nccl created"
        )
    );
}

#[test]
fn refuses_a_foreign_workflow_of_the_same_name() {
    let run = run("nccl", MPI_SPEC);
    let wf = workflow_named("nccl", None, "");
    let d = decide(&run, Some(&wf), &aws_h100(2));
    let status = d.status.expect("status");
    assert_eq!(
        conds(&status.conditions)[2],
        c(
            "Failed",
            "True",
            "WorkflowNameCollision",
            "Workflow \"nccl\" already exists in namespace \"team-a\" and is not controlled by WorkloadRun \"nccl\"; refusing to adopt it"
        )
    );
    assert_eq!(status.workflow_ref, None);
}

#[test]
fn waits_for_a_predecessor_or_terminating_workflow() {
    let run = run("nccl", MPI_SPEC);
    let predecessor = workflow_named("nccl", Some("old-uid"), "nccl");
    let d = decide(&run, Some(&predecessor), &aws_h100(2));
    // Only observedGeneration is recorded; no condition, no ref.
    let only_generation = Some(WorkloadRunStatus {
        observed_generation: Some(1),
        ..WorkloadRunStatus::default()
    });
    assert_eq!(
        (d.action, d.status, d.event),
        (RunAction::Wait, only_generation.clone(), None)
    );
    assert_eq!(d.requeue_after, Some(Duration::from_secs(5)));
    let mut terminating = workflow_named("nccl", None, "");
    terminating.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let d = decide(&run, Some(&terminating), &aws_h100(2));
    assert_eq!((d.action, d.status), (RunAction::Wait, only_generation));
}

#[test]
fn mirrors_success_and_detection_without_rebuilding() {
    let mut run = run("nccl", MPI_SPEC);
    running(&mut run);
    let mut wf = workflow_named("nccl", Some("run-uid"), "nccl");
    let mut ws = WorkflowStatus {
        succeeded_nodes_ref: Some(TypedLocalObjectReference {
            api_group: None,
            kind: "ConfigMap".into(),
            name: "nccl-succeeded-nodes".into(),
        }),
        orchestration: Some(OrchestrationStatus {
            detected_platform: Some("aws".into()),
            detected_gpu_architecture: Some("h100".into()),
            ..OrchestrationStatus::default()
        }),
        ..WorkflowStatus::default()
    };
    nvcre_controller::conditions::set_execution(
        &mut ws.conditions,
        "Succeeded",
        "IterationCompleted",
        "Completed 1 of 1 iteration(s)",
        None,
        "t1",
    );
    wf.status = Some(ws);
    let d = decide(&run, Some(&wf), &Arc::new(Vec::new()));
    assert_eq!(d.action, RunAction::UpdateStatus);
    let status = d.status.expect("status");
    assert_eq!(status.detected_platform.as_deref(), Some("aws"));
    assert_eq!(
        status.succeeded_nodes_ref.map(|r| r.name),
        Some("nccl-succeeded-nodes".into())
    );
    assert_eq!(
        conds(&status.conditions),
        vec![
            c("InProgress", "False", "Superseded", ""),
            c(
                "Succeeded",
                "True",
                "WorkflowSucceeded",
                "Workflow completed successfully"
            ),
            c("Failed", "False", "Superseded", ""),
        ]
    );
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(d.requeue_after, None);
}

#[test]
fn mirrors_validation_failure_alongside_failed() {
    let mut run = run("nccl", MPI_SPEC);
    running(&mut run);
    let mut wf = workflow_named("nccl", Some("run-uid"), "nccl");
    let mut ws = WorkflowStatus::default();
    ws.conditions.push(Condition {
        type_: "ValidationFailed".into(),
        status: "True".into(),
        reason: "ThresholdViolation".into(),
        message: "busBandwidthGBps 310 violates value >= 400".into(),
        ..Condition::default()
    });
    nvcre_controller::conditions::set_execution(
        &mut ws.conditions,
        "Failed",
        "JobValidationFailed",
        "group-0: thresholds violated",
        None,
        "t1",
    );
    wf.status = Some(ws);
    let d = decide(&run, Some(&wf), &Arc::new(Vec::new()));
    let status = d.status.expect("status");
    assert_eq!(
        conds(&status.conditions),
        vec![
            c("InProgress", "False", "Superseded", ""),
            c("Succeeded", "False", "Superseded", ""),
            c(
                "Failed",
                "True",
                "WorkflowValidationFailed",
                "group-0: thresholds violated"
            ),
            c(
                "ValidationFailed",
                "True",
                "ThresholdViolation",
                "busBandwidthGBps 310 violates value >= 400"
            ),
        ]
    );
}

#[test]
fn a_vanished_workflow_fails_the_run() {
    let mut run = run("nccl", MPI_SPEC);
    running(&mut run);
    let d = decide(&run, None, &Arc::new(Vec::new()));
    assert_eq!(
        conds(&d.status.expect("status").conditions)[2],
        c("Failed", "True", "WorkflowDeleted", "Workflow was deleted")
    );
}

#[test]
fn a_terminal_run_is_left_alone() {
    let mut run = run("nccl", "image: img\nnumNodes: 1\nframework: {}\n");
    let first = decide(&run, None, &aws_h100(1));
    run.status = first.status;
    let d = decide(&run, None, &aws_h100(1));
    assert_eq!(
        (d.action, d.status, d.event, d.requeue_after),
        (RunAction::None, None, None, None)
    );
}

#[test]
fn an_unchanged_mirror_writes_nothing() {
    let mut run = run("nccl", MPI_SPEC);
    running(&mut run);
    if let Some(s) = run.status.as_mut() {
        s.observed_generation = Some(1);
        s.phase = Some("InProgress".into());
    }
    let wf = workflow_named("nccl", Some("run-uid"), "nccl");
    let d = decide(&run, Some(&wf), &Arc::new(Vec::new()));
    assert_eq!((d.action, d.status, d.event), (RunAction::None, None, None));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(15)));
}

/// A reconcile that finds its own Workflow but a status without it (the status write after the
/// create failed, or the read was stale) reads the resolved GPUs per node and the detected
/// platform and architecture back from the Workflow, and every later mirror restores them if a
/// stale write dropped them (before the Workflow's own status reports detection).
#[test]
fn adopting_or_mirroring_its_own_workflow_keeps_what_the_build_resolved() {
    let mut wf = workflow_named("nccl", Some("run-uid"), "nccl");
    wf.spec.job_template = serde_json::json!({
        "spec": {"workload": {"trainJob": {"trainer": {"numProcPerNode": 8}}}}
    });
    wf.metadata.annotations = Some(
        [
            (nvcre_domain::ANNOTATION_PLATFORM, "aws"),
            (nvcre_domain::ANNOTATION_ARCH, "h100"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    let resolved = |s: &WorkloadRunStatus| {
        (
            s.resolved_gpus_per_node,
            s.detected_platform.clone(),
            s.detected_gpu_architecture.clone(),
        )
    };
    let want = (Some(8), Some("aws".to_string()), Some("h100".to_string()));
    let run = run("nccl", MPI_SPEC);
    let adopted = decide(&run, Some(&wf), &aws_h100(2))
        .status
        .expect("status");
    assert_eq!(
        adopted.workflow_ref.as_ref().map(|r| r.name.as_str()),
        Some("nccl")
    );
    assert_eq!(resolved(&adopted), want);
    let mut run = run;
    running(&mut run);
    let mirrored = decide(&run, Some(&wf), &aws_h100(2))
        .status
        .expect("status");
    assert_eq!(resolved(&mirrored), want);
    // The Workflow's own status, once it reports detection, wins over the annotations.
    wf.status = Some(WorkflowStatus {
        orchestration: Some(OrchestrationStatus {
            detected_platform: Some("gcp".into()),
            detected_gpu_architecture: Some("gb200".into()),
            ..OrchestrationStatus::default()
        }),
        ..WorkflowStatus::default()
    });
    let mirrored = decide(&run, Some(&wf), &aws_h100(2))
        .status
        .expect("status");
    assert_eq!(
        resolved(&mirrored),
        (Some(8), Some("gcp".to_string()), Some("gb200".to_string()))
    );
    wf.status = None;
    // A render without a platform wrote no platform annotation: `unknown`, as a build says.
    wf.metadata.annotations = Some(
        [(nvcre_domain::ANNOTATION_ARCH.to_string(), String::new())]
            .into_iter()
            .collect(),
    );
    let mut run = run;
    run.status = None;
    let adopted = decide(&run, Some(&wf), &aws_h100(2))
        .status
        .expect("status");
    assert_eq!(
        resolved(&adopted),
        (
            Some(8),
            Some("unknown".to_string()),
            Some("unknown".to_string())
        )
    );
}

#[test]
fn the_render_notes_become_events_of_the_created_workflow() {
    // Onprem GB200 nodes with no NIC resource allocatable: detection requests none.
    let docs: Vec<serde_json::Value> = (0..2)
        .map(|i| node_doc(&format!("node-{i}"), "NVIDIA-GB200", ""))
        .collect();
    let nodes = Arc::new(nvcre_domain::nodes_from_documents(&docs).expect("nodes"));
    // Unpinned across nodes without a gang scheduler: the admission stage warns.
    let spec = format!("{MPI_SPEC}orchestration: {{placement: Unpinned}}\n");
    let d = decide(&run("nccl", &spec), None, &nodes);
    assert!(
        matches!(d.action, RunAction::CreateWorkflow(_)),
        "{:?}",
        d.action
    );
    assert_eq!(
        d.notes,
        [
            EventNote {
                warning: false,
                reason: "NICResourceDetection".into(),
                message: "no rdma/* or nvidia.com/mlnxnics resource is allocatable at 8 on every target node; no NIC resource is requested (set spec.nicResourceName)".into(),
            },
            EventNote {
                warning: true,
                reason: "PolicyWarning".into(),
                message: "numNodes > 1 under placement Unpinned without spec.gangScheduler: on a contended cluster some pods can bind while the rest stay Pending; set spec.gangScheduler so the gang schedules whole or not at all [wr-unpinned-multi-node-gang]".into(),
            },
        ]
    );
    // Nothing to say: no notes.
    let d = decide(&run("nccl", MPI_SPEC), None, &aws_h100(2));
    assert_eq!(d.notes, []);
}
