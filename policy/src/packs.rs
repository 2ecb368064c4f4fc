//! The default rule set: the files under `rules/`, embedded in the binary at build time, and
//! the [`Contract`] every rule set is loaded with ([`contract`]).
//!
//! `--rules DIR` (or `NVCRE_RULES`) replaces the whole set; see [`load_rules`].

use std::path::Path;
use std::sync::Arc;

use nvcre_engine::{Contract, Error, LoadErrors, RuleSet, Source};
use serde_json::{Value, json};

use crate::contract::{ADMISSION, GANG_CONTRACT, MANIFESTS, PLACEMENT, WORKLOAD_LABELS};

/// `(path as shown in messages, contents)` of every embedded rule file.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "rules/admission/workflow.yaml",
        include_str!("../../rules/admission/workflow.yaml"),
    ),
    (
        "rules/admission/workloadrun.yaml",
        include_str!("../../rules/admission/workloadrun.yaml"),
    ),
    (
        "rules/contract/manifests.yaml",
        include_str!("../../rules/contract/manifests.yaml"),
    ),
    (
        "rules/contract/placement.yaml",
        include_str!("../../rules/contract/placement.yaml"),
    ),
    (
        "rules/contract/resources.yaml",
        include_str!("../../rules/contract/resources.yaml"),
    ),
    (
        "rules/contract/topology.yaml",
        include_str!("../../rules/contract/topology.yaml"),
    ),
    (
        "rules/contract/workload-labels.yaml",
        include_str!("../../rules/contract/workload-labels.yaml"),
    ),
    (
        "rules/contract/gang.yaml",
        include_str!("../../rules/contract/gang.yaml"),
    ),
    (
        "rules/defaults/nccl-env.yaml",
        include_str!("../../rules/defaults/nccl-env.yaml"),
    ),
    (
        "rules/defaults/gang.yaml",
        include_str!("../../rules/defaults/gang.yaml"),
    ),
    (
        "rules/defaults/gpu-defaults.yaml",
        include_str!("../../rules/defaults/gpu-defaults.yaml"),
    ),
    (
        "rules/defaults/gpu-products.yaml",
        include_str!("../../rules/defaults/gpu-products.yaml"),
    ),
    (
        "rules/defaults/runtime.yaml",
        include_str!("../../rules/defaults/runtime.yaml"),
    ),
    (
        "rules/defaults/scheduling.yaml",
        include_str!("../../rules/defaults/scheduling.yaml"),
    ),
    (
        "rules/defaults/test-scale.yaml",
        include_str!("../../rules/defaults/test-scale.yaml"),
    ),
    (
        "rules/detect/nic-resources.yaml",
        include_str!("../../rules/detect/nic-resources.yaml"),
    ),
    (
        "rules/detect/platforms.yaml",
        include_str!("../../rules/detect/platforms.yaml"),
    ),
    (
        "rules/overrides/list-merge.yaml",
        include_str!("../../rules/overrides/list-merge.yaml"),
    ),
    (
        "rules/overrides/workloadrun.yaml",
        include_str!("../../rules/overrides/workloadrun.yaml"),
    ),
];

/// The embedded rule files, named `rules/…` as in the repository.
pub fn embedded_sources() -> Vec<Arc<Source>> {
    EMBEDDED
        .iter()
        .map(|(name, text)| Source::new(*name, *text))
        .collect()
}

/// A closed object schema: these properties, nothing else, loose types.
fn closed(properties: Value) -> Value {
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// The pipeline contract: the stages the pipeline runs (with the params each passes to its
/// packs) and the tables it renders (with a schema for their rows and the params each is
/// rendered with). Every rule set is loaded with it, so a misspelled stage, table or row key
/// is refused at load with its file, line and column.
///
/// The row schemas are hand-written and deliberately loose about types (values may be
/// templated); they list every key the pipeline reads and refuse any other.
///
/// # Errors
/// [`Error::InvalidContract`] if a schema does not compile, which the tests rule out.
pub fn contract() -> Result<Contract, Error> {
    let condition = closed(json!({"equals": {"type": "string"}, "in": {"type": "array"}}));
    Contract::new()
        .stage(
            ADMISSION,
            "WorkloadRun and Workflow admission checks, first",
            &[],
        )
        .stage(
            WORKLOAD_LABELS,
            "workload-object labels, at construction and after overrides",
            &["labelsPath", "defaultQueue", "defaultQueueLabelKey"],
        )
        .stage(PLACEMENT, "post-override placement checks", &[])
        .stage(
            GANG_CONTRACT,
            "post-override gang contract, when spec.gangScheduler names a scheduler",
            &["defaultQueue", "defaultQueueLabelKey"],
        )
        .stage(MANIFESTS, "every object render --expand emits", &[])
        .table(
            "gang-defaults",
            "the queue and queue label key of a gang scheduler that leaves them unset",
            closed(json!({"queue": {"type": "string"}, "queueLabelKey": {"type": "string"}})),
            Some(&[]),
        )?
        .table(
            "gpu-defaults",
            "GPUs and NICs per node and the MNNVL default, by architecture and platform",
            closed(json!({
                "gpuArchitecture": {"type": "string"},
                "platform": {"type": "string"},
                "gpusPerNode": {},
                "mlnxPerNode": {},
                "enableMNNVL": {},
                "selectable": {},
            })),
            Some(&[]),
        )?
        .table(
            "gpu-products",
            "GPU product labels and --gpu-arch spellings to architecture names",
            closed(json!({
                "rewrite": closed(json!({
                    "pattern": {"type": "string"},
                    "replacement": {"type": "string"},
                })),
                "match": {"type": "string"},
                "architecture": {"type": "string"},
            })),
            Some(&[]),
        )?
        .table(
            "list-merge",
            "merge key or replacement per list for override resolution",
            closed(json!({
                "paths": {"type": "array", "items": {"type": "string"}},
                "mergeKey": {"type": "string"},
                "replace": {"type": "boolean"},
            })),
            Some(&[]),
        )?
        .table(
            "nccl-base-env",
            "the NCCL environment every workload container starts from",
            closed(json!({"name": {"type": "string"}, "value": {}})),
            Some(&["enableMNNVL"]),
        )?
        .table(
            "nic-detection",
            "where NIC resource names are detected from the nodes",
            closed(json!({"resources": {"type": "array", "items": {"type": "string"}}})),
            Some(&["platform", "gpuArchitecture"]),
        )?
        .table(
            "platform-detection",
            "providerID prefixes and node labels to platform",
            closed(json!({
                "platform": {"type": "string"},
                "synthetic": closed(json!({
                    "order": {},
                    "providerID": {"type": "string"},
                    "labels": {"type": "object"},
                    "allocatable": {"type": "object"},
                })),
            })),
            Some(&["node"]),
        )?
        .table(
            "runtime-templates",
            "scripts, mounts, resources, probes and timings of the generated TrainingRuntime",
            closed(json!({
                "defaultTimeoutPerJob": {"type": "string"},
                "nodeHealthExpression": {"type": "string"},
                "sharedMemory": closed(json!({"volume": {}, "mount": {}})),
                "torch": closed(json!({"terminationGracePeriodSeconds": {}, "securityContext": {}})),
                "mpi": closed(json!({
                    "timeoutSeconds": {"type": "string"},
                    "plmRshArgs": {"type": "string"},
                    "sshAuthMountPath": {"type": "string"},
                    "workerScript": {"type": "string"},
                    "workerSecurityContext": {},
                    "workerReadinessProbe": {},
                    "launcherScript": {"type": "string"},
                    "launcherResources": {},
                    "launcherWait": closed(json!({"hostfileMount": {}, "script": {"type": "string"}})),
                })),
            })),
            Some(&["schedulerName"]),
        )?
        .table(
            "scheduling",
            "the tolerations of a job whose target names no taintSelectors",
            closed(
                json!({"tolerations": {"type": "array", "items": closed(json!({
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "value": {"type": "string"},
                    "effect": {"type": "string"},
                    "tolerationSeconds": {},
                }))}}),
            ),
            Some(&["placement", "hasLauncher"]),
        )?
        .table(
            "test-scale",
            "what spec.orchestration.testScale means: nodes per job, strict topology domains",
            closed(json!({"nodesPerJob": {}, "strictDomain": {}})),
            Some(&["testScale", "numNodes"]),
        )?
        .table(
            "workloadrun-platform-overrides",
            "platform and GPU overrides applied to WorkloadRun builds",
            closed(json!({
                "when": closed(json!({
                    "platform": condition,
                    "gpuArchitecture": condition,
                })),
                "mpiArgs": {"type": "array"},
                "preCommand": {},
                "dependencies": {"type": "array"},
                "jobTemplate": {"type": "object"},
                "orchestration": {"type": "object"},
            })),
            Some(&[
                "entryName",
                "nodesPerJob",
                "gpusPerNode",
                "mlnxPerNode",
                "nicResourceName",
                "enableMNNVL",
                "frameworkType",
                "strictDomain",
            ]),
        )
}

/// The embedded default rule set, loaded with [`contract`].
///
/// # Errors
/// Only if an embedded file does not load, which the test suite rules out: every problem.
pub fn default_rules() -> Result<RuleSet, LoadErrors> {
    RuleSet::load(&embedded_sources(), Some(&contract()?))
}

/// The rule files of `dir` when given (as [`load_rules`] reads them), else the embedded ones;
/// not loaded, so that [`nvcre_engine::lint`] can report every problem.
///
/// # Errors
/// Every unreadable entry ([`Error::Io`], [`Error::SymlinkLoop`]); [`Error::Pack`] for a
/// directory without rule files.
pub fn rule_sources(dir: Option<&Path>) -> Result<Vec<Arc<Source>>, LoadErrors> {
    match dir {
        Some(d) => RuleSet::read_dir(d),
        None => Ok(embedded_sources()),
    }
}

/// The rule set from `dir` when given, else the embedded default set, loaded with
/// [`contract`]. All or nothing.
///
/// # Errors
/// Every problem: unreadable files, [`Error::Pack`] and [`Error::Contract`] with file, line,
/// column and rule id.
pub fn load_rules(dir: Option<&Path>) -> Result<RuleSet, LoadErrors> {
    let contract = contract()?;
    match dir {
        Some(d) => RuleSet::load_dir_with(d, Some(&contract)),
        None => RuleSet::load(&embedded_sources(), Some(&contract)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_rules_lint_clean() {
        let contract = contract().expect("contract");
        let findings: Vec<String> = nvcre_engine::lint(&embedded_sources(), Some(&contract))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(findings, Vec::<String>::new());
    }

    #[test]
    fn embedded_rules_compile_and_have_every_stage() {
        let set = default_rules().expect("embedded rules compile");
        for stage in ["admission", "placement", "workload-labels", "gang-contract"] {
            assert!(
                set.stage(stage).next().is_some(),
                "no pack for stage {stage}"
            );
        }
        for table in [
            "gpu-defaults",
            "platform-detection",
            "workloadrun-platform-overrides",
        ] {
            assert!(set.table(table).is_some(), "no table {table}");
        }
    }
}
