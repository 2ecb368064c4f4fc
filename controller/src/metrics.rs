//! Prometheus metrics (`prometheus-client`, text exposition on `/metrics`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of the reconcile metrics: which controller.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// `workloadrun` or `workflow`.
    pub controller: String,
}

/// Labels of the error counter: controller and error kind.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// `workloadrun` or `workflow`.
    pub controller: String,
    /// The [`crate::Error`] variant, snake_case.
    pub kind: String,
}

/// Labels of the NCCL bandwidth gauges.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BandwidthLabels {
    /// The BandwidthMeasurement's namespace.
    pub namespace: String,
    /// Its name.
    pub measurement: String,
    /// `spec.jobRef.name`: the TrainJob.
    pub job: String,
    /// The `nvcre.nvidia.com/workflow` label.
    pub workflow: String,
    /// `spec.testType` (`all_reduce`, …).
    pub nccl_test: String,
    /// The message size, bytes, in decimal.
    pub message_size_bytes: String,
}

/// Labels of the goodput gauges.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GoodputLabels {
    /// The GoodputMeasurement's namespace.
    pub namespace: String,
    /// Its name.
    pub measurement: String,
    /// `spec.jobRef.name`: the TrainJob.
    pub job: String,
    /// The `nvcre.nvidia.com/workflow` label.
    pub workflow: String,
}

/// A gauge of floating-point values.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// The measurement kinds that export gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MeasurementKind {
    /// A BandwidthMeasurement (`nvcre_nccl_*`).
    Bandwidth,
    /// A GoodputMeasurement (`nvcre_goodput_*`).
    Goodput,
}

/// One measurement object: kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MeasurementKey {
    /// Which kind.
    pub kind: MeasurementKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// The label sets exported for one measurement.
#[derive(Debug, Default)]
struct Series {
    bandwidth: HashSet<BandwidthLabels>,
    goodput: HashSet<GoodputLabels>,
}

/// The goodput gauges `nvcre_goodput_<name>`, with their help text.
pub const GOODPUT_GAUGES: [(&str, &str); 10] = [
    ("ratio", "Goodput ratio, 0 to 1"),
    ("avg_tflops_per_gpu", "Average TFLOP/s per GPU"),
    ("training_time_seconds", "Training wall time, seconds"),
    (
        "reschedule_time_seconds",
        "Time spent rescheduling after interruptions, seconds",
    ),
    (
        "resume_time_seconds",
        "Time from start or resume to the first step, seconds",
    ),
    (
        "checkpoint_save_time_seconds",
        "Time spent saving checkpoints, seconds",
    ),
    (
        "lost_work_time_seconds",
        "Work lost to interruptions, seconds",
    ),
    ("warmup_time_seconds", "Time spent in warmup steps, seconds"),
    (
        "non_warmup_time_seconds",
        "Time spent in non-warmup steps, seconds",
    ),
    (
        "avg_step_time_seconds",
        "Average step time excluding warmup, seconds",
    ),
];

/// Every metric the controller exports.
#[derive(Debug)]
pub struct Metrics {
    /// `nvcre_reconciles_total{controller}`: reconciles run.
    pub reconciles: Family<ControllerLabel, Counter>,
    /// `nvcre_reconcile_errors_total{controller,kind}`: reconciles that failed.
    pub errors: Family<ErrorLabels, Counter>,
    /// `nvcre_reconcile_duration_seconds{controller}`: reconcile durations, seconds.
    pub durations: Family<ControllerLabel, Histogram>,
    /// `nvcre_rules_reloads_total`: rule sets reloaded and put in force.
    pub rules_reloads: Counter,
    /// `nvcre_rules_reload_failures_total`: changed rule sets refused.
    pub rules_reload_failures: Counter,
    /// `nvcre_nccl_algbw_gbps`: running-average algorithm bandwidth per message size, GB/s.
    pub nccl_algbw: Family<BandwidthLabels, FloatGauge>,
    /// `nvcre_nccl_busbw_gbps`: running-average bus bandwidth per message size, GB/s.
    pub nccl_busbw: Family<BandwidthLabels, FloatGauge>,
    /// `nvcre_goodput_<name>` by name (see [`GOODPUT_GAUGES`]).
    pub goodput: BTreeMap<&'static str, Family<GoodputLabels, FloatGauge>>,
    /// The label sets set per measurement: a `Family` cannot be listed, and the series of a
    /// measurement that was deleted must be found to be dropped ([`Metrics::drop_measurement`]).
    series: Mutex<BTreeMap<MeasurementKey, Series>>,
    registry: Registry,
}

fn duration_histogram() -> Histogram {
    Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
}

impl Metrics {
    /// A fresh registry with every metric registered (prefix `nvcre`).
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("nvcre");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations = Family::<ControllerLabel, Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let rules_reloads = Counter::default();
        let rules_reload_failures = Counter::default();
        registry.register("reconciles", "Reconciles run", reconciles.clone());
        registry.register("reconcile_errors", "Reconciles that failed", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration in seconds",
            durations.clone(),
        );
        registry.register("rules_reloads", "Rule sets reloaded", rules_reloads.clone());
        registry.register(
            "rules_reload_failures",
            "Changed rule sets refused (the last good set stayed in force)",
            rules_reload_failures.clone(),
        );
        let nccl_algbw = Family::<BandwidthLabels, FloatGauge>::default();
        let nccl_busbw = Family::<BandwidthLabels, FloatGauge>::default();
        registry.register(
            "nccl_algbw_gbps",
            "NCCL algorithm bandwidth per message size, GB/s",
            nccl_algbw.clone(),
        );
        registry.register(
            "nccl_busbw_gbps",
            "NCCL bus bandwidth per message size, GB/s",
            nccl_busbw.clone(),
        );
        let mut goodput = BTreeMap::new();
        for (name, help) in GOODPUT_GAUGES {
            let family = Family::<GoodputLabels, FloatGauge>::default();
            registry.register(format!("goodput_{name}"), help, family.clone());
            goodput.insert(name, family);
        }
        Metrics {
            reconciles,
            errors,
            durations,
            rules_reloads,
            rules_reload_failures,
            nccl_algbw,
            nccl_busbw,
            goodput,
            series: Mutex::new(BTreeMap::new()),
            registry,
        }
    }

    fn series(&self) -> std::sync::MutexGuard<'_, BTreeMap<MeasurementKey, Series>> {
        self.series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the bandwidth gauges of one message size (a value that is `None` is left as it is).
    pub fn set_bandwidth(&self, l: &BandwidthLabels, alg_bw: Option<f64>, bus_bw: Option<f64>) {
        if let Some(v) = alg_bw {
            self.nccl_algbw.get_or_create(l).set(v);
        }
        if let Some(v) = bus_bw {
            self.nccl_busbw.get_or_create(l).set(v);
        }
        let key = MeasurementKey {
            kind: MeasurementKind::Bandwidth,
            namespace: l.namespace.clone(),
            name: l.measurement.clone(),
        };
        self.series()
            .entry(key)
            .or_default()
            .bandwidth
            .insert(l.clone());
    }

    /// Removes the bandwidth gauges of one message size.
    pub fn remove_bandwidth(&self, l: &BandwidthLabels) {
        self.nccl_algbw.remove(l);
        self.nccl_busbw.remove(l);
    }

    /// Sets the goodput gauge `metric` (a name of [`GOODPUT_GAUGES`]).
    pub fn set_goodput(&self, metric: &str, l: &GoodputLabels, v: f64) {
        let Some(family) = self.goodput.get(metric) else {
            return;
        };
        family.get_or_create(l).set(v);
        let key = MeasurementKey {
            kind: MeasurementKind::Goodput,
            namespace: l.namespace.clone(),
            name: l.measurement.clone(),
        };
        self.series()
            .entry(key)
            .or_default()
            .goodput
            .insert(l.clone());
    }

    /// Removes the goodput gauge `metric`.
    pub fn remove_goodput(&self, metric: &str, l: &GoodputLabels) {
        if let Some(family) = self.goodput.get(metric) {
            family.remove(l);
        }
    }

    /// The measurements that have (or had) series since they were last dropped.
    pub fn measurements(&self) -> Vec<MeasurementKey> {
        self.series().keys().cloned().collect()
    }

    /// Removes every series of the measurement `key` (it was deleted).
    pub fn drop_measurement(&self, key: &MeasurementKey) {
        let Some(series) = self.series().remove(key) else {
            return;
        };
        for l in &series.bandwidth {
            self.remove_bandwidth(l);
        }
        for l in &series.goodput {
            for family in self.goodput.values() {
                family.remove(l);
            }
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
