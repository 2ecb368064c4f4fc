//! Running the rule packs of one pipeline stage over a document.
//!
//! Stages (the `stage:` of a rule pack): `admission` (WorkloadRun CRD rules), `workload-labels`
//! (label syntax, cap and the gang queue label; also run at construction), `placement` and
//! `gang-contract` (the post-override checks of render-pipeline.md §6 and §7.2).

use nvcre_engine::{Finding, Origin, RuleSet};
use serde_json::Value;

use crate::error::PolicyError;

/// Objects `render --expand` emits.
pub const MANIFESTS: &str = "manifests";
/// The admission stage.
pub const ADMISSION: &str = "admission";
/// Workload-object labels (construction and post-override).
pub const WORKLOAD_LABELS: &str = "workload-labels";
/// Post-override placement checks.
pub const PLACEMENT: &str = "placement";
/// Post-override gang contract.
pub const GANG_CONTRACT: &str = "gang-contract";

/// The outcome of a stage: the document after every mutation and all findings, in pack order.
#[derive(Debug, Clone)]
pub struct StageOutcome {
    /// The mutated document.
    pub value: Value,
    /// Findings of every pack of the stage.
    pub findings: Vec<Finding>,
}

impl StageOutcome {
    /// The error findings, if any.
    pub fn errors(&self) -> Vec<Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == nvcre_engine::Severity::Error)
            .cloned()
            .collect()
    }
}

/// Runs every pack of `stage`, threading the mutated document from pack to pack.
///
/// # Errors
/// [`PolicyError::Engine`] when a mutation cannot be applied.
pub fn run_stage(
    rules: &RuleSet,
    stage: &str,
    doc: &Value,
    origin: Origin<'_>,
    params: &Value,
) -> Result<StageOutcome, PolicyError> {
    let mut value = doc.clone();
    let mut findings = Vec::new();
    for pack in rules.stage(stage) {
        let out = pack.evaluate(&value, origin, params)?;
        value = out.value;
        findings.extend(out.findings);
    }
    Ok(StageOutcome { value, findings })
}

/// Runs stages in order and fails on the first error finding: as in the original's
/// post-override checks, the first failing rule wins (rules run in file order, label keys in
/// sorted order, replicated jobs in list order). `check` uses [`run_stage`] to see them all.
///
/// # Errors
/// [`PolicyError::Rejected`] with the first error finding.
pub fn enforce(
    rules: &RuleSet,
    stages: &[&str],
    doc: &Value,
    origin: Origin<'_>,
    params: &Value,
) -> Result<StageOutcome, PolicyError> {
    let mut value = doc.clone();
    let mut findings = Vec::new();
    for stage in stages {
        let out = run_stage(rules, stage, &value, origin, params)?;
        if let Some(first) = out.errors().into_iter().next() {
            return Err(PolicyError::Rejected(vec![first]));
        }
        value = out.value;
        findings.extend(out.findings);
    }
    Ok(StageOutcome { value, findings })
}
