//! Rule test suites: YAML case folders that pin what the rules under `rules/` do.
//!
//! A suite is a YAML file under `rules/tests/<pack-or-table-name>/` holding a `cases:` list
//! (the regorus layout, STYLE.md §3.4 and rule 13). Each case names its input documents, the
//! node context, the rule set and exactly one expectation:
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
//!     mode: check                                         # check (default) | render
//!     want_findings:                                      # exact list, in order
//!       - {ruleId: wr-gang-queue-length, message: "Too long: may not be more than 63 bytes", line: 9}
//!     want_exit: 1                                        # optional
//! ```
//!
//! The expectation is one of `want_findings` (each `{ruleId, severity?, message? |
//! messageRegex?, fieldPath?, line?, column?}`; omitted fields are not compared; `[]` means no
//! findings), `want_output` (render mode: a subset match, or full equality with
//! `want_output_exact: true`) or `want_error` (a substring of the error); `want_exit` may stand
//! alone. Lines and columns of an inline `input` count from its first line.
//!
//! [`load_suite`] reads a file (errors carry file:line), [`SuiteRunner::run`] runs a case and
//! returns a [`CaseResult`] with a readable diff, and [`coverage`] tells which packs, tables and
//! rules the suites exercise.
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use nvcre_domain::packs::default_rules;
//! use nvcre_domain::suite::{SuiteRunner, parse_suite};
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
//!       - {ruleId: wr-image-required, message: "spec.image in body should be at least 1 chars long", line: 4}
//!     want_exit: 1
//! "#)?;
//! let rules = default_rules()?;
//! let mut runner = SuiteRunner::new(&rules);
//! let result = runner.run(&suite, &suite.cases[0]);
//! assert!(result.passed(), "{}", result.report());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvcre_engine::{Document, FieldPath, Finding, Pos, RuleSet, Severity, Source, parse_documents};
use regex::Regex;
use serde_json::{Map, Value};

use crate::check::{CheckRequest, check_document};
use crate::error::PolicyError;
use crate::render::{RenderRequest, render_workflow, render_workload_run};

const CASE_KEYS: &[&str] = &[
    "note",
    "input",
    "inputFile",
    "context",
    "rules",
    "mode",
    "want_findings",
    "want_output",
    "want_output_exact",
    "want_error",
    "want_exit",
];
const CONTEXT_KEYS: &[&str] = &["platform", "gpuArch", "nodesFile"];
const FINDING_KEYS: &[&str] = &[
    "ruleId",
    "severity",
    "message",
    "messageRegex",
    "fieldPath",
    "line",
    "column",
];

/// Why a suite could not be read. Running a case never fails: its problems are in its
/// [`CaseResult`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuiteError {
    /// A suite file, an `inputFile` or a directory could not be read.
    #[error("rule test suite error: reading {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
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
    /// The node context.
    pub context: CaseContext,
    /// The rule set the case runs with.
    pub rules: CaseRules,
    /// What runs.
    pub mode: Mode,
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
    /// The rendered document(s) (render mode, success only).
    pub output: Option<Value>,
    /// The error text: the error (exit 2), or in render mode the messages of a rejection.
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

// ---------------------------------------------------------------------------------------------
// Loading

/// Suite files among `paths`: files as given, directories recursively (`*.yaml`, `*.yml`), in
/// path order.
///
/// # Errors
/// [`SuiteError::Io`] for a path that does not exist or a directory that cannot be read.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, SuiteError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            found.sort();
            out.extend(found);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(SuiteError::Io {
                path: p.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file or directory",
                ),
            });
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), SuiteError> {
    let io = |source| SuiteError::Io {
        path: dir.display().to_string(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            // `data/` folders hold inputs that cases name (`inputFile`, `nodesFile`).
            if path.file_name().is_some_and(|n| n == "data") {
                continue;
            }
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads and checks one suite file.
///
/// # Errors
/// [`SuiteError`] naming the file and line of the first problem.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteError> {
    let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_suite(path, &text)
}

/// Parses suite text; `path` names the file and anchors relative paths.
///
/// # Errors
/// [`SuiteError`] naming the file and line of the first problem.
pub fn parse_suite(path: &Path, text: &str) -> Result<Suite, SuiteError> {
    let source = Source::new(path.display().to_string(), text);
    let docs = parse_documents(&source).map_err(SuiteError::Yaml)?;
    let mut docs = docs.into_iter();
    let (Some(doc), None) = (docs.next(), docs.next()) else {
        return Err(SuiteError::Malformed {
            file: source.name.clone(),
            pos: None,
            message: "a suite file is one YAML document with a `cases:` list".into(),
        });
    };
    let r = Reader {
        doc: &doc,
        dir: path.parent().unwrap_or(Path::new("")),
    };
    let root = FieldPath::root();
    let top = r.object(&root, &doc.value)?;
    r.keys(&root, top, &["cases"])?;
    let cases_path = root.key("cases");
    let Some(Value::Array(items)) = top.get("cases") else {
        return Err(r.err(&cases_path, "`cases` must be a list of cases"));
    };
    let mut cases = Vec::new();
    let mut notes: HashSet<String> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = cases_path.clone().index(i);
        let case = r.case(&at, item)?;
        if !notes.insert(case.note.clone()) {
            return Err(r.err(
                &at.key("note"),
                &format!(
                    "duplicate note {:?} (notes are unique in a file)",
                    case.note
                ),
            ));
        }
        cases.push(case);
    }
    Ok(Suite {
        path: path.to_path_buf(),
        cases,
    })
}

/// Reads a suite document, reporting problems at their line.
struct Reader<'a> {
    doc: &'a Document,
    dir: &'a Path,
}

impl Reader<'_> {
    fn err(&self, at: &FieldPath, message: &str) -> SuiteError {
        SuiteError::Malformed {
            file: self.doc.source.name.clone(),
            pos: self.doc.spans.lookup_key(at),
            message: if at.segments().is_empty() {
                message.to_string()
            } else {
                format!("{at}: {message}")
            },
        }
    }

    fn object<'v>(
        &self,
        at: &FieldPath,
        v: &'v Value,
    ) -> Result<&'v Map<String, Value>, SuiteError> {
        v.as_object()
            .ok_or_else(|| self.err(at, "must be a mapping"))
    }

    fn keys(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
        allowed: &[&str],
    ) -> Result<(), SuiteError> {
        match m.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.err(
                &at.clone().key(k.clone()),
                &format!(
                    "unknown key {k:?} (expected one of: {})",
                    allowed.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    fn string(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<String>, SuiteError> {
        match m.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(&at.clone().key(key), "must be a string")),
        }
    }

    fn number(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
        key: &str,
    ) -> Result<Option<usize>, SuiteError> {
        match m.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.err(&at.clone().key(key), "must be a non-negative integer")),
        }
    }

    fn case(&self, at: &FieldPath, v: &Value) -> Result<Case, SuiteError> {
        let m = self.object(at, v)?;
        self.keys(at, m, CASE_KEYS)?;
        let line = self.doc.spans.lookup(at).map(|p| p.line).unwrap_or(0);
        let note = match self.string(at, m, "note")? {
            Some(n) if !n.trim().is_empty() => n,
            Some(_) => return Err(self.err(&at.clone().key("note"), "must not be empty")),
            None => return Err(self.err(at, "a case needs a `note`")),
        };
        let input = self.input(at, m, &note)?;
        let context = self.context(at, m)?;
        let rules = match self.string(at, m, "rules")?.as_deref() {
            None | Some("default") => CaseRules::Default,
            Some(dir) => CaseRules::Dir(self.dir.join(dir)),
        };
        let mode = match self.string(at, m, "mode")?.as_deref() {
            None | Some("check") => Mode::Check,
            Some("render") => Mode::Render,
            Some(other) => {
                return Err(self.err(
                    &at.clone().key("mode"),
                    &format!("unknown mode {other:?} (check or render)"),
                ));
            }
        };
        let want_exit = match self.number(at, m, "want_exit")? {
            None => None,
            Some(n @ 0..=2) => u8::try_from(n).ok(),
            Some(_) => return Err(self.err(&at.clone().key("want_exit"), "must be 0, 1 or 2")),
        };
        let expect = self.expectation(at, m, &note, mode, want_exit.is_some())?;
        Ok(Case {
            note,
            line,
            input,
            context,
            rules,
            mode,
            expect,
            want_exit,
        })
    }

    /// `input` (inline text) or `inputFile` (read now, relative to the suite).
    fn input(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
        note: &str,
    ) -> Result<Arc<Source>, SuiteError> {
        match (
            self.string(at, m, "input")?,
            self.string(at, m, "inputFile")?,
        ) {
            (Some(text), None) => Ok(Source::new(
                format!("{} › {note}", self.doc.source.name),
                text,
            )),
            (None, Some(file)) => {
                let path = self.dir.join(&file);
                let text = std::fs::read_to_string(&path).map_err(|source| SuiteError::Io {
                    path: path.display().to_string(),
                    source,
                })?;
                Ok(Source::new(path.display().to_string(), text))
            }
            (Some(_), Some(_)) => Err(self.err(at, "give `input` or `inputFile`, not both")),
            (None, None) => Err(self.err(at, "a case needs `input` or `inputFile`")),
        }
    }

    /// `context`: platform, GPU architecture, nodes file.
    fn context(&self, at: &FieldPath, m: &Map<String, Value>) -> Result<CaseContext, SuiteError> {
        Ok(match m.get("context") {
            None => CaseContext::default(),
            Some(c) => {
                let cat = at.clone().key("context");
                let cm = self.object(&cat, c)?;
                self.keys(&cat, cm, CONTEXT_KEYS)?;
                CaseContext {
                    platform: self.string(&cat, cm, "platform")?,
                    gpu_arch: self.string(&cat, cm, "gpuArch")?,
                    nodes_file: self
                        .string(&cat, cm, "nodesFile")?
                        .map(|f| self.dir.join(f)),
                }
            }
        })
    }

    /// Exactly one of want_findings / want_output / want_error, or want_exit alone.
    fn expectation(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
        note: &str,
        mode: Mode,
        has_exit: bool,
    ) -> Result<Expectation, SuiteError> {
        let given: Vec<&str> = ["want_findings", "want_output", "want_error"]
            .into_iter()
            .filter(|k| m.contains_key(*k))
            .collect();
        if given.len() > 1 {
            return Err(self.err(
                at,
                &format!("give one expectation, not {}", given.join(" and ")),
            ));
        }
        if m.contains_key("want_output_exact") && !m.contains_key("want_output") {
            return Err(self.err(
                &at.clone().key("want_output_exact"),
                "only goes with want_output",
            ));
        }
        Ok(match given.first().copied() {
            Some("want_findings") => Expectation::Findings(self.want_findings(at, m)?),
            Some("want_output") => {
                if mode != Mode::Render {
                    return Err(self.err(
                        &at.clone().key("want_output"),
                        "want_output needs `mode: render`",
                    ));
                }
                let exact = match m.get("want_output_exact") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(self.err(
                            &at.clone().key("want_output_exact"),
                            "must be true or false",
                        ));
                    }
                };
                Expectation::Output {
                    value: m.get("want_output").cloned().unwrap_or(Value::Null),
                    exact,
                }
            }
            Some(_) => Expectation::Error(self.string(at, m, "want_error")?.unwrap_or_default()),
            None if has_exit => Expectation::ExitOnly,
            None => {
                return Err(self.err(
                    at,
                    &format!(
                        "case {note:?} has no expectation: give want_findings, want_output, want_error or want_exit"
                    ),
                ));
            }
        })
    }

    fn want_findings(
        &self,
        at: &FieldPath,
        m: &Map<String, Value>,
    ) -> Result<Vec<WantFinding>, SuiteError> {
        let lat = at.clone().key("want_findings");
        let Some(Value::Array(items)) = m.get("want_findings") else {
            return Err(self.err(&lat, "must be a list (`[]` for no findings)"));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let fat = lat.clone().index(i);
            let fm = self.object(&fat, item)?;
            self.keys(&fat, fm, FINDING_KEYS)?;
            let Some(rule_id) = self.string(&fat, fm, "ruleId")? else {
                return Err(self.err(&fat, "an expected finding needs a `ruleId`"));
            };
            let severity = match self.string(&fat, fm, "severity")?.as_deref() {
                None => None,
                Some("error") => Some(Severity::Error),
                Some("warning") => Some(Severity::Warning),
                Some("info") => Some(Severity::Info),
                Some(other) => {
                    return Err(self.err(
                        &fat.clone().key("severity"),
                        &format!("unknown severity {other:?} (error, warning or info)"),
                    ));
                }
            };
            let message = match (
                self.string(&fat, fm, "message")?,
                self.string(&fat, fm, "messageRegex")?,
            ) {
                (Some(_), Some(_)) => {
                    return Err(self.err(&fat, "give `message` or `messageRegex`, not both"));
                }
                (Some(text), None) => Some(MessageMatch::Exact(text)),
                (None, Some(re)) => Some(MessageMatch::Regex(Regex::new(&re).map_err(|e| {
                    self.err(
                        &fat.clone().key("messageRegex"),
                        &format!("invalid regex: {e}"),
                    )
                })?)),
                (None, None) => None,
            };
            // Compared in the engine's notation: `labels["team"]` and `labels.team` are one path.
            let field_path = match self.string(&fat, fm, "fieldPath")? {
                None => None,
                Some(p) => Some(
                    FieldPath::parse(&p)
                        .map_err(|e| self.err(&fat.clone().key("fieldPath"), &e))?
                        .to_string(),
                ),
            };
            out.push(WantFinding {
                rule_id,
                severity,
                message,
                field_path,
                line: self.number(&fat, fm, "line")?,
                column: self.number(&fat, fm, "column")?,
            });
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Running

/// Runs cases against a default rule set, loading (and caching) the rule directories cases name.
#[derive(Debug)]
pub struct SuiteRunner<'a> {
    default_rules: &'a RuleSet,
    loaded: HashMap<PathBuf, Result<RuleSet, String>>,
}

impl<'a> SuiteRunner<'a> {
    /// A runner whose `rules: default` is `default_rules`.
    pub fn new(default_rules: &'a RuleSet) -> SuiteRunner<'a> {
        SuiteRunner {
            default_rules,
            loaded: HashMap::new(),
        }
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
        let outcome = self.outcome(case);
        let diff = compare(case, &outcome);
        CaseResult {
            file: suite.path.display().to_string(),
            note: case.note.clone(),
            line: case.line,
            outcome,
            diff,
        }
    }

    fn rules(&mut self, which: &CaseRules) -> Result<&RuleSet, String> {
        match which {
            CaseRules::Default => Ok(self.default_rules),
            CaseRules::Dir(dir) => self
                .loaded
                .entry(dir.clone())
                .or_insert_with(|| RuleSet::load_dir(dir).map_err(|e| e.to_string()))
                .as_ref()
                .map_err(Clone::clone),
        }
    }

    fn outcome(&mut self, case: &Case) -> CaseOutcome {
        let failed = |error: String| CaseOutcome {
            error: Some(error),
            exit: 2,
            ..CaseOutcome::default()
        };
        let nodes = match &case.context.nodes_file {
            None => None,
            Some(path) => match read_nodes(path) {
                Ok(n) => Some(n),
                Err(e) => return failed(e),
            },
        };
        let rules = match self.rules(&case.rules) {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let docs = match parse_documents(&case.input) {
            Ok(d) => d,
            Err(e) => return failed(e.to_string()),
        };
        match case.mode {
            Mode::Check => run_check(rules, &docs, &case.context, nodes),
            Mode::Render => run_render(rules, &docs, &case.context, nodes),
        }
    }
}

/// Reads a nodes file (a NodeList and/or Node documents).
fn read_nodes(path: &std::path::Path) -> Result<Vec<crate::nodes::Node>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let docs = parse_documents(&nvcre_engine::Source::new(path.display().to_string(), text))
        .map_err(|e| e.to_string())?;
    let values: Vec<Value> = docs.into_iter().map(|d| d.value).collect();
    crate::nodes::nodes_from_documents(&values).map_err(|e| format!("{}: {e}", path.display()))
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
    for doc in docs {
        match check_document(rules, doc, &req) {
            Ok(f) => out.findings.extend(f),
            Err(e) => {
                out.error = Some(e.to_string());
                out.exit = 2;
                return out;
            }
        }
    }
    if out.findings.iter().any(|f| f.severity == Severity::Error) {
        out.exit = 1;
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
    };
    let mut out = CaseOutcome::default();
    let mut rendered = Vec::new();
    for doc in docs {
        let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
        let result = if kind == "Workflow" {
            render_workflow(rules, doc, &req)
        } else {
            render_workload_run(rules, doc, &req)
        };
        match result {
            Ok(r) => rendered.push(r.workflow),
            Err(PolicyError::Rejected(findings)) => {
                out.error = Some(
                    findings
                        .iter()
                        .map(|f| f.message.as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
                out.findings = findings;
                out.exit = 1;
                return out;
            }
            Err(e) => {
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

// ---------------------------------------------------------------------------------------------
// Comparing

fn compare(case: &Case, got: &CaseOutcome) -> Vec<String> {
    let mut diff = Vec::new();
    match &case.expect {
        Expectation::Findings(want) => {
            if got.exit == 2 {
                diff.push("expected findings, but the case could not run:".into());
                diff.push(format!("  error: {}", got.error.as_deref().unwrap_or("")));
            } else {
                diff_findings(want, &got.findings, &mut diff);
            }
        }
        Expectation::Output { value, exact } => match &got.output {
            Some(output) => {
                let mut lines = Vec::new();
                diff_value(&FieldPath::root(), value, output, *exact, &mut lines);
                if !lines.is_empty() {
                    diff.push(format!(
                        "output differs ({}):",
                        if *exact {
                            "exact match"
                        } else {
                            "subset match"
                        }
                    ));
                    diff.extend(lines.into_iter().map(|l| format!("  {l}")));
                }
            }
            None => {
                diff.push("expected output, but the render failed:".into());
                diff.push(format!("  error: {}", got.error.as_deref().unwrap_or("")));
            }
        },
        Expectation::Error(want) => match &got.error {
            Some(e) if e.contains(want.as_str()) => {}
            Some(e) => {
                diff.push("error differs:".into());
                diff.push(format!("  expected to contain: {}", quote(want)));
                diff.push(format!("  actual:              {}", quote(e)));
            }
            None => {
                diff.push(format!(
                    "expected an error containing {}, but there was none (exit {})",
                    quote(want),
                    got.exit
                ));
                for f in &got.findings {
                    diff.push(format!("  finding: {}", finding_line(f)));
                }
            }
        },
        Expectation::ExitOnly => {}
    }
    if let Some(want) = case.want_exit {
        if want != got.exit {
            diff.push(format!("exit code: expected {want}, got {}", got.exit));
            if let Some(e) = &got.error {
                diff.push(format!("  error: {e}"));
            }
        }
    }
    diff
}

fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// `{ruleId: …, severity: …, fieldPath: …, line: …, column: …, message: "…"}` of an actual
/// finding.
fn finding_line(f: &Finding) -> String {
    let mut parts = vec![
        format!("ruleId: {}", f.rule_id),
        format!("severity: {}", f.severity),
    ];
    if let Some(p) = &f.field_path {
        parts.push(format!("fieldPath: {p}"));
    }
    if let Some(l) = f.line {
        parts.push(format!("line: {l}"));
    }
    if let Some(c) = f.column {
        parts.push(format!("column: {c}"));
    }
    parts.push(format!("message: {}", quote(&f.message)));
    format!("{{{}}}", parts.join(", "))
}

fn want_line(w: &WantFinding) -> String {
    let mut parts = vec![format!("ruleId: {}", w.rule_id)];
    if let Some(s) = w.severity {
        parts.push(format!("severity: {s}"));
    }
    if let Some(p) = &w.field_path {
        parts.push(format!("fieldPath: {p}"));
    }
    if let Some(l) = w.line {
        parts.push(format!("line: {l}"));
    }
    if let Some(c) = w.column {
        parts.push(format!("column: {c}"));
    }
    match &w.message {
        Some(MessageMatch::Exact(m)) => parts.push(format!("message: {}", quote(m))),
        Some(MessageMatch::Regex(r)) => parts.push(format!("messageRegex: {}", quote(r.as_str()))),
        None => {}
    }
    format!("{{{}}}", parts.join(", "))
}

/// The fields of `got` that differ from `want` (only the fields `want` gives).
fn finding_mismatches(want: &WantFinding, got: &Finding) -> Vec<&'static str> {
    let mut out = Vec::new();
    if want.rule_id != got.rule_id {
        out.push("ruleId");
    }
    if want.severity.is_some_and(|s| s != got.severity) {
        out.push("severity");
    }
    if want
        .message
        .as_ref()
        .is_some_and(|m| !m.matches(&got.message))
    {
        out.push("message");
    }
    if want
        .field_path
        .as_ref()
        .is_some_and(|p| got.field_path.as_deref() != Some(p.as_str()))
    {
        out.push("fieldPath");
    }
    if want.line.is_some_and(|l| got.line != Some(l)) {
        out.push("line");
    }
    if want.column.is_some_and(|c| got.column != Some(c)) {
        out.push("column");
    }
    out
}

fn diff_findings(want: &[WantFinding], got: &[Finding], diff: &mut Vec<String>) {
    let mut lines = Vec::new();
    let mut bad = false;
    for i in 0..want.len().max(got.len()) {
        match (want.get(i), got.get(i)) {
            (Some(w), Some(g)) => {
                let fields = finding_mismatches(w, g);
                if fields.is_empty() {
                    lines.push(format!("  [{i}] ok: {}", g.rule_id));
                } else {
                    bad = true;
                    lines.push(format!("  [{i}] differs in {}:", fields.join(", ")));
                    lines.push(format!("      expected: {}", want_line(w)));
                    lines.push(format!("      actual:   {}", finding_line(g)));
                }
            }
            (Some(w), None) => {
                bad = true;
                lines.push(format!("  [{i}] missing:"));
                lines.push(format!("      expected: {}", want_line(w)));
            }
            (None, Some(g)) => {
                bad = true;
                lines.push(format!("  [{i}] unexpected:"));
                lines.push(format!("      actual:   {}", finding_line(g)));
            }
            (None, None) => {}
        }
    }
    if bad {
        diff.push(format!(
            "findings differ (expected {}, got {}):",
            want.len(),
            got.len()
        ));
        diff.extend(lines);
    }
}

/// A value on one line, cut after 160 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        let cut: String = s.chars().take(157).collect();
        format!("{cut}…")
    } else {
        s
    }
}

fn show_path(p: &FieldPath) -> String {
    if p.segments().is_empty() {
        "(document)".into()
    } else {
        p.to_string()
    }
}

/// Differences between `want` and `got` as `path: expected …, got …` lines. Without `exact`,
/// keys `got` has beyond `want` are ignored; lists always need the same length.
fn diff_value(at: &FieldPath, want: &Value, got: &Value, exact: bool, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let child = at.clone().key(k.clone());
                match g.get(k) {
                    Some(gv) => diff_value(&child, wv, gv, exact, out),
                    None => out.push(format!(
                        "{}: missing (expected {})",
                        show_path(&child),
                        short(wv)
                    )),
                }
            }
            if exact {
                for (k, gv) in g {
                    if !w.contains_key(k) {
                        let child = at.clone().key(k.clone());
                        out.push(format!(
                            "{}: unexpected (got {})",
                            show_path(&child),
                            short(gv)
                        ));
                    }
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!(
                    "{}: expected {} elements, got {}",
                    show_path(at),
                    w.len(),
                    g.len()
                ));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff_value(&at.clone().index(i), wv, gv, exact, out);
            }
        }
        _ if want != got => out.push(format!(
            "{}: expected {}, got {}",
            show_path(at),
            short(want),
            short(got)
        )),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Coverage

/// Which packs, tables and rules the suites exercise.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// One entry per rule pack of the rule set, in load order.
    pub packs: Vec<PackCoverage>,
    /// One entry per table, in load order.
    pub tables: Vec<TableCoverage>,
}

/// Coverage of one rule pack.
#[derive(Debug, Clone)]
pub struct PackCoverage {
    /// The pack's `metadata.name`.
    pub name: String,
    /// Cases in the pack's folder or naming one of its rules in `want_findings`.
    pub cases: usize,
    /// Validating rules no case names in `want_findings` (mutate-only rules count as tested
    /// when the pack's folder has a case).
    pub untested_rules: Vec<String>,
}

/// Coverage of one table.
#[derive(Debug, Clone)]
pub struct TableCoverage {
    /// The table's `metadata.name`.
    pub name: String,
    /// Cases in the table's folder.
    pub cases: usize,
}

impl Coverage {
    /// Names of packs and tables without any case.
    pub fn untested(&self) -> Vec<String> {
        self.packs
            .iter()
            .filter(|p| p.cases == 0)
            .map(|p| format!("pack {}", p.name))
            .chain(
                self.tables
                    .iter()
                    .filter(|t| t.cases == 0)
                    .map(|t| format!("table {}", t.name)),
            )
            .collect()
    }
}

/// Coverage of `rules` by `suites`: a pack is tested by the cases in its folder
/// (`tests/<pack>/`) and the cases naming one of its rules in `want_findings`; a table by the
/// cases in its folder; a rule by the cases naming it.
pub fn coverage(rules: &RuleSet, suites: &[Suite]) -> Coverage {
    let mut by_folder: BTreeMap<&str, usize> = BTreeMap::new();
    let mut named: HashSet<&str> = HashSet::new();
    for s in suites {
        if let Some(folder) = s.folder() {
            *by_folder.entry(folder).or_default() += s.cases.len();
        }
    }
    for s in suites {
        for c in &s.cases {
            named.extend(want_rule_ids(c));
        }
    }
    let mut packs = Vec::new();
    for pack in &rules.packs {
        let ids: HashSet<&str> = pack.rules.iter().map(|r| r.id.as_str()).collect();
        let in_folder = by_folder.get(pack.name.as_str()).copied().unwrap_or(0);
        let mut cases = in_folder;
        for s in suites {
            if s.folder() == Some(pack.name.as_str()) {
                continue;
            }
            cases += s
                .cases
                .iter()
                .filter(|c| want_rule_ids(c).any(|id| ids.contains(id)))
                .count();
        }
        packs.push(PackCoverage {
            name: pack.name.clone(),
            cases,
            untested_rules: pack
                .rules
                .iter()
                // A rule that only mutates never yields a finding: its pack's cases test it.
                .filter(|r| {
                    let tested = named.contains(r.id.as_str())
                        || (r.expression().is_none() && in_folder > 0);
                    !tested
                })
                .map(|r| r.id.clone())
                .collect(),
        });
    }
    let tables = rules
        .tables
        .iter()
        .map(|t| TableCoverage {
            name: t.name.clone(),
            cases: by_folder.get(t.name.as_str()).copied().unwrap_or(0),
        })
        .collect();
    Coverage { packs, tables }
}

fn want_rule_ids(c: &Case) -> impl Iterator<Item = &str> {
    let list: &[WantFinding] = match &c.expect {
        Expectation::Findings(f) => f,
        _ => &[],
    };
    list.iter().map(|w| w.rule_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "      apiVersion: nvcre.nvidia.com/v1alpha1\n      kind: WorkloadRun\n      metadata: {name: t}\n      spec: {image: img, numNodes: 1, framework: {exec: {command: [run]}}}\n";

    /// The error of a suite whose one case is `case` (YAML lines at 4-space indent).
    fn suite_error(case: &str) -> String {
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}{case}");
        match parse_suite(Path::new("t.yaml"), &text) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        }
    }

    macro_rules! rejects {
        ($name:ident, $case:expr, $want:expr) => {
            #[test]
            fn $name() {
                let got = suite_error($case);
                assert!(got.contains($want), "{got}");
            }
        };
    }

    rejects!(
        no_expectation,
        "",
        "t.yaml:2:5: cases[0]: case \"n\" has no expectation"
    );
    rejects!(
        unknown_key,
        "    want_exit: 0\n    skip: true\n",
        "t.yaml:9:5: cases[0].skip: unknown key \"skip\""
    );
    rejects!(
        two_expectations,
        "    want_findings: []\n    want_error: x\n",
        "give one expectation, not want_findings and want_error"
    );
    rejects!(
        output_needs_render,
        "    want_output: {}\n",
        "want_output needs `mode: render`"
    );
    rejects!(
        exact_needs_output,
        "    want_findings: []\n    want_output_exact: true\n",
        "only goes with want_output"
    );
    rejects!(
        bad_exit,
        "    want_exit: 3\n",
        "cases[0].want_exit: must be 0, 1 or 2"
    );
    rejects!(
        bad_mode,
        "    mode: lint\n    want_exit: 0\n",
        "unknown mode \"lint\""
    );
    rejects!(
        unknown_finding_key,
        "    want_findings: [{ruleId: a, rule: b}]\n",
        "t.yaml:8:33: cases[0].want_findings[0].rule: unknown key"
    );
    rejects!(
        finding_needs_rule_id,
        "    want_findings: [{message: a}]\n",
        "needs a `ruleId`"
    );
    rejects!(
        message_or_regex,
        "    want_findings: [{ruleId: a, message: a, messageRegex: b}]\n",
        "`message` or `messageRegex`, not both"
    );
    rejects!(
        bad_regex,
        "    want_findings: [{ruleId: a, messageRegex: \"(\"}]\n",
        "invalid regex"
    );
    rejects!(
        bad_severity,
        "    want_findings: [{ruleId: a, severity: fatal}]\n",
        "unknown severity \"fatal\""
    );
    rejects!(
        unknown_context_key,
        "    context: {region: x}\n    want_exit: 0\n",
        "cases[0].context.region: unknown key"
    );
    rejects!(accepts_exit_only, "    want_exit: 0\n", "ok");

    #[test]
    fn notes_are_unique_and_input_is_required() {
        let dup = format!(
            "cases:\n  - note: n\n    input: |\n{RUN}    want_exit: 0\n  - note: n\n    input: x\n    want_exit: 0\n"
        );
        let err = parse_suite(Path::new("t.yaml"), &dup).expect_err("duplicate");
        assert!(
            err.to_string()
                .contains("t.yaml:9:5: cases[1].note: duplicate note \"n\""),
            "{err}"
        );
        let none = "cases:\n  - note: n\n    want_exit: 0\n";
        let err = parse_suite(Path::new("t.yaml"), none).expect_err("no input");
        assert!(
            err.to_string()
                .contains("a case needs `input` or `inputFile`"),
            "{err}"
        );
    }

    fn run_one(case: &str) -> CaseResult {
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}{case}");
        let suite = parse_suite(Path::new("t.yaml"), &text).expect("parses");
        let rules = crate::packs::default_rules().expect("rules");
        let mut runner = SuiteRunner::new(&rules);
        runner.run(&suite, &suite.cases[0])
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
    fn output_subset_and_exact_diffs_name_json_paths() {
        let mut out = Vec::new();
        let want = serde_json::json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
        let got = serde_json::json!({"a": {"b": 2, "c": [1], "e": true}});
        diff_value(&FieldPath::root(), &want, &got, false, &mut out);
        assert_eq!(
            out,
            vec![
                "a.b: expected 1, got 2",
                "a.c: expected 2 elements, got 1",
                "d: missing (expected \"x\")"
            ]
        );
        out.clear();
        diff_value(
            &FieldPath::root(),
            &serde_json::json!({"a": {}}),
            &got,
            true,
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "a.b: unexpected (got 2)",
                "a.c: unexpected (got [1])",
                "a.e: unexpected (got true)"
            ]
        );
    }
}
