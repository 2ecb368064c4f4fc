//! WorkloadRuns and build parameters the build tests share.

use serde_json::{Value, json};

use super::{BuildParams, RuntimeTemplates, build_runtime, build_workflow, merge_env};
use crate::api::{EnvVar, WorkloadRun};

/// A fixture `nccl-base-env` table (not the shipped rules/defaults/nccl-env.yaml, whose values
/// the rule suites and the render snapshots pin): the build tests check the mechanism (order,
/// merge, `-x` forwarding) over these values.
const FIXTURE_NCCL_ENV: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: nccl-base-env}
entries:
  - {id: a, name: NCCL_DEBUG, value: INFO}
  - {id: b, name: NCCL_DEBUG_SUBSYS, value: "NET,INIT"}
  - {id: c, name: NCCL_NVLS_ENABLE, value: "1"}
  - {id: d, name: NCCL_CUMEM_ENABLE, value: "1"}
  - {id: e, name: NCCL_NET_GDR_C2C, value: "1"}
  - {id: f, name: NCCL_NET_GDR_LEVEL, value: LOC}
  - {id: g, name: NCCL_P2P_NET_CHUNKSIZE, value: "2097152"}
  - {id: h, name: NCCL_SHM_DISABLE, value: "1"}
  - {id: i, name: NCCL_MNNVL_ENABLE, value: "${{ params.enableMNNVL ? '1' : '0' }}"}
  - {id: j, name: NCCL_SOCKET_IFNAME, value: eth0}
"#;

/// The base env of the fixture table ([`FIXTURE_NCCL_ENV`]).
pub(super) fn base_nccl_env(mnnvl: bool) -> Vec<EnvVar> {
    let rules = nvcre_engine::RuleSet::load(
        &[nvcre_engine::Source::new("fixture.yaml", FIXTURE_NCCL_ENV)],
        Some(&crate::packs::contract().unwrap()),
    )
    .unwrap();
    crate::detect::base_nccl_env(&rules, mnnvl).unwrap()
}

/// A fixture `runtime-templates` table (not the shipped rules/defaults/runtime.yaml): short
/// scripts built from fragments, a wait only for scheduler `kai-scheduler`.
const FIXTURE_RUNTIME_TEMPLATES: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: runtime-templates}
fragments:
  auth: /tmp/mpi-ssh-raw
  copy: "cp ${{ fragments.auth }}/* /root/.ssh/"
  tries: 240
entries:
  - id: default
    include: "true"
    defaultTimeoutPerJob: 24h
    nodeHealthExpression: node.spec.unschedulable == true
    sharedMemory:
      volume: {name: dshm, emptyDir: {medium: Memory}}
      mount: {name: dshm, mountPath: /dev/shm}
    torch:
      terminationGracePeriodSeconds: 30
      securityContext: {seccompProfile: {type: RuntimeDefault}}
    mpi:
      timeoutSeconds: "3600"
      launchArgs: [--allow-run-as-root, --mca, plm_rsh_args, -o StrictHostKeyChecking=no -o ConnectionAttempts=10]
      sshAuthMountPath: ${{ fragments.auth }}
      workerScript: "install sshd\n${{ fragments.copy }}\nexec /usr/sbin/sshd -De"
      workerSecurityContext: {capabilities: {add: [IPC_LOCK]}}
      workerReadinessProbe: {exec: {command: [ssh, 127.0.0.1, "true"]}, periodSeconds: 30}
      launcherScript: "set -e\n${{ fragments.copy }}"
      launcherResources: {limits: {cpu: "2", memory: 1Gi}}
      launcherWait:
        $if: params.schedulerName == 'kai-scheduler'
        $then:
          hostfileMount: {name: mpi-hostfile, mountPath: /etc/mpi, readOnly: true}
          script: "wait ${{ fragments.tries }} tries"
"#;

/// The fixture templates ([`FIXTURE_RUNTIME_TEMPLATES`]) for a gang scheduler name.
pub(super) fn templates(scheduler_name: &str) -> std::sync::Arc<RuntimeTemplates> {
    let rules = nvcre_engine::RuleSet::load(
        &[nvcre_engine::Source::new(
            "fixture.yaml",
            FIXTURE_RUNTIME_TEMPLATES,
        )],
        Some(&crate::packs::contract().unwrap()),
    )
    .unwrap();
    super::runtime_templates(&rules, scheduler_name).unwrap()
}

/// Fixture gang defaults (not the shipped gang-defaults table).
pub(super) fn gang_defaults() -> crate::detect::GangDefaults {
    crate::detect::GangDefaults {
        queue: "default-queue".into(),
        queue_label_key: "kai.scheduler/queue".into(),
    }
}

pub(super) fn params() -> BuildParams {
    BuildParams {
        gpus_per_node: 8,
        base_env: base_nccl_env(false),
        platform_mpi_args: Vec::new(),
        pre_command: Vec::new(),
        templates: templates(""),
        gang_defaults: gang_defaults(),
        scale: crate::detect::TestScale::default(),
    }
}

pub(super) fn run(value: Value) -> WorkloadRun {
    serde_json::from_value(value).unwrap()
}

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The seed all-reduce example (the product documentation's NCCL benchmark), with optional extra spec fields.
pub(super) fn all_reduce(extra: Value) -> WorkloadRun {
    let mut spec = json!({
        "image": "nvcr.io/nvidia/pytorch:26.01-py3",
        "framework": {"mpi": {
            "binary": "/usr/local/bin/all_reduce_perf_mpi",
            "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", "100"],
            "mpirunPath": "/usr/local/mpi/bin/mpirun",
        }},
        "numNodes": 4,
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    run(json!({"metadata": {"name": "nccl-all-reduce"}, "spec": spec}))
}

pub(super) fn names(env: &[EnvVar]) -> Vec<String> {
    env.iter()
        .map(|e| format!("{}={}", e.name, e.value.as_deref().unwrap_or("<from>")))
        .collect()
}

pub(super) const BASE_MNNVL_OFF: [&str; 20] = [
    "-x",
    "NCCL_DEBUG=INFO",
    "-x",
    "NCCL_DEBUG_SUBSYS=NET,INIT",
    "-x",
    "NCCL_NVLS_ENABLE=1",
    "-x",
    "NCCL_CUMEM_ENABLE=1",
    "-x",
    "NCCL_NET_GDR_C2C=1",
    "-x",
    "NCCL_NET_GDR_LEVEL=LOC",
    "-x",
    "NCCL_P2P_NET_CHUNKSIZE=2097152",
    "-x",
    "NCCL_SHM_DISABLE=1",
    "-x",
    "NCCL_MNNVL_ENABLE=0",
    "-x",
    "NCCL_SOCKET_IFNAME=eth0",
];

// ---- trainer by framework -----------------------------------------------------------------
pub(super) fn trainer_of(framework: Value) -> Value {
    let wr = run(json!({
        "metadata": {"name": "t"},
        "spec": {"image": "img", "numNodes": 2, "framework": framework},
    }));
    let wf = build_workflow(&wr, &params()).unwrap();
    wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"].clone()
}

// ---- runtimes and gang labels -------------------------------------------------------------
pub(super) fn replicated(runtime: &Value, name: &str) -> Value {
    runtime["spec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .cloned()
        .unwrap()
}

pub(super) fn mpi_runtime_with(gang: Value) -> Value {
    let scheduler = gang["schedulerName"].as_str().unwrap_or("").to_string();
    let wr = all_reduce(json!({"gangScheduler": gang}));
    let merged = merge_env(&base_nccl_env(false), &[]);
    let p = BuildParams {
        templates: templates(&scheduler),
        ..params()
    };
    build_runtime(&wr, &p, &merged, 4)
}
