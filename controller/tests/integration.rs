//! The controller's integration tests, one binary (each test binary links the whole dependency
//! tree, kube and k8s-openapi included: one per file made the target directory gigabytes larger).

mod common;
mod crd_admission;
mod deploy;
mod e2e;
mod http;
mod rules_reload;
mod workflow;
mod workloadrun;
