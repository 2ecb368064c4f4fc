//! Arbitrary bytes as a YAML stream: see `nvcre_tests::fuzz::parse_workloadrun`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvcre_tests::fuzz::parse_workloadrun(data));
