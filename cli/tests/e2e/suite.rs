//! End-to-end tests of `nvcre-policy test`: a suite that disagrees with a rule fails with a diff
//! (no false pass), `--run` selects cases, `--require-tests` fails for an untested pack, and the
//! shipped suites pass.

use super::util::*;

use assert_cmd::Command;

/// Runs the binary; returns (exit code, stdout, stderr).
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

const QUEUE_SUITE: &str = r#"cases:
  - note: a 64-character queue is too long
    input: |
      apiVersion: nvcre.nvidia.com/v1alpha1
      kind: WorkloadRun
      metadata: {name: t}
      spec:
        image: img
        numNodes: 1
        framework:
          exec: {command: [run]}
        gangScheduler:
          schedulerName: kai-scheduler
          queue: qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq
    want_findings:
      - {ruleId: wr-gang-queue-length, message: "Too long: may not be more than 63 bytes", line: 11, column: 12}
    want_exit: 1

  - note: the queue rule disagrees on purpose
    input: |
      apiVersion: nvcre.nvidia.com/v1alpha1
      kind: WorkloadRun
      metadata: {name: t}
      spec:
        image: img
        numNodes: 1
        framework:
          exec: {command: [run]}
        gangScheduler:
          schedulerName: kai-scheduler
          queue: qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq
    want_findings:
      - {ruleId: wr-gang-queue-length, message: "queue is too long", line: 11}
"#;

/// A suite folder holding [`QUEUE_SUITE`].
fn queue_suite() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("workloadrun-admission");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(folder.join("queue.yaml"), QUEUE_SUITE).expect("write");
    dir
}

#[test]
fn a_suite_that_disagrees_with_a_rule_fails_with_a_diff() {
    let dir = queue_suite();
    let (code, stdout, stderr) = run(bin().arg("test").arg(dir.path()));
    assert_eq!(code, 1, "{stdout}{stderr}");
    let file = dir.path().join("workloadrun-admission/queue.yaml");
    let expected = format!(
        "FAIL {}:19 › the queue rule disagrees on purpose\n\
         \x20   findings differ (expected 1, got 1):\n\
         \x20     [0] differs in message:\n\
         \x20         expected: {{ruleId: wr-gang-queue-length, line: 11, message: \"queue is too long\"}}\n\
         \x20         actual:   {{ruleId: wr-gang-queue-length, severity: error, fieldPath: spec.gangScheduler.queue, line: 11, column: 12, message: \"Too long: may not be more than 63 bytes\"}}\n\
         1 passed, 1 failed\n",
        file.display()
    );
    assert_eq!(stdout, expected);
}

#[test]
fn an_edited_rule_fails_the_shipped_case_that_pins_it() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("admission/workloadrun.yaml"),
        "      message: \"Too long: may not be more than 63 bytes\"\n      fieldPath: spec.gangScheduler.queue\n",
        "      message: \"queue too long\"\n      fieldPath: spec.gangScheduler.queue\n",
    );
    let (code, stdout, stderr) =
        run(bin()
            .arg("--rules")
            .arg(&rules)
            .args(["test", "--run", "gang-scheduler"]));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains(
            "gang-scheduler.yaml:47 › a 64-character queue is too long (and only too long)\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("differs in message"), "{stdout}");
    assert!(stdout.contains("message: \"queue too long\""), "{stdout}");
    assert!(stdout.ends_with(" passed, 2 failed\n"), "{stdout}");
}

#[test]
fn run_selects_cases_by_name() {
    let dir = queue_suite();
    let (code, stdout, _) = run(bin()
        .arg("test")
        .arg(dir.path())
        .args(["--run", "too long$"]));
    assert_eq!((code, stdout.as_str()), (0, "1 passed, 0 failed\n"));
    let (code, stdout, _) = run(bin()
        .arg("test")
        .arg(dir.path())
        .args(["--run", "queue.yaml › the queue rule"]));
    assert_eq!(code, 1);
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
}

#[test]
fn require_tests_fails_for_a_pack_without_cases() {
    let (_dir, rules) = rules_copy();
    // Coverage counts every loaded suite, whatever --run selects: select nothing to stay quick.
    let (code, stdout, stderr) =
        run(bin()
            .arg("--rules")
            .arg(&rules)
            .args(["test", "--require-tests", "--run", "^$"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "0 passed, 0 failed\n");
    std::fs::write(
        rules.join("contract/extra.yaml"),
        r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: extra-pack}
stage: placement
match:
  resources: [{kind: Workflow}]
rules:
  - id: extra-rule
    validate: {expression: "true", message: never}
"#,
    )
    .expect("write");
    let (code, stdout, stderr) =
        run(bin()
            .arg("--rules")
            .arg(&rules)
            .args(["test", "--require-tests", "--run", "^$"]));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stdout.contains("note: no case names these rules in want_findings: extra-rule\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("untested: pack extra-pack (no case in its folder or naming its rules)\n"),
        "{stdout}"
    );
    assert_eq!(
        stderr,
        "Error: --require-tests: no tests for pack extra-pack; add cases to the pack's or table's folder of the suites (docs/rules.md, \"Rule tests\")\n"
    );
    // Without the flag an untested pack is not an error (the extra pack's own cases run).
    let (code, stdout, _) =
        run(bin()
            .arg("--rules")
            .arg(&rules)
            .args(["test", "--run", "gang-contract/scheduling"]));
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn cases_read_input_files_and_rule_directories_relative_to_the_suite() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("myrules")).expect("mkdir");
    std::fs::write(
        dir.path().join("myrules/names.yaml"),
        r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: names}
stage: admission
match:
  resources: [{kind: WorkloadRun}]
rules:
  - id: short-name
    validate:
      expression: size(object.metadata.name) <= 3
      message: name too long
      fieldPath: metadata.name
"#,
    )
    .expect("write");
    std::fs::write(
        dir.path().join("run.yaml"),
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: long-name}\nspec: {image: img, numNodes: 0, framework: {exec: {command: [run]}}}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("cases.yaml"),
        r#"cases:
  - note: the suite's own rule directory
    inputFile: run.yaml
    rules: myrules
    want_findings:
      - {ruleId: short-name, message: name too long, fieldPath: metadata.name, line: 3, column: 18}
  - note: the rules in force
    inputFile: run.yaml
    want_findings:
      - {ruleId: wr-num-nodes-minimum, messageRegex: "^Invalid value: 0: ", line: 4}
    want_exit: 1
  - note: a rule directory that does not load is the case's error
    inputFile: run.yaml
    rules: missing
    want_error: missing
    want_exit: 2
"#,
    )
    .expect("write");
    let (code, stdout, stderr) = run(bin().arg("test").arg(dir.path().join("cases.yaml")));
    assert_eq!(
        (code, stdout.as_str()),
        (0, "3 passed, 0 failed\n"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_suite_is_exit_2_with_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "cases:\n  - note: no expectation\n    input: \"kind: Workflow\"\n    wants: []\n",
    )
    .expect("write");
    let (code, stdout, stderr) = run(bin().arg("test").arg(&file));
    assert_eq!(code, 2, "{stdout}");
    assert_eq!(
        stderr,
        format!(
            "Error: rule test suite error: {}:4:5: cases[0].wants: unknown key \"wants\" (expected one of: note, input, inputFile, context, rules, mode, profile, thresholds, want_findings, want_output, want_output_exact, want_error, want_exit, property)\n",
            file.display()
        )
    );
}

#[test]
fn the_shipped_suites_pass() {
    let (code, stdout, stderr) = run(bin().current_dir(root()).args(["test", "--require-tests"]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.ends_with(" passed, 0 failed\n"), "{stdout}");
}

/// The suites of an edited copy of the rules, run without `--rules`, would test the embedded
/// rules: refused (exit 2), saying what to give. A `--run` that selects no case is refused too
/// (a typo in CI passed as "0 passed, 0 failed").
#[test]
fn suites_of_another_rule_set_and_a_filter_that_selects_nothing_are_refused() {
    let (_dir, rules) = rules_copy();
    edit(
        &rules.join("contract/workload-labels.yaml"),
        "size(variables.labels) <= 32",
        "size(variables.labels) <= 3200",
    );
    let tests = rules.join("tests");
    let (code, stdout, stderr) = run(Command::cargo_bin("nvcre-policy")
        .expect("bin")
        .arg("test")
        .arg(&tests));
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        format!(
            "Error: {} holds suites of the rule set {}, which differs from the embedded rules this run would test: give --rules {} (or NVCRE_RULES) to test that set\n",
            tests.display(),
            rules.display(),
            rules.display()
        )
    );
    let (code, stdout, _) = run(Command::cargo_bin("nvcre-policy")
        .expect("bin")
        .arg("--rules")
        .arg(&rules)
        .arg("test"));
    assert_eq!(code, 1);
    // The two cases of the 32-label cap fail; every other passes.
    assert!(stdout.ends_with(" passed, 2 failed\n"), "{stdout}");
    let (code, stdout, stderr) = run(Command::cargo_bin("nvcre-policy")
        .expect("bin")
        .current_dir(root())
        .args([
            "test",
            "--run",
            "zzz-no-such-case",
            "rules/tests/gang-contract",
        ]));
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "Error: no case matches --run \"zzz-no-such-case\" (in 5 suite files); case names are `file › note`\n"
    );
}

/// An error that stops `test` before any case runs (here a suite that does not parse) is in the
/// report asked for too: a CI job reading `-o junit` or `-o json` gets a failing report, not an
/// empty file.
#[test]
fn an_error_before_any_case_runs_is_in_the_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("t.yaml"),
        "cases:\n  - note: a\n    inptu: x\n",
    )
    .expect("write");
    let message = format!(
        "rule test suite error: {}:3:5: cases[0].inptu: unknown key \"inptu\" (expected one of: note, input, inputFile, context, rules, mode, profile, thresholds, want_findings, want_output, want_output_exact, want_error, want_exit, property)",
        dir.path().join("t.yaml").display()
    );
    let (code, stdout, stderr) = run(bin().arg("test").arg(dir.path()).args(["-o", "json"]));
    assert_eq!((code, stderr.clone()), (2, format!("Error: {message}\n")));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["errors"], serde_json::json!([{"message": message}]));
    assert_eq!(
        report["summary"],
        serde_json::json!({"passed": 0, "failed": 0, "errors": 1})
    );
    let (code, stdout, _) = run(bin().arg("test").arg(dir.path()).args(["-o", "junit"]));
    assert_eq!(code, 2);
    assert!(
        stdout.contains(
            "<testsuite name=\"errors\" tests=\"1\" skipped=\"0\" errors=\"1\" failures=\"0\">"
        ),
        "{stdout}"
    );
}

/// A rule that cannot be evaluated on a case's input is shown with its message among the
/// findings compared (the case said only "could not run" with an empty error); listed among
/// the wanted findings, it passes.
#[test]
fn a_rule_error_in_a_case_shows_its_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("myrules")).expect("mkdir");
    std::fs::write(
        dir.path().join("myrules/names.yaml"),
        r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: names}
stage: admission
match:
  resources: [{kind: WorkloadRun}]
rules:
  - id: team-label
    validate:
      expression: object.metadata.labels['team'] != ''
      message: no team
"#,
    )
    .expect("write");
    std::fs::write(
        dir.path().join("cases.yaml"),
        r#"cases:
  - note: wants nothing
    rules: myrules
    input: |
      apiVersion: nvcre.nvidia.com/v1alpha1
      kind: WorkloadRun
      metadata: {name: a}
      spec: {image: img, numNodes: 1, framework: {exec: {command: [run]}}}
    want_findings: []
  - note: wants the rule error
    rules: myrules
    input: |
      apiVersion: nvcre.nvidia.com/v1alpha1
      kind: WorkloadRun
      metadata: {name: a}
      spec: {image: img, numNodes: 1, framework: {exec: {command: [run]}}}
    want_findings:
      - {ruleId: team-label, messageRegex: "^rule team-label could not be evaluated"}
"#,
    )
    .expect("write");
    let (code, stdout, stderr) = run(bin().arg("test").arg(dir.path().join("cases.yaml")));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.contains("unexpected:") && stdout.contains("rule team-label could not be evaluated"),
        "{stdout}"
    );
    assert!(stdout.ends_with("1 passed, 1 failed\n"), "{stdout}");
}
