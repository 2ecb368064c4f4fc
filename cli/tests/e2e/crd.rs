//! `nvcre-policy crd`: the WorkloadRun and Workflow CRDs, pinned, and equal to the deployed copy.

use super::util::{bin, root};

fn crd_output() -> String {
    let out = bin().arg("crd").output().expect("run nvcre-policy crd");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn crd_prints_both_crds_pinned() {
    insta::assert_snapshot!("crds", crd_output());
}

#[test]
fn deployed_crds_are_the_generated_ones() {
    let deployed = std::fs::read_to_string(root().join("controller/deploy/crds.yaml"))
        .expect("controller/deploy/crds.yaml");
    assert!(
        deployed == crd_output(),
        "controller/deploy/crds.yaml differs from `nvcre-policy crd`: run NVCRE_BLESS=1 cargo test -p nvcre-controller --test integration deploy::"
    );
}
