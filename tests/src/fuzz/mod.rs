//! The bodies of the fuzz targets under `fuzz/` (cargo-fuzz, outside the workspace; see
//! docs/fuzzing.md), kept here so that plain `cargo test` replays the inputs they found
//! (`fuzz/regressions/<target>/*`, `tests/fuzz_regressions.rs`) through the same code.
//!
//! Each function takes one fuzz input and panics when it finds a bug: a panic of the code
//! under test, or a broken invariant (named in the function's docs). Errors the code returns
//! are the expected outcome of most inputs and are only formatted.

mod check;
mod parse;
mod render;
mod rules;

use std::path::PathBuf;

use nvcre_engine::{Document, Error, FieldPath, Source, parse_documents, to_yaml};
use serde_json::Value;

pub use check::check_pipeline;
pub use parse::parse_workloadrun;
pub use render::{RenderInput, render, render_bytes};
pub use rules::load_rules;

/// The fuzz targets, by name (the binaries of `fuzz/` and the directories of
/// `fuzz/regressions/`).
pub const TARGETS: [&str; 4] = [
    "parse_workloadrun",
    "load_rules",
    "check_pipeline",
    "render",
];

/// Runs one input through the target named `target`; `false` for an unknown name.
pub fn replay(target: &str, data: &[u8]) -> bool {
    match target {
        "parse_workloadrun" => parse_workloadrun(data),
        "load_rules" => load_rules(data),
        "check_pipeline" => check_pipeline(data),
        "render" => render_bytes(data),
        _ => return false,
    }
    true
}

/// A file of the repository.
pub fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// The documents of a repository file, parsed as `render` reads a file.
///
/// # Panics
/// When the file does not read or parse: the targets' fixed inputs are the repository's own.
pub fn repo_documents(path: &str) -> Vec<Document> {
    let text =
        std::fs::read_to_string(repo_file(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    parse_documents(&Source::new(path, text)).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// Looks up the position of every field and list item of `doc` (where findings and errors
/// are reported).
pub fn visit_spans(doc: &Document) {
    fn walk(doc: &Document, value: &Value, at: FieldPath) {
        let _ = doc.spans.lookup(&at);
        let _ = doc.spans.lookup_key(&at);
        match value {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(doc, v, at.clone().key(k));
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(doc, v, at.clone().index(i));
                }
            }
            _ => {}
        }
    }
    walk(doc, &doc.value, FieldPath::root());
}

/// `value` written as YAML (as `render` prints its output) reads back as `value`.
///
/// # Panics
/// When it does not: the printed manifest would not be the one that was computed.
pub fn yaml_round_trip(value: &Value) {
    let Ok(text) = to_yaml(value) else {
        return;
    };
    let back = parse_documents(&Source::new("out.yaml", text.clone()))
        .unwrap_or_else(|e| panic!("to_yaml output does not parse: {e}\n--- output:\n{text}"));
    let back = back.first().map(|d| d.value.clone()).unwrap_or(Value::Null);
    assert_eq!(
        &back, value,
        "to_yaml output reads back as another value\n--- output:\n{text}"
    );
}

/// A stream that parses whole (`render`) gives the same documents, with the same indexes,
/// read piece by piece (`check`).
///
/// # Panics
/// When the two readings differ.
pub fn same_documents(whole: &[Document], pieces: &[Document], errors: &[Error], text: &str) {
    assert!(
        errors.is_empty(),
        "the stream parses whole but not piece by piece: {}\n--- input:\n{text}",
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
    let key = |d: &Document| (d.index, d.value.clone());
    assert_eq!(
        whole.iter().map(key).collect::<Vec<_>>(),
        pieces.iter().map(key).collect::<Vec<_>>(),
        "the stream gives other documents piece by piece\n--- input:\n{text}"
    );
}
