//! A scripted Kubernetes API server on loopback: it serves the pods of one
//! node as the API does (`GET /api/v1/pods` lists, `?watch=true` streams
//! watch events, JSON in the API's own shapes), and the test changes them
//! with [`KubeApi::apply`] and [`KubeApi::delete`].
//!
//! A list or watch without `fieldSelector=spec.nodeName=<node>` is refused
//! with 400: a daemon must ask for its own node's pods only.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Condvar, Mutex},
    thread,
    time::Duration,
};

use serde_json::{Value, json};

#[derive(Default)]
struct State {
    /// The resource version of the last change.
    version: u64,
    /// Every pod, of any node, by name.
    pods: BTreeMap<String, Value>,
    /// Every change: its version, the pod's node and the watch event.
    events: Vec<(u64, String, Value)>,
    /// The requests' targets, in order.
    requests: Vec<String>,
    closed: bool,
}

/// The server; it stops when dropped.
pub struct KubeApi {
    addr: String,
    node: String,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl KubeApi {
    /// Serves the pods of `node` on a free loopback port.
    pub fn start(node: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let serving = Arc::clone(&shared);
        let own = node.to_owned();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if serving.0.lock().unwrap().closed {
                    return;
                }
                let shared = Arc::clone(&serving);
                let node = own.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &node, &shared);
                });
            }
        });
        Self {
            addr,
            node: node.to_owned(),
            shared,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds or replaces a pod (`ADDED` or `MODIFIED`).
    pub fn apply(&self, mut pod: Value) {
        let (lock, wake) = &*self.shared;
        let mut state = lock.lock().unwrap();
        state.version += 1;
        let version = state.version;
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
        let kind = if state.pods.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_owned();
        state
            .events
            .push((version, node, json!({"type": kind, "object": pod.clone()})));
        state.pods.insert(name, pod);
        wake.notify_all();
    }

    /// Deletes a pod (`DELETED`).
    pub fn delete(&self, name: &str) {
        let (lock, wake) = &*self.shared;
        let mut state = lock.lock().unwrap();
        let mut pod = state.pods.remove(name).expect("a pod to delete");
        state.version += 1;
        let version = state.version;
        pod["metadata"]["resourceVersion"] = json!(version.to_string());
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_owned();
        state
            .events
            .push((version, node, json!({"type": "DELETED", "object": pod})));
        wake.notify_all();
    }

    /// The targets (path and query) of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.shared.0.lock().unwrap().requests.clone()
    }

    /// The node whose pods are served.
    pub fn node(&self) -> &str {
        &self.node
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap().closed = true;
        wake.notify_all();
        // Wakes the accepting thread so that it sees `closed`.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// A pod of `node` in namespace `agents`, with `annotations` and one
/// running container per `(name, containerd id)`.
pub fn pod(
    name: &str,
    uid: &str,
    node: &str,
    annotations: &[(&str, &str)],
    containers: &[(&str, &str)],
) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "agents",
            "uid": uid,
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "containers": containers.iter().map(|(name, _)| json!({"name": name, "image": "agent:1"})).collect::<Vec<_>>(),
        },
        "status": {
            "phase": "Running",
            "containerStatuses": containers.iter().map(|(name, id)| json!({
                "name": name,
                "image": "agent:1",
                "imageID": "sha256:0",
                "containerID": format!("containerd://{id}"),
                "ready": true,
                "restartCount": 0,
                "started": true,
                "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
            })).collect::<Vec<_>>(),
        },
    })
}

/// One request on its own connection (every answer but a watch closes it).
fn serve(stream: TcpStream, node: &str, shared: &(Mutex<State>, Condvar)) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = line.split(' ').nth(1).unwrap_or("").to_owned();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    shared.0.lock().unwrap().requests.push(target.clone());
    let mut stream = stream;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let params: BTreeMap<&str, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k, v.replace("%3D", "=").replace("%3d", "=")))
        .collect();
    if path != "/api/v1/pods" {
        return answer(
            &mut stream,
            404,
            &status(404, "NotFound", "no such resource"),
        );
    }
    if params.get("fieldSelector").map(String::as_str) != Some(&format!("spec.nodeName={node}")) {
        return answer(
            &mut stream,
            400,
            &status(400, "BadRequest", "this server serves one node's pods"),
        );
    }
    if params.get("watch").is_some_and(|w| w == "true" || w == "1") {
        let since: u64 = params
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        return stream_watch(stream, node, since, shared);
    }
    let state = shared.0.lock().unwrap();
    let items: Vec<&Value> = state
        .pods
        .values()
        .filter(|pod| pod["spec"]["nodeName"] == node)
        .collect();
    let list = json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": state.version.to_string()},
        "items": items,
    });
    drop(state);
    answer(&mut stream, 200, &list)
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn answer(stream: &mut TcpStream, code: u16, body: &Value) -> std::io::Result<()> {
    let body = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// Streams the node's events after `since`, one JSON object a line, each in
/// a chunk of its own, until the server stops or the client goes.
fn stream_watch(
    mut stream: TcpStream,
    node: &str,
    mut since: u64,
    shared: &(Mutex<State>, Condvar),
) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )?;
    stream.flush()?;
    let (lock, wake) = shared;
    loop {
        let lines: Vec<String> = {
            let mut state = lock.lock().unwrap();
            while !state.closed && state.version <= since {
                state = wake
                    .wait_timeout(state, Duration::from_millis(500))
                    .unwrap()
                    .0;
            }
            if state.closed {
                break;
            }
            let lines = state
                .events
                .iter()
                .filter(|(version, pod_node, _)| *version > since && pod_node == node)
                .map(|(_, _, event)| format!("{event}\n"))
                .collect();
            since = state.version;
            lines
        };
        for line in lines {
            write!(stream, "{:x}\r\n{line}\r\n", line.len())?;
        }
        stream.flush()?;
    }
    write!(stream, "0\r\n\r\n")?;
    stream.flush()
}
