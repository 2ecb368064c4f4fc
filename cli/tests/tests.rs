//! The integration tests of `nvcre-policy`, built as one binary (see `e2e/`).
mod e2e;
