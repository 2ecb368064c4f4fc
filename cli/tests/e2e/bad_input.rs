//! The bad-input suite: hostile or wrong input, each case asserting the exit code, the exact
//! stderr and (for a refused command) an empty stdout. Inputs are written to `in.yaml` in a
//! temporary directory that is the command's working directory, so messages name `in.yaml`.

use super::util::*;

/// `stderr` without `check`'s closing `Summary: …` line (the conventions suite pins that line);
/// for `check`, asserts the line is there, once, last.
fn without_summary(args: &[&str], stderr: &str) -> String {
    let summaries = stderr
        .lines()
        .filter(|l| l.starts_with("Summary: "))
        .count();
    if args.first() == Some(&"check") {
        assert_eq!(summaries, 1, "one summary line expected:\n{stderr}");
        assert!(
            stderr
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("Summary: ")),
            "the summary line comes last:\n{stderr}"
        );
    }
    stderr
        .lines()
        .filter(|l| !l.starts_with("Summary: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs the binary in a fresh directory holding `in.yaml` = `input`; `(code, stdout, stderr)`,
/// stderr without `check`'s summary line ([`without_summary`]).
fn run_in(args: &[&str], input: impl AsRef<[u8]>) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.yaml"), input.as_ref()).expect("write input");
    let out = bin()
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        without_summary(args, &String::from_utf8_lossy(&out.stderr)),
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
            assert_eq!((code, stderr.as_str()), ($code, AsRef::<str>::as_ref(&$stderr)));
            assert_eq!(stdout, "");
        }
    };
}

// ---- lists where the schema wants a mapping ------------------------------------------------
// serde's derived readers take a list's items as a struct's fields in declaration order; the
// API server refuses such a manifest, and so do we, before anything is read by position.

refused!(
    a_list_for_an_env_entry,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [a]}}\n  env: [[A, b]]\n"),
    2,
    "Error: in.yaml:8:9: parsing WorkloadRun: spec.env[0]: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_the_target_render,
    ["render", "--platform", "aws", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  target: [{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}]\n"
    ),
    2,
    "Error: in.yaml:8:3: parsing WorkloadRun: spec.target: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_a_framework,
    ["check", "in.yaml"],
    run_yaml("  framework: {mpi: [/b, /m]}\n"),
    2,
    "Error: in.yaml:7:15: parsing WorkloadRun: spec.framework.mpi: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_the_spec,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec: []\n",
    2,
    "Error: in.yaml:4:1: parsing WorkloadRun: spec: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_the_orchestration_and_workload_metadata,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  workloadMetadata: [{kueue.x-k8s.io/queue-name: q}]\n  orchestration: [Unpinned]\n"
    ),
    2,
    "Error: in.yaml:8:3: parsing WorkloadRun: spec.workloadMetadata: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_a_workflow_spec,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec: [1]\n",
    2,
    "Error: in.yaml:4:1: parsing Workflow: spec: invalid type: list, expected a mapping\n"
);

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
    a_misspelt_workflow_orchestration_or_job_spec_field_is_an_unknown_field,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  jobTemplate:\n    spec:\n      workload: {trainJob: {}}\n      nodeHealthMonitr: {}\n  orchestration:\n    placment: Unpinned\n    execution: {timeoutPerJb: 1h}\n    target: {nodeSelectr: {a: b}}\n",
    2,
    "Error: in.yaml:8:7: strict decoding error: unknown field \"spec.jobTemplate.spec.nodeHealthMonitr\", unknown field \"spec.orchestration.placment\", unknown field \"spec.orchestration.execution.timeoutPerJb\", unknown field \"spec.orchestration.target.nodeSelectr\": correct or remove them\n"
);

refused!(
    a_misspelt_field_of_an_override_is_an_unknown_field,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  overrides:\n    - when: {platform: {equals: aws}}\n      orchestration: {placment: Unpinned, diagnose: {}}\n      jobTemplate: {spec: {workloadMetadat: {labels: {a: b}}}}\n"
    ),
    2,
    "Error: in.yaml:10:23: strict decoding error: unknown field \"spec.overrides[0].orchestration.placment\", unknown field \"spec.overrides[0].orchestration.diagnose\", unknown field \"spec.overrides[0].jobTemplate.spec.workloadMetadat\": correct or remove them\n"
);

refused!(
    a_misspelt_api_group_is_refused_by_check_as_by_render,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.co/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec: {entrypoint: main}\n",
    2,
    "Error: in.yaml:1:13: expected apiVersion nvcre.nvidia.com/v1alpha1 (or the older cre.nvidia.com/v1alpha1), got \"nvcre.nvidia.co/v1alpha1\"\n"
);

refused!(
    a_dotted_key_of_the_wrong_type_is_bracketed_and_pointed_at_its_value,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  target:\n    nodeSelector:\n      nvidia.com/gpu.present: 1\n"
    ),
    2,
    "Error: in.yaml:10:31: parsing WorkloadRun: spec.target.nodeSelector[\"nvidia.com/gpu.present\"]: expected a string, got the number 1: YAML reads the unquoted value as a number; quote it\n"
);

refused!(
    a_workflow_type_error_is_pointed_at_its_value_in_the_same_words,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  jobTemplate: {spec: {workload: {trainJob: {}}}}\n  orchestration:\n    execution: {maxConcurrent: 2.5}\n    target: {nodeSelector: {nvidia.com/gpu.present: true}}\n",
    2,
    "Error: in.yaml:7:32: parsing Workflow: spec.orchestration.execution.maxConcurrent: expected an integer, got 2.5\n"
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
    a_resource_quantity_that_does_not_parse_is_refused_at_its_value,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  initContainers: [{name: p, image: b, resources: {requests: {memory: 1Gi}}}]\n  resources: {limits: {cpu: 2, memory: lots}}\n"
    ),
    2,
    "Error: in.yaml:9:40: spec.resources.limits.memory: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'\n"
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

// ---- budgets ------------------------------------------------------------------------------

refused!(
    nesting_deeper_than_the_limit,
    ["check", "in.yaml"],
    format!("a: {}{}\n", "[".repeat(70), "]".repeat(70)),
    2,
    "Error: in.yaml:1:67: the document nests mappings and lists deeper than the limit of 64 levels (--max-depth)\n"
);

refused!(
    depth_flag_lowers_the_limit,
    ["--max-depth", "3", "check", "in.yaml"],
    "a: {b: {c: {d: 1}}}\n",
    2,
    "Error: in.yaml:1:12: the document nests mappings and lists deeper than the limit of 3 levels (--max-depth)\n"
);

refused!(
    more_aliases_than_the_limit,
    ["--max-aliases", "2", "check", "in.yaml"],
    "a: &x [1]\nb: [*x, *x, *x]\n",
    2,
    "Error: in.yaml:2:13: the document uses more than the limit of 2 aliases (--max-aliases)\n"
);

refused!(
    more_yaml_nodes_than_the_limit,
    ["--max-yaml-nodes", "5", "check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b, c: d}\n",
    2,
    "Error: in.yaml:3:1: the document has more than the limit of 5 YAML nodes (--max-yaml-nodes)\n"
);

refused!(
    a_document_larger_than_the_limit,
    ["--max-document-bytes", "64", "check", "in.yaml"],
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{k: {}}}\n",
        "x".repeat(100)
    ),
    2,
    "Error: in.yaml:1:1: document 1 is larger than the limit of 64 bytes (--max-document-bytes); the rest of the input is not read\n"
);

refused!(
    the_budgets_are_per_document,
    [
        "--max-document-bytes",
        "80",
        "--max-yaml-nodes",
        "20",
        "check",
        "in.yaml"
    ],
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: b}\n---\n".repeat(300),
    0,
    ""
);

refused!(
    expand_with_a_huge_num_nodes_and_no_nodes_file,
    [
        "render",
        "--expand",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 2147483647\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: --expand without --nodes-file makes up spec.numNodes (2147483647) nodes, more than the limit of 100000 (--max-expand-nodes); give --nodes-file with the real nodes, or raise --max-expand-nodes\n"
);

refused!(
    a_nodes_file_larger_than_the_limit,
    [
        "render",
        "--max-nodes-file-bytes",
        "10",
        "--nodes-file",
        "in.yaml",
        "in.yaml"
    ],
    "apiVersion: v1\nkind: NodeList\nitems: []\n",
    2,
    "Error: in.yaml: larger than the limit of 10 bytes (--max-nodes-file-bytes)\n"
);

refused!(
    a_nodes_file_that_is_not_utf8,
    ["render", "--nodes-file", "in.yaml", "in.yaml"],
    latin1("apiVersion: v1\nkind: NodeList\nitems: []\n# caf\u{e9}\n"),
    2,
    "Error: in.yaml: not UTF-8 text: invalid byte 0xe9 at byte offset 45\n"
);

/// `text` in Latin-1 (one byte per char below U+0100): invalid UTF-8 where a char is above
/// U+007F.
fn latin1(text: &str) -> Latin1 {
    Latin1(
        text.chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
            .collect(),
    )
}

/// Raw bytes for `run_in`.
struct Latin1(Vec<u8>);

impl AsRef<[u8]> for Latin1 {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

refused!(
    a_manifest_that_is_not_utf8_check,
    ["check", "in.yaml"],
    latin1("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: \"caf\u{e9}\"}\n"),
    2,
    "Error: reading in.yaml: not UTF-8 text: invalid byte 0xe9 at byte offset 65 (line 4)\n"
);

refused!(
    a_manifest_that_is_not_utf8_render,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    latin1("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: \"caf\u{e9}\"}\n"),
    2,
    "Error: in.yaml: not UTF-8 text: invalid byte 0xe9 at byte offset 65\n"
);

/// `yes | nvcre-policy check -`: an endless document ends at the per-document limit.
#[test]
fn an_endless_stdin_document_ends_at_the_limit() {
    let mut yes = std::process::Command::new("yes")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("yes runs");
    let stdin = yes.stdout.take().expect("piped");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("nvcre-policy"))
        .args(["check", "-"])
        .stdin(stdin)
        .output()
        .expect("runs");
    let _ = yes.kill();
    let _ = yes.wait();
    assert_eq!(
        (
            out.status.code(),
            without_summary(&["check"], &String::from_utf8_lossy(&out.stderr)).as_str()
        ),
        (
            Some(2),
            "Error: <stdin>:1:1: document 1 is larger than the limit of 3145728 bytes (--max-document-bytes); the rest of the input is not read\n"
        )
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

/// A real-shaped `kubectl get nodes -o yaml` of 400 full Node objects (about 25 KiB and 700
/// YAML nodes each: more than 250,000 in the one NodeList document) is a nodes file.
#[test]
fn a_nodes_file_of_full_node_objects_is_read() {
    let node =
        std::fs::read_to_string(root().join("cli/tests/data/real-node.yaml")).expect("fixture");
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..400 {
        text.push_str(&node.replace("ip-10-0-0-1.ec2.internal", &format!("node-{i}")));
    }
    let example = root()
        .join("examples/nccl-all-reduce.yaml")
        .display()
        .to_string();
    let (code, stdout, stderr) = run_in(
        &["render", "--nodes-file", "in.yaml", "-o", "json", &example],
        &text,
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let wf: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"],
        "aws"
    );
    // One budget for the whole file (no scaling) is what a 250,000-node cap did.
    let (code, stdout, stderr) = run_in(
        &[
            "render",
            "--max-document-bytes",
            "100000000",
            "--nodes-file",
            "in.yaml",
            &example,
        ],
        &text,
    );
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            2,
            "",
            "Error: in.yaml:128328:7: the document has more than the limit of 250000 YAML nodes (--max-yaml-nodes)\n"
        )
    );
}

// ---- files and streams --------------------------------------------------------------------

/// `check --platform aws --gpu-arch h100 -o json d`, run in `dir`.
fn check_d_as_json(dir: &std::path::Path) -> std::process::Output {
    bin()
        .args([
            "check",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "-o",
            "json",
            "d",
        ])
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs")
}

/// `(ruleId, file)` of each finding of a JSON report, in report order.
fn rule_and_file(report: &serde_json::Value) -> Vec<(String, String)> {
    findings(report)
        .as_array()
        .expect("list")
        .iter()
        .map(|f| {
            (
                f["ruleId"].as_str().unwrap_or("").to_string(),
                f["file"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// A directory with a named pipe, a broken symlink, an unparseable file and a file with a
/// finding: the pipe is skipped with a note (it would block forever), every other file is
/// reported, exit 2.
#[cfg(unix)]
#[test]
fn a_directory_walk_skips_pipes_and_reports_every_other_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join("d");
    std::fs::create_dir_all(d.join("sub")).expect("mkdir");
    let status = std::process::Command::new("mkfifo")
        .arg(d.join("pipe.yaml"))
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    std::os::unix::fs::symlink("/nonexistent", d.join("broken.yaml")).expect("symlink");
    std::fs::write(d.join("b.yaml"), "a: [1\n").expect("write");
    std::fs::copy(
        root().join("examples/override-rejected.yaml"),
        d.join("sub/c.yaml"),
    )
    .expect("copy");
    let out = check_d_as_json(dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        without_summary(&["check"], &String::from_utf8_lossy(&out.stderr)),
        "note: skipping d/pipe.yaml: a named pipe (FIFO), not a regular file\n\
         Error: d/b.yaml:1:4: unclosed bracket '['\n\
         Error: reading d/broken.yaml: no such file or directory\n"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        rule_and_file(&report),
        [(
            "workload-queue-label-conflict".to_string(),
            "d/sub/c.yaml".to_string()
        )]
    );
    // Each input error is reported with its file, in path order (stderr too); the other files
    // are still checked.
    let errors: Vec<(String, usize)> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| {
            let n = r["errors"].as_array().map_or(0, Vec::len);
            (n > 0).then(|| (r["file"].as_str().unwrap_or("").to_string(), n))
        })
        .collect();
    assert_eq!(
        errors,
        [
            ("d/b.yaml".to_string(), 1),
            ("d/broken.yaml".to_string(), 1)
        ]
    );
    // Every file the walk found is counted, the one that could not be read too: the summary
    // agrees with the entries of `results` (the pipe, skipped, is neither).
    assert_eq!(
        report["results"].as_array().map(Vec::len),
        Some(3),
        "{report:#}"
    );
    assert_eq!(report["summary"]["files"], 3);
    assert_eq!(report["summary"]["documents"], 1);
}

#[test]
fn a_file_whose_name_is_not_utf8_is_read_in_a_directory_and_named_with_u_fffd() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().join("d");
    std::fs::create_dir_all(&d).expect("mkdir");
    // `café.yaml` in Latin-1: the 0xE9 byte is not UTF-8.
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.yaml");
    std::fs::copy(
        root().join("examples/override-rejected.yaml"),
        d.join(latin1),
    )
    .expect("copy");
    let out = check_d_as_json(dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        without_summary(&["check"], &String::from_utf8_lossy(&out.stderr)),
        ""
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        rule_and_file(&report),
        [(
            "workload-queue-label-conflict".to_string(),
            "d/caf\u{FFFD}.yaml".to_string()
        )]
    );

    // `render` of the directory reads it too: the same Workflow as the file it is a copy of.
    std::fs::remove_file(d.join(latin1)).expect("rm");
    std::fs::copy(root().join("examples/nccl-all-reduce.yaml"), d.join(latin1)).expect("copy");
    let render = |path: &std::path::Path| {
        bin()
            .args(["render", "--gpu-arch", "h100"])
            .arg(path)
            .current_dir(dir.path())
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("runs")
    };
    let from_dir = render(&d);
    let from_file = render(&root().join("examples/nccl-all-reduce.yaml"));
    assert_eq!(
        from_dir.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&from_dir.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&from_dir.stdout),
        String::from_utf8_lossy(&from_file.stdout)
    );
}

// ---- YAML hazards -------------------------------------------------------------------------

refused!(
    duplicate_key_names_both_lines_and_the_path,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  env:\n  - name: A\n    value: x\n    value: y\n"
    ),
    2,
    "Error: in.yaml:11:5: duplicate key \"value\" at spec.env[0].value: first on line 10, again on line 11; keep one\n"
);

refused!(
    duplicate_label_key_in_a_flow_mapping,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t, labels: {a.b/c: x, a.b/c: y}}\n",
    2,
    "Error: in.yaml:3:40: duplicate key \"a.b/c\" at metadata.labels[\"a.b/c\"]: first at 3:30, again at 3:40; keep one\n"
);

/// Unquoted values YAML 1.1 tools read differently, in string fields: warnings that say to
/// quote them; the values are not changed, and quoted ones are not flagged.
#[test]
fn yaml_11_readings_of_string_fields_are_warned_about() {
    let (code, stdout, stderr) = run_in(
        &["check", "-o", "json", "in.yaml"],
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  labels: {team: no, ok: \"yes\"}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  env:\n  - {name: A, value: on}\n  - name: B\n    value: 'off'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    mode: 0755\n    version: 1.10\n    scale: 1e3\n    ok: Y\n",
    );
    // A number where a string belongs is refused by the API server: an error (exit 1).
    assert_eq!((code, stderr.as_str()), (1, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let got: Vec<(String, String, u64)> = findings(&report)
        .as_array()
        .expect("list")
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap_or("").to_string(),
                f["message"].as_str().unwrap_or("").to_string(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let w = |m: &str, line: u64| ("warning".to_string(), m.to_string(), line);
    let e = |m: &str, line: u64| ("error".to_string(), m.to_string(), line);
    assert_eq!(
        got,
        [
            w(
                "metadata.labels.team: the unquoted value no is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"no\")",
                5
            ),
            w(
                "spec.env[0].value: the unquoted value on is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"on\")",
                11
            ),
            e(
                "metadata.annotations.mode: the unquoted value 0755 is meant as a string, but it is the number 755 in YAML, not the text written, and the API server refuses a number here: quote it (\"0755\")",
                20
            ),
            e(
                "metadata.annotations.version: the unquoted value 1.10 is meant as a string, but it is the number 1.1 in YAML, not the text written, and the API server refuses a number here: quote it (\"1.10\")",
                21
            ),
            e(
                "metadata.annotations.scale: the unquoted value 1e3 is meant as a string, but it is the number 1000 in YAML, not the text written, and the API server refuses a number here: quote it (\"1e3\")",
                22
            ),
            w(
                "metadata.annotations.ok: the unquoted value Y is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"Y\")",
                23
            ),
        ]
    );
}

// A tab that indents is reported at the tab, whatever place the parser stopped at: the end of
// the plain scalar on the line before, or the column after the tab.
refused!(
    a_tab_indenting_a_key_after_a_plain_scalar,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n\tc: d\n",
    2,
    "Error: in.yaml:7:1: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

refused!(
    a_tab_indenting_a_block_mapping,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: c\n",
    2,
    "Error: in.yaml:4:1: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

// The parser takes a tab after spaces for separation, so `metadata:` then `  \tname: c` read
// as `metadata: {name: c}`; YAML indents with spaces only and kubectl refuses it: so do we.
refused!(
    a_tab_after_spaces_indenting_a_key,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n    \tname: c\n",
    2,
    "Error: in.yaml:4:5: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

refused!(
    a_tab_after_spaces_indenting_a_list_entry_mapping,
    ["render", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  finalizers:\n  - a\n  - \tb: c\n",
    2,
    "Error: in.yaml:7:5: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

// `- \t- a`: the parser refuses the second `-` ("'-' must be followed by a valid YAML
// whitespace"); the tab after the first is the cause.
refused!(
    a_tab_between_two_list_entries_on_one_line,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  finalizers:\n  - \t- a\n",
    2,
    "Error: in.yaml:6:5: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

// A line after a block scalar indented with spaces then a tab: the parser stops at the key
// after the tab.
refused!(
    a_tab_after_spaces_after_a_block_scalar,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: |\n    line\n  \tx: y\n",
    2,
    "Error: in.yaml:8:3: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces\n"
);

/// Tabs where YAML allows them stay allowed: in a block scalar's content, a flow collection,
/// a quoted scalar's continuation line, after a value indicator, in a comment line.
#[test]
fn tabs_where_yaml_allows_them_are_read() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {a: b,\n    \tc: d}\n  \t# note\ndata:\n  script: |\n    \tindented\n  q: \"x\n  \ty\"\n  v:\ttabbed\n";
    let (_dir, file) = temp_file("in.yaml", input);
    let (code, stdout, stderr) = run(&["check", "-o", "json", &file]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["summary"]["inputErrors"], 0);
    assert_eq!(report["results"][0]["documents"], 1);
}

// A Helm chart's templates are not manifests: their `{{ … }}` actions either break the YAML
// (reported with the line that holds the action) or read as flow mappings used as keys, which
// JSON cannot hold. Both say to render the template first.
const HELM_HINT: &str = "holds a template action ({{ … }}): render a Helm or Go template first (`helm template`) and check its output, and quote a value that starts with {{";

#[test]
fn helm_templates_are_refused_with_what_to_do() {
    let cases = [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\n",
            format!(
                "in.yaml:4:28: while parsing a block mapping, did not find expected key; line 4 {HELM_HINT}"
            ),
        ),
        (
            "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n{{- end }}\n",
            format!("in.yaml:1:3: \"-\" is only valid inside a block; line 1 {HELM_HINT}"),
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  annotations:\n    a: \"{{ .Values.a }}\"\n    {{- toYaml .Values.annotations | nindent 4 }}\n",
            format!("in.yaml:7:7: \"-\" is only valid inside a block; line 7 {HELM_HINT}"),
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
            format!(
                "in.yaml:4:10: a mapping as a mapping key at metadata.name: Kubernetes objects (JSON) have text keys only; write the key as a string; line 4 {HELM_HINT}"
            ),
        ),
    ];
    for (input, want) in cases {
        let (code, stdout, stderr) = run_in(&["check", "in.yaml"], input);
        assert_eq!(
            (code, stderr, stdout),
            (2, format!("Error: {want}\n"), String::new()),
            "{input}"
        );
    }
}

// A list or mapping as a key (YAML allows it) has no JSON form: refused at the key, never read
// as a made-up key.
refused!(
    a_list_as_a_mapping_key,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  ok: v\n  ? [a, b]\n  : d\n",
    2,
    "Error: in.yaml:7:5: a list as a mapping key at data: Kubernetes objects (JSON) have text keys only; write the key as a string\n"
);

// The rules' own `${{ … }}` is not a Go template action.
refused!(
    a_rule_expression_is_no_template_action,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a: ${{ x }}\n",
    2,
    "Error: in.yaml:4:10: mapping values are not allowed in this context\n"
);

// ---- rules and CEL ------------------------------------------------------------------------

/// A rule whose expression fails on a document is a rule error (exit 2) naming the rule, the
/// document and the expression, not a policy violation.
#[test]
fn a_cel_evaluation_error_is_a_rule_error() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("admission/workloadrun.yaml"),
        "  - id: wr-threshold-keys\n",
        "  - id: broken-overload\n    description: adds a string to a number\n    validate:\n      expression: \"object.spec.numNodes + 'a' == 1\"\n      message: m\n\n  - id: wr-threshold-keys\n",
    );
    let example = root()
        .join("examples/nccl-all-reduce.yaml")
        .display()
        .to_string();
    let rules_dir = rules.display().to_string();
    let (code, stdout, stderr) = run_in(
        &["--rules", &rules_dir, "check", "-o", "json", &example],
        "",
    );
    assert_eq!((code, stderr.as_str()), (2, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let findings = findings(&report);
    let f = &findings[0];
    assert_eq!(
        (
            f["ruleId"].as_str(),
            f["ruleError"].as_bool(),
            f["message"].as_str()
        ),
        (
            Some("broken-overload"),
            Some(true),
            Some(
                "rule broken-overload could not be evaluated on document 1: operator '+' does not take 4 (int) and \"a\" (string) (expression: object.spec.numNodes + 'a' == 1) (a rule error, not a policy violation)"
            )
        )
    );
    assert_eq!(findings.as_array().map(Vec::len), Some(1));
}

// ---- CEL cost budgets ----------------------------------------------------------------------

/// What the cost messages say the units are.
const UNITS: &str = "comprehension iterations, the elements they accumulate, 64-byte blocks of the text regex and string functions scan, and the values fieldTypeErrors visits";

/// `(document, ruleId, ruleError, message)` of every finding of a `check -o json` report.
fn finding_rows(stdout: &str) -> Vec<(u64, String, bool, String)> {
    let report: serde_json::Value = serde_json::from_str(stdout).expect("json");
    findings(&report)
        .as_array()
        .expect("an array")
        .iter()
        .map(|f| {
            (
                f["document"].as_u64().unwrap_or(u64::MAX),
                f["ruleId"].as_str().unwrap_or("").to_string(),
                f["ruleError"].as_bool().unwrap_or(false),
                f["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

refused!(
    a_cel_cost_limit_below_what_a_rule_needs,
    [
        "--cel-cost-limit",
        "0",
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framework: {exec: {command: [a]}}\n"),
    2,
    "in.yaml:3:18: metadata.name: rule wr-name could not be evaluated at metadata.name: CEL cost limit exceeded: the expression used more than 0 units (comprehension iterations, the elements they accumulate, 64-byte blocks of the text regex and string functions scan, and the values fieldTypeErrors visits), the per-expression limit; raise it with --cel-cost-limit or simplify the rule (expression: object.?metadata.?name.orValue('').matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(object.?metadata.?name.orValue('')) <= 63) (a rule error, not a policy violation)\n"
);

/// Nested comprehensions over a list of 3,000 env entries (2.7 × 10^10 iterations) stop at the
/// default per-expression limit: a rule error, while the pack's other rules still report.
#[test]
fn a_rule_over_the_cost_limit_is_a_rule_error_and_the_other_rules_still_report() {
    let (_dir, rules) = rules_copy();
    let nested = "object.spec.env.all(a, object.spec.env.all(b, object.spec.env.all(c, a.name != b.name || c.name != '')))";
    edit(
        &rules.join("admission/workloadrun.yaml"),
        "  - id: wr-threshold-keys\n",
        &format!(
            "  - id: env-nested\n    description: compares every env entry with every other, twice\n    validate:\n      expression: \"{nested}\"\n      message: m\n\n  - id: wr-threshold-keys\n"
        ),
    );
    let env: String = (0..3000)
        .map(|i| format!("  - {{name: E{i}, value: v{i}}}\n"))
        .collect();
    let input = run_yaml(&format!(
        "  framework: {{exec: {{command: [a]}}}}\n  gangScheduler: {{schedulerName: kai-scheduler, queue: {}}}\n  env:\n{env}",
        "q".repeat(64)
    ));
    let rules_dir = rules.display().to_string();
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_in(
        &["--rules", &rules_dir, "check", "-o", "json", "in.yaml"],
        input,
    );
    let took = started.elapsed();
    assert_eq!((code, stderr.as_str()), (2, ""));
    assert_eq!(
        finding_rows(&stdout),
        [
            (
                0,
                "wr-gang-queue-length".to_string(),
                false,
                "Too long: may not be more than 63 bytes".to_string()
            ),
            (
                0,
                "env-nested".to_string(),
                true,
                format!(
                    "rule env-nested could not be evaluated on document 1: CEL cost limit exceeded: the expression used more than 1000000 units ({UNITS}), the per-expression limit; raise it with --cel-cost-limit or simplify the rule (expression: {nested}) (a rule error, not a policy violation)"
                )
            ),
        ]
    );
    // Unbounded, it would run for hours; a debug build on a busy machine stops within seconds.
    assert!(took.as_secs() < 120, "took {took:?}");
}

/// A rule pack for kind `Widget`: `widget-pairs` costs n + n² units over n `spec.items`,
/// `widget-pairs-again` the same when `spec.again` is set.
const WIDGET_PACK: &str = "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: widget-cost}\nstage: lint\nmatch:\n  resources: [{apiVersion: example.com/v1, kind: Widget}]\nrules:\n  - id: widget-pairs\n    validate:\n      expression: object.spec.items.all(a, object.spec.items.all(b, a != b || a == b))\n      message: m\n  - id: widget-pairs-again\n    when: has(object.spec.again)\n    validate:\n      expression: object.spec.items.all(a, object.spec.items.all(b, a != b || a == b))\n      message: m\n";

/// A Widget with `n` items (and `spec.again` when `again`).
fn widget(name: &str, n: usize, again: bool) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let again = if again { ", again: true" } else { "" };
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {name}}}\nspec: {{items: [{}]{again}}}\n",
        items.join(", ")
    )
}

/// Each document has its own budget (two documents under it both evaluate); the rules of one
/// document share it; the flags set both limits and the messages name them.
#[test]
fn the_cost_budgets_are_per_expression_and_per_document_and_the_flags_set_them() {
    let (_dir, rules) = rules_copy();
    std::fs::write(rules.join("widget-cost.yaml"), WIDGET_PACK).expect("write pack");
    let rules_dir = rules.display().to_string();
    // 30 items: 930 units a rule; 40 items: 1,640.
    let input = [
        widget("a", 30, false),
        widget("b", 30, false),
        widget("c", 30, true),
        widget("d", 40, false),
    ]
    .join("---\n");
    let args = [
        "--rules",
        &rules_dir,
        "--cel-cost-limit",
        "1000",
        "--cel-document-cost-limit",
        "1500",
        "check",
        "-o",
        "json",
        "in.yaml",
    ];
    let (code, stdout, stderr) = run_in(&args, &input);
    assert_eq!((code, stderr.as_str()), (2, ""));
    let expression = "object.spec.items.all(a, object.spec.items.all(b, a != b || a == b))";
    assert_eq!(
        finding_rows(&stdout),
        [
            (
                2,
                "widget-pairs-again".to_string(),
                true,
                format!(
                    "rule widget-pairs-again could not be evaluated on document 3: CEL cost limit exceeded: the expressions evaluated on this document used more than 1500 units ({UNITS}), the per-document limit; raise it with --cel-document-cost-limit or simplify the rules (expression: {expression}) (a rule error, not a policy violation)"
                )
            ),
            (
                3,
                "widget-pairs".to_string(),
                true,
                format!(
                    "rule widget-pairs could not be evaluated on document 4: CEL cost limit exceeded: the expression used more than 1000 units ({UNITS}), the per-expression limit; raise it with --cel-cost-limit or simplify the rule (expression: {expression}) (a rule error, not a policy violation)"
                )
            ),
        ]
    );
    // The defaults hold all four.
    let (code, stdout, stderr) = run_in(
        &["--rules", &rules_dir, "check", "-o", "json", "in.yaml"],
        &input,
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(finding_rows(&stdout), []);
}

// ---- more cases: pass-through types, budgets, nodes files, files -----------------------

/// The seed example, for commands that need a manifest beside the input under test.
fn example() -> String {
    root()
        .join("examples/nccl-all-reduce.yaml")
        .display()
        .to_string()
}

refused!(
    nul_in_torch_args,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {torch: {script: t.py, args: [ok, \"\\0\"]}}\n",
    2,
    "Error: in.yaml:7:48: spec.framework.torch.args[1]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);

refused!(
    nul_in_mpi_binary_check,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {mpi: {binary: \"/b\\0\", mpirunPath: /m}}\n",
    2,
    "Error: in.yaml:7:29: spec.framework.mpi.binary: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);

refused!(
    volume_mount_typo,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  volumeMounts: [{name: v, mountpath: /x}]\n",
    2,
    "Error: in.yaml:8:28: strict decoding error: unknown field \"spec.volumeMounts[0].mountpath\": correct or remove it\n"
);

refused!(
    init_container_env_value_from_typo,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  initContainers: [{name: p, image: b, env: [{name: A, valueFrom: {fieldref: {fieldPath: x}}}]}]\n",
    2,
    "Error: in.yaml:8:68: strict decoding error: unknown field \"spec.initContainers[0].env[0].valueFrom.fieldref\": correct or remove it\n"
);

refused!(
    resources_requests_list,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  resources: {requests: [cpu]}\n",
    2,
    "Error: in.yaml:8:15: spec.resources.requests: invalid type: list, expected a mapping\n"
);

refused!(
    env_value_from_of_the_wrong_type,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  env: [{name: A, valueFrom: secret}]\n",
    2,
    "Error: in.yaml:8:19: spec.env[0].valueFrom: invalid type: string \"secret\", expected a mapping (Kubernetes EnvVarSource)\n"
);

refused!(
    pull_secret_typo,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  imagePullSecrets: [{nmae: regcred}]\n",
    2,
    "Error: in.yaml:8:23: strict decoding error: unknown field \"spec.imagePullSecrets[0].nmae\": correct or remove it\n"
);

refused!(
    volume_source_typo,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  volumes: [{name: v, emptydir: {}}]\n",
    2,
    "Error: in.yaml:8:23: strict decoding error: unknown field \"spec.volumes[0].emptydir\": correct or remove it\n"
);

refused!(
    metadata_of_the_wrong_type,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: [t]\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:3:1: parsing WorkloadRun: metadata: invalid type: list, expected a mapping\n"
);

/// An unquoted number where a string belongs is the `yaml-quote-it` finding at the value (as
/// `render` reports it), for every such value of the document, not an input error at the
/// first one the typed read meets.
#[test]
fn label_value_a_number_in_a_workloadrun() {
    let (code, stdout, stderr) = run_in(
        &["check", "--color", "never", "in.yaml"],
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t, labels: {v: 1.10, w: true}}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    );
    assert_eq!((code, stderr.as_str()), (1, ""));
    let heads: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("in.yaml:"))
        .collect();
    assert_eq!(
        heads,
        [
            "in.yaml:3:33: error[yaml-quote-it]: metadata.labels.v: the unquoted value 1.10 is meant as a string, but it is the number 1.1 in YAML, not the text written, and the API server refuses a number here: quote it (\"1.10\")",
            "in.yaml:3:42: error[yaml-quote-it]: metadata.labels.w: the unquoted value true is meant as a string, but it is the boolean true in YAML, and the API server refuses a boolean here: quote it (\"true\")",
        ]
    );
}

refused!(
    owner_reference_typo,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t, ownerReferences: [{apiVersion: v1, kind: K, name: o, uid: u, controler: true}]}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:3:82: strict decoding error: unknown field \"metadata.ownerReferences[0].controler\": correct or remove it\n"
);

refused!(
    nesting_too_deep_in_render,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
    2,
    "Error: in.yaml:1:67: the document nests mappings and lists deeper than the limit of 64 levels (--max-depth)\n"
);

refused!(
    more_aliases_than_the_default,
    ["check", "in.yaml"],
    "a: &x 1\nb: [*x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x, *x]\n",
    2,
    "Error: in.yaml:2:4005: the document uses more than the limit of 1000 aliases (--max-aliases)\n"
);

refused!(
    a_later_document_over_budget_keeps_the_first_checked,
    ["--max-yaml-nodes", "12", "check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {a: b, c: d, e: f, g: h}\n",
    2,
    "Error: in.yaml:8:11: the document has more than the limit of 12 YAML nodes (--max-yaml-nodes)\n"
);

refused!(
    nodes_file_items_of_the_wrong_type,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: NodeList\nitems: 3\n",
    2,
    "Error: in.yaml:3:8: node document 1: field items must be a list, found a number\n"
);

refused!(
    nodes_file_document_a_list,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "- a\n- b\n",
    2,
    "Error: in.yaml:1:1: node document 1: field (document) must be an object, found a list\n"
);

refused!(
    nodes_file_metadata_a_string,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: NodeList\nitems:\n- kind: Node\n  metadata: n1\n",
    2,
    "Error: in.yaml:5:13: node document 1: field items[0].metadata must be an object, found a string\n"
);

refused!(
    nodes_file_label_of_the_wrong_type,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: Node\nmetadata: {name: a, labels: {x: [1]}}\n",
    2,
    "Error: in.yaml:3:30: node document 1: field metadata.labels[\"x\"] must be a string, found a list\n"
);

refused!(
    nodes_file_of_another_kind,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
    2,
    "Error: in.yaml:2:7: node document 1: field kind: expected kind Node, NodeList or List, got \"Pod\"\n"
);

refused!(
    nodes_file_syntax_error,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: NodeList\nitems: [\n",
    2,
    "Error: in.yaml:3:8: unclosed bracket '['\n"
);

refused!(
    nodes_file_too_deep,
    [
        "render",
        "--max-depth",
        "4",
        "--nodes-file",
        "in.yaml",
        example().as_str()
    ],
    "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a, labels: {x: {y: {z: 1}}}}\n",
    2,
    "Error: in.yaml:4:31: the document nests mappings and lists deeper than the limit of 4 levels (--max-depth)\n"
);

refused!(
    expand_over_the_flag_limit,
    [
        "render",
        "--expand",
        "--max-expand-nodes",
        "3",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 4\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: --expand without --nodes-file makes up spec.numNodes (4) nodes, more than the limit of 3 (--max-expand-nodes); give --nodes-file with the real nodes, or raise --max-expand-nodes\n"
);

refused!(
    render_of_invalid_utf8_stdin_free_file,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    latin1("apiVersion: v1\n\u{ff}\n"),
    2,
    "Error: in.yaml: not UTF-8 text: invalid byte 0xff at byte offset 15\n"
);

refused!(
    check_a_missing_file,
    ["check", "missing.yaml"],
    "",
    2,
    "Error: reading missing.yaml: no such file or directory\n"
);

refused!(
    render_a_missing_file,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "missing.yaml"
    ],
    "",
    2,
    "Error: reading missing.yaml: no such file or directory\n"
);

refused!(
    duplicate_key_in_a_configmap,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: 1\n  k: 2\n",
    2,
    "Error: in.yaml:6:3: duplicate key \"k\" at data.k: first on line 5, again on line 6; keep one\n"
);

// ---- numbers: every user number read exactly, or refused with its range ------------------

/// A WorkloadRun named `t` with the exec framework and `resources` (YAML lines indented by
/// two spaces).
fn gpu_run(resources: &str) -> String {
    run_yaml(&format!(
        "  framework: {{exec: {{command: [a]}}}}\n{resources}"
    ))
}

/// What a GPU count must be, as every GPU-count message ends.
const GPU_ACCEPTED: &str = "a GPU count is a whole number from 0 to 9223372036854775807, written as a number or a Kubernetes quantity (8, \"8\", \"1k\")";

#[test]
fn a_gpu_count_too_large_to_represent_is_an_input_error() {
    let input = gpu_run("  resources:\n    limits:\n      nvidia.com/gpu: 9223372036854775807k\n");
    let want = format!(
        "Error: in.yaml:10:23: spec.resources.limits[\"nvidia.com/gpu\"]: 9223372036854775807k is too large to represent (above 9223372036854775807): {GPU_ACCEPTED}\n"
    );
    for args in [
        &[
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "in.yaml",
        ][..],
        &["check", "in.yaml"][..],
    ] {
        let (code, stdout, stderr) = run_in(args, &input);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (2, "", want.as_str()),
            "{args:?}"
        );
    }
}

refused!(
    a_gpu_count_that_is_not_whole,
    ["check", "in.yaml"],
    gpu_run(
        "  resources: {requests: {nvidia.com/gpu: \"1.5\"}, limits: {nvidia.com/gpu: \"1.5\"}}\n"
    ),
    2,
    format!(
        "Error: in.yaml:8:42: spec.resources.requests[\"nvidia.com/gpu\"]: 1.5 is not a whole number: {GPU_ACCEPTED}\n"
    )
);

refused!(
    a_negative_gpu_count_in_an_override,
    ["check", "in.yaml"],
    gpu_run(
        "  overrides:\n  - jobTemplate: {spec: {trainer: {resourcesPerNode: {limits: {nvidia.com/gpu: -8}}}}}\n"
    ),
    2,
    format!(
        "Error: in.yaml:9:80: spec.overrides[0].jobTemplate.spec.trainer.resourcesPerNode.limits[\"nvidia.com/gpu\"]: -8 is negative: {GPU_ACCEPTED}\n"
    )
);

refused!(
    a_gpu_count_in_a_workflow_that_is_not_a_quantity,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: t}\nspec:\n  jobTemplate:\n    spec:\n      trainer:\n        resourcesPerNode: {limits: {nvidia.com/gpu: eight}}\n",
    2,
    format!(
        "Error: in.yaml:8:53: spec.jobTemplate.spec.trainer.resourcesPerNode.limits[\"nvidia.com/gpu\"]: eight is not a Kubernetes quantity: {GPU_ACCEPTED}\n"
    )
);

/// One GPU node named `a` whose `status` is `status` (YAML lines indented by two spaces).
fn gpu_node(status: &str) -> String {
    format!(
        "apiVersion: v1\nkind: NodeList\nitems:\n- kind: Node\n  metadata:\n    name: a\n    labels: {{nvidia.com/gpu.present: \"true\", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}\n  status:\n{status}"
    )
}

refused!(
    a_nodes_file_gpu_allocatable_too_large,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    gpu_node("    allocatable:\n      nvidia.com/gpu: 9223372036854775807k\n"),
    2,
    format!(
        "Error: in.yaml:10:23: items[0].status.allocatable[\"nvidia.com/gpu\"]: 9223372036854775807k is too large to represent (above 9223372036854775807): {GPU_ACCEPTED}\n"
    )
);

refused!(
    a_nodes_file_gpu_capacity_that_is_not_whole,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    gpu_node("    allocatable: {nvidia.com/gpu: \"8\"}\n    capacity: {nvidia.com/gpu: 8.5}\n"),
    2,
    format!(
        "Error: in.yaml:10:32: items[0].status.capacity[\"nvidia.com/gpu\"]: 8.5 is not a whole number: {GPU_ACCEPTED}\n"
    )
);

refused!(
    a_nodes_file_nic_quantity_too_large,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    gpu_node("    allocatable: {nvidia.com/gpu: \"8\", rdma/ib: 99999999999999999999Ki}\n"),
    2,
    "Error: in.yaml:9:49: items[0].status.allocatable[\"rdma/ib\"]: 99999999999999999999Ki is too large to represent (above 9223372036854775807): a resource quantity is at most 9223372036854775807 in its base unit\n"
);

refused!(
    an_integer_beyond_64_bits,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 9223372036854775808\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:6:13: parsing WorkloadRun: spec.numNodes: 9223372036854775808 is out of range: expected an integer from -9223372036854775808 to 9223372036854775807\n"
);

refused!(
    max_depth_above_what_the_checks_can_walk,
    ["--max-depth", "129", "check", "in.yaml"],
    "a: 1\n",
    2,
    "error: invalid value '129' for '--max-depth <N>': 129 is not in 1..=128\n\nFor more information, try '--help'.\n"
);

refused!(
    max_expand_nodes_above_the_bound,
    ["--max-expand-nodes", "1000001", "check", "in.yaml"],
    "a: 1\n",
    2,
    "error: invalid value '1000001' for '--max-expand-nodes <N>': 1000001 is not in 0..=1000000\n\nFor more information, try '--help'.\n"
);

// The largest `--max-document-bytes` is accepted (the room left in a document is computed
// without overflowing).
refused!(
    max_document_bytes_at_its_largest,
    [
        "--max-document-bytes",
        "18446744073709551615",
        "check",
        "in.yaml"
    ],
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    0,
    ""
);

// ---- unknown fields: all of them, in document order ---------------------------------------

refused!(
    every_unknown_field_of_the_document_is_listed,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t, lables: {}}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a], comand: [b]}}\n  gpusPerNod: 2\n  initContainers: [{name: p, imag: b}]\n  orchestration: {placment: x}\n  env: [{name: A, valu: b}]\nsatus: {}\n",
    2,
    "Error: in.yaml:3:21: strict decoding error: unknown field \"metadata.lables\", unknown field \"spec.framework.exec.comand\", unknown field \"spec.gpusPerNod\", unknown field \"spec.initContainers[0].imag\", unknown field \"spec.orchestration.placment\", unknown field \"spec.env[0].valu\", unknown field \"satus\": correct or remove them\n"
);

refused!(
    every_unknown_spec_field_in_render,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framwork: {exec: {command: [a]}}\n  gpusPerNod: 2\n"),
    2,
    "Error: in.yaml:7:3: strict decoding error: unknown field \"spec.framwork\", unknown field \"spec.gpusPerNod\": correct or remove them\n"
);

refused!(
    a_misspelt_required_field_is_named,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: t}\nspc: {}\n",
    2,
    "Error: in.yaml:4:1: strict decoding error: unknown field \"spc\": correct or remove it\n"
);

// ---- nodes files: duplicate keys as in manifests ------------------------------------------

refused!(
    a_nodes_file_duplicate_key_names_both_lines_and_the_path,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: NodeList\nitems:\n- kind: Node\n  metadata:\n    name: a\n    labels: {x: y}\n    name: b\n",
    2,
    "Error: in.yaml:8:5: duplicate key \"name\" at items[0].metadata.name: first on line 6, again on line 8; keep one\n"
);

refused!(
    a_nodes_file_duplicate_label_on_one_line,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: Node\nmetadata: {name: a, labels: {x: y, x: z}}\n",
    2,
    "Error: in.yaml:3:36: duplicate key \"x\" at metadata.labels.x: first at 3:30, again at 3:36; keep one\n"
);

// ---- read and write errors in words -------------------------------------------------------

refused!(
    a_nodes_file_that_is_a_directory,
    ["render", "--nodes-file", ".", example().as_str()],
    "",
    2,
    "Error: reading .: is a directory\n"
);

/// `-o FORMAT=PATH` into a directory that does not exist, or onto a directory: a usage error
/// before anything is checked (a CI run over thousands of files learns it at once), no summary.
#[test]
fn a_report_into_a_missing_directory_or_onto_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("out")).expect("mkdir");
    std::fs::write(
        dir.path().join("in.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )
    .expect("write");
    for (arg, message) in [
        (
            "json=out",
            "Error: -o: cannot write the report to out: it is a directory; name a file in it\n",
        ),
        (
            "json=missing/report.json",
            "Error: -o: cannot write the report to missing/report.json: directory missing does not exist\n",
        ),
    ] {
        let out = bin()
            .args(["check", "-o", arg, "in.yaml"])
            .current_dir(dir.path())
            .output()
            .expect("runs");
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).as_ref(),
                String::from_utf8_lossy(&out.stdout).as_ref()
            ),
            (Some(2), message, "")
        );
    }
}

refused!(
    rules_lint_of_a_missing_directory,
    ["rules", "lint", "missing"],
    "",
    2,
    "Error: reading missing: no such file or directory\n"
);

refused!(
    test_of_a_missing_directory,
    ["test", "missing"],
    "",
    2,
    "Error: rule test suite error: reading missing: no such file or directory\n"
);

// ---- YAML hazards in render ---------------------------------------------------------------

/// `render` prints `check`'s YAML 1.1 warnings on stderr, renders the values as read (the
/// strings `no`, `on`), and exits as it would without them.
#[test]
fn render_warns_about_yaml_11_readings_too() {
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
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t\n  labels: {team: no, ok: \"yes\"}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a]}}\n  env:\n  - {name: A, value: on}\n",
    );
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "Warning: in.yaml:5:18: metadata.labels.team: the unquoted value no is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"no\")\n\
             Warning: in.yaml:11:22: spec.env[0].value: the unquoted value on is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"on\")\n"
        )
    );
    let wf: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let env = wf["spec"]["dependencies"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["kind"] == "TrainingRuntime"))
        .and_then(|rt| {
            rt.pointer(
                "/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/env",
            )
            .cloned()
        })
        .expect("env");
    assert_eq!(
        env.as_array()
            .and_then(|e| e.iter().find(|v| v["name"] == "A"))
            .map(|v| v["value"].clone()),
        Some(serde_json::json!("on"))
    );
}

/// A rule pack whose only rule validates `expression` (the ConfigMaps of the input).
fn config_map_pack(expression: &str) -> String {
    format!(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {{name: p}}\nstage: lint\nmatch:\n  resources: [{{apiVersion: v1, kind: ConfigMap}}]\nrules:\n  - id: s\n    validate:\n      expression: \"{expression}\"\n      message: m\n"
    )
}

#[test]
fn a_message_literal_is_a_compile_error_not_a_panic() {
    // The CEL interpreter has no message types: left to evaluation, `Foo{a: 1}` panics inside
    // it. Refused where the rule file is loaded, at the expression's line:col.
    let why = "message literals such as `Foo{a: 1}` are not supported: rules work on JSON documents; write a map literal such as `{'a': 1}`";
    for expression in [
        "Foo{a: 1} == 1",
        "google.protobuf.Int64Value{value: 1} == 1",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("p.yaml"), config_map_pack(expression)).expect("write");
        let rules = dir.path().display().to_string();
        let (code, stdout, stderr) = run_in(
            &["--rules", &rules, "check", "in.yaml"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        );
        assert_eq!(
            (code, stdout.as_str(), stderr),
            (
                2,
                "",
                format!(
                    "Error: rule pack error: {rules}/p.yaml:10:19: rule s: CEL does not compile: {why}\n"
                )
            ),
            "{expression}"
        );
    }
}

refused!(
    a_node_listed_twice_in_a_nodes_file,
    [
        "render",
        "--nodes-file",
        "in.yaml",
        "--expand",
        example().as_str()
    ],
    format!(
        "{}- kind: Node\n  metadata: {{name: a}}\n",
        gpu_node("    allocatable: {nvidia.com/gpu: \"8\"}\n")
    ),
    2,
    "Error: in.yaml:11:20: node document 1: field items[1].metadata.name: node \"a\" is listed twice (first at node document 1, items[0].metadata.name, in.yaml:6:11); a node name is unique in a cluster: remove one\n"
);

#[test]
fn yaml_11_readings_are_warned_about_in_any_object_at_any_depth() {
    let (code, stdout, stderr) = run_in(
        &["check", "-o", "json", "in.yaml"],
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata:\n      labels: {tier: on}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: i\n        env:\n        - {name: MODE, value: 0755}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  enabled: yes\n  quoted: \"no\"\n",
    );
    assert_eq!((code, stderr.as_str()), (1, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let got: Vec<(String, u64)> = findings(&report)
        .as_array()
        .expect("list")
        .iter()
        .filter(|f| f["ruleId"] == "yaml-quote-it")
        .map(|f| {
            (
                f["message"].as_str().unwrap_or("").to_string(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "spec.template.metadata.labels.tier: the unquoted value on is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"on\")".to_string(),
                7
            ),
            (
                "spec.template.spec.containers[0].env[0].value: the unquoted value 0755 is meant as a string, but it is the number 755 in YAML, not the text written, and the API server refuses a number here: quote it (\"0755\")".to_string(),
                14
            ),
            (
                "data.enabled: the unquoted value yes is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"yes\")".to_string(),
                20
            ),
        ]
    );
}

/// Table values that cannot be honoured refuse the rule set at load (`rules lint` says so, a
/// render never runs with them): a GPU count below one, a pattern that is not a regex.
#[test]
fn impossible_table_values_are_refused_at_load() {
    for (file, from, to, want) in [
        (
            "defaults/gpu-defaults.yaml",
            "{id: h100, gpuArchitecture: h100, gpusPerNode: 8,",
            "{id: h100, gpuArchitecture: h100, gpusPerNode: -8,",
            "defaults/gpu-defaults.yaml:18:52: error[contract]: entry h100: row does not match the schema of table \"gpu-defaults\": -8 is less than the minimum of 1",
        ),
        (
            "defaults/gpu-products.yaml",
            "rewrite: {pattern: ' ', replacement: '-'}",
            "rewrite: {pattern: '(', replacement: '-'}",
            "defaults/gpu-products.yaml:23:24: error[contract]: entry spaces-as-dashes: row does not match the schema of table \"gpu-products\": invalid regex \"(\": missing closing ): `(`",
        ),
    ] {
        let (_dir, rules) = rules_copy();
        edit(&rules.join(file), from, to);
        let dir = rules.display().to_string();
        let (code, stdout, _) = run_in(&["rules", "lint", "--fail-on", "error", &dir], "");
        let errors: Vec<&str> = stdout.lines().filter(|l| l.contains(": error[")).collect();
        assert_eq!((code, errors), (1, vec![format!("{dir}/{want}").as_str()]));
        let (code, stdout, stderr) = run_in(
            &[
                "--rules",
                &dir,
                "render",
                "--platform",
                "aws",
                "--gpu-arch",
                "h100",
                "in.yaml",
            ],
            run_yaml("  framework: {exec: {command: [a]}}\n"),
        );
        assert_eq!(code, 2, "{stderr}");
        assert_eq!(stdout, "");
        let (at, what) = want.split_once(": error[contract]: ").expect("a lint line");
        assert_eq!(
            stderr,
            format!("Error: rule pack error: {dir}/{at}: {what}\n")
        );
    }
}

/// A document that is not a Kubernetes object is reported, not passed over in silence: info
/// for a mapping without kind (a values file), a warning for prose or a list.
#[test]
fn a_document_that_is_not_an_object_is_reported() {
    let (code, stdout, stderr) = run_in(
        &["check", "-o", "json", "in.yaml"],
        "replicas: 3\n---\njust some prose\n---\n- a\n",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let got: Vec<(String, String, u64)> = findings(&report)
        .as_array()
        .expect("list")
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap_or("").to_string(),
                f["message"].as_str().unwrap_or("").to_string(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let row = |s: &str, m: &str, l: u64| (s.to_string(), m.to_string(), l);
    assert_eq!(
        got,
        [
            row(
                "info",
                "document 1 is a mapping without kind, not a Kubernetes object (apiVersion, kind, metadata): no rule checked it",
                1
            ),
            row(
                "warning",
                "document 2 is a string, not a Kubernetes object (apiVersion, kind, metadata): no rule checked it",
                3
            ),
            row(
                "warning",
                "document 3 is a list, not a Kubernetes object (apiVersion, kind, metadata): no rule checked it",
                5
            ),
        ]
    );
}

#[test]
fn a_gpu_count_with_a_leading_zero_is_warned_about() {
    let (code, stdout, stderr) = run_in(
        &["check", "in.yaml"],
        run_yaml(
            "  framework: {exec: {command: [a]}}\n  resources: {limits: {nvidia.com/gpu: 010}}\n",
        ),
    );
    assert_eq!(
        (code, stdout.lines().next(), stderr.as_str()),
        (
            0,
            Some(
                "in.yaml:8:40: warning[yaml-quote-it]: spec.resources.limits[\"nvidia.com/gpu\"]: the unquoted value 010 is the number 10 here, but YAML 1.1 tools (kubectl among them) read it as octal 8: write a number both read alike: 8 if octal 010 is meant (a file mode such as defaultMode: 0644), 10 if not"
            ),
            ""
        )
    );
}

refused!(
    stdin_for_the_nodes_file_and_the_manifests_check,
    ["--max-depth", "64", "check", "--nodes-file", "-", "-"],
    "",
    2,
    "Error: standard input (`-`) can be given once; name the other inputs as files\n"
);

refused!(
    stdin_for_the_nodes_file_and_the_manifests_render,
    ["render", "--nodes-file", "-", "-"],
    "",
    2,
    "Error: standard input (`-`) can be given once; name the other inputs as files\n"
);

refused!(
    stdin_given_twice_to_check,
    // (A global flag first: a usage error prints no summary line.)
    ["--max-depth", "64", "check", "-", "-"],
    "",
    2,
    "Error: standard input (`-`) can be given once; name the other inputs as files\n"
);

/// The worker container's `resources` of `render -o json` of `input` (exec framework).
fn rendered_worker_resources(args: &[&str], input: &str) -> (i32, serde_json::Value, String) {
    let mut all = vec!["render", "-o", "json"];
    all.extend_from_slice(args);
    all.push("in.yaml");
    let (code, stdout, stderr) = run_in(&all, input);
    let wf: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    let resources = wf
        .pointer("/spec/dependencies/0/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/resources")
        .cloned()
        .unwrap_or_default();
    (code, resources, stderr)
}

#[test]
fn a_leading_zero_gpu_count_renders_as_the_integer_it_is_read_as() {
    let (code, resources, stderr) = rendered_worker_resources(
        &["--gpu-arch", "h100"],
        &gpu_run("  resources: {limits: {nvidia.com/gpu: 010}}\n"),
    );
    // 10, the YAML 1.2 reading the warning names; never the float 10.0.
    assert_eq!(
        (
            code,
            serde_json::to_string(&resources).unwrap_or_default(),
            stderr.as_str()
        ),
        (
            0,
            r#"{"limits":{"nvidia.com/gpu":10}}"#.to_string(),
            "Warning: in.yaml:8:40: spec.resources.limits[\"nvidia.com/gpu\"]: the unquoted value 010 is the number 10 here, but YAML 1.1 tools (kubectl among them) read it as octal 8: write a number both read alike: 8 if octal 010 is meant (a file mode such as defaultMode: 0644), 10 if not\n"
        )
    );
}

#[test]
fn a_null_gpu_count_is_warned_about_and_the_generated_count_applies() {
    let input = gpu_run("  resources:\n    limits:\n      nvidia.com/gpu: null\n");
    let (code, resources, stderr) = rendered_worker_resources(&["--gpu-arch", "h100"], &input);
    let message = "spec.resources.limits[\"nvidia.com/gpu\"]: the quantity is empty (null), and a null field is dropped as if it were not written (the API server drops it too): write the quantity you mean, or remove the key";
    assert_eq!(
        (code, resources, stderr),
        (
            0,
            serde_json::json!({"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}),
            format!("Warning: in.yaml:10:23: {message}\n")
        )
    );
    let (code, stdout, _) = run_in(&["check", "in.yaml"], &input);
    assert_eq!(
        (code, stdout.lines().next()),
        (
            0,
            Some(format!("in.yaml:10:23: warning[null-quantity]: {message}").as_str())
        )
    );
}

#[test]
fn a_null_in_an_override_deletes_the_key_it_names() {
    let input = run_yaml(
        "  framework: {exec: {command: [a]}}\n  workloadMetadata: {labels: {cost-center: gpu, team: a}}\n  overrides:\n    - when: {platform: {equals: aws}}\n      jobTemplate: {spec: {workloadMetadata: {labels: {cost-center: null}}}}\n",
    );
    let (code, stdout, stderr) = run_in(
        &[
            "render",
            "-o",
            "json",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "in.yaml",
        ],
        &input,
    );
    let wf: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
    assert_eq!(
        (
            code,
            wf.pointer("/spec/jobTemplate/spec/workloadMetadata/labels")
                .cloned(),
            stderr.as_str()
        ),
        (0, Some(serde_json::json!({"team": "a"})), "")
    );
}

#[test]
fn a_workflow_rendered_offline_keeps_the_deleting_nulls_of_its_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let offline = bin()
        .args(["render", "--gpu-arch", "gb200"])
        .arg(root().join("examples/nccl-all-reduce.yaml"))
        .output()
        .expect("runs");
    assert_eq!(offline.status.code(), Some(0));
    std::fs::write(dir.path().join("wf.yaml"), &offline.stdout).expect("write");
    let resolved = bin()
        .args([
            "render",
            "-o",
            "json",
            "--platform",
            "nscale",
            "--gpu-arch",
            "gb200",
            "wf.yaml",
        ])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let wf: serde_json::Value = serde_json::from_slice(&resolved.stdout).unwrap_or_default();
    let runtime = wf
        .pointer("/spec/dependencies")
        .and_then(serde_json::Value::as_array)
        .and_then(|d| d.iter().find(|d| d["kind"] == "TrainingRuntime"))
        .cloned()
        .unwrap_or_default();
    // nscale's DRA claims replace the nvidia.com/gpu request: its override's nulls delete it.
    assert_eq!(
        (
            resolved.status.code(),
            runtime.pointer("/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/resources").cloned()
        ),
        (
            Some(0),
            Some(serde_json::json!({"limits": {}, "requests": {}, "claims": [{"name": "compute-domain"}, {"name": "gpu"}, {"name": "rdma"}]}))
        )
    );
}

#[test]
fn check_reports_a_nodes_file_or_rules_that_cannot_be_used_in_its_json_envelope() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("nodes.yaml"), "x: [\n").expect("write");
    std::fs::write(dir.path().join("in.yaml"), gpu_run("")).expect("write");
    let nodes = bin()
        .args([
            "check",
            "-o",
            "json",
            "--nodes-file",
            "nodes.yaml",
            "in.yaml",
        ])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let envelope: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap_or_default();
    assert_eq!(
        (
            nodes.status.code(),
            &envelope["results"],
            &envelope["summary"]["passed"]
        ),
        (
            Some(2),
            &serde_json::json!([{"file": "nodes.yaml", "documents": 0, "findings": [], "errors": [{"message": "nodes.yaml:1:4: unclosed bracket '['", "line": 1, "column": 4}]}]),
            &serde_json::json!(false)
        )
    );
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).expect("mkdir");
    std::fs::write(
        rules.join("x.yaml"),
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nstage: admission\n",
    )
    .expect("write");
    let unloaded = bin()
        .args(["--rules", "rules", "check", "-o", "json", "in.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let envelope: serde_json::Value = serde_json::from_slice(&unloaded.stdout).unwrap_or_default();
    assert_eq!(
        (
            unloaded.status.code(),
            &envelope["results"],
            &envelope["summary"]["inputErrors"]
        ),
        (
            Some(2),
            &serde_json::json!([{"file": "rules/x.yaml", "documents": 0, "findings": [], "errors": [{"message": "rule pack error: rules/x.yaml:1:1: missing field `metadata`", "line": 1, "column": 1}]}]),
            &serde_json::json!(1)
        )
    );
}

#[test]
fn check_refuses_a_partial_node_context_for_a_workflow_as_render_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let offline = bin()
        .args(["render", "--gpu-arch", "h100"])
        .arg(root().join("examples/nccl-all-reduce.yaml"))
        .output()
        .expect("runs");
    std::fs::write(dir.path().join("wf.yaml"), &offline.stdout).expect("write");
    let render = bin()
        .args(["render", "--gpu-arch", "h100", "wf.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let check = bin()
        .args(["check", "--gpu-arch", "h100", "wf.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let render_err = String::from_utf8_lossy(&render.stderr).into_owned();
    let check_err = String::from_utf8_lossy(&check.stderr).into_owned();
    assert_eq!(
        (render.status.code(), check.status.code()),
        (Some(2), Some(2))
    );
    let first = render_err.lines().next().unwrap_or_default().to_string();
    assert_eq!(
        first,
        "Error: specify --nodes-file <path> or --platform + --gpu-arch"
    );
    assert_eq!(
        check_err.lines().next(),
        Some("Error: wf.yaml:1:1: specify --nodes-file <path> or --platform + --gpu-arch"),
        "{check_err}"
    );
}

#[test]
fn rules_explain_explains_the_pipelines_own_findings() {
    let (code, stdout, stderr) = run_in(&["rules", "explain", "null-quantity"], "");
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "null-quantity
  description  A resource quantity (limits or requests) is empty or null, so it is dropped as if it were not written.
  severity     warning
  pack         input
  source       built into the pipeline (no rule file: not changed by --rules)

  A null field of a WorkloadRun is dropped, as the API server drops it, so the quantity in force
  is the generated one (for nvidia.com/gpu, the GPUs per node). Under spec.overrides a null is a
  patch's \"delete this key\" and is not reported. Write the quantity you mean, or remove the key.
",
            ""
        )
    );
    for id in nvcre_domain::BUILT_IN_RULES.iter().map(|r| r.id) {
        let (code, stdout, _) = run_in(&["rules", "explain", id], "");
        assert_eq!((code, stdout.lines().next()), (0, Some(id)));
    }
}

#[test]
fn a_gpu_limit_below_the_processes_per_node_is_an_error() {
    let (code, stdout, _) = run_in(
        &[
            "check",
            "-o",
            "json",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "in.yaml",
        ],
        run_yaml(
            "  framework: {mpi: {mpirunPath: /usr/local/mpi/bin/mpirun, binary: /b}}\n  resources: {limits: {nvidia.com/gpu: 4}}\n",
        ),
    );
    let findings: Vec<(String, String)> = finding_rows(&stdout)
        .into_iter()
        .map(|(_, rule, _, message)| (rule, message))
        .collect();
    assert_eq!(
        (code, findings),
        (
            1,
            vec![(
                "gpu-limit-below-processes".to_string(),
                "TrainingRuntime \"t-runtime\" starts 8 processes per node (numProcPerNode, from gpusPerNode), but node/node limits nvidia.com/gpu to 4: two ranks would share a GPU, which NCCL refuses; set spec.gpusPerNode to the GPU limit, or the limit to 8".to_string()
            )]
        )
    );
}

#[test]
fn every_leading_zero_integer_is_warned_about_not_only_quantities() {
    let (code, stdout, _) = run_in(
        &["check", "-o", "json", "in.yaml"],
        run_yaml(
            "  framework: {exec: {command: [a]}}\n  orchestration: {repeatCount: 010, maxConcurrent: 0o3}\n",
        )
        .replace("numNodes: 1", "numNodes: 02"),
    );
    let rows: Vec<(String, String)> = finding_rows(&stdout)
        .into_iter()
        .map(|(_, rule, _, message)| (rule, message))
        .collect();
    assert_eq!(
        (code, rows),
        (
            0,
            vec![
                ("yaml-quote-it".to_string(), "spec.numNodes: the unquoted value 02 is the number 2 here, but YAML 1.1 tools (kubectl among them) read it as octal 2: write a number both read alike: 2 if octal 02 is meant (a file mode such as defaultMode: 0644), 2 if not".to_string()),
                ("yaml-quote-it".to_string(), "spec.orchestration.repeatCount: the unquoted value 010 is the number 10 here, but YAML 1.1 tools (kubectl among them) read it as octal 8: write a number both read alike: 8 if octal 010 is meant (a file mode such as defaultMode: 0644), 10 if not".to_string()),
                ("yaml-quote-it".to_string(), "spec.orchestration.maxConcurrent: the unquoted value 0o3 is the number 3 here (YAML 1.2 octal), but YAML 1.1 tools (kubectl among them) read it as the string \"0o3\": write the number in decimal (3)".to_string()),
            ]
        )
    );
}

#[test]
fn report_files_get_the_mode_a_plain_create_gives() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.yaml"), gpu_run("")).expect("write");
    let out = bin()
        .args(["check", "-o", "sarif=out.sarif", "in.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("out.sarif"))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        // 0666 less the umask the command ran under (a shell reports it), never the private 0600.
        let umask = std::process::Command::new("sh")
            .args(["-c", "umask"])
            .output()
            .ok()
            .and_then(|o| u32::from_str_radix(String::from_utf8_lossy(&o.stdout).trim(), 8).ok())
            .unwrap_or(0o022);
        assert_eq!(format!("{mode:o}"), format!("{:o}", 0o666 & !umask));
    }
}

#[test]
fn check_with_a_platform_but_no_architecture_says_what_it_assumed() {
    let (code, stdout, _) = run_in(&["check", "--platform", "aws", "in.yaml"], gpu_run(""));
    assert_eq!(
        (code, stdout.lines().next()),
        (
            0,
            Some(
                "in.yaml:4:1: warning[gpu-architecture-unknown]: the GPU architecture is unknown (no --gpu-arch, no nvidia.com/gpu.product in target.nodeSelector): the overrides of platform aws were resolved for the unknown architecture and its per-node defaults, so the findings of the post-override checks may not be the real run's (render refuses this run); pass --gpu-arch ARCH or set the node selector (spec)"
            )
        )
    );
}

#[test]
fn a_gpu_product_of_an_architecture_the_defaults_table_lacks_is_warned_about() {
    let run = gpu_run("  target:\n    nodeSelector: {nvidia.com/gpu.product: NVIDIA-Tesla-V100}\n");
    let want = "names GPU architecture \"tesla\", which the gpu-defaults table has no row for (known: a100, b200, gb200, gb300, h100, h200, l40, l40s, rtxpro6000): the per-node defaults of an unknown architecture are used and no architecture override applies; set spec.gpusPerNode and spec.mlnxPerNode, or correct the product";
    let (code, stdout, _) = run_in(&["check", "in.yaml"], run.clone());
    assert_eq!(
        (code, stdout.lines().next()),
        (
            0,
            Some(
                format!("in.yaml:9:44: warning[gpu-architecture-unknown]: nvidia.com/gpu.product \"NVIDIA-Tesla-V100\" {want} (spec.target.nodeSelector[\"nvidia.com/gpu.product\"])")
                    .as_str()
            )
        )
    );
    let (code, _, err) = run_in(&["render", "in.yaml"], run);
    assert_eq!(
        (code, err),
        (
            0,
            format!(
                "Warning: nvidia.com/gpu.product \"NVIDIA-Tesla-V100\" {want} [gpu-architecture-unknown]\n"
            )
        )
    );
}

refused!(
    a_whole_number_with_a_decimal_point_where_an_integer_belongs,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 2.0\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:6:13: parsing WorkloadRun: spec.numNodes: expected an integer, got 2.0: write it without the decimal point (2)\n"
);

refused!(
    a_fraction_where_an_integer_belongs,
    ["render", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 2.5\n  framework: {exec: {command: [a]}}\n",
    2,
    "Error: in.yaml:6:13: parsing WorkloadRun: spec.numNodes: expected an integer, got 2.5\n"
);

refused!(
    a_nodes_file_error_after_an_empty_document_names_its_line,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "---\n# only a comment\n---\napiVersion: v1\nkind: Node\nmetadata:\n  labels: {a: b}\n",
    2,
    "Error: in.yaml:6:1: node document 1: missing field metadata.name\n"
);

refused!(
    a_nodes_file_item_that_is_not_a_mapping_is_named_by_its_path,
    ["render", "--nodes-file", "in.yaml", example().as_str()],
    "apiVersion: v1\nkind: NodeList\nitems: [3]\n",
    2,
    "Error: in.yaml:3:9: node document 1: field items[0] must be an object, found a number\n"
);

/// A rule file that writes a mapping of the format as a list (`validate: [expr, message]`,
/// `resources: [[apiVersion, kind]]`) is refused at that place: never read by position.
#[test]
fn a_rule_file_list_where_the_format_wants_a_mapping() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("admission/workloadrun.yaml"),
        "  - id: wr-threshold-keys\n",
        "  - id: positional\n    validate: [\"object.spec.numNodes > 100\", \"too few\"]\n\n  - id: wr-threshold-keys\n",
    );
    let dir = rules.display().to_string();
    let (code, stdout, _) = run_in(&["rules", "lint", "--fail-on", "error", &dir], "");
    let errors: Vec<&str> = stdout.lines().filter(|l| l.contains(": error[")).collect();
    assert_eq!(code, 1);
    assert_eq!(errors.len(), 1, "{stdout}");
    assert!(
        errors[0].ends_with(
            ": error[invalid]: rule positional: validate: invalid type: list, expected a mapping"
        ),
        "{stdout}"
    );
    let (code, stdout, stderr) = run_in(
        &["--rules", &dir, "check", "in.yaml"],
        run_yaml("  framework: {exec: {command: [a]}}\n"),
    );
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        stderr.contains("rule positional: validate: invalid type: list, expected a mapping"),
        "{stderr}"
    );
}

/// `-o FORMAT=PATH` replaces only a regular file: a symbolic link is followed (its target gets
/// the report, the link stays a link), a link to nothing creates its target, and a named pipe
/// is written to, never replaced by a file.
#[cfg(unix)]
#[test]
fn report_files_through_links_and_pipes_keep_what_is_there() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let at = |name: &str| dir.path().join(name);
    std::fs::write(at("in.yaml"), gpu_run("")).expect("write");
    std::fs::write(at("real.json"), "keep").expect("write");
    std::os::unix::fs::symlink("real.json", at("link.json")).expect("symlink");
    std::os::unix::fs::symlink("made.json", at("dangling.json")).expect("symlink");
    let fifo = std::process::Command::new("mkfifo")
        .arg(at("pipe.sarif"))
        .status()
        .expect("mkfifo runs");
    assert!(fifo.success());
    let pipe = at("pipe.sarif");
    let reader = std::thread::spawn(move || std::fs::read_to_string(pipe).expect("read the pipe"));
    let out = bin()
        .args([
            "check",
            "-o",
            "json=link.json",
            "-o",
            "json=dangling.json",
            "-o",
            "sarif=pipe.sarif",
            "in.yaml",
        ])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kind = |name: &str| {
        std::fs::symlink_metadata(at(name))
            .expect("there")
            .file_type()
    };
    assert!(kind("link.json").is_symlink());
    assert!(kind("dangling.json").is_symlink());
    assert!(kind("pipe.sarif").is_fifo());
    for written in ["real.json", "made.json"] {
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(at(written)).expect("read"))
                .expect("a JSON report");
        assert_eq!(report["kind"], "CheckReport", "{written}");
    }
    let sarif: serde_json::Value =
        serde_json::from_str(&reader.join().expect("the reader")).expect("SARIF through the pipe");
    assert_eq!(sarif["version"], "2.1.0");
}

refused!(
    render_over_the_document_size_limit,
    [
        "--max-document-bytes",
        "100",
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framework: {exec: {command: [a]}}\n"),
    2,
    "Error: in.yaml:1:1: document 1 is larger than the limit of 100 bytes (--max-document-bytes); the rest of the input is not read\n"
);

/// A `%YAML` or `%TAG` directive belongs to the document after it: `check` reads the stream
/// as `render` does.
#[test]
fn a_directive_before_a_document_is_read_with_it() {
    let input = format!(
        "%YAML 1.2\n---\n{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n...\n%YAML 1.2\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: y}}\n",
        gpu_run("")
    );
    let (code, stdout, stderr) = run_in(&["check", "-o", "json", "in.yaml"], &input);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["results"][0]["documents"], 3);
    assert_eq!(report["summary"]["inputErrors"], 0);
    let (code, stdout, stderr) = run_in(
        &[
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "in.yaml",
        ],
        format!("%YAML 1.2\n---\n{}", gpu_run("")),
    );
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    assert!(
        stdout.starts_with("apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\n"),
        "{stdout}"
    );
}

/// A label key YAML 1.1 reads as a boolean (`on:` is the key "true" to kubectl) is warned
/// about at the key; a quoted one is not.
#[test]
fn a_label_key_yaml_11_reads_as_a_boolean_is_warned_about() {
    let (code, stdout, _) = run_in(
        &["check", "-o", "json", "in.yaml"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels:\n    on: a\n    \"off\": b\n    team: c\n    True: d\n    true: e\n    1.10: f\n    8080: g\n",
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let rows = super::util::located_rows(&report, "message");
    assert_eq!(
        (code, rows),
        (
            0,
            vec![
                (
                    "yaml-quote-it".to_string(),
                    6,
                    5,
                    "metadata.labels.on: the unquoted key on is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"on\")".to_string()
                ),
                (
                    "yaml-quote-it".to_string(),
                    9,
                    5,
                    "metadata.labels.True: the unquoted key True is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"True\")".to_string()
                ),
                (
                    "yaml-quote-it".to_string(),
                    11,
                    5,
                    "metadata.labels[\"1.10\"]: the unquoted key 1.10 is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a number: quote it (\"1.10\")".to_string()
                ),
            ]
        )
    );
}

// A control character is located at the character itself, wherever in its scalar the YAML
// parser stopped (it reports some at the scalar's start, others where it found them).
refused!(
    a_control_character_in_a_plain_scalar_is_located_at_itself,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\u{1b}b\n",
    2,
    "Error: in.yaml:4:10: unexpected control character U+001B: YAML does not allow it unescaped, not even in a quoted string; remove it, or write it as \\x1B inside a double-quoted string\n"
);

refused!(
    a_nul_in_a_plain_scalar_is_located_at_itself,
    ["check", "in.yaml"],
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\u{0}b\n",
    2,
    "Error: in.yaml:4:10: unexpected control character U+0000: YAML does not allow it unescaped, not even in a quoted string; remove it, or write it as \\x00 inside a double-quoted string\n"
);

/// A directive after a document end marker (`...`) starts the next document: the document
/// before it is checked on its own, whatever the next one holds.
#[test]
fn a_directive_after_a_document_end_starts_the_next_document() {
    let input = format!("{}...\n%YAML 1.2\n---\nfoo: [unclosed\n", gpu_run(""));
    let (code, stdout, stderr) = run_in(&["check", "-o", "json", "in.yaml"], &input);
    assert_eq!(
        (code, stderr.as_str()),
        (2, "Error: in.yaml:11:6: unclosed bracket '['\n")
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["results"][0]["documents"], 1, "{stdout}");
    assert_eq!(report["results"][0]["errors"][0]["line"], 11, "{stdout}");
}

// Fields kept as JSON are held to their CRD schema's types too (the API server refuses them).
refused!(
    a_list_for_the_bandwidth_measurement,
    ["check", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  bandwidthMeasurement: [nccl-bandwidth, all_reduce]\n"
    ),
    2,
    "Error: in.yaml:8:3: parsing WorkloadRun: spec.bandwidthMeasurement: invalid type: list, expected a mapping\n"
);

refused!(
    a_list_for_a_workflow_orchestration_field,
    [
        "check",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec:\n  orchestration:\n    execution: {timeoutPerJob: [24h]}\n",
    2,
    "Error: in.yaml:6:17: parsing Workflow: spec.orchestration.execution.timeoutPerJob: invalid type: list, expected a string\n"
);

/// The working directory of [`run_with_rules`]: `in.yaml` = `input` and a copy of the rules
/// without their tables (packs alone: a set that defines some tables and lacks others is
/// refused when it loads, one without any is used as it is).
fn rules_without_tables(input: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    copy_dir(&root().join("rules"), &rules);
    for sub in ["defaults", "detect", "overrides"] {
        std::fs::remove_dir_all(rules.join(sub)).expect("remove");
    }
    std::fs::write(dir.path().join("in.yaml"), input).expect("write input");
    dir
}

/// `(code, stdout, stderr)` of `--rules rules ARGS` run in `dir`, stderr without the summary.
fn run_with_rules(dir: &tempfile::TempDir, args: &[&str]) -> (i32, String, String) {
    let out = bin()
        .args(["--rules", "rules"])
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        without_summary(args, &stderr),
    )
}

/// A flag the rule set cannot serve (`--platform` without the platform-detection table) is an
/// error of the rules, in every report asked for: a CI job reading `-o json` gets the envelope,
/// not an empty stdout.
#[test]
fn a_flag_the_rules_cannot_serve_is_an_error_of_the_rules_in_the_report() {
    let dir = rules_without_tables(&gpu_run(""));
    let message = "rules: rule set has no table \"platform-detection\"";
    // A nodes file needs the detection tables too: one error of the rules, not one per document.
    let nodes = path("examples/nodes/aws-h100-18.yaml");
    for context in [["--platform", "aws"], ["--nodes-file", nodes.as_str()]] {
        let mut args = vec!["check", "-o", "json"];
        args.extend(context);
        args.extend(["in.yaml", "in.yaml"]);
        let (code, stdout, stderr) = run_with_rules(&dir, &args);
        assert_eq!(
            (code, stderr.as_str()),
            (
                2,
                format!("note: in.yaml is named twice; it is checked once\nError: {message}\n")
                    .as_str()
            ),
            "{context:?}"
        );
        let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
        assert_eq!(
            report["results"],
            serde_json::json!([{"file": "rules", "documents": 0, "findings": [], "errors": [{"message": message}]}])
        );
        assert_eq!(report["summary"]["inputErrors"], 1);
        // One file, as the results hold one entry.
        assert_eq!(report["summary"]["files"], 1);
        assert_eq!(report["summary"]["passed"], false);
    }
    // A usage error stays one: stderr alone, no summary.
    let out = bin()
        .args(["check", "-o", "json", "--gpu-arch", "z9", "in.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (out.status.code(), out.stdout.as_slice()),
        (Some(2), &b""[..]),
        "{stderr}"
    );
    assert!(
        stderr.starts_with("Error: invalid --gpu-arch \"z9\""),
        "{stderr}"
    );
}

/// An error that stops one document's check and names no place (here a table the rules lack)
/// is reported at the document's start, so that among several documents the one it stopped
/// is named.
#[test]
fn a_document_error_without_a_place_names_the_document() {
    let input = format!("{}---\n# second\n{}", gpu_run(""), gpu_run(""));
    let dir = rules_without_tables(&input);
    let (code, stdout, stderr) = run_with_rules(&dir, &["check", "-o", "json", "in.yaml"]);
    let want = |line: u64| format!("in.yaml:{line}:1: rule set has no table \"gpu-products\"");
    assert_eq!(
        (code, stderr),
        (2, format!("Error: {}\nError: {}\n", want(1), want(10)))
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(
        report["results"][0]["errors"],
        serde_json::json!([
            {"message": want(1), "line": 1, "column": 1},
            {"message": want(10), "line": 10, "column": 1},
        ])
    );
}

/// `render` of several WorkloadRuns names the one a placement failure stopped; of one, the
/// message stays the original's alone.
#[test]
fn render_names_the_document_a_placement_failure_stopped_among_several() {
    let run = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    let unplaceable = run.replace(
        "nvidia.com/gpu.present: \"true\"",
        "nvidia.com/gpu.present: \"false\"",
    );
    assert_ne!(run, unplaceable);
    let nodes = path("examples/nodes/aws-h100-18.yaml");
    let message = "No target nodes found matching orchestration target (18 node(s) given; a target node matches spec.target, carries nvidia.com/gpu.present=true and is schedulable)";
    let (code, stdout, stderr) = run_in(
        &["render", "--nodes-file", &nodes, "in.yaml"],
        format!("{run}---\n{unplaceable}"),
    );
    let second = run.lines().count() + 2 + 3; // the `---` line, then the example's 3 comment lines
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (1, "", format!("in.yaml:{second}:1: {message}\n"))
    );
    let (code, _, stderr) = run_in(&["render", "--nodes-file", &nodes, "in.yaml"], unplaceable);
    assert_eq!((code, stderr), (1, format!("{message}\n")));
}

/// A value with terminal escapes (a `\e` in a double-quoted name) reaches the text report's
/// message escaped: written raw, it could clear or retitle the terminal of whoever reads it.
#[test]
fn terminal_escapes_in_a_value_are_written_escaped_in_the_text_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run.yaml");
    std::fs::write(
        &run,
        gpu_run("").replace("{name: t}", "{name: \"\\e]0;pwned\\a\\e[2J\"}"),
    )
    .expect("write");
    let out = bin()
        .args(["check", "--color", "never", "run.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(
        stdout.starts_with(
            "run.yaml:3:18: error[wr-name]: Invalid value: \"\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\": "
        ),
        "{stdout}"
    );
}

// A threshold that would not compile when the controller judges it is refused before
// submission, at its line (as `measure` refuses it), not after the GPU job has run.
refused!(
    a_threshold_that_does_not_compile_is_refused_at_its_line,
    ["check", "in.yaml"],
    gpu_run("  thresholds:\n    busBandwidthGBps: \"valu > 3\"\n"),
    2,
    "Error: in.yaml:9:23: spec.thresholds.busBandwidthGBps: Threshold \"busBandwidthGBps\": compile threshold expression \"valu > 3\": undeclared reference to \"valu\" (only `value` is bound)\n"
);

refused!(
    a_threshold_that_returns_no_bool_is_refused_by_render,
    ["render", "--gpu-arch", "h100", "in.yaml"],
    gpu_run("  thresholds:\n    goodputRatio: \"value + 1.0\"\n"),
    2,
    "Error: in.yaml:9:19: spec.thresholds.goodputRatio: Threshold \"goodputRatio\": compile threshold expression \"value + 1.0\": expression must return bool, got double\n"
);

refused!(
    a_workflow_threshold_that_does_not_compile_is_refused,
    ["check", "in.yaml"],
    "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: w}\nspec:\n  jobTemplate: {spec: {}}\n  validation:\n    performance:\n      thresholds:\n        thresholds: {algBandwidthGBps: \"value >\"}\n",
    2,
    "Error: in.yaml:9:40: spec.validation.performance.thresholds.thresholds.algBandwidthGBps: Threshold \"algBandwidthGBps\": compile threshold expression \"value >\": Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 8)\n"
);

/// A YAML 1.1 boolean word in any string field, not only labels, env and data: a queue name, a
/// node selector value, an argument. Quoted, tagged (`!!str on`) and block scalars are strings
/// to every YAML reader and are not reported.
#[test]
fn a_yaml_11_boolean_word_in_any_string_field_is_warned_about() {
    let (code, stdout, stderr) = run_in(
        &["check", "-o", "json", "in.yaml"],
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  framework: {exec: {command: [a, yes, \"no\", !!str on]}}\n  gangScheduler: {schedulerName: kai-scheduler, queue: on}\n  target:\n    nodeSelector: {nvidia.com/gpu.present: yes}\n  workloadMetadata:\n    labels:\n      rack: |-\n        off\n",
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let w = |path: &str, word: &str, line: u64, column: u64| {
        (
            "yaml-quote-it".to_string(),
            line,
            column,
            format!(
                "{path}: the unquoted value {word} is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"{word}\")"
            ),
        )
    };
    assert_eq!(
        located_rows(&report, "message"),
        [
            w("spec.framework.exec.command[1]", "yes", 7, 35),
            w("spec.gangScheduler.queue", "on", 8, 56),
            w(
                "spec.target.nodeSelector[\"nvidia.com/gpu.present\"]",
                "yes",
                10,
                44
            ),
        ]
    );
}

/// A Workflow's node health expression that is not CEL is an input error at the expression,
/// from `check` and `render` alike (the schema bounds its length alone; the Job's controller
/// would find it only when it ran).
#[test]
fn a_node_health_expression_that_does_not_compile_is_an_input_error() {
    let input = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: wf}\nspec:\n  jobTemplate:\n    spec:\n      nodeHealthMonitor:\n        cel:\n          expression: node.spec.unschedulable ==\n";
    let want = "Error: in.yaml:9:23: spec.jobTemplate.spec.nodeHealthMonitor.cel.expression: CEL does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 27)\n";
    let (code, stdout, stderr) = run_in(&["check", "in.yaml"], input);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", want));
    let (code, stdout, stderr) = run_in(
        &[
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "in.yaml",
        ],
        input,
    );
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", want));
}

/// JSON objects one after the other (what `jq '.items[]'` prints) are a stream of documents, as
/// `kubectl apply -f` reads them: each is checked at its own lines, rendered in order.
#[test]
fn concatenated_json_objects_are_documents() {
    let input = "{\n  \"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n  \"metadata\": {\"name\": \"ok\"}\n}\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"Not_OK\"}}\n";
    let (code, stdout, _) = run_in(&["check", "-o", "json", "in.yaml"], input);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["results"][0]["documents"], 2);
    assert_eq!(
        located_rows(&report, "message"),
        [(
            "object-name".to_string(),
            5,
            64,
            "ConfigMap name \"Not_OK\" is not a lowercase RFC 1123 subdomain of at most 253 characters".to_string()
        )]
    );
    // The seed example as one-line JSON, then pretty-printed: two Workflows, each the one
    // its YAML renders.
    let example = path("examples/nccl-all-reduce.yaml");
    let run: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(example).expect("read")).expect("yaml");
    let runs = format!(
        "{}\n{}",
        serde_json::to_string(&run).expect("json"),
        serde_json::to_string_pretty(&run).expect("json")
    );
    let (code, stdout, stderr) = run_in(
        &["render", "--gpu-arch", "h100", "-o", "json", "in.yaml"],
        runs,
    );
    assert_eq!(code, 0, "{stderr}");
    let one: serde_json::Value =
        serde_saphyr::from_str(&workflow_of("examples/nccl-all-reduce.yaml")).expect("yaml");
    let both: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("json stream");
    assert_eq!(both, [one.clone(), one]);
}

/// Concatenated JSON values that start lines are documents one by one: each has its own size
/// budget, and an input error in one loses nothing of the others.
#[test]
fn concatenated_json_objects_have_their_own_budgets_and_errors() {
    let cm = |name: &str| {
        format!(
            "{{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"{name}\"}}}}\n"
        )
    };
    let five: String = ["a", "b", "c", "d", "e"].iter().map(|n| cm(n)).collect();
    let out = bin()
        .args(["--max-document-bytes", "100", "check", "-"])
        .write_stdin(five)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        timeless(&String::from_utf8_lossy(&out.stderr)),
        "Summary: 5 documents in 1 file checked in Ts: 0 errors, 0 warnings, 0 info\n"
    );
    let input = format!(
        "{}{{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"b\",\"name\":\"c\"}}}}\n{}",
        cm("Bad_A"),
        cm("Bad_C")
    );
    let (code, stdout, _) = run_in(&["check", "-o", "github", "in.yaml"], input);
    assert_eq!(code, 2);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "::error file=in.yaml,line=1,col=58,title=object-name::ConfigMap name \"Bad_A\" is not a lowercase RFC 1123 subdomain of at most 253 characters",
            "::error file=in.yaml,line=3,col=58,title=object-name::ConfigMap name \"Bad_C\" is not a lowercase RFC 1123 subdomain of at most 253 characters",
            "::error file=in.yaml,line=2,col=62,title=nvcre-policy::in.yaml:2:62: duplicate key \"name\" at metadata.name: first at 2:51, again at 2:62; keep one",
        ]
    );
}

/// A tab after a block entry's `-` separates (YAML allows `- \ta`); a tab that indents a key
/// is reported at the tab also when the next line, correctly indented, is where the parser
/// stops.
#[test]
fn tabs_after_a_dash_separate_and_tabs_before_a_key_are_found_first() {
    let ok =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  finalizers:\n  - \ta\n  -\tb\n";
    let (code, stdout, stderr) = run_in(&["check", "in.yaml"], ok);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    for (input, at) in [
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  \tname: c\n  labels: {a: b}\n",
            "4:3",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- \tapiVersion: v1\n  kind: ConfigMap\n",
            "4:3",
        ),
    ] {
        let (code, stdout, stderr) = run_in(&["check", "in.yaml"], input);
        assert_eq!(
            (code, stdout.as_str(), stderr.lines().next().unwrap_or("")),
            (2, "", format!("Error: in.yaml:{at}: a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces").as_str())
        );
    }
}

#[test]
fn a_byte_order_mark_changes_no_finding() {
    // The same documents with and without a UTF-8 byte-order mark: the same findings, at the
    // same line and column, with the same quoting advice.
    let dir = tempfile::tempdir().expect("tempdir");
    let inputs = [
        (
            "a.json",
            r#"{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"v": yes}}"#,
        ),
        (
            "b.yaml",
            "{kind: ConfigMap, apiVersion: v1, metadata: {name: c}, data: {v: 1.10}}",
        ),
    ];
    let check = |bom: &str| {
        let sub = dir
            .path()
            .join(if bom.is_empty() { "plain" } else { "bom" });
        std::fs::create_dir_all(&sub).expect("dir");
        for (name, text) in &inputs {
            std::fs::write(sub.join(name), format!("{bom}{text}\n")).expect("write");
        }
        let (code, out, err) = run(&["check", "-o", "json", sub.to_str().expect("utf8")]);
        let report: serde_json::Value = serde_json::from_str(&out).expect("json");
        let rows: Vec<(String, u64, u64, String)> = report["results"]
            .as_array()
            .expect("results")
            .iter()
            .flat_map(|r| r["findings"].as_array().cloned().unwrap_or_default())
            .map(|f| {
                (
                    f["ruleId"].as_str().unwrap_or_default().to_string(),
                    f["line"].as_u64().unwrap_or_default(),
                    f["column"].as_u64().unwrap_or_default(),
                    f["message"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        (code, rows, err)
    };
    let (code, plain, err) = check("");
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        plain
            .iter()
            .map(|(id, l, c, _)| (id.as_str(), *l, *c))
            .collect::<Vec<_>>(),
        [("yaml-quote-it", 1, 84), ("yaml-quote-it", 1, 66)]
    );
    assert!(
        plain[1].3.ends_with("quote it (\"1.10\")"),
        "{}",
        plain[1].3
    );
    // (The summary line on stderr carries the time the check took.)
    let (bom_code, bom, _) = check("\u{feff}");
    assert_eq!((bom_code, bom), (code, plain));
}

#[test]
fn a_crlf_file_shows_its_source_lines_as_an_lf_file_does() {
    // The text report shows the lines around a finding, which it leaves out when they hold a
    // character a terminal would act on: the `\r` of a CRLF line end is not one.
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = [
        "apiVersion: batch/v1",
        "kind: Job",
        "metadata: {name: j}",
        "spec:",
        "  template:",
        "    spec:",
        "      containers:",
        "      - name: m",
        "        image: app",
        "        env: [{name: NCCL_IB_GID_INDEX, value: \"x\"}]",
    ];
    let check = |name: &str, end: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, lines.map(|l| format!("{l}{end}")).concat()).expect("write");
        let (code, out, _) = run(&["check", "--color", "never", path.to_str().expect("utf8")]);
        (code, out.replace(name, "in.yaml"))
    };
    let lf = check("lf.yaml", "\n");
    assert_eq!(lf.0, 1);
    assert!(
        lf.1.contains(" 10 │         env: [{name: NCCL_IB_GID_INDEX, value: \"x\"}]\n"),
        "{}",
        lf.1
    );
    assert_eq!(check("crlf.yaml", "\r\n"), lf);
}

/// When nothing can be checked (a nodes file or a `--rules` set that cannot be used), the
/// inputs that cannot be read are still named: one run lists every input to fix. A nodes file's
/// error carries its line and column in JSON, as an input's does.
#[test]
fn an_unusable_nodes_file_or_rule_set_still_names_the_unreadable_inputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("nodes.yaml"), "items: [\n").expect("write");
    std::fs::write(dir.path().join("run.yaml"), "kind: Pod\n").expect("write");
    let out = bin()
        .current_dir(dir.path())
        .args([
            "check",
            "-o",
            "json",
            "--nodes-file",
            "nodes.yaml",
            "gone.yaml",
            "run.yaml",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let nodes_error = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["file"] == "nodes.yaml")
        .expect("the nodes file's entry")["errors"][0]
        .clone();
    assert_eq!(
        (nodes_error["line"].as_u64(), nodes_error["column"].as_u64()),
        (Some(1), Some(8))
    );
    let gone: Vec<&serde_json::Value> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["file"] == "gone.yaml")
        .collect();
    assert_eq!(
        gone[0]["errors"],
        serde_json::json!([{"message": "reading gone.yaml: no such file or directory"}])
    );
    assert_eq!(report["summary"]["files"], 2);
    assert_eq!(report["summary"]["inputErrors"], 2);
    let out = bin()
        .current_dir(dir.path())
        .args(["--rules", "no-such-rules", "check", "gone.yaml", "run.yaml"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error: reading gone.yaml: no such file or directory\n"),
        "{stderr}"
    );
}

/// A manifest saved as UTF-16 (PowerShell's `>`) is named as such, with the fix, not as an
/// invalid byte at offset 0.
#[test]
fn a_utf16_manifest_is_named_as_utf16() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut bytes = vec![0xFF, 0xFE];
    for unit in "kind: ConfigMap\n".encode_utf16() {
        bytes.extend(unit.to_le_bytes());
    }
    std::fs::write(dir.path().join("in.yaml"), &bytes).expect("write");
    let out = bin()
        .args(["check", "in.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        without_summary(&["check"], &String::from_utf8_lossy(&out.stderr)),
        "Error: reading in.yaml: the file is UTF-16LE (it starts with that byte-order mark); convert it to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8\n"
    );
}

refused!(
    a_user_override_when_calling_an_unknown_function,
    ["render", "in.yaml"],
    run_yaml(
        "  framework: {exec: {command: [a]}}\n  overrides:\n    - when: {expression: \"platform == 'aws' || sizee(platform) > 0\"}\n      orchestration: {iterations: 2}\n"
    ),
    2,
    "Error: in.yaml:9:26: spec.overrides[0].when.expression: sizee is not a function or method of the CEL library here\n"
);

/// A List item that cannot be checked (an unknown field, an invalid LogProfile, a misspelt
/// kind of our group) is an input error of that item, led by its path; it hides neither the
/// other bad items nor the findings of the good ones.
#[test]
fn each_bad_list_item_is_its_own_error_and_hides_nothing() {
    let list = "apiVersion: v1
kind: List
items:
- apiVersion: nvcre.nvidia.com/v1alpha1
  kind: WorkloadRun
  metadata: {name: a}
  spec:
    bogus: 1
- apiVersion: nvcre.nvidia.com/v1alpha1
  kind: WorkloadRunn
  metadata: {name: b}
- apiVersion: nvcre.nvidia.com/v1alpha1
  kind: WorkloadRun
  metadata: {name: c}
  spec: {}
";
    let (code, out, err) = run_in(&["check", "-o", "json", "in.yaml"], list);
    assert_eq!(code, 2, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let errors: Vec<(String, u64, u64)> = report["results"][0]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["message"].as_str().unwrap_or("").to_string(),
                e["line"].as_u64().unwrap_or(0),
                e["column"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [
            (
                "in.yaml:8:5: items[0]: strict decoding error: unknown field \"spec.bogus\": correct or remove it".to_string(),
                8,
                5
            ),
            (
                "in.yaml:10:9: items[1]: nvcre.nvidia.com/v1alpha1 has kinds WorkloadRun, Workflow, LogProfile, BandwidthMeasurement, GoodputMeasurement (and their lists, such as WorkloadRunList), got \"WorkloadRunn\"".to_string(),
                10,
                9
            ),
        ]
    );
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [
            (
                "wr-image-required".to_string(),
                15,
                3,
                "items[2].spec.image".to_string()
            ),
            (
                "wr-framework-min-properties".to_string(),
                15,
                3,
                "items[2].spec.framework".to_string()
            ),
            (
                "wr-num-nodes-minimum".to_string(),
                15,
                3,
                "items[2].spec.numNodes".to_string()
            ),
        ]
    );
    assert_eq!(report["summary"]["inputErrors"], 2, "{}", report["summary"]);
}

/// A rule file's error met while checking a document (a table render that ran out of the
/// document's CEL budget) is led by that document's place: among several documents, each
/// error says which one it stopped.
#[test]
fn a_rule_file_error_met_by_a_document_names_the_document() {
    let a = path("examples/nccl-all-reduce.yaml");
    let b = path("examples/env-nccl-debug.yaml");
    // `check`, and `render` of several documents, alike.
    for command in ["check", "render"] {
        let (code, _, err) = run(&[
            command,
            "--cel-document-cost-limit",
            "30",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &a,
            &b,
        ]);
        assert_eq!(code, 2, "{command}: {err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("Error: ")).collect();
        assert_eq!(errors.len(), 2, "{command}: {err}");
        for (line, file) in errors.iter().zip([&a, &b]) {
            assert!(
                line.starts_with(&format!(
                    "Error: {file}:4:1: rule pack error: rules/overrides/workloadrun.yaml:"
                )),
                "{command}: {line}"
            );
            assert!(line.contains("CEL cost"), "{command}: {line}");
        }
    }
    // In the reports too: at the document's start.
    let (_, out, _) = run(&[
        "check",
        "--cel-document-cost-limit",
        "30",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "-o",
        "json",
        &a,
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let e = &report["results"][0]["errors"][0];
    assert_eq!(
        (e["line"].as_u64(), e["column"].as_u64()),
        (Some(4), Some(1))
    );
}

#[test]
fn a_measurement_or_log_profile_under_a_misspelt_group_is_refused_and_the_older_group_warned() {
    let input = "\
apiVersion: cre.nvidia.com/v1alpha1
kind: LogProfile
metadata: {name: p}
spec:
  timestamp: {layout: '2006-01-02T15:04:05Z'}
  patterns:
    trainingStep: {regex: 'step (?P<globalStep>\\d+)'}
---
apiVersion: cre.nvidia.com/v1alpha1
kind: BandwidthMeasurement
metadata: {name: b}
spec: {logProfileRef: nccl-bandwidth}
---
apiVersion: foo.nvidia.com/v1
kind: GoodputMeasurement
metadata: {name: g}
spec: {bogus: 1}
";
    let (code, out, err) = run_in(&["check", "-o", "json", "in.yaml"], input);
    assert_eq!(code, 2, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let errors: Vec<&str> = report["results"][0]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["message"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        errors,
        [
            "in.yaml:14:13: expected apiVersion nvcre.nvidia.com/v1alpha1 (or the older cre.nvidia.com/v1alpha1), got \"foo.nvidia.com/v1\""
        ]
    );
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [
            (
                "legacy-api-group".to_string(),
                1,
                13,
                "apiVersion".to_string()
            ),
            (
                "legacy-api-group".to_string(),
                9,
                13,
                "apiVersion".to_string()
            ),
        ]
    );
}
