//! Source text and documents with spans kept from the first byte.
//!
//! A [`Source`] is one named text (a file or stdin). [`parse_documents`] reads it as a YAML (or
//! JSON) multi-document stream and returns one [`Document`] per stream document: the plain JSON
//! value plus a [`SpanIndex`] from every field path to its line:column. Plain YAML is read
//! straight from the parser's events (`events`); any other text, and every error, by
//! `serde-saphyr`, which reads plain YAML to the same documents.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

use crate::error::Error;
use crate::path::FieldPath;

mod events;
mod spans;

use spans::NodeSpan;
pub use spans::SpanIndex;

/// Largest input accepted by [`parse_documents`], in bytes (64 MiB). Larger inputs are refused
/// with [`Error::TooLarge`] before parsing starts.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024 * 1024;

/// One named input text: a file, a rule pack or standard input (`<stdin>`). Two sources are
/// equal when their names and texts are.
#[derive(Debug, Clone)]
pub struct Source {
    /// Display name used in findings and errors (a path as given, or `<stdin>`).
    pub name: String,
    /// The full text: borrowed for a file built into the program (the embedded rules, which
    /// are then not copied at every start), owned for one read at run time.
    pub text: Cow<'static, str>,
    /// Byte offset of each line's start, found on the first [`Source::line_text`].
    line_starts: std::sync::OnceLock<Vec<usize>>,
}

impl PartialEq for Source {
    fn eq(&self, other: &Source) -> bool {
        self.name == other.name && self.text == other.text
    }
}

impl Eq for Source {}

impl Source {
    /// Wraps a name and text into a shareable source.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Arc<Source> {
        Source::of(name.into(), Cow::Owned(text.into()))
    }

    /// [`Source::new`] of a text built into the program, which is borrowed, not copied.
    pub fn from_static(name: impl Into<String>, text: &'static str) -> Arc<Source> {
        Source::of(name.into(), Cow::Borrowed(text))
    }

    fn of(name: String, text: Cow<'static, str>) -> Arc<Source> {
        Arc::new(Source {
            name,
            text,
            line_starts: std::sync::OnceLock::new(),
        })
    }

    /// Returns the text of 1-based `line`, without its line terminator (`\n` or `\r\n`), if
    /// it exists: `text.lines().nth(line - 1)`, found through the line starts (computed once),
    /// so that looking up every finding's line of a long file is not quadratic.
    pub fn line_text(&self, line: usize) -> Option<&str> {
        let raw = self.raw_line(line)?.1;
        Some(
            raw.strip_suffix('\n')
                .map_or(raw, |l| l.strip_suffix('\r').unwrap_or(l)),
        )
    }

    /// Where in the file character `at` (1-based line and column) of the string a scalar
    /// written at `scalar` holds lies: `expr` is the scalar's value, as YAML read it. Block
    /// scalars (`|`, `>`; their position is their content's first character), multi-line plain
    /// scalars and single-line quoted ones are walked line by line;
    /// `None` when the walk does not land on the character the value has there (a form this
    /// does not follow, such as escapes), so a caller keeps the scalar's own position.
    pub fn pos_in_scalar(&self, scalar: Pos, expr: &str, at: (usize, usize)) -> Option<Pos> {
        let chars: Vec<char> = expr.chars().collect();
        // The character offset of `at` in the value.
        let mut k = 0usize;
        for (i, line) in expr.split('\n').enumerate() {
            if i + 1 == at.0 {
                k += at.1.checked_sub(1)?;
                break;
            }
            k += line.chars().count() + 1;
        }
        let first = self.line_text(scalar.line)?;
        let head: String = first
            .chars()
            .skip(scalar.column.saturating_sub(1))
            .collect();
        // Segments of the value: (line, column of their first character, text).
        let mut segments: Vec<(usize, usize, Vec<char>)> = Vec::new();
        let indent_of = |l: &str| l.chars().take_while(|c| *c == ' ').count();
        // A block scalar's position is its content's first character, below its indicator.
        let block_above = scalar.line > 1
            && indent_of(first) + 1 == scalar.column
            && self.line_text(scalar.line - 1).is_some_and(|prev| {
                let t = prev
                    .trim_end()
                    .trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '+');
                t.ends_with('|') || t.ends_with('>')
            });
        if block_above {
            let ind = scalar.column - 1;
            let mut line = scalar.line;
            while let Some(text) = self.line_text(line) {
                if !text.trim().is_empty() && indent_of(text) < ind {
                    break;
                }
                segments.push((line, ind + 1, text.chars().skip(ind).collect()));
                line += 1;
            }
        }
        match head.chars().next() {
            _ if block_above => {}
            Some(q @ ('\'' | '"')) => {
                // Single-line quoted: `''` (or a backslash escape) is one character of the value.
                let mut col = scalar.column + 1;
                let mut seen = 0usize;
                let mut it = head.chars().skip(1).peekable();
                while let Some(c) = it.next() {
                    if seen == k {
                        return (chars.get(k) == Some(&c) || k == chars.len()).then_some(Pos {
                            line: scalar.line,
                            column: col,
                        });
                    }
                    if c == q && !(q == '\'' && it.peek() == Some(&'\'')) {
                        break;
                    }
                    if (q == '\'' && c == '\'') || (q == '"' && c == '\\') {
                        it.next();
                        col += 1;
                    }
                    col += 1;
                    seen += 1;
                }
                return (seen == k).then_some(Pos {
                    line: scalar.line,
                    column: col,
                });
            }
            _ => {
                segments.push((
                    scalar.line,
                    scalar.column,
                    head.trim_end().chars().collect(),
                ));
                let parent = indent_of(first);
                let mut line = scalar.line + 1;
                while let Some(text) = self.line_text(line) {
                    let n = indent_of(text);
                    let body = text.trim();
                    if body.is_empty() || n <= parent || body.starts_with('#') {
                        break;
                    }
                    segments.push((line, n + 1, body.chars().collect()));
                    line += 1;
                }
            }
        }
        let mut rest = k;
        for (line, column, text) in &segments {
            if rest <= text.len() {
                let here = text.get(rest);
                let want = chars.get(k);
                let lands = match (here, want) {
                    (Some(h), Some(w)) => h == w,
                    (None, None) => true,
                    _ => false,
                };
                return lands.then_some(Pos {
                    line: *line,
                    column: column + rest,
                });
            }
            rest -= text.len() + 1;
        }
        None
    }

    /// Byte offset of a 1-based `line` / 1-based character `column`, clamped to the text.
    pub fn offset_of(&self, pos: Pos) -> usize {
        let Some((start, l)) = self.raw_line(pos.line) else {
            return self.text.len();
        };
        let col_bytes: usize = l
            .chars()
            .take(pos.column.saturating_sub(1))
            .map(char::len_utf8)
            .sum();
        start + col_bytes
    }

    /// The byte offset and text, terminator included, of 1-based `line`, if it exists. A
    /// leading byte-order mark is not part of line 1: the YAML parser does not count it as a
    /// column, so a column found by the parser reads the same text here.
    fn raw_line(&self, line: usize) -> Option<(usize, &str)> {
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(bom_len(&self.text))
                .chain(newline_offsets(&self.text).map(|i| i + 1))
                .collect()
        });
        let start = *starts.get(line.checked_sub(1)?)?;
        if start >= self.text.len() {
            return None;
        }
        let end = starts.get(line).copied().unwrap_or(self.text.len());
        Some((start, self.text.get(start..end)?))
    }
}

/// The length in bytes of the UTF-8 byte-order mark `text` starts with (0 without one).
pub(crate) fn bom_len(text: &str) -> usize {
    if text.starts_with('\u{feff}') {
        '\u{feff}'.len_utf8()
    } else {
        0
    }
}

/// A 1-based line and column in a [`Source`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One document of a stream: its JSON value, its index in the stream and its spans.
#[derive(Debug, Clone)]
pub struct Document {
    /// The source this document was read from.
    pub source: Arc<Source>,
    /// 0-based index of the document in its stream.
    pub index: usize,
    /// The document as a JSON value (mappings keep their source order).
    pub value: Value,
    /// Field path → line:column.
    pub spans: SpanIndex,
}

/// A [`Document`] without its source: what parsing a rule file yields, kept (serialized at
/// build time, for instance) so that a rule set can be loaded without parsing its YAML again
/// ([`RuleSet::load_prepared`](crate::RuleSet::load_prepared)).
///
/// Serializable: a map of `index` (number), `value` (the JSON value, mappings in source order)
/// and `spans` (a [`SpanIndex`], in its serialized shape).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PreparedDocument {
    /// 0-based index of the document in its stream.
    pub index: usize,
    /// The document as a JSON value (mappings keep their source order).
    pub value: Value,
    /// Field path → line:column.
    pub spans: SpanIndex,
}

impl PreparedDocument {
    /// The document again, read from `source` (the source it was parsed from).
    pub fn into_document(self, source: Arc<Source>) -> Document {
        Document {
            source,
            index: self.index,
            value: self.value,
            spans: self.spans,
        }
    }
}

impl From<Document> for PreparedDocument {
    fn from(doc: Document) -> PreparedDocument {
        PreparedDocument {
            index: doc.index,
            value: doc.value,
            spans: doc.spans,
        }
    }
}

/// Parses a rule file as every rule set load does: [`parse_documents_within`] the
/// [`Limits::default`](crate::limits::Limits::default) budgets (the input flags do not apply to
/// rule files).
///
/// # Errors
/// As [`parse_documents`].
pub fn parse_rule_file(source: &Arc<Source>) -> Result<Vec<Document>, Error> {
    parse_documents_within(source, &crate::limits::Limits::default())
}

/// [`parse_rule_file`], kept without the source: the documents
/// [`RuleSet::load_prepared`](crate::RuleSet::load_prepared) takes for `source`, exactly as a
/// load that parses `source` would build them.
///
/// # Errors
/// As [`parse_rule_file`]; a file that does not parse is to be passed to the loader unprepared,
/// which reports the error as a load of its text does.
pub fn prepare_rule_file(source: &Arc<Source>) -> Result<Vec<PreparedDocument>, Error> {
    Ok(parse_rule_file(source)?
        .into_iter()
        .map(PreparedDocument::from)
        .collect())
}

/// Parses a YAML or JSON stream into documents, keeping spans.
///
/// Empty documents (a stream that is only comments, or `---` with nothing after) are skipped but
/// still counted, so `index` matches what a user counts in the file.
///
/// # Errors
/// [`Error::Yaml`] with the source name, line and column on a syntax error, a duplicate key or an
/// alias budget breach; [`Error::TooLarge`] above [`MAX_SOURCE_BYTES`].
pub fn parse_documents(source: &Arc<Source>) -> Result<Vec<Document>, Error> {
    if source.text.len() > MAX_SOURCE_BYTES {
        return Err(Error::TooLarge {
            source_name: source.name.clone(),
            bytes: source.text.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    parse_documents_within(source, &crate::limits::limits())
}

/// [`parse_documents`] within `limits` instead of the process's (rule files are read within
/// [`Limits::default`](crate::limits::Limits::default): the input flags do not apply to them).
///
/// # Errors
/// As [`parse_documents`].
pub fn parse_documents_within(
    source: &Arc<Source>,
    limits: &crate::limits::Limits,
) -> Result<Vec<Document>, Error> {
    if source.text.len() > MAX_SOURCE_BYTES {
        return Err(Error::TooLarge {
            source_name: source.name.clone(),
            bytes: source.text.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    parse_text(
        source,
        &source.text,
        0,
        0,
        limits.scale_for(source.text.len()),
        limits,
    )
}

/// Parses `text`, a part of `source`'s stream that starts after `line_offset` lines of it, into
/// documents numbered from `first_index`; positions are those of the whole stream. The YAML
/// budgets ([`crate::limits`]) apply to `text` as a whole, `scale` times over (1 for one
/// document's piece).
pub(crate) fn parse_text(
    source: &Arc<Source>,
    text: &str,
    line_offset: usize,
    first_index: usize,
    scale: usize,
    limits: &crate::limits::Limits,
) -> Result<Vec<Document>, Error> {
    let budget = limits.budget(scale);
    // Plain manifests are read from the parser's events; anything else (and every error) by
    // serde-saphyr, which reads those texts to the same documents.
    let read = match events::read(text, line_offset, &budget) {
        Some(read) => read,
        None => match read_serde(text, line_offset, budget) {
            Ok(read) => read,
            Err(e) => {
                return refused(source, text, e, (line_offset, first_index), scale, limits);
            }
        },
    };
    if tab_after_indentation(text)
        && let Some(pos) = events::tab_indenting_block_node(text, line_offset)
    {
        return Err(Error::Yaml {
            source_name: source.name.clone(),
            pos: Some(pos),
            message: TAB_MESSAGE.to_string(),
        });
    }
    Ok(read
        .into_iter()
        .enumerate()
        .map(|(i, (value, spans))| Document {
            source: source.clone(),
            index: first_index + i,
            value,
            spans,
        })
        .collect())
}

/// What [`parse_text`] returns for a text the serde reader refused: the error, or, for
/// concatenated JSON values (`jq '.items[]'`), which are not one YAML document but are a
/// stream `kubectl apply -f` reads, each value as its own document at its own line and
/// column.
#[cold]
fn refused(
    source: &Arc<Source>,
    text: &str,
    e: SerdeError,
    (line_offset, first_index): (usize, usize),
    scale: usize,
    limits: &crate::limits::Limits,
) -> Result<Vec<Document>, Error> {
    match e {
        SerdeError::Key(KeyProblem::Duplicate(d)) => Err(d.into_error(source)),
        SerdeError::Key(KeyProblem::Complex { pos, pointer, what }) => {
            let mut message = format!(
                "a {what} as a mapping key at {}: Kubernetes objects (JSON) have text keys only; write the key as a string",
                pointer_path(&pointer)
            );
            if let Some(line) = template_action(text, pos, line_offset) {
                message = template_hint(&message, line);
            }
            Err(Error::Yaml {
                source_name: source.name.clone(),
                pos: Some(pos),
                message,
            })
        }
        SerdeError::Yaml(e) => match json_values(text) {
            Some(values) => parse_json_values(
                source,
                text,
                &values,
                (line_offset, first_index),
                scale,
                limits,
            ),
            None => Err(yaml_error(source, text, &e, line_offset, scale, limits)),
        },
    }
}

/// True when a line of `text` has a tab right after its leading spaces and `-` indicators:
/// only then may a tab indent a block node ([`events::tab_indenting_block_node`] parses the
/// text again to tell). A tab inside a line (`key:\tvalue`, a script's) needs no second parse.
fn tab_after_indentation(text: &str) -> bool {
    // Most texts hold no tab at all: one fast scan.
    text.contains('\t')
        && text
            .split('\n')
            .any(|line| line.trim_start_matches([' ', '-']).starts_with('\t'))
}

/// The byte ranges of the JSON values of `text` when it is two or more JSON objects or arrays
/// one after the other (separated by JSON whitespace or nothing), and nothing else; `None`
/// otherwise (one value is a YAML document as it is, and anything else is not such a stream).
fn json_values(text: &str) -> Option<Vec<std::ops::Range<usize>>> {
    let is_json_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{feff}');
    // Before the values: blank and comment lines, and the piece's `---` line.
    let mut body = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim_matches(is_json_space);
        if t.is_empty() || t.starts_with('#') || (i == 0 && t == "---") {
            body += line.len();
        } else {
            break;
        }
    }
    // serde_json reads no byte order mark: the values start after one.
    body += text[body..].len() - text[body..].trim_start_matches(is_json_space).len();
    let rest = &text[body..];
    if !rest.starts_with(['{', '[']) {
        return None;
    }
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde::de::IgnoredAny>();
    let mut end = 0;
    while let Some(value) = stream.next() {
        value.ok()?;
        let start = end + (rest[end..].len() - rest[end..].trim_start_matches(is_json_space).len());
        if !rest[start..].starts_with(['{', '[']) {
            return None;
        }
        end = stream.byte_offset();
        values.push(body + start..body + end);
    }
    (values.len() > 1).then_some(values)
}

/// Parses each of `values` (byte ranges of `text`, see [`json_values`]) as one document, at its
/// own line and column of the stream: a value that starts inside a line is read after as many
/// spaces as characters come before it on that line.
fn parse_json_values(
    source: &Arc<Source>,
    text: &str,
    values: &[std::ops::Range<usize>],
    (line_offset, first_index): (usize, usize),
    scale: usize,
    limits: &crate::limits::Limits,
) -> Result<Vec<Document>, Error> {
    let mut docs = Vec::with_capacity(values.len());
    for (i, range) in values.iter().enumerate() {
        let before = &text[..range.start];
        let line = before.matches('\n').count();
        let column = before
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().filter(|&c| c != '\u{feff}').count());
        let piece = format!("{}{}", " ".repeat(column), &text[range.clone()]);
        docs.extend(parse_text(
            source,
            &piece,
            line_offset + line,
            first_index + i,
            scale,
            limits,
        )?);
    }
    Ok(docs)
}

/// Why [`read_serde`] refused a text.
enum SerdeError {
    Yaml(serde_saphyr::Error),
    Key(KeyProblem),
}

/// Reads `text` with serde-saphyr within `budget`: each non-empty document's value and spans.
fn read_serde(
    text: &str,
    line_offset: usize,
    budget: serde_saphyr::Budget,
) -> Result<Vec<(Value, SpanIndex)>, SerdeError> {
    // YAML 1.2 core booleans only: `yes`, `on`, `y` stay the strings the user wrote.
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.budget = Some(budget);
    // Duplicate keys reach the visitor, so the error can name both lines and the field path.
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::PassThrough;
    let nodes: Vec<Option<Spanned<Node>>> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(SerdeError::Yaml)?;
    let mut docs = Vec::new();
    for node in nodes.into_iter().flatten() {
        let mut spans = SpanIndex::default();
        let mut problem = None;
        let value = into_value(
            node,
            None,
            (None, ""),
            &mut spans,
            (text, line_offset),
            &mut problem,
        );
        if let Some(p) = problem {
            return Err(SerdeError::Key(p));
        }
        if !value.is_null() {
            docs.push((value, spans));
        }
    }
    Ok(docs)
}

/// Reads every document of `source` straight into `T` (no JSON value, no spans): for large
/// inputs of which only a few fields are needed (a nodes file), so memory stays that of the
/// fields kept. The YAML budgets apply `scale` times over (see
/// [`Limits::scale_for`](crate::limits::Limits::scale_for)); an empty document is `None`.
///
/// # Errors
/// [`Error::Yaml`] with the line and column of a syntax error, a type error or a budget breach.
pub fn parse_documents_as<T: serde::de::DeserializeOwned>(
    source: &Source,
    scale: usize,
) -> Result<Vec<Option<T>>, Error> {
    let limits = crate::limits::limits();
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.budget = Some(limits.budget(scale));
    serde_saphyr::from_multiple_with_options(&source.text, options).map_err(|e| {
        // A duplicate key is reported as the other parsers report it (the key, its field path,
        // both lines): a second pass finds where, keeping no more than the keys of the mappings
        // it is inside.
        if matches!(
            e.without_snippet(),
            serde_saphyr::Error::DuplicateMappingKey { .. }
        ) && let Some(d) = find_duplicate(source, &limits, scale)
        {
            return d.into_error(source);
        }
        yaml_error(source, &source.text, &e, 0, scale, &limits)
    })
}

/// The first duplicate mapping key of `source`'s stream, found by walking it without keeping
/// its values (for inputs read straight into a lean type, such as a nodes file).
fn find_duplicate(
    source: &Source,
    limits: &crate::limits::Limits,
    scale: usize,
) -> Option<Duplicate> {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.budget = Some(limits.budget(scale));
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::PassThrough;
    let docs: Vec<Option<DuplicateScan>> =
        serde_saphyr::from_multiple_with_options(&source.text, options).ok()?;
    docs.into_iter().flatten().find_map(|d| d.0)
}

/// One document walked for its first duplicate key ([`find_duplicate`]).
struct DuplicateScan(Option<Duplicate>);

impl<'de> Deserialize<'de> for DuplicateScan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        de::DeserializeSeed::deserialize(ScanSeed(String::new()), d).map(DuplicateScan)
    }
}

/// Walks one node at the JSON pointer it holds; yields the first duplicate key below it.
struct ScanSeed(String);

impl<'de> de::DeserializeSeed<'de> for ScanSeed {
    type Value = Option<Duplicate>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ScanSeed {
    type Value = Option<Duplicate>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        de::DeserializeSeed::deserialize(self, d)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut i = 0usize;
        while let Some(d) = seq.next_element_seed(ScanSeed(format!("{}/{i}", self.0)))? {
            found = found.or(d);
            i += 1;
        }
        Ok(found)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        let mut seen: HashMap<String, Pos> = HashMap::new();
        while let Some(k) = map.next_key::<Spanned<Node>>()? {
            let key_pos = pos_of(&k.referenced, 0);
            let key_text = k.value.into_key();
            let child = format!("{}/{}", self.0, escape_pointer(&key_text));
            if found.is_none()
                && let Some(first) = seen.get(&key_text)
            {
                found = Some(Duplicate {
                    key: key_text.clone(),
                    pointer: child.clone(),
                    first: Some(*first),
                    again: key_pos,
                });
            }
            seen.entry(key_text).or_insert(key_pos);
            let below = map.next_value_seed(ScanSeed(child))?;
            found = found.or(below);
        }
        Ok(found)
    }
}

/// A value read by [`parse_documents_as`] with the line and column it was written at (for a
/// lean type that still reports a bad value at its place).
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it starts in the source.
    pub pos: Pos,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Located<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<T>::deserialize(d)?;
        Ok(Located {
            pos: pos_of(&spanned.referenced, 0),
            value: spanned.value,
        })
    }
}

/// Like [`parse_documents`], but a syntax error in one document of a stream does not hide the
/// others, and the stream has no size or document-count limit: it is read document by document
/// (cut at `---` lines, see [`crate::ChunkReader`]), each with its own YAML budgets, in one
/// linear pass. Every document that parses is returned beside the errors of those that do not;
/// a document that fails still takes its index. Lines and columns stay those of the whole file.
pub fn parse_documents_lenient(source: &Arc<Source>) -> (Vec<Document>, Vec<Error>) {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for chunk in crate::stream::ChunkReader::new(source.text.as_bytes()) {
        // Reading from memory cannot fail: the text is already UTF-8.
        let Ok(chunk) = chunk else { break };
        match crate::stream::parse_chunk(source, &chunk, docs.len() + errors.len()) {
            Ok(parsed) => docs.extend(parsed),
            Err(e) => errors.push(e),
        }
    }
    (docs, errors)
}

/// `text` is what was parsed, its first line being stream line `line_offset + 1`.
pub(crate) fn yaml_error(
    source: &Source,
    text: &str,
    e: &serde_saphyr::Error,
    line_offset: usize,
    scale: usize,
    limits: &crate::limits::Limits,
) -> Error {
    let pos = e.location().and_then(|l| {
        let line = usize::try_from(l.line()).ok()? + line_offset;
        let column = usize::try_from(l.column()).ok()?;
        (line > line_offset).then_some(Pos { line, column })
    });
    let mut inner = e.without_snippet();
    if let serde_saphyr::Error::AliasError { error, .. } = inner {
        inner = error.without_snippet();
    }
    if let serde_saphyr::Error::Budget { breach, .. } = inner {
        return Error::Yaml {
            source_name: source.name.clone(),
            pos,
            message: limits.breach_message(breach, scale),
        };
    }
    // A tab that indents a block key or collection before the place the parser stopped is the
    // first error of the text (a line after it, correctly indented, no longer fits the block
    // the tab opened, and the parser says so there).
    if tab_after_indentation(text)
        && let Some(tab) = events::tab_indenting_block_node(text, line_offset)
        && pos.is_none_or(|p| (tab.line, tab.column) <= (p.line, p.column))
    {
        return Error::Yaml {
            source_name: source.name.clone(),
            pos: Some(tab),
            message: TAB_MESSAGE.to_string(),
        };
    }
    // The parser's and the library's own errors that read as internals are told in our words,
    // by their kind (never by their text).
    let typed = match inner {
        serde_saphyr::Error::DuplicateMappingKey { key, .. } => Some(match key {
            Some(k) => format!("duplicate key {}; keep one", crate::quote::go_quote(k)),
            None => "duplicate key; keep one".to_string(),
        }),
        serde_saphyr::Error::NonFiniteFloat { value, .. } => Some(format!(
            "{value} is not a finite number: Kubernetes objects (JSON) cannot hold infinity or NaN; quote it if it is meant as text"
        )),
        serde_saphyr::Error::ExternalMessage { source: from, .. } => match &**from {
            serde_saphyr::ExternalMessageSource::Parser(scan) => match scan.kind() {
                // The parser's own nesting guard, which fires before the depth budget on flow
                // collections: the same limit for the user.
                serde_saphyr::granit_parser::ErrorKind::RecursionLimitExceeded => Some(format!(
                    "the document nests mappings and lists deeper than the limit of {} levels (--max-depth)",
                    limits.depth
                )),
                serde_saphyr::granit_parser::ErrorKind::UnexpectedCharacter { character } => {
                    // The parser reports some at the start of the scalar holding them: point
                    // at the character itself, wherever the parser stopped.
                    if let Some(at) = pos.and_then(|p| find_char(text, p, line_offset, *character))
                    {
                        return Error::Yaml {
                            source_name: source.name.clone(),
                            pos: Some(at),
                            message: unexpected_character(*character),
                        };
                    }
                    Some(unexpected_character(*character))
                }
                // A tab the parser refuses: it may report the place it stopped (the end of the
                // scalar on the line before, or past the tab); point at the tab that indents.
                serde_saphyr::granit_parser::ErrorKind::TabNotAllowed
                | serde_saphyr::granit_parser::ErrorKind::TabInBlockIndentation
                | serde_saphyr::granit_parser::ErrorKind::TabAtBlockScalarStart
                | serde_saphyr::granit_parser::ErrorKind::TabInIndentation
                | serde_saphyr::granit_parser::ErrorKind::TabInPlainScalar => {
                    return Error::Yaml {
                        source_name: source.name.clone(),
                        pos: pos.map(|p| indenting_tab(text, p, line_offset, 3).unwrap_or(p)),
                        message: TAB_MESSAGE.to_string(),
                    };
                }
                // `- \t- a`: the parser takes the tab after the first `-` for separation and
                // then refuses the second; the tab is the cause.
                serde_saphyr::granit_parser::ErrorKind::InvalidBlockEntryWhitespace
                    if let Some(tab) = pos.and_then(|p| tab_before(text, p, line_offset)) =>
                {
                    return Error::Yaml {
                        source_name: source.name.clone(),
                        pos: Some(tab),
                        message: TAB_MESSAGE.to_string(),
                    };
                }
                // A block key or entry expected where a line is indented with a tab after
                // spaces (the parser took the tab for separation, so the line's node did not
                // fit the block): the tab is the cause.
                serde_saphyr::granit_parser::ErrorKind::ExpectedBlockMappingKey
                | serde_saphyr::granit_parser::ErrorKind::ExpectedBlockSequenceEntry
                | serde_saphyr::granit_parser::ErrorKind::SimpleKeyExpected
                | serde_saphyr::granit_parser::ErrorKind::InvalidSimpleKey
                    if let Some(tab) = pos.and_then(|p| indenting_tab(text, p, line_offset, 1)) =>
                {
                    return Error::Yaml {
                        source_name: source.name.clone(),
                        pos: Some(tab),
                        message: TAB_MESSAGE.to_string(),
                    };
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    let message = typed.unwrap_or_else(|| {
        // The library's Display may embed a snippet; keep only its first line for the message.
        let text = e.to_string();
        let mut message = text.lines().next().unwrap_or("invalid YAML").trim();
        // The library repeats the position ("error: line 2 column 1: …"); we print it once.
        message = message.strip_prefix("error: ").unwrap_or(message);
        if let Some(rest) = message.strip_prefix("line ")
            && let Some((_, after)) = rest.split_once(": ")
        {
            message = after;
        }
        message.to_string()
    });
    let message = match pos.and_then(|p| template_action(text, p, line_offset)) {
        Some(line) => template_hint(&message, line),
        None => message,
    };
    Error::Yaml {
        source_name: source.name.clone(),
        pos,
        message,
    }
}

/// `message` and what to do about the template action on stream `line`.
fn template_hint(message: &str, line: usize) -> String {
    format!(
        "{message}; line {line} holds a template action ({{{{ … }}}}): render a Helm or Go template first (`helm template`) and check its output, and quote a value that starts with {{{{"
    )
}

/// The nearest stream line, among the parser's stopping line `at.line` and the two before it,
/// that holds a Go template action (`{{` and, after it, `}}`; not the rules' own `${{ … }}`): a
/// Helm chart's template read as a manifest fails there, and the parser's message alone does not
/// say why. `text` starts at stream line `line_offset + 1`.
fn template_action(text: &str, at: Pos, line_offset: usize) -> Option<usize> {
    let last = at.line.checked_sub(line_offset + 1)?;
    let first = last.saturating_sub(2);
    let lines: Vec<&str> = text.lines().skip(first).take(last + 1 - first).collect();
    // The nearest line first: the one the parser stopped on is the likeliest cause.
    lines.iter().enumerate().rev().find_map(|(i, line)| {
        let open = line
            .match_indices("{{")
            .find(|&(k, _)| !line[..k].ends_with('$'))?
            .0;
        line[open + 2..]
            .contains("}}")
            .then_some(line_offset + first + i + 1)
    })
}

/// Where `c` first occurs in `text` at or after stream position `from` (`text` starting at stream
/// line `line_offset + 1`; columns count characters from 1).
fn find_char(text: &str, from: Pos, line_offset: usize, c: char) -> Option<Pos> {
    let first = from.line.checked_sub(line_offset + 1)?;
    text.split_inclusive('\n')
        .enumerate()
        .skip(first)
        .find_map(|(i, line)| {
            let skip = if i == first {
                from.column.saturating_sub(1)
            } else {
                0
            };
            line.chars().skip(skip).position(|x| x == c).map(|k| Pos {
                line: line_offset + i + 1,
                column: skip + k + 1,
            })
        })
}

/// The last tab on stream line `at.line` before column `at.column` (`text` starting at stream
/// line `line_offset + 1`; columns count characters from 1).
fn tab_before(text: &str, at: Pos, line_offset: usize) -> Option<Pos> {
    let line = text.lines().nth(at.line.checked_sub(line_offset + 1)?)?;
    let k = line
        .chars()
        .take(at.column.saturating_sub(1))
        .enumerate()
        .filter(|&(_, c)| c == '\t')
        .last()?
        .0;
    Some(Pos {
        line: at.line,
        column: k + 1,
    })
}

/// The message of a tab that indents.
const TAB_MESSAGE: &str = "a tab where YAML allows only spaces (indentation is spaces, never tabs): replace it with spaces";

/// The first tab in the leading whitespace of stream line `from.line` or of the `lines - 1`
/// lines after it (`text` starting at stream line `line_offset + 1`), where the parser refusing
/// a tab stopped; `None` when none of them is indented with one.
fn indenting_tab(text: &str, from: Pos, line_offset: usize, lines: usize) -> Option<Pos> {
    let first = from.line.checked_sub(line_offset + 1)?;
    text.split_inclusive('\n')
        .enumerate()
        .skip(first)
        .take(lines)
        .find_map(|(i, line)| {
            let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
            line[..indent].find('\t').map(|k| Pos {
                line: line_offset + i + 1,
                column: k + 1,
            })
        })
}

/// The parser's unexpected character `c` in the user's words. A control character (C0 but tab
/// and line breaks, DEL, C1) is refused anywhere in the text, also inside a quoted string, where
/// JSON allows it raw: say what it is and how to write it.
fn unexpected_character(c: char) -> String {
    let code = u32::from(c);
    if c.is_control() {
        let escape = if code <= 0xff {
            format!("\\x{code:02X}")
        } else {
            format!("\\u{code:04X}")
        };
        format!(
            "unexpected control character U+{code:04X}: YAML does not allow it unescaped, not even \
             in a quoted string; remove it, or write it as {escape} inside a double-quoted string"
        )
    } else if c.is_whitespace() || !c.is_alphanumeric() && !c.is_ascii_graphic() {
        format!("unexpected character U+{code:04X}")
    } else {
        format!("unexpected character '{c}'")
    }
}

fn pos_of(loc: &serde_saphyr::Location, line_offset: usize) -> Pos {
    Pos {
        line: usize::try_from(loc.line()).unwrap_or(0) + line_offset,
        column: usize::try_from(loc.column()).unwrap_or(0),
    }
}

/// The field path of a JSON pointer into a document read from YAML (a token of digits is a list
/// index there: the pointers are built from what was read).
fn pointer_path(pointer: &str) -> FieldPath {
    let mut path = FieldPath::root();
    for token in pointer.split('/').skip(1) {
        let token = unescape_pointer(token);
        path = match token.parse::<usize>() {
            Ok(i) if !token.starts_with('+') => path.index(i),
            _ => path.key(token),
        };
    }
    path
}

/// The first mapping key of a document that JSON cannot hold as it is written.
enum KeyProblem {
    /// A key written twice.
    Duplicate(Duplicate),
    /// A list or mapping as a key (`? [a]`, or a Helm template action `{{ x }}` read as a flow
    /// mapping): at the key, below the JSON pointer of its mapping; `what` is `list` or `mapping`.
    Complex {
        pos: Pos,
        pointer: String,
        what: &'static str,
    },
}

/// The first duplicate mapping key of a document: the key, the JSON pointer of its field and
/// both key positions.
struct Duplicate {
    key: String,
    pointer: String,
    first: Option<Pos>,
    again: Pos,
}

impl Duplicate {
    /// `duplicate key "value" at spec.env[0].value: first on line 11, again on line 12; keep
    /// one`, at the second key.
    fn into_error(self, source: &Source) -> Error {
        let path = pointer_path(&self.pointer);
        let again = self.again;
        let lines = match self.first {
            Some(first) if first.line == again.line => {
                format!("first at {first}, again at {again}")
            }
            Some(first) => format!("first on line {}, again on line {}", first.line, again.line),
            None => format!("again on line {}", again.line),
        };
        Error::Yaml {
            source_name: source.name.clone(),
            pos: Some(again),
            message: format!(
                "duplicate key {} at {path}: {lines}; keep one",
                crate::quote::go_quote(&self.key),
            ),
        }
    }
}

/// Converts a read node into JSON, recording every node's span: the node at `segment` under
/// node `parent` of `spans` (`None`: the root, at `""`). `at` is the text parsed and the lines
/// of the stream before it.
fn into_value(
    node: Spanned<Node>,
    key: Option<Pos>,
    (parent, segment): (Option<u32>, &str),
    spans: &mut SpanIndex,
    at: (&str, usize),
    problem: &mut Option<KeyProblem>,
) -> Value {
    let (text, line_offset) = at;
    let value_pos = pos_of(&node.referenced, line_offset);
    let scalar = !matches!(node.value, Node::Seq(_) | Node::Map(_));
    let id = spans.push(
        parent,
        segment,
        NodeSpan {
            key,
            value: value_pos,
            scalar,
        },
    );
    match node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(b),
        Node::Num(n) => match leading_zero_integer(&n, &node.defined, text) {
            Some((integer, raw)) => {
                spans.push_leading_zero(id, raw);
                Value::Number(integer)
            }
            None => {
                if let Some(raw) = yaml12_octal(&n, &node.defined, text) {
                    spans.push_leading_zero(id, raw);
                }
                Value::Number(n)
            }
        },
        Node::Str(s) => Value::String(s),
        Node::Seq(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| {
                    let pos = pos_of(&item.referenced, line_offset);
                    into_value(
                        item,
                        Some(pos),
                        (Some(id), &i.to_string()),
                        spans,
                        at,
                        problem,
                    )
                })
                .collect(),
        ),
        Node::Map(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                let key_pos = pos_of(&k.referenced, line_offset);
                // A number or boolean key is kept as written (`010:` is the key "010"), as
                // Kubernetes (JSON) keys are strings.
                let written = match &k.value {
                    Node::Num(_) | Node::Bool(_) => scalar_text(&k.defined, text),
                    _ => None,
                };
                if problem.is_none() {
                    let what = match k.value {
                        Node::Seq(_) => Some("list"),
                        Node::Map(_) => Some("mapping"),
                        _ => None,
                    };
                    if let Some(what) = what {
                        *problem = Some(KeyProblem::Complex {
                            pos: key_pos,
                            pointer: spans.pointer(id),
                            what,
                        });
                    }
                }
                let key_text = written.unwrap_or_else(|| k.value.into_key());
                if problem.is_none() && map.contains_key(&key_text) {
                    let first = spans.child(Some(id), &key_text);
                    *problem = Some(KeyProblem::Duplicate(Duplicate {
                        key: key_text.clone(),
                        pointer: format!("{}/{}", spans.pointer(id), escape_pointer(&key_text)),
                        first: first.and_then(|c| spans.span(c).key),
                        again: key_pos,
                    }));
                }
                let value = into_value(v, Some(key_pos), (Some(id), &key_text), spans, at, problem);
                map.insert(key_text, value);
            }
            Value::Object(map)
        }
    }
}

/// RFC 6901 unescaping of one reference token (borrowed as it is when it holds no `~`).
pub(crate) fn unescape_pointer(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains('~') {
        std::borrow::Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        std::borrow::Cow::Borrowed(token)
    }
}

/// RFC 6901 escaping of one reference token (borrowed as it is when it holds neither `~` nor
/// `/`, as nearly every key does).
pub(crate) fn escape_pointer(token: &str) -> std::borrow::Cow<'_, str> {
    if token.bytes().any(|b| b == b'~' || b == b'/') {
        std::borrow::Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        std::borrow::Cow::Borrowed(token)
    }
}

/// The source text of the plain scalar at `at` in `text` (the part of the stream parsed), if
/// the parser gave its byte span.
fn scalar_text(at: &serde_saphyr::Location, text: &str) -> Option<String> {
    let span = at.span();
    let start = usize::try_from(span.byte_offset()?).ok()?;
    let len = usize::try_from(span.byte_len()?).ok()?;
    let raw = text.get(start..start.checked_add(len)?)?.trim();
    (!raw.is_empty()).then(|| raw.to_string())
}

/// The source text of an integer written in YAML 1.2's octal form (`0o17`), which YAML 1.1
/// readers take as a string.
fn yaml12_octal(n: &Number, at: &serde_saphyr::Location, text: &str) -> Option<String> {
    if n.is_f64() {
        return None;
    }
    let raw = scalar_text(at, text)?;
    raw.strip_prefix(['+', '-'])
        .unwrap_or(&raw)
        .starts_with("0o")
        .then_some(raw)
}

/// The integer a plain scalar with a redundant leading zero (`010`, `-007`) spells in YAML 1.2's
/// core schema, which is how this reader reads it (and what the YAML 1.1 warning says). The YAML
/// library hands such a scalar over as a float, which would be written back as `10.0`: a
/// changed value. `None` for every other number (a float the user wrote stays a float).
fn leading_zero_integer(
    n: &Number,
    at: &serde_saphyr::Location,
    text: &str,
) -> Option<(Number, String)> {
    if !n.is_f64() {
        return None;
    }
    let raw = scalar_text(at, text)?;
    let raw = raw.as_str();
    let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    if digits.len() < 2 || !digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unsigned = raw.strip_prefix('+').unwrap_or(raw);
    let integer = match unsigned.parse::<i64>() {
        Ok(i) => Number::from(i),
        Err(_) => Number::from(unsigned.parse::<u64>().ok()?),
    };
    Some((integer, raw.to_string()))
}

/// A YAML node as read, before conversion to JSON.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Num(Number),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl Node {
    /// Mapping keys become strings, as Kubernetes (JSON) requires.
    fn into_key(self) -> String {
        match self {
            Node::Null => "null".to_string(),
            Node::Bool(b) => b.to_string(),
            Node::Num(n) => n.to_string(),
            Node::Str(s) => s,
            Node::Seq(_) | Node::Map(_) => "<complex key>".to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Num(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Num(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(i64::try_from(v)
            .map(|n| Node::Num(n.into()))
            .unwrap_or_else(|_| Node::Str(v.to_string())))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(u64::try_from(v)
            .map(|n| Node::Num(n.into()))
            .unwrap_or_else(|_| Node::Str(v.to_string())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        // JSON has no NaN/Inf: keep such a scalar as its text rather than lose it.
        Ok(Number::from_f64(v)
            .map(Node::Num)
            .unwrap_or_else(|| Node::Str(v.to_string())))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Node, E> {
        Ok(Node::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Spanned<Node>>()? {
            let v = map.next_value::<Spanned<Node>>()?;
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

/// Writes a JSON value as block-style YAML (the form `kubectl apply -f` reads), keeping the
/// key order of mappings.
///
/// # Errors
/// [`Error::Serialize`] with the serializer's message (only for values YAML cannot hold, which
/// JSON values never are).
pub fn to_yaml(value: &Value) -> Result<String, Error> {
    let mut options = serde_saphyr::SerializerOptions::default();
    // Long strings (scripts) stay as written instead of being folded.
    options.prefer_block_scalars = true;
    serde_saphyr::to_string_with_options(value, options)
        .map_err(|e| Error::Serialize(e.to_string()))
}

/// Byte offsets of the `\n`s of `text`.
fn newline_offsets(text: &str) -> impl Iterator<Item = usize> + '_ {
    text.bytes()
        .enumerate()
        .filter_map(|(i, b)| (b == b'\n').then_some(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_line() {
        // The parser counts columns after the mark: a column reads the same text here.
        let src = Source::new("r.yaml", "\u{feff}a: yes\nb: 1\n");
        assert_eq!(src.line_text(1), Some("a: yes"));
        assert_eq!(src.line_text(2), Some("b: 1"));
        assert_eq!(src.offset_of(Pos { line: 1, column: 4 }), 6);
        let docs = parse_documents(&src).expect("parses");
        let at = docs[0]
            .spans
            .lookup(&FieldPath::root().key("a"))
            .expect("a is there");
        assert_eq!((at.line, at.column), (1, 4));
        assert_eq!(&src.text[src.offset_of(at)..][..3], "yes");
    }

    #[test]
    fn a_character_of_a_scalar_is_found_in_every_scalar_form() {
        let text = "a:\n  lit: |\n    1 == 1 &&\n    x.(\n  fold: >-\n    1 == 1 &&\n    size(x]) > 0\n  plain: 1 == 1 &&\n    size(x]) > 0\n  quoted: 'it''s x.('\n";
        let src = Source::new("r.yaml", text);
        let at = |line, column| Pos { line, column };
        // Literal: line 2, column 3 of the value is the `(` on file line 4.
        assert_eq!(
            src.pos_in_scalar(at(3, 5), "1 == 1 &&\nx.(\n", (2, 3)),
            Some(at(4, 7))
        );
        // Folded: column 17 of the one line the value is, the `]` on file line 7.
        assert_eq!(
            src.pos_in_scalar(at(6, 5), "1 == 1 && size(x]) > 0", (1, 17)),
            Some(at(7, 11))
        );
        // Plain over two lines, the same value.
        assert_eq!(
            src.pos_in_scalar(at(8, 10), "1 == 1 && size(x]) > 0", (1, 17)),
            Some(at(9, 11))
        );
        // Single-quoted: `''` is one character of the value.
        assert_eq!(
            src.pos_in_scalar(at(10, 11), "it's x.(", (1, 8)),
            Some(at(10, 20))
        );
        // A walk that does not land on the value's character: none, not a wrong place.
        assert_eq!(
            src.pos_in_scalar(at(8, 10), "something else entirely", (1, 17)),
            None
        );
    }

    #[test]
    fn a_line_is_what_lines_gives() {
        let texts = [
            "",
            "\n",
            "\n\n",
            "a",
            "a\n",
            "a\nb",
            "a\r\nb\r\n",
            "a\rb\n\r",
            "x\n\ny\n",
            "é\n日本\r\n\r\n",
        ];
        for text in texts {
            let source = Source::new("t", text);
            let got: Vec<Option<&str>> = (0..6usize).map(|l| source.line_text(l)).collect();
            let want: Vec<Option<&str>> = (0..6usize)
                .map(|l| text.lines().nth(l.checked_sub(1)?))
                .collect();
            assert_eq!(got, want, "{text:?}");
            // Offsets as a walk over the lines gives them.
            for line in 0..6usize {
                for column in [1, 2, 5] {
                    let mut want = text.len();
                    let mut offset = 0;
                    for (i, l) in text.split_inclusive('\n').enumerate() {
                        if i + 1 == line {
                            want = offset
                                + l.chars()
                                    .take(column - 1)
                                    .map(char::len_utf8)
                                    .sum::<usize>();
                            break;
                        }
                        offset += l.len();
                    }
                    assert_eq!(source.offset_of(Pos { line, column }), want, "{text:?}");
                }
            }
        }
    }

    fn parse(text: &str) -> Vec<Document> {
        parse_documents(&Source::new("t.yaml", text)).expect("parses")
    }

    #[test]
    fn concatenated_json_values_are_documents_at_their_own_lines() {
        // `jq '.items[]'` prints one object after another; two on one line too.
        let text = "{\n  \"kind\": \"Job\",\n  \"n\": 1\n}\n{\"kind\": \"Pod\"} [1,\n 2]\n";
        let docs = parse(text);
        let p = |s: &str| FieldPath::parse(s).expect("path");
        let values: Vec<_> = docs.iter().map(|d| (d.index, d.value.clone())).collect();
        assert_eq!(
            values,
            [
                (0, serde_json::json!({"kind": "Job", "n": 1})),
                (1, serde_json::json!({"kind": "Pod"})),
                (2, serde_json::json!([1, 2])),
            ]
        );
        assert_eq!(
            docs[0].spans.lookup(&p("n")),
            Some(Pos { line: 3, column: 8 })
        );
        assert_eq!(
            docs[1].spans.lookup(&p("kind")),
            Some(Pos {
                line: 5,
                column: 10
            })
        );
        assert_eq!(
            docs[2].spans.lookup(&p("[1]")),
            Some(Pos { line: 6, column: 2 })
        );
    }

    #[test]
    fn text_that_is_not_only_json_values_keeps_the_yaml_error() {
        let source = Source::new("t.yaml", "{\"a\": 1}\n{\"b\": 2}\nc: 3\n");
        let err = parse_documents(&source).expect_err("not a JSON stream");
        assert_eq!(
            err.to_string(),
            "t.yaml:2:1: did not find expected <document start>"
        );
        // One value is a YAML document as it is; a broken second value is the YAML error.
        assert_eq!(parse("{\"a\": 1}\n").len(), 1);
        let broken = Source::new("t.yaml", "{\"a\": 1}\n{\"b\": \n");
        assert_eq!(
            parse_documents(&broken)
                .map(|d| d.len())
                .map_err(|e| e.to_string()),
            Err("t.yaml:2:1: unclosed bracket '{'".to_string())
        );
    }

    #[test]
    fn spans_point_at_scalar_values_and_block_keys() {
        let docs = parse("a:\n  b: hello\n  list:\n  - x\n  - y: 1\n");
        let d = &docs[0];
        let p = |s: &str| FieldPath::parse(s).expect("path");
        assert_eq!(d.spans.lookup(&p("a.b")), Some(Pos { line: 2, column: 6 }));
        assert_eq!(
            d.spans.lookup(&p("a.list")),
            Some(Pos { line: 3, column: 3 })
        );
        assert_eq!(
            d.spans.lookup(&p("a.list[1].y")),
            Some(Pos { line: 5, column: 8 })
        );
        // missing field → nearest ancestor
        assert_eq!(
            d.spans.lookup(&p("a.missing")),
            Some(Pos { line: 1, column: 1 })
        );
    }

    #[test]
    fn a_leading_zero_integer_stays_an_integer_and_floats_stay_floats() {
        let docs = parse(
            "a: 010\nb: -007\nc: 10.0\nd: 1e3\ne: \"010\"\nf: &x 08\ng: *x\nh: 0\ni: 00\n---\nj: 010\n",
        );
        let text = serde_json::to_string(&docs[0].value).expect("json");
        assert_eq!(
            text,
            r#"{"a":10,"b":-7,"c":10.0,"d":1000.0,"e":"010","f":8,"g":8,"h":0,"i":0}"#
        );
        // Keys are strings, as written.
        let keys = parse("010: a\n1.50: b\ntrue: c\n2: d\n");
        assert_eq!(
            serde_json::to_string(&keys[0].value).expect("json"),
            r#"{"010":"a","1.50":"b","true":"c","2":"d"}"#
        );
        assert_eq!(
            serde_json::to_string(&docs[1].value).expect("json"),
            r#"{"j":10}"#
        );
    }

    #[test]
    fn multi_document_stream_keeps_indexes() {
        let docs = parse("a: 1\n---\nb: \"true\"\n---\nc: yes\n");
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1].index, 1);
        assert_eq!(docs[2].value, serde_json::json!({"c": "yes"}));
        assert_eq!(docs[1].value, serde_json::json!({"b": "true"}));
    }

    #[test]
    fn keys_with_slashes_and_dots() {
        let docs = parse("labels:\n  kai.scheduler/queue: team-a\n");
        let p = FieldPath::parse("labels[\"kai.scheduler/queue\"]").expect("path");
        assert_eq!(
            docs[0].spans.lookup(&p),
            Some(Pos {
                line: 2,
                column: 24
            })
        );
    }

    #[test]
    fn a_broken_document_does_not_hide_the_others() {
        let src = Source::new("s.yaml", "a: 1\n---\nb: [1, 2\nc: 3\n---\nd: 4\n");
        let (docs, errors) = parse_documents_lenient(&src);
        assert_eq!(
            docs.iter()
                .map(|d| (d.index, d.value.clone()))
                .collect::<Vec<_>>(),
            vec![
                (0, serde_json::json!({"a": 1})),
                (2, serde_json::json!({"d": 4}))
            ]
        );
        let p = FieldPath::parse("d").expect("path");
        assert_eq!(docs[1].spans.lookup(&p), Some(Pos { line: 6, column: 4 }));
        assert_eq!(errors.len(), 1);
        assert!(
            matches!(&errors[0], Error::Yaml { pos: Some(p), .. } if p.line == 4),
            "{errors:?}"
        );
    }

    #[test]
    fn a_control_character_is_named_with_its_code_and_how_to_write_it() {
        let err = |text: &str| {
            parse_documents(&Source::new("in.json", text))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("{\"metadata\": {\"name\": \"\u{7f}x\"}}\n"),
            "in.json:1:24: unexpected control character U+007F: YAML does not allow it unescaped, not even in a quoted string; remove it, or write it as \\x7F inside a double-quoted string"
        );
        assert_eq!(
            unexpected_character('\u{85}'),
            "unexpected control character U+0085: YAML does not allow it unescaped, not even in a quoted string; remove it, or write it as \\x85 inside a double-quoted string"
        );
        assert_eq!(unexpected_character('@'), "unexpected character '@'");
        assert_eq!(
            unexpected_character('\u{a0}'),
            "unexpected character U+00A0"
        );
    }

    #[test]
    fn the_parsers_own_limits_read_as_ours() {
        let err = |text: String| {
            parse_documents(&Source::new("in.yaml", text))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("[".repeat(100_000)),
            "in.yaml:1:256: the document nests mappings and lists deeper than the limit of 64 levels (--max-depth)"
        );
        assert_eq!(
            err("a: .inf\n".to_string()),
            "in.yaml:1:4: .inf is not a finite number: Kubernetes objects (JSON) cannot hold infinity or NaN; quote it if it is meant as text"
        );
    }

    #[test]
    fn syntax_error_has_position() {
        let err = parse_documents(&Source::new("bad.yaml", "a: [1, 2\nb: 3\n")).unwrap_err();
        match err {
            Error::Yaml {
                source_name,
                pos,
                message,
            } => {
                assert_eq!(source_name, "bad.yaml");
                assert_eq!(pos, Some(Pos { line: 2, column: 2 }));
                assert_eq!(message, "illegal placement of ':' indicator");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
