//! HTTP: path routing, verbs, content types, query parameters, streamed watches.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::fields::{self, Part};
use crate::registry::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, Subject};
use crate::store::{Ownership, Propagation, State};

/// State shared by the handlers and the server handle.
#[derive(Debug)]
pub struct Shared {
    /// The store.
    pub state: Mutex<State>,
    /// Bumped after every change so that watches wake up.
    pub changed: watch::Sender<u64>,
    /// Set on shutdown so that open watches end.
    pub stopping: watch::Sender<bool>,
}

impl Shared {
    /// Locks the store; a panic in another handler does not make the store unusable.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

type Query = Vec<(String, String)>;

fn param<'a>(q: &'a Query, name: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &e.to_status())
}

/// `PartialObjectMetadata` of an object, as served for
/// `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
fn partial(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]})
}

/// A response body in the metadata-only form: lists become `PartialObjectMetadataList`.
fn partial_body(v: Value) -> Value {
    match v.get("items").and_then(Value::as_array) {
        Some(items) => json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList",
            "metadata": v["metadata"],
            "items": items.iter().map(partial).collect::<Vec<_>>(),
        }),
        None => partial(&v),
    }
}

/// What a request path names.
enum Target {
    Version,
    CoreGroup,
    Groups,
    ResourceList(String, String),
    Resource {
        rt: Box<ResourceType>,
        ns: Option<String>,
        name: Option<String>,
        sub: Option<String>,
    },
}

fn route(st: &State, path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Target::Version),
        ["api"] => return Ok(Target::CoreGroup),
        ["apis"] => return Ok(Target::Groups),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    if rest.is_empty() {
        let known = st
            .types
            .iter()
            .any(|t| t.group == group && t.version == version);
        return if known {
            Ok(Target::ResourceList(group.into(), version.into()))
        } else {
            Err(ApiError::no_route())
        };
    }
    let namespaced_path = rest.len() >= 3
        && rest[0] == "namespaces"
        && st
            .find_type(group, version, rest[2])
            .is_some_and(|t| t.namespaced);
    let (ns, rest) = if namespaced_path {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let rt = st
        .find_type(group, version, rest[0])
        .cloned()
        .ok_or_else(ApiError::no_route)?;
    if rest.len() > 3 || (rest.len() == 3 && !(rest[2] == "status" && rt.status_subresource)) {
        return Err(ApiError::no_route());
    }
    Ok(Target::Resource {
        rt: Box::new(rt),
        ns,
        name: rest.get(1).map(|s| (*s).to_string()),
        sub: rest.get(2).map(|s| (*s).to_string()),
    })
}

/// The single handler: routes, dispatches by method, answers errors as `Status`.
pub async fn handle(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query: Query = uri
        .query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    if method == Method::GET
        && let ["api", "v1", "namespaces", ns, "pods", name, "log"] = uri
            .path()
            .trim_matches('/')
            .split('/')
            .collect::<Vec<_>>()
            .as_slice()
    {
        return match pod_log(&shared.lock(), ns, name, &query) {
            Ok(text) => {
                (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response()
            }
            Err(e) => error_response(&e),
        };
    }
    let target = {
        let st = shared.lock();
        route(&st, uri.path())
    };
    let meta_only = headers
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    let result = match target {
        Err(e) => Err(e),
        Ok(Target::Version) => Ok((
            StatusCode::OK,
            json!({
                "major": "1", "minor": "33", "gitVersion": "v1.33.0-fake",
                "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
                "goVersion": "", "compiler": "fake", "platform": "linux/amd64"
            }),
        )),
        Ok(Target::CoreGroup) => Ok((
            StatusCode::OK,
            json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("")}]
            }),
        )),
        Ok(Target::Groups) => Ok((StatusCode::OK, groups(&shared.lock()))),
        Ok(Target::ResourceList(g, v)) => {
            let st = shared.lock();
            let resources: Vec<Value> = st
                .types
                .iter()
                .filter(|t| t.group == g && t.version == v)
                .flat_map(ResourceType::discovery)
                .collect();
            let gv = if g.is_empty() { v } else { format!("{g}/{v}") };
            Ok((
                StatusCode::OK,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
            ))
        }
        Ok(Target::Resource { rt, ns, name, sub }) => {
            if method == Method::GET
                && name.is_none()
                && param(&query, "watch").is_some_and(|w| w == "true" || w == "1")
            {
                return match start_watch(&shared, &rt, ns.as_deref(), &query, meta_only) {
                    Ok(r) => r,
                    Err(e) => error_response(&e),
                };
            }
            let req = Req {
                rt: &rt,
                ns: ns.as_deref().unwrap_or(""),
                all_ns: ns.is_none(),
                query: &query,
                headers: &headers,
                body: &body,
                sub: sub.as_deref(),
            };
            let mut guard = shared.lock();
            // dryRun: the write runs in full on a copy that is then dropped.
            let mut scratch = (param(&query, "dryRun") == Some("All")).then(|| guard.clone());
            let st: &mut State = match scratch.as_mut() {
                Some(copy) => copy,
                None => &mut guard,
            };
            let before = st.rv;
            let r = match (method.clone(), name) {
                (Method::GET, None) => list(st, &req),
                (Method::GET, Some(n)) => st.get(&rt, req.ns, &n).map(|o| (StatusCode::OK, o)),
                (Method::POST, None) => create(st, &req),
                (Method::PUT, Some(n)) => update(st, &req, &n),
                (Method::PATCH, Some(n)) => patch(st, &req, &n),
                (Method::DELETE, Some(n)) => delete(st, &req, &n),
                (Method::DELETE, None) => delete_collection(st, &req),
                _ => Err(ApiError::method_not_allowed()),
            };
            let after = st.rv;
            let dry = scratch.is_some();
            drop(scratch);
            drop(guard);
            if after != before && !dry {
                shared.changed.send_replace(after);
            }
            if meta_only {
                r.map(|(code, v)| (code, partial_body(v)))
            } else {
                r
            }
        }
    };
    match result {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => error_response(&e),
    }
}

/// The kubelet's `RFC3339NanoFixed` stamp of a log line (`2026-12-01T10:00:00.000000000Z`).
pub fn log_stamp(t: k8s_openapi::jiff::Timestamp) -> String {
    format!(
        "{}.{:09}Z",
        t.strftime("%Y-%m-%dT%H:%M:%S"),
        t.subsec_nanosecond().max(0)
    )
}

/// `GET /api/v1/namespaces/{ns}/pods/{name}/log`: the stored lines of the container
/// (`container`, else the pod's first container) from `sinceTime` on (`tailLines` last
/// lines), each stamped when `timestamps=true`, cut at `limitBytes` bytes (a partial last line
/// included, as the kubelet cuts).
fn pod_log(st: &State, ns: &str, name: &str, q: &Query) -> Result<Vec<u8>, ApiError> {
    let pods = st
        .find_type("", "v1", "pods")
        .cloned()
        .ok_or_else(ApiError::no_route)?;
    let pod = st.get(&pods, ns, name)?;
    let container = match param(q, "container") {
        Some(c) => c.to_string(),
        None => pod
            .pointer("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    let since = match param(q, "sinceTime") {
        Some(t) => Some(
            t.parse::<k8s_openapi::jiff::Timestamp>()
                .map_err(|e| ApiError::bad_request(format!("sinceTime {t:?}: {e}")))?,
        ),
        None => None,
    };
    let number = |k: &str| -> Result<Option<usize>, ApiError> {
        param(q, k)
            .map(|v| {
                v.parse::<usize>().map_err(|_| {
                    ApiError::bad_request(format!("{k} must be a non-negative integer"))
                })
            })
            .transpose()
    };
    let limit = number("limitBytes")?;
    let tail = number("tailLines")?;
    let stamps = param(q, "timestamps").is_some_and(|v| v == "true" || v == "1");
    let key = (ns.to_string(), name.to_string(), container);
    let lines: Vec<&crate::store::LogLine> = st
        .logs
        .get(&key)
        .map(|ls| {
            ls.iter()
                .filter(|l| since.is_none_or(|s| l.time >= s))
                .collect()
        })
        .unwrap_or_default();
    let skip = tail.map_or(0, |t| lines.len().saturating_sub(t));
    let mut out = Vec::new();
    for l in lines.iter().skip(skip) {
        if stamps {
            out.extend_from_slice(log_stamp(l.time).as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(l.text.as_bytes());
        out.push(b'\n');
    }
    if let Some(limit) = limit {
        out.truncate(limit);
    }
    Ok(out)
}

fn groups(st: &State) -> Value {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for t in st.types.iter().filter(|t| !t.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, vs)) => {
                if !vs.contains(&t.version) {
                    vs.push(t.version.clone());
                }
            }
            None => out.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    let groups: Vec<Value> = out
        .iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                .collect();
            json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

struct Req<'a> {
    rt: &'a ResourceType,
    ns: &'a str,
    all_ns: bool,
    query: &'a Query,
    headers: &'a HeaderMap,
    body: &'a Bytes,
    sub: Option<&'a str>,
}

impl Req<'_> {
    fn manager(&self) -> String {
        if let Some(m) = param(self.query, "fieldManager").filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        // The API server defaults the manager to the user agent's program name.
        self.headers
            .get(header::USER_AGENT)
            .and_then(|h| h.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string()
    }

    fn strict(&self) -> bool {
        param(self.query, "fieldValidation") == Some("Strict")
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(self.body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode the request body: {e}")))
    }

    fn status_write(&self) -> bool {
        self.sub == Some("status")
    }

    fn subject<'b>(&'b self, name: &'b str) -> Subject<'b> {
        Subject {
            group: &self.rt.group,
            plural: &self.rt.plural,
            kind: &self.rt.kind,
            name,
        }
    }
}

fn selectors(q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    Ok((
        LabelSelector::parse(param(q, "labelSelector").unwrap_or(""))?,
        FieldSelector::parse(param(q, "fieldSelector").unwrap_or(""))?,
    ))
}

fn list(st: &State, req: &Req) -> Result<(StatusCode, Value), ApiError> {
    let (labels, fieldsel) = selectors(req.query)?;
    let ns = if req.all_ns || !req.rt.namespaced {
        None
    } else {
        Some(req.ns)
    };
    let items: Vec<Value> = st
        .list(req.rt, ns)
        .into_iter()
        .filter(|o| labels.matches(o) && fieldsel.matches(o))
        .collect();
    // `continue` is an offset into the (sorted) result; pages are consistent when nothing
    // changes between them, which is what tests need.
    let start: usize = match param(req.query, "continue").filter(|c| !c.is_empty()) {
        Some(c) => c
            .parse()
            .map_err(|_| ApiError::bad_request("invalid continue token"))?,
        None => 0,
    };
    let limit = param(req.query, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
    let page: Vec<Value> = items
        .get(start..end)
        .map(<[Value]>::to_vec)
        .unwrap_or_default();
    let mut meta = json!({"resourceVersion": st.rv.to_string()});
    if end < items.len() {
        meta["continue"] = json!(end.to_string());
        meta["remainingItemCount"] = json!(items.len() - end);
    }
    Ok((
        StatusCode::OK,
        json!({
            "kind": format!("{}List", req.rt.kind),
            "apiVersion": req.rt.api_version(),
            "metadata": meta,
            "items": page,
        }),
    ))
}

fn create(st: &mut State, req: &Req) -> Result<(StatusCode, Value), ApiError> {
    let body = req.json_body()?;
    st.create(
        req.rt,
        req.ns,
        body,
        Ownership::Update(req.manager()),
        req.strict(),
    )
    .map(|o| (StatusCode::CREATED, o))
}

fn stored(st: &State, req: &Req, name: &str) -> Result<Value, ApiError> {
    st.objects
        .get(&(
            req.rt.group.clone(),
            req.rt.plural.clone(),
            if req.rt.namespaced {
                req.ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        ))
        .cloned()
        .ok_or_else(|| ApiError::not_found(&req.subject(name)))
}

fn update(st: &mut State, req: &Req, name: &str) -> Result<(StatusCode, Value), ApiError> {
    let body = req.json_body()?;
    let body_name = body["metadata"]["name"].as_str().unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let old = stored(st, req, name)?;
    st.write(
        req.rt,
        req.ns,
        name,
        Some(&old),
        body,
        Ownership::Update(req.manager()),
        req.status_write(),
        req.strict(),
    )
    .map(|o| (StatusCode::OK, o))
}

fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the apply body is not UTF-8"))?;
    serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

fn patch(st: &mut State, req: &Req, name: &str) -> Result<(StatusCode, Value), ApiError> {
    let ct = req
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if ct == "application/apply-patch+yaml" {
        return apply(st, req, name);
    }
    let old = stored(st, req, name)?;
    let mut new = old.clone();
    match ct.as_str() {
        "application/merge-patch+json" => json_patch::merge(&mut new, &req.json_body()?),
        "application/strategic-merge-patch+json" => {
            nvcre_engine::patch::merge(
                &mut new,
                &req.json_body()?,
                &nvcre_engine::patch::ListPolicy::by_name(),
            );
        }
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_value(req.json_body()?)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON Patch: {e}")))?;
            json_patch::patch(&mut new, &ops).map_err(|e| ApiError {
                code: 422,
                reason: "Invalid",
                message: format!(
                    "the server rejected our request due to an error in our request: {e}"
                ),
                details: None,
            })?;
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    }
    st.write(
        req.rt,
        req.ns,
        name,
        Some(&old),
        new,
        Ownership::Update(req.manager()),
        req.status_write(),
        req.strict(),
    )
    .map(|o| (StatusCode::OK, o))
}

fn apply(st: &mut State, req: &Req, name: &str) -> Result<(StatusCode, Value), ApiError> {
    let Some(manager) = param(req.query, "fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError {
            code: 422,
            reason: "Invalid",
            message: "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
            details: None,
        });
    };
    let force = param(req.query, "force") == Some("true");
    let applied = parse_apply_body(req.body)?;
    if !applied.is_object() {
        return Err(ApiError::bad_request("the apply body is not an object"));
    }
    let current = st
        .objects
        .get(&(
            req.rt.group.clone(),
            req.rt.plural.clone(),
            if req.rt.namespaced {
                req.ns.to_string()
            } else {
                String::new()
            },
            name.to_string(),
        ))
        .cloned();
    let part = if req.status_write() {
        Part::Status
    } else if req.rt.status_subresource {
        Part::Main
    } else {
        Part::Whole
    };
    let api_version = req.rt.api_version();
    let sub = if req.status_write() { "status" } else { "" };
    let time = crate::store::now();
    let who = (manager, api_version.as_str(), sub, time.as_str());
    match current {
        Some(cur) => {
            let mut entries = fields::entries(&cur);
            let new = fields::apply(&mut entries, &cur, &applied, part, force, who)
                .map_err(|c| ApiError::apply_conflict(&req.subject(name), &c))?;
            st.write(
                req.rt,
                req.ns,
                name,
                Some(&cur),
                new,
                Ownership::Applied(entries),
                req.status_write(),
                req.strict(),
            )
            .map(|o| (StatusCode::OK, o))
        }
        None => {
            if req.status_write() {
                return Err(ApiError::not_found(&req.subject(name)));
            }
            let mut entries = Vec::new();
            let mut new = fields::apply(&mut entries, &Value::Null, &applied, part, force, who)
                .map_err(|c| ApiError::apply_conflict(&req.subject(name), &c))?;
            new["metadata"]["name"] = json!(name);
            st.create(
                req.rt,
                req.ns,
                new,
                Ownership::Applied(entries),
                req.strict(),
            )
            .map(|o| (StatusCode::CREATED, o))
        }
    }
}

fn propagation(req: &Req) -> Propagation {
    let from_body = serde_json::from_slice::<Value>(req.body)
        .ok()
        .and_then(|b| b["propagationPolicy"].as_str().map(str::to_string));
    let policy = from_body.or_else(|| param(req.query, "propagationPolicy").map(str::to_string));
    if policy.as_deref() == Some("Orphan") {
        Propagation::Orphan
    } else {
        Propagation::Cascade
    }
}

fn delete(st: &mut State, req: &Req, name: &str) -> Result<(StatusCode, Value), ApiError> {
    if req.sub.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    if let Ok(b) = serde_json::from_slice::<Value>(req.body)
        && let Some(want) = b["preconditions"]["resourceVersion"].as_str()
    {
        let cur = stored(st, req, name)?;
        if cur["metadata"]["resourceVersion"].as_str() != Some(want) {
            return Err(ApiError::stale(&req.subject(name)));
        }
    }
    st.delete(req.rt, req.ns, name, propagation(req))
        .map(|o| (StatusCode::OK, o))
}

fn delete_collection(st: &mut State, req: &Req) -> Result<(StatusCode, Value), ApiError> {
    let (_, listed) = list(st, req)?;
    let mut deleted = Vec::new();
    for o in listed["items"].as_array().cloned().unwrap_or_default() {
        let ns = o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
        // An item a cascade already removed is simply gone.
        if let Ok(d) = st.delete(req.rt, &ns, &name, propagation(req)) {
            deleted.push(d);
        }
    }
    Ok((
        StatusCode::OK,
        json!({
            "kind": format!("{}List", req.rt.kind),
            "apiVersion": req.rt.api_version(),
            "metadata": {"resourceVersion": st.rv.to_string()},
            "items": deleted,
        }),
    ))
}

/// What a watch sends: type, namespace and selector filters.
struct Filter {
    rt: ResourceType,
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    meta_only: bool,
}

impl Filter {
    fn matches(&self, o: &Value) -> bool {
        let ns_ok = self
            .ns
            .as_deref()
            .is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns));
        ns_ok && self.labels.matches(o) && self.fields.matches(o)
    }
}

fn line(kind: &str, object: &Value, meta_only: bool) -> Bytes {
    let object = if meta_only && kind != "BOOKMARK" && kind != "ERROR" {
        partial(object)
    } else {
        object.clone()
    };
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

struct WatchState {
    shared: Arc<Shared>,
    changed: watch::Receiver<u64>,
    stopping: watch::Receiver<bool>,
    filter: Filter,
    last: u64,
    queue: VecDeque<Bytes>,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    done: bool,
}

impl WatchState {
    /// Queues the events after `last` (selector transitions become ADDED/DELETED).
    fn drain(&mut self) {
        let st = self.shared.lock();
        if self.last < st.oldest_rv {
            let e = ApiError::gone(self.last, st.oldest_rv);
            self.queue.push_back(line("ERROR", &e.to_status(), false));
            self.done = true;
            return;
        }
        let from = st.events.partition_point(|e| e.rv <= self.last);
        for ev in &st.events[from..] {
            if ev.group != self.filter.rt.group || ev.plural != self.filter.rt.plural {
                continue;
            }
            let now = self.filter.matches(&ev.object);
            let before = ev.old.as_ref().is_some_and(|o| self.filter.matches(o));
            let kind = match (ev.kind, before, now) {
                ("MODIFIED", true, true) => "MODIFIED",
                ("MODIFIED", false, true) => "ADDED",
                ("MODIFIED", true, false) => "DELETED",
                (k, _, true) if k != "MODIFIED" => k,
                _ => continue,
            };
            self.queue.push_back(line(
                kind,
                &st.present(&self.filter.rt, &ev.object),
                self.filter.meta_only,
            ));
        }
        self.last = st.rv;
    }
}

fn start_watch(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: Option<&str>,
    q: &Query,
    meta_only: bool,
) -> Result<Response, ApiError> {
    let (labels, fields) = selectors(q)?;
    let filter = Filter {
        rt: rt.clone(),
        ns: if rt.namespaced {
            ns.map(str::to_string)
        } else {
            None
        },
        labels,
        fields,
        meta_only,
    };
    let rv_param = param(q, "resourceVersion").unwrap_or("");
    let initial = param(q, "sendInitialEvents") == Some("true");
    let bookmarks = param(q, "allowWatchBookmarks") == Some("true");
    let timeout = param(q, "timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(1800);
    let mut queue = VecDeque::new();
    let mut changed = shared.changed.subscribe();
    changed.mark_unchanged();
    let last = {
        let st = shared.lock();
        if rv_param.is_empty() || rv_param == "0" || initial {
            // "Start at most recent / any": the current state first, as ADDED events.
            let items = st.list(rt, filter.ns.as_deref());
            for o in items.iter().filter(|o| filter.matches(o)) {
                queue.push_back(line("ADDED", o, meta_only));
            }
            if initial {
                queue.push_back(line(
                    "BOOKMARK",
                    &json!({
                        "kind": rt.kind, "apiVersion": rt.api_version(),
                        "metadata": {"resourceVersion": st.rv.to_string(),
                                     "annotations": {"k8s.io/initial-events-end": "true"}}
                    }),
                    false,
                ));
            }
            st.rv
        } else {
            rv_param.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {rv_param}"))
            })?
        }
    };
    let ws = WatchState {
        shared: shared.clone(),
        changed,
        stopping: shared.stopping.subscribe(),
        filter,
        last,
        queue,
        deadline: tokio::time::Instant::now() + Duration::from_secs(timeout),
        bookmarks,
        done: false,
    };
    let stream = futures::stream::unfold(ws, |mut ws| async move {
        loop {
            if let Some(b) = ws.queue.pop_front() {
                return Some((Ok::<Bytes, Infallible>(b), ws));
            }
            if ws.done || *ws.stopping.borrow() {
                return None;
            }
            ws.changed.borrow_and_update();
            ws.drain();
            if !ws.queue.is_empty() {
                continue;
            }
            tokio::select! {
                r = ws.changed.changed() => if r.is_err() { return None },
                _ = ws.stopping.changed() => return None,
                _ = tokio::time::sleep_until(ws.deadline) => {
                    // A bookmark before the server closes the watch, as the real one sends.
                    if ws.bookmarks {
                        ws.drain();
                        let rv = ws.last.to_string();
                        ws.queue.push_back(line("BOOKMARK", &json!({
                            "kind": ws.filter.rt.kind, "apiVersion": ws.filter.rt.api_version(),
                            "metadata": {"resourceVersion": rv}}), false));
                    }
                    ws.done = true;
                }
            }
        }
    });
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()))
}
