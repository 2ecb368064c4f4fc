//! The node health monitor of a group's TrainJob: `jobTemplate.spec.nodeHealthMonitor.cel.
//! expression`, CEL over the variable `node` (the whole Node object as JSON, with defaults so
//! that the fields an expression usually reads always exist). True means the node is
//! unhealthy. The expression runs on the workspace's CEL engine, under its cost limits.

use std::sync::Arc;

use nvcre_engine::{CelValue, Expr, Scope, cel_type_name};
use serde_json::{Map, Value, json};

/// The Workflow and group reason of a group whose TrainJob ran on a node found unhealthy.
pub const JOB_HARDWARE_FAILED: &str = "JobHardwareFailed";
/// The failed-nodes ConfigMap reason of a node found unhealthy.
pub const HARDWARE_FAILURE_DETECTED: &str = "HardwareFailureDetected";
/// The failed-nodes ConfigMap message of a node found unhealthy.
pub const HARDWARE_FAILURE_MESSAGE: &str = "Hardware failure detected by node health check";
/// The group reason when the node health expression cannot be compiled or evaluated.
pub const NODE_HEALTH_CHECK_ERROR: &str = "NodeHealthCheckError";
/// Appended to the Workflow's Failed message when a group failed for hardware.
pub const HARDWARE_SUFFIX: &str = "; hardware failures occurred on one or more nodes";

/// `Hardware failure detected on node(s): [n1 n2]` (Go's `%v` of the names).
pub fn hardware_message(nodes: &[String]) -> String {
    format!(
        "Hardware failure detected on node(s): [{}]",
        nodes.join(" ")
    )
}

/// A compiled node health expression.
#[derive(Debug, Clone)]
pub struct NodeHealthCheck {
    expr: Expr,
}

impl NodeHealthCheck {
    /// Compiles `expression`.
    ///
    /// # Errors
    /// `CEL compilation error: <why>` for an expression that does not parse or reads a name
    /// other than `node`; `CEL expression must return bool, got <type>` for one that returns
    /// another type for a node with nothing but the defaults (CEL here has no type checker:
    /// the result type is found by evaluating it).
    pub fn compile(expression: &str) -> Result<NodeHealthCheck, String> {
        let expr = Expr::compile(expression).map_err(|e| format!("CEL compilation error: {e}"))?;
        if let Some(other) = expr.free_names().into_iter().find(|n| n != "node") {
            return Err(format!(
                "CEL compilation error: undeclared reference to {other:?} (only `node` is bound)"
            ));
        }
        // Errors that depend on the node (a missing key) are the evaluation's to report.
        if let Ok(Some(v)) = expr.trial(&scope(&json!({})))
            && !matches!(v, CelValue::Bool(_))
        {
            return Err(format!(
                "CEL expression must return bool, got {}",
                cel_type_name(&v)
            ));
        }
        Ok(NodeHealthCheck { expr })
    }

    /// Whether `node` (a Node object as JSON) is unhealthy.
    ///
    /// # Errors
    /// `CEL evaluation error: <why>`, or `unexpected CEL result type: <type>, expected bool`.
    pub fn unhealthy(&self, node: &Value) -> Result<bool, String> {
        match self.expr.eval(&scope(node)) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "unexpected CEL result type: {}, expected bool",
                cel_type_name(&other)
            )),
            Err(e) => Err(format!("CEL evaluation error: {e}")),
        }
    }
}

fn scope(node: &Value) -> Scope {
    let mut s = Scope::new();
    s.bind_shared("node", Arc::new(with_defaults(node)));
    s
}

/// `node` with the defaults the expression may rely on: `metadata.labels`,
/// `metadata.annotations`, `status.capacity`, `status.allocatable` (`{}`), `spec.taints`,
/// `status.conditions`, `status.addresses` (`[]`), `spec.unschedulable` (`false`). A field
/// present with `null` is replaced too.
pub fn with_defaults(node: &Value) -> Value {
    let mut node = match node {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let defaults: [(&str, &[(&str, Value)]); 3] = [
        (
            "metadata",
            &[("labels", json!({})), ("annotations", json!({}))],
        ),
        (
            "spec",
            &[("taints", json!([])), ("unschedulable", json!(false))],
        ),
        (
            "status",
            &[
                ("conditions", json!([])),
                ("addresses", json!([])),
                ("capacity", json!({})),
                ("allocatable", json!({})),
            ],
        ),
    ];
    for (section, fields) in defaults {
        let slot = node
            .entry(section)
            .and_modify(|v| {
                if !v.is_object() {
                    *v = json!({});
                }
            })
            .or_insert_with(|| json!({}));
        if let Some(m) = slot.as_object_mut() {
            for (k, v) in fields {
                let f = m.entry(*k).or_insert(Value::Null);
                if f.is_null() {
                    *f = v.clone();
                }
            }
        }
    }
    Value::Object(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(extra: Value) -> Value {
        let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
        if let (Some(m), Some(e)) = (n.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                m.insert(k.clone(), v.clone());
            }
        }
        n
    }

    #[test]
    fn defaults_make_the_usual_fields_exist() {
        let n = with_defaults(&node(json!({"spec": {"providerID": "x"}})));
        assert_eq!(
            n,
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "labels": {}, "annotations": {}},
                "spec": {"providerID": "x", "taints": [], "unschedulable": false},
                "status": {"conditions": [], "addresses": [], "capacity": {}, "allocatable": {}}})
        );
    }

    #[test]
    fn the_documented_examples_evaluate() {
        let cordoned = node(json!({"spec": {"unschedulable": true}}));
        let tainted = node(json!({"spec": {"taints": [
            {"key": "nvidia.com/gpu-unhealthy", "effect": "NoSchedule"}]}}));
        let labelled = node(json!({"metadata": {"name": "n1",
            "labels": {"gpud.nvidia.com/unhealthy": "true"}}}));
        let condition = node(json!({"status": {"conditions": [
            {"type": "GPUHealthy", "status": "False"}]}}));
        let plain = node(json!({}));
        let cases = [
            ("node.spec.unschedulable == true", &cordoned),
            (
                "node.spec.taints.exists(t, t.key == 'nvidia.com/gpu-unhealthy')",
                &tainted,
            ),
            (
                "'gpud.nvidia.com/unhealthy' in node.metadata.labels",
                &labelled,
            ),
            (
                "node.status.conditions.exists(c, c.type == 'GPUHealthy' && c.status == 'False')",
                &condition,
            ),
            (
                "node.metadata.?labels['gpud.nvidia.com/unhealthy'].orValue('') == 'true'",
                &labelled,
            ),
        ];
        for (expr, bad) in cases {
            let check = NodeHealthCheck::compile(expr).expect(expr);
            assert_eq!(check.unhealthy(bad), Ok(true), "{expr}");
            assert_eq!(check.unhealthy(&plain), Ok(false), "{expr}");
        }
    }

    #[test]
    fn errors_are_reported_in_the_monitors_words() {
        assert_eq!(
            NodeHealthCheck::compile("size(node.metadata.labels)").err(),
            Some("CEL expression must return bool, got int".to_string())
        );
        let e = NodeHealthCheck::compile("node.spec.unschedulable ==").expect_err("syntax");
        assert!(e.starts_with("CEL compilation error: "), "{e}");
        assert_eq!(
            NodeHealthCheck::compile("nodes.spec.unschedulable").err(),
            Some(
                "CEL compilation error: undeclared reference to \"nodes\" (only `node` is bound)"
                    .to_string()
            )
        );
        let check = NodeHealthCheck::compile("node.metadata.labels['x'] == 'y'").expect("compiles");
        let e = check.unhealthy(&node(json!({}))).expect_err("missing key");
        assert!(e.starts_with("CEL evaluation error: "), "{e}");
    }
}
