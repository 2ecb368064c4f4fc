//! Where a scenario runs: the in-process fake API server, or a real cluster named by
//! `NVCRE_TEST_KUBECONFIG`; and the helpers every scenario shares (controller replicas, polling,
//! the health/metrics endpoints, Events).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use nvcre_controller::apply::train_job_resource;
use nvcre_controller::{Config, Error, run};
use nvcre_domain::crd::{WorkloadRunResource, crds};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// The label every Node a scenario creates carries (value: [`Env::id`]); runs target it.
pub const E2E_LABEL: &str = "e2e.nvcre.nvidia.com/id";

/// How to build a client for the API server (each controller replica builds its own, on its
/// own runtime).
#[derive(Debug, Clone)]
enum Connect {
    Fake(String),
    Real(PathBuf),
}

impl Connect {
    async fn client(&self) -> Client {
        match self {
            Connect::Fake(url) => {
                let uri = url.parse().expect("fake server url");
                Client::try_from(kube::Config::new(uri)).expect("fake client")
            }
            Connect::Real(path) => {
                let kc = Kubeconfig::read_from(path).expect("NVCRE_TEST_KUBECONFIG reads");
                let config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                        .await
                        .expect("kubeconfig");
                Client::try_from(config).expect("client")
            }
        }
    }
}

/// One scenario's API server, namespace and nodes.
pub struct Env {
    /// A client on the test's runtime.
    pub client: Client,
    /// The scenario's namespace.
    pub ns: String,
    /// Unique id: the Node name prefix and the [`E2E_LABEL`] value.
    pub id: String,
    connect: Connect,
    /// The fake API server, when the scenario runs on it.
    pub fake: Option<FakeApiServer>,
}

/// A kubeconfig variable that names an existing file, or why not.
fn kubeconfig() -> Result<PathBuf, String> {
    match std::env::var_os("NVCRE_TEST_KUBECONFIG") {
        None => Err(
            "NVCRE_TEST_KUBECONFIG is not set (set it to the kubeconfig of a disposable \
                     cluster to run the end-to-end scenarios there too)"
                .into(),
        ),
        Some(p) if p.is_empty() => Err("NVCRE_TEST_KUBECONFIG is empty".into()),
        Some(p) => Ok(PathBuf::from(p)),
    }
}

fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{:x}{:x}", std::process::id() % 0xfff, nanos % 0xfffff)
}

impl Env {
    /// A fresh fake API server with the CRDs, namespace `team-a` and four nodes.
    pub async fn fake() -> Env {
        let server = FakeApiServer::start().await.expect("fake server");
        let env = Env {
            client: server.client().expect("client"),
            ns: "team-a".into(),
            id: "nvcre-e2e".into(),
            connect: Connect::Fake(server.url()),
            fake: Some(server),
        };
        env.setup().await;
        env
    }

    /// The cluster of `NVCRE_TEST_KUBECONFIG` with a namespace and four nodes of this
    /// scenario; `None` (printing why) when the variable is unset.
    pub async fn real(test: &str) -> Option<Env> {
        let path = match kubeconfig() {
            Ok(p) => p,
            Err(why) => {
                println!("skipped {test}: {why}");
                return None;
            }
        };
        Some(Env::from_kubeconfig(path).await)
    }

    /// The cluster of the kubeconfig at `path`, as [`Env::real`] sets it up.
    pub async fn from_kubeconfig(path: PathBuf) -> Env {
        let connect = Connect::Real(path);
        let id = format!("nvcre-e2e-{}", unique());
        let env = Env {
            client: connect.client().await,
            ns: id.clone(),
            id,
            connect,
            fake: None,
        };
        env.setup().await;
        env
    }

    async fn setup(&self) {
        let crd_api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let pp = PostParams::default();
        let mut all = crds();
        all.push(trainer_crd("TrainJob", "trainjobs"));
        all.push(trainer_crd("TrainingRuntime", "trainingruntimes"));
        for crd in all {
            match crd_api.create(&pp, &crd).await {
                Ok(_) => {}
                // A real cluster may have them already (another scenario, or installed).
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("creating a CRD: {e}"),
            }
        }
        let ns: Api<Namespace> = Api::all(self.client.clone());
        ns.create(
            &pp,
            &serde_json::from_value(json!({"metadata": {"name": self.ns}})).expect("ns"),
        )
        .await
        .expect("namespace");
        let nodes: Api<Node> = Api::all(self.client.clone());
        for doc in self.node_docs() {
            let node: Node = serde_json::from_value(doc).expect("node");
            nodes.create(&pp, &node).await.expect("node");
        }
        // A real API server serves a new CRD once it is established.
        let runs: Api<WorkloadRunResource> = Api::namespaced(self.client.clone(), &self.ns);
        let jobs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.ns, &train_job_resource());
        eventually("the CRDs to be served", || async {
            let ok = runs.list(&ListParams::default()).await.is_ok()
                && jobs.list(&ListParams::default()).await.is_ok();
            ok.then_some(())
        })
        .await;
    }

    /// Removes what the scenario created (real cluster: the namespace and the nodes) or stops
    /// the fake server.
    pub async fn finish(self) {
        if let Some(server) = self.fake {
            server.shutdown().await;
            return;
        }
        let dp = DeleteParams::default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let _ = nodes
            .delete_collection(
                &dp,
                &ListParams::default().labels(&format!("{E2E_LABEL}={}", self.id)),
            )
            .await;
        let ns: Api<Namespace> = Api::all(self.client.clone());
        let _ = ns.delete(&self.ns, &dp).await;
    }

    /// The name of node `i`.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}-{i}", self.id)
    }

    /// The four H100 nodes (AWS provider IDs), labelled with [`E2E_LABEL`].
    pub fn node_docs(&self) -> Vec<Value> {
        (0..4)
            .map(|i| {
                let name = self.node_name(i);
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {
                        "kubernetes.io/hostname": name,
                        "nvidia.com/gpu.present": "true",
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                        E2E_LABEL: self.id}},
                    "spec": {"providerID": format!("aws:///us-east-1a/i-000000000000000{i}")},
                    "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": "8"}}
                })
            })
            .collect()
    }

    /// The controller configuration of this scenario: its namespace only, a free port for
    /// `/healthz`, `/readyz` and `/metrics`.
    pub fn config(&self) -> Config {
        Config {
            namespace: Some(self.ns.clone()),
            http_addr: Some(free_addr()),
            ..Config::default()
        }
    }

    /// Starts a controller replica on a runtime of its own (so that [`Replica::crash`] can kill
    /// it without any cleanup running), with its own client.
    pub fn start(&self, config: Config) -> Replica {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("replica runtime");
        let (stop, stop_rx) = oneshot::channel::<()>();
        let http = config.http_addr.expect("http address");
        let connect = self.connect.clone();
        let task = rt.spawn(async move {
            let client = connect.client().await;
            run(client, config, async move {
                let _ = stop_rx.await;
            })
            .await
        });
        Replica {
            stop: Some(stop),
            task: Some(task),
            rt: Some(rt),
            http,
        }
    }

    /// `(type, reason, note, reportingInstance)` of every Event about `kind`/`name`.
    pub async fn events_about(
        &self,
        kind: &str,
        name: &str,
    ) -> Vec<(String, String, String, String)> {
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), &self.ns);
        let mut out: Vec<(String, String, String, String)> = api
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                })
            })
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                    e.reporting_instance.unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out
    }
}

/// A running controller replica.
pub struct Replica {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), Error>>>,
    rt: Option<tokio::runtime::Runtime>,
    /// Its `/healthz`, `/readyz`, `/metrics` address.
    pub http: SocketAddr,
}

impl Replica {
    /// Graceful shutdown: the shutdown future completes, [`run`] returns.
    pub async fn stop(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        task.await.expect("controller task")
    }

    /// Kills the replica as a crash would: its runtime stops, no task runs again (the Lease is
    /// not released, watches just drop).
    pub fn crash(mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }

    /// `GET path` on the replica's HTTP server: status code and body.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path).await
    }

    /// The value of the sample `name` (with its labels, as exposed) on `/metrics`; 0 when absent.
    pub async fn metric(&self, sample: &str) -> f64 {
        let Some((200, body)) = self.get("/metrics").await else {
            return 0.0;
        };
        body.lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// An address on 127.0.0.1 no one listens on right now.
fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// A plain HTTP/1.1 GET; `None` when nothing answers.
async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.ok()?;
    let code = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

/// Polls `f` every 100 ms until it returns `Some`, under a 60 s hang guard (a deadline for a
/// hung controller, not a timing assertion).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let poll = async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    match tokio::time::timeout(Duration::from_secs(60), poll).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// A Kubeflow Trainer CRD with a schemaless spec and a status subresource (the Trainer's own
/// when a real cluster has it).
pub fn trainer_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    nvcre_fake_apiserver::fixtures::trainer_crd(kind, plural).expect("trainer crd")
}
