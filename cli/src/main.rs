//! `nvcre-policy`: render WorkloadRuns into the Workflows NVCRE would submit, and check
//! manifests against the rule packs. The binary is glue: the work lives in `nvcre-domain` and
//! `nvcre-engine`.
//!
//! Exit codes: 0 clean, 1 policy violations, 2 usage / input / rule-file error.

mod cluster;
mod crd;
mod measure;
mod rules;
mod suites;
mod test_cmd;

// The check pipeline, the reports and the input reading are the library's (`src/lib.rs`).
use nvcre_policy::{check, color, input, report, ruleset};

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: a document is thousands of small strings and maps, made and freed by every stage.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use nvcre_domain::{PolicyError, expand, load_rules, render_document};
use nvcre_engine::{RuleSet, to_yaml};

/// Render and check NVCRE WorkloadRun / Workflow manifests with policy kept as CEL + YAML rules.
#[derive(Debug, Parser)]
#[command(name = "nvcre-policy", version, about, long_about = None)]
struct Cli {
    /// Rule directory replacing the embedded default rules (every *.yaml below it).
    #[arg(long, global = true, env = "NVCRE_RULES", value_name = "DIR")]
    rules: Option<PathBuf>,
    /// When to colour output: auto (a terminal, unless NO_COLOR, CLICOLOR=0 or TERM=dumb;
    /// CLICOLOR_FORCE=1 colours pipes too), always or never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: color::ColorWhen,
    #[command(flatten)]
    limits: input::LimitArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the Workflow a WorkloadRun (or a Workflow, resolved for a platform) renders to.
    Render(RenderArgs),
    /// `workloadrun render` (same as `render`), and the cluster verbs `run`, `status`,
    /// `report` and `cancel`.
    Workloadrun {
        #[command(subcommand)]
        command: WorkloadrunCommand,
    },
    /// The `nvcrectl workflow` spelling: `nvcre-policy workflow render …`.
    Workflow {
        #[command(subcommand)]
        command: WorkflowCommand,
    },
    /// Report rule findings for WorkloadRun and Workflow documents.
    Check(check::CheckArgs),
    /// Lint, list and explain the rules; print the JSON Schemas of rule files.
    Rules {
        #[command(subcommand)]
        command: rules::RulesCommand,
    },
    /// Run the rule test suites (`rules/tests/<pack>/*.yaml`, or the given files and directories).
    Test(test_cmd::TestArgs),
    /// Print the CustomResourceDefinitions (WorkloadRun, Workflow, LogProfile,
    /// BandwidthMeasurement, GoodputMeasurement) as a YAML stream.
    Crd,
    /// Measure bandwidth or goodput from log files with a LogProfile, and check thresholds.
    Measure {
        #[command(subcommand)]
        command: measure::MeasureCommand,
    },
    /// Print a shell completion script (e.g. `source <(nvcre-policy completion bash)`).
    Completion(CompletionArgs),
    /// Print the man page (roff), or write one page per command into a directory.
    Man(ManArgs),
}

/// Arguments of `completion`.
#[derive(Debug, Args)]
struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Arguments of `man`.
#[derive(Debug, Args)]
struct ManArgs {
    /// Write `nvcre-policy.1` and one `nvcre-policy-<command>.1` per subcommand into this
    /// directory instead of printing `nvcre-policy.1`.
    #[arg(long = "out-dir", value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum WorkloadrunCommand {
    /// Same as `nvcre-policy render`.
    Render(RenderArgs),
    /// Validate a WorkloadRun as `check` does, create it in the cluster (with a registry pull
    /// Secret owned by the run) and, with --wait, watch it to the end and print its report.
    Run(Box<cluster::RunArgs>),
    /// Print a run's phase: Pending, InProgress, Succeeded or Failed (exit 0 in every phase).
    Status(cluster::StatusArgs),
    /// Print a run's report (exit 0 only when it succeeded).
    Report(cluster::ReportArgs),
    /// Delete runs (their Workflow and jobs go with them); a missing run is a warning.
    Cancel(cluster::CancelArgs),
}

#[derive(Debug, Subcommand)]
enum WorkflowCommand {
    /// Same as `nvcre-policy render`.
    Render(RenderArgs),
}

/// Output format of `render`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RenderFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
struct RenderArgs {
    #[command(flatten)]
    nodes: input::NodeArgs,
    /// Print every child manifest of every group (dependencies, TrainJobs) instead of the
    /// Workflow, with a one-line-per-group summary on stderr.
    #[arg(long)]
    expand: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    output: RenderFormat,
    /// Manifests: files, directories (recursively: .yaml, .yml, .json) or `-` for standard
    /// input; rendered as one stream in input order.
    #[arg(value_name = "PATH", required = true)]
    files: Vec<String>,
}

fn main() -> ExitCode {
    // A transparent huge page is resident as soon as one byte of its 2 MiB is touched: with
    // them, 12 MB of a one-file `check` and about 20 MB of a stream's peak were such pages, for
    // no measured speed (BENCHMARKS.md). mimalloc is built not to ask for them (`no_thp`); this
    // also keeps a kernel that gives them to every mapping (`enabled=always`) from doing so.
    // Best effort: a kernel without the prctl leaves them as they are.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut command = with_platform_help(Cli::command(), &argv).color(clap_color(&argv));
    // `NVCRE_RULES=` (set, but empty) is unset, as for most tools' variables: clap would take
    // it for `--rules` without a value and refuse every command.
    if std::env::var_os("NVCRE_RULES").is_some_and(|v| v.is_empty()) {
        command = command.mut_arg("rules", |a| a.env(None));
    }
    let cli = match command
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion => {
            return print_version(rules_dir(&argv).as_deref());
        }
        Err(e) => e.exit(),
    };
    color::init(cli.color);
    match run(cli) {
        Ok(code) => code,
        Err(code) => code,
    }
}

/// The `--platform` help of `render` and `check`, with the platforms the platform-detection
/// table of the rules in use accepts (`--rules DIR` / `NVCRE_RULES`, else the embedded set).
/// The rules are read only when help is asked for.
fn with_platform_help(command: clap::Command, argv: &[std::ffi::OsString]) -> clap::Command {
    let wants_help = argv
        .iter()
        .skip(1)
        .any(|a| a == "--help" || a == "-h" || a == "help");
    if !wants_help {
        return command;
    }
    let help = platform_help(rules_dir(argv).as_deref());
    let set = |c: clap::Command| c.mut_arg("platform", |a| a.help(help.clone()));
    command
        .mut_subcommand("render", set)
        .mut_subcommand("check", set)
        .mut_subcommand("workloadrun", |c| c.mut_subcommand("render", set))
        .mut_subcommand("workflow", |c| c.mut_subcommand("render", set))
}

/// `--version`: the tool's version and the rule set in force (`embedded`, or the `--rules`
/// directory), with its file count and digest. Exit 2 when the `--rules` directory cannot be
/// read, or its set does not load (the line is printed, and the error says so).
fn print_version(dir: Option<&std::path::Path>) -> ExitCode {
    match ruleset::RulesInfo::of(dir) {
        Ok(info) => {
            print(&info.version_text());
            // A directory's set is in force only when it loads (the embedded one always does).
            if let Some(d) = dir
                && let Err(errors) = load_rules(Some(d))
            {
                let n = errors.errors.len();
                report::error_line(&format!(
                    "the rule set of {} does not load ({n} problem{}), so no command uses it; `nvcre-policy rules lint {}` lists them",
                    d.display(),
                    if n == 1 { "" } else { "s" },
                    d.display()
                ));
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            print(&format!("nvcre-policy {}\n", env!("CARGO_PKG_VERSION")));
            report::error_line(&format!(
                "{e}; check the --rules directory (or NVCRE_RULES), or omit it for the embedded rules"
            ));
            ExitCode::from(2)
        }
    }
}

/// Writes `text` to standard output; a closed pipe (`| head`) is not an error.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// `--color` as clap's own choice, read before parsing, so clap's help and usage errors follow
/// the flag as the rest of the output does.
fn clap_color(argv: &[std::ffi::OsString]) -> clap::ColorChoice {
    let mut value = None;
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--color" {
            value = it.next().and_then(|v| v.to_str());
        } else if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--color=")) {
            value = Some(v);
        }
    }
    match value {
        Some("always") => clap::ColorChoice::Always,
        Some("never") => clap::ColorChoice::Never,
        _ => clap::ColorChoice::Auto,
    }
}

/// `--rules DIR` / `--rules=DIR` from the command line, else `NVCRE_RULES` (when not empty).
fn rules_dir(argv: &[std::ffi::OsString]) -> Option<PathBuf> {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--rules" {
            return it.next().map(PathBuf::from);
        }
        if let Some(dir) = a.to_str().and_then(|s| s.strip_prefix("--rules=")) {
            return Some(PathBuf::from(dir));
        }
    }
    std::env::var_os("NVCRE_RULES")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The help line of `--platform`.
fn platform_help(dir: Option<&std::path::Path>) -> String {
    let platforms = load_rules(dir)
        .ok()
        .and_then(|rules| nvcre_domain::selectable_platforms(&rules).ok())
        .map(|all| {
            all.into_iter()
                .map(|(p, _)| p)
                .collect::<Vec<_>>()
                .join(", ")
        });
    match platforms {
        Some(list) => format!(
            "Resolve overrides for this platform ({list}: the platform-detection rows with `synthetic`) and enforce the post-override contract"
        ),
        None => "Resolve overrides for this platform (one the platform-detection table accepts; the rules do not load) and enforce the post-override contract".to_string(),
    }
}

fn run(cli: Cli) -> Result<ExitCode, ExitCode> {
    cli.limits.apply();
    // Lint reads the files itself: rules that do not load are what it reports.
    if let Command::Rules {
        command: rules::RulesCommand::Lint(args),
    } = &cli.command
    {
        return Ok(rules::run_lint(cli.rules.as_deref(), args));
    }
    // Schemas come from the contract, not from the rule files.
    if let Command::Rules {
        command: rules::RulesCommand::Schema(args),
    } = &cli.command
    {
        return Ok(rules::run_schema(args));
    }
    // The CRDs come from the API types; no rules are read.
    if let Command::Crd = cli.command {
        return Ok(crd::run());
    }
    // Completions and man pages come from the command definitions.
    if let Command::Completion(args) = &cli.command {
        let mut out = Vec::new();
        clap_complete::generate(args.shell, &mut Cli::command(), "nvcre-policy", &mut out);
        print(&String::from_utf8_lossy(&out));
        return Ok(ExitCode::SUCCESS);
    }
    if let Command::Man(args) = &cli.command {
        return Ok(man(args));
    }
    // The cluster verbs that read runs need no rules.
    let cli = match cli.command {
        Command::Workloadrun {
            command: WorkloadrunCommand::Status(args),
        } => return Ok(cluster::main(None, cluster::Verb::Status(args))),
        Command::Workloadrun {
            command: WorkloadrunCommand::Report(args),
        } => return Ok(cluster::main(None, cluster::Verb::Report(args))),
        Command::Workloadrun {
            command: WorkloadrunCommand::Cancel(args),
        } => return Ok(cluster::main(None, cluster::Verb::Cancel(args))),
        command => Cli { command, ..cli },
    };
    // All or nothing: every problem of the set is reported, then exit 2; `check` reports them
    // in the formats it was asked for (a CI job reading `-o json` gets the envelope).
    // Never freed: the process ends when the command does, and dropping the compiled set (every
    // pack's expressions and tables) cost about a seventh of a one-file `check`.
    let rules = std::mem::ManuallyDrop::new(match load_rules(cli.rules.as_deref()) {
        Ok(rules) => rules,
        Err(errors) => {
            if let Command::Check(args) = &cli.command {
                // A set that cannot even be read (a missing or empty directory) has no digest.
                let info = ruleset::RulesInfo::of(cli.rules.as_deref())
                    .unwrap_or_else(|_| ruleset::RulesInfo::unreadable(cli.rules.as_deref()));
                return Ok(check::run_unloaded(&errors, &info, args));
            }
            if let Command::Test(args) = &cli.command {
                let messages: Vec<String> = errors.errors.iter().map(ToString::to_string).collect();
                return Ok(test_cmd::run_errors(args, &messages));
            }
            for e in &errors.errors {
                report::error_line(&e.to_string());
            }
            return Err(ExitCode::from(2));
        }
    });
    let rules: &RuleSet = &rules;
    match cli.command {
        Command::Workloadrun {
            command: WorkloadrunCommand::Run(args),
        } => Ok(cluster::main(Some(rules), cluster::Verb::Run(args))),
        Command::Workloadrun {
            command:
                WorkloadrunCommand::Status(_)
                | WorkloadrunCommand::Report(_)
                | WorkloadrunCommand::Cancel(_),
        } => Err(ExitCode::from(2)),
        Command::Render(args)
        | Command::Workloadrun {
            command: WorkloadrunCommand::Render(args),
        }
        | Command::Workflow {
            command: WorkflowCommand::Render(args),
        } => render(rules, &args),
        Command::Check(args) => {
            let info = ruleset::RulesInfo::of(cli.rules.as_deref()).map_err(|e| {
                report::error_line(&e);
                ExitCode::from(2)
            })?;
            Ok(check::run(rules, &info, &args))
        }
        Command::Rules { command } => Ok(match command {
            rules::RulesCommand::Lint(args) => rules::run_lint(cli.rules.as_deref(), &args),
            rules::RulesCommand::List(args) => rules::run_list(rules, &args),
            rules::RulesCommand::Explain(args) => {
                rules::run_explain(rules, cli.rules.as_deref(), &args)
            }
            rules::RulesCommand::Schema(args) => rules::run_schema(&args),
        }),
        Command::Test(args) => Ok(test_cmd::run(rules, cli.rules.as_deref(), &args)),
        Command::Crd => Ok(crd::run()),
        Command::Completion(_) | Command::Man(_) => Err(ExitCode::from(2)),
        Command::Measure { command } => Ok(measure::run(rules, &command)),
    }
}

fn render(rules: &RuleSet, args: &RenderArgs) -> Result<ExitCode, ExitCode> {
    // Before anything is read: the second read of standard input would find it empty.
    if args.nodes.stdin_reads(&args.files) > 1 {
        report::error_line(
            "standard input (`-`) can be given once; name the other inputs as files",
        );
        return Err(ExitCode::from(2));
    }
    let req = args.nodes.request(rules).map_err(|e| match e {
        input::NodeArgsError::Flags(e) => report_policy_error(&e),
        input::NodeArgsError::NodesFile { message, .. } => {
            report::error_line(&message);
            ExitCode::from(2)
        }
    })?;
    // Every input in order: its documents, or what kept one from being read (a path that is
    // not there, a document that does not parse); the others are still rendered, so that every
    // error is reported in one run.
    let mut items: Vec<Result<nvcre_engine::Document, String>> = Vec::new();
    let mut any_file = false;
    for entry in input::expand_in_order(&args.files) {
        let file = match entry {
            Ok(file) => file,
            Err((_, message)) => {
                items.push(Err(message));
                continue;
            }
        };
        any_file = true;
        let read = input::read_each(&file);
        if read.is_empty() {
            let name = if file.is_stdin() {
                "<stdin>"
            } else {
                &file.name
            };
            items.push(Err(format!(
                "{name}: no document to render (the input is empty); give a WorkloadRun or Workflow manifest"
            )));
        }
        items.extend(read);
    }
    if !any_file && items.is_empty() {
        report::error_line(&format!(
            "{}: no manifest files (.yaml, .yml, .json) to render; name a WorkloadRun or Workflow file",
            args.files.join(", ")
        ));
        return Err(ExitCode::from(2));
    }
    let several = items.len() > 1;
    let mut outputs = Vec::new();
    // Every document is rendered and every error reported (a CI run sees them all at once);
    // once one fails, nothing is printed: a partial stream piped to `kubectl apply` would
    // create some runs of a set and not the others.
    let mut failed: Option<ExitCode> = None;
    let mut fail = |code: ExitCode| {
        let two = ExitCode::from(2);
        failed = Some(if failed == Some(two) || code == two {
            two
        } else {
            code
        });
    };
    for item in &items {
        let doc = match item {
            Ok(doc) => doc,
            Err(message) => {
                report::error_line(message);
                fail(ExitCode::from(2));
                continue;
            }
        };
        // The YAML readings `check` reports (`yaml-quote-it`), so a user who only renders sees
        // them too: a YAML 1.1 reading is a warning (the value is rendered as this tool read
        // it); a number where a string belongs, which the API server refuses, fails the
        // document (exit 1).
        let mut refused = false;
        for f in
            nvcre_domain::yaml_quote_findings(doc, &|l| doc.source.line_text(l).map(str::to_string))
        {
            let at = match (f.line, f.column) {
                (Some(l), Some(c)) => format!("{}:{l}:{c}: ", f.file),
                _ => format!("{}: ", f.file),
            };
            if f.severity == nvcre_engine::Severity::Error {
                report::error_line(&format!("{at}{}", f.message));
                refused = true;
            } else {
                report::warning_line(&format!("{at}{}", f.message));
            }
        }
        if refused {
            fail(ExitCode::from(1));
            continue;
        }
        match render_document(rules, doc, &req) {
            Ok(rendered) => {
                // Among several documents, each note is led by its place, as errors are.
                for w in &rendered.warnings {
                    if several {
                        report::render_note_line(&w.located());
                    } else {
                        report::render_note_line(w);
                    }
                }
                if args.expand {
                    let expanded = match expand(rules, &rendered) {
                        Ok(expanded) => expanded,
                        Err(e) => {
                            let e = led_by_objects(e);
                            fail(report_policy_error(&if several {
                                e.located(&nvcre_domain::document_place(doc))
                            } else {
                                e
                            }));
                            continue;
                        }
                    };
                    // Among several documents, the summary (stand-in nodes, groups) names its
                    // document's place, after a line's `note: ` lead as for the render's
                    // warnings (`Warning: file:line:col: …`), else first.
                    for line in &expanded.summary {
                        if several {
                            let place = nvcre_domain::document_place(doc);
                            report::stderr_line(&match line.strip_prefix("note: ") {
                                Some(rest) => format!("note: {place}: {rest}"),
                                None => format!("{place}: {line}"),
                            });
                        } else {
                            report::stderr_line(line);
                        }
                    }
                    // Led by the object each is about, as `check` reports them (the object
                    // was made here, so its file is its group's name), and among several
                    // documents by the document's place before it.
                    for f in &expanded.findings {
                        let mut note = nvcre_domain::note_line(&led_by_object(f));
                        if several {
                            let place = nvcre_domain::document_place(doc);
                            note.text = format!("{place}: {}", note.text);
                        }
                        report::render_note_line(&note);
                    }
                    outputs.extend(expanded.manifests);
                } else {
                    outputs.push(rendered.workflow);
                }
            }
            // Among several documents, an error that names no place names the document's; one
            // document's keeps the original message alone.
            Err(e) if several => {
                let e = e.located(&nvcre_domain::document_place(doc));
                fail(report_policy_error(&led_by_place(e, doc)));
            }
            Err(e) => fail(report_policy_error(&e)),
        }
    }
    if let Some(code) = failed {
        return Err(code);
    }
    let mut text = String::new();
    for (i, w) in outputs.iter_mut().enumerate() {
        nvcre_domain::sort_string_maps(w);
        let w = &*w;
        match args.output {
            RenderFormat::Yaml => {
                if i > 0 {
                    text.push_str("---\n");
                }
                text.push_str(&to_yaml(w).map_err(|e| {
                    report::error_line(&e.to_string());
                    ExitCode::from(2)
                })?);
            }
            RenderFormat::Json => {
                text.push_str(&serde_json::to_string_pretty(w).unwrap_or_default());
                text.push('\n');
            }
        }
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // A closed pipe (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => {
            report::error_line(&format!(
                "writing the output: {}",
                nvcre_engine::limits::io_error_text(&e)
            ));
            Err(ExitCode::from(2))
        }
    }
}

/// `man`: the page of `nvcre-policy` on stdout, or every command's page into `--out-dir`.
fn man(args: &ManArgs) -> ExitCode {
    let mut command = Cli::command();
    // Built as `--out-dir` builds it (with the generated `help` subcommand), so the page on
    // stdout is the page written to the directory.
    command.build();
    match &args.out_dir {
        Some(dir) => {
            if let Err(e) =
                std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(command, dir))
            {
                report::error_line(&format!(
                    "writing man pages to {}: {}; give a writable --out-dir",
                    dir.display(),
                    nvcre_engine::limits::io_error_text(&e)
                ));
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        None => {
            let mut out = Vec::new();
            if let Err(e) = clap_mangen::Man::new(command).render(&mut out) {
                report::error_line(&format!("rendering the man page: {e}"));
                return ExitCode::from(2);
            }
            print(&String::from_utf8_lossy(&out));
            ExitCode::SUCCESS
        }
    }
}

/// A rejection among several documents with each error finding of the later stages (whose
/// messages are the original's sentences, printed alone) led by its place: its `file:line:col`,
/// else the document's. Admission findings name their place already; a rule file's error is
/// led by the document's place.
fn led_by_place(e: PolicyError, doc: &nvcre_engine::Document) -> PolicyError {
    let findings = match e {
        PolicyError::Rejected(findings) => findings,
        // The notes made before the error are led by their places too.
        PolicyError::Noted {
            error,
            findings,
            notes,
        } => {
            return PolicyError::Noted {
                error: Box::new(led_by_place(*error, doc)),
                findings,
                notes: notes.iter().map(nvcre_domain::Note::located).collect(),
            };
        }
        // A rule file's error met while rendering this document (a table render out of the
        // document's CEL budget) names the rule file, not the document: both are named.
        other if other.in_rule_file() => {
            return PolicyError::Build(format!("{}: {other}", nvcre_domain::document_place(doc)));
        }
        other => return other,
    };
    let place = |f: &nvcre_engine::Finding| match (f.line, f.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}", f.file),
        _ => nvcre_domain::document_place(doc),
    };
    PolicyError::Rejected(
        findings
            .into_iter()
            .map(|f| {
                // Admission errors are printed with their place already.
                if f.severity == nvcre_engine::Severity::Error
                    && f.stage.as_deref() == Some("admission")
                {
                    f
                } else {
                    nvcre_engine::Finding {
                        message: format!("{}: {}", place(&f), f.message),
                        ..f
                    }
                }
            })
            .collect(),
    )
}

/// An `--expand` rejection with each finding led by the emitted object it is about, as the
/// notes of an expansion that succeeds are.
fn led_by_objects(e: PolicyError) -> PolicyError {
    match e {
        PolicyError::Rejected(findings) => {
            PolicyError::Rejected(findings.iter().map(led_by_object).collect())
        }
        other => other,
    }
}

/// `f` with its message led by its `object` ([`nvcre_engine::Finding::led_message`]).
fn led_by_object(f: &nvcre_engine::Finding) -> nvcre_engine::Finding {
    nvcre_engine::Finding {
        message: f.led_message(),
        ..f.clone()
    }
}

/// Prints a render failure: one line per error finding (with its source position when the
/// finding has one) and a `Warning:`/`Info:` line per finding below error that came with them,
/// in the order the rules ran; or the error message, after the lines of what the render noted
/// before it. Returns the exit code.
fn report_policy_error(e: &PolicyError) -> ExitCode {
    match e {
        // What the render noted before the error, then the error.
        PolicyError::Noted { error, notes, .. } => {
            for n in notes {
                report::render_note_line(n);
            }
            return report_policy_error(error);
        }
        PolicyError::Rejected(findings) => {
            for f in findings {
                if f.severity == nvcre_engine::Severity::Error {
                    report::finding_line(f);
                } else {
                    report::render_note_line(&nvcre_domain::note_line(f));
                }
            }
        }
        // A fleet that cannot host the job is a policy outcome (exit 1): the message alone,
        // as for the other rejections.
        PolicyError::Placement(message) => report::stderr_line(message),
        other => report::error_line(&other.to_string()),
    }
    ExitCode::from(exit_code(e))
}

/// 1 for policy violations (a rejection, a fleet that cannot host the job), 2 for everything
/// else (usage, input, rules; a rejection that holds a rule error, as `check` exits).
fn exit_code(e: &PolicyError) -> u8 {
    match e.cause() {
        PolicyError::Rejected(findings) if findings.iter().any(|f| f.rule_error) => 2,
        PolicyError::Rejected(_) | PolicyError::Placement(_) => 1,
        _ => 2,
    }
}
