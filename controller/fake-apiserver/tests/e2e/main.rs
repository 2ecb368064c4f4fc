//! End-to-end tests: a real `kube::Client` (and runtime) against the fake API server.

mod apply;
mod crd;
mod crud;
mod runtime;

use std::future::Future;
use std::time::Duration;

use kube::core::Status;

/// Hang guard only: tests never assert on timing.
pub async fn guard<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test hung (hang guard, not a timing assertion)")
}

/// The `Status` of an API error.
pub fn status<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}
