//! The parse-only floor of the benchmark: reads every document of the given files and
//! directories with the YAML crate `check` uses (serde-saphyr, one document at a time, YAML 1.2
//! core booleans) into plain JSON values, and does nothing else. `check` cannot be faster than
//! this; `bench/run.sh` reports `check` as a multiple of it.
//!
//! `cargo run --release -p nvcre-engine --example parse_floor -- PATH...`

use std::process::ExitCode;

use nvcre_engine::{WalkOptions, walk_files};

fn parse(path: &std::path::Path) -> Result<usize, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = std::io::BufReader::new(file);
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let mut docs = 0;
    for doc in serde_saphyr::read_with_options::<_, serde_json::Value>(&mut reader, options) {
        let value = doc.map_err(|e| format!("{}: {e}", path.display()))?;
        std::hint::black_box(&value);
        docs += 1;
    }
    Ok(docs)
}

fn main() -> ExitCode {
    let mut docs = 0usize;
    for arg in std::env::args().skip(1) {
        let path = std::path::Path::new(&arg);
        let files = if path.is_dir() {
            walk_files(path, &WalkOptions::MANIFESTS).0
        } else {
            vec![path.to_path_buf()]
        };
        for f in files {
            match parse(&f) {
                Ok(n) => docs += n,
                Err(e) => {
                    eprintln!("parse_floor: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    println!("{docs} documents");
    ExitCode::SUCCESS
}
