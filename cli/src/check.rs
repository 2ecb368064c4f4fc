//! `nvcre-policy check`: findings for every WorkloadRun and Workflow document of the inputs, in
//! one or more report formats.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use nvcre_domain::{CheckRequest, check_document};
use nvcre_engine::{Finding, RuleSet, Severity, Source, parse_documents_lenient};

use crate::input;
use crate::report::{self, CheckedDocument, CheckedFile, Format, InputError, Report};

/// One `-o FORMAT[=PATH]`: a format, written to PATH or (without one) to standard output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The report format.
    pub format: Format,
    /// Where to write it; `None` is standard output.
    pub path: Option<PathBuf>,
}

/// Parses `FORMAT` or `FORMAT=PATH`.
fn parse_output(s: &str) -> Result<Output, String> {
    let (name, path) = match s.split_once('=') {
        Some((_, "")) => return Err(format!("{s:?}: the path after '=' is empty")),
        Some((n, p)) => (n, Some(PathBuf::from(p))),
        None => (s, None),
    };
    let format = Format::from_str(name, true).map_err(|_| {
        format!("unknown format {name:?}: expected one of text, json, sarif, junit, github")
    })?;
    Ok(Output { format, path })
}

/// The lowest severity that fails a check (exit 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Only error findings fail.
    Error,
    /// Warning and error findings fail.
    Warning,
}

impl FailOn {
    /// The severity threshold.
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
        }
    }
}

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    nodes: input::NodeArgs,
    /// Report format (text, json, sarif, junit, github), to PATH when given, else to standard
    /// output. Repeat for several formats; at most one may use standard output. Default: text.
    #[arg(short = 'o', long = "output", value_name = "FORMAT[=PATH]", value_parser = parse_output)]
    outputs: Vec<Output>,
    /// Exit 1 when a finding at or above this severity exists.
    #[arg(long = "fail-on", value_enum, default_value = "error")]
    fail_on: FailOn,
    /// Never colour the text output (also: the NO_COLOR environment variable). Text is
    /// coloured only when standard output is a terminal.
    #[arg(long = "no-color")]
    no_color: bool,
    /// Files, directories (recursively: .yaml, .yml, .json) or `-` for standard input.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
}

/// What checking the inputs produced.
#[derive(Default)]
struct Checked {
    findings: Vec<Finding>,
    sources: HashMap<String, Arc<Source>>,
    files: Vec<CheckedFile>,
    errors: Vec<InputError>,
}

/// Runs `check`; returns 0 clean, 1 findings at or above `--fail-on`, 2 when an input, a flag
/// or an output file could not be used.
pub fn run(rules: &RuleSet, args: &CheckArgs) -> ExitCode {
    let req = match args.nodes.request(rules) {
        Ok(r) => CheckRequest {
            platform: r.platform,
            gpu_arch: r.gpu_arch,
            nodes: r.nodes,
        },
        Err(e) => {
            report::error_line(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let outputs = if args.outputs.is_empty() {
        vec![Output {
            format: Format::Text,
            path: None,
        }]
    } else {
        args.outputs.clone()
    };
    if outputs.iter().filter(|o| o.path.is_none()).count() > 1 {
        report::error_line(
            "at most one -o format may write to standard output; give the others a file: -o FORMAT=PATH",
        );
        return ExitCode::from(2);
    }
    let checked = check_inputs(rules, &args.paths, &req);
    if checked.files.iter().all(|f| f.documents.is_empty()) && checked.errors.is_empty() {
        report::warning_line("no manifest documents found in the given paths; nothing was checked");
    }
    let fail_on = args.fail_on.severity();
    let report = Report {
        rules,
        findings: &checked.findings,
        sources: &checked.sources,
        files: &checked.files,
        errors: &checked.errors,
        fail_on,
    };
    let mut write_failed = false;
    for o in &outputs {
        match &o.path {
            None => {
                let color = report::color_allowed(args.no_color) && report::stdout_is_terminal();
                let text = report::render(o.format, &report, color);
                let mut out = std::io::stdout().lock();
                match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                    // A closed pipe (`| head`) is not an error.
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                    Err(e) => {
                        report::error_line(&format!("writing the report: {e}"));
                        write_failed = true;
                    }
                }
            }
            Some(path) => {
                let text = report::render(o.format, &report, false);
                if let Err(e) = std::fs::write(path, text) {
                    report::error_line(&format!("writing {}: {e}", path.display()));
                    write_failed = true;
                }
            }
        }
    }
    for e in &checked.errors {
        report::error_line(&e.message);
    }
    if write_failed || !checked.errors.is_empty() {
        ExitCode::from(2)
    } else if checked.findings.iter().any(|f| f.severity >= fail_on) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Checks every document of every input; a bad input does not stop the others.
fn check_inputs(rules: &RuleSet, paths: &[String], req: &CheckRequest) -> Checked {
    let mut out = Checked::default();
    let (files, errors) = input::expand(paths);
    out.errors.extend(
        errors
            .into_iter()
            .map(|(file, message)| InputError::new(file, message)),
    );
    // Read and parse everything first, then check all documents of all files on every core.
    let mut all_docs = Vec::new();
    for file in &files {
        let source = match input::read_source(file) {
            Ok(s) => s,
            Err(message) => {
                out.errors.push(InputError::new(file.clone(), message));
                continue;
            }
        };
        out.sources.insert(source.name.clone(), source.clone());
        let mut checked = CheckedFile {
            file: source.name.clone(),
            documents: Vec::new(),
        };
        // A broken document does not hide the others of its file.
        let (docs, errors) = parse_documents_lenient(&source);
        for e in errors {
            out.errors.push(InputError {
                file: source.name.clone(),
                pos: e.location().and_then(|(_, p)| p),
                message: e.to_string(),
            });
        }
        for doc in &docs {
            checked.documents.push(CheckedDocument {
                index: doc.index,
                rules: rules
                    .packs
                    .iter()
                    .filter(|p| p.matches_resource(&doc.value))
                    .flat_map(|p| p.rules.iter().map(|r| r.id.clone()))
                    .collect(),
            });
        }
        all_docs.extend(docs);
        out.files.push(checked);
    }
    for (doc, result) in all_docs.iter().zip(check_all(rules, &all_docs, req)) {
        match result {
            Ok(mut f) => {
                // Within a document, in source order (findings without a line last).
                f.sort_by_key(|x| (x.line.unwrap_or(usize::MAX), x.column.unwrap_or(usize::MAX)));
                out.findings.extend(f);
            }
            Err(e) => out.errors.push(InputError {
                file: doc.source.name.clone(),
                pos: match &e {
                    nvcre_domain::PolicyError::Input { pos, .. } => *pos,
                    _ => None,
                },
                message: e.to_string(),
            }),
        }
    }
    out
}

/// Checks documents on every core, keeping input order. Each document is independent.
fn check_all(
    rules: &RuleSet,
    docs: &[nvcre_engine::Document],
    req: &CheckRequest,
) -> Vec<Result<Vec<Finding>, nvcre_domain::PolicyError>> {
    let threads = std::thread::available_parallelism()
        .map(std::num::NonZeroUsize::get)
        .unwrap_or(1)
        .min(docs.len().max(1));
    if threads <= 1 {
        return docs.iter().map(|d| check_document(rules, d, req)).collect();
    }
    let chunk = docs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = docs
            .chunks(chunk)
            .map(|part| {
                let h = scope.spawn(move || {
                    part.iter()
                        .map(|d| check_document(rules, d, req))
                        .collect::<Vec<_>>()
                });
                (h, part.len())
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(h, len)| {
                h.join().unwrap_or_else(|_| {
                    (0..len)
                        .map(|_| {
                            Err(nvcre_domain::PolicyError::Build(
                                "internal error: a checking thread panicked".into(),
                            ))
                        })
                        .collect()
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_parse_with_and_without_a_path() {
        assert_eq!(
            parse_output("sarif=out/x.sarif"),
            Ok(Output {
                format: Format::Sarif,
                path: Some(PathBuf::from("out/x.sarif"))
            })
        );
        assert_eq!(
            parse_output("JSON"),
            Ok(Output {
                format: Format::Json,
                path: None
            })
        );
        assert_eq!(
            parse_output("xml"),
            Err("unknown format \"xml\": expected one of text, json, sarif, junit, github".into())
        );
        assert_eq!(
            parse_output("junit="),
            Err("\"junit=\": the path after '=' is empty".into())
        );
    }
}
