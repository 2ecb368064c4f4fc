//! Rule sets checked against the pipeline contract at load: `render --rules` refuses them
//! whole (exit 2, every error), `rules lint` reports the same problems (exit 1).

use super::util::{edit, root, rules_copy, run};

fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

/// `--rules RULES render FLAGS… examples/nccl-all-reduce.yaml`: (exit code, stdout, stderr).
fn render_example(rules: &str, flags: &[&str]) -> (i32, String, String) {
    let example = example("nccl-all-reduce.yaml");
    let mut args = vec!["--rules", rules, "render"];
    args.extend(flags);
    args.push(&example);
    run(&args)
}

#[test]
fn a_misspelled_stage_is_refused_by_render_and_reported_by_lint() {
    let (_dir, rules) = rules_copy();
    let gang = rules.join("contract/gang.yaml");
    edit(&gang, "stage: gang-contract\n", "stage: gang-contrat\n");
    let dir = rules.to_str().expect("utf8");
    let message = "unknown stage \"gang-contrat\"; known stages: admission, workload-labels, \
                   placement, gang-contract, manifests, lint";
    let (code, stdout, stderr) = render_example(dir, &["--gpu-arch", "h100"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "Error: rule pack error: {}:13:8: {message}\n",
            gang.display()
        )
    );
    let (code, stdout, stderr) = run(&["rules", "lint", dir]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        without_cost_warnings(&stdout),
        format!("{}:13:8: error[contract]: {message}\n", gang.display())
    );
}

#[test]
fn a_misspelled_key_in_a_platform_row_is_refused_and_every_error_is_listed() {
    let (_dir, rules) = rules_copy();
    let platforms = rules.join("detect/platforms.yaml");
    edit(
        &platforms,
        "    platform: nscale\n",
        "    platfrom: nscale\n",
    );
    let gang = rules.join("contract/gang.yaml");
    edit(&gang, "stage: gang-contract\n", "stage: gang-contrat\n");
    let dir = rules.to_str().expect("utf8");
    let row = "entry nscale: unknown key \"platfrom\" in a row of table \"platform-detection\"; \
               known keys: platform, synthetic";
    let (code, _, stderr) = render_example(dir, &["--gpu-arch", "h100"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "Error: rule pack error: {}:13:8: unknown stage \"gang-contrat\"; known stages: \
             admission, workload-labels, placement, gang-contract, manifests, lint\n\
             Error: rule pack error: {}:46:5: {row}\n",
            gang.display(),
            platforms.display()
        )
    );
    let (code, stdout, stderr) = run(&["rules", "lint", dir]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        without_cost_warnings(&stdout).lines().nth(1),
        Some(format!("{}:46:5: error[contract]: {row}", platforms.display()).as_str())
    );
}

#[test]
fn a_param_the_stage_does_not_pass_is_refused() {
    let (_dir, rules) = rules_copy();
    let gang = rules.join("contract/gang.yaml");
    edit(
        &gang,
        "expression: object.spec.?gangScheduler.?schedulerName.orValue('') != ''",
        "expression: object.spec.?gangScheduler.?schedulerName.orValue(params.?scheduler.orValue('')) != ''",
    );
    let (code, stdout, _) = run(&["rules", "lint", rules.to_str().expect("utf8")]);
    assert_eq!(code, 1);
    assert_eq!(
        without_cost_warnings(&stdout),
        format!(
            "{}:20:19: error[contract]: params.scheduler is not passed to stage \
             \"gang-contract\" (it passes defaultQueue, defaultQueueLabelKey)\n",
            gang.display()
        )
    );
}

/// `rules lint` output without its `cel-cost` warnings, which the shipped rules have (see
/// `the_shipped_rules_lint_clean_but_for_cost_estimates`) and these tests are not about.
fn without_cost_warnings(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| !l.contains(": warning[cel-cost]: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A `--rules` set that lost a table file (it defines the others) is refused whole, as the
/// controller refuses it. It loaded, passed `check`, and failed every `render` with "rule set
/// has no table".
#[test]
fn a_set_that_lost_a_table_is_refused_whole() {
    let (_dir, rules) = rules_copy();
    std::fs::remove_file(rules.join("defaults/nccl-env.yaml")).expect("remove");
    let dir = rules.to_str().expect("utf8");
    let (code, stdout, stderr) = render_example(dir, &["--gpu-arch", "h100"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        format!(
            "Error: rule pack error: {dir}: no rule file defines table \"nccl-base-env\" (the NCCL environment every workload container starts from); the pipeline renders it, so the set is refused\n"
        )
    );
}

/// `rules lint` lints the files it can read when one cannot be read (that one is an error on
/// stderr, exit 2): it stopped at the unreadable file and said nothing of the others.
#[test]
fn lint_reports_the_readable_files_beside_an_unreadable_one() {
    let (_dir, rules) = rules_copy();
    let gang = rules.join("contract/gang.yaml");
    edit(&gang, "stage: gang-contract\n", "stage: gang-contrat\n");
    let bin = rules.join("contract/bin.yaml");
    std::fs::write(&bin, [0xff, b'\n']).expect("write");
    let (code, stdout, stderr) = run(&["rules", "lint", rules.to_str().expect("utf8")]);
    assert_eq!(code, 2);
    assert_eq!(
        without_cost_warnings(&stdout),
        format!(
            "{}:13:8: error[contract]: unknown stage \"gang-contrat\"; known stages: admission, workload-labels, placement, gang-contract, manifests, lint\n",
            gang.display()
        )
    );
    assert_eq!(
        stderr,
        format!(
            "Error: reading {}: not UTF-8 text: invalid byte 0xff at byte offset 0 (line 1)\n",
            bin.display()
        )
    );
}

/// A row value written as a template is checked against the row schema once rendered, as a
/// literal one is when the set loads: `gpusPerNode: "${{ 0 }}"` rendered nodes of 0 GPUs.
#[test]
fn a_templated_row_value_is_checked_against_the_schema_as_rendered() {
    let (_dir, rules) = rules_copy();
    let table = rules.join("defaults/gpu-defaults.yaml");
    edit(
        &table,
        "{id: h100, gpuArchitecture: h100, gpusPerNode: 8,",
        "{id: h100, gpuArchitecture: h100, gpusPerNode: \"${{ 0 }}\",",
    );
    let dir = rules.to_str().expect("utf8");
    let (code, stdout, stderr) = render_example(dir, &["--platform", "aws", "--gpu-arch", "h100"]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert_eq!(
        stderr,
        format!(
            "Error: rule pack error: {}:18:52: entry h100: the row as rendered does not match the schema of table \"gpu-defaults\" at gpusPerNode: 0 is less than the minimum of 1\n",
            table.display()
        )
    );
}

/// A whole set that lost a stage's packs (a deleted file) or a file's contents (a ConfigMap
/// key emptied) is refused by `--rules` and reported by `rules lint`, not run without that
/// policy: the gang contract would otherwise pass a runtime that moves the queue.
#[test]
fn a_deleted_or_emptied_pack_file_refuses_the_set() {
    let (_dir, rules) = rules_copy();
    std::fs::remove_file(rules.join("contract/gang.yaml")).expect("rm");
    let dir = rules.to_str().expect("utf8");
    let (code, stdout, stderr) = render_example(dir, &["--gpu-arch", "h100"]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "Error: rule pack error: {dir}: no rule file defines a pack of stage \"gang-contract\" (post-override gang contract, when spec.gangScheduler names a scheduler); the pipeline runs it, so the set is refused (a deleted or emptied file?)\n"
        )
    );
    let (code, stdout, _) = run(&["--rules", dir, "rules", "lint"]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains(&format!(
            "{dir}: error[empty-stage]: no rule file defines a pack of stage \"gang-contract\""
        )),
        "{stdout}"
    );

    let (_dir, rules) = rules_copy();
    let labels = rules.join("contract/workload-labels.yaml");
    std::fs::write(&labels, "# emptied\n").expect("write");
    let dir = rules.to_str().expect("utf8");
    let (code, _, stderr) = render_example(dir, &["--gpu-arch", "h100"]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with(&format!(
            "Error: rule pack error: {}: the rule file has no document, so it would load nothing and drop whatever it held; the set is refused: restore the file, or delete it\n",
            labels.display()
        )),
        "{stderr}"
    );
}
