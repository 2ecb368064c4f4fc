//! Detection and per-node defaults, read from the rule tables `platform-detection` and
//! `gpu-defaults`; the `--platform` / `--gpu-arch` value checks, with the original `nvcrectl`
//! messages.

use nvcre_engine::RuleSet;
use serde::Deserialize;
use serde_json::Value;

use crate::error::PolicyError;
use crate::nodes;
use crate::packs::params;

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
    /// GPUs per node.
    gpus_per_node: i64,
    /// Mellanox NICs per node.
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
    value: Value,
) -> Result<T, PolicyError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let pos = table.entries.iter().find(|x| x.id == id).map(|x| x.pos);
        let path = e.path().to_string();
        PolicyError::TableEntry {
            location: format!(
                "{}{}",
                table.source.name,
                pos.map(|p| format!(":{p}")).unwrap_or_default()
            ),
            table: table.name.clone(),
            entry: id.to_string(),
            message: if path == "." {
                e.inner().to_string()
            } else {
                format!("{path}: {}", e.inner())
            },
        }
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
    table
        .render(params)?
        .into_iter()
        .map(|(id, v)| decode_row(table, &id, v))
        .collect()
}

/// The platforms `--platform` accepts, in message order, with their synthetic nodes.
///
/// # Errors
/// A missing or malformed `platform-detection` table.
pub fn selectable_platforms(rules: &RuleSet) -> Result<Vec<(String, SyntheticNode)>, PolicyError> {
    let table = rules
        .table(PLATFORM_TABLE)
        .ok_or_else(|| PolicyError::MissingTable(PLATFORM_TABLE.to_string()))?;
    // Render every entry (ignore `include`): a row is selectable when it has `synthetic`.
    let mut out = Vec::new();
    let rows: Vec<PlatformRow> = table
        .render_all(&params::platform_detection("", &serde_json::Map::new()))?
        .into_iter()
        .map(|(id, v)| decode_row(table, &id, v))
        .collect::<Result<_, _>>()?;
    for r in rows {
        if let Some(s) = r.synthetic {
            out.push((r.platform, s));
        }
    }
    out.sort_by_key(|(_, s)| s.order);
    Ok(out)
}

/// Checks a `--platform` value.
///
/// # Errors
/// `invalid --platform "<v>": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale`.
pub fn check_platform(rules: &RuleSet, platform: &str) -> Result<SyntheticNode, PolicyError> {
    let all = selectable_platforms(rules)?;
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

/// Platform of a node, by the first matching row of the detection table.
///
/// # Errors
/// A missing or malformed table.
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
    Ok(rows
        .into_iter()
        .next()
        .map(|r| r.platform)
        .unwrap_or_else(|| "onprem".to_string()))
}

/// GPU architecture of a `--gpu-arch` value or a `nvidia.com/gpu.product` label: spaces count as
/// `-` (so `NVIDIA GB300` works on the command line), then [`nodes::normalize_gpu_product`].
pub fn normalize_gpu_arch(value: &str) -> String {
    nodes::normalize_gpu_product(&value.trim().replace(' ', "-"))
}

fn defaults_rows(rules: &RuleSet) -> Result<Vec<DefaultsRow>, PolicyError> {
    table_rows(rules, DEFAULTS_TABLE, &params::gpu_defaults())
}

/// Normalises and checks a `--gpu-arch` value (`gb300`, `NVIDIA-GB300` and `NVIDIA GB300` are
/// the same).
///
/// # Errors
/// `invalid --gpu-arch "<v>": must be one of a100, b200, gb200, gb300, h100, h200, l40, l40s`
/// (the selectable rows of the defaults table, sorted).
pub fn check_gpu_arch(rules: &RuleSet, value: &str) -> Result<String, PolicyError> {
    let arch = normalize_gpu_arch(value);
    let mut selectable: Vec<String> = defaults_rows(rules)?
        .into_iter()
        .filter(|r| r.selectable && r.platform.is_none())
        .map(|r| r.gpu_architecture)
        .collect();
    selectable.sort();
    selectable.dedup();
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
    table_rows(rules, NCCL_ENV_TABLE, &params::nccl_base_env(enable_mnnvl))
}

/// Go `%q` for plain strings: double quotes with `"` and `\` escaped.
pub(crate) fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packs::default_rules;
    use serde_json::json;

    #[test]
    fn flag_spellings() {
        for (flag, arch) in [
            ("gb300", "gb300"),
            ("NVIDIA-GB300", "gb300"),
            ("NVIDIA GB300", "gb300"),
            (" h100 ", "h100"),
        ] {
            assert_eq!(normalize_gpu_arch(flag), arch, "{flag}");
        }
    }

    #[test]
    fn flag_checks_have_the_exact_messages() {
        let rules = default_rules().expect("rules");
        assert_eq!(check_gpu_arch(&rules, "NVIDIA-GB300").expect("ok"), "gb300");
        assert_eq!(
            check_gpu_arch(&rules, "v100").unwrap_err().to_string(),
            "invalid --gpu-arch \"v100\": must be one of a100, b200, gb200, gb300, h100, h200, l40, l40s"
        );
        assert_eq!(
            check_platform(&rules, "bogus").unwrap_err().to_string(),
            "invalid --platform \"bogus\": must be one of aws, gcp, azure, oci, onprem, togetherai, mistral, forge, nscale"
        );
    }

    #[test]
    fn defaults_with_platform_adjustments() {
        let rules = default_rules().expect("rules");
        let d = |a: &str, p: &str| {
            let n = node_defaults(&rules, a, p).expect("row");
            (n.gpus_per_node, n.mlnx_per_node, n.enable_mnnvl)
        };
        assert_eq!(d("h100", "aws"), (8, 8, false));
        assert_eq!(d("gb300", ""), (4, 8, true));
        assert_eq!(d("gb200", "oci"), (4, 0, true));
        assert_eq!(d("l40s", "oci"), (4, 2, false));
        assert_eq!(d("l40", ""), (8, 4, false));
        assert_eq!(d("", ""), (4, 0, false));
        assert_eq!(d("v100", ""), (4, 0, false));
    }

    #[test]
    fn provider_id_table() {
        let rules = default_rules().expect("rules");
        let labels = |v: Value| v.as_object().cloned().unwrap_or_default();
        for (pid, l, want) in [
            ("aws:///us-west-2a/i-0cd1", json!({}), "aws"),
            ("gce://p/z/n", json!({}), "gcp"),
            ("azure:///subscriptions/x", json!({}), "azure"),
            ("ocid1.instance.oc1", json!({}), "oci"),
            ("oci://ocid1.instance.oc1", json!({}), "oci"),
            ("openstack:///uuid", json!({}), "onprem"),
            ("nscale://n", json!({}), "nscale"),
            (
                "kubevirt://n",
                json!({"node-role.together.ai/worker": ""}),
                "togetherai",
            ),
            ("kubevirt://n", json!({}), "onprem"),
            ("metal3://n", json!({}), "mistral"),
            ("", json!({"kubernetes.io/hostname": "forge-12"}), "forge"),
            ("", json!({"nke.nvidia.com/site-name": "x"}), "forge"),
            ("", json!({}), "onprem"),
            ("hcloud://1", json!({}), "onprem"),
        ] {
            assert_eq!(
                detect_platform(&rules, pid, &labels(l)).expect("row"),
                want,
                "{pid}"
            );
        }
    }
}
