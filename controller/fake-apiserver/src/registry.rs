//! The resource types served: built-in kinds and those of the CRDs created.

use serde_json::{Value, json};

/// One served resource type (one group/version/plural).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// API group, `""` for core.
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// Plural resource name (`configmaps`).
    pub plural: String,
    /// Singular name (`configmap`).
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Whether `/status` is a subresource (main writes then ignore `status`).
    pub status_subresource: bool,
    /// The CRD's `openAPIV3Schema` for this version (custom resources only).
    pub schema: Option<Value>,
    /// True for custom resources (generation counts every non-metadata change).
    pub custom: bool,
}

impl ResourceType {
    fn builtin(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        status: bool,
    ) -> ResourceType {
        ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            status_subresource: status,
            schema: None,
            custom: false,
        }
    }

    /// `v1` or `group/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The discovery entries (`APIResource`) of this type and its status subresource.
    pub fn discovery(&self) -> Vec<Value> {
        let verbs = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let mut out = vec![json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        })];
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

/// The built-in types served from the start.
pub fn builtins() -> Vec<ResourceType> {
    vec![
        ResourceType::builtin("", "v1", "Namespace", "namespaces", false, true),
        ResourceType::builtin("", "v1", "Node", "nodes", false, true),
        ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true, false),
        ResourceType::builtin("", "v1", "Secret", "secrets", true, false),
        ResourceType::builtin("", "v1", "Event", "events", true, false),
        ResourceType::builtin("", "v1", "Pod", "pods", true, true),
        ResourceType::builtin("coordination.k8s.io", "v1", "Lease", "leases", true, false),
        ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true, false),
        ResourceType::builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            true,
        ),
    ]
}

/// The served versions of a CRD object as resource types (empty when it is malformed).
pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        spec["names"]["kind"].as_str(),
        spec["names"]["plural"].as_str(),
    ) else {
        return Vec::new();
    };
    let singular = spec["names"]["singular"]
        .as_str()
        .map_or_else(|| kind.to_lowercase(), str::to_string);
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let Some(versions) = spec["versions"].as_array() else {
        return Vec::new();
    };
    versions
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .filter_map(|v| {
            Some(ResourceType {
                group: group.into(),
                version: v["name"].as_str()?.into(),
                kind: kind.into(),
                plural: plural.into(),
                singular: singular.clone(),
                namespaced,
                status_subresource: v["subresources"].get("status").is_some(),
                schema: v["schema"].get("openAPIV3Schema").cloned(),
                custom: true,
            })
        })
        .collect()
}
