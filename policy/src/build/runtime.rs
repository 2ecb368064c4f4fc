//! The TrainingRuntime a WorkloadRun needs: the torch or MPI runtime (worker and launcher
//! replicated jobs, the SSH bootstrap scripts, gang-scheduling labels and scheduler name,
//! volumes and GPU resources). `exec` runs on the torch runtime.

use serde_json::{Map, Value, json};

use super::{
    ANCESTOR_STEP_LABEL, BuildParams, FRAMEWORK_LABEL, GPU_RESOURCE, KAI_WAIT_SLEEP_SECONDS,
    KAI_WAIT_TRIES, SSH_RAW_PATH, TRAINER_API_VERSION, label_map, queue_label,
};
use crate::api::{EnvVar, FrameworkType, GangSchedulerSpec, KAI_SCHEDULER, WorkloadRun};

/// The generated TrainingRuntime dependency `<run>-runtime`, with the
/// gang scheduler's labels and `schedulerName` injected and, under KAI, the launcher waiting
/// for the workers instead of depending on them. `exec` reuses the torch
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
        .and_then(GangSchedulerSpec::resolved);
    match run.spec.framework.kind() {
        FrameworkType::Mpi => mpi_runtime(run, params, merged_env, gang.as_ref()),
        FrameworkType::Torch | FrameworkType::Exec => {
            torch_runtime(run, params, merged_env, nodes_per_job, gang.as_ref())
        }
    }
}

/// Runtime metadata: `<run>-runtime`, labels `app` and the framework label.
pub(super) fn runtime_metadata(run_name: &str, framework: &str) -> Value {
    json!({
        "name": format!("{run_name}-runtime"),
        "labels": label_map([(FRAMEWORK_LABEL, framework), ("app", run_name)]),
    })
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
    let (user_vols, user_mounts) = user_volumes(run);
    let mut volumes = vec![json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})];
    volumes.extend(user_vols);
    let mut mounts = vec![json!({"name": "dshm", "mountPath": "/dev/shm"})];
    mounts.extend(user_mounts);
    let container = json!({
        "name": "node",
        "image": run.spec.image,
        "env": merged_env,
        "resources": worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        "volumeMounts": mounts,
    });
    let mut fields = vec![
        ("terminationGracePeriodSeconds", json!(30)),
        (
            "securityContext",
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
        ),
    ];
    if !run.spec.init_containers.is_empty() {
        fields.push(("initContainers", json!(run.spec.init_containers)));
    }
    fields.push(("containers", json!([container])));
    fields.push(("volumes", json!(volumes)));
    let job_labels = label_map(
        [(ANCESTOR_STEP_LABEL, "trainer"), ("app", name)]
            .into_iter()
            .chain(queue_label(gang)),
    );
    let node = replicated_job("node", None, Some(job_labels), pod_template(gang, fields));
    json!({
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": runtime_metadata(name, "torch"),
        "spec": {
            "mlPolicy": {
                "numNodes": nodes_per_job,
                "torch": {"numProcPerNode": params.gpus_per_node},
            },
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    })
}

/// Copies the Trainer's ssh material from the read-only secret mount into `/root/.ssh` with the
/// modes sshd insists on.
pub(super) const SSH_KEY_COPY: &str = "mkdir -p /root/.ssh
cp /tmp/mpi-ssh-raw/* /root/.ssh/
chmod 700 /root/.ssh
chmod 600 /root/.ssh/*
for f in /root/.ssh/*.pub /root/.ssh/authorized_keys; do
  if [ -e \"$f\" ]; then chmod 644 \"$f\"; fi
done";

/// The worker's `sh -c` bootstrap: sshd (installed only when missing), keys, then sshd in the
/// foreground.
pub(super) fn worker_bootstrap_script() -> String {
    format!(
        "set -e
if [ ! -x /usr/sbin/sshd ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server
fi
mkdir -p /var/run/sshd
{SSH_KEY_COPY}
ssh-keygen -A
exec /usr/sbin/sshd -De"
    )
}

/// ssh options for unattended loopback and worker probes.
pub(super) const SSH_PROBE_OPTIONS: &str = "-o BatchMode=yes -o StrictHostKeyChecking=no \
-o UserKnownHostsFile=/dev/null -o ConnectTimeout=5";

/// The launcher's `fix-ssh-permissions` script; under KAI it then waits for every worker in
/// `/etc/mpi/hostfile` but itself to accept ssh.
pub(super) fn launcher_init_script(kai: bool) -> String {
    let mut script = format!("set -e\n{SSH_KEY_COPY}");
    if kai {
        script.push_str(&format!(
            "
# kai-scheduler: the launcher has no dependsOn on the workers (KAI refuses a PodGroup with an
# empty sub-group), so wait here until every worker accepts ssh.
if [ ! -r /etc/mpi/hostfile ]; then
  echo \"fix-ssh-permissions: /etc/mpi/hostfile is missing, so the workers cannot be awaited\" >&2
  exit 1
fi
self=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)
hosts=\"\"
for h in $(awk '{{print $1}}' /etc/mpi/hostfile); do
  h=${{h%%:*}}
  if [ \"$h\" != \"$self\" ] && [ \"${{h%%.*}}\" != \"$self\" ]; then hosts=\"$hosts $h\"; fi
done
tries=0
while :; do
  pending=\"\"
  for h in $hosts; do
    if ! ssh {SSH_PROBE_OPTIONS} \"$h\" true >/dev/null 2>&1; then pending=\"$pending $h\"; fi
  done
  if [ -z \"$pending\" ]; then break; fi
  tries=$((tries + 1))
  if [ \"$tries\" -ge {KAI_WAIT_TRIES} ]; then
    echo \"fix-ssh-permissions: worker(s)$pending did not accept ssh after {KAI_WAIT_TRIES} tries {KAI_WAIT_SLEEP_SECONDS}s apart. Under kai-scheduler the launcher starts without waiting for the workers to be Ready, so it waits for them here; check that the worker pods were scheduled and that sshd runs in them.\" >&2
    exit 1
  fi
  sleep {KAI_WAIT_SLEEP_SECONDS}
done"
        ));
    }
    script
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
    let kai = gang.is_some_and(|g| g.scheduler_name == KAI_SCHEDULER);
    let ssh_auth_mount =
        json!({"name": "mpi-ssh-auth", "mountPath": SSH_RAW_PATH, "readOnly": true});
    let ssh_keys_mount = json!({"name": "ssh-keys", "mountPath": "/root/.ssh"});

    let (user_vols, user_mounts) = user_volumes(run);
    let mut worker_volumes = vec![json!({"name": "dshm", "emptyDir": {"medium": "Memory"}})];
    worker_volumes.extend(user_vols);
    let mut worker_mounts = vec![
        ssh_auth_mount.clone(),
        json!({"name": "dshm", "mountPath": "/dev/shm"}),
    ];
    worker_mounts.extend(user_mounts);
    let probe: Vec<String> = std::iter::once("ssh")
        .chain(SSH_PROBE_OPTIONS.split(' '))
        .chain(["127.0.0.1", "true"])
        .map(str::to_string)
        .collect();
    let worker_container = json!({
        "name": "node",
        "image": image,
        "command": ["sh", "-c", worker_bootstrap_script()],
        "env": merged_env,
        "resources": worker_resources(run.spec.resources.as_ref(), params.gpus_per_node),
        "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_CHROOT"]}},
        "readinessProbe": {
            "exec": {"command": probe},
            "initialDelaySeconds": 5,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
        },
        "volumeMounts": worker_mounts,
    });
    let worker = replicated_job(
        "node",
        None,
        queue_label(gang).map(|q| label_map([q])),
        pod_template(
            gang,
            vec![
                ("restartPolicy", json!("OnFailure")),
                ("containers", json!([worker_container])),
                ("volumes", json!(worker_volumes)),
            ],
        ),
    );

    let mut init_mounts = vec![ssh_auth_mount.clone(), ssh_keys_mount.clone()];
    if kai {
        init_mounts
            .push(json!({"name": "mpi-hostfile", "mountPath": "/etc/mpi", "readOnly": true}));
    }
    let init = json!({
        "name": "fix-ssh-permissions",
        "image": image,
        "command": ["sh", "-c", launcher_init_script(kai)],
        "volumeMounts": init_mounts,
    });
    let launcher_container = json!({
        "name": "node",
        "image": image,
        "env": merged_env,
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "volumeMounts": [ssh_auth_mount, ssh_keys_mount],
    });
    let launcher = replicated_job(
        "launcher",
        (!kai).then(|| json!([{"name": "node", "status": "Ready"}])),
        Some(label_map(
            std::iter::once((ANCESTOR_STEP_LABEL, "trainer")).chain(queue_label(gang)),
        )),
        pod_template(
            gang,
            vec![
                ("restartPolicy", json!("OnFailure")),
                ("initContainers", json!([init])),
                ("containers", json!([launcher_container])),
                ("volumes", json!([{"name": "ssh-keys", "emptyDir": {}}])),
            ],
        ),
    );
    json!({
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": runtime_metadata(name, "mpi"),
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "mpiImplementation": "OpenMPI",
                    "numProcPerNode": params.gpus_per_node,
                    "sshAuthMountPath": SSH_RAW_PATH,
                },
            },
            "template": {"spec": {
                "network": {"publishNotReadyAddresses": true},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "replicatedJobs": [worker, launcher],
            }},
        },
    })
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
        job_template.insert("metadata".to_string(), json!({"labels": labels}));
    }
    job_template.insert("spec".to_string(), json!({"template": pod_template}));
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
            json!({"labels": label_map([queue])}),
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
        let script = init["command"][2].as_str().unwrap();
        assert!(script.contains("awk '{print $1}' /etc/mpi/hostfile"));
        assert!(script.contains("if [ \"$tries\" -ge 240 ]; then"));
        assert!(script.contains("sleep 5\n"));
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
        assert!(!init["command"][2].as_str().unwrap().contains("hostfile"));
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
        assert_eq!(
            c["securityContext"],
            json!({"capabilities": {"add": ["IPC_LOCK", "SYS_CHROOT"]}})
        );
        assert_eq!(c["readinessProbe"]["initialDelaySeconds"], 5);
        assert_eq!(c["readinessProbe"]["periodSeconds"], 30);
        assert_eq!(c["readinessProbe"]["timeoutSeconds"], 10);
        assert_eq!(c["command"][0], "sh");
        assert!(
            c["command"][2]
                .as_str()
                .unwrap()
                .ends_with("exec /usr/sbin/sshd -De")
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
        use crate::build::{BuildParams, DEFAULT_TIMEOUT_PER_JOB, build_runtime};
        let run: WorkloadRun = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo"},
            "spec": {"image": "img", "numNodes": 2, "framework": {"torch": {"script": "train.py"}}},
        }))?;
        let params = BuildParams {
            gpus_per_node: 8,
            base_env: vec![crate::api::EnvVar::new("NCCL_DEBUG", "INFO")],
            platform_mpi_args: vec![],
            pre_command: vec![],
            default_timeout_per_job: DEFAULT_TIMEOUT_PER_JOB.to_string(),
            scale: crate::detect::TestScale::default(),
        };
        let runtime = build_runtime(&run, &params, &[], 2);
        assert_eq!(runtime["metadata"]["name"], "demo-runtime");
        assert_eq!(runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"], 8);
        Ok(())
    }
}
