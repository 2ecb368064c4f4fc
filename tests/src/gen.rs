//! proptest generators of WorkloadRuns and node sets.
//!
//! What the shipped rules know (selectable platforms and their synthetic provider IDs, selectable
//! GPU architectures, the base NCCL env, the gang defaults) is read from the rule set at run time
//! into a [`Catalog`], so a new table row is generated without editing this module.
//!
//! - [`workload_run`]: a valid [`RunCase`] (every framework, gang on and off with every queue
//!   label key shape, user env overlapping the base NCCL env, `valueFrom` variables, user
//!   overrides of every kind that leave the queue label alone).
//! - [`label_key`] / [`label_value`]: label strings at and past every length limit, with
//!   reserved prefixes and near-miss characters; [`crate::k8s`] says which are valid.
//! - [`node_set`]: [`NodeSetCase`]s of GPU nodes (sizes, topology domains, `gpu.product`,
//!   providerIDs, taints, cordons).
//!
//! Every case prints as YAML a person can paste into `nvcre-policy render`
//! ([`RunCase::yaml`], [`RunCase::counterexample`]).

use std::collections::BTreeMap;

use nvcre_domain::{gang_defaults, selectable_platforms, table_values};
use nvcre_engine::{Expr, FieldPath, RuleSet};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// What the rule set knows, read from its tables.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// `(platform, synthetic providerID)` of every selectable platform, in `--platform` order.
    pub platforms: Vec<(String, String)>,
    /// Selectable GPU architectures (`gpu-defaults` rows with `selectable: true`).
    pub gpu_architectures: Vec<String>,
    /// Names of the base NCCL env (`nccl-base-env`).
    pub base_env: Vec<String>,
    /// The default gang queue.
    pub default_queue: String,
    /// The default gang queue label key.
    pub default_queue_label_key: String,
}

impl Catalog {
    /// Reads the catalog from `rules`.
    ///
    /// # Errors
    /// A table the pipeline needs is missing or does not render.
    pub fn from_rules(rules: &RuleSet) -> Result<Catalog, String> {
        let platforms = selectable_platforms(rules)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(p, s)| (p, s.provider_id))
            .collect();
        let selectable = Expr::compile("row.?selectable.orValue(false)").map_err(|e| e.message)?;
        let strings = |v: Vec<Value>| -> Vec<String> {
            v.into_iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        };
        let field = |f: &str| FieldPath::parse(f).map_err(|e| e.message);
        let gpu_architectures = strings(table_values(
            rules,
            "gpu-defaults",
            &field("gpuArchitecture")?,
            Some(&selectable),
        )?);
        let base_env = strings(table_values(rules, "nccl-base-env", &field("name")?, None)?);
        let gang = gang_defaults(rules).map_err(|e| e.to_string())?;
        Ok(Catalog {
            platforms,
            gpu_architectures,
            base_env,
            default_queue: gang.queue,
            default_queue_label_key: gang.queue_label_key,
        })
    }
}

/// The framework of a generated run.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameworkCase {
    /// `torch.script` (or `torch.module` when `module`).
    Torch {
        /// Script or module name.
        entry: String,
        /// `module` instead of `script`.
        module: bool,
    },
    /// `mpi` with extra mpirun args (never `-x`, which would be the user's own forward).
    Mpi {
        /// `mpiArgs`.
        mpi_args: Vec<String>,
    },
    /// `exec`.
    Exec,
}

/// One user env variable.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvCase {
    /// Name.
    pub name: String,
    /// Literal value; `None` for a `valueFrom` secret reference.
    pub value: Option<String>,
}

/// `spec.gangScheduler` of a generated run.
#[derive(Debug, Clone, PartialEq)]
pub struct GangCase {
    /// `schedulerName`.
    pub scheduler: String,
    /// `queue` (`""`: the default queue).
    pub queue: String,
    /// `queueLabelKey` (`""`: the default key).
    pub key: String,
}

impl GangCase {
    /// The queue after defaults.
    pub fn resolved_queue(&self, cat: &Catalog) -> String {
        if self.queue.is_empty() {
            cat.default_queue.clone()
        } else {
            self.queue.clone()
        }
    }

    /// The queue label key after defaults.
    pub fn resolved_key(&self, cat: &Catalog) -> String {
        if self.key.is_empty() {
            cat.default_queue_label_key.clone()
        } else {
            self.key.clone()
        }
    }
}

/// Queue label key shapes: empty (the default), the shipped schedulers' keys, a prefixed key of
/// another domain and a bare name.
pub const QUEUE_KEY_SHAPES: &[&str] = &[
    "",
    "kai.scheduler/queue",
    "runai/queue",
    "kueue.x-k8s.io/queue-name",
    "scheduling.example.com/queue",
    "queue",
];

/// A generated WorkloadRun with the node context to render it in.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCase {
    /// `metadata.name`.
    pub name: String,
    /// `--platform`.
    pub platform: String,
    /// `--gpu-arch`.
    pub gpu_arch: String,
    /// `spec.numNodes`.
    pub num_nodes: i64,
    /// `spec.framework`.
    pub framework: FrameworkCase,
    /// `spec.gangScheduler`.
    pub gang: Option<GangCase>,
    /// `spec.env`.
    pub env: Vec<EnvCase>,
    /// `spec.workloadMetadata.labels` (valid, unreserved, not a queue key).
    pub labels: BTreeMap<String, String>,
    /// `spec.overrides`.
    pub overrides: Vec<Value>,
}

impl RunCase {
    /// The WorkloadRun document.
    pub fn document(&self) -> Value {
        let framework = match &self.framework {
            FrameworkCase::Torch { entry, module } => {
                json!({"torch": {(if *module { "module" } else { "script" }): entry}})
            }
            FrameworkCase::Mpi { mpi_args } => {
                let mut m = json!({"binary": "/usr/local/bin/all_reduce_perf_mpi",
                    "mpirunPath": "/usr/local/mpi/bin/mpirun", "args": ["-b", "8", "-e", "1G"]});
                if !mpi_args.is_empty() {
                    m["mpiArgs"] = json!(mpi_args);
                }
                json!({ "mpi": m })
            }
            FrameworkCase::Exec => json!({"exec": {"command": ["python", "train.py"]}}),
        };
        let mut spec = Map::new();
        spec.insert("image".into(), json!("nvcr.io/nvidia/pytorch:26.01-py3"));
        spec.insert("numNodes".into(), json!(self.num_nodes));
        spec.insert("framework".into(), framework);
        if let Some(g) = &self.gang {
            let mut gs = Map::new();
            gs.insert("schedulerName".into(), json!(g.scheduler));
            if !g.queue.is_empty() {
                gs.insert("queue".into(), json!(g.queue));
            }
            if !g.key.is_empty() {
                gs.insert("queueLabelKey".into(), json!(g.key));
            }
            spec.insert("gangScheduler".into(), Value::Object(gs));
        }
        if !self.env.is_empty() {
            let env: Vec<Value> = self
                .env
                .iter()
                .map(|e| match &e.value {
                    Some(v) => json!({"name": e.name, "value": v}),
                    None => json!({"name": e.name, "valueFrom": {"secretKeyRef": {"name": "nccl-secrets", "key": e.name.to_lowercase()}}}),
                })
                .collect();
            spec.insert("env".into(), Value::Array(env));
        }
        if !self.labels.is_empty() {
            spec.insert(
                "workloadMetadata".into(),
                json!({ "labels": self.labels.clone() }),
            );
        }
        if !self.overrides.is_empty() {
            spec.insert("overrides".into(), Value::Array(self.overrides.clone()));
        }
        json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "WorkloadRun",
            "metadata": {"name": self.name},
            "spec": spec,
        })
    }

    /// The document as YAML.
    pub fn yaml(&self) -> String {
        nvcre_engine::to_yaml(&self.document()).unwrap_or_else(|e| e.to_string())
    }

    /// The command that renders the case, then its YAML: what a failing property prints.
    pub fn counterexample(&self) -> String {
        format!(
            "# nvcre-policy render --platform {} --gpu-arch {} counterexample.yaml\n{}",
            self.platform,
            self.gpu_arch,
            self.yaml()
        )
    }
}

/// A DNS-1123 name of 1 to `max` characters.
fn dns_name(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!(
        "[a-z]([-a-z0-9]{{0,{}}}[a-z0-9])?",
        max.saturating_sub(2)
    ))
    .unwrap_or_else(|e| panic!("{e}"))
}

fn regex(p: &str) -> BoxedStrategy<String> {
    proptest::string::string_regex(p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .boxed()
}

/// Every framework: torch (script or module), mpi (with or without extra mpirun args), exec.
pub fn framework() -> impl Strategy<Value = FrameworkCase> {
    prop_oneof![
        (regex("[a-z][a-z0-9_]{0,12}"), any::<bool>()).prop_map(|(e, module)| {
            FrameworkCase::Torch {
                entry: if module { e } else { format!("{e}.py") },
                module,
            }
        }),
        proptest::collection::vec(
            prop_oneof![
                Just(vec!["--bind-to".to_string(), "none".to_string()]),
                Just(vec![
                    "--mca".to_string(),
                    "btl".to_string(),
                    "^openib".to_string()
                ]),
                Just(vec!["--report-bindings".to_string()]),
            ],
            0..3
        )
        .prop_map(|a| FrameworkCase::Mpi {
            mpi_args: a.concat()
        }),
        Just(FrameworkCase::Exec),
    ]
}

/// Gang on (every scheduler, queue empty or named, every queue key shape) or off.
pub fn gang() -> impl Strategy<Value = Option<GangCase>> {
    proptest::option::of(
        (
            proptest::sample::select(vec!["kai-scheduler", "runai-scheduler", "volcano"]),
            regex("|[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"),
            proptest::sample::select(QUEUE_KEY_SHAPES.to_vec()),
        )
            .prop_map(|(s, q, k)| GangCase {
                scheduler: s.to_string(),
                queue: q,
                key: k.to_string(),
            }),
    )
}

/// User env: names of the base NCCL env and others, literal values (spaces, quotes and `=`
/// included) or `valueFrom`, each name once.
pub fn env(cat: &Catalog) -> impl Strategy<Value = Vec<EnvCase>> {
    let names = prop_oneof![
        proptest::sample::select(cat.base_env.clone()),
        Just("NCCL_NET_PLUGIN".to_string()),
        Just("NCCL_IB_HCA".to_string()),
        regex("MY_[A-Z0-9_]{1,8}"),
    ];
    let value = proptest::option::weighted(0.8, regex("[A-Za-z0-9 _,.:=/\"-]{0,16}"));
    proptest::collection::btree_map(names, value, 0..5).prop_map(|m| {
        m.into_iter()
            .map(|(name, value)| EnvCase { name, value })
            .collect()
    })
}

/// Valid, unreserved workload labels that are not a queue key shape.
pub fn plain_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        regex("team-[a-z0-9]{1,10}|example\\.com/[a-z][a-z0-9]{0,10}"),
        regex("(([A-Za-z0-9][-A-Za-z0-9_.]{0,20})?[A-Za-z0-9])?"),
        0..4,
    )
}

/// User overrides that leave the gang queue label alone: a merge adding unrelated labels, a
/// JSON Patch adding jobTemplate metadata, an extra dependency, an orchestration field; each
/// unconditional or for one platform.
pub fn overrides(cat: &Catalog) -> impl Strategy<Value = Vec<Value>> {
    let platforms: Vec<String> = cat.platforms.iter().map(|(p, _)| p.clone()).collect();
    let when = proptest::option::of(proptest::sample::select(platforms));
    let body = prop_oneof![
        (regex("extra-[a-z0-9]{1,8}"), regex("[a-z0-9]{0,8}")).prop_map(|(k, v)| json!({
            "jobTemplate": {"spec": {"workloadMetadata": {"labels": {k: v}}}}
        })),
        regex("[a-z0-9]{1,8}").prop_map(|v| json!({
            "jobTemplatePatch": [{"op": "add", "path": "/metadata", "value": {"annotations": {"example.com/note": v}}}]
        })),
        dns_name(20).prop_map(|n| json!({
            "dependencies": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("extra-{n}")}, "data": {"k": "v"}}]
        })),
        (1i64..4).prop_map(|n| json!({"orchestration": {"iterations": n}})),
    ];
    proptest::collection::vec((when, body), 0..3).prop_map(|v| {
        v.into_iter()
            .map(|(when, mut body)| {
                // `when` is required; empty, the override always applies.
                body["when"] = match when {
                    Some(p) => json!({"platform": {"equals": p}}),
                    None => json!({}),
                };
                body
            })
            .collect()
    })
}

/// A valid WorkloadRun for a selectable platform and architecture.
pub fn workload_run(cat: &Catalog) -> impl Strategy<Value = RunCase> {
    let platforms: Vec<String> = cat.platforms.iter().map(|(p, _)| p.clone()).collect();
    (
        dns_name(30),
        proptest::sample::select(platforms),
        proptest::sample::select(cat.gpu_architectures.clone()),
        1i64..5,
        framework(),
        gang(),
        env(cat),
        plain_labels(),
        overrides(cat),
    )
        .prop_map(
            |(name, platform, gpu_arch, num_nodes, framework, gang, env, labels, overrides)| {
                RunCase {
                    name,
                    platform,
                    gpu_arch,
                    num_nodes,
                    framework,
                    gang,
                    env,
                    labels,
                    overrides,
                }
            },
        )
}

/// A valid MPI WorkloadRun (for the `-x` forwarding properties).
pub fn mpi_run(cat: &Catalog) -> impl Strategy<Value = RunCase> {
    (
        workload_run(cat),
        proptest::collection::vec(
            Just(vec!["--bind-to".to_string(), "none".to_string()]),
            0..2,
        ),
    )
        .prop_map(|(mut r, a)| {
            r.framework = FrameworkCase::Mpi {
                mpi_args: a.concat(),
            };
            r
        })
}

/// A WorkloadRun with a gang scheduler.
pub fn gang_run(cat: &Catalog) -> impl Strategy<Value = RunCase> {
    (workload_run(cat), gang().prop_filter_map("gang on", |g| g)).prop_map(|(mut r, g)| {
        r.gang = Some(g);
        r
    })
}

/// Label keys, valid and near-miss invalid: at and past the 63-character name and
/// 253-character prefix limits, empty parts, three parts, upper case in the prefix, bad first
/// and last characters, the reserved keys.
pub fn label_key() -> BoxedStrategy<String> {
    prop_oneof![
        regex("[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"),
        regex(
            "[a-z0-9]{1,10}(\\.[a-z0-9]{1,10}){0,2}/[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?"
        ),
        (62usize..66).prop_map(|n| "n".repeat(n)),
        (251usize..256).prop_map(|n| format!("{}/name", "p".repeat(n))),
        (62usize..66).prop_map(|n| format!("example.com/{}", "n".repeat(n))),
        Just("/name".to_string()),
        Just("example.com/".to_string()),
        Just("a/b/c".to_string()),
        regex("[A-Z]{1,5}\\.com/[a-z]{1,5}"),
        regex("[-_.][a-z]{0,5}|[a-z]{0,5}[-_.]"),
        regex("[a-z]{1,5}[ !@#:][a-z]{1,5}"),
        regex("nvcre\\.nvidia\\.com/[a-z]{1,10}"),
        Just("app.kubernetes.io/managed-by".to_string()),
    ]
    .boxed()
}

/// Label values, valid and near-miss invalid: empty, at and past 63 characters, bad first and
/// last characters, characters outside the pattern.
pub fn label_value() -> BoxedStrategy<String> {
    prop_oneof![
        regex("(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?"),
        (62usize..66).prop_map(|n| "v".repeat(n)),
        regex("[-_.][a-z]{0,5}|[a-z]{0,5}[-_.]"),
        regex("[a-z]{1,5}[ /!@#:][a-z]{1,5}"),
    ]
    .boxed()
}

/// One generated node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCase {
    /// `metadata.name`.
    pub name: String,
    /// `nvidia.com/gpu.product`.
    pub product: String,
    /// `spec.providerID`.
    pub provider_id: String,
    /// The topology domain label value, when labelled.
    pub domain: Option<String>,
    /// `spec.taints` keys (effect NoSchedule).
    pub taints: Vec<String>,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    /// `status.allocatable["nvidia.com/gpu"]`.
    pub gpus: u32,
}

/// A generated node set: the nodes, and the topology label key their domains are under.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSetCase {
    /// The nodes, names unique.
    pub nodes: Vec<NodeCase>,
    /// The topology label key.
    pub topology_key: String,
}

impl NodeSetCase {
    /// Node documents (v1 Node).
    pub fn documents(&self) -> Vec<Value> {
        self.nodes
            .iter()
            .map(|n| {
                let mut labels = json!({
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": n.product,
                    "kubernetes.io/hostname": n.name,
                });
                if let Some(d) = &n.domain {
                    labels[&self.topology_key] = json!(d);
                }
                let mut spec = json!({"providerID": n.provider_id});
                if n.cordoned {
                    spec["unschedulable"] = json!(true);
                }
                if !n.taints.is_empty() {
                    spec["taints"] = Value::Array(
                        n.taints
                            .iter()
                            .map(|k| json!({"key": k, "effect": "NoSchedule"}))
                            .collect(),
                    );
                }
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": n.name, "labels": labels},
                    "spec": spec,
                    "status": {"allocatable": {"nvidia.com/gpu": n.gpus.to_string()}},
                })
            })
            .collect()
    }
}

/// Node sets of 1 to `max` nodes of one platform: GPU products of the catalog's architectures
/// (mostly one, sometimes a second), topology domains (some nodes unlabelled when
/// `all_labelled` is false), taints, cordons and GPU counts.
pub fn node_set(
    cat: &Catalog,
    max: usize,
    all_labelled: bool,
) -> impl Strategy<Value = NodeSetCase> {
    let products: Vec<String> = cat
        .gpu_architectures
        .iter()
        .map(|a| format!("NVIDIA-{}-80GB", a.to_uppercase()))
        .collect();
    let providers: Vec<String> = cat.platforms.iter().map(|(_, p)| p.clone()).collect();
    (
        proptest::sample::select(products.clone()),
        proptest::sample::select(products),
        proptest::sample::select(providers),
        proptest::sample::select(vec![
            "topology.kubernetes.io/zone",
            "network.topology.nvidia.com/block",
            "nvidia.com/gpu.clique",
        ]),
        proptest::collection::vec(
            (
                0u8..10,
                proptest::option::weighted(0.8, 0u8..4),
                proptest::collection::vec(
                    proptest::sample::select(vec!["gpu-only", "maintenance"]),
                    0..2,
                ),
                proptest::bool::weighted(0.1),
                proptest::sample::select(vec![4u32, 8, 8, 8]),
            ),
            1..=max,
        ),
    )
        .prop_map(move |(main, other, provider, key, nodes)| NodeSetCase {
            topology_key: key.to_string(),
            nodes: nodes
                .into_iter()
                .enumerate()
                .map(|(i, (p, domain, taints, cordoned, gpus))| NodeCase {
                    name: format!("gpu-node-{i:03}"),
                    product: if p == 0 { other.clone() } else { main.clone() },
                    provider_id: if provider.is_empty() {
                        String::new()
                    } else {
                        format!("{provider}-{i}")
                    },
                    domain: match domain {
                        Some(d) => Some(format!("domain-{d}")),
                        None if all_labelled => Some("domain-0".to_string()),
                        None => None,
                    },
                    taints: {
                        let mut t: Vec<String> = taints.iter().map(|s| s.to_string()).collect();
                        t.sort();
                        t.dedup();
                        t
                    },
                    cordoned,
                    gpus,
                })
                .collect(),
        })
}
