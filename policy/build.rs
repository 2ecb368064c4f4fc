//! Embeds the default rule set: every `*.yaml` / `*.yml` file below the workspace's `rules/`
//! (hidden entries and `tests/` directories skipped, as `--rules DIR` reads a directory), in
//! path order. A new rule file is embedded by the next build without a hand-kept list; the test
//! `every_rule_file_is_embedded` compares this list with what `--rules rules` reads.
//!
//! The set's digest (`EMBEDDED_DIGEST`) is computed here too, as `RulesInfo::digest` of the
//! command computes it for any set (a test there compares the two), so that no run hashes the
//! embedded files again.
//!
//! Each file is also parsed here, with the engine's own rule-file parser
//! (`nvcre_engine::prepare_rule_file`, the function and limits every load uses), and its
//! documents (values and spans) are embedded as JSON beside its text, so that loading the
//! embedded set parses no YAML. A file that does not parse, or whose documents do not read back
//! equal from their JSON, is embedded unprepared: the load parses its text and reports what it
//! finds, as for any other file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nvcre_engine::{PreparedDocument, Source, prepare_rule_file};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let rules = manifest.join("../rules");
    // A directory: cargo rebuilds when any file below it changes, is added or is removed.
    println!("cargo:rerun-if-changed={}", rules.display());
    let mut files = Vec::new();
    collect(&rules, &mut files);
    files.sort();
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut out = String::from(
        "/// `(path as shown in messages, contents)` of every embedded rule file, in path order.\n",
    );
    out.push_str("const EMBEDDED: &[(&str, &str)] = &[\n");
    let mut prepared = String::from(
        "/// The documents of each file of [`EMBEDDED`] (same order) as the build script parsed\n\
         /// them, as JSON; `None` for a file the load is to parse itself.\n",
    );
    prepared.push_str("const PREPARED: &[Option<&str>] = &[\n");
    for (i, f) in files.iter().enumerate() {
        let rel = f
            .strip_prefix(&rules)
            .expect("below rules/")
            .to_string_lossy()
            .replace('\\', "/");
        let name = format!("rules/{rel}");
        let abs = f.canonicalize().expect("rule file path");
        let _ = writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            name,
            abs.display().to_string()
        );
        let text =
            std::fs::read_to_string(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        texts.push((rel.clone(), text.clone()));
        match prepare(&name, text) {
            Some(json) => {
                let dest = out_dir.join(format!("prepared_{i:03}.json"));
                std::fs::write(&dest, json).expect("write a prepared rule file");
                let _ = writeln!(
                    prepared,
                    "    Some(include_str!({:?})),",
                    dest.display().to_string()
                );
            }
            None => prepared.push_str("    None,\n"),
        }
    }
    out.push_str("];\n");
    prepared.push_str("];\n");
    out.push_str(&prepared);
    let _ = writeln!(
        out,
        "/// `sha256:<hex>` of [`EMBEDDED`], as `RulesInfo::digest` computes it.\n\
         const EMBEDDED_DIGEST: &str = {:?};",
        digest(texts)
    );
    std::fs::write(out_dir.join("embedded_rules.rs"), out).expect("write embedded_rules.rs");
}

// `rules_digest`, the crate's own definition.
include!("src/digest.rs");

/// [`rules_digest`] of the files in path order, as the loaded embedded set holds them.
fn digest(mut files: Vec<(String, String)>) -> String {
    files.sort();
    rules_digest(files.iter().map(|(n, t)| (n.as_str(), t.as_str())))
}

/// The documents of the rule file `name` as JSON, or `None` when the file does not parse (the
/// load reports why) or its documents would not read back equal.
fn prepare(name: &str, text: String) -> Option<String> {
    let source = Source::new(name, text);
    let docs = prepare_rule_file(&source).ok()?;
    let json = serde_json::to_string(&docs).ok()?;
    let back: Vec<PreparedDocument> = serde_json::from_str(&json).ok()?;
    (back == docs).then_some(json)
}

/// The rule files below `dir`: `*.yaml` / `*.yml`, not hidden, not under a `tests` directory.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            if name != "tests" {
                collect(&path, out);
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(path);
        }
    }
}
