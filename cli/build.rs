//! Links the `nvcre-policy` binary at a fixed address on Linux (`-no-pie`).
//!
//! A position-independent executable is relocated by the dynamic loader at every start: it
//! rewrites 1.8 MB of pointer tables (vtables, panic locations, static string tables), about
//! 450 pages each copied on first write, before `main` runs. A `check` or `render` of one file
//! is a short process, and that start-up was a fifth of it (`--version` 4.6 → 2.4 ms, one-file
//! `check` 20.0 → 15.4 ms; BENCHMARKS.md, nineteenth round). The code is still compiled
//! position-independent, so only the final link differs; the shared libraries, the heap and the
//! stack keep their randomised addresses. The controller, started once and long-running, keeps
//! the default.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // gcc and clang both take `-no-pie`; other targets link as they do by default.
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bin=nvcre-policy=-no-pie");
    }
}
