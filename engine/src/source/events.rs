//! The fast reader: YAML parser events straight into JSON values and spans.
//!
//! `serde-saphyr` reads a document through serde, one visitor call (and for spans, one
//! synthetic struct with two locations) per node; most of that time is the serde layer, not the
//! YAML parser under it. Manifests are nearly always plain block YAML: mappings, lists, strings,
//! small integers, booleans. This reader takes the same parser's events and builds the same
//! value and [`SpanIndex`] that the serde reader builds, for exactly those documents.
//!
//! It is an optimisation only, never a second YAML reader: whenever a text holds anything whose
//! meaning it does not settle itself (a tag, an anchor or alias, a merge key, a duplicate key, a
//! `%YAML` directive, a number other than a plain decimal, a key that is not a string, a syntax
//! error, a count near a budget) it gives up on the whole text (`None`) and the serde reader
//! reads it, with its errors, budgets and resolution rules. So every text it accepts reads as
//! the serde reader reads it; the tests hold the two readers to the same values and spans.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle, Span};

use super::{NodeSpan, Pos, SpanIndex};

/// The documents of `text` with their spans (empty documents left out, as the serde reader
/// leaves them out), or `None` when the serde reader must read it (see the module docs).
/// `line_offset` is added to every line, as the serde reader's caller adds it.
pub(super) fn read(
    text: &str,
    line_offset: usize,
    budget: &serde_saphyr::Budget,
) -> Option<Vec<(Value, SpanIndex)>> {
    // Comment and scalar bytes are bounded by the text (a decoded escape is at most 1.5 times
    // its source): a text that could reach either budget is left to the reader that enforces
    // it.
    let bytes = text.len().saturating_mul(2);
    if bytes >= budget.max_total_comment_bytes || bytes >= budget.max_total_scalar_bytes {
        return None;
    }
    let mut documents = 0usize;
    let mut reader = Reader {
        docs: Vec::new(),
        stack: Vec::new(),
        root: None,
        spans: SpanIndex::default(),
        index: String::new(),
        line_offset,
    };
    // Every node is at least one event: a text of fewer events than the node budget is within
    // the node and event budgets, however the serde reader counts them.
    let max_events = budget.max_nodes.min(budget.max_events);
    let mut events = 0usize;
    for item in Parser::new_from_str_with_options(text, parser_options(budget)) {
        let (event, span) = item.ok()?;
        events += 1;
        if events >= max_events {
            return None;
        }
        match event {
            Event::StreamStart | Event::StreamEnd | Event::Comment(..) => {}
            Event::DocumentStart(_, version) => {
                // Every document counts against the budget, empty ones too.
                documents += 1;
                if version.is_some() || documents >= budget.max_documents {
                    return None;
                }
                reader.root = None;
            }
            Event::DocumentEnd => reader.end_document(),
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                reader.scalar(value, style, &span)?;
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                if anchor != 0 || tag.is_some() || reader.stack.len() + 1 >= budget.max_depth {
                    return None;
                }
                let is_map = matches!(event, Event::MappingStart(..));
                reader.start(is_map, &span)?;
            }
            Event::SequenceEnd | Event::MappingEnd => reader.end()?,
            // Aliases, and events only other parser options ask for.
            _ => return None,
        }
    }
    Some(reader.docs)
}

/// The first tab that indents a block collection or a block mapping's key in `text` (which the
/// readers accepted): the 1-based stream position of the tab (`line_offset` lines before the
/// text), or `None`.
///
/// YAML indents block collections with spaces only, and kubectl's YAML reader refuses a tab
/// there, but the parser takes one after spaces for separation: `metadata:` then `  \tname: c`
/// would read as `metadata: {name: c}`. A tab elsewhere in a line's leading whitespace (a
/// block scalar's content, a quoted or plain scalar's continuation line, a flow collection, a
/// scalar value on its own line) is allowed and not reported. Only called for a text that holds
/// a tab.
pub(super) fn tab_indenting_block_node(text: &str, line_offset: usize) -> Option<Pos> {
    // One entry per open collection: (block style, is a mapping, children read so far).
    let mut stack: Vec<(bool, bool, usize)> = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for item in Parser::new_from_str(text) {
        let (event, span) = item.ok()?;
        let (starts_block, opens) = match &event {
            Event::Scalar(..) | Event::Alias(..) => (false, None),
            Event::SequenceStart(style, ..) | Event::MappingStart(style, ..) => {
                let block = matches!(style, serde_saphyr::granit_parser::StructureStyle::Block);
                (
                    block,
                    Some((block, matches!(event, Event::MappingStart(..)))),
                )
            }
            Event::SequenceEnd | Event::MappingEnd => {
                stack.pop();
                if let Some(parent) = stack.last_mut() {
                    parent.2 += 1;
                }
                continue;
            }
            _ => continue,
        };
        let in_block = stack.last().is_none_or(|p| p.0);
        let block_key = stack.last().is_some_and(|p| p.0 && p.1 && p.2 % 2 == 0);
        if in_block && (starts_block || block_key) {
            let line = lines.get(span.start.line().checked_sub(1)?)?;
            let mut before: String = line.chars().take(span.start.col()).collect();
            // A block sequence's event is at its first item, after the `-`, where a tab
            // separates (`- \ta`): only the indentation before its `-` is checked.
            if matches!(event, Event::SequenceStart(..)) {
                before = before
                    .chars()
                    .take_while(|c| matches!(c, ' ' | '\t'))
                    .collect();
            }
            if before.contains('\t') && before.chars().all(|c| matches!(c, ' ' | '\t' | '-')) {
                let column = before.chars().position(|c| c == '\t')? + 1;
                return Some(Pos {
                    line: span.start.line() + line_offset,
                    column,
                });
            }
        }
        match opens {
            Some((block, map)) => stack.push((block, map, 0)),
            None => {
                if let Some(parent) = stack.last_mut() {
                    parent.2 += 1;
                }
            }
        }
    }
    None
}

/// The parser options `serde-saphyr` gives the parser for `budget` (as its 2.2 releases build
/// them from a budget), so both readers accept exactly the same texts. A release that builds
/// them otherwise, or reads a scalar otherwise, fails this module's tests, which hold the two
/// readers to the same answers.
fn parser_options(budget: &serde_saphyr::Budget) -> Options {
    let mut options = Options::default();
    options.simple_key_max_lookahead = budget.simple_key_max_lookahead;
    options.flow_nesting_limit = budget.flow_nesting_limit;
    options.block_nesting_limit = options
        .block_nesting_limit
        .max(budget.max_depth.saturating_add(1));
    options.emit_comments = true;
    options.max_buffered_comment_events = budget.max_buffered_comment_events;
    options
}

/// A mapping or list being read.
enum Frame {
    Seq {
        items: Vec<Value>,
        /// This node's id in the spans.
        node: u32,
    },
    Map {
        map: Map<String, Value>,
        /// This node's id in the spans.
        node: u32,
        /// The key read, waiting for its value, with its position.
        key: Option<(String, Pos)>,
    },
}

struct Reader {
    docs: Vec<(Value, SpanIndex)>,
    stack: Vec<Frame>,
    /// The current document's value, once read.
    root: Option<Value>,
    spans: SpanIndex,
    /// An index written in decimal, the segment of a list item.
    index: String,
    line_offset: usize,
}

impl Reader {
    /// Where a node's event starts, as the serde reader's location gives it: 1-based line
    /// (plus the lines before the text) and 1-based column.
    fn pos(&self, span: &Span) -> Pos {
        let clamp = |n: usize| n.min(u32::MAX as usize);
        Pos {
            line: clamp(span.start.line()) + self.line_offset,
            column: clamp(span.start.col().saturating_add(1)),
        }
    }

    /// Enters the node that starts at `span`: records its span under its parent; returns its
    /// id. `None` when its parent is a mapping that awaits a key (a key that is a mapping or
    /// list).
    fn enter(&mut self, span: &Span, scalar: bool) -> Option<u32> {
        let value = self.pos(span);
        let (parent, segment, key) = match self.stack.last() {
            None => (None, "", None),
            Some(Frame::Seq { items, node }) => {
                self.index.clear();
                // Writing to a String cannot fail.
                let _ = write!(self.index, "{}", items.len());
                (Some(*node), self.index.as_str(), Some(value))
            }
            Some(Frame::Map { key: None, .. }) => return None,
            Some(Frame::Map {
                key: Some((name, at)),
                node,
                ..
            }) => (Some(*node), name.as_str(), Some(*at)),
        };
        Some(
            self.spans
                .push(parent, segment, NodeSpan { key, value, scalar }),
        )
    }

    /// Puts a finished node's value into its parent (or makes it the document). `None` when its
    /// key is already in the mapping: a duplicate key is the serde reader's to report.
    fn place(&mut self, value: Value) -> Option<()> {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => {
                let (name, _) = key.take()?;
                if map.insert(name, value).is_some() {
                    return None;
                }
            }
        }
        Some(())
    }

    fn scalar(&mut self, text: Cow<'_, str>, style: ScalarStyle, span: &Span) -> Option<()> {
        let plain = matches!(style, ScalarStyle::Plain);
        let at = self.pos(span);
        if let Some(Frame::Map {
            key: key @ None, ..
        }) = self.stack.last_mut()
        {
            // A key: only a string one, not a merge key (one already in the mapping is found
            // when its value is placed).
            if text == "<<" || (plain && !matches!(resolve_plain(&text)?, Plain::Str)) {
                return None;
            }
            *key = Some((text.into_owned(), at));
            return Some(());
        }
        let value = if plain {
            match resolve_plain(&text)? {
                Plain::Null => Value::Null,
                Plain::Bool(b) => Value::Bool(b),
                Plain::Number(n) => Value::Number(n),
                Plain::Str => Value::String(text.into_owned()),
            }
        } else {
            Value::String(text.into_owned())
        };
        self.enter(span, true)?;
        self.place(value)
    }

    fn start(&mut self, is_map: bool, span: &Span) -> Option<()> {
        let node = self.enter(span, false)?;
        self.stack.push(if is_map {
            Frame::Map {
                map: Map::new(),
                node,
                key: None,
            }
        } else {
            Frame::Seq {
                items: Vec::new(),
                node,
            }
        });
        Some(())
    }

    fn end(&mut self) -> Option<()> {
        let value = match self.stack.pop()? {
            Frame::Seq { items, .. } => Value::Array(items),
            Frame::Map { map, key: None, .. } => Value::Object(map),
            Frame::Map { key: Some(_), .. } => return None,
        };
        self.place(value)
    }

    fn end_document(&mut self) {
        let spans = std::mem::take(&mut self.spans);
        match self.root.take() {
            None | Some(Value::Null) => {}
            Some(value) => self.docs.push((value, spans)),
        }
    }
}

/// What a plain (unquoted, untagged) scalar means.
enum Plain {
    Null,
    Bool(bool),
    Number(Number),
    Str,
}

/// A plain scalar read as `serde-saphyr` reads one into a JSON value (YAML 1.2 core booleans),
/// for the spellings whose meaning is settled here; `None` for every other one (radix and
/// exponent forms, `.inf`, underscores, leading zeros, integers past 64 bits...), which the
/// serde reader resolves.
fn resolve_plain(text: &str) -> Option<Plain> {
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Some(Plain::Null);
    }
    let t = text.trim_matches([' ', '\t', '\r', '\n']);
    match t {
        "true" | "True" | "TRUE" => return Some(Plain::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Plain::Bool(false)),
        _ => {}
    }
    // A number starts with a digit, after at most one sign; the dot forms (`.5`, `.inf`) are
    // left to the serde reader.
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    match unsigned.as_bytes().first() {
        Some(b) if b.is_ascii_digit() => {}
        Some(b'.') => return None,
        _ => return Some(Plain::Str),
    }
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let negative = t.starts_with('-');
    let digits = t.strip_prefix('-').unwrap_or(t);
    if all_digits(digits)
        && (digits == "0" || !digits.starts_with('0'))
        && !(negative && digits == "0")
    {
        // A decimal integer without a redundant leading zero.
        return if negative {
            t.parse::<i64>().ok().map(|n| Plain::Number(n.into()))
        } else {
            t.parse::<u64>().ok().map(|n| Plain::Number(n.into()))
        };
    }
    if let Some((int, frac)) = digits.split_once('.')
        && all_digits(int)
        && all_digits(frac)
    {
        // A decimal fraction, read by the float parser the serde reader uses.
        return t
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Plain::Number);
    }
    // Radix prefixes, digit separators and every other float spelling are the serde reader's;
    // what is none of them is a string (`10.0.0.1`, `2024-01-01`, `80Gi`).
    let radix = matches!(
        unsigned.as_bytes(),
        [b'0', b'x' | b'X' | b'o' | b'O' | b'b' | b'B', ..]
    );
    if radix || t.contains('_') || t.parse::<f64>().is_ok() {
        return None;
    }
    Some(Plain::Str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both readers on `text` (within the default budgets, 3 lines before it); the event reader
    /// accepting it must mean the serde reader reads it to the same values and spans.
    fn agree(text: &str) -> bool {
        let budget = || crate::limits::Limits::default().budget(1);
        let fast = read(text, 3, &budget());
        let slow = super::super::read_serde(text, 3, budget());
        match (fast, slow) {
            (None, _) => false,
            (Some(fast), Ok(slow)) => {
                assert_eq!(fast, slow, "the readers disagree on {text:?}");
                true
            }
            (Some(_), Err(_)) => panic!("the event reader accepted {text:?}, serde refused it"),
        }
    }

    const MANIFEST: &str = "\
# a comment
apiVersion: nvcre.nvidia.com/v1alpha1
kind: WorkloadRun
metadata:
  name: nccl-64   # trailing comment
  labels: {team: ml, tier: \"1\"}
spec:
  replicas: 8
  ratio: 0.75
  enabled: true
  nothing:
  memory: 80Gi
  args: [-c, '--flag', \"quoted\\ttab\"]
  script: |
    line one
      line two
  folded: >-
    a
    b
  hosts:
    - 10.0.0.1
    - name: n1
      when: 2024-01-01
---
---
kind: Second
";

    #[test]
    fn a_plain_manifest_is_read_from_events_as_serde_reads_it() {
        assert!(agree(MANIFEST));
        let budget = crate::limits::Limits::default().budget(1);
        let docs = read(MANIFEST, 3, &budget).unwrap_or_default();
        assert_eq!(docs.len(), 2);
        let (value, spans) = &docs[0];
        assert_eq!(value["spec"]["replicas"], serde_json::json!(8));
        assert_eq!(value["spec"]["ratio"], serde_json::json!(0.75));
        assert_eq!(
            value["spec"]["args"],
            serde_json::json!(["-c", "--flag", "quoted\ttab"])
        );
        assert_eq!(
            value["spec"]["hosts"][1]["when"],
            serde_json::json!("2024-01-01")
        );
        assert_eq!(value["spec"]["nothing"], Value::Null);
        let path = crate::path::FieldPath::parse("spec.hosts[1].when").expect("a path");
        let at = spans
            .contains(&path)
            .then(|| (spans.lookup_key(&path), spans.lookup(&path)));
        assert_eq!(
            at,
            Some((
                Some(Pos {
                    line: 26,
                    column: 7
                }),
                Some(Pos {
                    line: 26,
                    column: 13
                })
            ))
        );
        let at = spans.sub(&path).span(0);
        assert_eq!(
            at,
            NodeSpan {
                key: Some(Pos {
                    line: 26,
                    column: 7
                }),
                value: Pos {
                    line: 26,
                    column: 13
                },
                scalar: true,
            }
        );
        assert_eq!(docs[1].0, serde_json::json!({"kind": "Second"}));
    }

    #[test]
    fn every_plain_scalar_spelling_reads_as_serde_reads_it_or_is_left_to_serde() {
        let accepted = [
            "abc",
            "80Gi",
            "500m",
            "-c",
            "--flag",
            "+x",
            "10.0.0.1",
            "1.2.3",
            "2024-01-01",
            "12:30",
            "24.03-py3",
            "0",
            "7",
            "42",
            "-7",
            "18446744073709551615",
            "1.5",
            "-0.25",
            "00.5",
            "true",
            "False",
            "TRUE",
            "yes",
            "on",
            "No",
            "null",
            "Null",
            "~",
            "nan",
            "inf",
            "-inf",
            "Infinity",
            "e5",
            "x1",
            "1a2c",
            "3 apples",
            "a:b",
        ];
        let refused = [
            "0x1F",
            "0o17",
            "0b101",
            "0X1F",
            "010",
            "-007",
            "-0",
            "+5",
            "1e3",
            "1E-2",
            "1_000",
            ".5",
            ".inf",
            "-.inf",
            ".nan",
            "+.nan",
            "99999999999999999999",
            "1.",
            "5.e2",
        ];
        for s in accepted {
            assert!(
                agree(&format!("v: {s}\n")),
                "{s:?} as a value is left to serde"
            );
        }
        for s in refused {
            assert!(
                !agree(&format!("v: {s}\n")),
                "{s:?} as a value is read from events"
            );
        }
        // Keys: only strings, never `<<`.
        assert!(agree("abc: 1\n'quoted': 2\n\"7\": 3\n-c: 4\n"));
        for key in ["7", "true", "null", "~", "1.5", "<<", "'<<'"] {
            assert!(
                !agree(&format!("{key}: 1\n")),
                "{key:?} as a key is read from events"
            );
        }
    }

    #[test]
    fn what_serde_must_settle_is_left_to_it() {
        for text in [
            "a: !!str 5\n",
            "a: &x 1\nb: *x\n",
            "base: &b {x: 1}\nc:\n  <<: *b\n",
            "a: 1\na: 2\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: [1, 2\n",
            "a:\n  - b\n c: d\n",
            "? [x]\n: 1\n",
            "!tag {a: 1}\n",
        ] {
            assert!(!agree(text), "{text:?} is read from events");
        }
    }

    #[test]
    fn a_text_near_the_budgets_is_left_to_serde() {
        let mut budget = crate::limits::Limits::default().budget(1);
        budget.max_nodes = 12;
        assert!(read("a: 1\nb: 2\n", 0, &budget).is_some());
        assert!(read("a: [1, 2, 3, 4, 5, 6, 7, 8]\n", 0, &budget).is_none());
        let mut budget = crate::limits::Limits::default().budget(1);
        budget.max_documents = 2;
        assert!(read("a: 1\n", 0, &budget).is_some());
        assert!(read("---\n---\na: 1\n", 0, &budget).is_none());
        let mut budget = crate::limits::Limits::default().budget(1);
        budget.max_total_scalar_bytes = 12;
        assert!(read("a: b\n", 0, &budget).is_some());
        assert!(read("a: \"bcd\\L\"\n", 0, &budget).is_none());
        let mut budget = crate::limits::Limits::default().budget(1);
        budget.max_depth = 3;
        assert!(read("a: {b: 1}\n", 0, &budget).is_some());
        assert!(read("a: {b: {c: 1}}\n", 0, &budget).is_none());
    }

    #[test]
    fn every_yaml_file_in_the_repository_reads_alike() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut stack = vec![root.clone()];
        let (mut files, mut read_fast) = (0, 0);
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if path.is_dir() {
                    if !name.starts_with('.') && name != "target" {
                        stack.push(path);
                    }
                } else if name.ends_with(".yaml") || name.ends_with(".yml") {
                    let Ok(text) = std::fs::read_to_string(&path) else {
                        continue;
                    };
                    files += 1;
                    read_fast += usize::from(agree(&text));
                }
            }
        }
        assert!(
            files > 50,
            "{files} YAML files found under {}",
            root.display()
        );
        assert!(
            read_fast > files / 2,
            "{read_fast} of {files} read from events"
        );
    }

    /// Plain scalars, quoted ones and the YAML punctuation they are built from.
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::string::string_regex("[a-z0-9.:/_+-]{0,8}")
                .unwrap_or_else(|_| unreachable!()),
            proptest::sample::select(vec![
                "0", "7", "-3", "1.5", "010", "0x1f", "1e3", ".inf", "~", "null", "true", "no",
                "'q'", "\"d\\n\"", "''", "1_0", "-", "-.5", "+1", "a b", "#x", "@x", "`x", "%x",
                "!x", "&a x", "*a", "? x", "[x]", "{x}", "|", ">", "x: y", "'", "\"",
            ])
            .prop_map(str::to_string),
        ]
    }

    /// A YAML-ish text: block mappings and lists of generated scalars, nested, with flow
    /// collections and several documents. Often not YAML at all, which must leave it to serde.
    fn text() -> impl Strategy<Value = String> {
        let line = (0usize..3, scalar(), scalar(), 0u8..5).prop_map(|(indent, k, v, shape)| {
            let pad = "  ".repeat(indent);
            match shape {
                0 => format!("{pad}{k}: {v}"),
                1 => format!("{pad}- {v}"),
                2 => format!("{pad}{k}:"),
                3 => format!("{pad}{k}: [{v}, {k}]"),
                _ => format!("{pad}- {k}: {v}"),
            }
        });
        proptest::collection::vec(prop_oneof![line, Just("---".to_string())], 1..12)
            .prop_map(|lines| lines.join("\n") + "\n")
    }

    /// A JSON value of strings, numbers, booleans and nulls in mappings and lists.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| Value::Number(n.into())),
            (-1e6f64..1e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
            scalar().prop_map(Value::String),
            proptest::string::string_regex("[ -~\\n\\t]{0,12}")
                .unwrap_or_else(|_| unreachable!())
                .prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::vec((scalar(), inner), 0..5)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_event_reader_reads_every_written_value_as_serde_does(
            values in proptest::collection::vec(json(), 1..3),
        ) {
            let written: Vec<(String, &Value)> = values
                .iter()
                .filter_map(|v| Some((super::super::to_yaml(v).ok()?, v)))
                .collect();
            let text: Vec<&str> = written.iter().map(|(t, _)| t.as_str()).collect();
            let text = text.join("---\n");
            if agree(&text) {
                // Read back, every written document is the value written (a null one is an
                // empty document, which is left out).
                let budget = crate::limits::Limits::default().budget(1);
                let read: Vec<Value> = read(&text, 0, &budget)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(v, _)| v)
                    .collect();
                let expected: Vec<Value> = written
                    .iter()
                    .map(|(_, v)| (*v).clone())
                    .filter(|v| !v.is_null())
                    .collect();
                prop_assert_eq!(read, expected);
            }
        }

        #[test]
        fn the_event_reader_reads_every_text_it_accepts_as_serde_does(text in text()) {
            agree(&text);
        }
    }
}
