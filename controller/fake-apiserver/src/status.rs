//! API errors as `metav1.Status` bodies, with the codes, reasons and messages the API server uses.

use serde_json::{Value, json};

/// One field-level cause of an error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldManagerConflict`, …
    pub reason: String,
    /// The message without the field path, e.g. `Invalid value: "object": spec is immutable`.
    pub message: String,
    /// The field path, e.g. `spec.replicas` (for SSA conflicts `.data.key`).
    pub field: String,
}

impl Cause {
    /// The Go `field.Error` string: `field: message`.
    pub fn to_error_string(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// An error answered as a `Status` with an HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details`, when the error names an object.
    pub details: Option<Value>,
}

/// Which object an error is about: `group`, `kind` (for Invalid) or resource plural, and name.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// API group (`""` for core).
    pub group: &'a str,
    /// Resource plural (`configmaps`).
    pub plural: &'a str,
    /// Kind (`ConfigMap`).
    pub kind: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl Subject<'_> {
    /// `configmaps` or `workloadruns.nvcre.nvidia.com`, as in NotFound messages.
    fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    fn details(&self, kind_field: &str) -> Value {
        let mut d = json!({"name": self.name});
        if !self.group.is_empty() {
            d["group"] = json!(self.group);
        }
        d["kind"] = json!(kind_field);
        d
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> ApiError {
        ApiError {
            code,
            reason,
            message,
            details: None,
        }
    }

    /// 404 `configmaps "x" not found`.
    pub fn not_found(s: &Subject) -> ApiError {
        let mut e = ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", s.group_resource(), s.name),
        );
        e.details = Some(s.details(s.plural));
        e
    }

    /// 404 for a path the server does not serve.
    pub fn no_route() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
    }

    /// 409 `configmaps "x" already exists`.
    pub fn already_exists(s: &Subject) -> ApiError {
        let mut e = ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", s.group_resource(), s.name),
        );
        e.details = Some(s.details(s.plural));
        e
    }

    /// 409 optimistic-concurrency conflict (stale `resourceVersion`).
    pub fn stale(s: &Subject) -> ApiError {
        let mut e = ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                s.group_resource(),
                s.name
            ),
        );
        e.details = Some(s.details(s.plural));
        e
    }

    /// 409 server-side apply conflict with other field managers.
    pub fn apply_conflict(s: &Subject, conflicts: &[(String, String, String)]) -> ApiError {
        // (manager, apiVersion, field) triples, already sorted.
        let n = conflicts.len();
        let message = if n == 1 {
            let (m, v, f) = &conflicts[0];
            format!("Apply failed with 1 conflict: conflict with \"{m}\" using {v}: {f}")
        } else {
            let mut msg = format!("Apply failed with {n} conflicts: ");
            let mut last: Option<(&str, &str)> = None;
            let mut groups: Vec<String> = Vec::new();
            for (m, v, f) in conflicts {
                if last != Some((m.as_str(), v.as_str())) {
                    groups.push(format!("conflicts with \"{m}\" using {v}:"));
                    last = Some((m, v));
                }
                if let Some(g) = groups.last_mut() {
                    g.push_str(&format!("\n- {f}"));
                }
            }
            msg.push_str(&groups.join("\n"));
            msg
        };
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(m, v, f)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\" using {v}"), "field": f})
            })
            .collect();
        let mut details = s.details(s.plural);
        details["causes"] = Value::Array(causes);
        ApiError {
            code: 409,
            reason: "Conflict",
            message,
            details: Some(details),
        }
    }

    /// 422 `Kind.group "name" is invalid: …` with one cause per field error.
    pub fn invalid(s: &Subject, causes: &[Cause]) -> ApiError {
        let qualified = if s.group.is_empty() {
            s.kind.to_string()
        } else {
            format!("{}.{}", s.kind, s.group)
        };
        let errs: Vec<String> = causes.iter().map(Cause::to_error_string).collect();
        let body = if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        };
        let mut details = s.details(s.kind);
        details["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{qualified} \"{}\" is invalid: {body}", s.name),
            details: Some(details),
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message.into())
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }

    /// 410 Expired: the watch's resourceVersion was compacted away.
    pub fn gone(rv: u64, oldest: u64) -> ApiError {
        ApiError::new(
            410,
            "Expired",
            format!("too old resource version: {rv} ({oldest})"),
        )
    }

    /// The `Status` JSON body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}
