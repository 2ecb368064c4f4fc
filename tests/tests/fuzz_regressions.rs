//! Replays every input the fuzz targets found (`fuzz/regressions/<target>/*`, minimized crash,
//! timeout and out-of-memory inputs, each fixed since) through the targets' own bodies
//! (`nvcre_tests::fuzz`), so plain `cargo test` keeps them fixed. See docs/fuzzing.md.

use std::path::Path;
use std::time::{Duration, Instant};

use nvcre_tests::fuzz::{TARGETS, replay, repo_file};

/// The regression inputs of `target`, in name order.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = repo_file(&format!("fuzz/regressions/{target}"));
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.is_file() && !is_note(p))
        .map(|p| {
            let name = p
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("the input reads"))
        })
        .collect();
    out.sort();
    out
}

/// `README.md` files beside the inputs describe them; hidden files (`.keep`) hold the
/// directories in git.
fn is_note(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "md")
        || p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Replays each input of `target`; each must finish within the fuzzer's `-timeout` (10 s).
fn replay_all(target: &str) {
    for (name, data) in inputs(target) {
        let started = Instant::now();
        assert!(replay(target, &data), "unknown target {target}");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "{target}/{name} took {took:?} (the fuzzer's timeout is 10 s)"
        );
    }
}

#[test]
fn every_target_has_a_regression_directory() {
    for t in TARGETS {
        assert!(
            repo_file(&format!("fuzz/regressions/{t}")).is_dir(),
            "fuzz/regressions/{t} is missing"
        );
    }
}

#[test]
fn parse_workloadrun_regressions() {
    replay_all("parse_workloadrun");
}

#[test]
fn load_rules_regressions() {
    replay_all("load_rules");
}

#[test]
fn check_pipeline_regressions() {
    replay_all("check_pipeline");
}

#[test]
fn render_regressions() {
    replay_all("render");
}
