//! Embeds the default rule set: every `*.yaml` / `*.yml` file below the workspace's `rules/`
//! (hidden entries and `tests/` directories skipped, as `--rules DIR` reads a directory), in
//! path order. A new rule file is embedded by the next build without a hand-kept list; the test
//! `every_rule_file_is_embedded` compares this list with what `--rules rules` reads.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let rules = manifest.join("../rules");
    // A directory: cargo rebuilds when any file below it changes, is added or is removed.
    println!("cargo:rerun-if-changed={}", rules.display());
    let mut files = Vec::new();
    collect(&rules, &mut files);
    files.sort();
    let mut out = String::from(
        "/// `(path as shown in messages, contents)` of every embedded rule file, in path order.\n",
    );
    out.push_str("const EMBEDDED: &[(&str, &str)] = &[\n");
    for f in &files {
        let rel = f
            .strip_prefix(&rules)
            .expect("below rules/")
            .to_string_lossy()
            .replace('\\', "/");
        let abs = f.canonicalize().expect("rule file path");
        let _ = writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            format!("rules/{rel}"),
            abs.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("embedded_rules.rs");
    std::fs::write(dest, out).expect("write embedded_rules.rs");
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
