//! YAML hazards in fields Kubernetes reads as strings: label and annotation values, env
//! `value`s and ConfigMap data, in any object and at any depth. This tool reads YAML 1.2 (an unquoted `yes` stays the string `yes`), but kubectl and
//! other YAML 1.1 tools read `yes`, `no`, `on`, `off`, `y`, `n` as booleans; and an unquoted
//! `1.10`, `0755` or `1e3` is a number in every YAML version (`1.1`, `755` or octal `493`,
//! `1000`), not the text written. Such a value is a finding that says to quote it (an error for a
//! number or boolean, which the API server refuses in a string field; a warning for a YAML 1.1
//! boolean word, a string here); the value is never rewritten. So is a label, annotation or data key YAML 1.1 reads as a boolean
//! (`on:`), and an integer in YAML 1.2's octal form (`0o17`, a string to YAML 1.1). A YAML 1.1
//! boolean word in any other string field (`queue: on`) is a warning too.

use nvcre_engine::{Document, FieldPath, Finding, Segment, Severity};
use serde_json::Value;

use crate::check::built_in_finding;

/// Rule id of the warning.
pub const YAML_QUOTE_RULE: &str = "yaml-quote-it";

/// Rule id of the warning for a `null` (or empty) resource quantity, which is dropped.
pub const NULL_QUANTITY_RULE: &str = "null-quantity";

/// True for a path under `spec.overrides`, where a `null` is a patch's "delete this key", also
/// of an item of a `List` (`items[0].spec.overrides…`, at any depth of Lists).
pub(crate) fn in_overrides(path: &FieldPath) -> bool {
    use nvcre_engine::Segment;
    let mut segments = path.segments();
    while let [Segment::Key(items), Segment::Index(_), rest @ ..] = segments
        && items == "items"
    {
        segments = rest;
    }
    matches!(segments, [Segment::Key(a), Segment::Key(b), ..] if a == "spec" && b == "overrides")
}

/// The plain scalars YAML 1.1 reads as booleans (its `bool` type), beside YAML 1.2's `true` /
/// `false`, which this tool reads as booleans too.
const YAML11_BOOLEANS: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// The scalar written at 1-based `column` of `line` when it is plain (not quoted, not a block
/// scalar): the text up to the end of the line, a flow separator or a comment.
fn plain_token(line: &str, column: usize) -> Option<String> {
    let rest: String = line.chars().skip(column.saturating_sub(1)).collect();
    if rest.starts_with(['"', '\'', '|', '>']) {
        return None;
    }
    let mut token = rest.as_str();
    if let Some(i) = token.find(" #") {
        token = &token[..i];
    }
    if let Some(i) = token.find([',', '}', ']']) {
        token = &token[..i];
    }
    let token = token.trim_end();
    (!token.is_empty()).then(|| token.to_string())
}

/// The plain scalar written at `pos` ([`plain_token`]), unless it is tagged (`!!str yes` is a
/// string to every YAML reader) or the content of a block scalar (the line before it ends with
/// its `|` or `>` indicator).
fn written_plain(line: &dyn Fn(usize) -> Option<String>, pos: nvcre_engine::Pos) -> Option<String> {
    let text = line(pos.line)?;
    let before: String = text.chars().take(pos.column.saturating_sub(1)).collect();
    if before
        .split_whitespace()
        .last()
        .is_some_and(|w| w.starts_with('!'))
    {
        return None;
    }
    let indicator = |w: &str| {
        w.starts_with(['|', '>']) && w[1..].chars().all(|c| matches!(c, '-' | '+' | '0'..='9'))
    };
    let after_indicator = pos.line > 1
        && line(pos.line - 1).is_some_and(|l| {
            l.split(" #")
                .next()
                .and_then(|l| l.split_whitespace().last())
                .is_some_and(indicator)
        });
    if before.trim().is_empty() && after_indicator {
        return None;
    }
    plain_token(&text, pos.column)
}

/// Every entry of the mapping `v` (if it is one) under `path`.
fn entries<'a>(out: &mut Vec<(FieldPath, &'a Value)>, path: FieldPath, v: Option<&'a Value>) {
    if let Some(map) = v.and_then(Value::as_object) {
        for (k, v) in map {
            out.push((path.clone().key(k.clone()), v));
        }
    }
}

/// [`entries`] of a mapping whose keys are strings too (labels, annotations, ConfigMap data).
fn string_entries<'a>(out: &mut Fields<'a>, path: FieldPath, v: Option<&'a Value>) {
    let start = out.strings.len();
    entries(&mut out.strings, path, v);
    let keys: Vec<FieldPath> = out.strings[start..]
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    out.string_keys.extend(keys);
}

/// The fields of a document the warnings look at, each `(path, value)`, in document order.
#[derive(Default)]
struct Fields<'a> {
    /// Where Kubernetes expects a string, anywhere in the document (a Pod template inside a
    /// Job inside a TrainingRuntime is the same Pod): the values of every `labels` and
    /// `annotations` mapping under a `metadata` (and a WorkloadRun's
    /// `spec.workloadMetadata.labels`), every `value` of an `env` list entry, and the `data`
    /// and `stringData` of a top-level ConfigMap or Secret.
    strings: Vec<(FieldPath, &'a Value)>,
    /// The entries of those mappings whose keys are strings too: labels, annotations and the
    /// ConfigMap or Secret data (an `env` value's key is the field name `value`).
    string_keys: Vec<FieldPath>,
    /// Every quantity of a `resources` mapping's `limits` and `requests`.
    quantities: Vec<(FieldPath, &'a Value)>,
    /// Every string, anywhere, that is one of [`YAML11_BOOLEANS`].
    words: Vec<FieldPath>,
}

fn fields(doc: &Value) -> Fields<'_> {
    let mut out = Fields::default();
    walk(&mut out, &mut Vec::new(), doc);
    data_entries(&mut out, FieldPath::root(), doc);
    out
}

/// The string entries of `object` (at `at`) when it is a ConfigMap (`data`) or a Secret
/// (`stringData`), or of each such item of a List, at its own path.
fn data_entries<'a>(out: &mut Fields<'a>, at: FieldPath, object: &'a Value) {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "ConfigMap" | "Secret" => {
            let key = if kind == "ConfigMap" {
                "data"
            } else {
                "stringData"
            };
            string_entries(out, at.key(key), object.get(key));
        }
        _ if kind.ends_with("List") => {
            if let Some(items) = object.get("items").and_then(Value::as_array) {
                for (i, item) in items.iter().enumerate() {
                    data_entries(out, at.clone().key("items").index(i), item);
                }
            }
        }
        _ => {}
    }
}

/// One step of [`walk`]'s path, borrowed from the document: a path is made only for a field
/// the warnings look at (a document has thousands of keys, a few such fields).
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The path of `steps`.
fn path_of(steps: &[Step<'_>]) -> FieldPath {
    FieldPath::from_segments(
        steps
            .iter()
            .map(|s| match s {
                Step::Key(k) => Segment::Key((*k).to_string()),
                Step::Index(i) => Segment::Index(*i),
            })
            .collect(),
    )
}

fn walk<'a>(out: &mut Fields<'a>, steps: &mut Vec<Step<'a>>, v: &'a Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                steps.push(Step::Key(k));
                match (k.as_str(), child) {
                    ("metadata" | "workloadMetadata", Value::Object(meta)) => {
                        for field in ["labels", "annotations"] {
                            if let Some(m) = meta.get(field) {
                                string_entries(out, path_of(steps).key(field), Some(m));
                            }
                        }
                    }
                    ("env", Value::Array(items)) => {
                        for (i, item) in items.iter().enumerate() {
                            if let Some(value) = item.get("value")
                                && item.get("name").is_some()
                            {
                                out.strings
                                    .push((path_of(steps).index(i).key("value"), value));
                            }
                        }
                    }
                    ("resources", Value::Object(res)) => {
                        for field in ["limits", "requests"] {
                            if let Some(q) = res.get(field) {
                                entries(&mut out.quantities, path_of(steps).key(field), Some(q));
                            }
                        }
                    }
                    _ => {}
                }
                walk(out, steps, child);
                steps.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                steps.push(Step::Index(i));
                walk(out, steps, item);
                steps.pop();
            }
        }
        Value::String(s) if YAML11_BOOLEANS.contains(&s.as_str()) => {
            out.words.push(path_of(steps));
        }
        _ => {}
    }
}

/// The field path of JSON `pointer` in `value` (a numeric token is an index under a list and a
/// key under a mapping).
fn path_of_pointer(value: &Value, pointer: &str) -> Option<FieldPath> {
    let mut path = FieldPath::root();
    let mut at = value;
    for raw in pointer.split('/').skip(1) {
        let token = raw.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(items) => {
                let i: usize = token.parse().ok()?;
                at = items.get(i)?;
                path = path.index(i);
            }
            Value::Object(map) => {
                at = map.get(&token)?;
                path = path.key(token);
            }
            _ => return None,
        }
    }
    Some(path)
}

/// A key YAML 1.1 reads as a number that is not written as that number reads back (`1.10` is
/// `1.1`, `010` is `8`, `1e3` is `1000`, `+1` is `1`). A plain integer (`8080`) reads back as
/// written.
fn yaml11_number_key(key: &str) -> bool {
    let digits = key.strip_prefix('-').unwrap_or(key);
    let canonical_integer = digits == "0"
        || (!digits.starts_with('0')
            && !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit()));
    !canonical_integer
        && key.bytes().any(|b| b.is_ascii_digit())
        && key.parse::<f64>().is_ok_and(f64::is_finite)
}

/// An unquoted number with a leading zero (`010`): YAML 1.1 tools read it as octal.
fn octal_in_yaml11(token: &str) -> Option<i64> {
    let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
    if digits.len() < 2 || !digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = i64::from_str_radix(&digits[1..], 8).ok()?;
    Some(if token.starts_with('-') {
        -value
    } else {
        value
    })
}

/// A number as a person writes it: `755`, not `755.0`.
fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 => {
            format!("{f:.0}")
        }
        _ => n.to_string(),
    }
}

/// The `yaml-quote-it` warning at `path` of `doc`.
fn warning(doc: &Document, path: &FieldPath, message: String) -> Finding {
    finding(doc, path, message, Severity::Warning)
}

/// A `yaml-quote-it` finding of `severity` at `path` of `doc`.
fn finding(doc: &Document, path: &FieldPath, message: String, severity: Severity) -> Finding {
    built_in_finding(
        doc,
        (YAML_QUOTE_RULE, "input", severity),
        message,
        Some(path),
        None,
    )
}

/// A finding for each string-typed field of `doc` whose unquoted value other YAML readers take
/// differently: an error where the value is a number or boolean in every reading (the API server
/// refuses it), a warning otherwise. `line` gives the text of a 1-based line of the document's source.
pub fn yaml_quote_findings(doc: &Document, line: &dyn Fn(usize) -> Option<String>) -> Vec<Finding> {
    let mut out = Vec::new();
    let found = fields(&doc.value);
    for (path, value) in &found.strings {
        let reading = match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => value,
            _ => continue,
        };
        let Some(pos) = doc.spans.lookup(path) else {
            continue;
        };
        let Some(token) = written_plain(line, pos) else {
            continue;
        };
        // A number or boolean in every YAML reading is a value the API server refuses for a
        // string field (an error); a YAML 1.1 boolean word is a string here and a boolean to
        // kubectl (a warning: other tools read it as written).
        let (why, severity) = match reading {
            Value::String(s) if YAML11_BOOLEANS.contains(&s.as_str()) && *s == token => (
                "YAML 1.1 tools (kubectl among them) read it as a boolean".to_string(),
                Severity::Warning,
            ),
            Value::Number(n) => {
                // `1.10` reads as 1.1, `0755` as 755: say so; `42` reads as written.
                let number = number_text(n);
                let changed = if number == token {
                    ""
                } else {
                    ", not the text written,"
                };
                (
                    format!(
                        "it is the number {number} in YAML{changed} and the API server refuses a number here"
                    ),
                    Severity::Error,
                )
            }
            Value::Bool(b) => (
                format!("it is the boolean {b} in YAML, and the API server refuses a boolean here"),
                Severity::Error,
            ),
            _ => continue,
        };
        out.push(finding(
            doc,
            path,
            format!(
                "{path}: the unquoted value {token} is meant as a string, but {why}: quote it (\"{token}\")"
            ),
            severity,
        ));
    }
    // Any other field holding a plain YAML 1.1 boolean word: read as a string here (the field
    // is a string, or this tool's typed read would have refused it), as a boolean by kubectl,
    // which the API server refuses for a string field or which changes a free-form one (a
    // queue name, a node selector value, an argument).
    for path in &found.words {
        if found.strings.iter().any(|(p, _)| p == path) {
            continue;
        }
        let Some(Value::String(word)) = path.get(&doc.value) else {
            continue;
        };
        let Some(pos) = doc.spans.lookup(path) else {
            continue;
        };
        if written_plain(line, pos).as_deref() != Some(word) {
            continue;
        }
        out.push(warning(
            doc,
            path,
            format!(
                "{path}: the unquoted value {word} is meant as a string, but YAML 1.1 tools (kubectl among them) read it as a boolean: quote it (\"{word}\")"
            ),
        ));
    }
    // A key YAML 1.1 reads as a boolean: `on:` is the label key "true" to kubectl.
    for path in &found.string_keys {
        let Some(nvcre_engine::Segment::Key(key)) = path.segments().last() else {
            continue;
        };
        // `true` and `false` read back as the same text; the other spellings do not.
        let reading = if YAML11_BOOLEANS.contains(&key.as_str())
            || matches!(key.as_str(), "True" | "TRUE" | "False" | "FALSE")
        {
            "a boolean"
        } else if yaml11_number_key(key) {
            "a number"
        } else {
            continue;
        };
        let Some(pos) = doc.spans.lookup_key(path) else {
            continue;
        };
        let written = line(pos.line)
            .and_then(|l| plain_token(&l, pos.column))
            .and_then(|t| t.split(':').next().map(|k| k.trim_end().to_string()));
        if written.as_deref() != Some(key.as_str()) {
            continue;
        }
        let mut finding = warning(
            doc,
            path,
            format!(
                "{path}: the unquoted key {key} is meant as a string, but YAML 1.1 tools (kubectl among them) read it as {reading}: quote it (\"{key}\")"
            ),
        );
        // At the key, which is what to quote.
        finding.line = Some(pos.line);
        finding.column = Some(pos.column);
        out.push(finding);
    }
    for (path, value) in found.quantities {
        if value.is_null() && !in_overrides(&path) {
            out.push(built_in_finding(
                doc,
                (NULL_QUANTITY_RULE, "input", Severity::Warning),
                format!(
                    "{path}: the quantity is empty (null), and a null field is dropped as if it were not written (the API server drops it too): write the quantity you mean, or remove the key"
                ),
                Some(&path),
                None,
            ));
        }
    }
    // Every integer written with a leading zero, in any field: the parser recorded each one
    // (a string-typed field already got its "quote it" warning above).
    let warned: std::collections::HashSet<String> =
        out.iter().filter_map(|f| f.field_path.clone()).collect();
    for (pointer, token) in doc.spans.leading_zero_integers() {
        let octal = octal_in_yaml11(token);
        let yaml12_octal = token
            .strip_prefix(['+', '-'])
            .unwrap_or(token)
            .starts_with("0o");
        if octal.is_none() && !yaml12_octal {
            continue;
        }
        let Some(path) = path_of_pointer(&doc.value, &pointer) else {
            continue;
        };
        if warned.contains(&path.to_string()) || is_identity_field(&path) {
            continue;
        }
        let here = path
            .get(&doc.value)
            .and_then(Value::as_number)
            .map(number_text)
            .unwrap_or_else(|| token.to_string());
        let message = match octal {
            Some(octal) => format!(
                "{path}: the unquoted value {token} is the number {here} here, but YAML 1.1 tools (kubectl among them) read it as octal {octal}: write a number both read alike: {octal} if octal {token} is meant (a file mode such as defaultMode: 0644), {here} if not"
            ),
            None => format!(
                "{path}: the unquoted value {token} is the number {here} here (YAML 1.2 octal), but YAML 1.1 tools (kubectl among them) read it as the string \"{token}\": write the number in decimal ({here})"
            ),
        };
        out.push(warning(doc, &path, message));
    }
    out
}

/// Whether `path` is an object's `apiVersion`, `kind` or `metadata.name`, `generateName` or
/// `namespace` (of the document, or of a List's item): a string-only field, whose number of
/// any spelling is a type error reported as such, never a number to write another way.
fn is_identity_field(path: &FieldPath) -> bool {
    let keys: Vec<&str> = path
        .segments()
        .iter()
        .filter_map(|s| match s {
            Segment::Key(k) => Some(k.as_str()),
            Segment::Index(_) => None,
        })
        .collect();
    // The keys below the items of any Lists around the object.
    let object: Vec<&str> = keys.iter().copied().skip_while(|k| *k == "items").collect();
    matches!(
        object.as_slice(),
        ["apiVersion" | "kind"] | ["metadata", "name" | "generateName" | "namespace"]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_fields_of_an_object_and_of_list_items() {
        let at = |p: &str| is_identity_field(&FieldPath::parse(p).expect("path"));
        assert!(at("metadata.name"));
        assert!(at("kind"));
        assert!(at("items[2].metadata.namespace"));
        assert!(!at("spec.metadata.name"));
        assert!(!at("metadata.labels.name"));
    }

    #[test]
    fn overrides_are_found_in_a_document_and_in_the_items_of_lists() {
        let at = |p: &str| in_overrides(&FieldPath::parse(p).expect("path"));
        assert!(at("spec.overrides[0].dependencies[2]"));
        assert!(at("items[1].spec.overrides[23].jobTemplate"));
        assert!(at("items[0].items[3].spec.overrides[0]"));
        assert!(!at("spec.dependencies[0]"));
        assert!(!at("items[1].spec.dependencies[0]"));
        assert!(!at("items.spec.overrides"));
    }

    #[test]
    fn plain_tokens_end_at_comments_and_flow_separators() {
        assert_eq!(plain_token("  a: yes # c", 6).as_deref(), Some("yes"));
        assert_eq!(plain_token("{a: on, b: 1}", 5).as_deref(), Some("on"));
        assert_eq!(plain_token("  a: \"yes\"", 6), None);
        assert_eq!(plain_token("  a: 'no'", 6), None);
        assert_eq!(plain_token("  a: 1.10", 6).as_deref(), Some("1.10"));
    }

    #[test]
    fn number_keys_that_yaml_11_reads_back_otherwise() {
        for key in ["1.10", "010", "1e3", "+1", "0.5", "-1.0"] {
            assert!(yaml11_number_key(key), "{key}");
        }
        for key in ["8080", "0", "-3", "a1", "v1.10", "1.2.3", "", "inf", "NaN"] {
            assert!(!yaml11_number_key(key), "{key}");
        }
    }

    #[test]
    fn leading_zeros_are_octal_in_yaml_11() {
        assert_eq!(octal_in_yaml11("010"), Some(8));
        assert_eq!(octal_in_yaml11("-017"), Some(-15));
        assert_eq!(octal_in_yaml11("0"), None);
        assert_eq!(octal_in_yaml11("10"), None);
        assert_eq!(octal_in_yaml11("08"), None);
        assert_eq!(octal_in_yaml11("0.5"), None);
    }
}
