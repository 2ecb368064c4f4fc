//! The manifests each group applies: its renamed dependency copies (ComputeDomains sized to
//! the group, the gang scheduling fields kept) and its TrainJob (size, labels, annotations,
//! node affinity and tolerations).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::deps::{creation_order, cross_refs, job_scoped, kind_of, metadata_name, rename};
use super::scheduling::{
    node_affinity, object_entry, patch_targets, tolerations, write_pod_placement,
};
use super::{
    GROUP_LABEL, GROUP_NODES_ANNOTATION, Group, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PlacementError,
    PlacementMode, PlacementSpec, TRAINER_API_VERSION, WORKFLOW_LABEL,
};
use crate::api::{GangSchedulerSpec, Workflow};

/// What every group's manifests are built from.
pub(super) struct GroupRender<'a> {
    workflow: &'a Workflow,
    spec: &'a PlacementSpec,
    gpu_products: &'a [String],
    nodes_per_job: i64,
    /// `spec.jobTemplate.spec`.
    job_spec: Value,
    /// Job-scoped dependencies, in creation order.
    job_deps: Vec<&'a Value>,
    /// Dependencies no job references (created once for the Workflow).
    workflow_deps: Vec<&'a Value>,
    /// Names every group suffixes: job-scoped dependency names, then shared internal names.
    renamed: Vec<String>,
    /// Resolved gang intent (the preserve rule below is a no-op without one).
    gang: Option<GangSchedulerSpec>,
    namespace: Option<String>,
}

impl<'a> GroupRender<'a> {
    pub(super) fn new(
        workflow: &'a Workflow,
        spec: &'a PlacementSpec,
        gpu_products: &'a [String],
        nodes_per_job: i64,
    ) -> Result<GroupRender<'a>, PlacementError> {
        let job_spec = workflow
            .spec
            .job_template
            .get("spec")
            .cloned()
            .unwrap_or(Value::Null);
        if !job_spec.is_object() {
            return Err(PlacementError::InvalidDocument {
                path: "spec.jobTemplate.spec".to_string(),
                reason: "must be an object".to_string(),
            });
        }
        for (i, dep) in workflow.spec.dependencies.iter().enumerate() {
            if !dep.is_object() {
                return Err(PlacementError::InvalidDocument {
                    path: format!("spec.dependencies[{i}]"),
                    reason: "must be an object".to_string(),
                });
            }
        }
        let deps: Vec<&Value> = workflow.spec.dependencies.iter().collect();
        let scoped = job_scoped(&deps, &job_spec);
        let job_deps: Vec<&Value> = creation_order(
            &deps
                .iter()
                .enumerate()
                .filter(|(i, _)| scoped.contains(i))
                .map(|(_, d)| *d)
                .collect::<Vec<_>>(),
        );
        let workflow_deps: Vec<&Value> = deps
            .iter()
            .enumerate()
            .filter(|(i, _)| !scoped.contains(i))
            .map(|(_, d)| *d)
            .collect();
        let mut renamed: Vec<String> = job_deps.iter().filter_map(|d| metadata_name(d)).collect();
        for s in cross_refs(&job_deps) {
            if !renamed.contains(&s) {
                renamed.push(s);
            }
        }
        let namespace = workflow
            .spec
            .namespace
            .clone()
            .or_else(|| workflow.metadata.namespace.clone())
            .filter(|n| !n.is_empty());
        Ok(GroupRender {
            workflow,
            spec,
            gpu_products,
            nodes_per_job,
            job_spec,
            job_deps,
            workflow_deps,
            renamed,
            gang: workflow
                .spec
                .gang_scheduler
                .as_ref()
                .and_then(GangSchedulerSpec::resolved),
            namespace,
        })
    }

    /// Dependencies created once for the Workflow.
    pub(super) fn workflow_dependencies(&self) -> Vec<Value> {
        self.workflow_deps
            .iter()
            .map(|d| strip_when((*d).clone()))
            .collect()
    }

    /// The group's manifests: renamed dependency copies, then the TrainJob.
    pub(super) fn manifests(&self, g: &Group, single: bool) -> Result<Vec<Value>, PlacementError> {
        let wf_name = &self.workflow.metadata.name;
        let job_name = if single {
            format!("{wf_name}-job")
        } else {
            format!("{wf_name}-{}", g.name)
        };
        let size = match self.spec.mode {
            PlacementMode::Pinned => i64::try_from(g.nodes.len()).unwrap_or(i64::MAX),
            PlacementMode::Unpinned => self.nodes_per_job,
        };
        let renames: BTreeMap<String, String> = self
            .renamed
            .iter()
            .map(|old| (old.clone(), format!("{old}-{job_name}")))
            .collect();

        let mut out = Vec::with_capacity(self.job_deps.len().saturating_add(1));
        for dep in &self.job_deps {
            let mut copy = strip_when(rename((*dep).clone(), &renames));
            if let Some(gang) = &self.gang {
                preserve_scheduling_fields(dep, &mut copy, gang);
            }
            if is_compute_domain(&copy)
                && let Some(obj) = copy.as_object_mut()
            {
                let spec = object_entry(obj, "spec", "ComputeDomain.spec")?;
                spec.insert("numNodes".to_string(), json!(size));
            }
            if let (Some(ns), Some(meta)) = (
                &self.namespace,
                copy.get_mut("metadata").and_then(Value::as_object_mut),
            ) {
                meta.entry("namespace")
                    .or_insert_with(|| Value::String(ns.clone()));
            }
            out.push(copy);
        }
        out.push(self.train_job(g, &job_name, size, &renames)?);
        Ok(out)
    }

    /// The group's TrainJob.
    fn train_job(
        &self,
        g: &Group,
        job_name: &str,
        size: i64,
        renames: &BTreeMap<String, String>,
    ) -> Result<Value, PlacementError> {
        let job_spec = rename(self.job_spec.clone(), renames);
        let mut train_job = match job_spec.pointer("/workload/trainJob") {
            Some(Value::Object(t)) => t.clone(),
            _ => {
                return Err(PlacementError::InvalidDocument {
                    path: "spec.jobTemplate.spec.workload.trainJob".to_string(),
                    reason: "must be an object".to_string(),
                });
            }
        };
        const TJ: &str = "spec.jobTemplate.spec.workload.trainJob";
        if self.spec.mode == PlacementMode::Pinned {
            let trainer = object_entry(&mut train_job, "trainer", &format!("{TJ}.trainer"))?;
            trainer.insert("numNodes".to_string(), json!(size));
        }
        let target = self.spec.target.as_ref();
        let hostnames: Vec<String> = match self.spec.mode {
            PlacementMode::Pinned => g.nodes.clone(),
            PlacementMode::Unpinned => target.map(|t| t.node_names.clone()).unwrap_or_default(),
        };
        let affinity = node_affinity(&hostnames, target, self.gpu_products);
        let targets = patch_targets(&train_job);
        let tols = tolerations(
            target,
            targets.iter().any(|t| t == "launcher"),
            self.spec.mode,
        );
        write_pod_placement(&mut train_job, &targets, affinity.as_ref(), &tols)?;

        let wf_name = &self.workflow.metadata.name;
        let meta = self.workflow.spec.job_template.get("metadata");
        let mut labels = string_map(
            meta.and_then(|m| m.get("labels")),
            "spec.jobTemplate.metadata.labels",
        )?;
        labels.extend(string_map(
            job_spec.pointer("/workloadMetadata/labels"),
            "spec.jobTemplate.spec.workloadMetadata.labels",
        )?);
        labels.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string());
        labels.insert(WORKFLOW_LABEL.to_string(), wf_name.clone());
        labels.insert(GROUP_LABEL.to_string(), g.name.clone());
        let mut annotations = string_map(
            meta.and_then(|m| m.get("annotations")),
            "spec.jobTemplate.metadata.annotations",
        )?;
        if self.spec.mode == PlacementMode::Pinned {
            annotations.insert(GROUP_NODES_ANNOTATION.to_string(), g.nodes.join(","));
        }

        let mut metadata = Map::new();
        metadata.insert("name".to_string(), Value::String(job_name.to_string()));
        if let Some(ns) = &self.namespace {
            metadata.insert("namespace".to_string(), Value::String(ns.clone()));
        }
        metadata.insert("labels".to_string(), to_json_map(labels));
        if !annotations.is_empty() {
            metadata.insert("annotations".to_string(), to_json_map(annotations));
        }
        Ok(json!({
            "apiVersion": TRAINER_API_VERSION,
            "kind": "TrainJob",
            "metadata": metadata,
            "spec": train_job,
        }))
    }
}

/// `{string: string}` as a JSON object (sorted keys).
fn to_json_map(m: BTreeMap<String, String>) -> Value {
    Value::Object(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

/// Reads an optional `{string: string}` map (the nodes reader's, without numbers).
fn string_map(v: Option<&Value>, path: &str) -> Result<BTreeMap<String, String>, PlacementError> {
    crate::nodes::string_map(v, path, false).map_err(|(field, _)| {
        let reason = if field == path {
            "must be a map of strings"
        } else {
            "must be a string"
        };
        PlacementError::InvalidDocument {
            path: field,
            reason: reason.to_string(),
        }
    })
}

/// True for `resource.nvidia.com/*` `ComputeDomain`.
fn is_compute_domain(doc: &Value) -> bool {
    kind_of(doc) == "ComputeDomain"
        && doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("resource.nvidia.com/"))
}

/// True for `trainer.kubeflow.org/*` `TrainingRuntime`.
fn is_training_runtime(doc: &Value) -> bool {
    kind_of(doc) == "TrainingRuntime"
        && doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("trainer.kubeflow.org/"))
}

/// Drops the dependency-level `when` (not part of the Kubernetes object).
pub(super) fn strip_when(mut doc: Value) -> Value {
    if let Some(obj) = doc.as_object_mut() {
        obj.shift_remove("when");
    }
    doc
}

/// The original's preserve rule for scheduling fields: on a TrainingRuntime copy, the queue label values (job and pod
/// template) and `schedulerName` of every replicated job are copied back from the
/// pre-rename document. Absent stays absent; nothing is inserted.
fn preserve_scheduling_fields(original: &Value, copy: &mut Value, gang: &GangSchedulerSpec) {
    if !is_training_runtime(original) {
        return;
    }
    let key = gang.queue_label_key().replace('~', "~0").replace('/', "~1");
    let Some(jobs) = original
        .pointer("/spec/template/spec/replicatedJobs")
        .and_then(Value::as_array)
    else {
        return;
    };
    for (i, job) in jobs.iter().enumerate() {
        for field in [
            format!("/template/metadata/labels/{key}"),
            format!("/template/spec/template/metadata/labels/{key}"),
            "/template/spec/template/spec/schedulerName".to_string(),
        ] {
            if let Some(before) = job.pointer(&field) {
                let at = format!("/spec/template/spec/replicatedJobs/{i}{field}");
                if let Some(slot) = copy.pointer_mut(&at) {
                    *slot = before.clone();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::HOSTNAME_LABEL;
    use crate::placement::fixtures::*;
    use crate::placement::{CONTROLLER_MANAGER, place};

    // ---- affinity and tolerations -------------------------------------------------------

    #[test]
    fn pinned_affinity_and_labels() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"target": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "a": "b"}}}),
        );
        let mut nodes = h100(4);
        for n in &mut nodes {
            n.labels.insert("a".into(), "b".into());
        }
        let p = place(&wf, &nodes).unwrap();
        let tj = train_job(&p.groups[1]);
        assert_eq!(tj["metadata"]["name"], "wf-group-1");
        assert_eq!(tj["metadata"]["namespace"], "team");
        assert_eq!(
            tj["metadata"]["labels"],
            json!({
                "app.kubernetes.io/managed-by": "nvcre",
                "kueue.x-k8s.io/queue-name": "q",
                "nvcre.nvidia.com/group": "group-1",
                "nvcre.nvidia.com/workflow": "wf",
                "team": "a"
            })
        );
        assert_eq!(
            tj["metadata"]["annotations"],
            json!({"note": "x", "nvcre.nvidia.com/group-nodes": "node-2,node-3"})
        );
        assert_eq!(tj["spec"]["trainer"]["numNodes"], 2);
        for job in ["node", "launcher"] {
            assert_eq!(
                match_expressions(tj, job),
                &vec![
                    json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-2", "node-3"]}),
                    json!({"key": "a", "operator": "In", "values": ["b"]}),
                    // nodeSelector's gpu.product term equals the products term: kept once.
                    json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}),
                ]
            );
            assert_eq!(
                patch_job(tj, job)["template"]["spec"]["template"]["spec"]["tolerations"],
                json!([{"operator": "Exists"}])
            );
        }
    }

    #[test]
    fn unpinned_clique_target_reaches_both_patches_without_hostname() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "target": {"matchExpressions": [
                {"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["clique-0"]}]}}),
        );
        let mut nodes = fleet(4, "NVIDIA-GB200");
        for (i, n) in nodes.iter_mut().enumerate() {
            n.labels
                .insert("nvidia.com/gpu.clique".into(), format!("clique-{}", i % 2));
        }
        let p = place(&wf, &nodes).unwrap();
        assert_eq!(p.total_nodes, 2);
        assert_eq!(group_names(&p), ["group-0"]);
        let tj = train_job(&p.groups[0]);
        assert_eq!(tj["metadata"]["name"], "wf-job");
        assert!(
            tj["metadata"]["annotations"]
                .get(GROUP_NODES_ANNOTATION)
                .is_none()
        );
        assert_eq!(tj["spec"]["trainer"]["numNodes"], 2);
        for job in ["launcher", "node"] {
            let exprs = match_expressions(tj, job);
            assert_eq!(
                exprs,
                &vec![
                    json!({"key": "nvidia.com/gpu.clique", "operator": "In", "values": ["clique-0"]}),
                    json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-GB200"]}),
                ]
            );
            assert!(exprs.iter().all(|e| e["key"] != HOSTNAME_LABEL));
            assert_eq!(
                patch_job(tj, job)["template"]["spec"]["template"]["spec"]["tolerations"],
                json!([
                    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
                    {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}
                ])
            );
        }
    }

    #[test]
    fn unpinned_node_names_become_the_hostname_term() {
        let wf = mpi_workflow(
            "wf",
            2,
            json!({"placement": "Unpinned", "target": {"nodeNames": ["node-3", "node-1"]}}),
        );
        let p = place(&wf, &h100(4)).unwrap();
        let exprs = match_expressions(train_job(&p.groups[0]), "node");
        assert_eq!(
            exprs[0],
            json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-3", "node-1"]})
        );
    }

    #[test]
    fn torch_job_without_patches_gets_a_node_entry() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]
            .as_object_mut()
            .unwrap()
            .remove("runtimePatches");
        let p = place(&wf, &h100(1)).unwrap();
        let tj = train_job(&p.groups[0]);
        let jobs = &tj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"];
        assert_eq!(
            tj["spec"]["runtimePatches"][0]["manager"],
            CONTROLLER_MANAGER
        );
        assert_eq!(jobs.as_array().unwrap().len(), 1);
        assert_eq!(jobs[0]["name"], "node");
        // non-MPI: affinity but no tolerations
        assert!(
            jobs[0]["template"]["spec"]["template"]["spec"]
                .get("tolerations")
                .is_none()
        );
        assert!(
            jobs[0]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"].is_object()
        );
    }

    #[test]
    fn existing_affinity_is_replaced_and_tolerations_appended() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.job_template["spec"]["workload"]["trainJob"]["runtimePatches"][0]["trainingRuntimeSpec"]
            ["template"]["spec"]["replicatedJobs"][0] = json!({
            "name": "node",
            "template": {"spec": {"template": {"spec": {
                "affinity": {"nodeAffinity": {"old": true}, "podAffinity": {"keep": true}},
                "tolerations": [{"key": "mine", "operator": "Exists"}]}}}}
        });
        let p = place(&wf, &h100(1)).unwrap();
        let pod =
            &patch_job(train_job(&p.groups[0]), "node")["template"]["spec"]["template"]["spec"];
        assert_eq!(pod["affinity"]["podAffinity"], json!({"keep": true}));
        assert!(pod["affinity"]["nodeAffinity"].get("old").is_none());
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "mine", "operator": "Exists"}, {"operator": "Exists"}])
        );
    }

    #[test]
    fn compute_domain_per_group_sized_to_group() {
        let p = place(&gb200_workflow(4), &fleet(8, "NVIDIA-GB200")).unwrap();
        assert_eq!(group_names(&p), ["group-0", "group-1"]);
        assert_eq!(p.workflow_dependencies.len(), 1);
        assert_eq!(p.workflow_dependencies[0]["metadata"]["name"], "unrelated");
        for g in &p.groups {
            let job = format!("wf-{}", g.name);
            assert_eq!(g.manifests.len(), 3);
            let (rt, cd, tj) = (&g.manifests[0], &g.manifests[1], &g.manifests[2]);
            assert_eq!(rt["kind"], "TrainingRuntime");
            assert_eq!(rt["metadata"]["name"], format!("wf-runtime-{job}"));
            assert_eq!(rt["metadata"]["namespace"], "team");
            assert_eq!(cd["kind"], "ComputeDomain");
            assert_eq!(cd["metadata"]["name"], format!("wf-compute-domain-{job}"));
            assert_eq!(cd["spec"]["numNodes"], 4);
            assert_eq!(
                cd["spec"]["channel"]["resourceClaimTemplate"]["name"],
                format!("wf-channel-{job}")
            );
            assert_eq!(
                rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                    ["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
                format!("wf-channel-{job}")
            );
            // Structural names and labels stay.
            assert_eq!(
                rt["spec"]["template"]["spec"]["replicatedJobs"][0]["name"],
                "node"
            );
            assert_eq!(rt["metadata"]["labels"]["app"], "wf");
            assert_eq!(tj["kind"], "TrainJob");
            assert_eq!(tj["metadata"]["name"], job);
            assert_eq!(
                tj["spec"]["runtimeRef"]["name"],
                format!("wf-runtime-{job}")
            );
        }
    }

    #[test]
    fn compute_domain_sized_to_all_nodes_group() {
        let p = place(&gb200_workflow(0), &fleet(3, "NVIDIA-GB200")).unwrap();
        assert_eq!(p.nodes_per_job, 3);
        let g = &p.groups[0];
        assert_eq!(g.manifests[1]["spec"]["numNodes"], 3);
        assert_eq!(
            g.manifests[1]["metadata"]["name"],
            "wf-compute-domain-wf-job"
        );
        assert_eq!(g.manifests[2]["spec"]["trainer"]["numNodes"], 3);
    }

    #[test]
    fn compute_domain_unpinned_sized_to_nodes_per_job() {
        let mut wf = gb200_workflow(2);
        wf.spec
            .orchestration
            .insert("placement".into(), json!("Unpinned"));
        let p = place(&wf, &fleet(5, "NVIDIA-GB200")).unwrap();
        assert_eq!(p.groups[0].manifests[1]["spec"]["numNodes"], 2);
    }

    #[test]
    fn gang_fields_survive_renaming() {
        // The queue is spelled like the runtime's name, so renaming would rewrite it.
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.gang_scheduler = Some(crate::api::GangSchedulerSpec {
            scheduler_name: "wf-runtime".into(),
            queue: Some("wf-runtime".into()),
            queue_label_key: None,
        });
        let rj = &mut wf.spec.dependencies[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        rj["metadata"]["labels"]["kai.scheduler/queue"] = json!("wf-runtime");
        rj["spec"]["template"]["spec"]["schedulerName"] = json!("wf-runtime");
        let p = place(&wf, &h100(1)).unwrap();
        let rt = &p.groups[0].manifests[0];
        assert_eq!(rt["metadata"]["name"], "wf-runtime-wf-job");
        let job = &rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        assert_eq!(
            job["metadata"]["labels"]["kai.scheduler/queue"],
            "wf-runtime"
        );
        assert_eq!(
            job["spec"]["template"]["spec"]["schedulerName"],
            "wf-runtime"
        );
        // Absent stays absent.
        let launcher = &rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"];
        assert!(
            launcher["spec"]["template"]["spec"]
                .get("schedulerName")
                .is_none()
        );

        // Only references are renamed: a schedulerName or label spelled like a dependency is
        // not a reference, with or without a gang intent.
        wf.spec.gang_scheduler = None;
        let p = place(&wf, &h100(1)).unwrap();
        let job =
            &p.groups[0].manifests[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"];
        assert_eq!(
            job["spec"]["template"]["spec"]["schedulerName"],
            "wf-runtime"
        );
        let train_job = p.groups[0].manifests.last().unwrap();
        assert_eq!(train_job["spec"]["runtimeRef"]["name"], "wf-runtime-wf-job");
    }

    #[test]
    fn dependency_when_is_stripped() {
        let mut wf = mpi_workflow("wf", 1, json!({}));
        wf.spec.dependencies[0]["when"] = json!({"platform": {"equals": "aws"}});
        let p = place(&wf, &h100(1)).unwrap();
        assert!(p.groups[0].manifests[0].get("when").is_none());
    }
}
