//! `workloadrun run`: validate a WorkloadRun locally, create it (and its registry pull Secret,
//! owned by the run) and optionally watch it to the end.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use clap::{Args, ValueEnum};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, conditions, wait::await_condition};
use kube::{Api, Client, Resource};
use nvcre_domain::crd::{WorkflowResource, WorkloadRunResource, WorkloadRunSpec};
use nvcre_domain::{CheckRequest, RenderRequest, check_document, render_document};
use nvcre_engine::{Document, RuleSet, Severity};
use serde_json::{Value, json};

use super::verbs::{gather_for, print_report, write_results};
use super::{
    EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOT_FINISHED, EXIT_USAGE, KubeArgs, OutputFormat, connect,
    elapsed, format_go_duration, is_not_found, parse_go_duration, phase,
};
use crate::report::{error_line, finding_line, finding_text, stderr_line, warning_line};

/// `--dry-run`: print what would be created instead of creating it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    /// Nothing is sent to the cluster (node discovery aside, when `--topology-domain` needs
    /// it); the WorkloadRun is printed as YAML.
    Client,
    /// The API server validates the create (`dryRun=All`) and nothing is stored; its answer
    /// is printed as YAML.
    Server,
}

/// Arguments of `workloadrun run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Watch the run until it succeeds, fails or --timeout passes, then print its report.
    #[arg(long)]
    wait: bool,
    /// How long --wait watches (Go duration: 30m, 1h30m, 90s). Must be positive.
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Delete what this invocation created (the run, and the namespace if it created it) when
    /// it ends, on every exit path.
    #[arg(long)]
    cleanup: bool,
    /// Create the run under this name instead of metadata.name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Run on these nodes only (comma-separated; blanks around names are ignored). Sets
    /// target.nodeNames and lowers numNodes to the number of nodes when it is larger.
    #[arg(long = "node-list", value_name = "NODE,…")]
    node_list: Option<String>,
    /// Run on the nodes of this topology domain: adds the target requirement
    /// `<topology-key> In [<domain>]` and sets numNodes to the nodes found there.
    #[arg(long = "topology-domain", value_name = "DOMAIN")]
    topology_domain: Option<String>,
    /// Node label naming the topology domain (default: the detected platform's topology key).
    #[arg(long = "topology-key", value_name = "LABEL")]
    topology_key: Option<String>,
    /// Sets orchestration.testScale (intra-node, intra-rack, full-scale).
    #[arg(long = "test-scale", value_name = "SCALE")]
    test_scale: Option<String>,
    /// With --wait: also write the report here, as a JSON array of one report.
    #[arg(long = "results-file", value_name = "FILE")]
    results_file: Option<PathBuf>,
    /// Print the WorkloadRun instead of creating it (client), or have the API server validate
    /// the create without storing anything (server).
    #[arg(long = "dry-run", value_enum, value_name = "client|server", num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    dry_run: Option<DryRun>,
    /// Registry of the workload image; with the username and password, a pull Secret owned
    /// by the run is created and named in spec.imagePullSecrets.
    #[arg(long = "workload-registry", value_name = "REGISTRY")]
    registry: Option<String>,
    /// Registry username (for NGC: $oauthtoken).
    #[arg(long = "workload-registry-username", value_name = "USER")]
    registry_username: Option<String>,
    /// Registry password or API key; also read from NVCRE_WORKLOAD_REGISTRY_PASSWORD. Stored
    /// only in the pull Secret; never printed.
    #[arg(
        long = "workload-registry-password",
        value_name = "PASSWORD",
        env = "NVCRE_WORKLOAD_REGISTRY_PASSWORD",
        hide_env_values = true
    )]
    registry_password: Option<String>,
    /// Report format printed by --wait.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: OutputFormat,
    /// The WorkloadRun manifest (`-` for standard input).
    #[arg(value_name = "FILE")]
    file: String,
}

/// Registry credentials, all three given and non-empty.
struct Credentials {
    registry: String,
    username: String,
    password: String,
}

/// What the flag checks produced.
struct Flags {
    timeout: Duration,
    credentials: Option<Credentials>,
    node_list: Option<Vec<String>>,
}

/// Flag checks that need neither the file nor the cluster.
fn check_flags(args: &RunArgs) -> Result<Flags, String> {
    let timeout_text = args.timeout.as_deref().unwrap_or("30m");
    let nanos = parse_go_duration(timeout_text)
        .map_err(|e| format!("invalid --timeout \"{timeout_text}\": {e}"))?;
    if (args.wait || args.timeout.is_some()) && nanos <= 0 {
        return Err(format!(
            "--timeout must be positive, got {}",
            format_go_duration(nanos)
        ));
    }
    let timeout = Duration::from_nanos(u64::try_from(nanos.max(0)).unwrap_or(u64::MAX));
    let given = [
        &args.registry,
        &args.registry_username,
        &args.registry_password,
    ];
    let credentials = if given.iter().all(|v| v.is_none()) {
        None
    } else if let [Some(r), Some(u), Some(p)] = given
        && !r.is_empty()
        && !u.is_empty()
        && !p.is_empty()
    {
        Some(Credentials {
            registry: r.clone(),
            username: u.clone(),
            password: p.clone(),
        })
    } else {
        return Err("--workload-registry, --workload-registry-username, and --workload-registry-password must all be set together and non-empty".into());
    };
    if args.results_file.is_some() && !args.wait {
        return Err("--results-file requires --wait".into());
    }
    if args.cleanup && !args.wait {
        return Err(
            "--cleanup requires --wait: without it the run would be deleted as soon as it is created"
                .into(),
        );
    }
    if args.wait && args.dry_run.is_some() {
        return Err("--dry-run creates nothing to wait for; drop --wait or --dry-run".into());
    }
    if args.topology_key.is_some() && args.topology_domain.is_none() {
        return Err("--topology-key requires --topology-domain".into());
    }
    if args.node_list.is_some() && args.topology_domain.is_some() {
        return Err(
            "--node-list and --topology-domain are mutually exclusive: both choose the nodes"
                .into(),
        );
    }
    if let Some(scale) = &args.test_scale
        && !["intra-node", "intra-rack", "full-scale"].contains(&scale.as_str())
    {
        return Err(format!(
            "invalid --test-scale \"{scale}\": must be one of intra-node, intra-rack, full-scale"
        ));
    }
    let nodes = match &args.node_list {
        None => None,
        Some(list) => {
            let names: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            if names.is_empty() {
                return Err(format!("--node-list \"{list}\" names no node"));
            }
            Some(names)
        }
    };
    Ok(Flags {
        timeout,
        credentials,
        node_list: nodes,
    })
}

/// Sets `value[path…] = v`, creating objects on the way.
fn set_path(value: &mut Value, path: &[&str], v: Value) {
    let mut cur = value;
    for key in &path[..path.len() - 1] {
        if !cur.get(*key).is_some_and(Value::is_object) {
            cur[*key] = json!({});
        }
        cur = &mut cur[*key];
    }
    cur[path[path.len() - 1]] = v;
}

/// The flag edits that need no cluster: name, node list (lowering numNodes), test scale.
fn edit_offline(doc: &mut Document, args: &RunArgs, nodes: Option<&[String]>) {
    if let Some(name) = &args.name {
        set_path(&mut doc.value, &["metadata", "name"], json!(name));
    }
    if let Some(nodes) = nodes {
        set_path(
            &mut doc.value,
            &["spec", "target", "nodeNames"],
            json!(nodes),
        );
        let count = i64::try_from(nodes.len()).unwrap_or(i64::MAX);
        if doc
            .value
            .pointer("/spec/numNodes")
            .and_then(Value::as_i64)
            .is_some_and(|n| n > count)
        {
            set_path(&mut doc.value, &["spec", "numNodes"], json!(count));
        }
    }
    if let Some(scale) = &args.test_scale {
        set_path(
            &mut doc.value,
            &["spec", "orchestration", "testScale"],
            json!(scale),
        );
    }
}

/// Runs the same checks as `check` on the document: findings printed (errors as errors,
/// warnings and info as `Warning:`/`Info:` lines); `Err(1)` when an error finding exists, `Err(2)`
/// for input errors (printed after the findings made before them).
fn validate(rules: &RuleSet, doc: &Document) -> Result<(), u8> {
    let (findings, error) = match check_document(rules, doc, &CheckRequest::default()) {
        Ok(f) => (f, None),
        // The findings made before an input error are printed before it.
        Err(e) => {
            let (e, f, _) = e.into_parts();
            (f, Some(e))
        }
    };
    let mut failed = false;
    for f in &findings {
        if f.severity >= Severity::Error {
            failed = true;
            finding_line(f);
        } else {
            // `Warning:` or `Info:`, the finding's text as it is.
            crate::report::render_note_line(&nvcre_domain::Note {
                severity: f.severity,
                text: finding_text(f),
                at: None,
            });
        }
    }
    if let Some(e) = error {
        error_line(&e.to_string());
        return Err(EXIT_USAGE);
    }
    if failed { Err(EXIT_FAILED) } else { Ok(()) }
}

/// The typed run from the validated document.
fn to_resource(doc: &Document, namespace: &str) -> Result<WorkloadRunResource, String> {
    let name = doc
        .value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(format!(
            "{}: metadata.name is empty: name the WorkloadRun in the file or with --name",
            doc.source.name
        ));
    }
    let spec: WorkloadRunSpec =
        serde_json::from_value(doc.value.get("spec").cloned().unwrap_or(json!({})))
            .map_err(|e| format!("parsing WorkloadRun: {e}"))?;
    let string_map = |key: &str| -> Option<BTreeMap<String, String>> {
        doc.value
            .pointer(&format!("/metadata/{key}"))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    };
    let mut run = WorkloadRunResource::new(&name, spec);
    run.metadata.namespace = Some(namespace.to_string());
    run.metadata.labels = string_map("labels");
    run.metadata.annotations = string_map("annotations");
    Ok(run)
}

/// The cluster's nodes, as the domain reads them.
async fn cluster_nodes(client: &Client) -> Result<Vec<nvcre_domain::Node>, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    let docs: Vec<Value> = list
        .items
        .iter()
        .map(|n| {
            let mut v = serde_json::to_value(n).unwrap_or(Value::Null);
            v["apiVersion"] = json!("v1");
            v["kind"] = json!("Node");
            v
        })
        .collect();
    nvcre_domain::nodes_from_documents(&docs).map_err(|e| format!("reading nodes: {e}"))
}

/// `--topology-domain`: the key (the flag, else the topology key the platform's overrides
/// give the run on these nodes), appended as a target requirement; numNodes becomes the
/// number of eligible nodes in the domain.
fn edit_topology(
    rules: &RuleSet,
    doc: &mut Document,
    domain: &str,
    key: Option<&str>,
    nodes: &[nvcre_domain::Node],
) -> Result<(), (u8, String)> {
    let key = match key {
        Some(k) => k.to_string(),
        None => {
            let req = RenderRequest {
                nodes: Some(std::sync::Arc::new(nodes.to_vec())),
                allow_unknown_arch: true,
                ..RenderRequest::default()
            };
            let rendered = render_document(rules, doc, &req).map_err(|e| {
                (
                    EXIT_USAGE,
                    format!("--topology-domain: resolving the platform's topology key: {e}"),
                )
            })?;
            let key = rendered
                .workflow
                .pointer("/spec/orchestration/topology/topologyKey")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if key.is_empty() {
                let platform = if rendered.platform.is_empty() {
                    "unknown"
                } else {
                    rendered.platform.as_str()
                };
                return Err((
                    EXIT_USAGE,
                    format!("--topology-domain requires --topology-key on platform \"{platform}\""),
                ));
            }
            key
        }
    };
    let requirement = json!({"key": key, "operator": "In", "values": [domain]});
    match doc.value.pointer_mut("/spec/target/matchExpressions") {
        Some(Value::Array(list)) => list.push(requirement),
        _ => set_path(
            &mut doc.value,
            &["spec", "target", "matchExpressions"],
            json!([requirement]),
        ),
    }
    let spec: WorkloadRunSpec = serde_json::from_value(doc.value["spec"].clone())
        .map_err(|e| (EXIT_USAGE, format!("parsing WorkloadRun: {e}")))?;
    let found = nvcre_domain::discover_targets(nodes, spec.target.as_ref())
        .nodes
        .len();
    if found == 0 {
        return Err((
            EXIT_USAGE,
            format!("--topology-domain: no eligible GPU node has {key}={domain}"),
        ));
    }
    set_path(&mut doc.value, &["spec", "numNodes"], json!(found));
    Ok(())
}

/// The pull Secret's name for a run.
pub fn secret_name(run: &str) -> String {
    format!("nvcrectl-pull-{run}")
}

/// The `kubernetes.io/dockerconfigjson` Secret holding the credentials, controlled by the run
/// so the API server deletes it with the run.
fn pull_secret(run: &WorkloadRunResource, namespace: &str, c: &Credentials) -> Secret {
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.username, c.password));
    let config = json!({"auths": {c.registry.as_str(): {
        "username": c.username, "password": c.password, "auth": auth}}});
    let owner = OwnerReference {
        api_version: WorkloadRunResource::api_version(&()).into_owned(),
        kind: WorkloadRunResource::kind(&()).into_owned(),
        name: run.metadata.name.clone().unwrap_or_default(),
        uid: run.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(&owner.name)),
            namespace: Some(namespace.to_string()),
            labels: Some(nvcre_domain::crd::workload_run_labels(&owner.name)),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(config.to_string().into_bytes()),
        )])),
        ..Secret::default()
    }
}

/// How a wait ended.
enum Outcome {
    Succeeded,
    Failed(String),
    Timeout,
    Interrupted,
    Deleted,
}

/// Ctrl-C, or SIGTERM on Unix. The handlers are installed when this is called (not when the
/// future is first polled), so a signal sent after the call is never lost.
fn interrupted() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt());
        let term = signal(SignalKind::terminate());
        async move {
            match (int, term) {
                (Ok(mut int), Ok(mut term)) => {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Watches the run (a `watcher` on its name) until it is terminal, deleted, the timeout
/// passes or the user interrupts; progress lines go to stderr.
async fn watch(
    api: &Api<WorkloadRunResource>,
    name: &str,
    timeout: Duration,
    interrupt: impl std::future::Future<Output = ()>,
) -> Outcome {
    let start = Instant::now();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api.clone(), config).default_backoff();
    futures::pin_mut!(stream);
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    tokio::pin!(interrupt);
    let mut heartbeat = tokio::time::interval(Duration::from_secs(15));
    heartbeat.tick().await;
    let mut last_phase: Option<String> = None;
    let mut said_waiting = false;
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = &mut deadline => return Outcome::Timeout,
            () = &mut interrupt => return Outcome::Interrupted,
            _ = heartbeat.tick() => {
                let p = last_phase.clone().unwrap_or_else(|| "Pending".into());
                stderr_line(&format!("[watch] {name}: {p} ({})", elapsed(start.elapsed())));
            }
            event = stream.next() => match event {
                Some(Ok(Event::Apply(run) | Event::InitApply(run))) => {
                    last_error = None;
                    let has_conditions = run.status.as_ref().is_some_and(|s| !s.conditions.is_empty());
                    if !has_conditions {
                        if !said_waiting {
                            said_waiting = true;
                            stderr_line(&format!("[watch] Waiting for status... ({})", elapsed(start.elapsed())));
                        }
                        continue;
                    }
                    let (p, message) = phase(&run);
                    if last_phase.as_deref() != Some(p.as_str()) {
                        let suffix = if message.is_empty() { String::new() } else { format!(" — {message}") };
                        stderr_line(&format!("[watch] {name}: {p} ({}){suffix}", elapsed(start.elapsed())));
                        last_phase = Some(p.clone());
                    }
                    match p.as_str() {
                        "Succeeded" => {
                            stderr_line(&format!("[watch] WorkloadRun succeeded. ({})", elapsed(start.elapsed())));
                            return Outcome::Succeeded;
                        }
                        "Failed" => {
                            stderr_line(&format!("[watch] WorkloadRun failed. ({})", elapsed(start.elapsed())));
                            return Outcome::Failed(message);
                        }
                        _ => {}
                    }
                }
                Some(Ok(Event::Delete(_))) => return Outcome::Deleted,
                Some(Ok(Event::Init | Event::InitDone)) => {}
                Some(Err(e)) => {
                    // The watcher retries with backoff; say so once per distinct error.
                    let text = e.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        stderr_line(&format!("[watch] watch error, retrying: {text}"));
                        last_error = Some(text);
                    }
                }
                None => return Outcome::Deleted,
            }
        }
    }
}

/// What this invocation created, for `--cleanup`.
struct Created {
    run: Option<String>,
    namespace: Option<String>,
}

/// `--cleanup`: deletes the run (then waits up to 5 minutes for it and its Workflow to go)
/// and the namespace if this invocation created it; never fails, says what it could not do.
async fn cleanup(client: &Client, ns: &str, created: &Created) {
    let mut warnings = false;
    let budget = Duration::from_secs(600);
    let work = async {
        if let Some(name) = &created.run {
            stderr_line(&format!("[cleanup] Deleting WorkloadRun {name}..."));
            let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), ns);
            match runs.delete(name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    stderr_line(&format!(
                        "[cleanup] Warning: deleting WorkloadRun {name}: {e}"
                    ));
                    warnings = true;
                }
            }
            let workflows: Api<WorkflowResource> = Api::namespaced(client.clone(), ns);
            let gone = async {
                let _ = await_condition(runs.clone(), name, conditions::is_deleted("")).await;
                let _ = await_condition(workflows.clone(), name, conditions::is_deleted("")).await;
            };
            if tokio::time::timeout(Duration::from_secs(300), gone)
                .await
                .is_err()
            {
                stderr_line(&format!(
                    "[cleanup] Warning: WorkloadRun {name} or its Workflow still exists after 5m0s"
                ));
                warnings = true;
            }
        }
        if let Some(namespace) = &created.namespace {
            stderr_line(&format!("[cleanup] Deleting namespace {namespace}..."));
            let namespaces: Api<Namespace> = Api::all(client.clone());
            match namespaces
                .delete(namespace, &DeleteParams::background())
                .await
            {
                Ok(_) => {
                    let gone =
                        await_condition(namespaces.clone(), namespace, conditions::is_deleted(""));
                    if tokio::time::timeout(Duration::from_secs(300), gone)
                        .await
                        .is_err()
                    {
                        stderr_line(&format!(
                            "[cleanup] Warning: namespace {namespace} still exists after 5m0s"
                        ));
                        warnings = true;
                    }
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    stderr_line(&format!(
                        "[cleanup] Warning: deleting namespace {namespace}: {e}"
                    ));
                    warnings = true;
                }
            }
        }
    };
    if tokio::time::timeout(budget, work).await.is_err() {
        stderr_line("[cleanup] Warning: gave up after 10m0s");
        warnings = true;
    }
    stderr_line(if warnings {
        "[cleanup] Done (with warnings)."
    } else {
        "[cleanup] Done."
    });
}

/// `workloadrun run`.
pub async fn run(rules: &RuleSet, args: RunArgs) -> u8 {
    let Flags {
        timeout,
        credentials,
        node_list,
    } = match check_flags(&args) {
        Ok(v) => v,
        Err(e) => {
            error_line(&e);
            return EXIT_USAGE;
        }
    };
    let mut doc = match read_run(&args.file) {
        Ok(d) => d,
        Err(e) => {
            error_line(&e);
            return EXIT_USAGE;
        }
    };
    edit_offline(&mut doc, &args, node_list.as_deref());
    if let Err(code) = validate(rules, &doc) {
        return code;
    }
    let offline = args.dry_run == Some(DryRun::Client) && args.topology_domain.is_none();
    let conn = if offline {
        None
    } else {
        match connect(&args.kube).await {
            Ok(c) => Some(c),
            Err(e) => {
                error_line(&e);
                return EXIT_USAGE;
            }
        }
    };
    let file_namespace = doc
        .value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let ns = args
        .kube
        .namespace
        .clone()
        .or(file_namespace)
        .or_else(|| conn.as_ref().map(|c| c.context_namespace.clone()))
        .unwrap_or_else(|| "default".into());

    // Discovery: what the run will target, and the topology domain's nodes.
    if let Some(conn) = &conn {
        match cluster_nodes(&conn.client).await {
            Ok(nodes) => {
                if let Some(domain) = &args.topology_domain {
                    if let Err((code, e)) = edit_topology(
                        rules,
                        &mut doc,
                        domain,
                        args.topology_key.as_deref(),
                        &nodes,
                    ) {
                        error_line(&e);
                        return code;
                    }
                    if let Err(code) = validate(rules, &doc) {
                        return code;
                    }
                }
                report_discovery(rules, &doc, &nodes);
            }
            Err(e) if args.topology_domain.is_some() => {
                error_line(&format!("--topology-domain: {e}"));
                return EXIT_USAGE;
            }
            Err(e) => warning_line(&format!("node discovery skipped: {e}")),
        }
    }
    let mut run = match to_resource(&doc, &ns) {
        Ok(r) => r,
        Err(e) => {
            error_line(&e);
            return EXIT_USAGE;
        }
    };
    let name = run.metadata.name.clone().unwrap_or_default();
    if credentials.is_some() {
        run.spec
            .image_pull_secrets
            .push(json!({"name": secret_name(&name)}));
    }
    let Some(conn) = conn else {
        // --dry-run=client: the run as it would be created.
        print_yaml(&run);
        if credentials.is_some() {
            stderr_line(&format!(
                "Would create image pull secret \"{}\" in namespace {ns}.",
                secret_name(&name)
            ));
        }
        return 0;
    };
    let client = conn.client;
    if args.dry_run == Some(DryRun::Client) {
        print_yaml(&run);
        if credentials.is_some() {
            stderr_line(&format!(
                "Would create image pull secret \"{}\" in namespace {ns}.",
                secret_name(&name)
            ));
        }
        return 0;
    }
    if args.dry_run == Some(DryRun::Server) {
        return server_dry_run(&client, &ns, &run, credentials.as_ref()).await;
    }

    let mut created = Created {
        run: None,
        namespace: None,
    };
    match ensure_namespace(&client, &ns).await {
        Ok(true) => {
            stderr_line(&format!("Created namespace {ns}."));
            created.namespace = Some(ns.clone());
        }
        Ok(false) => {}
        Err(e) => {
            error_line(&e);
            return EXIT_USAGE;
        }
    }
    let code = create_and_wait(
        &client,
        &ns,
        &run,
        credentials.as_ref(),
        &args,
        timeout,
        &mut created,
    )
    .await;
    if args.cleanup {
        cleanup(&client, &ns, &created).await;
    }
    code
}

/// Reads the file: exactly one WorkloadRun document.
fn read_run(file: &str) -> Result<Document, String> {
    let mut docs = crate::input::read_one(&crate::input::InputFile::given(file))?;
    let shown = if file == "-" { "<stdin>" } else { file };
    if docs.len() != 1 {
        return Err(format!(
            "{shown}: expected one WorkloadRun document, found {}",
            docs.len()
        ));
    }
    let mut doc = docs.remove(0);
    match doc.value.get("kind") {
        // A manifest without kind is read as a WorkloadRun, as the original does; the checks
        // then see it as one.
        None | Some(Value::Null) if doc.value.is_object() => {
            doc.value["kind"] = json!("WorkloadRun");
            if doc.value.get("apiVersion").is_none_or(Value::is_null) {
                doc.value["apiVersion"] = json!(nvcre_domain::crd::API_VERSION);
            }
            Ok(doc)
        }
        None | Some(Value::Null) => Err(format!("{shown}: not a WorkloadRun manifest (a mapping)")),
        Some(Value::String(k)) if k == "WorkloadRun" => Ok(doc),
        Some(other) => Err(format!(
            "expected kind WorkloadRun, got {}",
            match other.as_str() {
                Some(s) => format!("\"{s}\""),
                None => other.to_string(),
            }
        )),
    }
}

/// `Discovered <n> GPU nodes with product: <p>` for the run's target (the architecture the
/// product labels name), and the cordoned ones left out.
fn report_discovery(rules: &RuleSet, doc: &Document, nodes: &[nvcre_domain::Node]) {
    let Ok(spec) = serde_json::from_value::<WorkloadRunSpec>(
        doc.value.get("spec").cloned().unwrap_or_default(),
    ) else {
        return;
    };
    let found = nvcre_domain::discover_targets(nodes, spec.target.as_ref());
    let product = found
        .nodes
        .iter()
        .map(|n| n.gpu_product())
        .find(|p| !p.is_empty())
        .unwrap_or("unknown");
    let arch = nvcre_domain::gpu_products(rules)
        .map(|p| nvcre_domain::detect_gpu_architecture(&found.nodes, &p))
        .unwrap_or_default();
    let arch = if arch.is_empty() {
        String::new()
    } else {
        format!(" ({arch})")
    };
    stderr_line(&format!(
        "Discovered {} GPU nodes with product: {product}{arch}",
        found.nodes.len()
    ));
    if !found.cordoned.is_empty() {
        warning_line(&format!(
            "{} cordoned GPU node(s) left out: {}",
            found.cordoned.len(),
            found.cordoned.join(", ")
        ));
    }
}

fn print_yaml(run: &WorkloadRunResource) {
    let value = serde_json::to_value(run).unwrap_or(Value::Null);
    match nvcre_engine::to_yaml(&value) {
        Ok(text) => super::verbs::print_stdout(&text),
        Err(e) => error_line(&e.to_string()),
    }
}

/// Creates the namespace when it is missing; `Ok(true)` when this call created it.
async fn ensure_namespace(client: &Client, ns: &str) -> Result<bool, String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(ns).await {
        Ok(Some(_)) => Ok(false),
        Ok(None) => {
            let body = Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_string()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            match namespaces.create(&PostParams::default(), &body).await {
                Ok(_) => Ok(true),
                // Someone else created it meanwhile.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(format!("create namespace {ns}: {e}")),
            }
        }
        Err(e) => Err(format!("get namespace {ns}: {e}")),
    }
}

/// `--dry-run=server`: the API server validates the run's create and stores nothing.
async fn server_dry_run(
    client: &Client,
    ns: &str,
    run: &WorkloadRunResource,
    credentials: Option<&Credentials>,
) -> u8 {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(ns).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            stderr_line(&format!(
                "Namespace {ns} does not exist; it would be created, and the server cannot validate the run in it until then."
            ));
            print_yaml(run);
            return 0;
        }
        Err(e) => {
            error_line(&format!("get namespace {ns}: {e}"));
            return EXIT_USAGE;
        }
    }
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), ns);
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match runs.create(&pp, run).await {
        Ok(answer) => {
            print_yaml(&answer);
            if credentials.is_some() {
                stderr_line(&format!(
                    "Would create image pull secret \"{}\" in namespace {ns}.",
                    secret_name(run.metadata.name.as_deref().unwrap_or_default())
                ));
            }
            0
        }
        Err(e) => {
            error_line(&format!("create WorkloadRun: {e}"));
            EXIT_USAGE
        }
    }
}

/// Creates the run and its pull Secret, then (with `--wait`) watches it and prints the report.
#[allow(clippy::too_many_arguments)]
async fn create_and_wait(
    client: &Client,
    ns: &str,
    run: &WorkloadRunResource,
    credentials: Option<&Credentials>,
    args: &RunArgs,
    timeout: Duration,
    created: &mut Created,
) -> u8 {
    let name = run.metadata.name.clone().unwrap_or_default();
    let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), ns);
    // The run first, then the Secret with the run as its controller: the credentials never
    // exist without an owner the garbage collector deletes them with.
    let stored = match runs.create(&PostParams::default(), run).await {
        Ok(r) => r,
        Err(e) => {
            error_line(&format!("create WorkloadRun: {e}"));
            return EXIT_USAGE;
        }
    };
    created.run = Some(name.clone());
    stderr_line(&format!("WorkloadRun {name} created in namespace {ns}."));
    if let Some(c) = credentials {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let secret = pull_secret(&stored, ns, c);
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => stderr_line(&format!(
                "Created image pull secret \"{}\" in namespace {ns}.",
                secret_name(&name)
            )),
            Err(e) => {
                // A run that cannot pull its image is useless: take it back.
                let _ = runs.delete(&name, &DeleteParams::background()).await;
                created.run = None;
                stderr_line(&format!(
                    "Deleted WorkloadRun {name}: its image pull secret could not be created."
                ));
                error_line(&format!("create image pull secret: {e}"));
                return EXIT_USAGE;
            }
        }
    }
    if !args.wait {
        stderr_line("To check status:");
        stderr_line(&format!("  kubectl get workloadrun {name} -n {ns}"));
        stderr_line(&format!("  nvcre-policy workloadrun status {name} -n {ns}"));
        return 0;
    }
    let interrupt = interrupted();
    stderr_line(&format!(
        "Waiting for completion (timeout: {})...",
        format_go_duration(i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX))
    ));
    let outcome = watch(&runs, &name, timeout, interrupt).await;
    finish(client, ns, &name, outcome, args).await
}

/// Reads the run for the final report, within `budget`.
async fn final_report(
    client: &Client,
    ns: &str,
    name: &str,
    budget: Duration,
) -> Result<Option<(WorkloadRunResource, super::report::WorkloadRunReport)>, String> {
    let work = async {
        let runs: Api<WorkloadRunResource> = Api::namespaced(client.clone(), ns);
        let Some(run) = runs.get_opt(name).await.map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let report = gather_for(client, ns, &run)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some((run, report)))
    };
    tokio::time::timeout(budget, work)
        .await
        .map_err(|_| format!("reading the run took longer than {}", elapsed(budget)))?
}

/// The exit code of a run the watch saw succeed, and the warning when its report could not be
/// read after it: the run succeeded, so a re-read that failed, or found the run already
/// deleted, is a warning and the exit is 0.
fn after_success<T>(name: &str, read: &Result<Option<T>, String>) -> (u8, Option<String>) {
    match read {
        Ok(Some(_)) => (0, None),
        Ok(None) => (
            0,
            Some(format!(
                "WorkloadRun \"{name}\" no longer exists; report unavailable"
            )),
        ),
        Err(e) => (
            0,
            Some(format!(
                "report unavailable: get workloadrun \"{name}\": {e}"
            )),
        ),
    }
}

/// Prints the report (and writes the results file) and turns the outcome into the exit code.
async fn finish(client: &Client, ns: &str, name: &str, outcome: Outcome, args: &RunArgs) -> u8 {
    let budget = match outcome {
        Outcome::Interrupted => Duration::from_secs(10),
        _ => Duration::from_secs(30),
    };
    let read = final_report(client, ns, name, budget).await;
    let print = |r: &super::report::WorkloadRunReport| {
        print_report(r, args.output);
        if let Some(path) = &args.results_file {
            match write_results(path, r) {
                Ok(()) => {}
                Err(e) => warning_line(&format!("failed to write results: {e}")),
            }
        }
    };
    match outcome {
        Outcome::Succeeded => {
            if let Ok(Some((_, r))) = &read {
                print(r);
            }
            let (code, warning) = after_success(name, &read);
            if let Some(w) = warning {
                warning_line(&w);
            }
            code
        }
        Outcome::Failed(message) => {
            if let Ok(Some((_, r))) = &read {
                print(r);
            }
            error_line(&format!("WorkloadRun failed: {message}"));
            EXIT_FAILED
        }
        Outcome::Deleted => {
            error_line(&format!(
                "WorkloadRun \"{name}\" was deleted while waiting for it"
            ));
            EXIT_FAILED
        }
        Outcome::Timeout => {
            match &read {
                Ok(Some((run, r))) => {
                    let (p, _) = phase(run);
                    if p == "Succeeded" || p == "Failed" {
                        stderr_line(
                            "The WorkloadRun completed while the timeout was being handled.",
                        );
                    }
                    print(r);
                    if !args.cleanup && p != "Succeeded" && p != "Failed" {
                        hint_block(name, ns, true);
                    }
                }
                Ok(None) => stderr_line(&format!(
                    "WorkloadRun \"{name}\" no longer exists after timeout; partial report unavailable."
                )),
                Err(e) => warning_line(&format!("partial report unavailable: {e}")),
            }
            error_line(&format!("timeout waiting for WorkloadRun {name}"));
            EXIT_NOT_FINISHED
        }
        Outcome::Interrupted => {
            if let Ok(Some((_, r))) = &read {
                print(r);
            }
            stderr_line(&format!("Stopped watching WorkloadRun {name}."));
            if !args.cleanup {
                hint_block(name, ns, false);
            }
            error_line("interrupted");
            EXIT_INTERRUPTED
        }
    }
}

/// How to follow, report on and cancel a run left running.
fn hint_block(name: &str, ns: &str, after_timeout: bool) {
    if after_timeout {
        stderr_line(&format!(
            "The WorkloadRun is still running in namespace {ns}."
        ));
    } else {
        stderr_line(&format!(
            "The WorkloadRun keeps running in namespace {ns}; nothing was deleted."
        ));
    }
    stderr_line(&format!(
        "  Watch it:   kubectl get workloadrun {name} -n {ns} --watch"
    ));
    stderr_line(&format!(
        "  Report:     nvcre-policy workloadrun report {name} -n {ns}   (exits non-zero while the run is still going)"
    ));
    stderr_line(&format!(
        "  Cancel:     nvcre-policy workloadrun cancel {name} -n {ns}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_succeeded_run_whose_report_cannot_be_read_exits_0_with_a_warning() {
        assert_eq!(after_success::<()>("r", &Ok(Some(()))), (0, None));
        assert_eq!(
            after_success::<()>("r", &Ok(None)),
            (
                0,
                Some("WorkloadRun \"r\" no longer exists; report unavailable".to_string())
            )
        );
        assert_eq!(
            after_success::<()>("r", &Err("reading the run took longer than 30s".to_string())),
            (
                0,
                Some(
                    "report unavailable: get workloadrun \"r\": reading the run took longer than 30s"
                        .to_string()
                )
            )
        );
    }
}
