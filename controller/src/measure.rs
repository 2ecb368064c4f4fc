//! BandwidthMeasurement and GoodputMeasurement: one per group's TrainJob
//! (`<job>-bandwidth`, `<job>-goodput`, created by the Workflow controller beside the TrainJob),
//! each reconciled by reading the right pod's log with its LogProfile and writing what was
//! measured to its status.
//!
//! Reading: while the TrainJob runs, every `sampleInterval` (default 60 s) the container's log
//! is read from its first line in pages ([`read_whole_log`]: `limitBytes` 8 MiB per page, at
//! most 64 pages, each request within 2 minutes, lines of at most 1 MiB) and parsed afresh, so a
//! provisional status is exactly what a final read at that moment would give and a controller
//! restart loses nothing. When the TrainJob completes, one last full read gives the final
//! status and `Complete=True`; after that the object is never changed again.
//!
//! The pure parts (pod choice, paging, names, manifests, conditions) are functions here; the
//! kube calls are in [`reconcile_bandwidth`] and [`reconcile_goodput`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, LogParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use nvcre_domain::crd::{
    Condition, JOB_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, WORKFLOW_LABEL, WORKLOAD_RUN_LABEL,
    WorkflowResource,
};
use nvcre_domain::measure::{
    BandwidthMeasurementResource, BandwidthMeasurementStatus, BandwidthParser, CompiledProfile,
    GoodputMeasurementResource, GoodputMeasurementStatus, GoodputParser, LogPart,
    LogProfileResource, LogProfiles, MAX_LINE_BYTES, kubelet_prefix, profile_from_value,
};
use nvcre_engine::RuleSet;
use serde_json::{Value, json};

use crate::apply::{FIELD_MANAGER, train_job_resource};
use crate::conditions;
use crate::error::Error;
use crate::metrics::{BandwidthLabels, GoodputLabels, MeasurementKey, MeasurementKind, Metrics};
use crate::workflow::parse_go_duration;

/// Name suffix of a TrainJob's BandwidthMeasurement (`<job>-bandwidth`).
pub const BANDWIDTH_SUFFIX: &str = "-bandwidth";
/// Name suffix of a TrainJob's GoodputMeasurement (`<job>-goodput`).
pub const GOODPUT_SUFFIX: &str = "-goodput";
/// `sampleInterval` when the measurement has none (or one that does not parse).
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(60);
/// Wait before looking again for a pod that is missing or not running yet.
pub const POD_REQUEUE: Duration = Duration::from_secs(15);
/// `limitBytes` of one log page: 8 MiB.
pub const PAGE_BYTES: usize = 8 * 1024 * 1024;
/// At most this many pages are read for one log.
pub const MAX_PAGES: usize = 64;
/// A page that holds less than one second of output is re-read with a doubled limit, up to
/// this multiple of [`PAGE_BYTES`].
pub const MAX_PAGE_GROWTH: usize = 4;
/// One log request must finish within this long.
pub const LOG_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// After the TrainJob succeeded, a failing final read is retried for this long (seconds)
/// before the measurement completes with `LogsUnavailable`.
pub const FINAL_READ_GRACE_SECS: i64 = 120;

/// JobSet labels on the pods of a TrainJob (the JobSet has the TrainJob's name).
const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
const RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";
const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The measurement objects of one TrainJob: a BandwidthMeasurement `<job>-bandwidth` when
/// `bandwidth` (the Workflow's `jobTemplate.spec.bandwidthMeasurement`) is set and a
/// GoodputMeasurement `<job>-goodput` when `goodput` is, each with `spec.jobRef` naming the
/// TrainJob, the config's `logProfileRef`, `sampleInterval` (and `testType`), labelled with the
/// job, the Workflow and the run, and controlled by the Workflow (so they outlive the TrainJob
/// for the report).
pub fn measurement_manifests(
    wf: &WorkflowResource,
    job: &str,
    bandwidth: Option<&Value>,
    goodput: Option<&Value>,
) -> Vec<Value> {
    let mut labels = serde_json::Map::new();
    labels.insert(MANAGED_BY_LABEL.into(), json!(MANAGED_BY_VALUE));
    labels.insert(JOB_LABEL.into(), json!(job));
    labels.insert(WORKFLOW_LABEL.into(), json!(wf.name_any()));
    if let Some(run) = wf.labels().get(WORKLOAD_RUN_LABEL) {
        labels.insert(WORKLOAD_RUN_LABEL.into(), json!(run));
    }
    let owner = crate::workflow::owner_ref(wf);
    let mut out = Vec::new();
    for (kind, suffix, config, keys) in [
        (
            "BandwidthMeasurement",
            BANDWIDTH_SUFFIX,
            bandwidth,
            &["logProfileRef", "sampleInterval", "testType"][..],
        ),
        (
            "GoodputMeasurement",
            GOODPUT_SUFFIX,
            goodput,
            &["logProfileRef", "sampleInterval"][..],
        ),
    ] {
        let Some(config) = config else { continue };
        let mut spec = serde_json::Map::new();
        spec.insert(
            "jobRef".into(),
            json!({"apiGroup": "trainer.kubeflow.org", "kind": "TrainJob", "name": job}),
        );
        for k in keys {
            if let Some(v) = config.get(*k) {
                spec.insert((*k).to_string(), v.clone());
            }
        }
        out.push(json!({
            "apiVersion": nvcre_domain::crd::API_VERSION,
            "kind": kind,
            "metadata": {
                "name": format!("{job}{suffix}"),
                "namespace": wf.namespace(),
                "labels": labels,
                "ownerReferences": [owner],
            },
            "spec": spec,
        }));
    }
    out
}

/// The measured job's state, from its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Neither complete nor failed.
    Running,
    /// `Complete` (or `Succeeded`) True; when it turned true (RFC 3339), if known.
    Succeeded(Option<String>),
    /// `Failed` True; when, if known.
    Failed(Option<String>),
}

/// The state of a TrainJob object.
pub fn job_state(job: &DynamicObject) -> JobState {
    let conds = job
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let find = |t: &str| {
        conds.iter().find(|c| {
            c.get("type").and_then(Value::as_str) == Some(t)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    let at = |c: &Value| {
        c.get("lastTransitionTime")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(c) = find("Complete").or_else(|| find("Succeeded")) {
        JobState::Succeeded(at(c))
    } else if let Some(c) = find("Failed") {
        JobState::Failed(at(c))
    } else {
        JobState::Running
    }
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Pods in a stable order: lowest `batch.kubernetes.io/job-completion-index` (missing or
/// invalid: 0), then phase (Succeeded, Running, Failed, other), then the highest JobSet restart
/// attempt, then the newest, then by name.
pub fn order_pods(pods: &mut [Pod]) {
    let index = |p: &Pod| {
        label(p, COMPLETION_INDEX)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let rank = |p: &Pod| match phase(p) {
        "Succeeded" => 0,
        "Running" => 1,
        "Failed" => 2,
        _ => 3,
    };
    let attempt = |p: &Pod| {
        label(p, RESTART_ATTEMPT)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let created = |p: &Pod| {
        p.metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second())
    };
    pods.sort_by(|a, b| {
        index(a)
            .cmp(&index(b))
            .then(rank(a).cmp(&rank(b)))
            .then(attempt(b).cmp(&attempt(a)))
            .then(created(b).cmp(&created(a)))
            .then(a.name_any().cmp(&b.name_any()))
    });
}

/// Why a whole log could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The log cannot be paged (too many pages, a second of output larger than the biggest
    /// page, a line without a timestamp in a cut page): retrying cannot help.
    Unpageable(String),
    /// A request failed (API error, timeout): worth retrying.
    Fetch(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Unpageable(m) | ReadError::Fetch(m) => f.write_str(m),
        }
    }
}

/// Reads a container's whole log, from its first line to its last, with `fetch(sinceTime,
/// limitBytes)` (each line prefixed with its kubelet timestamp), feeding every line once, in
/// order, to `feed`. Returns the number of lines fed.
///
/// Pages of [`PAGE_BYTES`]: a page that comes back full is cut after its last complete line
/// (the partial line is read again on the next page); the next page starts at the
/// second-truncated timestamp of the last line fed and skips the lines of that second already
/// fed. When one second of output fills a page, the limit doubles, up to [`MAX_PAGE_GROWTH`]×.
///
/// # Errors
/// [`ReadError::Unpageable`]: `log cannot be read in full: more than 64 pages`, `…: more than
/// <N> bytes logged within one second`, `…: line without a timestamp in a truncated page`;
/// [`ReadError::Fetch`] with the request's error.
pub async fn read_whole_log<F, Fut>(
    mut fetch: F,
    mut feed: impl FnMut(&[u8]),
) -> Result<u64, ReadError>
where
    F: FnMut(Option<Timestamp>, usize) -> Fut,
    Fut: Future<Output = Result<Vec<u8>, String>>,
{
    let mut since: Option<i64> = None;
    let mut skip = 0usize;
    let mut limit = PAGE_BYTES;
    // (second, lines fed in it) of the last line fed that had a timestamp.
    let mut tail: Option<(i64, usize)> = None;
    let mut fed = 0u64;
    for _ in 0..MAX_PAGES {
        let since_ts = since.and_then(|s| Timestamp::from_second(s).ok());
        let body = fetch(since_ts, limit).await.map_err(ReadError::Fetch)?;
        let truncated = body.len() >= limit;
        let complete: &[u8] = if truncated {
            match body.iter().rposition(|b| *b == b'\n') {
                Some(i) => body.get(..=i).unwrap_or_default(),
                None => &[],
            }
        } else {
            &body
        };
        let mut pieces: Vec<&[u8]> = complete.split(|b| *b == b'\n').collect();
        if pieces.last().is_some_and(|l| l.is_empty()) {
            pieces.pop();
        }
        let mut skipped = 0usize;
        let mut fed_here = 0usize;
        for line in pieces {
            let second = kubelet_prefix(line).map(|(t, _)| t.as_second());
            if truncated && second.is_none() {
                return Err(ReadError::Unpageable(
                    "log cannot be read in full: line without a timestamp in a truncated page"
                        .into(),
                ));
            }
            if since.is_some() && second == since && skipped < skip {
                skipped += 1;
                continue;
            }
            let line = line.get(..MAX_LINE_BYTES.min(line.len())).unwrap_or(line);
            feed(line);
            fed += 1;
            fed_here += 1;
            if let Some(s) = second {
                tail = match tail {
                    Some((t, n)) if t == s => Some((t, n + 1)),
                    _ => Some((s, 1)),
                };
            }
        }
        if !truncated {
            return Ok(fed);
        }
        match tail {
            Some((s, n)) if fed_here > 0 => {
                since = Some(s);
                skip = n;
            }
            _ if limit < PAGE_BYTES * MAX_PAGE_GROWTH => limit *= 2,
            _ => {
                return Err(ReadError::Unpageable(format!(
                    "log cannot be read in full: more than {limit} bytes logged within one second"
                )));
            }
        }
    }
    Err(ReadError::Unpageable(format!(
        "log cannot be read in full: more than {MAX_PAGES} pages"
    )))
}

/// What the reconcilers share: the client, the rules in force (for LogProfiles that exist only
/// as rule files), the metrics, and when each measurement was last sampled.
pub struct MeasureCtx {
    /// The API client.
    pub client: Client,
    /// The rules in force (their LogProfiles are the fallback for a name with no LogProfile
    /// object).
    pub rules: Arc<crate::rules::RulesHolder>,
    /// The gauges.
    pub metrics: Arc<Metrics>,
    /// `kind/namespace/name` → last sample.
    pub sampled: Mutex<HashMap<String, Instant>>,
}

/// The LogProfile `name`: the cluster-scoped LogProfile object when one exists, else the rule
/// set's LogProfile of that name (the profiles shipped under `rules/measure/`).
///
/// # Errors
/// The cause for the `LogProfileNotFound` message: `getting LogProfile <name>: <err>`,
/// `creating parser from LogProfile <name>: <problems>`, or the rule set's
/// `no LogProfile named …`.
pub async fn resolve_profile(
    client: &Client,
    rules: &RuleSet,
    name: &str,
) -> Result<CompiledProfile, String> {
    let api: Api<LogProfileResource> = Api::all(client.clone());
    match api.get_opt(name).await {
        Ok(Some(p)) => {
            let v = serde_json::to_value(&p).map_err(|e| e.to_string())?;
            profile_from_value(&v).map_err(|problems| {
                format!(
                    "creating parser from LogProfile {name}: {}",
                    problems
                        .iter()
                        .map(|p| format!("{}: {}", p.path, p.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            })
        }
        // No LogProfile CRD installed reads as "no object".
        Ok(None) | Err(kube::Error::Api(_)) => {
            let profiles = LogProfiles::from_rules(rules)?;
            profiles.get(name).cloned()
        }
        Err(e) => Err(format!("getting LogProfile {name}: {e}")),
    }
}

fn sample_interval(spec: Option<&String>) -> Duration {
    spec.and_then(|s| parse_go_duration(s))
        .filter(|s| *s > 0)
        .and_then(|s| u64::try_from(s).ok())
        .map_or(DEFAULT_SAMPLE_INTERVAL, Duration::from_secs)
}

fn now_rfc3339() -> (i64, String) {
    let ts = Timestamp::now();
    (
        ts.as_second(),
        ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

fn secs_of(rfc3339: Option<&str>) -> Option<i64> {
    rfc3339
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map(Timestamp::as_second)
}

fn cond(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: None,
        observed_generation: None,
    }
}

/// Sets `Measuring`.
pub fn set_measuring(c: &mut Vec<Condition>, on: bool, reason: &str, message: &str, now: &str) {
    conditions::set(c, cond("Measuring", on, reason, message), now);
}

/// Sets `Complete=True` and `Measuring=False` with `reason`; `measuring_message` is the
/// `Measuring` message (the same text for bandwidth, `Measurement completed` for goodput).
pub fn set_complete(
    c: &mut Vec<Condition>,
    reason: &str,
    message: &str,
    measuring_message: &str,
    now: &str,
) {
    conditions::set(c, cond("Measuring", false, reason, measuring_message), now);
    conditions::set(c, cond("Complete", true, reason, message), now);
}

/// `no bandwidth data was parsed` without results, else `results are provisional and are not
/// used for threshold evaluation`.
pub fn unavailable_suffix(status: &BandwidthMeasurementStatus) -> &'static str {
    if status.results.is_empty() {
        "no bandwidth data was parsed"
    } else {
        "results are provisional and are not used for threshold evaluation"
    }
}

async fn list_pods(
    client: &Client,
    ns: &str,
    job: &str,
    replicated_job: Option<&str>,
) -> Result<Vec<Pod>, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut selector = format!("{JOBSET_NAME}={job}");
    if let Some(rj) = replicated_job {
        selector.push_str(&format!(",{REPLICATED_JOB}={rj}"));
    }
    let mut pods = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    order_pods(&mut pods);
    Ok(pods)
}

fn container_waiting(pod: &Pod, container: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .filter(|c| container.is_empty() || c.name == container)
                .any(|c| c.state.as_ref().is_some_and(|s| s.waiting.is_some()))
        })
}

/// Reads the whole log of `container` in `pod` (empty container: the pod's default).
async fn read_pod_log(
    client: &Client,
    ns: &str,
    pod: &str,
    container: &str,
    feed: impl FnMut(&[u8]),
) -> Result<u64, ReadError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let fetch = |since: Option<Timestamp>, limit: usize| {
        let api = api.clone();
        let params = LogParams {
            container: (!container.is_empty()).then(|| container.to_string()),
            timestamps: true,
            since_time: since,
            limit_bytes: i64::try_from(limit).ok(),
            ..LogParams::default()
        };
        let pod = pod.to_string();
        async move {
            match tokio::time::timeout(LOG_REQUEST_TIMEOUT, api.logs(&pod, &params)).await {
                Ok(Ok(text)) => Ok(text.into_bytes()),
                Ok(Err(e)) => Err(format!("reading log of pod {pod}: {e}")),
                Err(_) => Err(format!(
                    "reading log of pod {pod}: no answer within {}s",
                    LOG_REQUEST_TIMEOUT.as_secs()
                )),
            }
        }
    };
    read_whole_log(fetch, feed).await
}

async fn write_status<K: Measurement>(
    client: &Client,
    ns: &str,
    name: &str,
    status: &K::Status,
) -> Result<(), Error> {
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let patch =
        json!({"apiVersion": nvcre_domain::crd::API_VERSION, "kind": K::KIND, "status": status});
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// What the two measurement kinds share: their spec's references, their status, and what a
/// vanished job does to it.
pub trait Measurement:
    kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
    /// The status type.
    type Status: Clone + Default + PartialEq + serde::Serialize;
    /// `BandwidthMeasurement` or `GoodputMeasurement`.
    const KIND: &'static str;
    /// Which gauges it exports.
    const METRICS: MeasurementKind;
    /// `spec.jobRef.name` (empty when unset).
    fn job_name(&self) -> &str;
    /// `spec.logProfileRef`.
    fn profile_ref(&self) -> &str;
    /// `spec.sampleInterval`.
    fn interval(&self) -> Option<&String>;
    /// The current status (default when unset).
    fn current(&self) -> Self::Status;
    /// The status's conditions.
    fn conditions(s: &Self::Status) -> &[Condition];
    /// The status's conditions, to change.
    fn conditions_mut(s: &mut Self::Status) -> &mut Vec<Condition>;
    /// Whether the status shows the job was seen (a start time, data).
    fn has_seen_job(s: &Self::Status) -> bool;
    /// Completes `s` because the job vanished after it was seen, and drops its gauges.
    fn job_gone(&self, metrics: &Metrics, s: &mut Self::Status, now: &str);
}

impl Measurement for BandwidthMeasurementResource {
    type Status = BandwidthMeasurementStatus;
    const KIND: &'static str = "BandwidthMeasurement";
    const METRICS: MeasurementKind = MeasurementKind::Bandwidth;
    fn job_name(&self) -> &str {
        self.spec.job_ref.as_ref().map_or("", |j| j.name.as_str())
    }
    fn profile_ref(&self) -> &str {
        &self.spec.log_profile_ref
    }
    fn interval(&self) -> Option<&String> {
        self.spec.sample_interval.as_ref()
    }
    fn current(&self) -> Self::Status {
        self.status.clone().unwrap_or_default()
    }
    fn conditions(s: &Self::Status) -> &[Condition] {
        &s.conditions
    }
    fn conditions_mut(s: &mut Self::Status) -> &mut Vec<Condition> {
        &mut s.conditions
    }
    fn has_seen_job(s: &Self::Status) -> bool {
        s.start_time.is_some() || !s.results.is_empty()
    }
    fn job_gone(&self, metrics: &Metrics, s: &mut Self::Status, now: &str) {
        let msg = format!("Referenced Job no longer exists; {}", unavailable_suffix(s));
        set_complete(&mut s.conditions, "LogsUnavailable", &msg, &msg, now);
        s.completion_time = Some(now.to_string());
        drop_bandwidth(metrics, self, &[s]);
    }
}

impl Measurement for GoodputMeasurementResource {
    type Status = GoodputMeasurementStatus;
    const KIND: &'static str = "GoodputMeasurement";
    const METRICS: MeasurementKind = MeasurementKind::Goodput;
    fn job_name(&self) -> &str {
        self.spec.job_ref.as_ref().map_or("", |j| j.name.as_str())
    }
    fn profile_ref(&self) -> &str {
        &self.spec.log_profile_ref
    }
    fn interval(&self) -> Option<&String> {
        self.spec.sample_interval.as_ref()
    }
    fn current(&self) -> Self::Status {
        self.status.clone().unwrap_or_default()
    }
    fn conditions(s: &Self::Status) -> &[Condition] {
        &s.conditions
    }
    fn conditions_mut(s: &mut Self::Status) -> &mut Vec<Condition> {
        &mut s.conditions
    }
    fn has_seen_job(s: &Self::Status) -> bool {
        s.start_time.is_some() || s.result.is_some()
    }
    fn job_gone(&self, metrics: &Metrics, s: &mut Self::Status, now: &str) {
        let m = "Referenced Job no longer exists; goodput results are provisional";
        set_complete(
            &mut s.conditions,
            "LogsUnavailable",
            m,
            "Measurement completed",
            now,
        );
        s.completion_time = Some(now.to_string());
        export_goodput(metrics, self, s, true);
    }
}

/// What both reconcilers know once the measurement, its job and its profile are in hand.
struct Observed<S> {
    ns: String,
    name: String,
    job_name: String,
    /// `kind/namespace/name`, the throttle key.
    key: String,
    interval: Duration,
    now_secs: i64,
    now: String,
    /// The status as observed.
    old: S,
    state: JobState,
    profile: CompiledProfile,
}

/// The shared start of a reconcile: a complete measurement or one without `jobRef` is left
/// alone; a missing job completes it `LogsUnavailable` when it was seen before (else the job
/// may not exist yet: look again soon); a running job sampled less than `sampleInterval` ago
/// waits; a profile that cannot be resolved sets `LogProfileNotFound`. `Err(requeue)` ends the
/// reconcile.
async fn observe<M: Measurement>(
    m: &M,
    ctx: &MeasureCtx,
) -> Result<Result<Observed<M::Status>, Option<Duration>>, Error> {
    let old = m.current();
    let ns = m.meta().namespace.clone().unwrap_or_default();
    let name = m.meta().name.clone().unwrap_or_default();
    let key = format!("{}/{ns}/{name}", M::KIND);
    if m.meta().deletion_timestamp.is_some() {
        // Going away (another finalizer holds it): its series go now, and nothing is sampled.
        ctx.metrics.drop_measurement(&MeasurementKey {
            kind: M::METRICS,
            namespace: ns,
            name,
        });
        forget(ctx, &key);
        return Ok(Err(None));
    }
    if conditions::is_true(M::conditions(&old), "Complete") || m.job_name().is_empty() {
        return Ok(Err(None));
    }
    let job_name = m.job_name().to_string();
    let interval = sample_interval(m.interval());
    let (now_secs, now) = now_rfc3339();
    let Some(job) = get_job(&ctx.client, &ns, &job_name).await? else {
        let seen =
            M::has_seen_job(&old) || conditions::get(M::conditions(&old), "Measuring").is_some();
        if !seen {
            return Ok(Err(Some(POD_REQUEUE)));
        }
        let mut status = old.clone();
        m.job_gone(&ctx.metrics, &mut status, &now);
        forget(ctx, &key);
        write_status::<M>(&ctx.client, &ns, &name, &status).await?;
        return Ok(Err(None));
    };
    let state = job_state(&job);
    if state == JobState::Running
        && let Some(wait) = throttled(ctx, &key, interval)
    {
        return Ok(Err(Some(wait)));
    }
    match resolve_profile(&ctx.client, &ctx.rules.current(), m.profile_ref()).await {
        Ok(profile) => Ok(Ok(Observed {
            ns,
            name,
            job_name,
            key,
            interval,
            now_secs,
            now,
            old,
            state,
            profile,
        })),
        Err(cause) => {
            let mut status = old.clone();
            let msg = format!(
                "LogProfile {:?} could not be resolved: {cause}",
                m.profile_ref()
            );
            set_measuring(
                M::conditions_mut(&mut status),
                false,
                "LogProfileNotFound",
                &msg,
                &now,
            );
            if status != old {
                write_status::<M>(&ctx.client, &ns, &name, &status).await?;
            }
            Ok(Err(Some(interval)))
        }
    }
}

/// Throttle: `Some(wait)` when `key` was sampled less than `interval` ago.
fn throttled(ctx: &MeasureCtx, key: &str, interval: Duration) -> Option<Duration> {
    let sampled = ctx
        .sampled
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    sampled
        .get(key)
        .map(Instant::elapsed)
        .filter(|e| *e < interval)
        .map(|e| interval.saturating_sub(e))
}

fn mark_sampled(ctx: &MeasureCtx, key: &str) {
    ctx.sampled
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key.to_string(), Instant::now());
}

fn forget(ctx: &MeasureCtx, key: &str) {
    ctx.sampled
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(key);
}

async fn get_job(client: &Client, ns: &str, job: &str) -> Result<Option<DynamicObject>, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &train_job_resource());
    Ok(api.get_opt(job).await?)
}

fn bandwidth_labels(bm: &BandwidthMeasurementResource, size: i64) -> BandwidthLabels {
    BandwidthLabels {
        namespace: bm.namespace().unwrap_or_default(),
        measurement: bm.name_any(),
        job: bm
            .spec
            .job_ref
            .as_ref()
            .map(|j| j.name.clone())
            .unwrap_or_default(),
        workflow: bm.labels().get(WORKFLOW_LABEL).cloned().unwrap_or_default(),
        nccl_test: bm.spec.test_type.clone().unwrap_or_default(),
        message_size_bytes: size.to_string(),
    }
}

fn export_bandwidth(
    metrics: &Metrics,
    bm: &BandwidthMeasurementResource,
    s: &BandwidthMeasurementStatus,
) {
    for r in &s.results {
        let l = bandwidth_labels(bm, r.size_bytes);
        metrics.set_bandwidth(&l, r.alg_bw.parse().ok(), r.bus_bw.parse().ok());
    }
}

fn drop_bandwidth(
    metrics: &Metrics,
    bm: &BandwidthMeasurementResource,
    sets: &[&BandwidthMeasurementStatus],
) {
    for s in sets {
        for r in &s.results {
            metrics.remove_bandwidth(&bandwidth_labels(bm, r.size_bytes));
        }
    }
}

/// Drops the series of every measurement that has some and is gone: `present` says whether
/// the measurement is still there and not being deleted (the controller asks its watch cache).
/// Returns the measurements dropped.
///
/// Gauges live in this process only, so a finalizer would guard nothing a restart does not
/// already clear, and would hold every deletion (a namespace's too) while no controller runs;
/// comparing the series with the cache instead also heals a missed deletion event or a
/// reconcile that exported after the measurement went.
pub fn sweep_series(
    metrics: &Metrics,
    present: impl Fn(&MeasurementKey) -> bool,
) -> Vec<MeasurementKey> {
    let gone: Vec<MeasurementKey> = metrics
        .measurements()
        .into_iter()
        .filter(|k| !present(k))
        .collect();
    for k in &gone {
        metrics.drop_measurement(k);
    }
    gone
}

/// Reconciles one BandwidthMeasurement; returns when to look again (`None`: only on change).
///
/// # Errors
/// API failures ([`Error::Kube`]); everything about the job, the profile and the log is a
/// condition on the object instead.
pub async fn reconcile_bandwidth(
    bm: &BandwidthMeasurementResource,
    ctx: &MeasureCtx,
) -> Result<Option<Duration>, Error> {
    let o = match observe(bm, ctx).await? {
        Ok(o) => o,
        Err(requeue) => return Ok(requeue),
    };
    let Observed {
        ns,
        name,
        job_name,
        key,
        interval,
        now_secs,
        now,
        old,
        state,
        profile,
    } = o;
    let mut status = old.clone();
    let write = |status: BandwidthMeasurementStatus| {
        let (ns, name) = (ns.clone(), name.clone());
        async move {
            write_status::<BandwidthMeasurementResource>(&ctx.client, &ns, &name, &status).await
        }
    };
    let replicated_job = profile
        .spec
        .worker_strategy
        .as_ref()
        .and_then(|w| w.replicated_job_name.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "node".to_string());
    let pods = list_pods(&ctx.client, &ns, &job_name, Some(&replicated_job)).await?;
    let pod = pods.first();
    let container = profile.spec.container_name.clone();
    let read = |pod: &Pod| {
        let pod = pod.name_any();
        let container = container.clone();
        let profile = &profile;
        let client = ctx.client.clone();
        let ns = ns.clone();
        async move {
            let mut parser = BandwidthParser::new(profile).map_err(ReadError::Unpageable)?;
            read_pod_log(&client, &ns, &pod, &container, |l| parser.feed(l)).await?;
            Ok::<BandwidthMeasurementStatus, ReadError>(parser.status())
        }
    };
    match state {
        JobState::Running => {
            let Some(pod) = pod else {
                return Ok(Some(POD_REQUEUE));
            };
            if !matches!(phase(pod), "Running" | "Succeeded") {
                return Ok(Some(POD_REQUEUE));
            }
            if container_waiting(pod, &container) {
                return Ok(Some(interval));
            }
            let Ok(parsed) = read(pod).await else {
                // A failed provisional read is retried at the next sample.
                return Ok(Some(interval));
            };
            mark_sampled(ctx, &key);
            if parsed.results.is_empty() && parsed.transport.is_empty() {
                return Ok(Some(interval));
            }
            status.results = parsed.results;
            nvcre_domain::measure::merge_transports(&mut status.transport, parsed.transport);
            status.start_time.get_or_insert_with(|| now.clone());
            set_measuring(
                &mut status.conditions,
                true,
                "JobRunning",
                "Referenced Job is running, measurement in progress",
                &now,
            );
            export_bandwidth(&ctx.metrics, bm, &status);
            if status != old {
                write(status).await?;
            }
            Ok(Some(interval))
        }
        JobState::Succeeded(at) => {
            let outcome = match pod {
                None => Err(ReadError::Fetch(format!(
                    "no pods found for {ns}/{job_name} replicatedJob {replicated_job}"
                ))),
                Some(p) if !matches!(phase(p), "Succeeded" | "Failed") => Err(ReadError::Fetch(
                    format!("pod {} has not finished ({})", p.name_any(), phase(p)),
                )),
                Some(p) => read(p).await,
            };
            // The grace counts from the job's completion; without a transition time on its
            // condition, from the first failed final read.
            let pending_since = conditions::get(&old.conditions, "Measuring")
                .filter(|c| c.reason == "FinalReadPending")
                .and_then(|c| secs_of(c.last_transition_time.as_deref()));
            let done_at = secs_of(at.as_deref()).or(pending_since).unwrap_or(now_secs);
            match outcome {
                Ok(fin) => {
                    let provisional = status.clone();
                    status.results = fin.results;
                    nvcre_domain::measure::merge_transports(&mut status.transport, fin.transport);
                    status.start_time.get_or_insert_with(|| now.clone());
                    status.completion_time = Some(at.unwrap_or_else(|| now.clone()));
                    if status.results.is_empty() {
                        let m = "Job succeeded but no bandwidth data was parsed; check spec.logProfileRef";
                        set_complete(&mut status.conditions, "NoDataCollected", m, m, &now);
                    } else {
                        set_complete(
                            &mut status.conditions,
                            "JobSucceeded",
                            "Job succeeded",
                            "Job succeeded",
                            &now,
                        );
                    }
                    drop_bandwidth(&ctx.metrics, bm, &[&provisional, &status]);
                    forget(ctx, &key);
                    write(status).await?;
                    Ok(None)
                }
                Err(e) => {
                    let waited = now_secs.saturating_sub(done_at);
                    if matches!(e, ReadError::Fetch(_)) && waited < FINAL_READ_GRACE_SECS {
                        set_measuring(
                            &mut status.conditions,
                            false,
                            "FinalReadPending",
                            "Job succeeded; waiting to read its complete log",
                            &now,
                        );
                        if status != old {
                            write(status).await?;
                        }
                        let left = u64::try_from(FINAL_READ_GRACE_SECS - waited).unwrap_or(1);
                        return Ok(Some(Duration::from_secs(left.min(POD_REQUEUE.as_secs()))));
                    }
                    let msg = format!(
                        "Job succeeded but its log could not be read in full ({e}); {}",
                        unavailable_suffix(&old)
                    );
                    set_complete(&mut status.conditions, "LogsUnavailable", &msg, &msg, &now);
                    status.completion_time = Some(now.clone());
                    drop_bandwidth(&ctx.metrics, bm, &[&old]);
                    forget(ctx, &key);
                    write(status).await?;
                    Ok(None)
                }
            }
        }
        JobState::Failed(at) => {
            // Best effort: whatever the log holds is kept, for the report.
            if let Some(p) = pod
                && let Ok(fin) = read(p).await
                && !fin.results.is_empty()
            {
                status.results = fin.results;
                nvcre_domain::measure::merge_transports(&mut status.transport, fin.transport);
            }
            status.completion_time = Some(at.unwrap_or_else(|| now.clone()));
            set_complete(
                &mut status.conditions,
                "JobFailed",
                "Job failed",
                "Job failed",
                &now,
            );
            drop_bandwidth(&ctx.metrics, bm, &[&old, &status]);
            forget(ctx, &key);
            write(status).await?;
            Ok(None)
        }
    }
}

fn goodput_labels(gm: &GoodputMeasurementResource) -> GoodputLabels {
    GoodputLabels {
        namespace: gm.namespace().unwrap_or_default(),
        measurement: gm.name_any(),
        job: gm
            .spec
            .job_ref
            .as_ref()
            .map(|j| j.name.clone())
            .unwrap_or_default(),
        workflow: gm.labels().get(WORKFLOW_LABEL).cloned().unwrap_or_default(),
    }
}

/// The goodput gauges of a status, by metric name (the ratio first).
fn goodput_gauges(s: &GoodputMeasurementStatus) -> Vec<(&'static str, Option<f64>)> {
    let v = |o: &Option<String>| o.as_deref().and_then(|t| t.trim().parse::<f64>().ok());
    vec![
        ("ratio", v(&s.result)),
        ("avg_tflops_per_gpu", v(&s.avg_tflops_per_gpu)),
        ("training_time_seconds", v(&s.training_time_sec)),
        ("reschedule_time_seconds", v(&s.reschedule_time_sec)),
        ("resume_time_seconds", v(&s.resume_time_sec)),
        (
            "checkpoint_save_time_seconds",
            v(&s.checkpoint_save_time_sec),
        ),
        ("lost_work_time_seconds", v(&s.lost_work_time_sec)),
        ("warmup_time_seconds", v(&s.warmup_time_sec)),
        ("non_warmup_time_seconds", v(&s.non_warmup_time_sec)),
        ("avg_step_time_seconds", v(&s.avg_step_time_sec)),
    ]
}

fn export_goodput(
    metrics: &Metrics,
    gm: &GoodputMeasurementResource,
    s: &GoodputMeasurementStatus,
    complete: bool,
) {
    let l = goodput_labels(gm);
    for (metric, value) in goodput_gauges(s) {
        match value {
            // On completion only the ratio stays (until the measurement is deleted).
            Some(v) if !complete || metric == "ratio" => metrics.set_goodput(metric, &l, v),
            _ => metrics.remove_goodput(metric, &l),
        }
    }
}

/// Reads the goodput logs of a TrainJob's pods: worker 0 (`Single`), or under `Multi`
/// lifecycle events from worker 0 and training steps from the last worker, merged by
/// timestamp.
async fn read_goodput(
    client: &Client,
    ns: &str,
    profile: &CompiledProfile,
    pods: &[Pod],
) -> Result<GoodputMeasurementStatus, ReadError> {
    let mut parser = GoodputParser::new(profile).map_err(ReadError::Unpageable)?;
    let container = profile.spec.container_name.clone();
    let multi = profile
        .spec
        .worker_strategy
        .as_ref()
        .is_some_and(|w| w.type_ == "Multi");
    let Some(first) = pods.first() else {
        return Err(ReadError::Fetch(format!("no pods found for {ns}")));
    };
    let last = pods.last().filter(|_| pods.len() > 1);
    match (multi, last) {
        (true, Some(last)) => {
            let mut lines: Vec<(Option<Timestamp>, LogPart, Vec<u8>)> = Vec::new();
            for (pod, part) in [(first, LogPart::Lifecycle), (last, LogPart::Steps)] {
                read_pod_log(client, ns, &pod.name_any(), &container, |l| {
                    lines.push((kubelet_prefix(l).map(|(t, _)| t), part, l.to_vec()));
                })
                .await?;
            }
            // Stable: lines of one instant keep worker 0 first.
            lines.sort_by_key(|(t, _, _)| *t);
            for (_, part, l) in &lines {
                parser.feed_part(l, *part);
            }
        }
        _ => {
            read_pod_log(client, ns, &first.name_any(), &container, |l| {
                parser.feed(l)
            })
            .await?;
        }
    }
    Ok(parser.status())
}

/// Reconciles one GoodputMeasurement; returns when to look again (`None`: only on change).
///
/// # Errors
/// API failures ([`Error::Kube`]).
pub async fn reconcile_goodput(
    gm: &GoodputMeasurementResource,
    ctx: &MeasureCtx,
) -> Result<Option<Duration>, Error> {
    let o = match observe(gm, ctx).await? {
        Ok(o) => o,
        Err(requeue) => return Ok(requeue),
    };
    let Observed {
        ns,
        name,
        job_name,
        key,
        interval,
        now_secs,
        now,
        old,
        state,
        profile,
    } = o;
    let write = |status: GoodputMeasurementStatus| {
        let (ns, name) = (ns.clone(), name.clone());
        async move { write_status::<GoodputMeasurementResource>(&ctx.client, &ns, &name, &status).await }
    };
    let pods = list_pods(&ctx.client, &ns, &job_name, None).await?;
    let with_old = |mut s: GoodputMeasurementStatus| {
        s.conditions = old.conditions.clone();
        s
    };
    match state {
        JobState::Running => {
            let Some(first) = pods.first() else {
                return Ok(Some(POD_REQUEUE));
            };
            if phase(first) != "Running" {
                return Ok(Some(interval));
            }
            let Ok(parsed) = read_goodput(&ctx.client, &ns, &profile, &pods).await else {
                return Ok(Some(interval));
            };
            mark_sampled(ctx, &key);
            if parsed.highest_step == 0 && parsed.application_start_time.is_none() {
                return Ok(Some(interval));
            }
            let mut status = with_old(parsed);
            set_measuring(
                &mut status.conditions,
                true,
                "JobRunning",
                "Referenced Job is running, measurement in progress",
                &now,
            );
            export_goodput(&ctx.metrics, gm, &status, false);
            if status != old {
                write(status).await?;
            }
            Ok(Some(interval))
        }
        JobState::Succeeded(ref at) | JobState::Failed(ref at) => {
            let failed = matches!(state, JobState::Failed(_));
            let at = at.clone();
            let mut status = match read_goodput(&ctx.client, &ns, &profile, &pods).await {
                Ok(s) => with_old(s),
                // A request that failed is retried for a while before the measurement
                // completes on what it last saw.
                Err(ReadError::Fetch(_))
                    if !failed
                        && now_secs.saturating_sub(secs_of(at.as_deref()).unwrap_or(now_secs))
                            < FINAL_READ_GRACE_SECS =>
                {
                    return Ok(Some(POD_REQUEUE));
                }
                Err(_) => old.clone(),
            };
            status.completion_time = Some(at.unwrap_or_else(|| now.clone()));
            let ratio = status
                .result
                .as_deref()
                .and_then(|r| r.trim().parse::<f64>().ok())
                .unwrap_or(0.0);
            if failed {
                set_complete(
                    &mut status.conditions,
                    "JobFailed",
                    "Referenced Job failed",
                    "Measurement completed",
                    &now,
                );
            } else if ratio > 0.0 {
                set_complete(
                    &mut status.conditions,
                    "JobSucceeded",
                    "Referenced Job completed successfully",
                    "Measurement completed",
                    &now,
                );
            } else {
                set_complete(
                    &mut status.conditions,
                    "NoDataCollected",
                    "Job succeeded but no goodput was computed; check spec.logProfileRef",
                    "Measurement completed",
                    &now,
                );
            }
            export_goodput(&ctx.metrics, gm, &status, true);
            forget(ctx, &key);
            write(status).await?;
            Ok(None)
        }
    }
}

/// What thresholds read of one TrainJob's measurements: the final bandwidth status (only a
/// BandwidthMeasurement completed `JobSucceeded` with results counts) and the completed
/// goodput status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobMeasured {
    /// The final BandwidthMeasurement status.
    pub bandwidth: Option<BandwidthMeasurementStatus>,
    /// The completed GoodputMeasurement status.
    pub goodput: Option<GoodputMeasurementStatus>,
}

/// The final measurements of the Workflow's TrainJobs, by TrainJob name.
///
/// # Errors
/// API failures.
pub async fn final_measurements(
    client: &Client,
    ns: &str,
    workflow: &str,
) -> Result<BTreeMap<String, JobMeasured>, Error> {
    let lp = ListParams::default().labels(&format!("{WORKFLOW_LABEL}={workflow}"));
    let mut out: BTreeMap<String, JobMeasured> = BTreeMap::new();
    // Without the measurement CRDs there is nothing to read (404), not an error.
    let absent = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404);
    let bms: Api<BandwidthMeasurementResource> = Api::namespaced(client.clone(), ns);
    let bm_items = match bms.list(&lp).await {
        Ok(l) => l.items,
        Err(e) if absent(&e) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for bm in bm_items {
        let (Some(job), Some(s)) = (bm.spec.job_ref.as_ref().map(|j| j.name.clone()), bm.status)
        else {
            continue;
        };
        let fin = conditions::get(&s.conditions, "Complete")
            .is_some_and(|c| c.status == "True" && c.reason == "JobSucceeded")
            && !s.results.is_empty();
        if fin {
            out.entry(job).or_default().bandwidth = Some(s);
        }
    }
    let gms: Api<GoodputMeasurementResource> = Api::namespaced(client.clone(), ns);
    let gm_items = match gms.list(&lp).await {
        Ok(l) => l.items,
        Err(e) if absent(&e) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for gm in gm_items {
        let (Some(job), Some(s)) = (gm.spec.job_ref.as_ref().map(|j| j.name.clone()), gm.status)
        else {
            continue;
        };
        if conditions::is_true(&s.conditions, "Complete") {
            out.entry(job).or_default().goodput = Some(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    fn stamp(sec: i64, nanos: i32) -> String {
        let t = Timestamp::new(sec, nanos).expect("ts");
        format!("{}.{:09}Z", t.strftime("%Y-%m-%dT%H:%M:%S"), nanos)
    }

    /// A log of `(second, text)` lines served like the kubelet: from `since` on, cut at
    /// `limit` bytes.
    fn serve(log: &[(i64, String)], since: Option<Timestamp>, limit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (s, text)) in log.iter().enumerate() {
            if since.is_some_and(|t| *s < t.as_second()) {
                continue;
            }
            out.extend_from_slice(stamp(*s, i32::try_from(i % 1000).unwrap_or(0)).as_bytes());
            out.push(b' ');
            out.extend_from_slice(text.as_bytes());
            out.push(b'\n');
        }
        out.truncate(limit);
        out
    }

    fn read_all(log: &[(i64, String)]) -> (Result<u64, ReadError>, Vec<String>, usize) {
        let mut got = Vec::new();
        let mut requests = 0;
        let r = block_on(read_whole_log(
            |since, limit| {
                requests += 1;
                let body = serve(log, since, limit);
                async move { Ok(body) }
            },
            |l| {
                let text = kubelet_prefix(l).map_or(l, |(_, t)| t);
                got.push(String::from_utf8_lossy(text).into_owned());
            },
        ));
        (r, got, requests)
    }

    #[test]
    fn a_small_log_is_one_page_and_every_line_once() {
        let log: Vec<(i64, String)> = (0..5)
            .map(|i| (1_700_000_000 + i, format!("line {i}")))
            .collect();
        let (r, got, requests) = read_all(&log);
        assert_eq!(r, Ok(5));
        assert_eq!(got, ["line 0", "line 1", "line 2", "line 3", "line 4"]);
        assert_eq!(requests, 1);
    }

    #[test]
    fn a_log_of_many_pages_is_read_once_in_order_across_seconds_split_by_pages() {
        // 3 MiB lines, 2 per second: every page boundary falls inside a second.
        let big = "x".repeat(3 * 1024 * 1024);
        let log: Vec<(i64, String)> = (0..12)
            .map(|i| (1_700_000_000 + i / 2, format!("{i} {big}")))
            .collect();
        let (r, got, requests) = read_all(&log);
        assert_eq!(r, Ok(12));
        let firsts: Vec<String> = got
            .iter()
            .map(|l| l.split(' ').next().unwrap_or_default().to_string())
            .collect();
        assert_eq!(firsts, (0..12).map(|i| i.to_string()).collect::<Vec<_>>());
        assert!(requests > 1, "{requests}");
    }

    #[test]
    fn a_second_larger_than_the_biggest_page_is_unpageable() {
        let big = "x".repeat(5 * 1024 * 1024);
        let log: Vec<(i64, String)> = (0..8)
            .map(|i| (1_700_000_000, format!("{i} {big}")))
            .collect();
        let (r, _, _) = read_all(&log);
        assert_eq!(
            r,
            Err(ReadError::Unpageable(
                "log cannot be read in full: more than 33554432 bytes logged within one second"
                    .into()
            ))
        );
    }

    #[test]
    fn a_line_without_a_timestamp_in_a_cut_page_is_unpageable() {
        let mut body = b"no stamp here\n".to_vec();
        body.resize(PAGE_BYTES, b'y');
        let r = block_on(read_whole_log(
            |_, _| {
                let b = body.clone();
                async move { Ok(b) }
            },
            |_| {},
        ));
        assert_eq!(
            r,
            Err(ReadError::Unpageable(
                "log cannot be read in full: line without a timestamp in a truncated page".into()
            ))
        );
    }

    #[test]
    fn a_failed_request_is_a_fetch_error() {
        let r = block_on(read_whole_log(
            |_, _| async { Err::<Vec<u8>, String>("reading log of pod p: boom".into()) },
            |_| {},
        ));
        assert_eq!(
            r,
            Err(ReadError::Fetch("reading log of pod p: boom".into()))
        );
    }

    fn pod(name: &str, index: Option<&str>, phase: &str, attempt: Option<&str>) -> Pod {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(i) = index {
            labels.insert(COMPLETION_INDEX.to_string(), i.to_string());
        }
        if let Some(a) = attempt {
            labels.insert(RESTART_ATTEMPT.to_string(), a.to_string());
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"phase": phase},
        }))
        .expect("pod")
    }

    #[test]
    fn pods_are_ordered_by_index_phase_restart_attempt_and_name() {
        let mut pods = vec![
            pod("d", Some("1"), "Running", None),
            pod("c", Some("0"), "Failed", None),
            pod("b", Some("0"), "Running", Some("1")),
            pod("a", Some("0"), "Running", Some("0")),
            pod("e", Some("x"), "Succeeded", None),
        ];
        order_pods(&mut pods);
        let names: Vec<String> = pods.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names, ["e", "b", "a", "c", "d"]);
    }
}
