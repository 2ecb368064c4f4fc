//! End-to-end tests of the report formats of `check` and of `rules lint|list|explain` (issue
//! "Rule authoring", parts 2–4). Every test asserts exact values.

use super::util::*;

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

/// Runs the binary in `dir`; returns (exit code, stdout, stderr).
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = bin().current_dir(dir).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, text).expect("write");
}

const WIDGETS: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata:
  name: widgets
  description: Widget checks.
stage: manifests
match:
  resources:
    - kind: Widget
rules:
  - id: widget-size
    description: A widget is at most 10 wide.
    validate:
      expression: object.spec.size <= 10
      messageExpression: "'size ' + string(object.spec.size) + ' is above 10: <too> \"big\" & 100%'"
      fieldPath: spec.size
  - id: widget-color
    severity: warning
    description: Widgets should be blue.
    validate:
      expression: object.spec.?color.orValue('blue') == 'blue'
      message: "not blue, use blue"
      fieldPath: spec.color
  - id: "widget:name,required"
    description: Widgets have a name.
    validate:
      expression: object.?metadata.?name.hasValue()
      messageExpression: "'metadata.name is required\\nfor 100% of widgets'"
      fieldPath: metadata
"#;

/// Two documents with findings (an error, a warning, a message with a newline) and a clean one.
const BAD: &str = "kind: Widget
metadata: {name: a}
spec:
  size: 12
  color: red
---
kind: Widget
metadata: {name: b}
spec:
  size: 3
---
kind: Widget
spec: {size: 1}
";

/// A directory with the widgets pack under `rules/` and `bad.yaml`.
fn widgets() -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "rules/widgets/widget.yaml", WIDGETS);
    write(dir.path(), "bad.yaml", BAD);
    dir
}

fn check(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--rules", "rules", "check"];
    all.extend_from_slice(args);
    run(dir, &all)
}

// ---------------------------------------------------------------------------------------------
// check -o sarif

fn sarif_validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json"),
    )
    .expect("schema file");
    let mut schema: Value = serde_json::from_str(&text).expect("schema JSON");
    // The official schema's `language` patterns (on run and toolComponent) have a stray `]`, a
    // literal in ECMA-262's Annex B but refused by the validator's meta-schema check of
    // `format: regex`. Escaping it keeps the meaning; our output has no `language`. The file
    // itself stays as published.
    let mut patched = 0;
    for def in ["run", "toolComponent"] {
        let language = &mut schema["definitions"][def]["properties"]["language"]["pattern"];
        assert_eq!(
            *language, "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$",
            "{def}"
        );
        *language = json!("^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}\\]?$");
        patched += 1;
    }
    assert_eq!(patched, text.matches("{2}]?$").count());
    // Formats are checked too (`uri`, `uri-reference`, …).
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles")
}

fn assert_valid_sarif(log: &Value) {
    let validator = sarif_validator();
    let errors: Vec<String> = validator
        .iter_errors(log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert_eq!(errors, Vec::<String>::new(), "{log:#}");
}

#[test]
fn sarif_validates_against_the_schema_with_the_exact_region() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    write(
        dir.path(),
        "run.yaml",
        &text.replace(
            "queue: high-priority",
            &format!("queue: {}", "q".repeat(64)),
        ),
    );
    let (code, stdout, stderr) = run(dir.path(), &["check", "-o", "sarif", "run.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    let log: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
    assert_valid_sarif(&log);
    assert_eq!(log["version"], "2.1.0");
    let run0 = &log["runs"][0];
    assert_eq!(run0["tool"]["driver"]["name"], "nvcre-policy");
    let results = run0["results"].as_array().expect("results");
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(r["ruleId"], "wr-gang-queue-length");
    assert_eq!(r["level"], "error");
    assert_eq!(
        r["message"]["text"],
        "Too long: may not be more than 63 bytes"
    );
    assert_eq!(
        r["locations"],
        json!([{
            "physicalLocation": {
                "artifactLocation": {"uri": "run.yaml"},
                "region": {"startLine": 18, "startColumn": 12}
            },
            "logicalLocations": [
                {"fullyQualifiedName": "spec.gangScheduler.queue", "kind": "member"}
            ]
        }])
    );
    let index = r["ruleIndex"].as_u64().expect("ruleIndex") as usize;
    assert_eq!(
        run0["tool"]["driver"]["rules"][index],
        json!({
            "id": "wr-gang-queue-length",
            "shortDescription": {"text": "gangScheduler.queue is at most 63 characters."},
            "fullDescription": {"text": "gangScheduler.queue is at most 63 characters. (pack workloadrun-admission, defined at rules/admission/workloadrun.yaml:227)"},
            "help": {"text": "gangScheduler.queue is at most 63 characters.\nRun `nvcre-policy rules explain wr-gang-queue-length` for the rule's expression, message and a passing and a failing example."},
            "defaultConfiguration": {"level": "error"},
            "properties": {"pack": "workloadrun-admission"}
        })
    );
    // Code scanning tracks an alert across runs by its fingerprint: the rule, file, document
    // and field path, not the line.
    let fingerprint = r["partialFingerprints"]["nvcreFinding/v1"]
        .as_str()
        .expect("fingerprint")
        .to_string();
    assert_eq!(fingerprint.len(), 64);
    let moved = std::fs::read_to_string(dir.path().join("run.yaml")).expect("read");
    write(
        dir.path(),
        "run.yaml",
        &format!("# a comment above\n{moved}"),
    );
    let (_, stdout, _) = run(dir.path(), &["check", "-o", "sarif", "run.yaml"]);
    let again: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
    let r2 = &again["runs"][0]["results"][0];
    assert_eq!(
        r2["locations"][0]["physicalLocation"]["region"]["startLine"],
        19
    );
    assert_eq!(
        r2["partialFingerprints"]["nvcreFinding/v1"],
        fingerprint.as_str()
    );
    assert_eq!(
        run0["tool"]["driver"]["properties"],
        json!({"rulesSource": "embedded", "rulesDigest": rules_digest()})
    );
    assert_eq!(run0["columnKind"], "unicodeCodePoints");
}

#[test]
fn the_schema_check_catches_broken_logs() {
    let validator = sarif_validator();
    let good = json!({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "x"}},
        "results": [{"message": {"text": "m"}, "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "a.yaml"}, "region": {"startLine": 1, "startColumn": 1}}}]}]
    }]});
    assert!(validator.is_valid(&good));
    let mut no_version = good.clone();
    no_version.as_object_mut().map(|o| o.remove("version"));
    assert!(!validator.is_valid(&no_version));
    let mut line_zero = good.clone();
    line_zero["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        json!(0);
    assert!(!validator.is_valid(&line_zero));
    let mut bad_level = good;
    bad_level["runs"][0]["results"][0]["level"] = json!("fatal");
    assert!(!validator.is_valid(&bad_level));
}

#[test]
fn sarif_with_warnings_and_input_errors_validates_too() {
    let dir = widgets();
    let (code, stdout, stderr) = check(
        dir.path(),
        &["-o", "sarif", "bad.yaml", "missing dir/x.yaml"],
    );
    assert_eq!(code, 2);
    assert_eq!(
        timeless(&stderr),
        "Error: reading missing dir/x.yaml: no such file or directory\n\
         Summary: 3 documents in 2 files checked in Ts: 2 errors, 1 warning, 0 info; 1 input error\n"
    );
    let log: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
    assert_valid_sarif(&log);
    let run0 = &log["runs"][0];
    let levels: Vec<(&str, &str, u64)> = run0["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap_or(""),
                r["level"].as_str().unwrap_or(""),
                r["ruleIndex"].as_u64().unwrap_or(99),
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            ("widget-size", "error", 0),
            ("widget-color", "warning", 1),
            ("widget:name,required", "error", 2)
        ]
    );
    assert_eq!(
        run0["invocations"],
        json!([{
            "executionSuccessful": false,
            "toolExecutionNotifications": [{
                "level": "error",
                "message": {"text": "reading missing dir/x.yaml: no such file or directory"},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": "missing%20dir/x.yaml"}}}]
            }]
        }])
    );
}

/// A rule that cannot be evaluated makes `check` exit 2: the SARIF invocation says the run did
/// not succeed, as it does for an input that could not be read.
#[test]
fn sarif_execution_fails_on_a_rule_error() {
    let dir = widgets();
    write(
        dir.path(),
        "rules/widgets/broken.yaml",
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: broken}\nstage: manifests\nmatch: {resources: [{kind: Widget}]}\nrules:\n  - id: divides\n    validate: {expression: '1 / 0 == 1'}\n",
    );
    let (code, stdout, _) = check(dir.path(), &["-o", "sarif", "bad.yaml"]);
    assert_eq!(code, 2);
    let log: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
    assert_valid_sarif(&log);
    assert_eq!(
        log["runs"][0]["invocations"][0]["executionSuccessful"],
        false
    );
    std::fs::remove_file(dir.path().join("rules/widgets/broken.yaml")).expect("remove");
    let (code, stdout, _) = check(dir.path(), &["-o", "sarif", "bad.yaml"]);
    assert_eq!(code, 1);
    let log: Value = serde_json::from_str(&stdout).expect("SARIF is JSON");
    assert_eq!(
        log["runs"][0]["invocations"][0]["executionSuccessful"],
        true
    );
}

// ---------------------------------------------------------------------------------------------
// check -o json | junit | github | text

#[test]
fn json_is_a_versioned_envelope_grouped_by_file() {
    let dir = widgets();
    write(
        dir.path(),
        "ok.yaml",
        "kind: Widget\nmetadata: {name: c}\nspec: {size: 1}\n",
    );
    let (code, stdout, stderr) = check(
        dir.path(),
        &["-o", "json", "bad.yaml", "ok.yaml", "missing.yaml"],
    );
    assert_eq!(code, 2);
    assert_eq!(
        timeless(&stderr),
        "Error: reading missing.yaml: no such file or directory\n\
         Summary: 4 documents in 3 files checked in Ts: 2 errors, 1 warning, 0 info; 1 input error\n"
    );
    // The whole envelope: apiVersion/kind, tool, the rule set (source, digest, files), results
    // by file in input order (a path that could not be read last), the summary.
    insta::assert_snapshot!(stdout);
}

#[test]
fn github_workflow_commands_escape_messages_and_properties() {
    let dir = widgets();
    let (code, stdout, _) = check(dir.path(), &["-o", "github", "bad.yaml"]);
    assert_eq!(code, 1);
    assert_eq!(
        stdout,
        "::error file=bad.yaml,line=4,col=9,title=widget-size::size 12 is above 10: <too> \"big\" & 100%25\n\
         ::warning file=bad.yaml,line=5,col=10,title=widget-color::not blue, use blue\n\
         ::error file=bad.yaml,line=12,col=1,title=widget%3Aname%2Crequired::metadata.name is required%0Afor 100%25 of widgets\n"
    );
}

#[test]
fn junit_has_a_suite_per_file_and_a_case_per_document_and_rule() {
    let dir = widgets();
    write(
        dir.path(),
        "ok.yaml",
        "kind: Widget\nmetadata: {name: c}\nspec: {size: 1}\n",
    );
    let (code, stdout, _) = check(dir.path(), &["-o", "junit", "bad.yaml", "ok.yaml"]);
    assert_eq!(code, 1);
    // Written by quick-junit (its escaping, indentation and attribute order).
    insta::assert_snapshot!(stdout);
    let parsed = quick_junit::Report::deserialize_from_str(&stdout).expect("JUnit parses back");
    assert_eq!((parsed.tests, parsed.failures, parsed.errors), (12, 2, 0));
    let suites: Vec<(&str, usize, usize)> = parsed
        .test_suites
        .iter()
        .map(|s| (s.name.as_str(), s.tests, s.failures))
        .collect();
    assert_eq!(suites, [("bad.yaml", 9, 2), ("ok.yaml", 3, 0)]);
    let first = &parsed.test_suites[0].test_cases[0];
    assert_eq!(first.name.as_str(), "widget-size");
    assert_eq!(
        first.classname.as_ref().map(|c| c.as_str()),
        Some("bad.yaml document 1")
    );
    match &first.status {
        quick_junit::TestCaseStatus::NonSuccess {
            kind,
            message,
            ty,
            description,
            ..
        } => {
            assert_eq!(*kind, quick_junit::NonSuccessKind::Failure);
            assert_eq!(
                message.as_ref().map(|m| m.as_str()),
                Some("size 12 is above 10: <too> \"big\" & 100%")
            );
            assert_eq!(ty.as_ref().map(|t| t.as_str()), Some("error"));
            assert_eq!(
                description.as_ref().map(|d| d.as_str()),
                Some(
                    "bad.yaml:4:9: error[widget-size]: size 12 is above 10: <too> \"big\" & 100% (spec.size)"
                )
            );
        }
        other => panic!("not a failure: {other:?}"),
    }
}

#[test]
fn junit_with_fail_on_warning_turns_the_warning_into_a_failure() {
    let dir = widgets();
    let (code, stdout, _) = check(
        dir.path(),
        &["-o", "junit", "--fail-on", "warning", "bad.yaml"],
    );
    assert_eq!(code, 1);
    assert!(
        stdout.contains(
            "        <testcase name=\"widget-color\" classname=\"bad.yaml document 1\">\n            <failure message=\"not blue, use blue\" type=\"warning\">bad.yaml:5:10: warning[widget-color]: not blue, use blue (spec.color)</failure>\n        </testcase>\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("failures=\"3\""), "{stdout}");
}

/// A rule that could not be evaluated is a JUnit `<error>` of its test case (type
/// `rule-error`), counted among the errors, not a failure of the document.
#[test]
fn junit_reports_a_rule_error_as_an_error() {
    let dir = widgets();
    write(
        dir.path(),
        "odd.yaml",
        "kind: Widget\nmetadata: {name: o}\nspec: {size: big}\n",
    );
    let (code, stdout, _) = check(dir.path(), &["-o", "junit", "odd.yaml"]);
    assert_eq!(code, 2);
    let message = "rule widget-size could not be evaluated at spec.size: operator &apos;&lt;=&apos; does not take string and int (expression: object.spec.size &lt;= 10) (a rule error, not a policy violation)";
    assert!(
        stdout.contains(&format!(
            "        <testcase name=\"widget-size\" classname=\"odd.yaml document 1\">\n            <error message=\"{message}\" type=\"rule-error\">odd.yaml:3:14: error[widget-size]: {message} (spec.size)</error>\n        </testcase>\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("<testsuites name=\"nvcre-policy\" tests=\"3\" skipped=\"0\" failures=\"0\" errors=\"1\">"),
        "{stdout}"
    );
}

#[test]
fn text_is_the_default_and_has_no_colour_when_piped() {
    let dir = widgets();
    let (code, stdout, _) = check(dir.path(), &["bad.yaml"]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with(
            "bad.yaml:4:9: error[widget-size]: size 12 is above 10: <too> \"big\" & 100% (spec.size)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("bad.yaml:5:10: warning[widget-color]: not blue, use blue (spec.color)\n"),
        "{stdout}"
    );
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    let (_, explicit, _) = check(dir.path(), &["-o", "text", "--no-color", "bad.yaml"]);
    assert_eq!(explicit, stdout);
}

/// A rule that cannot be evaluated is the rule file's to fix: the text report names where the
/// rule is written under its finding, as JSON does with `ruleFile` and `ruleLine`.
#[test]
fn text_names_the_rule_file_and_line_of_a_rule_error() {
    let dir = widgets();
    write(
        dir.path(),
        "odd.yaml",
        "kind: Widget\nmetadata: {name: o}\nspec: {size: big}\n",
    );
    let (code, stdout, _) = check(dir.path(), &["odd.yaml"]);
    assert_eq!(code, 2);
    assert_eq!(
        stdout,
        "odd.yaml:3:14: error[widget-size]: rule widget-size could not be evaluated at spec.size: operator '<=' does not take string and int (expression: object.spec.size <= 10) (a rule error, not a policy violation) (spec.size)\n  rule: rules/widgets/widget.yaml:11\n   ╭─[odd.yaml:3:14]\n 2 │ metadata: {name: o}\n 3 │ spec: {size: big}\n   ·              ─┬─\n   ·               ╰── widget-size\n   ╰────\n"
    );
}

// ---------------------------------------------------------------------------------------------
// several formats, --fail-on, every failure

#[test]
fn several_formats_in_one_run() {
    let dir = widgets();
    let (code, stdout, stderr) = check(
        dir.path(),
        &[
            "-o",
            "sarif=out/report.sarif",
            "-o",
            "junit=junit.xml",
            "-o",
            "github=gh.txt",
            "-o",
            "text",
            "bad.yaml",
        ],
    );
    // A report that cannot be written is a usage error before the check.
    assert_eq!(
        (code, timeless(&stderr).as_str()),
        (
            2,
            "Error: -o: cannot write the report to out/report.sarif: directory out does not exist\n"
        )
    );
    assert_eq!(stdout, "");
    std::fs::create_dir_all(dir.path().join("out")).expect("mkdir");
    let (code, stdout2, stderr) = check(
        dir.path(),
        &[
            "-o",
            "sarif=out/report.sarif",
            "-o",
            "junit=junit.xml",
            "-o",
            "github=gh.txt",
            "-o",
            "text",
            "bad.yaml",
        ],
    );
    assert_eq!(
        (code, timeless(&stderr).as_str()),
        (
            1,
            "Summary: 3 documents in 1 file checked in Ts: 2 errors, 1 warning, 0 info\n"
        )
    );
    // Written atomically: no temporary file is left beside the reports.
    let mut left: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .expect("out/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["report.sarif"]);
    let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).expect("written");
    for (file, format) in [
        ("out/report.sarif", "sarif"),
        ("junit.xml", "junit"),
        ("gh.txt", "github"),
    ] {
        let (_, alone, _) = check(dir.path(), &["-o", format, "bad.yaml"]);
        assert_eq!(read(file), alone, "{format}");
    }
    let (_, text_alone, _) = check(dir.path(), &["bad.yaml"]);
    assert_eq!(stdout2, text_alone);
}

/// A text report written to a file is the whole report: the input errors follow the findings,
/// as on a terminal (where they go to stderr, and still do).
#[test]
fn a_text_report_file_ends_with_the_input_errors() {
    let dir = widgets();
    let (code, stdout, stderr) = check(
        dir.path(),
        &["-o", "text=report.txt", "bad.yaml", "missing.yaml"],
    );
    assert_eq!(
        (code, stdout.as_str(), timeless(&stderr).as_str()),
        (
            2,
            "",
            "Error: reading missing.yaml: no such file or directory\n\
             Summary: 3 documents in 2 files checked in Ts: 2 errors, 1 warning, 0 info; 1 input error\n"
        )
    );
    let (_, text_alone, _) = check(dir.path(), &["bad.yaml"]);
    let written = std::fs::read_to_string(dir.path().join("report.txt")).expect("written");
    assert_eq!(
        written,
        format!("{text_alone}Error: reading missing.yaml: no such file or directory\n")
    );
}

/// Two reports to one file, or a report over an input, would lose one without a word: a usage
/// error, before anything is written.
#[test]
fn a_report_path_used_twice_or_naming_an_input_is_refused() {
    let dir = widgets();
    let before = std::fs::read(dir.path().join("bad.yaml")).expect("read");
    for (args, message) in [
        (
            vec!["-o", "json=r.out", "-o", "sarif=./r.out", "bad.yaml"],
            "Error: -o: r.out and ./r.out are the same file; give each report its own path\n",
        ),
        (
            vec!["-o", "json=./bad.yaml", "bad.yaml"],
            "Error: -o: ./bad.yaml is the input bad.yaml; writing the report there would replace it, so give the report another path\n",
        ),
    ] {
        let (code, stdout, stderr) = check(dir.path(), &args);
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", message));
    }
    assert!(!dir.path().join("r.out").exists());
    // A report that cannot be written is said before anything is checked.
    std::fs::create_dir(dir.path().join("adir")).expect("mkdir");
    for (arg, message) in [
        (
            "sarif=nodir/x.sarif",
            "Error: -o: cannot write the report to nodir/x.sarif: directory nodir does not exist\n",
        ),
        (
            "sarif=adir",
            "Error: -o: cannot write the report to adir: it is a directory; name a file in it\n",
        ),
    ] {
        let (code, stdout, stderr) = check(dir.path(), &["-o", arg, "bad.yaml"]);
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", message));
    }
    assert_eq!(
        std::fs::read(dir.path().join("bad.yaml")).expect("read"),
        before
    );
    // A manifest the directory walk reads, and a symbolic link to the other report.
    write(dir.path(), "d/x.yaml", BAD);
    #[cfg(unix)]
    std::os::unix::fs::symlink("new.json", dir.path().join("link.json")).expect("symlink");
    #[cfg(unix)]
    std::os::unix::fs::symlink("../bad.yaml", dir.path().join("d/outside.yaml")).expect("symlink");
    for (args, message) in [
        (
            vec!["-o", "json=d/x.yaml", "d"],
            "Error: -o: d/x.yaml is a manifest of the input d; writing the report there would replace it, so give the report another path\n",
        ),
        #[cfg(unix)]
        (
            vec!["-o", "json=new.json", "-o", "sarif=link.json", "bad.yaml"],
            "Error: -o: new.json and link.json are the same file; give each report its own path\n",
        ),
        // A symbolic link in the directory reads a file outside it: that file is an input too,
        // by either name.
        #[cfg(unix)]
        (
            vec!["-o", "json=bad.yaml", "d"],
            "Error: -o: bad.yaml is a manifest of the input d; writing the report there would replace it, so give the report another path\n",
        ),
        #[cfg(unix)]
        (
            vec!["-o", "json=d/outside.yaml", "d"],
            "Error: -o: d/outside.yaml is a manifest of the input d; writing the report there would replace it, so give the report another path\n",
        ),
    ] {
        let (code, stdout, stderr) = check(dir.path(), &args);
        assert_eq!((code, stdout.as_str(), stderr.as_str()), (2, "", message));
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("d/x.yaml")).expect("read"),
        BAD
    );
    assert_eq!(
        std::fs::read(dir.path().join("bad.yaml")).expect("read"),
        before
    );
}

/// A report path that is standard output itself (`/dev/stdout`, the file stdout is
/// redirected to) while another report goes there: the two would be mixed, or the second
/// would truncate the first.
#[cfg(target_os = "linux")]
#[test]
fn a_report_path_that_is_standard_output_is_refused_beside_a_report_there() {
    let dir = widgets();
    for path in ["/dev/stdout", "/dev/fd/1"] {
        let arg = format!("json={path}");
        let (code, stdout, stderr) = check(dir.path(), &["-o", &arg, "-o", "text", "bad.yaml"]);
        assert_eq!(
            (code, stdout.as_str(), stderr),
            (
                2,
                "",
                format!(
                    "Error: -o: {path} is standard output, where another report goes; give this report its own path, or write it as FORMAT=- alone\n"
                )
            )
        );
    }
    // Standard output redirected to a file, and that file named by `-o`.
    let out = dir.path().join("out.txt");
    let file = std::fs::File::create(&out).expect("create");
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("nvcre-policy"))
        .current_dir(dir.path())
        .args([
            "--rules",
            "rules",
            "check",
            "-o",
            "json=out.txt",
            "-o",
            "text",
            "bad.yaml",
        ])
        .stdout(file)
        .output()
        .expect("runs");
    assert_eq!(status.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&status.stderr),
        "Error: -o: out.txt is standard output, where another report goes; give this report its own path, or write it as FORMAT=- alone\n"
    );
    // Alone, `/dev/stdout` is the one report on standard output.
    let (code, stdout, _) = check(dir.path(), &["-o", "json=/dev/stdout", "bad.yaml"]);
    assert_eq!(code, 1);
    assert!(stdout.starts_with("{\n  \"apiVersion\""), "{stdout}");
}

#[test]
fn at_most_one_format_may_use_standard_output() {
    let dir = widgets();
    // `FORMAT=-` is standard output, not a file named `-`.
    let (code, stdout, _) = check(dir.path(), &["-o", "json=-", "bad.yaml"]);
    assert_eq!(code, 1);
    assert!(stdout.starts_with("{\n  \"apiVersion\""), "{stdout}");
    assert!(!dir.path().join("-").exists());
    let (code, _, stderr) = check(dir.path(), &["-o", "json=-", "-o", "text", "bad.yaml"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "Error: at most one -o format may write to standard output; give the others a file: -o FORMAT=PATH\n"
    );
    let (code, stdout, stderr) = check(dir.path(), &["-o", "json", "-o", "sarif", "bad.yaml"]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "Error: at most one -o format may write to standard output; give the others a file: -o FORMAT=PATH\n"
    );
    let (code, _, stderr) = check(dir.path(), &["-o", "xml", "bad.yaml"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with(
            "error: invalid value 'xml' for '--output <FORMAT[=PATH]>': unknown format \"xml\": expected one of text, json, sarif, junit, github"
        ),
        "{stderr}"
    );
}

#[test]
fn fail_on_decides_whether_warnings_fail() {
    let dir = widgets();
    write(
        dir.path(),
        "warn.yaml",
        "kind: Widget\nmetadata: {name: w}\nspec:\n  size: 3\n  color: red\n",
    );
    let code = |args: &[&str]| check(dir.path(), args).0;
    assert_eq!(code(&["warn.yaml"]), 0);
    assert_eq!(code(&["--fail-on", "error", "warn.yaml"]), 0);
    assert_eq!(code(&["--fail-on", "warning", "warn.yaml"]), 1);
    assert_eq!(
        code(&["--fail-on", "warning", "-o", "json", "warn.yaml"]),
        1
    );
    // Input errors still win.
    assert_eq!(code(&["--fail-on", "warning", "warn.yaml", "nope.yaml"]), 2);
}

#[test]
fn a_shipped_warning_rule_fails_only_with_fail_on_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text =
        std::fs::read_to_string(root().join("examples/unpinned-8-nodes.yaml")).expect("read");
    // Unpinned over several nodes without a gang scheduler: wr-unpinned-multi-node-gang (warning).
    let ungated: String = text
        .lines()
        .filter(|l| {
            !l.contains("gangScheduler") && !l.contains("schedulerName") && !l.contains("queue")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    write(dir.path(), "run.yaml", &ungated);
    let (code, stdout, stderr) = run(dir.path(), &["check", "-o", "github", "run.yaml"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with("::warning file=run.yaml,line="),
        "{stdout}"
    );
    assert!(stdout.contains(",title=wr-unpinned-multi-node-gang::numNodes > 1 under placement Unpinned without spec.gangScheduler"), "{stdout}");
    let (code, _, _) = run(
        dir.path(),
        &["check", "--fail-on", "warning", "-o", "github", "run.yaml"],
    );
    assert_eq!(code, 1);
}

#[test]
fn every_failing_validation_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("read");
    let broken = text
        .replace(
            "queue: high-priority",
            &format!("queue: {}", "q".repeat(64)),
        )
        .replace("numNodes: 4", "numNodes: 0");
    write(dir.path(), "a.yaml", &broken);
    write(dir.path(), "b.yaml", &broken);
    let (code, stdout, _) = run(dir.path(), &["check", "-o", "json", "a.yaml", "b.yaml"]);
    assert_eq!(code, 1);
    let findings = findings(&serde_json::from_str(&stdout).expect("json"));
    let got: Vec<(String, String)> = findings
        .as_array()
        .expect("array")
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap_or("").to_string(),
                f["ruleId"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = ["a.yaml", "b.yaml"]
        .iter()
        .flat_map(|f| {
            ["wr-num-nodes-minimum", "wr-gang-queue-length"]
                .iter()
                .map(move |r| (f.to_string(), r.to_string()))
        })
        .collect();
    assert_eq!(got, want);
}

// ---------------------------------------------------------------------------------------------
// rules lint

const LINTED: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: linted}
stage: manifests
variables:
  - {name: labels, expression: object.metadata.labels}
  - {name: idle, expression: object.spec}
rules:
  - id: app-label
    variables:
      - {name: unusedHere, expression: "1"}
    validate:
      expression: object.metadata.labels.app__dot__kubernetes__dot__io != ''
      message: "'app label is ' + object.metadata.labels.app"
  - id: broken
    validate:
      expression: size(variables.labels
  - id: typo
    validate:
      expresion: "true"
"#;

const LINTED_2: &str = r#"apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: RulePack
metadata: {name: second}
stage: manifests
rules:
  - id: app-label
    validate: {expression: "true"}
---
apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: table}
fragments:
  used: [a]
  spare: [b]
entries:
  - {id: e, args: [{$fragment: used}]}
"#;

#[test]
fn rules_lint_reports_every_lint_with_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "lint/a.yaml", LINTED);
    write(dir.path(), "lint/b.yaml", LINTED_2);
    let (code, stdout, stderr) = run(dir.path(), &["rules", "lint", "lint"]);
    assert_eq!((code, stderr.as_str()), (1, ""));
    assert_eq!(
        stdout,
        // `idle` is not reported: rules `broken` and `typo` do not load, and either might read
        // it. The fixture gained `stage:` (lines +1); the table's name is not in the contract.
        "lint/a.yaml:11:16: warning[unused-variable]: rule app-label: variable \"unusedHere\" is never used: no later variable, when, validate or mutate of the rule refers to variables.unusedHere\n\
         lint/a.yaml:13:35: error[escaped-key-on-map]: rule app-label: labels.app__dot__kubernetes__dot__io never matches: labels is a free-form map whose keys are not escaped, so __dot__/__slash__ stay literal there; write labels['app.kubernetes.io']\n\
         lint/a.yaml:14:16: warning[message-looks-like-cel]: rule app-label: message looks like a CEL expression (it contains \"object.\") but is printed as written; use messageExpression to compute the message\n\
         lint/a.yaml:17:40: error[compile]: rule broken: CEL does not compile: Syntax error: missing ')' at '<EOF>' (expression column 22)\n\
         lint/a.yaml:20:7: error[unknown-field]: rule typo: unknown field `expresion`, expected one of `expression`, `message`, `messageExpression`, `fieldPath`, `fieldPathExpression`, `at`, `atExpression`\n\
         lint/b.yaml:6:9: error[duplicate-id]: rule app-label: duplicate rule id (first defined at lint/a.yaml:9:5)\n\
         lint/b.yaml:11:18: error[contract]: unknown table \"table\"; known tables: gang-defaults, gpu-defaults, gpu-products, list-merge, nccl-base-env, nic-detection, platform-detection, runtime-templates, scheduling, test-scale, workloadrun-platform-overrides\n\
         lint/b.yaml:14:3: warning[unused-fragment]: fragment \"spare\" is never used: nothing in table table inserts {$fragment: spare} or reads fragments.spare\n"
    );
}

#[test]
fn rules_lint_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "warn/p.yaml",
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: manifests\nvariables:\n  - {name: idle, expression: '1'}\nrules:\n  - id: r\n    validate: {expression: 'true'}\n",
    );
    let (code, stdout, _) = run(dir.path(), &["rules", "lint", "warn"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "warn/p.yaml:6:12: warning[unused-variable]: pack variable \"idle\" is never used: no expression or template of pack p refers to variables.idle\n"
    );
    assert_eq!(
        run(
            dir.path(),
            &["rules", "lint", "--fail-on", "warning", "warn"]
        )
        .0,
        1
    );
    // --rules is the default directory.
    assert_eq!(
        run(
            dir.path(),
            &["--rules", "warn", "rules", "lint", "--fail-on", "warning"]
        )
        .0,
        1
    );
    let (code, stdout, stderr) = run(dir.path(), &["rules", "lint", "nowhere"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(stderr.starts_with("Error: reading nowhere: "), "{stderr}");
}

/// The shipped rules lint clean, but for the `cel-cost` warnings of the expressions whose
/// estimated worst case exceeds the per-expression limit (docs/rules.md, "CEL cost"): warnings,
/// so the exit code stays 0.
#[test]
fn the_shipped_rules_lint_clean_but_for_cost_estimates() {
    let (code, stdout, stderr) = run(&root(), &["rules", "lint"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let places: Vec<&str> = stdout
        .lines()
        .map(|l| {
            l.split_once(": the estimated worst case of this expression is ")
                .map_or(l, |(at, _)| at)
        })
        .collect();
    assert_eq!(places, SHIPPED_COST_WARNINGS);
    let (code, on_disk, _) = run(&root(), &["rules", "lint", "rules"]);
    assert_eq!((code, on_disk.as_str()), (0, stdout.as_str()));
    // The lint compares with the limit in force.
    let (code, stdout, stderr) = run(
        &root(),
        &["--cel-cost-limit", "18446744073709551615", "rules", "lint"],
    );
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "", ""));
    let (code, stdout, _) = run(&root(), &["rules", "lint", "--fail-on", "warning"]);
    assert_eq!(
        (code, stdout.lines().count()),
        (1, SHIPPED_COST_WARNINGS.len())
    );
}

/// Where `rules lint` warns about the cost of the shipped rules.
const SHIPPED_COST_WARNINGS: [&str; 31] = [
    "rules/contract/manifests.yaml:188:9: warning[cel-cost]: rule trainjob-patch-env",
    "rules/contract/mpi.yaml:46:7: warning[cel-cost]: pack variable \"forwards\"",
    "rules/contract/mpi.yaml:64:7: warning[cel-cost]: pack variable \"workerSpecs\"",
    "rules/contract/mpi.yaml:81:7: warning[cel-cost]: pack variable \"workerEnvNames\"",
    "rules/contract/mpi.yaml:106:9: warning[cel-cost]: rule mpi-worker-env-not-forwarded",
    "rules/contract/mpi.yaml:131:9: warning[cel-cost]: rule mpi-trainer-env-not-forwarded",
    "rules/contract/resources.yaml:31:7: warning[cel-cost]: pack variable \"gpuCounts\"",
    "rules/contract/resources.yaml:74:11: warning[cel-cost]: rule zero-nic-request",
    "rules/contract/resources.yaml:124:19: warning[cel-cost]: rule gpu-request-missing",
    "rules/contract/resources.yaml:172:9: warning[cel-cost]: rule workflow-patch-env",
    "rules/lint/workloads.yaml:254:7: warning[cel-cost]: pack variable \"allPods\"",
    "rules/lint/workloads.yaml:296:7: warning[cel-cost]: pack variable \"trainerNodes\"",
    "rules/lint/workloads.yaml:302:7: warning[cel-cost]: pack variable \"trainerNode\"",
    "rules/lint/workloads.yaml:317:7: warning[cel-cost]: pack variable \"structureBad\"",
    "rules/lint/workloads.yaml:348:7: warning[cel-cost]: pack variable \"allOwnMetas\"",
    "rules/lint/workloads.yaml:384:7: warning[cel-cost]: pack variable \"nestedQueueLabels\"",
    "rules/lint/workloads.yaml:404:7: warning[cel-cost]: pack variable \"containers\"",
    "rules/lint/workloads.yaml:425:7: warning[cel-cost]: pack variable \"efaContainers\"",
    "rules/lint/workloads.yaml:448:7: warning[cel-cost]: pack variable \"efaEnv\"",
    "rules/lint/workloads.yaml:461:7: warning[cel-cost]: pack variable \"allEnv\"",
    "rules/lint/workloads.yaml:477:7: warning[cel-cost]: pack variable \"mpiRuns\"",
    "rules/lint/workloads.yaml:545:7: warning[cel-cost]: pack variable \"mpiEnv\"",
    "rules/lint/workloads.yaml:578:7: warning[cel-cost]: pack variable \"claimsUsed\"",
    "rules/lint/workloads.yaml:597:9: warning[cel-cost]: rule lint-field-type",
    "rules/lint/workloads.yaml:831:19: warning[cel-cost]: rule lint-mpi-env-forward-mismatch",
    "rules/lint/workloads.yaml:848:9: warning[cel-cost]: rule lint-claim-not-used",
    "rules/lint/workloads.yaml:867:9: warning[cel-cost]: rule lint-claim-not-declared",
    "rules/lint/workloads.yaml:897:9: warning[cel-cost]: rule lint-compute-domain-nodes",
    "rules/lint/workloads.yaml:955:9: warning[cel-cost]: rule lint-efa-plugin-without-efa",
    "rules/lint/workloads.yaml:978:9: warning[cel-cost]: rule lint-efa-plugin-disabled",
    "rules/lint/workloads.yaml:999:9: warning[cel-cost]: rule lint-template-labels",
];

// ---------------------------------------------------------------------------------------------
// rules list / explain

#[test]
fn rules_list_shows_id_severity_pack_and_source_line() {
    let dir = widgets();
    let (code, stdout, _) = run(dir.path(), &["--rules", "rules", "rules", "list"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "widget-size                            error    widgets    rules/widgets/widget.yaml:11\n\
         widget-color                           warning  widgets    rules/widgets/widget.yaml:17\n\
         widget:name,required                   error    widgets    rules/widgets/widget.yaml:24\n\
         placement                              error    placement  <built-in>\n\
         cordoned-nodes-left-out                warning  placement  <built-in>\n\
         yaml-quote-it                          error    input      <built-in>\n\
         null-quantity                          warning  input      <built-in>\n\
         not-a-kubernetes-object                warning  input      <built-in>\n\
         gpu-architecture-unknown               warning  input      <built-in>\n\
         gpu-architecture-contradicts-selector  warning  input      <built-in>\n\
         override-when-never-matches            warning  input      <built-in>\n\
         legacy-api-group                       warning  input      <built-in>\n"
    );
    let (_, shipped, _) = run(&root(), &["rules", "list"]);
    assert!(
        shipped.contains(
            "\nwr-gang-queue-length                   error    workloadrun-admission  rules/admission/workloadrun.yaml:227\n"
        ),
        "{shipped}"
    );
}

/// `rules list --tables` lists every table row (what `rules explain` takes), text and JSON.
#[test]
fn rules_list_tables_shows_each_row_with_its_table_and_line() {
    let (code, text, err) = run(&root(), &["rules", "list", "--tables"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(
            "kai-scheduler-queue                     gang-defaults                   rules/defaults/gang.yaml:12"
        )
    );
    assert!(
        lines.contains(&"aws-h100-efa                            workloadrun-platform-overrides  rules/overrides/workloadrun.yaml:LINE".replace("LINE", &row_line("aws-h100-efa")).as_str()),
        "{text}"
    );
    let (code, json, _) = run(&root(), &["rules", "list", "--tables", "-o", "json"]);
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&json).expect("json");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), lines.len());
    assert_eq!(
        rows[0],
        serde_json::json!({"id": "kai-scheduler-queue", "table": "gang-defaults", "file": "rules/defaults/gang.yaml", "line": 12})
    );
    // `TABLE/ID` names one table's row.
    let (code, text, _) = run(&root(), &["rules", "explain", "gpu-defaults/a100"]);
    assert_eq!(code, 0);
    assert!(
        text.starts_with(
            "gpu-defaults/a100\n  table        gpu-defaults\n  source       rules/defaults/gpu-defaults.yaml:14\n"
        ),
        "{text}"
    );
}

/// The 1-based line of table row `id` in rules/overrides/workloadrun.yaml.
fn row_line(id: &str) -> String {
    let text =
        std::fs::read_to_string(root().join("rules/overrides/workloadrun.yaml")).expect("rules");
    let at = text
        .lines()
        .position(|l| l.trim_start() == format!("- id: {id}"))
        .expect("row");
    (at + 1).to_string()
}

fn with_suites() -> TempDir {
    let dir = widgets();
    write(
        dir.path(),
        "rules/tests/widgets/size.yaml",
        "cases:\n  - note: a small widget\n    input: |\n      kind: Widget\n      metadata: {name: w}\n      spec: {size: 3}\n    want_findings: []\n  - note: a wide widget\n    context: {platform: aws, gpuArch: h100}\n    input: |\n      kind: Widget\n      metadata: {name: w}\n      spec: {size: 12}\n    want_findings:\n      - {ruleId: widget-size, line: 3, column: 15}\n",
    );
    write(
        dir.path(),
        "rules/tests/widgets/color.yaml",
        "cases:\n  - note: a red widget\n    inputFile: inputs/red.yaml\n    want_findings:\n      - {ruleId: widget-color, severity: warning}\n",
    );
    write(
        dir.path(),
        "rules/tests/widgets/inputs/red.yaml",
        "kind: Widget\nmetadata: {name: r}\nspec: {size: 1, color: red}\n",
    );
    dir
}

#[test]
fn rules_explain_shows_the_rule_and_examples_from_the_suites() {
    let dir = with_suites();
    let (code, stdout, stderr) = run(
        dir.path(),
        &["--rules", "rules", "rules", "explain", "widget-size"],
    );
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "widget-size
  description  A widget is at most 10 wide.
  severity     error
  pack         widgets (stage manifests)
  source       rules/widgets/widget.yaml:11
  expression   object.spec.size <= 10
  messageExpr  'size ' + string(object.spec.size) + ' is above 10: <too> \"big\" & 100%'
  fieldPath    spec.size

passing example: rules/tests/widgets/size.yaml › a small widget
  kind: Widget
  metadata: {name: w}
  spec: {size: 3}

failing example: rules/tests/widgets/size.yaml › a wide widget (context: platform=aws, gpuArch=h100)
  kind: Widget
  metadata: {name: w}
  spec: {size: 12}
"
    );
    let (_, stdout, _) = run(
        dir.path(),
        &["--rules", "rules", "rules", "explain", "widget-color"],
    );
    assert!(
        stdout.ends_with(
            "  message      not blue, use blue
  fieldPath    spec.color

passing example: rules/tests/widgets/size.yaml › a small widget
  kind: Widget
  metadata: {name: w}
  spec: {size: 3}

failing example: rules/tests/widgets/color.yaml › a red widget (inputFile inputs/red.yaml)
  kind: Widget
  metadata: {name: r}
  spec: {size: 1, color: red}
"
        ),
        "{stdout}"
    );
}

#[test]
fn rules_explain_without_suites_says_so_and_shows_mutations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stdout, _) = run(
        dir.path(),
        &["rules", "explain", "workload-queue-label-insert"],
    );
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "workload-queue-label-insert
  description  When gangScheduler is set, its resolved queue is placed on the workload object under queueLabelKey; a label removed by an override is restored.
  severity     error
  pack         workload-labels (stage workload-labels)
  source       rules/contract/workload-labels.yaml:47
  when         variables.gang && !(variables.queueKey in variables.labels) && size(variables.labels) < 32
  mutate       - merge:
                   path: spec.jobTemplate.spec.workloadMetadata.labels
                   value:
                     \"${{ variables.queueKey }}\": ${{ variables.queue }}

examples: no test suites at rules/tests (give --tests DIR: the rule test suites, such as the repository's rules/tests)
"
    );
}

#[test]
fn rules_explain_of_an_unknown_id_is_a_usage_error() {
    let dir = widgets();
    let (code, stdout, stderr) = run(
        dir.path(),
        &["--rules", "rules", "rules", "explain", "color"],
    );
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        "Error: no rule with id \"color\"; rules whose id contains it: widget-color\n"
    );
    let (_, _, stderr) = run(dir.path(), &["--rules", "rules", "rules", "explain", "zzz"]);
    assert_eq!(
        stderr,
        "Error: no rule with id \"zzz\"; `nvcre-policy rules list` shows them all, and `rules list --tables` the table rows\n"
    );
}

/// A table row (a platform override) is explained by its id too: its table, where it is
/// written, and the row as written; a part of its id finds it.
#[test]
fn rules_explain_of_a_table_row_shows_the_row_as_written() {
    let dir = TempDir::new().expect("tmp");
    let (code, stdout, stderr) = run(dir.path(), &["rules", "explain", "aws-h100-efa"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let head: Vec<&str> = stdout.lines().take(5).collect();
    assert_eq!(
        head,
        [
            "aws-h100-efa",
            "  table        workloadrun-platform-overrides",
            "  source       rules/overrides/workloadrun.yaml:244",
            "  row          - id: aws-h100-efa",
            "                 when: {platform: {equals: aws}, gpuArchitecture: {equals: h100}}",
        ]
    );
    assert!(
        stdout.ends_with("                               requests: {vpc.amazonaws.com/efa: 32}\n"),
        "{stdout}"
    );
    let (code, _, stderr) = run(dir.path(), &["rules", "explain", "aws-h1"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "Error: no rule with id \"aws-h1\"; rules whose id contains it: aws-h100-efa\n"
        )
    );
}

/// A document whose check failed with an input error ran no rule: JUnit shows its error, not
/// passing test cases for the rules that would have run.
#[test]
fn junit_lists_no_passing_cases_for_a_document_that_could_not_be_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "word.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: t}\nspec:\n  image: i\n  numNodes: 1\n  gpusPerNode: eight\n  framework: {exec: {command: [a]}}\n",
    );
    let out = bin()
        .args(["check", "-o", "junit", "word.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let parsed = quick_junit::Report::deserialize_from_str(&String::from_utf8_lossy(&out.stdout))
        .expect("JUnit parses back");
    let cases: Vec<(&str, bool)> = parsed.test_suites[0]
        .test_cases
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                matches!(c.status, quick_junit::TestCaseStatus::Success { .. }),
            )
        })
        .collect();
    assert_eq!(cases, [("read", false)]);
}

/// `check -o FORMAT | head`: a reader that closes standard output early is not an error of the
/// report, in any format (the JSON report's write error used to lose its kind and be printed as
/// `Error: writing the report: broken pipe`).
#[test]
fn a_closed_standard_output_is_not_a_report_error() {
    use std::process::{Command, Stdio};
    let dir = TempDir::new().expect("tmp");
    // Thousands of findings: every report is far larger than a pipe's buffer.
    let stream: String = (0..3000)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: Bad_{i}}}\n"))
        .collect();
    write(dir.path(), "in.yaml", &stream);
    for format in ["text", "json", "sarif", "junit", "github"] {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("nvcre-policy"))
            .current_dir(dir.path())
            .args(["check", "-o", format, "in.yaml"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        // Closed before the report is written: every write to it fails.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("waits");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(out.status.code(), Some(1), "{format}: {stderr}");
        assert_eq!(lines.len(), 1, "{format}: only the summary: {stderr}");
        assert!(
            lines[0].starts_with("Summary: 3000 documents in 1 file checked in ")
                && lines[0].ends_with("s: 3000 errors, 0 warnings, 0 info"),
            "{format}: {stderr}"
        );
    }
}

/// `check -o FORMAT one.yaml one.yaml two.yaml one.yaml`, each file a ConfigMap with a bad
/// name: its report (exit 1).
fn check_a_file_given_twice(format: &str) -> String {
    let dir = TempDir::new().expect("tmp");
    write(
        dir.path(),
        "one.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n",
    );
    write(
        dir.path(),
        "two.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Also_Bad}\n",
    );
    let args = [
        "check", "-o", format, "one.yaml", "one.yaml", "two.yaml", "one.yaml",
    ];
    let (code, out, _) = run(dir.path(), &args);
    assert_eq!(code, 1, "{format}");
    out
}

/// A file given twice, in a row or not, is checked once, where it first comes: one JSON result
/// with its own findings (before, it was checked twice and reported twice, with the same
/// SARIF fingerprints; earlier still, the first result listed both checks').
#[test]
fn json_results_of_a_file_given_twice_list_its_findings_once() {
    let out = check_a_file_given_twice("json");
    let report: Value = serde_json::from_str(&out).expect("JSON");
    let results: Vec<(String, u64, Vec<String>)> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let names = r["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .map(|f| f["message"].as_str().unwrap_or_default().to_string())
                .collect();
            (
                r["file"].as_str().unwrap_or_default().to_string(),
                r["documents"].as_u64().unwrap_or(0),
                names,
            )
        })
        .collect();
    let bad = |name: &str| {
        vec![format!(
            "ConfigMap name \"{name}\" is not a lowercase RFC 1123 subdomain of at most 253 characters"
        )]
    };
    assert_eq!(
        results,
        [
            ("one.yaml".to_string(), 1, bad("Bad_Name")),
            ("two.yaml".to_string(), 1, bad("Also_Bad")),
        ]
    );
    assert_eq!(report["summary"]["errors"], 2);
}

/// A file given twice, in a row or not, has one JUnit suite, failing with its findings once.
#[test]
fn junit_suites_of_a_file_given_twice_list_its_failures_once() {
    let out = check_a_file_given_twice("junit");
    let report = quick_junit::Report::deserialize_from_str(&out).expect("JUnit");
    let suites: Vec<(String, usize, Vec<String>)> = report
        .test_suites
        .iter()
        .map(|s| {
            let failures = s
                .test_cases
                .iter()
                .filter_map(|c| match &c.status {
                    quick_junit::TestCaseStatus::NonSuccess { description, .. } => {
                        description.as_ref().map(|d| d.to_string())
                    }
                    _ => None,
                })
                .collect();
            (s.name.to_string(), s.failures, failures)
        })
        .collect();
    let bad = |file: &str, name: &str| {
        vec![format!(
            "{file}:3:18: error[object-name]: ConfigMap name \"{name}\" is not a lowercase RFC 1123 subdomain of at most 253 characters (metadata.name)"
        )]
    };
    assert_eq!(
        suites,
        [
            ("one.yaml".to_string(), 1, bad("one.yaml", "Bad_Name")),
            ("two.yaml".to_string(), 1, bad("two.yaml", "Also_Bad")),
        ]
    );
}

/// A file that does not parse and a missing path, each given twice, are two entries in the
/// order first given, each with its one error, in the JSON results and the JUnit suites
/// (before, each bad file's entry listed both errors, and the missing path was one entry after
/// the others).
#[test]
fn errors_of_a_file_given_twice_are_reported_once() {
    let dir = TempDir::new().expect("tmp");
    write(dir.path(), "bad.yaml", "a: [1\n");
    let args = ["bad.yaml", "missing.yaml", "bad.yaml", "missing.yaml"];
    let (code, out, err) = run(dir.path(), &[&["check", "-o", "json"][..], &args].concat());
    assert_eq!(code, 2);
    let report: Value = serde_json::from_str(&out).expect("JSON");
    let results: Vec<(String, Vec<String>)> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let errors = r["errors"]
                .as_array()
                .expect("errors")
                .iter()
                .map(|e| e["message"].as_str().unwrap_or_default().to_string())
                .collect();
            (r["file"].as_str().unwrap_or_default().to_string(), errors)
        })
        .collect();
    let unclosed = "bad.yaml:1:4: unclosed bracket '['";
    let missing = "reading missing.yaml: no such file or directory";
    let one = |file: &str, message: &str| (file.to_string(), vec![message.to_string()]);
    assert_eq!(
        results,
        [one("bad.yaml", unclosed), one("missing.yaml", missing)]
    );
    // stderr lists them in the same order.
    let errors: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("Error: "))
        .collect();
    assert_eq!(errors, [unclosed, missing]);
    let (code, out, _) = run(dir.path(), &[&["check", "-o", "junit"][..], &args].concat());
    assert_eq!(code, 2);
    let report = quick_junit::Report::deserialize_from_str(&out).expect("JUnit");
    let suites: Vec<(String, usize, usize)> = report
        .test_suites
        .iter()
        .map(|s| (s.name.to_string(), s.test_cases.len(), s.errors))
        .collect();
    assert_eq!(
        suites,
        [
            ("bad.yaml".to_string(), 1, 1),
            ("missing.yaml".to_string(), 1, 1),
        ]
    );
}

/// The passing example comes from the failing example's own suite when it has one: a case
/// where the rule applied and held (the folder's first passing case had no thresholds at all).
#[test]
fn rules_explain_takes_the_passing_example_from_the_failing_example_s_suite() {
    let (code, stdout, _) = run(
        &root(),
        &["--rules", "rules", "rules", "explain", "wr-threshold-keys"],
    );
    assert_eq!(code, 0);
    assert!(
        stdout.contains("\npassing example: rules/tests/workloadrun-admission/thresholds.yaml › every valid threshold key is admitted\n"),
        "{stdout}"
    );
}

/// `rules lint` of a set that loads warns about an override table row whose `when` names a
/// value that never occurs, at the value (a platform in capitals, an architecture as a product
/// spells it); the shipped rules have none.
#[test]
fn rules_lint_warns_about_override_rows_that_never_match() {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&root().join("rules"), &dir.path().join("rules"));
    let file = dir.path().join("rules/overrides/workloadrun.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    let edited = text.replacen(
        "  - id: aws-h100-efa\n    when: {platform: {equals: aws}, gpuArchitecture: {equals: h100}}",
        "  - id: aws-h100-efa\n    when: {platform: {equals: AWS}, gpuArchitecture: {equals: h100}}",
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&file, &edited).expect("write");
    let line = edited
        .lines()
        .position(|l| l.contains("equals: AWS"))
        .expect("edited line")
        + 1;
    // A gpu-defaults row that names a platform or architecture that never occurs: runs quietly
    // get another row's defaults.
    let defaults = dir.path().join("rules/defaults/gpu-defaults.yaml");
    let text = std::fs::read_to_string(&defaults).expect("read");
    let edited_defaults = text
        .replacen(
            "{id: oci-l40s, platform: oci,",
            "{id: oci-l40s, platform: OCI,",
            1,
        )
        .replacen(
            "{id: h200, gpuArchitecture: h200,",
            "{id: h200, gpuArchitecture: H200,",
            1,
        );
    assert_ne!(edited_defaults, text);
    std::fs::write(&defaults, &edited_defaults).expect("write");
    let at = |needle: &str| {
        edited_defaults
            .lines()
            .position(|l| l.contains(needle))
            .expect("edited line")
            + 1
    };
    let (code, stdout, _) = run(dir.path(), &["rules", "lint", "rules"]);
    let never: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("never-matches"))
        .collect();
    assert_eq!(code, 0);
    assert_eq!(
        never,
        [
            format!(
                "rules/overrides/workloadrun.yaml:{line}:31: warning[never-matches]: entry aws-h100-efa: entries[9].when.platform.equals: \"AWS\" is not a platform (one of forge, onprem, aws, gcp, azure, oci, nscale, togetherai, mistral), so the row never applies; platforms are compared exactly: write \"aws\""
            ),
            format!(
                "rules/defaults/gpu-defaults.yaml:{}:33: warning[never-matches]: entry h200: entries[5].gpuArchitecture: \"H200\" is not a GPU architecture as runs name them (the gpu-products table reads it as \"h200\"), so the row never applies; write \"h200\"",
                at("id: h200")
            ),
            format!(
                "rules/defaults/gpu-defaults.yaml:{}:30: warning[never-matches]: entry oci-l40s: entries[10].platform: \"OCI\" is not a platform (one of forge, onprem, aws, gcp, azure, oci, nscale, togetherai, mistral), so the row never applies; platforms are compared exactly: write \"oci\"",
                at("id: oci-l40s")
            ),
        ]
    );
}

/// A file named twice (by two spellings, or inside a directory also given) is read once: its
/// findings are not reported, nor counted, twice.
#[test]
fn a_file_named_twice_is_checked_once() {
    let dir = widgets();
    write(dir.path(), "d/x.yaml", BAD);
    let (code, stdout, stderr) = check(
        dir.path(),
        &["-o", "json", "bad.yaml", "./bad.yaml", "d", "d/x.yaml"],
    );
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let files: Vec<&str> = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter_map(|r| r["file"].as_str())
        .collect();
    assert_eq!(files, ["bad.yaml", "d/x.yaml"]);
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(
        notes,
        [
            "note: ./bad.yaml is bad.yaml, already read; it is checked once",
            "note: d/x.yaml is named twice; it is checked once",
        ]
    );
    assert!(
        stderr.contains("\nSummary: 6 documents in 2 files checked in "),
        "{stderr}"
    );
}

/// Every kind of our API group is checked as its kind: a LogProfile as a rule set reads it
/// (a regex that does not compile is an input error at its line), the lists of our kinds item
/// by item (`WorkloadRunList`, what an API list call returns), a misspelt kind refused naming
/// the kinds there are.
#[test]
fn the_kinds_of_our_api_group_are_each_checked_as_theirs() {
    let dir = TempDir::new().expect("tmp");
    let profile =
        std::fs::read_to_string(root().join("rules/measure/nccl-bandwidth.yaml")).expect("profile");
    write(dir.path(), "profile.yaml", &profile);
    write(
        dir.path(),
        "broken.yaml",
        &profile.replacen("(?P<size>", "(?P<size", 1),
    );
    write(
        dir.path(),
        "runs.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRunList\nitems:\n- apiVersion: nvcre.nvidia.com/v1alpha1\n  kind: WorkloadRun\n  metadata: {name: B}\n  spec: {image: i, numNodes: 1, framework: {exec: {command: [a]}}}\n---\napiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRn\nmetadata: {name: a}\n",
    );
    let (code, _, err) = run(dir.path(), &["check", "profile.yaml"]);
    assert_eq!(code, 0, "{err}");
    // Another version of the group: the API server serves v1alpha1 only.
    write(
        dir.path(),
        "v1.yaml",
        &profile.replacen("nvcre.nvidia.com/v1alpha1", "nvcre.nvidia.com/v1", 1),
    );
    let (code, _, err) = run(dir.path(), &["check", "v1.yaml"]);
    assert_eq!(code, 2);
    let line = profile
        .lines()
        .position(|l| l.starts_with("apiVersion:"))
        .expect("apiVersion")
        + 1;
    assert_eq!(
        err.lines().next(),
        Some(format!("Error: v1.yaml:{line}:13: expected apiVersion nvcre.nvidia.com/v1alpha1 (or the older cre.nvidia.com/v1alpha1), got \"nvcre.nvidia.com/v1\"").as_str())
    );
    let (code, _, err) = run(dir.path(), &["check", "broken.yaml"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("Error: broken.yaml:30:14: LogProfile \"nccl-bandwidth\": compiling bandwidthResult regex: error parsing regexp: invalid named capture"),
        "{err}"
    );
    let (code, out, err) = run(dir.path(), &["check", "-o", "json", "runs.yaml"]);
    assert_eq!(code, 2, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let result = &report["results"][0];
    assert_eq!(result["findings"][0]["ruleId"], "wr-name");
    assert_eq!(result["findings"][0]["fieldPath"], "items[0].metadata.name");
    assert_eq!(
        result["errors"][0]["message"],
        "runs.yaml:10:7: nvcre.nvidia.com/v1alpha1 has kinds WorkloadRun, Workflow, LogProfile, BandwidthMeasurement, GoodputMeasurement (and their lists, such as WorkloadRunList), got \"WorkloadRn\""
    );
}

/// A BandwidthMeasurement or GoodputMeasurement is read as the API server reads it: every
/// unknown field, a value of the wrong type, a missing required field is an input error at its
/// line; a measurement as the controller writes it passes.
#[test]
fn measurements_are_strictly_decoded() {
    let dir = TempDir::new().expect("tmp");
    write(
        dir.path(),
        "m.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1
kind: BandwidthMeasurement
metadata: {name: bm, labels: {nvcre.nvidia.com/job: j}}
spec:
  jobRef: {apiGroup: nvcre.nvidia.com, kind: Job, name: j}
  logProfileRef: nccl-bandwidth
  sampleInterval: 30s
  testType: all_reduce
status:
  results: [{sizeBytes: 1024, algBW: \"1.50\", busBW: \"2.63\", samples: 3}]
  transport: [IB]
---
apiVersion: nvcre.nvidia.com/v1alpha1
kind: BandwidthMeasurement
metadata: {name: bm}
spec:
  logProfileRef: nccl-bandwidth
  sampleIntervall: 30s
  jobRef: {apiGroup: nvcre.nvidia.com, kind: Job, name: j, namespace: x}
---
apiVersion: nvcre.nvidia.com/v1alpha1
kind: GoodputMeasurement
metadata: {name: gm}
spec:
  jobRef: {kind: Job, name: j}
---
apiVersion: nvcre.nvidia.com/v1alpha1
kind: GoodputMeasurement
metadata: {name: gm}
spec:
  logProfileRef: megatron
status:
  currentStep: many
---
apiVersion: nvcre.nvidia.com/v1alpha1
kind: GoodputMeasurement
metadata: {name: gm}
spec: null
extra: null
",
    );
    let (code, out, err) = run(dir.path(), &["check", "-o", "json", "m.yaml"]);
    assert_eq!(code, 2, "{err}");
    let report: Value = serde_json::from_str(&out).expect("json");
    let errors: Vec<&str> = report["results"][0]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(
        errors,
        [
            "m.yaml:18:3: strict decoding error: unknown field \"spec.sampleIntervall\", unknown field \"spec.jobRef.namespace\": correct or remove them",
            "m.yaml:24:1: spec: missing field `logProfileRef`",
            "m.yaml:33:3: status.currentStep: invalid type: string \"many\", expected an integer",
            "m.yaml:35:1: spec: Required value",
        ]
    );
    assert_eq!(report["summary"]["inputErrors"], 4, "{}", report["summary"]);
}

/// JUnit has a testcase per rule that applies to a document: the older API group's WorkloadRun
/// gets the same cases as one of ours (and the legacy-group note), a List the cases of its
/// items' kinds, so a rule that passes is a passing case, not a missing one.
#[test]
fn junit_cases_of_an_older_group_run_and_of_a_list_are_those_of_their_kinds() {
    let dir = TempDir::new().expect("tmp");
    let example =
        std::fs::read_to_string(root().join("examples/nccl-all-reduce.yaml")).expect("example");
    write(dir.path(), "ours.yaml", &example);
    write(
        dir.path(),
        "older.yaml",
        &example.replace(
            "apiVersion: nvcre.nvidia.com/v1alpha1",
            "apiVersion: cre.nvidia.com/v1alpha1",
        ),
    );
    let body: String = example
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("  {l}\n"))
        .collect();
    write(
        dir.path(),
        "list.yaml",
        &format!("apiVersion: v1\nkind: List\nitems:\n-{}", &body[1..]),
    );
    let cases = |file: &str| {
        let (_, out, _) = run(dir.path(), &["check", "-o", "junit", file]);
        let report = quick_junit::Report::deserialize_from_str(&out).expect("JUnit");
        let mut names: Vec<String> = report
            .test_suites
            .iter()
            .flat_map(|s| s.test_cases.iter().map(|c| c.name.to_string()))
            .collect();
        names.sort();
        names
    };
    let ours = cases("ours.yaml");
    assert_eq!(ours.len(), 65, "{ours:?}");
    let mut older = ours.clone();
    older.push("legacy-api-group".to_string());
    older.sort();
    assert_eq!(cases("older.yaml"), older);
    // The List's own kind adds no case: its item's are all there, and only those.
    assert_eq!(cases("list.yaml"), ours);
}

/// A report written to the file standard error goes to (`-o json=log 2>log`) goes through the
/// stream: the messages before it and the summary after it stay in the file with it.
#[test]
fn a_report_to_the_file_of_standard_error_keeps_the_messages_and_the_summary() {
    let dir = TempDir::new().expect("tmp");
    write(
        dir.path(),
        "bad.yaml",
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: a}\nspec:\n  bogus: 1\n",
    );
    let log = dir.path().join("log");
    let file = std::fs::File::create(&log).expect("log");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_nvcre-policy"))
        .current_dir(dir.path())
        .args(["check", "-o", "json=log", "bad.yaml"])
        .stderr(file)
        .status()
        .expect("runs");
    assert_eq!(status.code(), Some(2));
    let text = std::fs::read_to_string(&log).expect("log");
    let (report, rest) = text.split_at(text.find("\n}\n").expect("report end") + 3);
    let report: Value = serde_json::from_str(report).expect("json");
    assert_eq!(report["summary"]["inputErrors"], 1);
    let rest: Vec<&str> = rest.lines().collect();
    assert_eq!(
        rest[0],
        "Error: bad.yaml:5:3: strict decoding error: unknown field \"spec.bogus\": correct or remove it"
    );
    assert!(
        rest[1].starts_with("Summary: 1 document in 1 file checked in "),
        "{text}"
    );
    assert_eq!(rest.len(), 2, "{text}");
}
