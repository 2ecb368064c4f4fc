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
    let refused = |e: String| ExecutionError::function_error(NAME, e);
    let Some(index) = spec.as_indexer().filter(|_| val_type_name(spec) == "map") else {
        return Err(malformed(table, WANT));
    };
    let field = |name: &str| index.get(&CelString::from(name)).ok();
    // A misspelt key ('item') would check nothing below it, silently.
    let mut unknown_key = None;
    if let Some(keys) = spec.as_iterable() {
        let mut it = keys.iter();
        while let Some(k) = it.next() {
            match k.downcast_ref::<CelString>() {
                Some(k) if ENTRY_KEYS.contains(&k.inner()) => {}
                Some(k) => unknown_key = Some(format!("{:?}", k.inner())),
                None => {
                    unknown_key = Some(
                        crate::view::to_json(k).map_or_else(|| "?".to_string(), |v| v.to_string()),
                    );
                }
            }
            if unknown_key.is_some() {
                break;
            }
        }
    }
    let types_val = field("types");
    let types: Option<Vec<Option<&str>>> = types_val
        .as_ref()
        .filter(|t| val_type_name(t.as_ref()) == "list")
        .and_then(|t| t.as_ref().as_iterable())
        .map(|list| {
            let mut out = Vec::new();
            let mut it = list.iter();
            while let Some(x) = it.next() {
                out.push(x.downcast_ref::<CelString>().map(CelString::inner));
            }
            out
        });
    let shape_val = field("shape");
    let shape = shape_val
        .as_ref()
        .and_then(|s| s.as_ref().downcast_ref::<CelString>())
        .map(CelString::inner);
    judge(table, unknown_key, types.as_deref(), shape.is_some()).map_err(refused)?;
    Ok(Entry {
        types: types
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect(),
        shape: shape.unwrap_or_default().to_string(),
        items: field("items"),
        values: field("values"),
        fields: field("fields"),
    })
}

/// What an entry must be, in an error's words.
const WANT: &str = "a map with 'types' (a list of type names) and 'shape' (a string), \
                    and optionally 'items', 'values' or 'fields'";

/// Judges an entry for the value at `at` (a table read at run time and a literal table read
/// when the rules load, alike): the first key that is none of [`ENTRY_KEYS`] (as written),
/// its `types` (`None` when not a list; an item that is not a string as `None`), whether its
/// `shape` is a string.
fn judge(
    at: &str,
    unknown_key: Option<String>,
    types: Option<&[Option<&str>]>,
    shape: bool,
) -> Result<(), String> {
    if let Some(key) = unknown_key {
        return Err(format!(
            "the table's entry for {at:?} has the key {key}, which is none of {}",
            ENTRY_KEYS.join(", ")
        ));
    }
    let Some(types) = types.filter(|t| !t.is_empty()) else {
        return Err(format!("the table's entry for {at:?} is not {WANT}"));
    };
    for t in types {
        match t {
            Some(t) if TYPE_NAMES.contains(t) => {}
            Some(t) => {
                return Err(format!(
                    "the table's entry for {at:?} names the type {t:?}, which is none of typeName's: {}",
                    TYPE_NAMES.join(", ")
                ));
            }
            None => return Err(format!("the table's entry for {at:?} is not {WANT}")),
        }
    }
    if !shape {
        return Err(format!("the table's entry for {at:?} is not {WANT}"));
    }
    Ok(())
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
    let serde_json::Value::Object(map) = entry else {
        return Err(format!("the table's entry for {at:?} is not {WANT}"));
    };
    let types: Option<Vec<Option<&str>>> = map
        .get("types")
        .and_then(serde_json::Value::as_array)
        .map(|types| types.iter().map(serde_json::Value::as_str).collect());
    judge(
        at,
        map.keys()
            .find(|k| !ENTRY_KEYS.contains(&k.as_str()))
            .map(|k| format!("{k:?}")),
        types.as_deref(),
        map.get("shape").is_some_and(serde_json::Value::is_string),
    )?;
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
