//! Cluster nodes as NVCRE sees them: parsing core/v1 `Node` documents, GPU product
//! normalisation (by the rows of the `gpu-products` table, [`GpuProducts`]), the majority vote
//! on the GPU architecture and target discovery.
//!
//! Everything here is pure: nodes come in as JSON documents (a `kubectl get nodes -o yaml`
//! dump, a `--nodes-file`, or what a controller listed) and go out as plain values.

// Input paths must not panic: every lookup is checked.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::api::{NodeSelectorRequirement, TaintSelector, TargetSpec};

/// Node label carrying the raw GPU product, e.g. `NVIDIA-H100-80GB-HBM3`.
pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// Node label that marks a GPU node (`"true"`).
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";
/// The hostname label pinned jobs match on.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Architecture reported when no node carries a GPU product label.
pub const UNKNOWN_ARCH: &str = "unknown";

/// A node taint (`spec.taints[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value; empty when the taint has none.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The parts of a core/v1 `Node` that discovery, detection and placement read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.providerID`; empty when absent.
    pub provider_id: String,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `status.allocatable`, quantities as written (numbers are turned into their decimal text).
    pub allocatable: BTreeMap<String, String>,
    /// Whether its `nvidia.com/gpu.product` label was made up (a stand-in node of `--platform`
    /// for a target that only asks for a product to exist): placement never writes a made-up
    /// product into a node affinity, where it would match no real node.
    pub made_up_product: bool,
}

/// Why a node document could not be read.
///
/// `index` is the position of the document in the input slice of
/// [`nodes_from_documents`] (0 for [`Node::from_json`]; messages count documents from 1, as
/// every other message does); `field` is the path inside that
/// document, e.g. `items[2].metadata.name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A required field is absent (or null).
    #[error("node document {}: missing field {field}", .index + 1)]
    Missing {
        /// Document index.
        index: usize,
        /// Field path.
        field: String,
    },
    /// A field has the wrong JSON type.
    #[error("node document {}: field {field} must be {expected}, found {found}", .index + 1)]
    WrongType {
        /// Document index.
        index: usize,
        /// Field path.
        field: String,
        /// What the field must be (`a string`, `an object`, …).
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// Two nodes have the same `metadata.name`: placement would count one machine twice (and
    /// pin a group to it twice).
    #[error(
        "node document {}: field {field}: node \"{name}\" is listed twice (first at node document {}, {first_field}{}); a node name is unique in a cluster: remove one",
        .index + 1,
        .first_index + 1,
        .first_at.as_ref().map(|at| format!(", {at}")).unwrap_or_default()
    )]
    Duplicate {
        /// Document index of the second listing.
        index: usize,
        /// Field path of its name.
        field: String,
        /// The node name.
        name: String,
        /// Document index of the first listing.
        first_index: usize,
        /// Field path of the first listing's name.
        first_field: String,
        /// Where the first listing's name is written (`file:line:col`), when the reader knows.
        first_at: Option<String>,
    },
    /// The document (or a list item) is not a Node.
    #[error(
        "node document {}: field {field}: expected kind Node, NodeList or List, got \"{kind}\"",
        .index + 1
    )]
    UnexpectedKind {
        /// Document index.
        index: usize,
        /// Field path of the `kind` that was read.
        field: String,
        /// The kind found.
        kind: String,
    },
}

/// The field path a [`NodeError`] gives for a node document that is not a mapping at all.
pub const DOCUMENT_FIELD: &str = "(document)";

impl NodeError {
    /// The index of the node document the error is about and the field path inside it, as
    /// the message writes them (`items[2].metadata.name`; `(document)` for the document itself).
    pub fn location(&self) -> (usize, &str) {
        match self {
            NodeError::Missing { index, field }
            | NodeError::WrongType { index, field, .. }
            | NodeError::Duplicate { index, field, .. }
            | NodeError::UnexpectedKind { index, field, .. } => (*index, field),
        }
    }
}

impl Node {
    /// Reads one core/v1 `Node` document.
    ///
    /// Shape: `{kind?: Node, metadata: {name, labels?}, spec?: {providerID?, unschedulable?,
    /// taints?: [{key, value?, effect?}]}, status?: {allocatable?: {name: quantity}}}`. A `kind`
    /// other than `Node` is refused; a missing `kind` is accepted (items of a `NodeList` carry
    /// none).
    ///
    /// # Errors
    /// [`NodeError`] with index 0 and the path of the missing or mistyped field.
    ///
    /// # Example
    /// ```
    /// use nvcre_domain::Node;
    /// let node = Node::from_json(&serde_json::json!({
    ///     "kind": "Node",
    ///     "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"}},
    ///     "status": {"allocatable": {"nvidia.com/gpu": "8"}}
    /// }))?;
    /// assert_eq!(node.name, "gpu-1");
    /// assert_eq!(node.allocatable.get("nvidia.com/gpu").map(String::as_str), Some("8"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_json(doc: &Value) -> Result<Node, NodeError> {
        node_at(doc, 0, "")
    }

    /// The raw `nvidia.com/gpu.product` label, or `""`.
    pub fn gpu_product(&self) -> &str {
        self.labels
            .get(GPU_PRODUCT_LABEL)
            .map_or("", String::as_str)
    }

    /// The normalised architecture of this node ([`GpuProducts::architecture`]), `unknown`
    /// when the product label is absent or normalises to nothing.
    pub fn gpu_architecture(&self, products: &GpuProducts) -> String {
        let arch = products.architecture(self.gpu_product());
        if arch.is_empty() {
            UNKNOWN_ARCH.to_string()
        } else {
            arch
        }
    }

    /// True when the node carries `nvidia.com/gpu.present=true`.
    pub fn is_gpu_node(&self) -> bool {
        self.labels.get(GPU_PRESENT_LABEL).map(String::as_str) == Some("true")
    }
}

/// Reads nodes from a stream of documents: `v1 NodeList` (or `List`) documents with `items`,
/// and/or individual `Node` documents, in any mix. Null documents (empty YAML documents) are
/// skipped. Nodes come out in input order; discovery sorts them.
///
/// # Errors
/// [`NodeError`] naming the document index and the field (`items[i].…` inside a list).
///
/// # Example
/// ```
/// use nvcre_domain::nodes_from_documents;
/// let docs = [serde_json::json!({
///     "apiVersion": "v1", "kind": "List",
///     "items": [{"kind": "Node", "metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]
/// })];
/// let nodes = nodes_from_documents(&docs)?;
/// assert_eq!(nodes.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn nodes_from_documents(docs: &[Value]) -> Result<Vec<Node>, NodeError> {
    let mut out = Vec::new();
    // Where each node name was read: (document index, field path of the name).
    let mut seen: std::collections::HashMap<String, (usize, String)> =
        std::collections::HashMap::new();
    let mut unique = |node: Node, index: usize, prefix: &str| -> Result<Node, NodeError> {
        let field = format!("{prefix}metadata.name");
        match seen.entry(node.name.clone()) {
            std::collections::hash_map::Entry::Occupied(first) => {
                let (first_index, first_field) = first.get().clone();
                Err(NodeError::Duplicate {
                    index,
                    field,
                    name: node.name,
                    first_index,
                    first_field,
                    first_at: None,
                })
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((index, field));
                Ok(node)
            }
        }
    };
    for (index, doc) in docs.iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let obj = doc.as_object().ok_or(NodeError::WrongType {
            index,
            field: DOCUMENT_FIELD.to_string(),
            expected: "an object",
            found: type_name(doc),
        })?;
        let kind = match obj.get("kind") {
            None | Some(Value::Null) => {
                return Err(NodeError::Missing {
                    index,
                    field: "kind".to_string(),
                });
            }
            Some(Value::String(k)) => k.as_str(),
            Some(other) => {
                return Err(NodeError::WrongType {
                    index,
                    field: "kind".to_string(),
                    expected: "a string",
                    found: type_name(other),
                });
            }
        };
        match kind {
            "Node" => out.push(unique(node_at(doc, index, "")?, index, "")?),
            "NodeList" | "List" => {
                let items = match obj.get("items") {
                    None | Some(Value::Null) => continue,
                    Some(Value::Array(items)) => items,
                    Some(other) => {
                        return Err(NodeError::WrongType {
                            index,
                            field: "items".to_string(),
                            expected: "a list",
                            found: type_name(other),
                        });
                    }
                };
                for (i, item) in items.iter().enumerate() {
                    let prefix = format!("items[{i}].");
                    out.push(unique(node_at(item, index, &prefix)?, index, &prefix)?);
                }
            }
            other => {
                return Err(NodeError::UnexpectedKind {
                    index,
                    field: "kind".to_string(),
                    kind: other.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// JSON type name for error messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads one Node at document `index`, with field paths prefixed by `prefix`.
fn node_at(doc: &Value, index: usize, prefix: &str) -> Result<Node, NodeError> {
    let wrong = |field: &str, expected: &'static str, v: &Value| NodeError::WrongType {
        index,
        field: format!("{prefix}{field}"),
        expected,
        found: type_name(v),
    };
    let missing = |field: &str| NodeError::Missing {
        index,
        field: format!("{prefix}{field}"),
    };
    let obj = doc.as_object().ok_or_else(|| NodeError::WrongType {
        index,
        // A list item is named by its path; a whole document by DOCUMENT_FIELD.
        field: match prefix.strip_suffix('.') {
            Some(item) => item.to_string(),
            None => DOCUMENT_FIELD.to_string(),
        },
        expected: "an object",
        found: type_name(doc),
    })?;
    match obj.get("kind") {
        None | Some(Value::Null) => {}
        Some(Value::String(k)) if k == "Node" => {}
        Some(Value::String(k)) => {
            return Err(NodeError::UnexpectedKind {
                index,
                field: format!("{prefix}kind"),
                kind: k.clone(),
            });
        }
        Some(other) => return Err(wrong("kind", "a string", other)),
    }
    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => return Err(missing("metadata.name")),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(wrong("metadata", "an object", other)),
    };
    let name = match metadata.get("name") {
        None | Some(Value::Null) => return Err(missing("metadata.name")),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(missing("metadata.name")),
        Some(other) => return Err(wrong("metadata.name", "a string", other)),
    };
    let labels = string_map(metadata.get("labels"), "metadata.labels", false)
        .map_err(|(field, v)| wrong(&field, "a string", &v))?;

    let (provider_id, unschedulable, taints) = match obj.get("spec") {
        None | Some(Value::Null) => (String::new(), false, Vec::new()),
        Some(Value::Object(spec)) => {
            let provider_id = match spec.get("providerID") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => return Err(wrong("spec.providerID", "a string", other)),
            };
            let unschedulable = match spec.get("unschedulable") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => return Err(wrong("spec.unschedulable", "a boolean", other)),
            };
            let taints = match spec.get("taints") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => {
                    let mut taints = Vec::with_capacity(items.len());
                    for (i, t) in items.iter().enumerate() {
                        taints.push(taint_at(t, &format!("spec.taints[{i}]"), &wrong, &missing)?);
                    }
                    taints
                }
                Some(other) => return Err(wrong("spec.taints", "a list", other)),
            };
            (provider_id, unschedulable, taints)
        }
        Some(other) => return Err(wrong("spec", "an object", other)),
    };

    let allocatable = match obj.get("status") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Object(status)) => {
            string_map(status.get("allocatable"), "status.allocatable", true)
                .map_err(|(field, v)| wrong(&field, "a quantity string", &v))?
        }
        Some(other) => return Err(wrong("status", "an object", other)),
    };

    Ok(Node {
        name,
        labels,
        provider_id,
        unschedulable,
        taints,
        allocatable,
        made_up_product: false,
    })
}

/// Reads one taint.
fn taint_at(
    t: &Value,
    field: &str,
    wrong: &dyn Fn(&str, &'static str, &Value) -> NodeError,
    missing: &dyn Fn(&str) -> NodeError,
) -> Result<Taint, NodeError> {
    let obj = t.as_object().ok_or_else(|| wrong(field, "an object", t))?;
    let text = |k: &str, required: bool| -> Result<String, NodeError> {
        match obj.get(k) {
            None | Some(Value::Null) if required => Err(missing(&format!("{field}.{k}"))),
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(wrong(&format!("{field}.{k}"), "a string", other)),
        }
    };
    Ok(Taint {
        key: text("key", true)?,
        value: text("value", false)?,
        effect: text("effect", false)?,
    })
}

/// Reads a `{string: string}` map. With `numbers_ok`, numeric values are kept as their
/// decimal text (allocatable quantities are sometimes written bare). On error returns the
/// field path and the offending value.
pub(crate) fn string_map(
    v: Option<&Value>,
    field: &str,
    numbers_ok: bool,
) -> Result<BTreeMap<String, String>, (String, Value)> {
    let mut out = BTreeMap::new();
    let obj = match v {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Object(o)) => o,
        Some(other) => return Err((field.to_string(), other.clone())),
    };
    for (k, val) in obj {
        let s = match val {
            Value::String(s) => s.clone(),
            Value::Number(n) if numbers_ok => n.to_string(),
            other => return Err((format!("{field}[\"{k}\"]"), other.clone())),
        };
        out.insert(k.clone(), s);
    }
    Ok(out)
}

/// One step of GPU product normalisation: a row of the `gpu-products` table.
#[derive(Debug, Clone)]
pub enum GpuProductRule {
    /// Replace every match of the regex by the replacement (`$1` … refer to groups).
    Rewrite(regex::Regex, String),
    /// When the regex matches, the architecture is the template with the match's groups
    /// expanded, lower-cased.
    Match(regex::Regex, String),
}

/// How GPU product labels and `--gpu-arch` spellings become architecture names: every rewrite
/// rule in order, then the first matching match rule; no match is an unknown architecture
/// (`""`). Decoded from the `gpu-products` table by [`crate::detect::gpu_products`].
#[derive(Debug, Clone, Default)]
pub struct GpuProducts {
    rules: Vec<GpuProductRule>,
}

impl GpuProducts {
    /// The rules, applied as described on [`GpuProducts`].
    pub fn new(rules: Vec<GpuProductRule>) -> GpuProducts {
        GpuProducts { rules }
    }

    /// The architecture name of a product label or `--gpu-arch` value; `""` when no rule
    /// matches.
    pub fn architecture(&self, value: &str) -> String {
        let mut v = value.to_string();
        for r in &self.rules {
            if let GpuProductRule::Rewrite(re, with) = r {
                v = re.replace_all(&v, with.as_str()).into_owned();
            }
        }
        for r in &self.rules {
            if let GpuProductRule::Match(re, template) = r
                && let Some(caps) = re.captures(&v)
            {
                let mut out = String::new();
                caps.expand(template, &mut out);
                return out.to_lowercase();
            }
        }
        String::new()
    }
}

/// The cluster's GPU architecture: a majority vote over the nodes that carry a product
/// label. Nodes are considered in name order; unlabelled nodes do not vote; a tie goes to the
/// architecture of the earliest node (by name) among the tied ones; `unknown` when no
/// node is labelled (including an empty slice).
pub fn detect_gpu_architecture(nodes: &[Node], products: &GpuProducts) -> String {
    let mut ordered: Vec<&Node> = nodes.iter().collect();
    ordered.sort_by(|a, b| a.name.cmp(&b.name));
    let labelled: Vec<String> = ordered
        .iter()
        .map(|n| products.architecture(n.gpu_product()))
        .filter(|a| !a.is_empty())
        .collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for arch in &labelled {
        *counts.entry(arch.as_str()).or_insert(0) += 1;
    }
    let count = |a: &str| counts.get(a).copied().unwrap_or(0);
    let mut primary: Option<&str> = None;
    for arch in &labelled {
        match primary {
            Some(p) if count(arch) <= count(p) => {}
            _ => primary = Some(arch.as_str()),
        }
    }
    primary.unwrap_or(UNKNOWN_ARCH).to_string()
}

/// The result of target discovery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Eligible nodes: matched the target, schedulable, `nvidia.com/gpu.present=true`, sorted
    /// by name.
    pub nodes: Vec<Node>,
    /// GPU nodes that matched the target but are cordoned (`spec.unschedulable`), sorted.
    pub cordoned: Vec<String>,
}

/// Target discovery: from all cluster nodes, the eligible ones.
///
/// Filters, in order:
/// 1. `target.nodeSelector`: every entry must equal the node's label — skipped when
///    `target.nodeNames` is set (the original API: "When it is set, nodeSelector is
///    ignored for discovery");
/// 2. `target.matchExpressions`: every requirement must hold (`In`, `NotIn`, `Exists`,
///    `DoesNotExist`; any other operator, `In`/`NotIn` without values, or
///    `Exists`/`DoesNotExist` with values fails the node, as a label selector would refuse it);
/// 3. `target.nodeNames`: keep only those names;
/// 4. `target.taintSelectors`: the node must carry **all** of them (key equal; value and
///    effect equal when given);
/// 5. cordoned nodes are dropped, unless the target selects them on purpose
///    (`TargetSpec::includes_cordoned`); those with `nvidia.com/gpu.present=true` are
///    recorded in [`Discovery::cordoned`] (a cordoned CPU node was never a candidate);
/// 6. only `nvidia.com/gpu.present=true` nodes are kept;
/// 7. sorted by name.
///
/// `None` (or an empty target) keeps every schedulable GPU node.
pub fn discover_targets(nodes: &[Node], target: Option<&TargetSpec>) -> Discovery {
    let names: Option<BTreeSet<&str>> = target
        .filter(|t| !t.node_names.is_empty())
        .map(|t| t.node_names.iter().map(String::as_str).collect());
    let mut kept = Vec::new();
    let mut cordoned = Vec::new();
    for node in nodes {
        if let Some(t) = target {
            if names.is_none() && !matches_node_selector(node, &t.node_selector) {
                continue;
            }
            if !t
                .match_expressions
                .iter()
                .all(|r| matches_requirement(node, r))
            {
                continue;
            }
            if let Some(names) = &names
                && !names.contains(node.name.as_str())
            {
                continue;
            }
            if !t.taint_selectors.iter().all(|s| has_taint(node, s)) {
                continue;
            }
        }
        if node.unschedulable && !target.is_some_and(TargetSpec::includes_cordoned) {
            if node.is_gpu_node() {
                cordoned.push(node.name.clone());
            }
            continue;
        }
        if node.is_gpu_node() {
            kept.push(node.clone());
        }
    }
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    cordoned.sort();
    Discovery {
        nodes: kept,
        cordoned,
    }
}

/// Label equality on every selector entry.
fn matches_node_selector(node: &Node, selector: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| node.labels.get(k).is_some_and(|have| have == v))
}

/// One NodeSelectorRequirement against the node's labels (label-selector semantics):
/// `In` needs the label with one of the values, `NotIn` the label absent or with none of
/// them, `Exists`/`DoesNotExist` the key present/absent. A requirement a label selector would
/// refuse (unknown operator such as `Gt`, `In`/`NotIn` without values, `Exists`/`DoesNotExist`
/// with values) matches no node.
pub fn matches_requirement(node: &Node, req: &NodeSelectorRequirement) -> bool {
    let value = node.labels.get(&req.key);
    match req.operator.as_str() {
        "In" => !req.values.is_empty() && value.is_some_and(|v| req.values.contains(v)),
        "NotIn" => !req.values.is_empty() && value.is_none_or(|v| !req.values.contains(v)),
        "Exists" => req.values.is_empty() && value.is_some(),
        "DoesNotExist" => req.values.is_empty() && value.is_none(),
        _ => false,
    }
}

/// True when the node carries a taint matching the selector.
fn has_taint(node: &Node, sel: &TaintSelector) -> bool {
    // A cordoned node carries the unschedulable taint, also when a nodes file leaves it out.
    let cordon = node.unschedulable
        && sel.key == crate::api::UNSCHEDULABLE_TAINT
        && sel.value.as_deref().is_none_or(str::is_empty)
        && sel
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
    cordon
        || node.taints.iter().any(|t| {
            t.key == sel.key
                && sel
                    .value
                    .as_deref()
                    .is_none_or(|v| v.is_empty() || v == t.value)
                && sel
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == t.effect)
        })
}

/// Fixture normalisation rules (not the shipped gpu-products table): the mechanism
/// (rewrites first, first match, group expansion, lower-casing) over these rows.
#[cfg(test)]
pub(crate) fn fixture_gpu_products() -> GpuProducts {
    let re = |p: &str| regex::Regex::new(p).unwrap();
    GpuProducts::new(vec![
        GpuProductRule::Rewrite(re(r"^\s+|\s+$"), String::new()),
        GpuProductRule::Rewrite(re(" "), "-".into()),
        GpuProductRule::Match(re("^(?:NVIDIA-)?(?i:RTX-PRO-6000)"), "rtxpro6000".into()),
        GpuProductRule::Match(re("^NVIDIA-([^-]+)"), "$1".into()),
        GpuProductRule::Match(re("^NVIDIA-(.*)$"), "$1".into()),
        GpuProductRule::Match(re("^([^-]+)"), "$1".into()),
        GpuProductRule::Match(re("^(.*)$"), "$1".into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Node::default()
        }
    }

    fn gpu(name: &str, product: &str) -> Node {
        let mut n = node(name, &[(GPU_PRESENT_LABEL, "true")]);
        if !product.is_empty() {
            n.labels
                .insert(GPU_PRODUCT_LABEL.to_string(), product.to_string());
        }
        n
    }

    fn names(nodes: &[Node]) -> Vec<&str> {
        nodes.iter().map(|n| n.name.as_str()).collect()
    }

    fn products() -> GpuProducts {
        fixture_gpu_products()
    }

    macro_rules! normalize {
        ($($name:ident: $label:expr => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(products().architecture($label), $want);
            }
        )*};
    }

    normalize! {
        norm_h100_hbm3: "NVIDIA-H100-80GB-HBM3" => "h100";
        norm_h100_nvl: "NVIDIA-H100-NVL" => "h100";
        norm_a100: "NVIDIA-A100-SXM4-40GB" => "a100";
        norm_gb200: "NVIDIA-GB200" => "gb200";
        norm_gb200_nvl72: "NVIDIA-GB200-NVL72" => "gb200";
        norm_gb300_nvl72: "NVIDIA-GB300-NVL72" => "gb300";
        norm_l40: "NVIDIA-L40" => "l40";
        norm_l40s: "NVIDIA-L40S" => "l40s";
        norm_rtxpro6000: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition" => "rtxpro6000";
        norm_rtxpro6000_case: "NVIDIA-rtx-pro-6000-x" => "rtxpro6000";
        norm_empty: "" => "";
        norm_h200: "NVIDIA-H200" => "h200";
        norm_b200: "NVIDIA-B200" => "b200";
        norm_prefix_case_sensitive: "nvidia-H100" => "nvidia";
        norm_leading_dash: "-H100" => "-h100";
        norm_no_prefix: "Tesla-T4" => "tesla";
        norm_only_prefix: "NVIDIA-" => "";
        norm_flag_spaces: " NVIDIA GB300 " => "gb300";
    }

    #[test]
    fn no_matching_rule_is_unknown() {
        let p = GpuProducts::new(vec![GpuProductRule::Match(
            regex::Regex::new("^X-(.+)$").unwrap(),
            "x$1".into(),
        )]);
        assert_eq!(p.architecture("X-Y"), "xy");
        assert_eq!(p.architecture("Z"), "");
        assert_eq!(gpu("a", "Z").gpu_architecture(&p), "unknown");
    }

    macro_rules! majority {
        ($($name:ident: [$(($n:expr, $p:expr)),*] => $want:expr;)*) => {$(
            #[test]
            fn $name() {
                let nodes: Vec<Node> = vec![$(gpu($n, $p)),*];
                assert_eq!(detect_gpu_architecture(&nodes, &products()), $want);
            }
        )*};
    }

    majority! {
        vote_none: [] => "unknown";
        vote_all_unlabelled: [("a", ""), ("b", "")] => "unknown";
        vote_single: [("a", "NVIDIA-GB200")] => "gb200";
        vote_majority_beats_first: [("a", "NVIDIA-A100-SXM4-40GB"), ("b", "NVIDIA-H100-NVL"), ("c", "NVIDIA-H100-80GB-HBM3")] => "h100";
        vote_tie_earliest: [("b", "NVIDIA-H100-NVL"), ("a", "NVIDIA-A100-SXM4-40GB")] => "a100";
        vote_tie_earliest_2x2: [("d", "NVIDIA-A100-SXM4-40GB"), ("a", "NVIDIA-H100-NVL"), ("c", "NVIDIA-A100-SXM4-40GB"), ("b", "NVIDIA-H100-NVL")] => "h100";
        vote_unlabelled_do_not_vote: [("a", ""), ("b", ""), ("c", "NVIDIA-L40S")] => "l40s";
    }

    #[test]
    fn from_json_reads_every_field() {
        let n = Node::from_json(&json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "b"}},
            "spec": {"providerID": "aws://x", "unschedulable": true,
                     "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k2", "effect": "NoExecute"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": 96}}
        }))
        .unwrap();
        assert_eq!(n.name, "n1");
        assert_eq!(n.labels.get("a").unwrap(), "b");
        assert_eq!(n.provider_id, "aws://x");
        assert!(n.unschedulable);
        assert_eq!(
            n.taints,
            vec![
                Taint {
                    key: "k".into(),
                    value: "v".into(),
                    effect: "NoSchedule".into()
                },
                Taint {
                    key: "k2".into(),
                    value: "".into(),
                    effect: "NoExecute".into()
                },
            ]
        );
        assert_eq!(n.allocatable.get("cpu").unwrap(), "96");
    }

    macro_rules! bad_node {
        ($($name:ident: $doc:expr => $msg:expr;)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(Node::from_json(&$doc).unwrap_err().to_string(), $msg);
            }
        )*};
    }

    bad_node! {
        bad_no_name: json!({"kind": "Node", "metadata": {}}) => "node document 1: missing field metadata.name";
        bad_no_metadata: json!({"kind": "Node"}) => "node document 1: missing field metadata.name";
        bad_name_type: json!({"metadata": {"name": 3}}) => "node document 1: field metadata.name must be a string, found a number";
        bad_label_type: json!({"metadata": {"name": "a", "labels": {"x": true}}}) => "node document 1: field metadata.labels[\"x\"] must be a string, found a boolean";
        bad_kind: json!({"kind": "Pod", "metadata": {"name": "a"}}) => "node document 1: field kind: expected kind Node, NodeList or List, got \"Pod\"";
        bad_unschedulable: json!({"metadata": {"name": "a"}, "spec": {"unschedulable": "yes"}}) => "node document 1: field spec.unschedulable must be a boolean, found a string";
        bad_taint_key: json!({"metadata": {"name": "a"}, "spec": {"taints": [{"effect": "NoSchedule"}]}}) => "node document 1: missing field spec.taints[0].key";
        bad_allocatable: json!({"metadata": {"name": "a"}, "status": {"allocatable": {"x": []}}}) => "node document 1: field status.allocatable[\"x\"] must be a quantity string, found a list";
        bad_not_object: json!([1]) => "node document 1: field (document) must be an object, found a list";
    }

    #[test]
    fn documents_mix_lists_and_nodes() {
        let docs = [
            json!({"apiVersion": "v1", "kind": "NodeList", "items": [{"metadata": {"name": "a"}}]}),
            Value::Null,
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}}),
            json!({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", "metadata": {"name": "c"}}]}),
        ];
        let nodes = nodes_from_documents(&docs).unwrap();
        assert_eq!(names(&nodes), ["a", "b", "c"]);
    }

    #[test]
    fn a_node_listed_twice_is_refused_naming_both() {
        let docs = [
            json!({"kind": "List", "items": [{"metadata": {"name": "n1"}}, {"metadata": {"name": "n1"}}]}),
        ];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 1: field items[1].metadata.name: node \"n1\" is listed twice (first at node document 1, items[0].metadata.name); a node name is unique in a cluster: remove one"
        );
        let docs = [
            json!({"kind": "Node", "metadata": {"name": "a"}}),
            json!({"kind": "Node", "metadata": {"name": "b"}}),
            json!({"kind": "Node", "metadata": {"name": "a"}}),
        ];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 3: field metadata.name: node \"a\" is listed twice (first at node document 1, metadata.name); a node name is unique in a cluster: remove one"
        );
    }

    #[test]
    fn documents_errors_name_index_and_item() {
        let docs = [
            json!({"kind": "Node", "metadata": {"name": "a"}}),
            json!({"kind": "List", "items": [{"metadata": {"name": "b"}}, {"metadata": {}}]}),
        ];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 2: missing field items[1].metadata.name"
        );
        let docs = [json!({"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p"}}]})];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 1: field items[0].kind: expected kind Node, NodeList or List, got \"Pod\""
        );
        let docs = [json!({"metadata": {"name": "a"}})];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 1: missing field kind"
        );
        let docs = [json!({"kind": "ConfigMap"})];
        assert_eq!(
            nodes_from_documents(&docs).unwrap_err().to_string(),
            "node document 1: field kind: expected kind Node, NodeList or List, got \"ConfigMap\""
        );
    }

    fn target(v: Value) -> TargetSpec {
        serde_json::from_value(v).unwrap()
    }

    fn fleet() -> Vec<Node> {
        let mut a = gpu("node-a", "NVIDIA-H100-NVL");
        a.labels.insert("rack".into(), "r1".into());
        a.labels
            .insert("nvidia.com/gpu.clique".into(), "clique-0".into());
        let mut b = gpu("node-b", "NVIDIA-H100-NVL");
        b.labels.insert("rack".into(), "r2".into());
        b.taints.push(Taint {
            key: "dedicated".into(),
            value: "gpu".into(),
            effect: "NoSchedule".into(),
        });
        let mut c = gpu("node-c", "NVIDIA-H100-NVL");
        c.labels.insert("rack".into(), "r1".into());
        c.unschedulable = true;
        let cpu = node("cpu-1", &[("rack", "r1")]);
        let mut cpu_cordoned = node("cpu-2", &[("rack", "r1")]);
        cpu_cordoned.unschedulable = true;
        vec![c, b, cpu, a, cpu_cordoned]
    }

    macro_rules! discovery {
        ($($name:ident: $target:expr => [$($want:expr),*], cordoned [$($c:expr),*];)*) => {$(
            #[test]
            fn $name() {
                let t: Option<TargetSpec> = $target;
                let d = discover_targets(&fleet(), t.as_ref());
                let want: Vec<&str> = vec![$($want),*];
                let cordoned: Vec<&str> = vec![$($c),*];
                assert_eq!(names(&d.nodes), want);
                assert_eq!(d.cordoned, cordoned);
            }
        )*};
    }

    discovery! {
        disc_no_target: None => ["node-a", "node-b"], cordoned ["node-c"];
        disc_empty_target: Some(TargetSpec::default()) => ["node-a", "node-b"], cordoned ["node-c"];
        disc_selector: Some(target(json!({"nodeSelector": {"rack": "r1"}}))) => ["node-a"], cordoned ["node-c"];
        disc_selector_missing_label: Some(target(json!({"nodeSelector": {"zone": "z"}}))) => [], cordoned [];
        disc_in: Some(target(json!({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]}))) => ["node-b"], cordoned [];
        disc_notin_absent_matches: Some(target(json!({"matchExpressions": [{"key": "nvidia.com/gpu.clique", "operator": "NotIn", "values": ["clique-0"]}]}))) => ["node-b"], cordoned ["node-c"];
        disc_exists: Some(target(json!({"matchExpressions": [{"key": "nvidia.com/gpu.clique", "operator": "Exists"}]}))) => ["node-a"], cordoned [];
        disc_does_not_exist: Some(target(json!({"matchExpressions": [{"key": "nvidia.com/gpu.clique", "operator": "DoesNotExist"}]}))) => ["node-b"], cordoned ["node-c"];
        disc_gt_fails: Some(target(json!({"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["1"]}]}))) => [], cordoned [];
        disc_in_without_values_fails: Some(target(json!({"matchExpressions": [{"key": "rack", "operator": "In"}]}))) => [], cordoned [];
        disc_exists_with_values_fails: Some(target(json!({"matchExpressions": [{"key": "rack", "operator": "Exists", "values": ["r1"]}]}))) => [], cordoned [];
        disc_node_names: Some(target(json!({"nodeNames": ["node-b", "node-c", "cpu-1"]}))) => ["node-b"], cordoned ["node-c"];
        disc_node_names_ignore_selector: Some(target(json!({"nodeNames": ["node-b"], "nodeSelector": {"rack": "r1"}}))) => ["node-b"], cordoned [];
        disc_taint_key: Some(target(json!({"taintSelectors": [{"key": "dedicated"}]}))) => ["node-b"], cordoned [];
        disc_taint_value_effect: Some(target(json!({"taintSelectors": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}))) => ["node-b"], cordoned [];
        disc_taint_wrong_value: Some(target(json!({"taintSelectors": [{"key": "dedicated", "value": "cpu"}]}))) => [], cordoned [];
        disc_taint_all_required: Some(target(json!({"taintSelectors": [{"key": "dedicated"}, {"key": "other"}]}))) => [], cordoned [];
        // Cordoned nodes selected on purpose are kept; the node carries the unschedulable
        // taint also when its taint list (here, a nodes file's) leaves it out.
        disc_cordoned_on_purpose: Some(target(json!({"taintSelectors": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}))) => ["node-c"], cordoned [];
        disc_cordoned_other_effect: Some(target(json!({"taintSelectors": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute"}]}))) => [], cordoned [];
    }

    #[test]
    fn gpu_architecture_of_unlabelled_node_is_unknown() {
        assert_eq!(gpu("a", "").gpu_architecture(&products()), "unknown");
        assert_eq!(
            gpu("a", "NVIDIA-GB200").gpu_architecture(&products()),
            "gb200"
        );
    }

    #[test]
    fn example_detect_gpu_architecture() -> Result<(), Box<dyn std::error::Error>> {
        use crate::nodes::{Node, detect_gpu_architecture};
        let node = |name: &str, product: &str| Node {
            name: name.into(),
            labels: [("nvidia.com/gpu.product".to_string(), product.to_string())].into(),
            ..Node::default()
        };
        let nodes = [
            node("a", "NVIDIA-A100-SXM4-40GB"),
            node("b", "NVIDIA-H100-NVL"),
            node("c", "NVIDIA-H100-NVL"),
        ];
        let products = products();
        assert_eq!(detect_gpu_architecture(&nodes, &products), "h100");
        assert_eq!(detect_gpu_architecture(&[], &products), "unknown");
        Ok(())
    }

    #[test]
    fn example_discover_targets() -> Result<(), Box<dyn std::error::Error>> {
        use crate::nodes::{Node, discover_targets};
        let gpu = |name: &str| Node {
            name: name.into(),
            labels: [("nvidia.com/gpu.present".to_string(), "true".to_string())].into(),
            ..Node::default()
        };
        let mut cordoned = gpu("b");
        cordoned.unschedulable = true;
        let found = discover_targets(&[gpu("c"), cordoned, gpu("a")], None);
        let names: Vec<_> = found.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(found.cordoned, ["b"]);
        Ok(())
    }

    #[test]
    fn example_matches_requirement() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{
            api::NodeSelectorRequirement,
            nodes::{Node, matches_requirement},
        };
        let node = Node {
            name: "a".into(),
            labels: [("rack".to_string(), "r1".to_string())].into(),
            ..Node::default()
        };
        let req = |op: &str, values: &[&str]| NodeSelectorRequirement {
            key: "rack".into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        assert!(matches_requirement(&node, &req("In", &["r1", "r2"])));
        assert!(!matches_requirement(&node, &req("NotIn", &["r1"])));
        assert!(!matches_requirement(&node, &req("Gt", &["1"])));
        Ok(())
    }
}
