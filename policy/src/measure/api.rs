//! The `LogProfile`, `BandwidthMeasurement` and `GoodputMeasurement` API types (group
//! `nvcre.nvidia.com/v1alpha1`): serde for the wire, schemars for the CRDs.
//!
//! A LogProfile rule file under `rules/` is exactly a `LogProfile` object, so the same YAML can
//! be applied to a cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::crd::{Condition, TypedLocalObjectReference};

/// `LogProfile.spec`: how to read one framework's log: the named regexes, the timestamp layout
/// and which pod to read.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema, kube::CustomResource,
)]
#[kube(
    group = "nvcre.nvidia.com",
    version = "v1alpha1",
    kind = "LogProfile",
    root = "LogProfileResource",
    derive = "PartialEq",
    plural = "logprofiles"
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogProfileSpec {
    /// How `timestamp` captures are parsed.
    pub timestamp: TimestampSpec,
    /// The named event patterns.
    pub patterns: LogPatternSet,
    /// Which pod(s) to read; absent: one pod (worker 0, or the `node` replicatedJob for
    /// bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_strategy: Option<WorkerStrategySpec>,
    /// The container whose log is read; empty: the pod's default container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    /// Steps after each run boundary (start, checkpoint restore) flagged as warmup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub warmup_steps: Option<i64>,
    /// The framework's log interval: steps whose number is not a multiple of it are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub log_interval: Option<i64>,
}

/// `spec.timestamp`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimestampSpec {
    /// A Go time layout (reference time `2006-01-02 15:04:05`), e.g.
    /// `2006-01-02 15:04:05.999999`, for the `timestamp` captures.
    #[schemars(length(min = 1))]
    pub layout: String,
}

/// `spec.patterns`: each pattern is optional; which ones a measurement uses depends on its kind
/// (bandwidth: `bandwidthResult`, `networkTransport`; goodput: the others).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogPatternSet {
    /// A training step: `globalStep` / `iteration`, `epoch`, `stepTiming` / `elapsedTime`,
    /// `loss`, `tflops`, `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_step: Option<EventPattern>,
    /// A checkpoint save starts (or completes, with `saveDuration`): `step`, `path`,
    /// `saveDuration`, `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_save: Option<EventPattern>,
    /// A checkpoint save finished: `step`, `path`, `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_done: Option<EventPattern>,
    /// A checkpoint restore starts: `step`, `path`, `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_restore: Option<EventPattern>,
    /// A checkpoint restore finished: `step`, `path`, `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_loaded: Option<EventPattern>,
    /// The application started: `timestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_start: Option<EventPattern>,
    /// A line that flags the training step on it as warmup (no captures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_step: Option<EventPattern>,
    /// One NCCL result row: `size` (bytes), `algBW` and `busBW` (GB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_result: Option<EventPattern>,
    /// The NCCL network in use: `transport`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_transport: Option<EventPattern>,
}

/// One named event pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventPattern {
    /// A regex with named groups (`(?P<name>…)`), Go RE2 syntax; `\d`, `\s`, `\w` and `\b`
    /// are ASCII, as in Go. Unanchored unless it anchors itself.
    #[schemars(length(min = 1))]
    pub regex: String,
    /// A line the regex must match (checked when the profile loads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// Unit of a duration capture (`stepTiming`, `elapsedTime`, `saveDuration`): `s`
    /// (default), `ms` or `us`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub units: BTreeMap<String, String>,
}

/// `spec.workerStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerStrategySpec {
    /// `Single` (one pod) or `Multi` (lifecycle events from the first worker, training steps
    /// from the last).
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["Single", "Multi"]))]
    pub type_: String,
    /// Which worker's log holds lifecycle events under `Multi`: `first` or `last`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["first", "last"]))]
    pub lifecycle_pod: Option<String>,
    /// Which worker's log holds training steps under `Multi`: `first` or `last`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["first", "last"]))]
    pub training_step_pod: Option<String>,
    /// Bandwidth: the replicatedJob whose pod is read (`launcher` for MPI, where mpirun's
    /// output lands). Unset: `node`. (No `trainer` default: MPI runtimes have no such job.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicated_job_name: Option<String>,
}

/// `BandwidthMeasurement.spec`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema, kube::CustomResource,
)]
#[kube(
    group = "nvcre.nvidia.com",
    version = "v1alpha1",
    kind = "BandwidthMeasurement",
    root = "BandwidthMeasurementResource",
    derive = "PartialEq",
    plural = "bandwidthmeasurements",
    namespaced,
    status = "BandwidthMeasurementStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct BandwidthMeasurementSpec {
    /// The NVCRE Job measured (only `name` is read; same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_ref: Option<TypedLocalObjectReference>,
    /// The cluster-scoped LogProfile to parse with.
    #[schemars(length(min = 1))]
    pub log_profile_ref: String,
    /// Sampling period while the Job runs (a duration such as `30s`); default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval: Option<String>,
    /// The NCCL collective (`all_reduce`, `alltoall`, …): the `nccl_test` metric label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_type: Option<String>,
}

/// `BandwidthMeasurement.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BandwidthMeasurementStatus {
    /// One entry per message size, in first-seen order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<BandwidthResult>,
    /// Distinct NCCL network names (`IB`, `Socket`, `AWS Libfabric`), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub transport: Vec<String>,
    /// When the first data was seen (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When the measurement completed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// `Measuring` and `Complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The average bandwidth at one message size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BandwidthResult {
    /// Message size in bytes.
    pub size_bytes: i64,
    /// Average algorithm bandwidth, GB/s, 2 decimals (`180.71`).
    #[serde(rename = "algBW")]
    pub alg_bw: String,
    /// Average bus bandwidth, GB/s, 2 decimals.
    #[serde(rename = "busBW")]
    pub bus_bw: String,
    /// Rows averaged.
    pub samples: i64,
}

/// `GoodputMeasurement.spec`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema, kube::CustomResource,
)]
#[kube(
    group = "nvcre.nvidia.com",
    version = "v1alpha1",
    kind = "GoodputMeasurement",
    root = "GoodputMeasurementResource",
    derive = "PartialEq",
    plural = "goodputmeasurements",
    namespaced,
    status = "GoodputMeasurementStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct GoodputMeasurementSpec {
    /// The NVCRE Job measured (only `name` is read; same namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_ref: Option<TypedLocalObjectReference>,
    /// The cluster-scoped LogProfile to parse with.
    #[schemars(length(min = 1))]
    pub log_profile_ref: String,
    /// Sampling period while the Job runs (a duration such as `30s`); default 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_interval: Option<String>,
}

/// An interruption not yet closed by the first step of the next run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingInterruption {
    /// Time of the last checkpoint before the interruption (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_checkpoint: Option<String>,
    /// Time of the interruption (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_interrupt: Option<String>,
    /// Step of that checkpoint.
    #[serde(default)]
    pub checkpoint_step: i64,
    /// Last step seen before the interruption.
    #[serde(default)]
    pub last_step: i64,
    /// Work lost, seconds (6 decimals).
    #[serde(default)]
    pub t_ch: String,
    /// `JobFailed` or `WorkloadRestarted`.
    #[serde(default)]
    pub reason: String,
}

/// `GoodputMeasurement.status`. Durations and ratios are strings with 6 decimals (`0.885560`);
/// times are RFC 3339.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoodputMeasurementStatus {
    /// Goodput ratio, 0 to 1: `(t_w − t_rm − t_ch − t_re − t_save) / (t_w − t_re)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The latest training step.
    #[serde(default)]
    pub current_step: i64,
    /// The highest training step.
    #[serde(default)]
    pub highest_step: i64,
    /// Training wall time t_w, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_time_sec: Option<String>,
    /// Work lost to interruptions Σ t_ch, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_work_time_sec: Option<String>,
    /// Rescheduling Σ t_re, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_time_sec: Option<String>,
    /// Resume Σ t_rm (startup to the first step included), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_time_sec: Option<String>,
    /// Checkpoint saves Σ t_save, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_save_time_sec: Option<String>,
    /// Interruptions recorded.
    #[serde(default)]
    pub interruption_count: i64,
    /// Step of the last checkpoint.
    #[serde(default)]
    pub last_checkpoint_step: i64,
    /// When the last checkpoint completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checkpoint_time: Option<String>,
    /// Start of the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// End of the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// Timestamp of the last non-warmup step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step_timestamp: Option<String>,
    /// Average step time over non-warmup steps, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_step_time_sec: Option<String>,
    /// The profile's log interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_interval: Option<i64>,
    /// The step warmup is counted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_base_step: Option<i64>,
    /// Time spent in warmup steps, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_time_sec: Option<String>,
    /// Time spent in non-warmup steps, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_warmup_time_sec: Option<String>,
    /// Warmup time of earlier runs, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_warmup_time_sec: Option<String>,
    /// Non-warmup time of earlier runs, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_non_warmup_time_sec: Option<String>,
    /// The highest non-warmup step counted.
    #[serde(default)]
    pub last_non_warmup_step: i64,
    /// Average TFLOP/s per GPU over every step that reports it (warmup included).
    #[serde(
        default,
        rename = "avgTFLOPSPerGPU",
        skip_serializing_if = "Option::is_none"
    )]
    pub avg_tflops_per_gpu: Option<String>,
    /// When the application started (the `applicationStart` event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_start_time: Option<String>,
    /// When the application was last seen logging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_stop_time: Option<String>,
    /// An interruption awaiting the next run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_interruption: Option<PendingInterruption>,
    /// `Measuring` and `Complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
