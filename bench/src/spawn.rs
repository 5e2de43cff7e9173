//! The switchboard server a SIP benchmark measures (sip-load's `--spawn`, converse, overload):
//! the binary beside the bench, started on a temporary database, with an agent and an endpoint
//! created through its API; and free loopback ports for it and its peers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The switchboard binary beside this one (`target/release/switchboard`).
pub fn default_binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let bin = me.with_file_name("switchboard");
    if !bin.exists() {
        bail!(
            "{} not found: build it (cargo build --release -p switchboard) or pass --spawn",
            bin.display()
        );
    }
    Ok(bin)
}

pub(crate) struct Spawned {
    pub(crate) child: tokio::process::Child,
    pub(crate) http: String,
    /// Where its `/metrics` are served.
    pub(crate) metrics: String,
    pub(crate) sip: SocketAddr,
    /// The slug of the endpoint `spawn_server` created.
    pub(crate) slug: String,
    /// The workspace's API key.
    pub(crate) key: String,
    /// The server's store.
    pub(crate) db_url: String,
    _dir: tempfile::TempDir,
}

/// Starts `bin serve --sip` (with `extra` flags) on a temporary database and creates an agent
/// that does not hang up by itself within the hour and an endpoint.
pub(crate) async fn spawn_server(bin: &PathBuf, extra: &[String]) -> anyhow::Result<Spawned> {
    let flags: Vec<String> = ["--tts".into(), "tones".into()]
        .into_iter()
        .chain(extra.iter().cloned())
        .collect();
    let mut server = spawn_switchboard(bin, &flags).await?;
    (server.slug, _) = create_endpoint(
        &server,
        &json!({"name": "Bench", "greeting_message": "Hello, this is the load test agent.",
        "max_call_duration_secs": 3600, "silence_timeout_secs": 3600}),
    )
    .await?;
    Ok(server)
}

/// The bench's own settings of the server's limits: a load test is not throttled per source.
const DEFAULTS: &[(&str, &str)] = &[
    ("--rate-limit", "100000"),
    ("--sip-invites-per-second", "1000000"),
    ("--sip-ring-ms", "0"),
];

/// Starts `bin serve --sip` on a temporary database, with `extra` flags after the bench's own
/// (which give way to an `extra` flag of the same name), and waits for its HTTP API.
pub(crate) async fn spawn_switchboard(bin: &PathBuf, extra: &[String]) -> anyhow::Result<Spawned> {
    let overridden = |flag: &str| {
        extra
            .iter()
            .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
    };
    let defaults = DEFAULTS
        .iter()
        .filter(|(flag, _)| !overridden(flag))
        .flat_map(|(flag, value)| [*flag, *value]);
    let dir = tempfile::tempdir()?;
    let http = free_port()?;
    let metrics = free_port()?;
    let sip_port = free_port()?;
    let db_url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let mut child = tokio::process::Command::new(bin)
        .arg("--database-url")
        .arg(&db_url)
        .args(["serve", "--sip"])
        .arg("--http")
        .arg(format!("127.0.0.1:{http}"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{metrics}"))
        .arg("--sip-listen")
        .arg(format!("127.0.0.1:{sip_port}"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(defaults)
        .args(extra)
        .env("SWITCHBOARD_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let stdout = child.stdout.take().context("server stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let key = loop {
        let line = lines
            .next_line()
            .await?
            .context("the server exited before printing its key")?;
        if let Some(k) = line.split("store it now): ").nth(1) {
            break k.trim().to_string();
        }
    };
    let base = format!("http://127.0.0.1:{http}");
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(up, "the server's HTTP API did not come up");
    Ok(Spawned {
        child,
        http: base,
        metrics: format!("http://127.0.0.1:{metrics}"),
        sip: format!("127.0.0.1:{sip_port}").parse()?,
        slug: String::new(),
        key,
        db_url,
        _dir: dir,
    })
}

/// Creates an agent from `agent` (the body of `POST /agents`) and an endpoint that routes to
/// it; answers the endpoint's slug and id.
pub(crate) async fn create_endpoint(
    server: &Spawned,
    agent: &Value,
) -> anyhow::Result<(String, String)> {
    let agent = create_agent(server, agent).await?;
    let endpoint: Value = reqwest::Client::new()
        .post(format!("{}/sip-endpoints", server.http))
        .bearer_auth(&server.key)
        .json(&json!({"name": "bench", "inbound_agent_id": agent}))
        .send()
        .await?
        .json()
        .await?;
    let field = |name: &str| {
        endpoint["data"][name]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no endpoint created: {endpoint}"))
    };
    Ok((field("slug")?, field("id")?))
}

/// Creates an agent from `agent` (the body of `POST /agents`); answers its id.
pub(crate) async fn create_agent(server: &Spawned, agent: &Value) -> anyhow::Result<String> {
    let created: Value = reqwest::Client::new()
        .post(format!("{}/agents", server.http))
        .bearer_auth(&server.key)
        .json(agent)
        .send()
        .await?
        .json()
        .await?;
    Ok(created["id"]
        .as_str()
        .with_context(|| format!("no agent created: {created}"))?
        .to_string())
}

/// A port free for both UDP and TCP on loopback.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let port = udp.local_addr()?.port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
}
