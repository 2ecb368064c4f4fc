//! `controller/deploy/`: the generated files equal their sources (CRDs from the API types, the
//! rules ConfigMap from `rules/`), and every manifest reads as its typed Kubernetes object.
//!
//! `NVCRE_BLESS=1 cargo test -p nvcre-controller --test integration deploy::` rewrites the generated files.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use nvcre_engine::{Source, parse_documents, to_yaml};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// The rules ConfigMap: every rule file under `rules/` (not `tests/`), keyed `<dir>-<file>`.
fn rules_config_map() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules");
    let mut data = serde_json::Map::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("rules")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.ends_with("tests"))
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for f in files {
            let key = format!(
                "{}-{}",
                dir.file_name().unwrap_or_default().to_string_lossy(),
                f.file_name().unwrap_or_default().to_string_lossy()
            );
            data.insert(
                key,
                Value::String(std::fs::read_to_string(&f).expect("read")),
            );
        }
    }
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "nvcre-rules",
            "namespace": "nvcre-system",
            "labels": {"app.kubernetes.io/name": "nvcre-controller"},
        },
        "data": data,
    });
    format!(
        "# Generated from rules/ by controller/tests/deploy.rs (NVCRE_BLESS=1 to regenerate).\n{}",
        to_yaml(&cm).expect("yaml")
    )
}

fn check_generated(file: &str, want: &str) {
    let path = deploy().join(file);
    if std::env::var_os("NVCRE_BLESS").is_some() {
        std::fs::write(&path, want).expect("write");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{file} is stale: run NVCRE_BLESS=1 cargo test -p nvcre-controller --test integration deploy::"
    );
}

/// The built-in LogProfiles as cluster objects: every `rules/measure/*.yaml` (each file is one
/// LogProfile object), comments dropped.
fn log_profiles() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/measure");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("rules/measure")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = String::from(
        "# Generated from rules/measure/ by controller/tests/deploy.rs (NVCRE_BLESS=1 to regenerate).\n",
    );
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let source = Source::new(f.display().to_string(), text);
        for doc in parse_documents(&source).expect("yaml") {
            out.push_str("---\n");
            out.push_str(&to_yaml(&doc.value).expect("yaml"));
        }
    }
    out
}

#[test]
fn logprofiles_yaml_is_the_built_in_profiles() {
    check_generated("logprofiles.yaml", &log_profiles());
}

#[test]
fn crds_yaml_is_the_generated_crds() {
    check_generated("crds.yaml", &nvcre_domain::crd::crds_yaml().expect("crds"));
}

#[test]
fn rules_config_map_holds_the_rules() {
    check_generated("rules-configmap.yaml", &rules_config_map());
}

/// Deserializes into `T` and back: equal JSON means no field was unknown or mistyped.
fn typed<T: DeserializeOwned + Serialize>(doc: &Value) -> Value {
    let t: T = serde_json::from_value(doc.clone()).expect("typed");
    serde_json::to_value(&t).expect("json")
}

#[test]
fn every_manifest_reads_as_its_typed_object() {
    let kustomization = std::fs::read_to_string(deploy().join("kustomization.yaml")).expect("k");
    let mut kinds = Vec::new();
    let mut listed: Vec<String> = kustomization
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(str::to_string)
        .collect();
    listed.sort();
    let mut on_disk: Vec<String> = std::fs::read_dir(deploy())
        .expect("deploy")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    on_disk.sort();
    assert_eq!(listed, on_disk, "kustomization.yaml lists every manifest");
    for file in &on_disk {
        let text = std::fs::read_to_string(deploy().join(file)).expect("read");
        let source = Source::new(file.clone(), text);
        for doc in parse_documents(&source).expect("yaml") {
            let v = doc.value;
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            let back = match kind.as_str() {
                "Namespace" => typed::<Namespace>(&v),
                "ServiceAccount" => typed::<ServiceAccount>(&v),
                "ClusterRole" => typed::<ClusterRole>(&v),
                "ClusterRoleBinding" => typed::<ClusterRoleBinding>(&v),
                "Role" => typed::<Role>(&v),
                "RoleBinding" => typed::<RoleBinding>(&v),
                "Deployment" => typed::<Deployment>(&v),
                "Service" => typed::<Service>(&v),
                "ConfigMap" => typed::<ConfigMap>(&v),
                "CustomResourceDefinition" => typed::<CustomResourceDefinition>(&v),
                "LogProfile" => typed::<nvcre_domain::measure::LogProfileResource>(&v),
                other => panic!("{file}: unexpected kind {other}"),
            };
            assert_eq!(
                back, v,
                "{file}: {kind} round-trips through its typed struct"
            );
            kinds.push(kind);
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            // WorkloadRun, Workflow, LogProfile, BandwidthMeasurement, GoodputMeasurement
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "LogProfile",
            "LogProfile",
            "LogProfile",
            "Namespace",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    );
}

#[test]
fn rbac_has_no_wildcards() {
    let text = std::fs::read_to_string(deploy().join("rbac.yaml")).expect("rbac");
    let source = Source::new("rbac.yaml", text);
    for doc in parse_documents(&source).expect("yaml") {
        for rule in doc.value["rules"].as_array().into_iter().flatten() {
            for key in ["apiGroups", "resources", "verbs"] {
                for v in rule[key].as_array().into_iter().flatten() {
                    assert_ne!(v, "*", "wildcard in {rule}");
                }
            }
        }
    }
}
