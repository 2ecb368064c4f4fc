//! Golden renders, end to end: the whole `render` output of the binary, snapshotted.
//!
//! One cell per platform × GPU architecture × framework that the platform override table
//! touches, the shipped examples, and `render --expand` over the example node files. Every byte
//! of the output is pinned, so any change to a rule value (an NCCL env default, a preCommand
//! line, a toleration) shows as a reviewed snapshot diff (`cargo insta review`), never as a Rust
//! test to edit.

use super::util::*;

use serde_json::{Value, json};

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

/// A WorkloadRun of `framework_kind` with the fields of `extra` added to its spec.
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

/// Runs the binary with `args`, expecting success; returns stdout.
fn stdout_of(args: &[&str], stdin: Option<String>) -> String {
    let mut cmd = bin();
    cmd.args(args);
    if let Some(s) = stdin {
        cmd.write_stdin(s);
    }
    let out = cmd.output().expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn example(rel: &str) -> String {
    root().join(rel).display().to_string()
}

macro_rules! cell {
    ($name:ident, $platform:expr, $arch:expr, $fw:expr) => {
        cell!($name, $platform, $arch, $fw, json!({}));
    };
    ($name:ident, $platform:expr, $arch:expr, $fw:expr, $extra:expr) => {
        #[test]
        fn $name() {
            let doc = serde_json::to_string(&run($fw, $extra)).expect("json");
            let out = stdout_of(
                &["render", "--platform", $platform, "--gpu-arch", $arch, "-"],
                Some(doc),
            );
            insta::assert_snapshot!(stringify!($name), out);
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
cell!(
    aws_h100_mpi_intra_node,
    "aws",
    "h100",
    "mpi",
    json!({"orchestration": {"testScale": "intra-node"}})
);
cell!(
    aws_h100_mpi_unpinned,
    "aws",
    "h100",
    "mpi",
    json!({"orchestration": {"placement": "Unpinned"}})
);
cell!(
    aws_h100_mpi_thresholds,
    "aws",
    "h100",
    "mpi",
    json!({"thresholds": {"busBandwidthGBps": "value >= 900"}})
);
cell!(
    aws_h100_mpi_no_gang,
    "aws",
    "h100",
    "mpi",
    json!({"gangScheduler": null})
);

/// Every shipped example, rendered for AWS H100.
#[test]
fn examples() {
    let dir = root().join("examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".yaml") && n != "override-rejected.yaml")
        .collect();
    names.sort();
    for name in names {
        let file = example(&format!("examples/{name}"));
        let stem = name.trim_end_matches(".yaml");
        insta::assert_snapshot!(
            format!("example_{stem}_aws_h100"),
            stdout_of(
                &["render", "--platform", "aws", "--gpu-arch", "h100", &file],
                None
            )
        );
    }
}

/// `render --expand` over the example fleets: every group's dependencies and TrainJob.
#[test]
fn expand_over_example_fleets() {
    for (fleet, run) in [
        ("aws-h100-18", "env-nccl-debug"),
        ("aws-h100-18", "unpinned-8-nodes"),
        ("onprem-gb200-8", "nccl-all-reduce"),
    ] {
        let out = stdout_of(
            &[
                "render",
                "--nodes-file",
                &example(&format!("examples/nodes/{fleet}.yaml")),
                "--expand",
                &example(&format!("examples/{run}.yaml")),
            ],
            None,
        );
        insta::assert_snapshot!(format!("expand_{fleet}_{run}"), out);
    }
}
