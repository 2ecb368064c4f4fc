//! TEMPORARY stub; replaced by the real build module.
#![allow(missing_docs)]
use crate::api::{EnvVar, Workflow, WorkloadRun};
pub struct BuildParams {
    pub gpus_per_node: i64,
    pub mlnx_per_node: i64,
    pub enable_mnnvl: bool,
    pub platform_mpi_args: Vec<String>,
    pub pre_command: Vec<String>,
    pub default_timeout_per_job: String,
}
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("stub")]
    Stub,
}
pub fn build_workflow(_run: &WorkloadRun, _p: &BuildParams) -> Result<Workflow, BuildError> {
    let _ = EnvVar::default();
    Err(BuildError::Stub)
}
