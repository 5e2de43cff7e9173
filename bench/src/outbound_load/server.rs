//! The server under test: a fresh SQLite store (workspace, key, credit, calling numbers) and
//! `switchboard serve --carrier sip` with the peer as its default trunk, its log read as it
//! goes for the per-call RTP counters and the warnings.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::phone::{PhoneNumber, parse_country};
use tokio::io::{AsyncBufReadExt, BufReader};

/// What the server logged that the report needs.
#[derive(Default)]
pub struct ServerLog {
    /// Per call id: (RTP sent, received, lost, end reason) of its "outbound call ended" line.
    pub calls: HashMap<String, (u64, u64, u64, String)>,
    /// Warnings and errors by message.
    pub warnings: BTreeMap<String, u64>,
    /// The first few of them, whole.
    pub examples: Vec<String>,
}

pub struct Server {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub base: String,
    pub key: String,
    /// The calling numbers' ids, in order.
    pub numbers: Vec<(String, String)>,
    pub log: Arc<Mutex<ServerLog>>,
    pub dir: tempfile::TempDir,
}

pub struct Launch<'a> {
    pub bin: &'a Path,
    /// The peer: the default trunk's only gateway.
    pub trunk_to: SocketAddr,
    /// E.164 numbers to call from.
    pub numbers: Vec<String>,
    pub tts: &'a str,
    pub log_filter: &'a str,
    /// The service's ring timeout (campaign calls ring this long).
    pub ring_timeout: u64,
    pub extra: &'a [String],
    /// `NAME=VALUE` pairs.
    pub env: &'a [String],
}

/// The store the server starts on: a workspace with an all-scopes key, ample credit and the
/// calling numbers, active.
async fn prepare_store(
    db_url: &str,
    numbers: &[String],
) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let store = switchboard::Store::open(db_url).await?;
    let (ws, key) = store
        .bootstrap()
        .await?
        .context("the fresh store already had a workspace")?;
    let ids = stock_workspace(&store, ws, numbers).await?;
    Ok((key, ids))
}

/// Gives workspace `ws` ample credit and `numbers` (E.164) as active calling numbers, through
/// the store as an operator would; answers each number with its id.
pub(crate) async fn stock_workspace(
    store: &switchboard::Store,
    ws: switchboard_actors::ids::WorkspaceId,
    numbers: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    store
        .apply_ledger_entry(
            ws,
            1_000_000_000,
            switchboard::store::LedgerKind::Credit,
            "bench",
            None,
        )
        .await?
        .context("crediting the workspace")?;
    let country = parse_country("IL").context("country")?;
    let mut ids = Vec::with_capacity(numbers.len());
    for n in numbers {
        let parsed = PhoneNumber::parse(n, country).with_context(|| format!("number {n}"))?;
        let record = store
            .add_owned_number(ws, &parsed, NumberStatus::Active)
            .await?;
        ids.push((n.clone(), record.id.to_string()));
    }
    Ok(ids)
}

pub async fn start(launch: Launch<'_>) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let db_url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let (key, numbers) = prepare_store(&db_url, &launch.numbers).await?;
    let http = crate::spawn::free_port()?;
    let sip = crate::spawn::free_port()?;
    let trunk = json!({"gateways": [{"host": launch.trunk_to.ip().to_string(),
        "port": launch.trunk_to.port(), "transport": "udp"}]});
    let mut child = tokio::process::Command::new(launch.bin)
        .arg("--database-url")
        .arg(&db_url)
        .args([
            "serve",
            "--metrics-listen",
            "none",
            "--carrier",
            "sip",
            "--outbound-trunk",
        ])
        .arg(trunk.to_string())
        .arg("--sip")
        .arg("--sip-listen")
        .arg(format!("127.0.0.1:{sip}"))
        .arg("--http")
        .arg(format!("127.0.0.1:{http}"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--tts", launch.tts, "--log-format", "json"])
        .args(["--rate-limit", "1000000", "--evaluation-interval-secs", "1"])
        .args([
            "--workspace-concurrency",
            "100000",
            "--node-capacity",
            "100000",
        ])
        // Below the ephemeral range, where the peer's media sockets are.
        .args(["--rtp-ports", "20000-31999"])
        .arg("--ring-timeout-secs")
        .arg(launch.ring_timeout.to_string())
        .args(launch.extra)
        .env("SWITCHBOARD_LOG", launch.log_filter)
        .envs(launch.env.iter().filter_map(|kv| kv.split_once('=')))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", launch.bin.display()))?;
    let pid = child.id().context("server pid")?;
    let log = Arc::new(Mutex::new(ServerLog::default()));
    let stderr = child.stderr.take().context("server stderr")?;
    let file = std::fs::File::create(dir.path().join("server.log"))?;
    tokio::spawn(read_log(stderr, file, log.clone()));
    let base = format!("http://127.0.0.1:{http}");
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        if let Some(status) = child.try_wait()? {
            let tail = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
            bail!("the server exited ({status}):\n{tail}");
        }
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !up {
        bail!("the server's HTTP API did not come up on {base}");
    }
    Ok(Server {
        child,
        pid,
        base,
        key,
        numbers,
        log,
        dir,
    })
}

/// Copies the server's log to a file and keeps what the report needs.
async fn read_log(
    stderr: tokio::process::ChildStderr,
    mut file: std::fs::File,
    log: Arc<Mutex<ServerLog>>,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let _ = writeln!(file, "{line}");
        let mut log = log.lock().unwrap();
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            // Not the JSON log: a panic message or the like.
            *log.warnings.entry("(not a log line)".into()).or_insert(0) += 1;
            if log.examples.len() < 8 {
                log.examples.push(line);
            }
            continue;
        };
        let fields = &v["fields"];
        let message = fields["message"].as_str().unwrap_or("");
        if message == "outbound call ended" {
            let n = |k: &str| fields[k].as_u64().unwrap_or(0);
            let call = fields["call"].as_str().unwrap_or("").to_string();
            let reason = fields["reason"].as_str().unwrap_or("").to_string();
            log.calls
                .insert(call, (n("sent"), n("received"), n("lost"), reason));
        } else if matches!(v["level"].as_str(), Some("WARN" | "ERROR")) {
            *log.warnings.entry(message.to_string()).or_insert(0) += 1;
            if log.examples.len() < 8 {
                log.examples.push(line);
            }
        }
    }
}

impl Server {
    pub fn client(&self) -> Api {
        Api {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(256)
                .build()
                .expect("an HTTP client"),
            base: self.base.clone(),
            key: self.key.clone(),
        }
    }

    /// Stops the server as an operator would (SIGTERM: it drains and exits), killing it if it
    /// has not exited within ten seconds.
    pub async fn stop(mut self, keep: bool) -> Option<PathBuf> {
        // SAFETY: kill(2) with the id of our own child, which has not been waited for yet.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        keep.then(|| self.dir.keep())
    }
}

/// The service's HTTP API with the run's key.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    /// The API at `base` (`http://127.0.0.1:8080`) with `key`.
    pub fn new(base: &str, key: &str) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: base.to_string(),
            key: key.to_string(),
        }
    }

    /// Sends a request; answers the status and the JSON body (null when there is none).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// A request that must succeed: the body, or an error naming the answer.
    pub async fn must(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, v) = self.send(method.clone(), path, body).await?;
        if !(200..300).contains(&status) {
            bail!("{method} {path} answered {status}: {v}");
        }
        Ok(v)
    }

    /// `POST /calls` with `body`: the status (0 when no answer came) and the call's id.
    pub async fn place_call(&self, body: &Value) -> (u16, Option<String>) {
        let (status, v) = self
            .send(reqwest::Method::POST, "/calls", Some(body))
            .await
            .unwrap_or((0, Value::Null));
        (status, v["id"].as_str().map(str::to_string))
    }

    /// Every item of a list endpoint, page by page.
    pub async fn all(&self, path: &str) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        let sep = if path.contains('?') { '&' } else { '?' };
        loop {
            let page = self
                .must(
                    reqwest::Method::GET,
                    &format!("{path}{sep}limit=100&offset={}", out.len()),
                    None,
                )
                .await?;
            let items = page["data"].as_array().cloned().unwrap_or_default();
            let done = items.len() < 100;
            out.extend(items);
            if done {
                return Ok(out);
            }
        }
    }
}
