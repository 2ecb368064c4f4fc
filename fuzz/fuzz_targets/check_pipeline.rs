//! Arbitrary bytes through `nvcre-policy check`: see `nvcre_tests::fuzz::check_pipeline`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nvcre_tests::fuzz::check_pipeline(data));
