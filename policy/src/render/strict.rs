//! Strict field validation of the parts of a manifest that are Kubernetes types: `metadata`
//! (ObjectMeta) of every WorkloadRun and Workflow, and the fields a WorkloadRun passes through
//! to the pods (`resources`, `initContainers`, `volumes`, `volumeMounts`, `imagePullSecrets`,
//! `env[].valueFrom`). Each is read into its k8s-openapi type; a value of the wrong type is an
//! input error at its field, and every field the type does not have is reported with its path,
//! as kubectl's strict field validation (`--validate=strict`) does. Every `nvidia.com/gpu`
//! count under `spec` must be a whole number a 64-bit integer holds.

use nvcre_engine::{Document, FieldPath};
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::core::v1::{
    Container, EnvVarSource, LocalObjectReference, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::parse::plain_serde_message;
use crate::error::PolicyError;
use crate::placement::{gpu_count, gpu_count_problem, gpu_quantities};

/// One problem found: the field path and the message.
struct Problem {
    path: FieldPath,
    message: String,
    /// Located at the value (a scalar that is wrong as written) rather than at its key.
    at_value: bool,
}

/// The prefix of an unknown field's message, as kubectl's strict field validation words it.
const UNKNOWN: &str = "strict decoding error: ";

impl Problem {
    /// The field at `path`, which its type does not have.
    fn unknown_field(path: FieldPath) -> Problem {
        Problem {
            message: format!("{UNKNOWN}unknown field \"{path}\""),
            path,
            at_value: false,
        }
    }
}

/// Reads `value` (at `at`) as `T`: a type error, or every ignored (unknown) field.
fn validate_as<T: DeserializeOwned>(value: &Value, at: &FieldPath) -> Vec<Problem> {
    let mut unknown: Vec<FieldPath> = Vec::new();
    let mut record = |p: serde_ignored::Path<'_>| unknown.push(join(at, &p));
    let ignored = serde_ignored::Deserializer::new(nvcre_engine::MappingValue(value), &mut record);
    let result = serde_path_to_error::deserialize::<_, T>(ignored);
    match result {
        Ok(_) => unknown.into_iter().map(Problem::unknown_field).collect(),
        Err(e) => {
            let mut path = at.clone();
            for seg in e.path().iter() {
                path = match seg {
                    serde_path_to_error::Segment::Seq { index } => path.index(*index),
                    serde_path_to_error::Segment::Map { key } => path.key(key.clone()),
                    serde_path_to_error::Segment::Enum { variant } => path.key(variant.clone()),
                    serde_path_to_error::Segment::Unknown => path,
                };
            }
            // The unknown fields read before it stay: a missing field gives way to them.
            let mut problems: Vec<Problem> =
                unknown.into_iter().map(Problem::unknown_field).collect();
            problems.push(Problem {
                message: format!("{path}: {}", kubernetes_words(&e.inner().to_string())),
                path,
                at_value: false,
            });
            problems
        }
    }
}

/// serde's message in a manifest author's words: k8s-openapi's `expected EmptyDirVolumeSource`
/// (a type name) reads `expected a mapping (Kubernetes EmptyDirVolumeSource)`.
fn kubernetes_words(message: &str) -> String {
    let plain = plain_serde_message(message);
    match plain.rsplit_once("expected ") {
        Some((head, name))
            if name.chars().next().is_some_and(char::is_uppercase)
                && name.chars().all(char::is_alphanumeric) =>
        {
            format!("{head}expected a mapping (Kubernetes {name})")
        }
        _ => plain,
    }
}

/// `at` followed by the segments of serde_ignored's path.
fn join(at: &FieldPath, p: &serde_ignored::Path<'_>) -> FieldPath {
    fn walk(p: &serde_ignored::Path<'_>, out: FieldPath) -> FieldPath {
        use serde_ignored::Path;
        match p {
            Path::Root => out,
            Path::Seq { parent, index } => walk(parent, out).index(*index),
            Path::Map { parent, key } => walk(parent, out).key(key.clone()),
            Path::Some { parent }
            | Path::NewtypeStruct { parent }
            | Path::NewtypeVariant { parent } => walk(parent, out),
        }
    }
    walk(p, at.clone())
}

/// Each element of the list at `key` of `spec`, validated as `T`.
fn each<T: DeserializeOwned>(spec: &Value, key: &str, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("spec").key(key);
    match spec.get(key) {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                out.extend(validate_as::<T>(item, &at.clone().index(i)));
            }
        }
        // The typed parse reports a non-list with its own message.
        Some(_) => {}
    }
}

/// The API server's message for a resource quantity that does not parse.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Every `limits`/`requests` value of `resources` (at `at`) that is not a Kubernetes quantity:
/// k8s-openapi keeps a quantity as text, so `memory: lots` reads, and only the API server
/// would refuse the pods (at the value, with its message).
fn quantity_problems(resources: Option<&Value>, at: &FieldPath, out: &mut Vec<Problem>) {
    for list in ["limits", "requests"] {
        let Some(map) = resources
            .and_then(|r| r.get(list))
            .and_then(Value::as_object)
        else {
            continue;
        };
        for (name, value) in map {
            let Value::String(text) = value else {
                continue;
            };
            if nvcre_engine::quantity::split(text.trim()).is_none() {
                let path = at.clone().key(list).key(name.clone());
                out.push(Problem {
                    message: format!(
                        "{path}: Invalid value: {}: {QUANTITY_FORMAT}",
                        serde_json::Value::from(text.as_str())
                    ),
                    path,
                    at_value: true,
                });
            }
        }
    }
}

/// Strict field validation of `doc` (a WorkloadRun when `workload_run`, else a Workflow);
/// `unknown` are the fields the closed schema (`spec`) does not have, already found.
///
/// # Errors
/// [`PolicyError::Input`] at the first problem's line: a type error alone, or every unknown
/// field, kubectl's way, in document order (`strict decoding error: unknown field
/// "metadata.nmespace", unknown field "spec.initContainers[0].imag"`), then what to do.
pub(crate) fn validate(
    doc: &Document,
    workload_run: bool,
    unknown: Vec<FieldPath>,
) -> Result<(), PolicyError> {
    let mut problems: Vec<Problem> = unknown.into_iter().map(Problem::unknown_field).collect();
    // The object itself: what every Kubernetes object has (`status` as the API server
    // returns it).
    if let Some(top) = doc.value.as_object() {
        for key in top.keys() {
            if !["apiVersion", "kind", "metadata", "spec", "status"].contains(&key.as_str()) {
                problems.push(Problem::unknown_field(FieldPath::root().key(key.clone())));
            }
        }
    }
    if let Some(meta) = doc.value.get("metadata").filter(|m| !m.is_null()) {
        problems.extend(validate_as::<ObjectMeta>(
            meta,
            &FieldPath::root().key("metadata"),
        ));
    }
    if workload_run && let Some(spec) = doc.value.get("spec") {
        if let Some(resources) = spec.get("resources").filter(|r| !r.is_null()) {
            problems.extend(validate_as::<ResourceRequirements>(
                resources,
                &FieldPath::root().key("spec").key("resources"),
            ));
        }
        let spec_at = FieldPath::root().key("spec");
        quantity_problems(
            spec.get("resources"),
            &spec_at.clone().key("resources"),
            &mut problems,
        );
        if let Some(inits) = spec.get("initContainers").and_then(Value::as_array) {
            for (i, c) in inits.iter().enumerate() {
                let at = spec_at
                    .clone()
                    .key("initContainers")
                    .index(i)
                    .key("resources");
                quantity_problems(c.get("resources"), &at, &mut problems);
            }
        }
        each::<Container>(spec, "initContainers", &mut problems);
        each::<Volume>(spec, "volumes", &mut problems);
        each::<VolumeMount>(spec, "volumeMounts", &mut problems);
        each::<LocalObjectReference>(spec, "imagePullSecrets", &mut problems);
        if let Some(env) = spec.get("env").and_then(Value::as_array) {
            for (i, var) in env.iter().enumerate() {
                if let Some(from) = var.get("valueFrom").filter(|v| !v.is_null()) {
                    let at = FieldPath::root()
                        .key("spec")
                        .key("env")
                        .index(i)
                        .key("valueFrom");
                    problems.extend(validate_as::<EnvVarSource>(from, &at));
                }
            }
        }
    }
    // Every GPU count the document requests (`requests`/`limits` of `nvidia.com/gpu`, as
    // placement reads them): a value that is not one is an error, never "no GPU need".
    if let Some(spec) = doc.value.get("spec") {
        for (path, value) in gpu_quantities(spec, FieldPath::root().key("spec")) {
            // Under spec.overrides a null is a patch's "delete this key", not a count.
            if value.is_null() && crate::hazards::in_overrides(&path) {
                continue;
            }
            if let Err(e) = gpu_count(value) {
                problems.push(Problem {
                    message: format!("{path}: {}", gpu_count_problem(value, e)),
                    path,
                    at_value: true,
                });
            }
        }
    }
    refuse(doc, problems)
}

/// Strict field validation of a whole object of one of our measurement kinds
/// (`BandwidthMeasurement`, `GoodputMeasurement`: `metadata` as ObjectMeta, `spec` as `S`,
/// `status` as `T`): a value of the wrong type or a missing required field is an input error at
/// its field, and every field the types do not have is reported, as [`validate`] reports them.
///
/// # Errors
/// As [`validate`].
pub(crate) fn validate_object<S: DeserializeOwned, T: DeserializeOwned>(
    doc: &Document,
) -> Result<(), PolicyError> {
    let mut problems = Vec::new();
    if let Some(top) = doc.value.as_object() {
        for (key, value) in top {
            let at = FieldPath::root().key(key.clone());
            match key.as_str() {
                "apiVersion" | "kind" => {}
                // Absent and null read alike, as the API server reads them.
                "metadata" | "spec" | "status" if value.is_null() => {}
                "metadata" => problems.extend(validate_as::<ObjectMeta>(value, &at)),
                "spec" => problems.extend(validate_as::<S>(value, &at)),
                "status" => problems.extend(validate_as::<T>(value, &at)),
                _ => problems.push(Problem::unknown_field(at)),
            }
        }
        if top.get("spec").is_none_or(Value::is_null) {
            problems.push(Problem {
                message: "spec: Required value".to_string(),
                path: FieldPath::root(),
                at_value: false,
            });
        }
    }
    refuse(doc, problems)
}

/// The input error `problems` of `doc` make, if any: a type error alone (the first), or every
/// unknown field in document order (also beside a missing field, which one of them usually
/// misspells).
fn refuse(doc: &Document, mut problems: Vec<Problem>) -> Result<(), PolicyError> {
    // A missing field beside unknown ones is mostly one of them misspelt: those are named.
    let misspelt = problems.iter().any(|p| p.message.starts_with(UNKNOWN));
    let type_error = problems.iter().find(|p| {
        let missing = misspelt && p.message.contains(": missing field `");
        !(p.message.starts_with(UNKNOWN) || missing)
    });
    let (at, message) = match type_error {
        Some(p) if p.at_value => {
            return Err(PolicyError::Input {
                file: doc.source.name.clone(),
                pos: doc.spans.lookup(&p.path),
                message: p.message.clone(),
            });
        }
        Some(p) => (&p.path, p.message.clone()),
        None => {
            // Document order: by the line and column of each field's name.
            let key_pos = |p: &Problem| doc.spans.lookup_key(&p.path);
            problems.sort_by_key(|p| key_pos(p).map(|pos| (pos.line, pos.column)));
            let Some(first) = problems.first() else {
                return Ok(());
            };
            let unknown: Vec<&str> = problems
                .iter()
                .filter_map(|p| p.message.strip_prefix(UNKNOWN))
                .collect();
            let them = if unknown.len() == 1 { "it" } else { "them" };
            (
                &first.path,
                format!("{UNKNOWN}{}: correct or remove {them}", unknown.join(", ")),
            )
        }
    };
    Err(PolicyError::Input {
        file: doc.source.name.clone(),
        pos: doc.spans.lookup_key(at).or_else(|| doc.spans.lookup(at)),
        message,
    })
}
