//! Serde types of the NVCRE API: `WorkloadRun` and `Workflow` (`nvcre.nvidia.com/v1alpha1`).
//!
//! Field names and meanings are those of the original CRDs (the `nvcre.nvidia.com`
//! API). Kubernetes core types that NVCRE passes through untouched (Volume, Container,
//! ResourceRequirements, tolerations, …) are kept as JSON values so nothing the user wrote is
//! lost or reshaped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion` of WorkloadRun and Workflow.
pub const API_VERSION: &str = "nvcre.nvidia.com/v1alpha1";
/// The older fork's group, accepted on input with a warning.
pub const LEGACY_API_VERSION: &str = "cre.nvidia.com/v1alpha1";
/// `apiVersion` of the Kubeflow Trainer objects NVCRE generates (TrainingRuntime, TrainJob).
pub const TRAINER_API_VERSION: &str = "trainer.kubeflow.org/v1alpha1";
/// The field manager of the controller-owned TrainJob runtimePatches entry.
pub const CONTROLLER_MANAGER: &str = "nvcre.nvidia.com/controller";
/// Label key identifying the managing controller.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "nvcre";
/// The GPU extended resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Object metadata: the parts NVCRE reads or writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A WorkloadRun document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRun {
    /// `nvcre.nvidia.com/v1alpha1` (or the legacy group on input).
    #[serde(default)]
    pub api_version: String,
    /// `WorkloadRun`.
    #[serde(default)]
    pub kind: String,
    /// Metadata; `name` names the Workflow and every generated object.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec (immutable after creation). Required: the admission rules report its absence.
    #[serde(default)]
    pub spec: WorkloadRunSpec,
    /// Status, passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// `WorkloadRun.spec`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema, kube::CustomResource,
)]
// Each printcolumn(...) repeats `type_`; clippy reads that as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "nvcre.nvidia.com",
    version = "v1alpha1",
    kind = "WorkloadRun",
    root = "WorkloadRunResource",
    derive = "PartialEq",
    plural = "workloadruns",
    shortname = "wr",
    namespaced,
    status = "crate::crd::WorkloadRunStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Platform",
        type_ = "string",
        json_path = ".status.detectedPlatform"
    ),
    printcolumn(
        name = "GPU",
        type_ = "string",
        json_path = ".status.detectedGPUArchitecture"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable after creation"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_workload_run_spec)]
pub struct WorkloadRunSpec {
    /// Workload container image.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub image: String,
    /// Exactly one of torch / mpi / exec.
    #[serde(default)]
    pub framework: Framework,
    /// Nodes per job group (Pinned) or exactly the job size (Unpinned).
    #[serde(default)]
    #[schemars(range(min = 1), extend("format" = "int32"))]
    pub num_nodes: i64,
    /// Eligible nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetSpec>,
    /// GPUs per node; default from the architecture table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("format" = "int32"))]
    pub gpus_per_node: Option<i64>,
    /// Mellanox NICs per node; default from the architecture/platform table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("format" = "int32"))]
    pub mlnx_per_node: Option<i64>,
    /// Extended resource name of the RDMA NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 253),
        regex(
            pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[a-zA-Z0-9]([-A-Za-z0-9_.]{0,61}[a-zA-Z0-9])?$"
        )
    )]
    #[x_kube(validation = Rule::new("!self.contains('kubernetes.io/') && !self.startsWith('k8s.io/') && !self.contains('.k8s.io/')").message("nicResourceName must not use the reserved kubernetes.io or k8s.io domains"))]
    pub nic_resource_name: Option<String>,
    /// Image pull secrets (LocalObjectReference list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub image_pull_secrets: Vec<Value>,
    /// Container env, merged over the base NCCL env by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Extra pod volumes (after `dshm`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub volumes: Vec<Value>,
    /// Extra container mounts (after `dshm`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub volume_mounts: Vec<Value>,
    /// `NCCL_MNNVL_ENABLE`; default true on gb200/gb300.
    #[serde(
        default,
        rename = "enableMNNVL",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_mnnvl: Option<bool>,
    /// Config files mounted at /config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigSpec>,
    /// Checkpoint PVC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointSpec>,
    /// Worker container resources (ResourceRequirements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::any_object")]
    pub resources: Option<Value>,
    /// Init containers of the worker pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub init_containers: Vec<Value>,
    /// Scale, repetitions, concurrency, timeout, placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration: Option<WorkloadRunOrchestration>,
    /// Metric thresholds (CEL over `value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub thresholds: BTreeMap<String, String>,
    /// Goodput measurement config, copied to the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::goodput_measurement")]
    pub goodput_measurement: Option<Value>,
    /// Bandwidth measurement config, copied to the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::bandwidth_measurement")]
    pub bandwidth_measurement: Option<Value>,
    /// User overrides, appended after the platform overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideSpec>,
    /// Gang-aware scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_scheduler: Option<GangSchedulerSpec>,
    /// Labels for the workload object (the TrainJob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_metadata: Option<WorkloadMetadata>,
}

/// `spec.framework`: exactly one member is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(extend("minProperties" = 1, "maxProperties" = 1))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Framework {
    /// torchrun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchSpec>,
    /// mpirun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiSpec>,
    /// A verbatim command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecSpec>,
}

/// The framework kind, as the override table's `frameworkType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameworkType {
    /// `torch`.
    Torch,
    /// `mpi`.
    Mpi,
    /// `exec`.
    Exec,
}

impl FrameworkType {
    /// `torch`, `mpi` or `exec`.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameworkType::Torch => "torch",
            FrameworkType::Mpi => "mpi",
            FrameworkType::Exec => "exec",
        }
    }
}

impl Framework {
    /// torch if set, else mpi if set, else exec.
    pub fn kind(&self) -> FrameworkType {
        if self.torch.is_some() {
            FrameworkType::Torch
        } else if self.mpi.is_some() {
            FrameworkType::Mpi
        } else {
            FrameworkType::Exec
        }
    }
}

/// `framework.torch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema)]
#[x_kube(validation = Rule::new("!(has(self.script) && has(self.module))").message("script and module are mutually exclusive"))]
#[x_kube(validation = Rule::new("has(self.script) || has(self.module)").message("either script or module must be set"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TorchSpec {
    /// `torchrun <script>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub script: Option<String>,
    /// `torchrun -m <module>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub module: Option<String>,
    /// Appended after script/module.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// `framework.mpi`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_mpi_spec)]
pub struct MpiSpec {
    /// The MPI program.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub binary: String,
    /// Program arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra mpirun arguments (platform arguments are prepended).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mpi_args: Vec<String>,
    /// `OpenMPI` (the runtime hard-codes it anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "OpenMPI"))]
    pub mpi_implementation: Option<String>,
    /// Path to mpirun in the image.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub mpirun_path: String,
}

/// `framework.exec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_exec_spec)]
pub struct ExecSpec {
    /// The trainer command, verbatim.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub command: Vec<String>,
    /// The trainer args.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// A container env var (core/v1 EnvVar).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Source (secret, configmap, field ref…), forwarded to MPI ranks as a bare `-x NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::any_object")]
    pub value_from: Option<Value>,
}

impl EnvVar {
    /// A literal `name=value` variable.
    pub fn new(name: &str, value: &str) -> EnvVar {
        EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        }
    }
}

/// `spec.target` (TargetSpec).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetSpec {
    /// Label equality.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// NodeSelectorRequirements (In, NotIn, Exists, DoesNotExist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Explicit node list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_names: Vec<String>,
    /// Nodes must carry all these taints; matching tolerations are injected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taint_selectors: Vec<TaintSelector>,
}

/// The taint Kubernetes keeps on a cordoned node (`kubectl cordon`, `spec.unschedulable: true`).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

impl TargetSpec {
    /// Whether the target deliberately selects cordoned nodes: one of its `taintSelectors`
    /// names [`UNSCHEDULABLE_TAINT`]. Discovery then keeps cordoned nodes, and the job gets no
    /// node health monitor (whose default flags a cordoned node unhealthy).
    pub fn includes_cordoned(&self) -> bool {
        self.taint_selectors
            .iter()
            .any(|s| s.key == UNSCHEDULABLE_TAINT)
    }
}

/// core/v1 NodeSelectorRequirement.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_node_selector_requirement)]
pub struct NodeSelectorRequirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist (Gt/Lt are refused by discovery).
    #[serde(default)]
    #[schemars(extend("enum" = ["In", "NotIn", "Exists", "DoesNotExist"]))]
    pub operator: String,
    /// Values for In/NotIn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `target.taintSelectors[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_taint_selector)]
pub struct TaintSelector {
    /// Taint key (required; the admission rules report its absence).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub key: String,
    /// Value; empty matches any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Effect; empty matches any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// `spec.config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema)]
#[x_kube(validation = Rule::new("!(has(self.inline) && has(self.configMapRef))").message("inline and configMapRef are mutually exclusive"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigSpec {
    /// Files to put in a generated ConfigMap `<run>-config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<BTreeMap<String, String>>,
    /// An existing ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<NameRef>,
}

/// `{name: …}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::crd::require_name_ref)]
pub struct NameRef {
    /// The name.
    #[serde(default)]
    pub name: String,
}

/// `spec.checkpoint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_checkpoint_spec)]
pub struct CheckpointSpec {
    /// PVC size, a quantity.
    #[serde(default)]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei)?$"))]
    pub storage_size: String,
    /// Storage class; cluster default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// Restarts allowed; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("format" = "int32"))]
    pub max_restarts: Option<i64>,
}

/// `spec.orchestration` of a WorkloadRun.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadRunOrchestration {
    /// `intra-node`, `intra-rack` or `full-scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["intra-node", "intra-rack", "full-scale"]))]
    pub test_scale: Option<String>,
    /// Workflow iterations; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("format" = "int32"))]
    pub repeat_count: Option<i64>,
    /// Concurrent jobs; 0 = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("format" = "int32"))]
    pub max_concurrent: Option<i64>,
    /// Go duration string; default `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_per_job: Option<String>,
    /// `Pinned` (default) or `Unpinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Pinned", "Unpinned"]))]
    pub placement: Option<String>,
}

/// `spec.gangScheduler`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, kube::KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_gang_scheduler_spec)]
pub struct GangSchedulerSpec {
    /// Required, e.g. `kai-scheduler` or `runai-scheduler`.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub scheduler_name: String,
    /// Queue; when unset or empty, the `queue` of the rule set's `gang-defaults` table (the
    /// shipped rules give `default-queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 63),
        regex(pattern = r"^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$")
    )]
    pub queue: Option<String>,
    /// Queue label key; when unset or empty, the `queueLabelKey` of the rule set's
    /// `gang-defaults` table (the shipped rules give `kai.scheduler/queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 317),
        regex(
            pattern = r"^$|^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
        )
    )]
    #[x_kube(validation = Rule::new("self.contains('/') ? self.split('/')[0].size() <= 253 : true").message("queueLabelKey prefix must be at most 253 characters"))]
    #[x_kube(validation = Rule::new("self != 'app.kubernetes.io/managed-by' && !self.startsWith('nvcre.nvidia.com/')").message("queueLabelKey must not use the controller-owned key app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix"))]
    pub queue_label_key: Option<String>,
}

impl GangSchedulerSpec {
    /// The resolved intent (`defaults` filled in for an unset or empty queue and queue label
    /// key), or `None` when no scheduler is named (nothing is injected then).
    pub fn resolved(&self, defaults: &crate::detect::GangDefaults) -> Option<GangSchedulerSpec> {
        if self.scheduler_name.is_empty() {
            return None;
        }
        let or_default = |v: &Option<String>, d: &str| match v.as_deref() {
            None | Some("") => d.to_string(),
            Some(s) => s.to_string(),
        };
        Some(GangSchedulerSpec {
            scheduler_name: self.scheduler_name.clone(),
            queue: Some(or_default(&self.queue, &defaults.queue)),
            queue_label_key: Some(or_default(&self.queue_label_key, &defaults.queue_label_key)),
        })
    }

    /// The queue (after [`GangSchedulerSpec::resolved`], always set).
    pub fn queue(&self) -> &str {
        self.queue.as_deref().unwrap_or_default()
    }

    /// The queue label key (after [`GangSchedulerSpec::resolved`], always set).
    pub fn queue_label_key(&self) -> &str {
        self.queue_label_key.as_deref().unwrap_or_default()
    }
}

/// `spec.workloadMetadata`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadMetadata {
    /// Labels on the workload object (TrainJob), not on pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::crd::workload_labels")]
    #[x_kube(validation = Rule::new("self.all(k, k != 'app.kubernetes.io/managed-by' && !k.startsWith('nvcre.nvidia.com/'))").message("labels must not set the controller-owned keys app.kubernetes.io/managed-by or any key under the nvcre.nvidia.com/ prefix"))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$'))").message("each label key must be a valid Kubernetes label key: an optional DNS-subdomain prefix followed by '/', then a name of at most 63 characters beginning and ending with an alphanumeric character"))]
    #[x_kube(validation = Rule::new("self.all(k, k.contains('/') ? k.split('/')[0].size() <= 253 : true)").message("each label key prefix must be at most 253 characters"))]
    pub labels: BTreeMap<String, String>,
}

/// One override (shared by WorkloadRun and Workflow: the original's `OverrideSpec`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_override_spec)]
pub struct OverrideSpec {
    /// When the override applies; empty matches always.
    #[serde(default)]
    pub when: WhenSpec,
    /// Strategic merge into `jobTemplate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::override_job_template")]
    pub job_template: Option<Value>,
    /// RFC 6902 patch of `jobTemplate` (array, or a string holding one), after the merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::any_value")]
    pub job_template_patch: Option<Value>,
    /// Dependencies merged by apiVersion + kind + name, or appended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub dependencies: Option<Vec<Value>>,
    /// Orchestration fields, each replacing the base value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::override_orchestration")]
    pub orchestration: Option<serde_json::Map<String, Value>>,
}

/// `when` of an override: every given criterion must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WhenSpec {
    /// Platform match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<StringMatch>,
    /// GPU architecture match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_architecture: Option<StringMatch>,
    /// Exact workload kind, e.g. `TrainJob`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_kind: Option<String>,
    /// Topology mode / domain count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyMatch>,
    /// JSON subset match against the context config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::any_value")]
    pub config: Option<Value>,
    /// CEL over platform, gpuArchitecture, workloadKind, topologyMode, domainCount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

impl WhenSpec {
    /// Calls `f` with every string of the `when` (every field named, so a field added later
    /// must be added here).
    pub(crate) fn each_string(&mut self, f: &mut dyn FnMut(&mut String)) {
        let WhenSpec {
            platform,
            gpu_architecture,
            workload_kind,
            topology,
            config,
            expression,
        } = self;
        for m in platform.iter_mut().chain(gpu_architecture.iter_mut()) {
            let StringMatch {
                equals,
                in_,
                not_in,
            } = m;
            equals
                .iter_mut()
                .chain(in_.iter_mut().flatten())
                .chain(not_in.iter_mut().flatten())
                .for_each(&mut *f);
        }
        workload_kind
            .iter_mut()
            .chain(expression.iter_mut())
            .for_each(&mut *f);
        if let Some(TopologyMatch {
            mode,
            domain_count: _,
        }) = topology
        {
            mode.iter_mut().for_each(&mut *f);
        }
        if let Some(v) = config {
            nvcre_engine::each_string(v, f);
        }
    }
}

/// `{equals | in | notIn}`; all given sub-fields must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringMatch {
    /// Exact, case-sensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// One of.
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub in_: Option<Vec<String>>,
    /// None of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in: Option<Vec<String>>,
}

/// `when.topology`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyMatch {
    /// `topology` or `simple`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Distinct topology domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_count: Option<IntMatch>,
}

/// `{equals, greaterThan, lessThan}` (strict comparisons).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntMatch {
    /// Equal to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<i64>,
    /// Strictly greater than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greater_than: Option<i64>,
    /// Strictly less than.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub less_than: Option<i64>,
}

/// A Workflow document. `jobTemplate`, `dependencies` and the
/// orchestration pieces stay JSON: overrides patch them as documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// `nvcre.nvidia.com/v1alpha1`.
    pub api_version: String,
    /// `Workflow`.
    pub kind: String,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// The spec.
    pub spec: WorkflowSpec,
}

impl Workflow {
    /// This Workflow as JSON, exactly as `serde_json::to_value` writes it (same keys, same
    /// order), with its JSON-kept parts (`jobTemplate`, `orchestration`, `dependencies`,
    /// `validation`, and those of every override) moved into the result instead of copied:
    /// only the typed skeleton is serialized.
    ///
    /// # Errors
    /// As `serde_json::to_value` (a map key that is not a string; none of ours).
    pub fn into_json(mut self) -> Result<Value, serde_json::Error> {
        let parts = SpecParts::take(&mut self.spec);
        let mut value = serde_json::to_value(&self)?;
        if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
            parts.put(spec);
        }
        Ok(value)
    }

    /// Reads a Workflow from JSON, exactly as `serde_json::from_value` does, moving its
    /// JSON-kept parts into the result instead of reading them node by node: a part is taken
    /// out before the typed reading only when its JSON type is one that reading accepts as is
    /// (so every error is the one `from_value` gives).
    ///
    /// # Errors
    /// As `serde_json::from_value`.
    pub fn from_json(mut value: Value) -> Result<Workflow, serde_json::Error> {
        let parts = value
            .get_mut("spec")
            .and_then(Value::as_object_mut)
            .map(SpecParts::remove);
        let mut workflow: Workflow = serde_json::from_value(value)?;
        if let Some(parts) = parts {
            parts.restore(&mut workflow.spec);
        }
        Ok(workflow)
    }
}

type JsonMap = serde_json::Map<String, Value>;

/// Sets annotation `key` to `value` in a Workflow's JSON as [`Workflow::into_json`] writes it,
/// exactly as setting it in the typed metadata and serializing again would: the annotations in
/// key order, a missing `annotations` mapping added last in `metadata` (its place in
/// [`ObjectMeta`]). A `metadata` that is not a mapping is left alone (`into_json` never writes
/// one).
pub fn set_annotation(workflow: &mut Value, key: &str, value: String) {
    let Some(meta) = workflow.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let slot = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(JsonMap::new()));
    let mut sorted: BTreeMap<String, Value> = match std::mem::take(slot) {
        Value::Object(m) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    };
    sorted.insert(key.to_owned(), Value::String(value));
    *slot = Value::Object(sorted.into_iter().collect());
}

/// Replaces the placeholder at `key` with `v`, where it stands.
fn put_at(m: &mut JsonMap, key: &str, v: Option<Value>) {
    if let (Some(v), Some(slot)) = (v, nvcre_engine::json_field_mut(m, key)) {
        *slot = v;
    }
}

/// Takes `key` out of `m` (keeping the order of the others, so serde meets them as before),
/// when it is not null.
fn take_value(m: &mut JsonMap, key: &str) -> Option<Value> {
    nvcre_engine::json_field(m, key)
        .is_some_and(|v| !v.is_null())
        .then(|| m.shift_remove(key))
        .flatten()
}

/// Takes `key` out of `m` when it is a list (as [`take_value`]).
fn take_list(m: &mut JsonMap, key: &str) -> Option<Vec<Value>> {
    match nvcre_engine::json_field(m, key) {
        Some(Value::Array(_)) => match m.shift_remove(key) {
            Some(Value::Array(a)) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// Takes `key` out of `m` when it is a mapping (as [`take_value`]).
fn take_mapping(m: &mut JsonMap, key: &str) -> Option<JsonMap> {
    match nvcre_engine::json_field(m, key) {
        Some(Value::Object(_)) => match m.shift_remove(key) {
            Some(Value::Object(o)) => Some(o),
            _ => None,
        },
        _ => None,
    }
}

/// The JSON-kept parts of a [`WorkflowSpec`] while its skeleton is converted.
#[derive(Default)]
struct SpecParts {
    job_template: Option<Value>,
    orchestration: Option<JsonMap>,
    dependencies: Option<Vec<Value>>,
    validation: Option<Value>,
    overrides: Vec<OverrideParts>,
}

/// The JSON-kept parts of an [`OverrideSpec`].
#[derive(Default)]
struct OverrideParts {
    job_template: Option<Value>,
    job_template_patch: Option<Value>,
    dependencies: Option<Vec<Value>>,
    orchestration: Option<serde_json::Map<String, Value>>,
}

impl SpecParts {
    /// Takes the parts out of `spec`, leaving placeholders that serialize at the same place
    /// (`null`, `{}`, `[null]`) so [`SpecParts::put`] can replace them where they stand.
    fn take(spec: &mut WorkflowSpec) -> SpecParts {
        SpecParts {
            job_template: Some(std::mem::take(&mut spec.job_template)),
            orchestration: Some(std::mem::take(&mut spec.orchestration)),
            dependencies: (!spec.dependencies.is_empty())
                .then(|| std::mem::replace(&mut spec.dependencies, vec![Value::Null])),
            validation: spec.validation.as_mut().map(std::mem::take),
            overrides: spec
                .overrides
                .iter_mut()
                .map(|o| OverrideParts {
                    job_template: o.job_template.as_mut().map(std::mem::take),
                    job_template_patch: o.job_template_patch.as_mut().map(std::mem::take),
                    dependencies: o.dependencies.as_mut().map(std::mem::take),
                    orchestration: o.orchestration.as_mut().map(std::mem::take),
                })
                .collect(),
        }
    }

    /// Puts the parts into the serialized spec, each in its placeholder's place.
    fn put(self, spec: &mut JsonMap) {
        put_at(spec, "jobTemplate", self.job_template);
        put_at(spec, "orchestration", self.orchestration.map(Value::Object));
        put_at(spec, "dependencies", self.dependencies.map(Value::Array));
        put_at(spec, "validation", self.validation);
        let Some(Value::Array(items)) = nvcre_engine::json_field_mut(spec, "overrides") else {
            return;
        };
        for (item, parts) in items.iter_mut().zip(self.overrides) {
            let Some(o) = item.as_object_mut() else {
                continue;
            };
            put_at(o, "jobTemplate", parts.job_template);
            put_at(o, "jobTemplatePatch", parts.job_template_patch);
            put_at(o, "dependencies", parts.dependencies.map(Value::Array));
            put_at(o, "orchestration", parts.orchestration.map(Value::Object));
        }
    }

    /// Removes from a spec's JSON the parts whose reading cannot fail: any non-null
    /// `jobTemplate`, `validation` and override `jobTemplate`/`jobTemplatePatch`; an object
    /// `orchestration`; an array `dependencies`. Anything else stays for the typed reading.
    fn remove(spec: &mut JsonMap) -> SpecParts {
        let overrides = match spec.get_mut("overrides") {
            Some(Value::Array(items)) => items
                .iter_mut()
                .map(|item| match item.as_object_mut() {
                    Some(o) => OverrideParts {
                        job_template: take_value(o, "jobTemplate"),
                        job_template_patch: take_value(o, "jobTemplatePatch"),
                        dependencies: take_list(o, "dependencies"),
                        orchestration: take_mapping(o, "orchestration"),
                    },
                    None => OverrideParts::default(),
                })
                .collect(),
            _ => Vec::new(),
        };
        SpecParts {
            job_template: take_value(spec, "jobTemplate"),
            orchestration: take_mapping(spec, "orchestration"),
            dependencies: take_list(spec, "dependencies"),
            validation: take_value(spec, "validation"),
            overrides,
        }
    }

    /// Puts the removed parts into the typed spec read without them.
    fn restore(self, spec: &mut WorkflowSpec) {
        if let Some(v) = self.job_template {
            spec.job_template = v;
        }
        if let Some(m) = self.orchestration {
            spec.orchestration = m;
        }
        if let Some(d) = self.dependencies {
            spec.dependencies = d;
        }
        if let Some(v) = self.validation {
            spec.validation = Some(v);
        }
        for (o, parts) in spec.overrides.iter_mut().zip(self.overrides) {
            if parts.job_template.is_some() {
                o.job_template = parts.job_template;
            }
            if parts.job_template_patch.is_some() {
                o.job_template_patch = parts.job_template_patch;
            }
            if parts.dependencies.is_some() {
                o.dependencies = parts.dependencies;
            }
            if parts.orchestration.is_some() {
                o.orchestration = parts.orchestration;
            }
        }
    }
}

/// `Workflow.spec`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, kube::KubeSchema, kube::CustomResource,
)]
// Each printcolumn(...) repeats `type_`; clippy reads that as a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "nvcre.nvidia.com",
    version = "v1alpha1",
    kind = "Workflow",
    root = "WorkflowResource",
    derive = "PartialEq",
    plural = "workflows",
    shortname = "wf",
    namespaced,
    status = "crate::crd::WorkflowStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Platform",
        type_ = "string",
        json_path = ".status.orchestration.detectedPlatform"
    ),
    printcolumn(
        name = "GPU",
        type_ = "string",
        json_path = ".status.orchestration.detectedGPUArchitecture"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("has(self.gangScheduler) == has(oldSelf.gangScheduler)").message("gangScheduler cannot be added or removed after creation"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = crate::crd::require_workflow_spec)]
pub struct WorkflowSpec {
    /// Namespace for Jobs and dependencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `{metadata?, spec: JobSpec}`.
    #[serde(default)]
    #[schemars(schema_with = "crate::crd::job_template")]
    pub job_template: Value,
    /// target, topology, diagnose, execution, iterations, placement.
    #[serde(default)]
    #[schemars(schema_with = "crate::crd::workflow_orchestration")]
    pub orchestration: serde_json::Map<String, Value>,
    /// Embedded objects created before the jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::object_list")]
    pub dependencies: Vec<Value>,
    /// Unresolved overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideSpec>,
    /// `validation.performance`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::workflow_validation")]
    pub validation: Option<Value>,
    /// The persisted gang-scheduling contract (resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("gangScheduler is immutable"))]
    pub gang_scheduler: Option<GangSchedulerSpec>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Workflows as the renders of the examples make them: without a platform (overrides kept,
    /// with every JSON-kept part) and with one (overrides resolved).
    fn rendered_workflows() -> Vec<Value> {
        let rules = crate::default_rules().expect("rules");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"))
            .expect("examples")
        {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("reads");
            let source = nvcre_engine::Source::new(path.display().to_string(), text);
            for doc in nvcre_engine::parse_documents(&source).expect("parses") {
                for platform in [None, Some("aws")] {
                    let req = crate::RenderRequest {
                        platform: platform.map(str::to_string),
                        gpu_arch: Some("gb300".into()),
                        ..crate::RenderRequest::default()
                    };
                    if let Ok(r) = crate::render_workload_run(&rules, &doc, &req) {
                        out.push(r.workflow);
                    }
                }
            }
        }
        out
    }

    fn hand_written() -> Value {
        json!({
            "apiVersion": "nvcre.nvidia.com/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": "w", "annotations": {"b": "1", "a": "2"}},
            "spec": {
                "namespace": "ns",
                "jobTemplate": {"spec": {"x": [1, {"y": null}]}},
                "orchestration": {"target": {"nodeSelector": {"k": "v"}}, "iterations": 2},
                "dependencies": [{"kind": "ConfigMap"}, 3],
                "overrides": [
                    {"when": {"platform": {"equals": "aws"}}, "jobTemplate": {"a": 1},
                     "jobTemplatePatch": "[]", "dependencies": [], "orchestration": {}},
                    {"when": {}},
                    {"jobTemplate": null, "dependencies": [{"kind": "Secret"}]}
                ],
                "validation": {"performance": {}},
                "gangScheduler": {"schedulerName": "kai-scheduler", "queue": "q"}
            }
        })
    }

    /// `into_json` writes what `to_value` writes, key order included; `from_json` reads what
    /// `from_value` reads.
    #[test]
    fn moving_conversions_match_serde() {
        let mut values = rendered_workflows();
        assert!(values.len() >= 10, "{} renders", values.len());
        values.push(hand_written());
        for v in values {
            let by_serde: Workflow = serde_json::from_value(v.clone()).expect("reads");
            let moved = Workflow::from_json(v.clone()).expect("reads");
            assert_eq!(moved, by_serde);
            let written = serde_json::to_string(&by_serde.clone().into_json().expect("writes"))
                .expect("text");
            let expected = serde_json::to_string(&serde_json::to_value(&by_serde).expect("writes"))
                .expect("text");
            assert_eq!(written, expected);
        }
    }

    /// `set_annotation` on a Workflow's JSON gives what inserting into the typed annotations
    /// and writing the JSON again gives: a new key in key order, a replaced key where it
    /// stands, a missing `annotations` added after the labels.
    #[test]
    fn setting_an_annotation_in_json_matches_the_typed_insert() {
        let mut values = rendered_workflows();
        values.push(hand_written());
        let mut bare = hand_written();
        if let Some(m) = bare["metadata"].as_object_mut() {
            m.shift_remove("annotations");
            m.insert("labels".into(), json!({"l": "1"}));
        }
        values.push(bare);
        for v in values {
            for (key, value) in [("a", "new"), ("aa", "between"), ("zzz", "last"), ("b", "")] {
                let mut typed = Workflow::from_json(v.clone()).expect("reads");
                typed
                    .metadata
                    .annotations
                    .insert(key.to_string(), value.to_string());
                let expected =
                    serde_json::to_string(&typed.into_json().expect("writes")).expect("text");
                let canonical = Workflow::from_json(v.clone())
                    .and_then(Workflow::into_json)
                    .expect("round trip");
                let mut json = canonical;
                set_annotation(&mut json, key, value.to_string());
                assert_eq!(
                    serde_json::to_string(&json).expect("text"),
                    expected,
                    "{key}"
                );
            }
        }
    }

    /// A part of the wrong type stays for the typed reading, so the error is serde's own.
    #[test]
    fn moving_reading_keeps_serde_errors() {
        for (at, bad) in [
            ("/spec/orchestration", json!("x")),
            ("/spec/dependencies", json!({"a": 1})),
            ("/spec/overrides/0/dependencies", json!("x")),
            ("/spec/overrides/0/orchestration", json!([1])),
            ("/spec/overrides/1", json!(7)),
            ("/spec/overrides", json!({})),
            ("/spec/jobTemplate", json!(null)),
        ] {
            // And with a second problem after it (an unknown key at the end of the spec), so
            // the order in which serde meets them is the one `from_value` has.
            for second in [false, true] {
                let mut v = hand_written();
                *v.pointer_mut(at).expect("place") = bad.clone();
                if let (true, Some(spec)) = (second, v["spec"].as_object_mut()) {
                    // Both at the end: a key taken out must not let the last one move up.
                    spec.shift_remove("namespace");
                    spec.insert("namespace".into(), json!(5));
                    spec.insert("zzz".into(), json!(1));
                }
                let by_serde =
                    serde_json::from_value::<Workflow>(v.clone()).map_err(|e| e.to_string());
                let moved = Workflow::from_json(v).map_err(|e| e.to_string());
                assert_eq!(moved, by_serde, "{at} {second}");
            }
        }
    }
}
