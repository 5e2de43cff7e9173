//! `enroll-csv`: a large CSV enrolled through the real HTTP API, streamed from a file, against
//! `sqlite3`'s `.import` of the same rows as the reference (on PostgreSQL, `COPY`).

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::measure::{peak_rss_mib, round};

#[derive(clap::Args)]
pub(crate) struct EnrollArgs {
    #[arg(long, default_value_t = 1_000_000)]
    contacts: usize,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Enroll into this PostgreSQL database (`postgres://...`) instead of an SQLite file; it
    /// should be empty (it is migrated). The reference is then `COPY` of the same file.
    #[arg(long)]
    database_url: Option<String>,
}

/// The service on a loopback port with its defaults, over `store`: its address, the sender that
/// stops it, and its task.
pub(crate) async fn serve_in_process(
    store: switchboard::Store,
    database_url: String,
    dir: &std::path::Path,
) -> anyhow::Result<(
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let config = switchboard::Config {
        database_url,
        data_dir: dir.join("data"),
        ..switchboard::Config::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(switchboard::serve(
        listener,
        None,
        None,
        store,
        config,
        async {
            let _ = stopped.await;
        },
    ));
    Ok((addr, stop, server))
}

pub(crate) async fn enroll_csv(args: EnrollArgs) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let db_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("enroll.db").display()));
    let store = switchboard::Store::open(&db_url).await?;
    let ws = store.create_workspace("bench", "IL").await?;
    let (_, key) = store
        .create_key(
            ws.id,
            "bench",
            &switchboard::domain::auth::Scopes::All,
            None,
        )
        .await?;
    let (addr, stop, server) = serve_in_process(store, db_url, dir.path()).await?;
    switchboard::edge::tls::install_crypto();
    let client = reqwest::Client::new();
    let base = format!("http://{addr}");
    let created: Value = serde_json::from_slice(
        &client
            .post(format!("{base}/campaigns"))
            .bearer_auth(&key)
            .header("content-type", "application/json")
            .body(json!({"name": "CSV benchmark"}).to_string())
            .send()
            .await?
            .bytes()
            .await?,
    )?;
    let id = created["id"]
        .as_str()
        .context("campaign not created")?
        .to_owned();
    // The CSV goes to a file, which the upload streams and the sqlite3 reference imports.
    let csv_path = dir.path().join("contacts.csv");
    {
        let mut csv = std::io::BufWriter::new(std::fs::File::create(&csv_path)?);
        writeln!(csv, "phone_number,timezone,first_name")?;
        for i in 0..args.contacts {
            writeln!(csv, "+9725{i:08},Asia/Jerusalem,Name{i}")?;
        }
        csv.flush()?;
    }
    let bytes = std::fs::metadata(&csv_path)?.len();
    let rss_before = peak_rss_mib();
    // From here the peak is the enrollment's (Linux: 5 resets the high-water mark).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let started = Instant::now();
    let (status, body) = post_file(
        addr,
        &format!("/campaigns/{id}/contacts"),
        &key,
        "text/csv",
        &csv_path,
    )
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    let _ = stop.send(());
    let _ = server.await;
    let body: Value = serde_json::from_slice(&body)
        .with_context(|| format!("enrollment answered {status}, not JSON"))?;
    if status != 200 {
        bail!("enrollment answered {status}: {body}");
    }
    let mut report = json!({
        "benchmark": "enroll-csv",
        "rows": args.contacts,
        "csv_bytes": bytes,
        "enrolled": body["enrolled"],
        "duplicates": body["duplicates"],
        "excluded_dnc": body["excluded_dnc"],
        "invalid": body["invalid"].as_array().map(Vec::len),
        "wall_secs": round(secs),
        "rows_per_sec": round(args.contacts as f64 / secs),
        "rss_before_mib": rss_before.map(round),
        "peak_rss_mib": peak.map(round),
    });
    if let Some(url) = &args.database_url {
        report["database"] = json!("postgresql");
        match copy_reference(url, &csv_path).await {
            Ok(ref_secs) => {
                report["copy_secs"] = json!(round(ref_secs));
                report["ratio_to_copy"] = json!(round(secs / ref_secs));
            }
            Err(e) => report["copy_secs"] = json!(format!("not measured: {e:#}")),
        }
        return Ok(report);
    }
    // The reference: the sqlite3 shell's `.import` of the same rows into a fresh table with a
    // unique phone index, with the shell's defaults (rollback journal, synchronous=FULL) and
    // with the store's settings (WAL, synchronous=NORMAL).
    for (name, pragmas) in [
        ("sqlite3_import_default", ""),
        (
            "sqlite3_import_wal_normal",
            "PRAGMA journal_mode=WAL;\nPRAGMA synchronous=NORMAL;\n",
        ),
    ] {
        let db = dir.path().join(format!("{name}.db"));
        match sqlite3_import(&db, pragmas, &csv_path, args.contacts).await {
            Ok(ref_secs) => {
                report[format!("{name}_secs")] = json!(round(ref_secs));
                report[format!("ratio_to_{name}")] = json!(round(secs / ref_secs));
            }
            Err(e) => report[format!("{name}_secs")] = json!(format!("not measured: {e:#}")),
        }
    }
    Ok(report)
}

/// The reference on PostgreSQL: `COPY ... FROM STDIN (FORMAT csv)` of the same file, sent from
/// this process as the upload is, into a fresh table with a unique phone number; its seconds.
async fn copy_reference(url: &str, csv: &std::path::Path) -> anyhow::Result<f64> {
    use sqlx::Connection;
    use std::io::Read;
    let mut conn = sqlx::PgConnection::connect(url).await?;
    sqlx::raw_sql(
        "DROP TABLE IF EXISTS enroll_reference; \
         CREATE TABLE enroll_reference (phone_number text PRIMARY KEY, timezone text, first_name text)",
    )
    .execute(&mut conn)
    .await?;
    let mut file = std::fs::File::open(csv)?;
    let mut chunk = vec![0u8; 1 << 20];
    let started = Instant::now();
    let mut copy = conn
        .copy_in_raw("COPY enroll_reference FROM STDIN (FORMAT csv, HEADER true)")
        .await?;
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        copy.send(&chunk[..n]).await?;
    }
    let rows = copy.finish().await?;
    let secs = started.elapsed().as_secs_f64();
    sqlx::raw_sql("DROP TABLE enroll_reference")
        .execute(&mut conn)
        .await?;
    anyhow::ensure!(rows > 0, "COPY read no rows");
    Ok(secs)
}

/// POSTs a file as the body of one HTTP/1.1 request, streamed from disk (so the upload holds
/// no copy in memory), and answers the status and body.
async fn post_file(
    addr: std::net::SocketAddr,
    path: &str,
    key: &str,
    content_type: &str,
    file: &std::path::Path,
) -> anyhow::Result<(u16, Vec<u8>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut file = tokio::fs::File::open(file).await?;
    let len = file.metadata().await?.len();
    let mut conn = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(head.as_bytes()).await?;
    tokio::io::copy(&mut file, &mut conn).await?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no HTTP answer")?;
    let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let mut body = answer[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = unchunk(&body).context("a malformed chunked body")?;
    }
    Ok((status, body))
}

fn unchunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&data[..eol]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        data = &data[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// Times the sqlite3 shell importing `csv` (its header skipped) into a fresh table with a unique
/// phone index, after `pragmas`; checks that every row landed.
async fn sqlite3_import(
    db: &std::path::Path,
    pragmas: &str,
    csv: &std::path::Path,
    rows: usize,
) -> anyhow::Result<f64> {
    use tokio::io::AsyncWriteExt;
    let script = format!(
        "{pragmas}CREATE TABLE contacts (phone_number TEXT, timezone TEXT, first_name TEXT);\n\
         CREATE UNIQUE INDEX contacts_phone ON contacts (phone_number);\n\
         .mode csv\n.import --skip 1 {} contacts\nSELECT COUNT(*) FROM contacts;\n",
        csv.display()
    );
    let started = Instant::now();
    let mut child = tokio::process::Command::new("sqlite3")
        .arg(db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("sqlite3 is not installed (Debian: apt-get install sqlite3)")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    stdin.write_all(script.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    let secs = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || stdout.lines().last() != Some(rows.to_string().as_str()) {
        bail!(
            "sqlite3 failed: {} {}",
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(secs)
}
