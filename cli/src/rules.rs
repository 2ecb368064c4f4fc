//! `nvcre-policy rules lint|list|explain`: the rule files themselves.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use nvcre_domain::{contract, rule_file_schema, rule_sources, schema_names};
use nvcre_engine::{CompiledPack, Rule, RuleSet, lint, to_yaml};
use serde_json::Value;

use crate::check::FailOn;
use crate::report;
use crate::suites::{self, Example};

/// `rules` subcommands.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Lint rule files: compile errors, duplicate ids, unknown fields, contract breaches
    /// (unknown stages and tables, table rows that do not fit, params a stage does not pass),
    /// messages that look like CEL, unused variables and fragments, escaped keys on
    /// labels/annotations.
    Lint(LintArgs),
    /// One line per rule: id, severity, pack, file:line (or every field as JSON / YAML).
    List(ListArgs),
    /// Describe a rule: description, severity, source, expression or mutations, message, and a
    /// passing and a failing example from the rule test suites.
    Explain(ExplainArgs),
    /// Print the JSON Schema (draft 2020-12) of a rule file for editors: `pack`, `table`,
    /// `suite` or a table name. Without a name, list the names.
    Schema(SchemaArgs),
}

/// Output format of `rules list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// Aligned columns: id, severity, pack, file:line.
    Text,
    /// A JSON array of `{id, severity, pack, stage, file, line, description}`.
    Json,
    /// The same array as YAML.
    Yaml,
}

/// Arguments of `rules list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: ListFormat,
    /// List the rows of the rule set's tables instead (the platform override rows, the GPU
    /// products, …): id, table, file:line; as JSON or YAML `{id, table, file, line}`. A row's
    /// id is what `rules explain` takes.
    #[arg(long)]
    tables: bool,
}

/// Arguments of `rules schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// `pack`, `table`, `suite` or a table name; omitted: list the names.
    #[arg(value_name = "NAME")]
    name: Option<String>,
}

/// Arguments of `rules lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// Exit 1 when a lint at or above this severity exists.
    #[arg(long = "fail-on", value_enum, default_value = "error")]
    fail_on: FailOn,
    /// The rule directory (default: --rules, else the embedded rules).
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Arguments of `rules explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The rule id.
    #[arg(value_name = "ID")]
    id: String,
    /// The rule test suites (default: `tests/` in the --rules directory, else `rules/tests`).
    #[arg(long = "tests", value_name = "DIR")]
    tests: Option<PathBuf>,
}

fn print(text: &str) {
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `rules lint`: one line per lint on stdout; 0 clean, 1 lints at or above `--fail-on`, 2 when
/// the files cannot be read. Does not need the rules to load.
pub fn run_lint(rules_dir: Option<&Path>, args: &LintArgs) -> ExitCode {
    let dir = args.dir.as_deref().or(rules_dir);
    // The files that can be read are linted even when some cannot (those are errors, exit 2).
    let (sources, unreadable) = match dir {
        Some(d) => nvcre_engine::RuleSet::read_dir_collecting(d),
        None => match rule_sources(None) {
            Ok(s) => (s, Vec::new()),
            Err(errors) => (Vec::new(), errors.errors),
        },
    };
    let contract = match contract() {
        Ok(c) => c,
        Err(e) => {
            report::error_line(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let mut findings = lint(&sources, Some(&contract));
    // A set that loads is linted with what the pipeline knows too: override table rows whose
    // `when` names a platform or an architecture that never occurs, and the trial renders a
    // controller runs before it puts the set in force.
    if let Ok(set) = nvcre_engine::RuleSet::load(&sources, Some(&contract)) {
        findings.extend(nvcre_domain::override_table_lints(&set).unwrap_or_default());
        // Only a whole set renders (packs linted alone do not).
        let whole = contract
            .tables()
            .iter()
            .all(|t| set.table(&t.name).is_some());
        let place = dir.map_or_else(|| "rules".to_string(), |d| d.display().to_string());
        if whole && let Err(e) = nvcre_domain::trial_render(&set, &place) {
            findings.push(nvcre_domain::cannot_render_lint(e));
        }
    }
    let mut out = String::new();
    for f in &findings {
        let _ = writeln!(out, "{f}");
    }
    print(&out);
    if !unreadable.is_empty() {
        for e in &unreadable {
            report::error_line(&e.to_string());
        }
        return ExitCode::from(2);
    }
    if findings
        .iter()
        .any(|f| f.severity >= args.fail_on.severity())
    {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `rules schema [NAME]`: the schema as pretty JSON, or the names one per line; 0, or 2 for an
/// unknown name (with the names). Does not read the rules.
pub fn run_schema(args: &SchemaArgs) -> ExitCode {
    let names = match schema_names() {
        Ok(n) => n,
        Err(e) => {
            report::error_line(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let Some(name) = &args.name else {
        print(&names.iter().map(|n| format!("{n}\n")).collect::<String>());
        return ExitCode::SUCCESS;
    };
    match rule_file_schema(name) {
        Ok(Some(schema)) => {
            let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
            print(&format!("{text}\n"));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            report::error_line(&format!(
                "unknown schema {name:?}; available: {}",
                names.join(", ")
            ));
            ExitCode::from(2)
        }
        Err(e) => {
            report::error_line(&e.to_string());
            ExitCode::from(2)
        }
    }
}

/// `rules list`: `id  severity  pack  file:line`, columns aligned; the rule files' rules, then
/// the findings the pipeline reports itself (file `<built-in>`, no line or stage).
pub fn run_list(rules: &RuleSet, args: &ListArgs) -> ExitCode {
    if args.tables {
        return list_table_rows(rules, args.output);
    }
    let built_in = nvcre_domain::BUILT_IN_RULES;
    if args.output != ListFormat::Text {
        let items: Vec<Value> = rules
            .rules()
            .map(|(p, r)| {
                serde_json::json!({
                    "id": r.id,
                    "severity": r.severity.to_string(),
                    "pack": p.name,
                    "stage": p.stage,
                    "file": p.source.name,
                    "line": r.pos.line,
                    "description": r.description,
                })
            })
            .chain(built_in.iter().map(|b| {
                serde_json::json!({
                    "id": b.id,
                    "severity": b.severity.to_string(),
                    "pack": b.pack,
                    "stage": null,
                    "file": nvcre_domain::BUILT_IN,
                    "line": null,
                    "description": b.description,
                })
            }))
            .collect();
        return print_list(&Value::Array(items), args.output, "the rule list");
    }
    let rows: Vec<[String; 4]> = rules
        .rules()
        .map(|(p, r)| {
            [
                r.id.clone(),
                r.severity.to_string(),
                p.name.clone(),
                format!("{}:{}", p.source.name, r.pos.line),
            ]
        })
        .chain(built_in.iter().map(|b| {
            [
                b.id.to_string(),
                b.severity.to_string(),
                b.pack.to_string(),
                nvcre_domain::BUILT_IN.to_string(),
            ]
        }))
        .collect();
    print_columns(&rows);
    ExitCode::SUCCESS
}

/// Prints `rows` as aligned columns two spaces apart, each padded to its widest cell but the
/// last, which ends the line.
fn print_columns<const N: usize>(rows: &[[String; N]]) {
    let widths: Vec<usize> = (0..N)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == N {
                let _ = writeln!(out, "{cell}");
            } else {
                let _ = write!(out, "{cell:w$}  ", w = widths[i]);
            }
        }
    }
    print(&out);
}

/// Prints `list` as JSON or YAML (`format`, not text); 2 when it cannot be written, naming
/// `what` it is.
fn print_list(list: &Value, format: ListFormat, what: &str) -> ExitCode {
    let text = if format == ListFormat::Json {
        serde_json::to_string_pretty(list)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())
    } else {
        to_yaml(list).map_err(|e| e.to_string())
    };
    match text {
        Ok(t) => {
            print(&t);
            ExitCode::SUCCESS
        }
        Err(e) => {
            report::error_line(&format!("rendering {what}: {e}"));
            ExitCode::from(2)
        }
    }
}

/// `rules list --tables`: one line per table row, tables in load order and rows as written.
fn list_table_rows(rules: &RuleSet, format: ListFormat) -> ExitCode {
    let rows = rules
        .tables
        .iter()
        .flat_map(|t| t.entries.iter().map(move |e| (t.as_ref(), e)));
    if format != ListFormat::Text {
        let list = Value::Array(
            rows.map(|(t, e)| {
                serde_json::json!({
                    "id": e.id,
                    "table": t.name,
                    "file": t.source.name,
                    "line": e.pos.line,
                })
            })
            .collect(),
        );
        return print_list(&list, format, "the table rows");
    }
    let rows: Vec<[String; 3]> = rows
        .map(|(t, e)| {
            [
                e.id.clone(),
                t.name.clone(),
                format!("{}:{}", t.source.name, e.pos.line),
            ]
        })
        .collect();
    print_columns(&rows);
    ExitCode::SUCCESS
}

/// `rules explain ID`: 0, or 2 for an unknown id.
pub fn run_explain(rules: &RuleSet, rules_dir: Option<&Path>, args: &ExplainArgs) -> ExitCode {
    let Some((pack, rule)) = rules.rule(&args.id) else {
        if let Some(b) = nvcre_domain::built_in_rule(&args.id) {
            print(&explain_built_in(b));
            return ExitCode::SUCCESS;
        }
        if let Some(text) = explain_table_row(rules, &args.id) {
            print(&text);
            return ExitCode::SUCCESS;
        }
        let rows = rules
            .tables
            .iter()
            .flat_map(|t| t.entries.iter().map(|e| e.id.as_str()));
        let close: Vec<&str> = rules
            .rules()
            .map(|(_, r)| r.id.as_str())
            .chain(rows)
            .filter(|id| id.contains(args.id.as_str()))
            .collect();
        let hint = if close.is_empty() {
            "; `nvcre-policy rules list` shows them all, and `rules list --tables` the table rows"
                .to_string()
        } else {
            format!("; rules whose id contains it: {}", close.join(", "))
        };
        report::error_line(&format!("no rule with id {:?}{hint}", args.id));
        return ExitCode::from(2);
    };
    let tests = match (&args.tests, rules_dir) {
        (Some(t), _) => t.clone(),
        (None, Some(d)) => d.join("tests"),
        (None, None) => PathBuf::from("rules/tests"),
    };
    let mut out = explain(pack, rule);
    out.push('\n');
    if tests.is_dir() {
        let examples = suites::examples(&tests, &rule.id, &pack.name, &pack.source.name);
        out.push_str(&example_block("passing example", examples.passing.as_ref()));
        out.push('\n');
        out.push_str(&example_block("failing example", examples.failing.as_ref()));
    } else {
        // Without the suites there is nothing to show; say where they were looked for.
        let _ = writeln!(
            out,
            "examples: no test suites at {} (give --tests DIR: the rule test suites, such as the repository's rules/tests)",
            tests.display()
        );
    }
    print(&out);
    ExitCode::SUCCESS
}

/// The block of a table row (`rules explain aws-h100-efa`): its table, where it is written and
/// the row as written, from its line to the next row's (the comments above a row belong to it,
/// the ones above the next to the next); `None` when no table has a row of that id.
fn explain_table_row(rules: &RuleSet, id: &str) -> Option<String> {
    // `TABLE/ID` names the row of one table (two tables may have rows of one id); a plain id,
    // the first table's row of that id.
    let (in_table, row) = match id.split_once('/') {
        Some((t, r)) if rules.tables.iter().any(|x| x.name == t) => (Some(t), r),
        _ => (None, id),
    };
    let (table, i) = rules
        .tables
        .iter()
        .filter(|t| in_table.is_none_or(|n| t.name == n))
        .find_map(|t| {
            t.entries
                .iter()
                .position(|e| e.id == row)
                .map(|i| (t.as_ref(), i))
        })?;
    let entry = &table.entries[i];
    let lines: Vec<&str> = table.source.text.lines().collect();
    let start = entry.pos.line.saturating_sub(1);
    // The row ends where the next begins, or at the end of the table's document.
    let end = table
        .entries
        .iter()
        .map(|e| e.pos.line.saturating_sub(1))
        .filter(|&l| l > start)
        .min()
        .or_else(|| {
            lines
                .iter()
                .enumerate()
                .skip(start + 1)
                .find(|(_, l)| **l == "---")
                .map(|(n, _)| n)
        })
        .unwrap_or(lines.len());
    let mut row: Vec<&str> = lines.get(start..end).unwrap_or_default().to_vec();
    while row
        .last()
        .is_some_and(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        row.pop();
    }
    // As written, less the indentation the rows share.
    let indent = row
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let row: Vec<&str> = row.iter().map(|l| l.get(indent..).unwrap_or("")).collect();
    let mut out = format!("{id}\n");
    field(&mut out, "table", &table.name);
    field(
        &mut out,
        "source",
        &format!("{}:{}", table.source.name, entry.pos.line),
    );
    field(&mut out, "row", &row.join("\n"));
    Some(out)
}

/// The description block of a finding the pipeline reports without a rule file.
fn explain_built_in(b: &nvcre_domain::BuiltInRule) -> String {
    let mut out = format!("{}\n", b.id);
    field(&mut out, "description", b.description);
    field(&mut out, "severity", &b.severity.to_string());
    field(&mut out, "pack", b.pack);
    field(
        &mut out,
        "source",
        "built into the pipeline (no rule file: not changed by --rules)",
    );
    out.push('\n');
    out.push_str(&wrap(b.explanation, 96));
    out
}

/// `text` as lines of at most `width` characters (words are not split), each indented by two.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            let _ = writeln!(out, "  {line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "  {line}");
    }
    out
}

/// `  label        value`, continuation lines aligned under the value.
fn field(out: &mut String, label: &str, value: &str) {
    for (i, l) in value.trim_end().lines().enumerate() {
        let label = if i == 0 { label } else { "" };
        let line = format!("  {label:<12} {l}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The description block of a rule.
fn explain(pack: &CompiledPack, rule: &Rule) -> String {
    let mut out = format!("{}\n", rule.id);
    if let Some(d) = &rule.description {
        field(&mut out, "description", d);
    }
    field(&mut out, "severity", &rule.severity.to_string());
    let stage = pack
        .stage
        .as_deref()
        .map(|s| format!(" (stage {s})"))
        .unwrap_or_default();
    field(&mut out, "pack", &format!("{}{stage}", pack.name));
    field(
        &mut out,
        "source",
        &format!("{}:{}", pack.source.name, rule.pos.line),
    );
    if let Some(e) = rule.for_each() {
        field(&mut out, "forEach", e);
    }
    if let Some(w) = rule.when() {
        field(&mut out, "when", w);
    }
    if let Some(e) = rule.expression() {
        field(&mut out, "expression", e);
    }
    if let Some(m) = rule.message() {
        field(&mut out, "message", m);
    }
    if let Some(m) = rule.message_expression() {
        field(&mut out, "messageExpr", m);
    }
    if let Some(p) = rule.field_path() {
        field(&mut out, "fieldPath", &p);
    }
    if !rule.mutations().is_empty() {
        let yaml = to_yaml(&Value::Array(rule.mutations().to_vec())).unwrap_or_default();
        field(&mut out, "mutate", &yaml);
    }
    out
}

/// Inputs longer than this are cut in `explain`.
const MAX_EXAMPLE_LINES: usize = 40;

fn example_block(title: &str, example: Option<&Example>) -> String {
    let Some(e) = example else {
        return format!("{title}: no example in the test suites\n");
    };
    let mut out = format!("{title}: {} › {}", e.suite, e.note);
    if let Some(f) = &e.input_file {
        let _ = write!(out, " (inputFile {f})");
    }
    if let Some(c) = &e.context {
        let _ = write!(out, " (context: {c})");
    }
    out.push('\n');
    let lines: Vec<&str> = e.input.trim_end().lines().collect();
    for l in lines.iter().take(MAX_EXAMPLE_LINES) {
        let _ = writeln!(out, "  {l}");
    }
    if lines.len() > MAX_EXAMPLE_LINES {
        let _ = writeln!(out, "  # … {} more lines", lines.len() - MAX_EXAMPLE_LINES);
    }
    out
}
