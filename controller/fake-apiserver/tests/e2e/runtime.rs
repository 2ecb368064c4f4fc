use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nvcre_fake_apiserver::FakeApiServer;
use serde_json::json;

use crate::guard;

fn cm(name: &str, labels: serde_json::Value, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
        .unwrap()
}

#[tokio::test]
async fn raw_watch_resumes_and_expires() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let pp = PostParams::default();
        let a = api
            .create(&pp, &cm("a", json!({"w": "1"}), json!({})))
            .await
            .unwrap();
        let start = a.resource_version().unwrap();
        api.create(&pp, &cm("b", json!({}), json!({})))
            .await
            .unwrap();
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .unwrap();
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"w": null}}})),
        )
        .await
        .unwrap();
        api.delete("b", &DeleteParams::default()).await.unwrap();

        // Resuming after `a`'s creation replays what followed, in order.
        let events: Vec<(String, String)> = api
            .watch(&WatchParams::default(), &start)
            .await
            .unwrap()
            .take(4)
            .map(|e| match e.unwrap() {
                WatchEvent::Added(o) => ("ADDED".into(), o.name_any()),
                WatchEvent::Modified(o) => ("MODIFIED".into(), o.name_any()),
                WatchEvent::Deleted(o) => ("DELETED".into(), o.name_any()),
                other => (format!("{other:?}"), String::new()),
            })
            .collect()
            .await;
        let pairs: Vec<(&str, &str)> = events
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("ADDED", "b"),
                ("MODIFIED", "a"),
                ("MODIFIED", "a"),
                ("DELETED", "b")
            ]
        );

        // Under a label selector, losing the label is a deletion.
        let selected: Vec<String> = api
            .watch(&WatchParams::default().labels("w=1"), &start)
            .await
            .unwrap()
            .take(2)
            .map(|e| match e.unwrap() {
                WatchEvent::Modified(_) => "MODIFIED".to_string(),
                WatchEvent::Deleted(_) => "DELETED".to_string(),
                other => format!("{other:?}"),
            })
            .collect()
            .await;
        assert_eq!(selected, ["MODIFIED", "DELETED"]);

        // Streaming list: current objects, then the initial-events-end bookmark.
        let wp = WatchParams::streaming_lists();
        let mut initial = api.watch(&wp, "0").await.unwrap().boxed();
        match initial.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => assert_eq!(o.name_any(), "a"),
            other => panic!("{other:?}"),
        }
        match initial.next().await.unwrap().unwrap() {
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                assert_eq!(
                    b.metadata.resource_version,
                    server.resource_version().to_string()
                );
            }
            other => panic!("{other:?}"),
        }

        server.compact();
        let mut expired = api
            .watch(&WatchParams::default(), &start)
            .await
            .unwrap()
            .boxed();
        match expired.next().await.unwrap().unwrap() {
            WatchEvent::Error(s) => {
                assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
                assert_eq!(
                    s.message,
                    format!(
                        "too old resource version: {start} ({})",
                        server.resource_version()
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn watcher_sees_existing_and_new_objects() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let pp = PostParams::default();
        api.create(&pp, &cm("before", json!({}), json!({})))
            .await
            .unwrap();
        // Metadata-only reads answer PartialObjectMetadata.
        let meta = api.get_metadata("before").await.unwrap();
        assert_eq!(
            (meta.types.as_ref().unwrap().kind.as_str(), meta.name_any()),
            ("PartialObjectMetadata", "before".to_string())
        );
        let metas = api.list_metadata(&Default::default()).await.unwrap();
        assert_eq!(
            metas.items.iter().map(|m| m.name_any()).collect::<Vec<_>>(),
            ["before"]
        );
        let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
            Api::namespaced(server.client().unwrap(), "default");
        let mut meta_stream = watcher(meta_api, watcher::Config::default()).boxed();
        assert!(matches!(
            meta_stream.try_next().await.unwrap().unwrap(),
            watcher::Event::Init
        ));
        match meta_stream.try_next().await.unwrap().unwrap() {
            watcher::Event::InitApply(m) => assert_eq!(m.name_any(), "before"),
            other => panic!("{other:?}"),
        }

        for config in [
            watcher::Config::default(),
            watcher::Config::default().streaming_lists(),
        ] {
            let mut stream = watcher(api.clone(), config).boxed();
            let mut seen = Vec::new();
            // Init, InitApply(before), InitDone.
            for _ in 0..3 {
                seen.push(match stream.try_next().await.unwrap().unwrap() {
                    watcher::Event::Init => "Init".to_string(),
                    watcher::Event::InitApply(o) => format!("InitApply {}", o.name_any()),
                    watcher::Event::InitDone => "InitDone".to_string(),
                    other => format!("{other:?}"),
                });
            }
            assert_eq!(seen, ["Init", "InitApply before", "InitDone"]);
            let name = format!("after-{}", server.resource_version());
            api.create(&pp, &cm(&name, json!({}), json!({})))
                .await
                .unwrap();
            match stream.try_next().await.unwrap().unwrap() {
                watcher::Event::Apply(o) => assert_eq!(o.name_any(), name),
                other => panic!("{other:?}"),
            }
            api.delete(&name, &DeleteParams::default()).await.unwrap();
            match stream.try_next().await.unwrap().unwrap() {
                watcher::Event::Delete(o) => assert_eq!(o.name_any(), name),
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

/// Copies `data` of every ConfigMap labelled `role=source` into `<name>-copy`, owned by it.
async fn reconcile(
    src: Arc<ConfigMap>,
    api: Arc<Api<ConfigMap>>,
) -> Result<Action, ReconcileError> {
    let owner = src.controller_owner_ref(&()).unwrap();
    let copy = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{}-copy", src.name_any()), "ownerReferences": [owner]},
        "data": src.data,
    });
    api.patch(
        &format!("{}-copy", src.name_any()),
        &PatchParams::apply("copier").force(),
        &Patch::Apply(copy),
    )
    .await?;
    Ok(Action::await_change())
}

#[tokio::test]
async fn controller_reconciles_objects_created_before_and_after_start() {
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "default");
        let pp = PostParams::default();
        api.create(
            &pp,
            &cm("early", json!({"role": "source"}), json!({"k": "1"})),
        )
        .await
        .unwrap();

        let ctx = Arc::new(api.clone());
        let controller = Controller::new(
            api.clone(),
            watcher::Config::default().labels("role=source"),
        )
        .owns(api.clone(), watcher::Config::default())
        .run(
            reconcile,
            |_, _, _| Action::requeue(std::time::Duration::from_secs(1)),
            ctx,
        );
        let handle = tokio::spawn(controller.for_each(|_| async {}));

        let wait_for = |name: &'static str| {
            let api = api.clone();
            async move {
                // Poll through the real API (no sleeps as assertions: the guard bounds it).
                loop {
                    if let Some(c) = api.get_opt(name).await.unwrap() {
                        return c;
                    }
                    tokio::task::yield_now().await;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        };
        let early = wait_for("early-copy").await;
        assert_eq!(
            serde_json::to_value(&early.data).unwrap(),
            json!({"k": "1"})
        );
        let owner = &early.owner_references()[0];
        assert_eq!(
            (owner.name.as_str(), owner.controller),
            ("early", Some(true))
        );

        api.create(
            &pp,
            &cm("late", json!({"role": "source"}), json!({"k": "2"})),
        )
        .await
        .unwrap();
        let late = wait_for("late-copy").await;
        assert_eq!(serde_json::to_value(&late.data).unwrap(), json!({"k": "2"}));
        assert_eq!(
            late.meta().managed_fields.as_ref().unwrap()[0]
                .manager
                .as_deref(),
            Some("copier")
        );

        // Deleting the source collects its copy.
        api.delete("late", &DeleteParams::default()).await.unwrap();
        assert_eq!(api.get_opt("late-copy").await.unwrap(), None);

        handle.abort();
        server.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn event_recorder_creates_then_patches_a_series() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    guard(async {
        let server = FakeApiServer::start().await.unwrap();
        let client = server.client().unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let src = api
            .create(&PostParams::default(), &cm("src", json!({}), json!({})))
            .await
            .unwrap();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "copier".into(),
                instance: None,
            },
        );
        let ev = Event {
            type_: EventType::Normal,
            reason: "Copied".into(),
            note: Some("copied".into()),
            action: "Copy".into(),
            secondary: None,
        };
        recorder.publish(&ev, &src.object_ref(&())).await.unwrap();
        recorder.publish(&ev, &src.object_ref(&())).await.unwrap();
        let events: Api<K8sEvent> = Api::namespaced(client, "default");
        let listed = events.list(&Default::default()).await.unwrap().items;
        assert_eq!(listed.len(), 1);
        let e = &listed[0];
        assert_eq!(
            (
                e.reason.as_deref(),
                e.regarding.as_ref().and_then(|r| r.name.as_deref()),
                e.series.as_ref().map(|s| s.count)
            ),
            (Some("Copied"), Some("src"), Some(2))
        );
    })
    .await;
}
