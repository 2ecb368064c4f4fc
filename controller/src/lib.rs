/*!
The NVCRE controller: kube-rs `Controller`s for WorkloadRun and Workflow over the same
`nvcre-domain` library calls as the `nvcre-policy` command.

- [`workloadrun::decide_workload_run`] and [`workflow::decide_workflow`] are the reconcile
  decisions, pure functions from what was observed to what to write; [`conditions`] holds the
  condition rules both share.
- [`measure`] reads each group's TrainJob pod logs into its BandwidthMeasurement and
  GoodputMeasurement.
- [`run`] wires them into four `Controller`s (server-side apply with one field manager, status
  through `/status`, create-or-adopt that never steals, Events, backoff, graceful shutdown,
  optional Lease leader election) and serves `/healthz`, `/readyz` and `/metrics` ([`http`]).
- [`rules::RulesHolder`] keeps the last good rule set in force and reloads a mounted rules
  directory when it changes.

A test can start the whole controller against any API server: build a `kube::Client` for its
URL and call [`run`] with a shutdown future.
*/
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod apply;
pub mod conditions;
mod controller;
pub mod error;
pub mod http;
pub mod measure;
pub mod metrics;
pub mod nodehealth;
pub mod rules;
pub mod workflow;
pub mod workloadrun;

pub use controller::{Config, ConfigMapRef, LeaderElection, run};
pub use error::Error;
