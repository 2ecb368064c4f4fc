//! `load_rules`: arbitrary bytes as a rule file.

use std::sync::LazyLock;

use nvcre_engine::{Contract, Document, Objects, Origin, RuleSet, Source};
use serde_json::{Value, json};

static CONTRACT: LazyLock<Contract> =
    LazyLock::new(|| nvcre_domain::contract().unwrap_or_else(|e| panic!("the contract: {e}")));

/// A WorkloadRun, a TrainJob and a ConfigMap: the kinds the shipped packs match.
static DOCUMENTS: LazyLock<Vec<Document>> = LazyLock::new(|| {
    let mut docs = super::repo_documents("examples/nccl-all-reduce.yaml");
    docs.extend(super::repo_documents("fuzz/inputs/documents.yaml"));
    docs
});

static OBJECTS: LazyLock<Objects> =
    LazyLock::new(|| nvcre_domain::input_objects(DOCUMENTS.iter().map(|d| &d.value)));

/// Params with every field the shipped stages and tables read (one value each).
static PARAMS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "platform": "aws",
        "gpuArchitecture": "h100",
        "numNodes": 4,
        "testScale": "",
        "placement": "Pinned",
        "hasLauncher": true,
        "enableMNNVL": false,
        "labelsPath": "spec.workloadMetadata.labels",
        "node": {"providerID": "aws:///us-east-1a/i-0", "labels": {"nvidia.com/gpu.present": "true"}},
        "entryName": "nccl",
        "mlnxPerNode": 8,
        "gpusPerNode": 8,
        "nodesPerJob": 2,
        "frameworkType": "mpi",
        "nicResourceName": "vpc.amazonaws.com/efa",
        "strictDomain": false,
        "defaultQueue": "default",
        "defaultQueueLabelKey": "kai.scheduler/queue",
        "schedulerName": "kai-scheduler",
    })
});

/// Loads `data` as a rule file (a RulePack or Table with CEL) without a contract (the engine
/// alone) and with the pipeline's contract (as `--rules DIR` loads it), lints it as
/// `rules lint` does, and evaluates every pack of a set that loads over a few fixed documents
/// (with `objects`, with and without params) and renders every table.
///
/// # Panics
/// On a panic underneath.
pub fn load_rules(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sources = [Source::new("rules/fuzz.yaml", text)];
    match RuleSet::from_sources(&sources) {
        Ok(set) => evaluate(&set),
        Err(e) => e.errors.iter().for_each(|e| {
            let _ = e.to_string();
        }),
    }
    match RuleSet::load(&sources, Some(&CONTRACT)) {
        Ok(set) => evaluate(&set),
        Err(e) => e.errors.iter().for_each(|e| {
            let _ = e.to_string();
        }),
    }
    for finding in nvcre_engine::lint(&sources, Some(&CONTRACT)) {
        let _ = finding.to_string();
    }
}

/// Runs every pack of `set` over the fixed documents and renders every table.
fn evaluate(set: &RuleSet) {
    for pack in set.packs() {
        for doc in DOCUMENTS.iter() {
            let origin = Origin {
                file: &doc.source.name,
                document: doc.index,
                spans: Some(&doc.spans),
            };
            for params in [&Value::Null, &*PARAMS] {
                match pack.evaluate_in(&doc.value, origin, params, Some(&OBJECTS)) {
                    Ok(outcome) => {
                        let _ = outcome.findings.len();
                    }
                    Err(e) => {
                        let _ = e.to_string();
                    }
                }
            }
            if let Err(e) = pack.evaluate(&doc.value, origin, &PARAMS) {
                let _ = e.to_string();
            }
        }
    }
    for table in &set.tables {
        for params in [&Value::Null, &*PARAMS] {
            if let Err(e) = table.render(params) {
                let _ = e.to_string();
            }
            if let Err(e) = table.render_all(params) {
                let _ = e.to_string();
            }
        }
    }
}
