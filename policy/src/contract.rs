//! Running the rule packs of one pipeline stage over a document.
//!
//! Stages (the `stage:` of a rule pack): `admission` (WorkloadRun CRD rules), `workload-labels`
//! (label syntax, cap and the gang queue label; also run at construction), `placement` and
//! `gang-contract` (the post-override checks: gang scheduling and placement).

use std::borrow::Cow;

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
/// The stages that run on a Workflow once its overrides are resolved, in the order they run.
pub const AFTER_OVERRIDES: [&str; 3] = [PLACEMENT, WORKLOAD_LABELS, GANG_CONTRACT];

/// Hand-written workload objects (`check` of kinds other than WorkloadRun and Workflow): the
/// only stage whose packs see `objects`, the documents of the same input.
pub const LINT: &str = "lint";

/// The outcome of a stage: the document after every mutation and all findings, in pack order.
#[derive(Debug, Clone)]
pub struct StageOutcome<'d> {
    /// The mutated document; still the caller's (borrowed) when no rule mutated it.
    pub value: Cow<'d, Value>,
    /// Findings of every pack of the stage.
    pub findings: Vec<Finding>,
    /// Where the stage's rules wrote.
    pub written: nvcre_engine::Written,
}

impl StageOutcome<'_> {
    /// Whether a finding of the stage is an error (the stage rejects the document).
    pub fn rejects(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.severity == nvcre_engine::Severity::Error)
    }
}

/// Runs every pack of `stage`, threading the mutated document from pack to pack. The
/// `workload-labels` and `gang-contract` stages also get the `gang-defaults` row as params
/// `defaultQueue` and `defaultQueueLabelKey`.
///
/// # Errors
/// [`PolicyError::Engine`] when a mutation cannot be applied; a missing or malformed
/// `gang-defaults` table for those two stages.
pub fn run_stage<'d>(
    rules: &RuleSet,
    stage: &str,
    doc: Cow<'d, Value>,
    origin: Origin<'_>,
    params: &Value,
) -> Result<StageOutcome<'d>, PolicyError> {
    let with_defaults;
    let params = if stage == WORKLOAD_LABELS || stage == GANG_CONTRACT {
        let d = crate::detect::gang_defaults(rules)?;
        let mut p = params.as_object().cloned().unwrap_or_default();
        p.extend(crate::packs::params::gang_defaults(&d));
        with_defaults = Value::Object(p);
        &with_defaults
    } else {
        params
    };
    let (value, findings, written) = nvcre_engine::run_packs_written(
        rules.stage(stage).map(|p| &**p),
        doc,
        origin,
        params,
        None,
    )?;
    Ok(StageOutcome {
        value,
        findings,
        written,
    })
}

/// How many error findings a rejection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Report {
    /// The first failing rule wins (the original's post-override checks: rules in file order,
    /// label keys in sorted order, replicated jobs in list order). `render` reports this way.
    #[default]
    First,
    /// Every error of every stage (`check`).
    All,
}

/// Runs stages in order and fails when a rule does not hold.
///
/// A rejection carries the warnings and info findings of the stages that ran (the rejecting one
/// included) beside its errors, in stage and rule order: a warning is never lost because an
/// error came with it.
///
/// # Errors
/// [`PolicyError::Rejected`] with the first error finding ([`Report::First`]: no later stage
/// runs), or with every error of every stage ([`Report::All`]).
pub fn enforce<'d>(
    rules: &RuleSet,
    stages: &[&str],
    doc: Cow<'d, Value>,
    origin: Origin<'_>,
    params: &Value,
    report: Report,
) -> Result<StageOutcome<'d>, PolicyError> {
    let mut value = doc;
    let mut findings = Vec::new();
    let mut rejected = false;
    let mut written = nvcre_engine::Written::default();
    for stage in stages {
        let out = run_stage(rules, stage, value, origin, params)?;
        if out.rejects() {
            rejected = true;
            if report == Report::First {
                let mut first = true;
                findings.extend(out.findings.into_iter().filter(|f| {
                    f.severity != nvcre_engine::Severity::Error || std::mem::take(&mut first)
                }));
                return Err(PolicyError::Rejected(findings));
            }
        }
        value = out.value;
        findings.extend(out.findings);
        written.extend(out.written);
    }
    if rejected {
        Err(PolicyError::Rejected(findings))
    } else {
        Ok(StageOutcome {
            value,
            findings,
            written,
        })
    }
}
