//! [`SpanIndex`]: where every node of one document sits, looked up by field path.
//!
//! Nodes are kept as a tree, each with its parent and its own segment (its key, or its index
//! written in decimal, as a JSON pointer spells it), so what an index holds is linear in the
//! document. Before, every node kept its whole JSON pointer: a node under long keys nested deep
//! paid for all of them, and a 1.4 MB document of 20,000 leaves under 60 levels of 750-byte keys
//! held 900 MB of pointers.

use std::fmt::Write as _;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::{FieldPath, Pos};
use crate::path::Segment;

/// Where one node sits: the key of its mapping entry (if any) and the value itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodeSpan {
    pub(super) key: Option<Pos>,
    pub(super) value: Pos,
    pub(super) scalar: bool,
}

/// The table's hash of a node's 32-bit hash: both halves, so the bits the table takes for its
/// buckets and for its control bytes both vary.
fn table_hash(short: u32) -> u64 {
    (u64::from(short) << 32) | u64::from(short)
}

/// The parent of the root.
const NO_PARENT: u32 = u32::MAX;

/// One node: its parent, where its segment is in [`SpanIndex::segments`], and its span.
#[derive(Debug, Clone)]
struct Node {
    parent: u32,
    segment: (usize, usize),
    span: NodeSpan,
}

/// Field path → source position, for every node of one document.
///
/// Lookups take a [`FieldPath`]; a path that does not exist (a missing field) falls back to its
/// nearest existing ancestor, so a finding about an absent key points at the mapping that lacks it.
///
/// Serializable (for [`PreparedDocument`](super::PreparedDocument)): as a three-element
/// sequence `[segments, nodes, leading_zeros]`, the index as it is held. `segments` is every
/// node's segment (its key, or its index in decimal) one after another; `nodes` is one
/// `[parent, length, key line, key column, value line, value column, scalar]` per node in
/// document order (`parent` is the parent's place in `nodes` plus one, `0` for the root; `length`
/// the segment's bytes in `segments`; a key line of `0` for no key; `scalar` `0` or `1`);
/// `leading_zeros` is `[node, source text]` pairs in document order. Reading it back builds no
/// path: the build script writes the embedded rule files' indexes so, and every start reads
/// them. A form whose parents do not come before their children, or whose lengths overrun
/// `segments`, does not deserialize.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "SpanIndexForm", into = "SpanIndexForm")]
pub struct SpanIndex {
    /// The nodes, each after its parent.
    nodes: Vec<Node>,
    /// Every node's segment, one after another.
    segments: String,
    /// Node ids by parent and segment, each with 32 bits of its hash (so growing the table
    /// hashes no segment again); the hasher is seeded per process, and the per-document node
    /// budget bounds what one document holds.
    children: HashTable<(u32, u32)>,
    hasher: foldhash::fast::RandomState,
    /// The node and source text of each integer written with a redundant leading zero (`010`),
    /// in document order: YAML 1.1 tools read such a number as octal.
    leading_zeros: Vec<(u32, String)>,
}

impl SpanIndex {
    /// The hash of a node at `segment` under `parent`: 32 bits, kept in the table, and the
    /// table's 64-bit hash made of them.
    fn hash(&self, parent: u32, segment: &str) -> (u64, u32) {
        let short = (self.hasher.hash_one((parent, segment)) >> 32) as u32;
        (table_hash(short), short)
    }

    fn segment(&self, id: u32) -> &str {
        let (start, end) = self.nodes[id as usize].segment;
        &self.segments[start..end]
    }

    /// The node under `parent` (`None`: the root) whose segment is `segment`, when recorded.
    pub(super) fn child(&self, parent: Option<u32>, segment: &str) -> Option<u32> {
        let parent = parent.unwrap_or(NO_PARENT);
        let (hash, short) = self.hash(parent, segment);
        self.children
            .find(hash, |&(id, h)| {
                h == short
                    && self.nodes[id as usize].parent == parent
                    && self.segment(id) == segment
            })
            .map(|&(id, _)| id)
    }

    /// Records a node under `parent` (`None`: the root) at `segment`, after every node before
    /// it; returns its id. The segment is not looked for first: a duplicate key is an error of
    /// both readers, which give up the document (a lookup would find either node).
    pub(super) fn push(&mut self, parent: Option<u32>, segment: &str, span: NodeSpan) -> u32 {
        let parent = parent.unwrap_or(NO_PARENT);
        let (hash, short) = self.hash(parent, segment);
        // The node budget (at most a few hundred thousand) keeps ids far below `u32::MAX`.
        let id = u32::try_from(self.nodes.len()).unwrap_or(NO_PARENT - 1);
        let start = self.segments.len();
        self.segments.push_str(segment);
        self.nodes.push(Node {
            parent,
            segment: (start, self.segments.len()),
            span,
        });
        self.children
            .insert_unique(hash, (id, short), |&(_, h)| table_hash(h));
        id
    }

    /// Records that the integer of node `id` was written as `raw`, with a leading zero.
    pub(super) fn push_leading_zero(&mut self, id: u32, raw: String) {
        self.leading_zeros.push((id, raw));
    }

    /// The span of node `id`.
    pub(super) fn span(&self, id: u32) -> NodeSpan {
        self.nodes[id as usize].span
    }

    /// The node of `path` itself, or (`exact` false) of its nearest recorded ancestor.
    fn find(&self, path: &FieldPath, exact: bool) -> Option<u32> {
        let mut at = self.child(None, "")?;
        let mut index = String::new();
        for segment in path.segments() {
            let text = match segment {
                Segment::Key(k) => k.as_str(),
                Segment::Index(i) => {
                    index.clear();
                    // Writing to a String cannot fail.
                    let _ = write!(index, "{i}");
                    index.as_str()
                }
            };
            match self.child(Some(at), text) {
                Some(c) => at = c,
                None if exact => return None,
                None => break,
            }
        }
        Some(at)
    }

    /// The JSON pointer of node `id`.
    pub(super) fn pointer(&self, id: u32) -> String {
        let mut ids = Vec::new();
        let mut at = id;
        while at != NO_PARENT {
            ids.push(at);
            at = self.nodes[at as usize].parent;
        }
        // The root's segment is empty and has no `/`.
        let mut out = String::new();
        for &id in ids.iter().rev().skip(1) {
            out.push('/');
            out.push_str(&super::escape_pointer(self.segment(id)));
        }
        out
    }

    /// The position of `path`: the value for scalars, the key for mappings and lists written in
    /// block style (the value of those starts on a later line). Missing paths fall back to the
    /// nearest ancestor. `None` only when the index is empty.
    pub fn lookup(&self, path: &FieldPath) -> Option<Pos> {
        let span = self.span(self.find(path, false)?);
        Some(if span.scalar {
            span.value
        } else {
            span.key.unwrap_or(span.value)
        })
    }

    /// The position where the value at `path` starts, also for a mapping or list (whose
    /// [`SpanIndex::lookup`] is its key's): the `[` or `{` of a flow collection, the first
    /// entry of a block one. For a value whose type is wrong, where the wrong value is.
    pub fn lookup_value(&self, path: &FieldPath) -> Option<Pos> {
        Some(self.span(self.find(path, false)?).value)
    }

    /// The position of the key of `path`'s mapping entry (the name of a field rather than its
    /// value); falls back to [`SpanIndex::lookup`].
    pub fn lookup_key(&self, path: &FieldPath) -> Option<Pos> {
        self.find(path, true)
            .and_then(|id| self.span(id).key)
            .or_else(|| self.lookup(path))
    }

    /// True when `path` itself (not an ancestor) was present in the source.
    pub fn contains(&self, path: &FieldPath) -> bool {
        self.find(path, true).is_some()
    }

    /// The spans below `prefix`, re-rooted there (for an item of a `List` checked as a document
    /// of its own). Empty when `prefix` was not in the source.
    pub fn sub(&self, prefix: &FieldPath) -> SpanIndex {
        let mut out = SpanIndex::default();
        let Some(top) = self.find(prefix, true) else {
            return out;
        };
        // The new id of each node from `top` on (`new_id[id - top]`; nodes come after their
        // parents). Nodes are in document order, also when read back from the serialized form,
        // so a subtree is one run of nodes: the first node outside it ends it, and the items of
        // a `List` cost their own size, not the List's each.
        let mapped = |new_id: &[u32], id: u32| {
            id.checked_sub(top)
                .and_then(|i| new_id.get(i as usize))
                .copied()
                .filter(|&m| m != NO_PARENT)
        };
        let mut new_id: Vec<u32> = vec![out.push(None, "", self.span(top))];
        for id in top + 1..self.nodes.len() as u32 {
            match mapped(&new_id, self.nodes[id as usize].parent) {
                Some(parent) => {
                    new_id.push(out.push(Some(parent), self.segment(id), self.span(id)));
                }
                None => break,
            }
        }
        for (id, raw) in &self.leading_zeros {
            if let Some(new) = mapped(&new_id, *id) {
                out.leading_zeros.push((new, raw.clone()));
            }
        }
        out
    }

    /// The integers written with a redundant leading zero (`010`, read as 10) or in YAML 1.2's
    /// octal form (`0o17`, read as 15): each one's JSON pointer and source text, in document
    /// order.
    pub fn leading_zero_integers(&self) -> Vec<(String, &str)> {
        self.leading_zeros
            .iter()
            .map(|(id, raw)| (self.pointer(*id), raw.as_str()))
            .collect()
    }
}

/// Equal when they hold the same paths with the same spans and the same leading zeros, in
/// whatever order the nodes were recorded.
impl PartialEq for SpanIndex {
    fn eq(&self, other: &SpanIndex) -> bool {
        if self.nodes.len() != other.nodes.len()
            || self.leading_zero_integers() != other.leading_zero_integers()
        {
            return false;
        }
        // Each node's id in `other`, found from its parent's (parents come first).
        let mut theirs: Vec<u32> = Vec::with_capacity(self.nodes.len());
        for (id, node) in self.nodes.iter().enumerate() {
            let parent = (node.parent != NO_PARENT).then(|| theirs[node.parent as usize]);
            match other.child(parent, self.segment(id as u32)) {
                Some(t) if other.span(t) == node.span => theirs.push(t),
                _ => return false,
            }
        }
        true
    }
}

impl Eq for SpanIndex {}

/// One node of a serialized [`SpanIndex`]: parent + 1 (`0` for the root), segment length,
/// key line and column (line `0`: no key), value line and column, scalar (`0` or `1`).
type NodeForm = [usize; 7];

/// The serialized shape of a [`SpanIndex`] (see there).
#[derive(serde::Serialize, serde::Deserialize)]
struct SpanIndexForm(String, Vec<NodeForm>, Vec<(u32, String)>);

impl From<SpanIndex> for SpanIndexForm {
    fn from(index: SpanIndex) -> SpanIndexForm {
        let nodes = index
            .nodes
            .iter()
            .map(|n| {
                let parent = if n.parent == NO_PARENT {
                    0
                } else {
                    n.parent as usize + 1
                };
                let key = n.span.key.map_or((0, 0), |k| (k.line, k.column));
                [
                    parent,
                    n.segment.1 - n.segment.0,
                    key.0,
                    key.1,
                    n.span.value.line,
                    n.span.value.column,
                    usize::from(n.span.scalar),
                ]
            })
            .collect();
        SpanIndexForm(index.segments, nodes, index.leading_zeros)
    }
}

impl TryFrom<SpanIndexForm> for SpanIndex {
    type Error = String;

    fn try_from(form: SpanIndexForm) -> Result<SpanIndex, String> {
        let SpanIndexForm(segments, nodes, leading_zeros) = form;
        let mut index = SpanIndex::default();
        index.nodes.reserve(nodes.len());
        index.segments.reserve(segments.len());
        let mut at: usize = 0;
        for (id, [parent, len, key_line, key_column, line, column, scalar]) in
            nodes.into_iter().enumerate()
        {
            let segment = segments.get(at..at.saturating_add(len)).ok_or_else(|| {
                format!("node {id}: its segment of {len} bytes does not fit the segments")
            })?;
            at += len;
            let parent = match parent.checked_sub(1) {
                None => None,
                Some(p) if p < id => Some(p as u32),
                Some(p) => return Err(format!("node {id}: its parent {p} does not come first")),
            };
            let span = NodeSpan {
                key: (key_line > 0).then_some(Pos {
                    line: key_line,
                    column: key_column,
                }),
                value: Pos { line, column },
                scalar: scalar != 0,
            };
            index.push(parent, segment, span);
        }
        if at != segments.len() {
            return Err("the segments run past the last node".to_string());
        }
        for (id, raw) in leading_zeros {
            if id as usize >= index.nodes.len() {
                return Err(format!("leading zero of node {id}, which is not there"));
            }
            index.push_leading_zero(id, raw);
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(line: usize, scalar: bool) -> NodeSpan {
        NodeSpan {
            key: (line > 1).then_some(Pos { line, column: 1 }),
            value: Pos { line, column: 5 },
            scalar,
        }
    }

    /// `{a: {b/c: [x, y]}, "0": z}`, one node per line.
    fn index() -> SpanIndex {
        let mut s = SpanIndex::default();
        let root = s.push(None, "", span(1, false));
        let a = s.push(Some(root), "a", span(2, false));
        let bc = s.push(Some(a), "b/c", span(3, false));
        s.push(Some(bc), "0", span(4, true));
        let y = s.push(Some(bc), "1", span(5, true));
        s.push(Some(root), "0", span(6, true));
        s.push_leading_zero(y, "010".into());
        s
    }

    fn path(p: &str) -> FieldPath {
        FieldPath::parse(p).expect("parses")
    }

    #[test]
    fn lookups_walk_the_tree_and_fall_back_to_the_nearest_ancestor() {
        let s = index();
        assert_eq!(s.lookup(&path("a[\"b/c\"][1]")).map(|p| p.line), Some(5));
        assert_eq!(s.lookup(&path("a[\"b/c\"][7].x")).map(|p| p.line), Some(3));
        assert_eq!(s.lookup(&path("nothing.here")).map(|p| p.line), Some(1));
        // A key that spells a number is the same segment as an index.
        assert_eq!(
            s.lookup(&path("a[\"b/c\"][\"0\"]")).map(|p| p.line),
            Some(4)
        );
        assert_eq!(s.lookup(&path("[\"0\"]")).map(|p| p.line), Some(6));
        assert!(s.contains(&path("a[\"b/c\"]")));
        assert!(!s.contains(&path("a.b")));
        assert_eq!(
            s.lookup_key(&path("a")).map(|p| (p.line, p.column)),
            Some((2, 1))
        );
        assert_eq!(SpanIndex::default().lookup(&path("a")), None);
        assert_eq!(
            s.leading_zero_integers(),
            [("/a/b~1c/1".to_string(), "010")]
        );
    }

    #[test]
    fn sub_re_roots_below_a_prefix() {
        let s = index();
        let sub = s.sub(&path("a[\"b/c\"]"));
        assert_eq!(sub.lookup(&path("[1]")).map(|p| p.line), Some(5));
        assert_eq!(sub.lookup(&FieldPath::root()).map(|p| p.line), Some(3));
        assert_eq!(sub.leading_zero_integers(), [("/1".to_string(), "010")]);
        assert_eq!(sub.nodes.len(), 3);
        assert_eq!(s.sub(&path("missing")).nodes.len(), 0);
        // The same below the root: every node; and read back from the serialized form (nodes
        // in document order), the same subtrees.
        assert_eq!(s.sub(&FieldPath::root()), s);
        let back: SpanIndex =
            serde_json::from_str(&serde_json::to_string(&s).expect("serializes")).expect("reads");
        for p in ["a", "a[\"b/c\"]", "a[\"b/c\"][1]", "[\"0\"]"] {
            assert_eq!(back.sub(&path(p)), s.sub(&path(p)), "{p}");
        }
        // `/a-b` sorts between `/a` and `/a/x`.
        let mut t = SpanIndex::default();
        let root = t.push(None, "", span(1, false));
        let a = t.push(Some(root), "a", span(2, false));
        t.push(Some(a), "x", span(3, true));
        t.push(Some(root), "a-b", span(4, true));
        let back: SpanIndex =
            serde_json::from_str(&serde_json::to_string(&t).expect("serializes")).expect("reads");
        assert_eq!(
            back.sub(&path("a")).lookup(&path("x")).map(|p| p.line),
            Some(3)
        );
        assert_eq!(back.sub(&path("a")), t.sub(&path("a")));
        let a = s.sub(&path("a"));
        assert_eq!(a.nodes.len(), 4);
        assert_eq!(a.lookup(&path("[\"b/c\"][0]")).map(|p| p.line), Some(4));
    }

    #[test]
    fn the_serialized_form_is_the_index_as_held_and_reads_back_equal() {
        let s = index();
        let text = serde_json::to_string(&s).expect("serializes");
        assert_eq!(
            text,
            concat!(
                r#"["ab/c010",[[0,0,0,0,1,5,0],[1,1,2,1,2,5,0],[2,3,3,1,3,5,0],"#,
                r#"[3,1,4,1,4,5,1],[3,1,5,1,5,5,1],[1,1,6,1,6,5,1]],[[4,"010"]]]"#
            )
        );
        let back: SpanIndex = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back, s);
        assert_eq!(serde_json::to_string(&back).expect("serializes"), text);
        // Another span, or another node, is another index.
        let mut other = index();
        other.push(Some(0), "extra", span(9, true));
        assert_ne!(other, s);
        assert_ne!(s, other);
    }

    #[test]
    fn a_malformed_form_does_not_read() {
        let read = |text: &str| {
            serde_json::from_str::<SpanIndex>(text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            read(r#"["a",[[0,0,0,0,1,1,0],[1,1,0,0,2,1,1]],[]]"#),
            Ok(())
        );
        assert_eq!(
            read(r#"["a",[[0,0,0,0,1,1,0],[2,1,0,0,2,1,1]],[]]"#),
            Err("node 1: its parent 1 does not come first".to_string())
        );
        assert_eq!(
            read(r#"["a",[[0,0,0,0,1,1,0],[1,2,0,0,2,1,1]],[]]"#),
            Err("node 1: its segment of 2 bytes does not fit the segments".to_string())
        );
        assert_eq!(
            read(r#"["ab",[[0,0,0,0,1,1,0],[1,1,0,0,2,1,1]],[]]"#),
            Err("the segments run past the last node".to_string())
        );
        assert_eq!(
            read(r#"["",[[0,0,0,0,1,1,0]],[[1,"010"]]]"#),
            Err("leading zero of node 1, which is not there".to_string())
        );
        // A length that splits a character is refused too (`é` is two bytes).
        assert_eq!(
            read(r#"["é",[[0,0,0,0,1,1,0],[1,1,0,0,2,1,1]],[]]"#),
            Err("node 1: its segment of 1 bytes does not fit the segments".to_string())
        );
    }

    /// The memory of an index follows the document, not the depth times the key lengths.
    #[test]
    fn deep_long_keys_are_kept_once() {
        let mut s = SpanIndex::default();
        let mut at = s.push(None, "", span(1, false));
        let key = "k".repeat(1000);
        for line in 0..60 {
            at = s.push(Some(at), &key, span(line + 2, false));
        }
        for i in 0..20_000 {
            s.push(Some(at), &format!("a{i}"), span(100 + i, true));
        }
        let leaves: usize = (0..20_000).map(|i: usize| format!("a{i}").len()).sum();
        assert_eq!(s.segments.len(), 60 * 1000 + leaves);
        let deep = std::iter::repeat_n(key.as_str(), 60)
            .fold(FieldPath::root(), |p, k| p.key(k))
            .key("a19999");
        assert_eq!(s.lookup(&deep).map(|p| p.line), Some(20_099));
    }
}
