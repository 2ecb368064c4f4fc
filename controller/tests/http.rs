//! `/healthz`, `/readyz`, `/metrics` through the router, without a socket.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use nvcre_controller::http::{Health, router};
use nvcre_controller::metrics::{ControllerLabel, Metrics};
use nvcre_controller::rules::{RulesHolder, RulesSource};
use tower::ServiceExt;

async fn get(health: &Arc<Health>, path: &str) -> (StatusCode, String) {
    let resp = router(Arc::clone(health))
        .oneshot(Request::get(path).body(Body::empty()).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).to_string())
}

fn health() -> Arc<Health> {
    let rules = Arc::new(RulesHolder::load(RulesSource::BuiltIn).expect("rules"));
    Arc::new(Health::new(Arc::new(Metrics::new()), rules))
}

#[tokio::test]
async fn healthz_is_always_ok() {
    assert_eq!(
        get(&health(), "/healthz").await,
        (StatusCode::OK, "ok\n".into())
    );
}

#[tokio::test]
async fn readyz_follows_the_ready_flag() {
    let h = health();
    assert_eq!(
        get(&h, "/readyz").await,
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into())
    );
    h.ready.store(true, Ordering::Relaxed);
    assert_eq!(get(&h, "/readyz").await, (StatusCode::OK, "ready\n".into()));
}

#[tokio::test]
async fn metrics_exposes_reconcile_and_reload_counters() {
    let h = health();
    let label = ControllerLabel {
        controller: "workloadrun".into(),
    };
    h.metrics.reconciles.get_or_create(&label).inc();
    h.metrics.durations.get_or_create(&label).observe(0.02);
    h.metrics.rules_reload_failures.inc();
    let (status, body) = get(&h, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        "nvcre_reconciles_total{controller=\"workloadrun\"} 1",
        "nvcre_rules_reload_failures_total 1",
        "nvcre_rules_reloads_total 0",
        "nvcre_reconcile_duration_seconds_count{controller=\"workloadrun\"} 1",
        "# EOF",
    ] {
        assert!(
            body.lines().any(|l| l == line),
            "missing {line:?} in:\n{body}"
        );
    }
}

/// The gauges of a measurement that is gone from the watch cache (deleted, or being deleted)
/// are dropped by the sweep; a present one keeps its own.
#[test]
fn the_series_sweep_drops_the_gauges_of_deleted_measurements() {
    use nvcre_controller::metrics::{
        BandwidthLabels, GoodputLabels, MeasurementKey, MeasurementKind,
    };
    let metrics = Metrics::new();
    let bandwidth = |measurement: &str, size: &str| BandwidthLabels {
        namespace: "team-a".into(),
        measurement: measurement.into(),
        job: "j".into(),
        workflow: "w".into(),
        nccl_test: "all_reduce".into(),
        message_size_bytes: size.into(),
    };
    metrics.set_bandwidth(&bandwidth("gone-bandwidth", "8"), Some(0.5), Some(1.0));
    metrics.set_bandwidth(&bandwidth("gone-bandwidth", "1024"), Some(1.5), Some(2.0));
    metrics.set_bandwidth(&bandwidth("kept-bandwidth", "8"), Some(3.0), Some(4.0));
    let goodput = GoodputLabels {
        namespace: "team-a".into(),
        measurement: "gone-goodput".into(),
        job: "j".into(),
        workflow: "w".into(),
    };
    metrics.set_goodput("ratio", &goodput, 0.9);
    metrics.set_goodput("avg_step_time_seconds", &goodput, 2.0);
    let gone = nvcre_controller::measure::sweep_series(&metrics, |k| k.name == "kept-bandwidth");
    assert_eq!(
        gone,
        [
            MeasurementKey {
                kind: MeasurementKind::Bandwidth,
                namespace: "team-a".into(),
                name: "gone-bandwidth".into(),
            },
            MeasurementKey {
                kind: MeasurementKind::Goodput,
                namespace: "team-a".into(),
                name: "gone-goodput".into(),
            },
        ]
    );
    let samples: Vec<String> = metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("nvcre_nccl_") || l.starts_with("nvcre_goodput_"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        samples,
        [
            "nvcre_nccl_algbw_gbps{namespace=\"team-a\",measurement=\"kept-bandwidth\",job=\"j\",workflow=\"w\",nccl_test=\"all_reduce\",message_size_bytes=\"8\"} 3.0",
            "nvcre_nccl_busbw_gbps{namespace=\"team-a\",measurement=\"kept-bandwidth\",job=\"j\",workflow=\"w\",nccl_test=\"all_reduce\",message_size_bytes=\"8\"} 4.0",
        ]
    );
    // Swept again, nothing is left to drop.
    assert_eq!(
        nvcre_controller::measure::sweep_series(&metrics, |k| k.name == "kept-bandwidth"),
        []
    );
}
