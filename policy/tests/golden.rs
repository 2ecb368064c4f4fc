//! Golden renders: one cell per platform × GPU architecture × framework that the platform
//! override table touches (render-pipeline.md §2). Each snapshot pins a digest of the rendered
//! Workflow — the trainer command line, the worker and launcher env in order, resources, claims,
//! tolerations, dependencies and orchestration — so a change to any of them shows as a reviewed
//! snapshot diff (`cargo insta review`).

use std::sync::Arc;

use nvcre_domain::{RenderRequest, default_rules, render_workload_run};
use nvcre_engine::{Source, parse_documents};
use serde_json::{Map, Value, json};

fn framework(kind: &str) -> Value {
    match kind {
        "mpi" => json!({"mpi": {
            "mpirunPath": "/usr/local/mpi/bin/mpirun",
            "binary": "/usr/local/bin/all_reduce_perf_mpi",
            "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
            "mpiArgs": ["--bind-to", "none"]
        }}),
        "torch" => json!({"torch": {"script": "/workspace/train.py", "args": ["--steps", "100"]}}),
        _ => json!({"exec": {"command": ["/bin/sh", "-c"], "args": ["nvidia-smi && sleep 10"]}}),
    }
}

fn run(framework_kind: &str, extra: Value) -> Value {
    let mut spec = json!({
        "image": "nvcr.io/nvidia/pytorch:26.01-py3",
        "framework": framework(framework_kind),
        "numNodes": 2,
        "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "q"}
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun", "metadata": {"name": "wr"}, "spec": spec})
}

fn render(platform: &str, arch: &str, doc: &Value) -> Value {
    let rules = default_rules().expect("rules");
    let text = serde_json::to_string(doc).expect("json");
    let source: Arc<Source> = Source::new("cell.yaml", text);
    let docs = parse_documents(&source).expect("parses");
    let req = RenderRequest {
        platform: Some(platform.to_string()),
        gpu_arch: Some(arch.to_string()),
        ..RenderRequest::default()
    };
    match render_workload_run(&rules, &docs[0], &req) {
        Ok(r) => r.workflow,
        Err(e) => panic!("render {platform}/{arch} failed: {e}"),
    }
}

fn env_lines(env: &Value) -> Value {
    Value::Array(
        env.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        let name = e["name"].as_str().unwrap_or("");
                        match e.get("value").and_then(Value::as_str) {
                            Some(v) => json!(format!("{name}={v}")),
                            None => json!(format!("{name} (valueFrom)")),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// The parts of a rendered Workflow that the override table changes.
fn digest(wf: &Value) -> Value {
    let trainer = &wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"];
    let mut d = Map::new();
    d.insert("trainer.command".into(), trainer["command"].clone());
    d.insert("trainer.args".into(), trainer["args"].clone());
    d.insert(
        "trainer.numProcPerNode".into(),
        trainer["numProcPerNode"].clone(),
    );
    if let Some(env) = trainer.get("env") {
        d.insert("trainer.env".into(), env_lines(env));
    }
    let mut deps = Vec::new();
    for dep in wf["spec"]["dependencies"].as_array().into_iter().flatten() {
        let id = format!(
            "{} {}/{}",
            dep["apiVersion"].as_str().unwrap_or(""),
            dep["kind"].as_str().unwrap_or(""),
            dep["metadata"]["name"].as_str().unwrap_or("")
        );
        if dep["kind"] == "TrainingRuntime" {
            for rj in dep["spec"]["template"]["spec"]["replicatedJobs"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let name = rj["name"].as_str().unwrap_or("");
                let pod = &rj["template"]["spec"]["template"]["spec"];
                let container = &pod["containers"][0];
                let mut j = Map::new();
                if let Some(a) = rj["template"]
                    .get("metadata")
                    .and_then(|m| m.get("annotations"))
                {
                    j.insert("annotations".into(), a.clone());
                }
                j.insert("env".into(), env_lines(&container["env"]));
                j.insert("resources".into(), container["resources"].clone());
                for key in ["resourceClaims", "tolerations", "schedulerName"] {
                    if let Some(v) = pod.get(key) {
                        j.insert(key.into(), v.clone());
                    }
                }
                d.insert(format!("runtime.{name}"), Value::Object(j));
            }
            deps.push(json!(id));
        } else {
            let mut body = dep.clone();
            if let Some(m) = body.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
                m.remove("metadata");
            }
            deps.push(json!({id: body}));
        }
    }
    d.insert("dependencies".into(), Value::Array(deps));
    d.insert("orchestration".into(), wf["spec"]["orchestration"].clone());
    Value::Object(d)
}

macro_rules! cell {
    ($name:ident, $platform:expr, $arch:expr, $fw:expr) => {
        cell!($name, $platform, $arch, $fw, json!({}));
    };
    ($name:ident, $platform:expr, $arch:expr, $fw:expr, $extra:expr) => {
        #[test]
        fn $name() {
            let wf = render($platform, $arch, &run($fw, $extra));
            insta::assert_yaml_snapshot!(stringify!($name), digest(&wf));
        }
    };
}

cell!(aws_h100_mpi, "aws", "h100", "mpi");
cell!(aws_h100_torch, "aws", "h100", "torch");
cell!(aws_h100_exec, "aws", "h100", "exec");
cell!(aws_gb200_mpi, "aws", "gb200", "mpi");
cell!(aws_gb200_torch, "aws", "gb200", "torch");
cell!(aws_gb300_mpi, "aws", "gb300", "mpi");
cell!(aws_gb300_torch, "aws", "gb300", "torch");
cell!(
    aws_gb300_mpi_user_env_wins_in_place,
    "aws",
    "gb300",
    "mpi",
    json!({"env": [{"name": "NCCL_SOCKET_IFNAME", "value": "eth1"}, {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]})
);
cell!(gcp_h100_mpi, "gcp", "h100", "mpi");
cell!(gcp_h100_torch, "gcp", "h100", "torch");
cell!(
    gcp_h100_torch_user_env_wins_in_place,
    "gcp",
    "h100",
    "torch",
    json!({"env": [{"name": "NCCL_DEBUG", "value": "WARN"}]})
);
cell!(gcp_gb200_mpi, "gcp", "gb200", "mpi");
cell!(gcp_gb300_torch, "gcp", "gb300", "torch");
cell!(azure_h100_mpi, "azure", "h100", "mpi");
cell!(
    azure_h100_mpi_no_nics,
    "azure",
    "h100",
    "mpi",
    json!({"mlnxPerNode": 0})
);
cell!(azure_gb200_torch, "azure", "gb200", "torch");
cell!(oci_gb300_mpi, "oci", "gb300", "mpi");
cell!(oci_gb200_torch, "oci", "gb200", "torch");
cell!(
    onprem_gb200_mpi_with_nic,
    "onprem",
    "gb200",
    "mpi",
    json!({"nicResourceName": "rdma/ib"})
);
cell!(onprem_gb300_torch_without_nic, "onprem", "gb300", "torch");
cell!(
    onprem_b200_mpi_with_nic,
    "onprem",
    "b200",
    "mpi",
    json!({"nicResourceName": "nvidia.com/mlnxnics"})
);
cell!(nscale_gb300_mpi, "nscale", "gb300", "mpi");
cell!(nscale_h100_torch, "nscale", "h100", "torch");
cell!(togetherai_h100_mpi, "togetherai", "h100", "mpi");
cell!(togetherai_h100_torch, "togetherai", "h100", "torch");
cell!(mistral_gb300_mpi, "mistral", "gb300", "mpi");
cell!(mistral_gb300_torch, "mistral", "gb300", "torch");
cell!(forge_h100_mpi, "forge", "h100", "mpi");
cell!(
    aws_gb200_mpi_intra_rack,
    "aws",
    "gb200",
    "mpi",
    json!({"orchestration": {"testScale": "intra-rack", "repeatCount": 3, "maxConcurrent": 2, "timeoutPerJob": "90m"}})
);
