//! CEL values that view a JSON document in place, and the conversions of CEL results.
//!
//! A bound document is never converted: [`view`] hands the interpreter a value that borrows it.
//! Scalars become the interpreter's own types (a string borrows its bytes); an object becomes a
//! [`JsonMap`], which looks a key up when it is selected, so `object.spec.replicas` touches
//! three nodes of the document whatever its size; an array becomes a [`JsonList`], whose size
//! and elements are read in place, so `l[i]` and `size(l)` cost the same on a list of 30,000
//! entries as on a list of one (building a view of every element on each read made
//! `lists.range(size(l)).map(i, l[i])` quadratic). The library's list functions take it
//! through the list traits (`Iterable`, `Indexer`, `Sizer`, `Container`, `Adder`), as they take
//! a list literal.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::ExecutionError;
use cel::common::traits::{
    Adder, Container, Indexer, Iterable, Iterator as CelIterator, Sizer, Zeroer,
};
use cel::common::types::{
    self, CelBool, CelBytes, CelDouble, CelInt, CelList, CelNull, CelOptional, CelString, CelUInt,
    Kind, Type,
};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map as CelMap, OptionalValue};
use serde_json::{Map, Value};

use crate::expr::Cel;

/// `v` as a CEL value borrowing it.
pub(crate) fn view<'v>(v: &'v Value) -> Box<dyn Val + 'v> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            (None, None) => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(a) => Box::new(JsonList::new(a)),
        Value::Object(m) => Box::new(JsonMap::new(m)),
    }
}

/// How many entries a mapping may have for a key to be looked up by comparing the keys in turn:
/// below this, that is cheaper than hashing the key (the map's hasher is SipHash), and most
/// mappings of a manifest are this small.
const SCAN_ENTRIES: usize = 8;

/// The value of `key` in `map`, as `map.get(key)` gives it: a mapping of at most 8 entries (most
/// of a manifest's) is scanned, which costs less than hashing the key.
pub fn json_field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if map.len() <= SCAN_ENTRIES {
        map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        map.get(key)
    }
}

/// The value of `key` in `map` to change, as `map.get_mut(key)` gives it (scanned as
/// [`json_field`] is).
pub fn json_field_mut<'v>(map: &'v mut Map<String, Value>, key: &str) -> Option<&'v mut Value> {
    if map.len() <= SCAN_ENTRIES {
        map.iter_mut()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    } else {
        map.get_mut(key)
    }
}

/// A JSON object seen as a CEL `map(string, dyn)`: keys are looked up in place; its keys are
/// only collected (as borrowed strings) when a comprehension iterates over them.
#[derive(Debug)]
pub(crate) struct JsonMap<'v> {
    map: &'v Map<String, Value>,
    keys: OnceLock<Vec<CelString<'v>>>,
    node: NodeRef,
}

impl<'v> JsonMap<'v> {
    fn new(map: &'v Map<String, Value>) -> JsonMap<'v> {
        JsonMap {
            map,
            keys: OnceLock::new(),
            node: NodeRef::Map(std::ptr::from_ref(map) as usize),
        }
    }

    fn lookup(&self, key: &dyn Val) -> Result<&'v Value, ExecutionError> {
        match key.downcast_ref::<CelString>() {
            Some(k) => json_field(self.map, k.inner())
                .ok_or_else(|| ExecutionError::no_such_key(k.inner())),
            None => Err(ExecutionError::UnexpectedType {
                got: key.get_type().name().to_owned(),
                want: "map key".to_owned(),
            }),
        }
    }
}

impl<'v> Val for JsonMap<'v> {
    fn get_type(&self) -> &Type {
        &types::MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &types::MAP_TYPE
    }

    /// The node viewed, so a variable holding this value can keep its place ([`json_node`]).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(&self.node)
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    /// Equal to any map with the same keys and equal values.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::Map {
            return false;
        }
        let (Some(size), Some(index)) = (other.as_sizer(), other.as_indexer()) else {
            return false;
        };
        usize::try_from(*size.size().inner()) == Ok(self.map.len())
            && self.map.iter().all(|(k, v)| {
                index
                    .get(&CelString::from(k.as_str()))
                    .is_ok_and(|o| view(v).equals(o.as_ref()))
            })
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(JsonMap::new(self.map))
    }
}

impl<'v> Indexer for JsonMap<'v> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.lookup(idx).map(|v| CowVal::Owned(view(v)))
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.lookup(idx).map(view)
    }
}

impl<'v> Iterable for JsonMap<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn CelIterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        let keys = self.keys.get_or_init(|| {
            self.map
                .keys()
                .map(|k| CelString::from(k.as_str()))
                .collect()
        });
        Box::new(Keys(keys.iter()))
    }
}

/// The keys of a [`JsonMap`], lent one by one.
struct Keys<'b, 'v>(std::slice::Iter<'b, CelString<'v>>);

impl<'b, 'v: 'w, 'w> CelIterator<'b, 'w> for Keys<'b, 'v> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        self.0.next().map(|k| k as &(dyn Val + 'w))
    }
}

impl Container for JsonMap<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(value
            .downcast_ref::<CelString>()
            .is_some_and(|k| json_field(self.map, k.inner()).is_some()))
    }
}

impl Sizer for JsonMap<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(i64::try_from(self.map.len()).unwrap_or(i64::MAX))
    }
}

impl Zeroer for JsonMap<'_> {
    fn is_zero_value(&self) -> bool {
        self.map.is_empty()
    }
}

/// How many elements of a [`JsonList`] are viewed at a time when it is iterated.
const CHUNK: usize = 64;

/// A JSON array seen as a CEL `list(dyn)`: `size` and `l[i]` read the array in place; an
/// iteration views the elements it reaches, [`CHUNK`] at a time, and keeps those views for
/// the list's life (an iterator lends its elements from the list), so a comprehension that
/// stops at the first element views at most [`CHUNK`] of them.
#[derive(Debug)]
pub(crate) struct JsonList<'v> {
    items: &'v [Value],
    chunks: OnceLock<Box<[Chunk<'v>]>>,
    node: NodeRef,
}

/// The views of [`CHUNK`] consecutive elements of a [`JsonList`], made when first reached.
type Chunk<'v> = OnceLock<Vec<Box<dyn Val + 'v>>>;

impl<'v> JsonList<'v> {
    fn new(items: &'v [Value]) -> JsonList<'v> {
        JsonList {
            items,
            chunks: OnceLock::new(),
            node: NodeRef::List(items.as_ptr() as usize, items.len()),
        }
    }

    /// The view of element `i` (`i` below the length), kept by the list.
    fn viewed(&self, i: usize) -> Option<&(dyn Val + 'v)> {
        let chunks = self.chunks.get_or_init(|| {
            (0..self.items.len().div_ceil(CHUNK))
                .map(|_| OnceLock::new())
                .collect()
        });
        let chunk = chunks.get(i / CHUNK)?.get_or_init(|| {
            let start = i / CHUNK * CHUNK;
            self.items[start..self.items.len().min(start + CHUNK)]
                .iter()
                .map(view)
                .collect()
        });
        chunk.get(i % CHUNK).map(|v| v.as_ref())
    }

    /// The element `idx` names, as CEL indexes a list (an int, a uint, a whole double).
    fn lookup(&self, idx: &dyn Val) -> Result<&'v Value, ExecutionError> {
        let out_of_bounds = |i: i128| {
            ExecutionError::IndexOutOfBounds(match i64::try_from(i) {
                Ok(i) => cel::Value::Int(i),
                Err(_) => cel::Value::Null,
            })
        };
        let unexpected = || ExecutionError::UnexpectedType {
            got: val_type_name(idx).to_owned(),
            want: "int".to_owned(),
        };
        let i: i128 = match idx.get_type().kind() {
            Kind::Int => idx.downcast_ref::<CelInt>().map(|i| i128::from(*i.inner())),
            Kind::UInt => idx
                .downcast_ref::<CelUInt>()
                .map(|u| i128::from(*u.inner())),
            Kind::Double => {
                let d = *idx
                    .downcast_ref::<CelDouble>()
                    .ok_or_else(unexpected)?
                    .inner();
                // A whole double indexes like an int; a fractional one indexes nothing.
                #[allow(clippy::cast_possible_truncation)]
                let whole = d as i64;
                #[allow(clippy::cast_precision_loss)]
                if whole as f64 != d {
                    return Err(ExecutionError::UnsupportedIndex(
                        cel::Value::Float(d),
                        to_cel(self).unwrap_or(cel::Value::Null),
                    ));
                }
                Some(i128::from(whole))
            }
            _ => None,
        }
        .ok_or_else(unexpected)?;
        usize::try_from(i)
            .ok()
            .and_then(|u| self.items.get(u))
            .ok_or_else(|| out_of_bounds(i))
    }
}

impl<'v> Val for JsonList<'v> {
    fn get_type(&self) -> &Type {
        &types::LIST_TYPE
    }

    fn cel_type() -> &'static Type {
        &types::LIST_TYPE
    }

    /// The node viewed, so a variable holding this value can keep its place ([`json_node`]).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(&self.node)
    }

    fn as_adder<'b, 'w>(&'b self) -> Option<&'b (dyn Adder + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    /// Equal to any list of the same length whose elements are equal, in order.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::List {
            return false;
        }
        let (Some(size), Some(items)) = (other.as_sizer(), other.as_iterable()) else {
            return false;
        };
        if usize::try_from(*size.size().inner()) != Ok(self.items.len()) {
            return false;
        }
        let mut theirs = items.iter();
        self.items
            .iter()
            .all(|mine| theirs.next().is_some_and(|o| view(mine).equals(o)))
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(JsonList::new(self.items))
    }
}

impl Adder for JsonList<'_> {
    fn add<'b, 'w>(&'b self, rhs: &(dyn Val + 'w)) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        let mut theirs = rhs
            .as_iterable()
            .ok_or_else(|| {
                ExecutionError::UnsupportedBinaryOperator(
                    "add",
                    cel::Value::Null,
                    cel::Value::try_from(rhs).unwrap_or(cel::Value::Null),
                )
            })?
            .iter();
        let mut list: Vec<Box<dyn Val + 'w>> = self.items.iter().map(view).collect();
        while let Some(other) = theirs.next() {
            list.push(other.clone_as_boxed());
        }
        Ok(CowVal::owned(CelList::from(list)))
    }
}

impl Container for JsonList<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(self.items.iter().any(|mine| view(mine).equals(value)))
    }
}

impl<'v> Indexer for JsonList<'v> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.lookup(idx).map(|v| CowVal::Owned(view(v)))
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.lookup(idx).map(view)
    }
}

impl<'v> Iterable for JsonList<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn CelIterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        Box::new(Elements { list: self, at: 0 })
    }
}

/// The elements of a [`JsonList`], lent one by one.
struct Elements<'b, 'v> {
    list: &'b JsonList<'v>,
    at: usize,
}

impl<'b, 'v: 'w, 'w> CelIterator<'b, 'w> for Elements<'b, 'v> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        if self.at >= self.list.items.len() {
            return None;
        }
        let item = self.list.viewed(self.at)?;
        self.at += 1;
        Some(item)
    }
}

impl Sizer for JsonList<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(i64::try_from(self.items.len()).unwrap_or(i64::MAX))
    }
}

impl Zeroer for JsonList<'_> {
    fn is_zero_value(&self) -> bool {
        self.items.is_empty()
    }
}

/// A short type name for messages (`list`, `map`, `int`, …) of any CEL value.
pub(crate) fn val_type_name(v: &dyn Val) -> &'static str {
    match v.get_type().kind() {
        Kind::List => "list",
        Kind::Map => "map",
        Kind::Int => "int",
        Kind::UInt => "uint",
        Kind::Double => "double",
        Kind::String => "string",
        Kind::Bytes => "bytes",
        Kind::Boolean => "bool",
        Kind::NullType => "null",
        _ => "opaque",
    }
}

/// Copies a CEL value (borrowed views included) into an owned [`Cel`] value.
///
/// # Errors
/// A value that has no such form (a type value, a value of a foreign type), in words.
pub(crate) fn to_cel(v: &dyn Val) -> Result<Cel, String> {
    let scalar = |found: Option<Cel>| found.ok_or_else(|| no_value(v));
    Ok(match v.get_type().kind() {
        Kind::Boolean => scalar(v.downcast_ref::<CelBool>().map(|b| Cel::Bool(*b.inner())))?,
        Kind::Int => scalar(v.downcast_ref::<CelInt>().map(|i| Cel::Int(*i.inner())))?,
        Kind::UInt => scalar(v.downcast_ref::<CelUInt>().map(|u| Cel::UInt(*u.inner())))?,
        Kind::Double => scalar(
            v.downcast_ref::<CelDouble>()
                .map(|d| Cel::Float(*d.inner())),
        )?,
        Kind::String => scalar(
            v.downcast_ref::<CelString>()
                .map(|s| Cel::String(Arc::new(s.inner().to_string()))),
        )?,
        Kind::Bytes => scalar(
            v.downcast_ref::<CelBytes>()
                .map(|b| Cel::Bytes(Arc::new(b.inner().to_vec()))),
        )?,
        Kind::NullType => Cel::Null,
        Kind::List => {
            let items = v.as_iterable().ok_or_else(|| no_value(v))?;
            let mut out = Vec::new();
            let mut it = items.iter();
            while let Some(x) = it.next() {
                out.push(to_cel(x)?);
            }
            Cel::List(Arc::new(out))
        }
        Kind::Map => {
            let (Some(keys), Some(index)) = (v.as_iterable(), v.as_indexer()) else {
                return Err(no_value(v));
            };
            let mut out = HashMap::new();
            let mut it = keys.iter();
            while let Some(k) = it.next() {
                let value = index.get(k).map_err(|e| e.to_string())?;
                let key = match to_cel(k)? {
                    Cel::String(s) => Key::String(s),
                    Cel::Int(i) => Key::Int(i),
                    Cel::UInt(u) => Key::Uint(u),
                    Cel::Bool(b) => Key::Bool(b),
                    _ => return Err(no_value(v)),
                };
                out.insert(key, to_cel(value.as_ref())?);
            }
            Cel::Map(CelMap { map: Arc::new(out) })
        }
        // An optional is copied with what it holds, which may view a document.
        _ => match v.downcast_ref::<CelOptional>() {
            Some(opt) => Cel::Opaque(Arc::new(match opt.option() {
                Some(held) => OptionalValue::of(to_cel(held)?),
                None => OptionalValue::none(),
            })),
            None => Cel::try_from(v).map_err(|_| no_value(v))?,
        },
    })
}

/// Which node of a JSON document a view of a mapping or list borrows, by address: a view
/// reports it through `Val::as_any` (the only use the interpreter makes of `as_any` is
/// downcasting, and nothing downcasts to this type but [`json_node`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeRef {
    /// The mapping at this address.
    Map(usize),
    /// The list whose items start at this address, this many of them (every empty list is
    /// the same value, so any empty list is its place).
    List(usize, usize),
}

impl NodeRef {
    /// True when `v` is the node.
    pub(crate) fn is(self, v: &Value) -> bool {
        match (self, v) {
            (NodeRef::Map(p), Value::Object(m)) => p == std::ptr::from_ref(m) as usize,
            (NodeRef::List(p, len), Value::Array(a)) => {
                a.len() == len && (len == 0 || p == a.as_ptr() as usize)
            }
            _ => false,
        }
    }
}

/// The node `v` views in place, when it is a view of a JSON mapping or list ([`view`]).
pub(crate) fn json_node(v: &dyn Val) -> Option<NodeRef> {
    v.as_any()?.downcast_ref::<NodeRef>().copied()
}

/// Copies a CEL value into JSON when JSON holds it exactly: null, bools, ints, finite
/// doubles, strings, and lists and string-keyed maps of those. `None` for anything else (a
/// uint, bytes, an optional, a type, a timestamp…), whose CEL type JSON would lose. A map read
/// from a document keeps the document's key order (as a variable that keeps its place does);
/// the keys of a map CEL built come out sorted.
pub(crate) fn to_json(v: &dyn Val) -> Option<Value> {
    Some(match v.get_type().kind() {
        Kind::NullType => Value::Null,
        Kind::Boolean => Value::Bool(*v.downcast_ref::<CelBool>()?.inner()),
        Kind::Int => Value::from(*v.downcast_ref::<CelInt>()?.inner()),
        Kind::Double => Value::Number(serde_json::Number::from_f64(
            *v.downcast_ref::<CelDouble>()?.inner(),
        )?),
        Kind::String => Value::String(v.downcast_ref::<CelString>()?.inner().to_string()),
        Kind::List => {
            let mut out = Vec::new();
            let mut it = v.as_iterable()?.iter();
            while let Some(x) = it.next() {
                out.push(to_json(x)?);
            }
            Value::Array(out)
        }
        Kind::Map => {
            let index = v.as_indexer()?;
            let mut entries = Vec::new();
            let mut it = v.as_iterable()?.iter();
            while let Some(k) = it.next() {
                let key = k.downcast_ref::<CelString>()?.inner().to_string();
                let value = index.get(k).ok()?;
                entries.push((key, to_json(value.as_ref())?));
            }
            // A map CEL built has no order, and a copy must iterate the same way every run.
            if json_node(v).is_none() {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            Value::Object(entries.into_iter().collect())
        }
        _ => return None,
    })
}

fn no_value(v: &dyn Val) -> String {
    format!("a {} value cannot be used here", v.get_type().name())
}

#[cfg(test)]
mod tests {
    use crate::expr::{Expr, Scope};
    use serde_json::json;

    fn eval(text: &str, scope: &Scope) -> Result<serde_json::Value, String> {
        Expr::compile(text)
            .expect("compiles")
            .eval_json(scope)
            .map_err(|e| e.to_string())
    }

    fn doc() -> Scope {
        let mut s = Scope::new();
        s.bind(
            "object",
            &json!({"l": ["a", "b", {"k": [1, 2]}], "n": (0..200).collect::<Vec<_>>(), "e": []}),
        );
        s
    }

    #[test]
    fn a_document_array_is_a_list_read_in_place() {
        let s = doc();
        for (text, want) in [
            ("size(object.l)", json!(3)),
            ("object.l.size()", json!(3)),
            ("object.l[1]", json!("b")),
            ("object.l[1u]", json!("b")),
            ("object.l[2.0].k[1]", json!(2)),
            ("object.l[?5].orValue('none')", json!("none")),
            ("object.l == ['a', 'b', {'k': [1, 2]}]", json!(true)),
            ("['a', 'b', {'k': [1, 2]}] == object.l", json!(true)),
            ("object.l == ['a', 'b']", json!(false)),
            ("object.l[2].k == [1, 2]", json!(true)),
            ("'b' in object.l", json!(true)),
            ("{'k': [1, 2]} in object.l", json!(true)),
            ("'z' in object.l", json!(false)),
            ("object.l[2] in [{'k': [1, 2]}]", json!(true)),
            ("object.l[2].k in [[0], [1, 2]]", json!(true)),
            ("object.l in [['a', 'b', {'k': [1, 2]}]]", json!(true)),
            ("object.l[2] in [{'k': [2, 1]}]", json!(false)),
            ("'l' in object", json!(true)),
            ("'k' in object.l[2]", json!(true)),
            ("1 in {1: 'a'}", json!(true)),
            ("object.l + ['c']", json!(["a", "b", {"k": [1, 2]}, "c"])),
            ("['c'] + object.e + object.l[2].k", json!(["c", 1, 2])),
            ("object.n.filter(x, x % 50 == 0)", json!([0, 50, 100, 150])),
            ("object.n.exists(x, x == 199)", json!(true)),
            ("object.n.map(x, x * 2)[199]", json!(398)),
            (
                "lists.range(size(object.n)).all(i, object.n[i] == i)",
                json!(true),
            ),
            ("[object.n, object.l].flatten().size()", json!(203)),
            (
                "object.l.filter(x, type(x) == string).join('-')",
                json!("a-b"),
            ),
            ("object.e.all(x, false)", json!(true)),
        ] {
            assert_eq!(eval(text, &s), Ok(want), "{text}");
        }
    }

    #[test]
    fn indexing_and_sizing_view_no_other_element_and_iterating_views_what_it_reaches() {
        use cel::common::traits::{Indexer, Iterable, Sizer};
        use cel::common::types::CelInt;
        let items: Vec<serde_json::Value> = (0..1000).map(|i| json!(i)).collect();
        let list = super::JsonList::new(&items);
        assert_eq!(*list.size().inner(), 1000);
        let got = list.get(&CelInt::from(999)).expect("in bounds");
        assert_eq!(got.downcast_ref::<CelInt>(), Some(&CelInt::from(999)));
        assert!(list.chunks.get().is_none(), "nothing viewed");
        let mut it = list.iter();
        assert!(it.next().is_some());
        let chunks = list.chunks.get().expect("viewing started");
        let viewed: Vec<usize> = chunks.iter().map(|c| c.get().map_or(0, Vec::len)).collect();
        assert_eq!(viewed.iter().sum::<usize>(), super::CHUNK);
        assert_eq!(viewed.len(), 1000usize.div_ceil(super::CHUNK));
    }

    #[test]
    fn a_document_array_refuses_indexes_outside_it() {
        let s = doc();
        for (text, want) in [
            ("object.l[3]", "index 3 is out of bounds"),
            ("object.l[-1]", "index -1 is out of bounds"),
            (
                "object.l[1.5]",
                r#"1.5 (double) cannot index ["a", "b", {"k": [1, 2]}] (list)"#,
            ),
            (
                "object.l['a']",
                "operator '[]' does not take list and string",
            ),
        ] {
            assert_eq!(eval(text, &s), Err(want.to_string()), "{text}");
            // The same words as for a list literal.
            let literal = text.replace("object.l", "['a', 'b', {'k': [1, 2]}]");
            assert_eq!(eval(&literal, &s), Err(want.to_string()), "{literal}");
        }
    }
}
