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
    decide_workflow(
        &rules(),
        WorkflowObservation {
            workflow: wf,
            nodes,
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

#[test]
fn a_name_collision_fails_the_workflow_with_the_kind_reason() {
    let nodes = aws_h100(2);
    let wf = workflow("", &nodes);
    let status = nvcre_controller::workflow::collision_status(&wf, "TrainJob", "nccl-job", NOW);
    assert_eq!(
        conds(&status.conditions)[2],
        c(
            "Failed",
            "True",
            "JobNameCollision",
            "TrainJob \"nccl-job\" already exists in namespace \"team-a\" and is not controlled by Workflow \"nccl\"; refusing to adopt it"
        )
    );
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let status =
        nvcre_controller::workflow::collision_status(&wf, "TrainingRuntime", "nccl-runtime", NOW);
    assert_eq!(conds(&status.conditions)[2].2, "DependencyNameCollision");
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
