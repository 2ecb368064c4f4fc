//! Running a case: the node context and rule set it names, then what `check` or `render` would
//! do with its input, as a [`CaseOutcome`] (findings, output, error, exit code), compared with
//! the case's expectation into a [`CaseResult`].

use std::collections::HashMap;
use std::path::PathBuf;

use std::sync::Arc;

use nvcre_engine::{Document, RuleSet, Severity, Source, parse_documents};
use regex::Regex;
use serde_json::Value;

use super::diff::compare;
use super::{
    Case, CaseContext, CaseOutcome, CaseResult, CaseRules, Expectation, Mode, Property,
    PropertyOptions, Suite,
};
use crate::check::{CheckRequest, input_objects};
use crate::error::PolicyError;
use crate::render::{RenderRequest, render_document};

/// Runs cases against a default rule set, loading (and caching) the rule directories cases name.
#[derive(Debug)]
pub struct SuiteRunner<'a> {
    default_rules: &'a RuleSet,
    /// Where `default_rules` came from (`--rules`), for the commands printed to replay a case.
    default_dir: Option<PathBuf>,
    loaded: HashMap<PathBuf, Result<RuleSet, String>>,
    properties: PropertyOptions,
}

impl<'a> SuiteRunner<'a> {
    /// A runner whose `rules: default` is `default_rules`.
    pub fn new(default_rules: &'a RuleSet) -> SuiteRunner<'a> {
        SuiteRunner {
            default_rules,
            default_dir: None,
            loaded: HashMap::new(),
            properties: PropertyOptions::default(),
        }
    }

    /// Runs `property` cases with these case counts and seed (default: [`PropertyOptions::default`]).
    pub fn with_property_options(mut self, options: PropertyOptions) -> SuiteRunner<'a> {
        self.properties = options;
        self
    }

    /// Names the directory the default rules were read from (`--rules DIR`), so that the
    /// command printed to replay a property's counterexample uses the same rules.
    pub fn with_rules_dir(mut self, dir: Option<&std::path::Path>) -> SuiteRunner<'a> {
        self.default_dir = dir.map(std::path::Path::to_path_buf);
        self
    }

    /// Runs every case of `suite` whose name (`file › note`) `filter` matches (all without one).
    pub fn run_suite(&mut self, suite: &Suite, filter: Option<&Regex>) -> Vec<CaseResult> {
        let file = suite.path.display().to_string();
        suite
            .cases
            .iter()
            .filter(|c| filter.is_none_or(|re| re.is_match(&format!("{file} › {}", c.note))))
            .map(|c| self.run(suite, c))
            .collect()
    }

    /// Runs one case and compares what happened with what it wants.
    pub fn run(&mut self, suite: &Suite, case: &Case) -> CaseResult {
        let (outcome, diff) = match &case.expect {
            Expectation::Property(p) => self.property(case, p),
            _ => {
                let outcome = self.outcome(case);
                let mut diff = compare(case, &outcome);
                if !diff.is_empty() {
                    diff.extend(self.unknown_rule_ids(case));
                }
                (outcome, diff)
            }
        };
        CaseResult {
            file: suite.path.display().to_string(),
            note: case.note.clone(),
            line: case.line,
            outcome,
            diff,
        }
    }

    /// A line for each `ruleId` of the case's `want_findings` that no rule of its set and no
    /// built-in rule has: a failing case's expectation that can never be met (a typo).
    fn unknown_rule_ids(&mut self, case: &Case) -> Vec<String> {
        let Expectation::Findings(want) = &case.expect else {
            return Vec::new();
        };
        let Ok(rules) = self.rules(&case.rules) else {
            return Vec::new();
        };
        let mut seen: Vec<&str> = Vec::new();
        for w in want {
            let id = w.rule_id.as_str();
            if seen.contains(&id) || rules.rule(id).is_some() || crate::built_in_rule(id).is_some()
            {
                continue;
            }
            seen.push(id);
        }
        seen.into_iter()
            .map(|id| {
                format!(
                    "no rule has id {}: a rule of the set or a built-in one is expected",
                    crate::detect::quote(id)
                )
            })
            .collect()
    }

    fn rules(&mut self, which: &CaseRules) -> Result<&RuleSet, String> {
        match which {
            CaseRules::Default => Ok(self.default_rules),
            CaseRules::Dir(dir) => self
                .loaded
                .entry(dir.clone())
                // As `--rules DIR` loads it: checked against the pipeline contract.
                .or_insert_with(|| crate::packs::load_rules(Some(dir)).map_err(|e| e.to_string()))
                .as_ref()
                .map_err(Clone::clone),
        }
    }

    /// Runs a `property` case: every generated variant of its one input document, in its mode.
    fn property(&mut self, case: &Case, property: &Property) -> (CaseOutcome, Vec<String>) {
        let options = self.properties;
        let failed = |error: String| {
            let diff = vec![format!("property could not run: {error}")];
            (
                CaseOutcome {
                    error: Some(error),
                    exit: 2,
                    ..CaseOutcome::default()
                },
                diff,
            )
        };
        let nodes = match &case.context.nodes_file {
            None => None,
            Some(path) => match crate::read_nodes(&path.display().to_string()) {
                Ok(n) => Some(n),
                Err(e) => return failed(e.message),
            },
        };
        let base = match parse_documents(&case.input) {
            Ok(d) if d.len() == 1 => d[0].value.clone(),
            Ok(d) => {
                return failed(format!(
                    "a property varies exactly one input document, not {}",
                    d.len()
                ));
            }
            Err(e) => return failed(e.to_string()),
        };
        // The replay command reads the rules the case ran with.
        let dir = match &case.rules {
            CaseRules::Default => self.default_dir.clone(),
            CaseRules::Dir(d) => Some(d.clone()),
        };
        let rules = match self.rules(&case.rules) {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let mode = case.mode;
        let mut run_variant = |source: &Arc<Source>, ctx: &CaseContext| -> CaseOutcome {
            let docs = match parse_documents(source) {
                Ok(d) => d,
                Err(e) => {
                    return CaseOutcome {
                        error: Some(e.to_string()),
                        exit: 2,
                        ..CaseOutcome::default()
                    };
                }
            };
            match mode {
                Mode::Render => run_render(rules, &docs, ctx, nodes.clone()),
                // Properties run `check` or `render` (the suite format refuses others).
                _ => run_check(rules, &docs, ctx, nodes.clone()),
            }
        };
        let verb = match mode {
            Mode::Render => "render",
            _ => "check",
        };
        let verb = match dir {
            Some(d) => {
                let d = d.display().to_string();
                let plain = d
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'));
                let d = if plain {
                    d
                } else {
                    crate::build::shell_quote(&d)
                };
                format!("--rules {d} {verb}")
            }
            None => verb.to_string(),
        };
        super::property::run(
            property,
            &options,
            rules,
            &base,
            &case.context,
            &case.input.name,
            &verb,
            &mut run_variant,
        )
    }

    fn outcome(&mut self, case: &Case) -> CaseOutcome {
        let failed = |error: String| CaseOutcome {
            error: Some(error),
            exit: 2,
            ..CaseOutcome::default()
        };
        let nodes = match &case.context.nodes_file {
            None => None,
            Some(path) => match crate::read_nodes(&path.display().to_string()) {
                Ok(n) => Some(n),
                Err(e) => return failed(e.message),
            },
        };
        let rules = match self.rules(&case.rules) {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        if matches!(case.mode, Mode::Bandwidth | Mode::Goodput) {
            return run_measure(rules, case);
        }
        let docs = match parse_documents(&case.input) {
            Ok(d) => d,
            Err(e) => return failed(e.to_string()),
        };
        match case.mode {
            Mode::Render => run_render(rules, &docs, &case.context, nodes),
            _ => run_check(rules, &docs, &case.context, nodes),
        }
    }
}

fn run_check(
    rules: &RuleSet,
    docs: &[Document],
    ctx: &CaseContext,
    nodes: Option<Vec<crate::nodes::Node>>,
) -> CaseOutcome {
    let req = CheckRequest {
        platform: ctx.platform.clone(),
        gpu_arch: ctx.gpu_arch.clone(),
        nodes: nodes.map(std::sync::Arc::new),
    };
    let mut out = CaseOutcome::default();
    // The case's documents are one input, as a file's documents are to `check`.
    let objects = input_objects(docs.iter().map(|d| &d.value));
    for doc in docs {
        // What `check` reports, the YAML readings of the values included.
        let line = |l: usize| doc.source.line_text(l).map(str::to_string);
        match crate::check::check_document_as_reported(rules, doc, &req, Some(&objects), &line) {
            Ok(f) => out.findings.extend(f),
            Err(e) => {
                // The findings made before the error are reported beside it.
                let (e, findings, _) = e.into_parts();
                out.findings.extend(findings);
                out.error = Some(e.to_string());
                out.exit = 2;
                return out;
            }
        }
    }
    // As `check` exits: a rule that could not be evaluated is 2, a violation 1.
    if out.findings.iter().any(|f| f.rule_error) {
        out.exit = 2;
    } else if out.findings.iter().any(|f| f.severity == Severity::Error) {
        out.exit = 1;
    }
    out
}

/// A bandwidth or goodput case: the input is a log, read line by line with the case's
/// LogProfile as `nvcre-policy measure` reads it; the output is the measurement status, its
/// thresholds are judged on it (a violation: exit 1, the messages as the error).
fn run_measure(rules: &RuleSet, case: &Case) -> CaseOutcome {
    use crate::measure::{
        BandwidthParser, GoodputParser, LogProfiles, Measured, Source as MeasureSource, Thresholds,
        for_each_line, measured_value,
    };
    let failed = |error: String| CaseOutcome {
        error: Some(error),
        exit: 2,
        ..CaseOutcome::default()
    };
    let profiles = match LogProfiles::from_rules(rules) {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let name = case.profile.as_deref().unwrap_or_default();
    let profile = match profiles.get(name) {
        Ok(p) => p,
        Err(e) => return failed(e),
    };
    let thresholds = match Thresholds::compile(&case.thresholds) {
        Ok(t) => t,
        Err(errors) => return failed(errors.join("\n")),
    };
    let text = case.input.text.as_bytes();
    // As `measure`: rows past the kept message sizes fail the thresholds closed.
    let mut unmeasured = 0;
    let (measured, source) = if case.mode == Mode::Bandwidth {
        let mut p = match BandwidthParser::new(profile) {
            Ok(p) => p,
            Err(e) => return failed(e),
        };
        if let Err(e) = for_each_line(text, |l| p.feed(l)) {
            return failed(e.to_string());
        }
        unmeasured = p.dropped_rows();
        (Measured::Bandwidth(p.status()), MeasureSource::Bandwidth)
    } else {
        let mut p = match GoodputParser::new(profile) {
            Ok(p) => p,
            Err(e) => return failed(e),
        };
        if let Err(e) = for_each_line(text, |l| p.feed(l)) {
            return failed(e.to_string());
        }
        (
            Measured::Goodput(Box::new(p.status())),
            MeasureSource::Goodput,
        )
    };
    let mut results = thresholds.evaluate(source, |k| measured_value(&measured, k));
    crate::measure::fail_unmeasured(&mut results, unmeasured);
    let output = match &measured {
        Measured::Bandwidth(s) => serde_json::to_value(s),
        Measured::Goodput(s) => serde_json::to_value(s),
    };
    let mut out = CaseOutcome {
        output: output.ok(),
        ..CaseOutcome::default()
    };
    let violations: Vec<&str> = results
        .iter()
        .filter(|r| !r.passed)
        .filter_map(|r| r.message.as_deref())
        .collect();
    if !violations.is_empty() {
        out.error = Some(violations.join("\n"));
        // As `measure` exits: a threshold that cannot be evaluated is an error of the
        // thresholds (2), not a measurement that missed them (1).
        out.exit = crate::measure::exit_code(&results);
    }
    out
}

fn run_render(
    rules: &RuleSet,
    docs: &[Document],
    ctx: &CaseContext,
    nodes: Option<Vec<crate::nodes::Node>>,
) -> CaseOutcome {
    let req = RenderRequest {
        platform: ctx.platform.clone(),
        gpu_arch: ctx.gpu_arch.clone(),
        allow_unknown_arch: false,
        admitted: false,
        report_all: false,
        nodes: nodes.map(std::sync::Arc::new),
        findings_only: false,
    };
    let mut out = CaseOutcome::default();
    let mut rendered = Vec::new();
    for doc in docs {
        match render_document(rules, doc, &req) {
            // A successful render's warnings and info (what `render` prints on stderr) are
            // the case's findings: `want_findings` pins them, and `[]` means there are none.
            Ok(r) => {
                out.findings.extend(r.findings);
                rendered.push(r.workflow);
            }
            Err(PolicyError::Rejected(findings)) => {
                out.error = Some(
                    findings
                        .iter()
                        .filter(|f| f.severity == nvcre_engine::Severity::Error)
                        .map(|f| f.message.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
                // As `render` exits: 2 when a rule could not be evaluated, else 1.
                out.exit = if findings.iter().any(|f| f.rule_error) {
                    2
                } else {
                    1
                };
                out.findings = findings;
                return out;
            }
            Err(e) => {
                // What the render noted before the error is the case's findings.
                let (e, findings, _) = e.into_parts();
                out.findings = findings;
                out.error = Some(e.to_string());
                out.exit = 2;
                return out;
            }
        }
    }
    out.output = Some(if rendered.len() == 1 {
        rendered.pop().unwrap_or(Value::Null)
    } else {
        Value::Array(rendered)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::format::tests::RUN;
    use crate::suite::parse_suite;
    use std::path::Path;

    fn run_one(case: &str) -> CaseResult {
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}{case}");
        let suite = parse_suite(Path::new("t.yaml"), &text).expect("parses");
        let rules = crate::packs::default_rules().expect("rules");
        let mut runner = SuiteRunner::new(&rules);
        runner.run(&suite, &suite.cases[0])
    }

    /// Runs a case of the test input against a rule directory holding one pack (`body` after
    /// its header), expecting exit `want_exit`: the result and the pack file's path.
    fn run_with_pack(body: &str, want_exit: u8) -> (CaseResult, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let pack = dir.path().join("p.yaml");
        std::fs::write(
            &pack,
            format!("apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {{name: p}}\n{body}"),
        )
        .expect("write");
        let text = format!(
            "cases:\n  - note: n\n    rules: {}\n    input: |\n{RUN}    want_exit: {want_exit}\n",
            dir.path().display()
        );
        let suite = parse_suite(Path::new("t.yaml"), &text).expect("parses");
        let rules = crate::packs::default_rules().expect("rules");
        let r = SuiteRunner::new(&rules).run(&suite, &suite.cases[0]);
        (r, pack.display().to_string())
    }

    #[test]
    fn a_rule_directory_is_loaded_with_the_pipeline_contract() {
        let (r, pack) = run_with_pack(
            "stage: admision\nrules:\n- id: r\n  validate: {expression: 'true'}\n",
            0,
        );
        assert_eq!(
            r.outcome.error,
            Some(format!(
                "rule pack error: {pack}:4:8: unknown stage \"admision\"; known stages: admission, workload-labels, placement, gang-contract, manifests, lint"
            ))
        );
    }

    /// A rule that cannot be evaluated exits 2, as `check` exits (it was 1, a violation).
    #[test]
    fn a_rule_error_exits_2_as_check_does() {
        let (r, _) = run_with_pack(
            "stage: admission\nmatch:\n  resources: [{apiVersion: nvcre.nvidia.com/v1alpha1, kind: WorkloadRun}]\nrules:\n- id: r\n  validate: {expression: '1 / (object.spec.numNodes - 1) > 0', message: m}\n",
            2,
        );
        assert!(r.passed(), "{}", r.report());
        assert!(r.outcome.findings[0].rule_error);
    }

    #[test]
    fn a_clean_run_passes_and_a_wrong_expectation_fails_with_a_diff() {
        assert!(run_one("    want_findings: []\n    want_exit: 0\n").passed());
        let r = run_one("    want_findings: [{ruleId: wr-image-required}]\n");
        assert!(!r.passed());
        assert_eq!(r.name(), "t.yaml › n");
        assert_eq!(
            r.diff,
            vec![
                "findings differ (expected 1, got 0):".to_string(),
                "  [0] missing:".to_string(),
                "      expected: {ruleId: wr-image-required}".to_string(),
            ]
        );
        let r = run_one("    want_exit: 1\n");
        assert_eq!(r.diff, vec!["exit code: expected 1, got 0".to_string()]);
    }

    #[test]
    fn an_expected_rule_id_no_rule_has_is_named() {
        // A typo in `ruleId` can never be met: the diff says so (a built-in id is known).
        let r = run_one(
            "    want_findings: [{ruleId: wr-image-requried}, {ruleId: yaml-quote-it}, {ruleId: wr-image-requried}]\n",
        );
        assert_eq!(
            r.diff,
            vec![
                "findings differ (expected 3, got 0):".to_string(),
                "  [0] missing:".to_string(),
                "      expected: {ruleId: wr-image-requried}".to_string(),
                "  [1] missing:".to_string(),
                "      expected: {ruleId: yaml-quote-it}".to_string(),
                "  [2] missing:".to_string(),
                "      expected: {ruleId: wr-image-requried}".to_string(),
                "no rule has id \"wr-image-requried\": a rule of the set or a built-in one is expected"
                    .to_string(),
            ]
        );
    }
}
