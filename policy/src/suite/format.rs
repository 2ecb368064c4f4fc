//! The suite file format: serde structs that mirror the YAML (`deny_unknown_fields` at every
//! level), then the checks serde cannot express (one expectation per case, unique notes, known
//! modes and severities), turned into a [`Suite`]. Every error names the file and the line of
//! the offending key, in the words a suite author reads (`unknown key "x" (expected one of:
//! …)`, `must be a string`) rather than serde's.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvcre_engine::{
    Document, FieldPath, Severity, Source, WalkOptions, parse_documents, walk_files,
};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::property::{RawProperty, compile as compile_property};
use super::{
    Case, CaseContext, CaseRules, Expectation, MessageMatch, Mode, Suite, SuiteError, SuiteErrors,
    WantFinding,
};

/// A suite file as written: the form its JSON Schema describes (it is read as [`ReadSuite`],
/// case by case).
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // only its schema is used
struct RawSuite {
    /// The cases.
    cases: Vec<RawCase>,
}

/// A suite file as read: the cases are read one by one (see [`RawSuite`] for the format; a
/// key beside `cases` is reported apart).
#[derive(Deserialize)]
struct ReadSuite {
    cases: Vec<serde_json::Value>,
}

/// One case as written. Every field is `Some` when the key is present, even with a `null` value
/// (which then fails the type check, as a missing value must be left out instead).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawCase {
    /// What the case pins; unique in the file.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String", required)]
    note: Option<String>,
    /// YAML text of one or more input documents.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    input: Option<String>,
    /// The input documents, from a file relative to the suite.
    #[serde(default, deserialize_with = "present", rename = "inputFile")]
    #[schemars(with = "String")]
    input_file: Option<String>,
    /// The node context (platform, GPU architecture or a nodes file).
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "RawContext")]
    context: Option<RawContext>,
    /// `default`, or a rule directory relative to the suite.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    rules: Option<String>,
    /// `check` (default), `render`, or `bandwidth` / `goodput` (the input is a log, read with
    /// `profile` as `nvcre-policy measure` reads it).
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String", extend("enum" = ["check", "render", "bandwidth", "goodput"]))]
    mode: Option<String>,
    /// `bandwidth` / `goodput` mode: the LogProfile the log is read with.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    profile: Option<String>,
    /// `bandwidth` / `goodput` mode: thresholds (key → CEL over `value`) judged on the result.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
    thresholds: Option<std::collections::BTreeMap<String, String>>,
    /// The exact list of findings, in order (`[]`: none).
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Vec<RawWantFinding>")]
    want_findings: Option<Option<Vec<RawWantFinding>>>,
    /// Render mode: keys the output must hold with these values.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Value")]
    want_output: Option<Value>,
    /// With `want_output`: the output must equal it.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "bool")]
    want_output_exact: Option<bool>,
    /// A substring of the error.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    want_error: Option<String>,
    /// 0 clean, 1 violations, 2 could not run.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "u64", range(max = 2))]
    want_exit: Option<u64>,
    /// A property: generated variants of the input and an invariant each must satisfy.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "RawProperty")]
    property: Option<RawProperty>,
}

/// `context:` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawContext {
    /// `--platform`.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    platform: Option<String>,
    /// `--gpu-arch`.
    #[serde(default, deserialize_with = "present", rename = "gpuArch")]
    #[schemars(with = "String")]
    gpu_arch: Option<String>,
    /// `--nodes-file`, relative to the suite.
    #[serde(default, deserialize_with = "present", rename = "nodesFile")]
    #[schemars(with = "String")]
    nodes_file: Option<String>,
}

/// One entry of `want_findings` as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawWantFinding {
    /// The rule id.
    #[serde(default, deserialize_with = "present", rename = "ruleId")]
    #[schemars(with = "String", required)]
    rule_id: Option<String>,
    /// Compared when given.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String", extend("enum" = ["error", "warning", "info"]))]
    severity: Option<String>,
    /// The exact message, compared when given.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "String")]
    message: Option<String>,
    /// A regex the message matches (unanchored).
    #[serde(default, deserialize_with = "present", rename = "messageRegex")]
    #[schemars(with = "String")]
    message_regex: Option<String>,
    /// The finding's field path, compared when given.
    #[serde(default, deserialize_with = "present", rename = "fieldPath")]
    #[schemars(with = "String")]
    field_path: Option<String>,
    /// The finding's line, compared when given.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "u64")]
    line: Option<u64>,
    /// The finding's column, compared when given.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "u64")]
    column: Option<u64>,
}

/// The JSON Schema (draft 2020-12) of a suite file, derived from the serde types above: what
/// serde accepts, plus what the checks after it need (`note` and `ruleId` present, known modes
/// and severities, `want_exit` 0 to 2).
pub fn suite_schema() -> Value {
    let mut v = nvcre_engine::schema::row_schema::<RawSuite>();
    if let Value::Object(m) = &mut v {
        let mut out = serde_json::Map::new();
        out.insert(
            "$schema".into(),
            Value::String(nvcre_engine::schema::DRAFT_2020_12.into()),
        );
        out.insert(
            "description".into(),
            Value::String("a rule test suite (rules/tests/<pack-or-table>/*.yaml)".into()),
        );
        out.append(m);
        return Value::Object(out);
    }
    v
}

/// A present key: `Some` of its value, so that `null` is a type error rather than absence.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Suite files among `paths`: files as given, directories through the engine's walker
/// ([`nvcre_engine::walk_files`]: `*.yaml` / `*.yml` in path order, hidden entries skipped,
/// symlinks followed), without the `data/` folders, which hold the inputs cases name.
///
/// # Errors
/// [`SuiteError::Io`] for a path that does not exist; [`SuiteError::Walk`] for the first entry
/// of a directory that cannot be read.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, SuiteError> {
    const SUITES: WalkOptions<'static> = WalkOptions {
        extensions: &["yaml", "yml"],
        skip_dirs: &["data"],
        follow_dir_links: true,
    };
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let (found, errors) = walk_files(p, &SUITES);
            if let Some(e) = errors.into_iter().next() {
                return Err(SuiteError::Walk(e));
            }
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

/// Reads and checks one suite file.
///
/// # Errors
/// [`SuiteErrors`]: every problem found, each naming the file and line. A file that cannot be
/// read or parsed, or whose top level is wrong, is one error; otherwise each broken case is one.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteErrors> {
    let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_suite(path, &text)
}

/// Parses suite text; `path` names the file and anchors relative paths.
///
/// # Errors
/// As [`load_suite`].
pub fn parse_suite(path: &Path, text: &str) -> Result<Suite, SuiteErrors> {
    let source = Source::new(path.display().to_string(), text);
    let docs = parse_documents(&source).map_err(SuiteError::Yaml)?;
    let mut docs = docs.into_iter();
    let (doc, second) = (docs.next(), docs.next());
    let Some(doc) = doc.filter(|_| second.is_none()) else {
        // At the second document's first node, which the user has to move or remove.
        let (pos, message) = match &second {
            Some(d) => (
                d.spans.lookup(&FieldPath::root()),
                "a second YAML document: a suite file is one YAML document with a `cases:` list (move its cases into the first document's)",
            ),
            None => (
                None,
                "an empty file: a suite file is one YAML document with a `cases:` list",
            ),
        };
        return Err(SuiteError::Malformed {
            file: source.name.clone(),
            pos,
            message: message.into(),
        }
        .into());
    };
    let r = Reader {
        doc: &doc,
        dir: path.parent().unwrap_or(Path::new("")),
    };
    let mut errors = Vec::new();
    // A key beside `cases` is reported, and the cases are still read.
    if let Some(top) = doc.value.as_object() {
        for key in top.keys().filter(|k| *k != "cases") {
            errors.push(r.err(
                &FieldPath::root().key(key.clone()),
                &format!("unknown key {key:?} (expected one of: cases)"),
            ));
        }
    }
    let raw: ReadSuite = nvcre_engine::read_mapping(&doc.value).map_err(|e| {
        errors.push(r.serde(&FieldPath::root(), &e));
        SuiteErrors(std::mem::take(&mut errors))
    })?;
    let cases_path = FieldPath::root().key("cases");
    let mut cases = Vec::new();
    let mut notes: HashSet<String> = HashSet::new();
    // Each case is read on its own, so every broken case is reported, not only the first.
    for (i, item) in raw.cases.iter().enumerate() {
        let at = cases_path.clone().index(i);
        let case = nvcre_engine::read_mapping::<RawCase>(item)
            .map_err(|e| r.serde(&at, &e))
            .and_then(|raw| r.case(&at, raw));
        match case {
            Ok(case) if !notes.insert(case.note.clone()) => errors.push(r.err(
                &at.key("note"),
                &format!(
                    "duplicate note {:?} (notes are unique in a file)",
                    case.note
                ),
            )),
            Ok(case) => cases.push(case),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(SuiteErrors(errors));
    }
    Ok(Suite {
        path: path.to_path_buf(),
        cases,
    })
}

/// Turns the raw suite into cases, reporting problems at their line.
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

    /// A serde error in the suite's words, at the key it is about (`within`: where the value
    /// read is in the document).
    fn serde(
        &self,
        within: &FieldPath,
        e: &serde_path_to_error::Error<serde_json::Error>,
    ) -> SuiteError {
        let path = e.path().to_string();
        let mut at = within.clone();
        if path != "." {
            for segment in FieldPath::parse(&path)
                .map(|p| p.segments().to_vec())
                .unwrap_or_default()
            {
                at.push(segment);
            }
        }
        let inner = e.inner().to_string();
        let message = if inner.starts_with("unknown field") {
            // "unknown field `x`, expected one of `a`, `b`" (or "expected `a`", "`a` or `b`").
            let names: Vec<&str> = inner.split('`').skip(1).step_by(2).collect();
            let (key, expected) = names.split_first().map_or(("", &[][..]), |(k, r)| (*k, r));
            format!(
                "unknown key {key:?} (expected one of: {})",
                expected.join(", ")
            )
        } else if inner == "missing field `cases`" {
            return self.err(&at.key("cases"), "`cases` must be a list of cases");
        } else if inner.contains("expected a sequence") && at.to_string() == "cases" {
            "`cases` must be a list of cases".to_string()
        } else if inner.contains("expected a sequence") && path.ends_with("want_findings") {
            "must be a list (`[]` for no findings)".to_string()
        } else if inner.contains("expected a string") {
            "must be a string".to_string()
        } else if inner.contains("expected u64") {
            "must be a non-negative integer".to_string()
        } else if inner.contains("expected a boolean") {
            "must be true or false".to_string()
        } else if inner.contains("expected struct") || inner.ends_with("expected a map") {
            "must be a mapping".to_string()
        } else {
            nvcre_engine::plain_type_words(&inner)
        };
        self.err(&at, &message)
    }

    fn case(&self, at: &FieldPath, raw: RawCase) -> Result<Case, SuiteError> {
        let line = self.doc.spans.lookup(at).map(|p| p.line).unwrap_or(0);
        let note = match raw.note {
            Some(n) if !n.trim().is_empty() => n,
            Some(_) => return Err(self.err(&at.clone().key("note"), "must not be empty")),
            None => return Err(self.err(at, "a case needs a `note`")),
        };
        let input_file = raw.input_file.clone();
        let input = self.input(at, raw.input, raw.input_file, &note)?;
        let context = raw
            .context
            .map(|c| CaseContext {
                platform: c.platform,
                gpu_arch: c.gpu_arch,
                nodes_file: c.nodes_file.map(|f| self.dir.join(f)),
            })
            .unwrap_or_default();
        let rules = match raw.rules.as_deref() {
            None | Some("default") => CaseRules::Default,
            Some(dir) => CaseRules::Dir(self.dir.join(dir)),
        };
        let mode = match raw.mode.as_deref() {
            None | Some("check") => Mode::Check,
            Some("render") => Mode::Render,
            Some("bandwidth") => Mode::Bandwidth,
            Some("goodput") => Mode::Goodput,
            Some(other) => {
                return Err(self.err(
                    &at.clone().key("mode"),
                    &format!("unknown mode {other:?} (check, render, bandwidth or goodput)"),
                ));
            }
        };
        let measures = matches!(mode, Mode::Bandwidth | Mode::Goodput);
        let profile = match (raw.profile, measures) {
            (Some(p), true) => Some(p),
            (None, true) => {
                return Err(self.err(
                    at,
                    "a bandwidth or goodput case needs `profile` (the LogProfile to read the log with)",
                ));
            }
            (Some(_), false) => {
                return Err(self.err(
                    &at.clone().key("profile"),
                    "only goes with `mode: bandwidth` or `mode: goodput`",
                ));
            }
            (None, false) => None,
        };
        if raw.thresholds.is_some() && !measures {
            return Err(self.err(
                &at.clone().key("thresholds"),
                "only goes with `mode: bandwidth` or `mode: goodput`",
            ));
        }
        if measures && raw.property.is_some() {
            return Err(self.err(
                &at.clone().key("property"),
                "properties run `check` or `render`, not a measurement",
            ));
        }
        let want_exit = match raw.want_exit {
            None => None,
            Some(n @ 0..=2) => u8::try_from(n).ok(),
            Some(_) => return Err(self.err(&at.clone().key("want_exit"), "must be 0, 1 or 2")),
        };
        let expect = self.expectation(
            at,
            Expectations {
                findings: raw.want_findings,
                output: raw.want_output,
                output_exact: raw.want_output_exact,
                error: raw.want_error,
                property: raw.property,
            },
            &note,
            mode,
            want_exit.is_some(),
        )?;
        Ok(Case {
            note,
            line,
            input,
            input_file,
            context,
            rules,
            mode,
            profile,
            thresholds: raw.thresholds.unwrap_or_default(),
            expect,
            want_exit,
        })
    }

    /// `input` (inline text) or `inputFile` (read now, relative to the suite).
    fn input(
        &self,
        at: &FieldPath,
        input: Option<String>,
        input_file: Option<String>,
        note: &str,
    ) -> Result<Arc<Source>, SuiteError> {
        match (input, input_file) {
            (Some(text), None) => Ok(Source::new(
                format!("{} › {note}", self.doc.source.name),
                text,
            )),
            (None, Some(file)) => {
                let path = self.dir.join(&file);
                let text = std::fs::read_to_string(&path).map_err(|source| {
                    self.err(
                        &at.clone().key("inputFile"),
                        &format!(
                            "reading {}: {} (inputFile is relative to the suite file)",
                            path.display(),
                            nvcre_engine::limits::io_error_text(&source)
                        ),
                    )
                })?;
                Ok(Source::new(path.display().to_string(), text))
            }
            (Some(_), Some(_)) => Err(self.err(at, "give `input` or `inputFile`, not both")),
            (None, None) => Err(self.err(at, "a case needs `input` or `inputFile`")),
        }
    }

    /// Exactly one of want_findings / want_output / want_error, or want_exit alone.
    fn expectation(
        &self,
        at: &FieldPath,
        want: Expectations,
        note: &str,
        mode: Mode,
        has_exit: bool,
    ) -> Result<Expectation, SuiteError> {
        let given: Vec<&str> = [
            ("want_findings", want.findings.is_some()),
            ("want_output", want.output.is_some()),
            ("want_error", want.error.is_some()),
            ("property", want.property.is_some()),
        ]
        .into_iter()
        .filter(|(_, present)| *present)
        .map(|(k, _)| k)
        .collect();
        if given.len() > 1 {
            return Err(self.err(
                at,
                &format!("give one expectation, not {}", given.join(" and ")),
            ));
        }
        if want.output_exact.is_some() && want.output.is_none() {
            return Err(self.err(
                &at.clone().key("want_output_exact"),
                "only goes with want_output",
            ));
        }
        if let Some(raw) = want.property {
            if has_exit {
                return Err(self.err(
                    &at.clone().key("want_exit"),
                    "does not go with property (the invariant says what must hold)",
                ));
            }
            let pat = at.clone().key("property");
            return compile_property(raw)
                .map(|p| Expectation::Property(Box::new(p)))
                .map_err(|(rel, message)| {
                    let mut full = pat.clone();
                    for seg in rel.segments() {
                        full = match seg {
                            nvcre_engine::Segment::Key(k) => full.key(k.clone()),
                            nvcre_engine::Segment::Index(i) => full.index(*i),
                        };
                    }
                    self.err(&full, &message)
                });
        }
        Ok(match (want.findings, want.output, want.error) {
            (Some(findings), _, _) => {
                let lat = at.clone().key("want_findings");
                let Some(items) = findings else {
                    return Err(self.err(&lat, "must be a list (`[]` for no findings)"));
                };
                Expectation::Findings(
                    items
                        .into_iter()
                        .enumerate()
                        .map(|(i, f)| self.want_finding(&lat.clone().index(i), f))
                        .collect::<Result<_, _>>()?,
                )
            }
            (None, Some(value), _) => {
                if mode == Mode::Check {
                    return Err(self.err(
                        &at.clone().key("want_output"),
                        "want_output needs `mode: render`, `bandwidth` or `goodput`",
                    ));
                }
                Expectation::Output {
                    value,
                    exact: want.output_exact.unwrap_or(false),
                }
            }
            (None, None, Some(error)) => Expectation::Error(error),
            (None, None, None) if has_exit => Expectation::ExitOnly,
            (None, None, None) => {
                return Err(self.err(
                    at,
                    &format!(
                        "case {note:?} has no expectation: give want_findings, want_output, want_error, want_exit or property"
                    ),
                ));
            }
        })
    }

    fn want_finding(
        &self,
        fat: &FieldPath,
        raw: RawWantFinding,
    ) -> Result<WantFinding, SuiteError> {
        let Some(rule_id) = raw.rule_id else {
            return Err(self.err(fat, "an expected finding needs a `ruleId`"));
        };
        let severity = match raw.severity.as_deref() {
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
        let message = match (raw.message, raw.message_regex) {
            (Some(_), Some(_)) => {
                return Err(self.err(fat, "give `message` or `messageRegex`, not both"));
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
        let field_path = match raw.field_path {
            None => None,
            Some(p) => Some(
                FieldPath::parse(&p)
                    .map_err(|e| self.err(&fat.clone().key("fieldPath"), &e.message))?
                    .to_string(),
            ),
        };
        let count = |n: Option<u64>, key: &str| {
            n.map(|n| {
                usize::try_from(n)
                    .map_err(|_| self.err(&fat.clone().key(key), "must be a non-negative integer"))
            })
            .transpose()
        };
        Ok(WantFinding {
            rule_id,
            severity,
            message,
            field_path,
            line: count(raw.line, "line")?,
            column: count(raw.column, "column")?,
        })
    }
}

/// The expectation keys of a case, as written.
struct Expectations {
    findings: Option<Option<Vec<RawWantFinding>>>,
    output: Option<Value>,
    output_exact: Option<bool>,
    error: Option<String>,
    property: Option<RawProperty>,
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::suite) const RUN: &str = "      apiVersion: nvcre.nvidia.com/v1alpha1\n      kind: WorkloadRun\n      metadata: {name: t}\n      spec: {image: img, numNodes: 1, framework: {exec: {command: [run]}}}\n";

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
        measure_mode_needs_a_profile,
        "    mode: bandwidth\n    want_exit: 0\n",
        "a bandwidth or goodput case needs `profile`"
    );

    rejects!(
        profile_only_with_a_measure_mode,
        "    profile: nccl-bandwidth\n    want_exit: 0\n",
        "cases[0].profile: only goes with `mode: bandwidth` or `mode: goodput`"
    );

    rejects!(
        thresholds_only_with_a_measure_mode,
        "    thresholds: {busBandwidthGBps: 'value > 1'}\n    want_exit: 0\n",
        "cases[0].thresholds: only goes with `mode: bandwidth` or `mode: goodput`"
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
    fn discover_walks_like_the_engine_skipping_hidden_entries_and_data_folders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for f in [
            "a/x.yaml",
            ".hidden/y.yaml",
            "a/.z.yaml",
            "data/z.yaml",
            "b.yml",
            "c.txt",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "cases: []\n").expect("write");
        }
        let found = discover(&[root.to_path_buf()]).expect("walks");
        assert_eq!(found, vec![root.join("a/x.yaml"), root.join("b.yml")]);
        let missing = root.join("nope");
        assert_eq!(
            discover(std::slice::from_ref(&missing))
                .map_err(|e| e.to_string())
                .err(),
            Some(format!(
                "rule test suite error: reading {}: no such file or directory",
                missing.display()
            ))
        );
    }

    #[test]
    fn every_broken_case_is_reported() {
        let cases = format!(
            "cases:\n  - note: a\n    inptu: x\n  - note: b\n    input: |\n{RUN}    want_exit: 0\n  - note: c\n    input: x\n    want_findings: [{{ruleId: r, severty: error}}]\n  - note: b\n    input: x\n    want_exit: 0\n"
        );
        let unknown_key = "unknown key \"inptu\" (expected one of: note, input, inputFile, context, rules, mode, profile, thresholds, want_findings, want_output, want_output_exact, want_error, want_exit, property)";
        // A key beside `cases` and a missing `inputFile` are reported with the cases.
        let beside = "extra: 1\ncases:\n  - note: a\n    inputFile: data/nope.yaml\n    want_exit: 0\n  - note: b\n    inptu: x\n";
        for (file, text, want) in [
            (
                "t.yaml",
                cases.as_str(),
                [
                    format!("t.yaml:3:5: cases[0].inptu: {unknown_key}"),
                    "t.yaml:13:33: cases[2].want_findings[0].severty: unknown key \"severty\" (expected one of: ruleId, severity, message, messageRegex, fieldPath, line, column)".to_string(),
                    "t.yaml:14:5: cases[3].note: duplicate note \"b\" (notes are unique in a file)".to_string(),
                ],
            ),
            (
                "s/t.yaml",
                beside,
                [
                    "s/t.yaml:1:1: extra: unknown key \"extra\" (expected one of: cases)".to_string(),
                    "s/t.yaml:4:5: cases[0].inputFile: reading s/data/nope.yaml: no such file or directory (inputFile is relative to the suite file)".to_string(),
                    format!("s/t.yaml:7:5: cases[1].inptu: {unknown_key}"),
                ],
            ),
        ] {
            let err = parse_suite(Path::new(file), text).expect_err("broken");
            assert_eq!(
                err.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
                want.map(|w| format!("rule test suite error: {w}"))
            );
        }
    }

    /// A second document is reported at its first node (it had no line); an empty file says so.
    #[test]
    fn one_document_per_suite_file() {
        for (text, want) in [
            (
                "cases:\n  - note: a\n    input: x\n    want_exit: 0\n---\n# more\ncases: []\n",
                "rule test suite error: t.yaml:7:1: a second YAML document: a suite file is one YAML document with a `cases:` list (move its cases into the first document's)",
            ),
            (
                "# nothing yet\n",
                "rule test suite error: t.yaml: an empty file: a suite file is one YAML document with a `cases:` list",
            ),
        ] {
            let err = parse_suite(Path::new("t.yaml"), text).expect_err("refused");
            assert_eq!(err.to_string(), want);
        }
    }

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
}
