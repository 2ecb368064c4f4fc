//! The policy layer's error type.

use nvcre_engine::{Finding, Pos};

/// Why a render or check could not produce a clean result.
///
/// [`PolicyError::Rejected`] and [`PolicyError::Placement`] mean policy violations; every other
/// variant means the input, the flags or the rules could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The input violates rules: the findings say which and where. At least one is an error;
    /// the warnings and info findings of the same runs come with them. Displayed as the first
    /// error's message.
    #[error("{}", first_error(.0))]
    Rejected(Vec<Finding>),
    /// The fleet cannot host the workload as specified (shortfall, no capacity, partition
    /// errors): the exact NVCRE status message.
    #[error("{0}")]
    Placement(String),
    /// A flag value or flag combination is wrong.
    #[error("{0}")]
    Usage(String),
    /// The input document cannot be read as the expected type.
    #[error("{file}{}: {message}", pos.map(|p| format!(":{p}")).unwrap_or_default())]
    Input {
        /// File name (or `<stdin>`).
        file: String,
        /// Position of the offending field, when known.
        pos: Option<Pos>,
        /// What is wrong, with the field path.
        message: String,
    },
    /// The WorkloadRun cannot be built (the original `nvcrectl` messages).
    #[error("{0}")]
    Build(String),
    /// Applying overrides failed.
    #[error("applying overrides: {0}")]
    Resolve(#[from] crate::resolve::ResolveError),
    /// The engine could not load or run the rules.
    #[error(transparent)]
    Engine(#[from] nvcre_engine::Error),
    /// A table the pipeline needs is missing from the rule set.
    #[error("rule set has no table {0:?}")]
    MissingTable(String),
    /// No row of a table that must decide every case matches (its catch-all row was removed).
    #[error(
        "no row of table {table:?} matches {subject}; the table decides every case, so end it with a catch-all row (include: \"true\")"
    )]
    NoMatchingRow {
        /// Table name.
        table: String,
        /// What was looked up, e.g. `node (providerID "hcloud://1")`.
        subject: String,
    },
    /// An error (`error`, displayed as itself, deciding the exit code) that stopped a render
    /// or a check after it had noted findings: the admission stage's warnings, an unknown GPU
    /// architecture, the findings of a List's earlier items. They are not dropped: `findings` in the order they were made
    /// (`check` reports them), `notes` the lines `render` prints before the error (the same
    /// findings, and the render's notes that are not findings). A rejection carries its
    /// findings itself and is never wrapped. Take it apart with [`PolicyError::into_parts`].
    #[error("{error}")]
    Noted {
        /// What stopped the render or check.
        error: Box<PolicyError>,
        /// The findings made before it.
        findings: Vec<Finding>,
        /// The lines `render` prints before the error.
        notes: Vec<crate::render::Note>,
    },
    /// A table entry does not have the expected shape.
    #[error("{location}: table {table}, entry {entry}: {message}")]
    TableEntry {
        /// `file:line:col` of the entry in its rule file.
        location: String,
        /// Table name.
        table: String,
        /// Entry id.
        entry: String,
        /// The deserialisation error.
        message: String,
    },
    /// Several items of one `List` could not be checked: each item's error, in item order,
    /// each an [`PolicyError::Input`] whose message is led by the item's path (`items[2]: …`).
    /// Displayed one per line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Items(Vec<PolicyError>),
}

/// `file:line:col` of `doc`'s first node (`file` alone for an empty document): the place an
/// error of the whole document is reported at ([`PolicyError::located`]).
pub fn document_place(doc: &nvcre_engine::Document) -> String {
    match doc.spans.lookup(&nvcre_engine::FieldPath::root()) {
        Some(p) => format!("{}:{p}", doc.source.name),
        None => doc.source.name.clone(),
    }
}

impl PolicyError {
    /// [`PolicyError::TableEntry`] for entry `id` of `table`, located at the entry (the
    /// table's file alone when no entry has that id).
    pub fn table_entry(table: &nvcre_engine::Table, id: &str, message: String) -> PolicyError {
        let pos = table.entries.iter().find(|e| e.id == id).map(|e| e.pos);
        PolicyError::TableEntry {
            location: format!(
                "{}{}",
                table.source.name,
                pos.map(|p| format!(":{p}")).unwrap_or_default()
            ),
            table: table.name.clone(),
            entry: id.to_string(),
            message,
        }
    }

    /// This error led by `at` (`file:line:col` of the document it stopped, see
    /// [`document_place`]) when its message names no place of its own: a placement, a build
    /// or resolution error, a missing or undecided table, an engine error without a location.
    /// Among several documents, the message alone would not say which one failed. An error
    /// that names its place (an input error, a rejection's findings, a rule file's error, a
    /// table entry) or is about the flags is returned as it is. The variant, and so the exit
    /// code, is kept for a placement; every other located error becomes [`PolicyError::Build`]
    /// (exit 2, as before).
    #[must_use]
    pub fn located(self, at: &str) -> PolicyError {
        if self.names_place() {
            return self;
        }
        match self {
            PolicyError::Noted {
                error,
                findings,
                notes,
            } => PolicyError::Noted {
                error: Box::new(error.located(at)),
                findings,
                notes,
            },
            PolicyError::Placement(m) => PolicyError::Placement(format!("{at}: {m}")),
            other => PolicyError::Build(format!("{at}: {other}")),
        }
    }

    /// True when the message names its own place or needs none ([`PolicyError::located`]
    /// leaves it as it is): an input error, a rejection (its findings are located), a table
    /// entry's or a rule file's error, a usage error.
    pub fn names_place(&self) -> bool {
        match self {
            PolicyError::Noted { error, .. } => error.names_place(),
            PolicyError::Placement(_)
            | PolicyError::Build(_)
            | PolicyError::Resolve(_)
            | PolicyError::MissingTable(_)
            | PolicyError::NoMatchingRow { .. } => false,
            PolicyError::Engine(e) => e.location().is_some(),
            PolicyError::Rejected(_)
            | PolicyError::Usage(_)
            | PolicyError::Input { .. }
            | PolicyError::Items(_)
            | PolicyError::TableEntry { .. } => true,
        }
    }

    /// True when the error is about a rule file and names its place there (a rule file's or a
    /// table entry's error met while rendering or checking), not the input's: among several
    /// documents, the one it stopped must be named beside it.
    pub fn in_rule_file(&self) -> bool {
        match self {
            PolicyError::Noted { error, .. } => error.in_rule_file(),
            PolicyError::Engine(e) => e.location().is_some(),
            PolicyError::TableEntry { .. } => true,
            _ => false,
        }
    }

    /// This error with `findings` and `notes` (made before it) ahead of those it
    /// carries. A rejection is returned as it is (it carries its findings itself), and so is
    /// an error when both are empty.
    #[must_use]
    pub fn noted(self, findings: Vec<Finding>, notes: Vec<crate::render::Note>) -> PolicyError {
        match self {
            PolicyError::Rejected(_) => self,
            _ if findings.is_empty() && notes.is_empty() => self,
            PolicyError::Noted {
                error,
                findings: later,
                notes: later_notes,
            } => PolicyError::Noted {
                error,
                findings: findings.into_iter().chain(later).collect(),
                notes: notes.into_iter().chain(later_notes).collect(),
            },
            error => PolicyError::Noted {
                error: Box::new(error),
                findings,
                notes,
            },
        }
    }

    /// What stopped the render or check: this error, or the one a [`PolicyError::Noted`] holds.
    pub fn cause(&self) -> &PolicyError {
        match self {
            PolicyError::Noted { error, .. } => error.cause(),
            other => other,
        }
    }

    /// The error that stopped the render or check, the findings made before it
    /// and the lines `render` prints before it (both empty but for [`PolicyError::Noted`]).
    pub fn into_parts(self) -> (PolicyError, Vec<Finding>, Vec<crate::render::Note>) {
        match self {
            PolicyError::Noted {
                error,
                findings,
                notes,
            } => {
                let (error, inner, inner_notes) = error.into_parts();
                (
                    error,
                    findings.into_iter().chain(inner).collect(),
                    notes.into_iter().chain(inner_notes).collect(),
                )
            }
            other => (other, Vec::new(), Vec::new()),
        }
    }
}

/// The message of a rejection's first error finding (of its first finding when none is one).
fn first_error(findings: &[Finding]) -> &str {
    findings
        .iter()
        .find(|f| f.severity == nvcre_engine::Severity::Error)
        .or(findings.first())
        .map_or("policy violation", |f| f.message.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Note;

    /// Only an error that names no place of its own is led by the document's; a placement
    /// stays a placement (exit 1), the others become build errors (exit 2), and a noted
    /// error keeps its findings.
    #[test]
    fn located_leads_only_errors_without_a_place() {
        let at = "in.yaml:10:1";
        let placed = PolicyError::Placement("No target nodes found".into()).located(at);
        assert!(
            matches!(&placed, PolicyError::Placement(m) if m == "in.yaml:10:1: No target nodes found")
        );
        let table = PolicyError::MissingTable("gpu-products".into()).located(at);
        assert!(
            matches!(&table, PolicyError::Build(m) if m == "in.yaml:10:1: rule set has no table \"gpu-products\"")
        );
        let noted = PolicyError::Build("b".into())
            .noted(vec![warning("w")], Vec::new())
            .located(at);
        assert_eq!(noted.to_string(), "in.yaml:10:1: b");
        let (_, findings, _) = noted.into_parts();
        assert_eq!(findings.len(), 1);
        for kept in [
            PolicyError::Usage("u".into()),
            PolicyError::Input {
                file: "f".into(),
                pos: None,
                message: "m".into(),
            },
            PolicyError::Rejected(vec![warning("w")]),
        ] {
            assert!(kept.names_place());
            let text = kept.to_string();
            assert_eq!(kept.located(at).to_string(), text);
        }
    }

    fn warning(id: &str) -> Finding {
        Finding {
            rule_id: id.into(),
            pack: "p".into(),
            severity: nvcre_engine::Severity::Warning,
            message: format!("{id} says"),
            file: "f.yaml".into(),
            document: 0,
            object: None,
            field_path: None,
            line: None,
            column: None,
            rule_file: "r.yaml".into(),
            rule_line: 1,
            stage: None,
            rule_error: false,
            at_key: false,
        }
    }

    /// Notes made earlier come first, however deep the error that carries the later ones; the
    /// error displays as itself; a rejection and an error with nothing noted stay as they are.
    #[test]
    fn noted_errors_keep_their_findings_in_the_order_they_were_made() {
        let inner = PolicyError::Placement("No target nodes found".into()).noted(
            vec![warning("later")],
            vec![Note::from("later note".to_string())],
        );
        let outer = inner.noted(vec![warning("earlier")], Vec::new());
        assert_eq!(outer.to_string(), "No target nodes found");
        assert!(matches!(outer.cause(), PolicyError::Placement(m) if m == "No target nodes found"));
        let (error, findings, notes) = outer.into_parts();
        assert!(matches!(error, PolicyError::Placement(_)));
        let ids: Vec<&str> = findings.iter().map(|f| f.rule_id.as_str()).collect();
        assert_eq!(ids, ["earlier", "later"]);
        assert_eq!(notes, [Note::from("later note".to_string())]);

        let rejected =
            PolicyError::Rejected(vec![warning("own")]).noted(vec![warning("x")], vec![]);
        assert!(matches!(&rejected, PolicyError::Rejected(f) if f.len() == 1));
        let bare = PolicyError::Usage("u".into()).noted(Vec::new(), Vec::new());
        assert!(matches!(bare, PolicyError::Usage(_)));
    }
}
