//! The CEL cost the shipped rules use: every rule test suite, and `check` of every example (as
//! it is, for AWS H100 and with each example nodes file), stays far below the default budgets
//! (`--cel-cost-limit`, `--cel-document-cost-limit`). Its own test binary, so the peaks are
//! those of these runs only.
//!
//! The figures: `cargo test -p nvcre-domain --test cel_cost -- --nocapture`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvcre_domain::{
    CheckRequest, SuiteRunner, check_document, default_rules, discover_suites, load_suite,
    read_nodes,
};
use nvcre_engine::limits::Limits;
use nvcre_engine::{Source, cost, parse_documents};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("reads the directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_shipped_rules_use_a_small_fraction_of_the_default_budgets() {
    let rules = default_rules().expect("embedded rules compile");
    let mut runner = SuiteRunner::new(&rules);
    let suites = discover_suites(&[root().join("rules/tests")]).expect("suites found");
    let mut cases = 0;
    for file in &suites {
        let suite = load_suite(file).expect("suite loads");
        cases += runner.run_suite(&suite, None).len();
    }
    assert!(cases > 0, "no suite case ran");
    let nodes: Vec<_> = yaml_files(&root().join("examples/nodes"))
        .iter()
        .map(|f| {
            Some(Arc::new(
                read_nodes(&f.display().to_string()).expect("nodes"),
            ))
        })
        .collect();
    let requests: Vec<CheckRequest> = [
        CheckRequest::default(),
        CheckRequest {
            platform: Some("aws".into()),
            gpu_arch: Some("h100".into()),
            nodes: None,
        },
    ]
    .into_iter()
    .chain(nodes.into_iter().map(|nodes| CheckRequest {
        nodes,
        ..CheckRequest::default()
    }))
    .collect();
    let mut inputs = yaml_files(&root().join("examples"));
    inputs.extend(yaml_files(&root().join("cli/tests/data/lint-mixed")));
    let mut documents = 0;
    for file in &inputs {
        let text = std::fs::read_to_string(file).expect("reads the example");
        let docs = parse_documents(&Source::new(file.display().to_string(), text))
            .expect("the example parses");
        for doc in &docs {
            for req in &requests {
                // Findings and input errors alike: only the cost is measured.
                let _ = check_document(&rules, doc, req);
                documents += 1;
            }
        }
    }
    let (expression, document) = cost::peak_costs();
    eprintln!(
        "peak CEL cost over {cases} suite cases and {documents} example checks: \
         {expression} units in one expression, {document} in one document"
    );
    let limits = Limits::default();
    assert!(
        expression > 0 && expression.saturating_mul(100) <= limits.cel_cost,
        "an expression used {expression} units, more than 1% of the default --cel-cost-limit {}",
        limits.cel_cost
    );
    assert!(
        document > 0 && document.saturating_mul(100) <= limits.cel_document_cost,
        "a document used {document} units, more than 1% of the default --cel-document-cost-limit {}",
        limits.cel_document_cost
    );
}
