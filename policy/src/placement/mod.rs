//! Placement: from a resolved Workflow and the cluster's nodes to job groups and the
//! manifests each group applies.
//!
//! This is the Workflow controller's `discoverAndPartition` → `createJobForGroup` path and its
//! placement rules, as a pure function: [`place`] takes the Workflow *after* override
//! resolution and the node list, and returns a [`Placement`] whose [`Group`]s carry their
//! dependency copies and TrainJob in apply order. Nothing here talks to a cluster.
//!
//! Pipeline of [`place`]:
//! 1. read `spec.orchestration` ([`PlacementSpec`], module `spec`); the combinations it may not
//!    hold (Unpinned with `diagnose` or `topology.strictDomain`) are refused by the `placement`
//!    rule stage before this runs;
//! 2. discover the target nodes ([`crate::nodes::discover_targets`]);
//! 3. keep the majority GPU architecture, recording the others as excluded;
//! 4. drop nodes whose allocatable `nvidia.com/gpu` is a positive integer below
//!    [`gpu_need`] (module `quantity`);
//! 5. nodesPerJob = `trainer.numNodes`; shortfall check; groups: Pinned partition
//!    ([`place_groups`], module `partition`) or one Unpinned group;
//! 6. per group (module `manifests`): renamed dependency copies (module `deps`: which
//!    dependencies are per job, their order and renaming) and the TrainJob with required node
//!    affinity ([`node_affinity`]) and tolerations ([`tolerations`]) (module `scheduling`).

// Input paths must not panic: every lookup is checked.
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]

mod deps;
#[cfg(test)]
mod fixtures;
mod manifests;
mod partition;
mod quantity;
mod scheduling;
mod spec;

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::{
    CONTROLLER_MANAGER, GPU_RESOURCE, MANAGED_BY_LABEL, MANAGED_BY_VALUE, TRAINER_API_VERSION,
    Workflow,
};
use crate::nodes::{GpuProducts, Node, detect_gpu_architecture, discover_targets};

use manifests::GroupRender;
use partition::group;
pub use partition::{Group, place_groups};
pub use quantity::{
    QuantityError, gpu_count, gpu_count_problem, gpu_need, gpu_quantities, parse_quantity,
    quantity_as_int,
};
pub use scheduling::SchedulingPolicy;
pub use spec::{PlacementError, PlacementMode, PlacementSpec};

/// TrainJob label naming the Workflow.
pub const WORKFLOW_LABEL: &str = "nvcre.nvidia.com/workflow";

/// TrainJob label naming the group.
pub const GROUP_LABEL: &str = "nvcre.nvidia.com/group";

/// TrainJob annotation listing a pinned group's nodes, comma-joined.
pub const GROUP_NODES_ANNOTATION: &str = "nvcre.nvidia.com/group-nodes";

/// The result of [`place`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// The groups, in launch order.
    pub groups: Vec<Group>,
    /// Eligible nodes after discovery, architecture and capacity filters.
    pub total_nodes: usize,
    /// The resolved nodes per job (Pinned `< 1` resolves to `total_nodes`).
    pub nodes_per_job: i64,
    /// Nodes that matched the target but were left out, with the reason: cordoned first,
    /// then other GPU architectures, then insufficient GPU capacity.
    pub excluded: Vec<(String, String)>,
    /// Pinned or Unpinned.
    pub mode: PlacementMode,
    /// The detected (majority) GPU architecture, `unknown` when no node is labelled.
    pub gpu_architecture: String,
    /// Distinct raw `nvidia.com/gpu.product` values of the eligible nodes, sorted.
    pub gpu_products: Vec<String>,
    /// Dependencies no job references: created once for the whole Workflow (not per group).
    pub workflow_dependencies: Vec<Value>,
}

/// What placement reads from the rule set in use: the default tolerations (the `scheduling`
/// table), GPU product normalisation (the `gpu-products` table) and the gang defaults (the
/// `gang-defaults` table). Built by
/// [`crate::placement_policy`]; passed to [`place`] explicitly, so placement holds no policy of
/// its own.
#[derive(Debug, Clone, Default)]
pub struct PlacementPolicy {
    /// The default tolerations by placement mode.
    pub scheduling: SchedulingPolicy,
    /// How node product labels become architecture names (step 3's vote and filter).
    pub gpu_products: std::sync::Arc<GpuProducts>,
    /// The queue and queue label key of a gang intent that leaves them unset.
    pub gang_defaults: crate::detect::GangDefaults,
}

/// Places a resolved Workflow on the cluster's nodes (the controller's discovery, capacity filter, partition and per-group job creation),
/// with the default tolerations and GPU product normalisation of `policy`.
///
/// `workflow` is the Workflow after override resolution; `nodes` are all cluster nodes (the
/// target is applied here). See the module docs for the pipeline.
///
/// Pinned with `trainer.numNodes < 1` means "all eligible nodes in one group"; Unpinned
/// never clamps: the size is honoured exactly or placement fails.
///
/// # Errors
/// In pipeline order: orchestration shape,
/// [`PlacementError::NoTargetNodes`], [`PlacementError::NoCapacity`],
/// [`PlacementError::NodesPerJob`], [`PlacementError::InvalidNodesPerJob`] (Unpinned),
/// [`PlacementError::Shortfall`], [`PlacementError::DiagnoseUnsupported`], partition errors,
/// and [`PlacementError::InvalidDocument`] when the job template or a dependency is not
/// shaped as expected. Messages are NVCRE's, e.g.
/// `Not enough schedulable nodes: need 8, found 6`.
///
/// # Example
/// ```
/// use nvcre_domain::{Node, Workflow, place};
/// let wf: Workflow = serde_json::from_value(serde_json::json!({
///     "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
///     "spec": {"orchestration": {}, "jobTemplate": {"spec": {"workload": {"trainJob": {
///         "runtimeRef": {"name": "wf-runtime", "kind": "TrainingRuntime"},
///         "trainer": {"numNodes": 2}}}}}}
/// }))?;
/// let nodes: Vec<Node> = (0..4).map(|i| Node {
///     name: format!("node-{i}"),
///     labels: [("nvidia.com/gpu.present".to_string(), "true".to_string())].into(),
///     ..Node::default()
/// }).collect();
/// let policy = nvcre_domain::placement_policy(&nvcre_domain::default_rules()?)?;
/// let placement = place(&wf, &nodes, &policy)?;
/// assert_eq!(placement.groups.len(), 2);
/// assert_eq!(placement.groups[1].manifests[0]["metadata"]["name"], "wf-group-1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn place(
    workflow: &Workflow,
    nodes: &[Node],
    policy: &PlacementPolicy,
) -> Result<Placement, PlacementError> {
    let spec = PlacementSpec::from_orchestration(&workflow.spec.orchestration)?;

    // 1. discovery and the architecture filter.
    let discovery = discover_targets(nodes, spec.target.as_ref());
    if discovery.nodes.is_empty() {
        return Err(PlacementError::NoTargetNodes);
    }
    let mut excluded: Vec<(String, String)> = discovery
        .cordoned
        .iter()
        .map(|n| (n.clone(), "cordoned (spec.unschedulable)".to_string()))
        .collect();
    let products = &policy.gpu_products;
    let arch = detect_gpu_architecture(&discovery.nodes, products);
    let (eligible, other_arch): (Vec<Node>, Vec<Node>) = discovery
        .nodes
        .into_iter()
        .partition(|n| n.gpu_architecture(products) == arch);
    let arch_excluded: Vec<String> = other_arch.iter().map(|n| n.name.clone()).collect();
    excluded.extend(other_arch.iter().map(|n| {
        (
            n.name.clone(),
            format!(
                "GPU architecture {} is not the detected architecture {arch}",
                n.gpu_architecture(products)
            ),
        )
    }));

    // 5. the GPU-capacity filter.
    let need = gpu_need(workflow)?.unwrap_or(0);
    let (eligible, short) = filter_capacity(eligible, need);
    excluded.extend(short.iter().map(|(n, have)| {
        (
            n.clone(),
            format!("allocatable nvidia.com/gpu {have} is fewer than the {need} the workload requests per node"),
        )
    }));
    if eligible.is_empty() {
        let best = short.iter().map(|s| s.1).max().unwrap_or(0);
        return Err(PlacementError::NoCapacity { need, best });
    }
    let gpu_products: Vec<String> = eligible
        .iter()
        .filter(|n| !n.made_up_product)
        .map(|n| n.gpu_product().to_string())
        .filter(|p| !p.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    // 7. nodesPerJob and the shortfall check.
    let requested = nodes_per_job(&workflow.spec.job_template)?;
    let found = eligible.len();
    let found_i64 = i64::try_from(found).unwrap_or(i64::MAX);
    let npj = match spec.mode {
        PlacementMode::Pinned if requested < 1 => found_i64,
        PlacementMode::Unpinned if requested < 1 => {
            return Err(PlacementError::InvalidNodesPerJob { got: requested });
        }
        _ => requested,
    };
    if npj > found_i64 {
        return Err(PlacementError::Shortfall {
            need: npj,
            found,
            message: shortfall_message(npj, found, &arch, &arch_excluded, &short, need),
        });
    }

    // 8. groups.
    let mut groups = match spec.mode {
        PlacementMode::Unpinned => {
            vec![group("group-0".to_string(), Vec::new(), Vec::new(), false)]
        }
        PlacementMode::Pinned => {
            if spec.diagnose {
                return Err(PlacementError::DiagnoseUnsupported);
            }
            place_groups(
                &eligible,
                npj,
                spec.topology_key.as_deref(),
                spec.strict_domain,
            )?
        }
    };

    // 9. per-group manifests.
    let workflow_dependencies =
        render_groups(workflow, &spec, &mut groups, &gpu_products, npj, policy)?;

    Ok(Placement {
        groups,
        total_nodes: found,
        nodes_per_job: npj,
        excluded,
        mode: spec.mode,
        gpu_architecture: arch,
        gpu_products,
        workflow_dependencies,
    })
}

/// Renders the manifests of groups partitioned earlier (the partition a Workflow controller
/// recorded), without discovering or partitioning the nodes again: each group keeps its name,
/// nodes and overflow flag whatever the cluster's nodes are now, so its TrainJob is pinned to
/// exactly those nodes. `gpu_products` and `nodes_per_job` are the ones recorded with the
/// partition.
///
/// The result has the groups (with their manifests) and the Workflow dependencies of
/// [`place`]; `total_nodes` counts the distinct nodes of the groups, `mode` is read from the
/// Workflow, and nothing is detected again: `excluded` is empty and `gpu_architecture` is the
/// empty string.
///
/// # Errors
/// The orchestration shape, and [`PlacementError::InvalidDocument`] when the job template or
/// a dependency is not shaped as expected (as [`place`]).
///
/// # Example
/// ```
/// use nvcre_domain::{Group, Workflow, place_recorded};
/// let wf: Workflow = serde_json::from_value(serde_json::json!({
///     "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "Workflow", "metadata": {"name": "wf"},
///     "spec": {"orchestration": {}, "jobTemplate": {"spec": {"workload": {"trainJob": {
///         "runtimeRef": {"name": "wf-runtime", "kind": "TrainingRuntime"},
///         "trainer": {"numNodes": 2}}}}}}
/// }))?;
/// let recorded = vec![Group {
///     name: "group-1".into(),
///     nodes: vec!["node-7".into(), "node-9".into()],
///     ..Group::default()
/// }];
/// let policy = nvcre_domain::placement_policy(&nvcre_domain::default_rules()?)?;
/// let placement = place_recorded(&wf, recorded, Vec::new(), 2, &policy)?;
/// let job = &placement.groups[0].manifests[0];
/// assert_eq!(job["metadata"]["annotations"]["nvcre.nvidia.com/group-nodes"], "node-7,node-9");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn place_recorded(
    workflow: &Workflow,
    mut groups: Vec<Group>,
    gpu_products: Vec<String>,
    nodes_per_job: i64,
    policy: &PlacementPolicy,
) -> Result<Placement, PlacementError> {
    let spec = PlacementSpec::from_orchestration(&workflow.spec.orchestration)?;
    let workflow_dependencies = render_groups(
        workflow,
        &spec,
        &mut groups,
        &gpu_products,
        nodes_per_job,
        policy,
    )?;
    let total_nodes = groups
        .iter()
        .flat_map(|g| &g.nodes)
        .collect::<BTreeSet<_>>()
        .len();
    Ok(Placement {
        groups,
        total_nodes,
        nodes_per_job,
        excluded: Vec::new(),
        mode: spec.mode,
        gpu_architecture: String::new(),
        gpu_products,
        workflow_dependencies,
    })
}

/// Step 9 of [`place`]: fills each group's manifests and returns the Workflow-scoped
/// dependencies, every object labelled with the Workflow's run.
fn render_groups(
    workflow: &Workflow,
    spec: &PlacementSpec,
    groups: &mut [Group],
    gpu_products: &[String],
    nodes_per_job: i64,
    policy: &PlacementPolicy,
) -> Result<Vec<Value>, PlacementError> {
    let render = GroupRender::new(workflow, spec, gpu_products, nodes_per_job, policy)?;
    let single = groups.len() <= 1;
    // Every object made for a run carries its run's label, by which the WorkloadRun
    // controller finds them (its grandchildren): `render --expand` prints what it creates.
    let run_label = workflow
        .metadata
        .labels
        .get(crate::crd::WORKLOAD_RUN_LABEL)
        .map(|run| (crate::crd::WORKLOAD_RUN_LABEL, run.as_str()));
    for g in groups.iter_mut() {
        g.manifests = render.manifests(g, single)?;
        g.manifests.iter_mut().for_each(|m| add_label(m, run_label));
    }
    let mut workflow_dependencies = render.workflow_dependencies();
    workflow_dependencies
        .iter_mut()
        .for_each(|m| add_label(m, run_label));
    Ok(workflow_dependencies)
}

/// `label` (key, value) added to `object`'s `metadata.labels`, when there is one and the
/// object has metadata.
fn add_label(object: &mut serde_json::Value, label: Option<(&str, &str)>) {
    let Some((key, value)) = label else {
        return;
    };
    if let Some(meta) = object
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        let labels = meta
            .entry("labels")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if let Some(l) = labels.as_object_mut() {
            l.insert(
                key.to_string(),
                serde_json::Value::String(value.to_string()),
            );
        }
    }
}

/// Splits nodes into those that can supply `need` GPUs and `(name, allocatable)` of those
/// whose allocatable `nvidia.com/gpu` is a positive integer below it (absent or zero is kept:
/// the device plugin may be restarting).
fn filter_capacity(nodes: Vec<Node>, need: i64) -> (Vec<Node>, Vec<(String, i64)>) {
    if need <= 0 {
        return (nodes, Vec::new());
    }
    let mut kept = Vec::with_capacity(nodes.len());
    let mut short = Vec::new();
    for n in nodes {
        match n
            .allocatable
            .get(GPU_RESOURCE)
            .and_then(|q| quantity_as_int(q))
        {
            Some(have) if have > 0 && have < need => short.push((n.name.clone(), have)),
            _ => kept.push(n),
        }
    }
    (kept, short)
}

/// The shortfall message: the counts, then each cause of exclusion with its remedy.
fn shortfall_message(
    need: i64,
    found: usize,
    arch: &str,
    arch_excluded: &[String],
    capacity_excluded: &[(String, i64)],
    gpus_per_node: i64,
) -> String {
    let head = format!("Not enough schedulable nodes: need {need}, found {found}");
    let mut causes = Vec::new();
    let mut remedies = Vec::new();
    if !arch_excluded.is_empty() {
        causes.push(format!(
            "{} node(s) matched the target but were excluded for not being GPU architecture {arch}: {}",
            arch_excluded.len(),
            arch_excluded.join(", ")
        ));
        remedies.push("narrow the target to one architecture");
    }
    if !capacity_excluded.is_empty() {
        let detail: Vec<String> = capacity_excluded
            .iter()
            .map(|(n, have)| format!("{n} has {have}"))
            .collect();
        causes.push(format!(
            "{} node(s) matched the target but were excluded for having fewer than the {gpus_per_node} allocatable nvidia.com/gpu the workload requests per node: {}",
            capacity_excluded.len(),
            detail.join(", ")
        ));
        remedies.push("lower gpusPerNode");
    }
    if causes.is_empty() {
        return head;
    }
    format!(
        "{head}. {}. Set nodesPerJob to {found}, or {}",
        causes.join(". "),
        remedies.join(", or ")
    )
}

/// Path of the job size inside `spec.jobTemplate`.
const NUM_NODES_PATH: &str = "spec.jobTemplate.spec.workload.trainJob.trainer.numNodes";

/// `trainer.numNodes` of the resolved job template.
fn nodes_per_job(job_template: &Value) -> Result<i64, PlacementError> {
    let train_job = job_template
        .pointer("/spec/workload/trainJob")
        .filter(|v| !v.is_null())
        .ok_or_else(|| PlacementError::NodesPerJob {
            reason: "spec.jobTemplate.spec.workload.trainJob is not set".to_string(),
        })?;
    match train_job.pointer("/trainer/numNodes") {
        None | Some(Value::Null) => Err(PlacementError::NodesPerJob {
            reason: "TrainJob.Trainer.NumNodes not set".to_string(),
        }),
        Some(v) => v.as_i64().ok_or_else(|| PlacementError::NodesPerJob {
            reason: format!("{NUM_NODES_PATH} must be an integer, got {v}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::GPU_PRODUCT_LABEL;
    use crate::placement::fixtures::*;
    use serde_json::json;

    // ---- partitioning -------------------------------------------------------------------

    macro_rules! partition {
        ($($name:ident: $nodes:expr, $npj:expr => [$($group:expr),*];)*) => {$(
            #[test]
            fn $name() {
                let wf = mpi_workflow("wf", $npj, json!({}));
                let p = place(&wf, &h100($nodes), &fixture_policy()).unwrap();
                let want: Vec<&str> = vec![$($group),*];
                assert_eq!(group_names(&p), want);
            }
        )*};
    }

    partition! {
        part_18_by_2: 18, 2 => ["group-0", "group-1", "group-2", "group-3", "group-4", "group-5", "group-6", "group-7", "group-8"];
        part_16_by_4: 16, 4 => ["group-0", "group-1", "group-2", "group-3"];
        part_5_by_2: 5, 2 => ["group-0", "group-1", "group-2-overflow"];
        part_3_by_3: 3, 3 => ["group-0"];
        part_all_nodes: 3, 0 => ["group-0"];
    }

    #[test]
    fn topology_key_from_orchestration_drives_pinned_partition() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"topology": {"topologyKey": "topology.kubernetes.io/rack"}}),
        );
        let nodes = racked(&[("a", "r1"), ("b", "r2"), ("c", "r1"), ("d", "r2")]);
        let p = place(&wf, &nodes, &fixture_policy()).unwrap();
        assert_eq!(p.groups[0].nodes, ["a", "c"]);
        assert_eq!(p.groups[0].domains, ["r1"]);
    }

    // ---- shortfall and filters ----------------------------------------------------------

    macro_rules! place_error {
        ($($name:ident: $wf:expr, $nodes:expr => $msg:expr;)*) => {$(
            #[test]
            fn $name() {
                let err = place(&$wf, &$nodes, &fixture_policy()).unwrap_err();
                assert_eq!(err.to_string(), $msg);
            }
        )*};
    }

    place_error! {
        unpinned_shortfall: mpi_workflow("wf", 8, json!({"placement": "Unpinned"})), h100(6)
            => "Not enough schedulable nodes: need 8, found 6";
        pinned_shortfall: mpi_workflow("wf", 8, json!({})), h100(6)
            => "Not enough schedulable nodes: need 8, found 6";
        unpinned_shortfall_arch: mpi_workflow("wf", 8, json!({"placement": "Unpinned"})), mixed_arch()
            => "Not enough schedulable nodes: need 8, found 6. 2 node(s) matched the target but were excluded for not being GPU architecture h100: node-6, node-7. Set nodesPerJob to 6, or narrow the target to one architecture";
        shortfall_capacity: mpi_workflow("wf", 4, json!({})), with_allocatable(h100(4), &[(1, "4"), (3, "2")])
            => "Not enough schedulable nodes: need 4, found 2. 2 node(s) matched the target but were excluded for having fewer than the 8 allocatable nvidia.com/gpu the workload requests per node: node-1 has 4, node-3 has 2. Set nodesPerJob to 2, or lower gpusPerNode";
        shortfall_both: mpi_workflow("wf", 8, json!({})), with_allocatable(mixed_arch(), &[(0, "4")])
            => "Not enough schedulable nodes: need 8, found 5. 2 node(s) matched the target but were excluded for not being GPU architecture h100: node-6, node-7. 1 node(s) matched the target but were excluded for having fewer than the 8 allocatable nvidia.com/gpu the workload requests per node: node-0 has 4. Set nodesPerJob to 5, or narrow the target to one architecture, or lower gpusPerNode";
        no_capacity: mpi_workflow("wf", 1, json!({})), with_allocatable(h100(2), &[(0, "4"), (1, "6")])
            => "No node can supply the 8 nvidia.com/gpu the workload requests per node; best available is 6";
        unpinned_zero: mpi_workflow("wf", 0, json!({"placement": "Unpinned"})), h100(2)
            => "nodesPerJob must be >= 1, got 0";
        no_targets: mpi_workflow("wf", 1, json!({"target": {"nodeSelector": {"x": "y"}}})), h100(2)
            => "No target nodes found matching orchestration target";
        unknown_placement: mpi_workflow("wf", 1, json!({"placement": "Spread"})), h100(2)
            => "spec.orchestration.placement: unsupported value \"Spread\": must be Pinned or Unpinned";
        bad_target: mpi_workflow("wf", 1, json!({"target": {"nodeSelector": "x"}})), h100(2)
            => "spec.orchestration.target: invalid type: string \"x\", expected a map";
        pinned_diagnose: mpi_workflow("wf", 1, json!({"diagnose": {}})), h100(2)
            => "orchestration.diagnose is not supported by placement: diagnose groups are built by the diagnose stages";
    }

    #[test]
    fn a_recorded_partition_renders_as_placed_whatever_the_nodes_are_now() {
        let wf = mpi_workflow("wf", 2, json!({}));
        let placed = place(&wf, &h100(5), &fixture_policy()).unwrap();
        let recorded: Vec<Group> = placed
            .groups
            .iter()
            .map(|g| Group {
                name: g.name.clone(),
                nodes: g.nodes.clone(),
                overflow: g.overflow,
                ..Group::default()
            })
            .collect();
        let again = place_recorded(
            &wf,
            recorded,
            placed.gpu_products.clone(),
            placed.nodes_per_job,
            &fixture_policy(),
        )
        .unwrap();
        let manifests = |p: &Placement| -> Vec<Vec<Value>> {
            p.groups.iter().map(|g| g.manifests.clone()).collect()
        };
        assert_eq!(manifests(&again), manifests(&placed));
        assert_eq!(
            (
                again.workflow_dependencies.clone(),
                again.total_nodes,
                again.nodes_per_job
            ),
            (placed.workflow_dependencies.clone(), 5, 2)
        );
    }

    #[test]
    fn unpinned_ignores_topology_key() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "topology": {"topologyKey": "rack"}}),
        );
        let p = place(&wf, &h100(3), &fixture_policy()).unwrap();
        assert_eq!(group_names(&p), ["group-0"]);
        assert!(p.groups[0].nodes.is_empty());
    }

    #[test]
    fn placement_itself_refuses_no_orchestration_combination() {
        // Unpinned with diagnose or strictDomain is refused by the `placement` rule stage,
        // not here: placement runs the one unpinned job.
        for orch in [
            json!({"placement": "Unpinned", "diagnose": {"minGroupSize": 2}}),
            json!({"placement": "Unpinned", "topology": {"topologyKey": "rack", "strictDomain": true}}),
        ] {
            let p = place(&mpi_workflow("wf", 1, orch), &h100(2), &fixture_policy()).unwrap();
            assert_eq!(group_names(&p), ["group-0"]);
        }
    }

    #[test]
    fn missing_num_nodes_is_an_error() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]["trainer"]
            .as_object_mut()
            .unwrap()
            .remove("numNodes");
        assert_eq!(
            place(&wf, &h100(2), &fixture_policy())
                .unwrap_err()
                .to_string(),
            "Failed to detect nodesPerJob: TrainJob.Trainer.NumNodes not set"
        );
    }

    #[test]
    fn exclusions_are_recorded_with_reasons() {
        let mut nodes = with_allocatable(mixed_arch(), &[(0, "4"), (1, "0")]);
        let mut cordoned = gpu_node("node-9", "NVIDIA-H100-80GB-HBM3");
        cordoned.unschedulable = true;
        nodes.push(cordoned);
        let p = place(&mpi_workflow("wf", 1, json!({})), &nodes, &fixture_policy()).unwrap();
        assert_eq!(p.total_nodes, 5);
        assert_eq!(p.gpu_architecture, "h100");
        assert_eq!(
            p.excluded,
            vec![
                ("node-9".to_string(), "cordoned (spec.unschedulable)".to_string()),
                ("node-6".to_string(), "GPU architecture a100 is not the detected architecture h100".to_string()),
                ("node-7".to_string(), "GPU architecture a100 is not the detected architecture h100".to_string()),
                ("node-0".to_string(), "allocatable nvidia.com/gpu 4 is fewer than the 8 the workload requests per node".to_string()),
            ]
        );
    }

    #[test]
    fn unlabelled_nodes_are_excluded_when_others_are_labelled() {
        let mut nodes = h100(2);
        nodes.push(gpu_node("node-2", ""));
        nodes[2].labels.remove(GPU_PRODUCT_LABEL);
        let p = place(&mpi_workflow("wf", 1, json!({})), &nodes, &fixture_policy()).unwrap();
        assert_eq!(p.total_nodes, 2);
        let p = place(
            &mpi_workflow("wf", 1, json!({})),
            &[nodes[2].clone()],
            &fixture_policy(),
        )
        .unwrap();
        assert_eq!(p.gpu_architecture, "unknown");
        assert_eq!(p.total_nodes, 1);
        assert!(p.gpu_products.is_empty());
    }
}
