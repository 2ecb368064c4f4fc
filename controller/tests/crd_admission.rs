//! The CRD's CEL rules and the admission rule pack agree, on every input of the admission
//! suites (`rules/tests/workloadrun-admission/`, `rules/tests/workflow-admission/`).
//!
//! For each input, every create-time `x-kubernetes-validations` rule of the generated CRD is
//! evaluated with the engine's CEL (`self` = the value at the rule's path in `spec`; a rule on an
//! absent field does not run, as in the API server). A CRD rule failing must appear among the
//! suite's expected admission findings (same message, or the message after the API server's
//! `Invalid value: "<v>": ` prefix), and an expected finding carrying a CRD rule's message must
//! come with that rule failing. Which checks exist on one side only is in `docs/crd.md`.

use std::collections::BTreeSet;
use std::path::Path;

use nvcre_domain::crd::{ValidationRule, crds, validation_rules};
use nvcre_engine::{Expr, Scope, Source, parse_documents};
use serde_json::Value;

/// Values at `path` below `v` (`*` = every map value or list item).
fn at<'a>(v: &'a Value, path: &[String], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = path.split_first() else {
        out.push(v);
        return;
    };
    if first == "*" {
        match v {
            Value::Object(m) => m.values().for_each(|x| at(x, rest, out)),
            Value::Array(a) => a.iter().for_each(|x| at(x, rest, out)),
            _ => {}
        }
    } else if let Some(x) = v.get(first) {
        at(x, rest, out);
    }
}

fn failing(rules: &[ValidationRule], spec: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in rules.iter().filter(|r| !r.transition) {
        let expr = Expr::compile(&r.rule).unwrap_or_else(|e| panic!("{}: {e}", r.rule));
        let mut values = Vec::new();
        at(spec, &r.path, &mut values);
        for v in values {
            let mut scope = Scope::new();
            scope.bind("self", v);
            if !expr.eval_bool(&scope).unwrap_or(false) {
                out.insert(r.message.clone());
            }
        }
    }
    out
}

struct Case {
    file: String,
    note: String,
    input: Value,
    messages: Vec<String>,
}

fn cases(dir: &str) -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../rules/tests")
        .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .expect("suite dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let suite = parse_documents(&Source::new(name.clone(), text)).expect("suite yaml");
        for case in suite[0].value["cases"].as_array().into_iter().flatten() {
            let Some(input) = case["input"].as_str() else {
                continue;
            };
            let docs = parse_documents(&Source::new("input", input.to_string())).expect("input");
            let messages = case["want_findings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f["message"].as_str().map(str::to_string))
                .collect();
            out.push(Case {
                file: name.clone(),
                note: case["note"].as_str().unwrap_or_default().to_string(),
                input: docs.first().map(|d| d.value.clone()).unwrap_or(Value::Null),
                messages,
            });
        }
    }
    out
}

fn agree(dir: &str, rules: &[ValidationRule]) -> usize {
    let crd_messages: BTreeSet<&str> = rules.iter().map(|r| r.message.as_str()).collect();
    let mut checked = 0;
    for case in cases(dir) {
        let spec = case.input.get("spec").cloned().unwrap_or(Value::Null);
        let crd = failing(rules, &spec);
        let pack: BTreeSet<String> = case
            .messages
            .iter()
            .filter_map(|m| {
                crd_messages
                    .iter()
                    .find(|c| m == *c || m.ends_with(&format!("\": {c}")))
                    .map(|c| (*c).to_string())
            })
            .collect();
        assert_eq!(
            crd, pack,
            "{} / {}: CRD CEL vs admission pack",
            case.file, case.note
        );
        checked += 1;
    }
    checked
}

#[test]
fn workloadrun_crd_rules_agree_with_the_admission_pack() {
    let all = crds();
    let rules = validation_rules(&all[0]);
    let create_time: Vec<&str> = rules
        .iter()
        .filter(|r| !r.transition)
        .map(|r| r.message.as_str())
        .collect();
    assert_eq!(create_time.len(), 9, "{create_time:#?}");
    assert_eq!(agree("workloadrun-admission", &rules), 101);
}

#[test]
fn workflow_crd_rules_agree_with_the_admission_pack() {
    let all = crds();
    let rules = validation_rules(&all[1]);
    let transition: Vec<String> = rules
        .iter()
        .filter(|r| r.transition)
        .map(|r| format!("{}: {}", r.path.join("."), r.message))
        .collect();
    assert_eq!(
        transition,
        vec![
            ": gangScheduler cannot be added or removed after creation",
            "gangScheduler: gangScheduler is immutable",
            "jobTemplate.spec: workloadMetadata cannot be added or removed after creation",
            "jobTemplate.spec: nodeHealthMonitor, goodputMeasurement, and bandwidthMeasurement cannot be added or removed after creation",
            "jobTemplate.spec.bandwidthMeasurement: bandwidthMeasurement is immutable",
            "jobTemplate.spec.goodputMeasurement: goodputMeasurement is immutable",
            "jobTemplate.spec.nodeHealthMonitor: nodeHealthMonitor is immutable",
            "jobTemplate.spec.workload: workload is immutable",
            "jobTemplate.spec.workloadMetadata: workloadMetadata is immutable",
        ]
    );
    assert_eq!(agree("workflow-admission", &rules), 16);
}
