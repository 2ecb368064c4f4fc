//! The `runtime-templates` table: the scripts, mounts, resources, probes and timings of the
//! TrainingRuntime and Workflow a WorkloadRun builds. The build places these values; which
//! values they are is the table's.

use std::sync::Arc;

use nvcre_engine::RuleSet;
use serde::Deserialize;
use serde_json::{Value, json};

use super::canonical_go_duration;
use crate::error::PolicyError;

/// Name of the runtime templates table.
pub const RUNTIME_TEMPLATES_TABLE: &str = "runtime-templates";

/// A row of the `runtime-templates` table.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeTemplates {
    /// `execution.timeoutPerJob` when the spec gives none (canonical Go duration once decoded
    /// by [`runtime_templates`]).
    pub default_timeout_per_job: String,
    /// The `nodeHealthMonitor` CEL expression of every generated Job.
    pub node_health_expression: String,
    /// The shared-memory volume and mount of every worker.
    pub shared_memory: SharedMemory,
    /// The torch / exec pod.
    pub torch: TorchTemplates,
    /// The MPI worker and launcher.
    pub mpi: MpiTemplates,
}

/// The shared-memory volume of every worker and where it is mounted.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedMemory {
    /// The pod volume.
    pub volume: Value,
    /// The container volume mount.
    pub mount: Value,
}

/// The fixed fields of the torch / exec pod.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TorchTemplates {
    /// The pod's `terminationGracePeriodSeconds`.
    pub termination_grace_period_seconds: Value,
    /// The pod's `securityContext`.
    pub security_context: Value,
}

/// The fixed parts of the MPI runtime and the mpirun command line.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MpiTemplates {
    /// Seconds of the `timeout` that wraps mpirun.
    pub timeout_seconds: String,
    /// The mpirun arguments after `-N <processes per node>` and before the env it forwards,
    /// one argv element each (`--allow-run-as-root`, `--mca`, `plm_rsh_args`, its value).
    pub launch_args: Vec<String>,
    /// Where the Trainer's ssh secret is mounted (read-only), also `mlPolicy.mpi.sshAuthMountPath`.
    pub ssh_auth_mount_path: String,
    /// The worker's `sh -c` bootstrap script.
    pub worker_script: String,
    /// The worker container's `securityContext`.
    pub worker_security_context: Value,
    /// The worker container's `readinessProbe`.
    pub worker_readiness_probe: Value,
    /// The launcher's `fix-ssh-permissions` init container script.
    pub launcher_script: String,
    /// The launcher container's `resources`.
    pub launcher_resources: Value,
    /// When present, the launcher waits for the workers in its init container instead of
    /// depending on them being Ready.
    #[serde(default)]
    pub launcher_wait: Option<LauncherWait>,
}

/// The launcher's own wait for the workers.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LauncherWait {
    /// The mount of the MPI hostfile the script reads.
    pub hostfile_mount: Value,
    /// Runs after the launcher script.
    pub script: String,
}

/// The first row of the `runtime-templates` table whose `include` holds for `scheduler_name`
/// (`""` without a gang scheduler), its default timeout canonicalised; shared with the table's
/// cache (decoded once per scheduler name and loaded rule set).
///
/// # Errors
/// A missing or malformed table, no matching row, or a default timeout that is not a Go
/// duration (of any row whose `include` holds: every such row is decoded).
pub fn runtime_templates(
    rules: &RuleSet,
    scheduler_name: &str,
) -> Result<Arc<RuntimeTemplates>, PolicyError> {
    let table = rules
        .table(RUNTIME_TEMPLATES_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(RUNTIME_TEMPLATES_TABLE.to_string()))?;
    // Decoded once per scheduler name and shared (the table's typed cache).
    let decode = |id: &str, value: &Value| -> Result<RuntimeTemplates, PolicyError> {
        let mut row: RuntimeTemplates = crate::detect::decode_row(table, id, value)?;
        // The expression reaches every Job's node health monitor: one that does not compile
        // is the table's error, not found when the Job runs.
        if let Err(e) = nvcre_engine::Expr::compile(&row.node_health_expression) {
            return Err(PolicyError::table_entry(
                table,
                id,
                format!("nodeHealthExpression: CEL does not compile: {e}"),
            ));
        }
        row.default_timeout_per_job =
            canonical_go_duration(&row.default_timeout_per_job).map_err(|reason| {
                PolicyError::table_entry(
                    table,
                    id,
                    format!(
                        "defaultTimeoutPerJob: invalid duration {}: {reason}",
                        crate::detect::quote(&row.default_timeout_per_job)
                    ),
                )
            })?;
        Ok(row)
    };
    table
        .render_decoded(
            &json!({"schedulerName": scheduler_name}),
            decode,
            RuntimeTemplates::each_string,
        )?
        .into_iter()
        .next()
        .map(|(_, row)| row)
        .ok_or_else(|| PolicyError::NoMatchingRow {
            table: RUNTIME_TEMPLATES_TABLE.to_string(),
            subject: format!("schedulerName {}", crate::detect::quote(scheduler_name)),
        })
}

impl RuntimeTemplates {
    /// Calls `f` with every string of the row (the strings a substituted param can appear in;
    /// see `Table::render_decoded`). Every field is named, so a field added later must be
    /// added here.
    fn each_string(&mut self, f: &mut dyn FnMut(&mut String)) {
        let RuntimeTemplates {
            default_timeout_per_job,
            node_health_expression,
            shared_memory: SharedMemory { volume, mount },
            torch:
                TorchTemplates {
                    termination_grace_period_seconds,
                    security_context,
                },
            mpi:
                MpiTemplates {
                    timeout_seconds,
                    launch_args,
                    ssh_auth_mount_path,
                    worker_script,
                    worker_security_context,
                    worker_readiness_probe,
                    launcher_script,
                    launcher_resources,
                    launcher_wait,
                },
        } = self;
        for s in [
            default_timeout_per_job,
            node_health_expression,
            timeout_seconds,
            ssh_auth_mount_path,
            worker_script,
            launcher_script,
        ] {
            f(s);
        }
        launch_args.iter_mut().for_each(&mut *f);
        for v in [
            volume,
            mount,
            termination_grace_period_seconds,
            security_context,
            worker_security_context,
            worker_readiness_probe,
            launcher_resources,
        ] {
            nvcre_engine::each_string(v, f);
        }
        if let Some(LauncherWait {
            hostfile_mount,
            script,
        }) = launcher_wait
        {
            nvcre_engine::each_string(hostfile_mount, f);
            f(script);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(text: &str) -> RuleSet {
        RuleSet::load(
            &[nvcre_engine::Source::new("fixture.yaml", text)],
            Some(&crate::packs::contract().expect("contract")),
        )
        .expect("fixture loads")
    }

    /// A row whose fields are all the smallest valid values, guarded by `include`.
    fn table(include: &str, timeout: &str) -> String {
        format!(
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {{name: runtime-templates}}
entries:
  - id: only
    include: \"{include}\"
    defaultTimeoutPerJob: {timeout}
    nodeHealthExpression: 'true'
    sharedMemory: {{volume: {{}}, mount: {{}}}}
    torch: {{terminationGracePeriodSeconds: 1, securityContext: {{}}}}
    mpi:
      timeoutSeconds: '9'
      launchArgs: []
      sshAuthMountPath: /p
      workerScript: w
      workerSecurityContext: {{}}
      workerReadinessProbe: {{}}
      launcherScript: l
      launcherResources: {{}}
"
        )
    }

    #[test]
    fn the_default_timeout_is_canonicalised() {
        let rules = fixture(&table("true", "90m"));
        let t = runtime_templates(&rules, "").expect("row");
        assert_eq!(t.default_timeout_per_job, "1h30m0s");
        assert_eq!(t.mpi.launcher_wait, None);
    }

    #[test]
    fn a_bad_default_timeout_names_the_entry() {
        let rules = fixture(&table("true", "2d"));
        assert_eq!(
            runtime_templates(&rules, "").unwrap_err().to_string(),
            "fixture.yaml:5:5: table runtime-templates, entry only: defaultTimeoutPerJob: invalid duration \"2d\": unknown unit \"d\"; valid units are ns, us, µs, ms, s, m, h"
        );
    }

    #[test]
    fn a_node_health_expression_that_does_not_compile_names_the_entry() {
        let rules = fixture(&table("true", "90m").replace(
            "nodeHealthExpression: 'true'",
            "nodeHealthExpression: 'node.spec.unschedulable =='",
        ));
        assert_eq!(
            runtime_templates(&rules, "").unwrap_err().to_string(),
            "fixture.yaml:5:5: table runtime-templates, entry only: nodeHealthExpression: CEL does not compile: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression column 27)"
        );
    }

    #[test]
    fn no_matching_row_is_an_error_naming_the_scheduler() {
        let rules = fixture(&table("params.schedulerName == 'x'", "1h"));
        assert!(runtime_templates(&rules, "x").is_ok());
        assert_eq!(
            runtime_templates(&rules, "").unwrap_err().to_string(),
            "no row of table \"runtime-templates\" matches schedulerName \"\"; the table decides every case, so end it with a catch-all row (include: \"true\")"
        );
    }
}
