//! Examples for `rules explain`, read from the rule test suites.
//!
//! A suite is a YAML file under `<tests>/<pack>/` with a `cases:` list. Only the fields an
//! example needs are read here (the suite runner owns the format): `note`, `input` (inline YAML
//! text) or `inputFile` (relative to the suite file), `context` and `want_findings`.
//!
//! - A failing example of rule R is the first case, in path order, whose `want_findings` names R.
//! - A passing example is the first case with `want_findings: []` in the same folder as the
//!   failing example, or (without one) in the folder named after the pack or after the rule
//!   file's directory.

use std::path::{Path, PathBuf};

use nvcre_engine::{Source, parse_documents, to_yaml};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct SuiteFile {
    #[serde(default)]
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    #[serde(default)]
    note: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default, rename = "inputFile")]
    input_file: Option<String>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    want_findings: Option<Vec<WantFinding>>,
}

#[derive(Deserialize)]
struct WantFinding {
    #[serde(default, rename = "ruleId")]
    rule_id: Option<String>,
}

/// One example: where it comes from and the input document text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The suite file, as found under the tests directory.
    pub suite: String,
    /// The case's `note`.
    pub note: String,
    /// `platform=…, gpuArch=…` when the case has a context.
    pub context: Option<String>,
    /// The case's `inputFile`, when the input comes from a file.
    pub input_file: Option<String>,
    /// The input text (inline, or the `inputFile`'s contents), or why it could not be read.
    pub input: String,
}

/// The passing and failing examples of one rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Examples {
    /// A case expecting no findings.
    pub passing: Option<Example>,
    /// A case expecting a finding of the rule.
    pub failing: Option<Example>,
}

/// Finds the examples of rule `id` (of pack `pack`, defined in `rule_file`) under `tests`.
/// A missing directory or an unreadable suite just yields no example.
pub fn examples(tests: &Path, id: &str, pack: &str, rule_file: &str) -> Examples {
    let suites = read_suites(tests);
    let failing = suites.iter().find_map(|(path, file)| {
        file.cases
            .iter()
            .find(|c| {
                c.want_findings
                    .as_ref()
                    .is_some_and(|w| w.iter().any(|f| f.rule_id.as_deref() == Some(id)))
            })
            .map(|c| (path, c))
    });
    let mut folders: Vec<PathBuf> = Vec::new();
    if let Some(dir) = failing.and_then(|(path, _)| path.parent()) {
        folders.push(dir.to_path_buf());
    }
    folders.push(tests.join(pack));
    if let Some(dir) = Path::new(rule_file)
        .parent()
        .and_then(Path::file_name)
        .map(|d| tests.join(d))
    {
        folders.push(dir);
    }
    let passing = folders.iter().find_map(|folder| {
        suites
            .iter()
            .filter(|(path, _)| path.parent() == Some(folder.as_path()))
            .find_map(|(path, file)| {
                file.cases
                    .iter()
                    .find(|c| c.want_findings.as_ref().is_some_and(Vec::is_empty))
                    .map(|c| (path, c))
            })
    });
    Examples {
        passing: passing.map(|(path, c)| example(path, c)),
        failing: failing.map(|(path, c)| example(path, c)),
    }
}

/// Every suite under `dir`, in path order; files that do not parse as suites are skipped.
fn read_suites(dir: &Path) -> Vec<(PathBuf, SuiteFile)> {
    // Examples are best effort: unreadable entries are skipped.
    let (paths, _) = nvcre_engine::walk_files(
        dir,
        &nvcre_engine::WalkOptions {
            extensions: &["yaml", "yml"],
            skip_dirs: &[],
            follow_dir_links: true,
        },
    );
    paths
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let source = Source::new(p.display().to_string(), text);
            let doc = parse_documents(&source).ok()?.into_iter().next()?;
            let file: SuiteFile = serde_json::from_value(doc.value).ok()?;
            Some((p, file))
        })
        .collect()
}

fn example(suite: &Path, case: &Case) -> Example {
    let input = match (&case.input, &case.input_file) {
        (Some(Value::String(text)), _) => text.clone(),
        (Some(other), _) => to_yaml(other).unwrap_or_default(),
        (None, Some(file)) => {
            let path = suite.parent().unwrap_or(Path::new("")).join(file);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| format!("# cannot read {}: {e}\n", path.display()))
        }
        (None, None) => String::new(),
    };
    let context = case.context.as_ref().and_then(Value::as_object).map(|m| {
        m.iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    });
    Example {
        suite: suite.display().to_string(),
        note: case.note.clone(),
        context,
        input_file: case.input_file.clone().filter(|_| case.input.is_none()),
        input,
    }
}
