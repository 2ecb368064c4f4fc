/*!
Cross-crate test suites of the nvcre-policy workspace, and what they share.

- `gen` (also [`generators`]): proptest generators of WorkloadRuns (valid, and near-miss invalid label keys and
  values) and node sets, drawing platforms, GPU architectures, GPU products, provider IDs, the
  base NCCL env and the gang defaults from the rule tables at run time ([`generators::Catalog`]).
- [`k8s`]: the Kubernetes label-key and label-value rules (apimachinery's regular expressions
  and length limits), as an oracle independent of the rule files.
- [`mpi`]: reading the `-x` forwards back out of a rendered trainer command.
- [`fuzz`]: the bodies of the fuzz targets under `fuzz/` (docs/fuzzing.md), which
  `tests/fuzz_regressions.rs` replays over the inputs they found.

The property suites are the integration tests of this crate (`tests/properties.rs`); they run
`PROPTEST_CASES` cases each (32 when unset).
*/

// `gen` is a reserved word from edition 2024 on: callers write `nvcre_tests::r#gen` or use
// the `generators` alias.
pub mod r#gen;
pub use r#gen as generators;
pub mod fuzz;
pub mod k8s;
pub mod mpi;
