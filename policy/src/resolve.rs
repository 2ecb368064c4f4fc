//! Override resolution: match each override's `when` against the node
//! context and apply every match, in list order, to the Workflow.
//!
//! Per matching override: `jobTemplate` (strategic merge: maps recurse, `null` deletes, each
//! list merged by its key or replaced as the `list-merge` table says, `$patch` directives
//! honoured), then `jobTemplatePatch` (RFC 6902), then each `dependencies[]` item (merged into
//! the dependency with the same apiVersion + kind + metadata.name, else appended), then
//! `orchestration` (each field replaces).

use nvcre_engine::patch::{self, ListMerge, ListPolicy};
use nvcre_engine::{Expr, FieldPath, RuleSet, Scope};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{IntMatch, OverrideSpec, StringMatch, WhenSpec, Workflow};

/// What an override's `when` is matched against.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverrideContext {
    /// Detected or forced platform (`aws`, `gcp`, …).
    pub platform: String,
    /// Detected or forced GPU architecture (`h100`, `gb300`, …).
    pub gpu_architecture: String,
    /// `TrainJob` when the Workflow's jobTemplate has a trainJob.
    pub workload_kind: String,
    /// `topology` when `orchestration.topology` is set, else `simple`.
    pub topology_mode: String,
    /// Distinct non-empty values of the topology key among the nodes.
    pub domain_count: i64,
    /// `validation.performance.config`; `when.config` never matches when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

impl OverrideContext {
    /// The build-time context (the build-time passes of a WorkloadRun render): platform and architecture only.
    pub fn build_time(platform: &str, gpu_architecture: &str) -> OverrideContext {
        OverrideContext {
            platform: platform.to_string(),
            gpu_architecture: gpu_architecture.to_string(),
            ..OverrideContext::default()
        }
    }

    /// The Workflow-time context: workload kind, topology mode and config read from `workflow`;
    /// `domain_count` as given by the caller (it needs the nodes).
    pub fn for_workflow(
        workflow: &Workflow,
        platform: &str,
        gpu_architecture: &str,
        domain_count: i64,
    ) -> OverrideContext {
        let has_train_job = workflow
            .spec
            .job_template
            .pointer("/spec/workload/trainJob")
            .is_some_and(|v| !v.is_null());
        OverrideContext {
            platform: platform.to_string(),
            gpu_architecture: gpu_architecture.to_string(),
            workload_kind: if has_train_job {
                "TrainJob".into()
            } else {
                String::new()
            },
            topology_mode: if workflow
                .spec
                .orchestration
                .get("topology")
                .is_some_and(|t| !t.is_null())
            {
                "topology".into()
            } else {
                "simple".into()
            },
            domain_count,
            config: workflow
                .spec
                .validation
                .as_ref()
                .and_then(|v| v.pointer("/performance/config"))
                .cloned(),
        }
    }
}

/// Errors of override resolution.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ResolveError {
    /// `when.expression` did not compile or evaluate to a bool.
    #[error("override[{index}]: evaluating when: {message}")]
    When {
        /// Index of the override in `spec.overrides`.
        index: usize,
        /// The CEL error.
        message: String,
    },
    /// A patch could not be applied.
    #[error("override[{index}]: {message}")]
    Patch {
        /// Index of the override.
        index: usize,
        /// What failed.
        message: String,
    },
}

/// One applied override, as `nvcrectl.nvidia.com/applied-overrides` records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedOverride {
    /// Index in `spec.overrides`.
    pub index: usize,
    /// `summarizeWhen` text, e.g. `gpuArchitecture=h100, platform=aws`.
    pub when: String,
    /// `summarizePatches` text, e.g. `jobTemplate, 2 dependencies`.
    pub patches: String,
    /// True when the override matched but changed nothing.
    pub no_op: bool,
    /// The values of the Workflow it deleted or replaced, in the order it did (paths from the
    /// Workflow's root: `spec.jobTemplate…`, `spec.dependencies[0]…`, `spec.orchestration…`).
    #[serde(skip)]
    pub displaced: Vec<patch::Displaced>,
}

/// True when `m` holds for `v`: every given sub-field must hold.
pub fn string_matches(m: &StringMatch, v: &str) -> bool {
    m.equals.as_deref().is_none_or(|e| e == v)
        && m.in_.as_ref().is_none_or(|l| l.iter().any(|x| x == v))
        && m.not_in.as_ref().is_none_or(|l| l.iter().all(|x| x != v))
}

fn int_matches(m: &IntMatch, v: i64) -> bool {
    m.equals.is_none_or(|e| e == v)
        && m.greater_than.is_none_or(|g| v > g)
        && m.less_than.is_none_or(|l| v < l)
}

/// JSON subset: every key of `want` exists in `have` with a matching value (recursively for
/// mappings, deep equality otherwise).
fn json_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| json_subset(wv, hv))),
        (w, h) => w == h,
    }
}

/// Matches `when` against `ctx` (all given criteria must hold; an empty `when` matches).
///
/// # Errors
/// The CEL error of `when.expression` (compile or evaluation, or a non-bool result).
pub fn when_matches(when: &WhenSpec, ctx: &OverrideContext) -> Result<bool, String> {
    if let Some(p) = &when.platform
        && !string_matches(p, &ctx.platform)
    {
        return Ok(false);
    }
    if let Some(a) = &when.gpu_architecture
        && !string_matches(a, &ctx.gpu_architecture)
    {
        return Ok(false);
    }
    if let Some(k) = &when.workload_kind
        && k != &ctx.workload_kind
    {
        return Ok(false);
    }
    if let Some(t) = &when.topology {
        if t.mode.as_ref().is_some_and(|m| m != &ctx.topology_mode) {
            return Ok(false);
        }
        if t.domain_count
            .as_ref()
            .is_some_and(|m| !int_matches(m, ctx.domain_count))
        {
            return Ok(false);
        }
    }
    if let Some(c) = &when.config {
        match &ctx.config {
            Some(have) if json_subset(c, have) => {}
            _ => return Ok(false),
        }
    }
    if let Some(e) = &when.expression {
        let expr = Expr::compile(e).map_err(|e| e.to_string())?;
        let mut scope = Scope::new();
        scope.bind("platform", &json!(ctx.platform));
        scope.bind("gpuArchitecture", &json!(ctx.gpu_architecture));
        scope.bind("workloadKind", &json!(ctx.workload_kind));
        scope.bind("topologyMode", &json!(ctx.topology_mode));
        scope.bind("domainCount", &json!(ctx.domain_count));
        return expr.eval_bool(&scope).map_err(|e| e.to_string());
    }
    Ok(true)
}

/// `summarizeWhen`: `gpuArchitecture=<v>, platform=<v>` (with `in [a,b]` / `notIn [..]`),
/// `workloadKind=`, `topology.mode=`, `topology.domainCount==3,>1,<5`, `config=<custom>`,
/// `expression=<first 37 chars>...`; `<always>` when empty.
pub fn summarize_when(when: &WhenSpec) -> String {
    fn sm(name: &str, m: &StringMatch) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &m.equals {
            out.push(format!("{name}={e}"));
        }
        if let Some(l) = &m.in_ {
            out.push(format!("{name} in [{}]", l.join(",")));
        }
        if let Some(l) = &m.not_in {
            out.push(format!("{name} notIn [{}]", l.join(",")));
        }
        out
    }
    let mut parts = Vec::new();
    if let Some(a) = &when.gpu_architecture {
        parts.extend(sm("gpuArchitecture", a));
    }
    if let Some(p) = &when.platform {
        parts.extend(sm("platform", p));
    }
    if let Some(k) = &when.workload_kind {
        parts.push(format!("workloadKind={k}"));
    }
    if let Some(t) = &when.topology {
        if let Some(m) = &t.mode {
            parts.push(format!("topology.mode={m}"));
        }
        if let Some(d) = &t.domain_count {
            let mut c = Vec::new();
            if let Some(e) = d.equals {
                c.push(format!("=={e}"));
            }
            if let Some(g) = d.greater_than {
                c.push(format!(">{g}"));
            }
            if let Some(l) = d.less_than {
                c.push(format!("<{l}"));
            }
            parts.push(format!("topology.domainCount{}", c.join(",")));
        }
    }
    if when.config.is_some() {
        parts.push("config=<custom>".into());
    }
    if let Some(e) = &when.expression {
        let short: String = e.chars().take(37).collect();
        if e.chars().count() > 37 {
            parts.push(format!("expression={short}..."));
        } else {
            parts.push(format!("expression={e}"));
        }
    }
    if parts.is_empty() {
        "<always>".into()
    } else {
        parts.join(", ")
    }
}

/// `summarizePatches`: `jobTemplate`, `jobTemplatePatch`, `<n> dependencies`, `orchestration`,
/// comma-joined, or `none`.
pub fn summarize_patches(o: &OverrideSpec) -> String {
    let mut parts = Vec::new();
    if o.job_template.as_ref().is_some_and(|v| !v.is_null()) {
        parts.push("jobTemplate".to_string());
    }
    if o.job_template_patch.as_ref().is_some_and(|v| !v.is_null()) {
        parts.push("jobTemplatePatch".to_string());
    }
    if let Some(d) = &o.dependencies
        && !d.is_empty()
    {
        parts.push(format!("{} dependencies", d.len()));
    }
    if o.orchestration.is_some() {
        parts.push("orchestration".to_string());
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// Name of the table of list merge keys.
pub const LIST_MERGE_TABLE: &str = "list-merge";

/// A row of the `list-merge` table: paths and what their lists do (exactly one of `mergeKey`
/// and `replace: true`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ListMergeRow {
    paths: Vec<String>,
    #[serde(default)]
    merge_key: Option<String>,
    #[serde(default)]
    replace: bool,
}

/// The list policy of override resolution: the rows of the `list-merge` table, in order.
///
/// # Errors
/// A missing or malformed table, or a row with both or neither of `mergeKey` and `replace`.
pub fn list_policy(rules: &RuleSet) -> Result<ListPolicy, crate::error::PolicyError> {
    let table = rules
        .table(LIST_MERGE_TABLE)
        .ok_or_else(|| crate::error::PolicyError::MissingTable(LIST_MERGE_TABLE.to_string()))?;
    let mut policy = ListPolicy::new();
    for (id, value) in table.render(&Value::Null)? {
        let row: ListMergeRow = crate::detect::decode_row(table, &id, &value)?;
        let merge = match (row.merge_key, row.replace) {
            (Some(key), false) => ListMerge::ByKey(key),
            (None, true) => ListMerge::Replace,
            _ => {
                return Err(row_error(
                    table,
                    &id,
                    "give exactly one of mergeKey and replace: true",
                ));
            }
        };
        for p in &row.paths {
            policy = policy.with(p, merge.clone());
        }
    }
    Ok(policy)
}

fn row_error(table: &nvcre_engine::Table, id: &str, message: &str) -> crate::error::PolicyError {
    crate::error::PolicyError::table_entry(table, id, message.to_string())
}

fn dependency_identity(d: &Value) -> (Option<&str>, Option<&str>, Option<&str>) {
    (
        d.get("apiVersion").and_then(Value::as_str),
        d.get("kind").and_then(Value::as_str),
        d.pointer("/metadata/name").and_then(Value::as_str),
    )
}

/// Applies one override to `wf` (assumed to match), recording in `log` every value it deletes
/// or replaces by a different one (paths from the Workflow's root) and what it adds.
///
/// # Errors
/// [`ResolveError::Patch`] when the JSON Patch fails or the merged job template is not an object.
pub fn apply_override(
    wf: &mut Workflow,
    index: usize,
    o: &OverrideSpec,
    lists: &ListPolicy,
    log: &mut patch::MergeLog,
) -> Result<(), ResolveError> {
    let spec = FieldPath::root().key("spec");
    if let Some(jt) = &o.job_template {
        let at = FieldPath::root().key("jobTemplate".to_string());
        let mut found = patch::MergeLog::default();
        patch::merge_logged(&mut wf.spec.job_template, jt, lists, &at, &mut found);
        log.added += found.added;
        log.displaced
            .extend(found.displaced.into_iter().map(|d| under(&spec, d)));
    }
    if let Some(p) = &o.job_template_patch {
        let at = spec.clone().key("jobTemplate");
        patch::json_patch_logged(&mut wf.spec.job_template, p, &at, log).map_err(|e| {
            ResolveError::Patch {
                index,
                message: format!("jobTemplatePatch: {e}"),
            }
        })?;
    }
    for dep in o.dependencies.iter().flatten() {
        let id = dependency_identity(dep);
        match wf
            .spec
            .dependencies
            .iter_mut()
            .enumerate()
            .find(|(_, b)| dependency_identity(b) == id)
        {
            Some((i, base)) => {
                let at = FieldPath::root().key("dependencies".to_string()).index(i);
                let mut found = patch::MergeLog::default();
                patch::merge_logged(base, dep, lists, &at, &mut found);
                log.added += found.added;
                log.displaced
                    .extend(found.displaced.into_iter().map(|d| under(&spec, d)));
            }
            None => {
                wf.spec.dependencies.push(patch::fresh(dep));
                log.added += 1;
            }
        }
    }
    if let Some(orch) = &o.orchestration {
        for (k, v) in orch {
            if !v.is_null() {
                match wf.spec.orchestration.insert(k.clone(), v.clone()) {
                    None => log.added += 1,
                    Some(before) if before != *v => log.displaced.push(patch::Displaced {
                        path: spec.clone().key("orchestration").key(k.clone()),
                        before,
                        removed: false,
                    }),
                    Some(_) => {}
                }
            }
        }
    }
    Ok(())
}

/// `d` with its path under `prefix`.
fn under(prefix: &FieldPath, mut d: patch::Displaced) -> patch::Displaced {
    let mut segs = prefix.segments().to_vec();
    segs.extend_from_slice(d.path.segments());
    d.path = FieldPath::from_segments(segs);
    d
}

/// Applies every override of `wf.spec.overrides` whose `when` matches `ctx`, in order, and
/// returns what was applied. The overrides list itself is left in place (the caller clears it).
///
/// # Errors
/// [`ResolveError::When`] for a `when.expression` that fails; [`ResolveError::Patch`] for a
/// patch that fails. Nothing is partially reported: the Workflow is then unusable.
pub fn resolve_overrides(
    wf: &mut Workflow,
    ctx: &OverrideContext,
    lists: &ListPolicy,
) -> Result<Vec<AppliedOverride>, ResolveError> {
    // Taken out while they apply (an override never reads the list) and put back after, so
    // the list is not copied.
    let overrides = std::mem::take(&mut wf.spec.overrides);
    let applied = apply_each(wf, &overrides, ctx, lists);
    wf.spec.overrides = overrides;
    applied
}

fn apply_each(
    wf: &mut Workflow,
    overrides: &[OverrideSpec],
    ctx: &OverrideContext,
    lists: &ListPolicy,
) -> Result<Vec<AppliedOverride>, ResolveError> {
    let mut applied = Vec::new();
    for (index, o) in overrides.iter().enumerate() {
        let matched =
            when_matches(&o.when, ctx).map_err(|message| ResolveError::When { index, message })?;
        if !matched {
            continue;
        }
        let mut log = patch::MergeLog::default();
        apply_override(wf, index, o, lists, &mut log)?;
        applied.push(AppliedOverride {
            index,
            when: summarize_when(&o.when),
            patches: summarize_patches(o),
            no_op: !log.changed(),
            displaced: log.displaced,
        });
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WorkflowSpec;

    fn wf(spec: Value) -> Workflow {
        Workflow {
            api_version: "nvcre.nvidia.com/v1alpha1".into(),
            kind: "Workflow".into(),
            metadata: Default::default(),
            spec: serde_json::from_value::<WorkflowSpec>(spec).expect("spec"),
        }
    }

    fn ovr(v: Value) -> OverrideSpec {
        serde_json::from_value(v).expect("override")
    }

    /// A fixture `list-merge` table (not the shipped one): trainer env replaced, containers by
    /// name, volume mounts by mount path, any other named list by name.
    const FIXTURE_LIST_MERGE: &str = "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: list-merge}
entries:
  - {id: r, paths: [jobTemplate.spec.workload.trainJob.trainer.env], replace: true}
  - {id: m, paths: ['**.volumeMounts'], mergeKey: mountPath}
  - {id: n, paths: ['**'], mergeKey: name}
";

    fn fixture(text: &str) -> RuleSet {
        RuleSet::load(
            &[nvcre_engine::Source::new("fixture.yaml", text)],
            Some(&crate::packs::contract().expect("contract")),
        )
        .expect("fixture loads")
    }

    fn lists() -> ListPolicy {
        list_policy(&fixture(FIXTURE_LIST_MERGE)).expect("policy")
    }

    #[test]
    fn list_policy_rows_in_order_and_bad_rows() {
        let p = lists();
        let at = |s: &str| FieldPath::parse(s).expect("path");
        assert_eq!(
            p.list_merge(&at("jobTemplate.spec.workload.trainJob.trainer.env")),
            &ListMerge::Replace
        );
        assert_eq!(
            p.list_merge(&at("dependencies.0.spec.containers.1.volumeMounts")),
            &ListMerge::ByKey("mountPath".into())
        );
        assert_eq!(
            p.list_merge(&at("jobTemplate.spec.env")),
            &ListMerge::ByKey("name".into())
        );
        let both = fixture(
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: list-merge}\nentries:\n  - {id: x, paths: [a], replace: true, mergeKey: name}\n",
        );
        assert_eq!(
            list_policy(&both).unwrap_err().to_string(),
            "fixture.yaml:5:5: table list-merge, entry x: give exactly one of mergeKey and replace: true"
        );
    }

    #[test]
    fn user_directives_replace_and_delete_and_are_dropped() {
        let mut w = wf(json!({
            "jobTemplate": {"spec": {"workload": {"trainJob": {"trainer": {"image": "x"}}}}},
            "dependencies": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}, {"name": "w", "mountPath": "/w"}]},
                {"name": "b"}]}}],
            "overrides": [{"when": {}, "dependencies": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [
                    {"name": "a", "volumeMounts": [{"mountPath": "/w", "$patch": "delete"}, {"name": "v2", "mountPath": "/v"}]},
                    {"name": "b", "$patch": "delete"}]}}]}]
        }));
        resolve_overrides(&mut w, &aws_h100(), &lists()).expect("applies");
        assert_eq!(
            w.spec.dependencies[0]["spec"],
            json!({"containers": [{"name": "a", "volumeMounts": [{"name": "v2", "mountPath": "/v"}]}]})
        );
    }

    fn aws_h100() -> OverrideContext {
        OverrideContext {
            platform: "aws".into(),
            gpu_architecture: "h100".into(),
            workload_kind: "TrainJob".into(),
            topology_mode: "simple".into(),
            domain_count: 0,
            config: None,
        }
    }

    #[test]
    fn string_match_table() {
        let m = |v: Value| serde_json::from_value::<StringMatch>(v).expect("m");
        assert!(string_matches(&m(json!({"equals": "aws"})), "aws"));
        assert!(!string_matches(&m(json!({"equals": "aws"})), "AWS"));
        assert!(string_matches(
            &m(json!({"in": ["gb200", "gb300"]})),
            "gb300"
        ));
        assert!(!string_matches(&m(json!({"notIn": ["gb200"]})), "gb200"));
        assert!(!string_matches(
            &m(json!({"in": ["a"], "notIn": ["a"]})),
            "a"
        ));
    }

    #[test]
    fn cel_when_expression_and_error_prefix() {
        let w = |e: &str| WhenSpec {
            expression: Some(e.into()),
            ..Default::default()
        };
        assert_eq!(
            when_matches(&w("platform == 'aws' && domainCount == 0"), &aws_h100()),
            Ok(true)
        );
        assert_eq!(
            when_matches(&w("gpuArchitecture.startsWith('gb')"), &aws_h100()),
            Ok(false)
        );
        let mut wfl =
            wf(json!({"jobTemplate": {}, "overrides": [{"when": {"expression": "nope +"}}]}));
        let err = resolve_overrides(&mut wfl, &aws_h100(), &lists()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("override[0]: evaluating when: "),
            "{err}"
        );
    }

    #[test]
    fn strategic_merge_by_name_null_delete_and_trainer_env_replaced() {
        let mut w = wf(json!({
            "jobTemplate": {"spec": {"workload": {"trainJob": {"trainer": {
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "image": "x"}}},
                "workloadMetadata": {"labels": {"kai.scheduler/queue": "q", "drop": "me"}}}},
            "overrides": [{"when": {"platform": {"equals": "aws"}}, "jobTemplate": {"spec": {
                "workload": {"trainJob": {"trainer": {"env": [{"name": "C", "value": "3"}]}}},
                "workloadMetadata": {"labels": {"drop": null, "cost-center": "hpc"}}}}}]
        }));
        let applied = resolve_overrides(&mut w, &aws_h100(), &lists()).expect("applies");
        assert_eq!(
            w.spec.job_template,
            json!({"spec": {"workload": {"trainJob": {"trainer": {"env": [{"name": "C", "value": "3"}], "image": "x"}}},
                   "workloadMetadata": {"labels": {"kai.scheduler/queue": "q", "cost-center": "hpc"}}}})
        );
        assert_eq!(
            applied,
            vec![AppliedOverride {
                index: 0,
                when: "platform=aws".into(),
                patches: "jobTemplate".into(),
                no_op: false,
                displaced: vec![
                    patch::Displaced {
                        path: FieldPath::parse(
                            "spec.jobTemplate.spec.workload.trainJob.trainer.env"
                        )
                        .expect("path"),
                        before: json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
                        removed: false,
                    },
                    patch::Displaced {
                        path: FieldPath::parse(
                            "spec.jobTemplate.spec.workloadMetadata.labels.drop"
                        )
                        .expect("path"),
                        before: json!("me"),
                        removed: true,
                    },
                ],
            }]
        );
    }

    #[test]
    fn an_override_that_changes_nothing_is_a_no_op_and_one_that_only_adds_is_not() {
        let mut w = wf(json!({
            "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"a": "1"}}}},
            "orchestration": {"maxConcurrent": 2},
            "overrides": [
                {"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"a": "1"}}}},
                 "orchestration": {"maxConcurrent": 2}},
                {"when": {}, "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"b": "2"}}}}},
                {"when": {}, "jobTemplatePatch": [{"op": "add", "path": "/spec/x", "value": 1}]},
                {"when": {}, "orchestration": {"maxConcurrent": 3}}
            ]
        }));
        let applied = resolve_overrides(&mut w, &aws_h100(), &lists()).expect("applies");
        assert_eq!(
            applied.iter().map(|a| a.no_op).collect::<Vec<_>>(),
            [true, false, false, false]
        );
        assert_eq!(
            applied[3].displaced,
            vec![patch::Displaced {
                path: FieldPath::parse("spec.orchestration.maxConcurrent").expect("path"),
                before: json!(2),
                removed: false,
            }]
        );
    }

    #[test]
    fn json_patch_removes_escaped_label_key() {
        let mut w = wf(json!({
            "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"kai.scheduler/queue": "q"}}}},
            "overrides": [{"when": {}, "jobTemplatePatch": [{"op": "remove", "path": "/spec/workloadMetadata/labels/kai.scheduler~1queue"}]}]
        }));
        resolve_overrides(&mut w, &aws_h100(), &lists()).expect("applies");
        assert_eq!(
            w.spec.job_template,
            json!({"spec": {"workloadMetadata": {"labels": {}}}})
        );
    }

    #[test]
    fn dependencies_merge_by_identity_or_append_and_orchestration_replaces() {
        let rt = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "r-runtime"},
            "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}]}}}});
        let mut w = wf(json!({"jobTemplate": {}, "dependencies": [rt],
            "orchestration": {"topology": {"strictDomain": true}, "iterations": 1},
            "overrides": [{"when": {"platform": {"equals": "aws"}}, "dependencies": [
                {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "r-runtime"},
                 "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                     "containers": [{"name": "node", "resources": {"limits": {"vpc.amazonaws.com/efa": 32}}}]}}}}}]}}}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra"}}],
              "orchestration": {"topology": {"topologyKey": "k"}}}]}));
        let applied = resolve_overrides(&mut w, &aws_h100(), &lists()).expect("applies");
        assert_eq!(w.spec.dependencies.len(), 2);
        assert_eq!(
            w.spec.dependencies[0].pointer("/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/resources/limits"),
            Some(&json!({"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": 32}))
        );
        assert_eq!(
            w.spec.dependencies[1],
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra"}})
        );
        assert_eq!(
            w.spec.orchestration.get("topology"),
            Some(&json!({"topologyKey": "k"}))
        );
        assert_eq!(applied[0].patches, "2 dependencies, orchestration");
    }

    #[test]
    fn summaries() {
        let o = ovr(
            json!({"when": {"platform": {"equals": "aws"}, "gpuArchitecture": {"in": ["gb200", "gb300"]}}}),
        );
        assert_eq!(
            summarize_when(&o.when),
            "gpuArchitecture in [gb200,gb300], platform=aws"
        );
        assert_eq!(summarize_patches(&o), "none");
        assert_eq!(summarize_when(&WhenSpec::default()), "<always>");
        let long = WhenSpec {
            expression: Some("platform == 'aws' && gpuArchitecture == 'gb300'".into()),
            ..Default::default()
        };
        assert_eq!(
            summarize_when(&long),
            "expression=platform == 'aws' && gpuArchitecture ..."
        );
    }
}
