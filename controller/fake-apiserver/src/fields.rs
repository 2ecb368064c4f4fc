//! Field ownership for server-side apply, kept in `metadata.managedFields` as `FieldsV1`.
//!
//! Simplified from the API server's structured-merge-diff: ownership is tracked on leaves only
//! (scalars, empty maps, atomic lists); a list whose items all carry `name` (or else `uid`) is a
//! keyed list (`k:{"name":"x"}`), any other list is atomic. No per-type schema is consulted.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One path component in `FieldsV1` notation: `f:data` or `k:{"name":"x"}`.
pub type Path = Vec<String>;
/// A set of owned leaf paths.
pub type FieldSet = BTreeSet<Path>;

/// Which part of an object an operation manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything but `status` (and system metadata).
    Main,
    /// `status` only (the status subresource).
    Status,
    /// Everything but system metadata (types without a status subresource).
    Whole,
}

const META_TRACKED: [&str; 4] = ["labels", "annotations", "ownerReferences", "finalizers"];

fn list_key(items: &[Value]) -> Option<&'static str> {
    if items.is_empty() {
        return None;
    }
    ["name", "uid"]
        .into_iter()
        .find(|k| items.iter().all(|i| i.get(k).is_some_and(Value::is_string)))
}

fn key_component(key: &str, item: &Value) -> String {
    format!("k:{}", json!({ key: item[key] }))
}

fn leaves_at(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                prefix.push(format!("f:{k}"));
                leaves_at(c, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => match list_key(items) {
            Some(key) => {
                for item in items {
                    prefix.push(key_component(key, item));
                    leaves_at(item, prefix, out);
                    prefix.pop();
                }
            }
            None => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The owned-able leaf paths of `obj` for `part`.
pub fn leaves(obj: &Value, part: Part) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(m) = obj.as_object() else {
        return out;
    };
    for (k, v) in m {
        let mut prefix = vec![format!("f:{k}")];
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for mk in META_TRACKED {
                    if let Some(mv) = v.get(mk) {
                        let mut p = vec![prefix[0].clone(), format!("f:{mk}")];
                        leaves_at(mv, &mut p, &mut out);
                    }
                }
            }
            "status" if part == Part::Main => {}
            _ if part == Part::Status && k != "status" => {}
            _ => leaves_at(v, &mut prefix, &mut out),
        }
    }
    out
}

/// The value at a path, if present.
pub fn get<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for c in path {
        cur = if let Some(f) = c.strip_prefix("f:") {
            cur.as_object()?.get(f)?
        } else {
            let want: Value = serde_json::from_str(c.strip_prefix("k:")?).ok()?;
            let (k, v) = want.as_object()?.iter().next()?;
            cur.as_array()?.iter().find(|i| i.get(k) == Some(v))?
        };
    }
    Some(cur)
}

/// Removes the value at `path`, dropping maps and keyed-list items the removal empties.
pub fn remove(obj: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if let Some(f) = first.strip_prefix("f:") {
        let Some(m) = obj.as_object_mut() else { return };
        if rest.is_empty() {
            m.remove(f);
        } else if let Some(child) = m.get_mut(f) {
            remove(child, rest);
            if child.as_object().is_some_and(Map::is_empty)
                || child.as_array().is_some_and(Vec::is_empty)
            {
                m.remove(f);
            }
        }
    } else if let Some(Value::Object(want)) = first
        .strip_prefix("k:")
        .and_then(|k| serde_json::from_str(k).ok())
        && let Some((k, v)) = want.iter().next()
        && let Some(items) = obj.as_array_mut()
        && let Some(i) = items.iter().position(|i| i.get(k) == Some(v))
    {
        if rest.is_empty() {
            items.remove(i);
        } else {
            remove(&mut items[i], rest);
            // An item left with only its key (or nothing) was owned by no one else.
            if items[i]
                .as_object()
                .is_some_and(|m| m.keys().all(|x| x == k))
            {
                items.remove(i);
            }
        }
    }
}

/// Merges an applied configuration into `target`: maps recurse, keyed lists merge by key,
/// everything else is replaced; `null` removes a key.
pub fn merge_applied(target: &mut Value, applied: &Value) {
    match (target, applied) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, av) in a {
                if av.is_null() {
                    t.remove(k);
                } else if let Some(tv) = t.get_mut(k) {
                    merge_applied(tv, av);
                } else {
                    t.insert(k.clone(), av.clone());
                }
            }
        }
        (Value::Array(t), Value::Array(a)) => match (list_key(t), list_key(a)) {
            (Some(tk), Some(ak)) if tk == ak => {
                for item in a {
                    match t.iter_mut().find(|x| x.get(ak) == item.get(ak)) {
                        Some(x) => merge_applied(x, item),
                        None => t.push(item.clone()),
                    }
                }
            }
            _ => *t = a.clone(),
        },
        (t, a) => *t = a.clone(),
    }
}

/// Converts a leaf set to the nested `FieldsV1` map.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for c in path {
            let next = cur.entry(c.clone()).or_insert_with(|| json!({}));
            let Value::Object(m) = next else { break };
            cur = m;
        }
    }
    Value::Object(root)
}

/// Converts `FieldsV1` back to leaf paths (a `.` entry marks its parent as owned).
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    if k == "." {
                        out.insert(prefix.clone());
                        continue;
                    }
                    prefix.push(k.clone());
                    walk(c, prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out.remove(&Vec::new());
    out
}

/// The API server's spelling of a path in conflict messages: `.data.key`, `.spec.containers[name="a"].image`.
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for c in path {
        if let Some(f) = c.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(Value::Object(m)) = c
            .strip_prefix("k:")
            .and_then(|k| serde_json::from_str::<Value>(k).ok())
        {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        }
    }
    s
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the manager used.
    pub api_version: String,
    /// `status` for the status subresource, empty otherwise.
    pub subresource: String,
    /// When the entry last changed.
    pub time: String,
    /// Owned leaves.
    pub set: FieldSet,
}

/// Reads `metadata.managedFields`.
pub fn entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().into(),
                    operation: e["operation"].as_str().unwrap_or_default().into(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
                    subresource: e["subresource"].as_str().unwrap_or_default().into(),
                    time: e["time"].as_str().unwrap_or_default().into(),
                    set: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `metadata.managedFields` (entries with no fields are dropped, as the server does).
pub fn store(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.set),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(m) = obj["metadata"].as_object_mut() {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Records a non-apply write: `manager` takes the leaves it changed from everyone else;
/// removed leaves leave every set.
pub fn record_update(
    entries: &mut Vec<Entry>,
    old: &Value,
    new: &Value,
    part: Part,
    who: (&str, &str, &str, &str),
) {
    let (manager, api_version, subresource, time) = who;
    let old_leaves = leaves(old, part);
    let new_leaves = leaves(new, part);
    let changed: FieldSet = new_leaves
        .iter()
        .filter(|p| get(old, p) != get(new, p))
        .cloned()
        .collect();
    let removed: FieldSet = old_leaves.difference(&new_leaves).cloned().collect();
    for e in entries.iter_mut() {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    if changed.is_empty() {
        return;
    }
    match entries
        .iter_mut()
        .find(|e| e.manager == manager && e.operation == "Update" && e.subresource == subresource)
    {
        Some(e) => {
            e.set.extend(changed);
            e.time = time.into();
            e.api_version = api_version.into();
        }
        None => entries.push(Entry {
            manager: manager.into(),
            operation: "Update".into(),
            api_version: api_version.into(),
            subresource: subresource.into(),
            time: time.into(),
            set: changed,
        }),
    }
}

/// The outcome of an apply: the new object, or the conflicts (manager, apiVersion, field).
pub type ApplyResult = Result<Value, Vec<(String, String, String)>>;

/// Server-side apply of `applied` by `manager` onto `current` (`Value::Null` when creating).
pub fn apply(
    entries: &mut Vec<Entry>,
    current: &Value,
    applied: &Value,
    part: Part,
    force: bool,
    who: (&str, &str, &str, &str),
) -> ApplyResult {
    let (manager, api_version, subresource, time) = who;
    let applied_set = leaves(applied, part);
    let is_mine =
        |e: &Entry| e.manager == manager && e.operation == "Apply" && e.subresource == subresource;
    // A field conflicts when another manager owns it (or an atomic ancestor) and the applied
    // value differs from the live one.
    let mut conflicts: Vec<(String, String, String)> = Vec::new();
    let mut taken: Vec<(usize, Path)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if is_mine(e) {
            continue;
        }
        for owned in &e.set {
            // Owning a map is owning its existence, not its keys: maps never conflict.
            if get(current, owned).is_some_and(Value::is_object) {
                continue;
            }
            let hit = applied_set
                .iter()
                .any(|p| p.starts_with(owned) && get(applied, owned) != get(current, owned));
            if hit {
                conflicts.push((e.manager.clone(), e.api_version.clone(), display(owned)));
                taken.push((i, owned.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort();
        conflicts.dedup();
        return Err(conflicts);
    }
    for (i, p) in taken {
        entries[i].set.remove(&p);
    }
    let others: FieldSet = entries
        .iter()
        .filter(|e| !is_mine(e))
        .flat_map(|e| e.set.iter().cloned())
        .collect();
    let mut next = if current.is_null() {
        json!({})
    } else {
        current.clone()
    };
    // Fields this manager applied before and no longer applies are removed, unless shared.
    if let Some(prev) = entries.iter().find(|e| is_mine(e)) {
        for p in prev.set.difference(&applied_set) {
            if !others.iter().any(|o| o.starts_with(p)) {
                remove(&mut next, p);
            }
        }
    }
    let mut scoped = applied.clone();
    if let Some(m) = scoped.as_object_mut() {
        match part {
            Part::Main => {
                m.remove("status");
            }
            Part::Status => m.retain(|k, _| k == "status" || k == "metadata"),
            Part::Whole => {}
        }
    }
    merge_applied(&mut next, &scoped);
    entries.retain(|e| !is_mine(e));
    entries.push(Entry {
        manager: manager.into(),
        operation: "Apply".into(),
        api_version: api_version.into(),
        subresource: subresource.into(),
        time: time.into(),
        set: applied_set,
    });
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trip_and_display() {
        let o = json!({"apiVersion": "v1", "metadata": {"name": "a", "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "args": ["a"]}});
        let set = leaves(&o, Part::Whole);
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
        let shown: Vec<String> = set.iter().map(|p| display(p)).collect();
        assert_eq!(
            shown,
            vec![
                ".metadata.labels.x",
                ".spec.args",
                ".spec.containers[name=\"c\"].image",
                ".spec.containers[name=\"c\"].name"
            ]
        );
    }
}
