//! `check`: findings for one manifest document, by kind.
//!
//! - WorkloadRun: every admission finding; when admission passes, the build and the construction
//!   label checks (reported at the WorkloadRun's own lines); with a platform, the post-override
//!   contract too.
//! - Workflow: the post-override checks (placement, workload labels, gang contract) on the
//!   document as written, or, with a platform, after its overrides resolve.
//! - Other kinds: every pack whose `match` selects them.

use std::borrow::Cow;

use nvcre_engine::{Document, Finding, Objects, Origin, RuleSet};
use serde_json::Value;

use crate::api::{Workflow, WorkloadRun};
use crate::contract::{self, run_stage};
use crate::error::PolicyError;
use crate::render::{RenderRequest, parse_typed, prepare_document, render_workflow};

/// Rule id of the note that a document uses the older `cre.nvidia.com` API group.
pub const LEGACY_API_GROUP_RULE: &str = "legacy-api-group";

/// Readies a WorkloadRun or Workflow (kind and API group, nulls, types, user overrides) and
/// runs the admission stage: the prepared document, a WorkloadRun's typed run, and the findings
/// so far (the legacy-group warning, then every admission finding).
///
/// # Errors
/// Input errors: a wrong kind or group, a type error, an override that can never apply.
fn admit(
    rules: &RuleSet,
    doc: &Document,
    kind: &str,
) -> Result<(Document, Option<WorkloadRun>, Vec<Finding>), PolicyError> {
    let (mut doc, notes) = prepare_document(doc, kind)?;
    let mut findings = legacy_findings(&doc, &notes);
    // The overrides' `when` values, checked once here (the renders that follow are told the
    // document is admitted), whether or not a node context follows.
    let typed = if kind == "Workflow" {
        parse_typed::<Workflow>(&doc, "Workflow")
            .map(|w| ((w.spec.overrides, w.spec.validation), None))
    } else {
        parse_typed::<WorkloadRun>(&doc, "WorkloadRun").map(|r| ((Vec::new(), None), Some(r)))
    };
    // The legacy-group note stays beside an input error.
    let ((workflow_overrides, validation), run) = match typed {
        Ok(t) => t,
        Err(e) => return Err(noted(e, findings)),
    };
    let overrides = run
        .as_ref()
        .map_or(&workflow_overrides, |r| &r.spec.overrides);
    match crate::render::override_when_findings(rules, &doc, overrides) {
        Ok(f) => findings.extend(f),
        Err(e) => return Err(noted(e, findings)),
    }
    let origin = Origin {
        file: &doc.source.name,
        document: doc.index,
        spans: Some(&doc.spans),
    };
    // The prepared document is this function's own: shared with the packs as it is, and taken
    // back whole (no rule's write reaches it).
    let shared = std::sync::Arc::new(std::mem::take(&mut doc.value));
    let admitted = nvcre_engine::run_packs_findings(
        rules.stage(contract::ADMISSION).map(|p| &**p),
        &shared,
        origin,
        &Value::Null,
        None,
    );
    doc.value = std::sync::Arc::try_unwrap(shared).unwrap_or_else(|v| (*v).clone());
    match admitted {
        Ok(f) => findings.extend(f),
        Err(e) => return Err(noted(e.into(), findings)),
    }
    // A Workflow's overrides that can never apply are refused after the admission stage, as
    // its render refuses them (a WorkloadRun's render refuses them itself): the stage's
    // findings stay beside that error; an admission error is reported alone.
    if run.is_none()
        && !findings
            .iter()
            .any(|f| f.severity == nvcre_engine::Severity::Error)
        && let Err(e) = crate::render::check_user_overrides(&doc, &workflow_overrides)
            .and_then(|()| crate::render::check_workflow_thresholds(&doc, validation.as_ref()))
    {
        return Err(noted(e, findings));
    }
    Ok((doc, run, findings))
}

/// `e` with the findings `check` made before it (of this document below error, or it would not
/// have gone on; of a List's earlier items, any).
fn noted(e: PolicyError, findings: Vec<Finding>) -> PolicyError {
    let notes = findings.iter().map(crate::render::note_line).collect();
    e.noted(findings, notes)
}

/// `ruleFile` of findings that come from the pipeline itself rather than a rule file (the
/// legacy API group note, a placement failure).
pub const BUILT_IN: &str = "<built-in>";

/// Rule id of a placement failure found by `check --nodes-file` (shortfall, capacity, names).
pub const PLACEMENT_RULE: &str = "placement";

/// With real nodes, places the groups as `render --expand` would: a placement failure (the
/// exact NVCRE message) becomes an error finding; contract and manifest findings (errors, and
/// the `manifests` stage's warnings and info) are kept, as findings of `doc` whose message is
/// led by the emitted object they are about ([`Finding::led_message`]).
fn placement_findings(
    rules: &RuleSet,
    doc: &Document,
    rendered: &crate::render::Rendered,
) -> Result<Vec<Finding>, PolicyError> {
    let expanded =
        crate::render::expand_verifying(rules, rendered, crate::render::Verify::FirstAndLast);
    // The emitted objects are not in the input: their findings are the document's, led by the
    // object they are about (its `object`), at the document's start (their path is in that
    // object, not in the input).
    let start = doc.spans.lookup(&nvcre_engine::FieldPath::root());
    let on_doc = |findings: Vec<Finding>| {
        findings
            .into_iter()
            .map(|mut f| {
                f.message = f.led_message();
                f.file = doc.source.name.clone();
                f.document = doc.index;
                f.line = start.map(|p| p.line);
                f.column = start.map(|p| p.column);
                f
            })
            .collect()
    };
    match expanded {
        Ok(expanded) => Ok(on_doc(expanded.findings)),
        Err(PolicyError::Rejected(f)) => Ok(on_doc(f)),
        Err(PolicyError::Placement(message)) => Ok(vec![placement_finding(doc, message)]),
        Err(e) => Err(e),
    }
}

/// A finding of the pipeline itself (no rule file: `ruleFile` is [`BUILT_IN`]) on `doc`, at
/// `path` (its position looked up) or, without one, at `pos`.
pub(crate) fn built_in_finding(
    doc: &Document,
    (rule_id, pack, severity): (&str, &str, nvcre_engine::Severity),
    message: String,
    path: Option<&nvcre_engine::FieldPath>,
    pos: Option<nvcre_engine::Pos>,
) -> Finding {
    let pos = path.and_then(|p| doc.spans.lookup(p)).or(pos);
    Finding {
        rule_id: rule_id.to_string(),
        pack: pack.to_string(),
        severity,
        message,
        file: doc.source.name.clone(),
        document: doc.index,
        object: None,
        field_path: path.map(ToString::to_string),
        line: pos.map(|p| p.line),
        column: pos.map(|p| p.column),
        rule_file: BUILT_IN.to_string(),
        rule_line: 0,
        stage: None,
        rule_error: false,
        at_key: false,
    }
}

/// A warning of the pipeline's own (pack `input`), located at `path` in `doc`.
pub(crate) fn input_warning(
    doc: &Document,
    rule_id: &str,
    message: String,
    path: &nvcre_engine::FieldPath,
) -> Finding {
    built_in_finding(
        doc,
        (rule_id, "input", nvcre_engine::Severity::Warning),
        message,
        Some(path),
        None,
    )
}

/// A placement failure, located at `spec.numNodes` (the nodes the fleet cannot supply), else
/// at the document's start.
fn placement_finding(doc: &Document, message: String) -> Finding {
    // No target node at all is the target's doing (a WorkloadRun's spec.target, a Workflow's
    // spec.orchestration.target); too few, the nodes per group's (spec.numNodes).
    let spec = nvcre_engine::FieldPath::root().key("spec");
    let candidates = if message.starts_with(crate::render::NO_TARGET_NODES) {
        vec![
            spec.clone().key("target"),
            spec.clone().key("orchestration").key("target"),
            spec.clone().key("orchestration"),
        ]
    } else {
        vec![spec.clone().key("numNodes")]
    };
    let found = candidates.into_iter().find(|p| p.get(&doc.value).is_some());
    let path = found.as_ref();
    let start = doc.spans.lookup(&nvcre_engine::FieldPath::root());
    built_in_finding(
        doc,
        (PLACEMENT_RULE, "placement", nvcre_engine::Severity::Error),
        message,
        path,
        start,
    )
}

/// Rule id of the finding on a document that is not a Kubernetes object.
pub const NOT_AN_OBJECT_RULE: &str = "not-a-kubernetes-object";

/// A document no rule checks because it is not a Kubernetes object: info for a mapping
/// without `kind` (a values file, a kustomization), a warning for a scalar or a list (prose,
/// a list of things: a wrong file more likely than a config), at the document's start.
fn not_an_object_finding(doc: &Document, item: Option<&nvcre_engine::FieldPath>) -> Finding {
    let (severity, what) = match &doc.value {
        Value::Object(_) => (
            nvcre_engine::Severity::Info,
            "a mapping without kind".to_string(),
        ),
        Value::Array(_) => (nvcre_engine::Severity::Warning, "a list".to_string()),
        Value::String(_) => (nvcre_engine::Severity::Warning, "a string".to_string()),
        Value::Number(_) => (nvcre_engine::Severity::Warning, "a number".to_string()),
        Value::Bool(_) => (nvcre_engine::Severity::Warning, "a boolean".to_string()),
        Value::Null => (nvcre_engine::Severity::Info, "empty".to_string()),
    };
    built_in_finding(
        doc,
        (NOT_AN_OBJECT_RULE, "input", severity),
        format!(
            "{} is {what}, not a Kubernetes object (apiVersion, kind, metadata): no rule checked it",
            match item {
                Some(at) => format!("{at} of document {}", doc.index + 1),
                None => format!("document {}", doc.index + 1),
            }
        ),
        None,
        doc.spans.lookup(&nvcre_engine::FieldPath::root()),
    )
}

/// A warning finding for each note [`prepare_document`] made (the legacy API group).
fn legacy_findings(doc: &Document, notes: &[crate::render::Note]) -> Vec<Finding> {
    let path = nvcre_engine::FieldPath::root().key("apiVersion");
    notes
        .iter()
        .map(|n| {
            built_in_finding(
                doc,
                (
                    LEGACY_API_GROUP_RULE,
                    "input",
                    nvcre_engine::Severity::Warning,
                ),
                n.text.clone(),
                Some(&path),
                None,
            )
        })
        .collect()
}

/// Node context of a check.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckRequest {
    /// Resolve overrides for this platform before the post-override checks.
    pub platform: Option<String>,
    /// GPU architecture for the resolution.
    pub gpu_arch: Option<String>,
    /// `--nodes-file`: detect platform and architecture from these nodes.
    pub nodes: Option<std::sync::Arc<Vec<crate::nodes::Node>>>,
}

/// The `objects` view of an input ([`nvcre_engine::OBJECTS`]): [`input_object_values`] of its
/// documents.
pub fn input_objects<'a>(docs: impl IntoIterator<Item = &'a Value>) -> Objects {
    Objects::new(input_object_values(docs))
}

/// The documents of an input as `objects` holds them, in input order: the items of a `List`
/// (`kubectl get -o yaml`) in place of the list, each read as the API server reads it.
pub fn input_object_values<'a>(docs: impl IntoIterator<Item = &'a Value>) -> Vec<Value> {
    let mut values = Vec::new();
    for doc in docs {
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        match doc.get("items").and_then(Value::as_array) {
            Some(items) if kind.ends_with("List") => {
                values.extend(items.iter().map(as_the_api_server_reads));
            }
            _ => values.push(as_the_api_server_reads(doc)),
        }
    }
    values
}

/// A copy of `v` as the API server reads an object: a field whose value is null (`env:` with
/// nothing after it) is absent, as the Go field it decodes into is left unset. Rules written
/// as `x.?env.orValue([])` then see the default, not a null they cannot iterate (which would
/// make them rule errors on a valid manifest). List items are kept, null ones too.
fn as_the_api_server_reads(v: &Value) -> Value {
    fn has_null_field(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.values().any(|x| x.is_null() || has_null_field(x)),
            Value::Array(a) => a.iter().any(has_null_field),
            _ => false,
        }
    }
    fn pruned(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, x)| !x.is_null())
                    .map(|(k, x)| (k.clone(), pruned(x)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(pruned).collect()),
            other => other.clone(),
        }
    }
    // Most manifests have no null field: a plain copy is cheaper than a rebuilt one.
    if has_null_field(v) {
        pruned(v)
    } else {
        v.clone()
    }
}

/// Whether checking `doc` ([`check_document_in`]) reads its input's `objects`: a List whose
/// items do, or a document of another kind than WorkloadRun and Workflow (which are rendered,
/// not linted) that a pack reading `objects` matches. An input none of whose documents reads
/// them needs no [`input_objects`].
pub fn reads_objects(rules: &RuleSet, doc: &Value) -> bool {
    match route(doc) {
        Route::Rendered | Route::NotAnObject | Route::BadItems => false,
        Route::List(items) => items.iter().any(|i| reads_objects(rules, i)),
        Route::Linted => rules.packs_for(doc).any(|p| p.reads_objects()),
    }
}

/// How [`check_document_in`] checks a document, by its kind.
enum Route<'a> {
    /// A WorkloadRun or Workflow: readied, admitted and rendered.
    Rendered,
    /// A `…List` with its `items`: each item checked at its own place.
    List(&'a [Value]),
    /// A list of certain kind (`v1` `List`, a list of one of our kinds) whose `items` is not a
    /// list: an input error at `items`.
    BadItems,
    /// No kind: not a Kubernetes object, which no rule checks.
    NotAnObject,
    /// Any other kind: the packs whose resources match it.
    Linted,
}

fn route(doc: &Value) -> Route<'_> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    match (kind, doc.get("items").and_then(Value::as_array)) {
        ("WorkloadRun" | "Workflow", _) if ours(doc) => Route::Rendered,
        // A kind of another type (`kind: 7`) is an object written wrong: checked, and its
        // type reported (`object-metadata-type`).
        ("", _) if doc.get("kind").is_some_and(|k| !k.is_null()) => Route::Linted,
        ("", _) => Route::NotAnObject,
        (_, Some(items)) if kind.ends_with("List") => Route::List(items),
        // A list without items (`items: null`, or none) lists nothing.
        (_, None) if certainly_a_list(doc, kind) => match doc.get("items") {
            None | Some(Value::Null) => Route::List(&[]),
            Some(_) => Route::BadItems,
        },
        _ => Route::Linted,
    }
}

/// Whether `doc` (of kind `kind`) is a list by its kind alone: `v1` `List`, or the list of one
/// of our kinds (`WorkloadRunList`). Another kind ending in `List` may be an object of its own.
fn certainly_a_list(doc: &Value, kind: &str) -> bool {
    let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    (api == "v1" && kind == "List")
        || ([crate::api::API_VERSION, crate::api::LEGACY_API_VERSION].contains(&api)
            && lists_our_kind(kind))
}

/// Whether `kind` is the list of one of our kinds (`WorkloadRunList`).
fn lists_our_kind(kind: &str) -> bool {
    kind.strip_suffix("List")
        .is_some_and(|k| our_kinds().iter().any(|o| o == k))
}

/// The kinds of our API group, as the CustomResourceDefinitions name them (WorkloadRun,
/// Workflow, LogProfile, BandwidthMeasurement, GoodputMeasurement): any other kind of the group
/// is a misspelling, refused.
fn our_kinds() -> &'static [String] {
    use crate::measure::{
        BandwidthMeasurementResource, GoodputMeasurementResource, LogProfileResource,
    };
    use kube::Resource;
    // The resources' own kinds, as `crd::crds` lists them (not the CRDs: building their
    // schemas costs more than checking a document).
    static KINDS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        vec![
            crate::api::WorkloadRunResource::kind(&()).into_owned(),
            crate::api::WorkflowResource::kind(&()).into_owned(),
            LogProfileResource::kind(&()).into_owned(),
            BandwidthMeasurementResource::kind(&()).into_owned(),
            GoodputMeasurementResource::kind(&()).into_owned(),
        ]
    });
    &KINDS
}

/// Whether a WorkloadRun or Workflow is one of ours: its apiVersion names our API group (or the
/// legacy one), or none (a missing apiVersion is reported by admission), or a group that is
/// ours misspelt (within two edits of one, or another group under `nvidia.com`): it is then
/// refused as `render` refuses it, never passed as someone else's object. Another group's kind
/// of that name (Argo's `argoproj.io` Workflow) is any other object.
fn ours(doc: &Value) -> bool {
    fn group(v: &str) -> &str {
        v.split_once('/').map_or(v, |(g, _)| g)
    }
    match doc.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => true,
        Some(v) => {
            let g = group(v);
            g == "nvidia.com"
                || g.ends_with(".nvidia.com")
                || [crate::api::API_VERSION, crate::api::LEGACY_API_VERSION]
                    .iter()
                    .any(|ours| strsim::levenshtein(g, group(ours)) <= 2)
        }
    }
}

/// `objects`, or (without one) the view of `doc` as an input of its own, kept in `slot`.
fn objects_or_alone<'a>(
    objects: Option<&'a Objects>,
    doc: &Value,
    slot: &'a mut Option<Objects>,
) -> &'a Objects {
    match objects {
        Some(o) => o,
        None => slot.insert(input_objects([doc])),
    }
}

/// All findings for `doc`, read as an input of its own (the packs that read `objects` see
/// this document only); [`check_document_in`] checks it among the documents of its input.
///
/// # Errors
/// Input errors (a document that cannot be read as its kind, bad flags, rules that fail to run).
pub fn check_document(
    rules: &RuleSet,
    doc: &Document,
    req: &CheckRequest,
) -> Result<Vec<Finding>, PolicyError> {
    check_document_in(rules, doc, req, None)
}

/// What `nvcre-policy check` reports for `doc`: [`check_document_in`]'s findings, then the YAML
/// readings of its values ([`crate::yaml_quote_findings`], `line` giving the text of a 1-based
/// line of its input). An input error that one of those readings explains (an unquoted value
/// read as a number or boolean where a string belongs, on the error's line) gives way to them:
/// they name every such value of the document, where the typed read stops at the first, and
/// say how to write each; the findings made before the error stay. Beside an error they do not
/// explain (of the document, or of one item of a List) the readings are reported too.
///
/// # Errors
/// As [`check_document_in`], but for the input errors the YAML readings explain.
pub fn check_document_as_reported(
    rules: &RuleSet,
    doc: &Document,
    req: &CheckRequest,
    objects: Option<&Objects>,
    line: &dyn Fn(usize) -> Option<String>,
) -> Result<Vec<Finding>, PolicyError> {
    match check_document_in(rules, doc, req, objects) {
        Ok(mut f) => {
            f.extend(crate::yaml_quote_findings(doc, line));
            Ok(f)
        }
        Err(e) => {
            if matches!(e.cause(), PolicyError::Rejected(_)) {
                return Err(e);
            }
            let quoted = crate::yaml_quote_findings(doc, line);
            let covered = |e: &PolicyError| {
                matches!(e, PolicyError::Input { pos: Some(pos), .. }
                    if quoted.iter().any(|q| q.severity == nvcre_engine::Severity::Error
                        && q.line == Some(pos.line)))
            };
            let (cause, mut f, notes) = e.into_parts();
            // A List's items fail one by one: each item's error the readings explain gives way.
            let mut left: Vec<PolicyError> = match cause {
                PolicyError::Items(items) => items,
                cause => vec![cause],
            };
            left.retain(|e| !covered(e));
            // The readings of the values the check reached are never dropped beside an error.
            f.extend(quoted);
            match left.len() {
                0 => Ok(f),
                1 => Err(left.remove(0).noted(f, notes)),
                _ => Err(PolicyError::Items(left).noted(f, notes)),
            }
        }
    }
}

/// All findings for `doc`; the packs of the `lint` stage see `objects` (the documents of the
/// same input, see [`input_objects`]; `None`: `doc` alone).
///
/// # Errors
/// Input errors (a document that cannot be read as its kind, bad flags, rules that fail to run).
pub fn check_document_in(
    rules: &RuleSet,
    doc: &Document,
    req: &CheckRequest,
    objects: Option<&Objects>,
) -> Result<Vec<Finding>, PolicyError> {
    // One CEL cost budget for the document, its render and its List items (nested opens share).
    let _budget = nvcre_engine::cost::DocumentBudget::open();
    let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
    let render_req = RenderRequest {
        platform: req.platform.clone(),
        gpu_arch: req.gpu_arch.clone(),
        allow_unknown_arch: true,
        admitted: false,
        report_all: true,
        nodes: req.nodes.clone(),
        // With nodes, the rendered Workflow is expanded to verify its placement.
        findings_only: req.nodes.is_none(),
    };
    let api = doc
        .value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = api.split_once('/').map_or(api, |(g, _)| g);
    let ours_versions = [crate::api::API_VERSION, crate::api::LEGACY_API_VERSION];
    if ours_versions
        .iter()
        .any(|o| o.starts_with(&format!("{group}/")))
        && !ours_versions.contains(&api)
    {
        // Our group, another version: the API server serves none but v1alpha1.
        return Err(crate::render::api_version_error(doc, api));
    }
    // A LogProfile or measurement is read as ours under a misspelt group too (as a WorkloadRun
    // is): refused, never skipped as someone else's object.
    let measured_kind =
        kind == crate::measure::LOG_PROFILE_KIND || measurement_validator(kind).is_some();
    if measured_kind && !ours_versions.contains(&api) && ours(&doc.value) {
        return Err(crate::render::api_version_error(doc, api));
    }
    // The older group is accepted with the warning a WorkloadRun gets.
    let legacy = (measured_kind && api == crate::api::LEGACY_API_VERSION).then(|| {
        legacy_findings(
            doc,
            &[crate::render::Note::from(format!(
                "apiVersion {} is the older API group; treating it as {}",
                crate::api::LEGACY_API_VERSION,
                crate::api::API_VERSION
            ))],
        )
    });
    if let Some(legacy) = legacy {
        return match check_ours(rules, doc, req, objects, kind, api, render_req) {
            Ok(mut f) => {
                f.splice(0..0, legacy);
                Ok(f)
            }
            Err(e) => Err(noted(e, legacy)),
        };
    }
    check_ours(rules, doc, req, objects, kind, api, render_req)
}

/// [`check_document_in`] once the group is known to be served.
fn check_ours(
    rules: &RuleSet,
    doc: &Document,
    req: &CheckRequest,
    objects: Option<&Objects>,
    kind: &str,
    api: &str,
    render_req: RenderRequest,
) -> Result<Vec<Finding>, PolicyError> {
    let origin = Origin {
        file: &doc.source.name,
        document: doc.index,
        spans: Some(&doc.spans),
    };
    if api == crate::api::API_VERSION || api == crate::api::LEGACY_API_VERSION {
        let kinds = our_kinds();
        let listed = lists_our_kind(kind);
        if kind == crate::measure::LOG_PROFILE_KIND {
            // A LogProfile is read as a rule set's is, and refused for what refuses it there.
            if let Some(p) = crate::measure::check_document(doc).into_iter().next() {
                return Err(crate::render::input_error(doc, &p.path, p.message));
            }
        } else if let Some(validate) = measurement_validator(kind) {
            // Read as the API server reads it: a wrong type, a missing or unknown field.
            validate(doc)?;
        } else if !(kinds.iter().any(|o| o == kind) || listed) {
            return Err(crate::render::input_error(
                doc,
                "kind",
                format!(
                    "{api} has kinds {} (and their lists, such as WorkloadRunList), got {}",
                    kinds.join(", "),
                    match doc.value.get("kind") {
                        None | Some(Value::Null) => "no kind".to_string(),
                        Some(Value::String(k)) => crate::detect::quote(k),
                        Some(other) => format!(
                            "a {} ({other}), not a string",
                            nvcre_engine::json_type_name(other)
                        ),
                    }
                ),
            ));
        }
    }
    match route(&doc.value) {
        Route::Rendered => {
            let (doc, run, mut findings) = admit(rules, doc, kind)?;
            if findings
                .iter()
                .any(|f| f.severity == nvcre_engine::Severity::Error)
            {
                return Ok(findings);
            }
            let admitted = RenderRequest {
                admitted: true,
                ..render_req
            };
            let rendered = if let Some(run) = run {
                // Readied, read and admitted above: the render does neither again.
                crate::render::render_admitted_run(rules, &doc, run, &admitted)
            } else if req.platform.is_some() || req.gpu_arch.is_some() || req.nodes.is_some() {
                // A node context given in part (`--gpu-arch` without `--platform`) is refused
                // as `render` refuses it, never ignored.
                render_workflow(rules, &doc, &admitted)
            } else {
                // Without a node context a Workflow is checked as written (no override
                // applied, so nothing displaced).
                let params = crate::packs::params::placement(Vec::new(), false);
                let mut value = Cow::Borrowed(&doc.value);
                for stage in contract::AFTER_OVERRIDES {
                    match run_stage(rules, stage, value, origin, &params) {
                        Ok(out) => {
                            value = out.value;
                            findings.extend(out.findings);
                        }
                        Err(e) => return Err(noted(e, findings)),
                    }
                }
                return Ok(findings);
            };
            // What the render noted before an error follows admission's findings.
            let rendered = rendered.map_err(|e| {
                let (e, noted_by_render, _) = e.into_parts();
                findings.extend(noted_by_render);
                e
            });
            match rendered {
                Ok(rendered) => {
                    findings.extend(rendered.findings.iter().cloned());
                    if req.nodes.is_some() {
                        match placement_findings(rules, &doc, &rendered) {
                            Ok(f) => findings.extend(f),
                            Err(e) => return Err(noted(e, findings)),
                        }
                    }
                }
                Err(PolicyError::Rejected(f)) => findings.extend(f),
                Err(PolicyError::Placement(m)) => findings.push(placement_finding(&doc, m)),
                // A node context this document cannot use (a Workflow given half of one): an
                // input error of the document, which names it.
                Err(PolicyError::Usage(m)) => {
                    return Err(noted(crate::render::input_error(&doc, "", m), findings));
                }
                Err(e) => return Err(noted(e, findings)),
            }
            Ok(findings)
        }
        Route::List(items) => {
            // `kubectl get workloadruns -o yaml` prints a List: check every item at its own line.
            let mut findings = Vec::new();
            let mut failed = Vec::new();
            for (i, item) in items.iter().cloned().enumerate() {
                let at = nvcre_engine::FieldPath::root().key("items").index(i);
                let sub = Document {
                    source: doc.source.clone(),
                    index: doc.index,
                    value: item,
                    spans: doc.spans.sub(&at),
                };
                let mut alone = None;
                let objects = objects_or_alone(objects, &doc.value, &mut alone);
                // A finding on an emitted object keeps its path in that object.
                let in_list = |mut f: Finding| {
                    if f.object.is_none() {
                        f.field_path = Some(match f.field_path {
                            Some(p) => format!("{at}.{p}"),
                            None => at.to_string(),
                        });
                    }
                    f
                };
                if matches!(route(&sub.value), Route::NotAnObject) {
                    // Named as the List's item, not as a document of its own.
                    findings.push(in_list(not_an_object_finding(&sub, Some(&at))));
                    continue;
                }
                match check_document_in(rules, &sub, req, Some(objects)) {
                    Ok(f) => findings.extend(f.into_iter().map(in_list)),
                    // A bad item stops only itself: what it noted stays, and the items after
                    // it are checked.
                    Err(e) => {
                        let (e, noted_by_item, _) = e.into_parts();
                        findings.extend(noted_by_item.into_iter().map(in_list));
                        match e {
                            PolicyError::Rejected(f) => findings.extend(f.into_iter().map(in_list)),
                            e => failed.push(in_item(e, &sub, &at)),
                        }
                    }
                }
            }
            match failed.len() {
                0 => Ok(findings),
                1 => Err(noted(failed.remove(0), findings)),
                _ => Err(noted(PolicyError::Items(failed), findings)),
            }
        }
        // Not a Kubernetes object (values files, kustomizations without kind, prose): no rule
        // checks it, and the report says so.
        Route::NotAnObject => Ok(vec![not_an_object_finding(doc, None)]),
        Route::BadItems => Err(crate::render::input_error(
            doc,
            "items",
            format!(
                "items: expected a list of objects, got a {}",
                nvcre_engine::json_type_name(doc.value.get("items").unwrap_or(&Value::Null))
            ),
        )),
        Route::Linted => {
            let mut alone = None;
            let objects = objects_or_alone(objects, &doc.value, &mut alone);
            let mut findings = Vec::new();
            // One copy the packs share, made when the first pack selects the document.
            let mut shared: Option<std::sync::Arc<Value>> = None;
            for pack in rules.packs_for(&doc.value) {
                let shared = shared.get_or_insert_with(|| {
                    std::sync::Arc::new(as_the_api_server_reads(&doc.value))
                });
                findings.extend(pack.findings_in(shared, origin, &Value::Null, Some(objects))?);
            }
            Ok(findings)
        }
    }
}

/// A strict validation of a whole document (see [`measurement_validator`]).
type Validator = fn(&Document) -> Result<(), PolicyError>;

/// The strict validation of `kind` when it is one of our measurement kinds.
fn measurement_validator(kind: &str) -> Option<Validator> {
    use crate::measure::{
        BandwidthMeasurementResource, BandwidthMeasurementSpec, BandwidthMeasurementStatus,
        GoodputMeasurementResource, GoodputMeasurementSpec, GoodputMeasurementStatus,
    };
    use crate::render::validate_object;
    use kube::Resource;
    if kind == BandwidthMeasurementResource::kind(&()) {
        Some(validate_object::<BandwidthMeasurementSpec, BandwidthMeasurementStatus>)
    } else if kind == GoodputMeasurementResource::kind(&()) {
        Some(validate_object::<GoodputMeasurementSpec, GoodputMeasurementStatus>)
    } else {
        None
    }
}

/// `e`, the error that stopped checking `item` (at `at`, `items[N]`, of its List), as an input
/// error led by the item's path: among a List's items the message alone would not say which one
/// failed. An error naming no place of its own is put at the item's start. A nested List's
/// item error continues the path (`items[0].items[1]: …`).
fn in_item(e: PolicyError, item: &Document, at: &nvcre_engine::FieldPath) -> PolicyError {
    match e {
        // A nested List's item (`items[1]: …`) or items (`items: …`) continue the path.
        PolicyError::Input { file, pos, message }
            if message.starts_with("items[") || message.starts_with("items: ") =>
        {
            PolicyError::Input {
                file,
                pos,
                message: format!("{at}.{message}"),
            }
        }
        PolicyError::Input { file, pos, message } => PolicyError::Input {
            file,
            pos,
            message: format!("{at}: {message}"),
        },
        PolicyError::Items(errors) => {
            PolicyError::Items(errors.into_iter().map(|e| in_item(e, item, at)).collect())
        }
        e => PolicyError::Input {
            file: item.source.name.clone(),
            pos: if e.names_place() {
                None
            } else {
                item.spans.lookup(&nvcre_engine::FieldPath::root())
            },
            message: format!("{at}: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    /// The kinds `check` knows of our group are the CustomResourceDefinitions' kinds.
    #[test]
    fn our_kinds_are_the_crds_kinds() {
        let crds: Vec<String> = crate::crd::crds()
            .into_iter()
            .map(|c| c.spec.names.kind)
            .collect();
        assert_eq!(super::our_kinds(), crds.as_slice());
    }
}
