//! The `/bin/bash -c` wrapper a platform's `preCommand` puts around the trainer, run with a real
//! `bash` and stub programs: every argument reaches the program byte for byte.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use super::util::*;

/// Values a shell would interpret if they were not quoted.
const HOSTILE: &[&str] = &[
    "$(touch pwned)",
    "`touch pwned`",
    "$1",
    "${HOME:-x}",
    "a\nb",
    "it's",
    "'",
    "\"",
    "\\",
    "",
    " spaced ",
    "*",
    "a;b|c&d",
    "#x",
];

/// Writes an executable stub `name` into `dir` that prints its argv NUL-separated.
fn stub(dir: &Path, name: &str, script: &str) {
    let path = dir.join(name);
    std::fs::write(&path, script).expect("write stub");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Renders `run` (YAML) for AWS H100 and returns the trainer's `(command, args)`.
fn render_trainer(run: &str) -> (Vec<String>, Vec<String>) {
    let out = bin()
        .args([
            "render",
            "--platform",
            "aws",
            "--gpu-arch",
            "h100",
            "-o",
            "json",
            "-",
        ])
        .write_stdin(run)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wf: Value = serde_json::from_slice(&out.stdout).expect("json");
    let trainer = &wf["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"];
    let strings = |v: &Value| -> Vec<String> {
        serde_json::from_value(v.clone()).expect("a list of strings")
    };
    (strings(&trainer["command"]), strings(&trainer["args"]))
}

/// Runs the wrapped trainer in `dir` with `PATH=<dir>/bin` and returns the argv the stub
/// `name` printed.
fn run_wrapper(dir: &Path, command: &[String], args: &[String], name: &str) -> Vec<String> {
    assert_eq!(command, ["/bin/bash", "-c"]);
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).expect("mkdir");
    let printer = "#!/bin/bash\nprintf '%s\\0' \"$@\"\n";
    stub(&bin_dir, name, printer);
    // The AWS preCommand lines run `rm -rf`: a stub that does nothing.
    stub(&bin_dir, "rm", "#!/bin/bash\nexit 0\n");
    let out = std::process::Command::new("/bin/bash")
        .args(["-c", &args[0]])
        .current_dir(dir)
        .env_clear()
        .env("PATH", &bin_dir)
        .env("HOME", "/home-of-test")
        .output()
        .expect("bash runs");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
    assert!(!dir.join("pwned").exists(), "a command substitution ran");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut argv: Vec<String> = text.split('\0').map(str::to_string).collect();
    assert_eq!(argv.pop().as_deref(), Some(""), "NUL-terminated");
    argv
}

fn yaml_list(items: &[&str]) -> String {
    serde_json::to_string(items).expect("json")
}

#[test]
fn exec_command_and_args_reach_the_program_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {{name: hostile}}\n\
         spec:\n  image: i\n  numNodes: 1\n  framework:\n    exec:\n      command: [\"prog\", \"$(touch pwned)\"]\n      args: {}\n",
        yaml_list(HOSTILE)
    );
    let (command, args) = render_trainer(&run);
    let argv = run_wrapper(dir.path(), &command, &args, "prog");
    let mut want = vec!["$(touch pwned)".to_string()];
    want.extend(HOSTILE.iter().map(|s| s.to_string()));
    assert_eq!(argv, want);
}

#[test]
fn mpi_binary_mpirun_path_mpi_args_args_and_env_reach_mpirun_byte_for_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = format!(
        "apiVersion: nvcre.nvidia.com/v1alpha1\nkind: WorkloadRun\nmetadata: {{name: hostile}}\n\
         spec:\n  image: i\n  numNodes: 1\n  env: [{{name: SUBST, value: \"$(touch pwned) `id` $1\"}}]\n  framework:\n    mpi:\n\
         \x20     binary: \"/opt/b $1/`id`\"\n      mpirunPath: \"/opt/mpi $(id)/mpirun\"\n\
         \x20     mpiArgs: [\"--tag\", \"$HOME\"]\n      args: {}\n",
        yaml_list(HOSTILE)
    );
    let (command, args) = render_trainer(&run);
    // `timeout` is the first element of an MPI trainer; the stub stands in for it.
    let argv = run_wrapper(dir.path(), &command, &args, "timeout");
    assert_eq!(argv[..2], ["3600", "/opt/mpi $(id)/mpirun"]);
    let subst = argv
        .windows(2)
        .find(|w| w[0] == "-x" && w[1].starts_with("SUBST="))
        .map(|w| w[1].clone());
    assert_eq!(subst.as_deref(), Some("SUBST=$(touch pwned) `id` $1"));
    // The platform's mpiArgs, the user's mpiArgs, the binary, then its args, as written.
    let want: Vec<String> = [
        "-x",
        "NCCL_NET_PLUGIN=none",
        "--tag",
        "$HOME",
        "/opt/b $1/`id`",
    ]
    .iter()
    .chain(HOSTILE)
    .map(|s| s.to_string())
    .collect();
    assert_eq!(argv[argv.len() - want.len()..], want[..]);
}
