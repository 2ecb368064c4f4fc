//! Rendering a WorkloadRun: [`render_workload_run`] is the pipeline, one named step per stage.
//!
//! parse + admission → node context (platform and GPU architecture) → per-node defaults and NIC
//! detection → platform override rows and their build-time part → build → construction label
//! checks → with a platform: resolve overrides and the contract stages → the output document.

use nvcre_engine::{Document, Origin, RuleSet};
use serde_json::Value;
use std::sync::Arc;

use crate::api::{FrameworkType, Workflow, WorkloadRun, set_annotation};
use crate::build::{BuildParams, build_workflow, runtime_templates};
use crate::contract;
use crate::detect;
use crate::error::PolicyError;
use crate::packs::params::OverrideParams;
use crate::resolve::{AppliedOverride, OverrideContext, when_matches};

use super::context::{
    NIC_DETECTION, NODES_FILE_EXCLUSIVE, NodeContext, detect_nic_resource, node_context,
};
use super::enforce::{Provenance, enforce_workflow, note_line, report_mode, resolve_and_enforce};
use super::parse::{
    admit, build_error, check_user_overrides, locate_each, locate_findings, origin, parse_typed,
    prepare_document,
};
use super::platform::{PlatformOverride, apply_user_env, may_match};
use super::{ANNOTATION_ARCH, ANNOTATION_PLATFORM, Note, OVERRIDE_TABLE, RenderRequest, Rendered};

/// Renders a WorkloadRun document into its Workflow.
///
/// # Errors
/// [`PolicyError::Rejected`] with findings for admission failures, label composition errors and
/// post-override contract failures; [`PolicyError::Usage`] for bad flags or an undeterminable
/// architecture; [`PolicyError::Input`] for a document that is not a WorkloadRun;
/// [`PolicyError::Build`] for build errors (exec nil, timeoutPerJob).
pub fn render_workload_run(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    render_input(rules, Input::Raw(doc), req)
}

/// [`render_workload_run`] of a WorkloadRun the caller readied ([`prepare_document`]), read
/// (`run`) and admitted, as `check` has (`req.admitted` is set): neither is done again.
///
/// # Errors
/// As [`render_workload_run`].
pub(crate) fn render_admitted_run(
    rules: &RuleSet,
    doc: &Document,
    run: WorkloadRun,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    render_input(rules, Input::Admitted(doc, Box::new(run)), req)
}

/// Renders `input` in its own CEL cost budget (shared with an enclosing `check`); an error that
/// is not a rejection keeps what was noted before it.
fn render_input(
    rules: &RuleSet,
    input: Input<'_>,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    let _budget = nvcre_engine::cost::DocumentBudget::open();
    let (mut warnings, mut findings) = (Vec::new(), Vec::new());
    render_noting(rules, input, req, (&mut warnings, &mut findings))
        .map_err(|e| e.noted(findings, warnings))
}

/// The document a render starts from.
enum Input<'a> {
    /// As given.
    Raw(&'a Document),
    /// Readied, read as this run, and admitted by the caller.
    Admitted(&'a Document, Box<WorkloadRun>),
}

/// [`render_workload_run`], noting into `warnings` (the lines `render` prints) and `findings`
/// (those below error) as it goes.
fn render_noting(
    rules: &RuleSet,
    input: Input<'_>,
    req: &RenderRequest,
    (warnings, findings): (&mut Vec<Note>, &mut Vec<nvcre_engine::Finding>),
) -> Result<Rendered, PolicyError> {
    check_flags_first(rules, req)?;
    let (doc, run, admitted) = match input {
        Input::Raw(doc) => {
            let (doc, run, admitted) = parse_and_admit(rules, doc, req, warnings)?;
            (std::borrow::Cow::Owned(doc), run, admitted)
        }
        Input::Admitted(doc, run) => (std::borrow::Cow::Borrowed(doc), *run, Vec::new()),
    };
    warnings.extend(admitted.iter().map(note_line));
    // The admission stage's warnings are the run's findings too (a caller that admitted the
    // document itself has them already).
    findings.extend(admitted);
    // After the admission stage, as `check` does: its warnings stay beside this error.
    check_user_overrides(&doc, &run.spec.overrides)?;
    super::parse::check_thresholds(
        &doc,
        &nvcre_engine::FieldPath::root()
            .key("spec")
            .key("thresholds"),
        &run.spec.thresholds,
    )?;
    let printed = findings.len();
    let (ctx, arch) = resolve_node_context(rules, req, &doc, &run, warnings)?;
    if !req.admitted {
        findings.extend(super::parse::override_when_findings(
            rules,
            &doc,
            &run.spec.overrides,
        )?);
    }
    let spec = nvcre_engine::FieldPath::root().key("spec");
    if let Some(message) = unknown_architecture(req, &run, &ctx) {
        let path = match run.spec.target {
            Some(_) => spec.clone().key("target"),
            None => spec.clone(),
        };
        findings.push(crate::check::input_warning(
            &doc,
            crate::builtins::UNKNOWN_ARCH_RULE,
            message,
            &path,
        ));
    }
    if let Some(message) = unlisted_architecture(rules, req, &run, &arch)? {
        let path = match selector_product(&run) {
            Some(_) if req.gpu_arch.is_none() && !ctx.from_nodes => spec
                .clone()
                .key("target")
                .key("nodeSelector")
                .key(crate::nodes::GPU_PRODUCT_LABEL),
            _ => spec.clone(),
        };
        findings.push(crate::check::input_warning(
            &doc,
            crate::builtins::UNKNOWN_ARCH_RULE,
            message,
            &path,
        ));
    }
    if let Some(message) = arch_contradicts_selector(rules, req, &run, &ctx, &arch)? {
        let path = spec
            .clone()
            .key("target")
            .key("nodeSelector")
            .key(crate::nodes::GPU_PRODUCT_LABEL);
        findings.push(crate::check::input_warning(
            &doc,
            crate::builtins::ARCH_CONTRADICTS_SELECTOR_RULE,
            message,
            &path,
        ));
    }
    // The findings so far are the input's: `render` prints them as it prints the later ones.
    warnings.extend(findings[printed..].iter().map(note_line));
    // Printed above as notes; reported by `check` and the controller as findings.
    let target = match run.spec.target {
        Some(_) => spec.key("target"),
        None => spec,
    };
    findings.extend(ctx.findings_of(&doc, &target));
    let sizing = sizing(rules, &run, &ctx, &arch, warnings)?;
    let listed = rows_listed(rules, req, &ctx);
    let rows = platform_rows(
        rules,
        &run,
        &sizing,
        (listed, rows_pruned(rules, req, &ctx), &ctx.platform, &arch),
    )?;
    let (workflow, provenance) = build(
        rules,
        &doc,
        &run,
        &sizing,
        (rows, listed),
        &ctx.platform,
        &arch,
    )?;
    let (workflow, composed) = match compose_labels(rules, &doc, workflow, req) {
        Ok(composed) => composed,
        // The findings so far belong with a rejection too.
        Err(PolicyError::Rejected(rejected)) => {
            findings.extend(rejected);
            return Err(PolicyError::Rejected(std::mem::take(findings)));
        }
        Err(e) => return Err(e),
    };
    let composed = if ctx.platform.is_empty() {
        // The stage runs again after the overrides only with a platform, and reports its
        // warnings there; without one these are its last word.
        warnings.extend(composed.iter().map(note_line));
        findings.extend(composed);
        Vec::new()
    } else {
        composed
    };
    let resolved = resolve_for_platform(
        rules,
        workflow,
        &doc,
        &ctx,
        &arch,
        &provenance,
        req,
        (&mut *warnings, &mut *findings),
    );
    let (workflow, applied) = match resolved {
        Ok(r) => r,
        // The findings so far (admission warnings, the unknown architecture) belong with a
        // rejection too.
        Err(PolicyError::Rejected(rejected)) => {
            // A render stops at the first error: one of a stage that runs before
            // `workload-labels` after the overrides leaves the construction run's warnings of
            // that stage as its last word.
            let order = |stage: Option<&str>| {
                contract::AFTER_OVERRIDES
                    .iter()
                    .position(|s| Some(*s) == stage)
            };
            let first_error = rejected
                .iter()
                .find(|f| f.severity == nvcre_engine::Severity::Error);
            let labels = order(Some(contract::WORKLOAD_LABELS));
            if report_mode(req) == contract::Report::First
                && order(first_error.and_then(|f| f.stage.as_deref()))
                    .is_some_and(|i| Some(i) < labels)
            {
                findings.extend(composed);
            }
            findings.extend(rejected);
            return Err(PolicyError::Rejected(std::mem::take(findings)));
        }
        Err(e) => return Err(e),
    };
    let noted = (std::mem::take(warnings), std::mem::take(findings));
    let mut rendered = output(workflow, noted, applied, ctx, arch)?;
    rendered.nic_detection = sizing.nic_note;
    Ok(rendered)
}

/// Checks the flags before the file is used (as nvcrectl does): their values first, then the
/// `--nodes-file` exclusivity.
fn check_flags_first(rules: &RuleSet, req: &RenderRequest) -> Result<(), PolicyError> {
    node_context(
        rules,
        &RenderRequest {
            nodes: None,
            ..req.clone()
        },
        None,
    )?;
    if req.nodes.is_some() && (req.platform.is_some() || req.gpu_arch.is_some()) {
        return Err(PolicyError::Usage(NODES_FILE_EXCLUSIVE.to_string()));
    }
    Ok(())
}

/// Readies the document, reads it as a WorkloadRun and runs the admission stage (unless the
/// caller already did). Returns the admission stage's findings below error beside the document
/// and the run.
fn parse_and_admit(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
    warnings: &mut Vec<Note>,
) -> Result<(Document, WorkloadRun, Vec<nvcre_engine::Finding>), PolicyError> {
    let (doc, notes) = prepare_document(doc, "WorkloadRun")?;
    warnings.extend(notes);
    // Type errors (a string where a number belongs) are input errors with their line, found
    // before any rule reads the document.
    let run: WorkloadRun = parse_typed(&doc, "WorkloadRun")?;
    // The admission stage reads the document and never changes it: the typed run read above
    // stands.
    let admitted = admit(rules, &doc, req)?;
    Ok((doc, run, admitted))
}

/// The node context and the GPU architecture the render uses: from the nodes or `--gpu-arch`,
/// else from `target.nodeSelector["nvidia.com/gpu.product"]`.
fn resolve_node_context(
    rules: &RuleSet,
    req: &RenderRequest,
    doc: &Document,
    run: &WorkloadRun,
    warnings: &mut Vec<Note>,
) -> Result<(NodeContext, String), PolicyError> {
    let ctx = node_context(rules, req, run.spec.target.as_ref())?;
    // About the nodes this document's target selects: among several documents, led by the
    // document's place.
    warnings.extend(ctx.notes_of(doc));
    let arch = match (ctx.from_nodes, req.gpu_arch.is_some()) {
        (true, _) | (false, true) => ctx.gpu_architecture.clone(),
        (false, false) => {
            let product = selector_product(run).unwrap_or_default();
            if product.is_empty() && !req.allow_unknown_arch {
                // An input error of this document (with several files, the user must know which),
                // at the node selector, else the target, else the spec.
                let at = ["spec.target.nodeSelector", "spec.target", "spec"]
                    .into_iter()
                    .find(|p| {
                        nvcre_engine::FieldPath::parse(p).is_ok_and(|p| p.get(&doc.value).is_some())
                    })
                    .unwrap_or("spec");
                return Err(super::parse::input_error(
                    doc,
                    at,
                    format!(
                        "cannot determine GPU architecture: {} label required in target.nodeSelector \
                         (or pass --gpu-arch ARCH, or --nodes-file FILE to detect it from the target nodes)",
                        crate::nodes::GPU_PRODUCT_LABEL
                    ),
                ));
            }
            detect::gpu_products(rules)?.architecture(product)
        }
    };
    Ok((ctx, arch))
}

/// The run's `target.nodeSelector["nvidia.com/gpu.product"]`, when written and not empty.
fn selector_product(run: &WorkloadRun) -> Option<&str> {
    run.spec
        .target
        .as_ref()
        .and_then(|t| t.node_selector.get(crate::nodes::GPU_PRODUCT_LABEL))
        .map(String::as_str)
        .filter(|p| !p.is_empty())
}

/// `--gpu-arch A` (which takes precedence) against a `nvidia.com/gpu.product` node selector whose
/// architecture (by the `gpu-products` table) is another: the run is configured for `A`, its pods
/// land on the selector's nodes.
///
/// # Errors
/// A malformed `gpu-products` table.
fn arch_contradicts_selector(
    rules: &RuleSet,
    req: &RenderRequest,
    run: &WorkloadRun,
    ctx: &NodeContext,
    arch: &str,
) -> Result<Option<String>, PolicyError> {
    let (Some(flag), Some(product), false) = (&req.gpu_arch, selector_product(run), ctx.from_nodes)
    else {
        return Ok(None);
    };
    let selected = detect::gpu_products(rules)?.architecture(product);
    Ok((selected != arch).then(|| {
        format!(
            "--gpu-arch {} ({arch}) contradicts target.nodeSelector[{}] {} ({selected}): the run is rendered for {arch} (the flag takes precedence: GPUs per node, NICs, MNNVL and the {arch} overrides), but its pods only schedule on {selected} nodes; pass --gpu-arch {selected}, or fix the node selector",
            detect::quote(flag),
            detect::quote(crate::nodes::GPU_PRODUCT_LABEL),
            detect::quote(product),
        )
    }))
}

/// `check --platform P` of a run whose architecture nothing names (no `--gpu-arch`, no
/// `nvidia.com/gpu.product` node selector): what the check assumed, where `render` refuses.
fn unknown_architecture(
    req: &RenderRequest,
    run: &WorkloadRun,
    ctx: &NodeContext,
) -> Option<String> {
    let named = req.gpu_arch.is_some() || ctx.from_nodes || selector_product(run).is_some();
    (req.allow_unknown_arch && !named && !ctx.platform.is_empty()).then(|| {
        format!(
            "the GPU architecture is unknown (no --gpu-arch, no {} in target.nodeSelector): the overrides of platform {} were resolved for the unknown architecture and its per-node defaults, so the findings of the post-override checks may not be the real run's (render refuses this run); pass --gpu-arch ARCH or set the node selector",
            crate::nodes::GPU_PRODUCT_LABEL,
            ctx.platform
        )
    })
}

/// When the architecture the node selector or the nodes name (`NVIDIA-Tesla-V100` → `tesla`)
/// has no row in the defaults table (`--gpu-arch` is refused for such a value): the warning
/// that the unknown architecture's per-node defaults are used, and no architecture override
/// applies.
///
/// # Errors
/// A missing or malformed defaults table.
fn unlisted_architecture(
    rules: &RuleSet,
    req: &RenderRequest,
    run: &WorkloadRun,
    arch: &str,
) -> Result<Option<String>, PolicyError> {
    if req.gpu_arch.is_some() || arch.is_empty() || arch == crate::nodes::UNKNOWN_ARCH {
        return Ok(None);
    }
    let known = detect::listed_architectures(rules)?;
    if known.iter().any(|a| a == arch) {
        return Ok(None);
    }
    let named = match selector_product(run) {
        Some(p) => format!(
            "{} {} names GPU architecture {}",
            crate::nodes::GPU_PRODUCT_LABEL,
            detect::quote(p),
            detect::quote(arch)
        ),
        None => format!(
            "the target nodes' GPU architecture is {}",
            detect::quote(arch)
        ),
    };
    Ok(Some(format!(
        "{named}, which the gpu-defaults table has no row for (known: {}): the per-node defaults of an unknown architecture are used and no architecture override applies; set spec.gpusPerNode and spec.mlnxPerNode, or correct the product",
        known.join(", ")
    )))
}

/// What the run asks of each node: the spec's values, else the per-node defaults of the
/// architecture and platform; the NIC resource, else the detected one.
struct Sizing {
    gpus_per_node: i64,
    mlnx_per_node: i64,
    enable_mnnvl: bool,
    nodes_per_job: i64,
    nic_resource_name: String,
    /// What NIC detection said when it requested no NIC resource.
    nic_note: Option<String>,
    /// What the run's `testScale` means (the `test-scale` table).
    scale: detect::TestScale,
}

/// Fills [`Sizing`] from the spec, the defaults table and NIC detection.
fn sizing(
    rules: &RuleSet,
    run: &WorkloadRun,
    ctx: &NodeContext,
    arch: &str,
    warnings: &mut Vec<Note>,
) -> Result<Sizing, PolicyError> {
    let defaults = detect::node_defaults(rules, arch, &ctx.platform)?;
    let mlnx_per_node = run.spec.mlnx_per_node.unwrap_or(defaults.mlnx_per_node);
    let scale = detect::test_scale(
        rules,
        run.spec
            .orchestration
            .as_ref()
            .and_then(|o| o.test_scale.as_deref())
            .unwrap_or(""),
        run.spec.num_nodes,
    )?;
    let (detected_nic, nic_note) = detect_nic_resource(rules, ctx, mlnx_per_node)?;
    warnings.extend(
        nic_note
            .iter()
            .map(|n| Note::from(format!("{NIC_DETECTION}: {n}"))),
    );
    Ok(Sizing {
        nic_note,
        gpus_per_node: run.spec.gpus_per_node.unwrap_or(defaults.gpus_per_node),
        mlnx_per_node,
        enable_mnnvl: run.spec.enable_mnnvl.unwrap_or(defaults.enable_mnnvl),
        nodes_per_job: scale.nodes_per_job(run.spec.num_nodes),
        scale,
        nic_resource_name: run
            .spec
            .nic_resource_name
            .clone()
            .or(detected_nic)
            .unwrap_or_default(),
    })
}

/// Whether the platform rows go into the Workflow's `spec.overrides`: always, unless the
/// caller wants the findings alone, no platform resolves them and no rule of the construction
/// `workload-labels` stage (the one stage that then sees the Workflow) can read that list
/// (see [`RenderRequest::findings_only`]).
fn rows_listed(rules: &RuleSet, req: &RenderRequest, ctx: &NodeContext) -> bool {
    !(req.findings_only && ctx.platform.is_empty()) || labels_read_rows(rules)
}

/// Whether a rule of the construction `workload-labels` stage may read `spec.overrides`.
fn labels_read_rows(rules: &RuleSet) -> bool {
    rules
        .stage(contract::WORKLOAD_LABELS)
        .any(|p| p.may_touch(&["spec", "overrides"]))
}

/// Whether the listed platform rows that cannot match the platform and architecture are listed
/// by their `when` alone: when the caller wants the findings alone and no rule of the
/// construction `workload-labels` stage can read the list (the overrides are resolved, which
/// skips such a row, and the list is then cleared; see [`rows_listed`]).
fn rows_pruned(rules: &RuleSet, req: &RenderRequest, ctx: &NodeContext) -> bool {
    req.findings_only && !ctx.platform.is_empty() && !labels_read_rows(rules)
}

/// The rows of the platform override table, rendered for this run, with the user's `spec.env`
/// written over their env entries; when they are not `listed` in the Workflow, only the part
/// the build reads ([`PlatformOverride::build_time_part`]), and the env written only over the
/// rows that match the build's `platform` and `arch` (the build reads no other). When `pruned`
/// ([`rows_pruned`]), a row that cannot match `platform` and `arch` is its `when` alone.
fn platform_rows(
    rules: &RuleSet,
    run: &WorkloadRun,
    sizing: &Sizing,
    (listed, pruned, platform, arch): (bool, bool, &str, &str),
) -> Result<Vec<(String, Arc<PlatformOverride>)>, PolicyError> {
    let table = rules
        .table(OVERRIDE_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(OVERRIDE_TABLE.to_string()))?;
    let params = OverrideParams {
        entry_name: &run.metadata.name,
        nodes_per_job: sizing.nodes_per_job,
        gpus_per_node: sizing.gpus_per_node,
        mlnx_per_node: sizing.mlnx_per_node,
        nic_resource_name: &sizing.nic_resource_name,
        enable_mnnvl: sizing.enable_mnnvl,
        framework_type: run.spec.framework.kind().as_str(),
        strict_domain: sizing.scale.strict_domain,
    }
    .to_value();
    // Decoded once per distinct row: most rows render the same for every run, and a row that
    // carries the run's name is filled in.
    let decode = |id: &str, value: &Value| detect::decode_row::<PlatformOverride>(table, id, value);
    let read = |o: &PlatformOverride| !pruned || may_match(&o.when, platform, arch);
    let mut rows = if listed && pruned {
        // Only the rows that may match are copied whole to be filled in.
        let part = |o: &PlatformOverride| {
            if read(o) { o.clone() } else { o.when_only() }
        };
        let mut rows =
            table.render_decoded_part(&params, decode, PlatformOverride::each_string, part)?;
        for (_, o) in &mut rows {
            if !read(o) && Arc::get_mut(o).is_none() {
                *o = Arc::new(o.when_only());
            }
        }
        rows
    } else if listed {
        table.render_decoded(&params, decode, PlatformOverride::each_string)?
    } else {
        table.render_decoded_part(
            &params,
            decode,
            PlatformOverride::each_string,
            PlatformOverride::build_time_part,
        )?
    };
    if !run.spec.env.is_empty() {
        let build_ctx = OverrideContext::build_time(platform, arch);
        for (_, o) in &mut rows {
            // A `when` that fails to evaluate fails the build, which evaluates it again.
            if !listed && when_matches(&o.when, &build_ctx) == Ok(false) || !read(o) {
                continue;
            }
            if !listed && Arc::get_mut(o).is_none() {
                // A row shared with the table's cache is copied only as far as it is read.
                *o = Arc::new(o.build_time_part());
            }
            apply_user_env(Arc::make_mut(o), &run.spec.env);
        }
    }
    Ok(rows)
}

/// The build-time part of the matching platform rows (context = platform + architecture only):
/// the `mpiArgs` for an MPI run and the `preCommand` lines.
fn build_time_passes(
    rows: &[(String, Arc<PlatformOverride>)],
    platform: &str,
    arch: &str,
    framework: FrameworkType,
) -> Result<(Vec<String>, Vec<String>), PolicyError> {
    let build_ctx = OverrideContext::build_time(platform, arch);
    let mut platform_mpi_args: Vec<String> = Vec::new();
    let mut pre_command = Vec::new();
    for (_, o) in rows {
        let matched = when_matches(&o.when, &build_ctx)
            .map_err(|m| PolicyError::Build(format!("applying overrides: {m}")))?;
        if !matched {
            continue;
        }
        if !o.mpi_args.is_empty() && framework == FrameworkType::Mpi {
            // Each match prepends: a later match lands before an earlier one.
            let mut next = o.mpi_args.clone();
            next.extend(platform_mpi_args);
            platform_mpi_args = next;
        }
        pre_command.extend(o.pre_command.iter().cloned());
    }
    Ok((platform_mpi_args, pre_command))
}

/// Builds the Workflow and lists its overrides: the platform rows, then the user's own.
fn build(
    rules: &RuleSet,
    doc: &Document,
    run: &WorkloadRun,
    sizing: &Sizing,
    (rows, listed): (Vec<(String, Arc<PlatformOverride>)>, bool),
    platform: &str,
    arch: &str,
) -> Result<(Workflow, Provenance), PolicyError> {
    let (platform_mpi_args, pre_command) =
        build_time_passes(&rows, platform, arch, run.spec.framework.kind())?;
    let build_params = BuildParams {
        gpus_per_node: sizing.gpus_per_node,
        base_env: detect::base_nccl_env(rules, sizing.enable_mnnvl)?,
        platform_mpi_args,
        pre_command,
        templates: runtime_templates(
            rules,
            run.spec
                .gang_scheduler
                .as_ref()
                .map_or("", |g| g.scheduler_name.as_str()),
        )?,
        scale: sizing.scale,
        gang_defaults: detect::gang_defaults(rules)?,
    };
    let mut workflow = build_workflow(run, &build_params).map_err(|e| build_error(doc, &e))?;
    let ids = if listed {
        let (ids, overrides): (Vec<String>, Vec<_>) = rows
            .into_iter()
            .map(|(id, o)| (id, PlatformOverride::into_spec(o)))
            .unzip();
        workflow.spec.overrides = overrides;
        ids
    } else {
        rows.into_iter().map(|(id, _)| id).collect()
    };
    let provenance = Provenance {
        rows: ids,
        // Read only where overrides are resolved, which needs a platform.
        written: if platform.is_empty() {
            Vec::new()
        } else {
            crate::build::written(run, &workflow)
        },
    };
    workflow
        .spec
        .overrides
        .extend(run.spec.overrides.iter().cloned());
    Ok((workflow, provenance))
}

/// Construction-time label composition, reported at the WorkloadRun's own field paths: the
/// Workflow's JSON from here on, and the stage's findings below error (warnings, info; its
/// errors reject the render).
fn compose_labels(
    rules: &RuleSet,
    doc: &Document,
    workflow: Workflow,
    req: &RenderRequest,
) -> Result<(Value, Vec<nvcre_engine::Finding>), PolicyError> {
    let value = workflow
        .into_json()
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    // The findings name the Workflow's paths: located in the WorkloadRun as the run after
    // overrides locates them (`spec.jobTemplate.spec.workloadMetadata.labels` where the user
    // wrote `spec.workloadMetadata.labels`), else at the nearest part of the WorkloadRun. No
    // override has applied yet, so none is where a value came from.
    let unlocated = Origin {
        spans: None,
        ..origin(doc)
    };
    let locate = |findings: Vec<nvcre_engine::Finding>| {
        let mut findings = locate_each(findings, doc, &[], None);
        for f in &mut findings {
            if f.line.is_none()
                && let Some(pos) = f
                    .field_path
                    .as_deref()
                    .and_then(|p| nvcre_engine::FieldPath::parse(p).ok())
                    .and_then(|p| doc.spans.lookup(&p))
            {
                f.line = Some(pos.line);
                f.column = Some(pos.column);
            }
        }
        findings
    };
    match enforce_workflow(
        rules,
        &[contract::WORKLOAD_LABELS],
        value,
        unlocated,
        &crate::packs::params::workload_labels("spec.workloadMetadata.labels"),
        report_mode(req),
    ) {
        Ok((value, findings)) => Ok((value, locate(findings))),
        Err(PolicyError::Rejected(findings)) => Err(PolicyError::Rejected(locate(findings))),
        Err(e) => Err(e),
    }
}

/// With a platform: resolves the overrides and runs the contract stages (workload labels, gang
/// contract, placement), findings located in the WorkloadRun; without one the Workflow keeps
/// its overrides unresolved.
#[allow(clippy::too_many_arguments)] // the pipeline's state, passed step to step
fn resolve_for_platform(
    rules: &RuleSet,
    workflow: Value,
    doc: &Document,
    ctx: &NodeContext,
    arch: &str,
    provenance: &Provenance,
    req: &RenderRequest,
    (warnings, findings): (&mut Vec<Note>, &mut Vec<nvcre_engine::Finding>),
) -> Result<(Value, Vec<AppliedOverride>), PolicyError> {
    if ctx.platform.is_empty() && !passes_pod_content(doc) {
        // Built from the spec alone, the Workflow holds only what the build made of it, which
        // the `placement` stage finds consistent until a platform row changes it (and then
        // sees it again): its run would find nothing, at a cost near a whole check's.
        return Ok((workflow, Vec::new()));
    }
    if ctx.platform.is_empty() {
        // The overrides stay unresolved; the Workflow as written is still held to the
        // `placement` stage, as `check` holds that Workflow: a GPU limit below the processes
        // per node is wrong whatever platform resolves it. Its rules read
        // `params.overridesPending` and leave alone what a platform row may still supply (a
        // topology key).
        let origin = Origin {
            file: &doc.source.name,
            document: doc.index,
            spans: None,
        };
        let params = crate::packs::params::placement(Vec::new(), true);
        let (workflow, post) = enforce_workflow(
            rules,
            &[contract::PLACEMENT],
            workflow,
            origin,
            &params,
            report_mode(req),
        )
        .map_err(|e| locate_findings(e, doc, &[], None))?;
        let post: Vec<_> = post
            .into_iter()
            .filter(|f| f.severity != nvcre_engine::Severity::Error)
            .collect();
        let post = locate_each(post, doc, &[], None);
        warnings.extend(post.iter().map(note_line));
        findings.extend(post);
        return Ok((workflow, Vec::new()));
    }
    let workflow = Workflow::from_json(workflow).map_err(|e| PolicyError::Build(e.to_string()))?;
    let (mut workflow, applied, post_warnings) = resolve_and_enforce(
        rules,
        workflow,
        &ctx.platform,
        arch,
        &ctx.nodes,
        doc,
        provenance,
        report_mode(req),
    )?;
    let post = post_warnings;
    warnings.extend(post.iter().map(note_line));
    findings.extend(post);
    set_annotation(&mut workflow, ANNOTATION_PLATFORM, ctx.platform.clone());
    Ok((workflow, applied))
}

/// The WorkloadRun fields that pass Kubernetes pod content through to the runtime's pod
/// templates as written, beside what the build generates: where the two can disagree. (The
/// user's overrides stay unresolved without a platform, so they are not in the templates.)
const POD_CONTENT_FIELDS: [&str; 4] = ["resources", "volumes", "volumeMounts", "initContainers"];

/// Whether the WorkloadRun `doc` sets one of [`POD_CONTENT_FIELDS`] (not empty).
fn passes_pod_content(doc: &Document) -> bool {
    let Some(spec) = doc.value.get("spec").and_then(Value::as_object) else {
        return false;
    };
    POD_CONTENT_FIELDS.iter().any(|f| match spec.get(*f) {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(m)) => !m.is_empty(),
        Some(_) => true,
    })
}

/// The output: the architecture annotation written, the Workflow as JSON.
fn output(
    mut workflow: Value,
    (warnings, findings): (Vec<Note>, Vec<nvcre_engine::Finding>),
    applied: Vec<AppliedOverride>,
    ctx: NodeContext,
    arch: String,
) -> Result<Rendered, PolicyError> {
    set_annotation(&mut workflow, ANNOTATION_ARCH, arch.clone());
    Ok(Rendered {
        workflow,
        warnings,
        nic_detection: None,
        findings,
        applied,
        platform: ctx.platform,
        gpu_architecture: arch,
        nodes: ctx.nodes,
    })
}
