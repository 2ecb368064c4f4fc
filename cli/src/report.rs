//! Reports: findings as text, JSON, SARIF 2.1.0, JUnit XML or GitHub workflow commands
//! ([`write_report`]), and errors and warnings on stderr.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use clap::ValueEnum;
use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use nvcre_engine::{Chunk, Finding, RuleSet, Severity};
use serde_json::{Map, Value, json};
use serde_sarif::sarif;

use crate::color;
use crate::findings::Findings;
use crate::ruleset::RulesInfo;

/// `text` safe to show on a terminal ([`nvcre_engine::printable`]), keeping the tab and, when
/// `newlines`, the line feed.
pub fn printable(text: &str, newlines: bool) -> std::borrow::Cow<'_, str> {
    nvcre_engine::printable(text, if newlines { &['\t', '\n'] } else { &['\t'] })
}

/// `lead` (already styled) and `text` ([`printable`]) as one line on stderr; a stderr that
/// cannot be written (closed, full) is ignored rather than turned into a panic.
fn stderr_led(lead: &str, text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{lead}{}", printable(text, true));
}

/// One line on stderr, its control characters escaped ([`printable`]).
pub fn stderr_line(line: &str) {
    stderr_led("", line);
}

/// `Error: <message>` on stderr (the prefix coloured when stderr is, see [`crate::color`]).
pub fn error_line(message: &str) {
    let prefix = color::paint("Error:", color::severity("error"), color::stderr());
    stderr_led(&format!("{prefix} "), message);
}

/// `Warning: <message>` on stderr.
pub fn warning_line(message: &str) {
    let prefix = color::paint("Warning:", color::severity("warning"), color::stderr());
    stderr_led(
        &format!("{prefix} "),
        message.strip_prefix("warning: ").unwrap_or(message),
    );
}

/// One of [`nvcre_domain::Rendered::warnings`] on stderr: `Info: <text>` for an info note,
/// `Warning: <text>` for the others.
pub fn render_note_line(note: &nvcre_domain::Note) {
    // The text as it is: a rule's message may itself start with `warning: ` or `info: `.
    let (lead, style) = match note.severity {
        Severity::Info => ("Info:", "info"),
        _ => ("Warning:", "warning"),
    };
    let prefix = color::paint(lead, color::severity(style), color::stderr());
    stderr_led(&format!("{prefix} "), &note.text);
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
        for l in [before.unwrap_or_default(), this, after.unwrap_or_default()] {
            // A CRLF file's lines are shown as LF lines: the `\r` is the terminator's, not a
            // character of the line a terminal would act on.
            match l.strip_suffix("\r\n") {
                Some(body) => {
                    text.push_str(body);
                    text.push('\n');
                }
                None => text.push_str(l),
            }
        }
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

/// How many bytes of `rest` (the line from a finding's column on) the value there spans: a
/// quoted scalar to its closing quote, a flow mapping or sequence to its closing bracket, a
/// plain scalar inside a flow collection (`before`, the line up to the column, leaves one open)
/// to the `,`, `}` or `]` that ends it, else to the line's end; never a ` #` comment. At least 1.
fn value_extent(before: &str, rest: &str) -> usize {
    let bytes = rest.as_bytes();
    // The end of a quoted scalar that opens at `i`, past its closing quote (`\"` escapes in
    // double quotes, `''` in single).
    let quoted_end = |i: usize| -> Option<usize> {
        let q = bytes[i];
        let mut j = i + 1;
        while j < bytes.len() {
            match bytes[j] {
                b'\\' if q == b'"' => j += 2,
                b'\'' if q == b'\'' && bytes.get(j + 1) == Some(&b'\'') => j += 2,
                c if c == q => return Some(j + 1),
                _ => j += 1,
            }
        }
        None
    };
    let end = match bytes.first() {
        Some(b'"' | b'\'') => quoted_end(0),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = 0;
            let mut end = None;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' | b'\'' => {
                        i = quoted_end(i).unwrap_or(bytes.len());
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            end
        }
        _ => {
            let in_flow = flow_depth(before) > 0;
            let mut end = bytes.len();
            for (i, &c) in bytes.iter().enumerate() {
                let comment = c == b'#' && i > 0 && bytes[i - 1].is_ascii_whitespace();
                if comment || (in_flow && matches!(c, b',' | b'}' | b']')) {
                    end = i;
                    break;
                }
            }
            Some(end)
        }
    };
    rest[..end.unwrap_or(rest.len())].trim_end().len().max(1)
}

/// How many flow collections (`{`, `[`) `line` leaves open, quoted scalars skipped.
fn flow_depth(line: &str) -> usize {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => break,
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => depth = depth.saturating_sub(1),
            (None, _) => {}
        }
    }
    depth
}

/// Text report of one finding: `file:line:col: severity[rule]: message`, for a rule error
/// the line `  rule: <rule file>:<line>`, then the source line underlined (when the lines
/// around it are known) without repeating the message. Colour only when `color`.
pub fn finding_block(f: &Finding, window: Option<&Window>, color: bool) -> String {
    let mut out = finding_summary_styled(f, color);
    out.push('\n');
    // A rule error is the rule file's to fix: where the rule is written (`ruleFile` and
    // `ruleLine` in JSON).
    if f.rule_error && !f.rule_file.is_empty() && f.rule_line > 0 {
        out.push_str(&format!(
            "  rule: {}:{}\n",
            printable(&f.rule_file, false),
            f.rule_line
        ));
    }
    // The source lines are shown as written, so not when they hold a character a terminal
    // would act on (the message above names the place).
    if let (Some(w), Some(pos)) = (window, f.pos())
        && matches!(printable(&w.text, true), std::borrow::Cow::Borrowed(_))
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
        let len = value_extent(&w.text[line_start..start], &w.text[start..line_end]);
        let snippet = Snippet {
            message: f.message.clone(),
            src: WindowSource {
                name: printable(&f.file, false).into_owned(),
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
            out.push_str(&without_header(&rendered));
        }
    }
    out
}

/// A miette report without its header (the `× message` lines, which repeat the finding line
/// printed above it): everything from the snippet's `╭─[file:line:col]` line on.
fn without_header(rendered: &str) -> String {
    let mut out = String::new();
    let mut in_snippet = false;
    for line in rendered.split_inclusive('\n') {
        in_snippet = in_snippet || line.contains('\u{256d}');
        if in_snippet {
            out.push_str(line);
        }
    }
    out
}

/// A report format of `check -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `file:line:col: severity[rule]: message`, the source line underlined.
    Text,
    /// A versioned JSON envelope (`apiVersion`, `kind: CheckReport`, tool, rules, results
    /// grouped by file, summary).
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
    /// Which entry of the reports it belongs to.
    pub place: Place,
}

/// Where an [`InputError`] is reported among the inputs (the JSON report's results, the JUnit
/// suites), in the order the paths were given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Place {
    /// An error of checked input `i` (its place in [`Report::files`]): a file given twice is
    /// two inputs, each with its own errors.
    Input(usize),
    /// A path that could not be read, given (or found in a directory) after `n` checked
    /// inputs: an entry of its own there.
    Unread(usize),
    /// A file that is not an input (a rules or nodes file): after the inputs, an entry per
    /// file name.
    #[default]
    Other,
}

impl InputError {
    /// An input error without a position, of a file that is not an input ([`Place::Other`]).
    pub fn new(file: String, message: String) -> InputError {
        InputError {
            file,
            message,
            pos: None,
            place: Place::Other,
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
    /// The findings, in input order, each with the lines around its line (the text format's
    /// snippets).
    pub findings: &'a Findings,
    /// The input files in order.
    pub files: &'a [CheckedFile],
    /// Inputs that could not be checked.
    pub errors: &'a [InputError],
    /// Findings at or above this severity fail (JUnit failures; exit 1).
    pub fail_on: Severity,
    /// The rule set in force (JSON and SARIF name it).
    pub rules_info: &'a RulesInfo,
}

/// What a check counted: the one-line summary of every `check` and the `summary` of the JSON
/// report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Input files, read or not, one per entry of the JSON `results`: a directory counts its
    /// manifest files; a path that could not be read (a dangling symlink, a file removed while
    /// listed), and a nodes file or `--rules` set that could not be used, count too.
    pub files: usize,
    /// Documents checked.
    pub documents: usize,
    /// Findings of severity error.
    pub errors: usize,
    /// Findings of severity warning.
    pub warnings: usize,
    /// Findings of severity info.
    pub info: usize,
    /// Inputs (or documents) that could not be checked.
    pub input_errors: usize,
}

impl Summary {
    /// The counts of `report`.
    pub fn of(report: &Report<'_>) -> Summary {
        Summary {
            // Every entry of the JSON results: the inputs, the paths that could not be read,
            // and a nodes file or rule set that could not be used.
            files: entries(report).len(),
            documents: report.files.iter().map(|f| f.documents.len()).sum(),
            errors: report.findings.count(Severity::Error),
            warnings: report.findings.count(Severity::Warning),
            info: report.findings.count(Severity::Info),
            input_errors: report.errors.len(),
        }
    }

    /// `Summary: 3 documents in 1 file checked in 0.02s: 2 errors, 1 warning, 0 info`, and
    /// `; 1 input error` when an input could not be checked.
    pub fn line(&self, elapsed: std::time::Duration) -> String {
        let n = |count: usize, one: &str, many: &str| {
            format!("{count} {}", if count == 1 { one } else { many })
        };
        let mut line = format!(
            "Summary: {} in {} checked in {:.2}s: {}, {}, {} info",
            n(self.documents, "document", "documents"),
            n(self.files, "file", "files"),
            elapsed.as_secs_f64(),
            n(self.errors, "error", "errors"),
            n(self.warnings, "warning", "warnings"),
            self.info,
        );
        if self.input_errors > 0 {
            line.push_str(&format!(
                "; {}",
                n(self.input_errors, "input error", "input errors")
            ));
        }
        line
    }
}

/// Renders `report` in `format` as one string ([`write_report`] into memory); `color` only
/// affects [`Format::Text`].
pub fn render(format: Format, report: &Report<'_>, color: bool) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail, and every format writes UTF-8.
    let _ = write_report(format, report, color, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes `report` in `format` to `out`. Every report is written as it is produced, a finding
/// at a time as read back from [`Findings`], so a report of many findings is not built in
/// memory first (a JUnit report reads them twice: its suites open with their counts, and holds
/// one input's findings at a time).
///
/// # Errors
/// The writer's, or reading back the findings ([`Findings::iter`]).
pub fn write_report(
    format: Format,
    report: &Report<'_>,
    color: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        Format::Text => text(report, color, out),
        Format::Json => json_report(report, out),
        Format::Sarif => sarif(report, out),
        Format::Junit => junit(report, out),
        Format::Github => github(report, out),
    }
}

fn text(report: &Report<'_>, color: bool, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for stored in report.findings.iter() {
        let stored = stored?;
        out.write_all(finding_block(&stored.finding, stored.window.as_ref(), color).as_bytes())?;
    }
    Ok(())
}

/// Writes the report's input errors to `out` as the `Error: <message>` lines stderr shows,
/// uncoloured (a text report written to a file ends with them).
///
/// # Errors
/// The writer's.
pub fn write_error_lines(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for e in report.errors {
        writeln!(out, "Error: {}", e.message)?;
    }
    Ok(())
}

/// Writes `value` as pretty JSON and a line break to `out`, through a buffer; an error of the
/// writer keeps its kind (a closed pipe is told apart).
fn write_pretty(
    value: &impl serde::Serialize,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut buffered = std::io::BufWriter::new(out);
    serde_json::to_writer_pretty(&mut buffered, value).map_err(std::io::Error::from)?;
    buffered.write_all(b"\n")?;
    buffered.flush()
}

/// The `apiVersion` of the JSON reports (`check -o json`, `test -o json`); a change that
/// removes or renames a field gets a new version.
pub const REPORT_API_VERSION: &str = "policy.nvcre.nvidia.com/v1alpha1";

/// The `tool` object of the JSON reports.
pub fn tool_json() -> Value {
    json!({"name": "nvcre-policy", "version": env!("CARGO_PKG_VERSION")})
}

/// An input error as JSON: its message and, when known, line and column.
fn input_error_json(e: &InputError) -> Value {
    let mut o = Map::new();
    o.insert("message".into(), json!(e.message));
    if let Some(p) = e.pos {
        o.insert("line".into(), json!(p.line));
        o.insert("column".into(), json!(p.column));
    }
    Value::Object(o)
}

/// The findings of a report read back once, in order, shared by the parts of a report that
/// take them one run at a time (the JSON report's files).
type Cursor<'a> = std::cell::RefCell<std::iter::Peekable<crate::findings::Iter<'a>>>;

/// The findings of one input in the JSON report: the next findings of the cursor found in
/// `input` (none for a path never read), each as the [`Finding`] serializes, without its `file`
/// (the result names it). They are read back and converted one at a time as they are written.
/// (Findings come input by input, so one input's are one run.)
struct FileFindings<'f, 'a> {
    input: Option<usize>,
    cursor: &'f Cursor<'a>,
}

impl serde::Serialize for FileFindings<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut cursor = self.cursor.borrow_mut();
        let mut seq = s.serialize_seq(None)?;
        while let Some(next) =
            cursor.next_if(|n| n.as_ref().map_or(true, |n| Some(n.input) == self.input))
        {
            let f = next.map_err(S::Error::custom)?.finding;
            let mut v = serde_json::to_value(&f).map_err(S::Error::custom)?;
            if let Value::Object(o) = &mut v {
                o.shift_remove("file");
            }
            seq.serialize_element(&v)?;
        }
        seq.end()
    }
}

/// One entry of the reports that group by input (the JSON report's `results`, the JUnit
/// suites): a checked input with its errors, or a path that was not read with its own.
struct Entry<'a> {
    file: &'a str,
    /// The input's place among the checked inputs; `None` for a path that was not read.
    input: Option<usize>,
    /// The documents checked (none for a path that was not read).
    documents: &'a [CheckedDocument],
    errors: Vec<&'a InputError>,
}

/// The entries of `report`, in the order the paths were given: every checked input (a file
/// given twice is two entries, each with its own errors) and every path that could not be
/// read, each where it was given ([`Place`]); then one per other file with errors (rules,
/// nodes), by name.
fn entries<'a>(report: &Report<'a>) -> Vec<Entry<'a>> {
    let n = report.files.len();
    // The errors by place, in one pass (a directory of files that all fail has as many
    // errors as inputs).
    let mut of_input: Vec<Vec<&InputError>> = vec![Vec::new(); n];
    let mut unread: Vec<Vec<&InputError>> = vec![Vec::new(); n + 1];
    let mut other: Vec<&InputError> = Vec::new();
    for e in report.errors {
        match e.place {
            Place::Input(i) if i < n => of_input[i].push(e),
            Place::Unread(k) if k <= n => unread[k].push(e),
            // (An error of an input the report does not list is not lost.)
            _ => other.push(e),
        }
    }
    let of_path = |e: &'a InputError| Entry {
        file: &e.file,
        input: None,
        documents: &[],
        errors: vec![e],
    };
    let mut out: Vec<Entry<'a>> = Vec::new();
    for (i, (f, errors)) in report.files.iter().zip(of_input).enumerate() {
        out.extend(std::mem::take(&mut unread[i]).into_iter().map(of_path));
        out.push(Entry {
            file: &f.file,
            input: Some(i),
            documents: &f.documents,
            errors,
        });
    }
    out.extend(std::mem::take(&mut unread[n]).into_iter().map(of_path));
    let inputs = out.len();
    for e in other {
        match out[inputs..].iter_mut().find(|x| x.file == e.file) {
            Some(x) => x.errors.push(e),
            None => out.push(of_path(e)),
        }
    }
    out
}

/// One entry of the JSON report's `results`.
#[derive(serde::Serialize)]
struct FileResult<'f, 'a> {
    file: &'f str,
    documents: usize,
    findings: FileFindings<'f, 'a>,
    errors: Vec<Value>,
}

/// The JSON report's `results`: one entry per input ([`entries`]), then (never expected: every
/// finding names the input it was found in) an entry for each run of findings no input took,
/// so none is lost.
struct FileResults<'a> {
    entries: Vec<(&'a str, Option<usize>, usize, Vec<Value>)>,
    cursor: &'a Cursor<'a>,
}

impl serde::Serialize for FileResults<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        for (file, input, documents, errors) in &self.entries {
            seq.serialize_element(&FileResult {
                file,
                documents: *documents,
                findings: FileFindings {
                    input: *input,
                    cursor: self.cursor,
                },
                errors: errors.clone(),
            })?;
        }
        // (A finding that cannot be read back is taken by the next entry, whose findings then
        // fail with its error.)
        loop {
            let (file, input) = match self.cursor.borrow_mut().peek() {
                None => break,
                Some(Ok(next)) => (next.finding.file.clone(), Some(next.input)),
                Some(Err(_)) => (String::new(), None),
            };
            seq.serialize_element(&FileResult {
                file: &file,
                documents: 0,
                findings: FileFindings {
                    input,
                    cursor: self.cursor,
                },
                errors: Vec::new(),
            })?;
        }
        seq.end()
    }
}

/// The JSON report's `summary`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSummary {
    files: usize,
    documents: usize,
    errors: usize,
    warnings: usize,
    info: usize,
    input_errors: usize,
    fail_on: String,
    passed: bool,
}

/// The JSON report's envelope, in its field order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonEnvelope<'a> {
    api_version: &'static str,
    kind: &'static str,
    tool: Value,
    rules: &'a RulesInfo,
    results: FileResults<'a>,
    summary: JsonSummary,
}

/// `check -o json`: a versioned envelope with the results grouped by file (in input order;
/// a path that could not be read comes after them), each with its document count, findings and
/// input errors, and the summary. Written to `out` as it is serialized: the findings are read
/// back one at a time, not copied into a JSON tree first.
fn json_report(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let cursor: Cursor<'_> = std::cell::RefCell::new(report.findings.iter().peekable());
    let results = FileResults {
        entries: entries(report)
            .into_iter()
            .map(|e| {
                let errors = e.errors.into_iter().map(input_error_json).collect();
                (e.file, e.input, e.documents.len(), errors)
            })
            .collect(),
        cursor: &cursor,
    };
    let summary = Summary::of(report);
    let envelope = JsonEnvelope {
        api_version: REPORT_API_VERSION,
        kind: "CheckReport",
        tool: tool_json(),
        rules: report.rules_info,
        results,
        summary: JsonSummary {
            files: summary.files,
            documents: summary.documents,
            errors: summary.errors,
            warnings: summary.warnings,
            info: summary.info,
            input_errors: summary.input_errors,
            fail_on: report.fail_on.to_string(),
            passed: summary.input_errors == 0 && report.findings.at_or_above(report.fail_on) == 0,
        },
    };
    write_pretty(&envelope, out)
}

/// The SARIF level of a severity.
fn sarif_level(s: Severity) -> sarif::ResultLevel {
    match s {
        Severity::Error => sarif::ResultLevel::Error,
        Severity::Warning => sarif::ResultLevel::Warning,
        Severity::Info => sarif::ResultLevel::Note,
    }
}

/// A reported file's path as SARIF names it: the file as it is on disk (symbolic links, `.`
/// and `..` resolved), relative to the working directory where it is below it (`./a.yaml`,
/// `a.yaml`, `x/../a.yaml` and `$PWD/a.yaml` are one `a.yaml`, as code scanning resolves
/// paths against the checkout); a file elsewhere is a `file://` URI (a bare absolute or `../`
/// path is a relative reference, which readers resolve against a base they do not have).
fn sarif_uri(file: &str) -> String {
    use std::collections::HashMap;
    use std::path::{Component, Path, PathBuf};
    use std::sync::{Mutex, OnceLock};
    static CWD: OnceLock<Option<PathBuf>> = OnceLock::new();
    // One answer per file name: a report names the same files over and over.
    static SEEN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(uri) = seen.lock().ok().and_then(|m| m.get(file).cloned()) {
        return uri;
    }
    if file == "<stdin>" || file.is_empty() {
        return uri_reference(file);
    }
    let cwd = CWD.get_or_init(|| std::env::current_dir().and_then(std::fs::canonicalize).ok());
    // The file as it is on disk (symbolic links, `.` and `..` resolved), else the path with
    // `.` and `..` worked out by name.
    let absolute = std::fs::canonicalize(file).ok().or_else(|| {
        let joined = match cwd {
            Some(c) if Path::new(file).is_relative() => c.join(file),
            _ => PathBuf::from(file),
        };
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other.as_os_str()),
            }
        }
        out.is_absolute().then_some(out)
    });
    let uri = match (absolute, cwd) {
        (Some(abs), Some(c)) if abs.starts_with(c) && abs != *c => {
            let rel = abs.strip_prefix(c).unwrap_or(&abs);
            let parts: Vec<String> = rel
                .components()
                .map(|p| p.as_os_str().to_string_lossy().into_owned())
                .collect();
            uri_reference(&parts.join("/"))
        }
        (Some(abs), _) => {
            let parts: Vec<String> = abs
                .components()
                .filter(|p| !matches!(p, Component::RootDir))
                .map(|p| p.as_os_str().to_string_lossy().into_owned())
                .collect();
            format!(
                "file:///{}",
                uri_reference(&parts.join("/")).trim_start_matches("./")
            )
        }
        (None, _) => uri_reference(file),
    };
    if let Ok(mut m) = seen.lock() {
        m.insert(file.to_string(), uri.clone());
    }
    uri
}

/// A path as a URI reference: unreserved characters, `/` and a few sub-delimiters as written,
/// everything else percent-encoded (`<stdin>` → `%3Cstdin%3E`, a backslash `%5C`; on
/// Windows a backslash is a separator, `/`); `./` ahead of a first segment with a colon.
fn uri_reference(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    // A relative reference whose first segment holds a colon reads as a scheme (`k8s:run.yaml`
    // is scheme `k8s`); RFC 3986 (section 4.2) has it start with `./` instead.
    let first = path.split(['/', '\\']).next().unwrap_or("");
    if !path.starts_with('/') && first.contains(':') && !(cfg!(windows) && is_drive(first)) {
        out.push_str("./");
    }
    for c in path.chars() {
        // A separator on Windows; elsewhere a character of the name like any other.
        let c = if c == '\\' && cfg!(windows) { '/' } else { c };
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

/// True for a Windows drive (`C:`).
fn is_drive(segment: &str) -> bool {
    segment.len() == 2
        && segment.ends_with(':')
        && segment.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// SHA-256 of `parts` (each length-prefixed) as hex.
pub fn sha256_hex(parts: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(&(p.len() as u64).to_be_bytes());
        ctx.update(p.as_bytes());
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The key of a finding's `partialFingerprints`: the rule, the file, the document, the
/// object an emitted-object finding is about, and the field path (the line when there is no
/// path), not the message or the line, so code scanning follows an alert across runs when
/// lines above it move.
const FINGERPRINT_KEY: &str = "nvcreFinding/v1";

fn sarif_fingerprint(f: &Finding) -> String {
    let document = f.document.to_string();
    let line = f.line.map(|l| l.to_string()).unwrap_or_default();
    let at = f.field_path.as_deref().unwrap_or(&line);
    let file = sarif_uri(&f.file);
    match &f.object {
        // (Appended only when present: the other findings keep the fingerprints they had.)
        Some(object) => sha256_hex(&[&f.rule_id, &file, &document, at, object]),
        None => sha256_hex(&[&f.rule_id, &file, &document, at]),
    }
}

fn property_bag(pairs: &[(&str, Value)]) -> sarif::PropertyBag {
    sarif::PropertyBag::builder()
        .additional_properties(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .build()
}

fn text_message(text: &str) -> sarif::Message {
    sarif::Message::builder().text(text).build()
}

fn multiformat(text: String) -> sarif::MultiformatMessageString {
    sarif::MultiformatMessageString::builder()
        .text(text)
        .build()
}

fn physical_location(file: &str, pos: Option<(usize, usize)>) -> sarif::PhysicalLocation {
    let artifact = sarif::ArtifactLocation::builder()
        .uri(sarif_uri(file))
        .build();
    match pos {
        Some((line, column)) => sarif::PhysicalLocation::builder()
            .artifact_location(artifact)
            .region(
                sarif::Region::builder()
                    .start_line(line as i64)
                    .start_column(column as i64)
                    .build(),
            )
            .build(),
        None => sarif::PhysicalLocation::builder()
            .artifact_location(artifact)
            .build(),
    }
}

/// A rule as a SARIF reportingDescriptor: short and full description, help (how to read more)
/// and the default level.
fn sarif_rule(
    id: &str,
    description: Option<&str>,
    pack: &str,
    at: Option<String>,
    severity: Severity,
) -> sarif::ReportingDescriptor {
    let short = description.unwrap_or(id).to_string();
    let full = match &at {
        Some(at) => format!("{short} (pack {pack}, defined at {at})"),
        None => format!("{short} (pack {pack})"),
    };
    // A pipeline finding has no rule file: its explanation is why it matters and what to do.
    let help = if at.as_deref() == Some(nvcre_domain::BUILT_IN) {
        format!("{short}\nRun `nvcre-policy rules explain {id}` for why it matters and what to do.")
    } else {
        format!(
            "{short}\nRun `nvcre-policy rules explain {id}` for the rule's expression, message and a passing and a failing example."
        )
    };
    sarif::ReportingDescriptor::builder()
        .id(id)
        .short_description(multiformat(short))
        .full_description(multiformat(full))
        .help(multiformat(help))
        .default_configuration(
            sarif::ReportingConfiguration::builder()
                .level(json!(sarif_level(severity).to_string()))
                .build(),
        )
        .properties(property_bag(&[("pack", json!(pack))]))
        .build()
}

/// `value` serialized as it is, except the value at `path` (object keys, array indexes in
/// decimal), which is `with`'s serialization: a report's envelope built as JSON with its
/// findings written in place as they are read back.
struct Spliced<'a, T> {
    value: &'a Value,
    path: &'a [&'a str],
    with: &'a T,
}

impl<T: serde::Serialize> serde::Serialize for Spliced<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        let Some((at, rest)) = self.path.split_first() else {
            return self.with.serialize(s);
        };
        let inner = |value| Spliced {
            value,
            path: rest,
            with: self.with,
        };
        match self.value {
            Value::Object(map) => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    if k == at {
                        m.serialize_entry(k, &inner(v))?;
                    } else {
                        m.serialize_entry(k, v)?;
                    }
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for (i, v) in items.iter().enumerate() {
                    if at.parse() == Ok(i) {
                        seq.serialize_element(&inner(v))?;
                    } else {
                        seq.serialize_element(v)?;
                    }
                }
                seq.end()
            }
            v => v.serialize(s),
        }
    }
}

/// The SARIF results of a report's findings, made and written one at a time.
struct SarifResults<'a> {
    report: &'a Report<'a>,
    /// Rule indexes by id.
    index: &'a HashMap<String, usize>,
}

impl serde::Serialize for SarifResults<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = s.serialize_seq(Some(self.report.findings.len()))?;
        for stored in self.report.findings.iter() {
            let f = stored.map_err(S::Error::custom)?.finding;
            seq.serialize_element(&sarif_result(&f, self.index))?;
        }
        seq.end()
    }
}

/// One finding as a SARIF result.
fn sarif_result(f: &Finding, index: &HashMap<String, usize>) -> sarif::Result {
    let physical = physical_location(&f.file, f.line.zip(f.column));
    let location = match &f.field_path {
        Some(p) => sarif::Location::builder()
            .physical_location(physical)
            .logical_locations(vec![
                sarif::LogicalLocation::builder()
                    .fully_qualified_name(p)
                    .kind("member")
                    .build(),
            ])
            .build(),
        None => sarif::Location::builder()
            .physical_location(physical)
            .build(),
    };
    sarif::Result::builder()
        .rule_id(&f.rule_id)
        .rule_index(index.get(&f.rule_id).copied().unwrap_or(0) as i64)
        .level(sarif_level(f.severity))
        .message(text_message(&f.message))
        .locations(vec![location])
        .partial_fingerprints(std::collections::BTreeMap::from([(
            FINGERPRINT_KEY.to_string(),
            sarif_fingerprint(f),
        )]))
        .properties(property_bag(&[("document", json!(f.document))]))
        .build()
}

/// `check -o sarif`: one run, the rules as reportingDescriptors (also those of findings whose
/// id is not a rule of the set), the input errors as notifications; the results are written
/// as the findings are read back.
fn sarif(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut rules: Vec<sarif::ReportingDescriptor> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (pack, rule) in report.rules.rules() {
        index.insert(rule.id.clone(), rules.len());
        rules.push(sarif_rule(
            &rule.id,
            rule.description.as_deref(),
            &pack.name,
            Some(format!("{}:{}", pack.source.name, rule.pos.line)),
            rule.severity,
        ));
    }
    // Findings whose id is not a rule: the pipeline's own (described), or a match condition
    // that could not be evaluated.
    for stored in report.findings.iter() {
        let f = stored?.finding;
        if !index.contains_key(&f.rule_id) {
            index.insert(f.rule_id.clone(), rules.len());
            let built_in = nvcre_domain::built_in_rule(&f.rule_id);
            let description = match built_in {
                Some(b) => b.description.to_string(),
                None => format!("{} (pack {})", f.rule_id, f.pack),
            };
            rules.push(sarif_rule(
                &f.rule_id,
                Some(&description),
                &f.pack,
                built_in.map(|_| nvcre_domain::BUILT_IN.to_string()),
                built_in.map_or(f.severity, |b| b.severity),
            ));
        }
    }
    let notifications: Vec<sarif::Notification> = report
        .errors
        .iter()
        .map(|e| {
            sarif::Notification::builder()
                .level(json!("error"))
                .message(text_message(&e.message))
                .locations(vec![
                    sarif::Location::builder()
                        .physical_location(physical_location(
                            &e.file,
                            e.pos.map(|p| (p.line, p.column)),
                        ))
                        .build(),
                ])
                .build()
        })
        .collect();
    let driver = sarif::ToolComponent::builder()
        .name("nvcre-policy")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(rules)
        .properties(property_bag(&[
            ("rulesSource", json!(report.rules_info.source)),
            ("rulesDigest", json!(report.rules_info.digest())),
        ]))
        .build();
    let run = sarif::Run::builder()
        .tool(sarif::Tool::builder().driver(driver).build())
        .invocations(vec![
            sarif::Invocation::builder()
                // False whenever `check` exits 2: an input not read, or a rule not evaluated.
                .execution_successful(
                    report.errors.is_empty() && report.findings.rule_errors() == 0,
                )
                .tool_execution_notifications(notifications)
                .build(),
        ])
        .column_kind(json!("unicodeCodePoints"))
        .results(Vec::new())
        .build();
    let log = sarif::Sarif::builder()
        .schema("https://json.schemastore.org/sarif-2.1.0.json")
        .version(json!("2.1.0"))
        .runs(vec![run])
        .build();
    // The log without results (a few kilobytes: the rules), its results written in place.
    let log = serde_json::to_value(&log).map_err(std::io::Error::from)?;
    let results = SarifResults {
        report,
        index: &index,
    };
    let spliced = Spliced {
        value: &log,
        path: &["runs", "0", "results"],
        with: &results,
    };
    write_pretty(&spliced, out)
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
    printable(
        &format!("{loc}: {}[{}]: {}{path}", f.severity, f.rule_id, f.message),
        true,
    )
    .into_owned()
}

/// [`finding_summary`] with the severity coloured when `color`.
fn finding_summary_styled(f: &Finding, color: bool) -> String {
    if !color {
        return finding_summary(f);
    }
    let plain = finding_summary(f);
    let word = f.severity.to_string();
    let needle = format!(": {word}[");
    match plain.find(&needle) {
        Some(i) => format!(
            "{}: {}{}",
            &plain[..i],
            color::paint(&word, color::severity(&word), true),
            &plain[i + needle.len() - 1..]
        ),
        None => plain,
    }
}

/// One JUnit test case: a rule on a document, or the reading of an input.
#[derive(Debug)]
struct Case {
    name: String,
    classname: String,
    failures: Vec<String>,
    failure_message: Option<(String, Severity)>,
    output: Vec<String>,
    /// An `<error>`: its message and type (`input` for an input that could not be read,
    /// `rule-error` for a rule that could not be evaluated, whose findings are the `failures`).
    error: Option<(String, String)>,
}

/// Where the findings of one input are kept ([`crate::findings::Iter::offset`]), by document,
/// each document's in the order found.
type FileFindingIndex = HashMap<usize, Vec<u64>>;

/// The test cases of `file` in order, each handed to `each` as it is made: one per error of
/// the input (`read`), then, for each document, one per rule that applies to it and per other
/// rule with a finding there. Each document's findings are read back (`findings`) when its
/// cases are made.
fn junit_cases(
    report: &Report<'_>,
    by_document: &FileFindingIndex,
    findings: &mut crate::findings::Reader<'_>,
    file: &Entry<'_>,
    each: &mut dyn FnMut(&Case) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for e in &file.errors {
        each(&Case {
            name: "read".into(),
            classname: file.file.to_string(),
            failures: Vec::new(),
            failure_message: None,
            output: Vec::new(),
            error: Some((e.message.clone(), "input".to_string())),
        })?;
    }
    for doc in file.documents {
        let findings: Vec<Finding> = match (by_document.get(&doc.index), file.input) {
            (Some(at), Some(input)) => at
                .iter()
                .map(|at| findings.read(*at, input).map(|s| s.finding))
                .collect::<std::io::Result<_>>()?,
            _ => Vec::new(),
        };
        let mut extra: Vec<&str> = Vec::new();
        for f in &findings {
            if !doc.rules.contains(&f.rule_id) && !extra.contains(&f.rule_id.as_str()) {
                extra.push(&f.rule_id);
            }
        }
        // Counted from one, as every message counts documents ("document 2" is the second).
        let classname = format!("{} document {}", file.file, doc.index + 1);
        for id in doc.rules.iter().map(String::as_str).chain(extra) {
            let mut case = Case {
                name: id.to_string(),
                classname: classname.clone(),
                failures: Vec::new(),
                failure_message: None,
                output: Vec::new(),
                error: None,
            };
            for f in findings.iter().filter(|f| f.rule_id == id) {
                // A rule that could not be evaluated is an error of the test, not a failure
                // of the document: JUnit's `<error>`, with every finding of the rule.
                if f.rule_error {
                    case.error
                        .get_or_insert_with(|| (f.message.clone(), "rule-error".to_string()));
                }
                if f.rule_error || f.severity >= report.fail_on {
                    case.failure_message
                        .get_or_insert_with(|| (f.message.clone(), f.severity));
                    case.failures.push(finding_summary(f));
                } else {
                    case.output.push(finding_summary(f));
                }
            }
            each(&case)?;
        }
    }
    Ok(())
}

/// The counts that open a JUnit suite, and the report (`testsuites`).
#[derive(Debug, Clone, Copy, Default)]
struct JunitCounts {
    tests: usize,
    failures: usize,
    errors: usize,
}

impl JunitCounts {
    fn add(&mut self, case: &Case) {
        self.tests += 1;
        self.errors += usize::from(case.error.is_some());
        self.failures += usize::from(case.error.is_none() && case.failure_message.is_some());
    }
}

/// The findings of a report read back an input at a time, in order, to learn where each
/// document's are kept.
struct InputFindings<'a> {
    iter: crate::findings::Iter<'a>,
    /// The finding read after the last input's, and where it is kept.
    next: Option<(u64, std::io::Result<crate::findings::Stored>)>,
}

impl<'a> InputFindings<'a> {
    fn new(findings: &'a Findings) -> InputFindings<'a> {
        InputFindings {
            iter: findings.iter(),
            next: None,
        }
    }

    /// Where the next findings of `input` (none for a path never read) are kept, by document.
    fn take(&mut self, input: Option<usize>) -> std::io::Result<FileFindingIndex> {
        let mut by_document = FileFindingIndex::new();
        loop {
            let (at, next) = match self.next.take() {
                Some(next) => next,
                None => {
                    let at = self.iter.offset();
                    match self.iter.next() {
                        Some(next) => (at, next),
                        None => break,
                    }
                }
            };
            match next {
                Ok(n) if Some(n.input) == input => {
                    by_document.entry(n.finding.document).or_default().push(at);
                }
                Ok(n) => {
                    self.next = Some((at, Ok(n)));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(by_document)
    }
}

/// A JUnit report written one element at a time, as quick-junit writes a whole `Report` (the
/// same events through quick-xml's indenting writer, every text through quick-junit's
/// `XmlString`, which drops ANSI escapes and the characters XML cannot hold), so that a report
/// of millions of test cases is not held in memory.
struct JunitXml<W: std::io::Write>(quick_xml::Writer<W>);

impl<W: std::io::Write> JunitXml<W> {
    fn start(out: W, name: &str, totals: JunitCounts) -> std::io::Result<Self> {
        use quick_xml::events::{BytesDecl, BytesStart, Event};
        let mut w = quick_xml::Writer::new_with_indent(out, b' ', 4);
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        let mut tag = BytesStart::new("testsuites");
        push_text_attribute(&mut tag, "name", name);
        tag.extend_attributes([
            ("tests", totals.tests.to_string().as_str()),
            ("skipped", "0"),
            ("failures", totals.failures.to_string().as_str()),
            ("errors", totals.errors.to_string().as_str()),
        ]);
        w.write_event(Event::Start(tag))?;
        Ok(JunitXml(w))
    }

    /// Opens a suite of `counts.tests` cases; a suite of none is one empty element.
    fn suite(&mut self, name: &str, counts: JunitCounts) -> std::io::Result<()> {
        use quick_xml::events::{BytesStart, Event};
        let mut tag = BytesStart::new("testsuite");
        push_text_attribute(&mut tag, "name", name);
        tag.extend_attributes([
            ("tests", counts.tests.to_string().as_str()),
            ("skipped", "0"),
            ("errors", counts.errors.to_string().as_str()),
            ("failures", counts.failures.to_string().as_str()),
        ]);
        self.0.write_event(if counts.tests == 0 {
            Event::Empty(tag)
        } else {
            Event::Start(tag)
        })
    }

    fn case(&mut self, c: &Case) -> std::io::Result<()> {
        use quick_xml::events::{BytesStart, Event};
        let mut tag = BytesStart::new("testcase");
        push_text_attribute(&mut tag, "name", &c.name);
        push_text_attribute(&mut tag, "classname", &c.classname);
        let status = if let Some((message, ty)) = &c.error {
            let description = (!c.failures.is_empty()).then(|| c.failures.join("\n"));
            Some(("error", message.clone(), ty.clone(), description))
        } else {
            c.failure_message.as_ref().map(|(message, severity)| {
                let description = Some(c.failures.join("\n"));
                (
                    "failure",
                    message.clone(),
                    severity.to_string(),
                    description,
                )
            })
        };
        if status.is_none() && c.output.is_empty() {
            return self.0.write_event(Event::Empty(tag));
        }
        self.0.write_event(Event::Start(tag))?;
        if let Some((name, message, ty, description)) = status {
            let mut tag = BytesStart::new(name);
            push_text_attribute(&mut tag, "message", &message);
            push_text_attribute(&mut tag, "type", &ty);
            match description {
                Some(d) => self.text_element(tag, &d)?,
                None => self.0.write_event(Event::Empty(tag))?,
            }
        }
        if !c.output.is_empty() {
            self.text_element(BytesStart::new("system-out"), &c.output.join("\n"))?;
        }
        self.end("testcase")
    }

    /// An element holding only `text`.
    fn text_element(
        &mut self,
        tag: quick_xml::events::BytesStart<'_>,
        text: &str,
    ) -> std::io::Result<()> {
        use quick_xml::events::{BytesText, Event};
        let end = tag.to_end().into_owned();
        self.0.write_event(Event::Start(tag))?;
        self.0
            .write_event(Event::Text(BytesText::new(xml_text(text).as_str())))?;
        self.0.write_event(Event::End(end))
    }

    fn end(&mut self, name: &str) -> std::io::Result<()> {
        use quick_xml::events::{BytesEnd, Event};
        self.0.write_event(Event::End(BytesEnd::new(name)))
    }

    /// Closes the suite opened with `counts` ([`JunitXml::suite`]).
    fn suite_end(&mut self, counts: JunitCounts) -> std::io::Result<()> {
        if counts.tests == 0 {
            return Ok(());
        }
        self.end("testsuite")
    }

    /// Closes the report and ends it with a line break; returns the writer.
    fn finish(mut self) -> std::io::Result<W> {
        self.end("testsuites")?;
        self.0.write_event(quick_xml::events::Event::Eof)?;
        self.0.write_indent()?;
        Ok(self.0.into_inner())
    }
}

/// `check -o junit`, written to `out` one test case at a time. The counts that open the report
/// and each suite come from a first pass over the findings; both passes hold the findings of
/// one input at a time, never the report.
fn junit(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let entries = entries(report);
    let mut reader = report.findings.reader();
    let mut findings = InputFindings::new(report.findings);
    let mut counts = Vec::with_capacity(entries.len());
    let mut totals = JunitCounts::default();
    for file in &entries {
        let by_document = findings.take(file.input)?;
        let mut c = JunitCounts::default();
        junit_cases(report, &by_document, &mut reader, file, &mut |case| {
            c.add(case);
            totals.add(case);
            Ok(())
        })?;
        counts.push(c);
    }
    let mut xml = JunitXml::start(std::io::BufWriter::new(out), "nvcre-policy", totals)?;
    let mut findings = InputFindings::new(report.findings);
    for (file, c) in entries.iter().zip(counts) {
        let by_document = findings.take(file.input)?;
        xml.suite(file.file, c)?;
        junit_cases(report, &by_document, &mut reader, file, &mut |case| {
            xml.case(case)
        })?;
        xml.suite_end(c)?;
    }
    xml.finish()?.flush()
}

/// `text` as XML 1.0 can hold it: its control characters written as escapes ([`printable`];
/// quick-junit's [`quick_junit::XmlString`] would drop them, and with an ESC the characters
/// after it), and without U+FFFE and U+FFFF, which XML cannot hold either and quick-junit keeps
/// (a file name with one made a report no XML reader would parse).
fn xml_text(text: &str) -> quick_junit::XmlString {
    let text = printable(text, true);
    if text.contains(['\u{fffe}', '\u{ffff}']) {
        quick_junit::XmlString::new(text.replace(['\u{fffe}', '\u{ffff}'], ""))
    } else {
        quick_junit::XmlString::new(text)
    }
}

/// Adds attribute `key` = `value` (read as [`xml_text`]) to `tag`, escaped for an attribute:
/// a line break as a character reference, which a reader keeps, where a literal one is
/// read back as a space (XML's attribute-value normalisation) and a multi-line message would
/// reach the CI's test view on one line.
fn push_text_attribute(tag: &mut quick_xml::events::BytesStart<'_>, key: &str, value: &str) {
    let value = xml_text(value);
    // `xml_text` has escaped every other control character.
    let escaped = quick_xml::escape::escape(value.as_str()).replace('\n', "&#10;");
    tag.push_attribute((key.as_bytes(), escaped.as_bytes()));
}

/// GitHub's escaping of a workflow command's message.
fn github_data(s: &str) -> String {
    let encoded = s
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    // The other control characters as escapes: the Actions log shows ANSI sequences.
    printable(&encoded, false).into_owned()
}

/// GitHub's escaping of a workflow command's property value.
fn github_property(s: &str) -> String {
    github_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `check -o github`: one workflow command per finding, then one per input error.
fn github(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    for stored in report.findings.iter() {
        let f = stored?.finding;
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
        writeln!(
            out,
            "::{level} {}::{}",
            props.join(","),
            github_data(&f.message)
        )?;
    }
    for e in report.errors {
        let at = e
            .pos
            .map(|p| format!(",line={},col={}", p.line, p.column))
            .unwrap_or_default();
        writeln!(
            out,
            "::error file={}{at},title=nvcre-policy::{}",
            github_property(&e.file),
            github_data(&e.message)
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The underline covers the value at the column: a flow scalar to its `,` / `}` / `]`, a
    /// quoted scalar to its quote, a flow collection to its bracket, never a comment.
    #[test]
    fn the_underline_spans_the_value_alone() {
        let cases = [
            (
                "    - {name: a, env: [{name: X, value: ",
                "efa}], resources: {}}",
                "efa",
            ),
            ("  runtimeRef: {name: ", "rt, kind: TrainingRuntime}", "rt"),
            ("  image: ", "nvcr.io/x:1 # pinned", "nvcr.io/x:1"),
            ("  image: ", "\"a, b} c\" # q", "\"a, b} c\""),
            ("  x: {a: ", "'it''s, here'}", "'it''s, here'"),
            (
                "  limits: ",
                "{cpu: \"1}\", gpu: [1, 2]} # c",
                "{cpu: \"1}\", gpu: [1, 2]}",
            ),
            ("  open: ", "[a, b,", "[a, b,"),
            ("  url: ", "http://h#frag", "http://h#frag"),
            ("  k: \"{\" ", "v, w", "v, w"),
            ("  e: ", "", ""),
        ];
        for (before, rest, want) in cases {
            assert_eq!(
                value_extent(before, rest),
                want.len().max(1),
                "{before}|{rest}"
            );
        }
    }

    fn finding(file: &str, document: usize, line: Option<usize>, severity: Severity) -> Finding {
        Finding {
            rule_id: format!("r-{document}"),
            pack: "p".into(),
            severity,
            message: format!("message of {file} {document}"),
            file: file.into(),
            document,
            object: None,
            field_path: Some("spec.x".into()),
            line,
            column: line.map(|_| 3),
            rule_file: "rules/p.yaml".into(),
            rule_line: 4,
            stage: None,
            rule_error: false,
            at_key: false,
        }
    }

    /// Findings kept in memory and findings gone to the temporary file give the same report
    /// in every format; a finding naming no checked file still has a result of its own.
    #[test]
    fn every_report_is_the_same_when_findings_went_to_a_file() {
        let rules = nvcre_domain::default_rules().expect("the rules load");
        let info = RulesInfo::of(None).expect("the rules' identity");
        let files: Vec<CheckedFile> = ["a.yaml", "b.yaml"]
            .iter()
            .map(|f| CheckedFile {
                file: f.to_string(),
                documents: (0..40)
                    .map(|index| CheckedDocument {
                        index,
                        rules: Arc::new(vec![format!("r-{index}")]),
                    })
                    .collect(),
            })
            .collect();
        let window = Window {
            first_line: 1,
            text: "a: 1\nb: 2\nc: 3\n".into(),
        };
        let (mut memory, mut file) = (Findings::default(), Findings::with_limit(500));
        let inputs = [("a.yaml", 40), ("b.yaml", 40), ("elsewhere.yaml", 2)];
        for (input, (name, n)) in inputs.into_iter().enumerate() {
            for d in 0..n {
                let sev = [Severity::Error, Severity::Warning, Severity::Info][d % 3];
                let f = finding(name, d, d.is_multiple_of(2).then_some(2), sev);
                let w = f.line.map(|_| &window);
                memory.push_finding(input, &f, w);
                file.push_finding(input, &f, w);
            }
        }
        assert!(file.spilled() && !memory.spilled());
        let errors = vec![InputError {
            place: Place::Input(1),
            ..InputError::new("b.yaml".into(), "b.yaml: bad".into())
        }];
        let report = |findings| Report {
            rules: &rules,
            findings,
            files: &files,
            errors: &errors,
            fail_on: Severity::Warning,
            rules_info: &info,
        };
        for format in [
            Format::Text,
            Format::Json,
            Format::Sarif,
            Format::Junit,
            Format::Github,
        ] {
            assert_eq!(
                render(format, &report(&file), false),
                render(format, &report(&memory), false),
                "{format:?}"
            );
        }
        let json: Value =
            serde_json::from_str(&render(Format::Json, &report(&file), false)).expect("JSON");
        let results: Vec<(&str, usize)> = json["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                let n = r["findings"].as_array().map_or(0, Vec::len);
                (r["file"].as_str().unwrap_or_default(), n)
            })
            .collect();
        assert_eq!(
            results,
            [("a.yaml", 40), ("b.yaml", 40), ("elsewhere.yaml", 2)]
        );
        assert_eq!(json["summary"]["errors"], 29);
        assert_eq!(json["summary"]["passed"], false);
    }

    /// Entries follow the order the paths were given: paths that could not be read where they
    /// were, each input with its own errors (a file given twice too), then the other files'
    /// errors by name; an error of an input the report does not list still has an entry.
    #[test]
    fn entries_are_the_inputs_and_unread_paths_in_order() {
        let rules = nvcre_domain::default_rules().expect("the rules load");
        let info = RulesInfo::of(None).expect("the rules' identity");
        let files: Vec<CheckedFile> = ["a.yaml", "a.yaml"]
            .iter()
            .map(|f| CheckedFile {
                file: f.to_string(),
                documents: Vec::new(),
            })
            .collect();
        let at = |place, file: &str, message: &str| InputError {
            place,
            ..InputError::new(file.into(), message.into())
        };
        let errors = vec![
            at(Place::Other, "rules/x.yaml", "x 1"),
            at(Place::Input(1), "a.yaml", "second a"),
            at(Place::Unread(1), "gone.yaml", "gone 1"),
            at(Place::Unread(0), "first.yaml", "first"),
            at(Place::Unread(1), "gone.yaml", "gone 2"),
            at(Place::Unread(2), "last.yaml", "last"),
            at(Place::Other, "rules/x.yaml", "x 2"),
            at(Place::Input(7), "a.yaml", "of no input"),
        ];
        let findings = Findings::default();
        let report = Report {
            rules: &rules,
            findings: &findings,
            files: &files,
            errors: &errors,
            fail_on: Severity::Error,
            rules_info: &info,
        };
        let got: Vec<(&str, Option<usize>, Vec<&str>)> = entries(&report)
            .iter()
            .map(|e| {
                let messages = e.errors.iter().map(|x| x.message.as_str()).collect();
                (e.file, e.input, messages)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("first.yaml", None, vec!["first"]),
                ("a.yaml", Some(0), vec![]),
                ("gone.yaml", None, vec!["gone 1"]),
                ("gone.yaml", None, vec!["gone 2"]),
                ("a.yaml", Some(1), vec!["second a"]),
                ("last.yaml", None, vec!["last"]),
                ("rules/x.yaml", None, vec!["x 1", "x 2"]),
                ("a.yaml", None, vec!["of no input"]),
            ]
        );
    }

    /// The JUnit report as quick-junit writes a whole `Report` of `suites`.
    fn junit_whole(suites: &[(String, Vec<Case>)]) -> String {
        // The texts as the streamed report writes them: control characters escaped.
        let p = |s: &str| printable(s, true).into_owned();
        let mut out = quick_junit::Report::new("nvcre-policy");
        for (name, cases) in suites {
            let mut suite = quick_junit::TestSuite::new(p(name));
            for c in cases {
                let status = if let Some((e, ty)) = &c.error {
                    let mut st = quick_junit::TestCaseStatus::non_success(
                        quick_junit::NonSuccessKind::Error,
                    );
                    st.set_message(p(e)).set_type(p(ty));
                    if !c.failures.is_empty() {
                        st.set_description(p(&c.failures.join("\n")));
                    }
                    st
                } else if let Some((message, severity)) = &c.failure_message {
                    let mut st = quick_junit::TestCaseStatus::non_success(
                        quick_junit::NonSuccessKind::Failure,
                    );
                    st.set_message(p(message))
                        .set_type(severity.to_string())
                        .set_description(p(&c.failures.join("\n")));
                    st
                } else {
                    quick_junit::TestCaseStatus::success()
                };
                let mut case = quick_junit::TestCase::new(p(&c.name), status);
                case.set_classname(p(&c.classname));
                if !c.output.is_empty() {
                    case.set_system_out(p(&c.output.join("\n")));
                }
                suite.add_test_case(case);
            }
            out.add_test_suite(suite);
        }
        out.to_string().expect("serializes")
    }

    /// The JUnit report written a case at a time ([`JunitXml`]).
    fn junit_streamed(suites: &[(String, Vec<Case>)]) -> String {
        let mut totals = JunitCounts::default();
        for c in suites.iter().flat_map(|(_, cases)| cases) {
            totals.add(c);
        }
        let mut xml = JunitXml::start(Vec::new(), "nvcre-policy", totals).expect("writes");
        for (name, cases) in suites {
            let mut counts = JunitCounts::default();
            cases.iter().for_each(|c| counts.add(c));
            xml.suite(name, counts).expect("writes");
            for c in cases {
                xml.case(c).expect("writes");
            }
            xml.suite_end(counts).expect("writes");
        }
        String::from_utf8(xml.finish().expect("writes")).expect("UTF-8")
    }

    /// Text with what XML and JUnit readers trip on: markup characters, line breaks, ANSI
    /// escapes, control characters XML cannot hold, and non-ASCII.
    fn tricky() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::strategy::Strategy;
        proptest::collection::vec(
            proptest::prop_oneof![
                proptest::string::string_regex("[a-z0-9 .:_-]{0,8}").expect("regex"),
                proptest::sample::select(vec![
                    "<",
                    ">",
                    "&",
                    "\"",
                    "'",
                    "\n",
                    "\r\n",
                    "\t",
                    "\u{1b}[31m",
                    "\u{1b}[0m",
                    "\u{0}",
                    "\u{7}",
                    "\u{b}",
                    "\u{1f}",
                    "\u{7f}",
                    "é",
                    "→",
                    "]]>",
                ])
                .prop_map(str::to_string),
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    /// `xml` with each line break inside an attribute value (between a `="` and its `"`)
    /// written as `&#10;`.
    fn literal_attribute_breaks(xml: &str) -> String {
        let mut out = String::with_capacity(xml.len());
        let mut in_tag = false;
        let mut in_value = false;
        for c in xml.chars() {
            match c {
                '<' if !in_value => in_tag = true,
                '>' if !in_value => in_tag = false,
                '"' if in_tag => in_value = !in_value,
                '\n' if in_value => {
                    out.push_str("&#10;");
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }

    fn case() -> impl proptest::strategy::Strategy<Value = Case> {
        use proptest::prelude::*;
        let severity = prop_oneof![
            Just(Severity::Info),
            Just(Severity::Warning),
            Just(Severity::Error)
        ];
        (
            tricky(),
            tricky(),
            proptest::collection::vec(tricky(), 0..3),
            proptest::option::of((tricky(), severity)),
            proptest::collection::vec(tricky(), 0..3),
            proptest::option::of((tricky(), tricky())),
        )
            .prop_map(
                |(name, classname, failures, failure_message, output, error)| Case {
                    name,
                    classname,
                    failures,
                    failure_message,
                    output,
                    error,
                },
            )
    }

    proptest::proptest! {
        /// The JUnit report written a test case at a time is byte for byte the report
        /// quick-junit writes whole, for any names, messages and outputs, but for the line
        /// breaks in attributes, which quick-junit writes literally (a reader takes them for
        /// spaces) and we as `&#10;`.
        #[test]
        fn junit_written_a_case_at_a_time_is_quick_junits_report(
            suites in proptest::collection::vec(
                (tricky(), proptest::collection::vec(case(), 0..4)),
                0..4,
            )
        ) {
            proptest::prop_assert_eq!(
                junit_streamed(&suites),
                literal_attribute_breaks(&junit_whole(&suites))
            );
        }
    }

    /// U+FFFE and U+FFFF, which XML cannot hold and quick-junit keeps, are dropped; the
    /// control characters are written as escapes (quick-junit dropped them, and with an ESC
    /// the characters after it): the report parses.
    #[test]
    fn junit_drops_the_characters_xml_cannot_hold() {
        let case = Case {
            name: "r\u{fffe}1".into(),
            classname: "x\u{ffff}.yaml\u{7} document 0".into(),
            failures: vec!["x\u{fffe}.yaml:1:1: bad".into()],
            failure_message: Some(("bad \u{ffff}".into(), Severity::Error)),
            output: Vec::new(),
            error: None,
        };
        let xml = junit_streamed(&[("x\u{fffe}.yaml".to_string(), vec![case])]);
        let report = quick_junit::Report::deserialize_from_str(&xml).expect("parses");
        let suite = &report.test_suites[0];
        assert_eq!(suite.name.as_str(), "x.yaml");
        assert_eq!(suite.test_cases[0].name.as_str(), "r1");
        assert_eq!(
            suite.test_cases[0].classname.as_ref().map(|c| c.as_str()),
            Some("x.yaml\\u{7} document 0")
        );
        match &suite.test_cases[0].status {
            quick_junit::TestCaseStatus::NonSuccess {
                message,
                description,
                ..
            } => {
                assert_eq!(message.as_ref().map(|m| m.as_str()), Some("bad "));
                assert_eq!(
                    description.as_ref().map(|d| d.as_str()),
                    Some("x.yaml:1:1: bad")
                );
            }
            other => panic!("a failure, not {other:?}"),
        }
    }

    /// Control characters (but the tab, and the line feed when kept) and bidirectional
    /// formatting characters are written as escapes; the rest is borrowed as it is.
    #[test]
    fn printable_escapes_what_a_terminal_would_act_on() {
        let text = "a\u{1b}]0;t\u{7}b\r\nc\td\u{202e}e\u{85}é";
        assert_eq!(
            printable(text, true),
            "a\\u{1b}]0;t\\u{7}b\\r\nc\td\\u{202e}e\\u{85}é"
        );
        assert_eq!(
            printable(text, false),
            "a\\u{1b}]0;t\\u{7}b\\r\\nc\td\\u{202e}e\\u{85}é"
        );
        assert_eq!(
            printable("a\u{200f}b\u{61c}c\u{2028}d", true),
            "a\\u{200f}b\\u{61c}c\\u{2028}d"
        );
        assert!(matches!(
            printable("plain → text\twith tab", false),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn junit_attributes_keep_line_breaks_as_character_references() {
        let mut tag = quick_xml::events::BytesStart::new("failure");
        push_text_attribute(&mut tag, "message", "a <b> & \"c\"\nd\te\r\u{1b}[0m");
        let mut w = quick_xml::Writer::new(Vec::new());
        w.write_event(quick_xml::events::Event::Empty(tag))
            .expect("write");
        let xml = String::from_utf8(w.into_inner()).expect("utf8");
        assert_eq!(
            xml,
            "<failure message=\"a &lt;b&gt; &amp; &quot;c&quot;&#10;de\\r\\u{1b}[0m\"/>"
        );
        // Read back (attribute-value normalisation turns a literal line break into a space),
        // the attribute is the text as written.
        let mut reader = quick_xml::Reader::from_str(&xml);
        let quick_xml::events::Event::Empty(e) = reader.read_event().expect("read") else {
            panic!("one empty element: {xml}");
        };
        let value = e
            .try_get_attribute("message")
            .expect("attribute")
            .expect("present")
            .normalized_value(quick_xml::XmlVersion::Explicit1_0)
            .expect("normalize")
            .into_owned();
        assert_eq!(value, "a <b> & \"c\"\nde\\r\\u{1b}[0m");
    }

    #[test]
    fn github_escapes_data_and_properties() {
        assert_eq!(github_data("100% a\r\nb: c, d"), "100%25 a%0D%0Ab: c, d");
        assert_eq!(github_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(github_data("a\u{1b}[2Jb\tc"), "a\\u{1b}[2Jb\tc");
    }

    #[test]
    fn sarif_uris_are_relative_to_the_working_directory_or_file_uris() {
        let cwd = std::env::current_dir().expect("cwd");
        let inside = cwd.join("dir/a b.yaml");
        for spelling in [
            "dir/a b.yaml",
            "./dir/a b.yaml",
            "dir/./a b.yaml",
            "dir/../dir/a b.yaml",
        ] {
            assert_eq!(sarif_uri(spelling), "dir/a%20b.yaml", "{spelling}");
        }
        assert_eq!(sarif_uri(&inside.to_string_lossy()), "dir/a%20b.yaml");
        if cfg!(unix) && !cwd.starts_with("/nowhere") {
            assert_eq!(sarif_uri("/nowhere/x.yaml"), "file:///nowhere/x.yaml");
        }
        assert_eq!(sarif_uri("<stdin>"), "%3Cstdin%3E");
        // Above the working directory: a file URI, not a `../` reference.
        let up = std::fs::canonicalize(&cwd)
            .expect("cwd")
            .parent()
            .map(|p| p.join("up.yaml"))
            .expect("parent");
        assert_eq!(sarif_uri("../up.yaml"), format!("file://{}", up.display()));
    }

    #[test]
    fn uri_references_keep_paths_and_encode_the_rest() {
        assert_eq!(
            uri_reference("examples/run a.yaml"),
            "examples/run%20a.yaml"
        );
        assert_eq!(uri_reference("<stdin>"), "%3Cstdin%3E");
        assert_eq!(uri_reference("k8s:run.yaml"), "./k8s:run.yaml");
        assert_eq!(uri_reference("a/k8s:run.yaml"), "a/k8s:run.yaml");
        assert_eq!(uri_reference("/abs/k8s:run.yaml"), "/abs/k8s:run.yaml");
        if cfg!(windows) {
            assert_eq!(uri_reference("C:\\x\\é.yaml"), "C:/x/%C3%A9.yaml");
        } else {
            // A backslash is a character of a file's name, not a separator.
            assert_eq!(uri_reference("a\\b.yaml"), "a%5Cb.yaml");
        }
    }
}
