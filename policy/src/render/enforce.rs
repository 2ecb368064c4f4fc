//! The post-override stage shared by both renders: resolve every matching override for the
//! node context, clear `spec.overrides`, and run the contract stages (placement, workload
//! labels, gang contract) on the result.

use nvcre_engine::{Document, Origin, RuleSet};
use serde_json::Value;
use std::borrow::Cow;

use crate::api::Workflow;
use crate::contract::{self, enforce};
use crate::error::PolicyError;
use crate::nodes::Node;
use crate::resolve::{
    AppliedOverride, OverrideContext, ResolveError, list_policy, resolve_overrides,
};

use super::RenderRequest;
use super::parse::input_error;

/// Resolves every matching override for the node context, clears `spec.overrides`, and enforces
/// the post-override stages (placement, workload labels, gang contract) on the result: the
/// Workflow, the overrides applied and the findings below error (warnings, info).
///
/// # Errors
/// [`PolicyError::Resolve`] for a failing override; [`PolicyError::Rejected`] for a failed check.
#[allow(clippy::too_many_arguments)] // one call site each for the WorkloadRun and Workflow paths
pub(super) fn resolve_and_enforce(
    rules: &RuleSet,
    mut workflow: Workflow,
    platform: &str,
    arch: &str,
    nodes: &[Node],
    doc: &Document,
    user_offset: usize,
    report: contract::Report,
) -> Result<(Workflow, Vec<AppliedOverride>, Vec<nvcre_engine::Finding>), PolicyError> {
    let domains = domain_count(&workflow, nodes);
    let octx = OverrideContext::for_workflow(&workflow, platform, arch, domains);
    let lists = list_policy(rules)?;
    let applied = resolve_overrides(&mut workflow, &octx, &lists).map_err(|e| {
        // Point at the user's own override when it is one (the generated platform rows come
        // first in the list).
        let index = match &e {
            ResolveError::When { index, .. } | ResolveError::Patch { index, .. } => *index,
        };
        match index.checked_sub(user_offset) {
            Some(k) => {
                let path = format!("spec.overrides[{k}]");
                input_error(doc, &path, format!("applying overrides: {e} ({path})"))
            }
            None => PolicyError::Resolve(e),
        }
    })?;
    workflow.spec.overrides.clear();
    let value = serde_json::to_value(&workflow).map_err(|e| PolicyError::Build(e.to_string()))?;
    let checked = enforce(
        rules,
        &[
            contract::PLACEMENT,
            contract::WORKLOAD_LABELS,
            contract::GANG_CONTRACT,
        ],
        Cow::Owned(value),
        Origin {
            file: &doc.source.name,
            document: doc.index,
            spans: None,
        },
        &Value::Null,
        report,
    )?;
    let workflow = serde_json::from_value(checked.value.into_owned())
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let below_error = checked
        .findings
        .into_iter()
        .filter(|f| f.severity != nvcre_engine::Severity::Error)
        .collect();
    Ok((workflow, applied, below_error))
}

/// A post-override finding below error as `render` prints it on stderr.
pub(super) fn warning_line(f: &nvcre_engine::Finding) -> String {
    format!("{} [{}]", f.message, f.rule_id)
}

/// Distinct non-empty values of `orchestration.topology.topologyKey` among `nodes`.
pub(super) fn domain_count(workflow: &Workflow, nodes: &[Node]) -> i64 {
    let Some(key) = workflow
        .spec
        .orchestration
        .get("topology")
        .and_then(|t| t.get("topologyKey"))
        .and_then(Value::as_str)
    else {
        return 0;
    };
    let domains: std::collections::BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.labels.get(key).map(String::as_str))
        .filter(|v| !v.is_empty())
        .collect();
    i64::try_from(domains.len()).unwrap_or(i64::MAX)
}

pub(super) fn report_mode(req: &RenderRequest) -> contract::Report {
    if req.report_all {
        contract::Report::All
    } else {
        contract::Report::First
    }
}
