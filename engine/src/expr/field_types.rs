//! `fieldTypeErrors(holder, fields, path)`: the fields of a value whose types a declared table
//! does not allow, found in one walk.
//!
//! A rule that reads a manifest's fields first needs to know they have the types it reads
//! (a container's `command` a list of strings, a quantity a string or a number): a field of
//! another type is refused by the API server when the manifest is applied, and reading it would
//! make the rule's expressions fail. Written in CEL, that check is a nested comprehension per
//! level of the table, repeated for every holder it applies to; here it is one call whose table
//! stays in the rule file.
//!
//! # The table
//!
//! `fields` maps a field name to what the field may hold:
//!
//! ```text
//! {'command': {'types': ['list'], 'shape': 'a list of strings',
//!              'items': {'types': ['string'], 'shape': 'a string'}},
//!  'resources': {'types': ['map'], 'shape': 'a map of limits and requests',
//!                'fields': {'limits': {'types': ['map'], 'shape': 'a map of quantities',
//!                                      'values': {'types': ['string', 'int'], 'shape': 'a quantity'}}}}}
//! ```
//!
//! - `types`: the names `typeName` gives that the field may have;
//! - `shape`: how the field is written, for the rule's message;
//! - `items` (a list's elements), `values` (a map's values), `fields` (a map's fields): the same
//!   again, one level down; a list's item or a map's value may have `fields` of its own.
//!
//! A field that is absent or null is not checked (null is how YAML writes an absent field); an
//! item or a value of null is (a list of strings holds no null). A field the table does not name
//! is not checked.
//!
//! # The result
//!
//! A list of `{'at': path, 'f': name, 'shape': shape, 'got': typeName}`, one per value of a type
//! its entry does not allow, in the holder's order (a document's mapping keeps its order; the
//! keys of a map an expression built are taken sorted). `at` is `path` followed by `.name`,
//! `[index]` or `["key"]` (quoted as `goQuote` does); `f` is the field's name, `name[index]` for
//! an item, the key for a map's value. Below a value of a wrong type nothing is checked. A holder
//! that is not a map has no fields: `[]`.
//!
//! # Cost
//!
//! One unit per value visited, charged as a comprehension's elements are; `rules lint` estimates
//! the call as a comprehension over the parts of its first argument.
//!
//! # Errors
//! A table that is not written as above (an entry without `types` or `shape`, a `types` that
//! is empty or names no type `typeName` gives, a key other than the five above), naming the
//! entry. An entry is read when a value meets it: an entry no document reaches is not.

use std::collections::HashMap;

use cel::ExecutionError;
use cel::common::types::{CelList, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};

use crate::view::{json_node, val_type_name};

/// The name rule files call it by.
pub(crate) const NAME: &str = "fieldTypeErrors";

/// The type names an entry's `types` may list: those `typeName` gives.
const TYPE_NAMES: [&str; 9] = [
    "list", "map", "string", "int", "uint", "double", "bool", "null", "bytes",
];

/// The keys an entry may have.
const ENTRY_KEYS: [&str; 5] = ["types", "shape", "items", "values", "fields"];

/// One entry of the table, read from its CEL map (owned: a table read from a document is
/// viewed, and a view's lookups give values of their own).
struct Entry<'s> {
    types: Vec<String>,
    shape: String,
    items: Option<CowVal<'s, 's>>,
    values: Option<CowVal<'s, 's>>,
    /// The fields' table, kept as the CEL map it is: it is read a field at a time.
    fields: Option<CowVal<'s, 's>>,
}

/// The errors of `holder`'s fields against `fields`, their paths led by `path` (see the module
/// docs).
///
/// # Errors
/// A malformed table, or the cost budget spent.
pub(crate) fn field_type_errors(
    holder: &dyn Val,
    fields: &dyn Val,
    path: &str,
) -> Result<Box<dyn Val + 'static>, ExecutionError> {
    let mut out = Vec::new();
    walk_fields(holder, fields, path, &mut out)?;
    Ok(Box::new(CelList::from(out)))
}

type Out = Vec<Box<dyn Val + 'static>>;

/// Charges one unit for a value visited.
fn charge() -> Result<(), ExecutionError> {
    crate::cost::charge(1).map_err(|b| ExecutionError::function_error(NAME, b.message()))
}

/// The string keys of the map `v`, in its order (sorted when an expression built it: such a
/// map iterates in no fixed order).
fn keys_of(v: &dyn Val) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(keys) = v.as_iterable() {
        let mut it = keys.iter();
        while let Some(k) = it.next() {
            if let Some(s) = k.downcast_ref::<CelString>() {
                names.push(s.inner().to_string());
            }
        }
    }
    if json_node(v).is_none() {
        names.sort_unstable();
    }
    names
}

/// Checks the fields of `holder` (nothing when it is not a map) at `path` against the table
/// `fields`.
fn walk_fields(
    holder: &dyn Val,
    fields: &dyn Val,
    path: &str,
    out: &mut Out,
) -> Result<(), ExecutionError> {
    let Some(specs) = fields
        .as_indexer()
        .filter(|_| val_type_name(fields) == "map")
    else {
        return Err(ExecutionError::function_error(
            NAME,
            format!(
                "the fields of {path:?} are not described by a map of field names to their types"
            ),
        ));
    };
    if val_type_name(holder) != "map" {
        return Ok(());
    }
    let Some(index) = holder.as_indexer() else {
        return Ok(());
    };
    for name in keys_of(holder) {
        let key = CelString::from(name.as_str());
        let Ok(spec) = specs.get(&key) else {
            continue;
        };
        let value = index.get(&key)?;
        if val_type_name(value.as_ref()) == "null" {
            continue;
        }
        charge()?;
        let at = format!("{path}.{name}");
        let entry = entry_of(spec.as_ref(), &at)?;
        walk_value(value.as_ref(), &entry, &at, &name, out)?;
    }
    Ok(())
}

/// Checks `value` against `entry`, reporting it as `f` at `at`.
fn walk_value(
    value: &dyn Val,
    entry: &Entry<'_>,
    at: &str,
    f: &str,
    out: &mut Out,
) -> Result<(), ExecutionError> {
    let got = val_type_name(value);
    if !entry.types.iter().any(|t| t == got) {
        out.push(error(at, f, &entry.shape, got));
        return Ok(());
    }
    if let (Some(items), "list", Some(list)) = (&entry.items, got, value.as_iterable()) {
        let items = entry_of(items.as_ref(), &format!("{at}[*]"))?;
        let mut it = list.iter();
        let mut i = 0usize;
        while let Some(item) = it.next() {
            charge()?;
            walk_value(
                item,
                &items,
                &format!("{at}[{i}]"),
                &format!("{f}[{i}]"),
                out,
            )?;
            i += 1;
        }
    }
    if got != "map" {
        return Ok(());
    }
    if let (Some(values), Some(index)) = (&entry.values, value.as_indexer()) {
        let values = entry_of(values.as_ref(), &format!("{at}[*]"))?;
        for name in keys_of(value) {
            charge()?;
            let v = index.get(&CelString::from(name.as_str()))?;
            let quoted = crate::quote::go_quote(&name);
            walk_value(v.as_ref(), &values, &format!("{at}[{quoted}]"), &name, out)?;
        }
    }
    if let Some(fields) = &entry.fields {
        walk_fields(value, fields.as_ref(), at, out)?;
    }
    Ok(())
}

/// Reads the table's entry for the value at `at` (`table`, for an error's words).
fn entry_of<'s>(spec: &'s dyn Val, table: &str) -> Result<Entry<'s>, ExecutionError> {
    const WANT: &str = "a map with 'types' (a list of type names) and 'shape' (a string), \
                        and optionally 'items', 'values' or 'fields'";
    let Some(index) = spec.as_indexer().filter(|_| val_type_name(spec) == "map") else {
        return Err(malformed(table, WANT));
    };
    let field = |name: &str| index.get(&CelString::from(name)).ok();
    let mut types = Vec::new();
    match field("types") {
        Some(t) if val_type_name(t.as_ref()) == "list" => {
            let Some(list) = t.as_ref().as_iterable() else {
                return Err(malformed(table, WANT));
            };
            let mut it = list.iter();
            while let Some(x) = it.next() {
                match x.downcast_ref::<CelString>() {
                    Some(s) if TYPE_NAMES.contains(&s.inner()) => types.push(s.inner().to_string()),
                    Some(s) => {
                        return Err(ExecutionError::function_error(
                            NAME,
                            format!(
                                "the table's entry for {table:?} names the type {:?}, which is none of typeName's: {}",
                                s.inner(),
                                TYPE_NAMES.join(", ")
                            ),
                        ));
                    }
                    None => return Err(malformed(table, WANT)),
                }
            }
            if types.is_empty() {
                return Err(malformed(table, WANT));
            }
        }
        _ => return Err(malformed(table, WANT)),
    }
    // A misspelt key ('item') would check nothing below it, silently.
    if let Some(keys) = spec.as_iterable() {
        let mut it = keys.iter();
        while let Some(k) = it.next() {
            let known = k
                .downcast_ref::<CelString>()
                .is_some_and(|k| ENTRY_KEYS.contains(&k.inner()));
            if !known {
                return Err(ExecutionError::function_error(
                    NAME,
                    format!(
                        "the table's entry for {table:?} has the key {}, which is none of {}",
                        crate::view::to_json(k).map_or_else(|| "?".to_string(), |v| v.to_string()),
                        ENTRY_KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    let shape = match field("shape") {
        Some(s) => match s.as_ref().downcast_ref::<CelString>() {
            Some(s) => s.inner().to_string(),
            None => return Err(malformed(table, WANT)),
        },
        None => return Err(malformed(table, WANT)),
    };
    Ok(Entry {
        types,
        shape,
        items: field("items"),
        values: field("values"),
        fields: field("fields"),
    })
}

fn malformed(at: &str, want: &str) -> ExecutionError {
    ExecutionError::function_error(NAME, format!("the table's entry for {at:?} is not {want}"))
}

/// One error of the result.
fn error(at: &str, f: &str, shape: &str, got: &str) -> Box<dyn Val + 'static> {
    let mut map: HashMap<CelMapKey<'static>, Box<dyn Val + 'static>> = HashMap::with_capacity(4);
    for (k, v) in [("at", at), ("f", f), ("shape", shape), ("got", got)] {
        map.insert(
            CelMapKey::from(k.to_string()),
            Box::new(CelString::from(v.to_string())),
        );
    }
    Box::new(CelMap::from(map))
}

/// Checks a table written as a literal (JSON) when the rules load: `Err` names the first entry
/// that is not written as the module docs say, by its place in the table (`command.items`).
pub(crate) fn check_table(table: &serde_json::Value) -> Result<(), String> {
    check_fields(table, "")
}

fn check_fields(fields: &serde_json::Value, at: &str) -> Result<(), String> {
    let serde_json::Value::Object(map) = fields else {
        return Err(format!(
            "the table{} is not a map of field names to their types",
            if at.is_empty() {
                String::new()
            } else {
                format!(" of {at:?}")
            }
        ));
    };
    for (name, entry) in map {
        let place = if at.is_empty() {
            name.clone()
        } else {
            format!("{at}.{name}")
        };
        check_entry(entry, &place)?;
    }
    Ok(())
}

fn check_entry(entry: &serde_json::Value, at: &str) -> Result<(), String> {
    const WANT: &str = "a map with 'types' (a list of type names) and 'shape' (a string), \
                        and optionally 'items', 'values' or 'fields'";
    let serde_json::Value::Object(map) = entry else {
        return Err(format!("the table's entry for {at:?} is not {WANT}"));
    };
    if let Some(key) = map.keys().find(|k| !ENTRY_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "the table's entry for {at:?} has the key {key:?}, which is none of {}",
            ENTRY_KEYS.join(", ")
        ));
    }
    match map.get("types") {
        Some(serde_json::Value::Array(types)) if !types.is_empty() => {
            for t in types {
                match t.as_str() {
                    Some(t) if TYPE_NAMES.contains(&t) => {}
                    Some(t) => {
                        return Err(format!(
                            "the table's entry for {at:?} names the type {t:?}, which is none of typeName's: {}",
                            TYPE_NAMES.join(", ")
                        ));
                    }
                    None => return Err(format!("the table's entry for {at:?} is not {WANT}")),
                }
            }
        }
        _ => return Err(format!("the table's entry for {at:?} is not {WANT}")),
    }
    if !map.get("shape").is_some_and(serde_json::Value::is_string) {
        return Err(format!("the table's entry for {at:?} is not {WANT}"));
    }
    for nested in ["items", "values"] {
        if let Some(e) = map.get(nested) {
            check_entry(e, &format!("{at}.{nested}"))?;
        }
    }
    if let Some(f) = map.get("fields") {
        check_fields(f, at)?;
    }
    Ok(())
}
