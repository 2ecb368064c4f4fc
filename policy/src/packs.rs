//! The default rule set: the files under `rules/`, embedded in the binary at build time.
//!
//! `--rules DIR` (or `NVCRE_RULES`) replaces the whole set; see [`load_rules`].

use std::path::Path;
use std::sync::Arc;

use nvcre_engine::{Error, RuleSet, Source};

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
        "rules/defaults/gpu-defaults.yaml",
        include_str!("../../rules/defaults/gpu-defaults.yaml"),
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

/// The embedded default rule set.
///
/// # Errors
/// Only if an embedded file does not compile, which the test suite rules out.
pub fn default_rules() -> Result<RuleSet, Error> {
    RuleSet::from_sources(&embedded_sources())
}

/// The rule files of `dir` when given (as [`load_rules`] reads them), else the embedded ones;
/// not loaded, so that [`nvcre_engine::lint`] can report every problem.
///
/// # Errors
/// [`Error::Io`] for an unreadable directory or file; [`Error::Pack`] for a directory without
/// rule files.
pub fn rule_sources(dir: Option<&Path>) -> Result<Vec<Arc<Source>>, Error> {
    match dir {
        Some(d) => RuleSet::read_dir(d),
        None => Ok(embedded_sources()),
    }
}

/// The rule set from `dir` when given, else the embedded default set.
///
/// # Errors
/// [`Error::Pack`] with file, line and rule id for a rule file that does not load;
/// [`Error::Io`] for an unreadable directory.
pub fn load_rules(dir: Option<&Path>) -> Result<RuleSet, Error> {
    match dir {
        Some(d) => RuleSet::load_dir(d),
        None => default_rules(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_rules_lint_clean() {
        let findings: Vec<String> = nvcre_engine::lint(&embedded_sources())
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
