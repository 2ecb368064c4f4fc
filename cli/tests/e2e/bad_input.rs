//! The bad-input suite: hostile or wrong input, each case asserting the exit code, the exact
//! stderr and (for a refused command) an empty stdout. Inputs are written to `in.yaml` in a
//! temporary directory that is the command's working directory, so messages name `in.yaml`.

use super::util::*;

/// Runs the binary in a fresh directory holding `in.yaml` = `input`; `(code, stdout, stderr)`.
fn run_in(args: &[&str], input: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.yaml"), input).expect("write input");
    let out = bin()
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A WorkloadRun named `t` with `spec` (YAML lines indented by two spaces) after the
/// `image`/`numNodes` lines.
fn run_yaml(spec: &str) -> String {
    format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {{name: t}}\nspec:\n  image: i\n  numNodes: 1\n{spec}"
    )
}

/// One case: the command's args (the input is `in.yaml`), the input, the exit code, the exact
/// stderr; stdout must be empty.
macro_rules! refused {
    ($name:ident, [$($arg:expr),*], $input:expr, $code:expr, $stderr:expr) => {
        #[test]
        fn $name() {
            let (code, stdout, stderr) = run_in(&[$($arg),*], &$input);
            assert_eq!((code, stderr.as_str()), ($code, $stderr));
            assert_eq!(stdout, "");
        }
    };
}

// ---- command lines ------------------------------------------------------------------------

refused!(
    nul_in_exec_command_check,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [\"a\\0b\"]}}\n"),
    2,
    "Error: in.yaml:7:32: spec.framework.exec.command[0]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);

refused!(
    nul_in_env_value_render,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framework: {exec: {command: [a]}}\n  env: [{name: A, value: \"x\\0\"}]\n"),
    2,
    "Error: in.yaml:8:9: spec.env[0]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);

// ---- strict field validation: metadata and the Kubernetes types passed through ------------

refused!(
    metadata_typo_is_an_unknown_field,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  nmespace: team-a\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:5:3: strict decoding error: unknown field \"metadata.nmespace\": correct or remove it\n"
);

refused!(
    every_unknown_field_is_listed,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  lables: {a: b}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  initContainers: [{name: p, imag: busybox, resources: {limts: {cpu: 1}}}]\n",
    2,
    "Error: in.yaml:5:3: strict decoding error: unknown field \"metadata.lables\", unknown field \"spec.initContainers[0].imag\", unknown field \"spec.initContainers[0].resources.limts\": correct or remove them\n"
);

refused!(
    workflow_metadata_is_validated_too,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata:\n  name: t\n  annotatons: {a: b}\nspec: {}\n",
    2,
    "Error: in.yaml:5:3: strict decoding error: unknown field \"metadata.annotatons\": correct or remove it\n"
);

refused!(
    metadata_label_value_of_the_wrong_type,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  labels: [a]\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:5:3: parsing WorkloadRun: metadata.labels: invalid type: list, expected a mapping\n"
);

refused!(
    empty_resources_list_is_an_error,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framework: {exec: {command: [a]}}\n  resources: []\n"),
    2,
    "Error: in.yaml:8:3: spec.resources: invalid type: list, expected a mapping (Kubernetes ResourceRequirements)\n"
);

refused!(
    resources_limits_list_is_an_error,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  resources: {limits: [1]}\n"),
    2,
    "Error: in.yaml:8:15: spec.resources.limits: invalid type: list, expected a mapping\n"
);

refused!(
    resources_typo_is_an_unknown_field,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  resources: {limit: {cpu: 1}}\n"),
    2,
    "Error: in.yaml:8:15: strict decoding error: unknown field \"spec.resources.limit\": correct or remove it\n"
);

refused!(
    volume_source_of_the_wrong_type,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  volumes: [{name: v, emptyDir: 3}]\n"),
    2,
    "Error: in.yaml:8:23: spec.volumes[0].emptyDir: invalid type: integer `3`, expected a mapping (Kubernetes EmptyDirVolumeSource)\n"
);

refused!(
    volume_mount_path_of_the_wrong_type,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  volumeMounts: [{name: v, mountPath: [x]}]\n"),
    2,
    "Error: in.yaml:8:28: spec.volumeMounts[0].mountPath: invalid type: list, expected a string\n"
);

refused!(
    pull_secret_as_a_bare_name,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  imagePullSecrets: [regcred]\n"),
    2,
    "Error: in.yaml:8:22: spec.imagePullSecrets[0]: invalid type: string \"regcred\", expected a mapping (Kubernetes LocalObjectReference)\n"
);

refused!(
    env_value_from_typo,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k, optionall: true}}}]\n"
    ),
    2,
    "Error: in.yaml:8:63: strict decoding error: unknown field \"spec.env[0].valueFrom.secretKeyRef.optionall\": correct or remove it\n"
);

refused!(
    init_container_of_the_wrong_type,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  initContainers: [busybox]\n"),
    2,
    "Error: in.yaml:8:20: spec.initContainers[0]: invalid type: string \"busybox\", expected a mapping (Kubernetes Container)\n"
);

/// A real object as `kubectl get -o yaml` prints it (server-set metadata) passes.
#[test]
fn server_set_metadata_is_accepted() {
    let (code, stdout, stderr) = run_in(
        &["check", "in.yaml"],
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  namespace: a\n  uid: 7d9c\n  resourceVersion: \"12\"\n  generation: 1\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n  managedFields: [{manager: kubectl, operation: Update, fieldsType: FieldsV1, fieldsV1: {f:spec: {}}}]\n  finalizers: [x]\n  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: o, uid: u}]\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    );
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "", ""));
}

// ---- nothing dropped ----------------------------------------------------------------------

/// The worker pod spec(s) of a render: the TrainingRuntime's replicated job `node`.
fn worker_pod(run: &str) -> serde_json::Value {
    let (code, stdout, stderr) = run_in(
        &[
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "-o",
            "json",
            "in.yaml",
        ],
        run,
    );
    assert_eq!(code, 0, "{stderr}");
    let wf: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let rt = wf["spec"]["dependencies"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["kind"] == "TrainingRuntime"))
        .cloned()
        .expect("runtime");
    rt["spec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .and_then(|j| j.iter().find(|j| j["name"] == "node"))
        .map(|j| j["template"]["spec"]["template"]["spec"].clone())
        .expect("node job")
}

#[test]
fn init_containers_reach_the_workers_of_every_framework() {
    let init = "  initContainers: [{name: prep, image: busybox, command: [sh, -c, 'echo ok']}]\n";
    let want = serde_json::json!([{"name": "prep", "image": "busybox", "command": ["sh", "-c", "echo ok"]}]);
    for framework in [
        "  framework: {torch: {script: train.py}}\n",
        "  framework: {mpi: {binary: /b, mpirunPath: /usr/bin/mpirun}}\n",
        "  framework: {exec: {command: [a]}}\n",
    ] {
        let pod = worker_pod(&run_yaml(&format!("{framework}{init}")));
        assert_eq!(pod["initContainers"], want, "{framework}");
    }
}

#[test]
fn empty_resources_mapping_keeps_the_gpu_request() {
    let pod = worker_pod(&run_yaml(
        "  framework: {exec: {command: [a]}}\n  resources: {}\n",
    ));
    assert_eq!(
        pod["containers"][0]["resources"],
        serde_json::json!({
            "limits": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": 32},
            "requests": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": 32},
        })
    );
}
