//! CRD validation: the `openAPIV3Schema` basics and `x-kubernetes-validations` CEL rules.
//!
//! Like the API server, unknown fields are pruned (unless `x-kubernetes-preserve-unknown-fields`)
//! rather than rejected; `additionalProperties: false` means the same. The keywords checked are
//! `type`, `required`, `enum`, `pattern`, `minLength`/`maxLength`, `minimum`/`maximum`,
//! `minItems`/`maxItems`, `properties`, `additionalProperties` (schema form) and `items`.

use nvcre_engine::{Expr, Scope, go_quote};
use regex::Regex;
use serde_json::{Map, Value};

use crate::status::Cause;

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Go's `%v`-ish rendering of a value inside `Invalid value: …`.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

/// A schema bound as Go prints it: `1`, not `1.0`.
fn bound(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => v.to_string(),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        field: field.into(),
        message,
    }
}

/// Removes fields the schema does not declare (the server's pruning).
pub fn prune(schema: &Value, v: &mut Value) {
    if schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
        && schema.get("properties").is_none()
    {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                let preserve =
                    schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
                if !preserve {
                    m.retain(|k, _| props.contains_key(k));
                }
                for (k, c) in m.iter_mut() {
                    if let Some(s) = props.get(k) {
                        prune(s, c);
                    }
                }
            } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for c in m.values_mut() {
                    prune(s, c);
                }
            } else if schema["additionalProperties"] == Value::Bool(false) {
                m.clear();
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for i in items {
                    prune(s, i);
                }
            }
        }
        _ => {}
    }
}

/// Validates `new` (and transition rules against `old`) at `path`, appending causes.
pub fn validate(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    let shown_path = if path.is_empty() { "<root>" } else { path };
    if new.is_null() && schema["nullable"].as_bool() == Some(true) {
        return;
    }
    if let Some(t) = schema["type"].as_str() {
        let actual = json_type(new);
        let ok = actual == t || (t == "number" && actual == "integer");
        if !ok {
            out.push(cause(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"{actual}\": {shown_path} in body must be of type {t}: \"{actual}\""
                ),
            ));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(new)
    {
        let list: Vec<String> = allowed.iter().map(show).collect();
        out.push(cause(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                show(new),
                list.join(", ")
            ),
        ));
    }
    match new {
        Value::String(s) => check_string(schema, s, path, shown_path, out),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(max) = schema["maximum"].as_f64()
                && x > max
            {
                out.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {n}: {shown_path} in body should be less than or equal to {}", bound(&schema["maximum"])),
                ));
            }
            if let Some(min) = schema["minimum"].as_f64()
                && x < min
            {
                out.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {n}: {shown_path} in body should be greater than or equal to {}", bound(&schema["minimum"])),
                ));
            }
        }
        Value::Object(m) => check_object(schema, m, old, path, out),
        Value::Array(items) => {
            if let Some(max) = schema["maxItems"].as_u64()
                && items.len() as u64 > max
            {
                out.push(cause(
                    "FieldValueTooMany",
                    path,
                    format!("Too many: {}: must have at most {max} items", items.len()),
                ));
            }
            if let Some(min) = schema["minItems"].as_u64()
                && (items.len() as u64) < min
            {
                out.push(cause(
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {}: {shown_path} in body should have at least {min} items",
                        items.len()
                    ),
                ));
            }
            if let Some(s) = schema.get("items") {
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let is_map = schema["x-kubernetes-list-type"].as_str() == Some("map");
                for (i, item) in items.iter().enumerate() {
                    // Only map-type lists correlate items with the old list (by their keys).
                    let old_item = old.and_then(Value::as_array).and_then(|olds| {
                        if !is_map || keys.is_empty() {
                            return None;
                        }
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
                    });
                    validate(s, item, old_item, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
    check_rules(schema, new, old, path, out);
}

fn check_string(schema: &Value, s: &str, path: &str, shown_path: &str, out: &mut Vec<Cause>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema["maxLength"].as_u64()
        && len > max
    {
        out.push(cause(
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema["minLength"].as_u64()
        && len < min
    {
        out.push(cause(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {}: {shown_path} in body should be at least {min} chars long",
                go_quote(s)
            ),
        ));
    }
    if let Some(p) = schema["pattern"].as_str() {
        match Regex::new(p) {
            Ok(re) if !re.is_match(s) => out.push(cause(
                "FieldValueInvalid",
                path,
                format!(
                    "Invalid value: {}: {shown_path} in body should match '{p}'",
                    go_quote(s)
                ),
            )),
            Ok(_) => {}
            Err(e) => out.push(cause(
                "FieldValueInvalid",
                path,
                format!(
                    "Invalid value: {}: pattern {p:?} does not compile: {e}",
                    go_quote(s)
                ),
            )),
        }
    }
}

fn check_object(
    schema: &Value,
    m: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<Cause>,
) {
    if let Some(req) = schema["required"].as_array() {
        for r in req.iter().filter_map(Value::as_str) {
            if !m.contains_key(r) {
                out.push(cause(
                    "FieldValueRequired",
                    &child(path, r),
                    "Required value".into(),
                ));
            }
        }
    }
    let props = schema["properties"].as_object();
    for (k, v) in m {
        // The API server validates metadata itself, not with the CRD's schema.
        if path.is_empty() && matches!(k.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        let s = props
            .and_then(|p| p.get(k))
            .or_else(|| schema.get("additionalProperties").filter(|s| s.is_object()));
        if let Some(s) = s {
            validate(s, v, old.and_then(|o| o.get(k)), &child(path, k), out);
        }
    }
}

fn rule_message(rule: &Value, scope: &Scope, text: &str) -> String {
    if let Some(me) = rule["messageExpression"].as_str()
        && let Ok(expr) = Expr::compile(me)
        && let Ok(Value::String(s)) = expr.eval_json(scope)
    {
        return s;
    }
    match rule["message"].as_str() {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed rule: {text}"),
    }
}

fn uses_old_self(text: &str) -> bool {
    // A word match is enough: `oldSelf` is a reserved variable name in CRD rules.
    text.match_indices("oldSelf").any(|(i, _)| {
        let before = text[..i].chars().last();
        let after = text[i + 7..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn check_rules(schema: &Value, new: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Cause>) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return;
    };
    let ty = json_type(new);
    let shown = match schema["type"].as_str() {
        Some(t) => t,
        None => ty,
    };
    let mut scope = Scope::new();
    scope.bind("self", new);
    if let Some(o) = old {
        scope.bind("oldSelf", o);
    }
    for rule in rules {
        let Some(text) = rule["rule"].as_str() else {
            continue;
        };
        // Transition rules run only on updates, where the old value exists.
        if uses_old_self(text) && old.is_none() {
            continue;
        }
        let field = match rule["fieldPath"].as_str() {
            Some(fp) if !fp.is_empty() => format!("{path}{fp}"),
            _ => path.to_string(),
        };
        let field = field.trim_start_matches('.').to_string();
        let outcome = Expr::compile(text)
            .map_err(|e| e.to_string())
            .and_then(|e| e.eval_bool(&scope).map_err(|e| e.to_string()));
        let failed = match outcome {
            Ok(true) => continue,
            Ok(false) => rule_message(rule, &scope, text),
            Err(e) => format!("rule evaluation error: {e}"),
        };
        let (reason, body) = match rule["reason"].as_str() {
            Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {failed}")),
            Some("FieldValueRequired") => {
                ("FieldValueRequired", format!("Required value: {failed}"))
            }
            Some("FieldValueDuplicate") => (
                "FieldValueDuplicate",
                format!("Duplicate value: \"{shown}\": {failed}"),
            ),
            _ => (
                "FieldValueInvalid",
                format!("Invalid value: \"{shown}\": {failed}"),
            ),
        };
        out.push(cause(reason, &field, body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn old_self_word_match() {
        assert!(uses_old_self("self == oldSelf"));
        assert!(!uses_old_self("self.oldSelfish == 1"));
    }

    #[test]
    fn type_enum_and_rules() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec is immutable after creation"}],
            "properties": {"n": {"type": "integer"}, "m": {"type": "string", "enum": ["a", "b"]}}}}});
        let mut out = Vec::new();
        validate(
            &schema,
            &json!({"spec": {"n": "x", "m": "c"}}),
            None,
            "",
            &mut out,
        );
        let msgs: Vec<String> = out.iter().map(Cause::to_error_string).collect();
        assert_eq!(
            msgs,
            vec![
                "spec.n: Invalid value: \"string\": spec.n in body must be of type integer: \"string\"",
                "spec.m: Unsupported value: \"c\": supported values: \"a\", \"b\"",
            ]
        );
        let mut out = Vec::new();
        validate(
            &schema,
            &json!({"spec": {"n": 2}}),
            Some(&json!({"spec": {"n": 1}})),
            "",
            &mut out,
        );
        assert_eq!(
            out[0].to_error_string(),
            "spec: Invalid value: \"object\": spec is immutable after creation"
        );
    }
}
