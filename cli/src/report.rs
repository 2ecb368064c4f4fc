//! Reports: findings as text, JSON, SARIF 2.1.0, JUnit XML or GitHub workflow commands
//! ([`render`]), and errors and warnings on stderr.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;

use clap::ValueEnum;
use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use nvcre_engine::{Chunk, Finding, RuleSet, Severity};
use serde_json::{Value, json};

/// One line on stderr; a stderr that cannot be written (closed, full) is ignored rather than
/// turned into a panic.
pub fn stderr_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// `Error: <message>` on stderr.
pub fn error_line(message: &str) {
    stderr_line(&format!("Error: {message}"));
}

/// `Warning: <message>` on stderr.
pub fn warning_line(message: &str) {
    stderr_line(&format!(
        "Warning: {}",
        message.strip_prefix("warning: ").unwrap_or(message)
    ));
}

/// The one-line form of a finding on `render`'s stderr. Admission findings are API server
/// messages about a line of the input: `file:line:col: <field path>: <message>`. The other
/// stages' messages are the original's complete sentences and are printed exactly as it prints
/// them (the seed's conflict message is the whole line); `check` shows their location.
pub fn finding_text(f: &Finding) -> String {
    let admission = f.stage.as_deref() == Some("admission");
    let mut s = String::new();
    if let (true, Some(l), Some(c)) = (admission, f.line, f.column) {
        s.push_str(&format!("{}:{l}:{c}: ", f.file));
    }
    match &f.field_path {
        Some(p) if admission && !f.message.starts_with(p.as_str()) => {
            s.push_str(&format!("{p}: {}", f.message));
        }
        _ => s.push_str(&f.message),
    }
    s
}

/// Prints [`finding_text`] on stderr.
pub fn finding_line(f: &Finding) {
    stderr_line(&finding_text(f));
}

/// The lines of an input around one finding's line: the line before (when there is one), the
/// line, and the line after (when there is one), each with its terminator. The text report shows
/// these and nothing else, so an input does not have to be kept to be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// 1-based line number of the first line of `text`.
    pub first_line: usize,
    /// The lines.
    pub text: String,
}

impl Window {
    /// The window around 1-based `line` of `chunk` (see [`Chunk::raw_line`]); `None` when the
    /// line is not the chunk's.
    pub fn around(chunk: &Chunk, line: usize) -> Option<Window> {
        let this = chunk.raw_line(line)?;
        let before = line.checked_sub(1).and_then(|l| chunk.raw_line(l));
        let after = chunk.raw_line(line + 1);
        let mut text = String::new();
        text.push_str(before.unwrap_or_default());
        text.push_str(this);
        text.push_str(after.unwrap_or_default());
        Some(Window {
            first_line: if before.is_some() { line - 1 } else { line },
            text,
        })
    }

    /// The text of 1-based `line` with its terminator, when the window holds it.
    fn raw_line(&self, line: usize) -> Option<(usize, &str)> {
        let rel = line.checked_sub(self.first_line)?;
        let mut offset = 0;
        for (i, l) in self.text.split_inclusive('\n').enumerate() {
            if i == rel {
                return Some((offset, l));
            }
            offset += l.len();
        }
        None
    }
}

/// A [`Window`] as miette source code: spans are offsets in the window's text; line numbers
/// are those of the whole input.
#[derive(Debug)]
struct WindowSource {
    name: String,
    text: String,
    /// Lines of the input before the window.
    line_offset: usize,
}

impl SourceCode for WindowSource {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let inner =
            self.text
                .as_str()
                .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            inner.data(),
            *inner.span(),
            inner.line() + self.line_offset,
            inner.column(),
            inner.line_count(),
        )))
    }
}

#[derive(Debug)]
struct Snippet {
    message: String,
    src: WindowSource,
    span: SourceSpan,
    label: String,
}

impl std::error::Error for Snippet {}

impl std::fmt::Display for Snippet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Diagnostic for Snippet {
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(
            miette::LabeledSpan::new_with_span(Some(self.label.clone()), self.span),
        )))
    }
}

/// Text report of one finding: `file:line:col: severity[rule]: message`, then the source line
/// underlined when the lines around it are known. Colour only when `color`.
pub fn finding_block(f: &Finding, window: Option<&Window>, color: bool) -> String {
    let mut out = finding_summary(f);
    out.push('\n');
    if let (Some(w), Some(pos)) = (window, f.pos())
        && let Some((line_start, line)) = w.raw_line(pos.line)
    {
        let col_bytes: usize = line
            .chars()
            .take(pos.column.saturating_sub(1))
            .map(char::len_utf8)
            .sum();
        let start = line_start + col_bytes;
        let line_end = w.text[start..]
            .find('\n')
            .map(|i| start + i)
            .unwrap_or(w.text.len());
        let len = w.text[start..line_end].trim_end().len().max(1);
        let snippet = Snippet {
            message: f.message.clone(),
            src: WindowSource {
                name: f.file.clone(),
                text: w.text.clone(),
                line_offset: w.first_line - 1,
            },
            span: SourceSpan::new(start.into(), len),
            label: f.rule_id.clone(),
        };
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme).with_context_lines(1);
        let mut rendered = String::new();
        if handler.render_report(&mut rendered, &snippet).is_ok() {
            out.push_str(&rendered);
        }
    }
    out
}

/// True when stdout is a terminal (text output is coloured only then).
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// True when colour is allowed at all: no `--no-color` and no (non-empty) `NO_COLOR`.
pub fn color_allowed(no_color_flag: bool) -> bool {
    !no_color_flag && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A report format of `check -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `file:line:col: severity[rule]: message`, the source line underlined.
    Text,
    /// A JSON array, one object per finding.
    Json,
    /// SARIF 2.1.0: one run, the rules as reportingDescriptors.
    Sarif,
    /// JUnit XML: one testsuite per file, one testcase per document and rule.
    Junit,
    /// GitHub Actions workflow commands (`::error file=…,line=…,col=…,title=…::message`).
    Github,
}

/// An input that could not be checked (exit 2): the file and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The path as given (or `<stdin>`).
    pub file: String,
    /// The message, which names the file.
    pub message: String,
    /// Where in the file, when known.
    pub pos: Option<nvcre_engine::Pos>,
}

impl InputError {
    /// An input error without a position.
    pub fn new(file: String, message: String) -> InputError {
        InputError {
            file,
            message,
            pos: None,
        }
    }
}

/// One checked document: its index in the stream and the rules that apply to it (its kind's
/// packs), for the JUnit testcases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedDocument {
    /// 0-based index in the stream.
    pub index: usize,
    /// Ids of the rules whose pack matches the document's apiVersion and kind (shared by the
    /// documents of one apiVersion and kind).
    pub rules: Arc<Vec<String>>,
}

/// One input file and its documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedFile {
    /// The path as given (or `<stdin>`).
    pub file: String,
    /// The documents that were checked.
    pub documents: Vec<CheckedDocument>,
}

/// Everything a report shows.
pub struct Report<'a> {
    /// The rule set the check ran with (SARIF lists its rules).
    pub rules: &'a RuleSet,
    /// The findings, in input order.
    pub findings: &'a [Finding],
    /// The lines around each finding's line, by file and line, for the text format's
    /// snippets.
    pub windows: &'a HashMap<(String, usize), Window>,
    /// The input files in order.
    pub files: &'a [CheckedFile],
    /// Inputs that could not be checked.
    pub errors: &'a [InputError],
    /// Findings at or above this severity fail (JUnit failures; exit 1).
    pub fail_on: Severity,
}

/// Renders `report` in `format`; `color` only affects [`Format::Text`].
pub fn render(format: Format, report: &Report<'_>, color: bool) -> String {
    match format {
        Format::Text => text(report, color),
        Format::Json => json_report(report),
        Format::Sarif => sarif(report),
        Format::Junit => junit(report),
        Format::Github => github(report),
    }
}

fn text(report: &Report<'_>, color: bool) -> String {
    let mut out = String::new();
    for f in report.findings {
        let window = f
            .line
            .and_then(|l| report.windows.get(&(f.file.clone(), l)));
        out.push_str(&finding_block(f, window, color));
    }
    out
}

fn json_report(report: &Report<'_>) -> String {
    // Input errors are reported too (rule id `input-error`), so a tool reading the JSON sees why
    // the run exited 2.
    let mut items: Vec<Value> = report
        .findings
        .iter()
        .filter_map(|f| serde_json::to_value(f).ok())
        .collect();
    for e in report.errors {
        let mut o = json!({
            "ruleId": "input-error",
            "severity": "error",
            "message": e.message,
            "file": e.file,
        });
        if let (Some(p), Some(m)) = (e.pos, o.as_object_mut()) {
            m.insert("line".into(), json!(p.line));
            m.insert("column".into(), json!(p.column));
        }
        items.push(o);
    }
    let mut s = serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}

/// The SARIF level of a severity.
fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A path as a URI reference: unreserved characters, `/` and a few sub-delimiters as written,
/// everything else percent-encoded (`<stdin>` → `%3Cstdin%3E`), backslashes turned into `/`.
fn uri_reference(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        let c = if c == '\\' { '/' } else { c };
        if c.is_ascii_alphanumeric() || "-._~/!$&'()*+,;=:@".contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn sarif(report: &Report<'_>) -> String {
    let mut rules: Vec<Value> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (pack, rule) in report.rules.rules() {
        index.insert(rule.id.clone(), rules.len());
        rules.push(json!({
            "id": rule.id,
            "shortDescription": {"text": rule.description.clone().unwrap_or_else(|| rule.id.clone())},
            "defaultConfiguration": {"level": sarif_level(rule.severity)},
            "properties": {"pack": pack.name},
        }));
    }
    // Findings whose id is not a rule (a match condition that could not be evaluated).
    for f in report.findings {
        if !index.contains_key(&f.rule_id) {
            index.insert(f.rule_id.clone(), rules.len());
            rules.push(json!({
                "id": f.rule_id,
                "shortDescription": {"text": format!("{} (pack {})", f.rule_id, f.pack)},
                "defaultConfiguration": {"level": sarif_level(f.severity)},
                "properties": {"pack": f.pack},
            }));
        }
    }
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let mut physical = json!({"artifactLocation": {"uri": uri_reference(&f.file)}});
            if let (Some(line), Some(column)) = (f.line, f.column) {
                physical["region"] = json!({"startLine": line, "startColumn": column});
            }
            let mut location = json!({"physicalLocation": physical});
            if let Some(p) = &f.field_path {
                location["logicalLocations"] = json!([{"fullyQualifiedName": p, "kind": "member"}]);
            }
            json!({
                "ruleId": f.rule_id,
                "ruleIndex": index.get(&f.rule_id).copied().unwrap_or(0),
                "level": sarif_level(f.severity),
                "message": {"text": f.message},
                "locations": [location],
                "properties": {"document": f.document},
            })
        })
        .collect();
    let notifications: Vec<Value> = report
        .errors
        .iter()
        .map(|e| {
            let mut physical = json!({"artifactLocation": {"uri": uri_reference(&e.file)}});
            if let (Some(p), Some(m)) = (e.pos, physical.as_object_mut()) {
                m.insert(
                    "region".into(),
                    json!({"startLine": p.line, "startColumn": p.column}),
                );
            }
            json!({
                "level": "error",
                "message": {"text": e.message},
                "locations": [{"physicalLocation": physical}],
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "nvcre-policy",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": report.errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}

/// XML text with `&`, `<`, `>`, `"` and `'` escaped, and the characters XML 1.0 cannot hold
/// (control characters other than tab, newline and carriage return) replaced by U+FFFD.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// True when a message already starts with the field path (as the original's label and gang
/// messages do), alone or after a prefix such as `validate resolved job template: `.
fn message_names_path(message: &str, path: &str) -> bool {
    [
        message,
        message.split_once(": ").map_or("", |(_, rest)| rest),
    ]
    .iter()
    .any(|m| {
        m.strip_prefix(path)
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('['))
    })
}

/// The one-line form of a finding used in JUnit bodies.
fn finding_summary(f: &Finding) -> String {
    let loc = match (f.line, f.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", f.file),
        _ => f.file.clone(),
    };
    let path = f
        .field_path
        .as_deref()
        .filter(|p| !message_names_path(&f.message, p))
        .map(|p| format!(" ({p})"))
        .unwrap_or_default();
    format!("{loc}: {}[{}]: {}{path}", f.severity, f.rule_id, f.message)
}

struct Case {
    name: String,
    classname: String,
    failures: Vec<String>,
    failure_message: Option<(String, Severity)>,
    output: Vec<String>,
    error: Option<String>,
}

/// Findings by file and document.
type FindingIndex<'a> = HashMap<&'a str, HashMap<usize, Vec<&'a Finding>>>;

fn junit_cases(report: &Report<'_>, index: &FindingIndex<'_>, file: &CheckedFile) -> Vec<Case> {
    let mut cases = Vec::new();
    for e in report.errors.iter().filter(|e| e.file == file.file) {
        cases.push(Case {
            name: "read".into(),
            classname: file.file.clone(),
            failures: Vec::new(),
            failure_message: None,
            output: Vec::new(),
            error: Some(e.message.clone()),
        });
    }
    let by_document = index.get(file.file.as_str());
    for doc in &file.documents {
        let findings = by_document
            .and_then(|d| d.get(&doc.index))
            .cloned()
            .unwrap_or_default();
        let mut ids: Vec<String> = doc.rules.as_ref().clone();
        for f in &findings {
            if !ids.contains(&f.rule_id) {
                ids.push(f.rule_id.clone());
            }
        }
        for id in ids {
            let mut case = Case {
                name: id.clone(),
                classname: format!("{} document {}", file.file, doc.index),
                failures: Vec::new(),
                failure_message: None,
                output: Vec::new(),
                error: None,
            };
            for f in findings.iter().filter(|f| f.rule_id == id) {
                if f.severity >= report.fail_on {
                    case.failure_message
                        .get_or_insert_with(|| (f.message.clone(), f.severity));
                    case.failures.push(finding_summary(f));
                } else {
                    case.output.push(finding_summary(f));
                }
            }
            cases.push(case);
        }
    }
    cases
}

fn junit(report: &Report<'_>) -> String {
    let mut files: Vec<CheckedFile> = report.files.to_vec();
    // Errors about paths that never became files (a missing path) get a suite of their own.
    for e in report.errors {
        if !files.iter().any(|f| f.file == e.file) {
            files.push(CheckedFile {
                file: e.file.clone(),
                documents: Vec::new(),
            });
        }
    }
    // Findings grouped once, not searched once per document.
    let mut index: FindingIndex<'_> = HashMap::new();
    for f in report.findings {
        index
            .entry(f.file.as_str())
            .or_default()
            .entry(f.document)
            .or_default()
            .push(f);
    }
    let suites: Vec<(String, Vec<Case>)> = files
        .iter()
        .map(|f| (f.file.clone(), junit_cases(report, &index, f)))
        .collect();
    let count = |cases: &[Case]| {
        (
            cases.len(),
            cases.iter().filter(|c| !c.failures.is_empty()).count(),
            cases.iter().filter(|c| c.error.is_some()).count(),
        )
    };
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for (_, cases) in &suites {
        let (t, f, e) = count(cases);
        tests += t;
        failures += f;
        errors += e;
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"nvcre-policy\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n"
    ));
    for (name, cases) in &suites {
        let (t, f, e) = count(cases);
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"0\">\n",
            xml_escape(name)
        ));
        for c in cases {
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\"",
                xml_escape(&c.name),
                xml_escape(&c.classname)
            );
            if c.failures.is_empty() && c.output.is_empty() && c.error.is_none() {
                out.push_str(&open);
                out.push_str("/>\n");
                continue;
            }
            out.push_str(&open);
            out.push_str(">\n");
            if let Some(e) = &c.error {
                out.push_str(&format!(
                    "      <error message=\"{}\" type=\"input\"/>\n",
                    xml_escape(e)
                ));
            }
            if let Some((message, severity)) = &c.failure_message {
                out.push_str(&format!(
                    "      <failure message=\"{}\" type=\"{severity}\">{}</failure>\n",
                    xml_escape(message),
                    xml_escape(&c.failures.join("\n"))
                ));
            }
            if !c.output.is_empty() {
                out.push_str(&format!(
                    "      <system-out>{}</system-out>\n",
                    xml_escape(&c.output.join("\n"))
                ));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// GitHub's escaping of a workflow command's message.
fn github_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub's escaping of a workflow command's property value.
fn github_property(s: &str) -> String {
    github_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn github(report: &Report<'_>) -> String {
    let mut out = String::new();
    for f in report.findings {
        let level = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut props = vec![format!("file={}", github_property(&f.file))];
        if let (Some(l), Some(c)) = (f.line, f.column) {
            props.push(format!("line={l}"));
            props.push(format!("col={c}"));
        }
        props.push(format!("title={}", github_property(&f.rule_id)));
        out.push_str(&format!(
            "::{level} {}::{}\n",
            props.join(","),
            github_data(&f.message)
        ));
    }
    for e in report.errors {
        let at = e
            .pos
            .map(|p| format!(",line={},col={}", p.line, p.column))
            .unwrap_or_default();
        out.push_str(&format!(
            "::error file={}{at},title=nvcre-policy::{}\n",
            github_property(&e.file),
            github_data(&e.message)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_escapes_data_and_properties() {
        assert_eq!(github_data("100% a\r\nb: c, d"), "100%25 a%0D%0Ab: c, d");
        assert_eq!(github_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
    }

    #[test]
    fn xml_escapes_markup_and_drops_what_xml_cannot_hold() {
        assert_eq!(
            xml_escape("<a href=\"x\">&'</a>\u{1}\t"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;\u{FFFD}\t"
        );
    }

    #[test]
    fn uri_references_keep_paths_and_encode_the_rest() {
        assert_eq!(
            uri_reference("examples/run a.yaml"),
            "examples/run%20a.yaml"
        );
        assert_eq!(uri_reference("<stdin>"), "%3Cstdin%3E");
        assert_eq!(uri_reference("C:\\x\\é.yaml"), "C:/x/%C3%A9.yaml");
    }
}
