//! `check` with the `workload-lint` pack on hand-written manifests (issue 15): cross-document
//! rules see the documents of the same file, each finding is reported once and in file order,
//! and our own `render --expand` output is clean under the pack.

use super::util::*;

use serde_json::Value;

/// `(file relative to the directory, document, line, column, rule id, severity)` of a finding.
type Row = (String, u64, u64, u64, String, String);

/// Every finding of `check -o json PATH` as a [`Row`], and the exit code.
fn findings(path: &std::path::Path) -> (i32, Vec<Row>) {
    let dir = path.to_string_lossy().into_owned();
    let (code, out, err) = run(&["check", "-o", "json", &dir]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let list = super::util::findings(&report);
    let rows = list
        .as_array()
        .expect("an array")
        .iter()
        .map(|f| {
            let file = f["file"].as_str().expect("file");
            (
                file.strip_prefix(&format!("{dir}/"))
                    .unwrap_or(file)
                    .to_string(),
                f["document"].as_u64().expect("document"),
                f["line"].as_u64().unwrap_or(0),
                f["column"].as_u64().unwrap_or(0),
                f["ruleId"].as_str().expect("ruleId").to_string(),
                f["severity"].as_str().expect("severity").to_string(),
            )
        })
        .collect();
    (code, rows)
}

#[test]
fn mixed_hand_written_manifests_report_each_finding_once_in_file_order() {
    let dir = root().join("cli/tests/data/lint-mixed");
    let (code, rows) = findings(&dir);
    let want: Vec<Row> = [
        // The TrainJob is checked with the TrainingRuntime of the same file.
        ("a.yaml", 0, 7, 22, "lint-queue-label-pods-only", "warning"),
        ("a.yaml", 0, 13, 9, "lint-mpi-env-not-forwarded", "error"),
        (
            "b/job.yaml",
            0,
            7,
            43,
            "lint-queue-label-top-level",
            "error",
        ),
        ("b/job.yaml", 0, 12, 51, "lint-interface-syntax", "error"),
        // The ComputeDomain comes first in its file and is still seen by the JobSet after it.
        ("c.yaml", 1, 21, 70, "lint-compute-domain-nodes", "error"),
        // "Same input" is the file: the runtime in a.yaml does not count for d.yaml.
        (
            "d.yaml",
            0,
            5,
            22,
            "lint-trainjob-runtime-missing",
            "warning",
        ),
    ]
    .into_iter()
    .map(|(f, d, l, c, r, s)| (f.to_string(), d, l, c, r.to_string(), s.to_string()))
    .collect();
    assert_eq!(rows, want);
    assert_eq!(code, 1);
}

#[test]
fn the_same_documents_on_stdin_are_one_input() {
    let mut text = String::new();
    for f in ["a.yaml", "d.yaml"] {
        let t = std::fs::read_to_string(root().join("cli/tests/data/lint-mixed").join(f))
            .expect("read");
        text.push_str(&t);
        text.push_str("---\n");
    }
    let out = bin()
        .args(["check", "-o", "json", "-"])
        .write_stdin(text)
        .output()
        .expect("runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let list = super::util::findings(&report);
    let ids: Vec<(u64, &str)> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|f| {
            (
                f["document"].as_u64().expect("document"),
                f["ruleId"].as_str().expect("ruleId"),
            )
        })
        .collect();
    // d.yaml's TrainJob (document 2 of the stream) now finds the runtime of document 1.
    assert_eq!(
        ids,
        vec![
            (0, "lint-queue-label-pods-only"),
            (0, "lint-mpi-env-not-forwarded"),
        ]
    );
}

#[test]
fn render_expand_output_is_clean_under_workload_lint() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut rendered = 0;
    let mut examples: Vec<_> = std::fs::read_dir(root().join("examples"))
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    for nodes in ["aws-h100-18", "onprem-gb200-8"] {
        let nodes_file = root().join(format!("examples/nodes/{nodes}.yaml"));
        for example in &examples {
            let (code, stdout, _) = run(&[
                "render",
                "--nodes-file",
                &nodes_file.to_string_lossy(),
                "--expand",
                &example.to_string_lossy(),
            ]);
            if code != 0 {
                // A rejected render (override-rejected, an unplaceable clique) emits nothing.
                continue;
            }
            assert!(stdout.contains("kind: TrainJob"), "{}", example.display());
            let name = format!(
                "{nodes}-{}",
                example.file_name().expect("name").to_string_lossy()
            );
            std::fs::write(out.path().join(name), stdout).expect("write");
            rendered += 1;
        }
    }
    assert_eq!(rendered, 13);
    let (code, out_json, err) = run(&["check", "-o", "json", &out.path().to_string_lossy()]);
    let report: Value = serde_json::from_str(&out_json).unwrap_or_else(|e| panic!("{e}: {err}"));
    let list = super::util::findings(&report);
    let lint: Vec<&Value> = list
        .as_array()
        .expect("array")
        .iter()
        .filter(|f| f["pack"] == "workload-lint")
        .collect();
    assert_eq!(lint, Vec::<&Value>::new());
    assert_eq!(code, 0, "{out_json}");
}

#[test]
fn rules_explain_gives_the_reason_in_one_paragraph_with_examples() {
    let out = bin()
        .current_dir(root())
        .args(["rules", "explain", "lint-mpi-env-not-forwarded"])
        .output()
        .expect("runs");
    let code = out.status.code().unwrap_or(-1);
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "mpirun starts the ranks on the other nodes over ssh, and an ssh session starts with a clean environment"
        ),
        "{out}"
    );
    assert!(
        out.contains("  pack         workload-lint (stage lint)\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "failing example: rules/tests/workload-lint/mpi.yaml › env on the mpirun container that no -x forwards"
        ),
        "{out}"
    );
    assert!(
        out.contains("passing example: rules/tests/workload-lint/"),
        "{out}"
    );
}

#[test]
fn past_the_input_bounds_a_rule_that_reads_other_documents_names_only_the_reason() {
    // 2,049 TrainJobs on stdin: one more than an input whose documents rules may read.
    let doc = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\nspec:\n  runtimeRef: {name: rt, kind: TrainingRuntime}\n";
    let text = vec![doc; 2049].join("---\n");
    let out = bin()
        .args(["check", "-o", "json", "-"])
        .write_stdin(text)
        .output()
        .expect("runs");
    // A rule error: the check could not be completed.
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let first = &report["results"][0]["findings"][0];
    assert_eq!(first["ruleId"], "lint-trainjob-runtime-missing");
    assert_eq!(
        first["message"],
        "rule lint-trainjob-runtime-missing could not be evaluated at spec.runtimeRef.name: objects: <stdin> has more than 2048 documents or 8 MiB; rules that read other documents check inputs up to that size (split the file) (a rule error, not a policy violation)"
    );
}
