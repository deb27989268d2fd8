//! `pincer approvals serve` as a process, its page rendered by a real
//! headless browser with a request whose names are hostile markup, and the
//! operators' commands against it.
//!
//! The browser is Debian's `chromium` (`cargo xtask setup` installs it; the
//! test command passes its path in `PINCER_CHROMIUM`). Without it the test
//! fails: a page whose escaping is not checked is not checked at all.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use pincer::approvals::server::served_address;
use pincer_model::vote::webhook::{NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use serde_json::json;

const SECRET: &str = "correct horse battery staple";
const TOKEN: &str = "operator token, long enough";
/// What the page would do if the agent's markup ran: retitle the page and
/// add an element.
const HOSTILE_PATH: &str = "/tmp/<img src=x onerror=\"document.title='pwned';document.body.appendChild(document.createElement('b')).id='pwned'\">/<script>document.title='pwned'</script>";
const HOSTILE_COMM: &str = "<svg onload=alert(1)>";

/// The service, killed when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn private_file(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

fn serve(dir: &Path) -> Served {
    private_file(&dir.join("webhook.key"), SECRET);
    private_file(&dir.join("token"), TOKEN);
    fs::write(
        dir.join("approvals.toml"),
        "secret_file = \"webhook.key\"\ntoken_file = \"token\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["approvals", "serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(dir.join("approvals.toml"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = served_address(&line)
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    Served { child, addr }
}

/// One HTTP/1.1 exchange (the service closes every connection after its
/// answer): the status and the body.
fn exchange(stream: &mut TcpStream) -> (u16, String) {
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

fn get_pending(addr: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /api/pending HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    exchange(&mut stream)
}

/// Posts a signed webhook request for the hostile path and leaves the
/// connection open: the service holds it for a minute.
fn park_hostile_request(addr: &str) -> TcpStream {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let nonce = "0123456789abcdef0123456789abcdef";
    let body = json!({
        "request": {
            "id": 42, "mission": "docs", "cgroup": 4242, "pid": 100, "tid": 100,
            "comm": HOSTILE_COMM, "exe": "/usr/bin/cat", "parents": [],
            "operation": ["read", "write"], "path": HOSTILE_PATH, "hook": "file_open",
            "why": "no grant covers it",
            "owner_only": "a change to a policy object",
        },
        "nonce": nonce,
        "timestamp": timestamp,
        "node": "node-a",
        "timeout_ms": 60_000,
    })
    .to_string();
    let signature = sign(SECRET.as_bytes(), timestamp, nonce, body.as_bytes());
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         {TIMESTAMP_HEADER}: {timestamp}\r\n{NONCE_HEADER}: {nonce}\r\n{SIGNATURE_HEADER}: {signature}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let started = Instant::now();
    while !get_pending(addr).1.contains("node-a") {
        assert!(started.elapsed() < Duration::from_secs(10), "never listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    stream
}

/// The page's DOM after its script ran, as chromium renders it.
fn rendered(url: &str, profile: &Path) -> String {
    let chromium = std::env::var("PINCER_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            // Virtual time runs the page's fetch and timers to completion
            // before the DOM is dumped.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run {chromium} ({error}): this test needs a headless browser; \
                 `cargo xtask setup` installs Debian's chromium, or set PINCER_CHROMIUM"
            )
        });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{chromium} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut dom = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut dom)
        .unwrap();
    dom
}

#[test]
fn the_page_shows_hostile_names_as_text_and_runs_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let served = serve(dir.path());
    let _held = park_hostile_request(&served.addr);

    // The token in the fragment: the page takes it, the server never sees
    // it.
    let dom = rendered(
        &format!(
            "http://{}/#token={}",
            served.addr,
            TOKEN.replace(' ', "%20")
        ),
        &dir.path().join("profile"),
    );
    assert!(dom.contains("1 request(s) waiting"), "{dom}");
    // Listed, with every column, the markup shown as text.
    for text in [
        "node-a",
        "&lt;img src=x onerror=\"document.title='pwned';",
        "&lt;script&gt;document.title='pwned'&lt;/script&gt;",
        "&lt;svg onload=alert(1)&gt; (pid 100)",
        "read, write",
        "file_open",
        "yes: a change to a policy object",
    ] {
        assert!(dom.contains(text), "{text:?} is not shown in {dom}");
    }
    // And none of it ran or became an element.
    assert!(dom.contains("<title>pincer approvals</title>"), "{dom}");
    assert!(!dom.contains("id=\"pwned\""), "{dom}");
    for element in ["<img", "<svg", "<script>document"] {
        assert!(!dom.contains(element), "{element} in {dom}");
    }

    // The operators' commands: the request listed, a wrong token refused
    // with a clear message and a failing status.
    let pincer = |token: &str, args: &[&str]| {
        private_file(&dir.path().join("given"), token);
        Command::new(env!("CARGO_BIN_EXE_pincer"))
            .arg("approvals")
            .args(args)
            .args(["--server", &format!("http://{}", served.addr)])
            .arg("--token-file")
            .arg(dir.path().join("given"))
            .output()
            .unwrap()
    };
    let listed = pincer(&format!("{TOKEN}\n"), &["pending"]);
    assert!(listed.status.success());
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout.starts_with("1 on node-a, ") && stdout.contains("42 [docs] read,write /tmp/<img"),
        "{stdout}"
    );
    let refused = pincer("not the operator token", &["pending"]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "pincer: the approval service refused the operator token (HTTP 401): wrong operator token\n"
    );
    let denied = pincer(TOKEN, &["deny", "1", "--reason", "no"]);
    assert!(denied.status.success(), "{denied:?}");
    assert!(!get_pending(&served.addr).1.contains("node-a"));
}
