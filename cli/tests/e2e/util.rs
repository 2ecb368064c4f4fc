//! Shared helpers of the end-to-end tests: the workspace root, the binary with a clean
//! environment, and copying a rule directory.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `nvcre-policy` binary, without `NVCRE_RULES` or the colour variables (`NO_COLOR`,
/// `CLICOLOR`, `CLICOLOR_FORCE`) of the caller's environment.
pub fn bin() -> Command {
    let mut c = Command::cargo_bin("nvcre-policy").expect("binary built");
    c.env_remove("NVCRE_RULES")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    c
}

/// Copies a directory tree (a rule set) so a test can edit it.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// A copy of the shipped `rules/` in a temporary directory: (the directory guard, the copy).
pub fn rules_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    copy_dir(&root().join("rules"), &rules);
    (dir, rules)
}

/// A file `name` holding `text` in a new temporary directory: (the directory guard, the
/// file's path as a string).
pub fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(name);
    std::fs::write(&file, text).expect("write");
    (dir, file.display().to_string())
}

/// Replaces `from` by `to` in the file; panics when `from` is not there, so a test cannot pass
/// on an edit that did not happen.
pub fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(
        text.contains(from),
        "{} does not contain {from:?}",
        path.display()
    );
    std::fs::write(path, text.replacen(from, to, 1)).expect("write");
}

/// `(exit code, stdout, stderr)` of the binary run with `args`.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Workflow `render --gpu-arch h100` builds from `rel` (a WorkloadRun, relative to the
/// workspace root): no platform, so its overrides are left unresolved.
pub fn workflow_of(rel: &str) -> String {
    let (code, out, err) = run(&["render", "--gpu-arch", "h100", &path(rel)]);
    assert_eq!(code, 0, "{err}");
    out
}

/// `rel` (a path relative to the workspace root) as an absolute path string.
pub fn path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

/// `stderr` with the time of `check`'s summary line replaced by `T`
/// (`Summary: … checked in Ts: …`), so a test can compare it exactly.
pub fn timeless(stderr: &str) -> String {
    regex::Regex::new(r"checked in \d+\.\d\ds:")
        .expect("regex")
        .replace_all(stderr, "checked in Ts:")
        .into_owned()
}

/// The findings of a `check -o json` report, every file's in order, each with its `file`
/// (as the flat array of findings read before the report became an envelope).
pub fn findings(report: &serde_json::Value) -> serde_json::Value {
    let mut all = Vec::new();
    for r in report["results"].as_array().expect("results") {
        for f in r["findings"].as_array().expect("findings") {
            let mut f = f.clone();
            f["file"] = r["file"].clone();
            all.push(f);
        }
    }
    serde_json::Value::Array(all)
}

/// Each finding of a `check -o json` report as `(ruleId, line, column, <field>)`, the last
/// one the finding's string `field` (`message`, `severity`); 0 or "" where absent.
pub fn located_rows(report: &serde_json::Value, field: &str) -> Vec<(String, u64, u64, String)> {
    findings(report)
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["ruleId"].as_str().unwrap_or("").to_string(),
                f["line"].as_u64().unwrap_or(0),
                f["column"].as_u64().unwrap_or(0),
                f[field].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The digest `--version` prints for the embedded rules (`sha256:…`).
pub fn rules_digest() -> String {
    let (code, stdout, _) = run(&["--version"]);
    assert_eq!(code, 0);
    stdout
        .split("sha256:")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(")\n"))
        .map(|hex| format!("sha256:{hex}"))
        .expect("a digest in --version")
}
