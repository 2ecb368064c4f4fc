//! Rule test suites: YAML case folders that pin what the rules under `rules/` do.
//!
//! A suite is a YAML file under `rules/tests/<pack-or-table-name>/` holding a `cases:` list
//! (one folder per pack or table, as regorus lays out its tests). Each case names its input
//! documents, the node context, the rule set and exactly one expectation:
//!
//! ```yaml
//! cases:
//!   - note: a queue longer than 63 characters is refused   # required, unique in the file
//!     input: |                                            # or inputFile: path (relative)
//!       apiVersion: nvcre.nvidia.com/v1alpha1
//!       kind: WorkloadRun
//!       …
//!     context: {platform: aws, gpuArch: h100}             # optional, or {nodesFile: path}
//!     rules: default                                      # optional: default | a directory
//!     mode: check                                         # check (default) | render |
//!                                                         # bandwidth | goodput (+ profile:)
//!     want_findings:                                      # exact list, in order
//!       - {ruleId: wr-gang-queue-length, message: "Too long: may not be more than 63 bytes", line: 9}
//!     want_exit: 1                                        # optional
//! ```
//!
//! The expectation is one of `want_findings` (each `{ruleId, severity?, message? |
//! messageRegex?, fieldPath?, line?, column?}`; omitted fields are not compared; `[]` means no
//! findings), `want_output` (render mode: a subset match, or full equality with
//! `want_output_exact: true`) or `want_error` (a substring of the error); `want_exit` may stand
//! alone. Lines and columns of an inline `input` count from its first line. A `property` case
//! instead generates variants of its input and checks a CEL invariant on each, with proptest
//! underneath ([`Property`], [`PropertyOptions`]; the format is in `property.rs`).
//!
//! [`load_suite`] reads a file (errors carry file:line), [`SuiteRunner::run`] runs a case and
//! returns a [`CaseResult`] with a readable diff, and [`coverage`] tells which packs, tables and
//! rules the suites exercise.
//!
//! Module layout: `format` (the serde-derived file format and its checks: [`load_suite`],
//! [`parse_suite`], [`discover`]), `runner` ([`SuiteRunner`]), `diff` (expected against actual),
//! `property` (`property` cases: generators, invariant, the proptest run) and `coverage`
//! ([`coverage`]).
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use nvcre_domain::{SuiteRunner, default_rules, parse_suite};
//!
//! let suite = parse_suite(Path::new("rules/tests/workloadrun-admission/example.yaml"), r#"
//! cases:
//!   - note: an empty image is refused
//!     input: |
//!       apiVersion: nvcre.nvidia.com/v1alpha1
//!       kind: WorkloadRun
//!       metadata: {name: t}
//!       spec: {image: "", numNodes: 1, framework: {exec: {command: [run]}}}
//!     want_findings:
//!       - {ruleId: wr-image-required, message: "Invalid value: \"\": spec.image in body should be at least 1 chars long", line: 4}
//!     want_exit: 1
//! "#)?;
//! let rules = default_rules()?;
//! let mut runner = SuiteRunner::new(&rules);
//! let result = runner.run(&suite, &suite.cases[0]);
//! assert!(result.passed(), "{}", result.report());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod coverage;
mod diff;
mod format;
mod property;
mod runner;

use std::path::PathBuf;
use std::sync::Arc;

use nvcre_engine::{Finding, Pos, Severity, Source};
use regex::Regex;
use serde_json::Value;

pub use coverage::{Coverage, PackCoverage, TableCoverage, coverage};
pub use format::{discover, load_suite, parse_suite, suite_schema};
pub use property::{
    DEFAULT_CASES, DEFAULT_SEED, Generator, Property, PropertyOptions, table_values,
};
pub use runner::SuiteRunner;

/// Why a suite could not be read. Running a case never fails: its problems are in its
/// [`CaseResult`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// A suite file, an `inputFile` or a directory could not be read.
    #[error(
        "rule test suite error: reading {path}: {}",
        nvcre_engine::limits::io_error_text(source)
    )]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A directory of suites could not be walked (an unreadable entry, a symlink loop).
    #[error("rule test suite error: {0}")]
    Walk(#[source] nvcre_engine::Error),
    /// The suite file is not valid YAML (the engine's message names file, line and column).
    #[error("rule test suite error: {0}")]
    Yaml(#[source] nvcre_engine::Error),
    /// The suite has the wrong shape: an unknown key, a case without a note or an expectation,
    /// a bad value.
    #[error("rule test suite error: {file}{}: {message}", pos.map(|p| format!(":{p}")).unwrap_or_default())]
    Malformed {
        /// The suite file.
        file: String,
        /// Where the offending node is.
        pos: Option<Pos>,
        /// What is wrong.
        message: String,
    },
}

/// Every problem of a suite file, in file order (at least one). `Display` prints one per line.
#[derive(Debug)]
pub struct SuiteErrors(pub Vec<SuiteError>);

impl std::fmt::Display for SuiteErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SuiteErrors {}

impl From<SuiteError> for SuiteErrors {
    fn from(e: SuiteError) -> SuiteErrors {
        SuiteErrors(vec![e])
    }
}

/// One suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The path as given (used in case names).
    pub path: PathBuf,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

impl Suite {
    /// The name of the folder holding the suite: the pack or table it tests.
    pub fn folder(&self) -> Option<&str> {
        self.path.parent()?.file_name()?.to_str()
    }
}

/// One case of a suite.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's `note`, unique in its file.
    pub note: String,
    /// 1-based line of the case in the suite file.
    pub line: usize,
    /// The input text (inline or the `inputFile`).
    pub input: Arc<Source>,
    /// The `inputFile` as written, when the input comes from a file.
    pub input_file: Option<String>,
    /// The node context.
    pub context: CaseContext,
    /// The rule set the case runs with.
    pub rules: CaseRules,
    /// What runs.
    pub mode: Mode,
    /// `bandwidth` / `goodput` mode: the LogProfile name.
    pub profile: Option<String>,
    /// `bandwidth` / `goodput` mode: thresholds judged on the result (key → CEL over `value`).
    pub thresholds: std::collections::BTreeMap<String, String>,
    /// The expectation besides the exit code.
    pub expect: Expectation,
    /// The expected exit code (0 clean, 1 violations, 2 could not run), when given.
    pub want_exit: Option<u8>,
}

/// `context:` of a case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseContext {
    /// `platform`.
    pub platform: Option<String>,
    /// `gpuArch`.
    pub gpu_arch: Option<String>,
    /// `nodesFile`, resolved against the suite's folder: a NodeList or Node documents that
    /// replace `platform` / `gpuArch` as the node context.
    pub nodes_file: Option<PathBuf>,
}

/// `rules:` of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseRules {
    /// The rule set in force (embedded, or `--rules`).
    Default,
    /// Every rule file below this directory (resolved against the suite's folder).
    Dir(PathBuf),
}

/// `mode:` of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Findings of [`check_document`] for every document.
    Check,
    /// The Workflow `render` prints (a Workflow document is resolved for the platform).
    Render,
    /// The BandwidthMeasurement status `measure bandwidth --profile P` prints for the input log.
    Bandwidth,
    /// The GoodputMeasurement status `measure goodput --profile P` prints for the input log.
    Goodput,
}

/// The expectation of a case.
#[derive(Debug, Clone)]
pub enum Expectation {
    /// `want_findings`: the exact list, in order.
    Findings(Vec<WantFinding>),
    /// `want_output`: the rendered document (a list when the input has several documents).
    Output {
        /// The expected value.
        value: Value,
        /// `want_output_exact: true`: full equality instead of a subset match.
        exact: bool,
    },
    /// `want_error`: a substring of the error.
    Error(String),
    /// Only `want_exit`.
    ExitOnly,
    /// `property`: generated variants of the input, each satisfying an invariant.
    Property(Box<Property>),
}

/// One expected finding; fields that are `None` are not compared.
#[derive(Debug, Clone)]
pub struct WantFinding {
    /// `ruleId`.
    pub rule_id: String,
    /// `severity`.
    pub severity: Option<Severity>,
    /// `message` or `messageRegex`.
    pub message: Option<MessageMatch>,
    /// `fieldPath`.
    pub field_path: Option<String>,
    /// `line`.
    pub line: Option<usize>,
    /// `column`.
    pub column: Option<usize>,
}

/// How an expected message is compared.
#[derive(Debug, Clone)]
pub enum MessageMatch {
    /// `message`: equal.
    Exact(String),
    /// `messageRegex`: the regex finds a match (unanchored; use `^…$` to anchor).
    Regex(Regex),
}

impl MessageMatch {
    fn matches(&self, message: &str) -> bool {
        match self {
            MessageMatch::Exact(m) => m == message,
            MessageMatch::Regex(r) => r.is_match(message),
        }
    }
}

/// What running a case produced.
#[derive(Debug, Clone, Default)]
pub struct CaseOutcome {
    /// Findings (check mode: all of them; render mode: those of a rejection).
    pub findings: Vec<Finding>,
    /// The rendered document(s) (render mode, success only); the measurement status
    /// (bandwidth, goodput modes).
    pub output: Option<Value>,
    /// The error text: the error (exit 2), in render mode the messages of a rejection, in the
    /// measurement modes the violated thresholds' messages (exit 1).
    pub error: Option<String>,
    /// The exit code the CLI would give.
    pub exit: u8,
}

/// The result of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The suite file.
    pub file: String,
    /// The case's note.
    pub note: String,
    /// Line of the case in the suite file.
    pub line: usize,
    /// What the case produced.
    pub outcome: CaseOutcome,
    /// Empty when the case passed; else the readable differences, one per line.
    pub diff: Vec<String>,
}

impl CaseResult {
    /// True when the case passed.
    pub fn passed(&self) -> bool {
        self.diff.is_empty()
    }

    /// `file › note`.
    pub fn name(&self) -> String {
        format!("{} › {}", self.file, self.note)
    }

    /// `FAIL file:line › note`, then the diff indented, one line each.
    pub fn report(&self) -> String {
        let mut s = format!("FAIL {}:{} › {}\n", self.file, self.line, self.note);
        for l in &self.diff {
            s.push_str("    ");
            s.push_str(l);
            s.push('\n');
        }
        s
    }
}
