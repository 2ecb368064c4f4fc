//! Generated WorkloadRuns rendered in every node context: see `nvcre_tests::fuzz::render`.
//! (`arbitrary` builds the input from the bytes as `nvcre_tests::fuzz::render_bytes` does, so
//! a crash input replays in `cargo test`.)
#![no_main]
libfuzzer_sys::fuzz_target!(|input: nvcre_tests::fuzz::RenderInput| {
    nvcre_tests::fuzz::render(&input)
});
