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
use super::parse::{Merged, input_error, locate_each, locate_findings};

/// Runs `stages` ([`enforce`]) over a Workflow's JSON as [`Workflow::into_json`] wrote it and
/// hands the result back as [`Workflow::from_json`] then [`Workflow::into_json`] would give it:
/// as it is when every write landed below a `spec.jobTemplate` that was a mapping before the
/// stages (the typed Workflow keeps that part as JSON, so reading and writing it again would
/// change nothing; a null there, which a write below replaces, is read back to be sure), read
/// and written again otherwise (a write elsewhere takes its typed place and order, or does not
/// read as a Workflow at all). Also the findings below error.
///
/// # Errors
/// As [`enforce`]; [`PolicyError::Build`] when the written document is no Workflow.
pub(super) fn enforce_workflow(
    rules: &RuleSet,
    stages: &[&str],
    workflow: Value,
    origin: Origin<'_>,
    params: &Value,
    report: contract::Report,
) -> Result<(Value, Vec<nvcre_engine::Finding>), PolicyError> {
    let template_was_there = workflow
        .get("spec")
        .and_then(|s| s.get("jobTemplate"))
        .is_some_and(Value::is_object);
    // Handed over, so a rule that writes writes into it instead of a copy.
    let out = enforce(rules, stages, Cow::Owned(workflow), origin, params, report)?;
    let written = &out.written;
    let value = out.value.into_owned();
    if written.is_nothing() || (template_was_there && written.only_below(&["spec", "jobTemplate"]))
    {
        return Ok((value, out.findings));
    }
    let value = Workflow::from_json(value)
        .and_then(Workflow::into_json)
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    Ok((value, out.findings))
}

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
/// Workflow's JSON (see [`enforce_workflow`]), the overrides applied and the findings below error
/// (warnings, info). Findings, a rejection's included, are located in `doc` (see
/// [`locate_findings`]).
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
) -> Result<(Value, Vec<AppliedOverride>, Vec<nvcre_engine::Finding>), PolicyError> {
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
                // Numbered as the user wrote them, not after the platform rows.
                let own = match e {
                    ResolveError::When { message, .. } => ResolveError::When { index: k, message },
                    ResolveError::Patch { message, .. } => {
                        ResolveError::Patch { index: k, message }
                    }
                };
                let path = format!("spec.overrides[{k}]");
                input_error(doc, &path, format!("applying overrides: {own} ({path})"))
            }
            None => PolicyError::Resolve(e),
        }
    })?;
    workflow.spec.overrides.clear();
    // The user's overrides (numbered as written) that applied and changed something: the ones
    // a finding's field can have come from.
    let user_applied: Vec<usize> = applied
        .iter()
        .filter(|a| !a.no_op)
        .filter_map(|a| a.index.checked_sub(user_offset))
        .collect();
    let value = workflow
        .into_json()
        .map_err(|e| PolicyError::Build(e.to_string()))?;
    let origin = Origin {
        file: &doc.source.name,
        document: doc.index,
        spans: None,
    };
    // The Workflow the user's overrides made is held to the Workflow admission rules, as the
    // API server holds what is submitted: an override can write what the input's own fields
    // could not hold (an unknown placement, zero iterations, a timeout that is no duration).
    // Its errors only: the stage's warnings are the input's, reported once already.
    if !user_applied.is_empty() {
        let admitted = contract::run_stage(
            rules,
            contract::ADMISSION,
            Cow::Borrowed(&value),
            origin,
            &Value::Null,
        )?;
        if admitted.rejects() {
            let errors: Vec<_> = admitted
                .findings
                .into_iter()
                .filter(|f| f.severity == nvcre_engine::Severity::Error)
                .take(if report == contract::Report::First {
                    1
                } else {
                    usize::MAX
                })
                .collect();
            let merged = Merged {
                value: &value,
                lists: &lists,
            };
            return Err(locate_findings(
                PolicyError::Rejected(errors),
                doc,
                &user_applied,
                Some(&merged),
            ));
        }
    }
    let params =
        crate::packs::params::placement(displaced(provenance, &applied, doc, &value), false);
    // What the user's overrides merged, kept to locate the findings in them (the stages below
    // take the Workflow over).
    let resolved = (!user_applied.is_empty()).then(|| value.clone());
    let merged = resolved.as_ref().map(|value| Merged {
        value,
        lists: &lists,
    });
    let (workflow, findings) = enforce_workflow(
        rules,
        &contract::AFTER_OVERRIDES,
        value,
        origin,
        &params,
        report,
    )
    .map_err(|e| locate_findings(e, doc, &user_applied, merged.as_ref()))?;
    let below_error = findings
        .into_iter()
        .filter(|f| f.severity != nvcre_engine::Severity::Error)
        .collect();
    Ok((
        workflow,
        applied,
        locate_each(below_error, doc, &user_applied, merged.as_ref()),
    ))
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

/// A finding below error as `render` prints it on stderr (one of
/// [`super::Rendered::warnings`]): `<message> [<rule id>]`, with the finding's severity.
pub fn note_line(f: &nvcre_engine::Finding) -> super::Note {
    super::Note {
        severity: f.severity,
        text: format!("{} [{}]", f.message, f.rule_id),
        at: Some(match (f.line, f.column) {
            (Some(l), Some(c)) => format!("{}:{l}:{c}", f.file),
            (Some(l), None) => format!("{}:{l}", f.file),
            _ => f.file.clone(),
        }),
    }
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

#[cfg(test)]
mod tests {

    use nvcre_engine::{RuleSet, Source};
    use serde_json::Value;

    use crate::api::Workflow;
    use crate::error::PolicyError;
    use crate::{RenderRequest, render_workload_run};

    const EXAMPLE: &str = include_str!("../../../examples/nccl-all-reduce.yaml");

    /// The shipped rules and one more `workload-labels` pack with `rules` (a YAML list).
    fn rules_with(rules: &str) -> RuleSet {
        let pack = format!(
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {{name: extra-writes}}\nstage: workload-labels\nmatch:\n  resources:\n  - {{apiVersion: nvcre.nvidia.com/v1alpha1, kind: Workflow}}\nrules:\n{rules}"
        );
        let mut sources = crate::packs::embedded_sources();
        sources.push(Source::new("rules/contract/extra.yaml", pack));
        RuleSet::load(&sources, Some(&crate::packs::contract().expect("contract")))
            .expect("rules load")
    }

    /// `check` renders for the findings alone: without a platform the platform rows stay out
    /// of the Workflow, with one the rows that cannot match it are listed by their `when`
    /// alone, and the findings, warnings, applied overrides and resolved Workflow are those of
    /// the full render, for every example under every architecture and platform; a
    /// construction-stage rule that reads `spec.overrides` gets the rows listed, and its
    /// finding is the same too.
    #[test]
    fn a_render_for_the_findings_alone_finds_what_the_full_render_finds() {
        let mut docs = Vec::new();
        for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
            .expect("examples")
        {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).expect("reads");
                let source = Source::new(path.display().to_string(), text);
                docs.extend(nvcre_engine::parse_documents(&source).expect("parses"));
            }
        }
        let counting = "- id: count\n  validate:\n    expression: size(object.spec.?overrides.orValue([])) == 0\n    messageExpression: string(size(object.spec.overrides)) + ' overrides'\n";
        for (rules, reads) in [
            (crate::default_rules().expect("rules"), false),
            (rules_with(counting), true),
        ] {
            let mut compared = 0;
            let platforms = [
                None,
                Some("aws"),
                Some("gcp"),
                Some("oci"),
                Some("togetherai"),
            ];
            for (doc, platform) in docs.iter().flat_map(|d| platforms.map(|p| (d, p))) {
                for arch in [None, Some("h100"), Some("gb200"), Some("gb300")] {
                    let req = |findings_only| RenderRequest {
                        platform: platform.map(str::to_string),
                        gpu_arch: arch.map(str::to_string),
                        allow_unknown_arch: true,
                        report_all: true,
                        findings_only,
                        ..RenderRequest::default()
                    };
                    let full = render_workload_run(&rules, doc, &req(false));
                    let alone = render_workload_run(&rules, doc, &req(true));
                    match (full, alone) {
                        (Ok(full), Ok(alone)) if platform.is_some() => {
                            assert_eq!(alone.findings, full.findings, "{platform:?} {arch:?}");
                            assert_eq!(alone.warnings, full.warnings, "{platform:?} {arch:?}");
                            assert_eq!(alone.applied, full.applied, "{platform:?} {arch:?}");
                            assert_eq!(alone.workflow, full.workflow, "{platform:?} {arch:?}");
                            assert!(!reads, "the counting rule fails every render");
                            compared += 1;
                        }
                        (Ok(full), Ok(alone)) => {
                            assert_eq!(alone.findings, full.findings, "{arch:?}");
                            assert_eq!(alone.warnings, full.warnings, "{arch:?}");
                            let rows = |r: &crate::render::Rendered| {
                                r.workflow["spec"]["overrides"]
                                    .as_array()
                                    .map_or(0, Vec::len)
                            };
                            let user = doc.value["spec"]["overrides"]
                                .as_array()
                                .map_or(0, Vec::len);
                            assert!(rows(&full) > user);
                            assert!(!reads, "the counting rule fails every render");
                            assert_eq!(rows(&alone), user);
                            compared += 1;
                        }
                        (Err(PolicyError::Rejected(full)), Err(PolicyError::Rejected(alone))) => {
                            assert_eq!(alone, full, "{arch:?}");
                            if reads {
                                // The rows are listed for the rule that counts them.
                                let count = full.iter().find(|f| f.rule_id == "count");
                                let listed = count.and_then(|f| {
                                    f.message.strip_suffix(" overrides")?.parse::<usize>().ok()
                                });
                                assert!(listed.is_some_and(|n| n > 5), "{full:?}");
                                compared += 1;
                            }
                        }
                        (Err(full), Err(alone)) => {
                            assert_eq!(alone.to_string(), full.to_string());
                        }
                        (full, alone) => panic!("{full:?} / {alone:?}"),
                    }
                }
            }
            assert!(compared >= 100, "{compared} renders compared");
        }
    }

    /// A warning of the `workload-labels` stage is reported once: by its construction run
    /// when no platform makes it run again after the overrides (it was dropped there), by the
    /// later run otherwise.
    #[test]
    fn a_workload_labels_warning_is_reported_once() {
        let rules = rules_with(
            "- id: team\n  severity: warning\n  validate:\n    expression: \"'team' in object.spec.jobTemplate.?spec.?workloadMetadata.?labels.orValue({})\"\n    message: no team label\n",
        );
        let source = Source::new("run.yaml", EXAMPLE);
        let docs = nvcre_engine::parse_documents(&source).expect("parses");
        for platform in [None, Some("aws")] {
            for findings_only in [false, true] {
                let req = RenderRequest {
                    platform: platform.map(str::to_string),
                    gpu_arch: Some("h100".into()),
                    findings_only,
                    ..RenderRequest::default()
                };
                let out = render_workload_run(&rules, &docs[0], &req).expect("renders");
                let team: Vec<_> = out
                    .findings
                    .iter()
                    .filter(|f| f.rule_id == "team")
                    .map(|f| (f.severity, f.message.as_str()))
                    .collect();
                assert_eq!(
                    team,
                    [(nvcre_engine::Severity::Warning, "no team label")],
                    "{platform:?}"
                );
                assert_eq!(
                    out.warnings
                        .iter()
                        .filter(|w| w.text.ends_with("[team]"))
                        .map(|w| (w.severity, w.text.as_str()))
                        .collect::<Vec<_>>(),
                    [(nvcre_engine::Severity::Warning, "no team label [team]")],
                    "{platform:?}"
                );
            }
        }
    }

    /// A user's override that fails is named by its own index, and a JSON Patch by the
    /// operation that failed (the platform rows come first in the Workflow's list, and the
    /// patch applies one operation at a time).
    #[test]
    fn a_failing_user_override_is_named_as_the_user_wrote_it() {
        let run = concat!(
            "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {name: jtp}\n",
            "spec:\n  image: img\n  framework: {mpi: {mpirunPath: /m, binary: /b}}\n  numNodes: 2\n",
            "  overrides:\n  - when: {platform: {equals: aws}}\n    jobTemplatePatch:\n",
            "    - {op: add, path: /spec/x, value: 1}\n",
            "    - {op: move, from: /spec/x, path: /nope/y}\n",
        );
        let source = Source::new("run.yaml", run);
        let docs = nvcre_engine::parse_documents(&source).expect("parses");
        let req = RenderRequest {
            platform: Some("aws".into()),
            gpu_arch: Some("h100".into()),
            ..RenderRequest::default()
        };
        let rules = crate::default_rules().expect("rules");
        match render_workload_run(&rules, &docs[0], &req) {
            Err(e) => assert_eq!(
                e.to_string(),
                "run.yaml:9:5: applying overrides: override[0]: jobTemplatePatch: patch error: operation '/1' failed at path '/nope/y': path is invalid (spec.overrides[0])"
            ),
            Ok(_) => panic!("renders"),
        }
    }

    fn render(rules: &RuleSet, platform: Option<&str>) -> Result<Value, PolicyError> {
        let source = Source::new("run.yaml", EXAMPLE);
        let docs = nvcre_engine::parse_documents(&source).expect("parses");
        let req = RenderRequest {
            platform: platform.map(str::to_string),
            gpu_arch: Some("h100".into()),
            ..RenderRequest::default()
        };
        render_workload_run(rules, &docs[0], &req).map(|r| r.workflow)
    }

    fn text(v: &Value) -> String {
        serde_json::to_string(v).expect("text")
    }

    /// What a stage's rules write reaches the render as reading and writing the Workflow again
    /// gives it, whether the write went below the JSON-kept `spec.jobTemplate` (handed on as
    /// it is) or into the typed part (put in its typed order: labels sorted), with and without
    /// a platform; a write the Workflow cannot hold is the build error it always was.
    #[test]
    fn a_stage_write_reaches_the_render_as_the_typed_workflow_holds_it() {
        let template = "- id: t\n  mutate:\n  - merge: {path: spec.jobTemplate.metadata.annotations, value: {zz: '1', aa: '2'}}\n";
        let labels =
            "- id: l\n  mutate:\n  - merge: {path: metadata.labels, value: {a-first: x}}\n";
        // Anywhere (a JSON Patch) and at the part itself (not below it): read back, the same.
        let patched = "- id: p\n  mutate:\n  - jsonPatch: [{op: add, path: /spec/jobTemplate/metadata, value: {annotations: {zz: '1', aa: '2'}}}]\n";
        let replaced = "- id: r\n  mutate:\n  - merge: {path: spec.jobTemplate, value: {metadata: {annotations: {zz: '1', aa: '2'}}}}\n";
        for platform in [None, Some("aws")] {
            let plain = render(&crate::default_rules().expect("rules"), platform).expect("renders");
            for (rules, written) in [
                (template, "/spec/jobTemplate/metadata/annotations"),
                (patched, "/spec/jobTemplate/metadata/annotations"),
                (replaced, "/spec/jobTemplate/metadata/annotations"),
                (labels, "/metadata/labels"),
            ] {
                let out = render(&rules_with(rules), platform).expect("renders");
                let again = Workflow::from_json(out.clone())
                    .and_then(Workflow::into_json)
                    .expect("reads as a Workflow");
                assert_eq!(text(&out), text(&again), "{written} {platform:?}");
                assert_ne!(text(&out), text(&plain), "{written} {platform:?}");
                let keys: Vec<&str> = out
                    .pointer(written)
                    .and_then(Value::as_object)
                    .map(|m| m.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let expected: &[&str] = if written == "/metadata/labels" {
                    &[
                        "a-first",
                        "app.kubernetes.io/managed-by",
                        "nvcre.nvidia.com/workload-run",
                    ]
                } else {
                    // The JSON-kept part keeps the order the merge wrote.
                    &["zz", "aa"]
                };
                assert_eq!(keys, expected, "{platform:?}");
            }
            let unknown = "- id: u\n  mutate:\n  - merge: {path: spec, value: {foo: 1}}\n";
            match render(&rules_with(unknown), platform) {
                Err(PolicyError::Build(message)) => {
                    assert!(message.starts_with("unknown field `foo`"), "{message}");
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
