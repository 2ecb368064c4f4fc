//! A deliberately broken rule makes a `property` case of the rule suites fail, and the failure
//! shows the shrunk counterexample as YAML ready for `nvcre-policy check`.

use std::path::{Path, PathBuf};

use nvcre_domain::{PropertyOptions, SuiteRunner, load_rules, load_suite};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("{e}"));
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        }
    }
}

fn shipped_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules")
}

#[test]
fn a_label_value_limit_off_by_one_fails_the_property_with_a_shrunk_counterexample() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rules_dir = dir.path().join("rules");
    copy_dir(&shipped_rules(), &rules_dir);
    // The break: label values of 64 characters slip through.
    let pack = rules_dir.join("contract/workload-labels.yaml");
    let text = std::fs::read_to_string(&pack).unwrap_or_else(|e| panic!("{e}"));
    let broken = text.replace("size(variables.value) > 63", "size(variables.value) > 64");
    assert_ne!(
        broken, text,
        "the rule to break is where this test expects it"
    );
    std::fs::write(&pack, broken).unwrap_or_else(|e| panic!("{e}"));

    let rules = load_rules(Some(&rules_dir)).unwrap_or_else(|e| panic!("{e}"));
    let suite = load_suite(&rules_dir.join("tests/workload-labels/properties.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut runner = SuiteRunner::new(&rules).with_property_options(PropertyOptions {
        cases: Some(64),
        seed: 0,
    });
    let results = runner.run_suite(&suite, None);
    let failed: Vec<_> = results.iter().filter(|r| !r.passed()).collect();
    assert_eq!(
        failed.iter().map(|r| r.note.as_str()).collect::<Vec<_>>(),
        ["a label value longer than 63 characters is refused with the length message"]
    );
    let report = failed[0].report();
    println!("{report}");
    let file = rules_dir.join("tests/workload-labels/properties.yaml");
    let head = format!(
        "FAIL {}:30 › a label value longer than 63 characters is refused with the length message
    property failed (seed 0, 64 cases; shrunk counterexample below): the invariant is false
      invariant: exit == 1 && size(findings) == 1 && findings[0].ruleId == 'workload-label-syntax' && ",
        file.display()
    );
    assert!(report.starts_with(&head), "{report}");
    // Shrunk to the boundary: the shortest value the broken rule lets through, 64 characters.
    let gen_line = report
        .lines()
        .find_map(|l| l.strip_prefix("      gen: "))
        .unwrap_or_else(|| panic!("no gen line: {report}"));
    let generated: serde_json::Value =
        serde_json::from_str(gen_line).unwrap_or_else(|e| panic!("{gen_line}: {e}"));
    let value = generated["value"].as_str().unwrap_or_default();
    assert_eq!(value.len(), 64, "{report}");
    let tail = format!(
        "      gen: {gen_line}
      exit: 0
      counterexample.yaml (run: nvcre-policy check counterexample.yaml):
        apiVersion: nvcre.nvidia.com/v1alpha1
        kind: Workflow
        metadata:
          name: wf
        spec:
          jobTemplate:
            spec:
              workloadMetadata:
                labels:
                  team: {value}
"
    );
    assert!(report.ends_with(&tail), "{report}");
}
