//! `nvcre-policy crd`: print the CustomResourceDefinitions (WorkloadRun, Workflow and the
//! measurement kinds), generated from the API types, as one YAML stream (`kubectl apply -f -`
//! reads it).

use std::io::Write;
use std::process::ExitCode;

/// Prints the CRDs to stdout. Exit 0, or 2 when the YAML cannot be written.
pub fn run() -> ExitCode {
    match nvcre_domain::crd::crds_yaml() {
        Ok(yaml) => {
            let mut out = std::io::stdout().lock();
            if out.write_all(yaml.as_bytes()).is_err() {
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
