//! Patches: recursive merge with a list policy and strategic-merge directives, RFC 6902 JSON
//! Patch, list prepend/append.
//!
//! The merge is the one Kubernetes users know from strategic merge patch, reduced to what
//! manifests without a Go schema can support: mappings recurse, `null` deletes a key, and what a
//! list does is the caller's [`ListPolicy`]: the first of its rules whose path pattern matches
//! the list's path either replaces the list or merges it by a key field (base order kept,
//! matched items merged recursively, new items appended; when an item of base or patch lacks
//! the key, the list is replaced). A list no rule matches is replaced.
//!
//! The `$patch` directives of strategic merge patch are honoured and never reach the output:
//! `{$patch: replace, …}` as a mapping replaces the base mapping by the rest of it;
//! `{$patch: delete}` as a mapping deletes the key that holds it; in a merged list, an item
//! `{$patch: replace}` makes the patch's other items replace the list, and an item
//! `{<key>: v, $patch: delete}` deletes the base item whose key is `v`.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::path::{FieldPath, Segment};

/// The strategic-merge directive key.
pub const DIRECTIVE: &str = "$patch";

/// What a list does under a merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListMerge {
    /// The patch's list replaces the base list.
    Replace,
    /// Items merge by this key field (e.g. `name`, `mountPath`, `containerPort`).
    ByKey(String),
}

/// Path pattern → [`ListMerge`] rules, first match wins; a list no rule matches is replaced.
///
/// A pattern is a field path of dot-separated segments, where `*` matches any one key or index
/// and `**` any number (including none) of them: `**.volumeMounts`,
/// `spec.workload.trainJob.trainer.env`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPolicy {
    rules: Vec<(Vec<String>, ListMerge)>,
}

impl ListPolicy {
    /// No rules: every list is replaced.
    pub fn new() -> ListPolicy {
        ListPolicy::default()
    }

    /// Lists of items with a `name` merge by `name` wherever they are (the policy of the
    /// engine's own `merge` mutations).
    pub fn by_name() -> ListPolicy {
        ListPolicy::new().with("**", ListMerge::ByKey("name".to_string()))
    }

    /// Adds a rule after the existing ones.
    pub fn with(mut self, pattern: &str, merge: ListMerge) -> ListPolicy {
        self.rules
            .push((pattern.split('.').map(str::to_string).collect(), merge));
        self
    }

    /// What the list at `path` does: the first matching rule's merge, else [`ListMerge::Replace`].
    pub fn list_merge(&self, path: &FieldPath) -> &ListMerge {
        const REPLACE: &ListMerge = &ListMerge::Replace;
        self.rules
            .iter()
            .find(|(pat, _)| pattern_matches(pat, path.segments()))
            .map_or(REPLACE, |(_, m)| m)
    }
}

fn pattern_matches(pat: &[String], path: &[Segment]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((p, rest)) if p == "**" => {
            (0..=path.len()).any(|skip| pattern_matches(rest, &path[skip..]))
        }
        Some((p, rest)) => match path.split_first() {
            Some((seg, tail)) => {
                let hit = p == "*"
                    || match seg {
                        Segment::Key(k) => p == k,
                        Segment::Index(i) => *p == i.to_string(),
                    };
                hit && pattern_matches(rest, tail)
            }
            None => false,
        },
    }
}

/// A value of the base that a merge or patch removed or replaced by a different one.
#[derive(Debug, Clone, PartialEq)]
pub struct Displaced {
    /// Where the value was, in the paths the merge sees (starting at its `at`).
    pub path: FieldPath,
    /// The value as it was before the merge.
    pub before: Value,
    /// True when the value was deleted (`null`, `$patch: delete`, a JSON Patch `remove` or the
    /// source of a `move`); false when something else took its place.
    pub removed: bool,
}

/// Merges `patch` into `base` in place (see the module docs); list paths start at the root.
pub fn merge(base: &mut Value, patch: &Value, policy: &ListPolicy) {
    merge_at(base, patch, policy, &mut FieldPath::root(), &mut None);
}

/// [`merge`] for a `base` that sits at `at` in a larger document (the list paths the policy
/// sees start there).
pub fn merge_from(base: &mut Value, patch: &Value, policy: &ListPolicy, at: &FieldPath) {
    merge_at(base, patch, policy, &mut at.clone(), &mut None);
}

/// What a logged merge or patch changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeLog {
    /// Every base value deleted or replaced by a different value, in the order it happened.
    pub displaced: Vec<Displaced>,
    /// How many values were added where the base had none (a key, a list item).
    pub added: usize,
}

impl MergeLog {
    /// True when the merge changed the document.
    pub fn changed(&self) -> bool {
        self.added > 0 || !self.displaced.is_empty()
    }
}

/// [`merge_from`], recording in `log` every base value the merge deletes or replaces by a
/// different value, outermost first (a mapping that recurses records nothing of its own; a
/// list merged by key records the items it deletes and what changes inside the items it
/// merges), and counting what it adds.
pub fn merge_logged(
    base: &mut Value,
    patch: &Value,
    policy: &ListPolicy,
    at: &FieldPath,
    log: &mut MergeLog,
) {
    merge_at(base, patch, policy, &mut at.clone(), &mut Some(log));
}

type Log<'a> = Option<&'a mut MergeLog>;

fn record_added(log: &mut Log<'_>) {
    if let Some(log) = log {
        log.added += 1;
    }
}

/// Replaces `slot` by `new`, recording the old value when logging and it differs.
fn replace(slot: &mut Value, new: Value, path: &FieldPath, log: &mut Log<'_>) {
    let old = std::mem::replace(slot, new);
    if let Some(log) = log
        && old != *slot
    {
        log.displaced.push(Displaced {
            path: path.clone(),
            before: old,
            removed: false,
        });
    }
}

fn record_removed(old: Option<Value>, path: impl FnOnce() -> FieldPath, log: &mut Log<'_>) {
    if let (Some(log), Some(before)) = (log, old) {
        log.displaced.push(Displaced {
            path: path(),
            before,
            removed: true,
        });
    }
}

fn directive(v: &Value) -> Option<&str> {
    v.as_object()
        .and_then(|m| m.get(DIRECTIVE))
        .and_then(Value::as_str)
}

fn merge_at(
    base: &mut Value,
    patch: &Value,
    policy: &ListPolicy,
    path: &mut FieldPath,
    log: &mut Log<'_>,
) {
    match (base, patch) {
        (b, p) if directive(p) == Some("replace") => replace(b, fresh(p), path, log),
        (Value::Object(b), Value::Object(p)) => {
            for (k, pv) in p {
                if k == DIRECTIVE {
                    continue;
                }
                if pv.is_null() || directive(pv) == Some("delete") {
                    record_removed(b.remove(k), || path.clone().key(k.clone()), log);
                    continue;
                }
                let mut child = path.clone().key(k.clone());
                match b.get_mut(k) {
                    Some(bv) => merge_at(bv, pv, policy, &mut child, log),
                    None => {
                        b.insert(k.clone(), fresh(pv));
                        record_added(log);
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(p)) => match policy.list_merge(path) {
            ListMerge::ByKey(key) if !p.is_empty() && keyed(b, key) && keyed_patch(p, key) => {
                if p.iter().any(|i| lone_directive(i) == Some("replace")) {
                    let mut list = Value::Array(std::mem::take(b));
                    replace(&mut list, Value::Array(fresh_items(p)), path, log);
                    if let Value::Array(items) = list {
                        *b = items;
                    }
                    return;
                }
                for pv in p {
                    let id = item_key(pv, key);
                    let found = b.iter().position(|bv| item_key(bv, key) == id);
                    match found {
                        Some(i) if directive(pv) == Some("delete") => {
                            let old = b.remove(i);
                            record_removed(Some(old), || path.clone().index(i), log);
                        }
                        Some(i) => {
                            let mut child = path.clone().index(i);
                            merge_at(&mut b[i], pv, policy, &mut child, log);
                        }
                        None if directive(pv) == Some("delete") => {}
                        None => {
                            b.push(fresh(pv));
                            record_added(log);
                        }
                    }
                }
            }
            _ => {
                let mut list = Value::Array(std::mem::take(b));
                replace(&mut list, Value::Array(fresh_items(p)), path, log);
                if let Value::Array(items) = list {
                    *b = items;
                }
            }
        },
        (b, p) => replace(b, fresh(p), path, log),
    }
}

/// A patch value as written into the output where nothing is merged: `null` entries and
/// directive keys dropped, `$patch: delete` mappings and lone `$patch` list items removed.
pub fn fresh(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, x)| {
                    k.as_str() != DIRECTIVE && !x.is_null() && directive(x) != Some("delete")
                })
                .map(|(k, x)| (k.clone(), fresh(x)))
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(fresh_items(items)),
        other => other.clone(),
    }
}

fn fresh_items(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .filter(|i| directive(i) != Some("delete") && lone_directive(i).is_none())
        .map(fresh)
        .collect()
}

/// Removes every `null` mapping entry, recursively. (A `null` in a patch means "delete"; where
/// there is nothing to delete it must not appear. The API server likewise treats a `null` field
/// of a manifest as absent.)
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// The key of a list item: a non-null, non-empty-string value of field `key`.
fn item_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)
        .filter(|k| !k.is_null() && k.as_str() != Some(""))
}

fn keyed(items: &[Value], key: &str) -> bool {
    items.iter().all(|i| item_key(i, key).is_some())
}

/// Patch items are keyed, except lone `{$patch: replace}` items.
fn keyed_patch(items: &[Value], key: &str) -> bool {
    items
        .iter()
        .all(|i| item_key(i, key).is_some() || lone_directive(i) == Some("replace"))
}

/// The directive of an item that is nothing but `{$patch: …}`.
fn lone_directive(v: &Value) -> Option<&str> {
    directive(v).filter(|_| v.as_object().is_some_and(|m| m.len() == 1))
}

/// Parses an RFC 6902 JSON Patch given as a JSON array (or a string holding one).
///
/// # Errors
/// [`Error::Patch`] naming what is malformed.
pub fn parse_json_patch(ops: &Value) -> Result<json_patch::Patch, Error> {
    let parsed: Value;
    let ops = match ops {
        Value::String(s) => {
            parsed = serde_json::from_str(s)
                .map_err(|e| Error::Patch(format!("JSON Patch string is not JSON: {e}")))?;
            &parsed
        }
        other => other,
    };
    serde_json::from_value(ops.clone())
        .map_err(|e| Error::Patch(format!("malformed JSON Patch: {e}")))
}

/// Applies an RFC 6902 JSON Patch given as a JSON array (or a string holding one).
///
/// # Errors
/// [`Error::Patch`] when the patch is malformed or an operation fails; the document is then
/// left unchanged. The operations apply to a copy, swapped in when all of them applied: the
/// library's own all-or-nothing `patch` undoes the operations before a failing one, and its undo
/// panics where it cannot (an `add` whose value a failing `move` took).
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), Error> {
    let patch = parse_json_patch(ops)?;
    let mut work = doc.clone();
    json_patch::patch_unsafe(&mut work, &patch).map_err(|e| Error::Patch(e.to_string()))?;
    *doc = work;
    Ok(())
}

/// [`json_patch()`] of a document that sits at `at` in a larger one, recording in `log` every
/// value an operation removes (`remove`, the source of a `move`) or replaces by a different one
/// (`replace`, and `add`, `move` or `copy` onto an existing mapping key). Operations apply in
/// order, each seeing the result of the previous ones. A patch that changes the document
/// without displacing a value counts as one addition.
///
/// # Errors
/// As [`json_patch()`]: nothing is applied or recorded when an operation fails.
pub fn json_patch_logged(
    doc: &mut Value,
    ops: &Value,
    at: &FieldPath,
    log: &mut MergeLog,
) -> Result<(), Error> {
    use json_patch::PatchOperation as Op;
    let patch = parse_json_patch(ops)?;
    let mut work = doc.clone();
    let mut found = Vec::new();
    for (i, op) in patch.0.iter().enumerate() {
        // (pointer, removed): what this operation takes away, read before it applies. `add`,
        // `move` and `copy` take a value only where they write over a mapping member (into a
        // list they insert).
        let mut taken: Vec<(&str, bool)> = Vec::new();
        match op {
            Op::Remove(o) => taken.push((o.path.as_str(), true)),
            Op::Replace(o) => taken.push((o.path.as_str(), false)),
            Op::Move(o) => {
                taken.push((o.from.as_str(), true));
                if writes_member(&work, o.path.as_str()) {
                    taken.push((o.path.as_str(), false));
                }
            }
            Op::Add(o) if writes_member(&work, o.path.as_str()) => {
                taken.push((o.path.as_str(), false));
            }
            Op::Copy(o) if writes_member(&work, o.path.as_str()) => {
                taken.push((o.path.as_str(), false));
            }
            Op::Add(_) | Op::Copy(_) | Op::Test(_) => {}
        }
        let before: Vec<(FieldPath, Value, bool, &str)> = taken
            .into_iter()
            .filter_map(|(ptr, removed)| {
                let old = work.pointer(ptr)?.clone();
                Some((pointer_path(&work, ptr, at), old, removed, ptr))
            })
            .collect();
        // Applied one at a time: the error names the operation's index in the whole patch.
        json_patch::patch(&mut work, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            Error::Patch(e.to_string())
        })?;
        for (path, old, removed, ptr) in before {
            if removed || work.pointer(ptr) != Some(&old) {
                found.push(Displaced {
                    path,
                    before: old,
                    removed,
                });
            }
        }
    }
    if found.is_empty() && work != *doc {
        log.added += 1;
    }
    *doc = work;
    log.displaced.extend(found);
    Ok(())
}

/// Whether `ptr` names a mapping member that exists (writing there replaces it).
fn writes_member(doc: &Value, ptr: &str) -> bool {
    let Some((parent, _)) = ptr.rsplit_once('/') else {
        return false;
    };
    doc.pointer(parent).is_some_and(Value::is_object) && doc.pointer(ptr).is_some()
}

/// The field path of JSON Pointer `ptr` in `doc` (a token is a list index where its parent is
/// a list), under `at`.
fn pointer_path(doc: &Value, ptr: &str, at: &FieldPath) -> FieldPath {
    let mut path = at.clone();
    let mut cur = Some(doc);
    for raw in ptr.split('/').skip(1) {
        let token = crate::source::unescape_pointer(raw);
        match cur {
            Some(Value::Array(items)) => match token.parse::<usize>() {
                Ok(i) => {
                    cur = items.get(i);
                    path = path.index(i);
                }
                Err(_) => {
                    cur = None;
                    path = path.key(token);
                }
            },
            Some(v) => {
                cur = v.get(token.as_ref());
                path = path.key(token);
            }
            None => path = path.key(token),
        }
    }
    path
}

/// Where [`insert_list`] puts new items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Before the existing items.
    Front,
    /// After the existing items.
    Back,
}

/// Prepends or appends `items` to the list at `path`, creating the list (and missing parent
/// mappings) when absent.
///
/// # Errors
/// [`Error::Patch`] when something on the path is not a mapping, or the target is not a list.
pub fn insert_list(
    doc: &mut Value,
    path: &FieldPath,
    items: Vec<Value>,
    end: End,
) -> Result<(), Error> {
    let target = ensure_path(doc, path, Value::Array(Vec::new()))?;
    let list = target
        .as_array_mut()
        .ok_or_else(|| Error::Patch(format!("{path} is not a list")))?;
    match end {
        End::Back => list.extend(items),
        End::Front => {
            let old = std::mem::take(list);
            list.extend(items);
            list.extend(old);
        }
    }
    Ok(())
}

/// Merges `value` at `path` (see [`merge`]), creating missing parent mappings.
///
/// # Errors
/// [`Error::Patch`] when something on the path is not a mapping.
pub fn merge_at_path(
    doc: &mut Value,
    path: &FieldPath,
    value: &Value,
    policy: &ListPolicy,
) -> Result<(), Error> {
    let target = ensure_path(doc, path, Value::Object(serde_json::Map::new()))?;
    merge_at(target, value, policy, &mut path.clone(), &mut None);
    Ok(())
}

/// True when [`merge_at_path`] of `path` into `doc` succeeds whatever the value merged: every
/// step of the path that exists is a mapping (or null) for a key and a list long enough for an
/// index, and every step past the first one missing is a key (mappings are created; an index
/// into one is not there).
pub(crate) fn merge_applies(doc: &Value, path: &FieldPath) -> bool {
    let segments = path.segments();
    let created_from = |i: usize| segments[i..].iter().all(|s| matches!(s, Segment::Key(_)));
    let mut cur = doc;
    for (i, seg) in segments.iter().enumerate() {
        cur = match seg {
            Segment::Key(k) => match cur {
                Value::Null => return created_from(i),
                Value::Object(m) => match m.get(k) {
                    Some(next) => next,
                    None => return created_from(i + 1),
                },
                _ => return false,
            },
            Segment::Index(idx) => match cur.as_array().and_then(|a| a.get(*idx)) {
                Some(next) => next,
                None => return false,
            },
        };
    }
    true
}

fn ensure_path<'a>(
    doc: &'a mut Value,
    path: &FieldPath,
    leaf: Value,
) -> Result<&'a mut Value, Error> {
    let mut cur = doc;
    let n = path.segments().len();
    for (i, seg) in path.segments().iter().enumerate() {
        let last = i + 1 == n;
        cur = match seg {
            Segment::Key(k) => {
                if cur.is_null() {
                    *cur = Value::Object(serde_json::Map::new());
                }
                let m = cur
                    .as_object_mut()
                    .ok_or_else(|| Error::Patch(format!("{path}: {k:?} is under a non-mapping")))?;
                m.entry(k.clone()).or_insert_with(|| {
                    if last {
                        leaf.clone()
                    } else {
                        Value::Object(serde_json::Map::new())
                    }
                })
            }
            Segment::Index(idx) => cur
                .as_array_mut()
                .and_then(|a| a.get_mut(*idx))
                .ok_or_else(|| Error::Patch(format!("{path}: index {idx} does not exist")))?,
        };
        if cur.is_null() && last {
            *cur = leaf.clone();
        }
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `merge_applies` says beforehand exactly what `merge_at_path` then does.
    #[test]
    fn merge_applies_agrees_with_the_merge() {
        let docs = [
            json!({}),
            json!(null),
            json!({"a": null}),
            json!({"a": "s"}),
            json!({"a": {"b": 1}}),
            json!({"a": [{"b": 1}]}),
            json!({"a": []}),
        ];
        let paths = [
            "a", "a.b", "a.b.c", "a[0]", "a[0].b", "a[1]", "a.b[0]", "x.y[0]",
        ];
        for doc in &docs {
            for text in paths {
                let path = FieldPath::parse(text).expect("path");
                let mut merged = doc.clone();
                let applied =
                    merge_at_path(&mut merged, &path, &json!({"k": 1}), &ListPolicy::by_name());
                assert_eq!(
                    merge_applies(doc, &path),
                    applied.is_ok(),
                    "{doc} {text}: {applied:?}"
                );
            }
        }
    }

    fn displaced(path: &str, before: Value, removed: bool) -> Displaced {
        Displaced {
            path: FieldPath::parse(path).expect("path"),
            before,
            removed,
        }
    }

    #[test]
    fn merge_logged_records_what_it_deletes_and_replaces_not_what_it_keeps_or_adds() {
        let mut base = json!({"containers": [
            {"name": "node", "image": "a", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "1Gi"}}},
            {"name": "side", "image": "s"}],
            "args": ["x"], "meta": {"k": "v"}});
        let patch = json!({"containers": [
            {"name": "node", "image": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
             "resources": {"limits": {"nvidia.com/gpu": null, "memory": "2Gi", "cpu": "1"}}},
            {"name": "side", "$patch": "delete"}],
            "args": ["y"], "meta": {"$patch": "delete"}});
        let mut log = MergeLog::default();
        let at = FieldPath::root().key("spec");
        merge_logged(&mut base, &patch, &ListPolicy::by_name(), &at, &mut log);
        // Added: env C, limits.cpu.
        assert_eq!(log.added, 2);
        assert_eq!(
            log.displaced,
            vec![
                displaced("spec.containers[0].env[1].value", json!("2"), false),
                displaced(
                    "spec.containers[0].resources.limits[\"nvidia.com/gpu\"]",
                    json!("8"),
                    true
                ),
                displaced(
                    "spec.containers[0].resources.limits.memory",
                    json!("1Gi"),
                    false
                ),
                displaced(
                    "spec.containers[1]",
                    json!({"name": "side", "image": "s"}),
                    true
                ),
                displaced("spec.args", json!(["x"]), false),
                displaced("spec.meta", json!({"k": "v"}), true),
            ]
        );
        // The same merge unlogged gives the same document.
        let mut again = json!({"containers": [
            {"name": "node", "image": "a", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
             "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "1Gi"}}},
            {"name": "side", "image": "s"}],
            "args": ["x"], "meta": {"k": "v"}});
        merge(&mut again, &patch, &ListPolicy::by_name());
        assert_eq!(again, base);
    }

    #[test]
    fn merge_logged_records_a_replace_directive_and_an_equal_list_not() {
        let mut base = json!({"m": {"a": 1}, "l": [1, 2]});
        let mut log = MergeLog::default();
        merge_logged(
            &mut base,
            &json!({"m": {"$patch": "replace", "b": 2}, "l": [1, 2]}),
            &ListPolicy::new(),
            &FieldPath::root(),
            &mut log,
        );
        assert_eq!(base, json!({"m": {"b": 2}, "l": [1, 2]}));
        assert_eq!(log.displaced, vec![displaced("m", json!({"a": 1}), false)]);
        assert_eq!(log.added, 0);
    }

    #[test]
    fn json_patch_logged_records_removed_and_overwritten_values_in_order() {
        let mut doc = json!({"labels": {"a/b": "1", "c": "2", "d": "3"}, "args": ["x", "y"]});
        let ops = json!([
            {"op": "remove", "path": "/labels/a~1b"},
            {"op": "replace", "path": "/args/1", "value": "z"},
            {"op": "replace", "path": "/labels/c", "value": "2"},
            {"op": "add", "path": "/args/0", "value": "w"},
            {"op": "add", "path": "/labels/d", "value": "4"},
            {"op": "move", "from": "/labels/c", "path": "/labels/e"},
        ]);
        let mut log = MergeLog::default();
        let at = FieldPath::root().key("spec");
        json_patch_logged(&mut doc, &ops, &at, &mut log).expect("applies");
        assert_eq!(
            doc,
            json!({"labels": {"d": "4", "e": "2"}, "args": ["w", "x", "z"]})
        );
        assert_eq!(
            log.displaced,
            vec![
                displaced("spec.labels[\"a/b\"]", json!("1"), true),
                displaced("spec.args[1]", json!("y"), false),
                displaced("spec.labels.d", json!("3"), false),
                displaced("spec.labels.c", json!("2"), true),
            ]
        );
    }

    #[test]
    fn json_patch_logged_applies_and_records_nothing_when_an_operation_fails() {
        let mut doc = json!({"a": 1});
        let ops = json!([{"op": "remove", "path": "/a"}, {"op": "remove", "path": "/missing"}]);
        let mut log = MergeLog::default();
        let err = json_patch_logged(&mut doc, &ops, &FieldPath::root(), &mut log).unwrap_err();
        assert!(matches!(err, Error::Patch(_)), "{err:?}");
        assert_eq!(doc, json!({"a": 1}));
        assert_eq!(log, MergeLog::default());
        // A patch that only adds is a change without a displaced value.
        let ops = json!([{"op": "add", "path": "/b", "value": 2}]);
        json_patch_logged(&mut doc, &ops, &FieldPath::root(), &mut log).expect("applies");
        assert!(log.changed());
        assert_eq!(log.displaced, Vec::new());
    }

    #[test]
    fn named_lists_merge_by_name_and_null_deletes() {
        let mut base = json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}],
                                              "resources": {"limits": {"nvidia.com/gpu": "8"}}}]});
        let patch = json!({"containers": [{"name": "node", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "9"}],
                                           "resources": {"limits": {"nvidia.com/gpu": null, "x": 1}}}]});
        merge(&mut base, &patch, &ListPolicy::by_name());
        assert_eq!(
            base,
            json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}],
                                   "resources": {"limits": {"x": 1}}}]})
        );
    }

    #[test]
    fn the_first_matching_rule_decides_and_unmatched_lists_are_replaced() {
        let policy = ListPolicy::new()
            .with("t.env", ListMerge::Replace)
            .with("**.env", ListMerge::ByKey("name".into()));
        let mut base = json!({"args": [{"name": "a"}], "t": {"env": [{"name": "A", "value": "1"}]},
                              "u": {"env": [{"name": "A", "value": "1"}]}});
        merge(
            &mut base,
            &json!({"args": [{"name": "c"}], "t": {"env": [{"name": "B", "value": "2"}]},
                    "u": {"env": [{"name": "B", "value": "2"}]}}),
            &policy,
        );
        assert_eq!(
            base,
            json!({"args": [{"name": "c"}], "t": {"env": [{"name": "B", "value": "2"}]},
                   "u": {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}})
        );
    }

    #[test]
    fn lists_merge_by_their_key_field_and_unkeyed_items_replace() {
        let policy = ListPolicy::new()
            .with("**.volumeMounts", ListMerge::ByKey("mountPath".into()))
            .with("**.ports", ListMerge::ByKey("containerPort".into()));
        let mut base = json!({"c": {"volumeMounts": [{"name": "a", "mountPath": "/a"}],
                                    "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 22}]}});
        merge(
            &mut base,
            &json!({"c": {"volumeMounts": [{"name": "b", "mountPath": "/a"}, {"name": "a", "mountPath": "/b"}],
                          "ports": [{"containerPort": 80, "protocol": "TCP"}]}}),
            &policy,
        );
        assert_eq!(
            base,
            json!({"c": {"volumeMounts": [{"name": "b", "mountPath": "/a"}, {"name": "a", "mountPath": "/b"}],
                         "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 22}]}})
        );
        // A patch item without the key: the list is replaced.
        merge(
            &mut base,
            &json!({"c": {"ports": [{"name": "x"}]}}),
            &policy,
        );
        assert_eq!(base["c"]["ports"], json!([{"name": "x"}]));
    }

    #[test]
    fn patch_replace_item_replaces_the_list() {
        let mut base = json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]});
        merge(
            &mut base,
            &json!({"env": [{"$patch": "replace"}, {"name": "C", "value": "3"}]}),
            &ListPolicy::by_name(),
        );
        assert_eq!(base, json!({"env": [{"name": "C", "value": "3"}]}));
    }

    #[test]
    fn patch_delete_item_deletes_the_keyed_item() {
        let mut base = json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]});
        merge(
            &mut base,
            &json!({"env": [{"name": "A", "$patch": "delete"}, {"name": "Z", "$patch": "delete"},
                            {"name": "B", "value": "9"}]}),
            &ListPolicy::by_name(),
        );
        assert_eq!(base, json!({"env": [{"name": "B", "value": "9"}]}));
    }

    #[test]
    fn patch_replace_map_replaces_the_mapping() {
        let mut base = json!({"resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
                              "env": [{"name": "A", "value": "1", "valueFrom": {"x": 1}}]});
        merge(
            &mut base,
            &json!({"resources": {"limits": {"$patch": "replace", "cpu": "4"}},
                    "env": [{"name": "A", "value": "2", "$patch": "replace"}]}),
            &ListPolicy::by_name(),
        );
        assert_eq!(
            base,
            json!({"resources": {"limits": {"cpu": "4"}}, "env": [{"name": "A", "value": "2"}]})
        );
    }

    #[test]
    fn patch_delete_map_deletes_the_key() {
        let mut base = json!({"resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}});
        merge(
            &mut base,
            &json!({"resources": {"limits": {"$patch": "delete"}}}),
            &ListPolicy::by_name(),
        );
        assert_eq!(base, json!({"resources": {"requests": {"cpu": "1"}}}));
    }

    #[test]
    fn directives_never_reach_the_output() {
        let mut base = json!({"a": 1, "l": ["x"]});
        merge(
            &mut base,
            &json!({"$patch": "merge", "new": {"$patch": "replace", "k": {"$patch": "delete"}, "v": 1},
                    "gone": {"$patch": "delete"},
                    "l": [{"$patch": "replace"}, {"name": "n", "m": {"$patch": "merge", "z": null}},
                          {"name": "d", "$patch": "delete"}]}),
            &ListPolicy::by_name(),
        );
        assert_eq!(
            base,
            json!({"a": 1, "l": [{"name": "n", "m": {}}], "new": {"v": 1}})
        );
    }

    #[test]
    fn merge_from_sees_paths_under_its_start() {
        let policy = ListPolicy::new().with("jobTemplate.env", ListMerge::ByKey("name".into()));
        let mut base = json!({"env": [{"name": "A", "value": "1"}]});
        let at = FieldPath::parse("jobTemplate").expect("path");
        merge_from(
            &mut base,
            &json!({"env": [{"name": "B", "value": "2"}]}),
            &policy,
            &at,
        );
        assert_eq!(
            base,
            json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]})
        );
        merge(
            &mut base,
            &json!({"env": [{"name": "C", "value": "3"}]}),
            &policy,
        );
        assert_eq!(base, json!({"env": [{"name": "C", "value": "3"}]}));
    }

    #[test]
    fn json_patch_accepts_array_or_string_and_escaped_keys() {
        let mut doc = json!({"labels": {"kai.scheduler/queue": "q", "a": "b"}});
        json_patch(
            &mut doc,
            &json!("[{\"op\":\"remove\",\"path\":\"/labels/kai.scheduler~1queue\"}]"),
        )
        .expect("applies");
        assert_eq!(doc, json!({"labels": {"a": "b"}}));
        let err = json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).unwrap_err();
        assert!(err.to_string().starts_with("patch error:"), "{err}");
    }

    /// A patch whose later operation fails leaves the document as it was, also where undoing
    /// the earlier operations cannot work (the library's undo panicked on this one).
    #[test]
    fn a_failing_patch_leaves_the_document_as_it_was() {
        let mut doc = json!({"metadata": {"name": "a"}});
        let ops = json!([
            {"op": "add", "path": "/metadata/x", "value": 1},
            {"op": "move", "from": "/metadata/x", "path": "/nope/y"}
        ]);
        let err = json_patch(&mut doc, &ops).unwrap_err();
        assert_eq!(
            err.to_string(),
            "patch error: operation '/1' failed at path '/nope/y': path is invalid"
        );
        assert_eq!(doc, json!({"metadata": {"name": "a"}}));
    }

    #[test]
    fn prepend_creates_missing_lists() {
        let mut doc = json!({});
        let p = FieldPath::parse("spec.args").expect("path");
        insert_list(&mut doc, &p, vec![json!("b")], End::Back).expect("ok");
        insert_list(&mut doc, &p, vec![json!("a")], End::Front).expect("ok");
        assert_eq!(doc, json!({"spec": {"args": ["a", "b"]}}));
    }
}
