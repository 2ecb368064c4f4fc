//! The kube wiring: four `Controller`s (WorkloadRun, Workflow, BandwidthMeasurement,
//! GoodputMeasurement), the rules reload loop, the
//! health/metrics server and leader election, started by [`run`].

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as KubeNode, ObjectReference};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use nvcre_domain::Node;
use nvcre_domain::crd::{
    API_VERSION, WORKFLOW_LABEL, WORKLOAD_RUN_LABEL, WorkflowResource, WorkloadRunResource,
};
use nvcre_domain::measure::{BandwidthMeasurementResource, GoodputMeasurementResource};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::apply::{FIELD_MANAGER, apply_owned, train_job_resource};
use crate::error::Error;
use crate::http::{Health, router};
use crate::metrics::{ControllerLabel, ErrorLabels, MeasurementKind, Metrics};
use crate::rules::{Reload, RulesHolder, RulesSource};
use crate::workflow::{ChildRef, ObservedJob, WorkflowObservation, decide_workflow};
use crate::workloadrun::{EventNote, RunAction, RunObservation, decide_workload_run};

/// Lease-based leader election settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Lease name (`nvcre-controller`).
    pub lease_name: String,
    /// Lease namespace (the controller's own).
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// Lease duration in seconds; a standby takes over at most this long after the leader
    /// stops renewing.
    pub duration_secs: u64,
}

/// The rules ConfigMap, which rules reload Events are about (`kubectl describe configmap`
/// shows why an edit was refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapRef {
    /// Namespace (the controller's own).
    pub namespace: String,
    /// Name (`nvcre-rules`).
    pub name: String,
}

impl ConfigMapRef {
    fn object_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            ..ObjectReference::default()
        }
    }
}

/// How [`run`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Watch one namespace, or all (`None`).
    pub namespace: Option<String>,
    /// Rules: built-in, or a directory reloaded on change.
    pub rules: RulesSource,
    /// How often the rules directory is checked.
    pub reload_interval: Duration,
    /// Leader election; `None` runs the controllers at once (one replica, or tests).
    pub leader_election: Option<LeaderElection>,
    /// Address of `/healthz`, `/readyz` and `/metrics`; `None` serves nothing.
    pub http_addr: Option<SocketAddr>,
    /// The rules ConfigMap, for reload Events (`None`: reloads are logged and counted only).
    pub rules_config_map: Option<ConfigMapRef>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: None,
            rules: RulesSource::BuiltIn,
            reload_interval: Duration::from_secs(5),
            leader_election: None,
            http_addr: None,
            rules_config_map: None,
        }
    }
}

struct Ctx {
    client: Client,
    rules: Arc<RulesHolder>,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    measure: crate::measure::MeasureCtx,
}

/// Runs the controller until `shutdown` completes (then in-flight reconciles finish and the
/// function returns `Ok`), or until leadership is lost (`Err(Error::Lease)`: exit and let the
/// Deployment restart the pod as a standby).
///
/// # Errors
/// [`Error::Rules`] when the initial rules do not load, [`Error::Http`] when the address cannot
/// be bound, [`Error::Lease`] for leader election failures.
pub async fn run(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let rules = Arc::new(RulesHolder::load(config.rules.clone()).map_err(Error::Rules)?);
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::new(Arc::clone(&metrics), Arc::clone(&rules)));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    if let Some(addr) = config.http_addr {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let app = router(Arc::clone(&health));
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await
            {
                warn!(error = %e, "http server stopped");
            }
        });
    }
    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: config.leader_election.as_ref().map(|l| l.identity.clone()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    spawn_reload(
        Reloader {
            rules: Arc::clone(&rules),
            metrics: Arc::clone(&metrics),
            recorder: recorder.clone(),
            target: config
                .rules_config_map
                .as_ref()
                .map(ConfigMapRef::object_ref),
        },
        config.reload_interval,
        stop_rx.clone(),
    );
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        measure: crate::measure::MeasureCtx {
            client: client.clone(),
            rules: Arc::clone(&rules),
            metrics: Arc::clone(&metrics),
            sampled: std::sync::Mutex::new(std::collections::HashMap::new()),
        },
        rules,
        metrics,
        recorder,
    });
    let Some(le) = &config.leader_election else {
        health.ready.store(true, Ordering::Relaxed);
        run_controllers(ctx, config.namespace.clone(), stopped(stop_rx)).await;
        return Ok(());
    };
    if le.duration_secs < 2 {
        return Err(Error::Lease(format!(
            "lease duration must be at least 2 seconds, got {}",
            le.duration_secs
        )));
    }
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, &le.lease_name)
        .with_namespace(&le.namespace)
        .with_identity(&le.identity)
        .with_duration(le.duration_secs)
        .with_grace(le.duration_secs.div_ceil(3).max(1))
        // One field manager per replica: a standby's apply of `holderIdentity` then conflicts
        // with the holder's (409) instead of silently overwriting it.
        .with_field_manager(format!("{FIELD_MANAGER}-lease-{}", le.identity))
        .build()
        .await
        .map_err(|e| Error::Lease(e.to_string()))?;
    let (mut leader, lease_task) = manager.watch().await;
    // Dropping every receiver makes the lease task release the Lease (when held) and end, so a
    // standby takes over at once after a graceful shutdown instead of after the lease expires.
    let release = |leader: watch::Receiver<bool>| async move {
        drop(leader);
        if tokio::time::timeout(Duration::from_secs(5), lease_task)
            .await
            .is_err()
        {
            warn!("releasing the lease timed out; a standby takes over when it expires");
        }
    };
    // A standby with good rules is ready: it serves nothing but takes over on failover.
    health.ready.store(true, Ordering::Relaxed);
    let mut stop = stop_rx.clone();
    // `Some(Ok)`: leader; `Some(Err)`: the lease task ended; `None`: shutdown first.
    let acquired = tokio::select! {
        r = leader.wait_for(|l| *l) => Some(r.map(|_| ()).map_err(|e| e.to_string())),
        _ = stop.wait_for(|s| *s) => None,
    };
    match acquired {
        Some(Ok(())) => {}
        Some(Err(e)) => {
            release(leader).await;
            return Err(Error::Lease(e));
        }
        None => {
            release(leader).await;
            return Ok(());
        }
    }
    info!(identity = %le.identity, "acquired leadership");
    let lost = Arc::new(AtomicBool::new(false));
    let either = {
        let shutdown = stopped(stop_rx.clone());
        let mut watch_leader = leader.clone();
        let lost = Arc::clone(&lost);
        async move {
            tokio::select! {
                () = shutdown => {}
                _ = watch_leader.wait_for(|l| !*l) => lost.store(true, Ordering::Relaxed),
            }
        }
    };
    run_controllers(ctx, config.namespace.clone(), either).await;
    release(leader).await;
    if lost.load(Ordering::Relaxed) {
        warn!(identity = %le.identity, "leadership lost");
        return Err(Error::Lease("leadership lost".into()));
    }
    info!(identity = %le.identity, "stopped; lease released");
    Ok(())
}

/// A future that completes when `rx` turns true (or its sender is gone).
fn stopped(mut rx: watch::Receiver<bool>) -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, done) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = rx.wait_for(|s| *s).await;
        let _ = tx.send(());
    });
    async move {
        let _ = done.await;
    }
}

/// What the reload loop needs: the holder, the counters, and where to report.
struct Reloader {
    rules: Arc<RulesHolder>,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    target: Option<ObjectReference>,
}

/// The longest Event note the API server accepts (`events.k8s.io/v1`), in bytes.
pub(crate) const EVENT_NOTE_MAX: usize = 1024;

/// `text` cut to at most [`EVENT_NOTE_MAX`] bytes on a character boundary, `…` marking a cut.
pub(crate) fn event_note(text: &str) -> String {
    cut_to(text, EVENT_NOTE_MAX)
}

/// `text` cut to at most `max` bytes on a character boundary, `…` marking a cut.
pub(crate) fn cut_to(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn spawn_reload(r: Reloader, every: Duration, mut stop: watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let event = match r.rules.poll() {
                Reload::Unchanged => None,
                Reload::Reloaded => {
                    r.metrics.rules_reloads.inc();
                    info!("rules reloaded");
                    Some((
                        EventType::Normal,
                        "RulesReloaded",
                        "rules reloaded and in force".to_string(),
                    ))
                }
                Reload::Refused(errors) => {
                    r.metrics.rules_reload_failures.inc();
                    warn!(%errors, "rules reload refused; the last good set stays in force");
                    Some((
                        EventType::Warning,
                        "RulesReloadRefused",
                        format!("rules reload refused, last good set in force: {errors}"),
                    ))
                }
            };
            if let (Some((type_, reason, note)), Some(target)) = (event, &r.target) {
                let event = Event {
                    type_,
                    reason: reason.into(),
                    note: Some(event_note(&note)),
                    action: "ReloadRules".into(),
                    secondary: None,
                };
                if let Err(e) = r.recorder.publish(&event, target).await {
                    warn!(error = %e, "publishing the rules reload event");
                }
            }
        }
    });
}

async fn run_controllers(
    ctx: Arc<Ctx>,
    namespace: Option<String>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let (runs, workflows): (Api<WorkloadRunResource>, Api<WorkflowResource>) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let tj = train_job_resource();
    let jobs: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &tj),
        None => Api::all_with(client.clone(), &tj),
    };
    // One shutdown signal, shared by both controllers.
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        let _ = tx.send(true);
    });
    let run_controller = Controller::new(runs, watcher::Config::default())
        .owns(workflows.clone(), watcher::Config::default())
        // TrainJobs are grandchildren (owned by the Workflow): map them by label.
        .watches_with(
            jobs.clone(),
            tj.clone(),
            watcher::Config::default().labels(WORKLOAD_RUN_LABEL),
            |job: DynamicObject| {
                let ns = job.namespace();
                job.labels().get(WORKLOAD_RUN_LABEL).map(|run| match &ns {
                    Some(ns) => ObjectRef::<WorkloadRunResource>::new(run).within(ns),
                    None => ObjectRef::new(run),
                })
            },
        )
        .graceful_shutdown_on(stopped(rx.clone()))
        .run(reconcile_run, error_policy_run, Arc::clone(&ctx))
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "workloadrun reconcile");
            }
        });
    let (bms, gms): (
        Api<BandwidthMeasurementResource>,
        Api<GoodputMeasurementResource>,
    ) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let workflow_controller = Controller::new(workflows, watcher::Config::default());
    let on_node = workflows_on_node(workflow_controller.store());
    let workflow_controller = workflow_controller
        .owns_with(jobs.clone(), tj.clone(), watcher::Config::default())
        // A node's health changing is when the node health monitor of the groups on it can
        // find something: the Workflows running there are looked at again at once.
        .watches(
            Api::<KubeNode>::all(client.clone()),
            watcher::Config::default(),
            on_node,
        )
        // A measurement completing is when a group's thresholds can be evaluated.
        .owns(bms.clone(), watcher::Config::default())
        .owns(gms.clone(), watcher::Config::default())
        .graceful_shutdown_on(stopped(rx.clone()))
        .run(reconcile_workflow, error_policy_workflow, Arc::clone(&ctx))
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "workflow reconcile");
            }
        });
    let bandwidth_controller = Controller::new(bms, watcher::Config::default()).watches_with(
        jobs.clone(),
        tj.clone(),
        watcher::Config::default(),
        measured(crate::measure::BANDWIDTH_SUFFIX),
    );
    let goodput_controller = Controller::new(gms, watcher::Config::default()).watches_with(
        jobs,
        tj,
        watcher::Config::default(),
        measured(crate::measure::GOODPUT_SUFFIX),
    );
    spawn_series_sweep(
        Arc::clone(&ctx.metrics),
        (bandwidth_controller.store(), goodput_controller.store()),
        rx.clone(),
    );
    let bandwidth_controller = bandwidth_controller
        .graceful_shutdown_on(stopped(rx.clone()))
        .run(
            reconcile_bandwidth,
            error_policy_bandwidth,
            Arc::clone(&ctx),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "bandwidthmeasurement reconcile");
            }
        });
    let goodput_controller = goodput_controller
        .graceful_shutdown_on(stopped(rx))
        .run(reconcile_goodput, error_policy_goodput, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!(error = %e, "goodputmeasurement reconcile");
            }
        });
    futures::join!(
        run_controller,
        workflow_controller,
        bandwidth_controller,
        goodput_controller
    );
}

/// Maps a Node change to the Workflows whose running groups are on that node (under Unpinned,
/// which records no nodes, every Workflow with a running group), read from the Workflow
/// controller's cache. Only a change of what a node's health is usually judged on (labels,
/// taints, `spec.unschedulable`, the type, status, reason and message of its conditions) maps
/// to anything: the kubelet's heartbeats, which rewrite the conditions' times every few
/// seconds, do not.
fn workflows_on_node(
    store: kube::runtime::reflector::Store<WorkflowResource>,
) -> impl Fn(KubeNode) -> Vec<ObjectRef<WorkflowResource>> + Clone + Send + Sync + 'static {
    use std::hash::{Hash, Hasher};
    let seen: Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>> = Arc::default();
    move |node: KubeNode| {
        let name = node.name_any();
        let conditions: Vec<(String, String, Option<String>, Option<String>)> = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c.type_.clone(),
                            c.status.clone(),
                            c.reason.clone(),
                            c.message.clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let spec = node.spec.as_ref();
        let taints = spec
            .and_then(|s| s.taints.as_ref())
            .map(|t| serde_json::to_string(t).unwrap_or_default());
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            node.metadata.labels.as_ref(),
            taints,
            spec.and_then(|s| s.unschedulable),
            conditions,
        )
            .hash(&mut h);
        let print = h.finish();
        if let Ok(mut seen) = seen.lock() {
            if seen.get(&name) == Some(&print) {
                return Vec::new();
            }
            seen.insert(name.clone(), print);
        }
        store
            .state()
            .iter()
            .filter(|wf| {
                wf.status
                    .as_ref()
                    .filter(|s| !crate::conditions::is_terminal(&s.conditions))
                    .and_then(|s| s.orchestration.as_ref())
                    .is_some_and(|o| {
                        o.groups.iter().any(|g| {
                            g.phase == "Running" && (g.nodes.is_empty() || g.nodes.contains(&name))
                        })
                    })
            })
            .map(|wf| ObjectRef::from_obj(wf.as_ref()))
            .collect()
    }
}

/// How often the measurement gauges are compared with the watch caches.
const SERIES_SWEEP: Duration = Duration::from_secs(5);

/// Drops the gauges of deleted measurements every [`SERIES_SWEEP`] until `stop` turns true
/// ([`crate::measure::sweep_series`] says why a sweep rather than a finalizer). A measurement
/// is present when its controller's cache holds it without a deletion timestamp.
fn spawn_series_sweep(
    metrics: Arc<Metrics>,
    (bms, gms): (
        Store<BandwidthMeasurementResource>,
        Store<GoodputMeasurementResource>,
    ),
    mut stop: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(SERIES_SWEEP) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let live = |deleting: Option<bool>| deleting == Some(false);
            let gone = crate::measure::sweep_series(&metrics, |k| match k.kind {
                MeasurementKind::Bandwidth => live(
                    bms.get(&ObjectRef::new(&k.name).within(&k.namespace))
                        .map(|m| m.metadata.deletion_timestamp.is_some()),
                ),
                MeasurementKind::Goodput => live(
                    gms.get(&ObjectRef::new(&k.name).within(&k.namespace))
                        .map(|m| m.metadata.deletion_timestamp.is_some()),
                ),
            });
            for k in gone {
                info!(namespace = %k.namespace, measurement = %k.name, "dropped the gauges of a deleted measurement");
            }
        }
    });
}

/// Maps a TrainJob to its measurement of kind `K`, which has a deterministic name:
/// `<job>-bandwidth`, `<job>-goodput`.
fn measured<K>(suffix: &'static str) -> impl Fn(DynamicObject) -> Option<ObjectRef<K>> + Clone
where
    K: Resource<DynamicType = ()> + kube::runtime::reflector::Lookup<DynamicType = ()>,
{
    move |job: DynamicObject| {
        let name = format!("{}{suffix}", job.name_any());
        Some(match job.namespace() {
            Some(ns) => ObjectRef::new(&name).within(&ns),
            None => ObjectRef::new(&name),
        })
    }
}

fn now() -> (i64, String) {
    let ts = k8s_openapi::jiff::Timestamp::now();
    (
        ts.as_second(),
        ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

async fn list_nodes(client: &Client) -> Result<Arc<Vec<Node>>, Error> {
    Ok(list_node_objects(client).await?.0)
}

/// The cluster's nodes, and each as the API server returned it (JSON, by name).
async fn list_node_objects(
    client: &Client,
) -> Result<(Arc<Vec<Node>>, BTreeMap<String, Value>), Error> {
    let api: Api<KubeNode> = Api::all(client.clone());
    let list = api.list(&ListParams::default()).await?;
    let docs: Vec<Value> = list
        .items
        .iter()
        .map(|n| {
            let mut v = serde_json::to_value(n)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("apiVersion".into(), json!("v1"));
                o.insert("kind".into(), json!("Node"));
            }
            Ok(v)
        })
        .collect::<Result<_, serde_json::Error>>()?;
    let nodes = nvcre_domain::nodes_from_documents(&docs)
        .map(Arc::new)
        .map_err(|e| Error::Nodes(e.to_string()))?;
    let objects = docs
        .into_iter()
        .filter_map(|d| {
            let name = d.pointer("/metadata/name")?.as_str()?.to_string();
            Some((name, d))
        })
        .collect();
    Ok((nodes, objects))
}

async fn publish(ctx: &Ctx, obj: &impl Resource<DynamicType = ()>, note: &EventNote) {
    let event = Event {
        type_: if note.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: note.reason.clone(),
        // Every Event, not only the reload's: a rule's message can be any length, and the API
        // server refuses a longer note (the Event would be lost).
        note: Some(event_note(&note.message)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
        warn!(error = %e, "publishing an event");
    }
}

fn observe(ctx: &Ctx, controller: &str, start: Instant) {
    let label = ControllerLabel {
        controller: controller.into(),
    };
    ctx.metrics.reconciles.get_or_create(&label).inc();
    ctx.metrics
        .durations
        .get_or_create(&label)
        .observe(start.elapsed().as_secs_f64());
}

fn action(requeue: Option<Duration>) -> Action {
    requeue.map_or_else(Action::await_change, Action::requeue)
}

async fn reconcile_run(run: Arc<WorkloadRunResource>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let start = Instant::now();
    let result = reconcile_run_inner(&run, &ctx).await;
    observe(&ctx, "workloadrun", start);
    result
}

async fn reconcile_run_inner(run: &WorkloadRunResource, ctx: &Ctx) -> Result<Action, Error> {
    let ns = run.namespace().unwrap_or_default();
    let name = run.name_any();
    let workflows: Api<WorkflowResource> = Api::namespaced(ctx.client.clone(), &ns);
    // Uncached: a Workflow deleted a moment ago must not look present.
    let workflow = workflows.get_opt(&name).await?;
    let needs_nodes = run.status.as_ref().is_none_or(|s| s.workflow_ref.is_none());
    let nodes = if needs_nodes {
        list_nodes(&ctx.client).await?
    } else {
        Arc::new(Vec::new())
    };
    let rules = ctx.rules.current();
    let (_, now) = now();
    let decision = decide_workload_run(
        &rules,
        RunObservation {
            run,
            workflow: workflow.as_ref(),
            nodes: &nodes,
            now: &now,
        },
    );
    if let RunAction::CreateWorkflow(wf) = &decision.action {
        let manifest = serde_json::to_value(wf.as_ref())?;
        let uid = run.metadata.uid.clone().unwrap_or_default();
        if let Err(e) = apply_owned(&ctx.client, &ns, &manifest, &uid).await {
            let note = EventNote {
                warning: true,
                reason: "WorkflowCreationError".into(),
                message: format!("Failed to create Workflow {name}: {e}"),
            };
            publish(ctx, run, &note).await;
            return Err(e);
        }
        for note in &decision.notes {
            publish(ctx, run, note).await;
        }
    }
    if let Some(status) = &decision.status {
        let runs: Api<WorkloadRunResource> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"apiVersion": API_VERSION, "kind": "WorkloadRun", "status": status});
        if let Err(e) = runs
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
        {
            // A build failure creates nothing: until the status lands, the Event is the only
            // place that says why the run is stuck.
            if let Some(note) =
                crate::workloadrun::build_failed_status_update_failed(&decision, &e.to_string())
            {
                publish(ctx, run, &note).await;
            }
            return Err(e.into());
        }
    }
    if let Some(note) = &decision.event {
        publish(ctx, run, note).await;
    }
    Ok(action(decision.requeue_after))
}

fn error_policy_run(_: Arc<WorkloadRunResource>, e: &Error, ctx: Arc<Ctx>) -> Action {
    count_error(&ctx, "workloadrun", e);
    e.action()
}

async fn reconcile_bandwidth(
    bm: Arc<BandwidthMeasurementResource>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let start = Instant::now();
    let result = crate::measure::reconcile_bandwidth(&bm, &ctx.measure).await;
    observe(&ctx, "bandwidthmeasurement", start);
    result.map(action)
}

async fn reconcile_goodput(
    gm: Arc<GoodputMeasurementResource>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let start = Instant::now();
    let result = crate::measure::reconcile_goodput(&gm, &ctx.measure).await;
    observe(&ctx, "goodputmeasurement", start);
    result.map(action)
}

fn error_policy_bandwidth(
    _: Arc<BandwidthMeasurementResource>,
    e: &Error,
    ctx: Arc<Ctx>,
) -> Action {
    count_error(&ctx, "bandwidthmeasurement", e);
    e.action()
}

fn error_policy_goodput(_: Arc<GoodputMeasurementResource>, e: &Error, ctx: Arc<Ctx>) -> Action {
    count_error(&ctx, "goodputmeasurement", e);
    e.action()
}

fn error_policy_workflow(_: Arc<WorkflowResource>, e: &Error, ctx: Arc<Ctx>) -> Action {
    count_error(&ctx, "workflow", e);
    e.action()
}

fn count_error(ctx: &Ctx, controller: &str, e: &Error) {
    warn!(controller, error = %e, "reconcile failed");
    ctx.metrics
        .errors
        .get_or_create(&ErrorLabels {
            controller: controller.into(),
            kind: e.kind().into(),
        })
        .inc();
}

async fn reconcile_workflow(wf: Arc<WorkflowResource>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let start = Instant::now();
    let result = reconcile_workflow_inner(&wf, &ctx).await;
    observe(&ctx, "workflow", start);
    result
}

fn observed_job(job: &DynamicObject) -> ObservedJob {
    let finished_at = match crate::measure::job_state(job) {
        crate::measure::JobState::Succeeded(at) | crate::measure::JobState::Failed(at) => at
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_second()),
        crate::measure::JobState::Running => None,
    };
    let conditions = job
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let s = |k: &str| {
                        c.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    (s("type"), s("status"), s("message"))
                })
                .collect()
        })
        .unwrap_or_default();
    ObservedJob {
        name: job.name_any(),
        created_at: job
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        conditions,
        finished_at,
        nodes: Vec::new(),
    }
}

async fn reconcile_workflow_inner(cached: &WorkflowResource, ctx: &Ctx) -> Result<Action, Error> {
    let ns = cached.namespace().unwrap_or_default();
    let name = cached.name_any();
    // Uncached, and before the TrainJobs are listed: the status is this controller's record of
    // what it started, and a cached copy older than its last write would start a group again
    // (re-creating a TrainJob deleted since) or take a replaced TrainJob for a deleted one.
    let workflows: Api<WorkflowResource> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(fresh) = workflows.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let wf = &fresh;
    let (nodes, node_objects) = list_node_objects(&ctx.client).await?;
    let tj = train_job_resource();
    let jobs_api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &tj);
    let mut jobs: BTreeMap<String, ObservedJob> = jobs_api
        .list(&ListParams::default().labels(&format!("{WORKFLOW_LABEL}={name}")))
        .await?
        .items
        .iter()
        .map(|j| (j.name_any(), observed_job(j)))
        .collect();
    bind_unpinned_nodes(ctx, wf, &mut jobs).await?;
    let measurements = crate::measure::final_measurements(&ctx.client, &ns, &name).await?;
    let rules = ctx.rules.current();
    let (now_secs, now) = now();
    let decision = decide_workflow(
        &rules,
        WorkflowObservation {
            workflow: wf,
            nodes: &nodes,
            jobs: &jobs,
            node_objects: &node_objects,
            measurements: &measurements,
            now_secs,
            now: &now,
        },
    );
    delete_children(ctx, &ns, &decision.delete).await?;
    let uid = wf.metadata.uid.clone().unwrap_or_default();
    for (i, m) in decision.apply.iter().enumerate() {
        match apply_owned(&ctx.client, &ns, m, &uid).await {
            Ok(()) => {}
            Err(Error::OwnedByOther { kind, name: child }) => {
                warn!(%kind, %child, workflow = %name, "name collision; the Workflow fails");
                let created: Vec<String> = decision.apply[..i]
                    .iter()
                    .filter(|m| m.get("kind").and_then(Value::as_str) == Some("TrainJob"))
                    .filter_map(|m| m.pointer("/metadata/name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect();
                let status = decision
                    .status
                    .clone()
                    .unwrap_or_else(|| wf.status.clone().unwrap_or_default());
                let failed = crate::workflow::collision_decision(
                    wf,
                    status,
                    &jobs,
                    &created,
                    (&kind, &child),
                    &now,
                );
                return stop_workflow(ctx, wf, failed).await;
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(status) = &decision.status {
        write_workflow_status(ctx, wf, status).await?;
    }
    for note in &decision.events {
        publish(ctx, wf, note).await;
    }
    Ok(action(decision.requeue_after))
}

/// The label JobSet puts on the pods of a TrainJob (the JobSet is named after it).
const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

/// Under Unpinned placement (the group records no nodes), the nodes each running group's
/// unfinished TrainJob's pods are bound to, read from the pods JobSet labels with the job's
/// name: what the node health monitor evaluates there. Nothing is read otherwise.
async fn bind_unpinned_nodes(
    ctx: &Ctx,
    wf: &WorkflowResource,
    jobs: &mut BTreeMap<String, ObservedJob>,
) -> Result<(), Error> {
    let Some(orch) = wf.status.as_ref().and_then(|s| s.orchestration.as_ref()) else {
        return Ok(());
    };
    let monitored = wf
        .spec
        .job_template
        .pointer("/spec/nodeHealthMonitor/cel/expression")
        .is_some();
    if !monitored {
        return Ok(());
    }
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(ctx.client.clone(), &wf.namespace().unwrap_or_default());
    for g in orch
        .groups
        .iter()
        .filter(|g| g.phase == "Running" && g.nodes.is_empty())
    {
        let Some(job) = g.job_ref.as_ref().and_then(|j| jobs.get_mut(j)) else {
            continue;
        };
        let list = pods
            .list(&ListParams::default().labels(&format!("{JOBSET_NAME_LABEL}={}", job.name)))
            .await?;
        let mut nodes: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        nodes.sort();
        nodes.dedup();
        job.nodes = nodes;
    }
    Ok(())
}

/// Deletes `children` (background propagation); one already gone is fine.
async fn delete_children(ctx: &Ctx, ns: &str, children: &[ChildRef]) -> Result<(), Error> {
    for child in children {
        let ar = crate::apply::resource_of(
            &json!({"apiVersion": child.api_version, "kind": child.kind}),
        )?;
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
        match api.delete(&child.name, &DeleteParams::background()).await {
            Ok(_) => {}
            // Already gone (deleted on an earlier pass whose status write failed).
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Carries out a [`crate::workflow::fail_workflow`] decision after a collision: deletes the
/// running TrainJobs, writes the node result ConfigMaps (one whose name another owner holds is
/// left out, and so is its reference) and the Failed status. Terminal: never looked at again.
async fn stop_workflow(
    ctx: &Ctx,
    wf: &WorkflowResource,
    decision: crate::workflow::WorkflowDecision,
) -> Result<Action, Error> {
    let ns = wf.namespace().unwrap_or_default();
    delete_children(ctx, &ns, &decision.delete).await?;
    let uid = wf.metadata.uid.clone().unwrap_or_default();
    let mut status = decision
        .status
        .unwrap_or_else(|| wf.status.clone().unwrap_or_default());
    for m in &decision.apply {
        match apply_owned(&ctx.client, &ns, m, &uid).await {
            Ok(()) => {}
            Err(Error::OwnedByOther { kind, name: child }) => {
                warn!(%kind, %child, workflow = %wf.name_any(), "node results not written: name taken");
                for slot in [
                    &mut status.succeeded_nodes_ref,
                    &mut status.failed_nodes_ref,
                ] {
                    if slot.as_ref().is_some_and(|r| r.name == child) {
                        *slot = None;
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    write_workflow_status(ctx, wf, &status).await?;
    Ok(Action::await_change())
}

/// Writes a Workflow's status through `/status` and publishes the Event of a transition.
async fn write_workflow_status(
    ctx: &Ctx,
    wf: &WorkflowResource,
    status: &nvcre_domain::crd::WorkflowStatus,
) -> Result<(), Error> {
    let ns = wf.namespace().unwrap_or_default();
    let api: Api<WorkflowResource> = Api::namespaced(ctx.client.clone(), &ns);
    let old = wf.status.clone().unwrap_or_default();
    let patch = json!({"apiVersion": API_VERSION, "kind": "Workflow", "status": status});
    api.patch_status(
        &wf.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    if let Some(note) = crate::workloadrun::transition_event(&old.conditions, &status.conditions) {
        publish(ctx, wf, &note).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_notes_are_cut_to_the_api_limit_on_a_character_boundary() {
        assert_eq!(event_note("short"), "short");
        let exact = "a".repeat(EVENT_NOTE_MAX);
        assert_eq!(event_note(&exact), exact);
        // 'é' is two bytes: the cut never splits one.
        let long = "é".repeat(EVENT_NOTE_MAX);
        let cut = event_note(&long);
        assert!(cut.len() <= EVENT_NOTE_MAX, "{}", cut.len());
        assert_eq!(cut, format!("{}…", "é".repeat((EVENT_NOTE_MAX - 3) / 2)));
    }
}
