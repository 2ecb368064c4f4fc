//! End to end: the real controller ([`nvcre_controller::run`], the kube-runtime `Controller`s,
//! leader election, the rules reload) against an API server.
//!
//! Every scenario runs twice: against the in-process fake API server (`*_on_the_fake_server`),
//! and against a real cluster when `NVCRE_TEST_KUBECONFIG` names a kubeconfig
//! (`*_on_a_real_cluster`; skipped, saying so, otherwise). The scenario code is the same; only
//! [`env::Env`] differs. A real cluster should be a disposable one (kind, k3d) without a
//! Kubeflow Trainer controller: the test creates the CRDs when absent, a namespace and four
//! Node objects of its own (labelled `e2e.nvcre.nvidia.com/id`, removed at the end), runs the
//! controller in this process, and plays the Trainer by writing TrainJob conditions.

mod env;
mod scenarios;

use env::Env;

macro_rules! scenario {
    ($fake:ident, $real:ident, $scenario:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $fake() {
            let env = Env::fake().await;
            $scenario(&env).await;
            env.finish().await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $real() {
            let Some(env) = Env::real(stringify!($real)).await else {
                return;
            };
            $scenario(&env).await;
            env.finish().await;
        }
    };
}

scenario!(
    a_workload_run_becomes_a_workflow_and_train_jobs_and_succeeds_on_the_fake_server,
    a_workload_run_becomes_a_workflow_and_train_jobs_and_succeeds_on_a_real_cluster,
    scenarios::lifecycle
);
scenario!(
    only_the_leader_reconciles_and_a_standby_takes_over_on_the_fake_server,
    only_the_leader_reconciles_and_a_standby_takes_over_on_a_real_cluster,
    scenarios::leader_election
);
scenario!(
    a_conflicting_override_fails_the_build_and_creates_nothing_on_the_fake_server,
    a_conflicting_override_fails_the_build_and_creates_nothing_on_a_real_cluster,
    scenarios::conflicting_override
);
scenario!(
    a_bad_rule_edit_leaves_the_last_good_rules_in_force_on_the_fake_server,
    a_bad_rule_edit_leaves_the_last_good_rules_in_force_on_a_real_cluster,
    scenarios::bad_rule_edit
);
scenario!(
    bandwidth_is_measured_from_pod_logs_and_a_threshold_violation_fails_the_run_on_the_fake_server,
    bandwidth_is_measured_from_pod_logs_and_a_threshold_violation_fails_the_run_on_a_real_cluster,
    scenarios::measured_thresholds
);
scenario!(
    goodput_is_measured_from_pod_logs_and_a_met_threshold_lets_the_run_succeed_on_the_fake_server,
    goodput_is_measured_from_pod_logs_and_a_met_threshold_lets_the_run_succeed_on_a_real_cluster,
    scenarios::measured_goodput
);
scenario!(
    the_gauges_of_a_deleted_measurement_are_dropped_on_the_fake_server,
    the_gauges_of_a_deleted_measurement_are_dropped_on_a_real_cluster,
    scenarios::deleted_measurement_gauges
);
scenario!(
    a_foreign_train_job_is_never_adopted_on_the_fake_server,
    a_foreign_train_job_is_never_adopted_on_a_real_cluster,
    scenarios::foreign_train_job
);
scenario!(
    a_deleted_train_job_fails_its_group_and_the_run_finishes_on_the_fake_server,
    a_deleted_train_job_fails_its_group_and_the_run_finishes_on_a_real_cluster,
    scenarios::deleted_train_job
);
scenario!(
    nodes_changing_mid_run_leave_the_partition_as_recorded_on_the_fake_server,
    nodes_changing_mid_run_leave_the_partition_as_recorded_on_a_real_cluster,
    scenarios::nodes_change_mid_run
);
scenario!(
    a_node_cordoned_mid_run_fails_its_group_for_hardware_on_the_fake_server,
    a_node_cordoned_mid_run_fails_its_group_for_hardware_on_a_real_cluster,
    scenarios::node_cordoned_mid_run
);
scenario!(
    a_collision_mid_pass_stops_what_the_pass_created_on_the_fake_server,
    a_collision_mid_pass_stops_what_the_pass_created_on_a_real_cluster,
    scenarios::collision_mid_pass
);

/// A lease shorter than 2 s leaves no grace to renew in: refused before anything runs.
#[tokio::test]
async fn a_lease_duration_under_two_seconds_is_refused() {
    let client = kube::Client::try_from(kube::Config::new(
        "http://127.0.0.1:9".parse().expect("url"),
    ))
    .expect("client");
    let config = nvcre_controller::Config {
        leader_election: Some(nvcre_controller::LeaderElection {
            lease_name: "nvcre-controller".into(),
            namespace: "nvcre-system".into(),
            identity: "replica-a".into(),
            duration_secs: 1,
        }),
        ..nvcre_controller::Config::default()
    };
    match nvcre_controller::run(client, config, std::future::pending()).await {
        Err(e) => assert_eq!(
            e.to_string(),
            "leader election: lease duration must be at least 2 seconds, got 1"
        ),
        Ok(()) => panic!("a 1 s lease must be refused"),
    }
}

/// The real-cluster path itself (kubeconfig, a namespace and nodes of a unique id, cleanup),
/// pointed at a fake server through a kubeconfig file, so that it is exercised on every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_cluster_path_runs_a_scenario_through_a_kubeconfig() {
    use k8s_openapi::api::core::v1::{Namespace, Node};
    use kube::api::ListParams;

    let server = nvcre_fake_apiserver::FakeApiServer::start()
        .await
        .expect("fake server");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"{}\"}}\n\
             users:\n- name: tester\n  user: {{}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: tester}}\n\
             current-context: fake\n",
            server.url()
        ),
    )
    .expect("kubeconfig");
    let env = Env::from_kubeconfig(path).await;
    let (ns, id) = (env.ns.clone(), env.id.clone());
    assert!(ns.starts_with("nvcre-e2e-"), "{ns}");
    scenarios::conflicting_override(&env).await;
    env.finish().await;
    // Cleaned up: the scenario's namespace and nodes are gone.
    let client = server.client().expect("client");
    let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
    assert!(namespaces.get_opt(&ns).await.expect("get").is_none());
    let nodes: kube::Api<Node> = kube::Api::all(client);
    let left = nodes
        .list(&ListParams::default().labels(&format!("{}={id}", env::E2E_LABEL)))
        .await
        .expect("nodes");
    assert_eq!(left.items.len(), 0);
    server.shutdown().await;
}
