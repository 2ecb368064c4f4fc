//! The TrainingRuntime a WorkloadRun needs: the torch or MPI runtime (worker and launcher
//! replicated jobs, the SSH bootstrap scripts, gang-scheduling labels and scheduler name,
//! volumes and GPU resources). `exec` runs on the torch runtime.

use serde_json::{Map, Value, json};

use super::{
    ANCESTOR_STEP_LABEL, BuildParams, FRAMEWORK_LABEL, GPU_RESOURCE, TRAINER_API_VERSION,
    label_map, object, queue_label,
};
use crate::api::{EnvVar, FrameworkType, GangSchedulerSpec, WorkloadRun};

/// The generated TrainingRuntime dependency `<run>-runtime`, with the
/// gang scheduler's labels and `schedulerName` injected and, when the templates say so
/// (`mpi.launcherWait`), the launcher waiting for the workers instead of depending on them. `exec` reuses the torch
/// shape (framework label `torch`).
pub fn build_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    nodes_per_job: i64,
) -> Value {
    let gang = run
        .spec
        .gang_scheduler
        .as_ref()
        .and_then(|g| g.resolved(&params.gang_defaults));
    match run.spec.framework.kind() {
        FrameworkType::Mpi => mpi_runtime(run, params, merged_env, gang.as_ref()),
        FrameworkType::Torch | FrameworkType::Exec => {
            torch_runtime(run, params, merged_env, nodes_per_job, gang.as_ref())
        }
    }
}

/// Runtime metadata: `<run>-runtime`, labels `app` and the framework label.
pub(super) fn runtime_metadata(run_name: &str, framework: &str) -> Value {
    object([
        ("name", Value::String(format!("{run_name}-runtime"))),
        (
            "labels",
            label_map([(FRAMEWORK_LABEL, framework), ("app", run_name)]),
        ),
    ])
}

/// The torch/exec TrainingRuntime: one replicated job `node`.
pub(super) fn torch_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    nodes_per_job: i64,
    gang: Option<&GangSchedulerSpec>,
) -> Value {
    let name = run.metadata.name.as_str();
    let t = &params.templates;
    let (user_vols, user_mounts) = user_volumes(run);
    let mut volumes = vec![t.shared_memory.volume.clone()];
    volumes.extend(user_vols);
    let mut mounts = vec![t.shared_memory.mount.clone()];
    mounts.extend(user_mounts);
    let container = object([
        ("name", Value::from("node")),
        ("image", Value::from(run.spec.image.as_str())),
        ("env", json!(merged_env)),
        (
            "resources",
            worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        ),
        ("volumeMounts", Value::Array(mounts)),
    ]);
    let mut fields = vec![
        (
            "terminationGracePeriodSeconds",
            t.torch.termination_grace_period_seconds.clone(),
        ),
        ("securityContext", t.torch.security_context.clone()),
    ];
    if !run.spec.init_containers.is_empty() {
        fields.push((
            "initContainers",
            Value::Array(run.spec.init_containers.clone()),
        ));
    }
    fields.push(("containers", Value::Array(vec![container])));
    fields.push(("volumes", Value::Array(volumes)));
    let job_labels = label_map(
        [(ANCESTOR_STEP_LABEL, "trainer"), ("app", name)]
            .into_iter()
            .chain(queue_label(gang)),
    );
    let node = replicated_job("node", None, Some(job_labels), pod_template(gang, fields));
    training_runtime(
        name,
        "torch",
        json!({
            "numNodes": nodes_per_job,
            "torch": {"numProcPerNode": params.gpus_per_node},
        }),
        object([("replicatedJobs", Value::Array(vec![node]))]),
    )
}

/// A TrainingRuntime named for run `run_name`: its metadata, `spec.mlPolicy` and
/// `spec.template.spec`, each moved into place.
fn training_runtime(run_name: &str, framework: &str, ml_policy: Value, template: Value) -> Value {
    object([
        ("apiVersion", Value::from(TRAINER_API_VERSION)),
        ("kind", Value::from("TrainingRuntime")),
        ("metadata", runtime_metadata(run_name, framework)),
        (
            "spec",
            object([
                ("mlPolicy", ml_policy),
                ("template", object([("spec", template)])),
            ]),
        ),
    ])
}

/// The launcher's `fix-ssh-permissions` script: the table's launcher script, then its wait for
/// the workers when the row has one.
pub(super) fn launcher_init_script(params: &BuildParams) -> String {
    let mpi = &params.templates.mpi;
    match &mpi.launcher_wait {
        Some(wait) => format!("{}\n{}", mpi.launcher_script, wait.script),
        None => mpi.launcher_script.clone(),
    }
}

/// The MPI TrainingRuntime: worker `node` (sshd) and `launcher` (mpirun).
pub(super) fn mpi_runtime(
    run: &WorkloadRun,
    params: &BuildParams,
    merged_env: &[EnvVar],
    gang: Option<&GangSchedulerSpec>,
) -> Value {
    let name = run.metadata.name.as_str();
    let image = run.spec.image.as_str();
    let t = &params.templates;
    let wait = t.mpi.launcher_wait.as_ref();
    // The Trainer mounts its ssh secret as volume `mpi-ssh-auth`; where is the table's.
    let ssh_auth_mount =
        json!({"name": "mpi-ssh-auth", "mountPath": t.mpi.ssh_auth_mount_path, "readOnly": true});
    let ssh_keys_mount = json!({"name": "ssh-keys", "mountPath": "/root/.ssh"});

    let (user_vols, user_mounts) = user_volumes(run);
    let mut worker_volumes = vec![t.shared_memory.volume.clone()];
    worker_volumes.extend(user_vols);
    let mut worker_mounts = vec![ssh_auth_mount.clone(), t.shared_memory.mount.clone()];
    worker_mounts.extend(user_mounts);
    let worker_container = object([
        ("name", Value::from("node")),
        ("image", Value::from(image)),
        ("command", json!(["sh", "-c", t.mpi.worker_script])),
        ("env", json!(merged_env)),
        (
            "resources",
            worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        ),
        ("securityContext", t.mpi.worker_security_context.clone()),
        ("readinessProbe", t.mpi.worker_readiness_probe.clone()),
        ("volumeMounts", Value::Array(worker_mounts)),
    ]);
    // The user's init containers run on the workers, where the binary runs (the launcher only
    // runs mpirun); the original drops them for MPI.
    let mut worker_fields = vec![("restartPolicy", json!("OnFailure"))];
    if !run.spec.init_containers.is_empty() {
        worker_fields.push((
            "initContainers",
            Value::Array(run.spec.init_containers.clone()),
        ));
    }
    worker_fields.push(("containers", Value::Array(vec![worker_container])));
    worker_fields.push(("volumes", Value::Array(worker_volumes)));
    let worker = replicated_job(
        "node",
        None,
        queue_label(gang).map(|q| label_map([q])),
        pod_template(gang, worker_fields),
    );

    let mut init_mounts = vec![ssh_auth_mount.clone(), ssh_keys_mount.clone()];
    if let Some(w) = wait {
        init_mounts.push(w.hostfile_mount.clone());
    }
    let init = object([
        ("name", Value::from("fix-ssh-permissions")),
        ("image", Value::from(image)),
        ("command", json!(["sh", "-c", launcher_init_script(params)])),
        ("volumeMounts", Value::Array(init_mounts)),
    ]);
    let launcher_container = object([
        ("name", Value::from("node")),
        ("image", Value::from(image)),
        ("env", json!(merged_env)),
        ("resources", t.mpi.launcher_resources.clone()),
        (
            "volumeMounts",
            Value::Array(vec![ssh_auth_mount, ssh_keys_mount]),
        ),
    ]);
    let launcher = replicated_job(
        "launcher",
        wait.is_none()
            .then(|| json!([{"name": "node", "status": "Ready"}])),
        Some(label_map(
            std::iter::once((ANCESTOR_STEP_LABEL, "trainer")).chain(queue_label(gang)),
        )),
        pod_template(
            gang,
            vec![
                ("restartPolicy", json!("OnFailure")),
                ("initContainers", Value::Array(vec![init])),
                ("containers", Value::Array(vec![launcher_container])),
                ("volumes", json!([{"name": "ssh-keys", "emptyDir": {}}])),
            ],
        ),
    );
    training_runtime(
        name,
        "mpi",
        json!({
            "numNodes": 1,
            "mpi": {
                "mpiImplementation": "OpenMPI",
                "numProcPerNode": params.gpus_per_node,
                "sshAuthMountPath": t.mpi.ssh_auth_mount_path,
            },
        }),
        object([
            ("network", json!({"publishNotReadyAddresses": true})),
            (
                "successPolicy",
                json!({"operator": "All", "targetReplicatedJobs": ["launcher"]}),
            ),
            ("replicatedJobs", Value::Array(vec![worker, launcher])),
        ]),
    )
}

/// Worker container resources: `nvidia.com/gpu: "<gpus>"` in limits
/// and requests without `spec.resources`; with it, the user's block, plus the GPU count in both
/// maps only when neither names `nvidia.com/gpu` and `gpus > 0`.
pub(super) fn worker_resources(resources: Option<&Value>, gpus: i64) -> Value {
    let gpu_count = Value::String(gpus.to_string());
    let Some(user) = resources else {
        return json!({
            "limits": {GPU_RESOURCE: gpu_count.clone()},
            "requests": {GPU_RESOURCE: gpu_count},
        });
    };
    let mut out = user.clone();
    let Some(block) = out.as_object_mut() else {
        return out;
    };
    let names_gpu = ["limits", "requests"].iter().any(|k| {
        block
            .get(*k)
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key(GPU_RESOURCE))
    });
    if names_gpu || gpus <= 0 {
        return out;
    }
    for key in ["limits", "requests"] {
        let slot = block
            .entry(key)
            .or_insert_with(|| Value::Object(Map::new()));
        if slot.is_null() {
            *slot = Value::Object(Map::new());
        }
        if let Some(map) = slot.as_object_mut() {
            map.insert(GPU_RESOURCE.to_string(), gpu_count.clone());
        }
    }
    out
}

/// A replicated job: `{name, dependsOn?, template: {metadata?: {labels}, spec: {template}}}`.
pub(super) fn replicated_job(
    name: &str,
    depends_on: Option<Value>,
    job_labels: Option<Value>,
    pod_template: Value,
) -> Value {
    let mut job_template = Map::new();
    if let Some(labels) = job_labels {
        job_template.insert("metadata".to_string(), object([("labels", labels)]));
    }
    job_template.insert("spec".to_string(), object([("template", pod_template)]));
    let mut job = Map::new();
    job.insert("name".to_string(), Value::String(name.to_string()));
    if let Some(d) = depends_on {
        job.insert("dependsOn".to_string(), d);
    }
    job.insert("template".to_string(), Value::Object(job_template));
    Value::Object(job)
}

/// A pod template: queue-labelled metadata and `schedulerName` (first in the spec) only under a
/// gang scheduler.
pub(super) fn pod_template(gang: Option<&GangSchedulerSpec>, fields: Vec<(&str, Value)>) -> Value {
    let mut spec = Map::new();
    if let Some(g) = gang {
        spec.insert(
            "schedulerName".to_string(),
            Value::String(g.scheduler_name.clone()),
        );
    }
    spec.extend(fields.into_iter().map(|(k, v)| (k.to_string(), v)));
    let mut template = Map::new();
    if let Some(queue) = queue_label(gang) {
        template.insert(
            "metadata".to_string(),
            object([("labels", label_map([queue]))]),
        );
    }
    template.insert("spec".to_string(), Value::Object(spec));
    Value::Object(template)
}

/// Volumes and mounts from the spec: the user's, then `config-volume` at `/config` when
/// `spec.config` is set.
pub(super) fn user_volumes(run: &WorkloadRun) -> (Vec<Value>, Vec<Value>) {
    let mut volumes = run.spec.volumes.clone();
    let mut mounts = run.spec.volume_mounts.clone();
    if let Some(config) = &run.spec.config {
        let config_map = match &config.config_map_ref {
            Some(r) => r.name.clone(),
            None => format!("{}-config", run.metadata.name),
        };
        volumes.push(json!({
            "name": "config-volume",
            "configMap": {"name": config_map, "defaultMode": 0o755},
        }));
        mounts.push(json!({"name": "config-volume", "mountPath": "/config"}));
    }
    (volumes, mounts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::*;

    // ---- resources: one line per case ---------------------------------------------------------
    macro_rules! resources {
        ($name:ident, $user:expr, $gpus:expr, $want:expr) => {
            #[test]
            fn $name() {
                let user: Option<Value> = $user;
                assert_eq!(worker_resources(user.as_ref(), $gpus), $want);
            }
        };
    }

    resources!(
        res_default,
        None,
        8,
        json!({"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}})
    );

    resources!(
        res_explicit_zero_kept,
        Some(json!({"limits": {"nvidia.com/gpu": 0}})),
        8,
        json!({"limits": {"nvidia.com/gpu": 0}})
    );

    resources!(
        res_requests_only_kept,
        Some(json!({"requests": {"nvidia.com/gpu": "2"}})),
        8,
        json!({"requests": {"nvidia.com/gpu": "2"}})
    );

    resources!(
        res_gpu_added,
        Some(json!({"limits": {"memory": "8Gi"}})),
        4,
        json!({"limits": {"memory": "8Gi", "nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}})
    );

    resources!(
        res_zero_gpus_nothing_added,
        Some(json!({"limits": {"memory": "8Gi"}})),
        0,
        json!({"limits": {"memory": "8Gi"}})
    );

    #[test]
    fn runai_mpi_labels_and_scheduler() {
        let rt = mpi_runtime_with(json!({
            "schedulerName": "runai-scheduler",
            "queueLabelKey": "runai/queue",
            "queue": "team-a",
        }));
        let launcher = replicated(&rt, "launcher");
        let worker = replicated(&rt, "node");
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"runai/queue": "team-a", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            worker["template"]["metadata"]["labels"],
            json!({"runai/queue": "team-a"})
        );
        for job in [&launcher, &worker] {
            let pod = &job["template"]["spec"]["template"];
            assert_eq!(pod["metadata"]["labels"], json!({"runai/queue": "team-a"}));
            assert_eq!(pod["spec"]["schedulerName"], "runai-scheduler");
        }
        assert_eq!(
            launcher["dependsOn"],
            json!([{"name": "node", "status": "Ready"}])
        );
        assert!(!rt.to_string().contains("kai.scheduler/queue"));
    }

    #[test]
    fn kai_mpi_labels_wait_loop_and_no_depends_on() {
        let rt =
            mpi_runtime_with(json!({"schedulerName": "kai-scheduler", "queue": "high-priority"}));
        let launcher = replicated(&rt, "launcher");
        let worker = replicated(&rt, "node");
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"kai.scheduler/queue": "high-priority", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            worker["template"]["metadata"]["labels"],
            json!({"kai.scheduler/queue": "high-priority"})
        );
        assert_eq!(launcher.get("dependsOn"), None);
        let init = &launcher["template"]["spec"]["template"]["spec"]["initContainers"][0];
        assert_eq!(init["name"], "fix-ssh-permissions");
        assert_eq!(
            init["volumeMounts"],
            json!([
                {"name": "mpi-ssh-auth", "mountPath": "/tmp/mpi-ssh-raw", "readOnly": true},
                {"name": "ssh-keys", "mountPath": "/root/.ssh"},
                {"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": true},
            ])
        );
        // The fixture row's launcher script, then its wait (present for this scheduler).
        assert_eq!(
            init["command"],
            json!([
                "sh",
                "-c",
                "set -e\ncp /tmp/mpi-ssh-raw/* /root/.ssh/\nwait 240 tries"
            ])
        );
    }

    #[test]
    fn mpi_without_gang_has_no_scheduling_fields() {
        let rt = mpi_runtime_with(Value::Null);
        let worker = replicated(&rt, "node");
        let launcher = replicated(&rt, "launcher");
        assert_eq!(worker["template"].get("metadata"), None);
        assert_eq!(worker["template"]["spec"]["template"].get("metadata"), None);
        assert_eq!(
            worker["template"]["spec"]["template"]["spec"].get("schedulerName"),
            None
        );
        assert_eq!(
            launcher["template"]["metadata"]["labels"],
            json!({"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(
            launcher["dependsOn"],
            json!([{"name": "node", "status": "Ready"}])
        );
        let init = &launcher["template"]["spec"]["template"]["spec"]["initContainers"][0];
        assert_eq!(
            init["command"][2],
            "set -e\ncp /tmp/mpi-ssh-raw/* /root/.ssh/"
        );
    }

    #[test]
    fn empty_scheduler_name_injects_nothing() {
        let rt = mpi_runtime_with(json!({"schedulerName": "", "queue": "q"}));
        assert_eq!(rt, mpi_runtime_with(Value::Null));
    }

    #[test]
    fn mpi_worker_and_launcher_shapes() {
        let rt = mpi_runtime_with(Value::Null);
        assert_eq!(
            rt["spec"]["mlPolicy"],
            json!({"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": 8, "sshAuthMountPath": "/tmp/mpi-ssh-raw"}})
        );
        assert_eq!(
            rt["metadata"]["labels"],
            json!({"app": "nccl-all-reduce", "trainer.kubeflow.org/framework": "mpi"})
        );
        let worker = replicated(&rt, "node")["template"]["spec"]["template"]["spec"].clone();
        assert_eq!(worker["restartPolicy"], "OnFailure");
        let c = &worker["containers"][0];
        // Security context, probe and script are the fixture row's, placed on the worker.
        assert_eq!(
            c["securityContext"],
            json!({"capabilities": {"add": ["IPC_LOCK"]}})
        );
        assert_eq!(
            c["readinessProbe"],
            json!({"exec": {"command": ["ssh", "127.0.0.1", "true"]}, "periodSeconds": 30})
        );
        assert_eq!(
            c["command"],
            json!([
                "sh",
                "-c",
                "install sshd\ncp /tmp/mpi-ssh-raw/* /root/.ssh/\nexec /usr/sbin/sshd -De"
            ])
        );
        assert_eq!(
            c["env"][8],
            json!({"name": "NCCL_MNNVL_ENABLE", "value": "0"})
        );
        let launcher = replicated(&rt, "launcher")["template"]["spec"]["template"]["spec"].clone();
        assert_eq!(
            launcher["containers"],
            json!([{
                "name": "node",
                "image": "nvcr.io/nvidia/pytorch:26.01-py3",
                "env": c["env"],
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                "volumeMounts": [
                    {"name": "mpi-ssh-auth", "mountPath": "/tmp/mpi-ssh-raw", "readOnly": true},
                    {"name": "ssh-keys", "mountPath": "/root/.ssh"},
                ],
            }])
        );
        assert_eq!(
            launcher["volumes"],
            json!([{"name": "ssh-keys", "emptyDir": {}}])
        );
    }

    #[test]
    fn mpi_init_containers_run_on_the_workers_before_sshd() {
        let wr = all_reduce(json!({"initContainers": [{"name": "prep", "image": "busybox"}]}));
        let merged = crate::build::merge_env(&base_nccl_env(false), &[]);
        let rt = build_runtime(&wr, &params(), &merged, 4);
        let worker = &replicated(&rt, "node")["template"]["spec"]["template"]["spec"];
        assert_eq!(
            worker["initContainers"],
            json!([{"name": "prep", "image": "busybox"}])
        );
        let keys: Vec<&str> = worker
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            ["restartPolicy", "initContainers", "containers", "volumes"]
        );
        let launcher = &replicated(&rt, "launcher")["template"]["spec"]["template"]["spec"];
        assert_eq!(launcher["initContainers"][0]["name"], "fix-ssh-permissions");
        assert_eq!(launcher["initContainers"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn torch_runtime_full_shape_under_kai() {
        let wr = run(json!({
            "metadata": {"name": "wr"},
            "spec": {
                "image": "img",
                "numNodes": 2,
                "framework": {"torch": {"script": "train.py"}},
                "gangScheduler": {"schedulerName": "kai-scheduler"},
                "config": {"inline": {"a.yaml": "x: 1"}},
                "initContainers": [{"name": "prep", "image": "busybox"}],
            },
        }));
        let env = [EnvVar::new("A", "1")];
        assert_eq!(
            build_runtime(&wr, &params(), &env, 2),
            json!({
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainingRuntime",
                "metadata": {
                    "name": "wr-runtime",
                    "labels": {"app": "wr", "trainer.kubeflow.org/framework": "torch"},
                },
                "spec": {
                    "mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": 8}},
                    "template": {"spec": {"replicatedJobs": [{
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {
                                "app": "wr",
                                "kai.scheduler/queue": "default-queue",
                                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
                            }},
                            "spec": {"template": {
                                "metadata": {"labels": {"kai.scheduler/queue": "default-queue"}},
                                "spec": {
                                    "schedulerName": "kai-scheduler",
                                    "terminationGracePeriodSeconds": 30,
                                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                                    "initContainers": [{"name": "prep", "image": "busybox"}],
                                    "containers": [{
                                        "name": "node",
                                        "image": "img",
                                        "env": [{"name": "A", "value": "1"}],
                                        "resources": {
                                            "limits": {"nvidia.com/gpu": "8"},
                                            "requests": {"nvidia.com/gpu": "8"},
                                        },
                                        "volumeMounts": [
                                            {"name": "dshm", "mountPath": "/dev/shm"},
                                            {"name": "config-volume", "mountPath": "/config"},
                                        ],
                                    }],
                                    "volumes": [
                                        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                                        {"name": "config-volume", "configMap": {"name": "wr-config", "defaultMode": 493}},
                                    ],
                                },
                            }},
                        },
                    }]}},
                },
            })
        );
    }

    #[test]
    fn torch_runtime_without_gang_has_no_pod_metadata() {
        let wr = run(json!({
            "metadata": {"name": "wr"},
            "spec": {"image": "img", "numNodes": 2, "framework": {"torch": {"script": "t.py"}}},
        }));
        let rt = build_runtime(&wr, &params(), &[], 2);
        let node = replicated(&rt, "node");
        assert_eq!(
            node["template"]["metadata"]["labels"],
            json!({"app": "wr", "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        );
        assert_eq!(node["template"]["spec"]["template"].get("metadata"), None);
        assert_eq!(
            node["template"]["spec"]["template"]["spec"].get("schedulerName"),
            None
        );
    }

    #[test]
    fn example_build_runtime() -> Result<(), Box<dyn std::error::Error>> {
        use crate::api::WorkloadRun;
        use crate::build::{BuildParams, build_runtime};
        let run: WorkloadRun = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo"},
            "spec": {"image": "img", "numNodes": 2, "framework": {"torch": {"script": "train.py"}}},
        }))?;
        let params = BuildParams {
            gpus_per_node: 8,
            base_env: vec![crate::api::EnvVar::new("NCCL_DEBUG", "INFO")],
            platform_mpi_args: vec![],
            pre_command: vec![],
            templates: crate::build::fixtures::templates(""),
            gang_defaults: crate::build::fixtures::gang_defaults(),
            scale: crate::detect::TestScale::default(),
        };
        let runtime = build_runtime(&run, &params, &[], 2);
        assert_eq!(runtime["metadata"]["name"], "demo-runtime");
        assert_eq!(runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"], 8);
        Ok(())
    }
}
