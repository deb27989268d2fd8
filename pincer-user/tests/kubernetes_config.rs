//! The daemon's configuration and missions of the Kubernetes deployment
//! (`deploy/kubernetes/config/`): the daemon this crate builds would start
//! with them, without a warning, and serves metrics where the Service looks.

use std::{net::SocketAddr, path::PathBuf, process::Command};

use pincer_model::config::daemon::Config;

fn config_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/config/daemon.toml")
}

#[test]
fn the_daemon_would_start_with_the_pods_configuration() {
    // What the unit's ExecStartPre runs: the configuration and every
    // agent's mission, loaded and resolved as a start would.
    let out = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["daemon", "--check", "--config"])
        .arg(config_file())
        // As the DaemonSet sets it from the downward API.
        .env("NODE_NAME", "node-1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.is_empty(), "warnings: {stderr}");
}

#[test]
fn metrics_listen_on_the_pods_network_at_the_services_port() {
    let config = Config::from_file(&config_file()).unwrap();
    assert_eq!(
        config.daemon.metrics,
        Some(SocketAddr::from(([0, 0, 0, 0], 9464)))
    );
    assert!(!config.agents.is_empty());
    // The ConfigMap carries the configuration's directory to /etc/pincer:
    // a mission elsewhere would not be in the pod.
    let dir = config_file().parent().unwrap().to_owned();
    for agent in &config.agents {
        assert!(
            agent.mission.starts_with(&dir),
            "{} is not under {}",
            agent.mission.display(),
            dir.display()
        );
    }
    let kubernetes = config.kubernetes.expect("pods are agents");
    assert_eq!(kubernetes.missions, dir.join("missions"));
    // The DaemonSet names the node; the pod's service account the API.
    assert_eq!((kubernetes.node, kubernetes.api), (None, None));
}
