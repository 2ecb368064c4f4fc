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

/// What a WorkloadRun render knows of where its Workflow's values came from (empty for a
/// Workflow, whose overrides are all the user's own).
#[derive(Debug, Default)]
pub(super) struct Provenance {
    /// The ids of the platform rows, which come first in `spec.overrides`, in order.
    pub(super) rows: Vec<String>,
    /// Where the build put the values the WorkloadRun's spec wrote.
    pub(super) written: Vec<crate::build::Written>,
}

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
    provenance: &Provenance,
    report: contract::Report,
) -> Result<(Workflow, Vec<AppliedOverride>, Vec<nvcre_engine::Finding>), PolicyError> {
    let user_offset = provenance.rows.len();
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
    let value = workflow
        .into_json()
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let params = crate::packs::params::placement(displaced(provenance, &applied, doc, &value));
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
        &params,
        report,
    )?;
    let workflow = Workflow::from_json(checked.value.into_owned())
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let below_error = checked
        .findings
        .into_iter()
        .filter(|f| f.severity != nvcre_engine::Severity::Error)
        .collect();
    Ok((workflow, applied, below_error))
}

/// The `displaced` param of the `placement` stage: one entry per override and WorkloadRun field
/// whose value the override deleted or replaced, in override order: `{override, platform,
/// field, written, at, removed, value?}` (see docs/rules.md, "Values an override displaced").
fn displaced(
    provenance: &Provenance,
    applied: &[AppliedOverride],
    doc: &Document,
    after: &Value,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    if provenance.written.is_empty() {
        return out;
    }
    for a in applied {
        let (name, platform) = match provenance.rows.get(a.index) {
            Some(id) => (id.clone(), true),
            None => (
                format!("spec.overrides[{}]", a.index - provenance.rows.len()),
                false,
            ),
        };
        let mut seen: Vec<nvcre_engine::FieldPath> = Vec::new();
        for d in &a.displaced {
            let fields = crate::build::fields_displaced(
                &provenance.written,
                &d.path,
                &d.before,
                &doc.value,
                after,
            );
            for field in fields {
                if seen.contains(&field) {
                    continue;
                }
                let mut entry = serde_json::Map::new();
                entry.insert("override".into(), Value::String(name.clone()));
                entry.insert("platform".into(), Value::Bool(platform));
                entry.insert("field".into(), Value::String(field.to_string()));
                entry.insert(
                    "written".into(),
                    field.get(&doc.value).cloned().unwrap_or(Value::Null),
                );
                entry.insert("at".into(), Value::String(d.path.to_string()));
                let now = d.path.get(after);
                entry.insert("removed".into(), Value::Bool(d.removed || now.is_none()));
                if let Some(now) = now.filter(|_| !d.removed) {
                    entry.insert("value".into(), now.clone());
                }
                out.push(Value::Object(entry));
                seen.push(field);
            }
        }
    }
    out
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
