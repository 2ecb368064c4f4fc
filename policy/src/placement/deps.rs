//! The dependency graph of a Workflow: which dependencies are job-scoped (copied and renamed
//! per group) and which are created once, the names groups must suffix, the creation order,
//! and the renaming of references.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

/// `metadata.name` of a document, when a non-empty string.
pub(super) fn metadata_name(doc: &Value) -> Option<String> {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `kind` of a document, or `""`.
pub(super) fn kind_of(doc: &Value) -> &str {
    doc.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// True for strings shaped like a Kubernetes resource name (`^[a-z0-9][-a-z0-9.]*[a-z0-9]$`).
pub(super) fn is_resource_name(s: &str) -> bool {
    let ok_edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut chars = s.chars();
    match (chars.next(), chars.next_back()) {
        (Some(first), Some(last)) => {
            ok_edge(first) && ok_edge(last) && chars.all(|c| ok_edge(c) || c == '-' || c == '.')
        }
        _ => false,
    }
}

/// Every string value in a document (map keys excluded). With `skip_meta`, values under any
/// `labels` or `annotations` key are left out.
pub(super) fn strings_of(doc: &Value, skip_meta: bool, out: &mut Vec<String>) {
    match doc {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, skip_meta, out)),
        Value::Object(map) => {
            for (k, v) in map {
                if skip_meta && (k == "labels" || k == "annotations") {
                    continue;
                }
                strings_of(v, skip_meta, out);
            }
        }
        _ => {}
    }
}

/// All string values of a document.
pub(super) fn all_strings(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    strings_of(doc, false, &mut out);
    out
}

/// Indices of the job-scoped dependencies: those whose name the job spec references,
/// transitively through references between dependencies and through resource names two
/// dependencies share. `Cluster*` kinds are never job-scoped (a per-job copy would collide
/// cluster-wide).
pub(super) fn job_scoped(deps: &[&Value], job_spec: &Value) -> BTreeSet<usize> {
    let names: Vec<Option<String>> = deps.iter().map(|d| metadata_name(d)).collect();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(n) = n {
            by_name.insert(n.as_str(), i);
        }
    }
    let cluster = |i: usize| {
        deps.get(i)
            .is_none_or(|d| kind_of(d).starts_with("Cluster"))
    };
    let mut shared: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (i, dep) in deps.iter().enumerate() {
        if cluster(i) {
            continue;
        }
        for s in all_strings(dep) {
            if is_resource_name(&s) && !by_name.contains_key(s.as_str()) {
                shared.entry(s).or_default().insert(i);
            }
        }
    }
    let mut visited = BTreeSet::new();
    let mut queue = VecDeque::new();
    let promote = |i: usize, visited: &mut BTreeSet<usize>, queue: &mut VecDeque<usize>| {
        if !cluster(i) && visited.insert(i) {
            queue.push_back(i);
        }
    };
    for s in all_strings(job_spec) {
        if let Some(&i) = by_name.get(s.as_str()) {
            promote(i, &mut visited, &mut queue);
        }
    }
    while let Some(i) = queue.pop_front() {
        let Some(dep) = deps.get(i) else { continue };
        for s in all_strings(dep) {
            if let Some(&j) = by_name.get(s.as_str()) {
                promote(j, &mut visited, &mut queue);
            }
            if let Some(peers) = shared.get(&s) {
                for &p in peers {
                    promote(p, &mut visited, &mut queue);
                }
            }
        }
    }
    visited
}

/// Resource names (outside labels and annotations) that two or more job-scoped dependencies
/// share without being any dependency's name, e.g. a ComputeDomain's channel template name
/// that the TrainingRuntime's resource claim also names. Each group suffixes them too.
pub(super) fn cross_refs(job_deps: &[&Value]) -> Vec<String> {
    let names: BTreeSet<String> = job_deps.iter().filter_map(|d| metadata_name(d)).collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for dep in job_deps {
        let mut strings = Vec::new();
        strings_of(dep, true, &mut strings);
        let unique: BTreeSet<String> = strings
            .into_iter()
            .filter(|s| is_resource_name(s) && !names.contains(s))
            .collect();
        for s in unique {
            *counts.entry(s).or_insert(0) += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, c)| *c >= 2)
        .map(|(s, _)| s)
        .collect()
}

/// Creation order: a dependency whose strings name another dependency comes after it;
/// otherwise the original order is kept (a cycle leaves the rest in original order).
pub(super) fn creation_order<'v>(deps: &[&'v Value]) -> Vec<&'v Value> {
    let names: Vec<Option<String>> = deps.iter().map(|d| metadata_name(d)).collect();
    let n = deps.len();
    // needs[i]: dependencies i must come after.
    let mut needs: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (i, dep) in deps.iter().enumerate() {
        let strings: BTreeSet<String> = all_strings(dep).into_iter().collect();
        for (j, name) in names.iter().enumerate() {
            if let (Some(name), Some(set)) = (name, needs.get_mut(i))
                && j != i
                && strings.contains(name)
            {
                set.insert(j);
            }
        }
    }
    let mut placed: Vec<usize> = Vec::with_capacity(n);
    let mut done = BTreeSet::new();
    loop {
        let ready: Vec<usize> = (0..n)
            .filter(|i| !done.contains(i))
            .filter(|i| {
                needs
                    .get(*i)
                    .is_none_or(|s| s.iter().all(|j| done.contains(j)))
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        for i in ready {
            done.insert(i);
            placed.push(i);
        }
    }
    placed.extend((0..n).filter(|i| !done.contains(i)));
    placed
        .iter()
        .filter_map(|&i| deps.get(i).copied())
        .collect()
}

/// Keys whose string value refers to another object by name.
pub(super) const REFERENCE_KEYS: &[&str] = &[
    "name",
    "claimName",
    "resourceClaimName",
    "resourceClaimTemplateName",
    "secretName",
];

/// Subtrees that hold free text or data, never references: left untouched.
pub(super) const DATA_KEYS: &[&str] = &["labels", "annotations", "env", "args", "command", "data"];

/// Renames references: a string value equal to an old dependency name is replaced by its new
/// name where it sits under a reference key (`name`, `claimName`,
/// `resourceClaimTemplateName`, …), never inside labels, annotations, env, args, command or
/// data. A queue label, an env value or a program argument that happens to equal a dependency
/// name is therefore left as written.
pub(super) fn rename(doc: Value, renames: &BTreeMap<String, String>) -> Value {
    match doc {
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| rename(v, renames)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        _ if DATA_KEYS.contains(&k.as_str()) => v,
                        Value::String(s) if REFERENCE_KEYS.contains(&k.as_str()) => {
                            Value::String(renames.get(&s).cloned().unwrap_or(s))
                        }
                        other => rename(other, renames),
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dependency_creation_order_follows_references() {
        let a = json!({"kind": "A", "metadata": {"name": "a"}, "ref": "b"});
        let b = json!({"kind": "B", "metadata": {"name": "b"}});
        let c = json!({"kind": "C", "metadata": {"name": "c"}});
        let order: Vec<&str> = creation_order(&[&a, &b, &c])
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["B", "C", "A"]);
        let x = json!({"kind": "X", "metadata": {"name": "x"}, "ref": "y"});
        let y = json!({"kind": "Y", "metadata": {"name": "y"}, "ref": "x"});
        let order: Vec<&str> = creation_order(&[&x, &y])
            .iter()
            .map(|d| d["kind"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["X", "Y"]);
    }

    #[test]
    fn cluster_kinds_are_never_job_scoped() {
        let crt = json!({"kind": "ClusterTrainingRuntime", "metadata": {"name": "wf-runtime"}});
        let spec = json!({"workload": {"trainJob": {"runtimeRef": {"name": "wf-runtime"}}}});
        assert!(job_scoped(&[&crt], &spec).is_empty());
    }

    #[test]
    fn resource_name_shape() {
        for (s, want) in [
            ("wf-channel", true),
            ("a", false),
            ("ab", true),
            ("A-b", false),
            ("a.b-c", true),
            ("-a", false),
            ("a/b", false),
        ] {
            assert_eq!(is_resource_name(s), want, "{s}");
        }
    }
}
