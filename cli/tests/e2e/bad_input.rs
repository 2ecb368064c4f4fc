//! The bad-input suite: hostile or wrong input, each case asserting the exit code, the exact
//! stderr and (for a refused command) an empty stdout. Inputs are written to `in.yaml` in a
//! temporary directory that is the command's working directory, so messages name `in.yaml`.

use super::util::*;

/// Runs the binary in a fresh directory holding `in.yaml` = `input`; `(code, stdout, stderr)`.
fn run_in(args: &[&str], input: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("in.yaml"), input).expect("write input");
    let out = bin()
        .args(args)
        .current_dir(dir.path())
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A WorkloadRun named `t` with `spec` (YAML lines indented by two spaces) after the
/// `image`/`numNodes` lines.
fn run_yaml(spec: &str) -> String {
    format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {{name: t}}\nspec:\n  image: i\n  numNodes: 1\n{spec}"
    )
}

/// One case: the command's args (the input is `in.yaml`), the input, the exit code, the exact
/// stderr; stdout must be empty.
macro_rules! refused {
    ($name:ident, [$($arg:expr),*], $input:expr, $code:expr, $stderr:expr) => {
        #[test]
        fn $name() {
            let (code, stdout, stderr) = run_in(&[$($arg),*], &$input);
            assert_eq!((code, stderr.as_str()), ($code, $stderr));
            assert_eq!(stdout, "");
        }
    };
}

// ---- command lines ------------------------------------------------------------------------

refused!(
    nul_in_exec_command_check,
    ["check", "in.yaml"],
    run_yaml("  framework: {exec: {command: [\"a\\0b\"]}}\n"),
    2,
    "Error: in.yaml:7:32: spec.framework.exec.command[0]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);

refused!(
    nul_in_env_value_render,
    [
        "render",
        "--platform",
        "aws",
        "--gpu-arch",
        "h100",
        "in.yaml"
    ],
    run_yaml("  framework: {exec: {command: [a]}}\n  env: [{name: A, value: \"x\\0\"}]\n"),
    2,
    "Error: in.yaml:8:9: spec.env[0]: contains a NUL character (\\0), which no command-line argument or environment value can carry; remove it\n"
);
