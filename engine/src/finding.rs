//! Findings: a rule that did not hold, or could not be evaluated (fail closed).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::source::Pos;

/// How serious a finding is. Exit code 1 is decided by the caller's threshold.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational.
    Info,
    /// Reported, does not fail by default.
    Warning,
    /// A policy violation.
    #[default]
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One result of evaluating a rule against one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The rule id (unique across the loaded rule set).
    pub rule_id: String,
    /// The pack (metadata.name) the rule belongs to.
    pub pack: String,
    /// Severity of the rule.
    pub severity: Severity,
    /// The message (static, or computed by `messageExpression`).
    pub message: String,
    /// The input file (or `<stdin>`, or a rendered-output name).
    pub file: String,
    /// 0-based index of the document in its stream.
    pub document: usize,
    /// The object the finding is about when it is not the input document but one the pipeline
    /// emits from it (`group-0 TrainJob nccl-group-0`, for `--nodes-file` and `--expand`):
    /// `field_path` is then a path in that object, and the finding has no line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// Field path in Kubernetes notation, when the rule names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// 1-based line of the field in the source, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column of the field in the source, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The rule file and position the rule is defined at.
    pub rule_file: String,
    /// Line of the rule definition.
    pub rule_line: usize,
    /// The pipeline stage of the rule's pack (`admission`, …), when it has one. Not part of
    /// the JSON output.
    #[serde(skip)]
    pub stage: Option<String>,
    /// The rule could not be evaluated on this document (a CEL evaluation error): an error in
    /// the rule, not a policy violation. `ruleError: true` in JSON, absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rule_error: bool,
    /// The finding is about the key of its field path's last entry, not the value there
    /// (`validate.at: key`): a caller that locates it in another document points at the key
    /// too. Not part of the JSON output.
    #[serde(skip)]
    pub at_key: bool,
}

impl Finding {
    /// The message led by the emitted object it is about (`group-0 TrainJob x: <message>`),
    /// or the message alone for a finding on the input itself.
    pub fn led_message(&self) -> String {
        match &self.object {
            Some(object) => format!("{object}: {}", self.message),
            None => self.message.clone(),
        }
    }

    /// The field position, when both line and column are known.
    pub fn pos(&self) -> Option<Pos> {
        Some(Pos {
            line: self.line?,
            column: self.column?,
        })
    }
}
