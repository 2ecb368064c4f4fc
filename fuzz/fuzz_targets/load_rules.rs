//! Arbitrary bytes as a rule file: see `nvcre_tests::fuzz::load_rules`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvcre_tests::fuzz::load_rules(data));
