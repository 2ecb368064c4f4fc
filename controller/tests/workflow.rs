//! Workflow reconcile decisions: placement, job creation within maxConcurrent, progress from
//! TrainJob conditions, timeouts, iterations, node result ConfigMaps.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use nvcre_controller::workflow::{
    ChildRef, Execution, ObservedJob, WorkflowDecision, WorkflowObservation, attempt_job_name,
    decide_workflow, parse_go_duration,
};
use nvcre_domain::crd::{FailedGroup, GroupStatus, IterationRecord, WorkflowResource};
use serde_json::{Value, json};

fn workflow(spec_extra: &str, nodes: &Arc<Vec<nvcre_domain::Node>>) -> WorkflowResource {
    let run = run("nccl", &format!("{MPI_SPEC}{spec_extra}"));
    let mut wf = nvcre_controller::workloadrun::build_workflow(&rules(), &run, nodes)
        .expect("build")
        .workflow;
    wf.metadata.uid = Some("wf-uid".into());
    wf.metadata.generation = Some(1);
    wf
}

fn decide(
    wf: &WorkflowResource,
    nodes: &Arc<Vec<nvcre_domain::Node>>,
    jobs: &BTreeMap<String, ObservedJob>,
    now_secs: i64,
) -> WorkflowDecision {
    decide_with(wf, nodes, &BTreeMap::new(), jobs, now_secs)
}

/// [`decide`] with the nodes as the API server returns them (what the node health monitor
/// reads).
fn decide_with(
    wf: &WorkflowResource,
    nodes: &Arc<Vec<nvcre_domain::Node>>,
    node_objects: &BTreeMap<String, Value>,
    jobs: &BTreeMap<String, ObservedJob>,
    now_secs: i64,
) -> WorkflowDecision {
    decide_workflow(
        &rules(),
        WorkflowObservation {
            workflow: wf,
            nodes,
            node_objects,
            jobs,
            measurements: &BTreeMap::new(),
            now_secs,
            now: NOW,
        },
    )
}

fn kinds_and_names(apply: &[Value]) -> Vec<(String, String)> {
    apply
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap_or_default().to_string(),
                m["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn job(name: &str, created: i64, cond: Option<(&str, &str)>) -> (String, ObservedJob) {
    (
        name.to_string(),
        ObservedJob {
            name: name.into(),
            created_at: Some(created),
            conditions: cond
                .map(|(t, m)| vec![(t.to_string(), "True".to_string(), m.to_string())])
                .unwrap_or_default(),
            finished_at: cond.map(|_| created),
            nodes: Vec::new(),
        },
    )
}

fn groups(d: &WorkflowDecision) -> Vec<(String, Vec<String>, String, Option<String>)> {
    d.status
        .as_ref()
        .and_then(|s| s.orchestration.as_ref())
        .map(|o| {
            o.groups
                .iter()
                .map(|g: &GroupStatus| {
                    (
                        g.name.clone(),
                        g.nodes.clone(),
                        g.phase.clone(),
                        g.job_ref.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn partitions_and_creates_every_group_with_owner_and_labels() {
    let nodes = aws_h100(4);
    let wf = workflow("", &nodes);
    let d = decide(&wf, &nodes, &BTreeMap::new(), 0);
    assert_eq!(
        kinds_and_names(&d.apply),
        vec![
            ("TrainingRuntime".into(), "nccl-runtime-nccl-group-0".into()),
            ("TrainJob".into(), "nccl-group-0".into()),
            ("TrainingRuntime".into(), "nccl-runtime-nccl-group-1".into()),
            ("TrainJob".into(), "nccl-group-1".into()),
        ]
    );
    let tj = &d.apply[1];
    assert_eq!(
        tj["metadata"]["ownerReferences"],
        json!([{"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "name": "nccl",
                "uid": "wf-uid", "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(d.delete, Vec::new());
    assert_eq!(
        tj["metadata"]["labels"]["nvcre.nvidia.com/workload-run"],
        "nccl"
    );
    assert_eq!(
        tj["metadata"]["labels"]["nvcre.nvidia.com/workflow"],
        "nccl"
    );
    assert_eq!(
        tj["metadata"]["labels"]["nvcre.nvidia.com/group"],
        "group-0"
    );
    assert_eq!(tj["metadata"]["namespace"], "team-a");
    assert_eq!(
        groups(&d),
        vec![
            (
                "group-0".into(),
                vec!["node-0".into(), "node-1".into()],
                "Running".into(),
                Some("nccl-group-0".into())
            ),
            (
                "group-1".into(),
                vec!["node-2".into(), "node-3".into()],
                "Running".into(),
                Some("nccl-group-1".into())
            ),
        ]
    );
    let status = d.status.expect("status");
    let o = status.orchestration.clone().expect("orchestration");
    assert_eq!(
        (
            o.total_nodes,
            o.nodes_per_job,
            o.total_groups,
            o.current_iteration
        ),
        (4, 2, 2, 1)
    );
    assert_eq!(o.detected_platform.as_deref(), Some("aws"));
    assert_eq!(o.detected_gpu_architecture.as_deref(), Some("h100"));
    assert_eq!(o.gpu_products, ["NVIDIA-H100-80GB-HBM3"]);
    assert_eq!(
        (o.excluded_nodes.len(), o.exclusion_reason.as_deref()),
        (0, None)
    );
    assert_eq!(
        conds(&status.conditions)[0],
        c(
            "InProgress",
            "True",
            "GroupsPartitioned",
            "Discovered 4 nodes, partitioned into 2 groups (2 nodes/job)"
        )
    );
    assert_eq!(d.requeue_after, Some(Duration::from_secs(15)));
}

#[test]
fn max_concurrent_holds_groups_back() {
    let nodes = aws_h100(4);
    let wf = workflow("orchestration: {maxConcurrent: 1}\n", &nodes);
    let d = decide(&wf, &nodes, &BTreeMap::new(), 0);
    assert_eq!(
        groups(&d).iter().map(|g| g.2.as_str()).collect::<Vec<_>>(),
        vec!["Running", "Pending"]
    );
    // group-0 completes: group-1 starts on the next pass.
    let mut wf2 = wf.clone();
    wf2.status = d.status.clone();
    let jobs = BTreeMap::from([job("nccl-group-0", 0, Some(("Complete", "")))]);
    let d2 = decide(&wf2, &nodes, &jobs, 10);
    assert_eq!(
        groups(&d2).iter().map(|g| g.2.as_str()).collect::<Vec<_>>(),
        vec!["Succeeded", "Running"]
    );
    assert_eq!(
        kinds_and_names(&d2.apply),
        vec![
            ("TrainingRuntime".into(), "nccl-runtime-nccl-group-1".into()),
            ("TrainJob".into(), "nccl-group-1".into()),
        ]
    );
}

#[test]
fn all_groups_done_publish_node_results_and_succeed() {
    let nodes = aws_h100(4);
    let wf0 = workflow("", &nodes);
    let d = decide(&wf0, &nodes, &BTreeMap::new(), 0);
    let mut wf = wf0.clone();
    wf.status = d.status;
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 0, Some(("Complete", ""))),
    ]);
    let d = decide(&wf, &nodes, &jobs, 100);
    let cms: Vec<&Value> = d
        .apply
        .iter()
        .filter(|m| m["kind"] == "ConfigMap")
        .collect();
    assert_eq!(cms[0]["metadata"]["name"], "nccl-succeeded-nodes");
    assert_eq!(
        cms[0]["data"],
        json!({"nodes": "node-0,node-1,node-2,node-3"})
    );
    assert_eq!(cms[1]["metadata"]["name"], "nccl-failed-nodes");
    assert_eq!(cms[1]["data"], json!({"nodes": ""}));
    let status = d.status.expect("status");
    assert_eq!(
        status.succeeded_nodes_ref.map(|r| r.name),
        Some("nccl-succeeded-nodes".into())
    );
    assert_eq!(
        conds(&status.conditions)[1],
        c(
            "Succeeded",
            "True",
            "JobCompleted",
            "All 1 iterations completed successfully"
        )
    );
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    assert_eq!(d.requeue_after, None);
}

#[test]
fn a_failed_job_fails_its_group_and_the_workflow() {
    let nodes = aws_h100(4);
    let wf0 = workflow("", &nodes);
    let mut wf = wf0.clone();
    wf.status = decide(&wf0, &nodes, &BTreeMap::new(), 0).status;
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 0, Some(("Failed", "pod node-3 OOMKilled"))),
    ]);
    let d = decide(&wf, &nodes, &jobs, 100);
    let cm = d
        .apply
        .iter()
        .find(|m| m["metadata"]["name"] == "nccl-failed-nodes")
        .expect("cm");
    assert_eq!(
        cm["data"]["nodes"],
        "node-2: WorkloadFailed: pod node-3 OOMKilled\nnode-3: WorkloadFailed: pod node-3 OOMKilled"
    );
    assert_eq!(
        conds(&d.status.expect("status").conditions)[2],
        c(
            "Failed",
            "True",
            "IterationsFailed",
            "1 groups failed across 1 iterations"
        )
    );
    // A failed job is kept (its pods have finished; their logs stay readable).
    assert_eq!(d.delete, Vec::new());
}

#[test]
fn a_job_past_timeout_per_job_fails() {
    let nodes = aws_h100(2);
    let wf0 = workflow("orchestration: {timeoutPerJob: 1h}\n", &nodes);
    let mut wf = wf0.clone();
    wf.status = decide(&wf0, &nodes, &BTreeMap::new(), 0).status;
    let jobs = BTreeMap::from([job("nccl-job", 0, None)]);
    // At the limit it still runs.
    let d = decide(&wf, &nodes, &jobs, 3600);
    assert_eq!(groups(&d), Vec::new(), "nothing changed: {:?}", d.status);
    assert_eq!(d.delete, Vec::new());
    let d = decide(&wf, &nodes, &jobs, 3601);
    // The timed-out job is deleted so that its pods release the GPUs.
    assert_eq!(
        d.delete,
        vec![ChildRef {
            api_version: "trainer.kubeflow.org/v1alpha1".into(),
            kind: "TrainJob".into(),
            name: "nccl-job".into()
        }]
    );
    let status = d.status.expect("status");
    let g = &status.orchestration.as_ref().expect("orch").groups[0];
    assert_eq!(
        (g.phase.as_str(), g.reason.as_deref(), g.message.as_deref()),
        (
            "Failed",
            Some("JobTimedOut"),
            Some("TrainJob nccl-job timed out after 3600s")
        )
    );
    assert_eq!(
        conds(&status.conditions)[2],
        c(
            "Failed",
            "True",
            "JobTimedOut",
            "1 groups failed across 1 iterations"
        )
    );
}

#[test]
fn repeat_count_runs_iterations_with_suffixed_job_names() {
    let nodes = aws_h100(2);
    let wf0 = workflow("orchestration: {repeatCount: 2}\n", &nodes);
    let d1 = decide(&wf0, &nodes, &BTreeMap::new(), 0);
    assert_eq!(groups(&d1)[0].3.as_deref(), Some("nccl-job"));
    let mut wf = wf0.clone();
    wf.status = d1.status;
    let d2 = decide(
        &wf,
        &nodes,
        &BTreeMap::from([job("nccl-job", 0, Some(("Complete", "")))]),
        10,
    );
    let o = d2
        .status
        .clone()
        .and_then(|s| s.orchestration)
        .expect("orchestration");
    assert_eq!((o.completed_iterations, o.current_iteration), (1, 2));
    assert_eq!(
        o.iteration_history,
        vec![IterationRecord {
            iteration: 1,
            succeeded_groups: 1,
            failed_groups: Vec::new(),
            completion_time: Some(NOW.into()),
        }]
    );
    assert_eq!(
        conds(&d2.status.clone().expect("status").conditions)[0],
        c(
            "InProgress",
            "True",
            "IterationCompleted",
            "Iteration 1 of 2 completed; starting iteration 2"
        )
    );
    assert_eq!(d2.requeue_after, Some(Duration::from_secs(1)));
    wf.status = d2.status;
    let d3 = decide(&wf, &nodes, &BTreeMap::new(), 11);
    assert_eq!(groups(&d3)[0].3.as_deref(), Some("nccl-job-iter2"));
    assert_eq!(
        kinds_and_names(&d3.apply),
        vec![
            ("TrainingRuntime".into(), "nccl-runtime-nccl-job".into()),
            ("TrainJob".into(), "nccl-job-iter2".into()),
        ]
    );
}

#[test]
fn too_few_nodes_is_a_partition_error() {
    let wf = workflow("", &aws_h100(2));
    let one = aws_h100(1);
    let d = decide(&wf, &one, &BTreeMap::new(), 0);
    assert_eq!(d.apply, Vec::<Value>::new());
    let failed = conds(&d.status.expect("status").conditions)[2].clone();
    assert_eq!(
        (failed.1.as_str(), failed.2.as_str()),
        ("True", "PartitionError")
    );
    assert!(
        failed
            .3
            .starts_with("Not enough schedulable nodes: need 2, found 1"),
        "{}",
        failed.3
    );
}

#[test]
fn go_durations() {
    assert_eq!(parse_go_duration("24h0m0s"), Some(86_400));
    assert_eq!(parse_go_duration("1h30m"), Some(5_400));
    // Go's fractions and small units; a part of a second is rounded up, never to no timeout.
    assert_eq!(parse_go_duration("1.5h"), Some(5_400));
    assert_eq!(parse_go_duration("1500ms"), Some(2));
    assert_eq!(parse_go_duration("500ms"), Some(1));
    assert_eq!(parse_go_duration("1h30m0.5s"), Some(5_401));
    assert_eq!(parse_go_duration("-1s"), Some(-1));
    assert_eq!(parse_go_duration("soon"), None);
    assert_eq!(parse_go_duration("90"), None);
    assert_eq!(parse_go_duration("99999999999999h"), None);
    assert_eq!(parse_go_duration(""), None);
}

/// Advances `wf` by one decision and returns it.
fn step(
    wf: &mut WorkflowResource,
    nodes: &Arc<Vec<nvcre_domain::Node>>,
    jobs: &BTreeMap<String, ObservedJob>,
    now_secs: i64,
) -> WorkflowDecision {
    let d = decide(wf, nodes, jobs, now_secs);
    if d.status.is_some() {
        wf.status = d.status.clone();
    }
    d
}

fn set_execution(wf: &mut WorkflowResource, key: &str, value: Value) {
    let exec = wf
        .spec
        .orchestration
        .entry("execution")
        .or_insert_with(|| json!({}));
    exec[key] = value;
}

#[test]
fn retry_failed_groups_deletes_the_failed_job_and_starts_a_new_one() {
    let nodes = aws_h100(4);
    let mut wf = workflow("", &nodes);
    set_execution(&mut wf, "retryFailedGroups", json!(1));
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 0, Some(("Failed", "pod node-3 OOMKilled"))),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 10);
    assert_eq!(
        d.delete,
        vec![ChildRef {
            api_version: "trainer.kubeflow.org/v1alpha1".into(),
            kind: "TrainJob".into(),
            name: "nccl-group-1".into()
        }]
    );
    assert_eq!(
        kinds_and_names(&d.apply),
        vec![
            ("TrainingRuntime".into(), "nccl-runtime-nccl-group-1".into()),
            ("TrainJob".into(), "nccl-group-1-retry1".into()),
        ]
    );
    let g1 = wf
        .status
        .as_ref()
        .expect("status")
        .orchestration
        .as_ref()
        .expect("o")
        .groups[1]
        .clone();
    assert_eq!(
        (
            g1.phase.as_str(),
            g1.retries,
            g1.job_ref.as_deref(),
            g1.message.as_deref()
        ),
        (
            "Running",
            1,
            Some("nccl-group-1-retry1"),
            Some("retry 1 after: pod node-3 OOMKilled")
        )
    );
    // The retry fails too: no retry left, the group and the Workflow fail; the job is kept.
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1-retry1", 10, Some(("Failed", "NCCL timeout"))),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 20);
    assert_eq!(d.delete, Vec::new());
    let status = wf.status.clone().expect("status");
    assert_eq!(
        status.orchestration.expect("o").iteration_history,
        vec![IterationRecord {
            iteration: 1,
            succeeded_groups: 1,
            failed_groups: vec![FailedGroup {
                name: "group-1".into(),
                reason: "JobFailed".into(),
                message: "NCCL timeout".into()
            }],
            completion_time: Some(NOW.into()),
        }]
    );
    assert_eq!(
        conds(&status.conditions)[2],
        c(
            "Failed",
            "True",
            "IterationsFailed",
            "1 groups failed across 1 iterations"
        )
    );
}

#[test]
fn a_timed_out_group_is_not_retried() {
    let nodes = aws_h100(2);
    let mut wf = workflow("orchestration: {timeoutPerJob: 10m}\n", &nodes);
    set_execution(&mut wf, "retryFailedGroups", json!(3));
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    let d = step(
        &mut wf,
        &nodes,
        &BTreeMap::from([job("nccl-job", 0, None)]),
        601,
    );
    assert_eq!(
        d.delete.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["nccl-job"]
    );
    assert_eq!(
        kinds_and_names(&d.apply)
            .iter()
            .filter(|k| k.0 == "TrainJob")
            .count(),
        0
    );
    assert_eq!(
        conds(&wf.status.expect("status").conditions)[2],
        c(
            "Failed",
            "True",
            "JobTimedOut",
            "1 groups failed across 1 iterations"
        )
    );
}

#[test]
fn a_failed_iteration_does_not_stop_the_next_and_the_end_counts_every_failure() {
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {repeatCount: 2}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Failed", "rank 3 exited"))),
        job("nccl-group-1", 0, Some(("Complete", ""))),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 10);
    assert_eq!(
        conds(&d.status.expect("status").conditions)[0],
        c(
            "InProgress",
            "True",
            "IterationCompleted",
            "Iteration 1 of 2 completed; starting iteration 2"
        )
    );
    let d = step(&mut wf, &nodes, &BTreeMap::new(), 11);
    assert_eq!(
        groups(&d)
            .iter()
            .map(|g| g.3.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["nccl-group-0-iter2", "nccl-group-1-iter2"]
    );
    let jobs = BTreeMap::from([
        job("nccl-group-0-iter2", 11, Some(("Complete", ""))),
        job("nccl-group-1-iter2", 11, Some(("Complete", ""))),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 20);
    let cm = |name: &str| {
        d.apply
            .iter()
            .find(|m| m["metadata"]["name"] == name)
            .map(|m| m["data"]["nodes"].clone())
    };
    assert_eq!(cm("nccl-succeeded-nodes"), Some(json!("node-2,node-3")));
    assert_eq!(
        cm("nccl-failed-nodes"),
        Some(json!(
            "node-0: WorkloadFailed: rank 3 exited\nnode-1: WorkloadFailed: rank 3 exited"
        ))
    );
    let status = wf.status.expect("status");
    let o = status.orchestration.expect("o");
    assert_eq!((o.completed_iterations, o.iteration_history.len()), (2, 2));
    assert_eq!(
        conds(&status.conditions)[2],
        c(
            "Failed",
            "True",
            "IterationsFailed",
            "1 groups failed across 2 iterations"
        )
    );
}

#[test]
fn nodes_of_another_architecture_are_excluded_and_recorded() {
    let docs: Vec<Value> = (0..4)
        .map(|i| {
            node_doc(
                &format!("node-{i}"),
                "NVIDIA-H100-80GB-HBM3",
                &format!("aws:///us-east-1a/i-{i}"),
            )
        })
        .chain(std::iter::once(node_doc(
            "node-a100",
            "NVIDIA-A100-SXM4-80GB",
            "aws:///us-east-1a/i-9",
        )))
        .collect();
    let nodes = Arc::new(nvcre_domain::nodes_from_documents(&docs).expect("nodes"));
    let wf = workflow("", &nodes);
    let d = decide(&wf, &nodes, &BTreeMap::new(), 0);
    let o = d.status.expect("status").orchestration.expect("o");
    assert_eq!(
        (
            o.total_nodes,
            o.excluded_nodes.clone(),
            o.exclusion_reason.as_deref()
        ),
        (
            4,
            vec!["node-a100".to_string()],
            Some("node-a100: GPU architecture a100 is not the detected architecture h100")
        )
    );
    assert_eq!(o.gpu_products, ["NVIDIA-H100-80GB-HBM3"]);
}

#[test]
fn execution_settings_and_their_defaults() {
    let read = |v: Value| Execution::from_orchestration(v.as_object().expect("object"));
    assert_eq!(
        read(json!({})),
        Execution {
            iterations: 1,
            max_concurrent: 0,
            timeout_secs: 86_400,
            retry_failed_groups: 0
        }
    );
    assert_eq!(
        read(
            json!({"iterations": 3, "execution": {"maxConcurrent": 2, "timeoutPerJob": "1h30m", "retryFailedGroups": 2}})
        ),
        Execution {
            iterations: 3,
            max_concurrent: 2,
            timeout_secs: 5_400,
            retry_failed_groups: 2
        }
    );
    // An unparseable or zero timeout falls back to the default, as the original does.
    assert_eq!(
        read(json!({"execution": {"timeoutPerJob": "soon"}})).timeout_secs,
        86_400
    );
    assert_eq!(
        read(json!({"execution": {"timeoutPerJob": "0s"}})).timeout_secs,
        86_400
    );
    assert_eq!(attempt_job_name("wf-group-1", 1, 0), "wf-group-1");
    assert_eq!(
        attempt_job_name("wf-group-1", 3, 2),
        "wf-group-1-iter3-retry2"
    );
}

/// A Workflow two 2-node groups started on 4 nodes.
fn started_on_four() -> (WorkflowResource, WorkflowDecision) {
    let nodes = aws_h100(4);
    let mut wf = workflow("", &nodes);
    let d = step(&mut wf, &nodes, &BTreeMap::new(), 0);
    (wf, d)
}

fn group(wf: &WorkflowResource, i: usize) -> GroupStatus {
    wf.status
        .as_ref()
        .and_then(|s| s.orchestration.as_ref())
        .map(|o| o.groups[i].clone())
        .expect("group")
}

/// `(phase, reason, message, jobRef, retries)` of group `i`.
fn group_state(
    wf: &WorkflowResource,
    i: usize,
) -> (String, Option<String>, Option<String>, Option<String>, i32) {
    let g = group(wf, i);
    (g.phase, g.reason, g.message, g.job_ref, g.retries)
}

fn state(
    phase: &str,
    reason: Option<&str>,
    message: Option<&str>,
    job: Option<&str>,
    retries: i32,
) -> (String, Option<String>, Option<String>, Option<String>, i32) {
    (
        phase.into(),
        reason.map(Into::into),
        message.map(Into::into),
        job.map(Into::into),
        retries,
    )
}

/// The `nodes` entry of the node result ConfigMap `name` among `d.apply`.
fn node_list(d: &WorkflowDecision, name: &str) -> Option<Value> {
    d.apply
        .iter()
        .find(|m| m["kind"] == "ConfigMap" && m["metadata"]["name"] == name)
        .map(|m| m["data"]["nodes"].clone())
}

fn true_condition(wf: &WorkflowResource) -> (String, String, String, String) {
    conds(&wf.status.as_ref().expect("status").conditions)
        .into_iter()
        .find(|c| c.1 == "True")
        .expect("a True condition")
}

#[test]
fn a_name_collision_fails_the_workflow_and_stops_what_the_pass_started() {
    // The first pass applied group-0's TrainJob, then group-1's name was taken.
    let (wf, d) = started_on_four();
    let failed = nvcre_controller::workflow::collision_decision(
        &wf,
        d.status.clone().expect("status"),
        &BTreeMap::new(),
        &["nccl-group-0".to_string()],
        ("TrainJob", "nccl-group-1"),
        NOW,
    );
    assert_eq!(
        failed
            .delete
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["nccl-group-0"]
    );
    let mut after = wf.clone();
    after.status = failed.status.clone();
    assert_eq!(
        true_condition(&after),
        c(
            "Failed",
            "True",
            "JobNameCollision",
            "TrainJob \"nccl-group-1\" already exists in namespace \"team-a\" and is not controlled by Workflow \"nccl\"; refusing to adopt it"
        )
    );
    assert_eq!(
        group_state(&after, 0),
        state(
            "Failed",
            Some("WorkflowFailed"),
            Some("TrainJob nccl-group-0 deleted: the Workflow failed"),
            Some("nccl-group-0"),
            0
        )
    );
    // Never created: back to Pending, and the other owner's TrainJob is left alone.
    assert_eq!(
        group_state(&after, 1),
        state("Pending", None, None, None, 0)
    );
    // No node finished its test: neither list names one.
    assert_eq!(
        kinds_and_names(&failed.apply),
        [
            ("ConfigMap".to_string(), "nccl-succeeded-nodes".to_string()),
            ("ConfigMap".to_string(), "nccl-failed-nodes".to_string())
        ]
    );
    assert_eq!(node_list(&failed, "nccl-succeeded-nodes"), Some(json!("")));
    assert_eq!(node_list(&failed, "nccl-failed-nodes"), Some(json!("")));
    let status = failed.status.expect("status");
    assert_eq!(
        (
            status.phase.as_deref(),
            status.succeeded_nodes_ref.map(|r| r.name),
            status.failed_nodes_ref.map(|r| r.name)
        ),
        (
            Some("Failed"),
            Some("nccl-succeeded-nodes".to_string()),
            Some("nccl-failed-nodes".to_string())
        )
    );
    assert_eq!(failed.requeue_after, None);

    // Any other kind is a dependency collision.
    let failed = nvcre_controller::workflow::collision_decision(
        &wf,
        d.status.clone().expect("status"),
        &BTreeMap::new(),
        &[],
        ("TrainingRuntime", "nccl-runtime-nccl-group-0"),
        NOW,
    );
    let status = failed.status.expect("status");
    assert_eq!(conds(&status.conditions)[2].2, "DependencyNameCollision");
    assert_eq!(failed.delete, Vec::new());
}

#[test]
fn a_taken_node_result_config_map_name_is_neither_written_nor_referenced() {
    let (mut wf, _) = started_on_four();
    let nodes = aws_h100(4);
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 0, Some(("Complete", ""))),
    ]);
    let before = wf.clone();
    let d = step(&mut wf, &nodes, &jobs, 10);
    // Applying the failed-nodes ConfigMap met another owner's object of that name.
    let failed = nvcre_controller::workflow::collision_decision(
        &before,
        d.status.clone().expect("status"),
        &jobs,
        &[],
        ("ConfigMap", "nccl-failed-nodes"),
        NOW,
    );
    assert_eq!(
        kinds_and_names(&failed.apply),
        [("ConfigMap".to_string(), "nccl-succeeded-nodes".to_string())]
    );
    assert_eq!(
        node_list(&failed, "nccl-succeeded-nodes"),
        Some(json!("node-0,node-1,node-2,node-3"))
    );
    let status = failed.status.expect("status");
    assert_eq!(
        (
            status.failed_nodes_ref.map(|r| r.name),
            conds(&status.conditions)[2].2.as_str()
        ),
        (None, "DependencyNameCollision")
    );
    assert_eq!(failed.delete, Vec::new());
}

/// `now_secs` of [`NOW`] plus `secs`: the group start times are [`NOW`].
fn at(secs: i64) -> i64 {
    NOW.parse::<k8s_openapi::jiff::Timestamp>()
        .expect("NOW")
        .as_second()
        + secs
}

#[test]
fn a_deleted_train_job_fails_its_group_and_the_run_still_finishes() {
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {timeoutPerJob: 2s}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), at(0));
    // Someone deletes nccl-group-0 while it runs.
    let jobs = BTreeMap::from([job("nccl-group-1", at(0), None)]);
    let d = step(&mut wf, &nodes, &jobs, at(1));
    assert_eq!(
        (d.delete.clone(), d.apply.clone()),
        (Vec::new(), Vec::new())
    );
    assert_eq!(
        group_state(&wf, 0),
        state(
            "Failed",
            Some("JobDeleted"),
            Some("TrainJob nccl-group-0 was deleted before its group finished"),
            Some("nccl-group-0"),
            0
        )
    );
    assert_eq!(group(&wf, 0).completion_time.as_deref(), Some(NOW));
    assert_eq!(group_state(&wf, 1).0, "Running");
    let jobs = BTreeMap::from([job("nccl-group-1", at(0), Some(("Complete", "")))]);
    let d = step(&mut wf, &nodes, &jobs, at(2));
    assert_eq!(
        true_condition(&wf),
        c(
            "Failed",
            "True",
            "IterationsFailed",
            "1 groups failed across 1 iterations"
        )
    );
    assert_eq!(
        node_list(&d, "nccl-failed-nodes"),
        Some(json!(
            "node-0: WorkloadFailed: TrainJob nccl-group-0 was deleted before its group finished\nnode-1: WorkloadFailed: TrainJob nccl-group-0 was deleted before its group finished"
        ))
    );
    assert_eq!(
        node_list(&d, "nccl-succeeded-nodes"),
        Some(json!("node-2,node-3"))
    );
}

#[test]
fn a_deleted_train_job_is_retried_while_retries_are_left() {
    let (mut wf, _) = started_on_four();
    set_execution(&mut wf, "retryFailedGroups", json!(1));
    let nodes = aws_h100(4);
    let jobs = BTreeMap::from([job("nccl-group-1", 0, None)]);
    let d = step(&mut wf, &nodes, &jobs, 10);
    // Nothing to delete: it is gone already.
    assert_eq!(d.delete, Vec::new());
    assert_eq!(
        kinds_and_names(&d.apply),
        [
            (
                "TrainingRuntime".to_string(),
                "nccl-runtime-nccl-group-0".to_string()
            ),
            ("TrainJob".to_string(), "nccl-group-0-retry1".to_string())
        ]
    );
    assert_eq!(
        group_state(&wf, 0),
        state(
            "Running",
            None,
            Some("retry 1 after: TrainJob nccl-group-0 was deleted before its group finished"),
            Some("nccl-group-0-retry1"),
            1
        )
    );
}

#[test]
fn a_retry_whose_status_write_failed_is_followed_under_its_new_name() {
    let (mut wf, _) = started_on_four();
    set_execution(&mut wf, "retryFailedGroups", json!(1));
    let nodes = aws_h100(4);
    let failed = BTreeMap::from([
        job("nccl-group-0", 0, None),
        job("nccl-group-1", 0, Some(("Failed", "pod node-3 OOMKilled"))),
    ]);
    // The pass deletes nccl-group-1 and creates nccl-group-1-retry1; its status write fails.
    let d = decide(&wf, &nodes, &failed, 10);
    assert_eq!(
        (
            d.delete.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            kinds_and_names(&d.apply)[1].1.as_str()
        ),
        (vec!["nccl-group-1"], "nccl-group-1-retry1")
    );
    // The next pass sees the old status: group-1 on nccl-group-1, which is gone.
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, None),
        job("nccl-group-1-retry1", 10, None),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 20);
    assert_eq!(
        (d.delete.clone(), d.apply.clone()),
        (Vec::new(), Vec::new())
    );
    assert_eq!(
        group_state(&wf, 1),
        state(
            "Running",
            None,
            Some("retry 1 after: TrainJob nccl-group-1 was replaced by nccl-group-1-retry1"),
            Some("nccl-group-1-retry1"),
            1
        )
    );
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1-retry1", 10, Some(("Complete", ""))),
    ]);
    step(&mut wf, &nodes, &jobs, 30);
    assert_eq!(
        true_condition(&wf),
        c(
            "Succeeded",
            "True",
            "JobCompleted",
            "All 1 iterations completed successfully"
        )
    );
}

#[test]
fn a_pending_group_starts_its_latest_attempt_not_one_that_already_ended() {
    // The status says group-1 waits for its first retry (maxConcurrent held it back), but the
    // cluster already has its second: a pass whose status write failed made it.
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {maxConcurrent: 1}\n", &nodes);
    set_execution(&mut wf, "retryFailedGroups", json!(3));
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    if let Some(o) = wf.status.as_mut().and_then(|s| s.orchestration.as_mut()) {
        o.groups[0].phase = "Succeeded".into();
        o.groups[1].retries = 1;
    }
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1-retry2", 5, None),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 10);
    assert_eq!(
        kinds_and_names(&d.apply)[1],
        ("TrainJob".to_string(), "nccl-group-1-retry2".to_string())
    );
    assert_eq!(
        group_state(&wf, 1),
        state("Running", None, None, Some("nccl-group-1-retry2"), 2)
    );
}

#[test]
fn a_job_deleted_for_its_timeout_on_a_pass_whose_status_write_failed_stays_timed_out() {
    let nodes = aws_h100(2);
    let mut wf = workflow("orchestration: {timeoutPerJob: 10m}\n", &nodes);
    set_execution(&mut wf, "retryFailedGroups", json!(3));
    step(&mut wf, &nodes, &BTreeMap::new(), at(0));
    let d = decide(
        &wf,
        &nodes,
        &BTreeMap::from([job("nccl-job", at(0), None)]),
        at(601),
    );
    assert_eq!(
        d.delete.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["nccl-job"]
    );
    // That status write failed; the job is gone on the next pass. Not retried, not a deletion.
    let d = step(&mut wf, &nodes, &BTreeMap::new(), at(602));
    assert_eq!((d.delete.clone(), d.apply.len()), (Vec::new(), 2));
    assert_eq!(
        group_state(&wf, 0),
        state(
            "Failed",
            Some("JobTimedOut"),
            Some("TrainJob nccl-job timed out after 600s"),
            Some("nccl-job"),
            0
        )
    );
    assert_eq!(
        true_condition(&wf),
        c(
            "Failed",
            "True",
            "JobTimedOut",
            "1 groups failed across 1 iterations"
        )
    );
}

/// The hostnames a TrainJob's required node affinity pins (every `kubernetes.io/hostname In`
/// requirement found in it, in order).
fn pinned_hosts(v: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            if m.get("key") == Some(&json!("kubernetes.io/hostname"))
                && m.get("operator") == Some(&json!("In"))
            {
                out.push(
                    m["values"]
                        .as_array()
                        .expect("values")
                        .iter()
                        .map(|h| h.as_str().expect("host").to_string())
                        .collect(),
                );
            }
            for x in m.values() {
                out.extend(pinned_hosts(x));
            }
        }
        Value::Array(a) => {
            for x in a {
                out.extend(pinned_hosts(x));
            }
        }
        _ => {}
    }
    out
}

fn nodes_from(docs: Vec<Value>) -> Arc<Vec<nvcre_domain::Node>> {
    Arc::new(nvcre_domain::nodes_from_documents(&docs).expect("nodes"))
}

fn h100_doc(name: &str, i: usize) -> Value {
    node_doc(
        name,
        "NVIDIA-H100-80GB-HBM3",
        &format!("aws:///us-east-1a/i-{i}"),
    )
}

/// The TrainJob among `d.apply`.
fn train_job(d: &WorkflowDecision) -> &Value {
    d.apply
        .iter()
        .find(|m| m["kind"] == "TrainJob")
        .expect("a TrainJob")
}

#[test]
fn a_node_joining_mid_run_does_not_move_a_pending_group() {
    let nodes = aws_h100(6);
    let mut wf = workflow("orchestration: {maxConcurrent: 1}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    // A node sorting before every other joins: a new partition would shift every group.
    let docs: Vec<Value> = std::iter::once(h100_doc("a-0", 9))
        .chain((0..6).map(|i| h100_doc(&format!("node-{i}"), i)))
        .collect();
    let more = nodes_from(docs);
    let jobs = BTreeMap::from([job("nccl-group-0", 0, Some(("Complete", "")))]);
    let d = step(&mut wf, &more, &jobs, 10);
    let tj = train_job(&d);
    assert_eq!(tj["metadata"]["name"], "nccl-group-1");
    assert_eq!(
        pinned_hosts(tj),
        [["node-2", "node-3"], ["node-2", "node-3"]],
        "the node and launcher replicated jobs"
    );
    assert_eq!(
        tj["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"],
        "node-2,node-3"
    );
    assert_eq!(group(&wf, 1).nodes, ["node-2", "node-3"]);
    assert_eq!(
        true_condition(&wf),
        c(
            "InProgress",
            "True",
            "GroupsPartitioned",
            "Discovered 6 nodes, partitioned into 3 groups (2 nodes/job)"
        )
    );
}

#[test]
fn nodes_cordoned_or_removed_mid_run_neither_fail_the_workflow_nor_strand_a_group() {
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {maxConcurrent: 1}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    // node-0 (group-0's, running) is cordoned; node-3 (group-1's, pending) is removed.
    let mut docs: Vec<Value> = (0..3).map(|i| h100_doc(&format!("node-{i}"), i)).collect();
    docs[0]["spec"]["unschedulable"] = json!(true);
    let changed = nodes_from(docs);
    let running = BTreeMap::from([job("nccl-group-0", 0, None)]);
    let d = step(&mut wf, &changed, &running, 5);
    assert_eq!(
        (d.status.is_none(), d.apply.clone(), d.delete.clone()),
        (true, Vec::new(), Vec::new())
    );
    let jobs = BTreeMap::from([job("nccl-group-0", 0, Some(("Complete", "")))]);
    let d = step(&mut wf, &changed, &jobs, 10);
    let tj = train_job(&d);
    assert_eq!(tj["metadata"]["name"], "nccl-group-1");
    assert_eq!(
        pinned_hosts(tj),
        [["node-2", "node-3"], ["node-2", "node-3"]]
    );
    assert_eq!(group_state(&wf, 1).0, "Running");
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 10, Some(("Complete", ""))),
    ]);
    let d = step(&mut wf, &changed, &jobs, 20);
    assert_eq!(
        true_condition(&wf),
        c(
            "Succeeded",
            "True",
            "JobCompleted",
            "All 1 iterations completed successfully"
        )
    );
    assert_eq!(
        node_list(&d, "nccl-succeeded-nodes"),
        Some(json!("node-0,node-1,node-2,node-3"))
    );
}

#[test]
fn every_node_gone_mid_run_resolves_for_the_recorded_platform_and_architecture() {
    let nodes = aws_h100(2);
    let mut wf = workflow("orchestration: {timeoutPerJob: 1h}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    let none = Arc::new(Vec::new());
    let running = BTreeMap::from([job("nccl-job", 0, None)]);
    let d = step(&mut wf, &none, &running, 10);
    assert_eq!(
        (d.status.is_none(), d.apply.clone(), d.delete.clone()),
        (true, Vec::new(), Vec::new())
    );
    // timeoutPerJob still applies: it comes from the resolved Workflow.
    let d = step(&mut wf, &none, &running, 3601);
    assert_eq!(
        (
            d.delete.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            group_state(&wf, 0).2
        ),
        (
            vec!["nccl-job"],
            Some("TrainJob nccl-job timed out after 3600s".to_string())
        )
    );
}

#[test]
fn a_new_iteration_runs_the_recorded_partition_again() {
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {repeatCount: 2}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 0, Some(("Complete", ""))),
    ]);
    step(&mut wf, &nodes, &jobs, 10);
    // Between the iterations node-1 is cordoned and node-4 joins.
    let mut docs: Vec<Value> = (0..5).map(|i| h100_doc(&format!("node-{i}"), i)).collect();
    docs[1]["spec"]["unschedulable"] = json!(true);
    let d = step(&mut wf, &nodes_from(docs), &BTreeMap::new(), 11);
    let pinned: Vec<(Value, Vec<Vec<String>>)> = d
        .apply
        .iter()
        .filter(|m| m["kind"] == "TrainJob")
        .map(|m| (m["metadata"]["name"].clone(), pinned_hosts(m)))
        .collect();
    assert_eq!(
        pinned,
        [
            (
                json!("nccl-group-0-iter2"),
                vec![vec!["node-0".to_string(), "node-1".to_string()]; 2]
            ),
            (
                json!("nccl-group-1-iter2"),
                vec![vec!["node-2".to_string(), "node-3".to_string()]; 2]
            )
        ]
    );
}

#[test]
fn a_spec_that_no_longer_resolves_mid_run_fails_and_stops_the_running_jobs() {
    let nodes = aws_h100(4);
    let mut wf = workflow("orchestration: {maxConcurrent: 1}\n", &nodes);
    step(&mut wf, &nodes, &BTreeMap::new(), 0);
    step(
        &mut wf,
        &nodes,
        &BTreeMap::from([job("nccl-group-0", 0, Some(("Complete", "")))]),
        10,
    );
    wf.spec
        .orchestration
        .insert("placement".into(), json!("Spread"));
    let jobs = BTreeMap::from([
        job("nccl-group-0", 0, Some(("Complete", ""))),
        job("nccl-group-1", 10, None),
    ]);
    let d = step(&mut wf, &nodes, &jobs, 20);
    assert_eq!(
        d.delete.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["nccl-group-1"]
    );
    assert_eq!(
        true_condition(&wf),
        c(
            "Failed",
            "True",
            "PartitionError",
            "spec.orchestration.placement: unsupported value \"Spread\": must be Pinned or Unpinned"
        )
    );
    assert_eq!(group_state(&wf, 0).0, "Succeeded");
    assert_eq!(
        group_state(&wf, 1),
        state(
            "Failed",
            Some("WorkflowFailed"),
            Some("TrainJob nccl-group-1 deleted: the Workflow failed"),
            Some("nccl-group-1"),
            0
        )
    );
    // group-1 was stopped, not failed by its nodes: they are in neither list.
    assert_eq!(
        (
            node_list(&d, "nccl-succeeded-nodes"),
            node_list(&d, "nccl-failed-nodes")
        ),
        (Some(json!("node-0,node-1")), Some(json!("")))
    );
    let status = wf.status.expect("status");
    assert_eq!(
        (
            status.succeeded_nodes_ref.map(|r| r.name),
            status.failed_nodes_ref.map(|r| r.name)
        ),
        (
            Some("nccl-succeeded-nodes".to_string()),
            Some("nccl-failed-nodes".to_string())
        )
    );
}

mod thresholds {
    use super::*;
    use nvcre_controller::measure::JobMeasured;
    use nvcre_controller::workflow::{MeasurementPlan, go_duration, validate_job};
    use nvcre_domain::measure::{
        BandwidthMeasurementStatus, BandwidthResult, GoodputMeasurementStatus,
    };

    fn plan(thresholds: &[(&str, &str)]) -> MeasurementPlan {
        MeasurementPlan {
            thresholds: thresholds
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            timeout_secs: 300,
            ..MeasurementPlan::default()
        }
    }

    fn bandwidth(bus: &[&str]) -> JobMeasured {
        JobMeasured {
            bandwidth: Some(BandwidthMeasurementStatus {
                results: bus
                    .iter()
                    .enumerate()
                    .map(|(i, b)| BandwidthResult {
                        size_bytes: 1 << i,
                        alg_bw: "1.00".into(),
                        bus_bw: (*b).into(),
                        samples: 1,
                    })
                    .collect(),
                ..BandwidthMeasurementStatus::default()
            }),
            goodput: None,
        }
    }

    #[test]
    fn go_durations_print_as_go_does() {
        assert_eq!(
            [
                go_duration(300),
                go_duration(45),
                go_duration(3600),
                go_duration(5400)
            ],
            ["5m0s", "45s", "1h0m0s", "1h30m0s"]
        );
    }

    #[test]
    fn no_thresholds_pass_without_measurements() {
        assert_eq!(validate_job(&plan(&[]), None, 0), Ok(()));
    }

    #[test]
    fn the_peak_over_sizes_is_judged_and_the_first_violation_is_the_message() {
        let p = plan(&[
            ("busBandwidthGBps", "value >= 400"),
            ("algBandwidthGBps", "value > 5.0"),
        ]);
        assert_eq!(
            validate_job(&p, Some(&bandwidth(&["120.50", "350.00"])), 0),
            Err(Some((
                "ThresholdViolated",
                "Threshold \"algBandwidthGBps\" violated: measured 1.0000, expression: value > 5.0"
                    .to_string()
            )))
        );
        let p = plan(&[("busBandwidthGBps", "value >= 400")]);
        assert_eq!(
            validate_job(&p, Some(&bandwidth(&["120.50", "350.00"])), 0),
            Err(Some((
                "ThresholdViolated",
                "Threshold \"busBandwidthGBps\" violated: measured 350.0000, expression: value >= 400"
                    .to_string()
            )))
        );
        assert_eq!(validate_job(&p, Some(&bandwidth(&["410.00"])), 0), Ok(()));
    }

    #[test]
    fn a_missing_value_waits_then_times_out_with_sorted_keys() {
        let p = plan(&[
            ("goodputRatio", "value > 0.9"),
            ("busBandwidthGBps", "value >= 400"),
        ]);
        assert_eq!(validate_job(&p, None, 300), Err(None));
        assert_eq!(
            validate_job(&p, None, 301),
            Err(Some((
                "MeasurementTimeout",
                "Measurement data not available within 5m0s for keys: [busBandwidthGBps goodputRatio]"
                    .to_string()
            )))
        );
        // A goodput ratio of 0 is not a measured value.
        let zero = JobMeasured {
            bandwidth: None,
            goodput: Some(GoodputMeasurementStatus {
                result: Some("0.000000".into()),
                ..GoodputMeasurementStatus::default()
            }),
        };
        let p = plan(&[("goodputRatio", "value > 0.9")]);
        assert_eq!(validate_job(&p, Some(&zero), 10), Err(None));
    }

    #[test]
    fn an_unknown_key_fails_at_once() {
        let p = plan(&[("avgTFLOPSPerGPU", "value > 100")]);
        assert_eq!(
            validate_job(&p, None, 0),
            Err(Some((
                "UnknownThresholdKey",
                "unknown threshold key(s) [avgTFLOPSPerGPU]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]"
                    .to_string()
            )))
        );
    }

    #[test]
    fn the_plan_reads_the_workflow_the_run_builds() {
        let nodes = aws_h100(4);
        let wf = workflow(
            "\nbandwidthMeasurement: {logProfileRef: nccl-bandwidth, testType: all_reduce}\nthresholds: {busBandwidthGBps: \"value >= 400\"}\n",
            &nodes,
        );
        let p = MeasurementPlan::from_workflow(&wf.spec);
        assert_eq!(
            (p.bandwidth, p.goodput, p.thresholds, p.timeout_secs),
            (
                Some(json!({"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"})),
                None,
                BTreeMap::from([("busBandwidthGBps".to_string(), "value >= 400".to_string())]),
                300
            )
        );
    }
}

mod node_health {
    use super::*;
    use nvcre_controller::workloadrun::EventNote;

    /// The four nodes as the API server returns them; `edit` changes node `i`'s document.
    fn objects(edit: &[(usize, Value)]) -> BTreeMap<String, Value> {
        (0..4)
            .map(|i| {
                let name = format!("node-{i}");
                let mut doc = node_doc(&name, "NVIDIA-H100-80GB-HBM3", "aws:///us-east-1a/i-0");
                for (at, patch) in edit {
                    if *at == i {
                        for (section, fields) in patch.as_object().expect("patch") {
                            for (k, v) in fields.as_object().expect("fields") {
                                doc[section][k] = v.clone();
                            }
                        }
                    }
                }
                (name, doc)
            })
            .collect()
    }

    fn cordoned(i: usize) -> (usize, Value) {
        (i, json!({"spec": {"unschedulable": true}}))
    }

    /// Both groups started, `retryFailedGroups` set to `retries`, the node health expression
    /// replaced by `expression`.
    fn started(
        retries: i64,
        expression: Option<&str>,
    ) -> (WorkflowResource, Arc<Vec<nvcre_domain::Node>>) {
        let nodes = aws_h100(4);
        let mut wf = workflow("", &nodes);
        if retries > 0 {
            set_execution(&mut wf, "retryFailedGroups", json!(retries));
        }
        if let Some(e) = expression {
            wf.spec.job_template["spec"]["nodeHealthMonitor"] = json!({"cel": {"expression": e}});
        }
        step(&mut wf, &nodes, &BTreeMap::new(), 0);
        (wf, nodes)
    }

    fn running() -> BTreeMap<String, ObservedJob> {
        BTreeMap::from([job("nccl-group-0", 0, None), job("nccl-group-1", 0, None)])
    }

    fn group_outcomes(
        wf: &WorkflowResource,
    ) -> Vec<(String, String, Option<String>, Option<String>)> {
        wf.status
            .as_ref()
            .and_then(|s| s.orchestration.as_ref())
            .map(|o| {
                o.groups
                    .iter()
                    .map(|g| {
                        (
                            g.name.clone(),
                            g.phase.clone(),
                            g.reason.clone(),
                            g.message.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn hardware_failed(wf: &WorkflowResource) -> Vec<String> {
        wf.status
            .as_ref()
            .and_then(|s| s.orchestration.as_ref())
            .map(|o| o.hardware_failed_nodes.clone())
            .unwrap_or_default()
    }

    fn tj(name: &str) -> ChildRef {
        ChildRef {
            api_version: "trainer.kubeflow.org/v1alpha1".into(),
            kind: "TrainJob".into(),
            name: name.into(),
        }
    }

    fn out(
        name: &str,
        phase: &str,
        reason: Option<&str>,
        message: Option<&str>,
    ) -> (String, String, Option<String>, Option<String>) {
        (
            name.into(),
            phase.into(),
            reason.map(str::to_string),
            message.map(str::to_string),
        )
    }

    #[test]
    fn the_run_renders_the_default_expression() {
        let nodes = aws_h100(4);
        let wf = workflow("", &nodes);
        assert_eq!(
            wf.spec.job_template["spec"]["nodeHealthMonitor"],
            json!({"cel": {"expression": "node.spec.unschedulable == true"}})
        );
    }

    #[test]
    fn a_node_cordoned_mid_run_fails_its_group_for_hardware() {
        let (mut wf, nodes) = started(0, None);
        let objs = objects(&[cordoned(0)]);
        let mut jobs = running();
        let d = decide_with(&wf, &nodes, &objs, &jobs, 10);
        wf.status = d.status.clone();
        let hw = "Hardware failure detected on node(s): [node-0]";
        assert_eq!(
            group_outcomes(&wf),
            [
                out("group-0", "Failed", Some("JobHardwareFailed"), Some(hw)),
                out("group-1", "Running", None, None),
            ]
        );
        // Stopped so that its pods release the GPUs.
        assert_eq!(d.delete, [tj("nccl-group-0")]);
        assert_eq!(
            d.events,
            [EventNote {
                warning: true,
                reason: "HardwareFailureDetected".into(),
                message: format!("TrainJob nccl-group-0 of group-0: {hw}"),
            }]
        );
        assert_eq!(hardware_failed(&wf), ["node-0"]);
        // The node is uncordoned: it stays failed. group-1 completes; the Workflow fails.
        jobs.remove("nccl-group-0");
        let (k, v) = job("nccl-group-1", 0, Some(("Complete", "")));
        jobs.insert(k, v);
        let d = decide_with(&wf, &nodes, &objects(&[]), &jobs, 20);
        wf.status = d.status.clone();
        assert_eq!(
            true_condition(&wf),
            c(
                "Failed",
                "True",
                "JobHardwareFailed",
                "1 groups failed across 1 iterations; hardware failures occurred on one or more nodes"
            )
        );
        assert_eq!(hardware_failed(&wf), ["node-0"]);
        assert_eq!(
            node_list(&d, "nccl-failed-nodes"),
            Some(json!(
                "node-0: HardwareFailureDetected: Hardware failure detected by node health check"
            ))
        );
        // node-1 was stopped with its group, not tested: in neither list.
        assert_eq!(
            node_list(&d, "nccl-succeeded-nodes"),
            Some(json!("node-2,node-3"))
        );
        let status = wf.status.as_ref().expect("status");
        assert!(
            !status
                .conditions
                .iter()
                .any(|c| c.type_ == "ValidationFailed")
        );
    }

    #[test]
    fn a_custom_expression_on_a_taint_names_every_unhealthy_node() {
        let expr = "node.spec.taints.exists(t, t.key == 'nvidia.com/gpu-unhealthy')";
        let (mut wf, nodes) = started(0, Some(expr));
        let taint = |i| {
            (
                i,
                json!({"spec": {"taints": [{"key": "nvidia.com/gpu-unhealthy", "effect": "NoSchedule"}]}}),
            )
        };
        // A cordon alone is not what this expression looks at.
        let d = decide_with(
            &wf,
            &nodes,
            &objects(&[cordoned(0), taint(2), taint(3)]),
            &running(),
            10,
        );
        wf.status = d.status.clone();
        let hw = "Hardware failure detected on node(s): [node-2 node-3]";
        assert_eq!(
            group_outcomes(&wf),
            [
                out("group-0", "Running", None, None),
                out("group-1", "Failed", Some("JobHardwareFailed"), Some(hw)),
            ]
        );
        assert_eq!(d.delete, [tj("nccl-group-1")]);
        assert_eq!(hardware_failed(&wf), ["node-2", "node-3"]);
    }

    #[test]
    fn healthy_nodes_leave_the_run_alone() {
        let (wf, nodes) = started(0, None);
        let d = decide_with(&wf, &nodes, &objects(&[]), &running(), 10);
        assert_eq!(d.status, None);
        assert_eq!(d.delete, []);
        assert_eq!(d.events, []);
        assert_eq!(
            d.apply.iter().filter(|m| m["kind"] == "TrainJob").count(),
            0
        );
    }

    #[test]
    fn a_bad_expression_fails_every_running_group_closed_without_retry() {
        let (mut wf, nodes) = started(2, Some("size(node.metadata.labels)"));
        let d = decide_with(&wf, &nodes, &objects(&[]), &running(), 10);
        wf.status = d.status.clone();
        let msg = "CEL expression must return bool, got int";
        assert_eq!(
            group_outcomes(&wf),
            [
                out("group-0", "Failed", Some("NodeHealthCheckError"), Some(msg)),
                out("group-1", "Failed", Some("NodeHealthCheckError"), Some(msg)),
            ]
        );
        assert_eq!(d.delete, [tj("nccl-group-0"), tj("nccl-group-1")]);
        assert_eq!(
            d.events
                .iter()
                .map(|e| (e.warning, e.reason.as_str(), e.message.as_str()))
                .collect::<Vec<_>>(),
            [
                (
                    true,
                    "NodeHealthCheckError",
                    "TrainJob nccl-group-0 of group-0: CEL expression must return bool, got int"
                ),
                (
                    true,
                    "NodeHealthCheckError",
                    "TrainJob nccl-group-1 of group-1: CEL expression must return bool, got int"
                ),
            ]
        );
        assert_eq!(
            true_condition(&wf),
            c(
                "Failed",
                "True",
                "IterationsFailed",
                "2 groups failed across 1 iterations"
            )
        );
        // The expression says nothing about the nodes.
        assert_eq!(node_list(&d, "nccl-failed-nodes"), Some(json!("")));
        assert_eq!(node_list(&d, "nccl-succeeded-nodes"), Some(json!("")));
        assert_eq!(hardware_failed(&wf), Vec::<String>::new());
    }

    #[test]
    fn an_evaluation_error_names_the_node() {
        let (mut wf, nodes) = started(0, Some("node.metadata.labels['gpu-health'] == 'bad'"));
        let d = decide_with(&wf, &nodes, &objects(&[]), &running(), 10);
        wf.status = d.status.clone();
        let g = group_outcomes(&wf);
        assert_eq!(
            (g[0].1.as_str(), g[0].2.as_deref()),
            ("Failed", Some("NodeHealthCheckError"))
        );
        let m = g[0].3.clone().unwrap_or_default();
        assert!(m.starts_with("node node-0: CEL evaluation error: "), "{m}");
    }

    #[test]
    fn a_terminal_train_job_is_not_evaluated() {
        let (mut wf, nodes) = started(0, None);
        let objs = objects(&[cordoned(0), cordoned(2)]);
        let jobs = BTreeMap::from([
            job("nccl-group-0", 0, Some(("Complete", ""))),
            job("nccl-group-1", 0, Some(("Failed", "pods failed"))),
        ]);
        let d = decide_with(&wf, &nodes, &objs, &jobs, 10);
        wf.status = d.status.clone();
        assert_eq!(
            group_outcomes(&wf),
            [
                out("group-0", "Succeeded", None, None),
                out("group-1", "Failed", Some("JobFailed"), Some("pods failed")),
            ]
        );
        assert_eq!(d.delete, []);
        assert_eq!(d.events, []);
        assert_eq!(hardware_failed(&wf), Vec::<String>::new());
    }

    #[test]
    fn a_hardware_failure_is_retried_while_retries_allow() {
        let (mut wf, nodes) = started(1, None);
        let objs = objects(&[cordoned(1)]);
        let d = decide_with(&wf, &nodes, &objs, &running(), 10);
        wf.status = d.status.clone();
        let hw = "Hardware failure detected on node(s): [node-1]";
        assert_eq!(
            group_outcomes(&wf)[0],
            out(
                "group-0",
                "Running",
                None,
                Some(&format!("retry 1 after: {hw}"))
            )
        );
        assert_eq!(d.delete, [tj("nccl-group-0")]);
        // Still cordoned: the retry fails the same way, and retries are spent.
        let jobs = BTreeMap::from([
            job("nccl-group-0-retry1", 10, None),
            job("nccl-group-1", 0, None),
        ]);
        let d = decide_with(&wf, &nodes, &objs, &jobs, 20);
        wf.status = d.status.clone();
        assert_eq!(
            group_outcomes(&wf)[0],
            out("group-0", "Failed", Some("JobHardwareFailed"), Some(hw))
        );
        assert_eq!(d.delete, [tj("nccl-group-0-retry1")]);
        assert_eq!(hardware_failed(&wf), ["node-1"]);
    }
}
