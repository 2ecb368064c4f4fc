//! Printing findings and errors to stderr.

use std::io::IsTerminal;

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme, NamedSource, SourceSpan};
use nvcre_engine::{Finding, Source};

/// `Error: <message>` on stderr.
pub fn error_line(message: &str) {
    eprintln!("Error: {message}");
}

/// `Warning: <message>` on stderr.
pub fn warning_line(message: &str) {
    eprintln!("Warning: {message}");
}

/// The one-line form of a finding: `[file:line:col: ]<message>`, the message prefixed with its
/// field path unless it already starts with it.
pub fn finding_text(f: &Finding) -> String {
    let mut s = String::new();
    if let (Some(l), Some(c)) = (f.line, f.column) {
        s.push_str(&format!("{}:{l}:{c}: ", f.file));
    }
    match &f.field_path {
        Some(p) if !f.message.starts_with(p.as_str()) && !f.message.contains(": ") => {
            s.push_str(&format!("{p}: {}", f.message));
        }
        _ => s.push_str(&f.message),
    }
    s
}

/// Prints [`finding_text`] on stderr.
pub fn finding_line(f: &Finding) {
    eprintln!("{}", finding_text(f));
}

#[derive(Debug)]
struct Snippet {
    message: String,
    src: NamedSource<String>,
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
/// underlined when the source is known. Colour only when `color`.
pub fn finding_block(f: &Finding, source: Option<&Source>, color: bool) -> String {
    let mut out = String::new();
    let loc = match (f.line, f.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", f.file),
        _ => f.file.clone(),
    };
    let path = f
        .field_path
        .as_deref()
        .map(|p| format!(" ({p})"))
        .unwrap_or_default();
    out.push_str(&format!(
        "{loc}: {}[{}]: {}{path}\n",
        f.severity, f.rule_id, f.message
    ));
    if let (Some(src), Some(pos)) = (source, f.pos()) {
        if src.line_text(pos.line).is_some() {
            let start = src.offset_of(pos);
            let line_end = src.text[start..]
                .find('\n')
                .map(|i| start + i)
                .unwrap_or(src.text.len());
            let len = src.text[start..line_end].trim_end().len().max(1);
            let snippet = Snippet {
                message: f.message.clone(),
                src: NamedSource::new(&f.file, src.text.clone()),
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
    }
    out
}

/// True when stderr is a terminal (colour on by default).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}
