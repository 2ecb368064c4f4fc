//! SKELETON, not compiled yet (cargo does not discover `tests/<dir>/<file>.rs` without a
//! `main.rs`): the end-to-end test of the real controller against the in-process fake API
//! server (`controller/fake-apiserver`, crate `nvcre-fake-apiserver`, on its own branch).
//!
//! To enable after that crate is merged: add `nvcre-fake-apiserver = { path = "fake-apiserver" }`
//! to `[dev-dependencies]` of `controller/Cargo.toml`, move this file to `tests/e2e.rs`, and fill
//! in the TODOs. The same test runs against a real cluster when `KUBECONFIG` is given (use
//! `kube::Client::try_default()` instead of the fake server's client).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use nvcre_controller::{Config, run};
use nvcre_domain::crd::{WorkflowResource, WorkloadRunResource, crds};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::json;

/// Polls `f` every 100 ms until it returns `Some`, for at most 30 s (a deadline for a hung
/// controller, not a timing assertion).
async fn eventually<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..300 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("condition not reached")
}

#[tokio::test]
async fn a_workload_run_becomes_a_workflow_and_train_jobs_and_succeeds() {
    let server = FakeApiServer::start().await.expect("fake server");
    let client = server.client().expect("client");
    // CRDs: ours, plus minimal Kubeflow Trainer CRDs (TrainJob with /status, TrainingRuntime).
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds() {
        crd_api.create(&PostParams::default(), &crd).await.expect("crd");
    }
    // TODO: create trainjobs.trainer.kubeflow.org and trainingruntimes.trainer.kubeflow.org
    // (x-kubernetes-preserve-unknown-fields, status subresource on trainjobs).
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("ns"))
        .await
        .expect("namespace");
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..4 {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("node-{i}"), "labels": {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-{i}")},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}
        }))
        .expect("node");
        nodes.create(&PostParams::default(), &node).await.expect("node");
    }

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(client.clone(), Config::default(), async move {
        let _ = stop_rx.await;
    }));

    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), "team-a");
    let run_obj: WorkloadRunResource = serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
        "metadata": {"name": "nccl"},
        "spec": {"image": "img", "numNodes": 2,
                 "framework": {"mpi": {"binary": "/b", "mpirunPath": "/usr/local/mpi/bin/mpirun"}}}
    }))
    .expect("run");
    runs.create(&PostParams::default(), &run_obj).await.expect("create run");

    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), "team-a");
    let wf = eventually(|| async { workflows.get_opt("nccl").await.ok().flatten() }).await;
    assert_eq!(
        wf.metadata.labels.unwrap_or_default().get("nvcre.nvidia.com/workload-run").map(String::as_str),
        Some("nccl")
    );
    // TODO: wait for TrainJobs nccl-group-0 / nccl-group-1 (Api<DynamicObject> with
    // nvcre_controller::apply::train_job_resource()), patch their status to
    // {conditions: [{type: Complete, status: "True"}]}, then wait for the WorkloadRun's
    // Succeeded=True / WorkflowSucceeded and the `nccl-succeeded-nodes` ConfigMap.

    let _ = stop_tx.send(());
    controller.await.expect("join").expect("controller");
    server.shutdown().await;
}
