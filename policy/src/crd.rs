//! The Kubernetes CustomResourceDefinitions of WorkloadRun and Workflow (and the measurement
//! kinds), generated from the serde types of the API (there is one schema: the types the render
//! pipeline reads are the types the CRD describes), plus the status types the controller writes.
//!
//! The generated roots are [`WorkloadRunResource`] and [`WorkflowResource`] (kube
//! `CustomResource`s over [`WorkloadRunSpec`] and [`WorkflowSpec`]); [`crds`] returns them and
//! the measurement CRDs (LogProfile, BandwidthMeasurement, GoodputMeasurement), and
//! [`crds_yaml`] prints them as one YAML stream (what `nvcre-policy crd` prints
//! and what `controller/deploy/crds.yaml` holds).
//!
//! The schema carries the API server's checks: OpenAPI bounds and patterns, and the
//! `x-kubernetes-validations` CEL rules with their exact messages (spec immutability, torch and
//! config exclusivity, `nicResourceName` domains, the gang scheduler queue key rules, the
//! workload label rules, the Workflow `gangScheduler` presence/immutability rules and the JobSpec
//! immutability rules inside `spec.jobTemplate.spec`). [`validation_rules`] lists every CEL rule
//! with the path of the schema node that carries it, so tests can evaluate them offline.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::api::{
    API_VERSION, LEGACY_API_VERSION, MANAGED_BY_LABEL, MANAGED_BY_VALUE, TRAINER_API_VERSION,
    WorkflowResource, WorkflowSpec, WorkloadRunResource, WorkloadRunSpec,
};

/// A status condition (the `metav1.Condition` shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `InProgress`, `Succeeded`, `Failed` (exclusive) or `ValidationFailed` (independent).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason, e.g. `WorkflowCreated`.
    pub reason: String,
    /// Human-readable message (may be empty).
    #[serde(default)]
    pub message: String,
    /// RFC 3339 time of the last status change of this condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `{name, namespace}` of the Workflow a WorkloadRun created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowReference {
    /// Workflow name (the WorkloadRun's name).
    pub name: String,
    /// Workflow namespace (the WorkloadRun's namespace).
    #[serde(default)]
    pub namespace: String,
}

/// A `TypedLocalObjectReference` (used for the succeeded/failed node ConfigMaps).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedLocalObjectReference {
    /// API group; empty for core objects such as ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Object name in the same namespace.
    pub name: String,
}

/// `WorkloadRun.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRunStatus {
    /// The type of the execution condition that is True (`InProgress`, `Succeeded`, `Failed`),
    /// for `kubectl get` (an addition to the original status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The Workflow this run created (or adopted); once set the run only mirrors it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_ref: Option<WorkflowReference>,
    /// Platform detected from the target nodes (`aws`, `gcp`, … or `unknown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_platform: Option<String>,
    /// GPU architecture detected from the target nodes (`h100`, `gb200`, …).
    #[serde(
        default,
        rename = "detectedGPUArchitecture",
        skip_serializing_if = "Option::is_none"
    )]
    pub detected_gpu_architecture: Option<String>,
    /// GPUs per node the build used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_gpus_per_node: Option<i32>,
    /// ConfigMap listing the nodes that succeeded (mirrored from the Workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_nodes_ref: Option<TypedLocalObjectReference>,
    /// ConfigMap listing the nodes that failed (mirrored from the Workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_nodes_ref: Option<TypedLocalObjectReference>,
    /// `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One group of a Workflow: the nodes one TrainJob runs on, and its progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// `group-<i>` or `group-<i>-overflow`.
    pub name: String,
    /// Node names of the group (empty under Unpinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Topology domains (racks) the group's nodes span, sorted; empty without topology
    /// partitioning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    /// Whether this is an overflow group (re-uses nodes of full groups).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overflow: bool,
    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    pub phase: String,
    /// Iteration (1-based) the phase belongs to.
    #[serde(default)]
    pub iteration: i32,
    /// Name of the group's TrainJob in the current iteration. Read also from the original
    /// controller's form, a reference `{apiVersion, kind, name, namespace}` (its `name`), so a
    /// Workflow from `kubectl get -o yaml` of either reads.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "name_or_reference"
    )]
    #[schemars(schema_with = "crate::crd::any_value")]
    pub job_ref: Option<String>,
    /// RFC 3339 time the group's job was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// RFC 3339 time the group's job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
    /// Why the group failed: `JobFailed` (the TrainJob reported Failed) or `JobTimedOut`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why the group failed (the TrainJob's Failed message, or the timeout), or why it was
    /// last retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Times the group was retried in the current iteration after a failed TrainJob
    /// (`execution.retryFailedGroups` bounds it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: i32,
}

/// A name, or the `name` of a reference object holding one; `None` for null.
fn name_or_reference<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrReference {
        Name(String),
        Reference { name: String },
    }
    Ok(Option::<NameOrReference>::deserialize(d)?.map(|r| match r {
        NameOrReference::Name(n) | NameOrReference::Reference { name: n } => n,
    }))
}

// serde's skip_serializing_if takes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A group that failed in one iteration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedGroup {
    /// Group name.
    pub name: String,
    /// `JobFailed` or `JobTimedOut`.
    pub reason: String,
    /// The TrainJob's Failed message, or the timeout.
    #[serde(default)]
    pub message: String,
}

/// One finished iteration of a Workflow, in `status.orchestration.iterationHistory`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IterationRecord {
    /// Iteration number (1-based).
    pub iteration: i32,
    /// Groups whose TrainJob succeeded.
    #[serde(default)]
    pub succeeded_groups: i32,
    /// The groups that failed (after their retries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_groups: Vec<FailedGroup>,
    /// RFC 3339 time the iteration finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<String>,
}

/// `Workflow.status.orchestration`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrchestrationStatus {
    /// Nodes placed (after discovery and filters).
    #[serde(default)]
    pub total_nodes: i32,
    /// Nodes per job.
    #[serde(default)]
    pub nodes_per_job: i32,
    /// Number of groups.
    #[serde(default)]
    pub total_groups: i32,
    /// Iteration in progress (1-based).
    #[serde(default)]
    pub current_iteration: i32,
    /// Iterations completed.
    #[serde(default)]
    pub completed_iterations: i32,
    /// Platform detected from the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected_platform: Option<String>,
    /// GPU architecture detected from the nodes.
    #[serde(
        default,
        rename = "detectedGPUArchitecture",
        skip_serializing_if = "Option::is_none"
    )]
    pub detected_gpu_architecture: Option<String>,
    /// `Pinned` or `Unpinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// The groups, in placement order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupStatus>,
    /// Target nodes left out of placement (cordoned, another GPU architecture, too few GPUs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_nodes: Vec<String>,
    /// Why each excluded node was left out: `<node>: <reason>` joined by `; `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusion_reason: Option<String>,
    /// Distinct raw `nvidia.com/gpu.product` values of the placed nodes, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_products: Vec<String>,
    /// The iterations finished so far, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iteration_history: Vec<IterationRecord>,
    /// Nodes the node health monitor found unhealthy while a group's TrainJob ran, sorted.
    /// They accumulate over retries and iterations and are never removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hardware_failed_nodes: Vec<String>,
}

/// `Workflow.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatus {
    /// The type of the execution condition that is True, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Namespace the jobs run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// ConfigMap listing the nodes that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_nodes_ref: Option<TypedLocalObjectReference>,
    /// ConfigMap listing the nodes that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_nodes_ref: Option<TypedLocalObjectReference>,
    /// Groups and iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orchestration: Option<OrchestrationStatus>,
    /// `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Every CustomResourceDefinition: WorkloadRun, Workflow, then the measurement kinds
/// (LogProfile, cluster-scoped; BandwidthMeasurement; GoodputMeasurement; see
/// [`crate::measure`]).
pub fn crds() -> Vec<CustomResourceDefinition> {
    use crate::measure::{
        BandwidthMeasurementResource, GoodputMeasurementResource, LogProfileResource,
    };
    vec![
        WorkloadRunResource::crd(),
        WorkflowResource::crd(),
        LogProfileResource::crd(),
        BandwidthMeasurementResource::crd(),
        GoodputMeasurementResource::crd(),
    ]
}

/// [`crds`] as one YAML stream (`---` between documents), ending in a newline.
///
/// # Errors
/// A serialization failure of the YAML writer (not expected for these documents).
pub fn crds_yaml() -> Result<String, nvcre_engine::Error> {
    let mut out = String::new();
    for crd in crds() {
        let value = serde_json::to_value(&crd)
            .map_err(|e| nvcre_engine::Error::Serialize(e.to_string()))?;
        out.push_str("---\n");
        out.push_str(&nvcre_engine::to_yaml(&value)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// One `x-kubernetes-validations` rule of a generated CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationRule {
    /// The field path of the schema node carrying the rule, relative to `spec`, as property
    /// names (`["gangScheduler", "queueLabelKey"]`; `[]` is the spec itself). A `*` step
    /// stands for every value of a map or item of a list.
    pub path: Vec<String>,
    /// The CEL rule; `self` is the value at `path`.
    pub rule: String,
    /// The message the API server reports when the rule is false.
    pub message: String,
    /// Whether the rule reads `oldSelf` (a transition rule: checked on update only).
    pub transition: bool,
}

/// Every CEL rule of `crd`'s `spec` schema, in schema order (depth first, properties in
/// order). Empty when the CRD has no version or schema.
pub fn validation_rules(crd: &CustomResourceDefinition) -> Vec<ValidationRule> {
    let mut out = Vec::new();
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok());
    if let Some(spec) = schema.as_ref().and_then(|s| s.pointer("/properties/spec")) {
        collect_rules(spec, &mut Vec::new(), &mut out);
    }
    out
}

fn collect_rules(schema: &Value, path: &mut Vec<String>, out: &mut Vec<ValidationRule>) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for r in rules {
            let rule = r.get("rule").and_then(Value::as_str).unwrap_or_default();
            out.push(ValidationRule {
                path: path.clone(),
                rule: rule.to_string(),
                message: r
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                transition: rule.contains("oldSelf"),
            });
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            path.push(name.clone());
            collect_rules(sub, path, out);
            path.pop();
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = schema.get(key).filter(|s| s.is_object()) {
            path.push("*".to_string());
            collect_rules(sub, path, out);
            path.pop();
        }
    }
}

// Schema pieces for the fields the API keeps as JSON (Kubernetes core types passed through,
// embedded objects, override patches). Structural schemas need a type or
// `x-kubernetes-preserve-unknown-fields` on every node.

/// Any JSON value, kept as written.
pub(crate) fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// An object whose fields are kept as written.
pub(crate) fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// A list of objects kept as written (volumes, containers, embedded resources).
pub(crate) fn object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// `bandwidthMeasurement` of a WorkloadRun or a JobSpec (BandwidthMeasurementConfig).
pub(crate) fn bandwidth_measurement(_: &mut SchemaGenerator) -> Schema {
    Schema::try_from(bandwidth_measurement_value()).unwrap_or_default()
}

/// `goodputMeasurement` of a WorkloadRun or a JobSpec (GoodputMeasurementConfig: no
/// `testType`, which only a bandwidth measurement labels its results with).
pub(crate) fn goodput_measurement(_: &mut SchemaGenerator) -> Schema {
    Schema::try_from(goodput_measurement_value()).unwrap_or_default()
}

fn bandwidth_measurement_value() -> Value {
    serde_json::json!({
        "type": "object",
        "required": ["logProfileRef"],
        "properties": {
            "logProfileRef": { "type": "string", "minLength": 1 },
            "sampleInterval": { "type": "string" },
            "testType": { "type": "string" }
        }
    })
}

fn goodput_measurement_value() -> Value {
    serde_json::json!({
        "type": "object",
        "required": ["logProfileRef"],
        "properties": {
            "logProfileRef": { "type": "string", "minLength": 1 },
            "sampleInterval": { "type": "string" }
        }
    })
}

/// `Workflow.spec.validation`: `performance` (PerformanceValidationSpec), closed but for its
/// schemaless `config`. Note the double nesting: `performance.thresholds` is a ThresholdSpec
/// whose one field `thresholds` is the map of metric key to CEL expression.
pub(crate) fn workflow_validation(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "performance": {
                "type": "object",
                "properties": {
                    "enabled": { "type": "boolean", "default": false },
                    "plugin": { "type": "string" },
                    "config": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    "tracking": {
                        "type": "object",
                        "properties": {
                            "perNode": { "type": "boolean" },
                            "perDomain": { "type": "boolean" }
                        }
                    },
                    "thresholds": {
                        "type": "object",
                        "properties": {
                            "thresholds": {
                                "type": "object",
                                "additionalProperties": { "type": "string" }
                            }
                        }
                    },
                    "measurementTimeout": { "type": "string" }
                }
            }
        }
    })
}

/// `workloadMetadata.labels`: at most 32 labels, each value a label value.
pub(crate) fn workload_labels(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {
            "type": "string",
            "maxLength": 63,
            "pattern": "^$|^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$"
        }
    })
}

fn immutable(name: &str) -> Value {
    serde_json::json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [
            { "rule": "self == oldSelf", "message": format!("{name} is immutable") }
        ]
    })
}

/// `Workflow.spec.jobTemplate`: `{metadata?, spec: JobSpec}` with the JobSpec immutability rules.
/// The JobSpec's fields are closed (a misspelt one is an unknown field, as the API server's
/// strict field validation has it); what they hold (the TrainJob) is kept as written.
pub(crate) fn job_template(_: &mut SchemaGenerator) -> Schema {
    let props = job_spec_properties();
    json_schema!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            "spec": {
                "type": "object",
                "properties": props,
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.workloadMetadata) == has(oldSelf.workloadMetadata)",
                        "message": "workloadMetadata cannot be added or removed after creation"
                    },
                    {
                        "rule": "has(self.nodeHealthMonitor) == has(oldSelf.nodeHealthMonitor) && has(self.goodputMeasurement) == has(oldSelf.goodputMeasurement) && has(self.bandwidthMeasurement) == has(oldSelf.bandwidthMeasurement)",
                        "message": "nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation"
                    }
                ]
            }
        }
    })
}

/// An override's `jobTemplate`: the part of a `{metadata?, spec: JobSpec}` it merges, with the
/// JobSpec's fields closed as in [`job_template`].
pub(crate) fn override_job_template(_: &mut SchemaGenerator) -> Schema {
    let mut props = Value::Object(job_spec_properties());
    patch_shape(&mut props);
    without_required(&mut props);
    json_schema!({
        "type": "object",
        "properties": {
            "metadata": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            "spec": { "type": "object", "properties": props }
        }
    })
}

/// The fields of a JobSpec, each with its bounds and immutability rule.
fn job_spec_properties() -> serde_json::Map<String, Value> {
    let mut props = serde_json::Map::new();
    for name in [
        "workload",
        "workloadMetadata",
        "nodeHealthMonitor",
        "goodputMeasurement",
        "bandwidthMeasurement",
    ] {
        props.insert(name.to_string(), immutable(name));
    }
    // The measurement configs are closed (GoodputMeasurementConfig, BandwidthMeasurementConfig):
    // a misspelt field is an unknown field, never a measurement silently left unconfigured.
    for (name, schema) in [
        ("goodputMeasurement", goodput_measurement_value()),
        ("bandwidthMeasurement", bandwidth_measurement_value()),
    ] {
        if let (Some(Value::Object(slot)), Value::Object(schema)) = (props.get_mut(name), schema) {
            slot.remove("x-kubernetes-preserve-unknown-fields");
            slot.extend(schema);
        }
    }
    // The JobSpec's bounded fields, as the API server holds them (their defaults too); the
    // admission pack checks the same bounds offline.
    if let Some(health) = props
        .get_mut("nodeHealthMonitor")
        .and_then(Value::as_object_mut)
    {
        health.insert(
            "properties".into(),
            serde_json::json!({
                "cel": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {
                        "expression": { "type": "string", "minLength": 1, "maxLength": 2048 }
                    }
                }
            }),
        );
    }
    let bounded = serde_json::json!({
        "checkpoint": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "required": ["pvcName"],
            "properties": {
                "pvcName": { "type": "string", "minLength": 1 },
                "maxRestarts": { "type": "integer", "format": "int32", "minimum": 0 }
            }
        },
        "stallMultiplier": { "type": "integer", "minimum": 1 },
        "thresholds": { "type": "object", "additionalProperties": { "type": "string" } },
        "startupStallTimeoutSeconds": { "type": "integer", "minimum": 1, "default": 1200 },
        "schedulingStallGraceSeconds": { "type": "integer", "minimum": 1, "default": 300 },
        "measurementTimeout": { "type": "string", "default": "5m" }
    });
    if let Value::Object(bounded) = bounded {
        props.extend(bounded);
    }
    props
}

/// `Workflow.spec.orchestration`: target, topology, diagnose, execution, iterations, placement
/// (closed: a misspelt field is an unknown field, never a default silently kept).
pub(crate) fn workflow_orchestration(generator: &mut SchemaGenerator) -> Schema {
    orchestration_schema(generator, false)
}

/// An override's `orchestration`: the fields an override replaces (target, topology,
/// execution, iterations, placement), closed.
pub(crate) fn override_orchestration(generator: &mut SchemaGenerator) -> Schema {
    orchestration_schema(generator, true)
}

/// `schema` as the shape of a patch (an override) rather than of the object: no `default`
/// (the API server would write defaults into the patch, which would then replace the values it
/// patches) and no `x-kubernetes-validations` (their `oldSelf` cannot be correlated inside the
/// `overrides` list, and what they guard is the object's).
fn patch_shape(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("default");
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(patch_shape);
        }
        Value::Array(items) => items.iter_mut().for_each(patch_shape),
        _ => {}
    }
}

/// `schema` without `required`: an override's `jobTemplate` is merged (strategic merge), so it
/// names only what it changes (`{sampleInterval: 1m}` merged into a measurement config keeps
/// its `logProfileRef`).
fn without_required(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            // (A field named `required` is a schema, not a list.)
            if map.get("required").is_some_and(Value::is_array) {
                map.remove("required");
            }
            map.values_mut().for_each(without_required);
        }
        Value::Array(items) => items.iter_mut().for_each(without_required),
        _ => {}
    }
}

/// The orchestration schema; for an override (`patch`), without `diagnose` (an override does
/// not replace it) and in [`patch_shape`].
fn orchestration_schema(generator: &mut SchemaGenerator, patch: bool) -> Schema {
    let target = serde_json::to_value(generator.subschema_for::<crate::api::TargetSpec>())
        .unwrap_or_else(|_| serde_json::json!({ "type": "object" }));
    let mut schema = json_schema!({
        "type": "object",
        "properties": {
            "target": target,
            "topology": {
                "type": "object",
                "properties": {
                    "topologyKey": { "type": "string" },
                    "strictDomain": { "type": "boolean" }
                }
            },
            "diagnose": {
                "type": "object",
                "properties": {
                    "minGroupSize": { "type": "integer", "minimum": 1, "default": 2 },
                    "topologyKey": { "type": "string" }
                }
            },
            "execution": {
                "type": "object",
                "properties": {
                    "maxConcurrent": { "type": "integer", "minimum": 0, "default": 0 },
                    "timeoutPerJob": { "type": "string" },
                    "retryFailedGroups": { "type": "integer", "minimum": 0, "default": 0 }
                }
            },
            "iterations": { "type": "integer", "minimum": 1, "default": 1 },
            "placement": { "type": "string", "enum": ["Pinned", "Unpinned"] }
        }
    });
    if patch {
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.remove("diagnose");
        }
        if let Some(props) = schema.get_mut("properties") {
            patch_shape(props);
        }
    }
    schema
}

/// Labels every object the controller creates carries, by key (the managed-by label and the
/// owning run), for a WorkloadRun named `run`.
pub fn workload_run_labels(run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            crate::api::MANAGED_BY_LABEL.to_string(),
            crate::api::MANAGED_BY_VALUE.to_string(),
        ),
        (WORKLOAD_RUN_LABEL.to_string(), run.to_string()),
    ])
}

/// Label naming the WorkloadRun a Workflow (and its TrainJobs) belong to.
pub const WORKLOAD_RUN_LABEL: &str = "nvcre.nvidia.com/workload-run";
/// Label naming the Workflow a TrainJob or TrainingRuntime belongs to.
pub const WORKFLOW_LABEL: &str = "nvcre.nvidia.com/workflow";
/// Label naming the group of a TrainJob.
pub const GROUP_LABEL: &str = "nvcre.nvidia.com/group";
/// Label naming the TrainJob a BandwidthMeasurement or GoodputMeasurement measures.
pub const JOB_LABEL: &str = "nvcre.nvidia.com/job";

// The API types give required fields a serde default (the admission rules, not the parser, report
// their absence), so the schema generator would make them optional with an empty default; a CRD
// must list them as required, with no default the API server would fill in.
fn require(schema: &mut Schema, fields: &[&str]) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for f in fields {
            if let Some(p) = props.get_mut(*f).and_then(Value::as_object_mut) {
                p.remove("default");
            }
        }
    }
    if let Some(obj) = schema.as_object_mut() {
        let required = obj
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(list) = required.as_array_mut() {
            for f in fields {
                if !list.iter().any(|v| v == f) {
                    list.push(Value::String((*f).to_string()));
                }
            }
            list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
    }
}

/// Marks `image`, `framework`, `numNodes` of `WorkloadRunSpec` required (without a default).
pub(crate) fn require_workload_run_spec(schema: &mut Schema) {
    require(schema, &["image", "framework", "numNodes"]);
}

/// Marks `binary`, `mpirunPath` of `MpiSpec` required (without a default).
pub(crate) fn require_mpi_spec(schema: &mut Schema) {
    require(schema, &["binary", "mpirunPath"]);
}

/// Marks `command` of `ExecSpec` required (without a default).
pub(crate) fn require_exec_spec(schema: &mut Schema) {
    require(schema, &["command"]);
}

/// Marks `key`, `operator` of `NodeSelectorRequirement` required (without a default).
pub(crate) fn require_node_selector_requirement(schema: &mut Schema) {
    require(schema, &["key", "operator"]);
}

/// Marks `key` of `TaintSelector` required (without a default).
pub(crate) fn require_taint_selector(schema: &mut Schema) {
    require(schema, &["key"]);
}

/// Marks `storageSize` of `CheckpointSpec` required (without a default).
pub(crate) fn require_checkpoint_spec(schema: &mut Schema) {
    require(schema, &["storageSize"]);
}

/// Marks `schedulerName` of `GangSchedulerSpec` required (without a default).
pub(crate) fn require_gang_scheduler_spec(schema: &mut Schema) {
    require(schema, &["schedulerName"]);
}

/// Marks `when` of `OverrideSpec` required (without a default).
pub(crate) fn require_override_spec(schema: &mut Schema) {
    require(schema, &["when"]);
}

/// Marks `jobTemplate`, `orchestration` of `WorkflowSpec` required (without a default).
pub(crate) fn require_workflow_spec(schema: &mut Schema) {
    require(schema, &["jobTemplate", "orchestration"]);
}

/// Marks `name` of `NameRef` required (without a default).
pub(crate) fn require_name_ref(schema: &mut Schema) {
    require(schema, &["name"]);
}

/// The JSON types of each kind's `openAPIV3Schema` ([`crds`] reduced by [`schema_types`]), kind
/// → schema, as `crd_types.json` holds them: generating the CRDs costs more than the rest of a
/// one-file `check`, so the reduced schemas are generated once, checked in, and read at run time
/// (the test `crd_types_json_is_current` holds the file to the types; `NVCRE_BLESS=1` rewrites
/// it).
static SCHEMAS: std::sync::LazyLock<serde_json::Map<String, serde_json::Value>> =
    std::sync::LazyLock::new(|| {
        serde_json::from_str(include_str!("crd_types.json")).unwrap_or_default()
    });

/// The structural-schema flag of an object that keeps fields its schema does not name.
const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";

/// The kinds' schemas reduced to what [`schema_type_problem`] and [`schema_unknown_fields`]
/// read: `type`, `properties`, `items`, an `additionalProperties` schema and
/// `x-kubernetes-preserve-unknown-fields`, kind → schema.
pub fn schema_types() -> serde_json::Map<String, serde_json::Value> {
    fn reduce(schema: &serde_json::Value) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        if let Some(t) = schema.get("type") {
            out.insert("type".into(), t.clone());
        }
        if let Some(p) = schema.get(PRESERVE).filter(|p| p.as_bool() == Some(true)) {
            out.insert(PRESERVE.into(), p.clone());
        }
        if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
            out.insert(
                "properties".into(),
                serde_json::Value::Object(
                    props.iter().map(|(k, v)| (k.clone(), reduce(v))).collect(),
                ),
            );
        }
        for key in ["items", "additionalProperties"] {
            if let Some(of) = schema.get(key).filter(|v| v.is_object()) {
                out.insert(key.into(), reduce(of));
            }
        }
        serde_json::Value::Object(out)
    }
    crds()
        .into_iter()
        .filter_map(|crd| {
            let version = crd.spec.versions.first()?;
            let schema = version.schema.as_ref()?.open_api_v3_schema.as_ref()?;
            Some((
                crd.spec.names.kind,
                reduce(&serde_json::to_value(schema).ok()?),
            ))
        })
        .collect()
}

/// A kind's CRD schema as [`schema_type_problem`] and [`schema_unknown_fields`] walk it, built
/// once from [`SCHEMAS`]: the JSON type, the properties sorted by name (found by binary search,
/// where the JSON schema's map hashes every lookup), whether an object is closed, and its
/// `items` / `additionalProperties` schema.
#[derive(Default)]
struct SchemaNode {
    /// `type`: `object`, `array`, `string`, `boolean`, `integer`, `number` (none: any).
    ty: Option<String>,
    /// An object that names its properties, keeps no unknown field and maps no other key.
    closed: bool,
    properties: Vec<(String, SchemaNode)>,
    items: Option<Box<SchemaNode>>,
    additional: Option<Box<SchemaNode>>,
}

impl SchemaNode {
    fn from_schema(schema: &serde_json::Value) -> SchemaNode {
        use serde_json::Value;
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        let mut props: Vec<(String, SchemaNode)> = properties
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), SchemaNode::from_schema(v)))
            .collect();
        props.sort_by(|a, b| a.0.cmp(&b.0));
        SchemaNode {
            ty: schema
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_string),
            closed: properties.is_some()
                && additional.is_none()
                && schema.get(PRESERVE).and_then(Value::as_bool) != Some(true),
            properties: props,
            items: schema
                .get("items")
                .filter(|i| i.is_object())
                .map(|i| Box::new(SchemaNode::from_schema(i))),
            additional: additional.map(|a| Box::new(SchemaNode::from_schema(a))),
        }
    }

    /// The schema of field `name`: its property's, else `additionalProperties`.
    fn property(&self, name: &str) -> Option<&SchemaNode> {
        self.properties
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| &self.properties[i].1)
            .or(self.additional.as_deref())
    }
}

/// Each kind's schema as a [`SchemaNode`].
static SCHEMA_NODES: std::sync::LazyLock<BTreeMap<String, SchemaNode>> =
    std::sync::LazyLock::new(|| {
        SCHEMAS
            .iter()
            .map(|(kind, schema)| (kind.clone(), SchemaNode::from_schema(schema)))
            .collect()
    });

/// One step of the path a walk of a document is at, borrowed from the document: the path is
/// made a [`nvcre_engine::FieldPath`] ([`path_of`]) only for a problem found.
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

/// The field path of `steps`.
fn path_of(steps: &[Step<'_>]) -> nvcre_engine::FieldPath {
    nvcre_engine::FieldPath::from_segments(
        steps
            .iter()
            .map(|s| match s {
                Step::Key(k) => nvcre_engine::Segment::Key((*k).to_string()),
                Step::Index(i) => nvcre_engine::Segment::Index(*i),
            })
            .collect(),
    )
}

/// The first place in `value`, a manifest of our `kind` (`WorkloadRun`, `Workflow`), in document
/// order, whose JSON type is not the one its CRD schema declares (a list where a mapping
/// belongs, a number where a string does), with the message `invalid type: list, expected a
/// mapping`. The API server refuses such a manifest. The typed read finds most of these; this
/// finds them in the fields kept as JSON (`spec.bandwidthMeasurement`, a Workflow's
/// `spec.orchestration`). Nulls are not checked (a null field is dropped before, as the API
/// server drops it). `None` for a kind that is not ours, or when every type is as declared.
pub fn schema_type_problem(
    kind: &str,
    value: &serde_json::Value,
) -> Option<(nvcre_engine::FieldPath, String)> {
    let mut steps = Vec::new();
    let message = type_problem(value, SCHEMA_NODES.get(kind)?, &mut steps)?;
    Some((path_of(&steps), message))
}

/// The first type problem at or below `value`, its path left in `steps`.
fn type_problem<'v>(
    value: &'v serde_json::Value,
    node: &SchemaNode,
    steps: &mut Vec<Step<'v>>,
) -> Option<String> {
    use serde_json::Value;
    let expected = match (node.ty.as_deref(), value) {
        (_, Value::Null) | (None, _) => None,
        (Some("object"), Value::Object(_))
        | (Some("array"), Value::Array(_))
        | (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_)) => None,
        (Some("integer"), Value::Number(n)) if n.is_i64() || n.is_u64() => None,
        (Some("number"), Value::Number(_)) => None,
        (Some("object"), _) => Some("a mapping"),
        (Some("array"), _) => Some("a list"),
        (Some("string"), _) => Some("a string"),
        (Some("boolean"), _) => Some("a boolean"),
        (Some("integer"), _) => Some("an integer"),
        (Some("number"), _) => Some("a number"),
        (Some(_), _) => None,
    };
    if let Some(expected) = expected {
        return Some(nvcre_engine::type_error(value, expected));
    }
    match value {
        Value::Array(items) => {
            let of = node.items.as_deref()?;
            items.iter().enumerate().find_map(|(i, item)| {
                steps.push(Step::Index(i));
                let found = type_problem(item, of, steps);
                if found.is_none() {
                    steps.pop();
                }
                found
            })
        }
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let of = node.property(k)?;
            steps.push(Step::Key(k));
            let found = type_problem(v, of, steps);
            if found.is_none() {
                steps.pop();
            }
            found
        }),
        _ => None,
    }
}

/// Every field of `value`, a manifest of our `kind`, that its CRD schema does not have, in
/// document order, at most `limit`: a field of an object whose schema names its properties and
/// neither keeps unknown fields (`x-kubernetes-preserve-unknown-fields`) nor maps any key
/// (`additionalProperties`). The API server's strict field validation refuses each (kubectl
/// `--validate=strict`, its default); without it the field would be dropped, so a misspelt
/// `placment: Unpinned` would run Pinned. Only `spec` is walked: the object's own fields
/// (`apiVersion`, `metadata`, …) are checked with their Kubernetes types. Empty for a kind that
/// is not ours.
pub fn schema_unknown_fields(
    kind: &str,
    value: &serde_json::Value,
    limit: usize,
) -> Vec<nvcre_engine::FieldPath> {
    fn walk<'v>(
        value: &'v serde_json::Value,
        node: &SchemaNode,
        at: &mut Vec<Step<'v>>,
        limit: usize,
        out: &mut Vec<nvcre_engine::FieldPath>,
    ) {
        use serde_json::Value;
        match value {
            Value::Array(items) => {
                if let Some(of) = &node.items {
                    for (i, item) in items.iter().enumerate() {
                        at.push(Step::Index(i));
                        walk(item, of, at, limit, out);
                        at.pop();
                    }
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    if out.len() >= limit {
                        return;
                    }
                    at.push(Step::Key(k));
                    match node.property(k) {
                        Some(of) => walk(v, of, at, limit, out),
                        None if node.closed => out.push(path_of(at)),
                        None => {}
                    }
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    let spec = SCHEMA_NODES.get(kind).and_then(|n| n.property("spec"));
    if let (Some(node), Some(value)) = (spec, value.get("spec")) {
        walk(value, node, &mut vec![Step::Key("spec")], limit, &mut out);
    }
    out
}

#[cfg(test)]
mod schema_types_tests {
    /// A group's `jobRef` reads as a name, or from the original controller's reference
    /// object; it is written as the name.
    #[test]
    fn a_group_job_ref_reads_a_name_or_a_reference() {
        let read = |v: serde_json::Value| {
            serde_json::from_value::<super::GroupStatus>(v)
                .map(|g| g.job_ref)
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            read(
                serde_json::json!({"name": "group-0", "phase": "Running", "jobRef": "wf-group-0"})
            ),
            Ok(Some("wf-group-0".to_string()))
        );
        assert_eq!(
            read(
                serde_json::json!({"name": "group-0", "phase": "Running", "jobRef": {"apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Job", "name": "wf-group-0", "namespace": "ns"}})
            ),
            Ok(Some("wf-group-0".to_string()))
        );
        assert_eq!(
            read(serde_json::json!({"name": "group-0", "phase": "Running"})),
            Ok(None)
        );
        let g = super::GroupStatus {
            job_ref: Some("wf-group-0".into()),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&g)
                .ok()
                .and_then(|v| v.get("jobRef").cloned()),
            Some(serde_json::json!("wf-group-0"))
        );
    }

    /// `crd_types.json` is what the API types give; `NVCRE_BLESS=1` rewrites it.
    #[test]
    fn crd_types_json_is_current() {
        let want = serde_json::Value::Object(super::schema_types());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/crd_types.json");
        if std::env::var_os("NVCRE_BLESS").is_some() {
            let text = serde_json::to_string(&want).expect("serializes") + "\n";
            std::fs::write(path, text).expect("writes crd_types.json");
        }
        let have: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("reads crd_types.json"))
                .expect("crd_types.json is JSON");
        assert!(
            have == want,
            "policy/src/crd_types.json is out of date: NVCRE_BLESS=1 cargo test -p nvcre-domain crd_types_json_is_current"
        );
    }
}
