//! Runs every rule test suite under `rules/tests` with the embedded rules (so `cargo test` runs them), and
//! checks that every pack, table and validating rule has a case.
//!
//! One file alone:
//! `NVCRE_SUITE=rules/tests/gang-contract/scheduling.yaml cargo test -p nvcre-domain --test integration rule_suites::one_suite -- --ignored`
//! (a relative path is taken from the workspace root).

use std::path::{Path, PathBuf};

use nvcre_domain::{
    Suite, SuiteRunner, coverage, default_rules, discover_suites as discover, load_suite,
};

/// The workspace root, spelled relative to the package directory cargo runs tests in, so case
/// names read `../rules/tests/<pack>/<file>.yaml › note`.
fn root() -> PathBuf {
    let relative = Path::new("..");
    if relative.join("rules/tests").is_dir() {
        relative.to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }
}

fn load_all(paths: &[PathBuf]) -> Vec<Suite> {
    let files = discover(paths).unwrap_or_else(|e| panic!("{e}"));
    assert!(!files.is_empty(), "no suite files under {paths:?}");
    files
        .iter()
        .map(|f| load_suite(f).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Runs the suites; panics listing every failing case with its diff.
fn run_all(suites: &[Suite]) {
    let rules = default_rules().expect("embedded rules compile");
    let mut runner = SuiteRunner::new(&rules);
    let mut passed = 0;
    let mut failures = String::new();
    let mut failed = 0;
    for suite in suites {
        for result in runner.run_suite(suite, None) {
            if result.passed() {
                passed += 1;
            } else {
                failed += 1;
                failures.push_str(&result.report());
            }
        }
    }
    assert!(
        failed == 0,
        "{failed} rule test case(s) failed ({passed} passed):\n{failures}"
    );
    assert!(passed > 0, "no cases ran");
}

#[test]
fn every_rule_suite_passes() {
    run_all(&load_all(&[root().join("rules/tests")]));
}

#[test]
fn every_pack_table_and_validating_rule_has_a_case() {
    let rules = default_rules().expect("embedded rules compile");
    let cov = coverage(&rules, &load_all(&[root().join("rules/tests")]));
    assert_eq!(cov.untested(), Vec::<String>::new());
    for pack in &cov.packs {
        assert_eq!(
            pack.untested_rules,
            Vec::<String>::new(),
            "pack {}: rules without a case naming them",
            pack.name
        );
    }
}

#[test]
#[ignore = "runs the file named by NVCRE_SUITE"]
fn one_suite() {
    let Some(path) = std::env::var_os("NVCRE_SUITE") else {
        panic!("set NVCRE_SUITE to a suite file or directory");
    };
    let path = PathBuf::from(path);
    let path = if path.is_relative() && !path.exists() {
        root().join(path)
    } else {
        path
    };
    run_all(&load_all(&[path]));
}
