//! The main job: a WorkloadRun (or a Workflow) in, the Workflow that would be submitted out.
//!
//! WorkloadRun (render-pipeline.md §1.2, workloadrun-api.md §5 `workloadrun render`):
//! admission rules → node context (`--platform`/`--gpu-arch`, else the architecture from
//! `target.nodeSelector["nvidia.com/gpu.product"]`) → defaults table → platform override table →
//! build → construction label checks → with a platform: resolve overrides, clear
//! `spec.overrides`, enforce placement, workload labels and the gang contract.

use nvcre_engine::{Document, FieldPath, Origin, RuleSet};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::{
    API_VERSION, EnvVar, LEGACY_API_VERSION, OverrideSpec, TargetSpec, WhenSpec, Workflow,
    WorkloadRun,
};
use crate::build::{BuildParams, build_workflow};
use crate::contract::{self, enforce};
use crate::detect::{self, quote};
use crate::error::PolicyError;
use crate::nodes::{self, Node};
use crate::resolve::{
    AppliedOverride, OverrideContext, ResolveError, resolve_overrides, when_matches,
};

/// Name of the WorkloadRun platform override table.
pub const OVERRIDE_TABLE: &str = "workloadrun-platform-overrides";
/// The WorkloadRun default of `execution.timeoutPerJob` (the code's 24h, in Go's notation).
pub const DEFAULT_TIMEOUT_PER_JOB: &str = "24h0m0s";
/// Annotation with the architecture the render used.
pub const ANNOTATION_ARCH: &str = "nvcrectl.nvidia.com/detected-gpu-architecture";
/// Annotation with the platform the render used (only with a platform).
pub const ANNOTATION_PLATFORM: &str = "nvcrectl.nvidia.com/detected-platform";
/// Annotation listing the overrides applied (Workflow render).
pub const ANNOTATION_APPLIED: &str = "nvcrectl.nvidia.com/applied-overrides";

/// The node context of a render.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderRequest {
    /// `--platform`: resolve overrides for this platform and enforce the contract.
    pub platform: Option<String>,
    /// `--gpu-arch`, in any accepted spelling.
    pub gpu_arch: Option<String>,
    /// Use the unknown architecture ("") instead of failing when none can be determined
    /// (`check` does not need one for the construction checks).
    pub allow_unknown_arch: bool,
    /// The caller already ran the admission stage on this document (`check` does, to report
    /// every admission finding): skip it.
    pub admitted: bool,
    /// Report every failing post-override check (`check`) instead of the first (`render`).
    pub report_all: bool,
    /// `--nodes-file`: the cluster's nodes (a NodeList or Node documents). Platform and
    /// architecture are detected from the target nodes among them; exclusive with
    /// `platform` / `gpu_arch`.
    pub nodes: Option<std::sync::Arc<Vec<Node>>>,
}

/// The node context a render resolved: from flags (one synthetic node per job slot, made on
/// demand) or from the nodes given.
#[derive(Debug, Clone, Default)]
pub struct NodeContext {
    /// Platform ("" when unknown and no platform was forced).
    pub platform: String,
    /// GPU architecture ("" when unknown).
    pub gpu_architecture: String,
    /// The target nodes (given nodes after discovery, sorted by name); empty for flags.
    pub nodes: Vec<Node>,
    /// True when the context came from `--nodes-file`.
    pub from_nodes: bool,
    /// Notes for stderr (e.g. NIC detection).
    pub notes: Vec<String>,
}

/// The exact message for `--nodes-file` combined with `--platform` / `--gpu-arch`.
pub const NODES_FILE_EXCLUSIVE: &str =
    "--nodes-file and --platform/--gpu-arch are mutually exclusive";

/// Checks the flag combination and detects platform / architecture from the nodes
/// (render-pipeline.md §3; the first target node by name names the platform, the GPU
/// architecture is a majority vote).
///
/// # Errors
/// [`PolicyError::Usage`] for `--nodes-file` with `--platform`/`--gpu-arch`, for bad flag
/// values, and when the nodes hold no target node.
pub fn node_context(
    rules: &RuleSet,
    req: &RenderRequest,
    target: Option<&TargetSpec>,
) -> Result<NodeContext, PolicyError> {
    if req.nodes.is_some() && (req.platform.is_some() || req.gpu_arch.is_some()) {
        return Err(PolicyError::Usage(NODES_FILE_EXCLUSIVE.to_string()));
    }
    if let Some(p) = &req.platform {
        detect::check_platform(rules, p)?;
    }
    let flag_arch = req
        .gpu_arch
        .as_deref()
        .map(|a| detect::check_gpu_arch(rules, a))
        .transpose()?;
    let Some(all) = &req.nodes else {
        return Ok(NodeContext {
            platform: req.platform.clone().unwrap_or_default(),
            gpu_architecture: flag_arch.unwrap_or_default(),
            ..NodeContext::default()
        });
    };
    let discovery = nodes::discover_targets(all, target);
    let Some(first) = discovery.nodes.first() else {
        return Err(PolicyError::Placement(format!(
            "No target nodes found matching orchestration target ({} node(s) given; a target node matches spec.target, carries nvidia.com/gpu.present=true and is schedulable)",
            all.len()
        )));
    };
    let labels: Map<String, Value> = first
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let platform = detect::detect_platform(rules, &first.provider_id, &labels)?;
    let arch = nodes::detect_gpu_architecture(&discovery.nodes);
    let mut notes = Vec::new();
    if arch == nodes::UNKNOWN_ARCH {
        notes.push(format!(
            "no target node carries {}: the GPU architecture is unknown, so no architecture override applies and the per-node defaults of an unknown architecture are used (set spec.gpusPerNode)",
            nodes::GPU_PRODUCT_LABEL
        ));
    }
    if !discovery.cordoned.is_empty() {
        notes.push(format!(
            "cordoned GPU nodes left out: {}",
            discovery.cordoned.join(", ")
        ));
    }
    Ok(NodeContext {
        platform,
        gpu_architecture: arch,
        nodes: discovery.nodes,
        from_nodes: true,
        notes,
    })
}

/// `count` synthetic nodes for `--platform P --gpu-arch A`: `nvidia.com/gpu.present=true`, the
/// platform's providerID, labels and allocatable from the `platform-detection` table, and labels
/// that satisfy the target (nodeSelector values, the first value of each `In` requirement, a
/// value for each `Exists`), so they are targets.
///
/// They carry no `nvidia.com/gpu.product`: a synthesized product must not reach the required
/// node affinity (render-pipeline.md §7.4), where it would match no real node.
///
/// # Errors
/// A missing or malformed detection table.
pub fn synthetic_nodes(
    rules: &RuleSet,
    platform: &str,
    arch: &str,
    count: usize,
    target: Option<&TargetSpec>,
) -> Result<Vec<Node>, PolicyError> {
    let synthetic = detect::check_platform(rules, platform)?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("{platform}-{arch}-node-{i}");
        let mut labels: std::collections::BTreeMap<String, String> = Default::default();
        labels.insert(nodes::HOSTNAME_LABEL.into(), name.clone());
        if let Some(t) = target {
            for (k, v) in &t.node_selector {
                labels.insert(k.clone(), v.clone());
            }
            for req in &t.match_expressions {
                match (req.operator.as_str(), req.values.first()) {
                    ("In", Some(v)) => {
                        labels.insert(req.key.clone(), v.clone());
                    }
                    ("Exists", _) => {
                        labels.insert(req.key.clone(), "true".into());
                    }
                    _ => {}
                }
            }
        }
        for (k, v) in &synthetic.labels {
            labels.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
        labels.insert(nodes::GPU_PRESENT_LABEL.into(), "true".into());
        labels.remove(nodes::GPU_PRODUCT_LABEL);
        out.push(Node {
            name,
            labels,
            provider_id: synthetic.provider_id.clone(),
            allocatable: synthetic
                .allocatable
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect(),
            ..Node::default()
        });
    }
    Ok(out)
}

/// Name of the NIC detection table.
pub const NIC_TABLE: &str = "nic-detection";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NicRow {
    resources: Vec<String>,
}

/// NIC resource auto-detection (render-pipeline.md §1.2 step 4, ADR-075): where the
/// `nic-detection` table says so, exactly one candidate resource allocatable at ≥ `mlnx` on
/// every node → that name; otherwise nothing, with a note saying why.
///
/// # Errors
/// A malformed table row.
fn detect_nic_resource(
    rules: &RuleSet,
    ctx: &NodeContext,
    mlnx: i64,
) -> Result<(Option<String>, Option<String>), PolicyError> {
    let Some(table) = rules.table(NIC_TABLE).filter(|_| ctx.from_nodes) else {
        return Ok((None, None));
    };
    let params = json!({"platform": ctx.platform, "gpuArchitecture": ctx.gpu_architecture});
    let mut patterns = Vec::new();
    for (id, value) in table.render(&params)? {
        let row: NicRow = detect::decode_row(table, &id, value)?;
        patterns.extend(row.resources);
    }
    if patterns.is_empty() {
        return Ok((None, None));
    }
    let qualifies = |k: &str| {
        patterns.iter().any(|p| {
            if p.ends_with('/') {
                k.starts_with(p.as_str())
            } else {
                k == p
            }
        })
    };
    let candidates: std::collections::BTreeSet<&String> = ctx
        .nodes
        .iter()
        .flat_map(|n| n.allocatable.keys())
        .filter(|k| qualifies(k))
        .collect();
    let eligible: Vec<&String> = candidates
        .into_iter()
        .filter(|c| {
            ctx.nodes.iter().all(|n| {
                n.allocatable
                    .get(*c)
                    .and_then(|v| crate::placement::quantity_as_int(v))
                    .is_some_and(|have| have >= mlnx)
            })
        })
        .collect();
    let described = patterns
        .iter()
        .map(|p| {
            if p.ends_with('/') {
                format!("{p}*")
            } else {
                p.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" or ");
    Ok(match eligible.as_slice() {
        [one] => (Some((*one).clone()), None),
        [] => (
            None,
            Some(format!(
                "NICResourceDetection: no {described} resource is allocatable at {mlnx} on every target node; no NIC resource is requested (set spec.nicResourceName)"
            )),
        ),
        many => (
            None,
            Some(format!(
                "NICResourceDetection: several NIC resources are allocatable on every target node ({}); no NIC resource is requested (set spec.nicResourceName)",
                many.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
    })
}

/// A rendered Workflow and what the render decided.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The Workflow document.
    pub workflow: Value,
    /// Notes for stderr (legacy API group, warnings from rules).
    pub warnings: Vec<String>,
    /// Overrides applied (empty without a platform).
    pub applied: Vec<AppliedOverride>,
    /// The platform used ("" without one).
    pub platform: String,
    /// The GPU architecture used.
    pub gpu_architecture: String,
    /// The target nodes from `--nodes-file` (empty for flags).
    pub nodes: Vec<Node>,
}

/// One row of the platform override table, with the WorkloadRun-only keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlatformOverride {
    #[serde(default)]
    when: WhenSpec,
    #[serde(default)]
    pre_command: Vec<String>,
    #[serde(default)]
    mpi_args: Vec<String>,
    #[serde(default)]
    job_template: Option<Value>,
    #[serde(default)]
    job_template_patch: Option<Value>,
    #[serde(default)]
    dependencies: Option<Vec<Value>>,
    #[serde(default)]
    orchestration: Option<Map<String, Value>>,
}

impl PlatformOverride {
    fn spec(&self) -> OverrideSpec {
        OverrideSpec {
            when: self.when.clone(),
            job_template: self.job_template.clone(),
            job_template_patch: self.job_template_patch.clone(),
            dependencies: self.dependencies.clone(),
            orchestration: self.orchestration.clone(),
        }
    }
}

/// Reads a document as `T`, reporting the field path and line:column of the first problem.
///
/// # Errors
/// [`PolicyError::Input`] with `parsing <what>: <path>: <serde message>`.
pub fn parse_typed<T: for<'de> Deserialize<'de>>(
    doc: &Document,
    what: &str,
) -> Result<T, PolicyError> {
    serde_path_to_error::deserialize(&doc.value).map_err(|e| {
        let path = e.path().to_string();
        let pos = FieldPath::parse(&path)
            .ok()
            .and_then(|p| doc.spans.lookup_key(&p));
        PolicyError::Input {
            file: doc.source.name.clone(),
            pos,
            message: format!(
                "parsing {what}: {path}: {}",
                plain_serde_message(&e.inner().to_string())
            ),
        }
    })
}

/// serde's type names in the words a manifest author uses (`i64` → an integer, `a sequence` →
/// a list, `struct X` → a mapping).
fn plain_serde_message(m: &str) -> String {
    let mut out = m.to_string();
    for (from, to) in [
        ("expected i64", "expected an integer"),
        ("expected i32", "expected an integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected a sequence", "expected a list"),
        ("invalid type: sequence", "invalid type: list"),
        ("invalid type: map", "invalid type: mapping"),
    ] {
        out = out.replace(from, to);
    }
    if let Some(i) = out.find("expected struct ") {
        let name: String = out[i + 16..]
            .chars()
            .take_while(|c| c.is_alphanumeric())
            .collect();
        out = format!(
            "{}expected a mapping ({name}){}",
            &out[..i],
            &out[i + 16 + name.len()..]
        );
    }
    out
}

/// Normalises the API group: the legacy `cre.nvidia.com` is accepted with a warning.
pub(crate) fn normalize_api_version(value: &mut Value, warnings: &mut Vec<String>, file: &str) {
    if value.get("apiVersion").and_then(Value::as_str) == Some(LEGACY_API_VERSION) {
        warnings.push(format!(
            "{file}: apiVersion {LEGACY_API_VERSION} is the older API group; treating it as {API_VERSION}"
        ));
        if let Some(m) = value.as_object_mut() {
            m.insert("apiVersion".into(), json!(API_VERSION));
        }
    }
}

fn origin(doc: &Document) -> Origin<'_> {
    Origin {
        file: &doc.source.name,
        document: doc.index,
        spans: Some(&doc.spans),
    }
}

/// An input error about the field at `path` (field-path notation) of `doc`, at its line.
pub(crate) fn input_error(doc: &Document, path: &str, message: String) -> PolicyError {
    PolicyError::Input {
        file: doc.source.name.clone(),
        pos: FieldPath::parse(path)
            .ok()
            .and_then(|p| doc.spans.lookup(&p)),
        message,
    }
}

/// A build error as an input error at the field it is about.
fn build_error(doc: &Document, e: &crate::build::BuildError) -> PolicyError {
    use crate::build::BuildError;
    let path = match e {
        BuildError::NoFramework { .. } => "spec.framework",
        BuildError::UnknownThresholdKeys { .. } => "spec.thresholds",
        BuildError::InvalidTimeoutPerJob { .. } => "spec.orchestration.timeoutPerJob",
    };
    input_error(doc, path, e.to_string())
}

/// Refuses user overrides that can never apply: a `when.expression` that does not compile, a
/// `jobTemplatePatch` that is not a JSON Patch. Reported at their line, before any platform is
/// known (so `check` and `render` without `--platform` catch them too).
///
/// # Errors
/// [`PolicyError::Input`] naming `spec.overrides[i]…`.
pub fn check_user_overrides(doc: &Document, overrides: &[OverrideSpec]) -> Result<(), PolicyError> {
    for (i, o) in overrides.iter().enumerate() {
        let fail = |field: &str, message: String| {
            let path = format!("spec.overrides[{i}].{field}");
            input_error(doc, &path, format!("{path}: {message}"))
        };
        if let Some(e) = &o.when.expression {
            let expr = nvcre_engine::Expr::compile(e)
                .map_err(|m| fail("when.expression", format!("CEL does not compile: {m}")))?;
            // Must type-check to bool (render-pipeline.md §1.4): try it on an empty context.
            let mut scope = nvcre_engine::Scope::new();
            for (k, v) in [
                ("platform", json!("")),
                ("gpuArchitecture", json!("")),
                ("workloadKind", json!("")),
                ("topologyMode", json!("")),
                ("domainCount", json!(0)),
            ] {
                scope.bind(k, &v);
            }
            if let Ok(v) = expr.eval(&scope) {
                if !matches!(v, nvcre_engine::CelValue::Bool(_)) {
                    return Err(fail(
                        "when.expression",
                        format!(
                            "must evaluate to a bool, got {}",
                            nvcre_engine::cel_type_name(&v)
                        ),
                    ));
                }
            }
        }
        if o.job_template.as_ref().is_some_and(|v| !v.is_object()) {
            return Err(fail(
                "jobTemplate",
                "must be a mapping (a JobTemplateSpec patch)".into(),
            ));
        }
        for (j, d) in o.dependencies.iter().flatten().enumerate() {
            let named = d.get("apiVersion").and_then(Value::as_str).is_some()
                && d.get("kind").and_then(Value::as_str).is_some()
                && d.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_some();
            if !named {
                return Err(fail(
                    &format!("dependencies[{j}]"),
                    "must be a Kubernetes object with apiVersion, kind and metadata.name".into(),
                ));
            }
        }
        if let Some(p) = &o.job_template_patch {
            nvcre_engine::patch::parse_json_patch(p)
                .map_err(|m| fail("jobTemplatePatch", m.to_string()))?;
        }
    }
    Ok(())
}

/// Gives post-override findings a line in the source when the field they name was written
/// there: in the document itself, in one of its `spec.overrides[i].jobTemplate` (the last
/// override that writes it), or, for a WorkloadRun, at `spec.workloadMetadata`.
fn locate_findings(e: PolicyError, doc: &Document, overrides: usize) -> PolicyError {
    let PolicyError::Rejected(mut findings) = e else {
        return e;
    };
    for f in &mut findings {
        if f.line.is_some() {
            continue;
        }
        let Some(path) = f.field_path.clone() else {
            continue;
        };
        let mut candidates = vec![path.clone()];
        if let Some(rest) = path.strip_prefix("spec.jobTemplate.") {
            for i in (0..overrides).rev() {
                candidates.push(format!("spec.overrides[{i}].jobTemplate.{rest}"));
            }
        }
        if let Some(rest) = path.strip_prefix("spec.jobTemplate.spec.workloadMetadata.") {
            candidates.push(format!("spec.workloadMetadata.{rest}"));
        }
        let found = candidates.iter().find_map(|c| {
            let p = FieldPath::parse(c).ok()?;
            if doc.spans.contains(&p) {
                doc.spans.lookup(&p)
            } else {
                None
            }
        });
        if let Some(pos) = found {
            f.line = Some(pos.line);
            f.column = Some(pos.column);
        }
    }
    PolicyError::Rejected(findings)
}

fn report_mode(req: &RenderRequest) -> contract::Report {
    if req.report_all {
        contract::Report::All
    } else {
        contract::Report::First
    }
}

/// Checks the node-context flags alone (before any file is read): `--platform` and `--gpu-arch`
/// values, and `--nodes-file` exclusivity.
///
/// # Errors
/// [`PolicyError::Usage`] with the exact messages of workloadrun-api.md §6 "CLI".
pub fn check_flags(rules: &RuleSet, req: &RenderRequest) -> Result<(), PolicyError> {
    if req.nodes.is_some() && (req.platform.is_some() || req.gpu_arch.is_some()) {
        return Err(PolicyError::Usage(NODES_FILE_EXCLUSIVE.to_string()));
    }
    node_context(
        rules,
        &RenderRequest {
            nodes: None,
            ..req.clone()
        },
        None,
    )
    .map(|_| ())
}

/// Readies a manifest for the rules: a missing `kind` is taken as `expected`; a missing
/// `apiVersion` as `nvcre.nvidia.com/v1alpha1`; the older `cre.nvidia.com` group is accepted
/// with a note; `null` fields are dropped (the API server treats them as absent). Spans stay
/// valid: only nulls are removed.
///
/// # Errors
/// [`PolicyError::Input`] for another kind or API group, at its line.
pub fn prepare_document(
    doc: &Document,
    expected: &str,
) -> Result<(Document, Vec<String>), PolicyError> {
    let mut doc = doc.clone();
    let mut notes = Vec::new();
    if !doc.value.is_object() {
        return Err(input_error(
            &doc,
            "",
            format!(
                "document {} is a {}, not a {expected} manifest (a mapping)",
                doc.index + 1,
                nvcre_engine::json_type_name(&doc.value)
            ),
        ));
    }
    if doc.value.get("kind").is_none() && doc.value.get("apiVersion").is_none() {
        return Err(input_error(
            &doc,
            "",
            format!(
                "document {} has neither apiVersion nor kind: not a {expected} manifest",
                doc.index + 1
            ),
        ));
    }
    match doc.value.get("kind") {
        None | Some(Value::Null) => {}
        Some(Value::String(k)) if k == expected => {}
        Some(other) => {
            let kind = other
                .as_str()
                .map(quote)
                .unwrap_or_else(|| other.to_string());
            return Err(input_error(
                &doc,
                "kind",
                format!("expected kind {expected}, got {kind}"),
            ));
        }
    }
    match doc.value.get("apiVersion").and_then(Value::as_str) {
        None | Some(API_VERSION) | Some(LEGACY_API_VERSION) => {}
        Some(other) => {
            return Err(input_error(
                &doc,
                "apiVersion",
                format!(
                    "expected apiVersion {API_VERSION} (or the older {LEGACY_API_VERSION}), got {}",
                    quote(other)
                ),
            ));
        }
    }
    normalize_api_version(&mut doc.value, &mut notes, &doc.source.name);
    nvcre_engine::patch::strip_nulls(&mut doc.value);
    if let Some(m) = doc.value.as_object_mut() {
        m.entry("apiVersion").or_insert_with(|| json!(API_VERSION));
        m.entry("kind").or_insert_with(|| json!(expected));
    }
    Ok((doc, notes))
}

/// Replaces, in place, every env entry and `-x` operand of the platform overrides whose name the
/// user set in `spec.env` (render-pipeline.md §4.3). Names only the user set are not added.
fn apply_user_env(o: &mut PlatformOverride, user: &[EnvVar]) {
    if user.is_empty() {
        return;
    }
    let find = |name: &str| user.iter().rev().find(|e| e.name == name);
    fn replace_env_lists(v: &mut Value, find: &dyn Fn(&str) -> Option<Value>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == "env" {
                        if let Value::Array(items) = child {
                            for item in items.iter_mut() {
                                let name =
                                    item.get("name").and_then(Value::as_str).map(str::to_string);
                                if let Some(user) = name.and_then(|n| find(&n)) {
                                    *item = user;
                                }
                            }
                            continue;
                        }
                    }
                    replace_env_lists(child, find);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| replace_env_lists(i, find)),
            _ => {}
        }
    }
    let as_value = |name: &str| find(name).and_then(|e| serde_json::to_value(e).ok());
    if let Some(jt) = o.job_template.as_mut() {
        replace_env_lists(jt, &as_value);
    }
    for dep in o.dependencies.iter_mut().flatten() {
        replace_env_lists(dep, &as_value);
    }
    let mut i = 0;
    while i + 1 < o.mpi_args.len() {
        if o.mpi_args.get(i).map(String::as_str) == Some("-x") {
            let name = o
                .mpi_args
                .get(i + 1)
                .map(|a| a.split('=').next().unwrap_or("").to_string())
                .unwrap_or_default();
            if let (Some(user), Some(slot)) = (find(&name), o.mpi_args.get_mut(i + 1)) {
                *slot = match (&user.value_from, &user.value) {
                    (Some(_), _) => user.name.clone(),
                    (None, v) => format!("{}={}", user.name, v.clone().unwrap_or_default()),
                };
            }
            i += 2;
        } else {
            i += 1;
        }
    }
}

/// Renders a WorkloadRun document into its Workflow.
///
/// # Errors
/// [`PolicyError::Rejected`] with findings for admission failures, label composition errors and
/// post-override contract failures; [`PolicyError::Usage`] for bad flags or an undeterminable
/// architecture; [`PolicyError::Input`] for a document that is not a WorkloadRun;
/// [`PolicyError::Build`] for build errors (exec nil, thresholds, timeoutPerJob).
pub fn render_workload_run(
    rules: &RuleSet,
    doc: &Document,
    req: &RenderRequest,
) -> Result<Rendered, PolicyError> {
    let mut warnings = Vec::new();
    // Flags are checked before the file is used (as nvcrectl does).
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

    let (doc, notes) = prepare_document(doc, "WorkloadRun")?;
    warnings.extend(notes);
    // Type errors (a string where a number belongs) are input errors with their line, found
    // before any rule reads the document.
    let _: WorkloadRun = parse_typed(&doc, "WorkloadRun")?;
    if !req.admitted {
        let admission = contract::run_stage(
            rules,
            contract::ADMISSION,
            &doc.value,
            origin(&doc),
            &Value::Null,
        )?;
        let errors = admission.errors();
        if !errors.is_empty() {
            return Err(PolicyError::Rejected(errors));
        }
        warnings.extend(
            admission
                .findings
                .iter()
                .map(|f| format!("warning: {}", f.message)),
        );
    }
    let run: WorkloadRun = parse_typed(&doc, "WorkloadRun")?;
    let name = run.metadata.name.clone();
    check_user_overrides(&doc, &run.spec.overrides)?;

    let ctx = node_context(rules, req, run.spec.target.as_ref())?;
    warnings.extend(ctx.notes.iter().cloned());
    let platform = ctx.platform.clone();
    let arch = match (ctx.from_nodes, req.gpu_arch.is_some()) {
        (true, _) | (false, true) => ctx.gpu_architecture.clone(),
        (false, false) => {
            let product = run
                .spec
                .target
                .as_ref()
                .and_then(|t| t.node_selector.get("nvidia.com/gpu.product"))
                .cloned()
                .unwrap_or_default();
            if product.is_empty() && !req.allow_unknown_arch {
                return Err(PolicyError::Usage(
                    "cannot determine GPU architecture: nvidia.com/gpu.product label required in target.nodeSelector"
                        .into(),
                ));
            }
            detect::normalize_gpu_arch(&product)
        }
    };
    let defaults = detect::node_defaults(rules, &arch, &platform)?;
    let gpus_per_node = run.spec.gpus_per_node.unwrap_or(defaults.gpus_per_node);
    let mlnx_per_node = run.spec.mlnx_per_node.unwrap_or(defaults.mlnx_per_node);
    let enable_mnnvl = run.spec.enable_mnnvl.unwrap_or(defaults.enable_mnnvl);
    let intra_node = run
        .spec
        .orchestration
        .as_ref()
        .and_then(|o| o.test_scale.as_deref())
        == Some("intra-node");
    let nodes_per_job = if intra_node { 1 } else { run.spec.num_nodes };

    let (detected_nic, nic_note) = detect_nic_resource(rules, &ctx, mlnx_per_node)?;
    warnings.extend(nic_note);
    let nic_resource_name = run
        .spec
        .nic_resource_name
        .clone()
        .or(detected_nic)
        .unwrap_or_default();
    let framework = run.spec.framework.kind();
    let table = rules
        .table(OVERRIDE_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(OVERRIDE_TABLE.to_string()))?;
    let params = json!({
        "entryName": name,
        "nodesPerJob": nodes_per_job,
        "gpusPerNode": gpus_per_node,
        "mlnxPerNode": mlnx_per_node,
        "nicResourceName": nic_resource_name,
        "enableMNNVL": enable_mnnvl,
        "frameworkType": framework.as_str(),
        "strictDomain": run.spec.orchestration.as_ref().and_then(|o| o.test_scale.as_deref()) == Some("intra-rack"),
    });
    let mut platform_overrides = Vec::new();
    for (id, value) in table.render(&params)? {
        let mut o: PlatformOverride = detect::decode_row(table, &id, value)?;
        apply_user_env(&mut o, &run.spec.env);
        platform_overrides.push(o);
    }

    // Build-time passes (§1.2 steps 14–17): context = platform + architecture only.
    let build_ctx = OverrideContext::build_time(&platform, &arch);
    let mut platform_mpi_args: Vec<String> = Vec::new();
    let mut pre_command = Vec::new();
    for o in &platform_overrides {
        let matched = when_matches(&o.when, &build_ctx)
            .map_err(|m| PolicyError::Build(format!("applying overrides: {m}")))?;
        if !matched {
            continue;
        }
        if !o.mpi_args.is_empty() && framework == crate::api::FrameworkType::Mpi {
            // Each match prepends: a later match lands before an earlier one.
            let mut next = o.mpi_args.clone();
            next.extend(platform_mpi_args);
            platform_mpi_args = next;
        }
        pre_command.extend(o.pre_command.iter().cloned());
    }

    let build_params = BuildParams {
        gpus_per_node,
        base_env: detect::base_nccl_env(rules, enable_mnnvl)?,
        platform_mpi_args,
        pre_command,
        default_timeout_per_job: DEFAULT_TIMEOUT_PER_JOB.to_string(),
    };
    let mut workflow = build_workflow(&run, &build_params).map_err(|e| build_error(&doc, &e))?;
    workflow.spec.overrides = platform_overrides
        .iter()
        .map(PlatformOverride::spec)
        .collect();
    workflow
        .spec
        .overrides
        .extend(run.spec.overrides.iter().cloned());

    // Construction-time label composition, reported at the WorkloadRun's own field paths.
    let value = serde_json::to_value(&workflow).map_err(|e| PolicyError::Build(e.to_string()))?;
    let composed = enforce(
        rules,
        &[contract::WORKLOAD_LABELS],
        &value,
        origin(&doc),
        &json!({"labelsPath": "spec.workloadMetadata.labels"}),
        report_mode(req),
    )?;
    let mut workflow: Workflow =
        serde_json::from_value(composed.value).map_err(|e| PolicyError::Build(e.to_string()))?;

    let mut applied = Vec::new();
    if !platform.is_empty() {
        let user_offset = platform_overrides.len();
        let post_warnings;
        (workflow, applied, post_warnings) = resolve_and_enforce(
            rules,
            workflow,
            &platform,
            &arch,
            &ctx.nodes,
            &doc,
            user_offset,
            report_mode(req),
        )
        .map_err(|e| locate_findings(e, &doc, run.spec.overrides.len()))?;
        warnings.extend(post_warnings);
        workflow
            .metadata
            .annotations
            .insert(ANNOTATION_PLATFORM.into(), platform.clone());
    }
    workflow
        .metadata
        .annotations
        .insert(ANNOTATION_ARCH.into(), arch.clone());
    let workflow =
        serde_json::to_value(&workflow).map_err(|e| PolicyError::Build(e.to_string()))?;
    Ok(Rendered {
        workflow,
        warnings,
        applied,
        platform,
        gpu_architecture: arch,
        nodes: ctx.nodes,
    })
}

/// Distinct non-empty values of `orchestration.topology.topologyKey` among `nodes`.
fn domain_count(workflow: &Workflow, nodes: &[Node]) -> i64 {
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

/// Renders a Workflow document for a platform (the original's `workflow render`): overrides
/// resolved, placement and resolved-job-template checks (errors prefixed
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
    let (doc, warnings) = prepare_document(doc, "Workflow")?;
    let workflow: Workflow = parse_typed(&doc, "Workflow")?;
    check_user_overrides(&doc, &workflow.spec.overrides)?;
    let target: Option<TargetSpec> = workflow
        .spec
        .orchestration
        .get("target")
        .and_then(|t| serde_json::from_value(t.clone()).ok());
    let ctx = node_context(rules, req, target.as_ref())?;
    let (platform, arch) = if ctx.from_nodes {
        (
            if ctx.platform.is_empty() {
                "onprem".to_string()
            } else {
                ctx.platform.clone()
            },
            ctx.gpu_architecture.clone(),
        )
    } else {
        match (&req.platform, &req.gpu_arch) {
            (Some(_), Some(_)) => (ctx.platform.clone(), ctx.gpu_architecture.clone()),
            _ => return Err(workflow_context_error(rules)?),
        }
    };
    let workflow_overrides = workflow.spec.overrides.len();
    let (mut workflow, applied, post_warnings) = resolve_and_enforce(
        rules,
        workflow,
        &platform,
        &arch,
        &ctx.nodes,
        &doc,
        0,
        report_mode(req),
    )
    .map_err(|e| locate_findings(prefix_resolved(e), &doc, workflow_overrides))?;
    let mut warnings = warnings;
    warnings.extend(post_warnings);
    warnings.extend(build_time_rows_note(rules, &workflow, &platform, &arch)?);
    let ann = &mut workflow.metadata.annotations;
    ann.insert(ANNOTATION_PLATFORM.into(), platform.clone());
    ann.insert(ANNOTATION_ARCH.into(), arch.clone());
    ann.insert(
        ANNOTATION_APPLIED.into(),
        serde_json::to_string(&applied).unwrap_or_default(),
    );
    Ok(Rendered {
        workflow: serde_json::to_value(&workflow).map_err(|e| PolicyError::Build(e.to_string()))?,
        warnings,
        applied,
        platform,
        gpu_architecture: arch,
        nodes: ctx.nodes,
    })
}

/// Resolves every matching override for the node context, clears `spec.overrides`, and enforces
/// the post-override stages (placement, workload labels, gang contract) on the result.
///
/// # Errors
/// [`PolicyError::Resolve`] for a failing override; [`PolicyError::Rejected`] for a failed check.
#[allow(clippy::too_many_arguments)] // one call site each for the WorkloadRun and Workflow paths
fn resolve_and_enforce(
    rules: &RuleSet,
    mut workflow: Workflow,
    platform: &str,
    arch: &str,
    nodes: &[Node],
    doc: &Document,
    user_offset: usize,
    report: contract::Report,
) -> Result<(Workflow, Vec<AppliedOverride>, Vec<String>), PolicyError> {
    let domains = domain_count(&workflow, nodes);
    let octx = OverrideContext::for_workflow(&workflow, platform, arch, domains);
    let applied = resolve_overrides(&mut workflow, &octx).map_err(|e| {
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
        &value,
        Origin {
            file: &doc.source.name,
            document: doc.index,
            spans: None,
        },
        &Value::Null,
        report,
    )?;
    let workflow =
        serde_json::from_value(checked.value).map_err(|e| PolicyError::Build(e.to_string()))?;
    let warnings = checked
        .findings
        .iter()
        .filter(|f| f.severity != nvcre_engine::Severity::Error)
        .map(|f| format!("{} [{}]", f.message, f.rule_id))
        .collect();
    Ok((workflow, applied, warnings))
}

/// The platform rows whose `preCommand` / `mpiArgs` apply only when a WorkloadRun is built for
/// a known platform (render-pipeline.md §1.2 steps 15–17, §9): a Workflow rendered without a
/// platform cannot carry them, and resolving it later does not add them. Says so, naming them.
fn build_time_rows_note(
    rules: &RuleSet,
    workflow: &Workflow,
    platform: &str,
    arch: &str,
) -> Result<Option<String>, PolicyError> {
    let trainer = workflow
        .spec
        .job_template
        .pointer("/spec/workload/trainJob/trainer");
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
    let params = json!({
        "entryName": workflow.metadata.name,
        "nodesPerJob": 1,
        "gpusPerNode": 0,
        "mlnxPerNode": 0,
        "nicResourceName": "",
        "enableMNNVL": false,
        "frameworkType": if mpi { "mpi" } else { "torch" },
        "strictDomain": false,
    });
    let ctx = OverrideContext::build_time(platform, arch);
    let mut rows = Vec::new();
    for (id, value) in table.render(&params)? {
        let row: PlatformOverride = detect::decode_row(table, &id, value)?;
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

/// Adds the `validate resolved job template: ` prefix of the Workflow render path.
fn prefix_resolved(e: PolicyError) -> PolicyError {
    match e {
        PolicyError::Rejected(mut findings) => {
            for f in &mut findings {
                f.message = format!("validate resolved job template: {}", f.message);
            }
            PolicyError::Rejected(findings)
        }
        other => other,
    }
}

/// `specify --nodes-file <path> or --platform + --gpu-arch` plus the synthetic contexts.
fn workflow_context_error(rules: &RuleSet) -> Result<PolicyError, PolicyError> {
    let mut available = Vec::new();
    for (p, _) in detect::selectable_platforms(rules)? {
        for a in ["gb200", "gb300", "h100"] {
            available.push(format!("{p}-{a}"));
        }
    }
    Ok(PolicyError::Usage(format!(
        "specify --nodes-file <path> or --platform + --gpu-arch\navailable: {}",
        available.join(", ")
    )))
}

/// Every child manifest of every group, ready for `kubectl apply -f -`, and one summary line
/// per group.
#[derive(Debug, Clone, Default)]
pub struct Expanded {
    /// Workflow-scoped dependencies first, then per group its dependency copies and TrainJob.
    pub manifests: Vec<Value>,
    /// `group-0: 2 node(s) [n1, n2]; domains [d]` lines.
    pub summary: Vec<String>,
}

/// Partitions the target nodes into groups and emits each group's TrainJob and dependencies
/// (render-pipeline.md §1.3 steps 5–9, §7), checking the gang contract again on every group's
/// working copy before it is emitted.
///
/// Nodes come from `--nodes-file`; with only `--platform`/`--gpu-arch`, `numNodes` synthetic
/// nodes stand in (one group).
///
/// # Errors
/// [`PolicyError::Placement`] with NVCRE's message (shortfall, capacity);
/// [`PolicyError::Rejected`] when a group's working copy breaks the contract;
/// [`PolicyError::Usage`] without any node context.
pub fn expand(rules: &RuleSet, rendered: &Rendered) -> Result<Expanded, PolicyError> {
    expand_verifying(rules, rendered, Verify::EveryGroup)
}

/// Which groups [`expand_verifying`] runs the contract and manifest checks on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Every group (what `render --expand` emits is checked object by object).
    EveryGroup,
    /// The first and the last group: the groups differ only in names and nodes, and the last
    /// has the longest names (`check --nodes-file` on many documents).
    FirstAndLast,
}

/// [`expand`], choosing how many groups are re-checked.
///
/// # Errors
/// As [`expand`].
pub fn expand_verifying(
    rules: &RuleSet,
    rendered: &Rendered,
    verify: Verify,
) -> Result<Expanded, PolicyError> {
    let workflow: Workflow = serde_json::from_value(rendered.workflow.clone())
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let synthetic = rendered.nodes.is_empty();
    let nodes = if synthetic {
        if rendered.platform.is_empty() {
            return Err(PolicyError::Usage(
                "--expand needs nodes: give --nodes-file, or --platform and --gpu-arch".into(),
            ));
        }
        let count = workflow
            .spec
            .job_template
            .pointer("/spec/workload/trainJob/trainer/numNodes")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(1);
        let target: Option<TargetSpec> = workflow
            .spec
            .orchestration
            .get("target")
            .and_then(|t| serde_json::from_value(t.clone()).ok());
        let mut nodes = synthetic_nodes(
            rules,
            &rendered.platform,
            &rendered.gpu_architecture,
            usize::try_from(count).unwrap_or(1),
            target.as_ref(),
        )?;
        // One synthetic topology domain, so a platform's topology key can partition them.
        if let Some(key) = workflow
            .spec
            .orchestration
            .get("topology")
            .and_then(|t| t.get("topologyKey"))
            .and_then(Value::as_str)
        {
            for n in &mut nodes {
                n.labels
                    .insert(key.to_string(), "synthetic-domain-0".to_string());
            }
        }
        nodes
    } else {
        rendered.nodes.clone()
    };
    let topology = workflow.spec.orchestration.get("topology");
    let strict = topology
        .and_then(|t| t.get("strictDomain"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let key = topology
        .and_then(|t| t.get("topologyKey"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if strict && key.is_empty() {
        return Err(PolicyError::Placement(
            "orchestration.topology.strictDomain needs orchestration.topology.topologyKey to find the domains, and no platform row supplies one here; add it with spec.overrides[].orchestration.topology".into(),
        ));
    }
    let placement = crate::placement::place(&workflow, &nodes)
        .map_err(|e| PolicyError::Placement(e.to_string()))?;
    let mut out = Expanded {
        manifests: placement.workflow_dependencies.clone(),
        summary: Vec::new(),
    };
    for m in &placement.workflow_dependencies {
        check_manifest(rules, m, &workflow.metadata.name)?;
    }
    if synthetic {
        out.summary.push(format!(
            "note: {} synthetic {}/{} node(s) stand in for the fleet; their hostnames are placeholders (give --nodes-file to place on real nodes)",
            nodes.len(),
            rendered.platform,
            rendered.gpu_architecture
        ));
    }
    for (node, reason) in &placement.excluded {
        out.summary.push(format!("note: excluded {node}: {reason}"));
    }
    let last = placement.groups.len().saturating_sub(1);
    for (i, group) in placement.groups.iter().enumerate() {
        if verify == Verify::EveryGroup || i == 0 || i == last {
            check_group(rules, &workflow, &placement.workflow_dependencies, group)?;
            for m in &group.manifests {
                check_manifest(rules, m, &group.name)?;
            }
        }
        out.manifests.extend(group.manifests.iter().cloned());
        let nodes = if group.nodes.is_empty() {
            "unpinned".to_string()
        } else {
            format!("{} node(s) [{}]", group.nodes.len(), group.nodes.join(", "))
        };
        let domains = if group.domains.is_empty() {
            String::new()
        } else {
            format!("; domains [{}]", group.domains.join(", "))
        };
        let overflow = if group.overflow { " (overflow)" } else { "" };
        out.summary
            .push(format!("{}: {nodes}{domains}{overflow}", group.name));
    }
    Ok(out)
}

/// The `manifests` stage on one emitted object.
fn check_manifest(rules: &RuleSet, manifest: &Value, group: &str) -> Result<(), PolicyError> {
    let out = contract::run_stage(
        rules,
        contract::MANIFESTS,
        manifest,
        Origin {
            file: group,
            document: 0,
            spans: None,
        },
        &Value::Null,
    )?;
    let errors = out.errors();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(PolicyError::Rejected(errors))
    }
}

/// The post-override contract on one group's working copy: the Workflow with the group's
/// TrainJob spec and renamed dependencies.
fn check_group(
    rules: &RuleSet,
    workflow: &Workflow,
    workflow_deps: &[Value],
    group: &crate::placement::Group,
) -> Result<(), PolicyError> {
    let mut copy = workflow.clone();
    let mut deps = workflow_deps.to_vec();
    for m in &group.manifests {
        if m.get("kind").and_then(Value::as_str) == Some("TrainJob") {
            if let (Some(spec), Some(slot)) = (
                m.get("spec"),
                copy.spec
                    .job_template
                    .pointer_mut("/spec/workload/trainJob"),
            ) {
                *slot = spec.clone();
            }
        } else {
            deps.push(m.clone());
        }
    }
    copy.spec.dependencies = deps;
    let value = serde_json::to_value(&copy).map_err(|e| PolicyError::Build(e.to_string()))?;
    let name = format!("{} {}", workflow.metadata.name, group.name);
    enforce(
        rules,
        &[contract::WORKLOAD_LABELS, contract::GANG_CONTRACT],
        &value,
        Origin {
            file: &name,
            document: 0,
            spans: None,
        },
        &Value::Null,
        contract::Report::First,
    )?;
    Ok(())
}
