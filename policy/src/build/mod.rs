//! Build: a [`WorkloadRun`] into a [`Workflow`] (job template, TrainingRuntime, dependencies,
//! orchestration).
//!
//! Module layout: `duration` (Go durations), `command` (env merge, mpirun arguments,
//! `preCommand`, trainer command), `runtime` (torch / MPI TrainingRuntime); this file assembles
//! the Workflow.
//!
//! Every function here is pure: no I/O, no printing, no cluster. What the build needs beyond the
//! WorkloadRun (detected GPU counts, matching platform `mpiArgs` and `preCommand` lines, the
//! default timeout) arrives resolved in [`BuildParams`]. The platform override list itself is not
//! built here: [`build_workflow`] leaves `spec.overrides` empty for the caller to fill.
//!
//! JSON is written in the order a person writes a manifest (`apiVersion`, `kind`, `metadata`,
//! `spec`; `name` first in containers); label maps are sorted by key.

mod command;
mod duration;
#[cfg(test)]
mod fixtures;
mod provenance;
mod runtime;
mod templates;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::api::{
    API_VERSION, CONTROLLER_MANAGER, EnvVar, FrameworkType, GPU_RESOURCE, GangSchedulerSpec,
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, ObjectMeta, TRAINER_API_VERSION, Workflow, WorkflowSpec,
    WorkloadRun, WorkloadRunSpec,
};

use command::trainer_command;
pub use command::{merge_env, shell_quote, wrap_pre_command};
pub use duration::{DurationError, canonical_go_duration};
pub use provenance::{Written, fields_displaced, written};
pub use runtime::build_runtime;
pub use templates::{RUNTIME_TEMPLATES_TABLE, RuntimeTemplates, runtime_templates};

const WORKLOAD_RUN_LABEL: &str = "nvcre.nvidia.com/workload-run";

const FRAMEWORK_LABEL: &str = "trainer.kubeflow.org/framework";

const ANCESTOR_STEP_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// Everything the build needs beyond the WorkloadRun, resolved by the caller from detection, the
/// GPU defaults table and the platform override table.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildParams {
    /// GPUs per node, with `spec.gpusPerNode` already applied.
    pub gpus_per_node: i64,
    /// The base NCCL env (rules/defaults/nccl-env.yaml, with the resolved MNNVL setting);
    /// `spec.env` is merged over it by name.
    pub base_env: Vec<EnvVar>,
    /// `mpiArgs` of the matching platform overrides, already in final order (later matches
    /// first); prepended to the user's `mpiArgs`.
    pub platform_mpi_args: Vec<String>,
    /// `preCommand` lines of the matching platform overrides, in table order; empty means the
    /// trainer command is not wrapped.
    pub pre_command: Vec<String>,
    /// The scripts, mounts, resources and timings of the runtime and the Workflow (the
    /// `runtime-templates` row for the run's gang scheduler), including the default
    /// `execution.timeoutPerJob`.
    pub templates: std::sync::Arc<RuntimeTemplates>,
    /// What the run's `testScale` means (the `test-scale` table row; default: `spec.numNodes`
    /// nodes per job, no topology).
    pub scale: crate::detect::TestScale,
    /// The queue and queue label key of a gang scheduler whose spec leaves them unset (the
    /// `gang-defaults` table).
    pub gang_defaults: crate::detect::GangDefaults,
}

/// Why a WorkloadRun could not be built into a Workflow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// None of `spec.framework.torch`, `mpi` or `exec` is set (the original's `BuildFailed`
    /// message, kept verbatim).
    #[error("workloadrun {name}: exec framework selected but spec.framework.exec is nil")]
    NoFramework {
        /// The WorkloadRun's name.
        name: String,
    },
    /// `spec.orchestration.timeoutPerJob` is not a Go duration, or is negative. (The original
    /// silently fell back to the default; we refuse.)
    #[error("spec.orchestration.timeoutPerJob: invalid duration \"{value}\": {reason}")]
    InvalidTimeoutPerJob {
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: DurationError,
    },
    /// A command-line or env value holds a NUL character, which no process argument or
    /// environment variable can carry (the kernel ends a string at the first NUL).
    #[error(
        "{field}: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    )]
    NulCharacter {
        /// The field path of the value, e.g. `spec.framework.mpi.args[2]`.
        field: String,
    },
}

/// The first command-line or env field of `spec` holding a NUL character, as a field path.
fn nul_field(spec: &WorkloadRunSpec) -> Option<String> {
    fn list(prefix: &str, items: &[String]) -> Option<String> {
        items
            .iter()
            .position(|s| s.contains('\0'))
            .map(|i| format!("{prefix}[{i}]"))
    }
    fn one(path: &str, value: Option<&str>) -> Option<String> {
        value.filter(|s| s.contains('\0')).map(|_| path.to_string())
    }
    let fw = &spec.framework;
    let torch = fw.torch.as_ref().and_then(|t| {
        one("spec.framework.torch.script", t.script.as_deref())
            .or_else(|| one("spec.framework.torch.module", t.module.as_deref()))
            .or_else(|| list("spec.framework.torch.args", &t.args))
    });
    let mpi = || {
        fw.mpi.as_ref().and_then(|m| {
            one("spec.framework.mpi.mpirunPath", Some(&m.mpirun_path))
                .or_else(|| list("spec.framework.mpi.mpiArgs", &m.mpi_args))
                .or_else(|| one("spec.framework.mpi.binary", Some(&m.binary)))
                .or_else(|| list("spec.framework.mpi.args", &m.args))
        })
    };
    let exec = || {
        fw.exec.as_ref().and_then(|e| {
            list("spec.framework.exec.command", &e.command)
                .or_else(|| list("spec.framework.exec.args", &e.args))
        })
    };
    let env = || {
        spec.env.iter().enumerate().find_map(|(i, e)| {
            (e.name.contains('\0') || e.value.as_deref().is_some_and(|v| v.contains('\0')))
                .then(|| format!("spec.env[{i}]"))
        })
    };
    torch.or_else(mpi).or_else(exec).or_else(env)
}

/// A sorted label map.
fn label_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    let sorted: BTreeMap<&str, &str> = pairs.into_iter().collect();
    Value::Object(
        sorted
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    )
}

/// A JSON mapping of `fields`, in order, each value moved in (`json!` serializes every value it
/// is given, a deep copy of a `Value`).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// The queue label `(key, queue)` when gang scheduling is on.
fn queue_label(gang: Option<&GangSchedulerSpec>) -> Option<(&str, &str)> {
    gang.map(|g| (g.queue_label_key(), g.queue()))
}

/// The controller-owned runtimePatch: pull secrets on `node` (and on `launcher`, which pulls the
/// same image, as newer builds of the original do), and for MPI bare `node` and `launcher`
/// entries; `None` when there is nothing to register.
fn controller_runtime_patch(spec: &WorkloadRunSpec) -> Option<Value> {
    let mpi = spec.framework.kind() == FrameworkType::Mpi;
    let mut jobs = Vec::new();
    if !spec.image_pull_secrets.is_empty() {
        jobs.push(json!({
            "name": "node",
            "template": {"spec": {"template": {"spec": {
                "imagePullSecrets": spec.image_pull_secrets,
            }}}},
        }));
    } else if mpi {
        jobs.push(json!({"name": "node"}));
    }
    if mpi && !spec.image_pull_secrets.is_empty() {
        jobs.push(json!({
            "name": "launcher",
            "template": {"spec": {"template": {"spec": {
                "imagePullSecrets": spec.image_pull_secrets,
            }}}},
        }));
    } else if mpi {
        jobs.push(json!({"name": "launcher"}));
    }
    if jobs.is_empty() {
        return None;
    }
    Some(json!({
        "manager": CONTROLLER_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}},
    }))
}

/// `jobTemplate.spec`.
fn job_spec(run: &WorkloadRun, params: &BuildParams, merged_env: &[EnvVar], npj: i64) -> Value {
    let spec = &run.spec;
    let name = run.metadata.name.as_str();
    let (mut command, mut args) = trainer_command(spec, params, merged_env);
    if !params.pre_command.is_empty() {
        (command, args) = wrap_pre_command(&params.pre_command, &command, &args);
    }
    let mut trainer = Map::new();
    trainer.insert("image".to_string(), json!(spec.image));
    trainer.insert("command".to_string(), json!(command));
    if !args.is_empty() {
        trainer.insert("args".to_string(), json!(args));
    }
    trainer.insert("numNodes".to_string(), json!(npj));
    trainer.insert("numProcPerNode".to_string(), json!(params.gpus_per_node));
    let mut train_job = Map::new();
    train_job.insert(
        "runtimeRef".to_string(),
        json!({"name": format!("{name}-runtime"), "kind": "TrainingRuntime"}),
    );
    train_job.insert("trainer".to_string(), Value::Object(trainer));
    if let Some(patch) = controller_runtime_patch(spec) {
        train_job.insert("runtimePatches".to_string(), Value::Array(vec![patch]));
    }

    let mut job = Map::new();
    job.insert(
        "workload".to_string(),
        object([("trainJob", Value::Object(train_job))]),
    );
    if let Some(meta) = spec
        .workload_metadata
        .as_ref()
        .filter(|m| !m.labels.is_empty())
    {
        job.insert(
            "workloadMetadata".to_string(),
            json!({"labels": meta.labels}),
        );
    }
    // A run aimed at cordoned nodes would have every node flagged unhealthy at once.
    if !spec
        .target
        .as_ref()
        .is_some_and(crate::api::TargetSpec::includes_cordoned)
    {
        job.insert(
            "nodeHealthMonitor".to_string(),
            json!({"cel": {"expression": params.templates.node_health_expression}}),
        );
    }
    if let Some(goodput) = &spec.goodput_measurement {
        job.insert("goodputMeasurement".to_string(), goodput.clone());
    }
    if let Some(bandwidth) = &spec.bandwidth_measurement {
        job.insert("bandwidthMeasurement".to_string(), bandwidth.clone());
    }
    if let Some(checkpoint) = &spec.checkpoint {
        job.insert(
            "checkpoint".to_string(),
            json!({
                "pvcName": format!("{name}-checkpoint-pvc"),
                "maxRestarts": checkpoint.max_restarts.unwrap_or(0),
            }),
        );
    }
    Value::Object(job)
}

/// The ConfigMap and PVC dependencies.
fn extra_dependencies(run: &WorkloadRun) -> Vec<Value> {
    let name = run.metadata.name.as_str();
    let mut deps = Vec::new();
    if let Some(inline) = run
        .spec
        .config
        .as_ref()
        .and_then(|c| c.inline.as_ref())
        .filter(|m| !m.is_empty())
    {
        deps.push(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-config"), "labels": {"app": name}},
            "data": inline,
        }));
    }
    if let Some(checkpoint) = &run.spec.checkpoint {
        let mut pvc = Map::new();
        pvc.insert("accessModes".to_string(), json!(["ReadWriteMany"]));
        pvc.insert(
            "resources".to_string(),
            json!({"requests": {"storage": checkpoint.storage_size}}),
        );
        if let Some(class) = &checkpoint.storage_class_name {
            pvc.insert("storageClassName".to_string(), json!(class));
        }
        deps.push(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("{name}-checkpoint-pvc"), "labels": {"app": name}},
            "spec": pvc,
        }));
    }
    deps
}

/// `spec.orchestration` of the Workflow, keys in the Go struct
/// order: target, topology, execution, iterations, placement.
fn orchestration(
    spec: &WorkloadRunSpec,
    params: &BuildParams,
) -> Result<Map<String, Value>, BuildError> {
    let orch = spec.orchestration.as_ref();
    let timeout = match orch.and_then(|o| o.timeout_per_job.as_deref()) {
        None | Some("") => params.templates.default_timeout_per_job.clone(),
        Some(value) => {
            canonical_go_duration(value).map_err(|reason| BuildError::InvalidTimeoutPerJob {
                value: value.to_string(),
                reason,
            })?
        }
    };
    let mut out = Map::new();
    if let Some(target) = &spec.target {
        out.insert("target".to_string(), json!(target));
    }
    if params.scale.strict_domain {
        out.insert("topology".to_string(), json!({"strictDomain": true}));
    }
    let mut execution = Map::new();
    if let Some(max) = orch.and_then(|o| o.max_concurrent) {
        execution.insert("maxConcurrent".to_string(), json!(max));
    }
    execution.insert("timeoutPerJob".to_string(), json!(timeout));
    out.insert("execution".to_string(), Value::Object(execution));
    out.insert(
        "iterations".to_string(),
        json!(orch.and_then(|o| o.repeat_count).unwrap_or(1)),
    );
    if let Some(placement) = orch
        .and_then(|o| o.placement.as_deref())
        .filter(|p| !p.is_empty())
    {
        out.insert("placement".to_string(), json!(placement));
    }
    Ok(out)
}

/// Builds the Workflow for a WorkloadRun: the TrainJob job template,
/// the TrainingRuntime / ConfigMap / PVC dependencies, orchestration, validation and the resolved
/// gang intent. `spec.overrides` is left empty for the caller; the gang queue label on the
/// workload object is added later by a rule pack.
///
/// Checks, in order: a framework is set, no command-line or env value holds a NUL character,
/// `timeoutPerJob` parses. (Which `spec.thresholds`
/// keys are valid is an admission rule.)
pub fn build_workflow(run: &WorkloadRun, params: &BuildParams) -> Result<Workflow, BuildError> {
    let name = run.metadata.name.as_str();
    let spec = &run.spec;
    let fw = &spec.framework;
    if fw.torch.is_none() && fw.mpi.is_none() && fw.exec.is_none() {
        return Err(BuildError::NoFramework {
            name: name.to_string(),
        });
    }
    if let Some(field) = nul_field(spec) {
        return Err(BuildError::NulCharacter { field });
    }
    let orchestration = orchestration(spec, params)?;
    let merged = merge_env(&params.base_env, &spec.env);
    let npj = params.scale.nodes_per_job(spec.num_nodes);

    let mut dependencies = vec![build_runtime(run, params, &merged, npj)];
    dependencies.extend(extra_dependencies(run));
    let validation = (!spec.thresholds.is_empty()).then(
        || json!({"performance": {"enabled": true, "thresholds": {"thresholds": spec.thresholds}}}),
    );
    let labels = BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string()),
        (WORKLOAD_RUN_LABEL.to_string(), name.to_string()),
    ]);
    Ok(Workflow {
        api_version: API_VERSION.to_string(),
        kind: "Workflow".to_string(),
        metadata: ObjectMeta {
            name: name.to_string(),
            namespace: run.metadata.namespace.clone(),
            labels,
            annotations: BTreeMap::new(),
        },
        spec: WorkflowSpec {
            namespace: None,
            job_template: json!({"spec": job_spec(run, params, &merged, npj)}),
            orchestration,
            dependencies,
            overrides: Vec::new(),
            validation,
            gang_scheduler: spec
                .gang_scheduler
                .as_ref()
                .and_then(|g| g.resolved(&params.gang_defaults)),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::*;

    // ---- workflow -----------------------------------------------------------------------------
    #[test]
    fn workflow_envelope_job_template_and_dependencies() {
        let wr = run(json!({
            "metadata": {"name": "wr", "namespace": "ns"},
            "spec": {
                "image": "img",
                "numNodes": 4,
                "framework": {"mpi": {"binary": "/b", "mpirunPath": "/m"}},
                "imagePullSecrets": [{"name": "regcred"}],
                "config": {"inline": {"a": "1"}},
                "checkpoint": {"storageSize": "10Gi", "storageClassName": "fast", "maxRestarts": 2},
                "goodputMeasurement": {"logProfileRef": "megatron"},
                "bandwidthMeasurement": {"logProfileRef": "nccl", "testType": "all_reduce"},
                "workloadMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "gangScheduler": {"schedulerName": "runai-scheduler", "queueLabelKey": "runai/queue", "queue": "team-a"},
                "thresholds": {"busBandwidthGBps": "value >= 900"},
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "orchestration": {"maxConcurrent": 0, "placement": "Pinned"},
            },
        }));
        // The scale row sets the job size (which testScale means what is the table's).
        let p = BuildParams {
            scale: crate::detect::TestScale {
                nodes_per_job: Some(1),
                strict_domain: false,
            },
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        assert_eq!(wf.api_version, "nvcre.nvidia.com/v1alpha1");
        assert_eq!(wf.kind, "Workflow");
        assert_eq!(wf.metadata.name, "wr");
        assert_eq!(wf.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            json!(wf.metadata.labels),
            json!({"app.kubernetes.io/managed-by": "nvcre", "nvcre.nvidia.com/workload-run": "wr"})
        );
        let job = &wf.spec.job_template["spec"];
        let train_job = &job["workload"]["trainJob"];
        assert_eq!(
            train_job["runtimeRef"],
            json!({"name": "wr-runtime", "kind": "TrainingRuntime"})
        );
        assert_eq!(train_job["trainer"]["numNodes"], 1);
        assert_eq!(
            train_job["runtimePatches"],
            json!([{
                "manager": "nvcre.nvidia.com/controller",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", "template": {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}}}},
                    {"name": "launcher", "template": {"spec": {"template": {"spec": {"imagePullSecrets": [{"name": "regcred"}]}}}}},
                ]}}},
            }])
        );
        assert_eq!(
            job["workloadMetadata"],
            json!({"labels": {"kueue.x-k8s.io/queue-name": "q"}})
        );
        assert_eq!(
            job["nodeHealthMonitor"],
            json!({"cel": {"expression": "node.spec.unschedulable == true"}})
        );
        assert_eq!(
            job["goodputMeasurement"],
            json!({"logProfileRef": "megatron"})
        );
        assert_eq!(
            job["bandwidthMeasurement"],
            json!({"logProfileRef": "nccl", "testType": "all_reduce"})
        );
        assert_eq!(
            job["checkpoint"],
            json!({"pvcName": "wr-checkpoint-pvc", "maxRestarts": 2})
        );

        let deps = &wf.spec.dependencies;
        assert_eq!(deps.len(), 3);
        assert_eq!(deps[0]["metadata"]["name"], "wr-runtime");
        assert_eq!(
            deps[1],
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wr-config", "labels": {"app": "wr"}}, "data": {"a": "1"}})
        );
        assert_eq!(
            deps[2],
            json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "wr-checkpoint-pvc", "labels": {"app": "wr"}},
                "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}, "storageClassName": "fast"},
            })
        );
        assert_eq!(
            Value::Object(wf.spec.orchestration.clone()),
            json!({
                "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
                "execution": {"maxConcurrent": 0, "timeoutPerJob": "24h0m0s"},
                "iterations": 1,
                "placement": "Pinned",
            })
        );
        assert_eq!(
            wf.spec.validation,
            Some(
                json!({"performance": {"enabled": true, "thresholds": {"thresholds": {"busBandwidthGBps": "value >= 900"}}}})
            )
        );
        assert_eq!(
            wf.spec.gang_scheduler,
            Some(GangSchedulerSpec {
                scheduler_name: "runai-scheduler".to_string(),
                queue: Some("team-a".to_string()),
                queue_label_key: Some("runai/queue".to_string()),
            })
        );
        assert!(wf.spec.overrides.is_empty());
        assert!(!wf.spec.job_template.to_string().contains("runai/queue"));
    }

    #[test]
    fn torch_without_pull_secrets_has_no_runtime_patches() {
        let wr = run(json!({
            "metadata": {"name": "t"},
            "spec": {"image": "img", "numNodes": 1, "framework": {"torch": {"script": "t.py"}}},
        }));
        let wf = build_workflow(&wr, &params()).unwrap();
        let train_job = &wf.spec.job_template["spec"]["workload"]["trainJob"];
        assert_eq!(train_job.get("runtimePatches"), None);
        assert_eq!(wf.spec.job_template["spec"].get("workloadMetadata"), None);
        assert_eq!(wf.spec.dependencies.len(), 1);
        assert_eq!(wf.spec.validation, None);
        assert_eq!(wf.spec.gang_scheduler, None);
    }

    #[test]
    fn mpi_without_pull_secrets_registers_bare_node_and_launcher() {
        let wf = build_workflow(&all_reduce(json!({})), &params()).unwrap();
        let patches = &wf.spec.job_template["spec"]["workload"]["trainJob"]["runtimePatches"];
        assert_eq!(
            patches[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"],
            json!([{"name": "node"}, {"name": "launcher"}])
        );
    }

    #[test]
    fn strict_domain_scale_writes_the_topology() {
        let wr = all_reduce(json!({"orchestration": {"repeatCount": 3, "timeoutPerJob": "90m"}}));
        let p = BuildParams {
            scale: crate::detect::TestScale {
                nodes_per_job: None,
                strict_domain: true,
            },
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        assert_eq!(
            Value::Object(wf.spec.orchestration),
            json!({
                "topology": {"strictDomain": true},
                "execution": {"timeoutPerJob": "1h30m0s"},
                "iterations": 3,
            })
        );
        assert_eq!(
            wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"]["numNodes"],
            4
        );
    }

    #[test]
    fn configmap_ref_mounts_the_named_configmap_without_a_dependency() {
        let wr = all_reduce(json!({"config": {"configMapRef": {"name": "mine"}}}));
        let wf = build_workflow(&wr, &params()).unwrap();
        assert_eq!(wf.spec.dependencies.len(), 1);
        let worker = replicated(&wf.spec.dependencies[0], "node");
        let pod = &worker["template"]["spec"]["template"]["spec"];
        assert_eq!(
            pod["volumes"][1],
            json!({"name": "config-volume", "configMap": {"name": "mine", "defaultMode": 493}})
        );
        assert_eq!(
            pod["containers"][0]["volumeMounts"][2],
            json!({"name": "config-volume", "mountPath": "/config"})
        );
    }

    // ---- errors: exact messages ---------------------------------------------------------------
    macro_rules! build_error {
        ($name:ident, $extra:expr, $want:expr) => {
            #[test]
            fn $name() {
                let err = build_workflow(&all_reduce($extra), &params()).unwrap_err();
                assert_eq!(err.to_string(), $want);
            }
        };
    }

    build_error!(
        err_timeout_bogus,
        json!({"orchestration": {"timeoutPerJob": "bogus"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"bogus\": expected decimal numbers each followed by a unit, such as \"90s\" or \"1h30m\""
    );

    build_error!(
        err_timeout_negative,
        json!({"orchestration": {"timeoutPerJob": "-1h"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"-1h\": a timeout cannot be negative"
    );

    build_error!(
        err_timeout_unit,
        json!({"orchestration": {"timeoutPerJob": "2d"}}),
        "spec.orchestration.timeoutPerJob: invalid duration \"2d\": unknown unit \"d\"; valid units are ns, us, µs, ms, s, m, h"
    );

    build_error!(
        err_no_framework,
        json!({"framework": {}}),
        "workloadrun nccl-all-reduce: exec framework selected but spec.framework.exec is nil"
    );

    build_error!(
        err_nul_in_mpi_args,
        json!({"framework": {"mpi": {"binary": "/b", "mpirunPath": "/m", "args": ["ok", "a\u{0}b"]}}}),
        "spec.framework.mpi.args[1]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    );

    build_error!(
        err_nul_in_mpirun_path,
        json!({"framework": {"mpi": {"binary": "/b", "mpirunPath": "/m\u{0}"}}}),
        "spec.framework.mpi.mpirunPath: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    );

    build_error!(
        err_nul_in_exec_command,
        json!({"framework": {"exec": {"command": ["sh", "\u{0}"]}}}),
        "spec.framework.exec.command[1]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    );

    build_error!(
        err_nul_in_torch_script,
        json!({"framework": {"torch": {"script": "t\u{0}.py"}}}),
        "spec.framework.torch.script: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    );

    build_error!(
        err_nul_in_env_value,
        json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "\u{0}"}]}),
        "spec.env[1]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it"
    );

    #[test]
    fn empty_timeout_uses_the_default() {
        let wr = all_reduce(json!({"orchestration": {"timeoutPerJob": ""}}));
        let mut p = params();
        std::sync::Arc::make_mut(&mut p.templates).default_timeout_per_job = "1h0m0s".to_string();
        let wf = build_workflow(&wr, &p).unwrap();
        assert_eq!(
            wf.spec.orchestration["execution"],
            json!({"timeoutPerJob": "1h0m0s"})
        );
    }

    #[test]
    fn timeout_error_carries_the_value() {
        let err = build_workflow(
            &all_reduce(json!({"orchestration": {"timeoutPerJob": "90"}})),
            &params(),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            BuildError::InvalidTimeoutPerJob { ref value, reason: DurationError::Parse(nvcre_engine::go_duration::DurationError::MissingUnit) } if value == "90"
        ));
    }

    #[test]
    fn example_build_workflow() -> Result<(), Box<dyn std::error::Error>> {
        use crate::api::WorkloadRun;
        use crate::build::{BuildParams, build_workflow};
        let run: WorkloadRun = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo", "namespace": "team"},
            "spec": {"image": "img", "numNodes": 2,
                     "framework": {"exec": {"command": ["python", "run.py"]}}},
        }))?;
        let params = BuildParams {
            gpus_per_node: 4,
            base_env: vec![crate::api::EnvVar::new("NCCL_DEBUG", "INFO")],
            platform_mpi_args: vec![],
            pre_command: vec![],
            templates: crate::build::fixtures::templates(""),
            gang_defaults: crate::build::fixtures::gang_defaults(),
            scale: crate::detect::TestScale::default(),
        };
        let wf = build_workflow(&run, &params)?;
        assert_eq!(wf.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(
            wf.spec.orchestration["execution"]["timeoutPerJob"],
            "24h0m0s"
        );
        Ok(())
    }
}
