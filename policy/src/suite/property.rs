//! `property:` cases: generated variants of a case's input and an invariant each must satisfy,
//! run with proptest underneath (a fixed seed by default, so a run is reproducible).
//!
//! ```yaml
//! - note: any label value the Kubernetes pattern allows is accepted
//!   input: |                      # the base document (exactly one)
//!     apiVersion: nvcre.nvidia.com/v1alpha1
//!     kind: WorkloadRun
//!     …
//!   property:
//!     generate:                   # named generators, each exactly one of:
//!       value: {pattern: '([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]'}  # a regex
//!       n: {range: {min: 1, max: 8}}                  # an integer, inclusive
//!       name: {length: {min: 60, max: 70, chars: '[a-z]'}}  # a string of min..=max chars
//!       fw: {values: [torch, mpi, exec]}              # one of these (any YAML values)
//!       arch: {table: {name: gpu-defaults, field: gpuArchitecture}}  # a column of a table
//!     set:                        # field path in the input → CEL over `gen` and `input`
//!       spec.workloadMetadata.labels: "{'team': gen.value}"   # null removes the field
//!     context: {platform: "'aws'", gpuArch: gen.arch}         # CEL over `gen` (optional)
//!     invariant: size(findings) == 0   # CEL over input, output, findings, exit, error, gen, context
//!     cases: 64                   # optional; --cases and PROPTEST_CASES take precedence
//! ```
//!
//! A `table` generator draws from the rule set the case runs with (rows rendered without
//! params; rows without the field, or where `where` (CEL over `row`) is false, are skipped), so
//! a property follows the shipped tables instead of a copied list. On failure the shrunk
//! counterexample is reported with its generated values, its node context, what the run
//! produced and the generated input as YAML, ready to paste into `render` or `check`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nvcre_engine::{Expr, FieldPath, Finding, RuleSet, Scope, Segment, Source};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{CaseContext, CaseOutcome};

/// Cases a property runs when neither `--cases`, `PROPTEST_CASES` nor the case's `cases` says.
pub const DEFAULT_CASES: u32 = 32;

/// The seed properties run with unless `--seed` gives another.
pub const DEFAULT_SEED: u64 = 0;

/// `property:` of a case as written.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProperty {
    /// Named generators: what varies, over which values, patterns or lengths.
    pub(super) generate: BTreeMap<String, RawGenerator>,
    /// Field path in the input document → CEL over `gen` and `input` giving the value to put
    /// there (`null` removes the field). Applied in path order.
    #[serde(default)]
    pub(super) set: BTreeMap<String, String>,
    /// The node context as CEL over `gen`, replacing the case's `context` keys it gives.
    #[serde(default)]
    pub(super) context: Option<RawPropertyContext>,
    /// CEL over `input`, `output`, `findings`, `exit`, `error`, `gen` and `context` that must
    /// be true for every generated input.
    pub(super) invariant: String,
    /// Generated inputs to run (`--cases` and `PROPTEST_CASES` take precedence).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(super) cases: Option<u32>,
}

/// `property.context` as written: CEL expressions over `gen` giving a string (or null).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPropertyContext {
    /// `--platform`.
    #[serde(default)]
    pub(super) platform: Option<String>,
    /// `--gpu-arch`.
    #[serde(default, rename = "gpuArch")]
    pub(super) gpu_arch: Option<String>,
}

/// One generator as written: exactly one key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
pub(super) struct RawGenerator {
    /// One of these values (shrinks towards the first).
    #[serde(default)]
    values: Option<Vec<Value>>,
    /// A string matching this regex (the whole string).
    #[serde(default)]
    pattern: Option<String>,
    /// An integer in `min..=max`.
    #[serde(default)]
    range: Option<RawRange>,
    /// A string of `min..=max` characters, each matching `chars` (default `[a-z0-9]`).
    #[serde(default)]
    length: Option<RawLength>,
    /// The distinct values of a field of a table of the rule set the case runs with.
    #[serde(default)]
    table: Option<RawTable>,
}

/// `range:` of a generator.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRange {
    /// Smallest value.
    min: i64,
    /// Largest value.
    max: i64,
}

/// `length:` of a generator.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLength {
    /// Fewest characters.
    min: u32,
    /// Most characters.
    max: u32,
    /// A regex of one character (a class such as `[a-z0-9]`).
    #[serde(default)]
    chars: Option<String>,
}

/// `table:` of a generator.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTable {
    /// The table's `metadata.name`.
    name: String,
    /// A field path into each row.
    field: String,
    /// CEL over `row`: only rows for which it is true.
    #[serde(default, rename = "where")]
    where_: Option<String>,
}

/// A checked `property:`.
#[derive(Debug, Clone)]
pub struct Property {
    /// The generators, by name.
    pub generators: Vec<(String, Generator)>,
    /// `set`: path and expression, in path order.
    pub set: Vec<(FieldPath, Expr)>,
    /// `context.platform`.
    pub platform: Option<Expr>,
    /// `context.gpuArch`.
    pub gpu_arch: Option<Expr>,
    /// The invariant.
    pub invariant: Expr,
    /// The case's own `cases`.
    pub cases: Option<u32>,
}

/// A checked generator.
#[derive(Debug, Clone)]
pub enum Generator {
    /// `values`.
    Values(Vec<Value>),
    /// `pattern` (and `length`, as `(?:chars){min,max}`).
    Pattern(String),
    /// `range`.
    Range(i64, i64),
    /// `table`: table name, field path, row filter.
    Table(String, FieldPath, Option<Expr>),
}

/// The fields of the node context an invariant reads (`context.platform`, …).
const CONTEXT_FIELDS: [&str; 3] = ["platform", "gpuArch", "nodesFile"];

/// Checks a `property:` as written; the error is `(field path below the property, message)`.
pub(super) fn compile(raw: RawProperty) -> Result<Property, (FieldPath, String)> {
    let at = |k: &str| FieldPath::root().key(k);
    let generator_names: Vec<String> = raw.generate.keys().cloned().collect();
    // Each expression is checked against the names its site is evaluated with: a misspelt or
    // misplaced name or generator would fail every case alike, so it is refused here.
    let cel = |path: FieldPath, text: &str, names: &[&str]| {
        let e = Expr::compile(text)
            .map_err(|e| (path.clone(), format!("invalid CEL: {}", e.message)))?;
        if let Some(why) = e.unknown_functions(names).into_iter().next() {
            return Err((path, format!("invalid CEL: {why}")));
        }
        if let Some(name) = e
            .free_names()
            .into_iter()
            .find(|n| !names.contains(&n.as_str()))
        {
            return Err((
                path,
                format!(
                    "invalid CEL: {name} is not defined here: the expression can read {}",
                    names.join(", ")
                ),
            ));
        }
        let unknown_field = |binding: &str, known: &[&str]| {
            e.selected_fields(binding)
                .unwrap_or_default()
                .into_iter()
                .find(|f| !known.contains(&f.as_str()))
        };
        let generators: Vec<&str> = generator_names.iter().map(String::as_str).collect();
        if let Some(g) = unknown_field("gen", &generators) {
            return Err((
                path,
                format!(
                    "invalid CEL: gen.{g} is not a generator of this property; it has {}",
                    generators.join(", ")
                ),
            ));
        }
        if let Some(f) = unknown_field("context", &CONTEXT_FIELDS) {
            return Err((
                path,
                format!(
                    "invalid CEL: context.{f} is not a field of the node context; it has {}",
                    CONTEXT_FIELDS.join(", ")
                ),
            ));
        }
        Ok(e)
    };
    if raw.generate.is_empty() {
        return Err((at("generate"), "give at least one generator".into()));
    }
    let mut generators = Vec::new();
    for (name, g) in raw.generate {
        let gat = at("generate").key(name.clone());
        let generator = match (g.values, g.pattern, g.range, g.length, g.table) {
            (Some(values), None, None, None, None) => {
                if values.is_empty() {
                    return Err((gat.key("values"), "must not be empty".into()));
                }
                Generator::Values(values)
            }
            (None, Some(p), None, None, None) => {
                check_pattern(&p).map_err(|m| (gat.key("pattern"), m))?;
                Generator::Pattern(p)
            }
            (None, None, Some(r), None, None) => {
                if r.min > r.max {
                    return Err((gat.key("range"), "min must not exceed max".into()));
                }
                Generator::Range(r.min, r.max)
            }
            (None, None, None, Some(l), None) => {
                if l.min > l.max {
                    return Err((gat.key("length"), "min must not exceed max".into()));
                }
                let chars = l.chars.unwrap_or_else(|| "[a-z0-9]".into());
                let p = format!("(?:{chars}){{{},{}}}", l.min, l.max);
                check_pattern(&p).map_err(|m| (gat.key("length").key("chars"), m))?;
                Generator::Pattern(p)
            }
            (None, None, None, None, Some(t)) => {
                let field = FieldPath::parse(&t.field)
                    .map_err(|e| (gat.clone().key("table").key("field"), e.message))?;
                let filter = t
                    .where_
                    .map(|w| cel(gat.clone().key("table").key("where"), &w, &["row"]))
                    .transpose()?;
                Generator::Table(t.name, field, filter)
            }
            _ => {
                return Err((
                    gat,
                    "give exactly one of values, pattern, range, length or table".into(),
                ));
            }
        };
        generators.push((name, generator));
    }
    let mut set = Vec::new();
    for (path, expr) in raw.set {
        let sat = at("set").key(path.clone());
        let p = FieldPath::parse(&path).map_err(|e| (sat.clone(), e.message))?;
        if p.segments().is_empty() {
            return Err((sat, "cannot replace the whole document".into()));
        }
        set.push((p, cel(sat, &expr, &["gen", "input"])?));
    }
    let ctx = raw.context.unwrap_or(RawPropertyContext {
        platform: None,
        gpu_arch: None,
    });
    let platform = ctx
        .platform
        .map(|e| cel(at("context").key("platform"), &e, &["gen"]))
        .transpose()?;
    let gpu_arch = ctx
        .gpu_arch
        .map(|e| cel(at("context").key("gpuArch"), &e, &["gen"]))
        .transpose()?;
    let invariant = cel(
        at("invariant"),
        &raw.invariant,
        &[
            "input", "output", "findings", "exit", "error", "gen", "context",
        ],
    )?;
    if raw.cases == Some(0) {
        return Err((at("cases"), "must be at least 1".into()));
    }
    Ok(Property {
        generators,
        set,
        platform,
        gpu_arch,
        invariant,
        cases: raw.cases,
    })
}

fn check_pattern(p: &str) -> Result<(), String> {
    proptest::string::string_regex(p)
        .map(|_| ())
        .map_err(|e| format!("invalid pattern {p:?}: {e}"))
}

/// How many cases and which seed properties run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropertyOptions {
    /// `--cases`: overrides `PROPTEST_CASES` and each case's `cases`.
    pub cases: Option<u32>,
    /// `--seed`.
    pub seed: u64,
}

impl Default for PropertyOptions {
    fn default() -> PropertyOptions {
        PropertyOptions {
            cases: None,
            seed: DEFAULT_SEED,
        }
    }
}

impl PropertyOptions {
    /// `--cases`, else `PROPTEST_CASES`, else the case's own `cases`, else [`DEFAULT_CASES`].
    fn cases_for(&self, property: &Property) -> u32 {
        self.cases
            .or_else(|| {
                std::env::var("PROPTEST_CASES")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .filter(|n| *n > 0)
            })
            .or(property.cases)
            .unwrap_or(DEFAULT_CASES)
    }
}

/// One generated input, ready to run.
pub(super) struct Variant {
    /// The generated values by name.
    pub(super) gen_values: Value,
    /// The input document after `set`.
    pub(super) input: Value,
    /// Its YAML text.
    pub(super) yaml: String,
    /// The node context.
    pub(super) context: CaseContext,
}

/// Runs one generated input (its source and node context) as the case's mode does.
pub(super) type RunVariant<'a> =
    dyn FnMut(&std::sync::Arc<Source>, &CaseContext) -> CaseOutcome + 'a;

/// Runs a property: `base` is the case's input document, `ctx` its context. Returns the
/// outcome of the last (or shrunk failing) variant and the diff lines (empty when it held).
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    property: &Property,
    options: &PropertyOptions,
    rules: &RuleSet,
    base: &Value,
    ctx: &CaseContext,
    source_name: &str,
    mode_verb: &str,
    runner: &mut RunVariant<'_>,
) -> (CaseOutcome, Vec<String>) {
    // Table generators draw from the rule set the case runs with.
    let mut strategies: Vec<BoxedStrategy<Value>> = Vec::new();
    for (name, g) in &property.generators {
        match strategy(g, rules) {
            Ok(s) => strategies.push(s),
            Err(m) => {
                return (
                    CaseOutcome {
                        error: Some(m.clone()),
                        exit: 2,
                        ..CaseOutcome::default()
                    },
                    vec![format!("property could not run: generator {name}: {m}")],
                );
            }
        }
    }
    let cases = options.cases_for(property);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let mut seed = [0u8; 32];
    for chunk in seed.chunks_mut(8) {
        chunk.copy_from_slice(&options.seed.to_le_bytes());
    }
    let mut test_runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let names: Vec<&str> = property
        .generators
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    let cell = std::cell::RefCell::new(runner);
    let check = |values: Vec<Value>| -> Result<(), TestCaseError> {
        let variant = variant(property, &names, values, base, ctx, source_name)
            .map_err(TestCaseError::fail)?;
        let source = Source::new(format!("{source_name} (generated)"), variant.yaml.clone());
        let outcome = (cell.borrow_mut())(&source, &variant.context);
        holds(property, &variant, &outcome).map_err(TestCaseError::fail)
    };
    let result = test_runner.run(&strategies, check);
    match result {
        Ok(()) => (CaseOutcome::default(), Vec::new()),
        Err(TestError::Abort(reason)) => (
            CaseOutcome {
                error: Some(reason.to_string()),
                exit: 2,
                ..CaseOutcome::default()
            },
            vec![format!("property could not run: {reason}")],
        ),
        Err(TestError::Fail(reason, values)) => {
            let mut diff = vec![format!(
                "property failed (seed {}, {cases} cases; shrunk counterexample below): {reason}",
                options.seed
            )];
            // One line: a folded YAML block keeps the line breaks of more-indented lines.
            let invariant: Vec<&str> = property.invariant.text().split_whitespace().collect();
            diff.push(format!("  invariant: {}", invariant.join(" ")));
            let Ok(v) = variant(property, &names, values, base, ctx, source_name) else {
                return (CaseOutcome::default(), diff);
            };
            let source = Source::new(format!("{source_name} (generated)"), v.yaml.clone());
            let outcome = (cell.borrow_mut())(&source, &v.context);
            diff.push(format!("  gen: {}", v.gen_values));
            let mut flags = Vec::new();
            if let Some(p) = &v.context.platform {
                flags.push(format!("--platform {p}"));
            }
            if let Some(a) = &v.context.gpu_arch {
                flags.push(format!("--gpu-arch {a}"));
            }
            if let Some(n) = &v.context.nodes_file {
                flags.push(format!("--nodes-file {}", n.display()));
            }
            diff.push(format!("  exit: {}", outcome.exit));
            if let Some(e) = &outcome.error {
                diff.push(format!("  error: {e}"));
            }
            for f in &outcome.findings {
                diff.push(format!("  finding: {}", super::diff::finding_line(f)));
            }
            let command = std::iter::once(format!("nvcre-policy {mode_verb}"))
                .chain(flags)
                .chain(std::iter::once("counterexample.yaml".to_string()))
                .collect::<Vec<_>>()
                .join(" ");
            diff.push(format!("  counterexample.yaml (run: {command}):"));
            diff.extend(v.yaml.lines().map(|l| format!("    {l}")));
            (outcome, diff)
        }
    }
}

/// The proptest strategy of a generator.
fn strategy(g: &Generator, rules: &RuleSet) -> Result<BoxedStrategy<Value>, String> {
    Ok(match g {
        Generator::Values(v) => proptest::sample::select(v.clone()).boxed(),
        Generator::Pattern(p) => proptest::string::string_regex(p)
            .map_err(|e| format!("invalid pattern {p:?}: {e}"))?
            .prop_map(Value::String)
            .boxed(),
        Generator::Range(a, b) => (*a..=*b).prop_map(Value::from).boxed(),
        Generator::Table(name, field, filter) => {
            let values = table_values(rules, name, field, filter.as_ref())?;
            proptest::sample::select(values).boxed()
        }
    })
}

/// The distinct values of `field` over the rows of table `name` (in row order).
///
/// # Errors
/// No such table, a row that does not render, a filter that fails, no value at all.
pub fn table_values(
    rules: &RuleSet,
    name: &str,
    field: &FieldPath,
    filter: Option<&Expr>,
) -> Result<Vec<Value>, String> {
    let table = rules
        .table(name)
        .ok_or_else(|| format!("no table {name:?} in the rule set"))?;
    let rows = table.render_all(&Value::Null).map_err(|e| e.to_string())?;
    let mut out: Vec<Value> = Vec::new();
    for (_, row) in rows {
        if let Some(f) = filter {
            let mut scope = Scope::new();
            scope.bind("row", &row);
            if !f.eval_bool(&scope).map_err(|e| e.message)? {
                continue;
            }
        }
        if let Some(v) = field.get(&row)
            && !out.contains(v)
        {
            out.push(v.clone());
        }
    }
    if out.is_empty() {
        return Err(format!("table {name:?} has no row with field {field}"));
    }
    Ok(out)
}

/// Applies the generated values to the base document and context.
fn variant(
    property: &Property,
    names: &[&str],
    values: Vec<Value>,
    base: &Value,
    ctx: &CaseContext,
    source_name: &str,
) -> Result<Variant, String> {
    let gen_values = Value::Object(
        names
            .iter()
            .map(|n| n.to_string())
            .zip(values)
            .collect::<Map<_, _>>(),
    );
    let mut input = base.clone();
    for (path, expr) in &property.set {
        let mut scope = Scope::new();
        scope.bind("gen", &gen_values);
        scope.bind("input", &input);
        let v = expr
            .eval_json(&scope)
            .map_err(|e| format!("set {path}: {}", e.message))?;
        set_path(&mut input, path.segments(), v).map_err(|m| format!("set {path}: {m}"))?;
    }
    let mut context = ctx.clone();
    let mut scope = Scope::new();
    scope.bind("gen", &gen_values);
    for (expr, slot) in [
        (&property.platform, &mut context.platform),
        (&property.gpu_arch, &mut context.gpu_arch),
    ] {
        if let Some(e) = expr {
            *slot = match e
                .eval_json(&scope)
                .map_err(|e| format!("context: {}", e.message))?
            {
                Value::Null => None,
                Value::String(s) => Some(s),
                other => return Err(format!("context: expected a string, got {other}")),
            };
        }
    }
    let yaml = nvcre_engine::to_yaml(&input).map_err(|e| format!("{source_name}: {e}"))?;
    Ok(Variant {
        gen_values,
        input,
        yaml,
        context,
    })
}

/// Puts `v` at `path` below `doc`, creating mappings on the way; `null` removes the field.
fn set_path(doc: &mut Value, path: &[Segment], v: Value) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        *doc = v;
        return Ok(());
    };
    let mut cur = doc;
    for seg in parents {
        cur = match seg {
            Segment::Key(k) => {
                if cur.is_null() {
                    *cur = Value::Object(Map::new());
                }
                let Value::Object(m) = cur else {
                    return Err(format!("{k:?}: the parent is not a mapping"));
                };
                m.entry(k.clone()).or_insert(Value::Null)
            }
            Segment::Index(i) => cur
                .as_array_mut()
                .and_then(|a| a.get_mut(*i))
                .ok_or_else(|| format!("[{i}]: no such list item"))?,
        };
    }
    match last {
        Segment::Key(k) => {
            if cur.is_null() {
                if v.is_null() {
                    return Ok(());
                }
                *cur = Value::Object(Map::new());
            }
            let Value::Object(m) = cur else {
                return Err(format!("{k:?}: the parent is not a mapping"));
            };
            if v.is_null() {
                m.remove(k);
            } else {
                m.insert(k.clone(), v);
            }
        }
        Segment::Index(i) => {
            let a = cur
                .as_array_mut()
                .ok_or_else(|| format!("[{i}]: the parent is not a list"))?;
            if *i >= a.len() {
                return Err(format!("[{i}]: no such list item"));
            }
            if v.is_null() {
                a.remove(*i);
            } else {
                a[*i] = v;
            }
        }
    }
    Ok(())
}

/// Evaluates the invariant on one run: `Ok` when it is true; otherwise why not (false, or an
/// evaluation error, which fails the property too).
fn holds(property: &Property, v: &Variant, outcome: &CaseOutcome) -> Result<(), String> {
    let mut scope = Scope::new();
    scope.bind("gen", &v.gen_values);
    scope.bind("input", &v.input);
    scope.bind("output", outcome.output.as_ref().unwrap_or(&Value::Null));
    scope.bind("findings", &findings_value(&outcome.findings));
    scope.bind("exit", &json!(outcome.exit));
    scope.bind(
        "error",
        &outcome.error.clone().map_or(Value::Null, Value::String),
    );
    scope.bind(
        "context",
        &json!({
            "platform": v.context.platform,
            "gpuArch": v.context.gpu_arch,
            "nodesFile": v.context.nodes_file.as_ref().map(|p: &PathBuf| p.display().to_string()),
        }),
    );
    match property.invariant.eval_bool(&scope) {
        Ok(true) => Ok(()),
        Ok(false) => Err("the invariant is false".into()),
        Err(e) => Err(format!(
            "the invariant could not be evaluated: {}",
            e.message
        )),
    }
}

/// Findings as the invariant sees them: `{ruleId, pack, severity, message, fieldPath, line,
/// column}` (absent fields are left out).
fn findings_value(findings: &[Finding]) -> Value {
    Value::Array(
        findings
            .iter()
            .map(|f| {
                let mut m = Map::new();
                m.insert("ruleId".into(), json!(f.rule_id));
                m.insert("pack".into(), json!(f.pack));
                m.insert("severity".into(), json!(f.severity.to_string()));
                m.insert("message".into(), json!(f.message));
                if let Some(p) = &f.field_path {
                    m.insert("fieldPath".into(), json!(p));
                }
                if let Some(l) = f.line {
                    m.insert("line".into(), json!(l));
                }
                if let Some(c) = f.column {
                    m.insert("column".into(), json!(c));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::suite::format::tests::RUN;
    use crate::suite::{SuiteRunner, parse_suite};

    use super::*;

    /// The error of a one-case suite whose case ends with `property` (4-space indented lines).
    fn suite_error(property: &str) -> String {
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}    property:\n{property}");
        match parse_suite(Path::new("t.yaml"), &text) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_property_is_checked_when_the_suite_loads() {
        let ok = "      generate: {n: {range: {min: 1, max: 3}}}\n      invariant: 'true'\n";
        assert_eq!(suite_error(ok), "ok");
        assert_eq!(
            suite_error(
                "      generate: {n: {range: {min: 1, max: 3}, values: [1]}}\n      invariant: 'true'\n"
            ),
            "rule test suite error: t.yaml:9:18: cases[0].property.generate.n: give exactly one of values, pattern, range, length or table"
        );
        let e = suite_error("      generate: {s: {pattern: '('}}\n      invariant: 'true'\n");
        assert!(
            e.starts_with("rule test suite error: t.yaml:9:22: cases[0].property.generate.s.pattern: invalid pattern \"(\""),
            "{e}"
        );
        let e = suite_error("      generate: {n: {values: [1]}}\n      invariant: 'size('\n");
        assert!(
            e.starts_with(
                "rule test suite error: t.yaml:10:7: cases[0].property.invariant: invalid CEL"
            ),
            "{e}"
        );
        // A call the interpreter does not know: refused when the suite loads, not a failure
        // of every generated case.
        for (invariant, why) in [
            (
                "exit == 0 || sizee(findings) == 0",
                "sizee is not a function or method of the CEL library here",
            ),
            (
                "exit == 0 || sets.contains([1], [1])",
                "sets.contains is not a function of the CEL library here",
            ),
            // A misspelt name or generator: every case would fail alike.
            (
                "exitt == 0",
                "exitt is not defined here: the expression can read input, output, findings, exit, error, gen, context",
            ),
            (
                "row.id == 1",
                "row is not defined here: the expression can read input, output, findings, exit, error, gen, context",
            ),
            (
                "context.platfrm == 1",
                "context.platfrm is not a field of the node context; it has platform, gpuArch, nodesFile",
            ),
            (
                "gen.nn > 0",
                "gen.nn is not a generator of this property; it has n",
            ),
        ] {
            assert_eq!(
                suite_error(&format!(
                    "      generate: {{n: {{values: [1]}}}}\n      invariant: '{invariant}'\n"
                )),
                format!(
                    "rule test suite error: t.yaml:10:7: cases[0].property.invariant: invalid CEL: {why}"
                )
            );
        }
        // A name of another site: `set` reads `gen` and `input` only.
        assert_eq!(
            suite_error(
                "      generate: {n: {values: [1]}}\n      set: {metadata.name: exit}\n      invariant: 'true'\n"
            ),
            "rule test suite error: t.yaml:10:13: cases[0].property.set[\"metadata.name\"]: invalid CEL: exit is not defined here: the expression can read gen, input"
        );
        assert_eq!(
            suite_error("      generate: {n: {values: []}}\n      invariant: 'true'\n"),
            "rule test suite error: t.yaml:9:22: cases[0].property.generate.n.values: must not be empty"
        );
        assert_eq!(
            suite_error("      generate: {}\n      invariant: 'true'\n"),
            "rule test suite error: t.yaml:9:7: cases[0].property.generate: give at least one generator"
        );
        assert_eq!(
            suite_error(
                "      generate: {n: {values: [1]}}\n      invariant: 'true'\n    want_exit: 0\n"
            ),
            "rule test suite error: t.yaml:11:5: cases[0].want_exit: does not go with property (the invariant says what must hold)"
        );
        assert_eq!(
            suite_error(
                "      generate: {n: {values: [1]}}\n      invariant: 'true'\n    want_findings: []\n"
            ),
            "rule test suite error: t.yaml:2:5: cases[0]: give one expectation, not want_findings and property"
        );
    }

    fn run(property: &str, options: PropertyOptions) -> crate::suite::CaseResult {
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}    property:\n{property}");
        let suite = parse_suite(Path::new("t.yaml"), &text).expect("parses");
        let rules = crate::packs::default_rules().expect("rules");
        let mut runner = SuiteRunner::new(&rules).with_property_options(options);
        runner.run(&suite, &suite.cases[0])
    }

    #[test]
    fn a_property_that_holds_passes_and_one_that_does_not_shows_the_shrunk_input() {
        let options = PropertyOptions {
            cases: Some(16),
            seed: 7,
        };
        let holds = "      generate: {image: {pattern: '[a-z]{1,8}'}}\n      set: {spec.image: gen.image}\n      invariant: size(findings) == 0 && input.spec.image == gen.image\n";
        let r = run(holds, options);
        assert!(r.passed(), "{}", r.report());
        // Fails for every image of 3 characters or more: shrinks to "aaa".
        let fails = "      generate: {image: {pattern: '[a-z]{1,8}'}}\n      set: {spec.image: gen.image}\n      invariant: size(gen.image) < 3\n";
        let r = run(fails, options);
        assert_eq!(
            r.diff,
            [
                "property failed (seed 7, 16 cases; shrunk counterexample below): the invariant is false",
                "  invariant: size(gen.image) < 3",
                "  gen: {\"image\":\"aaa\"}",
                "  exit: 0",
                "  counterexample.yaml (run: nvcre-policy check counterexample.yaml):",
                "    apiVersion: nvcre.nvidia.com/v1alpha1",
                "    kind: WorkloadRun",
                "    metadata:",
                "      name: t",
                "    spec:",
                "      image: aaa",
                "      numNodes: 1",
                "      framework:",
                "        exec:",
                "          command:",
                "          - run",
            ]
        );
        // Under `--rules DIR`, the replay command reads the same rules.
        let text = format!("cases:\n  - note: n\n    input: |\n{RUN}    property:\n{fails}");
        let suite = parse_suite(Path::new("t.yaml"), &text).expect("parses");
        let rules = crate::packs::default_rules().expect("rules");
        for (dir, want) in [
            ("my-rules", "--rules my-rules check"),
            ("my rules", "--rules 'my rules' check"),
        ] {
            let mut runner = SuiteRunner::new(&rules)
                .with_rules_dir(Some(Path::new(dir)))
                .with_property_options(options);
            let r = runner.run(&suite, &suite.cases[0]);
            assert_eq!(
                r.diff[4],
                format!("  counterexample.yaml (run: nvcre-policy {want} counterexample.yaml):")
            );
        }
    }

    #[test]
    fn an_invariant_that_cannot_be_evaluated_fails_closed() {
        let r = run(
            "      generate: {n: {values: [1]}}\n      invariant: findings[3].ruleId == 'x'\n",
            PropertyOptions::default(),
        );
        assert!(
            r.diff[0].starts_with("property failed (seed 0, 32 cases; shrunk counterexample below): the invariant could not be evaluated: "),
            "{:?}",
            r.diff
        );
    }

    #[test]
    fn set_creates_mappings_and_null_removes() {
        let mut doc = json!({"a": {"b": 1}, "l": [1, 2]});
        set_path(
            &mut doc,
            FieldPath::parse("x.y").expect("path").segments(),
            json!(2),
        )
        .expect("set");
        set_path(
            &mut doc,
            FieldPath::parse("a.b").expect("path").segments(),
            Value::Null,
        )
        .expect("set");
        set_path(
            &mut doc,
            FieldPath::parse("l[1]").expect("path").segments(),
            json!(5),
        )
        .expect("set");
        assert_eq!(doc, json!({"a": {}, "l": [1, 5], "x": {"y": 2}}));
        assert_eq!(
            set_path(
                &mut doc,
                FieldPath::parse("l[7]").expect("path").segments(),
                json!(1)
            ),
            Err("[7]: no such list item".to_string())
        );
    }

    #[test]
    fn table_values_follow_the_rule_set() {
        let rules = crate::packs::default_rules().expect("rules");
        let filter = Expr::compile("row.?selectable.orValue(false)").expect("cel");
        let archs = table_values(
            &rules,
            "gpu-defaults",
            &FieldPath::parse("gpuArchitecture").expect("path"),
            Some(&filter),
        )
        .expect("values");
        assert_eq!(archs.first(), Some(&json!("a100")));
        assert_eq!(
            table_values(&rules, "nope", &FieldPath::root().key("x"), None),
            Err("no table \"nope\" in the rule set".to_string())
        );
    }
}
