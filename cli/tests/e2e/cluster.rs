//! `workloadrun run|status|report|cancel` end to end: the real binary, through a generated
//! kubeconfig, against the in-process fake API server with the real controller running
//! in-process (the same setup as the controller's own end-to-end test: the two CRDs, the
//! Trainer CRDs and four AWS H100 nodes). The test plays the Trainer: it marks TrainJobs
//! Complete or Failed through `/status`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use nvcre_controller::apply::train_job_resource;
use nvcre_controller::{Config, Error, run as run_controller};
use nvcre_domain::crd::{WorkloadRunResource, crds};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::util::bin;

const NS: &str = "team-a";
const PASSWORD: &str = "s3cr3t-NGC-key-do-not-print";

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
    nvcre_fake_apiserver::fixtures::trainer_crd(kind, plural).expect("trainer crd")
}

/// A fake cluster: the CRDs, namespace `team-a`, four AWS H100 nodes; and a kubeconfig file
/// whose current context points at it with namespace `team-a`.
struct Cluster {
    server: FakeApiServer,
    client: Client,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn cluster() -> Cluster {
    let server = FakeApiServer::start().await.expect("fake server");
    let client = server.client().expect("client");
    let pp = PostParams::default();
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
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
    for i in 0..4 {
        let name = format!("ip-10-0-{i}-1.ec2.internal");
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "spec": {"providerID": format!("aws:///us-east-1a/i-000000000000000{i}")},
            "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"}}
        }))
        .expect("node");
        nodes.create(&pp, &node).await.expect("node");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: tester\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: {NS}\ncurrent-context: fake\n",
            server.url()
        ),
    )
    .expect("kubeconfig");
    Cluster {
        server,
        client,
        dir,
        kubeconfig,
    }
}

/// Two BandwidthMeasurements (one per group) and one GoodputMeasurement, as the measurement
/// controllers would leave them, plus one of another run that the report must ignore.
async fn create_measurements(c: &Cluster) {
    let resource = |kind: &str, plural: &str| kube::api::ApiResource {
        group: "nvcre.nvidia.com".into(),
        version: "v1alpha1".into(),
        api_version: "nvcre.nvidia.com/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let bms: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        NS,
        &resource("BandwidthMeasurement", "bandwidthmeasurements"),
    );
    let gms: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        NS,
        &resource("GoodputMeasurement", "goodputmeasurements"),
    );
    let bm = |name: &str, job: &str, results: Value, transport: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "BandwidthMeasurement",
            "metadata": {"name": name},
            "spec": {"jobRef": {"apiGroup": "nvcre.nvidia.com", "kind": "Job", "name": job},
                     "logProfileRef": "nccl-bandwidth", "testType": "all_reduce"},
            "status": {"results": results, "transport": transport}
        }))
        .expect("bm")
    };
    for obj in [
        bm(
            "nccl-group-0-bandwidth",
            "nccl-group-0",
            json!([{"sizeBytes": 8, "algBW": "0.01", "busBW": "0.02", "samples": 4},
                   {"sizeBytes": 17_179_869_184_i64, "algBW": "260.20", "busBW": "487.87", "samples": 65}]),
            json!(["IB"]),
        ),
        bm(
            "nccl-group-1-bandwidth",
            "nccl-group-1",
            json!([{"sizeBytes": 17_179_869_184_i64, "algBW": "250.00", "busBW": "470.10", "samples": 60}]),
            json!(["IB", "Socket"]),
        ),
        bm(
            "other-group-0-bandwidth",
            "other-group-0",
            json!([{"sizeBytes": 34_359_738_368_i64, "algBW": "1.00", "busBW": "1.00", "samples": 1}]),
            json!(["Other"]),
        ),
    ] {
        create_with_status(&bms, &obj).await;
    }
    let gm: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "GoodputMeasurement",
        "metadata": {"name": "nccl-group-0-goodput"},
        "spec": {"jobRef": {"apiGroup": "nvcre.nvidia.com", "kind": "Job", "name": "nccl-group-0"},
                 "logProfileRef": "megatron-training"},
        "status": {"result": "0.900000", "avgTFLOPSPerGPU": "412.500000",
                   "avgStepTimeSec": "1.250000"}
    }))
    .expect("gm");
    create_with_status(&gms, &gm).await;
}

/// Creates `obj` and then writes its `status` through the status subresource, as a controller
/// would: the API server ignores `status` on create for a CRD with a status subresource.
async fn create_with_status(api: &Api<DynamicObject>, obj: &DynamicObject) {
    let created = api
        .create(&PostParams::default(), obj)
        .await
        .expect("create measurement");
    let name = created.metadata.name.clone().expect("name");
    let status = obj.data.get("status").cloned().expect("status");
    api.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("measurement status");
}

struct Controller {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), Error>>,
}

fn start_controller(client: &Client) -> Controller {
    let (stop, stop_rx) = oneshot::channel::<()>();
    let config = Config {
        http_addr: Some("127.0.0.1:0".parse().expect("addr")),
        ..Config::default()
    };
    let task = tokio::spawn(run_controller(client.clone(), config, async move {
        let _ = stop_rx.await;
    }));
    Controller { stop, task }
}

async fn stop_controller(c: Controller) {
    let _ = c.stop.send(());
    c.task.await.expect("join").expect("controller");
}

/// A 2-node-per-group NCCL run on every GPU node.
fn write_manifest(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: {name}\nspec:\n  image: nvcr.io/nvidia/pytorch:26.01-py3\n  numNodes: 2\n  framework:\n    mpi:\n      mpirunPath: /usr/local/mpi/bin/mpirun\n      binary: /usr/local/bin/all_reduce_perf_mpi\n      args: [\"-b\", \"8\", \"-e\", \"32G\", \"-f\", \"2\", \"-n\", \"100\"]\n  target:\n    nodeSelector:\n      nvidia.com/gpu.present: \"true\"\n"
        ),
    )
    .expect("manifest");
    path.display().to_string()
}

/// What one invocation printed.
#[derive(Debug, Clone)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs the binary with `args` and `--kubeconfig`, off the async workers; every output is
/// checked for the registry password.
async fn nvcre(c: &Cluster, args: &[&str]) -> Out {
    let mut cmd = bin();
    cmd.env_remove("KUBECONFIG")
        .env_remove("NVCRE_WORKLOAD_REGISTRY_PASSWORD")
        .env("HOME", c.dir.path())
        .args(args)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("runs"))
        .await
        .expect("join");
    let out = Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD),
        "the password was printed by {args:?}: {out:?}"
    );
    out
}

/// The run's stored JSON, straight from the server's store.
fn stored_run(c: &Cluster, name: &str) -> Option<Value> {
    c.server
        .object("nvcre.nvidia.com", "workloadruns", NS, name)
}

async fn set_train_job_condition(c: &Cluster, job: &str, condition: Value) {
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), NS, &train_job_resource());
    jobs.patch_status(
        job,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"conditions": [condition]}})),
    )
    .await
    .expect("train job status");
}

async fn wait_for_train_jobs(c: &Cluster, n: usize) {
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), NS, &train_job_resource());
    eventually("the TrainJobs", || async {
        let list = jobs.list(&ListParams::default()).await.expect("jobs").items;
        (list.len() == n).then_some(())
    })
    .await;
}

/// The report text with the Runtime line (wall time) taken out.
fn without_runtime(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("│  Runtime:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A line of `text` starting with `prefix` (the rest carries an elapsed time).
fn line_starting<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{text}"))
}

const SUCCEEDED_REPORT: &str = "
╔════════════════════════════════════════════════════════════════╗
║                       WorkloadRun Report                       ║
╚════════════════════════════════════════════════════════════════╝

  Name:      nccl
  Platform:  aws
  GPU:       h100
  Nodes:     4

┌────────────────────────────────────────────────────────────────┐
│  workloadrun/nccl                                              │
├────────────────────────────────────────────────────────────────┤
│  Status:    Succeeded                                          │
│  Scale:     full-scale                                         │
│  Nodes/Job: 2                                                  │
│  Jobs:      2                                                  │
│                                                                │
│  Avg Runtime Goodput:  0.90 (90%)                              │
│  Avg TFLOPs/GPU:  412.5                                        │
│  Avg Step Time:  1.25s                                         │
│                                                                │
│  Bandwidth by group:                                           │
│      ✓  group-0 (ip-10-0-0-1.ec2.internal, ip-10-0-1-1.ec2.internal)│
│         487.87 GB/s                                            │
│         Transport: IB                                          │
│      ✓  group-1 (ip-10-0-2-1.ec2.internal, ip-10-0-3-1.ec2.internal)│
│         470.10 GB/s                                            │
│         Transport: IB, Socket                                  │
│                                                                │
│  Transport: IB, Socket                                         │
│                                                                │
│  Bandwidth:                                                    │
│      Size       AlgBW        BusBW        Samples              │
│      16 GB      260.20 GB/s  487.87 GB/s  65                   │
└────────────────────────────────────────────────────────────────┘

┌────────────────────────────────────────────────────────────────┐
│  Summary                                                       │
├────────────────────────────────────────────────────────────────┤
│  Categories:   1/1 passed                                      │
│  Failed Nodes: none                                            │
│  Result:       PASSED                                          │
└────────────────────────────────────────────────────────────────┘";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_wait_succeeds_with_an_owned_pull_secret_and_reports() {
    let c = cluster().await;
    let controller = start_controller(&c.client);
    let file = write_manifest(c.dir.path(), "nccl");
    let results = c.dir.path().join("results.json");
    let results_arg = results.display().to_string();

    let run = {
        let args: Vec<String> = [
            "workloadrun",
            "run",
            "--wait",
            "--timeout",
            "5m",
            "--workload-registry",
            "nvcr.io",
            "--workload-registry-username",
            "$oauthtoken",
            "--workload-registry-password",
            PASSWORD,
            "--results-file",
            &results_arg,
            &file,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut cmd = bin();
        cmd.env_remove("KUBECONFIG")
            .env("HOME", c.dir.path())
            .args(&args)
            .arg("--kubeconfig")
            .arg(&c.kubeconfig);
        tokio::task::spawn_blocking(move || cmd.output().expect("runs"))
    };

    wait_for_train_jobs(&c, 2).await;

    // The Secret: owned (controller reference) by the run, holding the credentials.
    let run_obj = stored_run(&c, "nccl").expect("run stored");
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), NS);
    let secret = secrets.get("nvcrectl-pull-nccl").await.expect("secret");
    let owner = &secret.metadata.owner_references.clone().expect("owners")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        (
            "WorkloadRun",
            "nccl",
            run_obj["metadata"]["uid"].as_str().expect("uid"),
            Some(true)
        )
    );
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    let config: Value =
        serde_json::from_slice(&secret.data.as_ref().expect("data")[".dockerconfigjson"].0)
            .expect("docker config");
    assert_eq!(
        config["auths"]["nvcr.io"]["password"].as_str(),
        Some(PASSWORD)
    );
    // The run names the Secret and nothing more.
    assert_eq!(
        run_obj["spec"]["imagePullSecrets"],
        json!([{"name": "nvcrectl-pull-nccl"}])
    );
    assert!(!run_obj.to_string().contains(PASSWORD));

    // While it runs: status InProgress (exit 0), report RUNNING (exit 3).
    let status = nvcre(&c, &["workloadrun", "status", "nccl"]).await;
    assert_eq!((status.code, status.stdout.as_str()), (0, "InProgress\n"));
    let report = nvcre(&c, &["workloadrun", "report", "nccl"]).await;
    assert_eq!(
        (report.code, report.stderr.as_str()),
        (3, "Error: workloadrun \"nccl\" is still running\n")
    );
    assert!(report.stdout.contains("│  Result:       RUNNING"));

    create_measurements(&c).await;
    for job in ["nccl-group-0", "nccl-group-1"] {
        set_train_job_condition(
            &c,
            job,
            json!({"type": "Complete", "status": "True", "reason": "JobsCompleted",
                   "message": "jobs completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        )
        .await;
    }
    let out = run.await.expect("join");
    let out = Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD));
    assert_eq!(out.code, 0, "{out:?}");
    let stderr_lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        &stderr_lines[..4],
        [
            "Discovered 4 GPU nodes with product: NVIDIA-H100-80GB-HBM3 (h100)",
            "WorkloadRun nccl created in namespace team-a.",
            "Created image pull secret \"nvcrectl-pull-nccl\" in namespace team-a.",
            "Waiting for completion (timeout: 5m0s)...",
        ],
        "{}",
        out.stderr
    );
    assert!(
        line_starting(&out.stderr, "[watch] nccl: InProgress (")
            .ends_with(") — Workflow nccl created")
    );
    assert!(
        line_starting(&out.stderr, "[watch] nccl: Succeeded (")
            .ends_with(") — Workflow completed successfully")
    );
    line_starting(&out.stderr, "[watch] WorkloadRun succeeded. (");
    assert!(
        out.stderr
            .ends_with(&format!("Results written to {results_arg}\n"))
    );
    assert_eq!(without_runtime(&out.stdout), SUCCEEDED_REPORT);
    assert!(line_starting(&out.stdout, "│  Runtime:   ").ends_with("│"));

    // The results file: an array of one report.
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&results).expect("results")).expect("json");
    let mut first = written[0].clone();
    first["categories"][0]["runtime"] = json!("<runtime>");
    assert_eq!(
        first,
        json!({
            "title": "WorkloadRun Report", "name": "nccl", "platform": "aws", "gpu": "h100",
            "totalNodes": 4,
            "categories": [{"domain": "workloadrun", "variant": "nccl", "status": "Succeeded",
                "runtime": "<runtime>", "testScale": "full-scale", "nodesPerJob": 2, "jobs": 2,
                "domains": [{"name": "", "nodeCount": 4, "goodput": 0.9, "tflops": 412.5,
                             "stepTime": 1.25}],
                "bandwidth": [{"size": "16 GB", "algBW": "260.20 GB/s", "busBW": "487.87 GB/s",
                               "samples": 65}],
                "transport": ["IB", "Socket"],
                "groupBandwidth": [
                    {"groupName": "group-0",
                     "nodes": ["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"],
                     "busBW": "487.87", "transport": ["IB"], "belowMin": false, "failed": false},
                    {"groupName": "group-1",
                     "nodes": ["ip-10-0-2-1.ec2.internal", "ip-10-0-3-1.ec2.internal"],
                     "busBW": "470.10", "transport": ["IB", "Socket"], "belowMin": false,
                     "failed": false}
                ]}],
            "failedNodes": [], "result": "PASSED",
            "nodeResults": [
                {"name": "ip-10-0-0-1.ec2.internal", "group": "group-0", "status": "Passed"},
                {"name": "ip-10-0-1-1.ec2.internal", "group": "group-0", "status": "Passed"},
                {"name": "ip-10-0-2-1.ec2.internal", "group": "group-1", "status": "Passed"},
                {"name": "ip-10-0-3-1.ec2.internal", "group": "group-1", "status": "Passed"}
            ]
        })
    );
    assert_eq!(written.as_array().map(Vec::len), Some(1));

    // Afterwards: status, report (text and JSON) exit 0.
    let status = nvcre(&c, &["workloadrun", "status", "nccl", "-o", "json"]).await;
    assert_eq!(
        (status.code, status.stdout.as_str()),
        (
            0,
            "{\n  \"name\": \"nccl\",\n  \"namespace\": \"team-a\",\n  \"status\": \"Succeeded\"\n}\n"
        )
    );
    let report = nvcre(&c, &["workloadrun", "report", "nccl"]).await;
    assert_eq!((report.code, report.stderr.as_str()), (0, ""));
    assert_eq!(without_runtime(&report.stdout), SUCCEEDED_REPORT);
    let report = nvcre(&c, &["workloadrun", "report", "nccl", "-o", "json"]).await;
    let mut parsed: Value = serde_json::from_str(&report.stdout).expect("report json");
    parsed["categories"][0]["runtime"] = json!("<runtime>");
    assert_eq!((report.code, parsed), (0, first));

    // Cancel: the run goes, and the Secret with it; a second cancel only warns.
    let cancel = nvcre(&c, &["workloadrun", "cancel", "nccl"]).await;
    assert_eq!(
        (cancel.code, cancel.stdout.as_str(), cancel.stderr.as_str()),
        (0, "Cancelled nccl\n", "")
    );
    assert!(stored_run(&c, "nccl").is_none());
    assert!(
        secrets
            .get_opt("nvcrectl-pull-nccl")
            .await
            .expect("get")
            .is_none()
    );
    let again = nvcre(&c, &["workloadrun", "cancel", "nccl"]).await;
    assert_eq!(
        (again.code, again.stdout.as_str(), again.stderr.as_str()),
        (
            0,
            "",
            "WorkloadRun \"nccl\" not found in namespace \"team-a\"\n"
        )
    );
    let status = nvcre(&c, &["workloadrun", "status", "nccl"]).await;
    assert_eq!(
        (status.code, status.stderr.as_str()),
        (
            2,
            "Error: workloadrun \"nccl\" not found in namespace \"team-a\"\n"
        )
    );
    let report = nvcre(&c, &["workloadrun", "report", "nccl"]).await;
    assert_eq!(
        (report.code, report.stderr.as_str()),
        (
            2,
            "Error: workloadrun \"nccl\" not found in namespace \"team-a\"\n"
        )
    );

    stop_controller(controller).await;
    c.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_wait_fails_with_the_failure_message_and_a_failed_report() {
    let c = cluster().await;
    let controller = start_controller(&c.client);
    let file = write_manifest(c.dir.path(), "broken");
    let mut cmd = bin();
    cmd.env_remove("KUBECONFIG")
        .env("HOME", c.dir.path())
        .args(["workloadrun", "run", "--wait", &file, "--kubeconfig"])
        .arg(&c.kubeconfig);
    let run = tokio::task::spawn_blocking(move || cmd.output().expect("runs"));
    wait_for_train_jobs(&c, 2).await;
    set_train_job_condition(
        &c,
        "broken-group-0",
        json!({"type": "Failed", "status": "True", "reason": "JobFailed",
               "message": "launcher exited with code 1", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    )
    .await;
    set_train_job_condition(
        &c,
        "broken-group-1",
        json!({"type": "Complete", "status": "True", "reason": "JobsCompleted",
               "message": "jobs completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    )
    .await;
    let out = run.await.expect("join");
    let (code, stdout, stderr) = (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let message = "1 groups failed across 1 iterations";
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        line_starting(&stderr, "[watch] broken: Failed (").ends_with(&format!(") — {message}")),
        "{stderr}"
    );
    line_starting(&stderr, "[watch] WorkloadRun failed. (");
    assert!(
        stderr.ends_with(&format!("Error: WorkloadRun failed: {message}\n")),
        "{stderr}"
    );
    let failed_card = [
        "│  Failed Groups:                                                │",
        "│      ✗  group-0 (2 nodes)                                      │",
        "│         launcher exited with code 1                            │",
        "│           - ip-10-0-0-1.ec2.internal                           │",
        "│           - ip-10-0-1-1.ec2.internal                           │",
    ]
    .join("\n");
    assert!(stdout.contains(&failed_card), "{stdout}");
    let summary = [
        "│  Categories:   0/1 passed                                      │",
        "│  Failed Nodes: 2                                               │",
        "│    - ip-10-0-0-1.ec2.internal                                  │",
        "│    - ip-10-0-1-1.ec2.internal                                  │",
        "│  Result:       FAILED                                          │",
    ]
    .join("\n");
    assert!(stdout.contains(&summary), "{stdout}");

    let status = nvcre(&c, &["workloadrun", "status", "broken", "-o", "json"]).await;
    assert_eq!(
        (
            status.code,
            serde_json::from_str::<Value>(&status.stdout).expect("json")
        ),
        (
            0,
            json!({"name": "broken", "namespace": "team-a", "status": "Failed",
                   "failedNodes": ["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"]})
        )
    );
    let report = nvcre(&c, &["workloadrun", "report", "broken", "-o", "json"]).await;
    assert_eq!(
        (report.code, report.stderr.as_str()),
        (1, "Error: workloadrun \"broken\" failed\n")
    );
    let parsed: Value = serde_json::from_str(&report.stdout).expect("json");
    assert_eq!(
        (
            &parsed["result"],
            &parsed["categories"][0]["status"],
            &parsed["categories"][0]["failedGroups"],
            &parsed["failedNodes"]
        ),
        (
            &json!("FAILED"),
            &json!("Failed"),
            &json!([{"name": "group-0", "nodeCount": 2,
                     "nodes": ["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"],
                     "reason": "launcher exited with code 1"}]),
            &json!(["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"])
        )
    );
    // A run cancelled while InProgress: its Workflow and TrainJobs go with it.
    let mid = write_manifest(c.dir.path(), "mid");
    let created = nvcre(&c, &["workloadrun", "run", &mid]).await;
    assert_eq!(created.code, 0, "{created:?}");
    let workflows: Api<nvcre_domain::crd::WorkflowResource> = Api::namespaced(c.client.clone(), NS);
    eventually("mid's Workflow", || async {
        workflows.get_opt("mid").await.expect("get").map(|_| ())
    })
    .await;
    let status = nvcre(&c, &["workloadrun", "status", "mid"]).await;
    assert_eq!((status.code, status.stdout.as_str()), (0, "InProgress\n"));
    let cancel = nvcre(&c, &["workloadrun", "cancel", "mid"]).await;
    assert_eq!(
        (cancel.code, cancel.stdout.as_str()),
        (0, "Cancelled mid\n")
    );
    assert!(stored_run(&c, "mid").is_none());
    assert!(workflows.get_opt("mid").await.expect("get").is_none());

    let cancel = nvcre(&c, &["workloadrun", "cancel", "broken", "ghost"]).await;
    assert_eq!(
        (cancel.code, cancel.stdout.as_str(), cancel.stderr.as_str()),
        (
            0,
            "Cancelled broken\n",
            "WorkloadRun \"ghost\" not found in namespace \"team-a\"\n"
        )
    );
    stop_controller(controller).await;
    c.server.shutdown().await;
}

/// Without a controller nothing ever writes status: the run stays Pending, `--wait` times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_run_times_out_with_a_partial_report_and_hints() {
    let c = cluster().await;
    let file = write_manifest(c.dir.path(), "slow");

    // Without --wait: created, with the kubectl hint.
    let created = nvcre(&c, &["workloadrun", "run", &file]).await;
    assert_eq!(created.code, 0, "{created:?}");
    assert_eq!(
        created.stderr,
        "Discovered 4 GPU nodes with product: NVIDIA-H100-80GB-HBM3 (h100)\nWorkloadRun slow created in namespace team-a.\nTo check status:\n  kubectl get workloadrun slow -n team-a\n  nvcre-policy workloadrun status slow -n team-a\n"
    );
    let status = nvcre(&c, &["workloadrun", "status", "slow"]).await;
    assert_eq!((status.code, status.stdout.as_str()), (0, "Pending\n"));
    // KUBECONFIG and --context: a file whose current context points nowhere.
    let two = c.dir.path().join("two-contexts");
    std::fs::write(
        &two,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: dead\n  context: {{cluster: dead, user: u}}\n- name: fake\n  context: {{cluster: fake, user: u, namespace: {NS}}}\ncurrent-context: dead\n",
            c.server.url()
        ),
    )
    .expect("kubeconfig");
    let mut cmd = bin();
    cmd.env("KUBECONFIG", &two).env("HOME", c.dir.path()).args([
        "workloadrun",
        "status",
        "slow",
        "--context",
        "fake",
    ]);
    let via_env = tokio::task::spawn_blocking(move || cmd.output().expect("runs"))
        .await
        .expect("join");
    assert_eq!(
        (
            via_env.status.code(),
            String::from_utf8_lossy(&via_env.stdout).into_owned()
        ),
        (Some(0), "Pending\n".to_string())
    );
    let other_ns = nvcre(&c, &["workloadrun", "status", "slow", "-n", "default"]).await;
    assert_eq!(
        (other_ns.code, other_ns.stderr.as_str()),
        (
            2,
            "Error: workloadrun \"slow\" not found in namespace \"default\"\n"
        )
    );
    let report = nvcre(&c, &["workloadrun", "report", "slow", "-o", "json"]).await;
    assert_eq!(report.code, 3);
    assert_eq!(
        serde_json::from_str::<Value>(&report.stdout).expect("json")["result"],
        "RUNNING"
    );
    // A second create of the same name is the API server's AlreadyExists.
    let again = nvcre(&c, &["workloadrun", "run", &file]).await;
    assert_eq!(again.code, 2);
    assert!(
        again
            .stderr
            .contains("Error: create WorkloadRun: ApiError: workloadruns.nvcre.nvidia.com \"slow\" already exists"),
        "{}",
        again.stderr
    );

    // --wait with a short timeout: partial report, hint block, exit 3.
    let timed_out = nvcre(
        &c,
        &[
            "workloadrun",
            "run",
            "--wait",
            "--timeout",
            "2s",
            "--name",
            "slow-2",
            &file,
        ],
    )
    .await;
    assert_eq!(timed_out.code, 3, "{timed_out:?}");
    line_starting(&timed_out.stderr, "Waiting for completion (timeout: 2s)...");
    assert!(timed_out.stdout.contains("│  Result:       RUNNING"));
    assert!(
        timed_out.stderr.ends_with(
            "The WorkloadRun is still running in namespace team-a.\n  Watch it:   kubectl get workloadrun slow-2 -n team-a --watch\n  Report:     nvcre-policy workloadrun report slow-2 -n team-a   (exits non-zero while the run is still going)\n  Cancel:     nvcre-policy workloadrun cancel slow-2 -n team-a\nError: timeout waiting for WorkloadRun slow-2\n"
        ),
        "{}",
        timed_out.stderr
    );
    assert!(
        stored_run(&c, "slow-2").is_some(),
        "nothing is deleted without --cleanup"
    );

    // --cleanup in a namespace that did not exist: created, then deleted with the run.
    let cleaned = nvcre(
        &c,
        &[
            "workloadrun",
            "run",
            "--wait",
            "--timeout",
            "1s",
            "--cleanup",
            "-n",
            "fresh",
            &file,
        ],
    )
    .await;
    assert_eq!(cleaned.code, 3, "{cleaned:?}");
    assert!(cleaned.stderr.contains("Created namespace fresh.\n"));
    assert!(
        cleaned.stderr.contains("[cleanup] Deleting WorkloadRun slow...\n[cleanup] Deleting namespace fresh...\n[cleanup] Done.\n"),
        "{}",
        cleaned.stderr
    );
    assert!(!cleaned.stderr.contains("The WorkloadRun is still running"));
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    assert!(namespaces.get_opt("fresh").await.expect("get").is_none());

    // --dry-run=server: validated by the API server, nothing stored.
    let dry = nvcre(
        &c,
        &[
            "workloadrun",
            "run",
            "--dry-run=server",
            "--name",
            "dry",
            &file,
        ],
    )
    .await;
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(dry.stdout.contains("name: dry\n"), "{}", dry.stdout);
    assert!(stored_run(&c, "dry").is_none());

    // --topology-domain needs a key the H100 platform rows do not give.
    let topo = nvcre(
        &c,
        &[
            "workloadrun",
            "run",
            "--topology-domain",
            "block-1",
            "--name",
            "t",
            &file,
        ],
    )
    .await;
    assert_eq!(
        (topo.code, topo.stderr.as_str()),
        (
            2,
            "Error: --topology-domain requires --topology-key on platform \"aws\"\n"
        )
    );
    // With a key naming a label no node carries: nothing to run on.
    let none = nvcre(
        &c,
        &[
            "workloadrun",
            "run",
            "--topology-domain",
            "block-1",
            "--topology-key",
            "example.com/block",
            "--name",
            "t",
            &file,
        ],
    )
    .await;
    assert_eq!(
        (none.code, none.stderr.as_str()),
        (
            2,
            "Error: --topology-domain: no eligible GPU node has example.com/block=block-1\n"
        )
    );

    let cancel = nvcre(&c, &["workloadrun", "cancel", "slow", "slow-2"]).await;
    assert_eq!(
        (cancel.code, cancel.stdout.as_str()),
        (0, "Cancelled slow\nCancelled slow-2\n")
    );
    let runs: Api<WorkloadRunResource> = Api::namespaced(c.client.clone(), NS);
    assert!(
        runs.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    c.server.shutdown().await;
}

/// Ctrl-C while waiting: the watch stops, the hint says how to get the report, nothing is
/// deleted, exit 130.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_wait_deletes_nothing_and_says_how_to_resume() {
    use std::io::BufRead;
    let c = cluster().await;
    let file = write_manifest(c.dir.path(), "intr");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("nvcre-policy"))
        .env_remove("KUBECONFIG")
        .env_remove("NVCRE_RULES")
        .env("HOME", c.dir.path())
        .args(["workloadrun", "run", "--wait", &file, "--kubeconfig"])
        .arg(&c.kubeconfig)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id().to_string();
    let stderr = child.stderr.take().expect("stderr");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stdout), &mut s);
        s
    });
    let lines = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        // Hang guard only: the line comes as soon as the run is created.
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            let waiting = line.starts_with("Waiting for completion");
            seen.push(line);
            if waiting {
                break;
            }
        }
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let code = child.wait().expect("wait").code();
        seen.extend(rx.iter());
        (code, seen)
    })
    .await
    .expect("join");
    reader.join().expect("reader");
    let stdout = out_reader.join().expect("stdout reader");
    let (code, lines) = lines;
    assert_eq!(code, Some(130), "{lines:?}");
    let tail: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .skip_while(|l| !l.starts_with("Stopped watching"))
        .collect();
    assert_eq!(
        tail,
        [
            "Stopped watching WorkloadRun intr.",
            "The WorkloadRun keeps running in namespace team-a; nothing was deleted.",
            "  Watch it:   kubectl get workloadrun intr -n team-a --watch",
            "  Report:     nvcre-policy workloadrun report intr -n team-a   (exits non-zero while the run is still going)",
            "  Cancel:     nvcre-policy workloadrun cancel intr -n team-a",
            "Error: interrupted",
        ]
    );
    assert!(stdout.contains("│  Result:       RUNNING"), "{stdout}");
    assert!(stored_run(&c, "intr").is_some());
    c.server.shutdown().await;
}
