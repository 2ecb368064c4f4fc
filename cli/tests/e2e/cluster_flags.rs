//! The flag and input checks of `workloadrun run`, which answer before any cluster is
//! contacted (the kubeconfig points at a port nothing listens on, so a test that connected
//! would fail with a connection error instead of the expected message).

use std::path::Path;

use super::util::{bin, path};

/// A kubeconfig naming a server nobody serves.
fn dead_kubeconfig(dir: &Path) -> String {
    let p = dir.join("kubeconfig");
    std::fs::write(
        &p,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster:\n    server: http://127.0.0.1:9\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: dead\n  context: {cluster: dead, user: u}\ncurrent-context: dead\n",
    )
    .expect("kubeconfig");
    p.display().to_string()
}

/// `(exit code, stdout, stderr)` of `workloadrun run ARGS` with the dead kubeconfig.
fn run(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dead_kubeconfig(dir.path());
    let out = bin()
        .env_remove("KUBECONFIG")
        .env_remove("NVCRE_WORKLOAD_REGISTRY_PASSWORD")
        .env("HOME", dir.path())
        .args(["workloadrun", "run", "--kubeconfig", &kubeconfig])
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn manifest() -> String {
    path("examples/nccl-all-reduce.yaml")
}

fn usage_error(args: &[&str], message: &str) {
    let (code, stdout, stderr) = run(args);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (2, "", format!("Error: {message}\n").as_str()),
        "{args:?}"
    );
}

#[test]
fn a_zero_timeout_with_wait_is_refused() {
    usage_error(
        &["--wait", "--timeout", "0s", &manifest()],
        "--timeout must be positive, got 0s",
    );
}

#[test]
fn an_explicit_negative_timeout_is_refused_even_without_wait() {
    usage_error(
        &["--timeout=-1s", &manifest()],
        "--timeout must be positive, got -1s",
    );
    usage_error(
        &["--timeout=-90s", &manifest()],
        "--timeout must be positive, got -1m30s",
    );
}

#[test]
fn a_timeout_that_is_not_a_duration_is_refused() {
    usage_error(
        &["--wait", "--timeout", "10", &manifest()],
        "invalid --timeout \"10\": time: missing unit in duration \"10\"",
    );
}

#[test]
fn registry_credentials_are_all_or_none_and_non_empty() {
    let message = "--workload-registry, --workload-registry-username, and --workload-registry-password must all be set together and non-empty";
    usage_error(&["--workload-registry", "nvcr.io", &manifest()], message);
    usage_error(
        &[
            "--workload-registry",
            "nvcr.io",
            "--workload-registry-username",
            "$oauthtoken",
            &manifest(),
        ],
        message,
    );
    usage_error(
        &[
            "--workload-registry",
            "nvcr.io",
            "--workload-registry-username",
            "$oauthtoken",
            "--workload-registry-password",
            "",
            &manifest(),
        ],
        message,
    );
}

#[test]
fn results_file_requires_wait() {
    usage_error(
        &["--results-file", "out.json", &manifest()],
        "--results-file requires --wait",
    );
}

#[test]
fn test_scale_is_checked_before_the_api_server_sees_it() {
    usage_error(
        &["--test-scale", "huge", &manifest()],
        "invalid --test-scale \"huge\": must be one of intra-node, intra-rack, full-scale",
    );
}

#[test]
fn topology_key_needs_a_domain_and_node_list_excludes_it() {
    usage_error(
        &["--topology-key", "example.com/block", &manifest()],
        "--topology-key requires --topology-domain",
    );
    usage_error(
        &["--node-list", "a", "--topology-domain", "d", &manifest()],
        "--node-list and --topology-domain are mutually exclusive: both choose the nodes",
    );
    usage_error(
        &["--node-list", " , ", &manifest()],
        "--node-list \" , \" names no node",
    );
}

#[test]
fn cleanup_requires_wait() {
    usage_error(
        &["--cleanup", &manifest()],
        "--cleanup requires --wait: without it the run would be deleted as soon as it is created",
    );
}

#[test]
fn dry_run_cannot_wait() {
    usage_error(
        &["--dry-run=client", "--wait", &manifest()],
        "--dry-run creates nothing to wait for; drop --wait or --dry-run",
    );
}

#[test]
fn the_file_must_be_one_workload_run() {
    usage_error(
        &[&path("examples/does-not-exist.yaml")],
        &format!(
            "reading {}: no such file or directory",
            path("examples/does-not-exist.yaml")
        ),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let wf = dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: Workflow\nmetadata: {name: w}\n",
    )
    .expect("write");
    usage_error(
        &[&wf.display().to_string()],
        "expected kind WorkloadRun, got \"Workflow\"",
    );
}

#[test]
fn policy_violations_stop_the_run_before_the_cluster_is_contacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: bad}\nspec:\n  image: img\n  numNodes: 2\n  framework:\n    torch: {script: a.py, module: m}\n",
    )
    .expect("write");
    let (code, stdout, stderr) = run(&[&bad.display().to_string()]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            format!(
                "{}:8:5: spec.framework.torch: script and module are mutually exclusive\n",
                bad.display()
            )
            .as_str()
        )
    );
}

#[test]
fn a_manifest_without_kind_is_checked_as_a_workload_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bare.yaml");
    std::fs::write(
        &bad,
        "metadata: {name: bare}\nspec:\n  image: img\n  numNodes: 2\n  framework:\n    torch: {script: a.py, module: m}\n",
    )
    .expect("write");
    let (code, stdout, stderr) = run(&[&bad.display().to_string()]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            format!(
                "{}:6:5: spec.framework.torch: script and module are mutually exclusive\n",
                bad.display()
            )
            .as_str()
        )
    );
}

#[test]
fn node_list_entries_are_trimmed_and_lower_num_nodes() {
    let (code, stdout, stderr) = run(&[
        "--dry-run=client",
        "--node-list",
        " node-a , node-b,, ",
        "--name",
        "picked",
        "--test-scale",
        "full-scale",
        "-n",
        "team-b",
        &manifest(),
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let doc: serde_json::Value = yaml_value(&stdout);
    assert_eq!(
        (
            &doc["metadata"]["name"],
            &doc["metadata"]["namespace"],
            &doc["spec"]["target"]["nodeNames"],
            &doc["spec"]["numNodes"],
            &doc["spec"]["orchestration"]["testScale"],
        ),
        (
            &serde_json::json!("picked"),
            &serde_json::json!("team-b"),
            &serde_json::json!(["node-a", "node-b"]),
            &serde_json::json!(2),
            &serde_json::json!("full-scale"),
        )
    );
}

/// The dry-run YAML back as JSON, through the engine's YAML reader.
fn yaml_value(yaml: &str) -> serde_json::Value {
    let source = nvcre_engine::Source::new("out.yaml", yaml.to_string());
    nvcre_engine::parse_documents(&source)
        .expect("yaml")
        .remove(0)
        .value
}

#[test]
fn an_unreadable_kubeconfig_is_a_client_error() {
    let (code, stdout, stderr) = bin()
        .env_remove("KUBECONFIG")
        .args([
            "workloadrun",
            "status",
            "x",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .map(|o| {
            (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .expect("runs");
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(
        stderr.starts_with("Error: build client: reading /nonexistent/kubeconfig: "),
        "{stderr}"
    );
}
