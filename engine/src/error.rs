//! The engine's error type: the engine could not do its job (as opposed to a rule not holding,
//! which is a [`Finding`](crate::Finding)).

use crate::source::Pos;

/// Errors from loading rule packs, parsing input or applying a patch.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not valid YAML/JSON.
    #[error("{}: {message}", located(source_name, pos))]
    Yaml {
        /// File name as given.
        source_name: String,
        /// Where the parser stopped, when known.
        pos: Option<Pos>,
        /// What the parser said.
        message: String,
    },
    /// The input exceeds the size limit.
    #[error("{source_name}: input is {bytes} bytes, above the limit of {limit}")]
    TooLarge {
        /// File name as given.
        source_name: String,
        /// Size of the input.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A rule file does not load: a wrong shape, an unknown field, a duplicate id or a CEL
    /// expression that does not compile.
    #[error("rule pack error: {}: {}{message}", located(file, pos), rule.as_ref().map(|r| format!("rule {r}: ")).unwrap_or_default())]
    Pack {
        /// The rule file.
        file: String,
        /// Line and column of the offending node.
        pos: Option<Pos>,
        /// The rule id, when the problem is inside a rule.
        rule: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A mutation could not be applied (a JSON Patch `test` failed, a path is missing, …).
    #[error("patch error: {0}")]
    Patch(String),
    /// Reading a file or directory failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn located(name: &str, pos: &Option<Pos>) -> String {
    match pos {
        Some(p) => format!("{name}:{p}"),
        None => name.to_string(),
    }
}

impl Error {
    /// The file name and position this error points at, if any.
    pub fn location(&self) -> Option<(&str, Option<Pos>)> {
        match self {
            Error::Yaml {
                source_name, pos, ..
            } => Some((source_name, *pos)),
            Error::Pack { file, pos, .. } => Some((file, *pos)),
            Error::TooLarge { source_name, .. } => Some((source_name, None)),
            Error::Io { path, .. } => Some((path, None)),
            Error::Patch(_) => None,
        }
    }
}
