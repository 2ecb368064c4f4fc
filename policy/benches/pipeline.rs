//! Throughput of the main paths: render of the seed example, and `check` over a stream of
//! 1,000 WorkloadRun documents (the CI use: thousands of manifests).
//!
//! `cargo bench -p nvcre-domain --bench pipeline`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nvcre_domain::{
    CheckRequest, RenderRequest, check_document, default_rules, render_workload_run,
};
use nvcre_engine::{Source, parse_documents};

const SEED: &str = include_str!("../../examples/nccl-all-reduce.yaml");

fn bench(c: &mut Criterion) {
    let rules = default_rules().expect("rules");
    let seed = parse_documents(&Source::new("seed.yaml", SEED)).expect("seed parses");
    let req = RenderRequest {
        platform: Some("aws".into()),
        gpu_arch: Some("gb300".into()),
        ..RenderRequest::default()
    };
    c.bench_function("render seed aws/gb300", |b| {
        b.iter(|| render_workload_run(&rules, black_box(&seed[0]), &req).expect("renders"))
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
    let check_req = CheckRequest::default();
    group.bench_function("check 1000 WorkloadRuns", |b| {
        b.iter(|| {
            for d in &docs {
                black_box(check_document(&rules, d, &check_req).expect("checks"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
