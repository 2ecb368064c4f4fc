//! Reading a nodes file (`--nodes-file`, a suite's `context.nodesFile`): the one reader the
//! command line and the rule test suites share.
//!
//! A real `kubectl get nodes -o yaml` is large (managedFields, images, conditions, annotations:
//! tens of KiB per Node) and usually one YAML document (a NodeList). It is read into only the
//! fields nodes are made of (kind, `metadata.name`, `metadata.labels`, `spec`,
//! `status.allocatable`); everything else is skipped as it is parsed, so memory stays that of
//! the text and the fields kept. The YAML budgets scale with the file's size
//! ([`Limits::scale_for`](nvcre_engine::limits::Limits::scale_for)), and the file itself is
//! limited to [`Limits::nodes_file_bytes`](nvcre_engine::limits::Limits::nodes_file_bytes),
//! checked while it is read.

use std::fmt;
use std::marker::PhantomData;

use nvcre_engine::limits::read_text_limited;
use nvcre_engine::{FieldPath, Located, Pos, Source, parse_documents_as};

/// The flag that raises the nodes file's size limit.
const FLAG: &str = "--max-nodes-file-bytes";
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};

use crate::api::GPU_RESOURCE;
use crate::nodes::{DOCUMENT_FIELD, Node, NodeError, nodes_from_documents};
use crate::placement::{QuantityError, gpu_count, gpu_count_problem, parse_quantity};

/// A mapping read as `T` (or a list, when `T` is a list); a value of another shape kept as it is,
/// so the node reader can report it in its own words.
enum Lean<T> {
    Typed(T),
    Other(Value),
}

struct LeanVisitor<T>(PhantomData<T>, bool);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LeanVisitor<T> {
    type Value = Lean<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lean<T>, A::Error> {
        if self.1 {
            Value::deserialize(MapAccessDeserializer::new(map)).map(Lean::Other)
        } else {
            T::deserialize(MapAccessDeserializer::new(map)).map(Lean::Typed)
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lean<T>, A::Error> {
        if self.1 {
            T::deserialize(SeqAccessDeserializer::new(seq)).map(Lean::Typed)
        } else {
            Value::deserialize(SeqAccessDeserializer::new(seq)).map(Lean::Other)
        }
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Lean<T>, E> {
        Ok(Lean::Other(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Lean<T>, E> {
        Ok(Lean::Other(json!(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lean<T>, E> {
        Ok(Lean::Other(json!(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Lean<T>, E> {
        Ok(Lean::Other(json!(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Lean<T>, E> {
        Ok(Lean::Other(Value::String(v.to_string())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Lean<T>, E> {
        Ok(Lean::Other(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Lean<T>, E> {
        Ok(Lean::Other(Value::Null))
    }
}

/// A `Lean<T>` for a mapping `T`.
struct LeanMap<T>(Lean<T>);
/// A `Lean<T>` for a list `T`.
struct LeanSeq<T>(Lean<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LeanMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LeanVisitor(PhantomData, false))
            .map(LeanMap)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LeanSeq<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LeanVisitor(PhantomData, true))
            .map(LeanSeq)
    }
}

/// The fields of `metadata` a node is made of; the others (managedFields, annotations…) are
/// skipped as they are parsed.
#[derive(serde::Deserialize)]
struct LeanMeta {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    labels: Option<Value>,
}

/// The fields of `status` a node is made of (`capacity` is read only to be checked).
#[derive(serde::Deserialize)]
struct LeanStatus {
    #[serde(default)]
    allocatable: Option<LeanMap<Quantities>>,
    #[serde(default)]
    capacity: Option<LeanMap<Quantities>>,
}

/// A resource list (`status.allocatable`, `status.capacity`), each value with where it was
/// written, so a count that cannot be read is reported at its line.
struct Quantities(Vec<(String, Located<Value>)>);

impl<'de> Deserialize<'de> for Quantities {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Quantities;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of resource quantities")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Quantities, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    out.push((k, map.next_value::<Located<Value>>()?));
                }
                Ok(Quantities(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A problem at a place of the nodes file: where, and the message after the file name.
type Problem = (Pos, String);

impl Quantities {
    /// The list as JSON, after checking every value at `at`: the GPU count must be a whole
    /// number from 0 to `i64::MAX`; no quantity may be too large to represent.
    fn checked(self, at: &FieldPath) -> Result<Value, Problem> {
        let mut out = Map::new();
        for (name, v) in self.0 {
            let path = at.clone().key(name.clone());
            let problem = if name == GPU_RESOURCE {
                gpu_count(&v.value)
                    .err()
                    .map(|e| gpu_count_problem(&v.value, e))
            } else {
                too_large(&v.value).then(|| {
                    format!(
                        "{} {}: a resource quantity is at most 9223372036854775807 in its base unit",
                        written(&v.value),
                        QuantityError::TooLarge
                    )
                })
            };
            if let Some(p) = problem {
                return Err((v.pos, format!("{path}: {p}")));
            }
            out.insert(name, v.value);
        }
        Ok(Value::Object(out))
    }
}

/// A value as written, for messages.
fn written(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// True when `v` is a quantity (or number) beyond what an `i64` holds.
fn too_large(v: &Value) -> bool {
    match v {
        Value::String(s) => parse_quantity(s) == Err(QuantityError::TooLarge),
        Value::Number(n) => {
            n.as_i64().is_none()
                && (n.as_u64().is_some()
                    || n.as_f64()
                        .is_some_and(|f| f.abs() >= 9_223_372_036_854_775_808.0))
        }
        _ => false,
    }
}

/// A Node, NodeList or List document (or a list item), reduced to what nodes are made of.
#[derive(serde::Deserialize)]
struct LeanDoc {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default)]
    metadata: Option<LeanMap<LeanMeta>>,
    #[serde(default)]
    spec: Option<Value>,
    #[serde(default)]
    status: Option<LeanMap<LeanStatus>>,
    #[serde(default)]
    items: Option<LeanSeq<Vec<LeanMap<LeanDoc>>>>,
}

impl LeanDoc {
    /// The reduced document (at `at`) as JSON, for [`nodes_from_documents`].
    ///
    /// # Errors
    /// A resource quantity that cannot be read, with its position.
    fn into_value(self, at: &FieldPath) -> Result<Value, Problem> {
        let mut out = Map::new();
        if let Some(kind) = self.kind {
            out.insert("kind".into(), kind);
        }
        match self.metadata.map(|m| m.0) {
            Some(Lean::Typed(m)) => {
                let mut meta = Map::new();
                if let Some(name) = m.name {
                    meta.insert("name".into(), name);
                }
                if let Some(labels) = m.labels {
                    meta.insert("labels".into(), labels);
                }
                out.insert("metadata".into(), Value::Object(meta));
            }
            Some(Lean::Other(v)) => {
                out.insert("metadata".into(), v);
            }
            None => {}
        }
        if let Some(spec) = self.spec {
            out.insert("spec".into(), spec);
        }
        match self.status.map(|s| s.0) {
            Some(Lean::Typed(s)) => {
                let mut status = Map::new();
                let here = at.clone().key("status");
                match s.allocatable.map(|a| a.0) {
                    Some(Lean::Typed(q)) => {
                        status.insert(
                            "allocatable".into(),
                            q.checked(&here.clone().key("allocatable"))?,
                        );
                    }
                    Some(Lean::Other(v)) => {
                        status.insert("allocatable".into(), v);
                    }
                    None => {}
                }
                if let Some(Lean::Typed(q)) = s.capacity.map(|c| c.0) {
                    q.checked(&here.key("capacity"))?;
                }
                out.insert("status".into(), Value::Object(status));
            }
            Some(Lean::Other(v)) => {
                out.insert("status".into(), v);
            }
            None => {}
        }
        match self.items.map(|i| i.0) {
            Some(Lean::Typed(items)) => {
                let items = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| lean_value(item.0, &at.clone().key("items").index(i)))
                    .collect::<Result<_, _>>()?;
                out.insert("items".into(), Value::Array(items));
            }
            Some(Lean::Other(v)) => {
                out.insert("items".into(), v);
            }
            None => {}
        }
        Ok(Value::Object(out))
    }
}

fn lean_value(doc: Lean<LeanDoc>, at: &FieldPath) -> Result<Value, Problem> {
    match doc {
        Lean::Typed(d) => d.into_value(at),
        Lean::Other(v) => Ok(v),
    }
}

/// Why a nodes file cannot be used: the message the command line prints, and where in the file
/// the problem is, when that is known (the message then leads with it: `<path>:<line>:<col>: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesFileError {
    /// The whole message, led by the file (and the position, when known).
    pub message: String,
    /// Where in the file, when known.
    pub pos: Option<Pos>,
}

impl From<String> for NodesFileError {
    fn from(message: String) -> Self {
        NodesFileError { message, pos: None }
    }
}

impl std::fmt::Display for NodesFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NodesFileError {}

/// Reads a nodes file, `-` for standard input: a v1 NodeList and/or Node documents.
///
/// # Errors
/// [`NodesFileError`], whose message is what the command line prints: `reading <path>:
/// <cause>` for a file that cannot be read, a file above the size limit, the YAML error (with
/// file, line and column), or `<path>:<line>:<col>: <problem>` for documents that are not nodes.
pub fn read_nodes(path: &str) -> Result<Vec<Node>, NodesFileError> {
    let limits = nvcre_engine::limits::limits();
    let (name, text) = if path == "-" {
        let text = read_text_limited(
            std::io::stdin().lock(),
            "<stdin>",
            limits.nodes_file_bytes,
            FLAG,
        )?;
        ("<stdin>", text)
    } else {
        let file = std::fs::File::open(path).map_err(|e| {
            format!(
                "reading {path}: {}",
                nvcre_engine::limits::io_error_text(&e)
            )
        })?;
        (
            path,
            read_text_limited(file, path, limits.nodes_file_bytes, FLAG)?,
        )
    };
    let scale = limits.scale_for(text.len());
    let source = Source::new(name, text);
    let docs: Vec<Option<LeanMap<LeanDoc>>> =
        parse_documents_as(&source, scale).map_err(|e| NodesFileError {
            pos: match &e {
                nvcre_engine::Error::Yaml { pos, .. } => *pos,
                _ => None,
            },
            message: e.to_string(),
        })?;
    // The index in the file of each document read (empty documents are not nodes).
    let mut indices = Vec::with_capacity(docs.len());
    let values: Vec<Value> = docs
        .into_iter()
        .enumerate()
        .filter_map(|(i, d)| d.map(|d| (i, d)))
        .map(|(i, d)| {
            indices.push(i);
            lean_value(d.0, &FieldPath::root())
        })
        .collect::<Result<_, _>>()
        .map_err(|(pos, message)| NodesFileError {
            message: format!("{name}:{pos}: {message}"),
            pos: Some(pos),
        })?;
    nodes_from_documents(&values).map_err(|mut e| {
        // The reader above keeps no positions: on an error the file is parsed again with them
        // (refused for a file above a limit of the spanned parse: the message goes without).
        let spanned = nvcre_engine::parse_documents_within(&source, &limits).unwrap_or_default();
        let at = |index: usize, field: &str| {
            indices
                .get(index)
                .and_then(|&i| position(&spanned, i, field))
        };
        if let NodeError::Duplicate {
            first_index,
            first_field,
            first_at,
            ..
        } = &mut e
        {
            *first_at = at(*first_index, first_field).map(|pos| format!("{name}:{pos}"));
        }
        let (index, field) = e.location();
        let pos = at(index, field);
        NodesFileError {
            message: match pos {
                Some(pos) => format!("{name}:{pos}: {e}"),
                None => format!("{path}: {e}"),
            },
            pos,
        }
    })
}

/// Where `field` (as a [`NodeError`] writes it) of the document at `index` in the file is
/// written, in `docs` (the file parsed with spans). `None` when the field is not found.
fn position(docs: &[nvcre_engine::Document], index: usize, field: &str) -> Option<Pos> {
    let path = if field == DOCUMENT_FIELD {
        FieldPath::root()
    } else {
        FieldPath::parse(field).ok()?
    };
    docs.iter().find(|d| d.index == index)?.spans.lookup(&path)
}
