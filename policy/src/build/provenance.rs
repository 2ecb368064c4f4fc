//! Where the build put the values a WorkloadRun's spec wrote: the facts that let the override
//! stage tell a platform row that changes one of the user's values from a row that changes a
//! generated one.

use nvcre_engine::{FieldPath, Segment};
use serde_json::Value;

use crate::api::{Workflow, WorkloadRun};

/// One place of the built Workflow that holds a value of the WorkloadRun's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Where, from the Workflow's root (`spec.dependencies[0].spec.template…image`).
    pub at: FieldPath,
    /// The WorkloadRun field that wrote it (`spec.image`, `spec.env[2]`).
    pub field: FieldPath,
    /// True when the value at `at` is the user's block with generated parts added (the worker
    /// `resources` get the GPU count when the block names none): below `at`, only what the
    /// user's block itself has is theirs.
    pub block: bool,
}

/// The places of `workflow` (as built from `run`, before any override) that hold values of
/// `run.spec`: the image of every container and init container of the generated
/// TrainingRuntime and of the trainer; the worker's `resources` (a block) and `initContainers`;
/// each `spec.env` entry, `spec.volumes` and `spec.volumeMounts` item where it landed; the
/// workload labels (a block).
pub fn written(run: &WorkloadRun, workflow: &Workflow) -> Vec<Written> {
    let spec = &run.spec;
    let mut out = Vec::new();
    let field = |name: &str| FieldPath::root().key("spec").key(name);
    let root = FieldPath::root().key("spec");
    // The runtime the TrainJob runs on, as the build named it.
    let runtime_name = get_path(
        &workflow.spec.job_template,
        &["spec", "workload", "trainJob", "runtimeRef", "name"],
    )
    .and_then(Value::as_str)
    .unwrap_or_default();
    let job_template = root.clone().key("jobTemplate").key("spec");
    let trainer = job_template
        .clone()
        .key("workload")
        .key("trainJob")
        .key("trainer");
    if !spec.image.is_empty() {
        out.push(Written {
            at: trainer.key("image"),
            field: field("image"),
            block: false,
        });
    }
    if spec
        .workload_metadata
        .as_ref()
        .is_some_and(|m| !m.labels.is_empty())
    {
        out.push(Written {
            at: job_template.key("workloadMetadata").key("labels"),
            field: field("workloadMetadata").key("labels"),
            block: true,
        });
    }
    let Some((d, runtime)) = workflow
        .spec
        .dependencies
        .iter()
        .enumerate()
        .find(|(_, d)| {
            d.get("kind").and_then(Value::as_str) == Some("TrainingRuntime")
                && get_path(d, &["metadata", "name"]).and_then(Value::as_str) == Some(runtime_name)
        })
    else {
        return out;
    };
    let jobs = get_path(runtime, &["spec", "template", "spec", "replicatedJobs"])
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (j, job) in jobs.iter().enumerate() {
        let Some(pod) = get_path(job, &["template", "spec", "template", "spec"]) else {
            continue;
        };
        let worker = job.get("name").and_then(Value::as_str) == Some("node");
        let at = root
            .clone()
            .key("dependencies")
            .index(d)
            .key("spec")
            .key("template")
            .key("spec")
            .key("replicatedJobs")
            .index(j)
            .key("template")
            .key("spec")
            .key("template")
            .key("spec");
        for list in ["initContainers", "containers"] {
            for (c, container) in items(pod.get(list)).iter().enumerate() {
                let at = at.clone().key(list).index(c);
                if !spec.image.is_empty()
                    && container.get("image").and_then(Value::as_str) == Some(spec.image.as_str())
                {
                    out.push(Written {
                        at: at.clone().key("image"),
                        field: field("image"),
                        block: false,
                    });
                }
                if list == "containers" {
                    container_values(run, container, &at, worker, &mut out);
                }
            }
        }
        if worker {
            if !spec.init_containers.is_empty() {
                out.push(Written {
                    at: at.clone().key("initContainers"),
                    field: field("initContainers"),
                    block: true,
                });
            }
            same_items(
                &spec.volumes,
                items(pod.get("volumes")),
                (&at.clone().key("volumes"), &field("volumes")),
                &mut out,
            );
        }
    }
    out
}

/// A container's user values: each `spec.env` entry (by name, the last one of a name) and, on
/// the worker, the `resources` block and each `spec.volumeMounts` item.
fn container_values(
    run: &WorkloadRun,
    container: &Value,
    at: &FieldPath,
    worker: bool,
    out: &mut Vec<Written>,
) {
    let spec = &run.spec;
    let env = items(container.get("env"));
    for (u, e) in spec.env.iter().enumerate() {
        if spec
            .env
            .iter()
            .skip(u + 1)
            .any(|later| later.name == e.name)
        {
            continue;
        }
        if let Some(m) = env
            .iter()
            .position(|x| x.get("name").and_then(Value::as_str) == Some(e.name.as_str()))
        {
            out.push(Written {
                at: at.clone().key("env").index(m),
                field: FieldPath::root().key("spec").key("env").index(u),
                block: false,
            });
        }
    }
    if !worker {
        return;
    }
    if spec.resources.is_some() {
        out.push(Written {
            at: at.clone().key("resources"),
            field: FieldPath::root().key("spec").key("resources"),
            block: true,
        });
    }
    same_items(
        &spec.volume_mounts,
        items(container.get("volumeMounts")),
        (
            &at.clone().key("volumeMounts"),
            &FieldPath::root().key("spec").key("volumeMounts"),
        ),
        out,
    );
}

/// Each user item that appears, equal, in `built`: the first equal item not yet taken.
fn same_items(
    user: &[Value],
    built: &[Value],
    (at, field): (&FieldPath, &FieldPath),
    out: &mut Vec<Written>,
) {
    let mut taken = vec![false; built.len()];
    for (u, item) in user.iter().enumerate() {
        let found = built
            .iter()
            .enumerate()
            .position(|(m, b)| !taken[m] && b == item);
        if let Some(m) = found {
            taken[m] = true;
            out.push(Written {
                at: at.clone().index(m),
                field: field.clone().index(u),
                block: false,
            });
        }
    }
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[][..], Vec::as_slice)
}

/// The WorkloadRun fields whose values an override displaced: `path` (where the displaced value
/// `before` was, from the Workflow's root) at or below a [`Written::at`] (below a block, only
/// where `user`, the WorkloadRun as written, has the same place), cut after the first list index
/// below the field (`spec.env[2]`, not `spec.env[2].value`); or `path` above it (the override
/// took a whole mapping or list that held the user's value) when `after`, the Workflow once
/// every override applied, no longer holds the same value there.
pub fn fields_displaced(
    written: &[Written],
    path: &FieldPath,
    before: &Value,
    user: &Value,
    after: &Value,
) -> Vec<FieldPath> {
    let mut out: Vec<FieldPath> = Vec::new();
    for w in written {
        let field = if let Some(rest) = strip_prefix(path.segments(), w.at.segments()) {
            let mut segs = w.field.segments().to_vec();
            if w.block {
                segs.extend_from_slice(rest);
                if FieldPath::from_segments(segs.clone()).get(user).is_none() {
                    continue;
                }
            }
            cut_after_index(segs, w.field.segments().len())
        } else if let Some(inner) = strip_prefix(w.at.segments(), path.segments()) {
            let was = FieldPath::from_segments(inner.to_vec()).get(before);
            if was.is_none() || w.at.get(after) == was {
                continue;
            }
            w.field.clone()
        } else {
            continue;
        };
        if !out.contains(&field) {
            out.push(field);
        }
    }
    out
}

fn strip_prefix<'a>(path: &'a [Segment], prefix: &[Segment]) -> Option<&'a [Segment]> {
    (path.len() >= prefix.len() && path[..prefix.len()] == *prefix).then(|| &path[prefix.len()..])
}

/// `segs` up to and including the first list index at or after position `from`.
fn cut_after_index(mut segs: Vec<Segment>, from: usize) -> FieldPath {
    if let Some(i) = segs
        .iter()
        .skip(from)
        .position(|s| matches!(s, Segment::Index(_)))
    {
        segs.truncate(from + i + 1);
    }
    FieldPath::from_segments(segs)
}

/// The value at `keys` below `v`, each a mapping's key: a lookup without the allocations of a
/// JSON pointer's parse (the walk reads the same few fields of every rendered Workflow).
fn get_path<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |v, k| v.get(*k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::build_workflow;
    use crate::build::fixtures::{all_reduce, params};
    use serde_json::json;

    fn user_run() -> WorkloadRun {
        all_reduce(json!({
            "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "MINE", "value": "1"},
                    {"name": "MINE", "value": "2"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "initContainers": [{"name": "prep", "image": "busybox"}],
            "resources": {"limits": {"memory": "1Gi"}},
            "workloadMetadata": {"labels": {"team": "a"}},
        }))
    }

    fn shown(w: &[Written]) -> Vec<String> {
        w.iter()
            .map(|w| {
                format!(
                    "{} <- {}{}",
                    w.at,
                    w.field,
                    if w.block { " (block)" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn every_user_value_of_an_mpi_run_is_found_where_the_build_put_it() {
        let run = user_run();
        let wf = build_workflow(&run, &params()).expect("builds");
        let worker =
            "spec.dependencies[0].spec.template.spec.replicatedJobs[0].template.spec.template.spec";
        let launcher =
            "spec.dependencies[0].spec.template.spec.replicatedJobs[1].template.spec.template.spec";
        assert_eq!(
            shown(&written(&run, &wf)),
            vec![
                "spec.jobTemplate.spec.workload.trainJob.trainer.image <- spec.image".to_string(),
                "spec.jobTemplate.spec.workloadMetadata.labels <- spec.workloadMetadata.labels (block)".into(),
                format!("{worker}.containers[0].image <- spec.image"),
                format!("{worker}.containers[0].env[9] <- spec.env[0]"),
                format!("{worker}.containers[0].env[10] <- spec.env[2]"),
                format!("{worker}.containers[0].resources <- spec.resources (block)"),
                format!("{worker}.containers[0].volumeMounts[2] <- spec.volumeMounts[0]"),
                format!("{worker}.initContainers <- spec.initContainers (block)"),
                format!("{worker}.volumes[1] <- spec.volumes[0]"),
                format!("{launcher}.initContainers[0].image <- spec.image"),
                format!("{launcher}.containers[0].image <- spec.image"),
                format!("{launcher}.containers[0].env[9] <- spec.env[0]"),
                format!("{launcher}.containers[0].env[10] <- spec.env[2]"),
            ]
        );
    }

    #[test]
    fn a_displaced_path_maps_to_the_field_the_user_wrote() {
        let run = user_run();
        let wf = build_workflow(&run, &params()).expect("builds");
        let w = written(&run, &wf);
        let user = serde_json::to_value(&run).expect("json");
        let after = serde_json::to_value(&wf).expect("json");
        let worker =
            "spec.dependencies[0].spec.template.spec.replicatedJobs[0].template.spec.template.spec";
        let at = |p: &str| FieldPath::parse(&format!("{worker}.{p}")).expect("path");
        let fields = |path: &FieldPath, before: Value, after: &Value| -> Vec<String> {
            fields_displaced(&w, path, &before, &user, after)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        // Below a block: only what the user's block has.
        assert_eq!(
            fields(
                &at("containers[0].resources.limits.memory"),
                json!("1Gi"),
                &after
            ),
            vec!["spec.resources.limits.memory"]
        );
        assert_eq!(
            fields(
                &at("containers[0].resources.limits[\"nvidia.com/gpu\"]"),
                json!("8"),
                &after
            ),
            Vec::<String>::new()
        );
        // Inside an item: the item.
        assert_eq!(
            fields(&at("containers[0].env[10].value"), json!("2"), &after),
            vec!["spec.env[2]"]
        );
        assert_eq!(
            fields(&at("initContainers[0].image"), json!("busybox"), &after),
            vec!["spec.initContainers[0]"]
        );
        // Above: every user value it held that is no longer there.
        let container = at("containers[0]").get(&after).cloned().expect("container");
        let mut emptied = after.clone();
        if let Some(slot) = emptied.pointer_mut(&at("containers[0]").pointer()) {
            *slot = json!({"name": "node", "image": "other"});
        }
        assert_eq!(
            fields(&at("containers[0]"), container.clone(), &emptied),
            vec![
                "spec.image",
                "spec.env[0]",
                "spec.env[2]",
                "spec.resources",
                "spec.volumeMounts[0]"
            ]
        );
        // The same container left in place displaces nothing.
        assert_eq!(
            fields(&at("containers[0]"), container, &after),
            Vec::<String>::new()
        );
    }
}
