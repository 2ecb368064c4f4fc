//! Reading typed values from JSON with mappings kept mappings.
//!
//! serde's derived readers accept a struct written as a list, taking the list's items as the
//! fields in declaration order, and `serde_json`'s value reader offers them that: `env: [[A,
//! b]]` would read as `{name: A, value: b}`, a rule's `validate: [expr, message]` as its
//! expression and message. A manifest or rule file written that way means something else
//! than what it says, and the API server refuses such a manifest. [`MappingValue`] reads a
//! [`serde_json::Value`] as `serde_json` does, except that a struct must be a mapping: a list
//! where one is expected is `invalid type: sequence, expected …`, at its path (through
//! `serde_path_to_error`).

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, Unexpected, VariantAccess,
    Visitor,
};
use serde_json::Value;

/// Reads `T` from `value` through [`MappingValue`], with the path of a failure.
///
/// The reading is tried first without tracking the path (keeping it costs an allocation per
/// key visited, most of a small struct's reading); only a failure is read again to find where.
/// The result is the same either way: the reading is a pure function of `value`.
///
/// # Errors
/// The first error serde meets, with its path (`spec.env[0]`).
pub fn read_mapping<'a, T: de::Deserialize<'a>>(
    value: &'a Value,
) -> Result<T, serde_path_to_error::Error<Error>> {
    match T::deserialize(MappingValue(value)) {
        Ok(t) => Ok(t),
        Err(_) => serde_path_to_error::deserialize(MappingValue(value)),
    }
}

/// A borrowed JSON value as a [`Deserializer`] that reads structs only from mappings (see the
/// module docs). Everything else reads as `&serde_json::Value` reads it.
#[derive(Debug, Clone, Copy)]
pub struct MappingValue<'a>(pub &'a Value);

type Error = serde_json::Error;

impl<'de> IntoDeserializer<'de, Error> for MappingValue<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for MappingValue<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.iter().map(MappingValue));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Object(map) => {
                let mut entries =
                    MapDeserializer::new(map.iter().map(|(k, v)| (k.as_str(), MappingValue(v))));
                let out = visitor.visit_map(&mut entries)?;
                entries.end()?;
                Ok(out)
            }
            scalar => scalar.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(_) => Err(de::Error::invalid_type(Unexpected::Seq, &visitor)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(Variant {
                name: s,
                value: None,
            }),
            Value::Object(map) => match (map.len(), map.iter().next()) {
                (1, Some((k, v))) => visitor.visit_enum(Variant {
                    name: k,
                    value: Some(v),
                }),
                _ => Err(de::Error::invalid_value(
                    Unexpected::Map,
                    &"a mapping with a single key",
                )),
            },
            // As `serde_json` words it for any other value.
            other => other.deserialize_enum(name, variants, visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier
    }
}

/// An enum written as a string (a unit variant) or as a one-key mapping (the variant and its
/// value).
struct Variant<'a> {
    name: &'a str,
    value: Option<&'a Value>,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = Error;
    type Variant = VariantValue<'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Error> {
        let name = de::value::BorrowedStrDeserializer::<Error>::new(self.name);
        Ok((seed.deserialize(name)?, VariantValue(self.value)))
    }
}

/// The value of a variant written as a one-key mapping (`None` for one written as a string).
struct VariantValue<'a>(Option<&'a Value>);

impl<'de> VariantAccess<'de> for VariantValue<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(de::Error::invalid_type(unexpected(other), &"unit variant")),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, Error> {
        match self.0 {
            Some(v) => seed.deserialize(MappingValue(v)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Some(v @ Value::Array(_)) => MappingValue(v).deserialize_any(visitor),
            Some(other) => Err(de::Error::invalid_type(unexpected(other), &"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Some(v) => MappingValue(v).deserialize_struct("", fields, visitor),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

/// `invalid type: <value>, expected <expected>` in the words of [`plain_type_words`], for a
/// check of JSON types outside serde's readers (a schema's declared types).
pub fn type_error(value: &Value, expected: &str) -> String {
    plain_type_words(&<Error as de::Error>::invalid_type(unexpected(value), &expected).to_string())
}

/// How serde names a JSON value in `invalid type` messages.
fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (_, Some(i), _) => Unexpected::Signed(i),
            (_, _, Some(f)) => Unexpected::Float(f),
            _ => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// Removes from `value` the entry `path` names, its last segment a mapping key (the place of an
/// unknown field in a `serde_path_to_error` error); false when there is no such entry. A reader
/// that notes an unknown field and reads a copy without it again finds every unknown field, not
/// only the first.
pub fn remove_entry_at(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for seg in parents {
        let next = match seg {
            Segment::Seq { index } => at.get_mut(*index),
            Segment::Map { key } | Segment::Enum { variant: key } => at.get_mut(key.as_str()),
            Segment::Unknown => None,
        };
        let Some(next) = next else {
            return false;
        };
        at = next;
    }
    match (last, at.as_object_mut()) {
        (Segment::Map { key }, Some(map)) => map.shift_remove(key.as_str()).is_some(),
        _ => false,
    }
}

/// serde's type words in a rule author's: `sequence` → list, `map` → mapping, `struct X` (a
/// type of ours, not of the file) → a mapping. For the messages of a read through
/// [`MappingValue`] of a file whose author never sees our Rust types.
pub fn plain_type_words(message: &str) -> String {
    let mut out = message.to_string();
    for (from, to) in [
        ("invalid type: sequence", "invalid type: list"),
        ("invalid type: map,", "invalid type: mapping,"),
        ("invalid value: map,", "invalid value: mapping,"),
        ("expected struct variant ", "expected struct "),
        ("expected a sequence", "expected a list"),
    ] {
        out = out.replace(from, to);
    }
    if let Some(head) = out.strip_suffix("expected a map") {
        out = format!("{head}expected a mapping");
    }
    if let Some(i) = out.find("expected struct ") {
        let rest = &out[i + "expected struct ".len()..];
        let name_len = rest
            .find(|c: char| !c.is_alphanumeric() && c != '_' && c != ':')
            .unwrap_or(rest.len());
        out = format!("{}expected a mapping{}", &out[..i], &rest[name_len..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Env {
        name: String,
        value: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    enum Framework {
        Exec { command: Vec<String> },
        Mpi(Env),
        Plain,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Spec {
        env: Vec<Env>,
        framework: Option<Framework>,
    }

    fn read(v: serde_json::Value) -> Result<Spec, String> {
        serde_path_to_error::deserialize(MappingValue(&v))
            .map_err(|e| format!("{}: {}", e.path(), plain_type_words(&e.inner().to_string())))
    }

    #[test]
    fn a_struct_reads_from_a_mapping_only() {
        assert_eq!(
            read(
                json!({"env": [{"name": "A", "value": "b"}], "framework": {"exec": {"command": ["x"]}}})
            ),
            Ok(Spec {
                env: vec![Env {
                    name: "A".into(),
                    value: Some("b".into())
                }],
                framework: Some(Framework::Exec {
                    command: vec!["x".into()]
                }),
            })
        );
        assert_eq!(
            read(json!({"env": [["A", "b"]]})),
            Err("env[0]: invalid type: list, expected a mapping".to_string())
        );
        assert_eq!(
            read(json!({"env": [], "framework": {"exec": [["x"]]}})),
            Err("framework.exec: invalid type: list, expected a mapping".to_string())
        );
        assert_eq!(
            read(json!({"env": [], "framework": {"mpi": ["A", "b"]}})),
            Err("framework.mpi: invalid type: list, expected a mapping".to_string())
        );
        assert_eq!(
            read(json!(["x"])),
            Err(".: invalid type: list, expected a mapping".to_string())
        );
    }

    #[test]
    fn everything_else_reads_as_serde_json_reads_it() {
        assert_eq!(
            read(json!({"env": [], "framework": "plain"})).map(|s| s.framework),
            Ok(Some(Framework::Plain))
        );
        assert_eq!(
            read(json!({"env": [], "framework": null})).map(|s| s.framework),
            Ok(None)
        );
        assert_eq!(
            read(json!({"env": [{"name": 1}]})),
            Err("env[0].name: invalid type: integer `1`, expected a string".to_string())
        );
        assert_eq!(
            read(json!({"env": [], "framework": {"exec": {}, "mpi": {}}})),
            Err(
                "framework: invalid value: mapping, expected a mapping with a single key"
                    .to_string()
            )
        );
        assert_eq!(
            read(json!({"env": [], "framework": "nope"})),
            Err(
                "framework: unknown variant `nope`, expected one of `exec`, `mpi`, `plain`"
                    .to_string()
            )
        );
        assert_eq!(
            read(json!({"env": {}})),
            Err("env: invalid type: mapping, expected a list".to_string())
        );
    }
}
