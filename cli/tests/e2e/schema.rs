//! `nvcre-policy rules schema [NAME]`: names without an argument, pretty JSON Schema with one,
//! exit 2 and the names for an unknown one.

use serde_json::Value;

use super::util::run;

const NAMES: &str = "pack, table, suite, log-profile, gang-defaults, gpu-defaults, gpu-products, list-merge, \
                     nccl-base-env, nic-detection, platform-detection, runtime-templates, \
                     scheduling, test-scale, workloadrun-platform-overrides";

#[test]
fn without_a_name_the_names_are_listed() {
    let (code, stdout, stderr) = run(&["rules", "schema"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(stdout, format!("{}\n", NAMES.replace(", ", "\n")));
}

#[test]
fn an_unknown_name_exits_2_with_the_names() {
    let (code, stdout, stderr) = run(&["rules", "schema", "packs"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        format!("Error: unknown schema \"packs\"; available: {NAMES}\n")
    );
}

#[test]
fn each_schema_is_pretty_draft_2020_12_json_that_compiles() {
    for name in NAMES.split(", ") {
        let (code, stdout, stderr) = run(&["rules", "schema", name]);
        assert_eq!((code, stderr.as_str()), (0, ""), "{name}");
        let schema: Value = serde_json::from_str(&stdout).expect("JSON");
        assert_eq!(
            stdout,
            format!("{}\n", serde_json::to_string_pretty(&schema).expect("JSON")),
            "{name}"
        );
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn schema_does_not_need_loadable_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(&[
        "--rules",
        dir.path().to_str().expect("utf8"),
        "rules",
        "schema",
        "suite",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""));
}
