//! `/healthz`, `/readyz` and `/metrics` (axum). [`router`] builds the routes over shared
//! [`Health`] state, so tests drive it with `tower::ServiceExt::oneshot`, without a socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;
use crate::rules::RulesHolder;

/// What the probes and the metrics endpoint read.
#[derive(Debug)]
pub struct Health {
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    /// Rules in force (a refused reload is reported by `/readyz`).
    pub rules: Arc<RulesHolder>,
    /// Set once the controllers run (or this replica waits as a standby with rules loaded).
    pub ready: AtomicBool,
}

impl Health {
    /// New state, not ready yet.
    pub fn new(metrics: Arc<Metrics>, rules: Arc<RulesHolder>) -> Health {
        Health {
            metrics,
            rules,
            ready: AtomicBool::new(false),
        }
    }
}

/// The routes: `GET /healthz` (always `200 ok`), `GET /readyz` (`200 ready` once ready, else
/// `503 not ready`; a refused rules reload adds a line `rules reload refused, last good set in
/// force: <errors>`), `GET /metrics` (OpenMetrics text).
pub fn router(state: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(h): State<Arc<Health>>) -> impl IntoResponse {
    let mut body = if h.ready.load(Ordering::Relaxed) {
        "ready\n".to_string()
    } else {
        "not ready\n".to_string()
    };
    if let Some(e) = h.rules.last_error() {
        body.push_str(&format!(
            "rules reload refused, last good set in force: {e}\n"
        ));
    }
    let code = if h.ready.load(Ordering::Relaxed) {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, body)
}

async fn metrics(State(h): State<Arc<Health>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.metrics.encode(),
    )
}
