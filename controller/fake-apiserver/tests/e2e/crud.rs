use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::json;

use crate::{guard, status};

fn cm(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

fn names(list: kube::core::ObjectList<ConfigMap>) -> Vec<String> {
    list.items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect()
}

#[tokio::test]
async fn create_get_list_with_selectors() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let pp = PostParams::default();
        api.create(
            &pp,
            &cm("a", &[("app", "web"), ("tier", "fe")], &[("k", "1")]),
        )
        .await
        .unwrap();
        api.create(&pp, &cm("b", &[("app", "web"), ("tier", "be")], &[]))
            .await
            .unwrap();
        api.create(&pp, &cm("c", &[("app", "db")], &[]))
            .await
            .unwrap();

        let a = api.get("a").await.unwrap();
        assert_eq!(
            a.data.unwrap(),
            BTreeMap::from([("k".to_string(), "1".to_string())])
        );
        assert_eq!(a.metadata.namespace.as_deref(), Some("default"));
        assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
        // Each write takes the next global resourceVersion.
        let b = api.get("b").await.unwrap();
        let rv = |m: &ObjectMeta| m.resource_version.clone().unwrap().parse::<u64>().unwrap();
        assert_eq!(rv(&b.metadata), rv(&a.metadata) + 1);

        let lp = |s: &str| ListParams::default().labels(s);
        assert_eq!(names(api.list(&lp("app=web")).await.unwrap()), ["a", "b"]);
        assert_eq!(names(api.list(&lp("tier in (be,x)")).await.unwrap()), ["b"]);
        assert_eq!(names(api.list(&lp("app!=web")).await.unwrap()), ["c"]);
        assert_eq!(names(api.list(&lp("!tier")).await.unwrap()), ["c"]);
        let by_name = ListParams::default().fields("metadata.name=b");
        assert_eq!(names(api.list(&by_name).await.unwrap()), ["b"]);
        let s = status(api.list(&ListParams::default().fields("data.k=1")).await);
        assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
        assert_eq!(s.message, "field label not supported: data.k");

        // Pages.
        let page = api.list(&ListParams::default().limit(2)).await.unwrap();
        assert_eq!(names(page.clone()), ["a", "b"]);
        let rest = api
            .list(
                &ListParams::default()
                    .limit(2)
                    .continue_token(page.metadata.continue_.as_deref().unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(names(rest), ["c"]);

        // A dry run answers as the write would, and stores nothing.
        let dry = api
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &cm("dry", &[], &[]),
            )
            .await
            .unwrap();
        assert_eq!(dry.metadata.name.as_deref(), Some("dry"));
        assert_eq!(status(api.get("dry").await).code, 404);

        let s = status(api.create(&pp, &cm("a", &[], &[])).await);
        assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
        assert_eq!(s.message, "configmaps \"a\" already exists");

        let s = status(api.get("zz").await);
        assert_eq!(
            (s.code, s.reason.as_str(), s.message.as_str()),
            (404, "NotFound", "configmaps \"zz\" not found")
        );

        let mut generated = cm("", &[], &[]);
        generated.metadata.name = None;
        generated.metadata.generate_name = Some("gen-".into());
        let g = api.create(&pp, &generated).await.unwrap();
        let gname = g.metadata.name.unwrap();
        assert!(gname.starts_with("gen-") && gname.len() == 9, "{gname}");

        let other_ns: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "nope");
        let s = status(other_ns.create(&pp, &cm("x", &[], &[])).await);
        assert_eq!(
            (s.code, s.message.as_str()),
            (404, "namespaces \"nope\" not found")
        );
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn replace_conflicts_on_stale_resource_version() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let first = api.create(&PostParams::default(), &cm("a", &[], &[("k", "1")])).await.unwrap();
        let mut second = first.clone();
        second.data = Some(BTreeMap::from([("k".into(), "2".into())]));
        let updated = api.replace("a", &PostParams::default(), &second).await.unwrap();
        assert_eq!(updated.data.unwrap()["k"], "2");
        // `first` still carries the old resourceVersion.
        let s = status(api.replace("a", &PostParams::default(), &first).await);
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
        assert_eq!(
            s.message,
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        // A no-op write keeps the resourceVersion.
        let current = api.get("a").await.unwrap();
        let again = api.replace("a", &PostParams::default(), &current).await.unwrap();
        assert_eq!(again.metadata.resource_version, current.metadata.resource_version);
    })
    .await;
}

#[tokio::test]
async fn cluster_scoped_nodes_and_patches() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let client = server.client().unwrap();
        let nodes: Api<Node> = Api::all(client.clone());
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"pool": "gpu"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {"capacity": {"cpu": "8"}}
        }))
        .unwrap();
        let created = nodes.create(&PostParams::default(), &node).await.unwrap();
        // Node has a status subresource: create ignores status.
        assert_eq!(created.status, None);
        assert_eq!(created.metadata.generation, Some(1));
        assert_eq!(created.metadata.namespace, None);
        let listed = nodes.list(&ListParams::default().labels("pool=gpu")).await.unwrap();
        assert_eq!(listed.items.len(), 1);

        let merged = nodes
            .patch("n1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"zone": "a"}}, "spec": {"unschedulable": true}})))
            .await
            .unwrap();
        assert_eq!(merged.metadata.labels.unwrap(), BTreeMap::from([("pool".into(), "gpu".into()), ("zone".into(), "a".into())]));
        assert_eq!(merged.metadata.generation, Some(2));
        let st = nodes
            .patch_status("n1", &PatchParams::default(), &Patch::Merge(json!({"status": {"capacity": {"cpu": "16"}}})))
            .await
            .unwrap();
        assert_eq!(st.metadata.generation, Some(2));
        assert_eq!(serde_json::to_value(st.status.unwrap().capacity).unwrap(), json!({"cpu": "16"}));

        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        cms.create(&PostParams::default(), &cm("p", &[], &[("a", "1"), ("b", "2")])).await.unwrap();
        // kube's typed JSON Patch needs its `jsonpatch` feature (another json-patch major): send it raw.
        let ops = json!([{"op": "remove", "path": "/data/a"}, {"op": "add", "path": "/data/c", "value": "3"}]);
        let req = axum::http::Request::patch("/api/v1/namespaces/default/configmaps/p")
            .header("content-type", "application/json-patch+json")
            .body(serde_json::to_vec(&ops).unwrap())
            .unwrap();
        let patched: ConfigMap = client.request(req).await.unwrap();
        assert_eq!(patched.data.unwrap(), BTreeMap::from([("b".into(), "2".into()), ("c".into(), "3".into())]));
        let s = status(cms.patch("p", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}}))).await);
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));

        let deleted = cms.delete("p", &DeleteParams::default()).await.unwrap();
        assert!(deleted.is_left());
        assert_eq!(status(cms.get("p").await).code, 404);
    })
    .await;
}

#[tokio::test]
async fn strategic_merge_patch_merges_named_lists() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let pods: Api<Pod> = Api::namespaced(server.client().unwrap(), "default");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "image": "x", "env": [{"name": "E1", "value": "1"}]},
                {"name": "b", "image": "y"}
            ]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let patched = pods
            .patch("p", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"containers": [
                {"name": "a", "env": [{"name": "E2", "value": "2"}]},
                {"name": "c", "image": "z"}
            ]}})))
            .await
            .unwrap();
        let containers = serde_json::to_value(&patched.spec.unwrap().containers).unwrap();
        assert_eq!(
            containers,
            json!([
                {"name": "a", "image": "x", "env": [{"name": "E1", "value": "1"}, {"name": "E2", "value": "2"}]},
                {"name": "b", "image": "y"},
                {"name": "c", "image": "z"}
            ])
        );
        assert_eq!(patched.metadata.generation, Some(2));
    })
    .await;
}
