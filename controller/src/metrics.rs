//! Prometheus metrics (`prometheus-client`, text exposition on `/metrics`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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
        Metrics {
            reconciles,
            errors,
            durations,
            rules_reloads,
            rules_reload_failures,
            registry,
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
