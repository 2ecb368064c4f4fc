//! Server-side apply of child objects with one field manager, create-or-adopt by deterministic
//! name: an existing object controlled by another owner is never taken over.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::error::Error;

/// The one field manager of every write the controller makes.
pub const FIELD_MANAGER: &str = "nvcre-controller";

/// `trainer.kubeflow.org/v1alpha1` TrainJob.
pub fn train_job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", "TrainJob"),
        "trainjobs",
    )
}

/// `trainer.kubeflow.org/v1alpha1` TrainingRuntime.
pub fn training_runtime_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime"),
        "trainingruntimes",
    )
}

/// The ApiResource of a manifest, from its `apiVersion` and `kind` (plural: the lowercased kind
/// plus `s`, which holds for every kind the placement emits).
///
/// # Errors
/// [`Error::InvalidManifest`] without `apiVersion` or `kind`.
pub fn resource_of(manifest: &Value) -> Result<ApiResource, Error> {
    let api_version = manifest
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(Error::InvalidManifest("apiVersion"))?;
    let kind = manifest
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(Error::InvalidManifest("kind"))?;
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    Ok(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &format!("{}s", kind.to_ascii_lowercase()),
    ))
}

/// Whether `existing` may be written by an owner with `owner_uid`: it has no controller owner,
/// or that owner is `owner_uid`.
pub fn may_adopt(existing: &DynamicObject, owner_uid: &str) -> bool {
    existing
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .is_none_or(|o| o.uid == owner_uid)
}

/// Server-side applies `manifest` in `namespace` unless an object of that name exists under
/// another controller owner.
///
/// # Errors
/// [`Error::OwnedByOther`] for a foreign object; [`Error::Kube`] for API failures;
/// [`Error::InvalidManifest`] for a manifest without kind or name.
pub async fn apply_owned(
    client: &Client,
    namespace: &str,
    manifest: &Value,
    owner_uid: &str,
) -> Result<(), Error> {
    let ar = resource_of(manifest)?;
    let name = manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or(Error::InvalidManifest("metadata.name"))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    if let Some(existing) = api.get_opt(name).await?
        && !may_adopt(&existing, owner_uid)
    {
        return Err(Error::OwnedByOther {
            kind: ar.kind.clone(),
            name: name.to_string(),
        });
    }
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(manifest),
    )
    .await?;
    Ok(())
}
