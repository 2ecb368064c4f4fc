//! Patches: recursive merge with lists merged by `name`, RFC 6902 JSON Patch, list prepend/append.
//!
//! The merge is the one Kubernetes users know from strategic merge patch, reduced to what
//! manifests without a Go schema can support: mappings recurse, `null` deletes a key, and a list
//! whose items (in both base and patch) are all mappings with a non-empty `name` merges by `name`
//! (base order kept, matched items merged recursively, new items appended). Any other value is
//! replaced. A caller can mark paths whose lists are always replaced (Kubeflow `trainer.env`,
//! `args`, `command` carry no patch metadata in the original schema).

use serde_json::Value;

use crate::error::Error;
use crate::path::{FieldPath, Segment};

/// Decides, per path, whether a list there is replaced wholesale even when its items are named.
pub trait ListPolicy {
    /// True when the list at `path` must be replaced, not merged by name.
    fn replace_list(&self, path: &FieldPath) -> bool;
}

/// Merge lists by name wherever their items are named.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeNamedLists;

impl ListPolicy for MergeNamedLists {
    fn replace_list(&self, _path: &FieldPath) -> bool {
        false
    }
}

/// Replace lists at the given paths (`*` matches any one key or index), merge the rest by name.
#[derive(Debug, Clone, Default)]
pub struct ReplaceListsAt {
    patterns: Vec<Vec<String>>,
}

impl ReplaceListsAt {
    /// Patterns in field-path notation, e.g. `spec.workload.trainJob.trainer.env`.
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(patterns: I) -> ReplaceListsAt {
        ReplaceListsAt {
            patterns: patterns
                .into_iter()
                .map(|p| p.as_ref().split('.').map(str::to_string).collect())
                .collect(),
        }
    }
}

impl ListPolicy for ReplaceListsAt {
    fn replace_list(&self, path: &FieldPath) -> bool {
        self.patterns.iter().any(|pat| {
            pat.len() == path.segments().len()
                && pat.iter().zip(path.segments()).all(|(p, s)| match s {
                    _ if p == "*" => true,
                    Segment::Key(k) => p == k,
                    Segment::Index(i) => p == &i.to_string(),
                })
        })
    }
}

/// Merges `patch` into `base` in place (see the module docs).
pub fn merge(base: &mut Value, patch: &Value, policy: &dyn ListPolicy) {
    merge_at(base, patch, policy, &mut FieldPath::root());
}

fn merge_at(base: &mut Value, patch: &Value, policy: &dyn ListPolicy, path: &mut FieldPath) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, pv) in p {
                if pv.is_null() {
                    b.remove(k);
                    continue;
                }
                let mut child = path.clone().key(k.clone());
                match b.get_mut(k) {
                    Some(bv) => merge_at(bv, pv, policy, &mut child),
                    None => {
                        let mut fresh = pv.clone();
                        strip_nulls(&mut fresh);
                        b.insert(k.clone(), fresh);
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(p))
            if !policy.replace_list(path) && all_named(b) && all_named(p) && !p.is_empty() =>
        {
            for pv in p {
                let name = item_name(pv);
                match b
                    .iter_mut()
                    .enumerate()
                    .find(|(_, bv)| item_name(bv) == name)
                {
                    Some((i, bv)) => {
                        let mut child = path.clone().index(i);
                        merge_at(bv, pv, policy, &mut child);
                    }
                    None => {
                        let mut fresh = pv.clone();
                        strip_nulls(&mut fresh);
                        b.push(fresh);
                    }
                }
            }
        }
        (b, p) => {
            let mut fresh = p.clone();
            strip_nulls(&mut fresh);
            *b = fresh;
        }
    }
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

fn item_name(v: &Value) -> Option<&str> {
    v.get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn all_named(items: &[Value]) -> bool {
    items.iter().all(|i| item_name(i).is_some())
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
/// [`Error::Patch`] when the patch is malformed or an operation fails (the document is left
/// unchanged: the library applies atomically).
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), Error> {
    let patch = parse_json_patch(ops)?;
    json_patch::patch(doc, &patch).map_err(|e| Error::Patch(e.to_string()))
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
    policy: &dyn ListPolicy,
) -> Result<(), Error> {
    let target = ensure_path(doc, path, Value::Object(serde_json::Map::new()))?;
    merge_at(target, value, policy, &mut path.clone());
    Ok(())
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

    #[test]
    fn named_lists_merge_by_name_and_null_deletes() {
        let mut base = json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}],
                                              "resources": {"limits": {"nvidia.com/gpu": "8"}}}]});
        let patch = json!({"containers": [{"name": "node", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "9"}],
                                           "resources": {"limits": {"nvidia.com/gpu": null, "x": 1}}}]});
        merge(&mut base, &patch, &MergeNamedLists);
        assert_eq!(
            base,
            json!({"containers": [{"name": "node", "env": [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}],
                                   "resources": {"limits": {"x": 1}}}]})
        );
    }

    #[test]
    fn unnamed_lists_and_policy_paths_are_replaced() {
        let mut base = json!({"args": ["a", "b"], "t": {"env": [{"name": "A", "value": "1"}]}});
        merge(
            &mut base,
            &json!({"args": ["c"], "t": {"env": [{"name": "B", "value": "2"}]}}),
            &ReplaceListsAt::new(["t.env"]),
        );
        assert_eq!(
            base,
            json!({"args": ["c"], "t": {"env": [{"name": "B", "value": "2"}]}})
        );
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

    #[test]
    fn prepend_creates_missing_lists() {
        let mut doc = json!({});
        let p = FieldPath::parse("spec.args").expect("path");
        insert_list(&mut doc, &p, vec![json!("b")], End::Back).expect("ok");
        insert_list(&mut doc, &p, vec![json!("a")], End::Front).expect("ok");
        assert_eq!(doc, json!({"spec": {"args": ["a", "b"]}}));
    }
}
