//! Workflow reconcile decisions: placement, job creation within maxConcurrent, progress from
//! TrainJob conditions, timeouts, iterations, node result ConfigMaps.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nvcre_controller::workflow::{
    ObservedJob, WorkflowDecision, WorkflowObservation, decide_workflow, parse_go_duration,
};
use nvcre_domain::crd::{GroupStatus, WorkflowResource};
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
    decide_workflow(
        &rules(),
        WorkflowObservation {
            workflow: wf,
            nodes,
            jobs,
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
    assert_eq!(tj["metadata"]["ownerReferences"][0]["uid"], "wf-uid");
    assert_eq!(tj["metadata"]["ownerReferences"][0]["kind"], "Workflow");
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
            "IterationCompleted",
            "Completed 1 of 1 iteration(s)"
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
            "1 of 2 groups failed in iteration 1: group-1: pod node-3 OOMKilled"
        )
    );
}

#[test]
fn a_job_past_timeout_per_job_fails() {
    let nodes = aws_h100(2);
    let wf0 = workflow("orchestration: {timeoutPerJob: 1h}\n", &nodes);
    let mut wf = wf0.clone();
    wf.status = decide(&wf0, &nodes, &BTreeMap::new(), 0).status;
    let jobs = BTreeMap::from([job("nccl-job", 0, None)]);
    let d = decide(&wf, &nodes, &jobs, 3601);
    assert_eq!(
        conds(&d.status.expect("status").conditions)[2],
        c(
            "Failed",
            "True",
            "JobTimedOut",
            "1 of 1 groups failed in iteration 1: group-0: TrainJob nccl-job timed out after 3600s"
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
    assert_eq!(parse_go_duration("1500ms"), Some(1));
    assert_eq!(parse_go_duration("soon"), None);
    assert_eq!(parse_go_duration(""), None);
}
