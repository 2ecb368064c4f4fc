//! Property tests of placement: coverage, group sizes, determinism
//! under input permutation, and Unpinned never pinning hosts discovery chose.

use std::collections::BTreeSet;

use nvcre_domain::{Group, Node, PlacementPolicy, Workflow, place, place_groups};

/// The placement policy of the embedded rules, read once (these properties hold for any
/// policy).
fn policy() -> &'static PlacementPolicy {
    static POLICY: std::sync::OnceLock<PlacementPolicy> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        nvcre_domain::placement_policy(&nvcre_domain::default_rules().expect("rules"))
            .expect("policy")
    })
}
use proptest::prelude::*;
use serde_json::{Value, json};

const RACK: &str = "topology.kubernetes.io/rack";

/// A GPU node `node-<i>` in rack `rack-<rack>`.
fn node(i: usize, rack: usize) -> Node {
    Node {
        name: format!("node-{i:03}"),
        labels: [
            ("nvidia.com/gpu.present".to_string(), "true".to_string()),
            (
                "nvidia.com/gpu.product".to_string(),
                "NVIDIA-GB200".to_string(),
            ),
            (RACK.to_string(), format!("rack-{rack}")),
        ]
        .into(),
        ..Node::default()
    }
}

/// 1..=40 nodes with racks drawn from 1..=6 racks.
fn fleet() -> impl Strategy<Value = Vec<Node>> {
    (1usize..=6)
        .prop_flat_map(|racks| prop::collection::vec(0..racks, 1..=40))
        .prop_map(|racks| {
            racks
                .into_iter()
                .enumerate()
                .map(|(i, r)| node(i, r))
                .collect()
        })
}

/// A fleet, a nodes-per-job within 1..=len, and a shuffled copy of the fleet.
fn scenario() -> impl Strategy<Value = (Vec<Node>, i64, Vec<Node>)> {
    fleet().prop_flat_map(|nodes| {
        let len = nodes.len();
        let shuffled = Just(nodes.clone()).prop_shuffle();
        (Just(nodes), 1..=i64::try_from(len).unwrap_or(1), shuffled)
    })
}

/// An MPI Workflow (launcher + node patches) of `num_nodes` per job.
fn workflow(num_nodes: i64, orchestration: Value) -> Workflow {
    serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "wf"},
        "spec": {
            "jobTemplate": {"spec": {"workload": {"trainJob": {
                "runtimeRef": {"name": "wf-runtime", "kind": "TrainingRuntime"},
                "trainer": {"numNodes": num_nodes},
                "runtimePatches": [{"manager": "nvcre.nvidia.com/controller",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}, {"name": "launcher"}]}}}}]
            }}}},
            "orchestration": orchestration,
            "dependencies": [{
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainingRuntime",
                "metadata": {"name": "wf-runtime"},
                "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}, {"name": "launcher"}]}}}
            }]
        }
    }))
    .expect("test workflow parses")
}

fn covered(groups: &[Group]) -> BTreeSet<String> {
    groups
        .iter()
        .flat_map(|g| g.nodes.iter().cloned())
        .collect()
}

fn all_names(nodes: &[Node]) -> BTreeSet<String> {
    nodes.iter().map(|n| n.name.clone()).collect()
}

/// The group sizes rule: every group has exactly nodesPerJob nodes, except the single
/// partial group: one `group-0` holding every node, formed when no full group can be
/// (simple: fewer nodes than nodesPerJob; topology: the largest domains cannot fill one).
fn sizes_ok(groups: &[Group], npj: i64, total: usize) -> bool {
    let npj = usize::try_from(npj).unwrap_or(usize::MAX);
    let single_partial =
        matches!(groups, [g] if g.name == "group-0" && !g.overflow && g.nodes.len() == total);
    groups.iter().all(|g| g.nodes.len() == npj) || single_partial
}

/// Every hostname term in the TrainJob's controller patches.
fn hostname_terms(group: &Group) -> Vec<Value> {
    let Some(tj) = group.manifests.last() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let patches = tj["spec"]["runtimePatches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for patch in patches {
        let jobs = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for job in jobs {
            let exprs = job["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            out.extend(
                exprs
                    .into_iter()
                    .filter(|e| e["key"] == "kubernetes.io/hostname"),
            );
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn simple_partition_covers_every_node((nodes, npj, _) in scenario()) {
        let groups = place_groups(&nodes, npj, None, false).expect("partition");
        prop_assert_eq!(covered(&groups), all_names(&nodes));
    }

    #[test]
    fn topology_partition_covers_every_node((nodes, npj, _) in scenario(), strict in any::<bool>()) {
        let groups = place_groups(&nodes, npj, Some(RACK), strict).expect("partition");
        prop_assert_eq!(covered(&groups), all_names(&nodes));
    }

    #[test]
    fn simple_groups_have_nodes_per_job((nodes, npj, _) in scenario(), extra in 0i64..5) {
        // npj may exceed the fleet: the single partial group case.
        let npj = npj + extra;
        let groups = place_groups(&nodes, npj, None, false).expect("partition");
        prop_assert!(sizes_ok(&groups, npj, nodes.len()), "{:?}", groups);
        // Without topology the partial group only appears when the fleet is too small.
        let full = usize::try_from(npj).is_ok_and(|n| nodes.len() >= n);
        prop_assert_eq!(full, groups.iter().all(|g| i64::try_from(g.nodes.len()) == Ok(npj)));
    }

    #[test]
    fn topology_groups_have_nodes_per_job((nodes, npj, _) in scenario(), extra in 0i64..5) {
        let npj = npj + extra;
        let groups = place_groups(&nodes, npj, Some(RACK), false).expect("partition");
        prop_assert!(sizes_ok(&groups, npj, nodes.len()), "{:?}", groups);
    }

    #[test]
    fn groups_are_sorted_and_duplicate_free((nodes, npj, _) in scenario(), topo in any::<bool>()) {
        let key = topo.then_some(RACK);
        for g in place_groups(&nodes, npj, key, false).expect("partition") {
            let mut sorted = g.nodes.clone();
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(&sorted, &g.nodes);
        }
    }

    #[test]
    fn partition_is_deterministic_under_permutation((nodes, npj, shuffled) in scenario(), topo in any::<bool>(), strict in any::<bool>()) {
        let key = topo.then_some(RACK);
        let a = place_groups(&nodes, npj, key, strict).expect("partition");
        let b = place_groups(&shuffled, npj, key, strict).expect("partition");
        prop_assert_eq!(a, b);
    }

    #[test]
    fn place_is_deterministic_under_permutation((nodes, npj, shuffled) in scenario()) {
        let wf = workflow(npj, json!({}));
        let a = place(&wf, &nodes, policy()).expect("place");
        let b = place(&wf, &shuffled, policy()).expect("place");
        prop_assert_eq!(a, b);
    }

    #[test]
    fn pinned_place_covers_every_node((nodes, npj, _) in scenario()) {
        let p = place(&workflow(npj, json!({})), &nodes, policy()).expect("place");
        prop_assert_eq!(covered(&p.groups), all_names(&nodes));
        prop_assert!(p.groups.iter().all(|g| g.manifests.last().is_some_and(|tj| tj["kind"] == "TrainJob")));
    }

    #[test]
    fn unpinned_never_pins_discovered_hosts((nodes, npj, _) in scenario(), clique in any::<bool>()) {
        let orch = if clique {
            json!({"placement": "Unpinned", "target": {"matchExpressions": [{"key": RACK, "operator": "Exists"}]}})
        } else {
            json!({"placement": "Unpinned"})
        };
        let p = place(&workflow(npj, orch), &nodes, policy()).expect("place");
        prop_assert_eq!(p.groups.len(), 1);
        let g = &p.groups[0];
        prop_assert!(g.nodes.is_empty());
        prop_assert!(hostname_terms(g).is_empty());
    }

    #[test]
    fn unpinned_size_is_exact_or_fails((nodes, npj, _) in scenario(), extra in 0i64..3) {
        let npj = npj + extra;
        let result = place(&workflow(npj, json!({"placement": "Unpinned"})), &nodes, policy());
        let len = i64::try_from(nodes.len()).unwrap_or(i64::MAX);
        if npj > len {
            let err = result.expect_err("shortfall");
            prop_assert_eq!(err.to_string(), format!("Not enough schedulable nodes: need {npj}, found {len}"));
        } else {
            let p = result.expect("place");
            prop_assert_eq!(p.nodes_per_job, npj);
            prop_assert_eq!(&p.groups[0].manifests.last().expect("trainjob")["spec"]["trainer"]["numNodes"], &json!(npj));
        }
    }
}
