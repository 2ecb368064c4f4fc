//! Throughput of the main paths: loading and compiling the embedded rule packs, `render` of one
//! WorkloadRun per framework, `check` of one Workflow, and `check` over a stream of 1,000
//! WorkloadRun documents (the CI use: thousands of manifests). The whole-corpus and end-to-end
//! figures come from `bench/run.sh`.
//!
//! `cargo bench -p nvcre-domain --bench pipeline`

use std::hint::black_box;

/// The allocator the CLI and the controller ship with: a render or check makes and frees
/// thousands of small strings and maps, so the system allocator would measure another program.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{Criterion, Throughput, criterion_main};
use nvcre_domain::{
    CheckRequest, RenderRequest, check_document, default_rules, render_workload_run,
};
use nvcre_engine::{Document, Source, parse_documents, to_yaml};

const SEED: &str = include_str!("../../examples/nccl-all-reduce.yaml");

/// The seed example with its framework replaced by `framework` (YAML lines at two spaces).
fn with_framework(framework: &str) -> String {
    let start = SEED
        .find("  framework:\n")
        .expect("the seed has a framework");
    let end = SEED.find("  numNodes:").expect("the seed has numNodes");
    format!("{}{framework}{}", &SEED[..start], &SEED[end..])
}

fn one(name: &str, text: String) -> Document {
    parse_documents(&Source::new(name, text))
        .expect("parses")
        .remove(0)
}

fn bench(c: &mut Criterion) {
    // The embedded set is loaded trusted: its packs compile when first asked for.
    c.bench_function("load the embedded rules", |b| {
        b.iter(|| black_box(default_rules().expect("rules")))
    });
    c.bench_function("load and compile every embedded pack", |b| {
        b.iter(|| {
            let rules = default_rules().expect("rules");
            black_box(rules.packs().len());
            rules
        })
    });
    let rules = default_rules().expect("rules");
    let req = RenderRequest {
        platform: Some("aws".into()),
        gpu_arch: Some("gb300".into()),
        ..RenderRequest::default()
    };
    let frameworks = [
        ("mpi", SEED.to_string()),
        (
            "torch",
            with_framework(
                "  framework:\n    torch:\n      script: /workspace/train.py\n      args: [\"--steps\", \"100\"]\n",
            ),
        ),
        (
            "exec",
            with_framework(
                "  framework:\n    exec:\n      command: [/bin/sh, -c]\n      args: [\"nvidia-smi\"]\n",
            ),
        ),
    ];
    for (name, text) in frameworks {
        let doc = one(&format!("{name}.yaml"), text);
        c.bench_function(&format!("render one {name} WorkloadRun aws/gb300"), |b| {
            b.iter(|| render_workload_run(&rules, black_box(&doc), &req).expect("renders"))
        });
    }

    let seed = one("seed.yaml", SEED.to_string());
    let rendered = render_workload_run(&rules, &seed, &req).expect("renders");
    let workflow = one(
        "workflow.yaml",
        to_yaml(&rendered.workflow).expect("serialises"),
    );
    let check_req = CheckRequest::default();
    c.bench_function("check one Workflow", |b| {
        b.iter(|| check_document(&rules, black_box(&workflow), &check_req).expect("checks"))
    });
    c.bench_function("check one WorkloadRun", |b| {
        b.iter(|| check_document(&rules, black_box(&seed), &check_req).expect("checks"))
    });

    let stream: String = (0..1000)
        .map(|i| SEED.replace("name: nccl-all-reduce", &format!("name: run-{i}")))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let source = Source::new("stream.yaml", stream);
    let mut group = c.benchmark_group("check");
    group.throughput(Throughput::Elements(1000));
    group.sample_size(10);
    group.bench_function("parse 1000 WorkloadRuns", |b| {
        b.iter(|| parse_documents(black_box(&source)).expect("parses"))
    });
    let docs = parse_documents(&source).expect("parses");
    group.bench_function("check 1000 WorkloadRuns", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(check_document(&rules, d, &check_req).expect("checks"));
            }
        })
    });
    group.finish();
}

// criterion_group! defines an undocumented public function.
#[allow(missing_docs)]
mod group {
    use super::bench;
    criterion::criterion_group!(benches, bench);
}
use group::benches;
criterion_main!(benches);
