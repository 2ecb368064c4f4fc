//! The policy is data: each test edits a copy of the shipped rules and shows that the behaviour
//! follows the edit, with no Rust change (a removed rule no longer refuses, a changed row
//! changes the output).

use super::util::*;

use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

/// Deletes the rule `id` (and everything after it up to the next rule) from a pack file.
fn delete_rule(file: &Path, id: &str) {
    let text = std::fs::read_to_string(file).expect("read");
    let start = text
        .find(&format!("  - id: {id}\n"))
        .unwrap_or_else(|| panic!("{} has no rule {id}", file.display()));
    let rest = &text[start + 1..];
    let end = rest
        .find("\n  - id: ")
        .map_or(text.len(), |i| start + 1 + i + 1);
    let mut out = text[..start].to_string();
    out.push_str(&text[end..]);
    std::fs::write(file, out).expect("write");
}

/// The Workflow `render` builds from `examples/unpinned-8-nodes.yaml` (overrides unresolved),
/// with `extra` added under `spec.orchestration`, written to `dir`.
fn unpinned_workflow(dir: &Path, extra: &str) -> PathBuf {
    let out = workflow_of("examples/unpinned-8-nodes.yaml");
    assert!(out.contains("\n    placement: Unpinned\n"), "{out}");
    let file = dir.join("wf.yaml");
    std::fs::write(
        &file,
        out.replacen(
            "\n    placement: Unpinned\n",
            &format!("\n    placement: Unpinned\n    {extra}\n"),
            1,
        ),
    )
    .expect("write");
    file
}

/// `render --expand` of a Workflow over the example AWS fleet.
fn expand(rules: Option<&Path>, workflow: &Path) -> (i32, String, String) {
    let mut args = Vec::new();
    if let Some(r) = rules {
        args.extend(["--rules", s(r)]);
    }
    args.extend(["render", "--expand", "--nodes-file"]);
    let nodes = path("examples/nodes/aws-h100-18.yaml");
    args.push(&nodes);
    args.push(s(workflow));
    run(&args)
}

// ---- item: a rule enforced once, in rules/ -------------------------------------------------

#[test]
fn without_the_unpinned_strict_domain_rule_the_combination_places() {
    let (dir, rules) = rules_copy();
    let wf = unpinned_workflow(
        dir.path(),
        "topology: {topologyKey: topology.kubernetes.io/zone, strictDomain: true}",
    );
    let (code, _, err) = expand(None, &wf);
    assert_eq!(code, 1);
    assert!(!err.contains("validate resolved job template"), "{err}");
    assert!(err.ends_with("orchestration.placement: Unpinned is incompatible with orchestration.topology.strictDomain: strictDomain runs one job per topology domain, Unpinned runs exactly one job; to confine a single unpinned job to one domain, name the domain label in target.matchExpressions instead\n"), "{err}");
    delete_rule(
        &rules.join("contract/placement.yaml"),
        "unpinned-strict-domain",
    );
    let (code, out, err) = expand(Some(&rules), &wf);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("Unpinned is incompatible"), "{err}");
    assert!(err.ends_with("group-0: unpinned\n"), "{err}");
    assert!(out.contains("kind: TrainJob"));
}

#[test]
fn without_the_unpinned_diagnose_rule_the_combination_places() {
    let (dir, rules) = rules_copy();
    let wf = unpinned_workflow(dir.path(), "diagnose: {minGroupSize: 2}");
    let (code, _, err) = expand(None, &wf);
    assert_eq!(code, 1);
    assert!(!err.contains("validate resolved job template"), "{err}");
    assert!(err.ends_with("orchestration.placement: Unpinned is incompatible with orchestration.diagnose: diagnose isolates faults by partitioning nodes into groups and bisecting the failures, which requires the node pinning Unpinned removes; drop one of the two\n"), "{err}");
    delete_rule(&rules.join("contract/placement.yaml"), "unpinned-diagnose");
    let (code, _, err) = expand(Some(&rules), &wf);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("Unpinned is incompatible"), "{err}");
    assert!(err.ends_with("group-0: unpinned\n"), "{err}");
}

// ---- the valid spec.thresholds keys ---------------------------------------------------------

const THRESHOLDS_RUN: &str = "apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata:
  name: nccl-all-reduce
spec:
  image: nvcr.io/nvidia/pytorch:26.01-py3
  framework:
    mpi:
      mpirunPath: /usr/local/mpi/bin/mpirun
      binary: /usr/local/bin/all_reduce_perf_mpi
  numNodes: 2
  thresholds:
    zeta: value > 1
    goodputRatio: value > 0.9
";

#[test]
fn valid_threshold_keys_are_the_admission_rule_list() {
    let (dir, rules) = rules_copy();
    let run_file = dir.path().join("run.yaml");
    std::fs::write(&run_file, THRESHOLDS_RUN).expect("write");
    let args = [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        s(&run_file),
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!(
            "{}:13:11: spec.thresholds.zeta: workloadrun nccl-all-reduce: unknown threshold key(s) [zeta]; valid keys: [busBandwidthGBps, algBandwidthGBps, goodputRatio, avgTFLOPsPerGPU, avgStepTimeSec]\n",
            s(&run_file)
        )
    );
    edit(
        &rules.join("admission/workloadrun.yaml"),
        "'avgStepTimeSec']",
        "'avgStepTimeSec', 'zeta']",
    );
    let mut with_rules = vec!["--rules", s(&rules)];
    with_rules.extend(args);
    let (code, out, err) = run(&with_rules);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "thresholds:\n          goodputRatio: value > 0.9\n          zeta: value > 1\n"
        ),
        "{out}"
    );
}

// ---- the platform of a node no row names ----------------------------------------------------

const CATCH_ALL: &str = "  - id: other\n    include: \"true\"\n    platform: onprem\n";

/// `render -o json --nodes-file rules/tests/platform-detection/data/nodes-hcloud.yaml` of the
/// example run, with the given rules.
fn render_hcloud(rules: &Path) -> (i32, String, String) {
    let nodes = path("rules/tests/platform-detection/data/nodes-hcloud.yaml");
    let example = path("examples/nccl-all-reduce.yaml");
    run(&[
        "--rules",
        s(rules),
        "render",
        "-o",
        "json",
        "--nodes-file",
        &nodes,
        &example,
    ])
}

#[test]
fn the_detection_tables_catch_all_row_decides_an_unknown_provider() {
    let (_dir, rules) = rules_copy();
    let file = rules.join("detect/platforms.yaml");
    edit(
        &file,
        CATCH_ALL,
        "  - id: other\n    include: \"true\"\n    platform: baremetal\n",
    );
    let (code, out, err) = render_hcloud(&rules);
    assert_eq!(code, 0, "{err}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"],
        "baremetal"
    );
}

#[test]
fn without_a_catch_all_row_an_unknown_provider_is_an_error_naming_the_table() {
    let (_dir, rules) = rules_copy();
    edit(&rules.join("detect/platforms.yaml"), CATCH_ALL, "");
    let (code, out, err) = render_hcloud(&rules);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(
        err,
        "Error: no row of table \"platform-detection\" matches node (providerID \"hcloud://4711\"); the table decides every case, so end it with a catch-all row (include: \"true\")\n"
    );
}

// ---- what testScale means --------------------------------------------------------------------

#[test]
fn test_scale_meaning_is_the_test_scale_table() {
    let (dir, rules) = rules_copy();
    let run_file = dir.path().join("run.yaml");
    let text = std::fs::read_to_string(path("examples/nccl-all-reduce.yaml")).expect("read");
    let size = "\n  numNodes: 4   # nodes per job group; all eligible nodes are partitioned into 4-node jobs\n";
    assert!(text.contains(size));
    std::fs::write(
        &run_file,
        text.replacen(
            size,
            "\n  numNodes: 4\n  orchestration: {testScale: intra-node}\n",
            1,
        ),
    )
    .expect("write");
    let render = |rules: Option<&Path>| {
        let mut args = Vec::new();
        if let Some(r) = rules {
            args.extend(["--rules", s(r)]);
        }
        args.extend([
            "render",
            "-o",
            "json",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
        ]);
        args.push(s(&run_file));
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
        (
            wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numNodes"]
                .clone(),
            wf["spec"]["orchestration"]["topology"].clone(),
        )
    };
    assert_eq!(
        render(None),
        (serde_json::json!(1), serde_json::Value::Null)
    );
    edit(
        &rules.join("defaults/test-scale.yaml"),
        "    nodesPerJob: 1\n",
        "    nodesPerJob: \"${{ params.numNodes / 2 }}\"\n    strictDomain: true\n",
    );
    assert_eq!(
        render(Some(&rules)),
        (
            serde_json::json!(2),
            serde_json::json!({"strictDomain": true})
        )
    );
}

// ---- default tolerations -----------------------------------------------------------------------

/// The tolerations of the `launcher` job in the first TrainJob of `render --expand` of the
/// Unpinned example over the AWS fleet.
fn unpinned_launcher_tolerations(rules: Option<&Path>) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(r) = rules {
        args.extend(["--rules", s(r)]);
    }
    let nodes = path("examples/nodes/aws-h100-18.yaml");
    let example = path("examples/unpinned-8-nodes.yaml");
    args.extend([
        "render",
        "-o",
        "json",
        "--expand",
        "--nodes-file",
        &nodes,
        &example,
    ]);
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<serde_json::Value>()
        .collect::<Result<_, _>>()
        .expect("json stream");
    let job = docs
        .iter()
        .find(|d| d["kind"] == "TrainJob")
        .expect("a TrainJob");
    let jobs = job["spec"]["runtimePatches"]
        .as_array()
        .expect("patches")
        .iter()
        .flat_map(|p| {
            p["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find(|j| j["name"] == "launcher" && !j["template"].is_null())
        .expect("launcher patch");
    jobs["template"]["spec"]["template"]["spec"]["tolerations"].clone()
}

#[test]
fn unpinned_tolerations_are_the_scheduling_table() {
    let (_dir, rules) = rules_copy();
    assert_eq!(
        unpinned_launcher_tolerations(None),
        serde_json::json!([
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
        ])
    );
    edit(
        &rules.join("defaults/scheduling.yaml"),
        "      - {key: kubernetes.io/arch, operator: Equal, value: arm64, effect: NoSchedule}\n",
        "      - {key: example.com/dedicated, operator: Exists}\n",
    );
    assert_eq!(
        unpinned_launcher_tolerations(Some(&rules)),
        serde_json::json!([
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "example.com/dedicated", "operator": "Exists"}
        ])
    );
}

// ---- a new platform end to end, with no Rust change -------------------------------------------

#[test]
fn shipped_platform_help_lists_the_detection_table() {
    let (code, out, err) = run(&["render", "--help"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("--platform <PLATFORM>  Resolve overrides for this platform (aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale: the platform-detection rows with `synthetic`) and enforce the post-override contract\n"),
        "{out}"
    );
}

#[test]
fn a_new_platform_end_to_end_from_rule_data_only() {
    let (dir, rules) = rules_copy();
    edit(
        &rules.join("detect/platforms.yaml"),
        CATCH_ALL,
        &format!(
            "  - id: lambda\n    include: params.node.providerID.startsWith('lambda://')\n    platform: lambda\n    synthetic: {{order: 10, providerID: \"lambda://gpu-node-0\", labels: {{}}}}\n{CATCH_ALL}"
        ),
    );
    let table = rules.join("overrides/workloadrun.yaml");
    let mut text = std::fs::read_to_string(&table).expect("read");
    text.push_str("\n  - id: lambda-socket\n    when: {platform: {equals: lambda}}\n    mpiArgs: [-x, NCCL_SOCKET_IFNAME=enp1s0]\n");
    std::fs::write(&table, text).expect("write");
    let r = s(&rules);

    // --help lists it.
    let (code, out, _) = run(&["--rules", r, "render", "--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("(aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale, lambda: the platform-detection rows with `synthetic`)"),
        "{out}"
    );
    // --platform validation accepts it, and lists it when refusing another.
    let example = path("examples/nccl-all-reduce.yaml");
    let (code, _, err) = run(&[
        "--rules",
        r,
        "render",
        "--platform",
        "moon",
        "--gpu-arch",
        "h100",
        &example,
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "Error: invalid --platform \"moon\": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale, lambda\n"
    );
    let mpi_args = |out: &str| -> Vec<String> {
        let wf: serde_json::Value = serde_json::from_str(out).expect("json");
        wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect()
    };
    let has_socket = |args: &[String]| {
        args.windows(2)
            .any(|w| w[0] == "-x" && w[1] == "NCCL_SOCKET_IFNAME=enp1s0")
    };
    // render --platform lambda applies its override row.
    let (code, out, err) = run(&[
        "--rules",
        r,
        "render",
        "-o",
        "json",
        "--platform",
        "lambda",
        "--gpu-arch",
        "h100",
        &example,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(has_socket(&mpi_args(&out)), "{out}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"],
        "lambda"
    );
    // Detection from a nodes file.
    let nodes = dir.path().join("nodes.yaml");
    let hcloud = std::fs::read_to_string(path(
        "rules/tests/platform-detection/data/nodes-hcloud.yaml",
    ))
    .expect("read");
    std::fs::write(&nodes, hcloud.replace("hcloud://4711", "lambda://4711")).expect("write");
    let (code, out, err) = run(&[
        "--rules",
        r,
        "render",
        "-o",
        "json",
        "--nodes-file",
        s(&nodes),
        &example,
    ]);
    assert_eq!(code, 0, "{err}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"],
        "lambda"
    );
    assert!(has_socket(&mpi_args(&out)), "{out}");
    // The shipped rules know no lambda.
    let (code, _, _) = run(&[
        "render",
        "--platform",
        "lambda",
        "--gpu-arch",
        "h100",
        &example,
    ]);
    assert_eq!(code, 2);
}

// ---- the runtime templates -------------------------------------------------------------------

/// The worker bootstrap and the launcher init script of a run, rendered with `rules`.
fn runtime_scripts(rules: Option<&Path>, run_file: &Path) -> (String, String) {
    let mut args = Vec::new();
    if let Some(r) = rules {
        args.extend(["--rules", s(r)]);
    }
    args.extend([
        "render",
        "-o",
        "json",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
    ]);
    args.push(s(run_file));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    let jobs = &wf["spec"]["dependencies"][0]["spec"]["template"]["spec"]["replicatedJobs"];
    let script = |job: usize, path: &str| {
        jobs[job]["template"]["spec"]["template"]["spec"][path][0]["command"][2]
            .as_str()
            .expect("script")
            .to_string()
    };
    (script(0, "containers"), script(1, "initContainers"))
}

#[test]
fn the_worker_bootstrap_and_the_kai_wait_are_the_runtime_templates_table() {
    let (_dir, rules) = rules_copy();
    // The example runs under kai-scheduler.
    let run_file = root().join("examples/nccl-all-reduce.yaml");
    let (worker, launcher) = runtime_scripts(None, &run_file);
    assert!(worker.contains("\n  apt-get update -qq\n  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server\n"), "{worker}");
    assert!(launcher.contains("\n  sleep 5\n"), "{launcher}");
    // An air-gapped UBI image: install sshd with microdnf; wait 60 tries 10 s apart.
    let file = rules.join("defaults/runtime.yaml");
    edit(
        &file,
        "          apt-get update -qq\n          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server\n",
        "          microdnf install -y openssh-server\n",
    );
    edit(
        &file,
        "  waitTries: 240\n  waitSleepSeconds: 5\n",
        "  waitTries: 60\n  waitSleepSeconds: 10\n",
    );
    let (worker, launcher) = runtime_scripts(Some(&rules), &run_file);
    assert_eq!(
        worker,
        "set -e\nif [ ! -x /usr/sbin/sshd ]; then\n  microdnf install -y openssh-server\nfi\nmkdir -p /var/run/sshd\nmkdir -p /root/.ssh\ncp /tmp/mpi-ssh-raw/* /root/.ssh/\nchmod 700 /root/.ssh\nchmod 600 /root/.ssh/*\nfor f in /root/.ssh/*.pub /root/.ssh/authorized_keys; do\n  if [ -e \"$f\" ]; then chmod 644 \"$f\"; fi\ndone\nssh-keygen -A\nexec /usr/sbin/sshd -De"
    );
    assert!(
        launcher.contains("\n  if [ \"$tries\" -ge 60 ]; then\n"),
        "{launcher}"
    );
    assert!(
        launcher.contains(" after 60 tries 10s apart. "),
        "{launcher}"
    );
    assert!(launcher.ends_with("\n  sleep 10\ndone"), "{launcher}");
}

// ---- list merge keys and $patch directives ---------------------------------------------------

/// A torch run whose override adds a `/scratch` mount (and, with `directive`, first empties the
/// worker's mounts with `$patch: replace`).
fn scratch_run(directive: bool) -> String {
    format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata: {{name: t}}
spec:
  image: img
  numNodes: 2
  framework:
    torch: {{script: train.py}}
  overrides:
    - when: {{platform: {{equals: aws}}}}
      dependencies:
        - apiVersion: trainer.kubeflow.org/v1alpha1
          kind: TrainingRuntime
          metadata: {{name: t-runtime}}
          spec:
            template:
              spec:
                replicatedJobs:
                  - name: node
                    template:
                      spec:
                        template:
                          spec:
                            volumes: [{{name: scratch, emptyDir: {{}}}}]
                            containers:
                              - name: node
                                volumeMounts:{}
                                  - {{name: scratch, mountPath: /scratch}}
",
        if directive {
            "\n                                  - $patch: replace"
        } else {
            ""
        }
    )
}

/// The worker's volume mounts of `run` rendered for AWS H100 with `rules`.
fn worker_mounts(rules: Option<&Path>, run_file: &Path) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(r) = rules {
        args.extend(["--rules", s(r)]);
    }
    args.extend([
        "render",
        "-o",
        "json",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
    ]);
    args.push(s(run_file));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    wf["spec"]["dependencies"][0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
        ["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .clone()
}

#[test]
fn a_user_patch_replace_directive_replaces_the_list_and_merge_keys_are_the_list_merge_table() {
    let (dir, rules) = rules_copy();
    let merged = dir.path().join("merged.yaml");
    let replaced = dir.path().join("replaced.yaml");
    std::fs::write(&merged, scratch_run(false)).expect("write");
    std::fs::write(&replaced, scratch_run(true)).expect("write");
    let dshm = serde_json::json!({"name": "dshm", "mountPath": "/dev/shm"});
    let scratch = serde_json::json!({"name": "scratch", "mountPath": "/scratch"});
    // Shipped rules: mounts merge by mountPath; `$patch: replace` replaces, and is not output.
    assert_eq!(
        worker_mounts(None, &merged),
        serde_json::json!([dshm, scratch])
    );
    assert_eq!(worker_mounts(None, &replaced), serde_json::json!([scratch]));
    // A rule set whose list-merge row says volumeMounts are replaced: no directive needed.
    edit(
        &rules.join("overrides/list-merge.yaml"),
        "    paths: [\"**.volumeMounts\"]\n    mergeKey: mountPath\n",
        "    paths: [\"**.volumeMounts\"]\n    replace: true\n",
    );
    assert_eq!(
        worker_mounts(Some(&rules), &merged),
        serde_json::json!([scratch])
    );
}

// ---- GPU product names -----------------------------------------------------------------------

#[test]
fn a_gpu_products_row_and_a_defaults_row_teach_detection_a_new_gpu() {
    let (dir, rules) = rules_copy();
    let nodes = dir.path().join("nodes.yaml");
    let hcloud = std::fs::read_to_string(path(
        "rules/tests/platform-detection/data/nodes-hcloud.yaml",
    ))
    .expect("read");
    let h20 = hcloud
        .replace("hcloud://4711", "aws:///us-east-1a/i-0")
        .replace("NVIDIA-H100-80GB-HBM3", "NVIDIA-H20-96GB-HBM3");
    std::fs::write(&nodes, h20).expect("write");
    let example = path("examples/nccl-all-reduce.yaml");
    let render = |rules: Option<&Path>| {
        let mut args = Vec::new();
        if let Some(r) = rules {
            args.extend(["--rules", s(r)]);
        }
        args.extend(["render", "-o", "json", "--nodes-file", s(&nodes), &example]);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
        (
            wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-gpu-architecture"].clone(),
            wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numProcPerNode"]
                .clone(),
        )
    };
    // Shipped rules: no H20 row, so the H20 is named by the generic row ("h20") and gets the
    // defaults of an unknown architecture (4 GPUs per node).
    assert_eq!(
        render(None),
        (serde_json::json!("h20"), serde_json::json!(4))
    );
    // A row for the H20 (named h20-96g here, to tell it from the generic name) and its
    // defaults row.
    edit(
        &rules.join("defaults/gpu-products.yaml"),
        "  - id: rtx-pro-6000\n",
        "  - id: h20\n    match: '^NVIDIA-H20-(\\d+)GB'\n    architecture: h20-${1}g\n  - id: rtx-pro-6000\n",
    );
    edit(
        &rules.join("defaults/gpu-defaults.yaml"),
        "entries:\n",
        "entries:\n  - {id: h20, gpuArchitecture: h20-96g, gpusPerNode: 8, mlnxPerNode: 8, enableMNNVL: false, selectable: true}\n",
    );
    assert_eq!(
        render(Some(&rules)),
        (serde_json::json!("h20-96g"), serde_json::json!(8))
    );
    // --gpu-arch goes through the same rows.
    let (code, out, err) = run(&[
        "--rules",
        s(&rules),
        "render",
        "-o",
        "json",
        "--platform",
        "aws",
        "--gpu-arch",
        "NVIDIA H20 96GB",
        &example,
    ]);
    assert_eq!(code, 0, "{err}");
    let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-gpu-architecture"],
        "h20-96g"
    );
}

// ---- gang defaults ---------------------------------------------------------------------------

#[test]
fn the_default_queue_and_its_label_key_are_the_gang_defaults_table() {
    let (dir, rules) = rules_copy();
    let run_file = dir.path().join("run.yaml");
    let text = std::fs::read_to_string(path("examples/nccl-all-reduce.yaml")).expect("read");
    let gang = "  gangScheduler:\n    schedulerName: kai-scheduler\n    queue: high-priority\n";
    assert!(text.contains(gang));
    std::fs::write(
        &run_file,
        text.replacen(
            gang,
            "  gangScheduler:\n    schedulerName: kai-scheduler\n",
            1,
        ),
    )
    .expect("write");
    let render = |rules: Option<&Path>| {
        let mut args = Vec::new();
        if let Some(r) = rules {
            args.extend(["--rules", s(r)]);
        }
        args.extend([
            "render",
            "-o",
            "json",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
        ]);
        args.push(s(&run_file));
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        let wf: serde_json::Value = serde_json::from_str(&out).expect("json");
        (
            wf["spec"]["gangScheduler"].clone(),
            wf["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"].clone(),
        )
    };
    let (intent, labels) = render(None);
    assert_eq!(
        intent,
        serde_json::json!({"schedulerName": "kai-scheduler", "queue": "default-queue", "queueLabelKey": "kai.scheduler/queue"})
    );
    assert_eq!(labels["kai.scheduler/queue"], "default-queue");
    edit(
        &rules.join("defaults/gang.yaml"),
        "    queue: default-queue\n    queueLabelKey: kai.scheduler/queue\n",
        "    queue: batch\n    queueLabelKey: example.com/queue\n",
    );
    // The build and the workload-labels / gang-contract stages (which check the label) agree.
    let (intent, labels) = render(Some(&rules));
    assert_eq!(
        intent,
        serde_json::json!({"schedulerName": "kai-scheduler", "queue": "batch", "queueLabelKey": "example.com/queue"})
    );
    assert_eq!(labels["example.com/queue"], "batch");
    assert_eq!(labels.get("kai.scheduler/queue"), None);
}
