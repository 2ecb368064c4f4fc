//! The object store: objects, the global resourceVersion, the event log watches read, and
//! every write (defaults, status separation, validation, managed fields, finalizers, GC).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::fields::{self, Part};
use crate::registry::{self, ResourceType};
use crate::schema;
use crate::status::{ApiError, Subject};

/// `(group, plural, namespace or "", name)`.
pub type Key = (String, String, String, String);

/// One change, as watches replay it.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// Group of the object.
    pub group: String,
    /// Plural of the object.
    pub plural: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The object after the change (the last state for deletions).
    pub object: Value,
    /// The object before a modification (to turn selector transitions into ADDED/DELETED).
    pub old: Option<Value>,
}

/// How a write records field ownership.
#[derive(Debug, Clone)]
pub enum Ownership {
    /// A non-apply write by this manager.
    Update(String),
    /// Entries already computed by server-side apply.
    Applied(Vec<fields::Entry>),
}

/// Propagation of a delete to dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents whose owners are all gone are deleted (background and foreground alike).
    Cascade,
    /// Dependents lose their ownerReference to the deleted owner and stay.
    Orphan,
}

/// Everything the server holds.
#[derive(Debug, Clone)]
pub struct State {
    /// Served types, built-ins first.
    pub types: Vec<ResourceType>,
    /// Objects by key.
    pub objects: BTreeMap<Key, Value>,
    /// Changes since the last compaction, in resourceVersion order.
    pub events: Vec<Event>,
    /// The latest resourceVersion.
    pub rv: u64,
    /// Watches from a resourceVersion older than this get 410 Gone.
    pub oldest_rv: u64,
    /// Container logs served by `pods/{name}/log`, by `(namespace, pod, container)`: each line
    /// with the time the kubelet would stamp on it.
    pub logs: BTreeMap<(String, String, String), Vec<LogLine>>,
    counter: u64,
}

/// One container log line: its kubelet timestamp and its text (without the newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When the line was written.
    pub time: k8s_openapi::jiff::Timestamp,
    /// The text.
    pub text: String,
}

/// RFC 3339 UTC timestamp with seconds, as `metav1.Time` serializes.
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn key(rt: &ResourceType, ns: &str, name: &str) -> Key {
    let ns = if rt.namespaced { ns } else { "" };
    (rt.group.clone(), rt.plural.clone(), ns.into(), name.into())
}

fn subject<'a>(rt: &'a ResourceType, name: &'a str) -> Subject<'a> {
    Subject {
        group: &rt.group,
        plural: &rt.plural,
        kind: &rt.kind,
        name,
    }
}

/// Object content that counts for `metadata.generation`.
fn generation_content(rt: &ResourceType, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if rt.status_subresource || !rt.custom {
            m.remove("status");
        }
    }
    if rt.custom { v } else { v["spec"].clone() }
}

/// The object without what a no-op write would change anyway.
fn comparable(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        // Ownership changes are changes; timestamps of unchanged entries are not.
        if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
            for e in entries {
                if let Some(e) = e.as_object_mut() {
                    e.remove("time");
                }
            }
        }
    }
    v
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl State {
    /// A store with the built-in types and the `default`, `kube-system` and `kube-public`
    /// namespaces.
    pub fn new() -> State {
        let mut st = State {
            types: registry::builtins(),
            objects: BTreeMap::new(),
            events: Vec::new(),
            rv: 0,
            oldest_rv: 0,
            logs: BTreeMap::new(),
            counter: 0,
        };
        for ns in ["default", "kube-system", "kube-public"] {
            let rt = st.types[0].clone();
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            // Creating a fixed, valid namespace in an empty store cannot fail.
            let _ = st.create(
                &rt,
                "",
                body,
                Ownership::Update("fake-apiserver".into()),
                false,
            );
        }
        st
    }

    /// The served type for a path, if any.
    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// Drops the event log: watches from any earlier resourceVersion get 410 Gone.
    pub fn compact(&mut self) {
        self.events.clear();
        self.oldest_rv = self.rv;
    }

    fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// The stored object.
    ///
    /// # Errors
    /// 404 NotFound.
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&key(rt, ns, name))
            .map(|o| self.present(rt, o))
            .ok_or_else(|| ApiError::not_found(&subject(rt, name)))
    }

    /// An object as served at `rt`'s version.
    pub fn present(&self, rt: &ResourceType, obj: &Value) -> Value {
        let mut o = obj.clone();
        o["apiVersion"] = json!(rt.api_version());
        o["kind"] = json!(rt.kind);
        o
    }

    /// Objects of a type, in namespace/name order (`ns` None: all namespaces).
    pub fn list(&self, rt: &ResourceType, ns: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((g, p, n, _), _)| {
                *g == rt.group && *p == rt.plural && ns.is_none_or(|ns| ns == n)
            })
            .map(|(_, o)| self.present(rt, o))
            .collect()
    }

    fn check_namespace(&self, rt: &ResourceType, ns: &str) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        let k = (
            String::new(),
            "namespaces".to_string(),
            String::new(),
            ns.to_string(),
        );
        if self.objects.contains_key(&k) {
            Ok(())
        } else {
            Err(ApiError::not_found(&Subject {
                group: "",
                plural: "namespaces",
                kind: "Namespace",
                name: ns,
            }))
        }
    }

    fn generate_name(&mut self, rt: &ResourceType, ns: &str, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        loop {
            let mut n = self.next_id().wrapping_mul(2_654_435_761);
            let suffix: String = (0..5)
                .map(|_| {
                    let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                    n /= ALPHABET.len() as u64;
                    c
                })
                .collect();
            let name = format!("{prefix}{suffix}");
            if !self.objects.contains_key(&key(rt, ns, &name)) {
                return name;
            }
        }
    }

    /// Creates an object (POST).
    ///
    /// # Errors
    /// 409 AlreadyExists, 404 for a missing namespace, 400 for a namespace mismatch, 422 Invalid.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        mut body: Value,
        ownership: Ownership,
        strict: bool,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body is not an object"));
        }
        let body_ns = body["metadata"]["namespace"].as_str().unwrap_or("");
        if rt.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let mut name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
        if name.is_empty() {
            match body["metadata"]["generateName"].as_str() {
                Some(prefix) if !prefix.is_empty() => {
                    name = self.generate_name(rt, ns, prefix);
                }
                _ => {
                    return Err(ApiError::invalid(
                        &subject(rt, ""),
                        &[crate::status::Cause {
                            reason: "FieldValueRequired".into(),
                            message: "Required value: name or generateName is required".into(),
                            field: "metadata.name".into(),
                        }],
                    ));
                }
            }
        }
        if self.objects.contains_key(&key(rt, ns, &name)) {
            return Err(ApiError::already_exists(&subject(rt, &name)));
        }
        self.check_namespace(rt, ns)?;
        if body.get("metadata").is_none_or(|m| !m.is_object()) {
            body["metadata"] = json!({});
        }
        let id = self.next_id();
        let meta = &mut body["metadata"];
        meta["name"] = json!(name);
        if rt.namespaced {
            meta["namespace"] = json!(ns);
        } else if let Some(m) = meta.as_object_mut() {
            m.remove("namespace");
        }
        meta["uid"] = json!(format!("fa4e0000-0000-4000-8000-{id:012x}"));
        meta["creationTimestamp"] = json!(now());
        if let Some(m) = meta.as_object_mut() {
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
            m.remove("managedFields");
        }
        self.write(rt, ns, &name, None, body, ownership, false, strict)
    }

    /// The common tail of every write: status separation, validation, generation, managed
    /// fields, resourceVersion, finalizers, the event, CRD registration.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        old: Option<&Value>,
        mut new: Value,
        ownership: Ownership,
        status_write: bool,
        strict: bool,
    ) -> Result<Value, ApiError> {
        let subj = subject(rt, name);
        if let Some(old) = old {
            let sent = new["metadata"]["resourceVersion"].as_str().unwrap_or("");
            if !sent.is_empty() && Some(sent) != old["metadata"]["resourceVersion"].as_str() {
                return Err(ApiError::stale(&subj));
            }
            if status_write {
                // The status subresource changes status only.
                let status = new.get("status").cloned();
                new = old.clone();
                match status {
                    Some(s) => new["status"] = s,
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            } else {
                let meta = new["metadata"].as_object_mut();
                if let Some(meta) = meta {
                    for f in [
                        "uid",
                        "creationTimestamp",
                        "deletionTimestamp",
                        "generation",
                        "name",
                        "namespace",
                    ] {
                        match old["metadata"].get(f) {
                            Some(v) => meta.insert(f.into(), v.clone()),
                            None => meta.remove(f),
                        };
                    }
                }
                if rt.status_subresource {
                    match old.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            if let Some(m) = new.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
            }
        } else if rt.status_subresource
            && let Some(m) = new.as_object_mut()
        {
            m.remove("status");
        }
        new["apiVersion"] = json!(rt.api_version());
        new["kind"] = json!(rt.kind);
        if let Some(schema) = &rt.schema {
            self.validate_custom(rt, name, schema, &mut new, old, strict)?;
        }
        if rt.custom || new.get("spec").is_some() {
            let generation = match old {
                None => 1,
                Some(o) => {
                    let g = o["metadata"]["generation"].as_i64().unwrap_or(0);
                    if generation_content(rt, o) == generation_content(rt, &new) {
                        g
                    } else {
                        g + 1
                    }
                }
            };
            new["metadata"]["generation"] = json!(generation);
        }
        let api_version = rt.api_version();
        let sub = if status_write { "status" } else { "" };
        let part = if status_write {
            Part::Status
        } else if rt.status_subresource {
            Part::Main
        } else {
            Part::Whole
        };
        let time = now();
        let entries = match ownership {
            Ownership::Applied(e) => e,
            Ownership::Update(manager) => {
                let mut e = old.map(fields::entries).unwrap_or_default();
                let before = old.cloned().unwrap_or(Value::Null);
                fields::record_update(
                    &mut e,
                    &before,
                    &new,
                    part,
                    (&manager, &api_version, sub, &time),
                );
                e
            }
        };
        fields::store(&mut new, &entries);
        if let Some(old) = old {
            if comparable(old) == comparable(&new) {
                return Ok(self.present(rt, old));
            }
            // Finalizers gone from an object being deleted: the deletion completes.
            let deleting = new["metadata"].get("deletionTimestamp").is_some();
            let finalizers = new["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            if deleting && !finalizers {
                self.rv += 1;
                new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
                self.remove(rt, ns, name, new.clone(), Propagation::Cascade);
                return Ok(self.present(rt, &new));
            }
        }
        self.rv += 1;
        new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
            self.register_crd(&mut new);
        }
        self.objects.insert(key(rt, ns, name), new.clone());
        self.events.push(Event {
            rv: self.rv,
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            kind: if old.is_some() { "MODIFIED" } else { "ADDED" },
            object: new.clone(),
            old: old.cloned(),
        });
        // The garbage collector also finds dependents whose owners are all gone already
        // (created after, or racing with, the owner's deletion); the writer still gets the
        // object, as from the real server.
        let owners = owner_uids(&new);
        if !owners.is_empty() && !owners.iter().any(|u| self.uid_exists(u)) {
            let _ = self.delete(rt, ns, name, Propagation::Cascade);
        }
        Ok(self.present(rt, &new))
    }

    fn uid_exists(&self, uid: &str) -> bool {
        self.objects
            .values()
            .any(|o| o["metadata"]["uid"].as_str() == Some(uid))
    }

    fn validate_custom(
        &self,
        rt: &ResourceType,
        name: &str,
        schema: &Value,
        new: &mut Value,
        old: Option<&Value>,
        strict: bool,
    ) -> Result<(), ApiError> {
        let before = new.clone();
        // The schema does not describe metadata, apiVersion or kind: the server keeps them.
        let kept: Vec<(String, Value)> = ["apiVersion", "kind", "metadata"]
            .iter()
            .filter_map(|k| new.get(*k).map(|v| (k.to_string(), v.clone())))
            .collect();
        schema::prune(schema, new);
        for (k, v) in kept {
            new[k] = v;
        }
        if strict && before != *new {
            let mut unknown = Vec::new();
            diff_unknown(&before, new, "", &mut unknown);
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut causes = Vec::new();
        schema::validate(schema, new, old, "", &mut causes);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(&subject(rt, name), &causes))
        }
    }

    /// Serves the CRD's versions and marks it Established.
    fn register_crd(&mut self, crd: &mut Value) {
        let types = registry::from_crd(crd);
        let (group, plural) = (&crd["spec"]["group"], &crd["spec"]["names"]["plural"]);
        self.types
            .retain(|t| !(t.custom && json!(t.group) == *group && json!(t.plural) == *plural));
        self.types.extend(types);
        let time = now();
        crd["status"] = json!({
            "acceptedNames": crd["spec"]["names"],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": time},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": time},
            ],
            "storedVersions": crd["spec"]["versions"].as_array().map(|vs| {
                vs.iter().filter(|v| v["storage"].as_bool() == Some(true)).map(|v| v["name"].clone()).collect::<Vec<_>>()
            }).unwrap_or_default(),
        });
    }

    /// Deletes an object (DELETE): with finalizers it only gets a deletionTimestamp.
    ///
    /// # Errors
    /// 404 NotFound.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        propagation: Propagation,
    ) -> Result<Value, ApiError> {
        let Some(obj) = self.objects.get(&key(rt, ns, name)).cloned() else {
            return Err(ApiError::not_found(&subject(rt, name)));
        };
        let finalizers = obj["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        if finalizers {
            if obj["metadata"].get("deletionTimestamp").is_some() {
                return Ok(self.present(rt, &obj));
            }
            let mut new = obj.clone();
            new["metadata"]["deletionTimestamp"] = json!(now());
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            self.rv += 1;
            new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
            self.objects.insert(key(rt, ns, name), new.clone());
            self.events.push(Event {
                rv: self.rv,
                group: rt.group.clone(),
                plural: rt.plural.clone(),
                kind: "MODIFIED",
                object: new.clone(),
                old: Some(obj),
            });
            return Ok(self.present(rt, &new));
        }
        self.rv += 1;
        let mut last = obj;
        last["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.remove(rt, ns, name, last.clone(), propagation);
        Ok(self.present(rt, &last))
    }

    /// Removes a stored object, records DELETED, then collects its dependents (and, for
    /// namespaces and CRDs, their contents).
    fn remove(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        last: Value,
        propagation: Propagation,
    ) {
        self.objects.remove(&key(rt, ns, name));
        self.events.push(Event {
            rv: self.rv,
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            kind: "DELETED",
            object: last.clone(),
            old: None,
        });
        if rt.group.is_empty() && rt.plural == "namespaces" {
            let inside: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| k.2 == name)
                .cloned()
                .collect();
            self.delete_keys(inside);
        }
        if rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions" {
            let (g, p) = (
                last["spec"]["group"].as_str().unwrap_or("").to_string(),
                last["spec"]["names"]["plural"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
            let instances: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| k.0 == g && k.1 == p)
                .cloned()
                .collect();
            self.delete_keys(instances);
            self.types
                .retain(|t| !(t.custom && t.group == g && t.plural == p));
        }
        let Some(uid) = last["metadata"]["uid"].as_str().map(str::to_string) else {
            return;
        };
        self.collect_garbage(&uid, propagation);
    }

    fn type_of(&self, k: &Key) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == k.0 && t.plural == k.1)
            .cloned()
    }

    fn delete_keys(&mut self, keys: Vec<Key>) {
        for k in keys {
            if let Some(rt) = self.type_of(&k) {
                // Already removed by an earlier cascade, or kept by finalizers: both fine.
                let _ = self.delete(&rt, &k.2, &k.3, Propagation::Cascade);
            }
        }
    }

    /// The garbage collector, run synchronously: dependents of `owner_uid` lose that
    /// ownerReference; those left without owners are deleted (cascading) unless orphaning.
    fn collect_garbage(&mut self, owner_uid: &str, propagation: Propagation) {
        let dependents: Vec<Key> = self
            .objects
            .iter()
            .filter(|(_, o)| owner_uids(o).iter().any(|u| u == owner_uid))
            .map(|(k, _)| k.clone())
            .collect();
        for k in dependents {
            let Some(rt) = self.type_of(&k) else { continue };
            let Some(obj) = self.objects.get(&k).cloned() else {
                continue;
            };
            let remaining = owner_uids(&obj)
                .into_iter()
                .filter(|u| u != owner_uid)
                .count();
            if remaining == 0 && propagation == Propagation::Cascade {
                let _ = self.delete(&rt, &k.2, &k.3, Propagation::Cascade);
                continue;
            }
            let mut new = obj.clone();
            if let Some(refs) = new["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(owner_uid));
                if refs.is_empty()
                    && let Some(m) = new["metadata"].as_object_mut()
                {
                    m.remove("ownerReferences");
                }
            }
            self.rv += 1;
            new["metadata"]["resourceVersion"] = json!(self.rv.to_string());
            self.objects.insert(k, new.clone());
            self.events.push(Event {
                rv: self.rv,
                group: rt.group.clone(),
                plural: rt.plural.clone(),
                kind: "MODIFIED",
                object: new,
                old: Some(obj),
            });
        }
    }
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

/// Dotted paths of fields in `before` that pruning removed from `after`.
fn diff_unknown(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in b {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match a.get(k) {
                    None => out.push(p),
                    Some(av) => diff_unknown(v, av, &p, out),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (bv, av)) in b.iter().zip(a).enumerate() {
                diff_unknown(bv, av, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}
