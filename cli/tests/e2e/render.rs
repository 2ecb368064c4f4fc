//! End-to-end tests of the `nvcre-policy` binary on the seed examples (issue "Spine", "Done
//! means"). Every test asserts exact values.

use super::util::*;

use serde_json::{Value, json};

fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

/// Runs `render -o json` and returns (exit code, stdout JSON or Null, stderr).
fn render(args: &[&str]) -> (i32, Value, String) {
    let out = bin()
        .arg("render")
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        value,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn runtime(wf: &Value) -> &Value {
    wf["spec"]["dependencies"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["kind"] == "TrainingRuntime"))
        .expect("a TrainingRuntime dependency")
}

fn replicated_job<'a>(wf: &'a Value, name: &str) -> &'a Value {
    runtime(wf)["spec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .and_then(|j| j.iter().find(|j| j["name"] == name))
        .expect("replicated job")
}

fn trainer_script(wf: &Value) -> String {
    let trainer = &wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"];
    assert_eq!(trainer["command"], json!(["/bin/bash", "-c"]));
    trainer["args"][0].as_str().expect("script").to_string()
}

#[test]
fn seed_all_reduce_on_aws_h100() {
    let (code, wf, stderr) = render(&[
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let job_spec = &wf["spec"]["jobTemplate"]["spec"];
    assert_eq!(
        job_spec["workloadMetadata"]["labels"],
        json!({"kai.scheduler/queue": "high-priority"})
    );
    for name in ["launcher", "node"] {
        let rj = replicated_job(&wf, name);
        assert_eq!(
            rj["template"]["metadata"]["labels"]["kai.scheduler/queue"], "high-priority",
            "{name}"
        );
        assert_eq!(
            rj["template"]["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"],
            "high-priority",
            "{name}"
        );
        assert_eq!(
            rj["template"]["spec"]["template"]["spec"]["schedulerName"], "kai-scheduler",
            "{name}"
        );
    }
    assert_eq!(
        wf["spec"]["gangScheduler"],
        json!({"schedulerName": "kai-scheduler", "queue": "high-priority", "queueLabelKey": "kai.scheduler/queue"})
    );
    let script = trainer_script(&wf);
    assert!(
        script.starts_with(
            "rm -rf /opt/amazon\nunset NCCL_NET_PLUGIN\nunset NCCL_TUNER_PLUGIN\nunset AWS_OFI_NCCL_VERSION\nexec 'timeout' '3600' '/usr/local/mpi/bin/mpirun' '-N' '8' '--allow-run-as-root' '--mca' 'plm_rsh_args' '-o StrictHostKeyChecking=no -o ConnectionAttempts=10' '-x' 'NCCL_DEBUG=INFO'"
        ),
        "{script}"
    );
    assert!(
        script.ends_with(
            "'-x' 'NCCL_SOCKET_IFNAME=eth0' '-x' 'NCCL_NET_PLUGIN=none' '/usr/local/bin/all_reduce_perf_mpi' '-b' '8' '-e' '32G' '-f' '2' '-n' '100'"
        ),
        "{script}"
    );
    let worker =
        &replicated_job(&wf, "node")["template"]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        worker["resources"]["requests"]["vpc.amazonaws.com/efa"],
        json!(32)
    );
    assert_eq!(
        worker["resources"]["limits"]["vpc.amazonaws.com/efa"],
        json!(32)
    );
    assert_eq!(
        worker["resources"]["requests"]["nvidia.com/gpu"],
        json!("8")
    );
    assert!(
        wf["spec"].get("overrides").is_none(),
        "overrides must be cleared"
    );
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-platform"],
        "aws"
    );
    assert_eq!(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/detected-gpu-architecture"],
        "h100"
    );
}

#[test]
fn seed_all_reduce_on_aws_gb300_pins_transport_and_claims() {
    let (code, wf, stderr) = render(&[
        "--platform",
        "aws",
        "--gpu-arch",
        "NVIDIA GB300",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let script = trainer_script(&wf);
    let gb300 = "'--mca' 'orte_keep_fqdn_hostnames' 'true' '--mca' 'pml' 'ob1' '--mca' 'btl' 'tcp,self' '--mca' 'btl_tcp_if_include' 'eth0' '--mca' 'oob' 'tcp' '--mca' 'oob_tcp_if_include' 'eth0' '--mca' 'coll_ucc_enable' '0' '--mca' 'coll_hcoll_enable' '0' '-x' 'NCCL_DEBUG_SUBSYS=NET,INIT' '-x' 'NCCL_SOCKET_IFNAME=eth0' '-x' 'NCCL_IB_GID_INDEX=3' '-x' 'NCCL_NVLS_ENABLE=1' '-x' 'NCCL_CUMEM_ENABLE=1' '-x' 'NCCL_NET_GDR_C2C=1' '-x' 'NCCL_NET_PLUGIN=none' '/usr/local/bin/all_reduce_perf_mpi'";
    assert!(script.contains(gb300), "{script}");
    // Names the GB300 block forwards are not forwarded twice from the base env.
    assert_eq!(script.matches("NCCL_SOCKET_IFNAME").count(), 1, "{script}");
    let deps = wf["spec"]["dependencies"].as_array().expect("deps");
    let kinds: Vec<(&str, &str)> = deps
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("TrainingRuntime", "nccl-all-reduce-runtime"),
            ("ComputeDomain", "nccl-all-reduce-compute-domain"),
            ("ResourceClaimTemplate", "nccl-all-reduce-roce"),
        ]
    );
    assert_eq!(deps[1]["spec"]["numNodes"], json!(4));
    assert_eq!(
        deps[1]["spec"]["channel"],
        json!({"allocationMode": "Single", "resourceClaimTemplate": {"name": "nccl-all-reduce-channel"}})
    );
    assert_eq!(
        deps[2]["spec"]["spec"]["devices"]["requests"],
        json!([{"name": "roce", "exactly": {"deviceClassName": "roce.networking.k8s.aws", "count": 8}}])
    );
    let pod = &replicated_job(&wf, "node")["template"]["spec"]["template"]["spec"];
    assert_eq!(
        pod["resourceClaims"],
        json!([
            {"name": "compute-domain", "resourceClaimTemplateName": "nccl-all-reduce-channel"},
            {"name": "roce-channel", "resourceClaimTemplateName": "nccl-all-reduce-roce"}
        ])
    );
    assert_eq!(
        pod["containers"][0]["resources"]["claims"],
        json!([{"name": "compute-domain"}, {"name": "roce-channel"}])
    );
    assert_eq!(
        wf["spec"]["orchestration"]["topology"],
        json!({"topologyKey": "topology.k8s.aws/network-node-layer-1"})
    );
}

#[test]
fn rejected_override_prints_the_seed_message_and_nothing_on_stdout() {
    let out = bin()
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &example("override-rejected.yaml"),
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\"\n"
    );
}

#[test]
fn accepted_override_adds_the_unrelated_label() {
    let (code, wf, stderr) = render(&[
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("override-accepted.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        wf["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"],
        json!({"kai.scheduler/queue": "team-a", "cost-center": "hpc"})
    );
}

#[test]
fn runai_variant_uses_runai_queue_and_scheduler_everywhere() {
    let out = bin()
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &example("nccl-all-reduce-runai.yaml"),
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("kai.scheduler/queue"), "{text}");
    assert!(!text.contains("kai-scheduler"), "{text}");
    let (_, wf, _) = render(&[
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce-runai.yaml"),
    ]);
    assert_eq!(
        wf["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"],
        json!({"runai/queue": "team-a"})
    );
    for name in ["launcher", "node"] {
        let rj = replicated_job(&wf, name);
        assert_eq!(
            rj["template"]["metadata"]["labels"]["runai/queue"],
            "team-a"
        );
        assert_eq!(
            rj["template"]["spec"]["template"]["metadata"]["labels"]["runai/queue"],
            "team-a"
        );
        assert_eq!(
            rj["template"]["spec"]["template"]["spec"]["schedulerName"],
            "runai-scheduler"
        );
        // Outside KAI the launcher waits for the workers through dependsOn.
        if name == "launcher" {
            assert_eq!(
                rj["dependsOn"],
                json!([{"name": "node", "status": "Ready"}])
            );
        }
    }
}

#[test]
fn without_platform_overrides_stay_unresolved() {
    let (code, wf, stderr) = render(&["--gpu-arch", "h100", &example("nccl-all-reduce.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(wf["spec"]["overrides"].as_array().map(Vec::len), Some(25));
    assert!(
        wf["metadata"]["annotations"]
            .get("nvcrectl.nvidia.com/detected-platform")
            .is_none()
    );
    let trainer = &wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"];
    assert_eq!(
        trainer["command"],
        json!(["timeout", "3600", "/usr/local/mpi/bin/mpirun"])
    );
    // The contract is a template: the queue label is already composed.
    assert_eq!(
        wf["spec"]["jobTemplate"]["spec"]["workloadMetadata"]["labels"],
        json!({"kai.scheduler/queue": "high-priority"})
    );
}

#[test]
fn missing_architecture_is_the_exact_error() {
    let out = bin()
        .args(["render", &example("nccl-all-reduce.yaml")])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    // The original's words, as an input error of the document (with several files, the user
    // must know which), at its node selector.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "Error: {}:20:5: cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector (or pass --gpu-arch ARCH, or --nodes-file FILE to detect it from the target nodes)\n",
            example("nccl-all-reduce.yaml")
        )
    );
}

#[test]
fn bad_platform_flag_is_the_exact_error() {
    let out = bin()
        .args([
            "render",
            "--platform",
            "bogus",
            "--gpu-arch",
            "h100",
            &example("nccl-all-reduce.yaml"),
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: invalid --platform \"bogus\": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale\n"
    );
}

#[test]
fn edited_rules_take_effect_without_rebuilding() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("overrides/workloadrun.yaml"),
        "- rm -rf /opt/amazon\n",
        "- rm -rf /opt/amazon/efa\n",
    );
    let (code, wf, stderr) = render(&[
        "--rules",
        rules.to_str().expect("utf8"),
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(trainer_script(&wf).starts_with("rm -rf /opt/amazon/efa\nunset NCCL_NET_PLUGIN\n"));
}

#[test]
fn a_rule_with_a_cel_syntax_error_is_refused_with_file_line_and_rule() {
    let (_dir, rules) = rules_copy();
    let pack = rules.join("admission/workloadrun.yaml");
    edit(
        &pack,
        "expression: size(object.spec.gangScheduler.queue) <= 63",
        "expression: size(object.spec.gangScheduler.queue <= 63",
    );
    let out = bin()
        .args([
            "--rules",
            rules.to_str().expect("utf8"),
            "render",
            "--gpu-arch",
            "h100",
            &example("nccl-all-reduce.yaml"),
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "Error: rule pack error: {}:238:61: rule wr-gang-queue-length: CEL does not compile: Syntax error: missing ')' at '<EOF>' (expression column 43)\n",
        pack.display()
    );
    assert_eq!(stderr, want);
}

#[test]
fn check_reports_a_too_long_queue_at_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("run.yaml");
    let text = std::fs::read_to_string(example("nccl-all-reduce.yaml")).expect("read");
    std::fs::write(
        &file,
        text.replace(
            "queue: high-priority",
            &format!("queue: {}", "q".repeat(64)),
        ),
    )
    .expect("write");
    let out = bin()
        .args(["check", "-o", "json", file.to_str().expect("utf8")])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let findings = findings(&serde_json::from_slice(&out.stdout).expect("json"));
    assert_eq!(
        findings,
        json!([{
            "ruleId": "wr-gang-queue-length",
            "pack": "workloadrun-admission",
            "severity": "error",
            "message": "Too long: may not be more than 63 bytes",
            "file": file.display().to_string(),
            "document": 0,
            "fieldPath": "spec.gangScheduler.queue",
            "line": 18,
            "column": 12,
            "ruleFile": "rules/admission/workloadrun.yaml",
            "ruleLine": 234
        }])
    );
    let text_out = bin()
        .args(["check", "--no-color", file.to_str().expect("utf8")])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&text_out.stdout);
    assert!(
        text.starts_with(&format!(
            "{}:18:12: error[wr-gang-queue-length]: Too long: may not be more than 63 bytes (spec.gangScheduler.queue)\n",
            file.display()
        )),
        "{text}"
    );
}

#[test]
fn check_of_the_examples_is_clean() {
    let out = bin()
        .args(["check", &root().join("examples").display().to_string()])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn workloadrun_render_is_the_same_command() {
    let a = bin()
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &example("nccl-all-reduce.yaml"),
        ])
        .output()
        .expect("runs");
    let b = bin()
        .args([
            "workloadrun",
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &example("nccl-all-reduce.yaml"),
        ])
        .output()
        .expect("runs");
    assert_eq!(a.stdout, b.stdout);
    assert!(!a.stdout.is_empty());
}

/// docs/rules.md "Worked example: a new cloud", step by step.
#[test]
fn worked_example_new_cloud() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("detect/platforms.yaml"),
        "  - id: other\n",
        "  - id: examplecloud\n    include: params.node.providerID.startsWith('examplecloud://')\n    platform: examplecloud\n    synthetic: {order: 10, providerID: \"examplecloud://gpu-node-0\", labels: {}}\n  - id: other\n",
    );
    let table = rules.join("overrides/workloadrun.yaml");
    let mut text = std::fs::read_to_string(&table).expect("read");
    text.push_str(
        r#"
  - id: examplecloud-nccl
    when: {platform: {equals: examplecloud}}
    mpiArgs: [--mca, btl_tcp_if_include, ens5]
    dependencies:
      - apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainingRuntime
        metadata: {name: "${{ params.entryName }}-runtime"}
        spec:
          template:
            spec:
              replicatedJobs:
                - name: node
                  template:
                    spec:
                      template:
                        spec:
                          containers:
                            - name: node
                              env: [{name: NCCL_IB_TIMEOUT, value: "22"}]
"#,
    );
    std::fs::write(&table, text).expect("write");
    let suite = rules.join("tests/examplecloud");
    std::fs::create_dir_all(&suite).expect("mkdir");
    let input = std::fs::read_to_string(example("nccl-all-reduce.yaml")).expect("read");
    std::fs::write(
        suite.join("examplecloud.yaml"),
        format!(
            "cases:\n  - note: examplecloud adds the socket interface and the IB timeout\n    mode: render\n    context: {{platform: examplecloud, gpuArch: h100}}\n    input: |\n{}    want_output:\n      spec:\n        jobTemplate:\n          spec:\n            workload:\n              trainJob:\n                trainer:\n                  command: [timeout, \"3600\", /usr/local/mpi/bin/mpirun]\n",
            input.lines().map(|l| format!("      {l}\n")).collect::<String>()
        ),
    )
    .expect("write suite");
    let r = rules.to_str().expect("utf8");
    let test = bin().args(["--rules", r, "test"]).output().expect("runs");
    let summary =
        String::from_utf8_lossy(&test.stdout).to_string() + &String::from_utf8_lossy(&test.stderr);
    assert_eq!(test.status.code(), Some(0), "{summary}");
    assert!(summary.contains(" passed, 0 failed"), "{summary}");
    let (code, wf, stderr) = render(&[
        "--rules",
        r,
        "--platform",
        "examplecloud",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let args: Vec<&str> =
        wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
    let bin_at = args
        .iter()
        .position(|a| *a == "/usr/local/bin/all_reduce_perf_mpi")
        .expect("binary");
    assert_eq!(
        &args[bin_at - 5..bin_at],
        &[
            "-x",
            "NCCL_SOCKET_IFNAME=eth0",
            "--mca",
            "btl_tcp_if_include",
            "ens5"
        ]
    );
    let env = replicated_job(&wf, "node")["template"]["spec"]["template"]["spec"]["containers"][0]
        ["env"]
        .as_array()
        .expect("env")
        .clone();
    assert_eq!(
        env.last(),
        Some(&json!({"name": "NCCL_IB_TIMEOUT", "value": "22"}))
    );
}

#[test]
fn a_type_error_is_an_input_error_with_its_line_in_every_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("four.yaml");
    let text = std::fs::read_to_string(example("nccl-all-reduce.yaml")).expect("read");
    std::fs::write(&file, text.replace("numNodes: 4 ", "numNodes: \"four\" ")).expect("write");
    let f = file.to_str().expect("utf8");
    let message = format!(
        "{f}:15:13: parsing WorkloadRun: spec.numNodes: invalid type: string \"four\", expected an integer"
    );
    let out = bin()
        .args(["check", "-o", "json", f])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        json["results"],
        json!([{"file": f, "documents": 1, "findings": [], "errors": [{"message": message, "line": 15, "column": 13}]}])
    );
    assert_eq!(json["summary"]["inputErrors"], 1);
    assert_eq!(
        timeless(&String::from_utf8_lossy(&out.stderr)),
        format!(
            "Error: {message}\nSummary: 1 document in 1 file checked in Ts: 0 errors, 0 warnings, 0 info; 1 input error\n"
        )
    );
    let out = bin()
        .args(["render", "--gpu-arch", "h100", f])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("Error: {message}\n")
    );
}

/// A rules copy with a `placement` pack of one info, one warning and, when `refuse`, two
/// errors, all failing on every Workflow.
fn rules_with_notes(refuse: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, rules) = rules_copy();
    let mut pack = String::from(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: operator-notes
stage: placement
match:
  resources:
    - apiVersion: nvcre.nvidia.com/v1alpha1
      kind: Workflow
rules:
  - id: note-info
    severity: info
    validate:
      expression: 'false'
      message: this run is a benchmark
  - id: note-warning
    severity: warning
    validate:
      expression: 'false'
      message: this run has no owner
",
    );
    if refuse {
        pack.push_str(
            "  - id: note-error
    validate:
      expression: 'false'
      message: this run is refused
  - id: note-second-error
    validate:
      expression: 'false'
      message: this run is refused twice
",
        );
    }
    std::fs::write(rules.join("contract/notes.yaml"), pack).expect("write");
    (dir, rules)
}

#[test]
fn render_prints_an_info_finding_as_info_and_a_warning_as_warning() {
    let (_dir, rules) = rules_with_notes(false);
    let (code, _wf, stderr) = render(&[
        "--rules",
        rules.to_str().expect("utf8"),
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("this run")).collect();
    assert_eq!(
        notes,
        [
            "Info: this run is a benchmark [note-info]",
            "Warning: this run has no owner [note-warning]",
        ]
    );
}

#[test]
fn a_rejection_keeps_the_warnings_and_info_of_its_stage() {
    let (_dir, rules) = rules_with_notes(true);
    let rules = rules.to_str().expect("utf8");
    let example = example("nccl-all-reduce.yaml");
    let flags = ["--platform", "aws", "--gpu-arch", "h100"];
    // render: the first error wins, the stage's notes are printed before it.
    let out = bin()
        .args(["--rules", rules, "render"])
        .args(flags)
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Info: this run is a benchmark [note-info]\n\
         Warning: this run has no owner [note-warning]\n\
         this run is refused\n"
    );
    // check: every finding, the errors and the notes.
    let out = bin()
        .args(["--rules", rules, "check", "-o", "json"])
        .args(flags)
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let got: Vec<(String, String)> = report["results"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|r| {
            r["ruleId"]
                .as_str()
                .is_some_and(|id| id.starts_with("note-"))
        })
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap_or_default().to_string(),
                r["severity"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let want = [
        ("note-info", "info"),
        ("note-warning", "warning"),
        ("note-error", "error"),
        ("note-second-error", "error"),
    ];
    assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
}

/// A `manifests` pack warning on every TrainJob `render --expand` emits.
const TRAINJOB_OWNER_PACK: &str = "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: manifest-notes
stage: manifests
match:
  resources:
    - apiVersion: trainer.kubeflow.org/v1alpha1
      kind: TrainJob
rules:
  - id: trainjob-owner
    severity: warning
    validate:
      expression: 'false'
      message: this TrainJob has no owner
";

#[test]
fn a_warning_on_an_emitted_object_is_printed_by_render_expand_and_reported_by_check() {
    let (_dir, rules) = rules_copy();
    std::fs::write(
        rules.join("contract/manifest-notes.yaml"),
        TRAINJOB_OWNER_PACK,
    )
    .expect("write");
    let rules = rules.to_str().expect("utf8");
    let example = example("nccl-all-reduce.yaml");
    let out = bin()
        .args([
            "--rules",
            rules,
            "render",
            "--expand",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
        ])
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.lines().last(),
        Some(
            "Warning: group-0 TrainJob nccl-all-reduce-job: this TrainJob has no owner [trainjob-owner]"
        ),
        "{stderr}"
    );
    // check --nodes-file: the first and the last group's TrainJob, as findings of the input.
    let out = bin()
        .args(["--rules", rules, "check", "-o", "json", "--nodes-file"])
        .arg(root().join("examples/nodes/aws-h100-18.yaml"))
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["results"].as_array().map(Vec::len), Some(1));
    let got: Vec<(&str, &str, &str)> = report["results"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["ruleId"].as_str().unwrap_or_default(),
                f["severity"].as_str().unwrap_or_default(),
                f["message"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "trainjob-owner",
                "warning",
                "group-0 TrainJob nccl-all-reduce-group-0: this TrainJob has no owner"
            ),
            (
                "trainjob-owner",
                "warning",
                "group-4-overflow TrainJob nccl-all-reduce-group-4-overflow: this TrainJob has no owner"
            ),
        ]
    );
    assert_eq!(
        report["results"][0]["findings"][0]["object"],
        json!("group-0 TrainJob nccl-all-reduce-group-0")
    );
    // Two alerts in SARIF, not one: each has its own fingerprint.
    let out = bin()
        .args(["--rules", rules, "check", "-o", "sarif", "--nodes-file"])
        .arg(root().join("examples/nodes/aws-h100-18.yaml"))
        .arg(&example)
        .output()
        .expect("runs");
    let sarif: Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let prints: std::collections::BTreeSet<&str> = sarif["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["partialFingerprints"]["nvcreFinding/v1"].as_str())
        .collect();
    assert_eq!(prints.len(), 2, "{prints:?}");
}

#[test]
fn a_group_that_fails_its_contract_keeps_the_warnings_of_the_groups_before_it() {
    let (_dir, rules) = rules_copy();
    std::fs::write(
        rules.join("contract/manifest-notes.yaml"),
        format!(
            "{TRAINJOB_OWNER_PACK}---
apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: overflow-refused
stage: gang-contract
match:
  resources:
    - apiVersion: nvcre.nvidia.com/v1alpha1
      kind: Workflow
rules:
  - id: no-overflow
    validate:
      expression: >-
        !object.spec.?dependencies.orValue([]).exists(d,
          d.?metadata.?name.orValue('').endsWith('overflow'))
      message: the overflow group is refused
"
        ),
    )
    .expect("write");
    let rules = rules.to_str().expect("utf8");
    let example = example("nccl-all-reduce.yaml");
    let nodes = root().join("examples/nodes/aws-h100-18.yaml");
    let out = bin()
        .args(["--rules", rules, "render", "--expand", "--nodes-file"])
        .arg(&nodes)
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    assert_eq!(
        tail,
        [
            "group-4-overflow Workflow nccl-all-reduce: the overflow group is refused",
            "Warning: group-3 TrainJob nccl-all-reduce-group-3: this TrainJob has no owner [trainjob-owner]",
            "Warning: group-2 TrainJob nccl-all-reduce-group-2: this TrainJob has no owner [trainjob-owner]",
            "Warning: group-1 TrainJob nccl-all-reduce-group-1: this TrainJob has no owner [trainjob-owner]",
            "Warning: group-0 TrainJob nccl-all-reduce-group-0: this TrainJob has no owner [trainjob-owner]",
        ],
        "{stderr}"
    );
    let out = bin()
        .args(["--rules", rules, "check", "-o", "json", "--nodes-file"])
        .arg(&nodes)
        .arg(&example)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let got: Vec<&str> = report["results"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["message"].as_str())
        .collect();
    // check verifies the first and the last group.
    assert_eq!(
        got,
        [
            "group-0 TrainJob nccl-all-reduce-group-0: this TrainJob has no owner",
            "group-4-overflow Workflow nccl-all-reduce: the overflow group is refused",
        ]
    );
}

/// A `workload-labels` pack with one warning, `labels-team` ("workload labels name no team"),
/// whose `validate` holds `validate` (its `expression:` line and any more, indented 6).
fn label_notes_pack(validate: &str) -> String {
    format!(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: label-notes
stage: workload-labels
match:
  resources:
    - apiVersion: nvcre.nvidia.com/v1alpha1
      kind: Workflow
rules:
  - id: labels-team
    severity: warning
    validate:
      {validate}
      message: workload labels name no team
"
    )
}

#[test]
fn a_workload_labels_finding_is_located_alike_with_and_without_a_platform() {
    let (_dir, rules) = rules_copy();
    std::fs::write(
        rules.join("contract/label-notes.yaml"),
        label_notes_pack(
            "expression: \"'team' in object.spec.jobTemplate.?spec.?workloadMetadata.?labels.orValue({})\"
      fieldPath: spec.jobTemplate.spec.workloadMetadata.labels",
        ),
    )
    .expect("write");
    let rules = rules.to_str().expect("utf8");
    let example = example("kueue-workload-metadata.yaml");
    let located = |input: &str, flags: &[&str]| {
        let out = bin()
            .args(["--rules", rules, "check", "-o", "json"])
            .args(flags)
            .arg(input)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0));
        let report: Value = serde_json::from_slice(&out.stdout).expect("json");
        let f = &report["results"][0]["findings"][0];
        (f["ruleId"].clone(), f["line"].clone(), f["column"].clone())
    };
    // Where the WorkloadRun writes the labels: `spec.workloadMetadata.labels`, line 20.
    let want = (json!("labels-team"), json!(20), json!(5));
    assert_eq!(located(&example, &[]), want);
    assert_eq!(
        located(&example, &["--platform", "aws", "--gpu-arch", "h100"]),
        want
    );
    // An override that writes labels has not applied when the WorkloadRun is built: without a
    // platform the finding is at the user's labels (line 14), not in the override (line 12).
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("run.yaml");
    std::fs::write(
        &file,
        "apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata:
  name: labelled
spec:
  image: img
  numNodes: 2
  framework:
    exec: {command: [run]}
  overrides:
    - when: {platform: {equals: aws}}
      jobTemplate: {spec: {workloadMetadata: {labels: {cost: x}}}}
  workloadMetadata:
    labels:
      owner: a
",
    )
    .expect("write");
    let file = file.to_str().expect("utf8").to_string();
    assert_eq!(
        located(&file, &[]),
        (json!("labels-team"), json!(14), json!(5))
    );
    // After the overrides: in the override only where it applied.
    assert_eq!(
        located(&file, &["--platform", "gcp", "--gpu-arch", "h100"]),
        (json!("labels-team"), json!(14), json!(5))
    );
    assert_eq!(
        located(&file, &["--platform", "aws", "--gpu-arch", "h100"]),
        (json!("labels-team"), json!(12), json!(47))
    );
}

#[test]
fn a_workflow_render_admits_its_input_and_keeps_warnings_with_a_rejection() {
    // A Workflow rendered without a platform, resolved with one.
    let workflow = workflow_of("examples/nccl-all-reduce.yaml");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("wf.yaml");
    // An override that never applies (a platform misspelt) warns before the render runs.
    let with_override = workflow.replacen(
        "  overrides:\n",
        "  overrides:\n  - when:\n      platform:\n        equals: awss\n    orchestration:\n      placement: Pinned\n",
        1,
    );
    assert_ne!(with_override, workflow, "the Workflow lists overrides");
    std::fs::write(&file, &with_override).expect("write");
    let f = file.to_str().expect("utf8");
    let (_notes, rules) = rules_with_notes(true);
    let out = bin()
        .args([
            "--rules",
            rules.to_str().expect("utf8"),
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            f,
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].starts_with(
            "Warning: spec.overrides[0].when.platform.equals: \"awss\" is not a platform"
        ),
        "{stderr}"
    );
    assert_eq!(
        &lines[1..],
        [
            "Info: this run is a benchmark [note-info]",
            "Warning: this run has no owner [note-warning]",
            // A placement-stage error, in its own words (only the resolved-job-template
            // checks that follow placement are prefixed).
            "this run is refused",
        ]
    );
    // A Workflow the admission stage refuses is refused by the render too (it was rendered).
    let refused = workflow.replacen("    iterations: 1\n", "    iterations: 0\n", 1);
    let line = refused
        .lines()
        .position(|l| l == "    iterations: 0")
        .expect("iterations")
        + 1;
    std::fs::write(&file, &refused).expect("write");
    // Without a node context the flags are wrong whatever the document says: a usage error.
    let (code, _, err) = run(&["render", f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with("Error: specify --nodes-file <path> or --platform + --gpu-arch\n"),
        "{err}"
    );
    let (code, out, err) = run(&["render", "--platform", "aws", "--gpu-arch", "h100", f]);
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert_eq!(
        err,
        format!(
            "{f}:{line}:17: spec.orchestration.iterations: Invalid value: 0: spec.orchestration.iterations in body should be greater than or equal to 1\n"
        )
    );
}

#[test]
fn a_placement_error_keeps_the_workload_labels_warnings_of_the_construction_run() {
    let (_dir, rules) = rules_with_notes(true);
    std::fs::write(
        rules.join("contract/label-notes.yaml"),
        label_notes_pack("expression: 'false'"),
    )
    .expect("write");
    let out = bin()
        .args([
            "--rules",
            rules.to_str().expect("utf8"),
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
        ])
        .arg(example("nccl-all-reduce.yaml"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    // `placement` runs before `workload-labels` after the overrides: the render stops there,
    // and the construction run's warning is reported once.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Warning: workload labels name no team [labels-team]\n\
         Info: this run is a benchmark [note-info]\n\
         Warning: this run has no owner [note-warning]\n\
         this run is refused\n"
    );
}

#[test]
fn a_warning_whose_message_reads_like_info_is_still_a_warning() {
    let (_dir, rules) = rules_copy();
    std::fs::write(
        rules.join("contract/notes.yaml"),
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: operator-notes
stage: placement
match:
  resources:
    - apiVersion: nvcre.nvidia.com/v1alpha1
      kind: Workflow
rules:
  - id: quota
    severity: warning
    validate:
      expression: 'false'
      message: 'info: disk quota is nearly full'
",
    )
    .expect("write");
    let (code, _wf, stderr) = render(&[
        "--rules",
        rules.to_str().expect("utf8"),
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &example("nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("quota"))
            .collect::<Vec<_>>(),
        ["Warning: info: disk quota is nearly full [quota]"]
    );
}

/// An input error after the admission stage keeps what was noted before it: `render` prints
/// the admission warning before its error, `check` reports the findings beside its input error
/// (also a List's earlier items, at their paths in the List).
#[test]
fn an_input_error_after_admission_keeps_the_findings_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long_name = "nccl-all-reduce-with-a-rather-long-name-for-the-groups";
    let run_text = std::fs::read_to_string(path("examples/nccl-all-reduce.yaml"))
        .expect("example")
        .replacen(
            "  name: nccl-all-reduce\n",
            &format!("  name: {long_name}\n"),
            1,
        );
    let run_file = dir.path().join("long.yaml");
    std::fs::write(&run_file, &run_text).expect("write");
    let r = run_file.to_str().expect("utf8");
    // No GPU architecture anywhere: an input error once the run is admitted.
    let (code, out, err) = run(&["render", r]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        format!(
            "Warning: metadata.name is 54 characters: the TrainJob of a multi-group run's overflow group (\"{long_name}-group-<i>-overflow\", 18 characters more for up to 100 groups) would exceed the 63-character limit; keep it at most 45 [wr-name-group-length]\n\
             Error: {r}:20:5: cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector (or pass --gpu-arch ARCH, or --nodes-file FILE to detect it from the target nodes)\n"
        )
    );
    // A Workflow in the older API group given half a node context: the group's note stays
    // beside the input error.
    let workflow = workflow_of("examples/nccl-all-reduce.yaml").replacen(
        "apiVersion: nvcre.nvidia.com/v1alpha1",
        "apiVersion: cre.nvidia.com/v1alpha1",
        1,
    );
    let wf_file = dir.path().join("wf.yaml");
    std::fs::write(&wf_file, &workflow).expect("write");
    let w = wf_file.to_str().expect("utf8");
    let (code, out, err) = run(&["check", "-o", "json", "--gpu-arch", "h100", w]);
    assert_eq!(code, 2, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [(
            "legacy-api-group".to_string(),
            1,
            13,
            "apiVersion".to_string()
        )]
    );
    let error = report["results"][0]["errors"][0]["message"]
        .as_str()
        .expect("error");
    assert!(
        error.starts_with(&format!(
            "{w}:1:1: specify --nodes-file <path> or --platform + --gpu-arch\navailable: aws-a100, "
        )),
        "{error}"
    );
    // In a List, the item before the one that fails keeps its findings, and so does that item.
    let indent = |text: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .enumerate()
            .map(|(i, l)| format!("{}{l}\n", if i == 0 { "- " } else { "  " }))
            .collect::<String>()
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}{}",
        indent(&run_text),
        indent(&workflow)
    );
    let list_file = dir.path().join("list.yaml");
    std::fs::write(&list_file, &list).expect("write");
    let l = list_file.to_str().expect("utf8");
    let (code, out, err) = run(&["check", "-o", "json", "--gpu-arch", "h100", l]);
    assert_eq!(code, 2, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let second = list
        .lines()
        .position(|l| l == "- apiVersion: cre.nvidia.com/v1alpha1")
        .expect("second item")
        + 1;
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [
            (
                "wr-name-group-length".to_string(),
                7,
                11,
                "items[0].metadata.name".to_string()
            ),
            (
                "legacy-api-group".to_string(),
                second as u64,
                15,
                "items[1].apiVersion".to_string()
            ),
        ]
    );
    assert_eq!(report["summary"]["inputErrors"], 1, "{}", report["summary"]);
    // A user override that can never apply is refused after the admission stage, by `render`
    // as by `check`; the stage's warning stays beside it (and `render` notes the text as
    // written).
    let refused = run_text
        .replacen(
            &format!("  name: {long_name}\n"),
            &format!("  name: {long_name}\n  labels: {{team: on}}\n"),
            1,
        )
        .replacen(
            "spec:\n",
            "spec:\n  overrides:\n    - when: {expression: \"1 +\"}\n      jobTemplate: {spec: {}}\n",
            1,
        );
    std::fs::write(&run_file, &refused).expect("write");
    let (code, out, err) = run(&["render", "--gpu-arch", "h100", r]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert_eq!(
        lines[0],
        format!(
            "Warning: {r}:8:18: metadata.labels.team: the unquoted value on is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"on\")"
        )
    );
    assert!(
        lines[1].ends_with("keep it at most 45 [wr-name-group-length]"),
        "{err}"
    );
    assert!(
        lines[2].starts_with(&format!(
            "Error: {r}:11:26: spec.overrides[0].when.expression: CEL does not compile: "
        )),
        "{err}"
    );
    let (code, out, err) = run(&["check", "-o", "json", r]);
    assert_eq!(code, 2, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    // The YAML reading of the label `team: on` stays beside the error too.
    assert_eq!(
        located_rows(&report, "severity"),
        [
            (
                "wr-name-group-length".to_string(),
                7,
                9,
                "warning".to_string()
            ),
            ("yaml-quote-it".to_string(), 8, 18, "warning".to_string())
        ]
    );
    assert_eq!(report["summary"]["inputErrors"], 1, "{}", report["summary"]);
}

/// The Workflow a user's override makes is held to the Workflow admission rules: `render`
/// refused none of an unknown placement, zero iterations and a timeout that is no duration,
/// and printed a Workflow its own `check` rejected. Each is located at the override's line.
#[test]
fn a_workflow_an_override_makes_invalid_is_refused_at_the_override() {
    let (_dir, file) = temp_file(
        "run.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: g\nspec:\n  image: img\n  framework:\n    torch: {script: a.py}\n  numNodes: 2\n  overrides:\n  - when: {platform: {equals: aws}}\n    orchestration:\n      placement: Bogus\n      iterations: 0\n      execution: {timeoutPerJob: forever}\n",
    );
    let args = ["--platform", "aws", "--gpu-arch", "h100"];
    let (code, out, err) = run(&[&["render"][..], &args, &[&file]].concat());
    assert_eq!(
        (code, out.as_str(), err),
        (
            1,
            "",
            format!(
                "{file}:13:18: spec.orchestration.placement: Unsupported value: \"Bogus\": supported values: \"Pinned\", \"Unpinned\"\n"
            )
        )
    );
    let (code, out, _) = run(&[&["check", "-o", "json"][..], &args, &[&file]].concat());
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [
            (
                "wf-placement-enum".to_string(),
                13,
                18,
                "spec.orchestration.placement".to_string()
            ),
            (
                "wf-minimums".to_string(),
                14,
                19,
                "spec.orchestration.iterations".to_string()
            ),
            (
                "wf-timeout-per-job".to_string(),
                15,
                34,
                "spec.orchestration.execution.timeoutPerJob".to_string()
            ),
        ]
    );
}

/// A finding about a field an override left out (a requirement without its values) is located
/// at the nearest part of it the override wrote.
#[test]
fn a_field_an_override_left_out_is_located_at_what_it_wrote() {
    let (_dir, file) = temp_file(
        "run.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: g\nspec:\n  image: img\n  framework:\n    torch: {script: a.py}\n  numNodes: 2\n  overrides:\n  - when: {platform: {equals: aws}}\n    orchestration:\n      target:\n        matchExpressions:\n        - {key: pool, operator: In}\n",
    );
    let (code, out, err) = run(&["render", "--platform", "aws", "--gpu-arch", "h100", &file]);
    assert_eq!(
        (code, out.as_str(), err),
        (
            1,
            "",
            format!(
                "{file}:15:11: spec.orchestration.target.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'\n"
            )
        )
    );
}

/// Among several WorkloadRuns, a contract rejection (the original's sentence, printed alone for
/// one document) is led by its place, so the failing run is named.
#[test]
fn a_rejection_among_several_documents_names_its_place() {
    let one = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    let rejected =
        std::fs::read_to_string(root().join("examples/override-rejected.yaml")).expect("read");
    let (_dir, file) = temp_file("two.yaml", &format!("{one}---\n{rejected}"));
    let message = "spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\"\n";
    let (code, _, err) = run(&["render", "--platform", "aws", "--gpu-arch", "h100", &file]);
    let (line, column) = (one.lines().count() + 1 + 27, 36);
    let single = example("override-rejected.yaml");
    let (single_code, _, single_err) =
        run(&["render", "--platform", "aws", "--gpu-arch", "h100", &single]);
    assert_eq!(
        (code, err, single_code, single_err.as_str()),
        (1, format!("{file}:{line}:{column}: {message}"), 1, message)
    );
}

/// Every document of a render is tried and every error reported, in input order; once one
/// fails, no Workflow is printed (a partial stream for `kubectl apply` would create some runs
/// of the set and not the others).
#[test]
fn every_error_of_a_render_is_reported_and_nothing_printed() {
    let one = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    let rejected =
        std::fs::read_to_string(root().join("examples/override-rejected.yaml")).expect("read");
    let (_dir, file) = temp_file(
        "three.yaml",
        &format!("{rejected}---\n{one}---\n{rejected}"),
    );
    let (code, out, err) = run(&["render", "--platform", "aws", "--gpu-arch", "h100", &file]);
    let message = "spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\"\n";
    let second = rejected.lines().count() + one.lines().count() + 2 + 27;
    assert_eq!(
        (code, out.as_str(), err),
        (
            1,
            "",
            format!("{file}:27:36: {message}{file}:{second}:36: {message}")
        )
    );
}

/// `check -o json --platform aws --gpu-arch h100` of `text`: each finding's rule, line and
/// column, with the exit code.
fn finding_places(text: &str) -> (Option<i32>, Vec<(String, u64, u64)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("run.yaml");
    std::fs::write(&file, text).expect("write");
    let out = bin()
        .args([
            "check",
            "-o",
            "json",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
        ])
        .arg(&file)
        .output()
        .expect("runs");
    let findings = findings(&serde_json::from_slice(&out.stdout).expect("json"));
    let places = findings
        .as_array()
        .expect("list")
        .iter()
        .map(|f| {
            (
                f["ruleId"].as_str().unwrap_or("").to_string(),
                f["line"].as_u64().unwrap_or(0),
                f["column"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    (out.status.code(), places)
}

/// A mpi WorkloadRun with a KAI gang in queue team-a, and `overrides` (YAML lines at indent 2).
fn gang_run(overrides: &str) -> String {
    format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: t1\nspec:\n  image: img\n  framework:\n    mpi: {{mpirunPath: /m, binary: /b}}\n  numNodes: 2\n  gangScheduler: {{schedulerName: kai-scheduler, queue: team-a}}\n  overrides:\n{overrides}"
    )
}

/// A runtime-side contract error that an override's `runtimePatches` caused is located in that
/// patch (it was at `spec`, line 5, column 1: the generated runtime has no source line).
#[test]
fn a_runtime_patch_conflict_is_located_in_the_patch() {
    let run = gang_run(
        "    - when: {platform: {equals: aws}}\n      jobTemplate:\n        spec:\n          workload:\n            trainJob:\n              runtimePatches:\n                - manager: ops\n                  trainingRuntimeSpec:\n                    template:\n                      spec:\n                        replicatedJobs:\n                          - name: launcher\n                            template:\n                              spec:\n                                template:\n                                  metadata:\n                                    labels: {kai.scheduler/queue: team-q}\n",
    );
    assert_eq!(
        finding_places(&run),
        (
            Some(1),
            vec![("gang-runtime-scheduling".to_string(), 22, 25)]
        )
    );
}

/// A contract error an override's `jobTemplatePatch` caused is located at the operation on
/// that field (it had no line).
#[test]
fn a_json_patch_that_breaks_the_contract_is_located_at_its_operation() {
    let run = gang_run(
        "    - when: {}\n      jobTemplatePatch:\n        - {op: add, path: /metadata, value: {}}\n        - {op: remove, path: /spec/workload/trainJob/runtimeRef/kind}\n",
    );
    assert_eq!(
        finding_places(&run),
        (
            Some(1),
            vec![("gang-runtime-reference".to_string(), 15, 11)]
        )
    );
}

/// An override's patch that does not touch a field leaves the field's finding where the
/// field was written (here in the Workflow itself), not at the patch.
#[test]
fn an_unrelated_json_patch_does_not_take_a_finding() {
    let workflow = "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: wf}\nspec:\n  gangScheduler: {schedulerName: kai-scheduler, queue: team-a, queueLabelKey: kai.scheduler/queue}\n  jobTemplate:\n    spec:\n      workload: {trainJob: {runtimeRef: {name: wf-runtime, kind: TrainingRuntime}}}\n      workloadMetadata:\n        labels: {kai.scheduler/queue: team-b}\n  orchestration: {}\n  overrides:\n    - when: {}\n      jobTemplatePatch:\n        - {op: add, path: /metadata, value: {}}\n";
    assert_eq!(
        finding_places(workflow),
        (
            Some(1),
            vec![
                ("gang-runtime-reference".to_string(), 8, 29),
                ("workload-queue-label-conflict".to_string(), 10, 39)
            ]
        )
    );
}

#[test]
fn among_several_documents_each_warning_is_led_by_its_place() {
    // A rule's warning and the older API group's note name the document they are about when
    // several are rendered; one document's keep the bare message.
    let dir = tempfile::tempdir().expect("tempdir");
    let unpinned = dir.path().join("u.yaml");
    std::fs::write(
        &unpinned,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: u1}\nspec:\n  image: img:1\n  framework: {torch: {script: train.py}}\n  numNodes: 2\n  orchestration: {placement: Unpinned, testScale: full-scale}\n",
    )
    .expect("write");
    let old = dir.path().join("old.json");
    std::fs::write(
        &old,
        r#"{"apiVersion":"cre.nvidia.com/v1alpha1","kind":"WorkloadRun","metadata":{"name":"j"},"spec":{"image":"i","framework":{"exec":{"command":["x"]}},"numNodes":1}}"#,
    )
    .expect("write");
    let (u, o) = (
        unpinned.to_str().expect("utf8"),
        old.to_str().expect("utf8"),
    );
    let unpinned_warning = "numNodes > 1 under placement Unpinned without spec.gangScheduler: on a contended cluster some pods can bind while the rest stay Pending; set spec.gangScheduler so the gang schedules whole or not at all [wr-unpinned-multi-node-gang]";
    let (code, _, err) = run(&["render", "--gpu-arch", "h100", u, o]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        format!(
            "Warning: {u}:8:30: {unpinned_warning}\nWarning: {o}:1:15: apiVersion cre.nvidia.com/v1alpha1 is the older API group; treating it as nvcre.nvidia.com/v1alpha1\n"
        )
    );
    let (code, _, err) = run(&["render", "--gpu-arch", "h100", u]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, format!("Warning: {unpinned_warning}\n"));
    // The older API group's note is bare too when it is the only document's.
    let (code, _, err) = run(&["render", "--gpu-arch", "h100", o]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        "Warning: apiVersion cre.nvidia.com/v1alpha1 is the older API group; treating it as nvcre.nvidia.com/v1alpha1\n"
    );
}

/// An input that cannot be read, or a document that does not parse, does not hide the other
/// documents' errors: every one is reported, in input order, and nothing is printed.
#[test]
fn render_reports_every_input_error_and_every_documents_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_doc = |name: &str, nodes: u32| {
        format!(
            "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: {name}\nspec:\n  image: img\n  framework:\n    torch: {{script: a.py}}\n  numNodes: {nodes}\n"
        )
    };
    std::fs::write(dir.path().join("zero.yaml"), run_doc("a", 0)).expect("write");
    // A file whose second document does not parse, between two that do.
    std::fs::write(
        dir.path().join("mixed.yaml"),
        format!(
            "{}---\nkind: WorkloadRun\nmetadata: {{name: x, name: y}}\n---\n{}",
            run_doc("b", 0),
            run_doc("c", 0)
        ),
    )
    .expect("write");
    let out = bin()
        .current_dir(dir.path())
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "zero.yaml",
            "missing.yaml",
            "mixed.yaml",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let invalid = ": spec.numNodes: Invalid value: 0: spec.numNodes in body should be greater than or equal to 1";
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "zero.yaml:9:13{invalid}\n\
             Error: reading missing.yaml: no such file or directory\n\
             mixed.yaml:9:13{invalid}\n\
             Error: mixed.yaml:12:21: duplicate key \"name\" at metadata.name: first at 12:12, again at 12:21; keep one\n\
             mixed.yaml:22:13{invalid}\n"
        )
    );
}

/// A finding about an item of a list the user's override merged by key (runtimePatches by
/// manager) is located at the item the override wrote, whatever its index in the merged list
/// (the controller's own patch comes first there): here the first patch's env on `node`, not
/// the second patch's valid env on a sidecar, which has the same index in the override.
#[test]
fn a_finding_in_a_list_merged_by_key_points_at_the_item_written() {
    let run_file = path("cli/tests/data/override-runtime-patches.yaml");
    let (code, out, err) = run(&[
        "check",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "-o",
        "json",
        &run_file,
    ]);
    assert_eq!(code, 1, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        located_rows(&report, "fieldPath"),
        [(
            "workflow-patch-env".to_string(),
            31,
            41,
            "spec.jobTemplate.spec.workload.trainJob.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env".to_string()
        )]
    );
}
