//! The first render stage: a raw document into a typed WorkloadRun or Workflow, with every
//! input error pointing at its line.
//!
//! [`prepare_document`] checks kind and API group and drops nulls, [`parse_typed`] reads the
//! typed form with the field path of the first problem, and [`check_user_overrides`] refuses
//! user overrides that can never apply, before any platform is known. [`locate_findings`] later
//! maps post-override findings back to the source lines they came from.

use nvcre_engine::{Document, FieldPath, Origin};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{API_VERSION, LEGACY_API_VERSION, OverrideSpec};
use crate::detect::quote;
use crate::error::PolicyError;

/// Readies a manifest for the rules: a missing `kind` is taken as `expected`; a missing
/// `apiVersion` as `nvcre.nvidia.com/v1alpha1`; the older `cre.nvidia.com` group is accepted
/// with a note; `null` fields are dropped (the API server treats them as absent). Spans stay
/// valid: only nulls are removed.
///
/// # Errors
/// [`PolicyError::Input`] for another kind or API group, at its line.
pub fn prepare_document(
    doc: &Document,
    expected: &str,
) -> Result<(Document, Vec<super::Note>), PolicyError> {
    let mut doc = doc.clone();
    let mut notes = Vec::new();
    if !doc.value.is_object() {
        return Err(input_error(
            &doc,
            "",
            format!(
                "document {} is a {}, not a {expected} manifest (a mapping)",
                doc.index + 1,
                nvcre_engine::json_type_name(&doc.value)
            ),
        ));
    }
    if doc.value.get("kind").is_none() && doc.value.get("apiVersion").is_none() {
        return Err(input_error(
            &doc,
            "",
            format!(
                "document {} has neither apiVersion nor kind: not a {expected} manifest",
                doc.index + 1
            ),
        ));
    }
    match doc.value.get("kind") {
        None | Some(Value::Null) => {}
        Some(Value::String(k)) if k == expected => {}
        Some(other) => {
            let kind = other
                .as_str()
                .map(quote)
                .unwrap_or_else(|| other.to_string());
            return Err(input_error(
                &doc,
                "kind",
                format!("expected kind {expected}, got {kind}"),
            ));
        }
    }
    match doc.value.get("apiVersion").and_then(Value::as_str) {
        None | Some(API_VERSION) | Some(LEGACY_API_VERSION) => {}
        Some(other) => return Err(api_version_error(&doc, other)),
    }
    let at = match doc
        .spans
        .lookup(&nvcre_engine::FieldPath::root().key("apiVersion"))
    {
        Some(p) => format!("{}:{}:{}", doc.source.name, p.line, p.column),
        None => doc.source.name.clone(),
    };
    normalize_api_version(&mut doc.value, &mut notes, &at);
    strip_nulls_outside_overrides(&mut doc.value);
    if let Some(m) = doc.value.as_object_mut() {
        m.entry("apiVersion").or_insert_with(|| json!(API_VERSION));
        m.entry("kind").or_insert_with(|| json!(expected));
    }
    Ok((doc, notes))
}

/// The input error of a document of ours whose `apiVersion` is `got`, another than ours, at
/// its `apiVersion`.
pub(crate) fn api_version_error(doc: &Document, got: &str) -> PolicyError {
    input_error(
        doc,
        "apiVersion",
        format!(
            "expected apiVersion {API_VERSION} (or the older {LEGACY_API_VERSION}), got {}",
            quote(got)
        ),
    )
}

/// Removes every `null` field, as the API server does for a custom resource's fields that are
/// not nullable, except under `spec.overrides`: there a `null` is a patch's "delete this key"
/// (a strategic merge patch, a dependency merge) and must reach the merge.
fn strip_nulls_outside_overrides(value: &mut Value) {
    // A placeholder that is not null keeps the key, and so the order of `spec`'s keys.
    // (Not `pointer_mut`, which allocates each token it unescapes.)
    fn overrides_of(value: &mut Value) -> Option<&mut Value> {
        value.get_mut("spec")?.get_mut("overrides")
    }
    let overrides = overrides_of(value)
        .filter(|o| !o.is_null())
        .map(|o| std::mem::replace(o, Value::Bool(false)));
    nvcre_engine::patch::strip_nulls(value);
    if let (Some(o), Some(slot)) = (overrides, overrides_of(value)) {
        *slot = o;
    }
}

/// Normalises the API group: the legacy `cre.nvidia.com` is accepted with a warning at `at`
/// (where `apiVersion` is written), which `render` shows among several documents.
fn normalize_api_version(value: &mut Value, warnings: &mut Vec<super::Note>, at: &str) {
    if value.get("apiVersion").and_then(Value::as_str) == Some(LEGACY_API_VERSION) {
        warnings.push(super::Note {
            at: Some(at.to_string()),
            ..super::Note::from(format!(
                "apiVersion {LEGACY_API_VERSION} is the older API group; treating it as {API_VERSION}"
            ))
        });
        if let Some(m) = value.as_object_mut() {
            m.insert("apiVersion".into(), json!(API_VERSION));
        }
    }
}

/// The most unknown fields of a closed schema collected for one error (each costs a re-read of
/// the document).
const MAX_UNKNOWN_FIELDS: usize = 100;

/// Reads a document as `T`, reporting the field path and line:column of the first problem. A
/// `WorkloadRun` or `Workflow` also gets strict field validation of its Kubernetes-typed parts
/// (`metadata`; a WorkloadRun's pass-through pod fields), and every unknown field of the
/// document, in its closed schema (`spec`) or in a Kubernetes type, is listed in one error.
///
/// # Errors
/// [`PolicyError::Input`] with `parsing <what>: <path>: <serde message>` (a type error; a list
/// where the schema wants a mapping is one, never read by position), or
/// the strict validation's message: `strict decoding error: unknown field "spec.a", unknown
/// field "metadata.b": correct or remove them`, at the first one's line.
pub fn parse_typed<T: for<'de> Deserialize<'de>>(
    doc: &Document,
    what: &str,
) -> Result<T, PolicyError> {
    let strict = what == "WorkloadRun" || what == "Workflow";
    let mut unknown: Vec<FieldPath> = Vec::new();
    let mut stripped: Option<Value> = None;
    let typed = loop {
        let value = stripped.as_ref().unwrap_or(&doc.value);
        match nvcre_engine::read_mapping::<T>(value) {
            Ok(t) => break t,
            Err(e) => {
                // An unknown field of the closed schema: note it, drop it from a copy and
                // read again, so every one is reported, not only the first.
                if strict
                    && unknown.len() < MAX_UNKNOWN_FIELDS
                    && let Some(path) = unknown_field(&e)
                    && nvcre_engine::remove_entry_at(
                        stripped.get_or_insert_with(|| doc.value.clone()),
                        e.path(),
                    )
                {
                    unknown.push(path);
                    continue;
                }
                let inner = e.inner().to_string();
                // A required field that is missing is most often one misspelt: the unknown
                // fields say which.
                if strict && inner.starts_with("missing field `") {
                    super::strict::validate(doc, what == "WorkloadRun", unknown)?;
                }
                // The path from serde's segments: its text joins keys with dots, which a key
                // holding one (`nvidia.com/gpu.present`) makes ambiguous.
                let (path, pos) = match serde_field_path(&e) {
                    Some(p) => {
                        let pos = type_error_pos(doc, &p);
                        (p.to_string(), pos)
                    }
                    None => (e.path().to_string(), None),
                };
                let at = if path == "." || path.is_empty() {
                    String::new()
                } else {
                    format!("{path}: ")
                };
                return Err(PolicyError::Input {
                    file: doc.source.name.clone(),
                    pos,
                    message: format!("parsing {what}: {at}{}", plain_serde_message(&inner)),
                });
            }
        }
    };
    if strict {
        // The fields kept as JSON whose schema is closed (a Workflow's orchestration and
        // JobSpec, an override's), beside those the typed read found.
        for path in crate::crd::schema_unknown_fields(what, &doc.value, MAX_UNKNOWN_FIELDS) {
            if unknown.len() >= MAX_UNKNOWN_FIELDS {
                break;
            }
            if !unknown.contains(&path) {
                unknown.push(path);
            }
        }
        super::strict::validate(doc, what == "WorkloadRun", unknown)?;
    }
    // The fields kept as JSON, held to the CRD schema's types (after the Kubernetes-typed
    // parts, whose messages name their Kubernetes type).
    if strict && let Some((path, message)) = crate::crd::schema_type_problem(what, &doc.value) {
        return Err(PolicyError::Input {
            file: doc.source.name.clone(),
            pos: type_error_pos(doc, &path),
            message: format!("parsing {what}: {path}: {}", plain_serde_message(&message)),
        });
    }
    Ok(typed)
}

/// Where a type error at `path` is pointed at: a scalar as written, a mapping or list at its
/// key (a block's value starts on the next line).
fn type_error_pos(doc: &Document, path: &FieldPath) -> Option<nvcre_engine::Pos> {
    let scalar = path
        .get(&doc.value)
        .is_some_and(|v| !v.is_object() && !v.is_array());
    if scalar {
        doc.spans
            .lookup(path)
            .or_else(|| doc.spans.lookup_key(path))
    } else {
        doc.spans.lookup_key(path)
    }
}

/// The field path of a `deny_unknown_fields` error (serde's `unknown field `x`, expected …`),
/// or `None` for another error.
fn unknown_field(e: &serde_path_to_error::Error<serde_json::Error>) -> Option<FieldPath> {
    if !e.inner().to_string().starts_with("unknown field `") {
        return None;
    }
    serde_field_path(e)
}

/// The field path of serde's error, from its segments; `None` when one is unknown.
fn serde_field_path(e: &serde_path_to_error::Error<serde_json::Error>) -> Option<FieldPath> {
    let mut path = FieldPath::root();
    for seg in e.path().iter() {
        path = match seg {
            serde_path_to_error::Segment::Seq { index } => path.index(*index),
            serde_path_to_error::Segment::Map { key }
            | serde_path_to_error::Segment::Enum { variant: key } => path.key(key.clone()),
            serde_path_to_error::Segment::Unknown => return None,
        };
    }
    Some(path)
}

/// Reads a document as a WorkloadRun the way `render` and `check` do before any rule runs:
/// the kind and API group checked and nulls dropped, the typed read with strict field
/// validation, and the user overrides that can never apply refused. Returns the WorkloadRun and the notes for stderr (the older API
/// group).
///
/// # Errors
/// [`PolicyError::Input`] at the line of the first problem.
///
/// ```
/// use nvcre_engine::{Source, parse_documents};
///
/// let source = Source::new("run.yaml", "kind: WorkloadRun\nspec:\n  numNodes: two\n");
/// let doc = &parse_documents(&source)?[0];
/// assert_eq!(
///     nvcre_domain::read_workload_run(doc).unwrap_err().to_string(),
///     "run.yaml:3:13: parsing WorkloadRun: spec.numNodes: invalid type: string \"two\", expected an integer"
/// );
/// let source = Source::new("run.yaml", "apiVersion: cre.nvidia.com/v1alpha1\nkind: WorkloadRun\nspec: {numNodes: 2}\n");
/// let (run, notes) = nvcre_domain::read_workload_run(&parse_documents(&source)?[0])?;
/// assert_eq!(run.spec.num_nodes, 2);
/// assert_eq!(notes, ["run.yaml:1:13: apiVersion cre.nvidia.com/v1alpha1 is the older API group; treating it as nvcre.nvidia.com/v1alpha1"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_workload_run(
    doc: &Document,
) -> Result<(crate::api::WorkloadRun, Vec<String>), PolicyError> {
    let (doc, notes) = prepare_document(doc, "WorkloadRun")?;
    let run: crate::api::WorkloadRun = parse_typed(&doc, "WorkloadRun")?;
    check_user_overrides(&doc, &run.spec.overrides)?;
    Ok((run, notes.iter().map(|n| n.located().text).collect()))
}

/// serde's type names in the words a manifest author uses (`i64` → an integer, `a sequence` →
/// a list, `struct X` → a mapping).
pub(crate) fn plain_serde_message(m: &str) -> String {
    // Lists, mappings and our struct names in the author's words first.
    let mut out = nvcre_engine::plain_type_words(&out_of_range(m).unwrap_or_else(|| m.to_string()));
    for (from, to) in [
        ("expected i64", "expected an integer"),
        ("expected i32", "expected an integer"),
        ("expected u64", "expected a non-negative integer"),
    ] {
        out = out.replace(from, to);
    }
    // A number or boolean where a string belongs: YAML read an unquoted value as one.
    for (kind, what) in [
        ("floating point", "the number"),
        ("integer", "the number"),
        ("boolean", "the boolean"),
    ] {
        if let Some(value) = out
            .strip_prefix(&format!("invalid type: {kind} `"))
            .and_then(|r| r.strip_suffix("`, expected a string"))
        {
            let value = value.strip_suffix(".0").unwrap_or(value);
            out = format!(
                "expected a string, got {what} {value}: YAML reads the unquoted value as {}; quote it",
                if what == "the boolean" {
                    "a boolean"
                } else {
                    "a number"
                }
            );
            break;
        }
    }
    // A number with a decimal point where a whole number belongs (`numNodes: 2.0`).
    for expected in ["an integer", "a non-negative integer"] {
        if let Some(value) = out
            .strip_prefix("invalid type: floating point `")
            .and_then(|r| r.strip_suffix(&format!("`, expected {expected}")))
        {
            out = match value.strip_suffix(".0") {
                Some(whole) => format!(
                    "expected {expected}, got {value}: write it without the decimal point ({whole})"
                ),
                None => format!("expected {expected}, got {value}"),
            };
            break;
        }
    }
    out
}

/// serde's message for a whole number that does not fit the integer field (`invalid value:
/// integer `9223372036854775808`, expected i64`, or a float YAML read from too many digits) in
/// words that say so and give the range.
fn out_of_range(m: &str) -> Option<String> {
    let (head, ty) = m.rsplit_once(", expected ")?;
    // The range, and the magnitude from which a whole float is beyond it.
    let (range, beyond) = match ty {
        "i64" => (
            "from -9223372036854775808 to 9223372036854775807",
            9_223_372_036_854_775_808.0,
        ),
        "i32" => ("from -2147483648 to 2147483647", 2_147_483_648.0),
        "u64" => (
            "from 0 to 18446744073709551615",
            18_446_744_073_709_551_616.0,
        ),
        "u32" => ("from 0 to 4294967295", 4_294_967_296.0),
        _ => return None,
    };
    let number = head
        .strip_prefix("invalid value: integer `")
        .or_else(|| head.strip_prefix("invalid type: floating point `"))?
        .strip_suffix('`')?;
    if head.starts_with("invalid type: floating point") {
        let f: f64 = number.parse().ok()?;
        // A fraction, or a float within the range, is a type error (not an integer at all).
        if f.fract() != 0.0 || f.abs() < beyond {
            return None;
        }
    }
    Some(format!(
        "{number} is out of range: expected an integer {range}"
    ))
}

pub(super) fn origin(doc: &Document) -> Origin<'_> {
    Origin {
        file: &doc.source.name,
        document: doc.index,
        spans: Some(&doc.spans),
    }
}

/// Runs the admission stage on `doc`, unless the caller did (`req.admitted`): its findings
/// below error; a rejection with every finding of the stage when one is an error.
///
/// # Errors
/// [`PolicyError::Rejected`]; the engine's errors.
pub(super) fn admit(
    rules: &nvcre_engine::RuleSet,
    doc: &Document,
    req: &super::RenderRequest,
) -> Result<Vec<nvcre_engine::Finding>, PolicyError> {
    if req.admitted {
        return Ok(Vec::new());
    }
    let admission = crate::contract::run_stage(
        rules,
        crate::contract::ADMISSION,
        std::borrow::Cow::Borrowed(&doc.value),
        origin(doc),
        &Value::Null,
    )?;
    if admission.rejects() {
        return Err(PolicyError::Rejected(admission.findings));
    }
    Ok(admission.findings)
}

/// An input error about the field at `path` (field-path notation) of `doc`, at its line.
pub(crate) fn input_error(doc: &Document, path: &str, message: String) -> PolicyError {
    PolicyError::Input {
        file: doc.source.name.clone(),
        pos: FieldPath::parse(path)
            .ok()
            .and_then(|p| doc.spans.lookup(&p)),
        message,
    }
}

/// A build error as an input error at the field it is about.
pub(super) fn build_error(doc: &Document, e: &crate::build::BuildError) -> PolicyError {
    use crate::build::BuildError;
    let path = match e {
        BuildError::NoFramework { .. } => "spec.framework",
        BuildError::InvalidTimeoutPerJob { .. } => "spec.orchestration.timeoutPerJob",
        BuildError::NulCharacter { field } => field,
    };
    input_error(doc, path, e.to_string())
}

/// Refuses user overrides that can never apply: a `when.expression` that does not compile, a
/// `jobTemplatePatch` that is not a JSON Patch. Reported at their line, before any platform is
/// known (so `check` and `render` without `--platform` catch them too).
///
/// # Errors
/// [`PolicyError::Input`] naming `spec.overrides[i]…`.
pub fn check_user_overrides(doc: &Document, overrides: &[OverrideSpec]) -> Result<(), PolicyError> {
    for (i, o) in overrides.iter().enumerate() {
        let fail = |field: &str, message: String| {
            let path = format!("spec.overrides[{i}].{field}");
            input_error(doc, &path, format!("{path}: {message}"))
        };
        if let Some(e) = &o.when.expression {
            let expr = nvcre_engine::Expr::compile(e)
                .map_err(|m| fail("when.expression", format!("CEL does not compile: {m}")))?;
            // What a `when` is evaluated with, each empty.
            let context = [
                ("platform", json!("")),
                ("gpuArchitecture", json!("")),
                ("workloadKind", json!("")),
                ("topologyMode", json!("")),
                ("domainCount", json!(0)),
            ];
            let names: Vec<&str> = context.iter().map(|(k, _)| *k).collect();
            if let Some(why) = expr.unknown_functions(&names).into_iter().next() {
                return Err(fail("when.expression", why));
            }
            // Must type-check to bool (a `when` is a condition): try it on an empty context.
            let mut scope = nvcre_engine::Scope::new();
            for (k, v) in &context {
                scope.bind(k, v);
            }
            if let Ok(v) = expr.eval(&scope)
                && !matches!(v, nvcre_engine::CelValue::Bool(_))
            {
                return Err(fail(
                    "when.expression",
                    format!(
                        "must evaluate to a bool, got {}",
                        nvcre_engine::cel_type_name(&v)
                    ),
                ));
            }
        }
        if o.job_template.as_ref().is_some_and(|v| !v.is_object()) {
            return Err(fail(
                "jobTemplate",
                "must be a mapping (a JobTemplateSpec patch)".into(),
            ));
        }
        for (j, d) in o.dependencies.iter().flatten().enumerate() {
            let named = d.get("apiVersion").and_then(Value::as_str).is_some()
                && d.get("kind").and_then(Value::as_str).is_some()
                && d.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_some();
            if !named {
                return Err(fail(
                    &format!("dependencies[{j}]"),
                    "must be a Kubernetes object with apiVersion, kind and metadata.name".into(),
                ));
            }
        }
        if let Some(p) = &o.job_template_patch {
            nvcre_engine::patch::parse_json_patch(p)
                .map_err(|m| fail("jobTemplatePatch", m.to_string()))?;
        }
    }
    Ok(())
}

/// The thresholds of `map` (at field path `base` of `doc`) that would not compile when the
/// controller judges them: an expression that does not parse, reads a name other than `value`
/// or returns no bool, as `measure` and the controller refuse it
/// (`Threshold "<key>": compile threshold expression "<expr>": <why>`). Found before
/// submission, not once the GPU job has run. Unknown keys are the admission rules' to report.
///
/// # Errors
/// [`PolicyError::Input`] at the first such key's expression.
pub fn check_thresholds(
    doc: &Document,
    base: &FieldPath,
    map: &std::collections::BTreeMap<String, String>,
) -> Result<(), PolicyError> {
    for (key, expression) in map {
        if crate::measure::threshold_key(key).is_none() {
            continue;
        }
        if let Err(message) = crate::measure::compile_expression(key, expression) {
            let path = base.clone().key(key.clone());
            return Err(PolicyError::Input {
                file: doc.source.name.clone(),
                pos: doc.spans.lookup(&path),
                message: format!("{path}: {message}"),
            });
        }
    }
    Ok(())
}

/// A Workflow's `jobTemplate.spec.nodeHealthMonitor.cel.expression` is CEL that compiles: the
/// Job's controller evaluates it against every node, and one that does not compile would be
/// found only then (the schema bounds its length alone).
///
/// # Errors
/// [`PolicyError::Input`] at the expression, with the parser's message.
fn check_node_health_expression(doc: &Document) -> Result<(), PolicyError> {
    let Some(text) = doc
        .value
        .pointer("/spec/jobTemplate/spec/nodeHealthMonitor/cel/expression")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Ok(());
    };
    let Err(e) = nvcre_engine::Expr::compile(text) else {
        return Ok(());
    };
    let path = FieldPath::root()
        .key("spec")
        .key("jobTemplate")
        .key("spec")
        .key("nodeHealthMonitor")
        .key("cel")
        .key("expression");
    Err(PolicyError::Input {
        file: doc.source.name.clone(),
        pos: doc.spans.lookup(&path),
        message: format!("{path}: CEL does not compile: {e}"),
    })
}

/// [`check_thresholds`] of a Workflow: `spec.validation.performance.thresholds.thresholds`
/// (the string values; the others are the schema's to refuse), and
/// [`check_node_health_expression`].
///
/// # Errors
/// As [`check_thresholds`].
pub fn check_workflow_thresholds(
    doc: &Document,
    validation: Option<&serde_json::Value>,
) -> Result<(), PolicyError> {
    check_node_health_expression(doc)?;
    let Some(map) = validation
        .and_then(|v| v.pointer("/performance/thresholds/thresholds"))
        .and_then(serde_json::Value::as_object)
    else {
        return Ok(());
    };
    let texts: std::collections::BTreeMap<String, String> = map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let base = FieldPath::root()
        .key("spec")
        .key("validation")
        .key("performance")
        .key("thresholds")
        .key("thresholds");
    check_thresholds(doc, &base, &texts)
}

/// Warnings for user overrides whose `when` names a value that never occurs, so the override
/// never applies (or an exclusion that excludes nothing): a `platform` that is none of the
/// platform table's, or a `gpuArchitecture` written otherwise than the `gpu-products` table
/// normalises it (`GB300` for `gb300`). Each is located at the value.
///
/// # Errors
/// A missing or malformed platform or `gpu-products` table.
pub(crate) fn override_when_findings(
    rules: &nvcre_engine::RuleSet,
    doc: &Document,
    overrides: &[OverrideSpec],
) -> Result<Vec<nvcre_engine::Finding>, PolicyError> {
    let mut out = Vec::new();
    if overrides
        .iter()
        .all(|o| o.when.platform.is_none() && o.when.gpu_architecture.is_none())
    {
        return Ok(out);
    }
    let platforms = crate::detect::platform_names(rules)?;
    let products = crate::detect::gpu_products(rules)?;
    for (i, o) in overrides.iter().enumerate() {
        let base = FieldPath::root()
            .key("spec")
            .key("overrides")
            .index(i)
            .key("when");
        let fields = [
            ("platform", o.when.platform.as_ref()),
            ("gpuArchitecture", o.when.gpu_architecture.as_ref()),
        ];
        for (field, m) in fields {
            let Some(m) = m else { continue };
            let values = [
                ("equals", m.equals.iter().collect::<Vec<_>>()),
                ("in", m.in_.iter().flatten().collect()),
                ("notIn", m.not_in.iter().flatten().collect()),
            ];
            for (op, vs) in values {
                for (j, v) in vs.into_iter().enumerate() {
                    let problem = when_value_problem(field, v, &platforms, &products);
                    let Some((problem, hint)) = problem else {
                        continue;
                    };
                    let consequence = match op {
                        "equals" => "the override never applies",
                        "in" => "this entry never matches",
                        _ => "excluding it excludes nothing",
                    };
                    let path = base.clone().key(field).key(op);
                    let path = if op == "equals" { path } else { path.index(j) };
                    out.push(crate::check::input_warning(
                        doc,
                        crate::builtins::OVERRIDE_NEVER_MATCHES_RULE,
                        format!("{path}: {problem}, so {consequence}{hint}"),
                        &path,
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// `rules lint`'s warnings for rows of the platform override table whose `when` names a value
/// that never occurs, so the row never applies (or an exclusion that excludes nothing): as
/// `override_when_findings` for a user's overrides; and for rows of the `gpu-defaults` table
/// whose `platform` or `gpuArchitecture` never occurs. Each is located at the value; values
/// with `${{ }}` are not judged.
///
/// # Errors
/// A missing or malformed platform or `gpu-products` table.
pub fn override_table_lints(
    rules: &nvcre_engine::RuleSet,
) -> Result<Vec<nvcre_engine::LintFinding>, PolicyError> {
    let Some(table) = rules.table(super::OVERRIDE_TABLE) else {
        return Ok(Vec::new());
    };
    let platforms = crate::detect::platform_names(rules)?;
    let products = crate::detect::gpu_products(rules)?;
    // The table as written: its rows' values and their places.
    let Some(doc) = table_as_written(table) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let entries = doc
        .value
        .get("entries")
        .and_then(serde_json::Value::as_array);
    for (i, entry) in entries.into_iter().flatten().enumerate() {
        let id = entry.get("id").and_then(serde_json::Value::as_str);
        for field in ["platform", "gpuArchitecture"] {
            let Some(m) = entry.get("when").and_then(|w| w.get(field)) else {
                continue;
            };
            for op in ["equals", "in", "notIn"] {
                let values: Vec<(Option<usize>, &str)> = match m.get(op) {
                    Some(serde_json::Value::String(v)) => vec![(None, v.as_str())],
                    Some(serde_json::Value::Array(a)) => a
                        .iter()
                        .enumerate()
                        .filter_map(|(j, v)| v.as_str().map(|v| (Some(j), v)))
                        .collect(),
                    _ => Vec::new(),
                };
                for (j, v) in values {
                    if v.contains("${{") {
                        continue;
                    }
                    let Some((problem, hint)) = when_value_problem(field, v, &platforms, &products)
                    else {
                        continue;
                    };
                    let consequence = match op {
                        "equals" => "the row never applies",
                        "in" => "this value never matches",
                        _ => "excluding it excludes nothing",
                    };
                    let base = FieldPath::root()
                        .key("entries")
                        .index(i)
                        .key("when")
                        .key(field)
                        .key(op);
                    let path = match j {
                        Some(j) => base.index(j),
                        None => base,
                    };
                    out.push(never_matches(
                        table,
                        &doc,
                        &path,
                        id,
                        format!("{path}: {problem}, so {consequence}{hint}"),
                    ));
                }
            }
        }
    }
    out.extend(defaults_table_lints(rules, &platforms, &products));
    Ok(out)
}

/// The same warnings for rows of the `gpu-defaults` table whose `platform` or
/// `gpuArchitecture` (a row's own match, not a `when`) never occurs: the row never applies,
/// and runs quietly get another row's defaults.
fn defaults_table_lints(
    rules: &nvcre_engine::RuleSet,
    platforms: &[String],
    products: &crate::nodes::GpuProducts,
) -> Vec<nvcre_engine::LintFinding> {
    let Some(table) = rules.table(crate::detect::DEFAULTS_TABLE) else {
        return Vec::new();
    };
    let Some(doc) = table_as_written(table) else {
        return Vec::new();
    };
    let entries = doc
        .value
        .get("entries")
        .and_then(serde_json::Value::as_array);
    let mut out = Vec::new();
    for (i, entry) in entries.into_iter().flatten().enumerate() {
        let id = entry.get("id").and_then(serde_json::Value::as_str);
        for field in ["platform", "gpuArchitecture"] {
            // An empty value is the row of an unknown platform or architecture.
            let Some(v) = entry
                .get(field)
                .and_then(serde_json::Value::as_str)
                .filter(|v| !v.is_empty() && !v.contains("${{"))
            else {
                continue;
            };
            let Some((problem, hint)) = when_value_problem(field, v, platforms, products) else {
                continue;
            };
            let path = FieldPath::root().key("entries").index(i).key(field);
            out.push(never_matches(
                table,
                &doc,
                &path,
                id,
                format!("{path}: {problem}, so the row never applies{hint}"),
            ));
        }
    }
    out
}

/// `table`'s document as written (its rows' values and their places), parsed again from its
/// file; `None` when it cannot be found there.
fn table_as_written(table: &nvcre_engine::Table) -> Option<nvcre_engine::Document> {
    nvcre_engine::parse_rule_file(&table.source)
        .ok()?
        .into_iter()
        .find(|d| {
            d.value
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                == Some(table.name.as_str())
        })
}

/// A `never-matches` warning at `path` of `table`'s row `id`.
fn never_matches(
    table: &nvcre_engine::Table,
    doc: &nvcre_engine::Document,
    path: &FieldPath,
    id: Option<&str>,
    message: String,
) -> nvcre_engine::LintFinding {
    nvcre_engine::LintFinding {
        lint: nvcre_engine::Lint::NeverMatches,
        severity: nvcre_engine::Lint::NeverMatches.severity(),
        file: table.source.name.clone(),
        pos: doc.spans.lookup(path),
        rule: id.map(|id| nvcre_engine::Inside::Entry(id.to_string())),
        message,
    }
}

/// What is wrong with `v` as a `when.<field>` value (`platform` or `gpuArchitecture`) of an
/// override, and the hint: a platform no platform-detection row has, an architecture written
/// otherwise than the gpu-products table normalises it. `None` when it can match.
fn when_value_problem(
    field: &str,
    v: &str,
    platforms: &[String],
    products: &crate::nodes::GpuProducts,
) -> Option<(String, String)> {
    if field == "platform" {
        (!platforms.iter().any(|p| p == v)).then(|| {
            let close = platforms.iter().find(|p| p.eq_ignore_ascii_case(v));
            (
                format!(
                    "{} is not a platform (one of {})",
                    quote(v),
                    platforms.join(", ")
                ),
                close
                    .map(|c| format!("; platforms are compared exactly: write {}", quote(c)))
                    .unwrap_or_default(),
            )
        })
    } else {
        let normal = products.architecture(v);
        (normal != *v).then(|| {
            (
                format!(
                    "{} is not a GPU architecture as runs name them (the gpu-products table reads it as {})",
                    quote(v),
                    quote(&normal)
                ),
                format!("; write {}", quote(&normal)),
            )
        })
    }
}

/// Where the user's overrides (`applied`, the last first) wrote the nearest parent of a field
/// none of them writes itself (a requirement without its `values`): the deepest one present,
/// at least one field into an override (`spec.overrides[i].orchestration`), so a finding about
/// a missing field is located at what the override did write.
fn written_below(doc: &Document, path: &str, applied: &[usize]) -> Option<nvcre_engine::Pos> {
    let rest = below(path, "spec")?;
    let mut best: Option<(usize, nvcre_engine::Pos)> = None;
    for i in applied.iter().rev() {
        let Ok(mut p) = FieldPath::parse(&format!("spec.overrides[{i}]{rest}")) else {
            continue;
        };
        // `spec`, `overrides`, the index, and one field of the override.
        while p.segments().len() > 4 {
            p.pop();
            if doc.spans.contains(&p) {
                let depth = p.segments().len();
                if best.is_none_or(|(d, _)| depth > d) {
                    best = doc.spans.lookup(&p).map(|pos| (depth, pos));
                }
                break;
            }
        }
    }
    best.map(|(_, pos)| pos)
}

/// The Workflow the overrides resolved to and the list policy they merged by: what maps an
/// item of a merged list back to the item of an override that wrote it.
pub(super) struct Merged<'a> {
    /// The resolved Workflow's JSON.
    pub value: &'a Value,
    /// How each list was merged.
    pub lists: &'a nvcre_engine::patch::ListPolicy,
}

/// What override `i` of a document wrote of a field of the resolved Workflow
/// ([`written_by`]).
enum Written {
    /// The field itself, at this path of the document.
    Whole(String),
    /// Not the field, but its nearest parent (at this path): the field is not there.
    Parent(FieldPath),
    /// Nothing on the way: an item on the field's path is another's (a platform row's, the
    /// document's), merged in by its key.
    Not,
}

/// Where override `i` of `doc` wrote the field at `rest` (a path below the resolved Workflow's
/// `spec`: `.jobTemplate.spec…runtimePatches[1]…`). An index of a list merged by key
/// (runtimePatches by manager, containers and env by name) is the index of the override's item
/// with the same key, not the merged list's, which keeps the Workflow's own items first; an
/// item whose key the override has no item of was written by another.
fn written_by(rest: &str, i: usize, doc: &Document, merged: &Merged<'_>) -> Written {
    use nvcre_engine::Segment;
    use nvcre_engine::patch::ListMerge;
    let Ok(below_spec) = FieldPath::parse(&format!("spec{rest}")) else {
        return Written::Not;
    };
    let Some(mut written) = doc
        .value
        .get("spec")
        .and_then(|s| s.get("overrides"))
        .and_then(|o| o.get(i))
    else {
        return Written::Not;
    };
    // Absent below a field the Workflow does not have (the finding is about a missing one).
    let mut resolved = merged.value.get("spec");
    let mut out = FieldPath::root().key("spec").key("overrides").index(i);
    // The list's path below `spec`, as the list policy names it.
    let mut at = FieldPath::root();
    for seg in below_spec.segments().get(1..).unwrap_or_default() {
        match seg {
            Segment::Key(k) => {
                let Some(w) = written.get(k) else {
                    return Written::Parent(out);
                };
                resolved = resolved.and_then(|r| r.get(k));
                written = w;
                out = out.key(k.clone());
                at = at.key(k.clone());
            }
            Segment::Index(n) => {
                let Some(items) = written.as_array() else {
                    return Written::Parent(out);
                };
                let item = resolved.and_then(|r| r.get(*n));
                let j = match (merged.lists.list_merge(&at), item) {
                    (ListMerge::ByKey(key), Some(Value::Object(m))) if m.contains_key(key) => {
                        match items.iter().position(|w| w.get(key) == m.get(key)) {
                            Some(j) => j,
                            None => return Written::Not,
                        }
                    }
                    // Replaced whole (or an item without the key, which replaces the list).
                    _ => *n,
                };
                let Some(w) = items.get(j) else {
                    return Written::Parent(out);
                };
                resolved = item;
                written = w;
                out = out.index(j);
                at = at.index(*n);
            }
        }
    }
    Written::Whole(out.to_string())
}

/// The nearest parent the user's overrides wrote (`parents`, found by [`written_by`]) of a
/// field at `path` the resolved Workflow does not have (a requirement without its `values`):
/// the deepest, at least one field into an override. A field the Workflow has was written by
/// another (a platform row, the document), and is not located in an override.
fn written_parent(
    doc: &Document,
    path: &str,
    parents: &[FieldPath],
    merged: &Merged<'_>,
) -> Option<nvcre_engine::Pos> {
    let present = FieldPath::parse(path)
        .ok()
        .is_some_and(|p| p.get(merged.value).is_some());
    if present {
        return None;
    }
    parents
        .iter()
        // `spec`, `overrides`, the index, and one field of the override.
        .filter(|p| p.segments().len() > 4 && doc.spans.contains(p))
        .max_by_key(|p| p.segments().len())
        .and_then(|p| doc.spans.lookup(p))
}

/// [`locate_findings`] for findings that are not a rejection (warnings of a render that went
/// through).
pub(super) fn locate_each(
    findings: Vec<nvcre_engine::Finding>,
    doc: &Document,
    applied: &[usize],
    merged: Option<&Merged<'_>>,
) -> Vec<nvcre_engine::Finding> {
    match locate_findings(PolicyError::Rejected(findings), doc, applied, merged) {
        PolicyError::Rejected(f) => f,
        _ => Vec::new(),
    }
}

/// The rest of field path `path` after `prefix` (`""`, `.key…` or `[…]…`) when `path` is
/// `prefix` or a path below it.
fn below<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')).then_some(rest)
}

/// Gives post-override findings a line in the source when the field they name was written
/// there: in one of its `spec.overrides[i]` (the last of `applied`, the user's overrides that
/// applied and changed something, in the order they did, that writes it: `spec.X` there is
/// `spec.overrides[i].X`), in the document itself, or, for a WorkloadRun, at
/// `spec.workloadMetadata`.
pub(super) fn locate_findings(
    e: PolicyError,
    doc: &Document,
    applied: &[usize],
    merged: Option<&Merged<'_>>,
) -> PolicyError {
    let PolicyError::Rejected(mut findings) = e else {
        return e;
    };
    for f in &mut findings {
        if f.line.is_some() {
            continue;
        }
        let Some(path) = f.field_path.clone() else {
            continue;
        };
        // The last override that wrote the field wrote its value; else the document did.
        let mut candidates = Vec::new();
        // With the merged Workflow at hand, the parents of a field the overrides did not write
        // (for a finding about a missing field).
        let mut parents = Vec::new();
        if let Some(rest) = below(&path, "spec") {
            for &i in applied.iter().rev() {
                match merged.map(|m| written_by(rest, i, doc, m)) {
                    Some(Written::Whole(c)) => candidates.push(c),
                    Some(Written::Parent(p)) => parents.push(p),
                    Some(Written::Not) => {}
                    None => candidates.push(format!("spec.overrides[{i}]{rest}")),
                }
            }
        }
        // An RFC 6902 patch of the jobTemplate: the operation on the field or around it; the
        // patch itself only when nothing else wrote the field (below).
        let mut patches = Vec::new();
        if below(&path, "spec.jobTemplate").is_some() {
            // The field's JSON pointer in the jobTemplate, which the operations' paths name.
            let pointer = FieldPath::parse(&path).map(|p| {
                FieldPath::from_segments(p.segments().get(2..).unwrap_or_default().to_vec())
                    .pointer()
            });
            for i in applied.iter().rev() {
                let at = format!("spec.overrides[{i}].jobTemplatePatch");
                let ops = FieldPath::parse(&at)
                    .ok()
                    .and_then(|p| p.get(&doc.value).and_then(Value::as_array).cloned())
                    .unwrap_or_default();
                for (j, op) in ops.iter().enumerate().rev() {
                    let Some(op_path) = op.get("path").and_then(Value::as_str) else {
                        continue;
                    };
                    let related = pointer.as_ref().is_ok_and(|f| {
                        let under = |a: &str, b: &str| {
                            a == b || a.strip_prefix(b).is_some_and(|r| r.starts_with('/'))
                        };
                        under(f, op_path) || under(op_path, f)
                    });
                    if related {
                        candidates.push(format!("{at}[{j}]"));
                    }
                }
                patches.push(at);
            }
        }
        candidates.push(path.clone());
        if let Some(rest) = below(&path, "spec.jobTemplate.spec.workloadMetadata") {
            candidates.push(format!("spec.workloadMetadata{rest}"));
        }
        candidates.extend(patches);
        // A WorkloadRun writes no dependencies of its own: they come from its overrides, else
        // from what its spec asks (GPUs and NICs per node, resources), so its `spec`.
        if path == "spec.dependencies" || path.starts_with("spec.dependencies[") {
            for i in applied.iter().rev() {
                candidates.push(format!("spec.overrides[{i}].dependencies"));
            }
            // The generated TrainingRuntime folds in the TrainJob's runtimePatches: a field an
            // override's patch wrote is found in that patch, as deep as it was written.
            if let Some(rest) = below(&path, "spec.dependencies[0].spec") {
                for i in applied.iter().rev() {
                    let patches = format!(
                        "spec.overrides[{i}].jobTemplate.spec.workload.trainJob.runtimePatches"
                    );
                    let count = FieldPath::parse(&patches)
                        .ok()
                        .and_then(|p| p.get(&doc.value).and_then(Value::as_array).map(Vec::len))
                        .unwrap_or(0);
                    for k in (0..count).rev() {
                        let Ok(mut p) =
                            FieldPath::parse(&format!("{patches}[{k}].trainingRuntimeSpec{rest}"))
                        else {
                            continue;
                        };
                        let patch_depth = FieldPath::parse(&format!("{patches}[{k}]"))
                            .map_or(0, |p| p.segments().len());
                        while p.segments().len() >= patch_depth {
                            candidates.push(p.to_string());
                            p.pop();
                        }
                    }
                }
            }
            candidates.push("spec".to_string());
        }
        let found = candidates
            .iter()
            .find_map(|c| {
                let p = FieldPath::parse(c).ok()?;
                if !doc.spans.contains(&p) {
                    None
                } else if f.at_key {
                    // A finding about a key (`validate.at: key`) points at the key.
                    doc.spans.lookup_key(&p).or_else(|| doc.spans.lookup(&p))
                } else {
                    doc.spans.lookup(&p)
                }
            })
            .or_else(|| match merged {
                Some(m) => written_parent(doc, &path, &parents, m),
                None => written_below(doc, &path, applied),
            });
        if let Some(pos) = found {
            f.line = Some(pos.line);
            f.column = Some(pos.column);
        }
    }
    PolicyError::Rejected(findings)
}

#[cfg(test)]
mod tests {
    use super::below;

    #[test]
    fn below_is_the_path_itself_or_a_key_or_index_under_it() {
        let p = "spec.jobTemplate.spec.workloadMetadata";
        assert_eq!(below(p, p), Some(""));
        assert_eq!(below(&format!("{p}.labels"), p), Some(".labels"));
        assert_eq!(
            below(&format!("{p}.labels[\"a/b\"]"), p),
            Some(".labels[\"a/b\"]")
        );
        assert_eq!(
            below("spec.jobTemplate[\"x\"]", "spec.jobTemplate"),
            Some("[\"x\"]")
        );
        assert_eq!(below("spec.jobTemplateX", "spec.jobTemplate"), None);
        assert_eq!(below("spec", "spec.jobTemplate"), None);
    }
}
