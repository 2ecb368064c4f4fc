//! Nodes and Workflows the placement tests share.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{CONTROLLER_MANAGER, GPU_RESOURCE, Group, Placement};
use crate::api::{TargetSpec, Workflow};
use crate::nodes::{GPU_PRESENT_LABEL, GPU_PRODUCT_LABEL, Node};

pub(super) fn gpu_node(name: &str, product: &str) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(GPU_PRESENT_LABEL.to_string(), "true".to_string());
    labels.insert(GPU_PRODUCT_LABEL.to_string(), product.to_string());
    Node {
        name: name.to_string(),
        labels,
        ..Node::default()
    }
}

pub(super) fn fleet(n: usize, product: &str) -> Vec<Node> {
    (0..n)
        .map(|i| gpu_node(&format!("node-{i}"), product))
        .collect()
}

pub(super) fn h100(n: usize) -> Vec<Node> {
    fleet(n, "NVIDIA-H100-80GB-HBM3")
}

pub(super) fn runtime(name: &str) -> Value {
    json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": format!("{name}-runtime"), "labels": {"app": name}},
        "spec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"metadata": {"labels": {"app": name}},
             "spec": {"template": {"spec": {"containers": [{"name": "node",
               "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}}]}}}}},
            {"name": "launcher", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}
        ]}}}
    })
}

/// An MPI Workflow named `name` with `numNodes` and the given orchestration.
pub(super) fn mpi_workflow(name: &str, num_nodes: i64, orchestration: Value) -> Workflow {
    serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {
                    "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                    "workload": {"trainJob": {
                        "runtimeRef": {"name": format!("{name}-runtime"), "kind": "TrainingRuntime"},
                        "trainer": {"numNodes": num_nodes, "numProcPerNode": 8},
                        "runtimePatches": [{"manager": CONTROLLER_MANAGER,
                            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}, {"name": "launcher"}]}}}}]
                    }}
                }
            },
            "orchestration": orchestration,
            "dependencies": [runtime(name)]
        }
    }))
    .unwrap()
}

pub(super) fn group_names(p: &Placement) -> Vec<&str> {
    p.groups.iter().map(|g| g.name.as_str()).collect()
}

pub(super) fn train_job(g: &Group) -> &Value {
    g.manifests.last().unwrap()
}

pub(super) fn patch_job<'v>(tj: &'v Value, name: &str) -> &'v Value {
    tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .unwrap()
}

pub(super) fn match_expressions<'v>(tj: &'v Value, job: &str) -> &'v Vec<Value> {
    patch_job(tj, job)["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
        .as_array()
        .unwrap()
}

pub(super) fn racked(spec: &[(&str, &str)]) -> Vec<Node> {
    spec.iter()
        .map(|(name, rack)| {
            let mut n = gpu_node(name, "NVIDIA-GB200");
            n.labels
                .insert("topology.kubernetes.io/rack".into(), rack.to_string());
            n
        })
        .collect()
}

pub(super) fn summary(groups: &[Group]) -> Vec<(String, Vec<String>, Vec<String>, bool)> {
    groups
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                g.nodes.clone(),
                g.domains.clone(),
                g.overflow,
            )
        })
        .collect()
}

pub(super) fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

pub(super) fn mixed_arch() -> Vec<Node> {
    let mut nodes = h100(6);
    nodes.push(gpu_node("node-6", "NVIDIA-A100-SXM4-40GB"));
    nodes.push(gpu_node("node-7", "NVIDIA-A100-SXM4-40GB"));
    nodes
}

pub(super) fn with_allocatable(mut nodes: Vec<Node>, gpus: &[(usize, &str)]) -> Vec<Node> {
    for (i, q) in gpus {
        nodes[*i]
            .allocatable
            .insert(GPU_RESOURCE.into(), q.to_string());
    }
    nodes
}

// ---- dependencies per group ---------------------------------------------------------

pub(super) fn gb200_workflow(num_nodes: i64) -> Workflow {
    let mut rt = runtime("wf");
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["resourceClaims"] =
        json!([{"name": "compute-domain", "resourceClaimTemplateName": "wf-channel"}]);
    let cd = json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "wf-compute-domain", "labels": {"app": "wf"}},
        "spec": {"numNodes": 4, "channel": {"allocationMode": "Single", "resourceClaimTemplate": {"name": "wf-channel"}}}
    });
    let mut wf = mpi_workflow("wf", num_nodes, json!({}));
    wf.spec.dependencies = vec![
        rt,
        cd,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated"}, "data": {"k": "v"}}),
    ];
    wf
}

pub(super) fn wf_with(job_template: Value, deps: Value) -> Workflow {
    serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
        "spec": {"jobTemplate": job_template, "dependencies": deps}
    }))
    .unwrap()
}

pub(super) fn tspec(v: Value) -> Option<TargetSpec> {
    Some(serde_json::from_value(v).unwrap())
}

/// A fixture scheduling policy (not the shipped `scheduling` table): MPI jobs tolerate `pinned`
/// or `unpinned`.
pub(super) fn fixture_scheduling() -> super::SchedulingPolicy {
    let t = |k: &str| vec![serde_json::json!({"key": k, "operator": "Exists"})];
    super::SchedulingPolicy::new()
        .with(super::PlacementMode::Pinned, true, t("pinned"))
        .with(super::PlacementMode::Unpinned, true, t("unpinned"))
}

/// The fixture placement policy: [`fixture_scheduling`] and the fixture GPU product rules.
pub(super) fn fixture_policy() -> super::PlacementPolicy {
    super::PlacementPolicy {
        scheduling: fixture_scheduling(),
        gpu_products: std::sync::Arc::new(crate::nodes::fixture_gpu_products()),
        gang_defaults: crate::detect::GangDefaults {
            queue: "default-queue".into(),
            queue_label_key: "kai.scheduler/queue".into(),
        },
    }
}
