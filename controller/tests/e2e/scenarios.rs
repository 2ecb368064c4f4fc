//! The scenarios, each an `async fn(&Env)`: the same code on the fake server and a real cluster.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use nvcre_controller::apply::{train_job_resource, training_runtime_resource};
use nvcre_controller::rules::RulesSource;
use nvcre_controller::{Config, ConfigMapRef, LeaderElection};
use nvcre_domain::crd::{WorkflowResource, WorkloadRunResource};
use nvcre_domain::{RenderRequest, expand, render_workflow};
use serde_json::{Value, json};

use super::env::{E2E_LABEL, Env, eventually};

/// An MPI all-reduce run of 2-node groups on the scenario's nodes, with `extra` merged into
/// its spec.
fn run_with(env: &Env, name: &str, extra: Value) -> WorkloadRunResource {
    let mut doc = json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
        "metadata": {"name": name},
        "spec": {
            "image": "nvcr.io/nvidia/pytorch:26.01-py3",
            "numNodes": 2,
            "framework": {"mpi": {
                "binary": "/usr/local/bin/all_reduce_perf_mpi",
                "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
                "mpirunPath": "/usr/local/mpi/bin/mpirun"}},
            "target": {"nodeSelector": {"nvidia.com/gpu.present": "true", E2E_LABEL: env.id}}
        }
    });
    if let (Some(spec), Some(extra)) = (doc["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(doc).expect("run")
}

fn run_manifest(env: &Env, name: &str) -> WorkloadRunResource {
    run_with(env, name, json!({}))
}

/// What the library emits for the Workflow on the same nodes: `render_workflow` + `expand`.
fn library_children(env: &Env, wf: &WorkflowResource) -> Vec<Value> {
    let rules = nvcre_domain::default_rules().expect("rules");
    let value = json!({
        "apiVersion": nvcre_domain::crd::API_VERSION, "kind": "Workflow",
        "metadata": {"name": wf.name_any(), "namespace": env.ns},
        "spec": wf.spec,
    });
    let source = nvcre_engine::Source::new("workflow/nccl", value.to_string());
    let docs = nvcre_engine::parse_documents(&source).expect("parse");
    let nodes = nvcre_domain::nodes_from_documents(&env.node_docs()).expect("nodes");
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

/// A WorkloadRun becomes a Workflow, the Workflow one TrainingRuntime and one TrainJob per
/// 2-node group (the children `render_workflow` + `expand` produce for the same Workflow and
/// nodes), and completing the TrainJobs makes the run Succeeded with the succeeded-nodes
/// ConfigMap listing every node. Along the way: a spec update is refused with 422 (the CRD's
/// immutability rule), a controller restart duplicates no child, and every transition is an
/// Event.
pub async fn lifecycle(env: &Env) {
    let client = env.client.clone();
    let controller = env.start(env.config());

    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), &env.ns);
    let created = runs
        .create(&PostParams::default(), &run_manifest(env, "nccl"))
        .await
        .expect("create run");
    let run_uid = created.metadata.uid.clone().expect("uid");

    // The Workflow, controlled by the run and labelled.
    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), &env.ns);
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
        ("WorkloadRun", "nccl", run_uid.as_str(), Some(true))
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
        ("nccl", env.ns.as_str(), Some("aws"), Some("h100"), Some(8))
    );

    // Each group's TrainingRuntime and TrainJob.
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &env.ns, &train_job_resource());
    let runtimes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &env.ns, &training_runtime_resource());
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
    let expected: Vec<Value> = library_children(env, &wf).iter().map(essentials).collect();
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
               "values": [env.node_name(0), env.node_name(1)]})
    );
    assert_eq!(
        hostnames("nccl-group-1"),
        json!({"key": "kubernetes.io/hostname", "operator": "In",
               "values": [env.node_name(2), env.node_name(3)]})
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
    controller.stop().await.expect("graceful stop");
    let controller = env.start(env.config());

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
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let cm = eventually("the succeeded-nodes ConfigMap", || async {
        cms.get_opt("nccl-succeeded-nodes").await.expect("get cm")
    })
    .await;
    assert_eq!(
        serde_json::to_value(&cm.data).expect("data"),
        json!({"nodes": (0..4).map(|i| env.node_name(i)).collect::<Vec<_>>().join(",")})
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

    // The transitions were reported as Events on the run.
    let events = eventually("the run's Events", || async {
        let e = env.events_about("WorkloadRun", "nccl").await;
        (e.len() >= 2).then_some(e)
    })
    .await;
    assert_eq!(
        events
            .iter()
            .map(|(t, r, n, _)| (t.as_str(), r.as_str(), n.as_str()))
            .collect::<Vec<_>>(),
        [
            ("Normal", "WorkflowCreated", "Workflow nccl created"),
            (
                "Normal",
                "WorkflowSucceeded",
                "Workflow completed successfully"
            ),
        ]
    );
    let wf_events = env.events_about("Workflow", "nccl").await;
    assert_eq!(
        wf_events
            .iter()
            .map(|(t, r, n, _)| (t.as_str(), r.as_str(), n.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                "Normal",
                "GroupsPartitioned",
                "Discovered 4 nodes, partitioned into 2 groups (2 nodes/job)"
            ),
            (
                "Normal",
                "JobCompleted",
                "All 1 iterations completed successfully"
            ),
        ]
    );

    controller.stop().await.expect("graceful stop");
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("nvcre-controller")
        .await
        .expect("lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

fn elect(env: &Env, identity: &str) -> Config {
    Config {
        leader_election: Some(LeaderElection {
            lease_name: "nvcre-controller".into(),
            namespace: env.ns.clone(),
            identity: identity.into(),
            duration_secs: 3,
        }),
        ..env.config()
    }
}

/// Creates the run `name` and waits for its Workflow and `workflowRef`.
async fn create_and_wait(env: &Env, name: &str) {
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    runs.create(&PostParams::default(), &run_manifest(env, name))
        .await
        .expect("create run");
    eventually(&format!("{name}'s workflowRef"), || async {
        runs.get(name)
            .await
            .expect("run")
            .status
            .and_then(|s| s.workflow_ref)
    })
    .await;
}

/// The reporting instances of the Events about run `name` (waits for at least one).
async fn reporters(env: &Env, name: &str) -> Vec<String> {
    let events = eventually(&format!("an Event about {name}"), || async {
        let e = env.events_about("WorkloadRun", name).await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    let mut who: Vec<String> = events.into_iter().map(|e| e.3).collect();
    who.dedup();
    who
}

const RUN_RECONCILES: &str = "nvcre_reconciles_total{controller=\"workloadrun\"}";

/// Two replicas with Lease leader election: only the holder reconciles (its Events, its
/// reconcile counter; the standby's stays at zero while it serves `/readyz`). A graceful stop
/// releases the Lease and the standby takes over at once; a crash (no release) hands over
/// when the Lease expires. No run is ever processed twice into duplicates.
pub async fn leader_election(env: &Env) {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let a = env.start(elect(env, "replica-a"));
    eventually("replica-a to hold the lease", || async {
        holder(&leases).await.filter(|h| h == "replica-a")
    })
    .await;
    let b = env.start(elect(env, "replica-b"));
    eventually("the standby to be ready", || async {
        b.get("/readyz").await.filter(|(code, _)| *code == 200)
    })
    .await;

    create_and_wait(env, "first").await;
    assert_eq!(reporters(env, "first").await, ["replica-a"]);
    // The counter counts a reconcile once it returns, just after its Event is published.
    eventually("replica-a's reconcile counter", || async {
        (a.metric(RUN_RECONCILES).await >= 1.0).then_some(())
    })
    .await;
    assert_eq!(b.metric(RUN_RECONCILES).await, 0.0);
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-a"));

    // A graceful stop releases the Lease: the standby takes over.
    a.stop().await.expect("graceful stop");
    eventually("replica-b to take over", || async {
        holder(&leases).await.filter(|h| h == "replica-b")
    })
    .await;
    create_and_wait(env, "second").await;
    assert_eq!(reporters(env, "second").await, ["replica-b"]);
    eventually("replica-b's reconcile counter", || async {
        (b.metric(RUN_RECONCILES).await >= 1.0).then_some(())
    })
    .await;

    // A crash releases nothing: the next standby takes over once the Lease expires.
    let c = env.start(elect(env, "replica-c"));
    eventually("the new standby to be ready", || async {
        c.get("/readyz").await.filter(|(code, _)| *code == 200)
    })
    .await;
    assert_eq!(c.metric(RUN_RECONCILES).await, 0.0);
    b.crash();
    eventually("replica-c to take over after the lease expired", || async {
        holder(&leases).await.filter(|h| h == "replica-c")
    })
    .await;
    create_and_wait(env, "third").await;
    assert_eq!(reporters(env, "third").await, ["replica-c"]);

    let workflows: Api<WorkflowResource> = Api::namespaced(env.client.clone(), &env.ns);
    let mut names: Vec<String> = workflows
        .list(&ListParams::default())
        .await
        .expect("workflows")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    assert_eq!(names, ["first", "second", "third"]);
    c.stop().await.expect("graceful stop");
    assert_eq!(holder(&leases).await, None, "released on shutdown");
}

/// A gang queue label an AWS override contradicts: the build fails with the CLI's conflict
/// text (`Failed`/`BuildFailed`, a Warning Event with the same message) and nothing is created.
pub async fn conflicting_override(env: &Env) {
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    let run = run_with(
        env,
        "conflict",
        json!({
            "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "team-a"},
            "overrides": [{
                "when": {"platform": {"equals": "aws"}},
                "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "team-b"}}}}
            }]
        }),
    );
    runs.create(&PostParams::default(), &run)
        .await
        .expect("create run");
    let status = eventually("the run to fail", || async {
        runs.get("conflict").await.expect("run").status.filter(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Failed" && c.status == "True")
        })
    })
    .await;
    let message = "workloadrun conflict: spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\"";
    // The same text as the library call `nvcre-policy render --nodes-file` makes.
    let doc = json!({"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
                     "metadata": {"name": "conflict", "namespace": env.ns}, "spec": run.spec});
    let source = nvcre_engine::Source::new("conflict.yaml", doc.to_string());
    let docs = nvcre_engine::parse_documents(&source).expect("parse");
    let nodes = nvcre_domain::nodes_from_documents(&env.node_docs()).expect("nodes");
    let cli = nvcre_domain::render_workload_run(
        &nvcre_domain::default_rules().expect("rules"),
        &docs[0],
        &RenderRequest {
            nodes: Some(Arc::new(nodes)),
            ..RenderRequest::default()
        },
    )
    .expect_err("the library refuses it too");
    assert_eq!(format!("workloadrun conflict: {cli}"), message);
    let brief: Vec<(String, String, String, String)> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect();
    let c = |t: &str, s: &str, r: &str, m: &str| (t.into(), s.into(), r.into(), m.into());
    assert_eq!(
        brief,
        vec![
            c("InProgress", "False", "Superseded", ""),
            c("Succeeded", "False", "Superseded", ""),
            c("Failed", "True", "BuildFailed", message),
        ]
    );
    assert_eq!(
        (status.phase.as_deref(), status.workflow_ref),
        (Some("Failed"), None)
    );
    let events = eventually("the BuildFailed Event", || async {
        let e = env.events_about("WorkloadRun", "conflict").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(
        events
            .iter()
            .map(|(t, r, n, _)| (t.as_str(), r.as_str(), n.as_str()))
            .collect::<Vec<_>>(),
        [("Warning", "BuildFailed", message)]
    );
    // Nothing was created: no Workflow, no TrainingRuntime, no TrainJob.
    let workflows: Api<WorkflowResource> = Api::namespaced(env.client.clone(), &env.ns);
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    let runtimes: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &training_runtime_resource());
    let lp = ListParams::default();
    assert_eq!(
        (
            workflows.list(&lp).await.expect("workflows").items.len(),
            jobs.list(&lp).await.expect("jobs").items.len(),
            runtimes.list(&lp).await.expect("runtimes").items.len(),
        ),
        (0, 0, 0)
    );
    controller.stop().await.expect("graceful stop");
}

/// Every rule file of the repository's `rules/` (outside `tests/`), flattened to
/// `<dir>-<file>` keys as the `nvcre-rules` ConfigMap holds them.
fn rule_files() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).expect("rules dir").flatten() {
        let name = dir.file_name().to_string_lossy().to_string();
        if name == "tests" || !dir.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            let file = f.file_name().to_string_lossy().to_string();
            if file.ends_with(".yaml") {
                out.push((
                    format!("{name}-{file}"),
                    std::fs::read_to_string(f.path()).expect("read"),
                ));
            }
        }
    }
    out.sort();
    out
}

/// Writes a new `..<version>` directory and atomically repoints `..data` at it, as the kubelet
/// does for a ConfigMap volume; the key symlinks (`<key>` → `..data/<key>`) are made once.
fn publish(root: &std::path::Path, version: &str, files: &[(String, String)]) {
    use std::os::unix::fs::symlink;
    let dir = root.join(format!("..{version}"));
    std::fs::create_dir(&dir).expect("version dir");
    for (k, v) in files {
        std::fs::write(dir.join(k), v).expect("write");
    }
    let tmp = root.join("..data_tmp");
    symlink(format!("..{version}"), &tmp).expect("symlink");
    std::fs::rename(&tmp, root.join("..data")).expect("swap");
    for (k, _) in files {
        let link = root.join(k);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(std::path::PathBuf::from("..data").join(k), &link).expect("key link");
        }
    }
}

/// `files` with `from` replaced by `to` (once) in `key`.
fn edit(files: &[(String, String)], key: &str, from: &str, to: &str) -> Vec<(String, String)> {
    let mut out = files.to_vec();
    let (_, text) = out.iter_mut().find(|(k, _)| k == key).expect("rule file");
    assert!(text.contains(from), "{key} holds {from:?}");
    *text = text.replacen(from, to, 1);
    out
}

/// The trainer args of run `name`'s Workflow (once it exists), joined by spaces (the AWS
/// preCommand wraps the mpirun line in one `sh -c` script whose words are quoted).
async fn workflow_args(env: &Env, name: &str) -> String {
    let workflows: Api<WorkflowResource> = Api::namespaced(env.client.clone(), &env.ns);
    let wf = eventually(&format!("{name}'s Workflow"), || async {
        workflows.get_opt(name).await.expect("workflow")
    })
    .await;
    let spec = serde_json::to_value(&wf.spec).expect("spec");
    let args: Vec<String> = serde_json::from_value(
        spec.pointer("/jobTemplate/spec/workload/trainJob/trainer/args")
            .cloned()
            .unwrap_or_default(),
    )
    .expect("args");
    args.join(" ")
}

const DEBUG_INFO: &str = "'-x' 'NCCL_DEBUG=INFO'";
const DEBUG_WARN: &str = "'-x' 'NCCL_DEBUG=WARN'";

const RELOAD_FAILURES: &str = "nvcre_rules_reload_failures_total";
const RELOADS: &str = "nvcre_rules_reloads_total";

/// Rules from a directory in the kubelet's ConfigMap layout. An edit that also breaks a pack is
/// refused whole: runs created afterwards still render with the last good rules, and the
/// refusal is reported (`nvcre_rules_reload_failures_total`, the `/readyz` detail, a Warning
/// Event on the rules ConfigMap). Fixing the pack puts the edit in force for later runs.
pub async fn bad_rule_edit(env: &Env) {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = rule_files();
    publish(dir.path(), "v1", &good);
    let controller = env.start(Config {
        rules: RulesSource::Dir(dir.path().to_path_buf()),
        reload_interval: std::time::Duration::from_millis(200),
        rules_config_map: Some(ConfigMapRef {
            namespace: env.ns.clone(),
            name: "nvcre-rules".into(),
        }),
        ..env.config()
    });
    create_and_wait(env, "before").await;
    let args = workflow_args(env, "before").await;
    assert!(args.contains(DEBUG_INFO), "{args}");

    // The edit (NCCL_DEBUG=WARN) and a pack that no longer compiles, in one update.
    let edited = edit(
        &good,
        "defaults-nccl-env.yaml",
        "{id: NCCL_DEBUG, name: NCCL_DEBUG, value: INFO}",
        "{id: NCCL_DEBUG, name: NCCL_DEBUG, value: WARN}",
    );
    let broken = edit(
        &edited,
        "admission-workloadrun.yaml",
        "expression: ",
        "expression: this is not CEL ((( ",
    );
    publish(dir.path(), "v2", &broken);
    eventually("the refusal to be counted", || async {
        (controller.metric(RELOAD_FAILURES).await == 1.0).then_some(())
    })
    .await;
    let (code, readyz) = controller.get("/readyz").await.expect("readyz");
    assert_eq!(code, 200);
    assert!(
        readyz.starts_with("ready\nrules reload refused, last good set in force: ")
            && readyz.contains("admission-workloadrun.yaml"),
        "{readyz}"
    );
    create_and_wait(env, "during").await;
    let args = workflow_args(env, "during").await;
    assert!(args.contains(DEBUG_INFO), "{args}");
    assert!(!args.contains(DEBUG_WARN), "{args}");
    let events = eventually("the refusal Event", || async {
        let e = env.events_about("ConfigMap", "nvcre-rules").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    let (type_, reason, note, _) = &events[0];
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("Warning", "RulesReloadRefused")
    );
    assert!(
        note.starts_with("rules reload refused, last good set in force: ")
            && note.contains("admission-workloadrun.yaml"),
        "{note}"
    );
    assert_eq!(controller.metric(RELOADS).await, 0.0);

    // The pack fixed: the edit is in force for the next run.
    publish(dir.path(), "v3", &edited);
    eventually("the reload", || async {
        (controller.metric(RELOADS).await == 1.0).then_some(())
    })
    .await;
    assert_eq!(
        controller.get("/readyz").await,
        Some((200, "ready\n".to_string()))
    );
    create_and_wait(env, "after").await;
    let args = workflow_args(env, "after").await;
    assert!(args.contains(DEBUG_WARN), "{args}");
    let reasons: Vec<String> = env
        .events_about("ConfigMap", "nvcre-rules")
        .await
        .into_iter()
        .map(|e| e.1)
        .collect();
    // (sorted) one refusal, then one reload
    assert_eq!(reasons, ["RulesReloaded", "RulesReloadRefused"]);
    assert_eq!(controller.metric(RELOAD_FAILURES).await, 1.0);
    controller.stop().await.expect("graceful stop");
}

/// A TrainJob of the deterministic name that another owner controls is never adopted nor
/// overwritten: the Workflow fails with `JobNameCollision` (a Warning Event says why), the run
/// mirrors it, and the other TrainJob stays as it was.
pub async fn foreign_train_job(env: &Env) {
    let client = env.client.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "someone-else"}})).expect("configmap");
    let owner = cms
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &env.ns, &train_job_resource());
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "nccl-group-0", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else",
            "uid": owner.metadata.uid, "controller": true}]},
        "spec": {"runtimeRef": {"name": "theirs"}}
    }))
    .expect("trainjob");
    jobs.create(&PostParams::default(), &foreign)
        .await
        .expect("foreign trainjob");

    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), &env.ns);
    runs.create(&PostParams::default(), &run_manifest(env, "nccl"))
        .await
        .expect("create run");
    let message = format!(
        "TrainJob \"nccl-group-0\" already exists in namespace \"{}\" and is not controlled by Workflow \"nccl\"; refusing to adopt it",
        env.ns
    );
    let status = eventually("the run to fail", || async {
        runs.get("nccl").await.expect("run").status.filter(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Failed" && c.status == "True")
        })
    })
    .await;
    let failed = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .expect("Failed");
    assert_eq!(
        (failed.reason.as_str(), failed.message.as_str()),
        ("WorkflowFailed", message.as_str())
    );
    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), &env.ns);
    let wf = workflows.get("nccl").await.expect("workflow");
    let wf_failed = wf
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Failed"))
        .expect("Workflow Failed");
    assert_eq!(
        (wf_failed.reason.as_str(), wf_failed.message.as_str()),
        ("JobNameCollision", message.as_str())
    );
    let events = eventually("the collision Event", || async {
        let e = env.events_about("Workflow", "nccl").await;
        e.iter().any(|e| e.1 == "JobNameCollision").then_some(e)
    })
    .await;
    // The only transition: no group was recorded as started. Without leader election the
    // reporting instance is the controller's name.
    assert_eq!(
        events,
        [(
            "Warning".to_string(),
            "JobNameCollision".to_string(),
            message.clone(),
            "nvcre-controller".to_string()
        )]
    );
    // The other TrainJob is untouched: same owner, same spec, no second group started.
    let theirs = jobs.get("nccl-group-0").await.expect("foreign job");
    assert_eq!(
        (
            theirs.owner_references()[0].name.as_str(),
            theirs.data["spec"].clone()
        ),
        ("someone-else", json!({"runtimeRef": {"name": "theirs"}}))
    );
    assert_eq!(
        child_names(&jobs.list(&ListParams::default()).await.expect("jobs").items),
        ["nccl-group-0"]
    );
    controller.stop().await.expect("graceful stop");
}

/// The TrainJob `job` completes (its `Complete` condition, as the Trainer reports it).
async fn complete_job(env: &Env, job: &str) {
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let status = json!({"status": {"conditions": [{
        "type": "Complete", "status": "True", "reason": "JobsCompleted",
        "message": "jobs completed", "lastTransitionTime": now}]}});
    jobs.patch_status(job, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("complete");
}

/// `(name, phase, reason, message)` of each group of Workflow `name`, once `ready` holds.
async fn groups_when(
    env: &Env,
    name: &str,
    what: &str,
    ready: impl Fn(&[nvcre_domain::crd::GroupStatus]) -> bool,
) -> Vec<(String, String, Option<String>, Option<String>)> {
    let workflows: Api<WorkflowResource> = Api::namespaced(env.client.clone(), &env.ns);
    eventually(what, || async {
        let wf = workflows.get_opt(name).await.expect("get workflow")?;
        let groups = wf.status?.orchestration?.groups;
        ready(&groups).then(|| {
            groups
                .into_iter()
                .map(|g| (g.name, g.phase, g.reason, g.message))
                .collect()
        })
    })
    .await
}

/// `(reason, message)` of the run's True `condition`, once it is True.
async fn run_condition(env: &Env, name: &str, condition: &str) -> (String, String) {
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    eventually(&format!("the run {condition}"), || async {
        let run = runs.get(name).await.expect("run");
        run.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == condition && c.status == "True")
            .map(|c| (c.reason, c.message))
    })
    .await
}

/// The `nodes` of the node result ConfigMap `name`.
async fn node_results(env: &Env, name: &str) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    cms.get(name)
        .await
        .expect("node results")
        .data
        .and_then(|d| d.get("nodes").cloned())
        .expect("nodes key")
}

/// A TrainJob deleted under a running group fails the group with `JobDeleted` instead of
/// leaving it Running for ever: the other group finishes and the run fails, the deleted
/// group's nodes listed as failed.
pub async fn deleted_train_job(env: &Env) {
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    runs.create(&PostParams::default(), &run_manifest(env, "nccl"))
        .await
        .expect("create run");
    // Both groups recorded as running (before that, the TrainJobs may exist unrecorded).
    groups_when(env, "nccl", "both groups running", |g| {
        g.iter().all(|g| g.phase == "Running")
    })
    .await;
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    jobs.delete("nccl-group-0", &kube::api::DeleteParams::background())
        .await
        .expect("delete");
    let deleted = "TrainJob nccl-group-0 was deleted before its group finished";
    let groups = groups_when(env, "nccl", "group-0 to fail", |g| g[0].phase == "Failed").await;
    assert_eq!(
        groups,
        [
            (
                "group-0".to_string(),
                "Failed".to_string(),
                Some("JobDeleted".to_string()),
                Some(deleted.to_string())
            ),
            ("group-1".to_string(), "Running".to_string(), None, None)
        ]
    );
    complete_job(env, "nccl-group-1").await;
    assert_eq!(
        run_condition(env, "nccl", "Failed").await,
        (
            "WorkflowFailed".to_string(),
            "1 groups failed across 1 iterations".to_string()
        )
    );
    assert_eq!(
        node_results(env, "nccl-failed-nodes").await,
        format!(
            "{0}: WorkloadFailed: {deleted}\n{1}: WorkloadFailed: {deleted}",
            env.node_name(0),
            env.node_name(1)
        )
    );
    assert_eq!(
        node_results(env, "nccl-succeeded-nodes").await,
        format!("{},{}", env.node_name(2), env.node_name(3))
    );
    controller.stop().await.expect("graceful stop");
}

/// Nodes removed and added while a run is under way, and a node cordoned after its group
/// finished, change nothing: the partition recorded at the start holds, the pending group
/// starts on its recorded nodes, and the run succeeds.
pub async fn nodes_change_mid_run(env: &Env) {
    use k8s_openapi::api::core::v1::Node;
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    runs.create(
        &PostParams::default(),
        &run_with(env, "nccl", json!({"orchestration": {"maxConcurrent": 1}})),
    )
    .await
    .expect("create run");
    // The partition is recorded: group-0 runs, group-1 waits.
    groups_when(env, "nccl", "group-0 running", |g| {
        g.iter()
            .map(|g| g.phase.as_str())
            .eq(["Running", "Pending"])
    })
    .await;
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    // group-1's last node is removed, and a node joins that sorts before group-1's (a new
    // partition would leave no group-1).
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .delete(&env.node_name(3), &kube::api::DeleteParams::default())
        .await
        .expect("delete node");
    let mut joined = env.node_docs()[0].clone();
    let name = format!("{}-00", env.id);
    joined["metadata"]["name"] = json!(name);
    joined["metadata"]["labels"]["kubernetes.io/hostname"] = json!(name);
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(joined).expect("node"),
        )
        .await
        .expect("join");

    complete_job(env, "nccl-group-0").await;
    groups_when(env, "nccl", "group-0 to succeed", |g| {
        g[0].phase == "Succeeded"
    })
    .await;
    // group-0's first node is cordoned once its group finished: a finished group's nodes are
    // not evaluated by the node health monitor.
    nodes
        .patch(
            &env.node_name(0),
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    let second = eventually("group-1's TrainJob", || async {
        jobs.get_opt("nccl-group-1").await.expect("get job")
    })
    .await;
    let recorded = format!("{},{}", env.node_name(2), env.node_name(3));
    assert_eq!(
        second
            .annotations()
            .get("nvcre.nvidia.com/group-nodes")
            .map(String::as_str),
        Some(recorded.as_str())
    );
    complete_job(env, "nccl-group-1").await;
    assert_eq!(
        run_condition(env, "nccl", "Succeeded").await,
        (
            "WorkflowSucceeded".to_string(),
            "Workflow completed successfully".to_string()
        )
    );
    assert_eq!(
        node_results(env, "nccl-succeeded-nodes").await,
        (0..4)
            .map(|i| env.node_name(i))
            .collect::<Vec<_>>()
            .join(",")
    );
    // Never failed on the way: the Workflow's only transitions.
    let events = eventually("the Workflow's Events", || async {
        let e = env.events_about("Workflow", "nccl").await;
        e.iter().any(|e| e.1 == "JobCompleted").then_some(e)
    })
    .await;
    assert_eq!(
        events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(),
        ["GroupsPartitioned", "JobCompleted"]
    );
    controller.stop().await.expect("graceful stop");
}

/// A name collision in the middle of a pass fails the Workflow and stops the TrainJob the pass
/// had already created; the node result ConfigMaps are written as at a normal end.
pub async fn collision_mid_pass(env: &Env) {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "someone-else"}})).expect("configmap");
    let owner = cms
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "nccl-group-1", "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else",
            "uid": owner.metadata.uid, "controller": true}]},
        "spec": {"runtimeRef": {"name": "theirs"}}
    }))
    .expect("trainjob");
    jobs.create(&PostParams::default(), &foreign)
        .await
        .expect("foreign trainjob");

    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    runs.create(&PostParams::default(), &run_manifest(env, "nccl"))
        .await
        .expect("create run");
    let (reason, _) = run_condition(env, "nccl", "Failed").await;
    assert_eq!(reason, "WorkflowFailed");
    let groups = groups_when(env, "nccl", "the stopped groups", |_| true).await;
    assert_eq!(
        groups,
        [
            (
                "group-0".to_string(),
                "Failed".to_string(),
                Some("WorkflowFailed".to_string()),
                Some("TrainJob nccl-group-0 deleted: the Workflow failed".to_string())
            ),
            ("group-1".to_string(), "Pending".to_string(), None, None)
        ]
    );
    // Only the other owner's TrainJob is left.
    let left = eventually("nccl-group-0 deleted", || async {
        let j = jobs.list(&ListParams::default()).await.expect("jobs").items;
        (j.len() == 1).then_some(j)
    })
    .await;
    assert_eq!(child_names(&left), ["nccl-group-1"]);
    // No node finished its test.
    assert_eq!(node_results(env, "nccl-succeeded-nodes").await, "");
    assert_eq!(node_results(env, "nccl-failed-nodes").await, "");
    controller.stop().await.expect("graceful stop");
}

/// The launcher pod of group `job`'s TrainJob, as JobSet labels it, with one container
/// `node`, in `phase`.
async fn launcher_pod(env: &Env, job: &str, phase: &str) {
    job_pod(env, job, "launcher", phase).await;
}

/// Pod 0 of replicatedJob `rj` of group `job`'s TrainJob (`<job>-<rj>-0-0`), as JobSet labels
/// it, with one container `node`, in `phase`.
async fn job_pod(env: &Env, job: &str, rj: &str, phase: &str) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let name = format!("{job}-{rj}-0-0");
    if pods.get_opt(&name).await.expect("get pod").is_none() {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "jobset.sigs.k8s.io/replicatedjob-name": rj,
                "batch.kubernetes.io/job-completion-index": "0"}},
            "spec": {"containers": [{"name": "node", "image": "nvcr.io/nvidia/pytorch:26.01-py3"}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }
    pods.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": phase}})),
    )
    .await
    .expect("pod status");
}

/// Both groups' TrainJobs complete now (their `rj` pods Succeeded, then the `Complete`
/// condition through /status, as the Trainer reports it); returns the condition's time.
async fn complete_jobs(env: &Env, rj: &str) -> String {
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    for job in ["nccl-group-0", "nccl-group-1"] {
        job_pod(env, job, rj, "Succeeded").await;
        let status = json!({"status": {"conditions": [{
            "type": "Complete", "status": "True", "reason": "JobsCompleted",
            "message": "jobs completed", "lastTransitionTime": now}]}});
        jobs.patch_status(job, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("complete");
    }
    now
}

/// The sample log lines of `rules/tests/log-profiles/data/<file>`.
fn sample_log(file: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../rules/tests/log-profiles/data")
        .join(file);
    std::fs::read_to_string(path)
        .expect("sample log")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Measurements end to end (fake server only: it serves the pod logs a test writes): a run
/// with `bandwidthMeasurement` and a `busBandwidthGBps` threshold gets one
/// BandwidthMeasurement per group's TrainJob; while the jobs run, the launcher logs give
/// provisional results and the bandwidth gauges; when they complete, the final read completes
/// each measurement, group 0 (the 16-rank H100 sample, peak 338.82 GB/s) fails the threshold and
/// group 1 (450 GB/s) meets it, so the Workflow fails with `JobValidationFailed` and the run
/// with `WorkflowValidationFailed` and `ValidationFailed=True/ThresholdViolation`; the failed
/// nodes ConfigMap names the violation.
pub async fn measured_thresholds(env: &Env) {
    let Some(fake) = env.fake.as_ref() else {
        println!("skipped: pod logs are served only by the fake API server");
        return;
    };
    let client = env.client.clone();
    // The pods exist before the jobs (names are deterministic), so the first sample finds them.
    for job in ["nccl-group-0", "nccl-group-1"] {
        launcher_pod(env, job, "Running").await;
    }
    let start = k8s_openapi::jiff::Timestamp::now();
    let stamped = |lines: Vec<String>| {
        lines
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let t = start
                    .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(
                        i64::try_from(i).unwrap_or(0) * 10,
                    ))
                    .expect("time");
                (t, l)
            })
            .collect::<Vec<_>>()
    };
    let mut slow = sample_log("nccl-h100-16rank.log");
    slow.push("rank0:530:530 [0] NCCL INFO Using network IB".into());
    fake.append_pod_log(&env.ns, "nccl-group-0-launcher-0-0", "node", stamped(slow));
    let fast = vec![
        "  8589934592    2147483648     float     sum      -1    47535  240.00  450.00      0    47743  239.00  449.00      0".to_string(),
        "rank0:530:530 [0] NCCL INFO Using network IB".to_string(),
    ];
    fake.append_pod_log(&env.ns, "nccl-group-1-launcher-0-0", "node", stamped(fast));

    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), &env.ns);
    let run = run_with(
        env,
        "nccl",
        json!({
            "bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce", "sampleInterval": "1s"},
            "thresholds": {"busBandwidthGBps": "value >= 400"}
        }),
    );
    runs.create(&PostParams::default(), &run)
        .await
        .expect("create run");

    // One BandwidthMeasurement per TrainJob, owned by the Workflow, provisional while running.
    let bms: Api<nvcre_domain::measure::BandwidthMeasurementResource> =
        Api::namespaced(client.clone(), &env.ns);
    let running = eventually("provisional bandwidth results", || async {
        let bm = bms
            .get_opt("nccl-group-0-bandwidth")
            .await
            .expect("get bm")?;
        bm.status
            .as_ref()
            .is_some_and(|s| !s.results.is_empty())
            .then_some(bm)
    })
    .await;
    assert_eq!(
        (
            running
                .spec
                .job_ref
                .as_ref()
                .map(|j| (j.kind.as_str(), j.name.as_str())),
            running.spec.log_profile_ref.as_str(),
            running.spec.test_type.as_deref(),
            running
                .labels()
                .get("nvcre.nvidia.com/job")
                .map(String::as_str),
            running
                .owner_references()
                .first()
                .map(|o| (o.kind.as_str(), o.name.as_str())),
        ),
        (
            Some(("TrainJob", "nccl-group-0")),
            "nccl-bandwidth",
            Some("all_reduce"),
            Some("nccl-group-0"),
            Some(("Workflow", "nccl")),
        )
    );
    let status = running.status.clone().expect("status");
    let measuring = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Measuring")
        .expect("Measuring");
    assert_eq!(
        (
            measuring.status.as_str(),
            measuring.reason.as_str(),
            measuring.message.as_str()
        ),
        (
            "True",
            "JobRunning",
            "Referenced Job is running, measurement in progress"
        )
    );
    assert_eq!(status.transport, ["IB"]);
    assert_eq!(
        status
            .results
            .iter()
            .map(|r| (r.size_bytes, r.bus_bw.as_str(), r.samples))
            .collect::<Vec<_>>(),
        [
            (8, "0.00", 1),
            (1_048_576, "9.68", 1),
            (134_217_728, "152.32", 1),
            (1_073_741_824, "297.86", 1),
            (2_147_483_648, "318.40", 1),
            (8_589_934_592, "338.82", 1),
        ]
    );
    let gauge = "nvcre_nccl_busbw_gbps{namespace=\"team-a\",measurement=\"nccl-group-0-bandwidth\",job=\"nccl-group-0\",workflow=\"nccl\",nccl_test=\"all_reduce\",message_size_bytes=\"8589934592\"}";
    let value = eventually("the bus bandwidth gauge", || async {
        let v = controller.metric(gauge).await;
        (v > 0.0).then_some(v)
    })
    .await;
    assert!((value - 338.82).abs() < 1e-9, "{value}");

    // The jobs complete: the final read completes each measurement; thresholds are judged.
    let now = complete_jobs(env, "launcher").await;
    let done = eventually("the run to fail its validation", || async {
        let r = runs.get("nccl").await.expect("get run");
        r.status.filter(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Failed" && c.status == "True")
        })
    })
    .await;
    let brief = |t: &str| {
        done.conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    assert_eq!(
        brief("Failed"),
        Some((
            "True".into(),
            "WorkflowValidationFailed".into(),
            "1 groups failed across 1 iterations".into()
        ))
    );
    assert_eq!(
        brief("ValidationFailed"),
        Some((
            "True".into(),
            "ThresholdViolation".into(),
            "One or more Jobs failed performance threshold validation".into()
        ))
    );
    let bm = bms.get("nccl-group-0-bandwidth").await.expect("bm");
    let s = bm.status.expect("status");
    let complete = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Complete")
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()));
    assert_eq!(complete, Some(("True", "JobSucceeded", "Job succeeded")));
    assert_eq!(s.results.last().map(|r| r.bus_bw.as_str()), Some("338.82"));
    assert_eq!(s.completion_time.as_deref(), Some(now.as_str()));

    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), &env.ns);
    let wf = workflows.get("nccl").await.expect("workflow");
    let groups: Vec<(String, String, Option<String>, Option<String>)> = wf
        .status
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
        .unwrap_or_default();
    let violation =
        "Threshold \"busBandwidthGBps\" violated: measured 338.8200, expression: value >= 400";
    assert_eq!(
        groups,
        [
            (
                "group-0".to_string(),
                "Failed".to_string(),
                Some("ThresholdViolated".to_string()),
                Some(violation.to_string())
            ),
            ("group-1".to_string(), "Succeeded".to_string(), None, None),
        ]
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    let failed = eventually("the failed-nodes ConfigMap", || async {
        cms.get_opt("nccl-failed-nodes").await.expect("get cm")
    })
    .await;
    assert_eq!(
        serde_json::to_value(&failed.data).expect("data"),
        json!({"nodes": format!(
            "{}: ThresholdViolation: {violation}\n{}: ThresholdViolation: {violation}",
            env.node_name(0),
            env.node_name(1)
        )})
    );
    // Completed measurements export no bandwidth gauge any more.
    // `eventually` fails the test when the gauge is still exported after its deadline.
    eventually("the gauge to be dropped", || async {
        (controller.metric(gauge).await == 0.0).then_some(())
    })
    .await;
    controller.stop().await.expect("graceful stop");
}

/// Goodput end to end (fake server only): a run with `goodputMeasurement` (Megatron-LM) and a
/// `goodputRatio` threshold gets one GoodputMeasurement per TrainJob; worker 0's log (the
/// full start, training, checkpoint sample) gives exactly the offline figures, the measurement
/// completes `JobSucceeded`, the threshold holds and the run succeeds.
pub async fn measured_goodput(env: &Env) {
    let Some(fake) = env.fake.as_ref() else {
        println!("skipped: pod logs are served only by the fake API server");
        return;
    };
    let client = env.client.clone();
    // The sample's own kubelet stamps become the served lines' stamps.
    let lines: Vec<(k8s_openapi::jiff::Timestamp, String)> =
        sample_log("megatron-n6-full-sequence.log")
            .into_iter()
            .filter_map(|l| {
                let (stamp, text) = l.split_once(' ')?;
                Some((stamp.parse().ok()?, text.to_string()))
            })
            .collect();
    for job in ["nccl-group-0", "nccl-group-1"] {
        job_pod(env, job, "node", "Running").await;
        fake.append_pod_log(&env.ns, &format!("{job}-node-0-0"), "node", lines.clone());
    }
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), &env.ns);
    let run = run_with(
        env,
        "nccl",
        json!({
            "goodputMeasurement": {"logProfileRef": "megatron-training", "sampleInterval": "1s"},
            "thresholds": {"goodputRatio": "value > 0.8"}
        }),
    );
    runs.create(&PostParams::default(), &run)
        .await
        .expect("create run");
    let gms: Api<nvcre_domain::measure::GoodputMeasurementResource> =
        Api::namespaced(client.clone(), &env.ns);
    let sampled = eventually("a provisional goodput", || async {
        let gm = gms.get_opt("nccl-group-0-goodput").await.expect("get gm")?;
        gm.status.filter(|s| s.result.is_some())
    })
    .await;
    assert_eq!(
        sampled
            .conditions
            .iter()
            .find(|c| c.type_ == "Measuring")
            .map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("True", "JobRunning"))
    );
    let ratio = "nvcre_goodput_ratio{namespace=\"team-a\",measurement=\"nccl-group-0-goodput\",job=\"nccl-group-0\",workflow=\"nccl\"}";
    let value = eventually("the goodput ratio gauge", || async {
        let v = controller.metric(ratio).await;
        (v > 0.0).then_some(v)
    })
    .await;
    assert!((value - 0.88558).abs() < 1e-6, "{value}");

    complete_jobs(env, "node").await;
    let done = eventually("the run to succeed", || async {
        let r = runs.get("nccl").await.expect("get run");
        r.status.filter(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Succeeded" && c.status == "True")
        })
    })
    .await;
    assert!(
        !done
            .conditions
            .iter()
            .any(|c| c.type_ == "ValidationFailed" && c.status == "True"),
        "{:?}",
        done.conditions
    );
    let gm = gms.get("nccl-group-1-goodput").await.expect("gm");
    let s = gm.status.expect("status");
    assert_eq!(
        (
            s.result.as_deref(),
            s.avg_step_time_sec.as_deref(),
            s.avg_tflops_per_gpu.as_deref(),
            s.checkpoint_save_time_sec.as_deref(),
            s.last_checkpoint_step,
        ),
        (
            Some("0.885580"),
            Some("132.563100"),
            Some("138.500000"),
            Some("361.446020"),
            100
        )
    );
    assert_eq!(
        s.conditions
            .iter()
            .map(|c| (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str()
            ))
            .collect::<Vec<_>>(),
        [
            (
                "Measuring",
                "False",
                "JobSucceeded",
                "Measurement completed"
            ),
            (
                "Complete",
                "True",
                "JobSucceeded",
                "Referenced Job completed successfully"
            ),
        ]
    );
    // Completion keeps only the ratio gauge.
    let step = "nvcre_goodput_avg_step_time_seconds{namespace=\"team-a\",measurement=\"nccl-group-0-goodput\",job=\"nccl-group-0\",workflow=\"nccl\"}";
    eventually("the operational gauges to be dropped", || async {
        (controller.metric(step).await == 0.0).then_some(())
    })
    .await;
    assert!((controller.metric(ratio).await - 0.88558).abs() < 1e-6);

    // Deleting the run deletes its measurements (owned by its Workflow): the kept ratio goes.
    runs.delete("nccl", &DeleteParams::background())
        .await
        .expect("delete run");
    eventually("the measurements to be deleted", || async {
        let left = gms.list(&ListParams::default()).await.expect("list gms");
        left.items.is_empty().then_some(())
    })
    .await;
    // `eventually` fails the test when the gauge is still exported after its deadline.
    eventually(
        "the ratio gauge of the deleted measurement to be dropped",
        || async { (controller.metric(ratio).await == 0.0).then_some(()) },
    )
    .await;
    controller.stop().await.expect("graceful stop");
}

/// A run cancelled while its BandwidthMeasurements sample (fake server only, for the pod logs):
/// the measurements are deleted with the run, and their gauges are dropped though they never
/// completed.
pub async fn deleted_measurement_gauges(env: &Env) {
    let Some(fake) = env.fake.as_ref() else {
        println!("skipped: pod logs are served only by the fake API server");
        return;
    };
    for job in ["nccl-group-0", "nccl-group-1"] {
        launcher_pod(env, job, "Running").await;
    }
    let line = "  8589934592    2147483648     float     sum      -1    47535  240.00  450.00      0    47743  239.00  449.00      0";
    fake.append_pod_log(
        &env.ns,
        "nccl-group-0-launcher-0-0",
        "node",
        vec![(k8s_openapi::jiff::Timestamp::now(), line.to_string())],
    );
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    let run = run_with(
        env,
        "nccl",
        json!({"bandwidthMeasurement": {"logProfileRef": "nccl-bandwidth", "testType": "all_reduce", "sampleInterval": "1s"}}),
    );
    runs.create(&PostParams::default(), &run)
        .await
        .expect("create run");
    let gauge = "nvcre_nccl_busbw_gbps{namespace=\"team-a\",measurement=\"nccl-group-0-bandwidth\",job=\"nccl-group-0\",workflow=\"nccl\",nccl_test=\"all_reduce\",message_size_bytes=\"8589934592\"}";
    let value = eventually("the bus bandwidth gauge", || async {
        let v = controller.metric(gauge).await;
        (v > 0.0).then_some(v)
    })
    .await;
    assert!((value - 450.0).abs() < 1e-9, "{value}");

    runs.delete("nccl", &DeleteParams::background())
        .await
        .expect("delete run");
    let bms: Api<nvcre_domain::measure::BandwidthMeasurementResource> =
        Api::namespaced(env.client.clone(), &env.ns);
    eventually("the measurements to be deleted", || async {
        let left = bms.list(&ListParams::default()).await.expect("list bms");
        left.items.is_empty().then_some(())
    })
    .await;
    // `eventually` fails the test when the gauge is still exported after its deadline.
    eventually(
        "the gauge of the deleted measurement to be dropped",
        || async { (controller.metric(gauge).await == 0.0).then_some(()) },
    )
    .await;
    controller.stop().await.expect("graceful stop");
}

/// A node cordoned while its group's TrainJob runs fails the group for hardware (the
/// WorkloadRun's default `node.spec.unschedulable == true`): the TrainJob is deleted, the other
/// group finishes, and the run fails with the hardware note; the cordoned node alone is in the
/// failed-nodes ConfigMap, and stays there once uncordoned.
pub async fn node_cordoned_mid_run(env: &Env) {
    use k8s_openapi::api::core::v1::Node;
    let controller = env.start(env.config());
    let runs: Api<WorkloadRunResource> = Api::namespaced(env.client.clone(), &env.ns);
    runs.create(&PostParams::default(), &run_manifest(env, "nccl"))
        .await
        .expect("create run");
    groups_when(env, "nccl", "both groups running", |g| {
        g.iter().all(|g| g.phase == "Running")
    })
    .await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let cordon = |on: bool| json!({"spec": {"unschedulable": on}});
    nodes
        .patch(
            &env.node_name(1),
            &PatchParams::default(),
            &Patch::Merge(&cordon(true)),
        )
        .await
        .expect("cordon");
    let hw = format!(
        "Hardware failure detected on node(s): [{}]",
        env.node_name(1)
    );
    let groups = groups_when(env, "nccl", "group-0 to fail", |g| g[0].phase == "Failed").await;
    assert_eq!(
        groups,
        [
            (
                "group-0".to_string(),
                "Failed".to_string(),
                Some("JobHardwareFailed".to_string()),
                Some(hw.clone())
            ),
            ("group-1".to_string(), "Running".to_string(), None, None)
        ]
    );
    let jobs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.ns, &train_job_resource());
    eventually("nccl-group-0 deleted", || async {
        jobs.get_opt("nccl-group-0")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    nodes
        .patch(
            &env.node_name(1),
            &PatchParams::default(),
            &Patch::Merge(&cordon(false)),
        )
        .await
        .expect("uncordon");
    complete_job(env, "nccl-group-1").await;
    assert_eq!(
        run_condition(env, "nccl", "Failed").await,
        (
            "WorkflowFailed".to_string(),
            "1 groups failed across 1 iterations; hardware failures occurred on one or more nodes"
                .to_string()
        )
    );
    let workflows: Api<WorkflowResource> = Api::namespaced(env.client.clone(), &env.ns);
    let wf = workflows.get("nccl").await.expect("workflow");
    let status = wf.status.expect("status");
    let failed = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Failed")
        .map(|c| (c.reason.as_str(), c.status.as_str()));
    assert_eq!(failed, Some(("JobHardwareFailed", "True")));
    assert_eq!(
        status
            .orchestration
            .expect("orchestration")
            .hardware_failed_nodes,
        [env.node_name(1)]
    );
    assert_eq!(
        node_results(env, "nccl-failed-nodes").await,
        format!(
            "{}: HardwareFailureDetected: Hardware failure detected by node health check",
            env.node_name(1)
        )
    );
    assert_eq!(
        node_results(env, "nccl-succeeded-nodes").await,
        format!("{},{}", env.node_name(2), env.node_name(3))
    );
    let events = eventually("the hardware Event", || async {
        let e = env.events_about("Workflow", "nccl").await;
        e.iter().any(|e| e.1 == "JobHardwareFailed").then_some(e)
    })
    .await;
    assert!(
        events.iter().any(|e| e.0 == "Warning"
            && e.1 == "HardwareFailureDetected"
            && e.2 == format!("TrainJob nccl-group-0 of group-0: {hw}")),
        "{events:?}"
    );
    controller.stop().await.expect("graceful stop");
}
