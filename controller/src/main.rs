//! `nvcre-controller`: reconciles WorkloadRun and Workflow in-cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nvcre_controller::rules::RulesSource;
use nvcre_controller::{Config, ConfigMapRef, LeaderElection, run};

/// mimalloc, as the CLI's: rendering a run makes and frees many small strings and maps.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Reconciles WorkloadRun and Workflow objects with the NVCRE rules.
#[derive(Debug, Parser)]
#[command(name = "nvcre-controller", version, about)]
struct Args {
    /// Rules directory (a ConfigMap mount), reloaded on change; the built-in rules otherwise.
    #[arg(long, env = "NVCRE_RULES", value_name = "DIR")]
    rules: Option<PathBuf>,
    /// Seconds between checks of the rules directory.
    #[arg(long, default_value_t = 5)]
    rules_poll_seconds: u64,
    /// Watch only this namespace (all namespaces when unset).
    #[arg(long, env = "NVCRE_WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// Elect a leader through a Lease (run several replicas, one acts).
    #[arg(long)]
    leader_elect: bool,
    /// The ConfigMap the rules directory is mounted from (in the pod's namespace): rules reload
    /// Events (`RulesReloaded`, `RulesReloadRefused`) are reported on it.
    #[arg(long, value_name = "NAME")]
    rules_configmap: Option<String>,
    /// Lease name.
    #[arg(long, default_value = "nvcre-controller")]
    lease_name: String,
    /// Lease namespace (the pod's namespace; also the rules ConfigMap's).
    #[arg(long, env = "POD_NAMESPACE", default_value = "nvcre-system")]
    lease_namespace: String,
    /// This replica's identity in the Lease (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "nvcre-controller")]
    identity: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    // No transparent huge pages, as in the CLI: a 2 MiB page is resident once one byte of it
    // is touched, which a pod's memory limit counts. Best effort.
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "no Kubernetes client");
            return ExitCode::from(2);
        }
    };
    let rules_config_map = args.rules_configmap.map(|name| ConfigMapRef {
        namespace: args.lease_namespace.clone(),
        name,
    });
    let config = Config {
        namespace: args.namespace,
        rules: args.rules.map_or(RulesSource::BuiltIn, RulesSource::Dir),
        reload_interval: Duration::from_secs(args.rules_poll_seconds.max(1)),
        leader_election: args.leader_elect.then_some(LeaderElection {
            lease_name: args.lease_name,
            namespace: args.lease_namespace,
            identity: args.identity,
            duration_secs: 15,
        }),
        http_addr: Some(args.http_addr),
        rules_config_map,
    };
    let shutdown = async {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    match run(client, config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "controller stopped");
            ExitCode::from(1)
        }
    }
}
