//! `--spawn`: the server sip-load measures, started on a temporary database with an agent and an
//! endpoint.

use super::*;

pub(super) struct Spawned {
    pub(super) child: tokio::process::Child,
    pub(super) http: String,
    pub(super) sip: SocketAddr,
    pub(super) slug: String,
    _dir: tempfile::TempDir,
}

/// Starts `bin serve --sip` on a temporary database and creates an agent and an endpoint.
pub(super) async fn spawn_server(bin: &PathBuf) -> anyhow::Result<Spawned> {
    let dir = tempfile::tempdir()?;
    let http = free_port()?;
    let sip_port = free_port()?;
    let mut child = tokio::process::Command::new(bin)
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            dir.path().join("bench.db").display()
        ))
        .args(["serve", "--sip", "--tts", "tones", "--rate-limit", "100000"])
        .arg("--http")
        .arg(format!("127.0.0.1:{http}"))
        .arg("--sip-listen")
        .arg(format!("127.0.0.1:{sip_port}"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--sip-invites-per-second", "1000000", "--sip-ring-ms", "0"])
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
    let mut agent = None;
    for _ in 0..100 {
        let resp = client
            .post(format!("{base}/agents"))
            .bearer_auth(&key)
            .json(
                &json!({"name": "Bench", "greeting_message": "Hello, this is the load test agent.",
                "max_call_duration_secs": 3600, "silence_timeout_secs": 3600}),
            )
            .send()
            .await;
        if let Ok(r) = resp {
            agent = Some(r.json::<Value>().await?);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let agent = agent.context("the server's HTTP API did not come up")?;
    let endpoint: Value = client
        .post(format!("{base}/sip-endpoints"))
        .bearer_auth(&key)
        .json(&json!({"name": "bench", "inbound_agent_id": agent["id"]}))
        .send()
        .await?
        .json()
        .await?;
    let slug = endpoint["data"]["slug"]
        .as_str()
        .context("no endpoint created")?
        .to_string();
    Ok(Spawned {
        child,
        http: base,
        sip: format!("127.0.0.1:{sip_port}").parse()?,
        slug,
        _dir: dir,
    })
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
