//! Fixtures shared by the controller tests.
#![allow(dead_code)]

use std::sync::Arc;

use kube::api::ObjectMeta;
use nvcre_domain::Node;
use nvcre_domain::crd::{WorkloadRunResource, WorkloadRunSpec};
use serde_json::{Value, json};

pub const NOW: &str = "2026-01-01T00:00:00Z";

pub fn run(name: &str, spec_yaml: &str) -> WorkloadRunResource {
    let spec: WorkloadRunSpec = serde_saphyr::from_str(spec_yaml).expect("spec");
    let mut r = WorkloadRunResource::new(name, spec);
    r.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("team-a".into()),
        uid: Some("run-uid".into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    r
}

pub const MPI_SPEC: &str = "
image: nvcr.io/nvidia/pytorch:26.01-py3
numNodes: 2
framework:
  mpi: {binary: /usr/local/bin/all_reduce_perf_mpi, mpirunPath: /usr/local/mpi/bin/mpirun}
";

pub fn node_doc(name: &str, product: &str, provider: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "kubernetes.io/hostname": name,
        }},
        "spec": {"providerID": provider},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    })
}

/// `count` AWS H100 nodes `node-0..`.
pub fn aws_h100(count: usize) -> Arc<Vec<Node>> {
    let docs: Vec<Value> = (0..count)
        .map(|i| {
            node_doc(
                &format!("node-{i}"),
                "NVIDIA-H100-80GB-HBM3",
                &format!("aws:///us-east-1a/i-{i}"),
            )
        })
        .collect();
    Arc::new(nvcre_domain::nodes_from_documents(&docs).expect("nodes"))
}

pub fn rules() -> nvcre_engine::RuleSet {
    nvcre_domain::default_rules().expect("rules")
}

/// `(type, status, reason, message)` of every condition.
pub fn conds(c: &[nvcre_domain::crd::Condition]) -> Vec<(String, String, String, String)> {
    c.iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect()
}

pub fn c(t: &str, s: &str, r: &str, m: &str) -> (String, String, String, String) {
    (t.into(), s.into(), r.into(), m.into())
}
