//! Pod scheduling of a group's TrainJob: the required node affinity ([`node_affinity`]), the
//! tolerations ([`tolerations`]), and where both are written, the controller-owned
//! runtimePatches entry of every targeted replicated job.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{CONTROLLER_MANAGER, PlacementError, PlacementMode};
use crate::api::TargetSpec;
use crate::nodes::HOSTNAME_LABEL;

/// The required node affinity of a job: one NodeSelectorTerm whose matchExpressions
/// are `kubernetes.io/hostname In <hostnames>` (when any), each `target.nodeSelector` entry as
/// `<key> In [<value>]` (keys sorted), `target.matchExpressions` verbatim, then
/// `nvidia.com/gpu.product In <distinct sorted non-empty gpu_products>`; exact duplicates
/// (key, operator, values) are dropped keeping the first. `None` when there is nothing to
/// constrain. `nodeNames` and `taintSelectors` are not translated.
///
/// Shape: `{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms:
/// [{matchExpressions: [{key, operator, values?}]}]}}`.
pub fn node_affinity(
    hostnames: &[String],
    target: Option<&TargetSpec>,
    gpu_products: &[String],
) -> Option<Value> {
    let mut reqs: Vec<(String, String, Vec<String>)> = Vec::new();
    if !hostnames.is_empty() {
        reqs.push((
            HOSTNAME_LABEL.to_string(),
            "In".to_string(),
            hostnames.to_vec(),
        ));
    }
    if let Some(t) = target {
        for (k, v) in &t.node_selector {
            reqs.push((k.clone(), "In".to_string(), vec![v.clone()]));
        }
        for r in &t.match_expressions {
            reqs.push((r.key.clone(), r.operator.clone(), r.values.clone()));
        }
    }
    let products: BTreeSet<&String> = gpu_products.iter().filter(|p| !p.is_empty()).collect();
    if !products.is_empty() {
        reqs.push((
            crate::nodes::GPU_PRODUCT_LABEL.to_string(),
            "In".to_string(),
            products.into_iter().cloned().collect(),
        ));
    }
    let mut seen = BTreeSet::new();
    reqs.retain(|r| seen.insert(r.clone()));
    if reqs.is_empty() {
        return None;
    }
    let exprs: Vec<Value> = reqs
        .into_iter()
        .map(|(key, operator, values)| {
            let mut m = Map::new();
            m.insert("key".to_string(), Value::String(key));
            m.insert("operator".to_string(), Value::String(operator));
            if !values.is_empty() {
                m.insert(
                    "values".to_string(),
                    Value::Array(values.into_iter().map(Value::String).collect()),
                );
            }
            Value::Object(m)
        })
        .collect();
    Some(json!({
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": exprs}]
        }
    }))
}

/// Tolerations appended to every targeted replicated job:
/// 1. `target.taintSelectors` set → one per selector: `key`; `operator: Equal` + `value` when a
///    value is given, else `operator: Exists`; `effect` when given;
/// 2. else no launcher target (not MPI) → none;
/// 3. else Pinned → `[{operator: Exists}]`;
/// 4. else Unpinned → `nvidia.com/gpu=present:NoSchedule` and
///    `kubernetes.io/arch=arm64:NoSchedule` (`Equal`).
pub fn tolerations(
    target: Option<&TargetSpec>,
    has_launcher: bool,
    mode: PlacementMode,
) -> Vec<Value> {
    if let Some(t) = target.filter(|t| !t.taint_selectors.is_empty()) {
        return t
            .taint_selectors
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("key".to_string(), Value::String(s.key.clone()));
                match s.value.as_deref().filter(|v| !v.is_empty()) {
                    Some(v) => {
                        m.insert("operator".to_string(), json!("Equal"));
                        m.insert("value".to_string(), Value::String(v.to_string()));
                    }
                    None => {
                        m.insert("operator".to_string(), json!("Exists"));
                    }
                }
                if let Some(e) = s.effect.as_deref().filter(|e| !e.is_empty()) {
                    m.insert("effect".to_string(), Value::String(e.to_string()));
                }
                Value::Object(m)
            })
            .collect();
    }
    if !has_launcher {
        return Vec::new();
    }
    match mode {
        PlacementMode::Pinned => vec![json!({"operator": "Exists"})],
        PlacementMode::Unpinned => vec![
            json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}),
            json!({"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}),
        ],
    }
}

/// The replicated job names the TrainJob's runtimePatches name (any manager), in first-seen
/// order; `["node"]` when none.
pub(super) fn patch_targets(train_job: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let patches = train_job
        .get("runtimePatches")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for patch in patches {
        let jobs = patch
            .pointer("/trainingRuntimeSpec/template/spec/replicatedJobs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for job in jobs {
            if let Some(name) = job.get("name").and_then(Value::as_str)
                && !name.is_empty()
                && !names.iter().any(|n| n == name)
            {
                names.push(name.to_string());
            }
        }
    }
    if names.is_empty() {
        names.push("node".to_string());
    }
    names
}

/// Writes affinity (replacing `affinity.nodeAffinity`) and appends tolerations into the
/// controller-owned runtimePatches entry, for every target replicated job. Nothing is
/// written when there is nothing to write.
pub(super) fn write_pod_placement(
    train_job: &mut Map<String, Value>,
    targets: &[String],
    affinity: Option<&Value>,
    tolerations: &[Value],
) -> Result<(), PlacementError> {
    if affinity.is_none() && tolerations.is_empty() {
        return Ok(());
    }
    const RP: &str = "spec.jobTemplate.spec.workload.trainJob.runtimePatches";
    let patches = array_entry(train_job, "runtimePatches", RP)?;
    let pos = patches
        .iter()
        .position(|p| p.get("manager").and_then(Value::as_str) == Some(CONTROLLER_MANAGER));
    let idx = match pos {
        Some(i) => i,
        None => {
            patches.push(json!({"manager": CONTROLLER_MANAGER}));
            patches.len().saturating_sub(1)
        }
    };
    let path = format!("{RP}[{idx}]");
    let entry = patches
        .get_mut(idx)
        .and_then(Value::as_object_mut)
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.clone(),
            reason: "must be an object".to_string(),
        })?;
    let rts = object_entry(
        entry,
        "trainingRuntimeSpec",
        &format!("{path}.trainingRuntimeSpec"),
    )?;
    let tmpl = object_entry(
        rts,
        "template",
        &format!("{path}.trainingRuntimeSpec.template"),
    )?;
    let spec = object_entry(
        tmpl,
        "spec",
        &format!("{path}.trainingRuntimeSpec.template.spec"),
    )?;
    let jobs_path = format!("{path}.trainingRuntimeSpec.template.spec.replicatedJobs");
    let jobs = array_entry(spec, "replicatedJobs", &jobs_path)?;
    for target in targets {
        let pos = jobs
            .iter()
            .position(|j| j.get("name").and_then(Value::as_str) == Some(target.as_str()));
        let j = match pos {
            Some(i) => i,
            None => {
                jobs.push(json!({"name": target}));
                jobs.len().saturating_sub(1)
            }
        };
        let jp = format!("{jobs_path}[{j}]");
        let job = jobs
            .get_mut(j)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| PlacementError::InvalidDocument {
                path: jp.clone(),
                reason: "must be an object".to_string(),
            })?;
        let t = object_entry(job, "template", &format!("{jp}.template"))?;
        let s = object_entry(t, "spec", &format!("{jp}.template.spec"))?;
        let pt = object_entry(s, "template", &format!("{jp}.template.spec.template"))?;
        let pod = object_entry(pt, "spec", &format!("{jp}.template.spec.template.spec"))?;
        if let Some(a) = affinity {
            let aff = object_entry(
                pod,
                "affinity",
                &format!("{jp}.template.spec.template.spec.affinity"),
            )?;
            aff.insert("nodeAffinity".to_string(), a.clone());
        }
        if !tolerations.is_empty() {
            array_entry(
                pod,
                "tolerations",
                &format!("{jp}.template.spec.template.spec.tolerations"),
            )?
            .extend(tolerations.iter().cloned());
        }
    }
    Ok(())
}

/// `obj[key]` as an object, created when absent or null.
pub(super) fn object_entry<'m>(
    obj: &'m mut Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'m mut Map<String, Value>, PlacementError> {
    let slot = obj.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.to_string(),
            reason: "must be an object".to_string(),
        })
}

/// `obj[key]` as a list, created when absent or null.
pub(super) fn array_entry<'m>(
    obj: &'m mut Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'m mut Vec<Value>, PlacementError> {
    let slot = obj.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
        .ok_or_else(|| PlacementError::InvalidDocument {
            path: path.to_string(),
            reason: "must be a list".to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::*;
    use serde_json::json;

    macro_rules! affinity {
        ($($name:ident: $hosts:expr, $target:expr, $products:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                let t: Option<TargetSpec> = $target;
                let hosts: Vec<String> = $hosts.iter().map(|h: &&str| h.to_string()).collect();
                let products: Vec<String> = $products.iter().map(|h: &&str| h.to_string()).collect();
                let got = node_affinity(&hosts, t.as_ref(), &products).map(|a|
                    a["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"].clone());
                let want: Option<Value> = $want;
                assert_eq!(got, want);
            }
        )*};
    }

    affinity! {
        aff_nothing: [] as [&str; 0], None, [] as [&str; 0] => None;
        aff_empty_products_skipped: [] as [&str; 0], None, [""] => None;
        aff_selector_sorted: [] as [&str; 0], tspec(json!({"nodeSelector": {"z": "1", "a": "2"}})), [] as [&str; 0]
            => Some(json!([{"key": "a", "operator": "In", "values": ["2"]}, {"key": "z", "operator": "In", "values": ["1"]}]));
        aff_products_distinct_sorted: ["h"], None, ["P2", "P1", "P2"]
            => Some(json!([{"key": "kubernetes.io/hostname", "operator": "In", "values": ["h"]},
                           {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["P1", "P2"]}]));
        aff_dedupe_first_kept: [] as [&str; 0], tspec(json!({"nodeSelector": {"k": "v"}, "matchExpressions": [
                {"key": "k", "operator": "In", "values": ["v"]}, {"key": "e", "operator": "Exists"}, {"key": "e", "operator": "Exists"}]})), [] as [&str; 0]
            => Some(json!([{"key": "k", "operator": "In", "values": ["v"]}, {"key": "e", "operator": "Exists"}]));
        aff_same_key_different_values_kept: [] as [&str; 0], tspec(json!({"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]}]})), ["B"]
            => Some(json!([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A", "B"]},
                           {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["B"]}]));
        aff_names_and_taints_not_translated: [] as [&str; 0], tspec(json!({"nodeNames": ["a"], "taintSelectors": [{"key": "k"}]})), [] as [&str; 0] => None;
    }

    macro_rules! toleration {
        ($($name:ident: $target:expr, $launcher:expr, $mode:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                let t: Option<TargetSpec> = $target;
                assert_eq!(Value::Array(tolerations(t.as_ref(), $launcher, $mode)), $want);
            }
        )*};
    }

    toleration! {
        tol_selectors_win: tspec(json!({"taintSelectors": [{"key": "a", "value": "v", "effect": "NoSchedule"}, {"key": "b"}, {"key": "c", "value": "", "effect": "NoExecute"}]})), false, PlacementMode::Unpinned
            => json!([{"key": "a", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                      {"key": "b", "operator": "Exists"},
                      {"key": "c", "operator": "Exists", "effect": "NoExecute"}]);
        tol_non_mpi_none: None, false, PlacementMode::Pinned => json!([]);
        tol_non_mpi_unpinned_none: None, false, PlacementMode::Unpinned => json!([]);
        tol_mpi_pinned: None, true, PlacementMode::Pinned => json!([{"operator": "Exists"}]);
        tol_mpi_unpinned: None, true, PlacementMode::Unpinned => json!([
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]);
    }

    #[test]
    fn example_node_affinity() -> Result<(), Box<dyn std::error::Error>> {
        use super::node_affinity;
        let a = node_affinity(&["n1".to_string()], None, &["NVIDIA-GB200".to_string()])
            .ok_or("none")?;
        let terms = &a["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(terms[0]["key"], "kubernetes.io/hostname");
        assert_eq!(terms[1]["values"][0], "NVIDIA-GB200");
        assert!(node_affinity(&[], None, &[]).is_none());
        Ok(())
    }

    #[test]
    fn example_tolerations() -> Result<(), Box<dyn std::error::Error>> {
        use super::{PlacementMode, tolerations};
        assert_eq!(
            tolerations(None, true, PlacementMode::Pinned),
            vec![serde_json::json!({"operator": "Exists"})]
        );
        assert!(tolerations(None, false, PlacementMode::Pinned).is_empty());
        Ok(())
    }
}
