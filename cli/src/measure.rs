//! `nvcre-policy measure bandwidth|goodput`: a LogProfile of the rule set applied to log files
//! (or standard input) line by line, the BandwidthMeasurement / GoodputMeasurement status it
//! gives, and thresholds (CEL over `value`) checked against it.
//!
//! Exit codes: 0 measured (thresholds met), 1 a threshold violated or not measurable,
//! 2 usage, input or rule error.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use nvcre_domain::measure::{
    BandwidthParser, GoodputParser, LogProfiles, Measured, Source, THRESHOLD_KEYS, ThresholdResult,
    Thresholds, bandwidth_block, compile_expression, for_each_line, goodput_block, measured_value,
    threshold_key, unknown_keys_message,
};
use nvcre_engine::limits::io_error_text;
use nvcre_engine::{FieldPath, RuleSet, to_yaml};
use serde_json::{Map, Value, json};

use crate::input;
use crate::report;

#[derive(Debug, Subcommand)]
pub enum MeasureCommand {
    /// NCCL test output → a BandwidthMeasurement status (average bandwidth per message size,
    /// network transports).
    Bandwidth(BandwidthArgs),
    /// Training output → a GoodputMeasurement status (goodput ratio, step time, TFLOP/s per
    /// GPU, checkpoints).
    Goodput(MeasureArgs),
}

/// Output format of `measure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The report's Bandwidth / Goodput block and the thresholds.
    Text,
    /// `{kind, spec, status, values, thresholds}` as JSON.
    Json,
    /// The same as YAML.
    Yaml,
}

#[derive(Debug, Args)]
pub struct BandwidthArgs {
    /// The NCCL collective measured (`all_reduce`, `alltoall`, …), recorded as spec.testType.
    #[arg(long, value_name = "T")]
    test_type: Option<String>,
    #[command(flatten)]
    common: MeasureArgs,
}

#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// The LogProfile to parse with (a `kind: LogProfile` document of the rule set).
    #[arg(long, value_name = "NAME")]
    profile: String,
    /// A YAML or JSON mapping of threshold keys to CEL expressions over `value`.
    #[arg(long, value_name = "FILE")]
    thresholds: Option<String>,
    /// One threshold, `KEY=EXPR` (repeatable; overrides the same key of --run and --thresholds).
    #[arg(long = "threshold", value_name = "KEY=EXPR")]
    threshold: Vec<String>,
    /// A WorkloadRun manifest whose spec.thresholds apply.
    #[arg(long, value_name = "WORKLOADRUN")]
    run: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
    /// Log files, plain or kubelet-timestamped (`-` for standard input).
    #[arg(value_name = "LOG", required = true)]
    logs: Vec<String>,
}

fn fail(message: &str) -> ExitCode {
    report::error_line(message);
    ExitCode::from(2)
}

/// Runs `measure`.
pub fn run(rules: &RuleSet, command: &MeasureCommand) -> ExitCode {
    match measure(rules, command) {
        Ok(code) | Err(code) => code,
    }
}

fn measure(rules: &RuleSet, command: &MeasureCommand) -> Result<ExitCode, ExitCode> {
    let (args, source, test_type) = match command {
        MeasureCommand::Bandwidth(a) => (&a.common, Source::Bandwidth, a.test_type.as_deref()),
        MeasureCommand::Goodput(a) => (a, Source::Goodput, None),
    };
    let profiles = LogProfiles::from_rules(rules).map_err(|e| fail(&e))?;
    let profile = profiles.get(&args.profile).map_err(|e| fail(&e))?;
    let (thresholds, skipped) = thresholds(args, source)?;
    let mut readers = open(&args.logs)?;
    // Each line is fed with its file's name and its line number (1-based) for messages.
    let mut read_all = |feed: &mut dyn FnMut(&[u8], &str, u64)| -> Result<(), ExitCode> {
        for (name, reader) in readers.iter_mut() {
            let mut n = 0u64;
            for_each_line(reader, |l| {
                n += 1;
                feed(l, name, n);
            })
            .map_err(|e| fail(&format!("reading {name}: {}", io_error_text(&e))))?;
        }
        Ok(())
    };
    // Rows not measured (past the kept sizes): thresholds judged without them could pass on
    // a peak the log does not have, so they fail closed.
    let mut unmeasured = 0;
    let (measured, kind, mut spec) = match source {
        Source::Bandwidth => {
            let mut p = BandwidthParser::new(profile).map_err(|e| fail(&e))?;
            let mut first_unread: Option<String> = None;
            read_all(&mut |l, name, n| {
                p.feed(l);
                if first_unread.is_none() && p.unread_rows() > 0 {
                    first_unread = Some(format!("{name}:{n}"));
                }
            })?;
            if let Some(at) = &first_unread {
                // The rows matched: a hint to check --profile would mislead.
                report::warning_line(&format!(
                    "{} matched the bandwidthResult pattern of LogProfile {} without readable numbers; the first at {at}: {}",
                    count(p.unread_rows(), "row", "rows"),
                    profile.name,
                    p.first_unread().unwrap_or("a number did not parse")
                ));
            } else if p.rows() == 0 {
                report::warning_line(&format!(
                    "no bandwidth data was parsed; check --profile (LogProfile {} reads rows with its bandwidthResult pattern)",
                    profile.name
                ));
            }
            if p.dropped_rows() > 0 {
                report::warning_line(&format!(
                    "{} rows of further message sizes were ignored (at most {} sizes are kept)",
                    p.dropped_rows(),
                    nvcre_domain::measure::MAX_SIZES
                ));
            }
            if let (n @ 1.., first) = p.dropped_transports() {
                report::warning_line(&format!(
                    "transports past the first {} were not listed ({} naming them); the first: {}",
                    nvcre_domain::measure::MAX_TRANSPORTS,
                    count(n, "line", "lines"),
                    first.unwrap_or_default()
                ));
            }
            unmeasured = p.dropped_rows();
            (
                Measured::Bandwidth(p.status()),
                "BandwidthMeasurement",
                Map::new(),
            )
        }
        Source::Goodput => {
            let mut p = GoodputParser::new(profile).map_err(|e| fail(&e))?;
            let mut first_unparsed: Option<String> = None;
            read_all(&mut |l, name, n| {
                p.feed(l);
                if first_unparsed.is_none() && p.unparsed_times() > 0 {
                    first_unparsed = Some(format!("{name}:{n}"));
                }
            })?;
            if let Some(at) = &first_unparsed {
                report::warning_line(&format!(
                    "{} did not parse with layout {:?} of LogProfile {} and gave no time; the first at {at}: {:?}",
                    count(
                        p.unparsed_times(),
                        "timestamp capture",
                        "timestamp captures"
                    ),
                    profile.layout.layout(),
                    profile.name,
                    p.first_unparsed_time().unwrap_or_default()
                ));
            }
            if p.steps() == 0 {
                report::warning_line(&format!(
                    "no training step was parsed; check --profile (LogProfile {} reads steps with its trainingStep pattern)",
                    profile.name
                ));
            }
            for w in p.warnings() {
                report::warning_line(&w);
            }
            (
                Measured::Goodput(Box::new(p.status())),
                "GoodputMeasurement",
                Map::new(),
            )
        }
    };
    spec.insert("logProfileRef".into(), json!(profile.name));
    if let Some(t) = test_type {
        spec.insert("testType".into(), json!(t));
    }
    for key in &skipped {
        report::warning_line(&format!(
            "threshold {key} is measured by `measure {}`; skipped",
            match source {
                Source::Bandwidth => "goodput",
                Source::Goodput => "bandwidth",
            }
        ));
    }
    let mut results = thresholds.evaluate(source, |k| measured_value(&measured, k));
    nvcre_domain::measure::fail_unmeasured(&mut results, unmeasured);
    let text = match args.output {
        Format::Text => text(&measured, test_type, &results),
        Format::Json | Format::Yaml => {
            let doc = document(kind, spec, &measured, &results);
            if args.output == Format::Json {
                let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
                s.push('\n');
                s
            } else {
                to_yaml(&doc).map_err(|e| fail(&e.to_string()))?
            }
        }
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            return Err(fail(&format!("writing the output: {}", io_error_text(&e))));
        }
    }
    Ok(ExitCode::from(nvcre_domain::measure::exit_code(&results)))
}

/// `1 row`, `2 rows`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A log to read: its name in messages and its reader.
type Log = (String, Box<dyn BufRead>);

/// Opens every log up front, so a misspelled path fails before a long read.
fn open(logs: &[String]) -> Result<Vec<Log>, ExitCode> {
    let mut out: Vec<Log> = Vec::new();
    let mut failed = false;
    let mut stdin_used = false;
    for name in logs {
        if name == "-" {
            if stdin_used {
                report::error_line("standard input (-) is given twice; give `-` once");
                failed = true;
                continue;
            }
            stdin_used = true;
            out.push(("<stdin>".into(), Box::new(BufReader::new(std::io::stdin()))));
            continue;
        }
        match std::fs::File::open(name) {
            Ok(f) if f.metadata().is_ok_and(|m| m.is_dir()) => {
                report::error_line(&format!(
                    "reading {name}: is a directory, not a log file; name the log files in it"
                ));
                failed = true;
            }
            Ok(f) => out.push((name.clone(), Box::new(BufReader::with_capacity(1 << 16, f)))),
            Err(e) => {
                report::error_line(&format!("reading {name}: {}", io_error_text(&e)));
                failed = true;
            }
        }
    }
    for (name, reader) in &mut out {
        if let Some(encoding) = utf16(reader.as_mut()) {
            report::error_line(&format!(
                "reading {name}: the log is {encoding} (it starts with that byte-order mark); convert it to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8"
            ));
            failed = true;
        }
        // A UTF-8 byte-order mark is not part of the first line: left there, it hid that
        // line's row (or its timestamp) from the profile's patterns.
        if reader
            .fill_buf()
            .is_ok_and(|b| b.starts_with("\u{feff}".as_bytes()))
        {
            reader.consume("\u{feff}".len());
        }
    }
    if failed {
        Err(ExitCode::from(2))
    } else {
        Ok(out)
    }
}

/// `UTF-16LE` / `UTF-16BE` when `reader` starts with that byte-order mark (FF FE / FE FF; a
/// PowerShell redirect writes such files): read as bytes, none of its lines would match and the
/// log would pass for one without data. A read error is left to the read.
fn utf16(reader: &mut dyn BufRead) -> Option<&'static str> {
    match reader.fill_buf().ok()? {
        [0xFF, 0xFE, ..] => Some("UTF-16LE"),
        [0xFE, 0xFF, ..] => Some("UTF-16BE"),
        _ => None,
    }
}

/// The thresholds of `--run`, `--thresholds` and `--threshold` (later ones override a key),
/// compiled; and the keys of the other measurement that a file named (skipped). A key of the
/// other measurement given with `--threshold` is a usage error.
fn thresholds(args: &MeasureArgs, source: Source) -> Result<(Thresholds, Vec<String>), ExitCode> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    let mut problems: Vec<String> = Vec::new();
    if let Some(path) = &args.run {
        match run_thresholds(path) {
            Ok(m) => map.extend(m),
            Err(e) => problems.extend(e),
        }
    }
    if let Some(path) = &args.thresholds {
        match file_thresholds(path) {
            Ok(m) => map.extend(m),
            Err(e) => problems.extend(e),
        }
    }
    let mut flags = BTreeMap::new();
    for t in &args.threshold {
        match t.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                flags.insert(k.trim().to_string(), v.trim().to_string());
            }
            _ => problems.push(format!(
                "--threshold {t:?}: expected KEY=EXPR, e.g. --threshold 'busBandwidthGBps=value >= 400'"
            )),
        }
    }
    if let Some(e) = unknown_keys_message(flags.keys().map(String::as_str)) {
        problems.push(format!("--threshold: {e}"));
    }
    for k in flags.keys() {
        if let Some(key) = threshold_key(k)
            && key.source != source
        {
            problems.push(format!(
                "--threshold {k}: {} is not measured by `measure {}`",
                key.description,
                match source {
                    Source::Bandwidth => "bandwidth",
                    Source::Goodput => "goodput",
                }
            ));
        }
    }
    map.extend(flags);
    if !problems.is_empty() {
        for p in &problems {
            report::error_line(p);
        }
        return Err(ExitCode::from(2));
    }
    let skipped: Vec<String> = map
        .keys()
        .filter(|k| threshold_key(k).is_some_and(|key| key.source != source))
        .cloned()
        .collect();
    let compiled = Thresholds::compile(&map).map_err(|errors| {
        for e in &errors {
            report::error_line(e);
        }
        ExitCode::from(2)
    })?;
    Ok((compiled, skipped))
}

/// `file:line:col` of the field at `path` of `doc` (`file` alone when the field has no
/// position), the prefix of a message about that field.
fn at(doc: &nvcre_engine::Document, file: &str, path: &FieldPath) -> String {
    match doc.spans.lookup(path) {
        Some(pos) => format!("{file}:{pos}"),
        None => file.to_string(),
    }
}

/// [`at`] where the value at `path` starts, also for a mapping or list (a value of the wrong
/// type is what is wrong, not its key).
fn at_value(doc: &nvcre_engine::Document, file: &str, path: &FieldPath) -> String {
    match doc.spans.lookup_value(path) {
        Some(pos) => format!("{file}:{pos}"),
        None => at(doc, file, path),
    }
}

/// [`at`] the key of `path`'s last entry (an unknown key is what is wrong, not its value).
fn at_key(doc: &nvcre_engine::Document, file: &str, path: &FieldPath) -> String {
    match doc.spans.lookup_key(path) {
        Some(pos) => format!("{file}:{pos}"),
        None => at(doc, file, path),
    }
}

/// `key → expression` from the mapping at `base` of `doc` (absent: none), each value a string,
/// checked as `check` checks a WorkloadRun's thresholds: the unknown keys (one message, at the
/// first of them, prefixed by `context`), then each expression compiled. Every message starts
/// with `file:line:col: `, and a compile error names the field path
/// (`run.yaml:17:23: spec.thresholds.busBandwidthGBps: Threshold "busBandwidthGBps": compile
/// threshold expression …`).
fn mapping(
    doc: &nvcre_engine::Document,
    base: &FieldPath,
    file: &str,
    context: &str,
) -> Result<BTreeMap<String, String>, Vec<String>> {
    let Some(value) = base.get(&doc.value) else {
        return Ok(BTreeMap::new());
    };
    let Value::Object(m) = value else {
        return Err(vec![format!(
            "{}: thresholds must be a mapping of key to CEL expression (valid keys: {})",
            at_value(doc, file, base),
            THRESHOLD_KEYS
                .iter()
                .map(|k| k.key)
                .collect::<Vec<_>>()
                .join(", ")
        )]);
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let Value::String(s) = v else {
            return Err(vec![format!(
                "{}: threshold {k}: expected a CEL expression string such as \"value >= 400\", got {}",
                at_value(doc, file, &base.clone().key(k.clone())),
                nvcre_engine::json_type_name(v)
            )]);
        };
        out.insert(k.clone(), s.clone());
    }
    let mut problems = Vec::new();
    if let Some(e) = unknown_keys_message(out.keys().map(String::as_str)) {
        // The first in the file, not in key order.
        let first = m.keys().find(|k| threshold_key(k).is_none());
        let path = first.map_or_else(|| base.clone(), |k| base.clone().key(k.clone()));
        problems.push(format!("{}: {context}{e}", at_key(doc, file, &path)));
    }
    for (key, expression) in &out {
        if threshold_key(key).is_none() {
            continue;
        }
        if let Err(e) = compile_expression(key, expression) {
            let path = base.clone().key(key.clone());
            problems.push(format!("{}: {path}: {e}", at(doc, file, &path)));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn file_thresholds(path: &str) -> Result<BTreeMap<String, String>, Vec<String>> {
    let docs = input::read_one(&input::InputFile::given(path)).map_err(|e| vec![e])?;
    let name = if path == "-" { "<stdin>" } else { path };
    match docs.as_slice() {
        [doc] => mapping(doc, &FieldPath::root(), name, ""),
        [] => Err(vec![format!("{name}: no thresholds (the file is empty)")]),
        _ => Err(vec![format!(
            "{name}: expected one mapping document, found {}",
            docs.len()
        )]),
    }
}

/// `spec.thresholds` of the WorkloadRun in `path`, checked as [`mapping`] does; the run itself is
/// read as `check` reads it (its API group, the older one warned about; its field types).
fn run_thresholds(path: &str) -> Result<BTreeMap<String, String>, Vec<String>> {
    let docs = input::read_one(&input::InputFile::given(path)).map_err(|e| vec![e])?;
    let name = if path == "-" { "<stdin>" } else { path };
    // The WorkloadRuns of the file, also the items of a List (`kubectl get -o yaml`), each with
    // the lines of its own place.
    let kind = |v: &Value| v.get("kind").and_then(Value::as_str).map(str::to_string);
    let mut runs: Vec<nvcre_engine::Document> = Vec::new();
    for d in &docs {
        match (
            kind(&d.value),
            d.value.get("items").and_then(Value::as_array),
        ) {
            (Some(k), _) if k == "WorkloadRun" => runs.push(d.clone()),
            (Some(k), Some(items)) if k.ends_with("List") => {
                for (i, item) in items.iter().enumerate() {
                    if kind(item).as_deref() == Some("WorkloadRun") {
                        runs.push(nvcre_engine::Document {
                            source: d.source.clone(),
                            index: d.index,
                            value: item.clone(),
                            spans: d.spans.sub(&FieldPath::root().key("items").index(i)),
                        });
                    }
                }
            }
            _ => {}
        }
    }
    match runs.as_slice() {
        [doc] => {
            // The run as `check` reads it: its API group (the older one with a warning), its
            // field types.
            let notes = nvcre_domain::read_workload_run(doc)
                .map_err(|e| vec![e.to_string()])?
                .1;
            for n in notes {
                report::warning_line(&n);
            }
            let run = doc
                .value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let base = FieldPath::root().key("spec").key("thresholds");
            mapping(doc, &base, name, &format!("workloadrun {run}: "))
        }
        [] => Err(vec![format!("{name}: no WorkloadRun document")]),
        _ => Err(vec![format!(
            "{name}: {} WorkloadRun documents; give a file with one",
            runs.len()
        )]),
    }
}

fn text(measured: &Measured, test_type: Option<&str>, results: &[ThresholdResult]) -> String {
    let mut out = String::new();
    if let Some(t) = test_type {
        out.push_str(&format!("Test type: {t}\n"));
    }
    match measured {
        Measured::Bandwidth(s) => out.push_str(&bandwidth_block(s)),
        Measured::Goodput(s) => out.push_str(&goodput_block(s)),
    }
    if !results.is_empty() {
        out.push_str("Thresholds:\n");
        for r in results {
            match (&r.message, r.value) {
                (None, Some(v)) => out.push_str(&format!(
                    "    ✓  {}: {} (measured {v:.4})\n",
                    r.key, r.expression
                )),
                (Some(m), _) => out.push_str(&format!("    ✗  {m}\n")),
                (None, None) => {}
            }
        }
    }
    out
}

fn document(
    kind: &str,
    spec: Map<String, Value>,
    measured: &Measured,
    results: &[ThresholdResult],
) -> Value {
    let status = match measured {
        Measured::Bandwidth(s) => serde_json::to_value(s),
        Measured::Goodput(s) => serde_json::to_value(s),
    }
    .unwrap_or(Value::Null);
    let values: Map<String, Value> = THRESHOLD_KEYS
        .iter()
        .filter_map(|k| measured_value(measured, k.key).map(|v| (k.key.to_string(), json!(v))))
        .collect();
    json!({
        "apiVersion": nvcre_domain::crd::API_VERSION,
        "kind": kind,
        "spec": spec,
        "status": status,
        "values": values,
        "thresholds": serde_json::to_value(results).unwrap_or(Value::Null),
    })
}
