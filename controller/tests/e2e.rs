//! End to end: the real controller ([`nvcre_controller::run`]) against the in-process fake API
//! server. A WorkloadRun becomes a Workflow, the Workflow becomes one TrainingRuntime and one
//! TrainJob per 2-node group (the same children `render_workflow` + `expand` produce for the
//! same Workflow and nodes), and completing the TrainJobs makes the run Succeeded with the
//! succeeded-nodes ConfigMap listing every node. Along the way: a spec update is refused with
//! 422 (the CRD's immutability rule), and a controller restart duplicates no child.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use nvcre_controller::apply::{train_job_resource, training_runtime_resource};
use nvcre_controller::{Config, Error, run};
use nvcre_domain::crd::{WorkflowResource, WorkloadRunResource, crds};
use nvcre_domain::{RenderRequest, expand, render_workflow};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NS: &str = "team-a";

/// Polls `f` every 100 ms until it returns `Some`, under a 60 s hang guard (a deadline for a
/// hung controller, not a timing assertion).
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let poll = async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    match tokio::time::timeout(Duration::from_secs(60), poll).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

fn trainer_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.trainer.kubeflow.org")},
        "spec": {
            "group": "trainer.kubeflow.org",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_ascii_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}
            }]
        }
    }))
    .expect("trainer crd")
}

/// The four nodes, labelled like `examples/nodes/aws-h100-18.yaml`.
fn node_docs() -> Vec<Value> {
    (0..4)
        .map(|i| {
            let name = format!("ip-10-0-{i}-1.ec2.internal");
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name,
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
                "spec": {"providerID": format!("aws:///us-east-1a/i-000000000000000{i}")},
                "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"}}
            })
        })
        .collect()
}

async fn setup(client: &Client) {
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PostParams::default();
    for crd in crds() {
        crd_api.create(&pp, &crd).await.expect("crd");
    }
    for (kind, plural) in [
        ("TrainJob", "trainjobs"),
        ("TrainingRuntime", "trainingruntimes"),
    ] {
        crd_api
            .create(&pp, &trainer_crd(kind, plural))
            .await
            .expect("trainer crd");
    }
    let ns: Api<Namespace> = Api::all(client.clone());
    ns.create(
        &pp,
        &serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns"),
    )
    .await
    .expect("namespace");
    let nodes: Api<Node> = Api::all(client.clone());
    for doc in node_docs() {
        let node: Node = serde_json::from_value(doc).expect("node");
        nodes.create(&pp, &node).await.expect("node");
    }
}

struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), Error>>,
}

fn start(client: &Client) -> Running {
    let (stop, stop_rx) = oneshot::channel::<()>();
    let config = Config {
        http_addr: Some("127.0.0.1:0".parse().expect("addr")),
        ..Config::default()
    };
    let task = tokio::spawn(run(client.clone(), config, async move {
        let _ = stop_rx.await;
    }));
    Running { stop, task }
}

async fn stop(r: Running) {
    let _ = r.stop.send(());
    r.task.await.expect("join").expect("controller");
}

fn run_manifest() -> WorkloadRunResource {
    serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
        "metadata": {"name": "nccl"},
        "spec": {
            "image": "nvcr.io/nvidia/pytorch:26.01-py3",
            "numNodes": 2,
            "framework": {"mpi": {
                "binary": "/usr/local/bin/all_reduce_perf_mpi",
                "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
                "mpirunPath": "/usr/local/mpi/bin/mpirun"}},
            "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}
        }
    }))
    .expect("run")
}

/// What the library emits for the Workflow on the same nodes: `render_workflow` + `expand`.
fn library_children(wf: &WorkflowResource) -> Vec<Value> {
    let rules = nvcre_domain::default_rules().expect("rules");
    let value = json!({
        "apiVersion": nvcre_domain::crd::API_VERSION, "kind": "Workflow",
        "metadata": {"name": wf.name_any(), "namespace": NS},
        "spec": wf.spec,
    });
    let source = nvcre_engine::Source::new("workflow/nccl", value.to_string());
    let docs = nvcre_engine::parse_documents(&source).expect("parse");
    let nodes = nvcre_domain::nodes_from_documents(&node_docs()).expect("nodes");
    let req = RenderRequest {
        nodes: Some(Arc::new(nodes)),
        ..RenderRequest::default()
    };
    let rendered = render_workflow(&rules, &docs[0], &req).expect("render");
    expand(&rules, &rendered).expect("expand").manifests
}

/// The fields of a child that matter: kind, name, and the spec with the trainer command/env
/// and node affinity.
fn essentials(m: &Value) -> Value {
    json!({
        "kind": m["kind"],
        "name": m["metadata"]["name"],
        "spec": m["spec"],
    })
}

fn child_names(list: &[DynamicObject]) -> Vec<String> {
    let mut names: Vec<String> = list.iter().map(ResourceExt::name_any).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_run_becomes_a_workflow_and_train_jobs_and_succeeds() {
    let server = FakeApiServer::start().await.expect("fake server");
    let client = server.client().expect("client");
    setup(&client).await;
    let controller = start(&client);

    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), NS);
    let created = runs
        .create(&PostParams::default(), &run_manifest())
        .await
        .expect("create run");
    let run_uid = created.metadata.uid.clone().expect("uid");

    // The Workflow, controlled by the run and labelled.
    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), NS);
    let wf = eventually("the Workflow", || async {
        workflows.get_opt("nccl").await.expect("get workflow")
    })
    .await;
    let owner = wf
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .expect("controller ownerRef");
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.block_owner_deletion
        ),
        ("WorkloadRun", "nccl", run_uid.as_str(), None)
    );
    assert_eq!(
        wf.labels()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
        [
            ("app.kubernetes.io/managed-by", "nvcre"),
            ("nvcre.nvidia.com/workload-run", "nccl"),
        ]
    );

    // The run's status: the reference and what was detected.
    let status = eventually("the WorkloadRun status", || async {
        let r = runs.get("nccl").await.expect("get run");
        r.status
            .filter(|s| s.workflow_ref.is_some() && s.resolved_gpus_per_node.is_some())
    })
    .await;
    let wref = status.workflow_ref.expect("workflowRef");
    assert_eq!(
        (
            wref.name.as_str(),
            wref.namespace.as_str(),
            status.detected_platform.as_deref(),
            status.detected_gpu_architecture.as_deref(),
            status.resolved_gpus_per_node
        ),
        ("nccl", NS, Some("aws"), Some("h100"), Some(8))
    );

    // Each group's TrainingRuntime and TrainJob.
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &train_job_resource());
    let runtimes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &training_runtime_resource());
    let (job_list, runtime_list) = eventually("the TrainJobs and TrainingRuntimes", || async {
        let j = jobs.list(&ListParams::default()).await.expect("jobs").items;
        let r = runtimes
            .list(&ListParams::default())
            .await
            .expect("runtimes")
            .items;
        (j.len() == 2 && r.len() == 2).then_some((j, r))
    })
    .await;
    assert_eq!(child_names(&job_list), ["nccl-group-0", "nccl-group-1"]);
    assert_eq!(
        child_names(&runtime_list),
        ["nccl-runtime-nccl-group-0", "nccl-runtime-nccl-group-1"]
    );
    for job in &job_list {
        assert_eq!(
            job.labels()
                .get("nvcre.nvidia.com/workload-run")
                .map(String::as_str),
            Some("nccl")
        );
        let owner = job
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .expect("job owner");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Workflow", "nccl")
        );
    }

    // Same children as the library, on the fields that matter.
    let expected: Vec<Value> = library_children(&wf).iter().map(essentials).collect();
    assert_eq!(
        expected
            .iter()
            .map(|e| (
                e["kind"].as_str().unwrap_or_default(),
                e["name"].as_str().unwrap_or_default()
            ))
            .collect::<Vec<_>>(),
        [
            ("TrainingRuntime", "nccl-runtime-nccl-group-0"),
            ("TrainJob", "nccl-group-0"),
            ("TrainingRuntime", "nccl-runtime-nccl-group-1"),
            ("TrainJob", "nccl-group-1"),
        ]
    );
    let mut actual: Vec<Value> = Vec::new();
    for e in &expected {
        let name = e["name"].as_str().expect("name");
        let list = if e["kind"] == "TrainJob" {
            &job_list
        } else {
            &runtime_list
        };
        let obj = list.iter().find(|o| o.name_any() == name).expect("child");
        let v = serde_json::to_value(obj).expect("json");
        actual.push(json!({"kind": e["kind"], "name": name, "spec": v["spec"]}));
    }
    assert_eq!(actual, expected);

    // Each group's nodes, pinned by hostname affinity.
    let hostnames = |name: &str| -> Value {
        let job = job_list.iter().find(|j| j.name_any() == name).expect("job");
        job.data
            .pointer("/spec/runtimePatches/0/trainingRuntimeSpec/template/spec/replicatedJobs/0/template/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        hostnames("nccl-group-0"),
        json!({"key": "kubernetes.io/hostname", "operator": "In",
               "values": ["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"]})
    );
    assert_eq!(
        hostnames("nccl-group-1"),
        json!({"key": "kubernetes.io/hostname", "operator": "In",
               "values": ["ip-10-0-2-1.ec2.internal", "ip-10-0-3-1.ec2.internal"]})
    );

    // The spec is immutable: the CRD's validation rejects an update.
    let rejected = runs
        .patch(
            "nccl",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"image": "nvcr.io/nvidia/pytorch:25.01-py3"}})),
        )
        .await;
    match rejected {
        Err(kube::Error::Api(s)) => assert_eq!(
            (s.code, s.reason.as_str(), s.message.as_str()),
            (
                422,
                "Invalid",
                "WorkloadRun.nvcre.nvidia.com \"nccl\" is invalid: spec: Invalid value: \"object\": spec is immutable after creation"
            )
        ),
        other => panic!("spec update not rejected: {other:?}"),
    }
    assert_eq!(
        runs.get("nccl").await.expect("run").spec.image,
        "nvcr.io/nvidia/pytorch:26.01-py3"
    );

    // A restart midway: the new controller adopts what is there and duplicates nothing.
    stop(controller).await;
    let controller = start(&client);

    // The TrainJobs complete (as the Trainer would report it, through /status).
    for name in ["nccl-group-0", "nccl-group-1"] {
        let status = json!({"status": {"conditions": [{
            "type": "Complete", "status": "True", "reason": "JobsCompleted",
            "message": "jobs completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("complete");
    }
    let done = eventually("the run to succeed", || async {
        let r = runs.get("nccl").await.expect("get run");
        r.status.filter(|s| {
            s.succeeded_nodes_ref.is_some()
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Succeeded" && c.status == "True")
        })
    })
    .await;
    let succeeded = done
        .conditions
        .iter()
        .find(|c| c.type_ == "Succeeded")
        .expect("Succeeded");
    assert_eq!(
        (
            done.phase.as_deref(),
            succeeded.status.as_str(),
            succeeded.reason.as_str(),
            succeeded.message.as_str(),
        ),
        (
            Some("Succeeded"),
            "True",
            "WorkflowSucceeded",
            "Workflow completed successfully"
        )
    );
    assert_eq!(
        done.succeeded_nodes_ref.map(|r| (r.kind, r.name)),
        Some(("ConfigMap".to_string(), "nccl-succeeded-nodes".to_string()))
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = eventually("the succeeded-nodes ConfigMap", || async {
        cms.get_opt("nccl-succeeded-nodes").await.expect("get cm")
    })
    .await;
    assert_eq!(
        serde_json::to_value(&cm.data).expect("data"),
        json!({"nodes": "ip-10-0-0-1.ec2.internal,ip-10-0-1-1.ec2.internal,ip-10-0-2-1.ec2.internal,ip-10-0-3-1.ec2.internal"})
    );

    // After the restart and completion: still one Workflow and two of each child.
    assert_eq!(
        workflows
            .list(&ListParams::default())
            .await
            .expect("workflows")
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["nccl"]
    );
    assert_eq!(
        child_names(&jobs.list(&ListParams::default()).await.expect("jobs").items),
        ["nccl-group-0", "nccl-group-1"]
    );
    assert_eq!(
        child_names(
            &runtimes
                .list(&ListParams::default())
                .await
                .expect("runtimes")
                .items
        ),
        ["nccl-runtime-nccl-group-0", "nccl-runtime-nccl-group-1"]
    );

    stop(controller).await;
    server.shutdown().await;
}
