//! CEL values that view a JSON document in place, and the conversions of CEL results.
//!
//! A bound document is never converted: [`view`] hands the interpreter a value that borrows it.
//! Scalars become the interpreter's own types (a string borrows its bytes); an object becomes a
//! [`JsonMap`], which looks a key up when it is selected, so `object.spec.replicas` touches
//! three nodes of the document whatever its size; an array becomes the interpreter's list of
//! views of its elements (one pointer each, built when the array is read), so every list
//! function of the library takes it as it takes a list literal.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::ExecutionError;
use cel::common::traits::{Container, Indexer, Iterable, Iterator as CelIterator, Sizer, Zeroer};
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
        Value::Array(a) => Box::new(CelList::from(a.iter().map(view).collect::<Vec<_>>())),
        Value::Object(m) => Box::new(JsonMap::new(m)),
    }
}

/// A JSON object seen as a CEL `map(string, dyn)`: keys are looked up in place; its keys are
/// only collected (as borrowed strings) when a comprehension iterates over them.
#[derive(Debug)]
pub(crate) struct JsonMap<'v> {
    map: &'v Map<String, Value>,
    keys: OnceLock<Vec<CelString<'v>>>,
}

impl<'v> JsonMap<'v> {
    fn new(map: &'v Map<String, Value>) -> JsonMap<'v> {
        JsonMap {
            map,
            keys: OnceLock::new(),
        }
    }

    fn lookup(&self, key: &dyn Val) -> Result<&'v Value, ExecutionError> {
        match key.downcast_ref::<CelString>() {
            Some(k) => self
                .map
                .get(k.inner())
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
            .is_some_and(|k| self.map.contains_key(k.inner())))
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

/// Copies a CEL value into JSON when JSON holds it exactly: null, bools, ints, finite
/// doubles, strings, and lists and string-keyed maps of those. `None` for anything else (a
/// uint, bytes, an optional, a type, a timestamp…), whose CEL type JSON would lose. Map keys
/// come out sorted.
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
            // Sorted: a CEL map has no order, and a copy must iterate the same way every run.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().collect())
        }
        _ => return None,
    })
}

fn no_value(v: &dyn Val) -> String {
    format!("a {} value cannot be used here", v.get_type().name())
}
