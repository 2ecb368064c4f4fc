//! The cluster verbs of `nvcre-policy workloadrun`: `run`, `status`, `report` and `cancel`
//! talk to a Kubernetes API server through `kube`, with kubectl's connection flags
//! (`--kubeconfig`, `--context`, `-n/--namespace`, the `KUBECONFIG` variable).
//!
//! Exit codes (every verb):
//! - 0: done (`run` created the run, or `--wait` saw it succeed; `status` in every phase;
//!   `report` of a succeeded run; `cancel` deleted or found nothing to delete);
//! - 1: the run failed, or local validation found policy violations (as `check`);
//! - 2: usage or input error (flags, file, kubeconfig), an object not found, an API error;
//! - 3: not finished: `run --wait` timed out, `report` of a run still in progress;
//! - 130: `run --wait` interrupted (Ctrl-C / SIGTERM).

mod report;
mod run;
mod verbs;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use nvcre_domain::crd::{Condition, WorkloadRunResource};
use nvcre_engine::RuleSet;

pub use run::RunArgs;
pub use verbs::{CancelArgs, ReportArgs, StatusArgs};

/// Exit code of a failed run (and of policy violations found before creating one).
pub const EXIT_FAILED: u8 = 1;
/// Exit code of a usage, input or API error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a run that has not finished (`run --wait` timeout, `report` of a running run).
pub const EXIT_NOT_FINISHED: u8 = 3;
/// Exit code of an interrupted `run --wait`.
pub const EXIT_INTERRUPTED: u8 = 130;

/// kubectl's connection flags, shared by the cluster verbs.
#[derive(Debug, Clone, Args)]
pub struct KubeArgs {
    /// Path to the kubeconfig file (default: the KUBECONFIG variable, else ~/.kube/config, else
    /// the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace (default: the manifest's metadata.namespace for `run`, else the context's
    /// namespace, else `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// `-o/--output` of `status` and `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Human-readable text.
    Text,
    /// JSON, indented by 2.
    Json,
}

/// A connected client and the namespace the context names (`default` when it names none).
pub struct Connection {
    /// The API client.
    pub client: Client,
    /// The context's namespace.
    pub context_namespace: String,
}

/// The client library's error text in the user's words: without the OS error code
/// (`(os error 2)`) and with a path written as `"/p"`, not as its debug form in quotes
/// (`'"/p"'`).
fn plain(e: impl std::fmt::Display) -> String {
    let mut text = e.to_string().replace("'\"", "\"").replace("\"'", "\"");
    while let Some(i) = text.find(" (os error ") {
        match text[i..].find(')') {
            Some(end) => text.replace_range(i..i + end + 1, ""),
            None => break,
        }
    }
    text
}

/// Builds the client from the flags; errors read `build client: <cause>`.
pub async fn connect(args: &KubeArgs) -> Result<Connection, String> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|e| format!("build client: reading {}: {}", path.display(), plain(e)))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| format!("build client: {}", plain(e)))?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("build client: {}", plain(e)))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("build client: {}", plain(e)))?,
    };
    let context_namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| format!("build client: {}", plain(e)))?;
    Ok(Connection {
        client,
        context_namespace,
    })
}

/// Which cluster verb to run.
pub enum Verb {
    /// `workloadrun run`.
    Run(Box<RunArgs>),
    /// `workloadrun status`.
    Status(StatusArgs),
    /// `workloadrun report`.
    Report(ReportArgs),
    /// `workloadrun cancel`.
    Cancel(CancelArgs),
}

/// Runs a cluster verb on a fresh tokio runtime. `rules` are needed by `run` only (local
/// validation and topology-key resolution).
pub fn main(rules: Option<&RuleSet>, verb: Verb) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::report::error_line(&format!("starting the async runtime: {e}"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(async move {
        match verb {
            Verb::Run(args) => match rules {
                Some(rules) => run::run(rules, *args).await,
                None => EXIT_USAGE,
            },
            Verb::Status(args) => verbs::status(&args).await,
            Verb::Report(args) => verbs::report(&args).await,
            Verb::Cancel(args) => verbs::cancel(&args).await,
        }
    });
    // Watches still open end with the runtime; do not wait for them.
    runtime.shutdown_background();
    ExitCode::from(code)
}

/// The phase of a run: the type of its True execution condition (`InProgress`, `Succeeded`,
/// `Failed`), else `status.phase`, else `Pending`; with that condition's message ("" when none).
pub fn phase(run: &WorkloadRunResource) -> (String, String) {
    let conditions: &[Condition] = run
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    for t in ["Failed", "Succeeded", "InProgress"] {
        if let Some(c) = conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
        {
            return (t.to_string(), c.message.clone());
        }
    }
    match run.status.as_ref().and_then(|s| s.phase.clone()) {
        Some(p) if !p.is_empty() => (p, String::new()),
        _ => ("Pending".to_string(), String::new()),
    }
}

/// `workloadrun "<n>" not found in namespace "<ns>"`.
pub fn not_found(name: &str, namespace: &str) -> String {
    format!("workloadrun \"{name}\" not found in namespace \"{namespace}\"")
}

/// Whether a kube error is a 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A duration in Go's `time.ParseDuration` syntax (`30m`, `1h30m`, `1.5h`, `-1s`, a bare
/// `0`) as signed nanoseconds; the error is Go's message (`time: invalid duration "x"`).
pub fn parse_go_duration(text: &str) -> Result<i64, String> {
    nvcre_engine::go_duration::parse(text).map_err(|e| e.go_message(text))
}

pub use nvcre_engine::go_duration::format as format_go_duration;

/// Elapsed wall time rounded to the second, Go style (`5s`, `1m30s`).
pub fn elapsed(d: Duration) -> String {
    format_go_duration(
        i64::try_from(d.as_secs())
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000_000),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn client_errors_lose_the_os_code_and_the_debug_quotes() {
        assert_eq!(
            super::plain(
                "failed to read kubeconfig from '\"/tmp/nokube\"': No such file or directory (os error 2)"
            ),
            "failed to read kubeconfig from \"/tmp/nokube\": No such file or directory"
        );
    }

    use super::*;

    #[test]
    fn go_durations_parse_and_print_as_go_does() {
        let cases = [
            ("30m", "30m0s"),
            ("1h30m", "1h30m0s"),
            ("1.5h", "1h30m0s"),
            ("0", "0s"),
            ("0s", "0s"),
            ("-1s", "-1s"),
            ("90s", "1m30s"),
            ("1500ms", "1.5s"),
            ("250ms", "250ms"),
        ];
        for (input, printed) in cases {
            assert_eq!(
                parse_go_duration(input).map(format_go_duration),
                Ok(printed.to_string()),
                "{input}"
            );
        }
        assert_eq!(
            parse_go_duration("10"),
            Err("time: missing unit in duration \"10\"".to_string())
        );
        assert_eq!(
            parse_go_duration("5d"),
            Err("time: unknown unit \"d\" in duration \"5d\"".to_string())
        );
        assert_eq!(
            parse_go_duration(""),
            Err("time: invalid duration \"\"".to_string())
        );
    }
}
