//! `workloadrun status`, `report` and `cancel`, and reading what a report is built from.

use std::path::PathBuf;

use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::{Api, Client};
use nvcre_domain::crd::{WorkflowResource, WorkloadRunResource};
use serde_json::{Value, json};

use super::report::{self, Inputs, WorkloadRunReport};
use super::{
    Connection, EXIT_FAILED, EXIT_NOT_FINISHED, EXIT_USAGE, KubeArgs, OutputFormat, connect,
    is_not_found, not_found, phase,
};
use crate::report::{error_line, stderr_line};

/// Arguments of `workloadrun status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format: one word (`Pending`, `InProgress`, `Succeeded`, `Failed`) or JSON
    /// `{name, namespace, status, failedNodes?}`.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: OutputFormat,
    /// The WorkloadRun's name.
    #[arg(value_name = "NAME")]
    name: String,
}

/// Arguments of `workloadrun report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: OutputFormat,
    /// Also write the report to this file, as a JSON array of one report.
    #[arg(long = "results-file", value_name = "FILE")]
    results_file: Option<PathBuf>,
    /// The WorkloadRun's name.
    #[arg(value_name = "NAME")]
    name: String,
}

/// Arguments of `workloadrun cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// The WorkloadRuns to delete (their Workflow, jobs and Secrets go with them).
    #[arg(value_name = "NAME", required = true)]
    names: Vec<String>,
}

/// The group/version/kind of a measurement kind, for dynamic reads (the types belong to the
/// measurement controllers; the report only reads their status).
fn measurement_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "nvcre.nvidia.com".into(),
        version: "v1alpha1".into(),
        api_version: "nvcre.nvidia.com/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The objects of a measurement kind that belong to the run: its `jobRef` names one of the
/// run's jobs, or it carries the run's label, or it is owned by the run's Workflow. A kind the
/// cluster does not serve (404) has none.
async fn measurements(
    client: &Client,
    namespace: &str,
    kind: &str,
    plural: &str,
    run: &str,
    jobs: &[String],
    workflow_uid: Option<&str>,
) -> Result<Vec<Value>, kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &measurement_resource(kind, plural),
    );
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if is_not_found(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for obj in list {
        let labelled = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("nvcre.nvidia.com/workload-run"))
            .is_some_and(|v| v == run);
        let owned = workflow_uid.is_some_and(|uid| {
            obj.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        });
        let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
        let of_job = value
            .pointer("/spec/jobRef/name")
            .and_then(Value::as_str)
            .is_some_and(|j| jobs.iter().any(|x| x == j));
        if labelled || owned || of_job {
            out.push(value);
        }
    }
    out.sort_by(|a, b| {
        let n = |v: &Value| {
            v.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        n(a).cmp(&n(b))
    });
    Ok(out)
}

/// Reads the run and everything its report needs. `Ok(None)` when the run does not exist.
pub async fn gather(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<WorkloadRunReport>, kube::Error> {
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), namespace);
    let Some(run) = runs.get_opt(name).await? else {
        return Ok(None);
    };
    gather_for(client, namespace, &run).await.map(Some)
}

/// [`gather`] for a run already read.
pub async fn gather_for(
    client: &Client,
    namespace: &str,
    run: &WorkloadRunResource,
) -> Result<WorkloadRunReport, kube::Error> {
    let name = run.metadata.name.clone().unwrap_or_default();
    let status = run.status.clone().unwrap_or_default();
    let workflow_name = status
        .workflow_ref
        .as_ref()
        .map_or_else(|| name.clone(), |r| r.name.clone());
    let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), namespace);
    let workflow = workflows.get_opt(&workflow_name).await?;
    let failed_nodes_data = match &status.failed_nodes_ref {
        Some(r) => {
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            cms.get_opt(&r.name)
                .await?
                .and_then(|cm| cm.data)
                .and_then(|d| d.get("nodes").cloned())
        }
        None => None,
    };
    let jobs: Vec<String> = workflow
        .as_ref()
        .and_then(|w| w.status.as_ref())
        .and_then(|s| s.orchestration.as_ref())
        .map(|o| o.groups.iter().filter_map(|g| g.job_ref.clone()).collect())
        .unwrap_or_default();
    let workflow_uid = workflow.as_ref().and_then(|w| w.metadata.uid.clone());
    let bandwidth = measurements(
        client,
        namespace,
        "BandwidthMeasurement",
        "bandwidthmeasurements",
        &name,
        &jobs,
        workflow_uid.as_deref(),
    )
    .await?;
    let goodput = measurements(
        client,
        namespace,
        "GoodputMeasurement",
        "goodputmeasurements",
        &name,
        &jobs,
        workflow_uid.as_deref(),
    )
    .await?;
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    Ok(report::build(&Inputs {
        run,
        workflow: workflow.as_ref(),
        failed_nodes_data: failed_nodes_data.as_deref(),
        bandwidth: &bandwidth,
        goodput: &goodput,
        now_secs,
    }))
}

/// Writes the results file (a JSON array of one report) and says so on stderr; errors read
/// `write results file: <cause>`.
pub fn write_results(path: &std::path::Path, r: &WorkloadRunReport) -> Result<(), String> {
    std::fs::write(path, report::results_file(r)).map_err(|e| {
        format!(
            "write results file: {}: {}",
            path.display(),
            nvcre_engine::limits::io_error_text(&e)
        )
    })?;
    stderr_line(&format!("Results written to {}", path.display()));
    Ok(())
}

/// Prints to stdout; a closed pipe is not an error.
pub fn print_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The namespace of a verb that names an existing run: `-n`, else the context's.
fn namespace_of(args: &KubeArgs, context_namespace: &str) -> String {
    args.namespace
        .clone()
        .unwrap_or_else(|| context_namespace.to_string())
}

/// Connects with the kube flags and resolves the namespace a verb acts in (`-n`, else the
/// context's). A connection error is printed and becomes the exit code 2.
async fn connect_in_namespace(kube: &KubeArgs) -> Result<(Connection, String), u8> {
    match connect(kube).await {
        Ok(conn) => {
            let ns = namespace_of(kube, &conn.context_namespace);
            Ok((conn, ns))
        }
        Err(e) => {
            error_line(&e);
            Err(EXIT_USAGE)
        }
    }
}

/// `workloadrun status NAME`: exits 0 in every phase, 2 when the run is missing or unreadable.
pub async fn status(args: &StatusArgs) -> u8 {
    let (conn, ns) = match connect_in_namespace(&args.kube).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let runs: Api<WorkloadRunResource> = Api::namespaced(conn.client.clone(), &ns);
    let run = match runs.get_opt(&args.name).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            error_line(&not_found(&args.name, &ns));
            return EXIT_USAGE;
        }
        Err(e) => {
            error_line(&format!("get workloadrun \"{}\": {e}", args.name));
            return EXIT_USAGE;
        }
    };
    let (phase, _) = phase(&run);
    match args.output {
        OutputFormat::Text => print_stdout(&format!("{phase}\n")),
        OutputFormat::Json => {
            let mut body = json!({"name": args.name, "namespace": ns, "status": phase});
            if let Some(r) = run
                .status
                .as_ref()
                .and_then(|s| s.failed_nodes_ref.as_ref())
            {
                let cms: Api<ConfigMap> = Api::namespaced(conn.client.clone(), &ns);
                let data = match cms.get_opt(&r.name).await {
                    Ok(cm) => cm
                        .and_then(|c| c.data)
                        .and_then(|d| d.get("nodes").cloned()),
                    Err(e) => {
                        error_line(&format!("get configmap \"{}\": {e}", r.name));
                        return EXIT_USAGE;
                    }
                };
                let names = report::failed_node_names(data.as_deref());
                if !names.is_empty() {
                    body["failedNodes"] = json!(names);
                }
            }
            print_stdout(&format!(
                "{}\n",
                serde_json::to_string_pretty(&body).unwrap_or_default()
            ));
        }
    }
    0
}

/// The exit code and error of a report's result: 0, `is still running` (3) or `failed` (1).
pub fn report_outcome(name: &str, r: &WorkloadRunReport) -> Result<(), (u8, String)> {
    match r.result.as_str() {
        "PASSED" => Ok(()),
        "FAILED" => Err((EXIT_FAILED, format!("workloadrun \"{name}\" failed"))),
        _ => Err((
            EXIT_NOT_FINISHED,
            format!("workloadrun \"{name}\" is still running"),
        )),
    }
}

/// Prints a report in the chosen format on stdout.
pub fn print_report(r: &WorkloadRunReport, output: OutputFormat) {
    match output {
        OutputFormat::Text => print_stdout(&report::text(r)),
        OutputFormat::Json => print_stdout(&report::json(r)),
    }
}

/// `workloadrun report NAME`: the report on stdout; exit 0 only for a succeeded run.
pub async fn report(args: &ReportArgs) -> u8 {
    let (conn, ns) = match connect_in_namespace(&args.kube).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = match gather(&conn.client, &ns, &args.name).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            error_line(&not_found(&args.name, &ns));
            return EXIT_USAGE;
        }
        Err(e) => {
            error_line(&format!("get workloadrun \"{}\": {e}", args.name));
            return EXIT_USAGE;
        }
    };
    print_report(&r, args.output);
    if let Some(path) = &args.results_file
        && let Err(e) = write_results(path, &r)
    {
        error_line(&e);
        return EXIT_USAGE;
    }
    match report_outcome(&args.name, &r) {
        Ok(()) => 0,
        Err((code, message)) => {
            error_line(&message);
            code
        }
    }
}

/// `workloadrun cancel NAME…`: deletes each run (the API server's garbage collector removes
/// the Workflow, jobs and the pull Secret it owns), as the original does: a missing run prints
/// `WorkloadRun "<n>" not found in namespace "<ns>"` on stderr and is not a failure; any other
/// failure prints `Failed to cancel "<n>": <err>`, and once every name was tried the last one
/// is the command's error (`Error: <err>`, exit 2, this tool's code for an API error).
pub async fn cancel(args: &CancelArgs) -> u8 {
    let (conn, ns) = match connect_in_namespace(&args.kube).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let runs: Api<WorkloadRunResource> = Api::namespaced(conn.client.clone(), &ns);
    let mut last_error = None;
    for name in &args.names {
        match runs.delete(name, &DeleteParams::background()).await {
            Ok(_) => print_stdout(&format!("Cancelled {name}\n")),
            Err(e) if is_not_found(&e) => stderr_line(&format!(
                "WorkloadRun \"{name}\" not found in namespace \"{ns}\""
            )),
            Err(e) => {
                stderr_line(&format!("Failed to cancel \"{name}\": {e}"));
                last_error = Some(e.to_string());
            }
        }
    }
    match last_error {
        Some(e) => {
            error_line(&e);
            EXIT_USAGE
        }
        None => 0,
    }
}
