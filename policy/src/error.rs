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
}

/// The message of a rejection's first error finding (of its first finding when none is one).
fn first_error(findings: &[Finding]) -> &str {
    findings
        .iter()
        .find(|f| f.severity == nvcre_engine::Severity::Error)
        .or(findings.first())
        .map_or("policy violation", |f| f.message.as_str())
}
