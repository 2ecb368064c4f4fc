//! Detection and per-node defaults, read from the rule tables `platform-detection` and
//! `gpu-defaults`; the `--platform` / `--gpu-arch` value checks, with the original `nvcrectl`
//! messages.

use std::sync::Arc;

use nvcre_engine::{RuleSet, Table};
use serde::Deserialize;
use serde_json::Value;

use crate::error::PolicyError;
use crate::nodes;
use crate::packs::params;
use crate::placement::{PlacementMode, PlacementPolicy, SchedulingPolicy};

/// Name of the platform detection table.
pub const PLATFORM_TABLE: &str = "platform-detection";
/// Name of the per-node defaults table.
pub const DEFAULTS_TABLE: &str = "gpu-defaults";

/// Per-node defaults for an architecture on a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDefaults {
    /// GPUs per node.
    pub gpus_per_node: i64,
    /// Mellanox NICs per node.
    pub mlnx_per_node: i64,
    /// `NCCL_MNNVL_ENABLE` default.
    #[serde(rename = "enableMNNVL")]
    pub enable_mnnvl: bool,
}

/// A row of the `gpu-defaults` table.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct DefaultsRow {
    /// The platform the row adjusts; absent for the architecture's own row.
    #[serde(default)]
    platform: Option<String>,
    /// The architecture (`""` for the unknown-architecture row).
    gpu_architecture: String,
    /// GPUs per node: at least one, and an int32 as `spec.gpusPerNode` is (it becomes
    /// `numProcPerNode` and the GPU request).
    #[schemars(range(min = 1, max = 2147483647))]
    gpus_per_node: i64,
    /// Mellanox NICs per node: none or more, an int32 as `spec.mlnxPerNode` is.
    #[schemars(range(min = 0, max = 2147483647))]
    mlnx_per_node: i64,
    /// `NCCL_MNNVL_ENABLE` default.
    #[serde(rename = "enableMNNVL")]
    enable_mnnvl: bool,
    /// A value `--gpu-arch` accepts.
    #[serde(default)]
    selectable: bool,
}

impl DefaultsRow {
    fn defaults(&self) -> NodeDefaults {
        NodeDefaults {
            gpus_per_node: self.gpus_per_node,
            mlnx_per_node: self.mlnx_per_node,
            enable_mnnvl: self.enable_mnnvl,
        }
    }
}

/// A row of the `platform-detection` table.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlatformRow {
    /// The platform a node matching the row's `include` is on.
    platform: String,
    /// The node `--platform` stands for; absent when `--platform` does not accept it.
    #[serde(default)]
    synthetic: Option<SyntheticNode>,
}

/// The node `--platform P --gpu-arch A` stands for.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyntheticNode {
    /// Position of the platform in the `--platform` error message.
    pub order: i64,
    /// `spec.providerID`.
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// Extra labels.
    #[serde(default)]
    pub labels: serde_json::Map<String, Value>,
    /// Extra allocatable resources.
    #[serde(default)]
    pub allocatable: serde_json::Map<String, Value>,
}

/// Decodes one rendered table row, naming the table file, the entry's line and the field.
///
/// # Errors
/// [`PolicyError::TableEntry`].
pub(crate) fn decode_row<T: for<'de> Deserialize<'de>>(
    table: &nvcre_engine::Table,
    id: &str,
    value: &Value,
) -> Result<T, PolicyError> {
    nvcre_engine::read_mapping(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = nvcre_engine::plain_type_words(&e.inner().to_string());
        let message = if path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        };
        PolicyError::table_entry(table, id, message)
    })
}

fn table_rows<T: for<'de> Deserialize<'de>>(
    rules: &RuleSet,
    name: &str,
    params: &Value,
) -> Result<Vec<T>, PolicyError> {
    let table = rules
        .table(name)
        .ok_or_else(|| PolicyError::MissingTable(name.to_string()))?;
    decoded_rows(table, params)
}

fn decoded_rows<T: for<'de> Deserialize<'de>>(
    table: &Table,
    params: &Value,
) -> Result<Vec<T>, PolicyError> {
    table
        .render(params)?
        .into_iter()
        .map(|(id, v)| decode_row(table, &id, &v))
        .collect()
}

/// The rows of table `name` for params that never change, decoded once per loaded rule set
/// (`key` names the value among the table's derived values; see [`Table::derived`]).
fn fixed_rows<T>(
    rules: &RuleSet,
    name: &str,
    key: &'static str,
    params: impl FnOnce() -> Value,
) -> Result<Arc<Vec<T>>, PolicyError>
where
    T: for<'de> Deserialize<'de> + Send + Sync + 'static,
{
    rules
        .table(name)
        .ok_or_else(|| PolicyError::MissingTable(name.to_string()))?
        .derived(key, |t| decoded_rows(t, &params()))
}

/// The platforms `--platform` accepts, in message order, with their synthetic nodes.
///
/// # Errors
/// A missing or malformed `platform-detection` table.
pub fn selectable_platforms(rules: &RuleSet) -> Result<Vec<(String, SyntheticNode)>, PolicyError> {
    Ok(selectable_synthetic(rules)?.to_vec())
}

/// [`selectable_platforms`], decoded once per loaded rule set.
fn selectable_synthetic(rules: &RuleSet) -> Result<Arc<Vec<(String, SyntheticNode)>>, PolicyError> {
    rules
        .table(PLATFORM_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(PLATFORM_TABLE.to_string()))?
        .derived("selectable-platforms", |_| {
            let mut out = Vec::new();
            for r in platform_rows(rules)?.iter() {
                if let Some(s) = &r.synthetic {
                    out.push((r.platform.clone(), s.clone()));
                }
            }
            out.sort_by_key(|(_, s)| s.order);
            Ok(out)
        })
}

/// Every row of the platform table, rendered without its `include` (a row is selectable when it
/// has `synthetic`).
fn platform_rows(rules: &RuleSet) -> Result<Arc<Vec<PlatformRow>>, PolicyError> {
    rules
        .table(PLATFORM_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(PLATFORM_TABLE.to_string()))?
        .derived("platform-rows", |table| {
            table
                .render_all(&params::platform_detection("", &serde_json::Map::new()))?
                .into_iter()
                .map(|(id, v)| decode_row(table, &id, &v))
                .collect::<Result<Vec<PlatformRow>, PolicyError>>()
        })
}

/// Every platform a run can be on: the platform table's `platform` values (detected from nodes
/// or named by `--platform`), in row order, each once.
///
/// # Errors
/// A missing or malformed platform table.
pub fn platform_names(rules: &RuleSet) -> Result<Vec<String>, PolicyError> {
    let mut out: Vec<String> = Vec::new();
    for r in platform_rows(rules)?.iter() {
        if !out.contains(&r.platform) {
            out.push(r.platform.clone());
        }
    }
    Ok(out)
}

/// Checks a `--platform` value.
///
/// # Errors
/// `invalid --platform "<v>": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale`.
pub fn check_platform(rules: &RuleSet, platform: &str) -> Result<SyntheticNode, PolicyError> {
    let all = selectable_synthetic(rules)?;
    all.iter()
        .find(|(p, _)| p == platform)
        .map(|(_, s)| s.clone())
        .ok_or_else(|| {
            PolicyError::Usage(format!(
                "invalid --platform {}: must be one of {}",
                quote(platform),
                all.iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Platform of a node, by the first matching row of the detection table. The table decides
/// every node: its last row is a catch-all, and there is no built-in fallback.
///
/// # Errors
/// A missing or malformed table; [`PolicyError::NoMatchingRow`] when no row matches.
pub fn detect_platform(
    rules: &RuleSet,
    provider_id: &str,
    labels: &serde_json::Map<String, Value>,
) -> Result<String, PolicyError> {
    let rows: Vec<PlatformRow> = table_rows(
        rules,
        PLATFORM_TABLE,
        &params::platform_detection(provider_id, labels),
    )?;
    rows.into_iter()
        .next()
        .map(|r| r.platform)
        .ok_or_else(|| PolicyError::NoMatchingRow {
            table: PLATFORM_TABLE.to_string(),
            subject: format!("node (providerID {})", quote(provider_id)),
        })
}

/// Name of the GPU product normalisation table.
pub const GPU_PRODUCTS_TABLE: &str = "gpu-products";

/// A row of the `gpu-products` table: a `rewrite`, or a `match` with its `architecture`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GpuProductRow {
    #[serde(default)]
    rewrite: Option<RewriteRow>,
    #[serde(default, rename = "match")]
    #[schemars(extend("format" = "go-regex"))]
    pattern: Option<String>,
    #[serde(default)]
    architecture: Option<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewriteRow {
    #[schemars(extend("format" = "go-regex"))]
    pattern: String,
    replacement: String,
}

/// The GPU product normalisation of the `gpu-products` table, its regexes compiled (once per
/// loaded rule set: the value is shared by every later call).
///
/// # Errors
/// A missing table, a row that is neither a `rewrite` nor a `match` with an `architecture`,
/// or a regex that does not compile ([`PolicyError::TableEntry`]).
pub fn gpu_products(rules: &RuleSet) -> Result<Arc<nodes::GpuProducts>, PolicyError> {
    rules
        .table(GPU_PRODUCTS_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(GPU_PRODUCTS_TABLE.to_string()))?
        .derived("gpu-products", build_gpu_products)
}

/// The rows of the `gpu-products` table, decoded and their regexes compiled.
fn build_gpu_products(table: &Table) -> Result<nodes::GpuProducts, PolicyError> {
    let entry_error = |id: &str, message: String| PolicyError::table_entry(table, id, message);
    let compile = |id: &str, p: &str| {
        nvcre_engine::go_regex::compile(p)
            .map_err(|_| entry_error(id, nvcre_engine::regex_problem(p)))
    };
    let mut rules_out = Vec::new();
    for (id, value) in table.render(&Value::Null)? {
        let row: GpuProductRow = decode_row(table, &id, &value)?;
        rules_out.push(match row {
            GpuProductRow {
                rewrite: Some(r),
                pattern: None,
                architecture: None,
            } => nodes::GpuProductRule::Rewrite(compile(&id, &r.pattern)?, r.replacement),
            GpuProductRow {
                rewrite: None,
                pattern: Some(p),
                architecture: Some(a),
            } => nodes::GpuProductRule::Match(compile(&id, &p)?, a),
            _ => {
                return Err(entry_error(
                    &id,
                    "give either rewrite, or match with architecture".to_string(),
                ));
            }
        });
    }
    Ok(nodes::GpuProducts::new(rules_out))
}

fn defaults_rows(rules: &RuleSet) -> Result<Arc<Vec<DefaultsRow>>, PolicyError> {
    fixed_rows(rules, DEFAULTS_TABLE, "gpu-defaults", params::gpu_defaults)
}

/// The architectures `--gpu-arch` accepts: the `selectable` rows without a platform of the
/// defaults table, sorted and deduplicated (`["a100", "b200", …]` with the shipped rows).
///
/// # Errors
/// A missing or malformed defaults table.
pub fn selectable_architectures(rules: &RuleSet) -> Result<Vec<String>, PolicyError> {
    let mut selectable: Vec<String> = defaults_rows(rules)?
        .iter()
        .filter(|r| r.selectable && r.platform.is_none())
        .map(|r| r.gpu_architecture.clone())
        .collect();
    selectable.sort();
    selectable.dedup();
    Ok(selectable)
}

/// Every architecture the defaults table has a row for (selectable or not, any platform),
/// sorted, without the unknown architecture's `""`.
///
/// # Errors
/// A missing or malformed defaults table.
pub fn listed_architectures(rules: &RuleSet) -> Result<Vec<String>, PolicyError> {
    let mut listed: Vec<String> = defaults_rows(rules)?
        .iter()
        .map(|r| r.gpu_architecture.clone())
        .filter(|a| !a.is_empty())
        .collect();
    listed.sort();
    listed.dedup();
    Ok(listed)
}

/// Normalises (by the `gpu-products` table) and checks a `--gpu-arch` value (with the shipped
/// rows, `gb300`, `NVIDIA-GB300` and `NVIDIA GB300` are the same).
///
/// # Errors
/// `invalid --gpu-arch "<v>": must be one of a100, b200, gb200, gb300, h100, h200, l40, l40s`
/// (the selectable rows of the defaults table, sorted); a malformed `gpu-products` table.
pub fn check_gpu_arch(rules: &RuleSet, value: &str) -> Result<String, PolicyError> {
    let arch = gpu_products(rules)?.architecture(value);
    let selectable = selectable_architectures(rules)?;
    if selectable.contains(&arch) {
        Ok(arch)
    } else {
        Err(PolicyError::Usage(format!(
            "invalid --gpu-arch {}: must be one of {}",
            quote(value),
            selectable.join(", ")
        )))
    }
}

/// Defaults for `arch` on `platform` ("" = no platform adjustment): the platform row, else the
/// architecture row, else the unknown-architecture row.
///
/// # Errors
/// A missing or malformed table, or a table without an unknown-architecture row.
pub fn node_defaults(
    rules: &RuleSet,
    arch: &str,
    platform: &str,
) -> Result<NodeDefaults, PolicyError> {
    let rows = defaults_rows(rules)?;
    let find = |p: Option<&str>, a: &str| {
        rows.iter()
            .find(|r| r.platform.as_deref() == p && r.gpu_architecture == a)
            .map(DefaultsRow::defaults)
    };
    (if platform.is_empty() {
        None
    } else {
        find(Some(platform), arch)
    })
    .or_else(|| find(None, arch))
    .or_else(|| find(None, ""))
    .ok_or_else(|| PolicyError::TableEntry {
        location: rules
            .table(DEFAULTS_TABLE)
            .map(|t| t.source.name.clone())
            .unwrap_or_default(),
        table: DEFAULTS_TABLE.to_string(),
        entry: "unknown".to_string(),
        message: "no row for an unknown architecture (gpuArchitecture: \"\")".to_string(),
    })
}

/// Name of the base NCCL env table.
pub const NCCL_ENV_TABLE: &str = "nccl-base-env";

/// The base NCCL env of every workload container, from the `nccl-base-env` table, for the
/// resolved MNNVL setting.
///
/// # Errors
/// A missing or malformed table.
pub fn base_nccl_env(
    rules: &RuleSet,
    enable_mnnvl: bool,
) -> Result<Vec<crate::api::EnvVar>, PolicyError> {
    // One derived value per setting (the key is the setting's).
    let key = if enable_mnnvl {
        "nccl-base-env/mnnvl"
    } else {
        "nccl-base-env"
    };
    Ok(fixed_rows(rules, NCCL_ENV_TABLE, key, || {
        params::nccl_base_env(enable_mnnvl)
    })?
    .to_vec())
}

/// Name of the table that says what `spec.orchestration.testScale` means.
pub const TEST_SCALE_TABLE: &str = "test-scale";

/// What a `spec.orchestration.testScale` value means for the build: a row of the `test-scale`
/// table. The default (no row matches) is `spec.numNodes` nodes per job and no topology.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestScale {
    /// Nodes per job instead of `spec.numNodes`: at least one, an int32.
    #[serde(default)]
    #[schemars(range(min = 1, max = 2147483647))]
    pub nodes_per_job: Option<i64>,
    /// Write `orchestration.topology.strictDomain: true` (one job per topology domain).
    #[serde(default)]
    pub strict_domain: bool,
}

impl TestScale {
    /// Nodes per job for a run of `num_nodes` nodes.
    pub fn nodes_per_job(&self, num_nodes: i64) -> i64 {
        self.nodes_per_job.unwrap_or(num_nodes)
    }
}

/// The first row of the `test-scale` table whose `include` holds for `testScale` (`""` when
/// unset) and `numNodes`, else [`TestScale::default`].
///
/// # Errors
/// A missing or malformed table.
pub fn test_scale(
    rules: &RuleSet,
    test_scale: &str,
    num_nodes: i64,
) -> Result<TestScale, PolicyError> {
    let rows: Vec<TestScale> = table_rows(
        rules,
        TEST_SCALE_TABLE,
        &params::test_scale(test_scale, num_nodes),
    )?;
    Ok(rows.into_iter().next().unwrap_or_default())
}

/// Name of the table of default tolerations.
pub const SCHEDULING_TABLE: &str = "scheduling";

/// A row of the `scheduling` table.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchedulingRow {
    tolerations: Vec<Toleration>,
}

/// A Kubernetes toleration as a `scheduling` row writes it; emitted in this field order with
/// absent fields left out.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Toleration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    effect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    toleration_seconds: Option<i64>,
}

/// The default tolerations of every placement mode, with and without a launcher: the
/// `tolerations` of every matching row of the `scheduling` table (params `placement`,
/// `hasLauncher`), in table order.
///
/// # Errors
/// A missing or malformed table.
pub fn scheduling_policy(rules: &RuleSet) -> Result<SchedulingPolicy, PolicyError> {
    let mut policy = SchedulingPolicy::new();
    for (mode, name) in [
        (PlacementMode::Pinned, "Pinned"),
        (PlacementMode::Unpinned, "Unpinned"),
    ] {
        for has_launcher in [true, false] {
            let rows: Vec<SchedulingRow> = table_rows(
                rules,
                SCHEDULING_TABLE,
                &params::scheduling(name, has_launcher),
            )?;
            let tolerations = rows
                .into_iter()
                .flat_map(|r| r.tolerations)
                .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                .collect();
            policy = policy.with(mode, has_launcher, tolerations);
        }
    }
    Ok(policy)
}

/// Name of the gang-scheduling defaults table.
pub const GANG_DEFAULTS_TABLE: &str = "gang-defaults";

/// The queue and queue label key of a gang scheduler whose spec leaves them unset: the first
/// row of the `gang-defaults` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GangDefaults {
    /// The queue.
    pub queue: String,
    /// The label key that carries the queue.
    pub queue_label_key: String,
}

/// The first row of the `gang-defaults` table.
///
/// # Errors
/// A missing or malformed table, or one without rows.
pub fn gang_defaults(rules: &RuleSet) -> Result<GangDefaults, PolicyError> {
    let table = rules
        .table(GANG_DEFAULTS_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(GANG_DEFAULTS_TABLE.to_string()))?;
    // Decoded and checked once per rule set: the values become labels of every gang-scheduled
    // run, so one that is no label is the table's error, not one of each run relying on it.
    let rows: Arc<Vec<GangDefaults>> = table.derived("gang-defaults", |t| {
        let rows: Vec<GangDefaults> = decoded_rows(t, &Value::Null)?;
        if let (Some(first), Some(entry)) = (rows.first(), t.entries.first()) {
            for (field, value, problems, what) in [
                (
                    "queueLabelKey",
                    &first.queue_label_key,
                    nvcre_engine::label_key_problems(&first.queue_label_key),
                    "label key",
                ),
                (
                    "queue",
                    &first.queue,
                    nvcre_engine::label_value_problems(&first.queue),
                    "label value",
                ),
            ] {
                if !problems.is_empty() {
                    return Err(PolicyError::table_entry(
                        t,
                        &entry.id,
                        format!(
                            "{field}: {} is not a valid {what}: {}",
                            quote(value),
                            problems.join("; ")
                        ),
                    ));
                }
            }
        }
        Ok(rows)
    })?;
    rows.first()
        .cloned()
        .ok_or_else(|| PolicyError::NoMatchingRow {
            table: GANG_DEFAULTS_TABLE.to_string(),
            subject: "a gang scheduler without queue".to_string(),
        })
}

/// What placement reads from `rules`: the `scheduling`, `gpu-products` and `gang-defaults`
/// tables, decoded.
///
/// # Errors
/// As [`scheduling_policy`], [`gpu_products`] and [`gang_defaults`].
pub fn placement_policy(rules: &RuleSet) -> Result<PlacementPolicy, PolicyError> {
    Ok(PlacementPolicy {
        scheduling: scheduling_policy(rules)?,
        gpu_products: gpu_products(rules)?,
        gang_defaults: gang_defaults(rules)?,
    })
}

/// Go `%q` for plain strings: double quotes with `"` and `\` escaped.
pub(crate) fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;
    use serde_json::json;

    /// A rule set of one fixture table, loaded with the pipeline contract.
    fn fixture(text: &str) -> RuleSet {
        RuleSet::load(
            &[nvcre_engine::Source::new("fixture.yaml", text)],
            Some(&crate::packs::contract().expect("contract")),
        )
        .expect("fixture loads")
    }

    #[test]
    fn the_first_matching_row_decides_and_no_row_is_an_error() {
        let rules = fixture(
            "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: platform-detection}\nentries:\n  - {id: a, include: \"params.node.providerID.startsWith('a://')\", platform: pa}\n  - {id: b, include: \"'x' in params.node.labels\", platform: pb}\n",
        );
        let labels = json!({"x": ""}).as_object().cloned().unwrap_or_default();
        assert_eq!(detect_platform(&rules, "a://1", &labels).unwrap(), "pa");
        assert_eq!(detect_platform(&rules, "c://1", &labels).unwrap(), "pb");
        assert_eq!(
            detect_platform(&rules, "c://1", &Map::new())
                .unwrap_err()
                .to_string(),
            "no row of table \"platform-detection\" matches node (providerID \"c://1\"); the table decides every case, so end it with a catch-all row (include: \"true\")"
        );
    }

    #[test]
    fn gang_defaults_that_are_no_labels_are_the_table_s_error() {
        let table = |key: &str, queue: &str| {
            fixture(&format!(
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {{name: gang-defaults}}\nentries:\n  - {{id: only, queue: '{queue}', queueLabelKey: '{key}'}}\n"
            ))
        };
        assert_eq!(
            gang_defaults(&table("example.com/queue", "q"))
                .unwrap()
                .queue_label_key,
            "example.com/queue"
        );
        assert_eq!(
            gang_defaults(&table("bad key", "q"))
                .unwrap_err()
                .to_string(),
            "fixture.yaml:5:5: table gang-defaults, entry only: queueLabelKey: \"bad key\" is not a valid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert!(
            gang_defaults(&table("k", "team a"))
                .unwrap_err()
                .to_string()
                .starts_with("fixture.yaml:5:5: table gang-defaults, entry only: queue: \"team a\" is not a valid label value: ")
        );
    }

    /// Fixture detection and defaults tables (not the shipped ones, whose rows the rule
    /// suites pin): the lookup mechanism over these values.
    const FIXTURE_TABLES: &str = "apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: platform-detection}
entries:
  - {id: b, include: \"params.node.providerID.startsWith('b://')\", platform: pb, synthetic: {order: 2, providerID: 'b://0'}}
  - {id: a, include: \"params.node.providerID.startsWith('a://')\", platform: pa, synthetic: {order: 1, providerID: 'a://0'}}
  - {id: c, include: 'true', platform: pc}
---
apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: gpu-defaults}
entries:
  - {id: x1, gpuArchitecture: x1, gpusPerNode: 8, mlnxPerNode: 8, enableMNNVL: false, selectable: true}
  - {id: g2, gpuArchitecture: g2, gpusPerNode: 4, mlnxPerNode: 8, enableMNNVL: true, selectable: true}
  - {id: hidden, gpuArchitecture: hidden, gpusPerNode: 2, mlnxPerNode: 0, enableMNNVL: false}
  - {id: unknown, gpuArchitecture: '', gpusPerNode: 1, mlnxPerNode: 0, enableMNNVL: false}
  - {id: pa-g2, platform: pa, gpuArchitecture: g2, gpusPerNode: 4, mlnxPerNode: 2, enableMNNVL: true}
---
apiVersion: policy.nvcre.nvidia.com/v1alpha1
kind: Table
metadata: {name: gpu-products}
entries:
  - {id: spaces, rewrite: {pattern: ' ', replacement: '-'}}
  - {id: vendor, match: '^VENDOR-([^-]+)', architecture: '$1'}
  - {id: other, match: '^([^-]*)', architecture: '$1'}
";

    #[test]
    fn flag_checks_list_the_tables_values() {
        let rules = fixture(FIXTURE_TABLES);
        assert_eq!(check_gpu_arch(&rules, "VENDOR G2-X").expect("ok"), "g2");
        assert_eq!(check_gpu_arch(&rules, "x1").expect("ok"), "x1");
        assert_eq!(
            check_gpu_arch(&rules, "hidden").unwrap_err().to_string(),
            "invalid --gpu-arch \"hidden\": must be one of g2, x1"
        );
        assert_eq!(
            check_platform(&rules, "pc").unwrap_err().to_string(),
            "invalid --platform \"pc\": must be one of pa, pb"
        );
        assert_eq!(
            check_platform(&rules, "pb").expect("ok").provider_id,
            "b://0"
        );
    }

    #[test]
    fn defaults_prefer_the_platform_row_then_the_architecture_then_unknown() {
        let rules = fixture(FIXTURE_TABLES);
        let d = |a: &str, p: &str| {
            let n = node_defaults(&rules, a, p).expect("row");
            (n.gpus_per_node, n.mlnx_per_node, n.enable_mnnvl)
        };
        assert_eq!(d("g2", "pa"), (4, 2, true));
        assert_eq!(d("g2", "pb"), (4, 8, true));
        assert_eq!(d("g2", ""), (4, 8, true));
        assert_eq!(d("", ""), (1, 0, false));
        assert_eq!(d("v100", "pa"), (1, 0, false));
    }

    #[test]
    fn detection_takes_the_first_matching_row() {
        let rules = fixture(FIXTURE_TABLES);
        let none = Map::new();
        assert_eq!(detect_platform(&rules, "a://1", &none).expect("row"), "pa");
        assert_eq!(detect_platform(&rules, "b://1", &none).expect("row"), "pb");
        assert_eq!(detect_platform(&rules, "z://1", &none).expect("row"), "pc");
    }
}

#[cfg(test)]
mod gpu_product_tests {
    use super::*;

    fn rules(entries: &str) -> RuleSet {
        RuleSet::load(
            &[nvcre_engine::Source::new(
                "fixture.yaml",
                format!("apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {{name: gpu-products}}\nentries:\n{entries}"),
            )],
            Some(&crate::packs::contract().expect("contract")),
        )
        .expect("fixture loads")
    }

    #[test]
    fn rewrites_apply_first_then_the_first_match() {
        let p = gpu_products(&rules(
            "  - {id: m1, match: '^A-(.+)$', architecture: 'a$1'}\n  - {id: r, rewrite: {pattern: '_', replacement: '-'}}\n  - {id: m2, match: '^(.+)$', architecture: '$1'}\n",
        ))
        .expect("decodes");
        assert_eq!(p.architecture("A_X"), "ax");
        assert_eq!(p.architecture("B_Y"), "b-y");
    }

    #[test]
    fn bad_rows_name_the_entry() {
        let err = |entries: &str| gpu_products(&rules(entries)).unwrap_err().to_string();
        assert_eq!(
            err("  - {id: x, match: '^x$'}\n"),
            "fixture.yaml:5:5: table gpu-products, entry x: give either rewrite, or match with architecture"
        );
        // A pattern that does not compile refuses the whole set where it is loaded.
        let refused = RuleSet::load(
            &[nvcre_engine::Source::new(
                "fixture.yaml",
                "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: gpu-products}\nentries:\n  - {id: y, match: '(', architecture: a}\n",
            )],
            Some(&crate::packs::contract().expect("contract")),
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(
            refused
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [
                "rule pack error: fixture.yaml:5:20: entry y: row does not match the schema of table \"gpu-products\": invalid regex \"(\": missing closing ): `(`"
            ]
        );
    }
}
