//! Which pod and container a cgroup belongs to, read from its path the way
//! the kubelet and the container runtimes name them.
//!
//! With the systemd cgroup driver (below `kubepods.slice`):
//!
//! ```text
//! kubepods.slice/kubepods-pod<uid>.slice/<container>                             guaranteed
//! kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/<container>
//! kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/<container>
//! ```
//!
//! where the pod's uid has its `-` written `_` (systemd reserves `-` in unit
//! names for nesting) and `<container>` is `cri-containerd-<id>.scope`
//! (containerd), `crio-<id>.scope` (CRI-O) or `docker-<id>.scope`
//! (cri-dockerd). With the cgroupfs driver (below `kubepods`):
//!
//! ```text
//! kubepods/pod<uid>/<id>    kubepods/burstable/pod<uid>/<id>    kubepods/besteffort/pod<uid>/<id>
//! ```
//!
//! where CRI-O writes `crio-<id>`. CRI-O's monitor (`crio-conmon-<id>`) is
//! the runtime's own process, not the container's, and is no container
//! here; neither is anything below a container's cgroup (a container that
//! makes cgroups of its own) nor the pod's cgroup itself.

use std::path::{Component, Path};

/// What a container cgroup's path says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCgroup {
    /// The pod's uid, as the API writes it (with `-`).
    pub pod_uid: String,
    /// The container's id, as the runtime chose it (hex).
    pub container_id: String,
    /// The runtime, when the path names it.
    pub runtime: Option<Runtime>,
}

/// A container runtime, as its cgroup names and its status ids
/// (`containerd://<id>`) say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `cri-containerd-<id>.scope`, `containerd://<id>`.
    Containerd,
    /// `crio-<id>.scope`, `cri-o://<id>`.
    CriO,
    /// `docker-<id>.scope`, `docker://<id>`.
    Docker,
}

impl Runtime {
    /// The scheme of a container id in a pod's status.
    pub fn scheme(self) -> &'static str {
        match self {
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Docker => "docker",
        }
    }
}

/// Splits a status's container id (`containerd://<id>`) into its runtime
/// (when one this module knows) and id.
pub fn status_id(text: &str) -> Option<(Option<Runtime>, &str)> {
    let (scheme, id) = text.split_once("://")?;
    let runtime = [Runtime::Containerd, Runtime::CriO, Runtime::Docker]
        .into_iter()
        .find(|r| r.scheme() == scheme);
    is_container_id(id).then_some((runtime, id))
}

/// The pod and container of a cgroup given by its path relative to the
/// cgroup root, when it is a container's cgroup below `kubepods` (itself
/// relative to the cgroup root).
pub fn parse(relative: &Path, kubepods: &Path) -> Option<ContainerCgroup> {
    let rest = relative.strip_prefix(kubepods).ok()?;
    let parts: Vec<&str> = rest
        .components()
        .map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [pod, container] | [_, pod, container] => {
            let qos = if parts.len() == 3 {
                Some(parts[0])
            } else {
                None
            };
            systemd(qos, pod, container).or_else(|| cgroupfs(qos, pod, container))
        }
        _ => None,
    }
}

/// `kubepods[-<qos>]-pod<uid>.slice/<runtime>-<id>.scope`, the QoS slice
/// (when there is one) being `kubepods-<qos>.slice`.
fn systemd(qos: Option<&str>, pod: &str, container: &str) -> Option<ContainerCgroup> {
    let prefix = match qos {
        None => "kubepods-".to_owned(),
        Some(slice) => {
            let class = slice.strip_prefix("kubepods-")?.strip_suffix(".slice")?;
            if !matches!(class, "burstable" | "besteffort") {
                return None;
            }
            format!("kubepods-{class}-")
        }
    };
    let uid = pod.strip_prefix(&prefix)?.strip_suffix(".slice")?;
    let uid = uid.strip_prefix("pod")?;
    if !is_uid(uid, '_') {
        return None;
    }
    let scope = container.strip_suffix(".scope")?;
    let (runtime, id) = [
        ("cri-containerd-", Runtime::Containerd),
        ("crio-", Runtime::CriO),
        ("docker-", Runtime::Docker),
    ]
    .into_iter()
    .find_map(|(prefix, runtime)| Some((runtime, scope.strip_prefix(prefix)?)))?;
    is_container_id(id).then(|| ContainerCgroup {
        pod_uid: uid.replace('_', "-"),
        container_id: id.to_owned(),
        runtime: Some(runtime),
    })
}

/// `[<qos>/]pod<uid>/[crio-]<id>`.
fn cgroupfs(qos: Option<&str>, pod: &str, container: &str) -> Option<ContainerCgroup> {
    if qos.is_some_and(|class| !matches!(class, "burstable" | "besteffort")) {
        return None;
    }
    let uid = pod.strip_prefix("pod")?;
    if !is_uid(uid, '-') {
        return None;
    }
    let (runtime, id) = match container.strip_prefix("crio-") {
        Some(id) => (Some(Runtime::CriO), id),
        None => (None, container),
    };
    is_container_id(id).then(|| ContainerCgroup {
        pod_uid: uid.to_owned(),
        container_id: id.to_owned(),
        runtime,
    })
}

/// A pod uid: hex digits and `separator`, as a UUID is written.
fn is_uid(uid: &str, separator: char) -> bool {
    !uid.is_empty()
        && uid.len() <= 64
        && uid
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c) || c == separator)
}

/// Runtimes make container ids of lower-case hex digits (64 of them for
/// containerd, CRI-O and Docker).
fn is_container_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8a3e5c2d-1b4f-4c6a-9e7d-0f1e2d3c4b5a";
    const SYSTEMD_UID: &str = "8a3e5c2d_1b4f_4c6a_9e7d_0f1e2d3c4b5a";
    const ID: &str = "4f9c1e6b2a7d8c3e5f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6";

    fn parsed(path: &str, kubepods: &str) -> Option<ContainerCgroup> {
        parse(Path::new(path), Path::new(kubepods))
    }

    fn container(runtime: Option<Runtime>) -> Option<ContainerCgroup> {
        Some(ContainerCgroup {
            pod_uid: UID.to_owned(),
            container_id: ID.to_owned(),
            runtime,
        })
    }

    #[test]
    fn systemd_driver_every_qos_class_and_runtime() {
        for (qos, pod) in [
            ("", format!("kubepods-pod{SYSTEMD_UID}.slice")),
            (
                "kubepods-burstable.slice/",
                format!("kubepods-burstable-pod{SYSTEMD_UID}.slice"),
            ),
            (
                "kubepods-besteffort.slice/",
                format!("kubepods-besteffort-pod{SYSTEMD_UID}.slice"),
            ),
        ] {
            for (scope, runtime) in [
                (format!("cri-containerd-{ID}.scope"), Runtime::Containerd),
                (format!("crio-{ID}.scope"), Runtime::CriO),
                (format!("docker-{ID}.scope"), Runtime::Docker),
            ] {
                let path = format!("kubepods.slice/{qos}{pod}/{scope}");
                assert_eq!(
                    parsed(&path, "kubepods.slice"),
                    container(Some(runtime)),
                    "{path}"
                );
            }
        }
    }

    #[test]
    fn cgroupfs_driver_every_qos_class() {
        for qos in ["", "burstable/", "besteffort/"] {
            let path = format!("kubepods/{qos}pod{UID}/{ID}");
            assert_eq!(parsed(&path, "kubepods"), container(None), "{path}");
            let path = format!("kubepods/{qos}pod{UID}/crio-{ID}");
            assert_eq!(
                parsed(&path, "kubepods"),
                container(Some(Runtime::CriO)),
                "{path}"
            );
        }
    }

    #[test]
    fn kubepods_may_be_anywhere_below_the_root() {
        let path = format!(
            "test.slice/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(
            parsed(&path, "test.slice/kubepods.slice"),
            container(Some(Runtime::Containerd))
        );
        // Not below the configured parent: no pod's.
        assert_eq!(parsed(&path, "kubepods.slice"), None);
    }

    #[test]
    fn what_is_not_a_container_cgroup() {
        let pod = format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice"
        );
        for path in [
            "kubepods.slice".to_owned(),
            "kubepods.slice/kubepods-burstable.slice".to_owned(),
            // The pod's own cgroup.
            pod.clone(),
            // CRI-O's monitor.
            format!("{pod}/crio-conmon-{ID}.scope"),
            // Below a container.
            format!("{pod}/cri-containerd-{ID}.scope/init.scope"),
            // Not a runtime's name, not an id, not the pod's QoS slice.
            format!("{pod}/session-{ID}.scope"),
            format!("{pod}/cri-containerd-{}.scope", ID.to_uppercase()),
            format!("{pod}/cri-containerd-.scope"),
            format!(
                "kubepods.slice/kubepods-other.slice/kubepods-other-pod{SYSTEMD_UID}.slice/cri-containerd-{ID}.scope"
            ),
            format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod{SYSTEMD_UID}.slice/cri-containerd-{ID}.scope"
            ),
            // A uid that is not one.
            format!("kubepods.slice/kubepods-podxyz.slice/cri-containerd-{ID}.scope"),
            format!("kubepods.slice/kubepods-pod.slice/cri-containerd-{ID}.scope"),
        ] {
            assert_eq!(parsed(&path, "kubepods.slice"), None, "{path}");
        }
        for path in [
            format!("kubepods/pod{UID}"),
            format!("kubepods/guaranteed/pod{UID}/{ID}"),
            format!("kubepods/pod{UID}/{ID}/child"),
            format!("kubepods/pod{UID}/crio-conmon-{ID}"),
            format!("kubepods/pod{SYSTEMD_UID}/{ID}"),
        ] {
            assert_eq!(parsed(&path, "kubepods"), None, "{path}");
        }
    }

    #[test]
    fn status_ids_name_their_runtime() {
        assert_eq!(
            status_id(&format!("containerd://{ID}")),
            Some((Some(Runtime::Containerd), ID))
        );
        assert_eq!(
            status_id(&format!("cri-o://{ID}")),
            Some((Some(Runtime::CriO), ID))
        );
        assert_eq!(
            status_id(&format!("docker://{ID}")),
            Some((Some(Runtime::Docker), ID))
        );
        assert_eq!(status_id(&format!("other://{ID}")), Some((None, ID)));
        assert_eq!(status_id(ID), None);
        assert_eq!(status_id("containerd://"), None);
        assert_eq!(status_id("containerd://../x"), None);
    }
}
