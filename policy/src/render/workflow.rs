//! Rendering a Workflow document (the original's `workflow render`): an already built Workflow
//! resolved for a platform through the [`super::enforce`] stage, with the detection and
//! applied-override annotations written.

use nvcre_engine::{Document, RuleSet};
use serde_json::Value;

use crate::api::{TargetSpec, Workflow, set_annotation};
use crate::detect;
use crate::error::PolicyError;
use crate::packs::params::OverrideParams;
use crate::resolve::{OverrideContext, when_matches};

use super::context::node_context;
use super::enforce::{note_line, report_mode, resolve_and_enforce};
use super::parse::{admit, check_user_overrides, parse_typed, prepare_document};
use super::platform::PlatformOverride;
use super::{
    ANNOTATION_APPLIED, ANNOTATION_ARCH, ANNOTATION_PLATFORM, Note, OVERRIDE_TABLE, RenderRequest,
    Rendered,
};

/// Renders a Workflow document for a platform (the original's `workflow render`): overrides
/// resolved, placement checks, resolved-job-template checks (their errors prefixed
/// `validate resolved job template: `), `spec.overrides` cleared, detection and applied-override
/// annotations written.
///
/// # Errors
/// [`PolicyError::Usage`] without a node context (the message lists the synthetic nodes);
/// [`PolicyError::Rejected`] for failed checks; [`PolicyError::Resolve`] for failed overrides.
pub fn render_workflow(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    // One CEL cost budget for the whole render (shared with an enclosing `check`).
    let _budget = nvcre_engine::cost::DocumentBudget::open();
    let (mut warnings, mut findings) = (Vec::new(), Vec::new());
    // An error that is not a rejection keeps what was noted before it.
    render_noting(rules, doc, req, (&mut warnings, &mut findings))
        .map_err(|e| e.noted(findings, warnings))
}

/// [`render_workflow`], noting into `warnings` (the lines `render` prints) and `findings`
/// (those below error) as it goes.
fn render_noting(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
    (warnings, findings): (&mut Vec<Note>, &mut Vec<nvcre_engine::Finding>),
) -> Result<Rendered, PolicyError> {
    let (doc, notes) = prepare_document(doc, "Workflow")?;
    warnings.extend(notes);
    let workflow: Workflow = parse_typed(&doc, "Workflow")?;
    let target: Option<TargetSpec> = workflow
        .spec
        .orchestration
        .get("target")
        .and_then(|t| serde_json::from_value(t.clone()).ok());
    let ctx = node_context(rules, req, target.as_ref())?;
    // As a WorkloadRun's render: printed as notes, reported as findings.
    warnings.extend(ctx.notes_of(&doc));
    let orchestration = nvcre_engine::FieldPath::root()
        .key("spec")
        .key("orchestration");
    let at = match target {
        Some(_) => orchestration.key("target"),
        None => orchestration,
    };
    findings.extend(ctx.findings_of(&doc, &at));
    let (platform, arch) = if ctx.from_nodes {
        (ctx.platform.clone(), ctx.gpu_architecture.clone())
    } else {
        match (&req.platform, &req.gpu_arch) {
            (Some(_), Some(_)) => (ctx.platform.clone(), ctx.gpu_architecture.clone()),
            _ => return Err(workflow_context_error(rules)?),
        }
    };
    // As a WorkloadRun's render, once the flags are known good.
    let admitted = admit(rules, &doc, req)?;
    warnings.extend(admitted.iter().map(note_line));
    findings.extend(admitted);
    check_user_overrides(&doc, &workflow.spec.overrides)?;
    super::parse::check_workflow_thresholds(&doc, workflow.spec.validation.as_ref())?;
    if !req.admitted {
        let never = super::parse::override_when_findings(rules, &doc, &workflow.spec.overrides)?;
        warnings.extend(never.iter().map(note_line));
        findings.extend(never);
    }
    let resolved = resolve_and_enforce(
        rules,
        workflow,
        &platform,
        &arch,
        &ctx.nodes,
        &doc,
        &super::enforce::Provenance::default(),
        report_mode(req),
    );
    let (mut workflow, applied, post_warnings) = match resolved {
        Ok(r) => r,
        // The findings so far (admission warnings, overrides that never apply) belong with a
        // rejection too.
        Err(e) => {
            return Err(match prefix_resolved(rules, e) {
                PolicyError::Rejected(rejected) => {
                    findings.extend(rejected);
                    PolicyError::Rejected(std::mem::take(findings))
                }
                other => other,
            });
        }
    };
    warnings.extend(post_warnings.iter().map(note_line));
    findings.extend(post_warnings);
    warnings.extend(build_time_rows_note(rules, &workflow, &platform, &arch)?.map(Note::from));
    set_annotation(&mut workflow, ANNOTATION_PLATFORM, platform.clone());
    set_annotation(&mut workflow, ANNOTATION_ARCH, arch.clone());
    set_annotation(
        &mut workflow,
        ANNOTATION_APPLIED,
        serde_json::to_string(&applied).unwrap_or_default(),
    );
    Ok(Rendered {
        workflow,
        warnings: std::mem::take(warnings),
        nic_detection: None,
        findings: std::mem::take(findings),
        applied,
        platform,
        gpu_architecture: arch,
        nodes: ctx.nodes,
    })
}

/// The platform rows whose `preCommand` / `mpiArgs` apply only when a WorkloadRun is built for
/// a known platform (the build-time passes of a WorkloadRun render): a Workflow rendered without a
/// platform cannot carry them, and resolving it later does not add them. Says so, naming them.
fn build_time_rows_note(
    rules: &RuleSet,
    workflow: &Value,
    platform: &str,
    arch: &str,
) -> Result<Option<String>, PolicyError> {
    let trainer = workflow.pointer("/spec/jobTemplate/spec/workload/trainJob/trainer");
    let wrapped = trainer
        .and_then(|t| t.pointer("/command/0"))
        .and_then(Value::as_str)
        == Some("/bin/bash");
    let mpi = trainer
        .and_then(|t| t.pointer("/command/0"))
        .and_then(Value::as_str)
        == Some("timeout");
    let Some(table) = rules.table(OVERRIDE_TABLE) else {
        return Ok(None);
    };
    let params = OverrideParams {
        entry_name: workflow
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        nodes_per_job: 1,
        gpus_per_node: 0,
        mlnx_per_node: 0,
        nic_resource_name: "",
        enable_mnnvl: false,
        framework_type: if mpi { "mpi" } else { "torch" },
        strict_domain: false,
    }
    .to_value();
    let ctx = OverrideContext::build_time(platform, arch);
    let mut rows = Vec::new();
    for (id, value) in table.render(&params)? {
        let row: PlatformOverride = detect::decode_row(table, &id, &value)?;
        let adds = (!row.pre_command.is_empty() && !wrapped) || (mpi && !row.mpi_args.is_empty());
        if adds && when_matches(&row.when, &ctx).unwrap_or(false) {
            rows.push(id);
        }
    }
    Ok((!rows.is_empty()).then(|| {
        format!(
            "this Workflow may lack the build-time platform tweaks of {} (preCommand / mpirun arguments from {}): they are applied when the WorkloadRun is rendered with --platform or --nodes-file, not when a Workflow is resolved",
            platform,
            rows.join(", ")
        )
    }))
}

/// Adds the `validate resolved job template: ` prefix of the Workflow render path to a
/// rejection's errors: the resolved-job-template checks' (workload labels, gang contract), not
/// the placement checks' that run before them and report in their own words, as the original's
/// `workflow render` does. The warnings beside them keep their own words too.
fn prefix_resolved(rules: &RuleSet, e: PolicyError) -> PolicyError {
    match e {
        PolicyError::Rejected(mut findings) => {
            let placement: Vec<String> = rules
                .stage(crate::contract::PLACEMENT)
                .map(|p| p.name.clone())
                .chain([crate::contract::PLACEMENT.to_string()])
                .collect();
            for f in findings.iter_mut().filter(|f| {
                f.severity == nvcre_engine::Severity::Error && !placement.contains(&f.pack)
            }) {
                f.message = format!("validate resolved job template: {}", f.message);
            }
            PolicyError::Rejected(findings)
        }
        other => other,
    }
}

/// `specify --nodes-file <path> or --platform + --gpu-arch` plus every synthetic context the
/// flags accept: each selectable platform (in the platform table's order) with each selectable
/// architecture (sorted), as `platform-arch`.
fn workflow_context_error(rules: &RuleSet) -> Result<PolicyError, PolicyError> {
    let architectures = detect::selectable_architectures(rules)?;
    let mut available = Vec::new();
    for (p, _) in detect::selectable_platforms(rules)? {
        for a in &architectures {
            available.push(format!("{p}-{a}"));
        }
    }
    Ok(PolicyError::Usage(format!(
        "specify --nodes-file <path> or --platform + --gpu-arch\navailable: {}",
        available.join(", ")
    )))
}
