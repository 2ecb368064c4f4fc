//! Objects a test cluster needs beside our own CRDs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;

/// A Kubeflow Trainer CRD (`trainer.kubeflow.org/v1alpha1`, namespaced) with a schemaless spec and
/// a status subresource: enough for the controller to create TrainJobs and TrainingRuntimes and for
/// a test to set their conditions. `kind` is e.g. `TrainJob`, `plural` e.g. `trainjobs`.
///
/// # Errors
/// Never in practice: the object is built from a fixed shape (the error is serde's).
pub fn trainer_crd(
    kind: &str,
    plural: &str,
) -> Result<CustomResourceDefinition, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.trainer.kubeflow.org")},
        "spec": {
            "group": "trainer.kubeflow.org",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_ascii_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}
            }]
        }
    }))
}
