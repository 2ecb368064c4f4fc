use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::{Value, json};

use crate::{guard, status};

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloadruns.nvcre.nvidia.com"},
        "spec": {
            "group": "nvcre.nvidia.com",
            "scope": "Namespaced",
            "names": {"kind": "WorkloadRun", "plural": "workloadruns", "singular": "workloadrun", "listKind": "WorkloadRunList"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["image"],
                            "x-kubernetes-validations": [
                                {"rule": "self == oldSelf", "message": "spec is immutable after creation"}
                            ],
                            "properties": {
                                "image": {"type": "string", "pattern": "^[a-z0-9./:-]+$", "maxLength": 40},
                                "mode": {"type": "string", "enum": ["batch", "interactive"]},
                                "replicas": {"type": "integer", "minimum": 1},
                                "queue": {"type": "string",
                                    "x-kubernetes-validations": [{"rule": "self.startsWith('q-')", "messageExpression": "'queue ' + self + ' must start with q-'"}]}
                            }
                        },
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                    }
                }}
            }]
        }
    }))
    .unwrap()
}

fn run(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
        "metadata": {"name": name}, "spec": spec, "status": {"phase": "Injected"}
    }))
    .unwrap()
}

async fn setup() -> (
    FakeApiServer,
    Api<DynamicObject>,
    Api<CustomResourceDefinition>,
) {
    let server = FakeApiServer::start().await.unwrap();
    let client = server.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), &crd()).await.unwrap();
    let conditions = created.status.unwrap().conditions.unwrap();
    assert_eq!(
        conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect::<Vec<_>>(),
        [("NamesAccepted", "True"), ("Established", "True")]
    );
    let gvk = GroupVersionKind::gvk("nvcre.nvidia.com", "v1alpha1", "WorkloadRun");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "workloadruns");
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    (server, api, crds)
}

#[tokio::test]
async fn crd_is_discoverable_and_status_is_a_subresource() {
    guard(async {
        let (server, api, crds) = setup().await;
        let client = server.client().unwrap();
        let resources = client
            .list_api_group_resources("nvcre.nvidia.com/v1alpha1")
            .await
            .unwrap();
        let names: Vec<(String, bool)> = resources
            .resources
            .iter()
            .map(|r| (r.name.clone(), r.namespaced))
            .collect();
        assert_eq!(
            names,
            [
                ("workloadruns".to_string(), true),
                ("workloadruns/status".to_string(), true)
            ]
        );
        let groups = client.list_api_groups().await.unwrap();
        assert!(groups.groups.iter().any(|g| g.name == "nvcre.nvidia.com"));
        // kube's own discovery resolves the new kind.
        let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
        let gvk = GroupVersionKind::gvk("nvcre.nvidia.com", "v1alpha1", "WorkloadRun");
        let (ar, caps) = discovery.resolve_gvk(&gvk).unwrap();
        assert_eq!(
            (ar.plural.as_str(), caps.scope),
            ("workloadruns", kube::discovery::Scope::Namespaced)
        );
        let subresources: Vec<String> = caps
            .subresources
            .iter()
            .map(|(r, _)| r.plural.clone())
            .collect();
        assert_eq!(subresources, ["status"]);
        let core = GroupVersionKind::gvk("", "v1", "ConfigMap");
        assert_eq!(discovery.resolve_gvk(&core).unwrap().0.plural, "configmaps");

        let mut body = run("r1", json!({"image": "busybox", "replicas": 2}));
        body.data["spec"]["undeclared"] = json!(true);
        let created = api.create(&PostParams::default(), &body).await.unwrap();
        // Status dropped on create (subresource), undeclared field pruned.
        assert_eq!(created.data.get("status"), None);
        assert_eq!(
            created.data["spec"],
            json!({"image": "busybox", "replicas": 2})
        );
        assert_eq!(created.metadata.generation, Some(1));

        let with_status = api
            .patch_status(
                "r1",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Running"}, "spec": {"replicas": 5}})),
            )
            .await
            .unwrap();
        assert_eq!(with_status.data["status"], json!({"phase": "Running"}));
        assert_eq!(with_status.data["spec"]["replicas"], json!(2));
        assert_eq!(with_status.metadata.generation, Some(1));

        // fieldValidation=Strict rejects what pruning would drop.
        let strict = PatchParams::default().validation(kube::api::ValidationDirective::Strict);
        let s = status(
            api.patch_status(
                "r1",
                &strict,
                &Patch::Merge(json!({"status": {"phase": "x", "bogus": 1}})),
            )
            .await,
        );
        assert_eq!(
            (s.code, s.message.as_str()),
            (400, "strict decoding error: unknown field \"status.bogus\"")
        );

        // Main-resource writes leave status alone; metadata changes keep the generation.
        let labelled = api
            .patch(
                "r1",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Hacked"}}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(labelled.data["status"], json!({"phase": "Running"}));
        assert_eq!(labelled.metadata.generation, Some(1));

        // Deleting the CRD deletes its objects and stops serving the type.
        crds.delete("workloadruns.nvcre.nvidia.com", &DeleteParams::default())
            .await
            .unwrap();
        let s = status(api.get("r1").await);
        assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
        assert_eq!(
            server.object("nvcre.nvidia.com", "workloadruns", "default", "r1"),
            None
        );
    })
    .await;
}

#[tokio::test]
async fn transition_rule_rejects_spec_update() {
    guard(async {
        let (_server, api, _) = setup().await;
        api.create(&PostParams::default(), &run("x", json!({"image": "busybox"}))).await.unwrap();
        let s = status(api.patch("x", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await);
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            s.message,
            "WorkloadRun.nvcre.nvidia.com \"x\" is invalid: spec: Invalid value: \"object\": spec is immutable after creation"
        );
        let d = s.details.unwrap();
        assert_eq!((d.name.as_str(), d.group.as_str(), d.kind.as_str()), ("x", "nvcre.nvidia.com", "WorkloadRun"));
        assert_eq!(d.causes.len(), 1);
        assert_eq!(
            (d.causes[0].reason.as_str(), d.causes[0].message.as_str(), d.causes[0].field.as_str()),
            ("FieldValueInvalid", "Invalid value: \"object\": spec is immutable after creation", "spec")
        );
        // The same rule passes when the spec is unchanged (server-side apply of the same spec).
        let applied = api
            .patch("x", &PatchParams::apply("ctl"), &Patch::Apply(json!({
                "apiVersion": "nvcre.nvidia.com/v1alpha1", "kind": "WorkloadRun",
                "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"image": "busybox"}})))
            .await
            .unwrap();
        assert_eq!(applied.metadata.labels.unwrap()["a"], "b");
    })
    .await;
}

#[tokio::test]
async fn schema_rejects_missing_required_pattern_enum_and_rule() {
    guard(async {
        let (_server, api, _) = setup().await;
        let pp = PostParams::default();
        let s = status(api.create(&pp, &run("a", json!({"replicas": 1}))).await);
        assert_eq!(s.code, 422);
        assert_eq!(s.message, "WorkloadRun.nvcre.nvidia.com \"a\" is invalid: spec.image: Required value");

        let s = status(api.create(&pp, &run("b", json!({"image": "UPPER"}))).await);
        assert_eq!(
            s.message,
            "WorkloadRun.nvcre.nvidia.com \"b\" is invalid: spec.image: Invalid value: \"UPPER\": spec.image in body should match '^[a-z0-9./:-]+$'"
        );

        let s = status(api.create(&pp, &run("c", json!({"image": "ok", "mode": "x", "replicas": 0, "queue": "main"}))).await);
        assert_eq!(
            s.message,
            "WorkloadRun.nvcre.nvidia.com \"c\" is invalid: [spec.mode: Unsupported value: \"x\": supported values: \"batch\", \"interactive\", spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1, spec.queue: Invalid value: \"string\": queue main must start with q-]"
        );
        let reasons: Vec<String> = s.details.unwrap().causes.into_iter().map(|c| c.reason).collect();
        assert_eq!(reasons, ["FieldValueNotSupported", "FieldValueInvalid", "FieldValueInvalid"]);

        let s = status(api.create(&pp, &run("d", json!({"image": "a".repeat(41)}))).await);
        assert_eq!(s.message, "WorkloadRun.nvcre.nvidia.com \"d\" is invalid: spec.image: Too long: may not be more than 40 bytes");

        let s = status(api.create(&pp, &run("e", json!({"image": 7}))).await);
        assert_eq!(
            s.message,
            "WorkloadRun.nvcre.nvidia.com \"e\" is invalid: spec.image: Invalid value: \"integer\": spec.image in body must be of type string: \"integer\""
        );
    })
    .await;
}
