//! Reading a nodes file (`--nodes-file`, a suite's `context.nodesFile`): the one reader the
//! command line and the rule test suites share.

use std::io::Read;

use nvcre_engine::{Source, parse_documents};
use serde_json::Value;

use crate::nodes::{Node, nodes_from_documents};

/// Reads a nodes file, `-` for standard input: a v1 NodeList and/or Node documents.
///
/// # Errors
/// The message the command line prints: `reading <path>: <cause>` for a file that cannot be
/// read, the YAML error (with file, line and column), or `<path>: <problem>` for documents
/// that are not nodes.
pub fn read_nodes(path: &str) -> Result<Vec<Node>, String> {
    let source = if path == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading <stdin>: {e}"))?;
        Source::new("<stdin>", text)
    } else {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
        Source::new(path, text)
    };
    let docs = parse_documents(&source).map_err(|e| e.to_string())?;
    let values: Vec<Value> = docs.into_iter().map(|d| d.value).collect();
    nodes_from_documents(&values).map_err(|e| format!("{path}: {e}"))
}
