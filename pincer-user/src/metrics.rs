//! Prometheus metrics of the twin, and the HTTP endpoint that serves them.
//!
//! [`Metrics`] holds every metric; the daemon updates it as requests arrive
//! and verdicts leave, and copies the kernel's counters into it
//! periodically. [`MetricsServer`] serves it at `GET /metrics` in the
//! OpenMetrics text format (`application/openmetrics-text; version=1.0.0`),
//! which Prometheus scrapes natively.
//!
//! # Metrics
//!
//! Every name starts with `pincer_`. Counters carry the `_total` suffix in
//! the exposition.
//!
//! | Metric | Type | Labels | Meaning |
//! |---|---|---|---|
//! | `pincer_requests_total` | counter | `agent`, `hook` | Parked requests received from the kernel, by agent and LSM hook (`file_open`, `inode_create`, …). |
//! | `pincer_parks_total` | counter | `agent` | Tasks parked. Tasks waiting on the same access share one request and one vote, so this grows at least as fast as `pincer_requests_total`. |
//! | `pincer_verdicts_total` | counter | `agent`, `voter`, `outcome` | Verdicts written back to the kernel. `voter` is who decided (`mission`, `prompt`, `webhook`, `grant`, `default` when every voter abstained, `timeout`, …); `outcome` is `allow` or `deny`. |
//! | `pincer_decision_latency_seconds` | histogram | `agent` | Time from a request's arrival to its verdict. Buckets grow by ×4 from 100 µs to about 1.9 hours, so that automatic votes (sub-millisecond), webhooks (milliseconds to seconds) and people answering a prompt (seconds to an hour) each get several buckets. |
//! | `pincer_pending` | gauge | | Requests waiting for a verdict now. |
//! | `pincer_agents` | gauge | | Confined agent cgroups now. |
//! | `pincer_integrity_problems` | gauge | | What the last integrity check found wrong (a map that differs from what pincer wrote, a program not attached, a canary not refused); zero when what the kernel holds is what pincer wrote. |
//! | `pincer_denials_total` | counter | `cause` | Accesses the kernel denied, from the kernel's own counters; `cause` is the kernel counter's name (see below). |
//! | `pincer_kernel_counter` | gauge | `name` | The raw value of every kernel counter, denials or not (`allowed`, `audited`, `parked`, `reparked`, `verdict_allow`, `walk_limit`, …), as the kernel reports it: it restarts from zero when the BPF programs are loaded again. |
//!
//! # Denial causes
//!
//! `pincer_denials_total{cause}` has one series per kernel counter that
//! counts denials. Every kernel counter is taken as a denial cause except the
//! ones known not to be ([`NOT_DENIALS`]), so a counter added to the kernel
//! side later shows up here without a change to this module.
//!
//! - `denied`: every access the kernel denied, whatever the reason (not
//!   granted in enforce mode, a twin's deny verdict, and the causes below).
//! - `verdict_deny`: parked requests the twin denied.
//! - `no_twin`: not parked because no twin was alive (or it died while the
//!   request was open).
//! - `pending_full`: not parked because the kernel's pending table was full.
//! - `unparkable`: not parked because the task could not be stopped.
//! - `guarded`: self-protection refusals (signalling or tracing pincer,
//!   leaving the cgroup, …).
//! - `read_failed`, `no_offsets`: the kernel could not read the object, so
//!   the access counted as ungranted.
//! - `ringbuf_full`: events lost because the ring buffer was full; the
//!   access was decided as if the event had been sent (denied in enforce
//!   mode, and a request that would have been parked is denied).
//!
//! The causes overlap: `denied` is the total and the others say why, so do
//! not sum the series; `pincer_denials_total{cause="denied"}` is the number
//! of denials.
//!
//! The kernel's counters are absolute and restart from zero when the
//! programs are reloaded. The exported counters follow the kernel's values
//! while those grow; when one goes back, the drop is ignored and counting
//! resumes from the new value, so the counter never decreases (it then runs
//! ahead of the kernel's value by what the kernel had counted before).

use std::{
    collections::HashMap,
    fmt::Write as _,
    net::SocketAddr,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::{self, JoinHandle},
    time::Duration,
};

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, text},
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Metric, Registry, Unit},
};

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The path [`MetricsServer`] serves the metrics on.
pub const PATH: &str = "/metrics";

/// Kernel counters that do not count denials: exported only as
/// `pincer_kernel_counter`.
pub const NOT_DENIALS: &[&str] = &[
    "allowed",
    "audited",
    "walk_limit",
    "reserved",
    "parked",
    "verdict_allow",
    "reparked",
];

/// Upper bounds of the decision latency buckets, in seconds.
///
/// Verdicts range from a grant or mission answer computed in microseconds to
/// a person answering a prompt after many minutes. Growing by ×4 from
/// 100 µs covers that range in 14 buckets (the last one ends near 1.9 hours,
/// past any sensible vote deadline) while keeping every decade split in about
/// two, which is enough to tell automatic, webhook and human votes apart.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_1, 4.0, 14)
}

fn latency_histogram() -> Histogram {
    Histogram::new(latency_buckets())
}

/// A label value escaped for the text exposition.
///
/// prometheus-client writes label values as they are, and agent names and
/// voter names come from configuration: a quote or a newline in one would
/// otherwise corrupt the whole scrape.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Text(String);

impl From<&str> for Text {
    fn from(value: &str) -> Self {
        Text(value.to_owned())
    }
}

impl EncodeLabelValue for Text {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        let mut rest = self.0.as_str();
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentHookLabels {
    agent: Text,
    hook: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    agent: Text,
    voter: Text,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    cause: Text,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    name: Text,
}

/// The twin's metrics. Share it as `Arc<Metrics>`; every method takes
/// `&self` and may be called from any thread.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<AgentHookLabels, Counter>,
    parks: Family<AgentLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    latency: Family<AgentLabels, Histogram, fn() -> Histogram>,
    pending: Gauge,
    agents: Gauge,
    integrity: Gauge,
    denials: Family<CauseLabels, Counter>,
    kernel: Family<NameLabels, Gauge<u64, AtomicU64>>,
    /// The kernel's value of each denial counter at the last
    /// [`Metrics::set_kernel_counters`], to turn absolute values into
    /// increments.
    kernel_seen: Mutex<HashMap<String, u64>>,
}

/// A new metric at zero, registered in `registry` as `name` with `help`;
/// the registry and the caller share it.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric at zero, with no labelled series yet.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pincer");
        let requests = registered(
            &mut registry,
            "requests",
            "Parked requests received from the kernel",
        );
        let parks = registered(
            &mut registry,
            "parks",
            "Tasks parked; tasks waiting on the same access share one request",
        );
        let verdicts = registered(
            &mut registry,
            "verdicts",
            "Verdicts on parked requests, by who decided and the outcome (allow or deny)",
        );
        let latency =
            Family::<_, _, fn() -> Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register_with_unit(
            "decision_latency",
            "Time from a request's arrival to its verdict",
            Unit::Seconds,
            latency.clone(),
        );
        let pending = registered(&mut registry, "pending", "Requests waiting for a verdict");
        let agents = registered(&mut registry, "agents", "Confined agent cgroups");
        let integrity = registered(
            &mut registry,
            "integrity_problems",
            "What the last integrity check found wrong; zero when the kernel holds what pincer wrote",
        );
        let denials = registered(
            &mut registry,
            "denials",
            // No double quotes: OpenMetrics does not allow them in HELP text.
            "Accesses the kernel denied, by cause; cause denied is the total and the other causes overlap it",
        );
        let kernel = registered(
            &mut registry,
            "kernel_counter",
            "Raw value of each kernel counter; restarts from zero when the BPF programs are reloaded",
        );
        Metrics {
            registry,
            requests,
            parks,
            verdicts,
            latency,
            pending,
            agents,
            integrity,
            denials,
            kernel,
            kernel_seen: Mutex::new(HashMap::new()),
        }
    }

    /// A parked request arrived from the kernel.
    pub fn request(&self, agent: &str, hook: &str) {
        self.requests
            .get_or_create(&AgentHookLabels {
                agent: agent.into(),
                hook: hook.into(),
            })
            .inc();
    }

    /// `tasks` tasks of `agent` were parked.
    pub fn parked(&self, agent: &str, tasks: u64) {
        self.parks
            .get_or_create(&AgentLabels {
                agent: agent.into(),
            })
            .inc_by(tasks);
    }

    /// A verdict was given on one of `agent`'s requests by `voter`,
    /// `latency` after the request arrived.
    pub fn verdict(&self, agent: &str, voter: &str, allow: bool, latency: Duration) {
        self.verdicts
            .get_or_create(&VerdictLabels {
                agent: agent.into(),
                voter: voter.into(),
                outcome: if allow { "allow" } else { "deny" },
            })
            .inc();
        self.latency
            .get_or_create(&AgentLabels {
                agent: agent.into(),
            })
            .observe(latency.as_secs_f64());
    }

    /// The number of requests waiting for a verdict.
    pub fn set_pending(&self, pending: i64) {
        self.pending.set(pending);
    }

    /// The number of confined agent cgroups.
    pub fn set_agents(&self, agents: i64) {
        self.agents.set(agents);
    }

    /// The number of problems the last integrity check found.
    pub fn set_integrity_problems(&self, problems: i64) {
        self.integrity.set(problems);
    }

    /// The kernel's counters, by name, as absolute values (summed over
    /// CPUs).
    ///
    /// Every counter is exported as `pincer_kernel_counter{name}`; those not
    /// in [`NOT_DENIALS`] also as `pincer_denials_total{cause}`, which
    /// follows the kernel's value and ignores decreases (see the module
    /// documentation).
    pub fn set_kernel_counters(&self, counters: &[(&str, u64)]) {
        // Held across the whole update: two callers interleaving between
        // reading the last value and storing the new one would both add the
        // same difference.
        let mut seen = self
            .kernel_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for &(name, value) in counters {
            self.kernel
                .get_or_create(&NameLabels { name: name.into() })
                .set(value);
            if NOT_DENIALS.contains(&name) {
                continue;
            }
            // Created even at zero, so that the series exists before the
            // first denial and rate() sees it start.
            let counter = self
                .denials
                .get_or_create(&CauseLabels { cause: name.into() });
            let last = match seen.get_mut(name) {
                Some(last) => last,
                None => seen.entry(name.to_owned()).or_insert(0),
            };
            // A smaller value means the programs were reloaded and the
            // kernel started again from zero: keep the counter where it is
            // and count from the new value on.
            if value > *last {
                counter.inc_by(value - *last);
            }
            *last = value;
        }
    }

    /// The OpenMetrics text exposition of every metric, ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail and no label value encoder here
        // fails; should prometheus-client ever fail anyway, the truncated
        // output (no `# EOF`) makes the scrape fail visibly rather than
        // taking the serving thread down.
        if let Err(error) = text::encode(&mut out, &self.registry) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        out
    }
}

/// The metrics endpoint could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot listen on {addr} for metrics")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The serving thread could not be started.
    #[error("cannot start the metrics thread")]
    Thread(#[source] std::io::Error),
}

/// The HTTP endpoint serving [`Metrics`] at [`PATH`], on a thread of its
/// own. Dropping it stops the thread and closes the socket.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    local_addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Listens on `addr` (port 0 picks a free port: see
    /// [`MetricsServer::local_addr`]) and serves `metrics` until dropped.
    ///
    /// `GET` (or `HEAD`) [`PATH`] answers the exposition; another method on
    /// that path answers 405, any other path 404.
    pub fn start(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<MetricsServer, MetricsError> {
        let server = tiny_http::Server::http(addr)
            .map_err(|source| MetricsError::Listen { addr, source })?;
        let server = Arc::new(server);
        let local_addr = server.server_addr().to_ip().unwrap_or(addr);
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new()
            .name("pincer-metrics".to_owned())
            .spawn({
                let server = Arc::clone(&server);
                let stopping = Arc::clone(&stopping);
                move || serve(&server, &metrics, &stopping)
            })
            .map_err(MetricsError::Thread)?;
        tracing::info!(%local_addr, "serving metrics on http://{local_addr}{PATH}");
        Ok(MetricsServer {
            server,
            local_addr,
            stopping,
            thread: Some(thread),
        })
    }

    /// The address listened on, with the port chosen when `start` was given
    /// port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // Set before unblocking so the thread knows its `recv` error is the
        // shutdown and not a failing listener.
        self.stopping.store(true, Ordering::Release);
        self.server.unblock();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the metrics thread panicked");
        }
        // The last reference to the tiny_http server goes with `self`, which
        // closes the listening socket.
    }
}

fn serve(server: &tiny_http::Server, metrics: &Metrics, stopping: &AtomicBool) {
    loop {
        match server.recv() {
            Ok(request) => answer(request, metrics),
            Err(error) => {
                // tiny_http's accept thread ends after reporting an error,
                // so no request would come any more.
                if !stopping.load(Ordering::Acquire) {
                    tracing::warn!(%error, "the metrics endpoint stopped accepting connections");
                }
                return;
            }
        }
    }
}

fn answer(request: tiny_http::Request, metrics: &Metrics) {
    use tiny_http::{Header, Method, Response};

    let path = request.url().split(['?', '#']).next().unwrap_or_default();
    let response = if path != PATH {
        Response::from_string("not found\n").with_status_code(404)
    } else if !matches!(request.method(), Method::Get | Method::Head) {
        Response::from_string("method not allowed\n")
            .with_status_code(405)
            .with_header(
                Header::from_bytes(&b"Allow"[..], &b"GET, HEAD"[..])
                    .expect("a constant ASCII header is valid"),
            )
    } else {
        Response::from_string(metrics.encode()).with_header(
            Header::from_bytes(&b"Content-Type"[..], CONTENT_TYPE.as_bytes())
                .expect("a constant ASCII header is valid"),
        )
    };
    // The scraper may have gone away; the next scrape tries again.
    if let Err(error) = request.respond(response) {
        tracing::debug!(%error, "cannot answer a metrics request");
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{Read, Write},
        net::{Ipv4Addr, TcpStream},
        sync::mpsc,
        time::Instant,
    };

    use super::*;

    /// The value of the sample line `series` (name and labels exactly as
    /// encoded), if present.
    fn sample(text: &str, series: &str) -> Option<String> {
        text.lines().find_map(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .map(str::to_owned)
        })
    }

    fn value(text: &str, series: &str) -> String {
        sample(text, series).unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
    }

    /// Checks the value of every `(series, value)` in `text`.
    #[track_caller]
    fn assert_samples(text: &str, expected: &[(&str, &str)]) {
        for (series, expected) in expected {
            assert_eq!(value(text, series), *expected, "{series}");
        }
    }

    #[test]
    fn counters_and_gauges_carry_their_labels_and_values() {
        let metrics = Metrics::new();
        metrics.request("builder", "file_open");
        metrics.request("builder", "file_open");
        metrics.request("builder", "inode_create");
        metrics.request("tester", "file_open");
        metrics.parked("builder", 3);
        metrics.parked("builder", 2);
        metrics.verdict("builder", "prompt", true, Duration::from_millis(1));
        metrics.verdict("builder", "prompt", false, Duration::from_millis(1));
        metrics.verdict("builder", "prompt", false, Duration::from_millis(1));
        metrics.verdict("tester", "timeout", false, Duration::from_secs(30));
        metrics.set_pending(4);
        metrics.set_agents(2);
        metrics.set_pending(1);
        metrics.set_integrity_problems(3);

        let text = metrics.encode();
        assert_samples(
            &text,
            &[
                (
                    r#"pincer_requests_total{agent="builder",hook="file_open"}"#,
                    "2",
                ),
                (
                    r#"pincer_requests_total{agent="builder",hook="inode_create"}"#,
                    "1",
                ),
                (
                    r#"pincer_requests_total{agent="tester",hook="file_open"}"#,
                    "1",
                ),
                (r#"pincer_parks_total{agent="builder"}"#, "5"),
                (
                    r#"pincer_verdicts_total{agent="builder",voter="prompt",outcome="allow"}"#,
                    "1",
                ),
                (
                    r#"pincer_verdicts_total{agent="builder",voter="prompt",outcome="deny"}"#,
                    "2",
                ),
                (
                    r#"pincer_verdicts_total{agent="tester",voter="timeout",outcome="deny"}"#,
                    "1",
                ),
                ("pincer_pending", "1"),
                ("pincer_agents", "2"),
                ("pincer_integrity_problems", "3"),
            ],
        );
        assert!(text.contains("# TYPE pincer_requests counter\n"), "{text}");
        assert!(text.contains("# TYPE pincer_pending gauge\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        // OpenMetrics HELP text cannot hold a bare double quote.
        for help in text.lines().filter(|line| line.starts_with("# HELP ")) {
            assert!(!help.contains('"'), "{help}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new();
        metrics.request("evil\"} 1\npincer_agents 99\n\\", "file_open");

        let text = metrics.encode();
        assert_eq!(
            value(
                &text,
                r#"pincer_requests_total{agent="evil\"} 1\npincer_agents 99\n\\",hook="file_open"}"#
            ),
            "1"
        );
        assert_eq!(value(&text, "pincer_agents"), "0");
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("pincer_agents "))
                .count(),
            1
        );
    }

    #[test]
    fn kernel_counters_export_absolute_values_and_ignore_decreases() {
        let metrics = Metrics::new();
        let denials = |cause: &str| format!(r#"pincer_denials_total{{cause="{cause}"}}"#);
        let kernel = |name: &str| format!(r#"pincer_kernel_counter{{name="{name}"}}"#);
        // Each step: the kernel's counters, then what the metrics show.
        type Step<'a> = (&'a [(&'a str, u64)], &'a [(String, &'a str)]);
        let steps: [Step; 4] = [
            (
                &[
                    ("allowed", 100),
                    ("denied", 10),
                    ("no_twin", 0),
                    ("parked", 7),
                ],
                &[
                    (denials("denied"), "10"),
                    (denials("no_twin"), "0"),
                    (kernel("allowed"), "100"),
                    (kernel("parked"), "7"),
                    (kernel("no_twin"), "0"),
                ],
            ),
            (
                &[
                    ("allowed", 150),
                    ("denied", 25),
                    ("no_twin", 3),
                    ("parked", 9),
                ],
                &[
                    (denials("denied"), "25"),
                    (denials("no_twin"), "3"),
                    (kernel("allowed"), "150"),
                ],
            ),
            // The programs were reloaded: the kernel starts again from zero.
            (
                &[("denied", 5), ("no_twin", 3)],
                &[
                    (denials("denied"), "25"),
                    (denials("no_twin"), "3"),
                    (kernel("denied"), "5"),
                ],
            ),
            // Denials after the reload still count.
            (
                &[("denied", 8)],
                &[(denials("denied"), "28"), (kernel("denied"), "8")],
            ),
        ];
        for (step, (counters, expected)) in steps.iter().enumerate() {
            metrics.set_kernel_counters(counters);
            let text = metrics.encode();
            for (series, value) in *expected {
                assert_eq!(
                    sample(&text, series).as_deref(),
                    Some(*value),
                    "step {step}: {series}"
                );
            }
            // Not denials: a gauge only.
            for name in ["allowed", "parked"] {
                assert_eq!(sample(&text, &denials(name)), None, "step {step}");
            }
        }
    }

    #[test]
    fn unknown_kernel_counters_are_denial_causes() {
        let metrics = Metrics::new();
        metrics.set_kernel_counters(&[("map_full", 2), ("ringbuf_full", 1)]);
        assert_samples(
            &metrics.encode(),
            &[
                (r#"pincer_denials_total{cause="map_full"}"#, "2"),
                (r#"pincer_denials_total{cause="ringbuf_full"}"#, "1"),
                (r#"pincer_kernel_counter{name="map_full"}"#, "2"),
            ],
        );
    }

    #[test]
    fn non_denials_name_real_kernel_counters() {
        // A renamed kernel counter would silently become a denial cause.
        for name in NOT_DENIALS {
            assert!(
                pincer_common::counter::NAMES
                    .iter()
                    .any(|(_, counter)| counter == name),
                "{name} is not a kernel counter any more"
            );
        }
    }

    #[test]
    fn latency_histogram_counts_and_sums_verdicts() {
        let metrics = Metrics::new();
        metrics.verdict("builder", "mission", true, Duration::from_micros(50));
        metrics.verdict("builder", "webhook", true, Duration::from_millis(250));
        metrics.verdict("builder", "prompt", false, Duration::from_secs(90));
        metrics.verdict("tester", "grant", true, Duration::from_secs(2));

        let text = metrics.encode();
        for line in [
            "# TYPE pincer_decision_latency_seconds histogram\n",
            "# UNIT pincer_decision_latency_seconds seconds\n",
        ] {
            assert!(text.contains(line), "{line:?} is not in:\n{text}");
        }
        assert_eq!(
            value(
                &text,
                r#"pincer_decision_latency_seconds_count{agent="builder"}"#
            ),
            "3"
        );
        let sum: f64 = value(
            &text,
            r#"pincer_decision_latency_seconds_sum{agent="builder"}"#,
        )
        .parse()
        .unwrap();
        assert!((sum - 90.25005).abs() < 1e-9, "sum {sum}");
        assert_eq!(
            value(
                &text,
                r#"pincer_decision_latency_seconds_count{agent="tester"}"#
            ),
            "1"
        );
        // Cumulative buckets: 50 µs falls in the first, 250 ms by 0.4096 s,
        // 90 s by 104.8576 s.
        let bucket = |le: &str| {
            value(
                &text,
                &format!(r#"pincer_decision_latency_seconds_bucket{{le="{le}",agent="builder"}}"#),
            )
        };
        assert_eq!(bucket("0.0001"), "1");
        assert_eq!(bucket("0.1024"), "1");
        assert_eq!(bucket("0.4096"), "2");
        assert_eq!(bucket("26.2144"), "2");
        assert_eq!(bucket("104.8576"), "3");
        assert_eq!(bucket("+Inf"), "3");
    }

    #[test]
    fn latency_buckets_span_automatic_to_human_votes() {
        let buckets: Vec<f64> = latency_buckets().collect();
        assert_eq!(buckets.first(), Some(&0.000_1));
        let last = *buckets.last().unwrap();
        assert!(last >= 3600.0, "last bucket {last}");
    }

    /// Sends `request` raw and returns the whole response.
    fn exchange(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    }

    fn status_line(response: &str) -> &str {
        response.lines().next().unwrap_or_default()
    }

    fn local() -> SocketAddr {
        (Ipv4Addr::LOCALHOST, 0).into()
    }

    #[test]
    fn server_answers_metrics() {
        let metrics = Arc::new(Metrics::new());
        let server = MetricsServer::start(local(), Arc::clone(&metrics)).unwrap();
        assert_ne!(server.local_addr().port(), 0);
        metrics.request("builder", "file_open");
        metrics.set_agents(3);

        let response = exchange(server.local_addr(), "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(
            status_line(&response).starts_with("HTTP/1.")
                && status_line(&response).ends_with(" 200 OK"),
            "{response}"
        );
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(
            head.lines()
                .any(|line| line.eq_ignore_ascii_case(&format!("content-type: {CONTENT_TYPE}"))),
            "{head}"
        );
        assert_eq!(
            value(
                body,
                r#"pincer_requests_total{agent="builder",hook="file_open"}"#
            ),
            "1"
        );
        assert_eq!(value(body, "pincer_agents"), "3");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[test]
    fn server_refuses_other_paths_and_methods() {
        let server = MetricsServer::start(local(), Arc::new(Metrics::new())).unwrap();
        let addr = server.local_addr();

        let response = exchange(addr, "GET / HTTP/1.0\r\n\r\n");
        assert!(
            status_line(&response).ends_with(" 404 Not Found"),
            "{response}"
        );
        let response = exchange(addr, "GET /metricsx HTTP/1.0\r\n\r\n");
        assert!(
            status_line(&response).ends_with(" 404 Not Found"),
            "{response}"
        );
        let response = exchange(addr, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
        assert!(
            status_line(&response).ends_with(" 405 Method Not Allowed"),
            "{response}"
        );
        assert!(response.contains("\r\nAllow: GET, HEAD\r\n"), "{response}");
        assert!(!response.contains("pincer_"), "{response}");

        let response = exchange(addr, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(status_line(&response).ends_with(" 200 OK"), "{response}");
        assert!(
            response.ends_with("\r\n\r\n"),
            "HEAD has no body: {response}"
        );
    }

    #[test]
    fn dropping_the_server_stops_it() {
        let server = MetricsServer::start(local(), Arc::new(Metrics::new())).unwrap();
        let addr = server.local_addr();
        assert!(status_line(&exchange(addr, "GET /metrics HTTP/1.0\r\n\r\n")).ends_with(" 200 OK"));

        // Drop joins the serving thread: it must return, not hang.
        let (done, dropped) = mpsc::channel();
        thread::spawn(move || {
            drop(server);
            done.send(()).unwrap();
        });
        dropped
            .recv_timeout(Duration::from_secs(10))
            .expect("dropping the server joins its thread");

        // tiny_http closes the listening socket from its accept thread,
        // shortly after the drop.
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{addr} still accepts connections"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn listen_error_names_the_address() {
        let taken = std::net::TcpListener::bind(local()).unwrap();
        let addr = taken.local_addr().unwrap();
        let error = MetricsServer::start(addr, Arc::new(Metrics::new())).unwrap_err();
        let message = format!("{:#}", anyhow::Error::new(error));
        assert!(
            message.starts_with(&format!("cannot listen on {addr} for metrics: ")),
            "{message}"
        );
    }
}
