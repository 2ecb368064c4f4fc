//! The JSON Schemas of `nvcre-policy rules schema` accept every shipped rule file and suite,
//! and refuse a misspelled key.

use std::path::{Path, PathBuf};

use nvcre_domain::rule_file_schema;
use nvcre_engine::{Source, WalkOptions, parse_documents, walk_files};
use serde_json::Value;

fn validator(name: &str) -> jsonschema::Validator {
    let schema = rule_file_schema(name)
        .expect("contract")
        .unwrap_or_else(|| panic!("no schema {name}"));
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("schema {name}: {e}"))
}

fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules")
}

/// Every document of `path`.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("readable");
    parse_documents(&Source::new(path.display().to_string(), text))
        .expect("YAML")
        .into_iter()
        .map(|d| d.value)
        .collect()
}

/// The schema errors of `value`, as `instance path: message`.
fn errors(v: &jsonschema::Validator, value: &Value) -> Vec<String> {
    v.iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn every_shipped_rule_file_and_suite_validates() {
    let (pack, table, suite) = (validator("pack"), validator("table"), validator("suite"));
    let profile = validator("log-profile");
    let (files, walk_errors) = walk_files(&rules_dir(), &WalkOptions::RULES);
    assert!(walk_errors.is_empty(), "{walk_errors:?}");
    let mut counts = (0, 0, 0);
    for f in &files {
        for doc in documents(f) {
            let name = doc.pointer("/metadata/name").and_then(Value::as_str);
            match doc.get("kind").and_then(Value::as_str) {
                Some("RulePack") => {
                    counts.0 += 1;
                    assert_eq!(errors(&pack, &doc), Vec::<String>::new(), "{}", f.display());
                }
                Some("Table") => {
                    counts.1 += 1;
                    assert_eq!(
                        errors(&table, &doc),
                        Vec::<String>::new(),
                        "{}",
                        f.display()
                    );
                    let one = validator(name.expect("table name"));
                    assert_eq!(errors(&one, &doc), Vec::<String>::new(), "{}", f.display());
                }
                Some("LogProfile") => {
                    counts.2 += 1;
                    assert_eq!(
                        errors(&profile, &doc),
                        Vec::<String>::new(),
                        "{}",
                        f.display()
                    );
                }
                other => panic!("{}: kind {other:?}", f.display()),
            }
        }
    }
    assert_eq!(counts, (13, 11, 3));
    let mut suites = 0;
    let (files, walk_errors) = walk_files(
        &rules_dir().join("tests"),
        &WalkOptions {
            extensions: &["yaml", "yml"],
            skip_dirs: &["data"],
            follow_dir_links: true,
        },
    );
    assert!(walk_errors.is_empty(), "{walk_errors:?}");
    for f in &files {
        for doc in documents(f) {
            suites += 1;
            assert_eq!(
                errors(&suite, &doc),
                Vec::<String>::new(),
                "{}",
                f.display()
            );
        }
    }
    assert!(suites >= 20, "{suites} suites");
}

fn yaml(text: &str) -> Value {
    parse_documents(&Source::new("t.yaml", text))
        .expect("YAML")
        .remove(0)
        .value
}

#[test]
fn a_misspelled_key_fails_validation() {
    let pack = yaml(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: RulePack\nmetadata: {name: p}\nstage: admission\nrules:\n- id: r\n  validate: {expresion: 'true'}\n",
    );
    assert_eq!(
        errors(&validator("pack"), &pack),
        [
            "/rules/0/validate: Additional properties are not allowed ('expresion' was unexpected)",
            "/rules/0/validate: \"expression\" is a required property",
        ]
    );
    let suite = yaml("cases:\n- note: n\n  input: x\n  want_exit: 0\n  want_findigs: []\n");
    assert_eq!(
        errors(&validator("suite"), &suite),
        ["/cases/0: Additional properties are not allowed ('want_findigs' was unexpected)"]
    );
    let table = yaml(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: platform-detection}\nentries:\n- id: x\n  include: 'true'\n  platfrom: x\n",
    );
    for name in ["table", "platform-detection"] {
        let got = errors(&validator(name), &table);
        assert!(
            got.iter().any(|e| e.contains("'platfrom' was unexpected")),
            "{name}: {got:?}"
        );
    }
    let wrong_type = yaml(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: gpu-defaults}\nentries:\n- {id: x, gpuArchitecture: a, gpusPerNode: eight, mlnxPerNode: 1, enableMNNVL: false}\n",
    );
    assert!(!errors(&validator("gpu-defaults"), &wrong_type).is_empty());
    // A templated value is not type-checked; a templated row is still a row.
    let templated = yaml(
        "apiVersion: policy.nvcre.nvidia.com/v1alpha1\nkind: Table\nmetadata: {name: gpu-defaults}\nentries:\n- {id: x, gpuArchitecture: a, gpusPerNode: '${{ 4 }}', mlnxPerNode: {$if: 'true', $then: 1}, enableMNNVL: false}\n",
    );
    assert_eq!(
        errors(&validator("table"), &templated),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&validator("gpu-defaults"), &templated),
        Vec::<String>::new()
    );
}
