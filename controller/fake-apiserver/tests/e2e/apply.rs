use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};

use crate::{guard, status};

fn managers(cm: &ConfigMap) -> Vec<(String, String, Value)> {
    cm.metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap(),
                m.operation.unwrap(),
                serde_json::to_value(m.fields_v1.unwrap()).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn server_side_apply_ownership_conflict_and_force() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let cfg = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": data});

        let created = api.patch("s", &PatchParams::apply("alice"), &Patch::Apply(cfg(json!({"a": "1", "b": "2"})))).await.unwrap();
        assert_eq!(managers(&created), vec![("alice".into(), "Apply".into(), json!({"f:data": {"f:a": {}, "f:b": {}}}))]);

        // Re-applying the same values changes nothing.
        let same = api.patch("s", &PatchParams::apply("alice"), &Patch::Apply(cfg(json!({"a": "1", "b": "2"})))).await.unwrap();
        assert_eq!(same.metadata.resource_version, created.metadata.resource_version);

        // Bob applying a different value of alice's field conflicts …
        let s = status(api.patch("s", &PatchParams::apply("bob"), &Patch::Apply(cfg(json!({"a": "9", "c": "3"})))).await);
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
        assert_eq!(s.message, "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.a");
        let causes = s.details.unwrap().causes;
        assert_eq!(causes.len(), 1);
        assert_eq!(
            (causes[0].reason.as_str(), causes[0].message.as_str(), causes[0].field.as_str()),
            ("FieldManagerConflict", "conflict with \"alice\" using v1", ".data.a")
        );
        // … the same value is shared ownership, no conflict.
        let shared = api.patch("s", &PatchParams::apply("bob"), &Patch::Apply(cfg(json!({"b": "2"})))).await.unwrap();
        assert_eq!(managers(&shared).len(), 2);

        // Forcing takes the field over.
        let forced = api
            .patch("s", &PatchParams::apply("bob").force(), &Patch::Apply(cfg(json!({"a": "9", "b": "2"}))))
            .await
            .unwrap();
        assert_eq!(forced.data.clone().unwrap().get("a").map(String::as_str), Some("9"));
        assert_eq!(
            managers(&forced),
            vec![
                ("alice".into(), "Apply".into(), json!({"f:data": {"f:b": {}}})),
                ("bob".into(), "Apply".into(), json!({"f:data": {"f:a": {}, "f:b": {}}})),
            ]
        );

        // Alice drops `b` from her configuration: bob still owns it, so it stays; bob drops `a`:
        // nobody else owns it, so it goes.
        api.patch("s", &PatchParams::apply("alice"), &Patch::Apply(cfg(json!({})))).await.unwrap();
        let after = api.patch("s", &PatchParams::apply("bob"), &Patch::Apply(cfg(json!({"b": "2"})))).await.unwrap();
        assert_eq!(serde_json::to_value(after.data).unwrap(), json!({"b": "2"}));

        // A non-apply update takes ownership of what it changes; applying over it conflicts.
        api.patch("s", &PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() }, &Patch::Merge(json!({"data": {"b": "5"}})))
            .await
            .unwrap();
        let s = status(api.patch("s", &PatchParams::apply("bob"), &Patch::Apply(cfg(json!({"b": "2"})))).await);
        assert_eq!(s.message, "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.b");

        let s = status(api.patch("s", &PatchParams::default(), &Patch::Apply(cfg(json!({})))).await);
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert_eq!(s.message, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
    })
    .await;
}

#[tokio::test]
async fn delete_collects_dependents_in_cascade() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let make = |name: &str, owner: Option<&ConfigMap>| -> ConfigMap {
            let mut v = json!({"metadata": {"name": name}});
            if let Some(o) = owner {
                v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": o.metadata.name, "uid": o.metadata.uid, "controller": true}]);
            }
            serde_json::from_value(v).unwrap()
        };
        let pp = PostParams::default();
        let root = api.create(&pp, &make("root", None)).await.unwrap();
        let child = api.create(&pp, &make("child", Some(&root))).await.unwrap();
        api.create(&pp, &make("grandchild", Some(&child))).await.unwrap();
        let keep = api.create(&pp, &make("other", None)).await.unwrap();
        // Two owners: losing one keeps it, with the remaining reference.
        let mut two = make("two-owners", Some(&root));
        two.metadata.owner_references.as_mut().unwrap().push(
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": keep.metadata.uid})).unwrap(),
        );
        api.create(&pp, &two).await.unwrap();

        api.delete("root", &DeleteParams::default()).await.unwrap();
        let left: Vec<String> = api.list(&Default::default()).await.unwrap().items.into_iter().map(|c| c.metadata.name.unwrap()).collect();
        assert_eq!(left, ["other", "two-owners"]);
        let refs = api.get("two-owners").await.unwrap().metadata.owner_references.unwrap();
        assert_eq!(refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["other"]);

        // Orphaning keeps dependents and drops the reference.
        api.delete("other", &DeleteParams::orphan()).await.unwrap();
        assert_eq!(api.get("two-owners").await.unwrap().metadata.owner_references, None);

        // A dependent of an owner that is already gone is collected right after its creation.
        let orphan = api.create(&pp, &make("late-child", Some(&root))).await.unwrap();
        assert_eq!(orphan.metadata.name.as_deref(), Some("late-child"));
        assert_eq!(status(api.get("late-child").await).code, 404);

        // Finalizers hold the deletion until removed.
        let mut fin = make("fin", None);
        fin.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        api.create(&pp, &fin).await.unwrap();
        let marked = api.delete("fin", &DeleteParams::default()).await.unwrap().left().unwrap();
        assert!(marked.metadata.deletion_timestamp.is_some());
        assert!(api.get("fin").await.is_ok());
        api.patch("fin", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
        assert_eq!(status(api.get("fin").await).code, 404);
    })
    .await;
}
