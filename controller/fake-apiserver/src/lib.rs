/*!
An in-process fake Kubernetes API server for tests: a real `kube::Client`, `watcher` and
`Controller` run against it end to end in `cargo test`, with no cluster.

```no_run
# async fn demo() -> Result<(), Box<dyn std::error::Error>> {
use nvcre_fake_apiserver::FakeApiServer;

let server = FakeApiServer::start().await?;
let client: kube::Client = server.client()?;
// … drive `Api<ConfigMap>`, `Api<DynamicObject>`, watchers and controllers with `client` …
server.shutdown().await;
# Ok(()) }
```

The library leaves the Kubernetes version of `k8s-openapi` (0.29: `v1_33` … `v1_37`) to the
final build, as k8s-openapi requires of libraries: its tests enable `v1_33`, and the workspace's
`.cargo/config.toml` names 1.33 for builds without dev-dependencies (`cargo doc`).

[`FakeApiServer::object`], [`FakeApiServer::compact`] and [`FakeApiServer::resource_version`]
let a test look behind the API.

# What it serves

Plain HTTP on `127.0.0.1:<ephemeral port>`, JSON only, no authentication. Reads and watches
with `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1` (kube's
`get_metadata`, `list_metadata`, `metadata_watcher`) answer `PartialObjectMetadata`.

- **Discovery**: `/version`, `/api`, `/apis`, `/api/v1` and `/apis/{group}/{version}` resource
  lists (status subresources listed as `<plural>/status`).
- **Types**: core `v1` Namespace, Node, ConfigMap, Secret, Event, Pod; `coordination.k8s.io/v1`
  Lease; `events.k8s.io/v1` Event; `apiextensions.k8s.io/v1` CustomResourceDefinition; and every
  served version of every CRD created (namespaced or cluster scope, `/status` when declared).
  Namespaces `default`, `kube-system` and `kube-public` exist from the start; namespaced writes
  into a missing namespace get 404.
- **Verbs**: get, list (`labelSelector` equality- and set-based, `fieldSelector` on
  `metadata.name` / `metadata.namespace`, `limit` / `continue`), watch (below), create (409
  AlreadyExists, `generateName`), replace (409 Conflict on a stale `resourceVersion`), patch,
  delete (finalizers honoured: `deletionTimestamp` first, removal when the last finalizer goes;
  `preconditions.resourceVersion`), deletecollection; `dryRun=All` on every write (the write runs
  in full, validation included, and is discarded).
- **Patch content types**: `application/merge-patch+json` (RFC 7386),
  `application/json-patch+json` (RFC 6902), `application/strategic-merge-patch+json` (as a merge
  patch whose lists of items that all have a `name` merge by `name` — containers, env, volumes;
  no `$patch` directives, no per-type patch strategies), `application/apply-patch+yaml`
  (server-side apply; the body may be JSON or YAML).
- **Server-side apply**: `fieldManager` (required) and `force`; field ownership is kept in
  `metadata.managedFields` (`FieldsV1`); applying a value different from the live one to a field
  another manager owns answers 409 Conflict (`Apply failed with 1 conflict: conflict with "m"
  using v1: .data.k`, one `FieldManagerConflict` cause per field) unless `force=true`, which
  transfers ownership; fields a manager stops applying are removed unless another manager owns
  them. Non-apply writes record `Update` entries and take over the fields they change.
- **Watch**: newline-delimited JSON events `ADDED` / `MODIFIED` / `DELETED` / `BOOKMARK` /
  `ERROR`, streamed until `timeoutSeconds` (default 1800) or shutdown. `resourceVersion` unset or
  `0` starts with the current objects as `ADDED`; any other value resumes after it, and one older
  than the last [`FakeApiServer::compact`] gets an `ERROR` event with a 410 Expired `Status`.
  `sendInitialEvents=true` (streaming lists) ends the initial events with a `BOOKMARK` annotated
  `k8s.io/initial-events-end: "true"`. With `allowWatchBookmarks=true` a `BOOKMARK` is also sent
  just before the server closes the watch. Label transitions under a selector become
  `ADDED` / `DELETED`, as on the real server.
- **Pod logs**: `GET /api/v1/namespaces/{ns}/pods/{name}/log` with `container` (default: the
  pod's first container), `timestamps` (the kubelet's fixed 9-digit RFC 3339 stamps),
  `sinceTime`, `tailLines` and `limitBytes` (the body cut at that byte, mid-line as the kubelet
  cuts), serving the lines a test gave [`FakeApiServer::append_pod_log`]; 404 for a pod that
  does not exist.
- **Object metadata**: `uid`, `creationTimestamp`, a global monotonic `resourceVersion`,
  `metadata.generation` (custom resources: bumped by any change outside `metadata` and, with a
  status subresource, `status`; built-ins: by changes to `spec`). A write that changes nothing
  keeps the `resourceVersion` and sends no event.
- **Status subresource**: `/status` writes change only `status`; main-resource writes keep the
  stored `status` (CRDs that declare it; built-in Namespace, Node, Pod).
- **Garbage collection**, synchronous: deleting an object removes its ownerReferences from
  dependents and deletes those left without owners, cascading (`propagationPolicy: Orphan`
  keeps them); an object written with ownerReferences none of whose owners exist (by uid) is
  collected right after the write. Deleting a namespace deletes its contents; deleting a CRD deletes its objects and
  stops serving it.
- **CRD validation** (custom resources): pruning of undeclared fields (`fieldValidation=Strict`
  rejects them with 400); `type`, `required`, `enum`, `pattern`, `minLength`/`maxLength`,
  `minimum`/`maximum`, `minItems`/`maxItems`, `nullable`; and every `x-kubernetes-validations`
  rule, evaluated with the Kubernetes CEL libraries of `nvcre_engine::Expr` (`self`, and
  `oldSelf` on updates — transition rules are skipped on create), honouring `message`,
  `messageExpression`, `fieldPath` and `reason`. Failures answer 422 Invalid in the API
  server's shape: `WorkloadRun.nvcre.nvidia.com "x" is invalid: spec: Invalid value: "object":
  spec is immutable after creation`, one `details.causes[]` entry per field error.

# What it deliberately does not model

Authentication, authorization and RBAC; admission webhooks and admission plugins (no defaulting
beyond the metadata above, no built-in type validation such as name formats); field selectors
other than `metadata.name` / `metadata.namespace`; protobuf, CBOR and table output; aggregated
discovery (`apidiscovery.k8s.io`); CRD version conversion (all versions share one stored object);
foreground deletion (treated as background); graceful pod deletion; periodic bookmarks;
`resourceVersionMatch=Exact` reads of past versions (lists always answer the latest state);
`optionalOldSelf`; ratcheting validation; `x-kubernetes-int-or-string` and `format` checks.
*/
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod fields;
pub mod fixtures;
pub mod registry;
pub mod schema;
pub mod selector;
mod server;
pub mod status;
pub mod store;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::watch;

pub use status::{ApiError, Cause};

/// Why the server could not start or a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding `127.0.0.1:0` failed.
    #[error("binding the fake API server: {0}")]
    Bind(#[source] std::io::Error),
    /// The server URL did not parse (cannot happen for a bound address).
    #[error("server URL: {0}")]
    Url(String),
    /// `kube::Client` construction failed.
    #[error("building the kube client: {0}")]
    Client(#[source] kube::Error),
}

/// A running fake API server; dropping it stops serving as [`FakeApiServer::shutdown`] does,
/// without waiting.
#[derive(Debug)]
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Arc<server::Shared>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl FakeApiServer {
    /// Starts serving on `127.0.0.1` at an ephemeral port, on the current tokio runtime.
    ///
    /// # Errors
    /// [`Error::Bind`] when the socket cannot be bound.
    pub async fn start() -> Result<FakeApiServer, Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let (changed, _) = watch::channel(0);
        let (stopping, mut stop_rx) = watch::channel(false);
        let shared = Arc::new(server::Shared {
            state: Mutex::new(store::State::new()),
            changed,
            stopping,
        });
        let app = axum::Router::new()
            .fallback(server::handle)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let stop = async move {
                // Either the flag or the handle going away stops the server.
                let _ = stop_rx.wait_for(|s| *s).await;
            };
            // Serving errors end the task; tests then see connection errors.
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await;
        });
        Ok(FakeApiServer {
            addr,
            shared,
            task: Some(task),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `kube::Client` for this server (`kube::Config::new(url)`, no auth, namespace `default`).
    ///
    /// # Errors
    /// [`Error::Url`] or [`Error::Client`].
    pub fn client(&self) -> Result<kube::Client, Error> {
        let uri = self
            .url()
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| Error::Url(e.to_string()))?;
        kube::Client::try_from(kube::Config::new(uri)).map_err(Error::Client)
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Forgets the event history, as etcd compaction does: watches resuming from any earlier
    /// resourceVersion get 410 Gone and must re-list.
    pub fn compact(&self) {
        self.shared.lock().compact();
    }

    /// A stored object by `(group, plural, namespace, name)` (namespace `""` for cluster
    /// scope), without going through HTTP.
    pub fn object(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let k = (group.into(), plural.into(), namespace.into(), name.into());
        self.shared.lock().objects.get(&k).cloned()
    }

    /// Appends lines to the log of `container` in pod `namespace/pod`, served by
    /// `GET …/pods/{pod}/log` (`container`, `timestamps`, `sinceTime`, `limitBytes`,
    /// `tailLines`). Each line carries the time the kubelet would stamp on it.
    pub fn append_pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        lines: impl IntoIterator<Item = (k8s_openapi::jiff::Timestamp, String)>,
    ) {
        let mut st = self.shared.lock();
        let log = st
            .logs
            .entry((namespace.into(), pod.into(), container.into()))
            .or_default();
        log.extend(
            lines
                .into_iter()
                .map(|(time, text)| store::LogLine { time, text }),
        );
    }

    /// Stops serving: open watches end, then the server task finishes.
    pub async fn shutdown(mut self) {
        self.shared.stopping.send_replace(true);
        if let Some(task) = self.task.take() {
            // The task only ends by shutdown; a join error means it panicked, already reported.
            let _ = task.await;
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.shared.stopping.send_replace(true);
    }
}
