//! `nvcre-policy test`: runs the rule test suites (`rules/tests/<pack>/*.yaml`).
//!
//! `property` cases run their generated inputs with proptest (`--cases N`, `--seed N`; a
//! failure shows the shrunk counterexample as YAML). Prints one block per failing case
//! (`FAIL file:line › note` and its diff), then
//! `N passed, M failed`. Exit codes: 0 all passed, 1 a case failed (or, with
//! `--require-tests`, a pack or table has no case), 2 a suite could not be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use nvcre_domain::{
    CaseResult, PropertyOptions, SuiteRunner, coverage, discover_suites, load_suite,
};
use nvcre_engine::RuleSet;
use regex::Regex;

use crate::report;

/// Output format of `test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TestFormat {
    /// Each failing case with its diff, then `N passed, M failed`.
    Text,
    /// JUnit XML.
    Junit,
    /// `{apiVersion, kind: TestReport, tool, results, summary}`.
    Json,
}

/// Arguments of `test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Run only the cases whose name (`file › note`) this regex matches.
    #[arg(long = "run", value_name = "REGEX")]
    run: Option<String>,
    /// Fail when a pack or table of the rule set has no test case.
    #[arg(long = "require-tests")]
    require_tests: bool,
    /// Generated inputs per `property` case (overrides `PROPTEST_CASES` and each case's
    /// `cases`; default 32).
    #[arg(long = "cases", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    cases: Option<u32>,
    /// Seed of the `property` cases' generators (a failure names the seed it ran with).
    #[arg(long = "seed", value_name = "N", default_value_t = nvcre_domain::DEFAULT_SEED)]
    seed: u64,
    /// Output format: text (failing cases and `N passed, M failed`), junit (JUnit XML: a
    /// testsuite per suite file, a testcase per case) or json (a versioned report of every
    /// case).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: TestFormat,
    /// Suite files or directories (recursively, *.yaml). Default: `DIR/tests` with
    /// `--rules DIR`, else `rules/tests` in the current directory.
    #[arg(value_name = "DIR")]
    paths: Vec<PathBuf>,
}

/// Without `--rules`, the suites run against the embedded rules. Suites under a `tests`
/// directory whose parent is a rule set other than the embedded one (an edited copy) are that
/// set's: running them against the embedded rules would pass or fail for the wrong set. The
/// message saying so and what to give, for the first such path.
fn suites_of_another_set(paths: &[PathBuf]) -> Option<String> {
    let embedded = crate::ruleset::RulesInfo::of(None).ok()?;
    paths.iter().find_map(|path| {
        let set = path
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "tests"))?
            .parent()
            .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })?;
        let info = crate::ruleset::RulesInfo::of(Some(set)).ok()?;
        // A rule set: some file of it holds a pack or a table (a project's other YAML is not).
        let rules = info.texts().any(|t| {
            t.lines()
                .any(|l| matches!(l.trim_end(), "kind: RulePack" | "kind: Table"))
        });
        (rules && info.digest() != embedded.digest()).then(|| {
            format!(
                "{} holds suites of the rule set {}, which differs from the embedded rules this run would test: give --rules {} (or NVCRE_RULES) to test that set",
                path.display(),
                set.display(),
                set.display()
            )
        })
    })
}

/// Runs `test`.
pub fn run(rules: &RuleSet, rules_dir: Option<&Path>, args: &TestArgs) -> ExitCode {
    let filter = match args.run.as_deref().map(Regex::new).transpose() {
        Ok(f) => f,
        Err(e) => {
            report::error_line(&format!(
                "invalid --run regex: {e}\n--run takes a regular expression over case names (`file › note`), e.g. --run 'gang' or --run 'labels/.*queue'"
            ));
            return ExitCode::from(2);
        }
    };
    let paths = if args.paths.is_empty() {
        let default = rules_dir
            .map(|d| d.join("tests"))
            .unwrap_or_else(|| PathBuf::from("rules/tests"));
        if !default.is_dir() {
            report::error_line(&format!(
                "no rule test suites: {} is not a directory; name the suites to run",
                default.display()
            ));
            return ExitCode::from(2);
        }
        vec![default]
    } else {
        args.paths.clone()
    };
    if rules_dir.is_none()
        && let Some(message) = suites_of_another_set(&paths)
    {
        return run_errors(args, &[message]);
    }
    let files = match discover_suites(&paths) {
        Ok(f) => f,
        Err(e) => return run_errors(args, &[e.to_string()]),
    };
    let mut suites = Vec::new();
    let mut broken = Vec::new();
    for f in &files {
        match load_suite(f) {
            Ok(s) => suites.push(s),
            Err(errors) => broken.extend(errors.0.iter().map(ToString::to_string)),
        }
    }
    if !broken.is_empty() {
        return run_errors(args, &broken);
    }

    let mut runner = SuiteRunner::new(rules)
        .with_rules_dir(rules_dir)
        .with_property_options(PropertyOptions {
            cases: args.cases,
            seed: args.seed,
        });
    let results: Vec<CaseResult> = suites
        .iter()
        .flat_map(|suite| runner.run_suite(suite, filter.as_ref()))
        .collect();
    // A filter that selects nothing (a typo in CI) must not pass as "0 passed" (unless the run
    // is for coverage alone: `--require-tests --run '^$'`).
    if let (Some(f), true, false) = (filter.as_ref(), results.is_empty(), args.require_tests) {
        report::error_line(&format!(
            "no case matches --run {:?} (in {} suite file{}); case names are `file › note`",
            f.as_str(),
            suites.len(),
            if suites.len() == 1 { "" } else { "s" }
        ));
        return ExitCode::from(2);
    }
    let passed = results.iter().filter(|r| r.passed()).count();
    let failed = results.len() - passed;
    let color = crate::color::stdout();
    let mut out = String::new();
    for result in results.iter().filter(|r| !r.passed()) {
        let report = result.report();
        match report.strip_prefix("FAIL") {
            Some(rest) if color => {
                out.push_str(&crate::color::paint(
                    "FAIL",
                    crate::color::severity("FAIL"),
                    true,
                ));
                out.push_str(rest);
            }
            _ => out.push_str(&report),
        }
    }
    out.push_str(&format!("{passed} passed, {failed} failed\n"));

    // Coverage is reported only on request: a run of one folder is not expected to cover all.
    let mut untested = Vec::new();
    if args.require_tests {
        let cov = coverage(rules, &suites);
        untested = cov.untested();
        let untested_rules: Vec<&str> = cov
            .packs
            .iter()
            .flat_map(|p| p.untested_rules.iter().map(String::as_str))
            .collect();
        if !untested_rules.is_empty() {
            out.push_str(&format!(
                "note: no case names these rules in want_findings: {}\n",
                untested_rules.join(", ")
            ));
        }
        for u in &untested {
            out.push_str(&format!(
                "untested: {u} (no case in its folder or naming its rules)\n"
            ));
        }
    }
    let out = match args.output {
        TestFormat::Text => out,
        TestFormat::Json => json_report(&results, &untested, &[]),
        TestFormat::Junit => junit_report(&results, &untested, &[]),
    };
    write_stdout(&out);
    if !untested.is_empty() {
        report::error_line(&format!(
            "--require-tests: no tests for {}; add cases to the pack's or table's folder of the suites (docs/rules.md, \"Rule tests\")",
            untested.join(", ")
        ));
    }
    if failed > 0 || !untested.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Reports errors that stop `test` before any case runs (a rule set that does not load, a suite
/// file that does not parse): each on stderr, and in the report asked for, so that a CI job
/// reading `-o junit` or `-o json` gets a report that fails, not an empty file. Returns 2.
pub fn run_errors(args: &TestArgs, errors: &[String]) -> ExitCode {
    for e in errors {
        report::error_line(e);
    }
    let out = match args.output {
        TestFormat::Text => String::new(),
        TestFormat::Json => json_report(&[], &[], errors),
        TestFormat::Junit => junit_report(&[], &[], errors),
    };
    write_stdout(&out);
    ExitCode::from(2)
}

/// Writes a report on stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(out: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
}

/// `test -o json`: every case (file, line, note, passed, diff), the untested packs and tables
/// (with `--require-tests`), the errors that stopped the run before any case ran
/// ([`run_errors`]) and the counts.
fn json_report(results: &[CaseResult], untested: &[String], errors: &[String]) -> String {
    let passed = results.iter().filter(|r| r.passed()).count();
    let report = serde_json::json!({
        "apiVersion": report::REPORT_API_VERSION,
        "kind": "TestReport",
        "tool": report::tool_json(),
        "results": results.iter().map(|r| serde_json::json!({
            "file": r.file,
            "line": r.line,
            "note": r.note,
            "passed": r.passed(),
            "diff": r.diff,
        })).collect::<Vec<_>>(),
        "errors": errors.iter().map(|m| serde_json::json!({"message": m})).collect::<Vec<_>>(),
        "untested": untested,
        "summary": {"passed": passed, "failed": results.len() - passed, "errors": errors.len()},
    });
    let mut s = serde_json::to_string_pretty(&report).unwrap_or_default();
    s.push('\n');
    s
}

/// `test -o junit`: a testsuite per suite file (in run order), a testcase per case (its note;
/// classname the file); a failure carries the diff. With `--require-tests`, the untested packs
/// and tables are failing cases of a `require-tests` suite; errors that stopped the run, the
/// erroring cases of an `errors` suite.
fn junit_report(results: &[CaseResult], untested: &[String], errors: &[String]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("nvcre-policy test");
    let mut suites: Vec<TestSuite> = Vec::new();
    for r in results {
        let status = if r.passed() {
            TestCaseStatus::success()
        } else {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message(format!("FAIL {}:{} › {}", r.file, r.line, r.note))
                .set_type("case")
                .set_description(r.diff.join("\n"));
            st
        };
        let mut case = TestCase::new(r.note.as_str(), status);
        case.set_classname(format!("{}:{}", r.file, r.line));
        match suites.last_mut() {
            Some(s) if s.name.as_str() == r.file => {
                s.add_test_case(case);
            }
            _ => {
                let mut s = TestSuite::new(r.file.as_str());
                s.add_test_case(case);
                suites.push(s);
            }
        }
    }
    if !untested.is_empty() {
        let mut s = TestSuite::new("require-tests");
        for u in untested {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message("no test case in its folder or naming its rules")
                .set_type("coverage");
            s.add_test_case(TestCase::new(u.as_str(), st));
        }
        suites.push(s);
    }
    if !errors.is_empty() {
        let mut s = TestSuite::new("errors");
        for (i, e) in errors.iter().enumerate() {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
            st.set_message(e.as_str()).set_type("input");
            s.add_test_case(TestCase::new(format!("error {}", i + 1), st));
        }
        suites.push(s);
    }
    report.add_test_suites(suites);
    report.to_string().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        test: TestArgs,
    }

    fn parse(args: &[&str]) -> Result<TestArgs, String> {
        Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .map(|c| c.test)
            .map_err(|e| e.to_string().lines().next().unwrap_or("").to_string())
    }

    #[test]
    fn cases_and_seed_are_parsed_and_cases_must_be_positive() {
        let a = parse(&["--cases", "500", "--seed", "42", "x"]).expect("parses");
        assert_eq!(
            (a.cases, a.seed, a.paths),
            (Some(500), 42, vec![PathBuf::from("x")])
        );
        let a = parse(&[]).expect("parses");
        assert_eq!((a.cases, a.seed), (None, nvcre_domain::DEFAULT_SEED));
        assert_eq!(
            parse(&["--cases", "0"]).err().as_deref(),
            Some("error: invalid value '0' for '--cases <N>': 0 is not in 1..=4294967295")
        );
    }

    #[test]
    fn a_failing_property_fails_the_run_and_a_holding_one_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let suite = |invariant: &str| {
            format!(
                "cases:\n  - note: p\n    input: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {{name: c}}\n    property:\n      generate: {{n: {{range: {{min: 0, max: 9}}}}}}\n      set: {{data.n: string(gen.n)}}\n      invariant: {invariant}\n"
            )
        };
        let holds = dir.path().join("holds.yaml");
        let fails = dir.path().join("fails.yaml");
        std::fs::write(&holds, suite("input.data.n == string(gen.n)")).expect("write");
        std::fs::write(&fails, suite("gen.n < 5")).expect("write");
        let rules = nvcre_domain::default_rules().expect("rules");
        let args = |p: &Path| TestArgs {
            run: None,
            require_tests: false,
            cases: Some(20),
            seed: 3,
            output: TestFormat::Text,
            paths: vec![p.to_path_buf()],
        };
        assert_eq!(run(&rules, None, &args(&holds)), ExitCode::SUCCESS);
        assert_eq!(run(&rules, None, &args(&fails)), ExitCode::from(1));
    }
}
