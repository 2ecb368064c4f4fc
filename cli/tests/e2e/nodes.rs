//! `--nodes-file`, `--expand` and Workflow render, end to end (issues "Full fidelity" and
//! "Placement"). Exact values throughout.

use super::util::*;

use serde_json::{Value, json};

#[test]
fn nodes_file_detects_platform_and_architecture() {
    let (code, out, err) = run(&[
        "render",
        "-o",
        "json",
        "--nodes-file",
        &path("examples/nodes/aws-h100-18.yaml"),
        &path("examples/nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{err}");
    let wf: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        wf["metadata"]["annotations"],
        json!({"nvcrectl.nvidia.com/detected-gpu-architecture": "h100", "nvcrectl.nvidia.com/detected-platform": "aws"})
    );
    assert_eq!(
        wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]["numProcPerNode"],
        json!(8)
    );
}

#[test]
fn nodes_file_and_platform_are_mutually_exclusive() {
    let (code, out, err) = run(&[
        "render",
        "--platform",
        "aws",
        "--nodes-file",
        &path("examples/nodes/aws-h100-18.yaml"),
        &path("examples/nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(
        err,
        "Error: --nodes-file and --platform/--gpu-arch are mutually exclusive: give --nodes-file FILE to detect both from the nodes, or --platform and --gpu-arch without it\n"
    );
}

#[test]
fn expand_partitions_18_nodes_into_9_groups_of_2() {
    let (code, out, err) = run(&[
        "render",
        "-o",
        "json",
        "--expand",
        "--nodes-file",
        &path("examples/nodes/aws-h100-18.yaml"),
        &path("examples/env-nccl-debug.yaml"),
    ]);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("json stream");
    let jobs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "TrainJob").collect();
    assert_eq!(jobs.len(), 9);
    assert_eq!(
        docs.iter()
            .filter(|d| d["kind"] == "TrainingRuntime")
            .count(),
        9
    );
    assert_eq!(jobs[0]["metadata"]["name"], "nccl-debug-trace-group-0");
    assert_eq!(
        jobs[0]["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"],
        "ip-10-0-0-1.ec2.internal,ip-10-0-1-1.ec2.internal"
    );
    assert_eq!(jobs[0]["spec"]["trainer"]["numNodes"], json!(2));
    // Pinned MPI: hostname term first, then the nodeSelector key, then the product.
    let term = &jobs[0]["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        [0]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"];
    assert_eq!(
        term,
        &json!([
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-0-1.ec2.internal", "ip-10-0-1-1.ec2.internal"]},
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
        ])
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 9, "{err}");
    assert_eq!(
        lines[0],
        "group-0: 2 node(s) [ip-10-0-0-1.ec2.internal, ip-10-0-1-1.ec2.internal]"
    );
}

#[test]
fn unpinned_shortfall_is_the_exact_message() {
    let (code, out, err) = run(&[
        "render",
        "--expand",
        "--nodes-file",
        &path("examples/nodes/onprem-gb200-8.yaml"),
        &path("examples/unpinned-clique.yaml"),
    ]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert_eq!(err, "Not enough schedulable nodes: need 8, found 4\n");
}

#[test]
fn unpinned_clique_target_reaches_every_pod_and_sizes_the_compute_domain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("uc.yaml");
    let text = std::fs::read_to_string(path("examples/unpinned-clique.yaml")).expect("read");
    std::fs::write(&file, text.replace("numNodes: 8", "numNodes: 4")).expect("write");
    let (code, out, err) = run(&[
        "render",
        "-o",
        "json",
        "--expand",
        "--nodes-file",
        &path("examples/nodes/onprem-gb200-8.yaml"),
        file.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .expect("json stream");
    let job = docs
        .iter()
        .find(|d| d["kind"] == "TrainJob")
        .expect("TrainJob");
    assert_eq!(job["metadata"]["name"], "unpinned-clique-job");
    let rjs = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .expect("replicatedJobs");
    assert_eq!(rjs.len(), 2);
    for rj in rjs {
        let spec = &rj["template"]["spec"]["template"]["spec"];
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"],
            json!([
                {"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["clique-0"]},
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-GB200"]}
            ])
        );
        assert_eq!(
            spec["tolerations"],
            json!([
                {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
                {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
            ])
        );
    }
    let cd = docs
        .iter()
        .find(|d| d["kind"] == "ComputeDomain")
        .expect("ComputeDomain");
    assert_eq!(cd["spec"]["numNodes"], json!(4));
    // The on-prem GB200 NIC resource was detected from the nodes' allocatable rdma/ib.
    let runtime = docs
        .iter()
        .find(|d| d["kind"] == "TrainingRuntime")
        .expect("runtime");
    assert_eq!(
        runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            ["containers"][0]["resources"]["limits"]["rdma/ib"],
        json!("8")
    );
    assert_eq!(err, "group-0: unpinned\n");
}

#[test]
fn workflow_render_resolves_and_prefixes_contract_errors() {
    // Render without a platform: a Workflow with unresolved overrides.
    let workflow = workflow_of("examples/override-rejected.yaml");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("wf.yaml");
    std::fs::write(&file, &workflow).expect("write");
    let f = file.to_str().expect("utf8");
    let (code, out, err) = run(&["render", "--platform", "aws", "--gpu-arch", "h100", f]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert_eq!(
        err,
        "validate resolved job template: spec.jobTemplate.spec.workloadMetadata.labels[\"kai.scheduler/queue\"]: conflicting label value \"team-b\", expected \"team-a\"\n"
    );
    let (code, _, err) = run(&["workflow", "render", f]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("Error: specify --nodes-file <path> or --platform + --gpu-arch\navailable: aws-a100, aws-b200, aws-gb200, aws-gb300, aws-h100, aws-h200, aws-l40, aws-l40s, gcp-a100"),
        "{err}"
    );
    // On GCP the AWS override does not match: the Workflow resolves and records what applied.
    let (code, out, err) = run(&[
        "render",
        "-o",
        "json",
        "--platform",
        "gcp",
        "--gpu-arch",
        "h100",
        f,
    ]);
    assert_eq!(code, 0, "{err}");
    let wf: Value = serde_json::from_str(&out).expect("json");
    let applied: Value = serde_json::from_str(
        wf["metadata"]["annotations"]["nvcrectl.nvidia.com/applied-overrides"]
            .as_str()
            .expect("annotation"),
    )
    .expect("applied json");
    assert_eq!(
        applied,
        json!([
            {"index": 10, "when": "gpuArchitecture=h100, platform=gcp", "patches": "jobTemplate", "noOp": false},
            {"index": 11, "when": "gpuArchitecture=h100, platform=gcp", "patches": "1 dependencies", "noOp": false}
        ])
    );
}

#[test]
fn check_with_nodes_places_groups_and_reports_a_shortfall() {
    let (code, out, err) = run(&[
        "check",
        "-o",
        "json",
        "--nodes-file",
        &path("examples/nodes/onprem-gb200-8.yaml"),
        &path("examples/unpinned-clique.yaml"),
    ]);
    assert_eq!(code, 1, "{err}");
    let findings = findings(&serde_json::from_str(&out).expect("json"));
    assert_eq!(findings[0]["ruleId"], "placement");
    assert_eq!(
        findings[0]["message"],
        "Not enough schedulable nodes: need 8, found 4"
    );
    assert_eq!(findings.as_array().map(Vec::len), Some(1));
}

#[test]
fn resolving_a_platformless_workflow_notes_the_missing_build_time_rows() {
    let (code, workflow, err) = run(&[
        "render",
        "--gpu-arch",
        "h100",
        &path("examples/nccl-all-reduce.yaml"),
    ]);
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("wf.yaml");
    std::fs::write(&file, &workflow).expect("write");
    let (code, _, err) = run(&[
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        file.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        err,
        "Warning: this Workflow may lack the build-time platform tweaks of aws (preCommand / mpirun arguments from aws-remove-efa-ofi-plugin, aws-mpi-net-plugin-none): they are applied when the WorkloadRun is rendered with --platform or --nodes-file, not when a Workflow is resolved\n"
    );
}

/// What a flag or an override would change without a word is reported, where it was written:
/// `--gpu-arch` against the gpu.product selector, a `when` that never matches (at each value),
/// trainer env an override adds that mpirun never forwards (at the override's line).
#[test]
fn silent_changes_are_warned_where_written() {
    let f = path("cli/tests/data/silent-changes.yaml");
    let (code, out, err) = run(&[
        "check",
        "-o",
        "json",
        "--platform",
        "aws",
        "--gpu-arch",
        "gb300",
        &f,
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let rows = located_rows(&report, "severity");
    let row = |id: &str, line, column| (id.to_string(), line, column, "warning".to_string());
    assert_eq!(
        rows,
        vec![
            row("gpu-architecture-contradicts-selector", 8, 44),
            row("override-when-never-matches", 14, 33),
            row("override-when-never-matches", 14, 62),
            row("mpi-trainer-env-not-forwarded", 27, 23),
        ]
    );
    let (code, out, err) = run(&["render", "--platform", "aws", "--gpu-arch", "gb300", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.is_empty());
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        vec![
            "Warning: spec.overrides[0].when.platform.equals: \"AWS\" is not a platform (one of forge, onprem, aws, gcp, azure, oci, nscale, togetherai, mistral), so the override never applies; platforms are compared exactly: write \"aws\" [override-when-never-matches]",
            "Warning: spec.overrides[0].when.gpuArchitecture.in[0]: \"GB300\" is not a GPU architecture as runs name them (the gpu-products table reads it as \"gb300\"), so this entry never matches; write \"gb300\" [override-when-never-matches]",
            "Warning: --gpu-arch \"gb300\" (gb300) contradicts target.nodeSelector[\"nvidia.com/gpu.product\"] \"NVIDIA-H100-80GB-HBM3\" (h100): the run is rendered for gb300 (the flag takes precedence: GPUs per node, NICs, MNNVL and the gb300 overrides), but its pods only schedule on h100 nodes; pass --gpu-arch h100, or fix the node selector [gpu-architecture-contradicts-selector]",
            "Warning: env \"NCCL_IB_HCA\" is set on the trainer, which runs mpirun, but mpirun never forwards it: the ranks, started over ssh with a clean environment, run without it; set it in spec.env (forwarded with -x when the command is built), or add -x NCCL_IB_HCA to spec.mpiArgs [mpi-trainer-env-not-forwarded]",
        ]
    );
    // Without a node context the `when` values are still checked.
    let (code, out, _) = run(&["check", "-o", "json", &f]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&out).expect("json");
    let ids: Vec<Value> = findings(&report)
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["ruleId"].clone())
        .collect();
    assert_eq!(
        ids,
        vec![
            json!("override-when-never-matches"),
            json!("override-when-never-matches")
        ]
    );
}

#[test]
fn a_large_group_is_one_summary_line_with_the_first_ten_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("run.yaml");
    std::fs::write(
        &file,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 12\n  framework: {exec: {command: [a]}}\n",
    )
    .expect("write");
    let file = file.to_string_lossy().into_owned();
    let (code, _, err) = run(&[
        "render",
        "--expand",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        &file,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err.lines().nth(1),
        Some(
            "group-0: 12 node(s) [aws-h100-node-0, aws-h100-node-1, aws-h100-node-10, aws-h100-node-11, aws-h100-node-2, aws-h100-node-3, aws-h100-node-4, aws-h100-node-5, aws-h100-node-6, aws-h100-node-7, … and 2 more]"
        ),
        "{err}"
    );
}

/// A torch WorkloadRun `name` of `nodes` nodes whose `spec.target` is `target` (YAML lines
/// indented by four spaces).
fn targeted_run(name: &str, nodes: usize, target: &str) -> String {
    format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata:\n  name: {name}\nspec:\n  image: img\n  framework:\n    torch: {{script: a.py}}\n  numNodes: {nodes}\n  target:\n{target}"
    )
}

/// `render --platform aws --gpu-arch h100 [--expand] FILE`.
fn render_on_aws_h100(file: &str, expand: bool) -> (i32, String, String) {
    let mut args = vec!["render", "--platform", "aws", "--gpu-arch", "h100"];
    if expand {
        args.push("--expand");
    }
    args.push(file);
    run(&args)
}

/// What `--expand` prints on stderr for `n` stand-in aws/h100 nodes placed as one group.
fn stand_in_summary(n: usize) -> String {
    let names: Vec<String> = (0..n).map(|i| format!("aws-h100-node-{i}")).collect();
    format!(
        "note: {n} synthetic aws/h100 node(s) stand in for the fleet; their hostnames are placeholders (give --nodes-file to place on real nodes)\ngroup-0: {n} node(s) [{}]\n",
        names.join(", ")
    )
}

/// `--expand` of several documents: each one's summary names the document's place (after the
/// `note: ` lead), as the render's warnings do; one document keeps the bare lines.
#[test]
fn expand_of_several_documents_leads_each_summary_by_its_place() {
    let one = targeted_run("a", 2, "    nodeSelector: {pool: p1}\n");
    let two = targeted_run("b", 1, "    nodeSelector: {pool: p2}\n");
    let (_dir, file) = temp_file("runs.yaml", &format!("{one}---\n{two}"));
    let (code, _, stderr) = render_on_aws_h100(&file, true);
    assert_eq!(code, 0, "{stderr}");
    let at = |line: usize| format!("{file}:{line}:1");
    assert_eq!(
        stderr,
        format!(
            "note: {}: 2 synthetic aws/h100 node(s) stand in for the fleet; their hostnames are placeholders (give --nodes-file to place on real nodes)\n\
             {}: group-0: 2 node(s) [aws-h100-node-0, aws-h100-node-1]\n\
             note: {}: 1 synthetic aws/h100 node(s) stand in for the fleet; their hostnames are placeholders (give --nodes-file to place on real nodes)\n\
             {}: group-0: 1 node(s) [aws-h100-node-0]\n",
            at(1),
            at(1),
            at(13),
            at(13)
        )
    );
    let (_dir, file) = temp_file("run.yaml", &one);
    let (code, _, stderr) = render_on_aws_h100(&file, true);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, stand_in_summary(2));
}

/// `--platform --expand` of a run whose target asks for a GPU product: the synthetic nodes
/// carry that product (they carried none, so none was a target: "No target nodes found").
#[test]
fn synthetic_nodes_carry_the_product_the_target_asks_for() {
    let (_dir, file) = temp_file(
        "run.yaml",
        &targeted_run(
            "sel",
            2,
            "    nodeSelector:\n      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n",
        ),
    );
    let (code, out, err) = run(&["render", "--platform", "aws", "--expand", &file]);
    assert_eq!((code, err), (0, stand_in_summary(2)));
    assert!(
        out.contains("- key: nvidia.com/gpu.product\n                              operator: In\n                              values:\n                              - NVIDIA-H100-80GB-HBM3\n"),
        "{out}"
    );
    // The architecture given or read from the product: the same manifests.
    let (_, given, _) = render_on_aws_h100(&file, true);
    assert_eq!(given, out);
}

/// A target that names its nodes (`nodeNames`, or the hostname label selected, or an `In`
/// requirement on it): the stand-in nodes of `--platform --expand` have those names and only
/// those, so the `nodeNames` filter keeps them (it kept none: "No target nodes found") and the
/// group's hostname term is the one the target selects (it required two different hostnames).
#[test]
fn stand_in_nodes_have_the_names_the_target_gives() {
    let cases = [
        ("    nodeNames: [gpu-a, gpu-b]\n", 2, "[gpu-a, gpu-b]"),
        (
            "    nodeSelector: {kubernetes.io/hostname: gpu-node-01}\n",
            1,
            "[gpu-node-01]",
        ),
        (
            "    matchExpressions:\n      - {key: kubernetes.io/hostname, operator: In, values: [h1, h2, h1]}\n",
            2,
            "[h1, h2]",
        ),
    ];
    for (target, n, names) in cases {
        let (_dir, file) = temp_file("run.yaml", &targeted_run("named", n, target));
        let (code, out, err) = render_on_aws_h100(&file, true);
        assert_eq!(
            (code, err),
            (
                0,
                format!(
                    "note: {n} synthetic aws/h100 node(s) stand in for the fleet; named as the target names its nodes (give --nodes-file to place on real nodes)\ngroup-0: {n} node(s) {names}\n"
                )
            ),
            "{target}"
        );
        let hosts: Vec<&str> = names.trim_matches(['[', ']']).split(", ").collect();
        let term = format!(
            "- key: kubernetes.io/hostname\n                              operator: In\n                              values:\n{}",
            hosts
                .iter()
                .map(|h| format!("                              - {h}\n"))
                .collect::<String>()
        );
        assert!(out.contains(&term), "{target}: {out}");
        assert!(!out.contains("aws-h100-node-"), "{target}: {out}");
    }
    // Unpinned: the target's names are the hostname list of the one job.
    let (_dir, file) = temp_file(
        "run.yaml",
        &targeted_run(
            "named",
            2,
            "    nodeNames: [gpu-a, gpu-b]\n  orchestration: {placement: Unpinned}\n  gangScheduler: {schedulerName: kai-scheduler, queue: q}\n",
        ),
    );
    let (code, out, err) = render_on_aws_h100(&file, true);
    assert_eq!(
        (code, err.as_str()),
        (
            0,
            "note: 2 synthetic aws/h100 node(s) stand in for the fleet; named as the target names its nodes (give --nodes-file to place on real nodes)\ngroup-0: unpinned\n"
        )
    );
    assert!(
        out.contains("- key: kubernetes.io/hostname\n                              operator: In\n                              values:\n                              - gpu-a\n                              - gpu-b\n"),
        "{out}"
    );
}

/// A run aimed at cordoned nodes on purpose (a taint selector naming the unschedulable taint):
/// discovery keeps them (a nodes file's cordoned node need not list the taint, Kubernetes keeps
/// it on every cordoned node), the synthetic nodes of `--platform` are cordoned and carry it,
/// and the job has no node health monitor (its default would flag every node at once).
#[test]
fn a_target_of_cordoned_nodes_keeps_them_and_drops_the_health_monitor() {
    let cordoned = "    taintSelectors:\n      - {key: node.kubernetes.io/unschedulable, effect: NoSchedule}\n";
    let (dir, file) = temp_file("run.yaml", &targeted_run("cord", 1, cordoned));
    let nodes = dir.path().join("nodes.yaml");
    std::fs::write(
        &nodes,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: c1\n  labels: {nvidia.com/gpu.present: 'true', nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\nspec: {providerID: 'aws:///a/i', unschedulable: true}\nstatus: {allocatable: {nvidia.com/gpu: '8'}}\n",
    )
    .expect("write");
    let nodes = nodes.to_string_lossy().into_owned();
    let (code, out, err) = run(&["render", "--nodes-file", &nodes, "--expand", &file]);
    assert_eq!((code, err.as_str()), (0, "group-0: 1 node(s) [c1]\n"));
    assert!(!out.contains("nodeHealthMonitor"), "{out}");
    assert!(
        out.contains("- key: node.kubernetes.io/unschedulable\n"),
        "{out}"
    );
    let (code, _, err) = render_on_aws_h100(&file, true);
    assert_eq!((code, err), (0, stand_in_summary(1)));
    let (code, out, _) = render_on_aws_h100(&file, false);
    assert_eq!(code, 0);
    assert!(!out.contains("nodeHealthMonitor"), "{out}");
    // Any other taint selector: the synthetic nodes carry that taint too, and the monitor stays.
    let (_dir2, other) = temp_file(
        "run.yaml",
        &targeted_run(
            "cord",
            1,
            "    taintSelectors:\n      - {key: dedicated, value: gpu}\n",
        ),
    );
    let (code, out, err) = render_on_aws_h100(&other, true);
    assert_eq!((code, err), (0, stand_in_summary(1)));
    assert!(out.contains("- key: dedicated\n"), "{out}");
    let (_, out, _) = render_on_aws_h100(&other, false);
    assert!(
        out.contains("nodeHealthMonitor:\n        cel:\n          expression: node.spec.unschedulable == true\n"),
        "{out}"
    );
}

/// A target asking only that a GPU product exist: the stand-in nodes of `--platform --expand`
/// get one the gpu-products table reads as the architecture given, so they are targets (none
/// was: "No target nodes found"), and the made-up product reaches no node affinity.
#[test]
fn stand_in_nodes_satisfy_a_product_exists_target_without_writing_the_product() {
    let (_dir, file) = temp_file(
        "run.yaml",
        &targeted_run(
            "ex",
            2,
            "    matchExpressions:\n      - {key: nvidia.com/gpu.product, operator: Exists}\n",
        ),
    );
    let (code, out, err) = render_on_aws_h100(&file, true);
    assert_eq!((code, err), (0, stand_in_summary(2)));
    assert!(
        out.contains(
            "- key: nvidia.com/gpu.product\n                              operator: Exists\n"
        ),
        "{out}"
    );
    assert!(!out.contains("NVIDIA-H100"), "{out}");
}

/// An 8-GPU H100 Node of pool `p1` named `name`, cordoned when `cordoned`.
fn pool_node(name: &str, cordoned: bool) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{nvidia.com/gpu.present: 'true', nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, pool: p1}}\nspec: {{providerID: 'aws:///a/i', unschedulable: {cordoned}}}\nstatus: {{allocatable: {{nvidia.com/gpu: '8'}}}}\n"
    )
}

/// A note about the nodes a document's target selects (cordoned ones left out) is led by the
/// document's place among several documents, as its errors and findings are; one document keeps
/// the bare note.
#[test]
fn a_nodes_note_among_several_documents_is_led_by_the_documents_place() {
    let one = targeted_run("a", 1, "    nodeSelector: {pool: p1}\n");
    let (dir, file) = temp_file("runs.yaml", &format!("{one}---\n{one}"));
    let nodes = dir.path().join("nodes.yaml");
    std::fs::write(
        &nodes,
        format!("{}---\n{}", pool_node("n1", false), pool_node("n2", true)),
    )
    .expect("write");
    let nodes = nodes.to_string_lossy().into_owned();
    let (code, _, err) = run(&["render", "--nodes-file", &nodes, &file]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        format!(
            "Warning: {file}:1:1: cordoned GPU nodes left out: n2\nWarning: {file}:13:1: cordoned GPU nodes left out: n2\n"
        )
    );
    let (_dir, single) = temp_file("run.yaml", &one);
    let (code, _, err) = run(&["render", "--nodes-file", &nodes, &single]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "Warning: cordoned GPU nodes left out: n2\n");
}

/// `check --nodes-file` reports the cordoned target nodes it left out as a warning finding at
/// the run's target (render prints it as a note); a Workflow's render and check note them too.
#[test]
fn check_reports_the_cordoned_nodes_it_left_out() {
    let (dir, file) = temp_file(
        "run.yaml",
        &targeted_run("a", 1, "    nodeSelector: {pool: p1}\n"),
    );
    let nodes = dir.path().join("nodes.yaml");
    std::fs::write(
        &nodes,
        format!("{}---\n{}", pool_node("n1", false), pool_node("n2", true)),
    )
    .expect("write");
    let nodes = nodes.to_string_lossy().into_owned();
    let (code, out, err) = run(&["check", "-o", "json", "--nodes-file", &nodes, &file]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let findings = &report["results"][0]["findings"];
    let cordoned: Vec<_> = findings
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["ruleId"] == "cordoned-nodes-left-out")
        .map(|f| {
            (
                f["severity"].clone(),
                f["pack"].clone(),
                f["message"].clone(),
                f["fieldPath"].clone(),
                f["line"].clone(),
                f["column"].clone(),
            )
        })
        .collect();
    assert_eq!(
        cordoned,
        [(
            serde_json::json!("warning"),
            serde_json::json!("placement"),
            serde_json::json!("cordoned GPU nodes left out: n2"),
            serde_json::json!("spec.target"),
            serde_json::json!(10),
            serde_json::json!(3),
        )],
        "{out}"
    );

    // The Workflow the run renders to: its render prints the note, its check reports it at
    // the orchestration's target.
    let (code, workflow, err) = run(&["render", "--nodes-file", &nodes, &file]);
    assert_eq!(
        (code, err.as_str()),
        (0, "Warning: cordoned GPU nodes left out: n2\n")
    );
    let wf = dir.path().join("wf.yaml");
    std::fs::write(&wf, &workflow).expect("write");
    let wf = wf.to_string_lossy().into_owned();
    let (code, _, err) = run(&["render", "--nodes-file", &nodes, &wf]);
    assert_eq!(
        (code, err.as_str()),
        (0, "Warning: cordoned GPU nodes left out: n2\n")
    );
    let (code, out, err) = run(&["check", "-o", "json", "--nodes-file", &nodes, &wf]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let paths: Vec<_> = report["results"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["ruleId"] == "cordoned-nodes-left-out")
        .map(|f| f["fieldPath"].clone())
        .collect();
    assert_eq!(
        paths,
        [serde_json::json!("spec.orchestration.target")],
        "{out}"
    );
}

/// When every target node is cordoned, the placement error names them, and `check` locates it
/// at the target: a WorkloadRun's `spec.target`, a Workflow's `spec.orchestration.target`.
#[test]
fn no_target_node_because_all_are_cordoned_names_them_at_the_target() {
    let (dir, file) = temp_file(
        "run.yaml",
        &targeted_run("a", 1, "    nodeSelector: {pool: p1}\n"),
    );
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p.to_string_lossy().into_owned()
    };
    let some = write(
        "some.yaml",
        format!("{}---\n{}", pool_node("n0", false), pool_node("n1", true)),
    );
    let all = write(
        "all.yaml",
        format!("{}---\n{}", pool_node("n1", true), pool_node("n2", true)),
    );
    let message = "No target nodes found matching orchestration target (2 node(s) given; a target node matches spec.target, carries nvidia.com/gpu.present=true and is schedulable); cordoned GPU nodes left out: n1, n2";
    let (code, _, err) = run(&["render", "--nodes-file", &all, &file]);
    assert_eq!((code, err), (1, format!("{message}\n")));
    let placement = |out: &str| -> Vec<(serde_json::Value, serde_json::Value)> {
        let report: serde_json::Value = serde_json::from_str(out).expect("json");
        report["results"][0]["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["ruleId"] == "placement")
            .map(|f| (f["message"].clone(), f["fieldPath"].clone()))
            .collect()
    };
    let (code, out, _) = run(&["check", "-o", "json", "--nodes-file", &all, &file]);
    assert_eq!(code, 1);
    assert_eq!(
        placement(&out),
        [(serde_json::json!(message), serde_json::json!("spec.target"))]
    );
    // The Workflow the run renders to on a fleet with a schedulable node.
    let (code, workflow, err) = run(&["render", "--nodes-file", &some, &file]);
    assert_eq!(code, 0, "{err}");
    let wf = write("wf.yaml", workflow);
    let (code, out, _) = run(&["check", "-o", "json", "--nodes-file", &all, &wf]);
    assert_eq!(code, 1);
    assert_eq!(
        placement(&out),
        [(
            serde_json::json!(message),
            serde_json::json!("spec.orchestration.target")
        )]
    );
}
