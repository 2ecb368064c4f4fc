//! `nvcre-policy check`: findings for every WorkloadRun and Workflow document of the inputs.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use nvcre_engine::{Finding, RuleSet, Severity, Source, parse_documents};
use nvcre_policy::check::{CheckRequest, check_document};

use crate::input;
use crate::report;

/// Output format of `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// `file:line:col: severity[rule]: message` with the source line underlined.
    Text,
    /// A JSON array, one object per finding.
    Json,
}

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Resolve overrides for this platform before the post-override checks.
    #[arg(long)]
    platform: Option<String>,
    /// GPU architecture for the resolution (with --platform).
    #[arg(long = "gpu-arch")]
    gpu_arch: Option<String>,
    /// Nodes to detect platform and architecture from (exclusive with --platform/--gpu-arch).
    #[arg(long = "nodes-file", value_name = "FILE")]
    nodes_file: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: CheckFormat,
    /// Never colour the text output.
    #[arg(long = "no-color")]
    no_color: bool,
    /// Files, directories (recursively: .yaml, .yml, .json) or `-` for standard input.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
}

/// Runs `check`; returns 0 clean, 1 error findings, 2 when an input or flag could not be used.
pub fn run(rules: &RuleSet, args: &CheckArgs) -> ExitCode {
    let nodes = match &args.nodes_file {
        Some(f) => match input::read_nodes(f) {
            Ok(n) => Some(n),
            Err(e) => {
                report::error_line(&e);
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let req = CheckRequest {
        platform: args.platform.clone(),
        gpu_arch: args.gpu_arch.clone(),
        nodes,
    };
    let (files, mut errors) = input::expand(&args.paths);
    let mut findings: Vec<Finding> = Vec::new();
    let mut sources: HashMap<String, Arc<Source>> = HashMap::new();
    for file in &files {
        let source = match input::read_source(file) {
            Ok(s) => s,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        sources.insert(source.name.clone(), source.clone());
        let docs = match parse_documents(&source) {
            Ok(d) => d,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        for doc in &docs {
            match check_document(rules, doc, &req) {
                Ok(f) => findings.extend(f),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    match args.output {
        CheckFormat::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&findings).unwrap_or_else(|_| "[]".into())
            );
        }
        CheckFormat::Text => {
            let color = !args.no_color
                && report::stderr_is_terminal()
                && std::env::var_os("NO_COLOR").is_none();
            let mut out = String::new();
            for f in &findings {
                out.push_str(&report::finding_block(
                    f,
                    sources.get(&f.file).map(|s| s.as_ref()),
                    color,
                ));
            }
            print!("{out}");
        }
    }
    for e in &errors {
        report::error_line(e);
    }
    if !errors.is_empty() {
        ExitCode::from(2)
    } else if findings.iter().any(|f| f.severity == Severity::Error) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
