//! The watch of the node's pods through the Kubernetes API (the `pods`
//! feature, on by default), which fills the daemon's cache.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;

use super::{CLIENT_RETRY, Cache, PodEntry, annotations::Marking, cgroups, insert};

/// What the daemon keeps of a pod, keyed by its uid.
fn entry(pod: &Pod) -> Option<(String, PodEntry)> {
    let metadata = &pod.metadata;
    let uid = metadata.uid.clone()?;
    let empty = BTreeMap::new();
    let marking = Marking::read(metadata.annotations.as_ref().unwrap_or(&empty));
    let mut containers = Vec::new();
    if let Some(status) = &pod.status {
        for statuses in [
            &status.container_statuses,
            &status.init_container_statuses,
            &status.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        {
            for container in statuses {
                if let Some((runtime, id)) = container
                    .container_id
                    .as_deref()
                    .and_then(cgroups::status_id)
                {
                    containers.push((runtime, id.to_owned(), container.name.clone()));
                }
            }
        }
    }
    Some((
        uid,
        PodEntry {
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone().unwrap_or_default(),
            marking,
            containers,
        },
    ))
}

/// The client: to `api` when given, else as the environment says
/// (a kubeconfig, or the pod's service account).
async fn client(api: Option<&str>) -> Result<kube::Client, String> {
    let config = match api {
        Some(url) => {
            let uri: http::Uri = url
                .parse()
                .map_err(|error| format!("kubernetes.api {url:?}: {error}"))?;
            if uri.scheme_str() == Some("http") {
                return Ok(plain_client(uri));
            }
            kube::Config::new(uri)
        }
        None => kube::Config::infer()
            .await
            .map_err(|error| format!("no Kubernetes client configuration: {error}"))?,
    };
    kube::Client::try_from(config).map_err(|error| format!("the Kubernetes client: {error}"))
}

/// A client of a plain `http://` API server (a local proxy, a test's):
/// the client's own stack would load the system's CA certificates first,
/// and fail where there are none, although no TLS is spoken.
fn plain_client(uri: http::Uri) -> kube::Client {
    use tower_layer::Layer;
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let service = kube::client::middleware::BaseUriLayer::new(uri).layer(http);
    kube::Client::new(service, "default")
}

/// Lists and watches the node's pods into `cache` for as long as the
/// daemon runs.
pub(super) async fn watch(
    api: Option<String>,
    node: String,
    cache: Arc<Mutex<Cache>>,
    changed: Arc<Notify>,
) {
    let client = loop {
        match client(api.as_deref()).await {
            Ok(client) => break client,
            Err(error) => {
                tracing::error!(%error, "cannot reach the Kubernetes API; trying again");
                tokio::time::sleep(CLIENT_RETRY).await;
            }
        }
    };
    let pods: kube::Api<Pod> = kube::Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut events = std::pin::pin!(watcher(pods, config).default_backoff());
    // A fresh list is gathered here and replaces the cache whole, so that
    // pods deleted while the watch was lost go.
    let mut listed = HashMap::new();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "the watch of this node's pods failed; resuming");
                continue;
            }
        };
        let mut cache = cache.lock().expect("the pod cache");
        match event {
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(pod) => {
                if let Some((uid, entry)) = entry(&pod) {
                    let before = cache.pods.get(&uid).cloned();
                    if let Some(before) = before {
                        listed.insert(uid.clone(), before);
                    }
                    insert(&mut listed, uid, entry);
                }
            }
            watcher::Event::InitDone => {
                cache.pods = std::mem::take(&mut listed);
                if !cache.synced {
                    tracing::info!(pods = cache.pods.len(), "listed this node's pods");
                }
                cache.synced = true;
                changed.notify_one();
            }
            watcher::Event::Apply(pod) => {
                if let Some((uid, entry)) = entry(&pod) {
                    insert(&mut cache.pods, uid, entry);
                    changed.notify_one();
                }
            }
            watcher::Event::Delete(pod) => {
                if let Some(uid) = &pod.metadata.uid {
                    cache.pods.remove(uid);
                    changed.notify_one();
                }
            }
        }
    }
}
