//! Writes the benchmark corpus: a seeded, reproducible mix of WorkloadRuns of every
//! framework / gang / label / override / placement shape, the Workflows rendered from them, and
//! TrainingRuntime + TrainJob pairs from `render --expand`.
//!
//! `cargo run --release -p nvcre-policy --example bench_corpus -- OUT_DIR [DOCS] [SEED]`
//!
//! Writes into OUT_DIR:
//! - `mixed.yaml`: every document as one multi-document stream;
//! - `mixed/`: the same documents, one file each (`d000000.yaml`, …);
//! - `workloadruns.yaml`: DOCS WorkloadRuns only, as one stream;
//! - `single.yaml`: one WorkloadRun (the cold-start input);
//! - `renderable.yaml`: up to 1,000 WorkloadRuns that render for `--platform aws --gpu-arch
//!   h100` (the `render` measurement's input);
//! - `peers-docs.json`: the first 1,000 WorkloadRuns as a JSON array (the CEL peers' input).
//!
//! DOCS (default 10,000) counts the documents of `mixed.yaml`; SEED (default 1) fixes every
//! choice, so a seed always gives the same bytes.

use std::path::Path;
use std::process::ExitCode;

use nvcre_domain::{RenderRequest, default_rules, expand, render_document};
use nvcre_engine::{Source, parse_documents, to_yaml};
use nvcre_tests::generators::Catalog;
use serde_json::{Value, json};

/// SplitMix64: a few lines of well-known arithmetic, enough for choosing shapes reproducibly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// WorkloadRun number `i`: the shape is a mixed-radix reading of `i` (so every combination of
/// framework × gang × labels × overrides × placement appears), the details come from `rng`.
fn workload_run(i: usize, rng: &mut Rng, cat: &Catalog) -> Value {
    let framework = match i % 4 {
        0 => {
            json!({"torch": {"script": "/workspace/train.py", "args": ["--steps", rng.below(1000).to_string()]}})
        }
        1 => json!({"torch": {"module": "megatron.training", "args": ["--tp", "2"]}}),
        2 => json!({"mpi": {
            "binary": "/usr/local/bin/all_reduce_perf_mpi",
            "args": ["-b", "8", "-e", "32G", "-f", "2", "-n", (50 + rng.below(100)).to_string()],
            "mpirunPath": "/usr/local/mpi/bin/mpirun"}}),
        _ => json!({"exec": {"command": ["/bin/sh", "-c"], "args": ["nvidia-smi && sleep 1"]}}),
    };
    let mut spec = json!({
        "image": format!("nvcr.io/nvidia/pytorch:26.{:02}-py3", 1 + rng.below(12)),
        "framework": framework,
        "numNodes": 1 + rng.below(8),
        "target": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
        "env": [{"name": "NCCL_DEBUG", "value": *rng.pick(&["INFO", "WARN"])}],
    });
    let s = spec.as_object_mut().expect("spec is a map");
    match (i / 4) % 4 {
        0 => {}
        1 => {
            s.insert(
                "gangScheduler".into(),
                json!({"schedulerName": "kai-scheduler", "queue": format!("team-{}", rng.below(5))}),
            );
        }
        2 => {
            s.insert(
                "gangScheduler".into(),
                json!({"schedulerName": "kai-scheduler"}),
            );
        }
        _ => {
            s.insert(
                "gangScheduler".into(),
                json!({"schedulerName": "kai-scheduler", "queue": "high-priority",
                       "queueLabelKey": "kai.scheduler/queue"}),
            );
        }
    }
    match (i / 16) % 3 {
        0 => {}
        1 => {
            s.insert(
                "workloadMetadata".into(),
                json!({"labels": {"kueue.x-k8s.io/queue-name": format!("gpu-team-{}", rng.below(4))}}),
            );
        }
        _ => {
            s.insert(
                "workloadMetadata".into(),
                json!({"labels": {"cost-center": "hpc", "example.com/owner": format!("user{}", rng.below(50))}}),
            );
        }
    }
    match (i / 48) % 3 {
        0 => {}
        1 => {
            s.insert(
                "overrides".into(),
                json!([{"when": {"platform": {"equals": &rng.pick(&cat.platforms).0}},
                        "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"cost-center": "hpc"}}}}}]),
            );
        }
        _ => {
            s.insert(
                "overrides".into(),
                json!([{"when": {"gpuArchitecture": {"equals": rng.pick(&cat.gpu_architectures)}},
                        "jobTemplate": {"spec": {"workloadMetadata": {"labels": {"tier": "gold"}}}}}]),
            );
        }
    }
    if (i / 144) % 2 == 1 {
        s.insert(
            "orchestration".into(),
            json!({"placement": "Unpinned", "testScale": "full-scale"}),
        );
        s.insert(
            "target".into(),
            json!({"matchExpressions": [{"key": "nvidia.com/gpu.clique", "operator": "In",
                                          "values": [format!("clique-{}", rng.below(4))]}]}),
        );
    }
    if i.is_multiple_of(3) {
        s.insert(
            "bandwidthMeasurement".into(),
            json!({"logProfileRef": "nccl-bandwidth", "testType": "all_reduce"}),
        );
    }
    // One in 23 breaks an admission rule (a controller-owned label key), so reports have
    // findings to show.
    if i.is_multiple_of(23) {
        s.insert(
            "workloadMetadata".into(),
            json!({"labels": {"nvcre.nvidia.com/owner": "me"}}),
        );
    }
    json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "WorkloadRun",
        "metadata": {"name": format!("run-{i}")},
        "spec": spec,
    })
}

fn yaml(v: &Value) -> Result<String, String> {
    to_yaml(v).map_err(|e| e.to_string())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

fn run(out: &Path, docs: usize, seed: u64) -> Result<(), String> {
    let rules = default_rules().map_err(|e| format!("rules: {e:?}"))?;
    // Platforms and architectures come from the rule tables, so a new table row is benchmarked too.
    let catalog = Catalog::from_rules(&rules)?;
    let dir = out.join("mixed");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("clearing {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut rng = Rng(seed);
    let mut mixed: Vec<String> = Vec::with_capacity(docs);
    let mut runs: Vec<String> = Vec::with_capacity(docs);
    let mut peers: Vec<Value> = Vec::new();
    let mut renderable: Vec<String> = Vec::new();
    let aws_h100 = RenderRequest {
        platform: Some("aws".into()),
        gpu_arch: Some("h100".into()),
        ..RenderRequest::default()
    };
    let mut i = 0usize;
    while mixed.len() < docs || runs.len() < docs {
        let wr = workload_run(i, &mut rng, &catalog);
        let text = yaml(&wr)?;
        if peers.len() < 1000 {
            peers.push(wr.clone());
        }
        if runs.len() < docs {
            runs.push(text.clone());
        }
        if mixed.len() < docs {
            mixed.push(text.clone());
            let platform = rng.pick(&catalog.platforms).0.as_str();
            let arch = rng.pick(&catalog.gpu_architectures).as_str();
            let req = RenderRequest {
                platform: Some(platform.into()),
                gpu_arch: Some(arch.into()),
                ..RenderRequest::default()
            };
            let parsed = parse_documents(&Source::new(format!("run-{i}.yaml"), text))
                .map_err(|e| e.to_string())?;
            if renderable.len() < 1000 && render_document(&rules, &parsed[0], &aws_h100).is_ok() {
                renderable.push(yaml(&wr)?);
            }
            // Runs that break a rule do not render; they stay in the corpus as WorkloadRuns.
            if let Ok(rendered) = render_document(&rules, &parsed[0], &req) {
                mixed.push(yaml(&rendered.workflow)?);
                if i.is_multiple_of(3)
                    && let Ok(expanded) = expand(&rules, &rendered)
                {
                    // The first group's TrainingRuntime and TrainJob.
                    for kind in ["TrainingRuntime", "TrainJob"] {
                        if let Some(m) = expanded
                            .manifests
                            .iter()
                            .find(|m| m.get("kind").and_then(Value::as_str) == Some(kind))
                        {
                            mixed.push(yaml(m)?);
                        }
                    }
                }
            }
        }
        i += 1;
    }
    mixed.truncate(docs);
    for (n, d) in mixed.iter().enumerate() {
        write(&dir.join(format!("d{n:06}.yaml")), d)?;
    }
    write(&out.join("mixed.yaml"), &mixed.join("---\n"))?;
    write(&out.join("workloadruns.yaml"), &runs.join("---\n"))?;
    write(&out.join("single.yaml"), &runs[1])?;
    write(&out.join("renderable.yaml"), &renderable.join("---\n"))?;
    let peers = serde_json::to_string(&peers).map_err(|e| e.to_string())?;
    write(&out.join("peers-docs.json"), &peers)?;
    println!(
        "{}: {docs} documents ({} WorkloadRuns rendered), seed {seed}",
        out.display(),
        i
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        eprintln!("usage: bench_corpus OUT_DIR [DOCS] [SEED]");
        return ExitCode::from(2);
    };
    let docs = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let seed = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("creating {out}: {e}");
        return ExitCode::from(2);
    }
    match run(Path::new(out), docs, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_corpus: {e}");
            ExitCode::from(2)
        }
    }
}
