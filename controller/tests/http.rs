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
