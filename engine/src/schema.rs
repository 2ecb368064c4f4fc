//! JSON Schemas (draft 2020-12) of rule files, for editors and for [`Contract`] row schemas.
//!
//! - [`row_schema`] derives a row schema from a Rust type with `#[derive(JsonSchema)]`: every
//!   subschema inlined (no `$ref`), an `Option` field described by its inner type alone (a
//!   missing key is how a row says "none").
//! - [`pack_file_schema`] describes a `kind: RulePack` document, from the loader's own serde
//!   types.
//! - [`table_file_schema`] describes a `kind: Table` document of any table a [`Contract`]
//!   declares (the entries of each checked against that table's row schema, chosen by
//!   `metadata.name`); [`one_table_file_schema`] describes the file of one table.
//!
//! In the table schemas every row value may also be templated (a `${{ … }}` string, a
//! `{$fragment: …}`, `{$if: …}` or `{$splice: …}` node), as loading allows: such values are
//! not type-checked, keys beside them are.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::contract::{Contract, TableContract};
use crate::pack::{PackFile, RULES_API_VERSION, RuleSpec};

/// The `$schema` URI of every schema produced here.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// The inlined draft 2020-12 schema of `T`, without `$schema` and `title` (so it can be
/// embedded), with `Option` fields described by their inner type.
pub fn row_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    if let Some(m) = v.as_object_mut() {
        m.remove("$schema");
        m.remove("title");
    }
    drop_null(&mut v);
    v
}

/// Removes the `null` alternative schemars gives an `Option` (`type: [T, "null"]`,
/// `anyOf: [T, {type: null}]`), recursively.
fn drop_null(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(types)) = m.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let one = types.remove(0);
                    m.insert("type".into(), one);
                }
            }
            if let Some(Value::Array(alts)) = m.get_mut("anyOf") {
                alts.retain(|a| a != &json!({"type": "null"}));
                if alts.len() == 1 {
                    let one = alts.remove(0);
                    m.remove("anyOf");
                    if let Value::Object(inner) = one {
                        for (k, x) in inner {
                            m.entry(k).or_insert(x);
                        }
                    }
                }
            }
            if m.get("default") == Some(&Value::Null) {
                m.remove("default");
            }
            m.values_mut().for_each(drop_null);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null),
        _ => {}
    }
}

/// The schema of a value that is only known once rendered.
fn templated_def() -> Value {
    json!({
        "description": "a value known once rendered: a ${{ … }} string, {$fragment: name}, {$if: …, $then: …, $else: …} or {$splice: …}",
        "anyOf": [
            {"type": "string", "pattern": "\\$\\{\\{"},
            {"type": "object", "required": ["$fragment"], "properties": {"$fragment": {"type": "string"}}, "additionalProperties": false},
            {"type": "object", "required": ["$if", "$then"], "properties": {"$if": {"type": "string"}, "$then": true, "$else": true}, "additionalProperties": false},
            {"type": "object", "required": ["$splice"], "properties": {"$splice": {"type": "string"}}, "additionalProperties": false}
        ]
    })
}

const TEMPLATED_REF: &str = "#/$defs/templated";

/// `schema`, or a templated value, at every level.
fn templatable(schema: &Value) -> Value {
    let Value::Object(m) = schema else {
        // `true` / `false`: anything (templated values included) / nothing.
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let nv = match k.as_str() {
            "properties" | "patternProperties" => match v {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(p, s)| (p.clone(), templatable(s)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" => templatable(v),
            "anyOf" | "oneOf" | "allOf" => match v {
                Value::Array(alts) => Value::Array(alts.iter().map(templatable).collect()),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), nv);
    }
    if out.get("additionalProperties") == Some(&Value::Bool(false)) {
        // A templated key (`"${{ … }}": v`) is only known once rendered.
        let pp = out.entry("patternProperties").or_insert_with(|| json!({}));
        if let Value::Object(pp) = pp {
            pp.insert("\\$\\{\\{".into(), Value::Bool(true));
        }
    }
    json!({"anyOf": [Value::Object(out), {"$ref": TEMPLATED_REF}]})
}

fn root(description: &str, mut schema: Value) -> Value {
    if let Value::Object(m) = &mut schema {
        let mut out = Map::new();
        out.insert("$schema".into(), json!(DRAFT_2020_12));
        out.insert("description".into(), json!(description));
        out.append(m);
        return Value::Object(out);
    }
    schema
}

/// The schema of a `kind: RulePack` document.
pub fn pack_file_schema() -> Value {
    let mut s = row_schema::<PackFile>();
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("entries");
        props.insert("apiVersion".into(), json!({"const": RULES_API_VERSION}));
        props.insert("kind".into(), json!({"const": "RulePack"}));
        props.insert(
            "rules".into(),
            json!({"type": "array", "items": row_schema::<RuleSpec>()}),
        );
    }
    root("a rule pack (kind: RulePack)", s)
}

/// The `metadata`, `apiVersion`, `kind` and `fragments` of a table document, closed.
fn table_base() -> Map<String, Value> {
    let file = row_schema::<PackFile>();
    let metadata = file
        .pointer("/properties/metadata")
        .cloned()
        .unwrap_or(Value::Bool(true));
    let mut m = Map::new();
    m.insert("type".into(), json!("object"));
    m.insert(
        "required".into(),
        json!(["apiVersion", "kind", "metadata", "entries"]),
    );
    m.insert(
        "properties".into(),
        json!({
            "apiVersion": {"const": RULES_API_VERSION},
            "kind": {"const": "Table"},
            "metadata": metadata,
            "fragments": {"type": "object", "description": "values entries insert with {$fragment: name}"},
            "entries": {"type": "array", "items": {"type": "object", "required": ["id"]}},
        }),
    );
    m.insert("additionalProperties".into(), json!(false));
    m
}

/// The schema of one entry of `table`: `id`, `include` and the row's keys, each value
/// possibly templated.
fn entry_schema(table: &TableContract) -> Value {
    let mut row = match templatable(&table.row_schema) {
        // The entry itself is a mapping, never a templated value.
        Value::Object(mut m) => match m.remove("anyOf") {
            Some(Value::Array(mut alts)) if !alts.is_empty() => alts.remove(0),
            _ => Value::Object(m),
        },
        other => other,
    };
    if let Value::Object(m) = &mut row {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(props) = props {
            let mut with_id = Map::new();
            with_id.insert(
                "id".into(),
                json!({"type": "string", "description": "unique in the rule set"}),
            );
            with_id.insert("include".into(), json!({"type": "string", "description": "CEL guard over params: the entry is rendered when true"}));
            with_id.append(props);
            *props = with_id;
        }
        let required = m.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(r) = required {
            r.insert(0, json!("id"));
        }
        if !table.description.is_empty() {
            m.insert("description".into(), json!(table.description));
        }
    }
    row
}

/// The schema of a `kind: Table` document of any table `contract` declares: `metadata.name`
/// must name one, and the entries are checked against that table's rows.
pub fn table_file_schema(contract: &Contract) -> Value {
    let mut base = table_base();
    let names: Vec<&str> = contract.tables().iter().map(|t| t.name.as_str()).collect();
    if let Some(Value::Object(name)) = base
        .get_mut("properties")
        .and_then(|p| p.pointer_mut("/metadata/properties/name"))
    {
        name.insert("enum".into(), json!(names));
    }
    let branches: Vec<Value> = contract
        .tables()
        .iter()
        .map(|t| {
            json!({
                "if": {"properties": {"metadata": {"properties": {"name": {"const": t.name}}}}},
                "then": {"properties": {"entries": {"items": entry_schema(t)}}}
            })
        })
        .collect();
    base.insert("allOf".into(), Value::Array(branches));
    base.insert("$defs".into(), json!({"templated": templated_def()}));
    root("a rule table (kind: Table)", Value::Object(base))
}

/// The schema of the `kind: Table` document of table `name`, when `contract` declares it.
pub fn one_table_file_schema(contract: &Contract, name: &str) -> Option<Value> {
    let table = contract.tables().iter().find(|t| t.name == name)?;
    let mut base = table_base();
    if let Some(Value::Object(n)) = base
        .get_mut("properties")
        .and_then(|p| p.pointer_mut("/metadata/properties/name"))
    {
        n.insert("const".into(), json!(name));
    }
    if let Some(Value::Object(entries)) = base
        .get_mut("properties")
        .and_then(|p| p.get_mut("entries"))
    {
        entries.insert("items".into(), entry_schema(table));
    }
    base.insert("$defs".into(), json!({"templated": templated_def()}));
    Some(root(
        &format!("the rule table {name:?} (kind: Table)"),
        Value::Object(base),
    ))
}
