//! The rows of the platform override table (`workloadrun-platform-overrides`) as a WorkloadRun
//! render reads them: [`PlatformOverride`] carries a row's `when`, its build-time keys
//! (`preCommand`, `mpiArgs`, applied by the build for a known platform) and the keys that become
//! a `spec.overrides` entry (resolved later by the `enforce` stage); [`apply_user_env`] writes
//! the user's `spec.env` over a row's env entries and `-x` operands.
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::api::{EnvVar, OverrideSpec, StringMatch, WhenSpec};
use crate::resolve::string_matches;

/// One row of the platform override table, with the WorkloadRun-only keys.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PlatformOverride {
    /// When the row applies; empty matches always.
    #[serde(default)]
    pub(super) when: WhenSpec,
    /// Lines run before the workload command (build time, known platform only).
    #[serde(default)]
    pub(super) pre_command: Vec<String>,
    /// mpirun arguments, prepended for an MPI run (build time, known platform only).
    #[serde(default)]
    pub(super) mpi_args: Vec<String>,
    /// Strategic merge into `jobTemplate`.
    #[serde(default)]
    pub(super) job_template: Option<Value>,
    /// RFC 6902 patch of `jobTemplate`, after the merge.
    #[serde(default)]
    pub(super) job_template_patch: Option<Value>,
    /// Dependencies merged by apiVersion + kind + name, or appended.
    #[serde(default)]
    pub(super) dependencies: Option<Vec<Value>>,
    /// Orchestration fields, each replacing the base value.
    #[serde(default)]
    pub(super) orchestration: Option<Map<String, Value>>,
}

impl PlatformOverride {
    /// Calls `f` with every string of the row, each as the table's rendered body held it (the
    /// strings a substituted param can appear in; see `Table::render_decoded`). Every field is
    /// named, so a field added later must be added here.
    pub(super) fn each_string(&mut self, f: &mut dyn FnMut(&mut String)) {
        let PlatformOverride {
            when,
            pre_command,
            mpi_args,
            job_template,
            job_template_patch,
            dependencies,
            orchestration,
        } = self;
        when.each_string(f);
        pre_command
            .iter_mut()
            .chain(mpi_args.iter_mut())
            .for_each(&mut *f);
        for v in job_template.iter_mut().chain(job_template_patch.iter_mut()) {
            nvcre_engine::each_string(v, f);
        }
        for v in dependencies.iter_mut().flatten() {
            nvcre_engine::each_string(v, f);
        }
        for v in orchestration.iter_mut().flat_map(|m| m.values_mut()) {
            nvcre_engine::each_string(v, f);
        }
    }

    /// The part of the row a build reads (its `when`, `preCommand` and `mpiArgs`), without the
    /// parts only its `spec.overrides` entry carries.
    pub(super) fn build_time_part(&self) -> PlatformOverride {
        PlatformOverride {
            when: self.when.clone(),
            pre_command: self.pre_command.clone(),
            mpi_args: self.mpi_args.clone(),
            job_template: None,
            job_template_patch: None,
            dependencies: None,
            orchestration: None,
        }
    }

    /// The row's `when` alone: what a render that only resolves the overrides needs of a row
    /// that [`may_match`] rules out (resolution matches its `when`, false, and reads nothing
    /// else).
    pub(super) fn when_only(&self) -> PlatformOverride {
        PlatformOverride {
            when: self.when.clone(),
            pre_command: Vec::new(),
            mpi_args: Vec::new(),
            job_template: None,
            job_template_patch: None,
            dependencies: None,
            orchestration: None,
        }
    }

    /// The row's `spec.overrides` entry: moved out when this render holds the only reference
    /// (a row rendered for this run), copied when the table's cache shares it.
    pub(super) fn into_spec(row: std::sync::Arc<PlatformOverride>) -> OverrideSpec {
        let row = std::sync::Arc::try_unwrap(row).unwrap_or_else(|shared| (*shared).clone());
        OverrideSpec {
            when: row.when,
            job_template: row.job_template,
            job_template_patch: row.job_template_patch,
            dependencies: row.dependencies,
            orchestration: row.orchestration,
        }
    }
}

/// False when `when` names a platform or GPU architecture other than `platform` and `arch`:
/// then it matches no context of a render for them, whatever the rest of the context (an
/// override's `when` is matched on its platform and architecture before anything else). True
/// when either match holds a param placeholder (it is judged once filled in).
pub(super) fn may_match(when: &WhenSpec, platform: &str, arch: &str) -> bool {
    let judged = |m: &StringMatch, v: &str| {
        let placeholder = m
            .equals
            .iter()
            .chain(m.in_.iter().flatten())
            .chain(m.not_in.iter().flatten())
            .any(|s| nvcre_engine::holds_placeholder(s));
        placeholder || string_matches(m, v)
    };
    when.platform.as_ref().is_none_or(|m| judged(m, platform))
        && when
            .gpu_architecture
            .as_ref()
            .is_none_or(|m| judged(m, arch))
}

/// Replaces, in place, every env entry and `-x` operand of the platform overrides whose name the
/// user set in `spec.env` (the user's value wins). Names only the user set are not added.
pub(super) fn apply_user_env(o: &mut PlatformOverride, user: &[EnvVar]) {
    if user.is_empty() {
        return;
    }
    let find = |name: &str| user.iter().rev().find(|e| e.name == name);
    fn replace_env_lists(v: &mut Value, find: &dyn Fn(&str) -> Option<Value>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == "env"
                        && let Value::Array(items) = child
                    {
                        for item in items.iter_mut() {
                            let name = item
                                .as_object()
                                .and_then(|m| nvcre_engine::json_field(m, "name"))
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            if let Some(user) = name.and_then(|n| find(&n)) {
                                *item = user;
                            }
                        }
                        continue;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn when(text: &str) -> WhenSpec {
        serde_json::from_str(text).expect("a when")
    }

    #[test]
    fn a_row_may_match_unless_its_platform_or_architecture_rules_it_out() {
        let cases = [
            (r#"{}"#, true),
            (r#"{"platform": {"equals": "aws"}}"#, true),
            (r#"{"platform": {"equals": "gcp"}}"#, false),
            (r#"{"gpuArchitecture": {"in": ["h100", "h200"]}}"#, true),
            (r#"{"gpuArchitecture": {"in": ["gb200"]}}"#, false),
            (r#"{"gpuArchitecture": {"notIn": ["h100"]}}"#, false),
            (
                r#"{"platform": {"equals": "aws"}, "gpuArchitecture": {"equals": "gb300"}}"#,
                false,
            ),
            // The rest of a `when` is the Workflow's, known only after the build.
            (
                r#"{"platform": {"equals": "aws"}, "workloadKind": "Other"}"#,
                true,
            ),
            (r#"{"expression": "false"}"#, true),
            // A param not yet filled in is judged once it is.
            (
                "{\"platform\": {\"equals\": \"\u{FDD0}entryName\u{FDD1}\"}}",
                true,
            ),
            (
                "{\"gpuArchitecture\": {\"notIn\": [\"h100\", \"\u{FDD0}x\u{FDD1}\"]}}",
                true,
            ),
        ];
        let got: Vec<(&str, bool)> = cases
            .iter()
            .map(|(w, _)| (*w, may_match(&when(w), "aws", "h100")))
            .collect();
        let want: Vec<(&str, bool)> = cases.iter().map(|(w, m)| (*w, *m)).collect();
        assert_eq!(got, want);
    }
}
