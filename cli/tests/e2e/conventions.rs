//! End-to-end tests of the CLI's conventions (issue "A CLI that fits the Kubernetes toolbox"):
//! findings printed once, the summary line, completions and man pages, `--color`, the JSON
//! envelopes, `rules list -o`, `test -o`, multi-file `render`, `--version` with the rule set,
//! usage errors that say what to do. Every test asserts exact output.

use super::util::*;

use std::path::Path;

use serde_json::{Value, json};

/// `(exit code, stdout, stderr)` of the binary run in `dir` with `args` and extra environment.
fn run_in(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut cmd = bin();
    cmd.current_dir(dir).env_remove("TERM");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const WIDGETS: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: widgets}
stage: manifests
match:
  resources:
    - kind: Widget
rules:
  - id: widget-size
    description: A widget is at most 10 wide.
    validate:
      expression: object.spec.size <= 10
      messageExpression: "'size ' + string(object.spec.size) + ' is above 10'"
      fieldPath: spec.size
  - id: widget-color
    severity: warning
    description: Widgets should be blue.
    validate:
      expression: object.spec.?color.orValue('blue') == 'blue'
      message: not blue, use blue
      fieldPath: spec.color
"#;

/// A directory with the widgets pack under `rules/`, a bad and a clean widget.
fn widgets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("rules/widgets")).expect("mkdir");
    std::fs::write(dir.path().join("rules/widgets/widget.yaml"), WIDGETS).expect("write");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "kind: Widget\nmetadata: {name: a}\nspec:\n  size: 12\n  color: red\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("ok.yaml"),
        "kind: Widget\nmetadata: {name: b}\nspec: {size: 3}\n",
    )
    .expect("write");
    dir
}

// ---- 1. text findings once, the summary line ------------------------------------------------

#[test]
fn a_clean_check_prints_only_the_summary_line_on_stderr() {
    let (code, stdout, stderr) = run_in(
        &root(),
        &[],
        &[
            "check",
            "examples/nccl-all-reduce.yaml",
            "examples/kueue-workload-metadata.yaml",
        ],
    );
    assert_eq!((code, stdout.as_str()), (0, ""));
    assert_eq!(
        timeless(&stderr),
        "Summary: 2 documents in 2 files checked in Ts: 0 errors, 0 warnings, 0 info\n"
    );
    let (code, stdout, stderr) = run_in(&root(), &[], &["check", "examples/nccl-all-reduce.yaml"]);
    assert_eq!((code, stdout.as_str()), (0, ""));
    assert_eq!(
        timeless(&stderr),
        "Summary: 1 document in 1 file checked in Ts: 0 errors, 0 warnings, 0 info\n"
    );
}

#[test]
fn a_finding_is_printed_once_then_its_source_lines() {
    let dir = widgets();
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[],
        &["--rules", "rules", "check", "bad.yaml", "ok.yaml"],
    );
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "bad.yaml:4:9: error[widget-size]: size 12 is above 10 (spec.size)
   ╭─[bad.yaml:4:9]
 3 │ spec:
 4 │   size: 12
   ·         ─┬
   ·          ╰── widget-size
 5 │   color: red
   ╰────
bad.yaml:5:10: warning[widget-color]: not blue, use blue (spec.color)
   ╭─[bad.yaml:5:10]
 4 │   size: 12
 5 │   color: red
   ·          ─┬─
   ·           ╰── widget-color
   ╰────
"
    );
    assert_eq!(stdout.matches("size 12 is above 10").count(), 1);
    assert_eq!(stdout.matches("not blue, use blue").count(), 1);
    assert_eq!(
        timeless(&stderr),
        "Summary: 2 documents in 2 files checked in Ts: 1 error, 1 warning, 0 info\n"
    );
}

#[test]
fn the_summary_never_enters_a_report_on_stdout() {
    let dir = widgets();
    for format in ["json", "sarif", "junit", "github"] {
        let (code, stdout, stderr) = run_in(
            dir.path(),
            &[],
            &["--rules", "rules", "check", "-o", format, "ok.yaml"],
        );
        assert_eq!(code, 0, "{format}");
        assert!(!stdout.contains("Summary:"), "{format}: {stdout}");
        assert_eq!(
            timeless(&stderr),
            "Summary: 1 document in 1 file checked in Ts: 0 errors, 0 warnings, 0 info\n",
            "{format}"
        );
    }
}

// ---- 2. completions, man page, --color -----------------------------------------------------

#[test]
fn completions_are_generated_for_each_shell() {
    let first_lines = [
        ("bash", "_nvcre__policy() {"),
        ("zsh", "#compdef nvcre-policy"),
        (
            "fish",
            "# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.",
        ),
        ("powershell", ""),
    ];
    for (shell, first) in first_lines {
        let (code, stdout, stderr) = run_in(&root(), &[], &["completion", shell]);
        assert_eq!((code, stderr.as_str()), (0, ""), "{shell}");
        assert_eq!(stdout.lines().next(), Some(first), "{shell}");
        // Every subcommand and the global flags are completed.
        for word in ["render", "check", "completion", "--rules", "--color"] {
            assert!(stdout.contains(word), "{shell} lacks {word}");
        }
    }
    let (_, ps, _) = run_in(&root(), &[], &["completion", "powershell"]);
    assert_eq!(
        ps.lines().nth(4),
        Some("Register-ArgumentCompleter -Native -CommandName 'nvcre-policy' -ScriptBlock {")
    );
    let (code, _, stderr) = run_in(&root(), &[], &["completion", "tcsh"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: invalid value 'tcsh' for '<SHELL>'\n  [possible values: bash, elvish, fish, powershell, zsh]\n"),
        "{stderr}"
    );
}

#[test]
fn the_man_page_comes_from_the_same_definitions() {
    let (code, stdout, stderr) = run_in(&root(), &[], &["man"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(
        stdout.contains("\n.TH nvcre-policy 1  \"nvcre-policy 0.1.0\" \n"),
        "{stdout}"
    );
    assert!(stdout.contains("\n.SH SUBCOMMANDS\n"), "{stdout}");
    assert!(stdout.contains("nvcre\\-policy\\-check(1)"), "{stdout}");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("man1");
    let (code, _, stderr) = run_in(
        &root(),
        &[],
        &["man", "--out-dir", out.to_str().expect("utf8")],
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    let mut pages: Vec<String> = std::fs::read_dir(&out)
        .expect("man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "nvcre-policy.1",
        "nvcre-policy-check.1",
        "nvcre-policy-render.1",
        "nvcre-policy-rules-list.1",
        "nvcre-policy-completion.1",
    ] {
        assert!(
            pages.iter().any(|p| p == page),
            "{page} missing from {pages:?}"
        );
    }
    let top = std::fs::read_to_string(out.join("nvcre-policy.1")).expect("page");
    assert_eq!(top, stdout);
}

#[test]
fn color_follows_the_flag_and_the_environment() {
    let dir = widgets();
    let esc = |s: &str| s.contains('\u{1b}');
    let check = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["--rules", "rules"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["check", "bad.yaml"]);
        run_in(dir.path(), env, &args).1
    };
    // A pipe: no colour unless asked.
    assert!(!esc(&check(&[], &[])));
    assert!(esc(&check(&[], &["--color=always"])));
    assert!(!esc(&check(
        &[("CLICOLOR_FORCE", "1")],
        &["--color", "never"]
    )));
    assert!(esc(&check(&[("CLICOLOR_FORCE", "1")], &[])));
    assert!(!esc(&check(
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
        &[]
    )));
    // --no-color is the old spelling of --color=never.
    let (_, plain, _) = run_in(
        dir.path(),
        &[("CLICOLOR_FORCE", "1")],
        &["--rules", "rules", "check", "--no-color", "bad.yaml"],
    );
    assert!(!esc(&plain));
    let always = check(&[], &["--color=always"]);
    assert!(
        always.starts_with("bad.yaml:4:9: \u{1b}[1m\u{1b}[31merror\u{1b}[0m[widget-size]: size 12 is above 10 (spec.size)\n"),
        "{always:?}"
    );
    // render and test honour it on their messages too.
    let (code, _, stderr) = run_in(
        &root(),
        &[],
        &[
            "--color=always",
            "render",
            "--platform",
            "nope",
            "examples/nccl-all-reduce.yaml",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("\u{1b}[1m\u{1b}[31mError:\u{1b}[0m invalid --platform \"nope\""),
        "{stderr:?}"
    );
    let (_, _, stderr) = run_in(
        &root(),
        &[("TERM", "dumb")],
        &[
            "render",
            "--platform",
            "nope",
            "examples/nccl-all-reduce.yaml",
        ],
    );
    assert!(
        stderr.starts_with("Error: invalid --platform"),
        "{stderr:?}"
    );
    // clap's own usage errors follow the flag too.
    let (code, _, stderr) = run_in(
        &root(),
        &[("CLICOLOR_FORCE", "1")],
        &["--color", "never", "check"],
    );
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: the following required arguments were not provided:\n"),
        "{stderr:?}"
    );
    let (_, _, stderr) = run_in(&root(), &[], &["--color=always", "check"]);
    assert!(stderr.starts_with("\u{1b}["), "{stderr:?}");
    let (_, _, stderr) = run_in(&root(), &[], &["--color=always", "test", "--run", "("]);
    assert!(
        stderr.starts_with("\u{1b}[1m\u{1b}[31mError:\u{1b}[0m invalid --run regex"),
        "{stderr:?}"
    );
}

// ---- 3. machine output ---------------------------------------------------------------------

#[test]
fn check_json_is_an_envelope_with_tool_rules_results_and_summary() {
    let dir = widgets();
    let (code, stdout, _) = run_in(
        dir.path(),
        &[],
        &[
            "--rules", "rules", "check", "-o", "json", "bad.yaml", "ok.yaml",
        ],
    );
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let keys: Vec<&str> = report
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["apiVersion", "kind", "tool", "rules", "results", "summary"]
    );
    assert_eq!(report["apiVersion"], "policy.nvcre.nvidia.com/v1alpha1");
    assert_eq!(report["kind"], "CheckReport");
    assert_eq!(
        report["tool"],
        json!({"name": "nvcre-policy", "version": "0.1.0"})
    );
    assert_eq!(report["rules"]["source"], "rules");
    assert_eq!(report["rules"]["files"], 1);
    let files: Vec<(&str, u64, usize)> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["file"].as_str().unwrap_or(""),
                r["documents"].as_u64().unwrap_or(99),
                r["findings"].as_array().map_or(99, Vec::len),
            )
        })
        .collect();
    assert_eq!(files, [("bad.yaml", 1, 2), ("ok.yaml", 1, 0)]);
    assert_eq!(
        report["summary"],
        json!({"files": 2, "documents": 2, "errors": 1, "warnings": 1, "info": 0,
               "inputErrors": 0, "failOn": "error", "passed": false})
    );
}

#[test]
fn rules_list_as_json_and_yaml() {
    let dir = widgets();
    let (code, stdout, _) = run_in(
        dir.path(),
        &[],
        &["--rules", "rules", "rules", "list", "-o", "json"],
    );
    assert_eq!(code, 0);
    let mut list = serde_json::from_str::<Value>(&stdout).expect("json");
    // The pipeline's own findings follow the rule files' rules, whatever the rule set.
    let built_in: Vec<Value> = list
        .as_array_mut()
        .map(|a| a.split_off(2))
        .unwrap_or_default();
    assert_eq!(
        built_in
            .iter()
            .map(|b| (b["id"].as_str(), b["file"].as_str(), b["line"].is_null()))
            .collect::<Vec<_>>(),
        nvcre_domain::BUILT_IN_RULES
            .iter()
            .map(|b| (Some(b.id), Some("<built-in>"), true))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        list,
        json!([
            {"id": "widget-size", "severity": "error", "pack": "widgets", "stage": "manifests",
             "file": "rules/widgets/widget.yaml", "line": 9, "description": "A widget is at most 10 wide."},
            {"id": "widget-color", "severity": "warning", "pack": "widgets", "stage": "manifests",
             "file": "rules/widgets/widget.yaml", "line": 15, "description": "Widgets should be blue."}
        ])
    );
    let (code, yaml, _) = run_in(
        dir.path(),
        &[],
        &["--rules", "rules", "rules", "list", "-o", "yaml"],
    );
    assert_eq!(code, 0);
    let yaml = yaml.split_inclusive('\n').take(20).collect::<String>();
    assert_eq!(
        yaml,
        "- id: widget-size
  severity: error
  pack: widgets
  stage: manifests
  file: rules/widgets/widget.yaml
  line: 9
  description: A widget is at most 10 wide.
- id: widget-color
  severity: warning
  pack: widgets
  stage: manifests
  file: rules/widgets/widget.yaml
  line: 15
  description: Widgets should be blue.
- id: placement
  severity: error
  pack: placement
  stage: null
  file: <built-in>
  line: null
"
    );
}

/// A suite folder for the widgets pack: one passing and one failing case.
fn widget_suites(dir: &Path) {
    let folder = dir.join("rules/tests/widgets");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(
        folder.join("size.yaml"),
        "cases:\n  - note: small\n    input: |\n      kind: Widget\n      metadata: {name: w}\n      spec: {size: 3}\n    want_findings: []\n  - note: wrong on purpose\n    input: |\n      kind: Widget\n      metadata: {name: w}\n      spec: {size: 30}\n    want_findings: []\n",
    )
    .expect("write");
}

#[test]
fn test_junit_parses_back_with_quick_junit() {
    let dir = widgets();
    widget_suites(dir.path());
    let (code, stdout, _) = run_in(
        dir.path(),
        &[],
        &["--rules", "rules", "test", "-o", "junit"],
    );
    assert_eq!(code, 1);
    let report = quick_junit::Report::deserialize_from_str(&stdout).expect("JUnit parses back");
    assert_eq!(
        report.name.as_ref().map(|n| n.as_str()),
        Some("nvcre-policy test")
    );
    assert_eq!((report.tests, report.failures, report.errors), (2, 1, 0));
    assert_eq!(report.test_suites.len(), 1);
    let suite = &report.test_suites[0];
    assert_eq!(suite.name.as_str(), "rules/tests/widgets/size.yaml");
    let cases: Vec<(&str, Option<&str>, bool)> = suite
        .test_cases
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.classname.as_ref().map(|n| n.as_str()),
                matches!(c.status, quick_junit::TestCaseStatus::Success { .. }),
            )
        })
        .collect();
    assert_eq!(
        cases,
        [
            ("small", Some("rules/tests/widgets/size.yaml:2"), true),
            (
                "wrong on purpose",
                Some("rules/tests/widgets/size.yaml:8"),
                false
            )
        ]
    );
    match &suite.test_cases[1].status {
        quick_junit::TestCaseStatus::NonSuccess {
            message,
            description,
            ..
        } => {
            assert_eq!(
                message.as_ref().map(|m| m.as_str()),
                Some("FAIL rules/tests/widgets/size.yaml:8 › wrong on purpose")
            );
            assert_eq!(
                description.as_ref().map(|d| d.as_str()),
                Some(
                    "findings differ (expected 0, got 1):\n  [0] unexpected:\n      actual:   {ruleId: widget-size, severity: error, fieldPath: spec.size, line: 3, column: 14, message: \"size 30 is above 10\"}"
                )
            );
        }
        other => panic!("not a failure: {other:?}"),
    }
}

#[test]
fn test_json_reports_every_case() {
    let dir = widgets();
    widget_suites(dir.path());
    let (code, stdout, _) = run_in(dir.path(), &[], &["--rules", "rules", "test", "-o", "json"]);
    assert_eq!(code, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).expect("json"),
        json!({
            "apiVersion": "policy.nvcre.nvidia.com/v1alpha1",
            "kind": "TestReport",
            "tool": {"name": "nvcre-policy", "version": "0.1.0"},
            "results": [
                {"file": "rules/tests/widgets/size.yaml", "line": 2, "note": "small", "passed": true, "diff": []},
                {"file": "rules/tests/widgets/size.yaml", "line": 8, "note": "wrong on purpose", "passed": false,
                 "diff": [
                     "findings differ (expected 0, got 1):",
                     "  [0] unexpected:",
                     "      actual:   {ruleId: widget-size, severity: error, fieldPath: spec.size, line: 3, column: 14, message: \"size 30 is above 10\"}"
                 ]}
            ],
            "errors": [],
            "untested": [],
            "summary": {"passed": 1, "failed": 1, "errors": 0}
        })
    );
}

// ---- 4. render takes several inputs --------------------------------------------------------

#[test]
fn render_streams_several_files_and_directories_in_input_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).expect("mkdir");
    for (file, example) in [
        ("b.yaml", "unpinned-8-nodes.yaml"),
        ("a.yaml", "env-nccl-debug.yaml"),
    ] {
        std::fs::copy(root().join("examples").join(example), runs.join(file)).expect("copy");
    }
    let seed = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    let mut cmd = bin();
    let out = cmd
        .current_dir(dir.path())
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            &path("examples/kueue-workload-metadata.yaml"),
            "runs",
            "-",
        ])
        .write_stdin(seed)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = stdout
        .split("\n---\n")
        .map(|doc| {
            doc.lines()
                .skip_while(|l| *l != "metadata:")
                .find_map(|l| l.strip_prefix("  name: "))
                .unwrap_or("?")
        })
        .collect();
    // The file, then the directory in path order (a.yaml, b.yaml), then standard input.
    assert_eq!(
        names,
        // (kueue-workload-metadata.yaml, env-nccl-debug.yaml, unpinned-8-nodes.yaml, stdin)
        [
            "nccl-kueue",
            "nccl-debug-trace",
            "unpinned-all-reduce",
            "nccl-all-reduce"
        ]
    );
    // Each is what rendering it alone prints.
    let (_, alone, _) = run_in(
        &root(),
        &[],
        &[
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "examples/env-nccl-debug.yaml",
        ],
    );
    assert_eq!(
        stdout.split("\n---\n").nth(1).map(|d| format!("{d}\n")),
        Some(alone)
    );
    let (code, stdout, stderr) = run_in(
        dir.path(),
        &[],
        &["render", "--gpu-arch", "h100", "runs", "nope.yaml"],
    );
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "Error: reading nope.yaml: no such file or directory\n"
    );
}

// ---- 5. --version names the rule set -------------------------------------------------------

#[test]
fn version_names_the_rules_in_force() {
    let (code, stdout, _) = run_in(&root(), &[], &["--version"]);
    assert_eq!(code, 0);
    let digest = rules_digest();
    assert_eq!(digest.len(), "sha256:".len() + 64);
    assert_eq!(
        stdout,
        format!("nvcre-policy 0.1.0\nrules: embedded (27 files, {digest})\n")
    );
    // A copy of the shipped rules is the same set: the same digest.
    let (_guard, copy) = rules_copy();
    let c = copy.to_str().expect("utf8");
    let (code, stdout, _) = run_in(&root(), &[], &["--rules", c, "--version"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        format!("nvcre-policy 0.1.0\nrules: {c} (27 files, {digest})\n")
    );
    // So is a copy in a directory whose name is not UTF-8 (shown with U+FFFD).
    {
        use std::os::unix::ffi::OsStrExt;
        let latin1 = copy.with_file_name(std::ffi::OsStr::from_bytes(b"r\xe8gles"));
        copy_dir(&copy, &latin1);
        let out = bin()
            .arg("--rules")
            .arg(&latin1)
            .arg("--version")
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!(
                "nvcre-policy 0.1.0\nrules: {} (27 files, {digest})\n",
                latin1.to_string_lossy()
            )
        );
    }
    // An edited copy is not; NVCRE_RULES names it as --rules does.
    edit(&copy.join("contract/gang.yaml"), "\n", "\n# edited\n");
    let (_, stdout, _) = run_in(&root(), &[("NVCRE_RULES", c)], &["-V"]);
    let edited = stdout.split("sha256:").nth(1).unwrap_or("").to_string();
    assert_eq!(edited.len(), 64 + ")\n".len());
    assert!(!stdout.contains(&digest), "{stdout}");
    assert!(stdout.starts_with(&format!(
        "nvcre-policy 0.1.0\nrules: {c} (27 files, sha256:"
    )));
    // A set that does not load is in force nowhere: the line, and an error saying so.
    edit(
        &copy.join("contract/gang.yaml"),
        "\n# edited\n",
        "\nnot: [a rule file\n",
    );
    let (code, stdout, stderr) = run_in(&root(), &[], &["--rules", c, "--version"]);
    assert_eq!(code, 2);
    assert!(
        stdout.starts_with(&format!(
            "nvcre-policy 0.1.0\nrules: {c} (27 files, sha256:"
        )),
        "{stdout}"
    );
    assert_eq!(
        stderr,
        format!(
            "Error: the rule set of {c} does not load (1 problem), so no command uses it; `nvcre-policy rules lint {c}` lists them\n"
        )
    );
    let (code, stdout, stderr) = run_in(
        &root(),
        &[],
        &["--rules", "/nonexistent/rules", "--version"],
    );
    assert_eq!(code, 2);
    assert_eq!(stdout, "nvcre-policy 0.1.0\n");
    assert!(
        stderr.ends_with(
            "; check the --rules directory (or NVCRE_RULES), or omit it for the embedded rules\n"
        ),
        "{stderr}"
    );
}

// ---- 6. usage errors say what to do next ---------------------------------------------------

#[test]
fn usage_errors_name_the_fix() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["render", "examples/nccl-all-reduce.yaml"],
            "Error: examples/nccl-all-reduce.yaml:20:5: cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector (or pass --gpu-arch ARCH, or --nodes-file FILE to detect it from the target nodes)\n",
        ),
        (
            &[
                "render",
                "--platform",
                "aws",
                "--nodes-file",
                "examples/nodes/aws-h100-18.yaml",
                "examples/nccl-all-reduce.yaml",
            ],
            "Error: --nodes-file and --platform/--gpu-arch are mutually exclusive: give --nodes-file FILE to detect both from the nodes, or --platform and --gpu-arch without it\n",
        ),
        (
            &[
                "check",
                "-o",
                "json",
                "-o",
                "sarif",
                "examples/nccl-all-reduce.yaml",
            ],
            "Error: at most one -o format may write to standard output; give the others a file: -o FORMAT=PATH\n",
        ),
        (
            &["test", "--run", "("],
            "Error: invalid --run regex: regex parse error:\n    (\n    ^\nerror: unclosed group\n--run takes a regular expression over case names (`file › note`), e.g. --run 'gang' or --run 'labels/.*queue'\n",
        ),
    ];
    for (args, want) in cases {
        let (code, stdout, stderr) = run_in(&root(), &[], args);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (2, "", want),
            "{args:?}"
        );
    }
    let (code, _, stderr) = run_in(&root(), &[], &["check", "-o", "json=", "x.yaml"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: invalid value 'json=' for '--output <FORMAT[=PATH]>': \"json=\": the path after '=' is empty; write -o FORMAT=PATH (e.g. -o json=report.json), or -o FORMAT for standard output\n"),
        "{stderr}"
    );
    let (code, _, stderr) = run_in(&root(), &[], &["render", "--gpu-arch", "h100", "-", "-"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "Error: standard input (`-`) can be given once; name the other inputs as files\n"
        )
    );
    let no_manifests = tempfile::tempdir().expect("tempdir");
    let d = no_manifests.path().to_str().expect("utf8");
    let (code, _, stderr) = run_in(&root(), &[], &["render", "--gpu-arch", "h100", d]);
    assert_eq!(
        (code, stderr),
        (
            2,
            format!(
                "Error: {d}: no manifest files (.yaml, .yml, .json) to render; name a WorkloadRun or Workflow file\n"
            )
        )
    );
    let empty = tempfile::NamedTempFile::new().expect("tmp");
    let e = empty.path().to_str().expect("utf8");
    let (code, _, stderr) = run_in(&root(), &[], &["render", "--gpu-arch", "h100", e]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        format!(
            "Error: {e}: no document to render (the input is empty); give a WorkloadRun or Workflow manifest\n"
        )
    );
}

// ---- 7. -o FORMAT=PATH is written atomically -----------------------------------------------

#[test]
fn concurrent_runs_never_leave_a_torn_report() {
    let dir = widgets();
    // Many findings, so a report is large enough to be caught half written.
    let doc = "kind: Widget\nmetadata: {name: a}\nspec:\n  size: 12\n  color: red\n";
    std::fs::write(dir.path().join("many.yaml"), vec![doc; 400].join("---\n")).expect("write");
    let report = dir.path().join("report.json");
    let spawn = || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("nvcre-policy"))
            .current_dir(dir.path())
            .env_remove("NVCRE_RULES")
            .args([
                "--rules",
                "rules",
                "check",
                "-o",
                "json=report.json",
                "many.yaml",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawns")
    };
    let mut reads = 0;
    for _ in 0..3 {
        let mut writers = [spawn(), spawn()];
        loop {
            if let Ok(text) = std::fs::read_to_string(&report) {
                let parsed: Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("a torn report of {} bytes: {e}", text.len()));
                // Every read sees a whole report, never a part of one.
                assert_eq!(parsed["summary"]["documents"], 400);
                reads += 1;
            }
            if writers
                .iter_mut()
                .all(|w| w.try_wait().ok().flatten().is_some())
            {
                break;
            }
        }
        for w in &mut writers {
            assert_eq!(w.wait().expect("waits").code(), Some(1));
        }
    }
    assert!(reads > 0);
    let last: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("read")).expect("json");
    assert_eq!(last["summary"]["documents"], 400);
    // Only the report is left: the temporary files were renamed over it.
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["bad.yaml", "many.yaml", "ok.yaml", "report.json", "rules"]
    );
}

// ---- 8. the LICENSE file is the crates' license --------------------------------------------

#[test]
fn the_license_file_matches_the_cargo_license() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains("\nlicense = \"Apache-2.0\"\n"),
        "{manifest}"
    );
    let license = std::fs::read_to_string(root().join("LICENSE")).expect("LICENSE");
    let head: Vec<&str> = license.lines().take(4).map(str::trim).collect();
    assert_eq!(
        head,
        [
            "",
            "Apache License",
            "Version 2.0, January 2004",
            "http://www.apache.org/licenses/"
        ]
    );
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
}

#[test]
fn an_empty_nvcre_rules_is_unset() {
    // `NVCRE_RULES=` (set but empty) names no directory: the embedded rules, for every command.
    let (code, stdout, stderr) = run_in(&root(), &[("NVCRE_RULES", "")], &["-V"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(
        stdout.starts_with("nvcre-policy 0.1.0\nrules: embedded (27 files, sha256:"),
        "{stdout}"
    );
    let (code, stdout, stderr) = run_in(
        &root(),
        &[("NVCRE_RULES", "")],
        &["check", "-o", "json", "examples/nccl-all-reduce.yaml"],
    );
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["rules"]["source"], "embedded");
}
