//! The trainer's command line: the env merge (`spec.env` over the base NCCL env), the `-x`
//! forwarding and layout of the `mpirun` arguments, the `preCommand` wrapper, and the trainer
//! command of each framework (torch, mpi, exec).

use std::collections::BTreeSet;

use super::BuildParams;
use crate::api::{EnvVar, WorkloadRunSpec};

/// Merges `spec.env` over the base env (the user's entry wins): base entries the user names are
/// dropped, the rest keep their order, then every user entry follows in user order, so an
/// overridden name moves to the end.
pub fn merge_env(base: &[EnvVar], user: &[EnvVar]) -> Vec<EnvVar> {
    base.iter()
        .filter(|b| !user.iter().any(|u| u.name == b.name))
        .chain(user)
        .cloned()
        .collect()
}

/// The names `mpi_args` already forwards with `-x` (the operand's text before `=`).
pub(super) fn forwarded_names(mpi_args: &[String]) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    let mut args = mpi_args.iter();
    while let Some(arg) = args.next() {
        if arg == "-x"
            && let Some(operand) = args.next()
        {
            names.insert(operand.split_once('=').map_or(operand.as_str(), |(n, _)| n));
        }
    }
    names
}

/// Forwards the merged env to the MPI ranks `-x`, `NAME=value`
/// as two argv items per variable, a bare `-x`, `NAME` for a `valueFrom` variable, skipping names
/// that `mpi_args` already forwards with `-x`.
pub fn mpi_env_args(merged: &[EnvVar], mpi_args: &[String]) -> Vec<String> {
    let forwarded = forwarded_names(mpi_args);
    let mut out = Vec::with_capacity(merged.len() * 2);
    for var in merged {
        if forwarded.contains(var.name.as_str()) {
            continue;
        }
        out.push("-x".to_string());
        if var.value_from.is_some() {
            out.push(var.name.clone());
        } else {
            out.push(format!(
                "{}={}",
                var.name,
                var.value.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

/// The whole mpirun argument list: `-N <gpus>`, `launch_args` (the `runtime-templates` row's:
/// `--allow-run-as-root --mca plm_rsh_args <value>` in the shipped rules), the env forwarding
/// of [`mpi_env_args`], `mpi_args` (platform args already prepended by the caller), the binary,
/// then its args.
pub fn layout_mpirun_args(
    launch_args: &[String],
    gpus_per_node: i64,
    merged: &[EnvVar],
    mpi_args: &[String],
    binary: &str,
    args: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = vec!["-N".to_string(), gpus_per_node.to_string()];
    out.extend(launch_args.iter().cloned());
    out.extend(mpi_env_args(merged, mpi_args));
    out.extend(mpi_args.iter().cloned());
    out.push(binary.to_string());
    out.extend(args.iter().cloned());
    out
}

/// Quotes one word for a POSIX shell so that it reaches the program byte for byte: the word in
/// single quotes, each `'` in it written `'\''` (close the quote, an escaped quote, reopen).
/// Inside single quotes the shell interprets nothing (`$`, backticks, `\`, `"`, `!`, newlines),
/// and an empty word stays one (empty) argument.
///
/// ```
/// use nvcre_domain::shell_quote;
/// assert_eq!(shell_quote("it's $(id)"), r"'it'\''s $(id)'");
/// assert_eq!(shell_quote(""), "''");
/// ```
pub fn shell_quote(word: &str) -> String {
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Wraps a trainer command in the platform `preCommand` lines: the script is the lines, then
/// `exec` and every command and arg element quoted with [`shell_quote`], joined by newlines.
/// Returns `(["/bin/bash", "-c"], [script])`.
///
/// The original quotes the elements like Go's `%q` (double quotes), inside which bash still
/// expands `$…`, `$(…)` and backticks; single quotes hand every element to the program as
/// written.
pub fn wrap_pre_command(
    pre: &[String],
    command: &[String],
    args: &[String],
) -> (Vec<String>, Vec<String>) {
    let quoted: Vec<String> = command.iter().chain(args).map(|s| shell_quote(s)).collect();
    let mut lines = pre.to_vec();
    lines.push(format!("exec {}", quoted.join(" ")));
    (
        vec!["/bin/bash".to_string(), "-c".to_string()],
        vec![lines.join("\n")],
    )
}

/// The trainer command and args by framework, before any wrapping.
pub(super) fn trainer_command(
    spec: &WorkloadRunSpec,
    params: &BuildParams,
    merged_env: &[EnvVar],
) -> (Vec<String>, Vec<String>) {
    let fw = &spec.framework;
    if let Some(torch) = &fw.torch {
        let mut args = match (torch.script.as_deref(), torch.module.as_deref()) {
            (Some(script), _) if !script.is_empty() => vec![script.to_string()],
            (_, Some(module)) if !module.is_empty() => vec!["-m".to_string(), module.to_string()],
            _ => Vec::new(),
        };
        args.extend(torch.args.iter().cloned());
        return (vec!["torchrun".to_string()], args);
    }
    if let Some(mpi) = &fw.mpi {
        let mpi_args: Vec<String> = params
            .platform_mpi_args
            .iter()
            .chain(&mpi.mpi_args)
            .cloned()
            .collect();
        let command = vec![
            "timeout".to_string(),
            params.templates.mpi.timeout_seconds.clone(),
            mpi.mpirun_path.clone(),
        ];
        let args = layout_mpirun_args(
            &params.templates.mpi.launch_args,
            params.gpus_per_node,
            merged_env,
            &mpi_args,
            &mpi.binary,
            &mpi.args,
        );
        return (command, args);
    }
    match &fw.exec {
        Some(exec) => (exec.command.clone(), exec.args.clone()),
        None => (Vec::new(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::build_workflow;
    use crate::build::fixtures::*;
    use serde_json::json;

    // ---- shell quoting: one line per case ----------------------------------------------------
    macro_rules! shq {
        ($name:ident, $input:expr, $want:expr) => {
            #[test]
            fn $name() {
                assert_eq!(shell_quote($input), $want);
            }
        };
    }

    shq!(sq_plain, "timeout", "'timeout'");

    shq!(sq_empty, "", "''");

    shq!(sq_space, "-o A -o B", "'-o A -o B'");

    shq!(sq_single_quote, "it's", r"'it'\''s'");

    shq!(sq_only_quotes, "''", r"''\'''\'''");

    shq!(sq_double_quote_kept, r#"say "hi""#, r#"'say "hi"'"#);

    shq!(sq_backslash_kept, r"a\b", r"'a\b'");

    shq!(
        sq_dollar_kept,
        "$HOME $(id) `id` $1",
        "'$HOME $(id) `id` $1'"
    );

    shq!(sq_newline_kept, "a\nb", "'a\nb'");

    shq!(sq_unicode_kept, "日本 🚀", "'日本 🚀'");

    // ---- -x forwarding: one line per case -----------------------------------------------------
    macro_rules! forward {
        ($name:ident, env [$($env:expr),*], mpi_args [$($arg:expr),*], want [$($want:expr),*]) => {
            #[test]
            fn $name() {
                let env: Vec<EnvVar> = vec![$($env),*];
                let mpi_args: Vec<String> = strings(&[$($arg),*]);
                let want: Vec<String> = strings(&[$($want),*]);
                assert_eq!(mpi_env_args(&env, &mpi_args), want);
            }
        };
    }

    forward!(fwd_all, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args [], want ["-x", "A=1", "-x", "B=2"]);

    forward!(fwd_skip_name_value, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args ["-x", "A=9"], want ["-x", "B=2"]);

    forward!(fwd_skip_bare_name, env [EnvVar::new("A", "1"), EnvVar::new("B", "2")], mpi_args ["--mca", "x", "-x", "B"], want ["-x", "A=1"]);

    forward!(fwd_value_from_bare, env [secret_var("TOKEN"), EnvVar::new("A", "1")], mpi_args [], want ["-x", "TOKEN", "-x", "A=1"]);

    forward!(fwd_operand_not_flag, env [EnvVar::new("A", "1")], mpi_args ["A=1"], want ["-x", "A=1"]);

    forward!(fwd_trailing_x, env [EnvVar::new("A", "1")], mpi_args ["-x"], want ["-x", "A=1"]);

    forward!(fwd_prefix_name_not_skipped, env [EnvVar::new("AB", "1")], mpi_args ["-x", "A=1"], want ["-x", "AB=1"]);

    forward!(fwd_empty_value, env [EnvVar { name: "E".to_string(), value: None, value_from: None }], mpi_args [], want ["-x", "E="]);

    // ---- env ----------------------------------------------------------------------------------
    #[test]
    fn base_env_order_mnnvl_on() {
        assert_eq!(
            names(&base_nccl_env(true)),
            [
                "NCCL_DEBUG=INFO",
                "NCCL_DEBUG_SUBSYS=NET,INIT",
                "NCCL_NVLS_ENABLE=1",
                "NCCL_CUMEM_ENABLE=1",
                "NCCL_NET_GDR_C2C=1",
                "NCCL_NET_GDR_LEVEL=LOC",
                "NCCL_P2P_NET_CHUNKSIZE=2097152",
                "NCCL_SHM_DISABLE=1",
                "NCCL_MNNVL_ENABLE=1",
                "NCCL_SOCKET_IFNAME=eth0",
            ]
        );
    }

    #[test]
    fn merge_moves_user_override_to_the_end() {
        let user = [
            EnvVar::new("NCCL_SHM_DISABLE", "0"),
            EnvVar::new("MY_VAR", "x"),
        ];
        assert_eq!(
            names(&merge_env(&base_nccl_env(false), &user)),
            [
                "NCCL_DEBUG=INFO",
                "NCCL_DEBUG_SUBSYS=NET,INIT",
                "NCCL_NVLS_ENABLE=1",
                "NCCL_CUMEM_ENABLE=1",
                "NCCL_NET_GDR_C2C=1",
                "NCCL_NET_GDR_LEVEL=LOC",
                "NCCL_P2P_NET_CHUNKSIZE=2097152",
                "NCCL_MNNVL_ENABLE=0",
                "NCCL_SOCKET_IFNAME=eth0",
                "NCCL_SHM_DISABLE=0",
                "MY_VAR=x",
            ]
        );
    }

    fn secret_var(name: &str) -> EnvVar {
        EnvVar {
            name: name.to_string(),
            value: None,
            value_from: Some(json!({"secretKeyRef": {"name": "s", "key": "k"}})),
        }
    }

    #[test]
    fn mpirun_args_of_the_seed_all_reduce_example() {
        let merged = merge_env(&base_nccl_env(false), &[]);
        let mpi_args = strings(&["-x", "NCCL_NET_PLUGIN=none"]);
        let args = layout_mpirun_args(
            &strings(&[
                "--allow-run-as-root",
                "--mca",
                "plm_rsh_args",
                "-o StrictHostKeyChecking=no -o ConnectionAttempts=10",
            ]),
            8,
            &merged,
            &mpi_args,
            "/usr/local/bin/all_reduce_perf_mpi",
            &strings(&["-b", "8", "-e", "32G", "-f", "2", "-n", "100"]),
        );
        let mut want = strings(&[
            "-N",
            "8",
            "--allow-run-as-root",
            "--mca",
            "plm_rsh_args",
            "-o StrictHostKeyChecking=no -o ConnectionAttempts=10",
        ]);
        want.extend(strings(&BASE_MNNVL_OFF));
        want.extend(strings(&[
            "-x",
            "NCCL_NET_PLUGIN=none",
            "/usr/local/bin/all_reduce_perf_mpi",
            "-b",
            "8",
            "-e",
            "32G",
            "-f",
            "2",
            "-n",
            "100",
        ]));
        assert_eq!(args, want);
    }

    #[test]
    fn platform_args_precede_user_args_and_user_x_wins() {
        let wr = all_reduce(json!({
            "env": [{"name": "NCCL_DEBUG", "value": "TRACE"}],
            "framework": {"mpi": {
                "binary": "/b",
                "mpirunPath": "/mpirun",
                "mpiArgs": ["-x", "NCCL_DEBUG=WARN", "--bind-to", "none"],
            }},
        }));
        let p = BuildParams {
            platform_mpi_args: strings(&["-x", "NCCL_NET_PLUGIN=none"]),
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        let trainer = &wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"];
        let args: Vec<String> = serde_json::from_value(trainer["args"].clone()).unwrap();
        let tail: Vec<&str> = args.iter().skip(6).map(String::as_str).collect();
        let mut want: Vec<&str> = BASE_MNNVL_OFF.iter().skip(2).copied().collect();
        want.extend([
            "-x",
            "NCCL_NET_PLUGIN=none",
            "-x",
            "NCCL_DEBUG=WARN",
            "--bind-to",
            "none",
            "/b",
        ]);
        assert_eq!(tail, want);
        assert_eq!(trainer["command"], json!(["timeout", "3600", "/mpirun"]));
    }

    #[test]
    fn pre_command_wraps_the_mpi_trainer() {
        let wr = all_reduce(json!({}));
        let p = BuildParams {
            platform_mpi_args: strings(&["-x", "NCCL_NET_PLUGIN=none"]),
            pre_command: strings(&["rm -rf /opt/amazon", "unset NCCL_NET_PLUGIN"]),
            ..params()
        };
        let wf = build_workflow(&wr, &p).unwrap();
        let trainer = &wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"];
        let mut want = String::from(
            "rm -rf /opt/amazon\nunset NCCL_NET_PLUGIN\nexec 'timeout' '3600' \
             '/usr/local/mpi/bin/mpirun' '-N' '8' '--allow-run-as-root' '--mca' \
             'plm_rsh_args' '-o StrictHostKeyChecking=no -o ConnectionAttempts=10'",
        );
        for a in BASE_MNNVL_OFF {
            want.push_str(&format!(" '{a}'"));
        }
        want.push_str(
            " '-x' 'NCCL_NET_PLUGIN=none' '/usr/local/bin/all_reduce_perf_mpi' \
             '-b' '8' '-e' '32G' '-f' '2' '-n' '100'",
        );
        assert_eq!(trainer["command"], json!(["/bin/bash", "-c"]));
        assert_eq!(trainer["args"], json!([want]));
    }

    #[test]
    fn pre_command_quotes_every_element_in_single_quotes() {
        let (command, args) = wrap_pre_command(
            &strings(&["set -e"]),
            &strings(&["sh"]),
            &strings(&["-c", "echo \"a\\b\" 'c' $X\n", ""]),
        );
        assert_eq!(command, ["/bin/bash", "-c"]);
        assert_eq!(
            args,
            [r#"set -e
exec 'sh' '-c' 'echo "a\b" '\''c'\'' $X
' ''"#]
        );
    }

    /// Runs `script` with `bash -c` and a stub `prog` first on PATH that prints its argv
    /// NUL-separated; returns the argv the stub saw.
    fn argv_through_bash(command: &[String], args: &[String]) -> Vec<String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let stub = dir.path().join("prog");
        std::fs::write(&stub, "#!/bin/bash\nprintf '%s\\0' \"$@\"\n").expect("stub");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let (shell, script) = wrap_pre_command(&strings(&["X=expanded"]), command, args);
        let out = std::process::Command::new(&shell[0])
            .args(&shell[1..])
            .args(&script)
            .env("PATH", dir.path())
            .output()
            .expect("bash runs");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let mut argv: Vec<String> = text.split('\0').map(str::to_string).collect();
        assert_eq!(argv.pop().as_deref(), Some(""), "NUL-terminated");
        argv
    }

    #[test]
    fn hostile_arguments_reach_the_program_byte_for_byte() {
        let hostile = strings(&[
            "$(touch /tmp/nvcre-pwned)",
            "`id`",
            "$1",
            "$X",
            "${X:-d}",
            "a\nb\n",
            "it's",
            "'",
            "\"",
            "\\",
            "",
            " lead and trail ",
            "*",
            "~",
            "!!",
            "a;b|c&d>e<f",
            "#comment",
            "\t\r\u{1b}[0m",
            "日本 🚀",
            "--",
        ]);
        assert_eq!(argv_through_bash(&strings(&["prog"]), &hostile), hostile);
    }

    #[test]
    fn a_program_path_with_shell_characters_is_run_as_written() {
        // The command element itself (binary, mpirunPath) is quoted too: `prog` is found on
        // PATH only when the quotes hand bash exactly that word.
        assert_eq!(
            argv_through_bash(&strings(&["prog", "$X"]), &strings(&["--flag=$(id)"])),
            ["$X", "--flag=$(id)"]
        );
    }

    #[test]
    fn torch_module_trainer() {
        assert_eq!(
            trainer_of(json!({"torch": {"module": "pkg.train", "args": ["--lr", "1"]}})),
            json!({
                "image": "img",
                "command": ["torchrun"],
                "args": ["-m", "pkg.train", "--lr", "1"],
                "numNodes": 2,
                "numProcPerNode": 8,
            })
        );
    }

    #[test]
    fn torch_script_trainer() {
        assert_eq!(
            trainer_of(json!({"torch": {"script": "train.py"}}))["args"],
            json!(["train.py"])
        );
    }

    #[test]
    fn exec_trainer_is_verbatim_and_omits_empty_args() {
        assert_eq!(
            trainer_of(json!({"exec": {"command": ["python", "-c", "print(1)"]}})),
            json!({
                "image": "img",
                "command": ["python", "-c", "print(1)"],
                "numNodes": 2,
                "numProcPerNode": 8,
            })
        );
    }

    #[test]
    fn example_merge_env() -> Result<(), Box<dyn std::error::Error>> {
        use crate::api::EnvVar;
        use crate::build::merge_env;
        let base = [EnvVar::new("A", "1"), EnvVar::new("B", "1")];
        let merged = merge_env(&base, &[EnvVar::new("A", "2")]);
        assert_eq!(merged, [EnvVar::new("B", "1"), EnvVar::new("A", "2")]);
        Ok(())
    }

    #[test]
    fn example_mpi_env_args() -> Result<(), Box<dyn std::error::Error>> {
        use super::mpi_env_args;
        use crate::api::EnvVar;
        let env = [EnvVar::new("A", "1"), EnvVar::new("B", "1")];
        let args = mpi_env_args(&env, &["-x".to_string(), "B=2".to_string()]);
        assert_eq!(args, ["-x", "A=1"]);
        Ok(())
    }

    #[test]
    fn example_layout_mpirun_args() -> Result<(), Box<dyn std::error::Error>> {
        use super::layout_mpirun_args;
        let launch = [
            "--mca".to_string(),
            "plm_rsh_args".to_string(),
            "-o A=1".to_string(),
        ];
        let args = layout_mpirun_args(&launch, 8, &[], &[], "/bin/true", &["-v".to_string()]);
        assert_eq!(
            args,
            [
                "-N",
                "8",
                "--mca",
                "plm_rsh_args",
                "-o A=1",
                "/bin/true",
                "-v"
            ]
        );
        Ok(())
    }

    #[test]
    fn example_wrap_pre_command() -> Result<(), Box<dyn std::error::Error>> {
        use crate::build::wrap_pre_command;
        let pre = ["unset X".to_string()];
        let (command, args) =
            wrap_pre_command(&pre, &["echo".to_string()], &["a \"b\"".to_string()]);
        assert_eq!(command, ["/bin/bash", "-c"]);
        assert_eq!(args, ["unset X\nexec 'echo' 'a \"b\"'"]);
        Ok(())
    }
}
