//! `render`: structurally valid WorkloadRuns rendered in every node context.

use std::sync::{Arc, LazyLock};

use arbitrary::{Arbitrary, Unstructured};
use nvcre_domain::{
    CheckRequest, RenderRequest, check_document, default_rules, expand, nodes_from_documents,
    render_document, selectable_platforms,
};
use nvcre_engine::{RuleSet, Source, parse_documents, to_yaml};
use serde_json::{Map, Value, json};

use crate::generators::Catalog;

static RULES: LazyLock<RuleSet> =
    LazyLock::new(|| default_rules().unwrap_or_else(|e| panic!("the embedded rules: {e}")));

/// The parts of a platform's synthetic node (its `platform-detection` row) the generated
/// nodes copy.
struct Synthetic {
    provider_id: String,
    labels: Map<String, Value>,
    allocatable: Map<String, Value>,
}

/// The platforms `--platform` accepts, with their synthetic nodes.
static PLATFORMS: LazyLock<Vec<(String, Synthetic)>> = LazyLock::new(|| {
    selectable_platforms(&RULES)
        .unwrap_or_else(|e| panic!("platforms: {e}"))
        .into_iter()
        .map(|(p, s)| {
            (
                p,
                Synthetic {
                    provider_id: s.provider_id,
                    labels: s.labels,
                    allocatable: s.allocatable,
                },
            )
        })
        .collect()
});

/// The architectures `--gpu-arch` accepts (the selectable `gpu-defaults` rows).
static ARCHS: LazyLock<Vec<String>> = LazyLock::new(|| {
    Catalog::from_rules(&RULES)
        .unwrap_or_else(|e| panic!("the catalog: {e}"))
        .gpu_architectures
});

/// Values a manifest author writes, so that most generated runs get past admission; `Raw`
/// keeps arbitrary text in play.
const WORDS: &[&str] = &[
    "",
    "nccl",
    "team-a",
    "team-b",
    "high-priority",
    "default",
    "kai-scheduler",
    "runai-scheduler",
    "default-scheduler",
    "kai.scheduler/queue",
    "runai/queue",
    "kueue.x-k8s.io/queue-name",
    "nvidia.com/gpu.clique",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.present",
    "kubernetes.io/hostname",
    "app.kubernetes.io/managed-by",
    "nvcre.nvidia.com/workload-run",
    "clique-0",
    "clique-1",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-GB200",
    "NVIDIA GB300",
    "h100",
    "gb200",
    "aws",
    "onprem",
    "gcp",
    "/usr/local/bin/all_reduce_perf_mpi",
    "/usr/local/mpi/bin/mpirun",
    "train.py",
    "torch.distributed.run",
    "-x",
    "NCCL_DEBUG",
    "NCCL_DEBUG=INFO",
    "INFO",
    "$(id)",
    "`id`",
    "it's",
    "a\nb",
    "\"quoted\"",
    "yes",
    "~",
    "null",
    "0x1F",
    "1e3",
    "Pinned",
    "Unpinned",
    "intra-node",
    "intra-rack",
    "full-scale",
    "30m",
    "1h30m",
    "OpenMPI",
    "MPICH",
    "vpc.amazonaws.com/efa",
    "rdma/ib",
    "nvcr.io/nvidia/pytorch:26.01-py3",
    "cost-center",
    "hpc",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
];

#[derive(Debug, Arbitrary)]
enum Word {
    Pick(u8),
    Raw(String),
}

impl Word {
    fn text(&self) -> String {
        match self {
            Word::Pick(i) => WORDS[usize::from(*i) % WORDS.len()].to_string(),
            Word::Raw(s) => s.clone(),
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Framework {
    Mpi {
        binary: Word,
        mpirun_path: Word,
        args: Vec<Word>,
        mpi_args: Vec<Word>,
        implementation: Option<Word>,
    },
    Torch {
        script: Option<Word>,
        module: Option<Word>,
        args: Vec<Word>,
    },
    Exec {
        command: Vec<Word>,
        args: Vec<Word>,
    },
    Missing,
    Both,
}

#[derive(Debug, Arbitrary)]
struct Gang {
    scheduler_name: Word,
    queue: Option<Word>,
    queue_label_key: Option<Word>,
}

#[derive(Debug, Arbitrary)]
enum Patch {
    Add(Word, Word),
    Replace(Word, Word),
    Remove(Word),
}

#[derive(Debug, Arbitrary)]
struct Override {
    platform: Option<Word>,
    gpu_architecture: Option<Word>,
    workload_kind: Option<Word>,
    expression: Option<Word>,
    labels: Vec<(Word, Word)>,
    queue: Option<Word>,
    env: Vec<(Word, Word)>,
    patch: Vec<Patch>,
    placement: Option<Word>,
}

#[derive(Debug, Arbitrary)]
struct Requirement {
    key: Word,
    operator: Word,
    values: Vec<Word>,
}

#[derive(Debug, Arbitrary)]
struct Target {
    node_selector: Vec<(Word, Word)>,
    match_expressions: Vec<Requirement>,
    node_names: Vec<Word>,
}

#[derive(Debug, Arbitrary)]
struct Orchestration {
    placement: Option<Word>,
    test_scale: Option<Word>,
    repeat_count: Option<i8>,
    max_concurrent: Option<i8>,
    timeout_per_job: Option<Word>,
}

#[derive(Debug, Arbitrary)]
struct GenNode {
    clique: u8,
    gpus: u8,
    /// None: the product of the architecture under test.
    product: Option<Word>,
    cordoned: bool,
    gpu_present: bool,
    extra_label: Option<(Word, Word)>,
}

/// One generated WorkloadRun, its node context and a small node set: the input of
/// [`render`] (`arbitrary` builds it from the fuzzer's bytes).
#[derive(Debug, Arbitrary)]
pub struct RenderInput {
    name: Word,
    legacy_group: bool,
    framework: Framework,
    num_nodes: i8,
    gpus_per_node: Option<i8>,
    mlnx_per_node: Option<i8>,
    nic_resource_name: Option<Word>,
    enable_mnnvl: Option<bool>,
    env: Vec<(Word, Word)>,
    labels: Vec<(Word, Word)>,
    gang: Option<Gang>,
    overrides: Vec<Override>,
    orchestration: Option<Orchestration>,
    target: Option<Target>,
    /// Which `--platform`/`--gpu-arch` combination.
    platform: u8,
    arch: u8,
    nodes: Vec<GenNode>,
    /// Written as YAML (else JSON).
    as_yaml: bool,
}

fn words(ws: &[Word]) -> Value {
    Value::Array(ws.iter().map(|w| Value::String(w.text())).collect())
}

fn pairs(ps: &[(Word, Word)]) -> Value {
    Value::Object(
        ps.iter()
            .map(|(k, v)| (k.text(), Value::String(v.text())))
            .collect(),
    )
}

fn env(ps: &[(Word, Word)]) -> Value {
    Value::Array(
        ps.iter()
            .map(|(k, v)| json!({"name": k.text(), "value": v.text()}))
            .collect(),
    )
}

impl Framework {
    fn to_json(&self) -> Value {
        match self {
            Framework::Mpi {
                binary,
                mpirun_path,
                args,
                mpi_args,
                implementation,
            } => {
                let mut m = json!({"binary": binary.text(), "mpirunPath": mpirun_path.text(), "args": words(args), "mpiArgs": words(mpi_args)});
                if let Some(i) = implementation {
                    m["mpiImplementation"] = Value::String(i.text());
                }
                json!({ "mpi": m })
            }
            Framework::Torch {
                script,
                module,
                args,
            } => {
                let mut m = json!({ "args": words(args) });
                if let Some(s) = script {
                    m["script"] = Value::String(s.text());
                }
                if let Some(s) = module {
                    m["module"] = Value::String(s.text());
                }
                json!({ "torch": m })
            }
            Framework::Exec { command, args } => {
                json!({"exec": {"command": words(command), "args": words(args)}})
            }
            Framework::Missing => json!({}),
            Framework::Both => json!({
                "exec": {"command": ["true"]},
                "mpi": {"binary": "b", "mpirunPath": "/m"},
            }),
        }
    }
}

impl Override {
    fn to_json(&self) -> Value {
        let mut when = Map::new();
        if let Some(p) = &self.platform {
            when.insert("platform".into(), json!({"equals": p.text()}));
        }
        if let Some(a) = &self.gpu_architecture {
            when.insert("gpuArchitecture".into(), json!({"in": [a.text()]}));
        }
        if let Some(k) = &self.workload_kind {
            when.insert("workloadKind".into(), Value::String(k.text()));
        }
        if let Some(e) = &self.expression {
            when.insert("expression".into(), Value::String(e.text()));
        }
        let mut o = json!({ "when": when });
        let mut spec = Map::new();
        if !self.labels.is_empty() {
            spec.insert(
                "workloadMetadata".into(),
                json!({"labels": pairs(&self.labels)}),
            );
        }
        if let Some(q) = &self.queue {
            spec.insert("gangScheduler".into(), json!({"queue": q.text()}));
        }
        if !self.env.is_empty() {
            spec.insert("env".into(), env(&self.env));
        }
        if !spec.is_empty() {
            o["jobTemplate"] = json!({ "spec": spec });
        }
        if !self.patch.is_empty() {
            o["jobTemplatePatch"] = Value::Array(
                self.patch
                    .iter()
                    .map(|p| match p {
                        Patch::Add(path, v) => {
                            json!({"op": "add", "path": path.text(), "value": v.text()})
                        }
                        Patch::Replace(path, v) => {
                            json!({"op": "replace", "path": path.text(), "value": v.text()})
                        }
                        Patch::Remove(path) => json!({"op": "remove", "path": path.text()}),
                    })
                    .collect(),
            );
        }
        if let Some(p) = &self.placement {
            o["orchestration"] = json!({"placement": p.text()});
        }
        o
    }
}

impl RenderInput {
    fn to_json(&self) -> Value {
        let mut spec = json!({
            "image": "nvcr.io/nvidia/pytorch:26.01-py3",
            "framework": self.framework.to_json(),
            "numNodes": self.num_nodes,
        });
        let s = spec.as_object_mut();
        let Some(s) = s else {
            return Value::Null;
        };
        if let Some(g) = self.gpus_per_node {
            s.insert("gpusPerNode".into(), json!(g));
        }
        if let Some(m) = self.mlnx_per_node {
            s.insert("mlnxPerNode".into(), json!(m));
        }
        if let Some(n) = &self.nic_resource_name {
            s.insert("nicResourceName".into(), Value::String(n.text()));
        }
        if let Some(b) = self.enable_mnnvl {
            s.insert("enableMNNVL".into(), json!(b));
        }
        if !self.env.is_empty() {
            s.insert("env".into(), env(&self.env));
        }
        if !self.labels.is_empty() {
            s.insert(
                "workloadMetadata".into(),
                json!({"labels": pairs(&self.labels)}),
            );
        }
        if let Some(g) = &self.gang {
            let mut m = json!({"schedulerName": g.scheduler_name.text()});
            if let Some(q) = &g.queue {
                m["queue"] = Value::String(q.text());
            }
            if let Some(k) = &g.queue_label_key {
                m["queueLabelKey"] = Value::String(k.text());
            }
            s.insert("gangScheduler".into(), m);
        }
        if !self.overrides.is_empty() {
            s.insert(
                "overrides".into(),
                Value::Array(self.overrides.iter().map(Override::to_json).collect()),
            );
        }
        if let Some(o) = &self.orchestration {
            let mut m = Map::new();
            if let Some(p) = &o.placement {
                m.insert("placement".into(), Value::String(p.text()));
            }
            if let Some(t) = &o.test_scale {
                m.insert("testScale".into(), Value::String(t.text()));
            }
            if let Some(r) = o.repeat_count {
                m.insert("repeatCount".into(), json!(r));
            }
            if let Some(r) = o.max_concurrent {
                m.insert("maxConcurrent".into(), json!(r));
            }
            if let Some(t) = &o.timeout_per_job {
                m.insert("timeoutPerJob".into(), Value::String(t.text()));
            }
            s.insert("orchestration".into(), Value::Object(m));
        }
        if let Some(t) = &self.target {
            let mut m = Map::new();
            if !t.node_selector.is_empty() {
                m.insert("nodeSelector".into(), pairs(&t.node_selector));
            }
            if !t.match_expressions.is_empty() {
                m.insert(
                    "matchExpressions".into(),
                    Value::Array(
                        t.match_expressions
                            .iter()
                            .map(|r| {
                                json!({"key": r.key.text(), "operator": r.operator.text(), "values": words(&r.values)})
                            })
                            .collect(),
                    ),
                );
            }
            if !t.node_names.is_empty() {
                m.insert("nodeNames".into(), words(&t.node_names));
            }
            s.insert("target".into(), Value::Object(m));
        }
        let group = if self.legacy_group {
            "cre.nvidia.com/v1alpha1"
        } else {
            "nvcre.nvidia.com/v1alpha1"
        };
        json!({
            "apiVersion": group,
            "kind": "WorkloadRun",
            "metadata": {"name": self.name.text(), "namespace": "default"},
            "spec": spec,
        })
    }

    /// A NodeList of the generated nodes on `platform`, of architecture `arch` unless a node
    /// names its own product.
    fn node_list(&self, synthetic: &Synthetic, arch: &str) -> Value {
        let items: Vec<Value> = self
            .nodes
            .iter()
            .take(16)
            .enumerate()
            .map(|(i, n)| {
                let name = format!("node-{i}");
                let mut labels = synthetic.labels.clone();
                labels.insert("kubernetes.io/hostname".into(), json!(name));
                if n.gpu_present {
                    labels.insert("nvidia.com/gpu.present".into(), json!("true"));
                }
                let product = match &n.product {
                    Some(w) => w.text(),
                    None => format!("NVIDIA-{}", arch.to_uppercase()),
                };
                labels.insert("nvidia.com/gpu.product".into(), json!(product));
                labels.insert(
                    "nvidia.com/gpu.clique".into(),
                    json!(format!("clique-{}", n.clique % 3)),
                );
                if let Some((k, v)) = &n.extra_label {
                    labels.insert(k.text(), json!(v.text()));
                }
                let mut allocatable = synthetic.allocatable.clone();
                allocatable.insert("nvidia.com/gpu".into(), json!((n.gpus % 9).to_string()));
                json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": synthetic.provider_id, "unschedulable": n.cordoned},
                    "status": {"allocatable": allocatable},
                })
            })
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "items": items})
    }
}

/// Every manifest written as YAML reads back as itself.
fn round_trip(values: &[Value]) {
    for v in values {
        super::yaml_round_trip(v);
    }
}

/// Renders `doc` for `req` and, when it renders and `expand_too`, expands it.
fn render_and_expand(doc: &nvcre_engine::Document, req: &RenderRequest, expand_too: bool) {
    match render_document(&RULES, doc, req) {
        Ok(rendered) => {
            round_trip(std::slice::from_ref(&rendered.workflow));
            if expand_too {
                match expand(&RULES, &rendered) {
                    Ok(expanded) => round_trip(&expanded.manifests),
                    Err(e) => {
                        let _ = e.to_string();
                    }
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let check = CheckRequest {
        platform: req.platform.clone(),
        gpu_arch: req.gpu_arch.clone(),
        nodes: req.nodes.clone(),
    };
    match check_document(&RULES, doc, &check) {
        Ok(findings) => {
            let _ = findings.len();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// [`render`] of the input `arbitrary` builds from `data` (as the fuzz target does).
pub fn render_bytes(data: &[u8]) {
    if let Ok(input) = RenderInput::arbitrary_take_rest(Unstructured::new(data)) {
        render(&input);
    }
}

/// Renders the generated WorkloadRun (written as YAML or JSON) as `render` does: without a
/// platform; for one `--platform P --gpu-arch A` of the combinations the rule tables give
/// (chosen by the input, so a run covers them all), with `--expand` over the synthetic
/// nodes; and with `--nodes-file` of the generated node set (up to 16 nodes of P with GPU
/// products of A, cliques, cordons, GPU counts), `--expand` too. Each context is also
/// checked as `check` does.
///
/// # Panics
/// On a panic underneath; when a generated WorkloadRun does not parse, or a rendered
/// manifest written as YAML reads back as another value.
pub fn render(input: &RenderInput) {
    let value = input.to_json();
    let text = if input.as_yaml {
        to_yaml(&value).unwrap_or_else(|e| panic!("a WorkloadRun does not write as YAML: {e}"))
    } else {
        serde_json::to_string_pretty(&value).unwrap_or_default()
    };
    let docs = match parse_documents(&Source::new("run.yaml", text.clone())) {
        Ok(docs) => docs,
        // JSON allows control characters other than C0 raw inside strings; the YAML reader
        // refuses them (docs/input.md), naming the character: an input error, not a bug.
        Err(e)
            if !input.as_yaml
                && text
                    .chars()
                    .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
                && e.to_string().contains("unexpected control character U+") =>
        {
            return;
        }
        Err(e) => panic!("a generated WorkloadRun does not parse: {e}\n--- input:\n{text:?}"),
    };
    let Some(doc) = docs.first() else {
        return;
    };
    render_and_expand(doc, &RenderRequest::default(), false);
    let (platform, synthetic) = &PLATFORMS[usize::from(input.platform) % PLATFORMS.len()];
    let arch = &ARCHS[usize::from(input.arch) % ARCHS.len()];
    let flags = RenderRequest {
        platform: Some(platform.clone()),
        gpu_arch: Some(arch.clone()),
        ..RenderRequest::default()
    };
    render_and_expand(doc, &flags, true);
    if !input.nodes.is_empty() {
        let list = input.node_list(synthetic, arch);
        match nodes_from_documents(std::slice::from_ref(&list)) {
            Ok(nodes) => {
                let req = RenderRequest {
                    nodes: Some(Arc::new(nodes)),
                    ..RenderRequest::default()
                };
                render_and_expand(doc, &req, true);
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}
