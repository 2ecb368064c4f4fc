//! Examples for `rules explain`, picked from the rule test suites.
//!
//! The suites are read with the policy crate's suite format ([`nvcre_domain::load_suite`]);
//! files that do not load are skipped, as a missing directory is.
//!
//! - A failing example of rule R is the first case, in path order, whose `want_findings` are
//!   all R's; without one, the first whose `want_findings` name R.
//! - A passing example is the first case with `want_findings: []` in the failing example's
//!   suite, else in the same folder, or (without one) in the folder named after the pack or
//!   after the rule file's directory.

use std::path::{Path, PathBuf};

use nvcre_domain::{Case, Expectation, Suite, discover_suites, load_suite};

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
    // A case whose every finding is the rule's shows it alone; else any case that names it.
    let first_case = |fits: &dyn Fn(&[nvcre_domain::WantFinding]) -> bool| {
        suites.iter().find_map(|suite| {
            suite
                .cases
                .iter()
                .find(|c| want_findings(c).is_some_and(|w| !w.is_empty() && fits(w)))
                .map(|c| (suite, c))
        })
    };
    let failing = first_case(&|w| w.iter().all(|f| f.rule_id == id))
        .or_else(|| first_case(&|w| w.iter().any(|f| f.rule_id == id)));
    let mut folders: Vec<PathBuf> = Vec::new();
    if let Some(dir) = failing.and_then(|(suite, _)| suite.path.parent()) {
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
    // The failing example's own suite first: its passing cases are about the same rule (a
    // folder's first passing case can leave the rule's `when` false, so it shows nothing).
    let passing = failing
        .and_then(|(suite, _)| first_passing(suite))
        .or_else(|| {
            folders.iter().find_map(|folder| {
                suites
                    .iter()
                    .filter(|suite| suite.path.parent() == Some(folder.as_path()))
                    .find_map(first_passing)
            })
        });
    Examples {
        passing: passing.map(|(suite, c)| example(suite, c)),
        failing: failing.map(|(suite, c)| example(suite, c)),
    }
}

/// The suite's first case expecting no findings, with its suite.
fn first_passing(suite: &Suite) -> Option<(&Suite, &Case)> {
    suite
        .cases
        .iter()
        .find(|c| want_findings(c).is_some_and(<[_]>::is_empty))
        .map(|c| (suite, c))
}

/// The case's `want_findings`, when that is its expectation.
fn want_findings(case: &Case) -> Option<&[nvcre_domain::WantFinding]> {
    match &case.expect {
        Expectation::Findings(w) => Some(w),
        _ => None,
    }
}

/// Every suite under `dir`, in path order; files that do not load as suites are skipped.
fn read_suites(dir: &Path) -> Vec<Suite> {
    discover_suites(&[dir.to_path_buf()])
        .unwrap_or_default()
        .iter()
        .filter_map(|p| load_suite(p).ok())
        .collect()
}

fn example(suite: &Suite, case: &Case) -> Example {
    let ctx = &case.context;
    let dir = suite.path.parent().unwrap_or(Path::new(""));
    let parts: Vec<String> = [
        ctx.platform.as_ref().map(|p| format!("platform={p}")),
        ctx.gpu_arch.as_ref().map(|a| format!("gpuArch={a}")),
        ctx.nodes_file.as_ref().map(|f| {
            let written = f.strip_prefix(dir).unwrap_or(f);
            format!("nodesFile={}", written.display())
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    Example {
        suite: suite.path.display().to_string(),
        note: case.note.clone(),
        context: (!parts.is_empty()).then(|| parts.join(", ")),
        input_file: case.input_file.clone(),
        input: case.input.text.to_string(),
    }
}
