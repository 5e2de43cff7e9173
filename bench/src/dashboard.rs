//! `dashboard`: the dashboard's pages against a large store. A campaign of `--contacts`
//! contacts with `--calls` ended calls (written straight into the database with `sqlite3`, or
//! `psql` with `--database-url postgres://...`, spread over ten days) and 60 other campaigns, then every page fetched `--rounds` times
//! through a signed-in session that takes gzip: the server's answer time (p50, p99, on
//! loopback), and each page's weight as served (gzip-compressed) and inflated. Last, the live page: calls are put under way in the store while the
//! page's event stream is open, and the time until the stream shows each one is measured.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use switchboard_actors::ids::{CampaignId, WorkspaceId};

use crate::enroll::serve_in_process;
use crate::measure::{percentile, round};

#[derive(clap::Args)]
pub(crate) struct DashboardArgs {
    /// Contacts in the campaign.
    #[arg(long, default_value_t = 1_000_000)]
    contacts: u64,
    /// Ended calls in the workspace (all of the campaign).
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Times each page is fetched.
    #[arg(long, default_value_t = 100)]
    rounds: usize,
    /// Live changes timed on the live page.
    #[arg(long, default_value_t = 10)]
    live_changes: usize,
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Run on this PostgreSQL database (`postgres://...`) instead of an SQLite file; it should
    /// be empty (it is migrated).
    #[arg(long)]
    database_url: Option<String>,
}

/// The database the bench writes into and reads from beside the service: an SQLite file
/// (through Debian's `sqlite3`) or a PostgreSQL database (through `psql`).
enum Db {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl Db {
    fn url(&self) -> String {
        match self {
            Db::Sqlite(path) => format!("sqlite://{}", path.display()),
            Db::Postgres(url) => url.clone(),
        }
    }

    /// Runs `sql` (the text for this database) and answers what it printed, trimmed.
    fn run(&self, sql: &str) -> anyhow::Result<String> {
        match self {
            Db::Sqlite(path) => sqlite(path, sql),
            Db::Postgres(url) => psql(url, sql),
        }
    }

    /// An id as a literal of this database.
    fn id(&self, id: uuid::Uuid) -> String {
        match self {
            Db::Sqlite(_) => blob(id),
            Db::Postgres(_) => format!("'{id}'"),
        }
    }
}

fn psql(url: &str, sql: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-tAq", "-c", sql])
        .output()
        .context("psql (Debian's postgresql-client) runs")?;
    if !out.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn sqlite(db: &std::path::Path, sql: &str) -> anyhow::Result<String> {
    let out = std::process::Command::new("sqlite3")
        .args(["-cmd", ".timeout 30000"])
        .arg(db)
        .arg(sql)
        .output()
        .context("sqlite3 (Debian's sqlite3) runs")?;
    if !out.status.success() {
        bail!("sqlite3: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn blob(id: uuid::Uuid) -> String {
    format!("X'{}'", id.simple())
}

/// The length of `bytes` (a gzip stream) once inflated.
fn gunzip_len(bytes: &[u8]) -> anyhow::Result<usize> {
    let mut child = std::process::Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("gzip's input")?
        .write_all(bytes)?;
    Ok(child.wait_with_output()?.stdout.len())
}

/// Writes the contacts and calls straight into the store's database.
fn seed(db: &Db, ws: uuid::Uuid, campaign: uuid::Uuid, args: &DashboardArgs) -> anyhow::Result<()> {
    let (ws, campaign) = (db.id(ws), db.id(campaign));
    let (count, calls, contacts) = (args.contacts, args.calls, args.contacts.max(1));
    let (contacts_sql, calls_sql) = match db {
        Db::Sqlite(_) => (
            format!(
                "PRAGMA journal_mode=WAL; BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {count})
         INSERT INTO contacts (id, campaign_id, phone_number, state, attempts, next_attempt_at, last_outcome, created_at, updated_at)
         SELECT randomblob(16), {campaign}, printf('+9725%08d', i),
           CASE i % 10 WHEN 0 THEN 'retired' WHEN 1 THEN 'exhausted' WHEN 2 THEN 'scheduled' WHEN 3 THEN 'excluded' ELSE 'pending' END,
           CASE WHEN i % 10 < 3 THEN 1 ELSE 0 END,
           CASE WHEN i % 10 >= 2 AND i % 10 != 3 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+1 day') END,
           CASE WHEN i % 10 < 3 THEN 'no_answer' END,
           strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 days'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 days')
         FROM n;
         UPDATE contacts SET excluded_reason = 'do_not_call' WHERE state = 'excluded';
         COMMIT;"
            ),
            format!(
                "BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {calls})
         INSERT INTO calls (id, workspace_id, direction, status, outcome, end_reason, from_number, to_number, campaign_id,
           priority, max_duration_secs, cost_cents, duration_secs, queued_at, started_at, ended_at, created_at, updated_at)
         SELECT randomblob(16), {ws}, 'outbound', 'ended',
           CASE i % 4 WHEN 0 THEN 'answered' WHEN 1 THEN 'no_answer' WHEN 2 THEN 'busy' ELSE 'voicemail' END,
           'hangup', '+97250000001', printf('+9725%08d', i % {contacts}), {campaign}, 0, 300, 3, 40, t, t, e, t, e
         FROM (SELECT i, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', 864000 - i * 864000 / {calls})) AS t,
                      strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%d seconds', 864000 - i * 864000 / {calls}), '+40 seconds') AS e FROM n);
         UPDATE campaigns SET status = 'paused', started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 days') WHERE id = {campaign};
         COMMIT; ANALYZE;"
            ),
        ),
        Db::Postgres(_) => (
            format!(
                "INSERT INTO contacts (id, campaign_id, phone_number, state, attempts, next_attempt_at, last_outcome, created_at, updated_at)
         SELECT gen_random_uuid(), {campaign}, '+9725' || lpad(i::text, 8, '0'),
           CASE i % 10 WHEN 0 THEN 'retired' WHEN 1 THEN 'exhausted' WHEN 2 THEN 'scheduled' WHEN 3 THEN 'excluded' ELSE 'pending' END,
           CASE WHEN i % 10 < 3 THEN 1 ELSE 0 END,
           CASE WHEN i % 10 >= 2 AND i % 10 != 3 THEN now() + interval '1 day' END,
           CASE WHEN i % 10 < 3 THEN 'no_answer' END,
           now() - interval '10 days', now() - interval '10 days'
         FROM generate_series(0, {count} - 1) i;
         UPDATE contacts SET excluded_reason = 'do_not_call' WHERE state = 'excluded';"
            ),
            format!(
                "INSERT INTO calls (id, workspace_id, direction, status, outcome, end_reason, from_number, to_number, campaign_id,
           priority, max_duration_secs, cost_cents, duration_secs, queued_at, started_at, ended_at, created_at, updated_at)
         SELECT gen_random_uuid(), {ws}, 'outbound', 'ended',
           CASE i % 4 WHEN 0 THEN 'answered' WHEN 1 THEN 'no_answer' WHEN 2 THEN 'busy' ELSE 'voicemail' END,
           'hangup', '+97250000001', '+9725' || lpad((i % {contacts})::text, 8, '0'), {campaign}, 0, 300, 3, 40,
           t, t, t + interval '40 seconds', t, t + interval '40 seconds'
         FROM (SELECT i, now() - make_interval(secs => 864000 - i * 864000.0 / {calls}) AS t
               FROM generate_series(0, {calls} - 1) i) s;
         UPDATE campaigns SET status = 'paused', started_at = now() - interval '10 days' WHERE id = {campaign};
         ANALYZE;"
            ),
        ),
    };
    db.run(&contacts_sql)?;
    db.run(&calls_sql)?;
    Ok(())
}

/// A signed-in browser: its session cookie.
async fn sign_in(client: &reqwest::Client, base: &str, key: &str) -> anyhow::Result<String> {
    let form = client.get(format!("{base}/app/sign-in")).send().await?;
    let cookie = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_owned))
        .collect::<Vec<_>>()
        .join("; ");
    let page = form.text().await?;
    let marker = "name=\"sign_in\" value=\"";
    let start = page.find(marker).context("the sign-in form")? + marker.len();
    let token = page[start..].split('"').next().unwrap_or_default();
    let body = format!("sign_in={token}&key={key}");
    let answer = client
        .post(format!("{base}/app/sign-in"))
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await?;
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("sb_session="))
        .and_then(|c| c.split(';').next())
        .map(str::to_owned)
        .context("no session cookie")
}

/// Seeds the store, times every page and the live page, and returns the report.
pub(crate) async fn run(args: DashboardArgs) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let db = match &args.database_url {
        Some(url) => Db::Postgres(url.clone()),
        None => Db::Sqlite(dir.path().join("dashboard.db")),
    };
    let db_url = db.url();
    let (ws, key, campaign) = create_workspace(&db_url).await?;
    let started = Instant::now();
    seed(&db, ws.as_uuid(), campaign.as_uuid(), &args)?;
    let seeded_secs = started.elapsed().as_secs_f64();
    eprintln!(
        "seeded {} contacts and {} calls in {seeded_secs:.1} s",
        args.contacts, args.calls
    );
    let pages = pages(&db, &args, campaign)?;

    let store = switchboard::Store::open(&db_url).await?;
    // The seed's writes logged their counts; the service folds them as it runs, and this run
    // times pages once that is done.
    store.fold_counts().await?;
    let (addr, stop, server) = serve_in_process(store, db_url, dir.path()).await?;
    let browser = Browser::sign_in(format!("http://{addr}"), &key).await?;
    let timed = time_pages(&browser, &pages, args.rounds).await?;
    let (latencies, missed) = time_live_changes(&browser, &db, ws, args.live_changes).await?;
    let _ = stop.send(());
    let _ = server.await;
    Ok(json!({
        "benchmark": "dashboard",
        "database": if args.database_url.is_some() { "postgresql" } else { "sqlite" },
        "contacts": args.contacts,
        "calls": args.calls,
        "rounds": args.rounds,
        "seeded_secs": round(seeded_secs),
        "pages": timed.rows,
        "worst_p99_ms": round(timed.worst_p99),
        "heaviest_gzip_bytes": timed.heaviest_gz,
        "live_changes_missed": missed,
        "live_change_ms": {"p50": round(percentile(&latencies, 50.0)),
            "max": round(latencies.last().copied().unwrap_or(0.0))},
        "targets": {"p99_ms": 100, "gzip_bytes": 200_000, "live_change_ms": 1000},
        "met": timed.worst_p99 < 100.0 && timed.heaviest_gz < 200_000 && missed == 0
            && latencies.last().is_some_and(|l| *l < 1000.0),
    }))
}

/// A fresh store with a workspace, its API key, the measured campaign and 60 others (so that
/// the campaigns page lists a full page of them); answers the workspace, the key and the
/// measured campaign.
async fn create_workspace(db_url: &str) -> anyhow::Result<(WorkspaceId, String, CampaignId)> {
    let store = switchboard::Store::open(db_url).await?;
    let ws = store.create_workspace("bench", "IL").await?;
    let (_, key) = store
        .create_key(
            ws.id,
            "bench",
            &switchboard::domain::auth::Scopes::All,
            None,
        )
        .await?;
    let campaign = store
        .create_campaign(
            ws.id,
            &switchboard::store::CampaignSettings::defaults("Dashboard benchmark".into()),
            switchboard_actors::ids::ApiKeyId::from_uuid(uuid::Uuid::nil()),
        )
        .await?;
    // Other campaigns besides, so that the campaigns page lists a full page of them.
    for n in 0..60 {
        store
            .create_campaign(
                ws.id,
                &switchboard::store::CampaignSettings::defaults(format!("Campaign {n}")),
                switchboard_actors::ids::ApiKeyId::from_uuid(uuid::Uuid::nil()),
            )
            .await?;
    }
    store.close().await;
    Ok((ws.id, key, campaign.id))
}

/// Every page to time, by name: the campaign's, its contacts' (the first page, a far page, by
/// state), the calls' (with each filter, a far page, a day), one call's and the rest.
fn pages(
    db: &Db,
    args: &DashboardArgs,
    c: CampaignId,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let (id, day) = match db {
        Db::Sqlite(_) => ("lower(hex(id))", "substr(created_at, 1, 10)"),
        Db::Postgres(_) => ("id", "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
    };
    let call_id = db.run(&format!("SELECT {id} FROM calls LIMIT 1 OFFSET 5000"))?;
    let call_id = uuid::Uuid::parse_str(&call_id)?;
    // Where the far pages start: the 900,000th contact enrolled, and a call near the oldest.
    let far_contact = db.run(&format!(
        "SELECT rowid FROM contacts LIMIT 1 OFFSET {}",
        args.contacts * 9 / 10
    ))?;
    let far_call = db.run(&format!(
        "SELECT rowid FROM calls ORDER BY created_at LIMIT 1 OFFSET {}",
        args.calls / 100
    ))?;
    let day = db.run(&format!("SELECT {day} FROM calls LIMIT 1 OFFSET 50000"))?;
    Ok(vec![
        ("campaigns", "/app/campaigns".to_string()),
        ("campaign", format!("/app/campaigns/{c}")),
        (
            "campaign summary (polled)",
            format!("/app/campaigns/{c}/summary"),
        ),
        (
            "campaign chart (loaded after)",
            format!("/app/campaigns/{c}/chart"),
        ),
        ("contacts", format!("/app/campaigns/{c}/contacts")),
        (
            "contacts, far page",
            format!("/app/campaigns/{c}/contacts?after={far_contact}"),
        ),
        (
            "contacts by state",
            format!("/app/campaigns/{c}/contacts?state=exhausted"),
        ),
        ("calls", "/app/calls".to_string()),
        ("calls by status", "/app/calls?status=ended".to_string()),
        ("calls, far page", format!("/app/calls?before={far_call}")),
        ("calls by campaign", format!("/app/calls?campaign={c}")),
        ("calls by day", format!("/app/calls?from={day}&to={day}")),
        // No call matches these two: the whole filter is walked.
        ("calls inbound", "/app/calls?direction=inbound".to_string()),
        (
            "calls by an agent",
            format!("/app/calls?agent={}", uuid::Uuid::new_v4()),
        ),
        ("call", format!("/app/calls/{call_id}")),
        ("live calls", "/app/live".to_string()),
        ("agents", "/app/agents".to_string()),
        ("tools", "/app/tools".to_string()),
        ("SIP endpoints", "/app/sip-endpoints".to_string()),
        ("numbers", "/app/numbers".to_string()),
        ("do not call", "/app/do-not-call".to_string()),
        ("dispositions", "/app/dispositions".to_string()),
        ("leads", "/app/leads".to_string()),
        ("billing", "/app/billing".to_string()),
        ("integrations", "/app/settings/integrations".to_string()),
        ("webhooks", "/app/settings/webhooks".to_string()),
        ("API keys", "/app/settings/keys".to_string()),
    ])
}

/// A signed-in browser on the service.
struct Browser {
    client: reqwest::Client,
    base: String,
    /// Its session cookie.
    cookie: String,
}

impl Browser {
    /// Signs in to the service at `base` with the API key `key`.
    async fn sign_in(base: String, key: &str) -> anyhow::Result<Browser> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let cookie = sign_in(&client, &base, key).await?;
        Ok(Browser {
            client,
            base,
            cookie,
        })
    }
}

/// The pages' times and weights.
struct Timed {
    rows: Vec<Value>,
    /// The slowest p99 of a page (the chart, a fragment, left out).
    worst_p99: f64,
    heaviest_gz: usize,
}

/// Fetches every page `rounds` times as a browser does (gzip-compressed): each one's answer
/// times and its weight, compressed and inflated.
async fn time_pages(
    browser: &Browser,
    pages: &[(&str, String)],
    rounds: usize,
) -> anyhow::Result<Timed> {
    let Browser {
        client,
        base,
        cookie,
    } = browser;
    let mut rows = Vec::new();
    let mut worst_p99: f64 = 0.0;
    let mut heaviest_gz = 0usize;
    // The chart is a fragment the campaign page loads after it, not a page.
    let fragment = |name: &str| name.starts_with("campaign chart");
    for (name, path) in pages {
        let mut times = Vec::with_capacity(rounds);
        let mut body = Vec::new();
        let mut gzipped = false;
        for _ in 0..rounds {
            let t = Instant::now();
            // As a browser asks: the page comes gzip-compressed, and its weight is what
            // crosses the wire.
            let answer = client
                .get(format!("{base}{path}"))
                .header("cookie", cookie)
                .header("accept-encoding", "gzip")
                .send()
                .await?;
            let status = answer.status();
            gzipped = answer
                .headers()
                .get("content-encoding")
                .is_some_and(|v| v == "gzip");
            body = answer.bytes().await?.to_vec();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if !status.is_success() {
                bail!("{path} answered {status}");
            }
        }
        times.sort_by(f64::total_cmp);
        let p99 = percentile(&times, 99.0);
        if !gzipped {
            bail!("{path} did not come gzip-compressed");
        }
        let gz = body.len();
        let raw = gunzip_len(&body)?;
        if !fragment(name) {
            worst_p99 = worst_p99.max(p99);
        }
        heaviest_gz = heaviest_gz.max(gz);
        eprintln!(
            "{name:<28} p50 {:>8.1} ms  p99 {:>8.1} ms  {:>7} B  gzip {:>6} B",
            percentile(&times, 50.0),
            p99,
            raw,
            gz
        );
        rows.push(json!({"page": name, "path": path,
            "p50_ms": round(percentile(&times, 50.0)), "p99_ms": round(p99),
            "max_ms": round(times.last().copied().unwrap_or(0.0)),
            "bytes": raw, "gzip_bytes": gz}));
    }
    Ok(Timed {
        rows,
        worst_p99,
        heaviest_gz,
    })
}

/// The live page: `changes` calls put under way in the store, half a second and more apart,
/// each timed until the open event stream shows it; answers the times (sorted) and the changes
/// not shown within 10 s.
async fn time_live_changes(
    browser: &Browser,
    db: &Db,
    ws: WorkspaceId,
    changes: usize,
) -> anyhow::Result<(Vec<f64>, usize)> {
    let Browser {
        client,
        base,
        cookie,
    } = browser;
    let mut latencies = Vec::new();
    let mut stream = client
        .get(format!("{base}/app/live/events"))
        .header("cookie", cookie)
        .send()
        .await?;
    let mut seen = String::new();
    let mut missed = 0usize;
    for n in 0..changes {
        let number = format!("+97259{n:07}");
        // Half a second apart, so changes land at every point of the stream's second.
        tokio::time::sleep(Duration::from_millis(500 + 97 * n as u64)).await;
        let t = Instant::now();
        let (id, now) = match db {
            Db::Sqlite(_) => ("randomblob(16)", "strftime('%Y-%m-%dT%H:%M:%fZ')"),
            Db::Postgres(_) => ("gen_random_uuid()", "now()"),
        };
        db.run(&format!(
            "INSERT INTO calls (id, workspace_id, direction, status, from_number, to_number, priority, max_duration_secs, \
             queued_at, started_at, answered_at, created_at, updated_at) VALUES ({id}, {}, 'inbound', 'in_progress', \
             '{number}', '+97250000001', 0, 300, {now}, {now}, {now}, {now}, {now})",
            db.id(ws.as_uuid())
        ))?;
        let written = t.elapsed().as_secs_f64() * 1000.0;
        let shown = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match stream.chunk().await {
                    Ok(Some(chunk)) => {
                        seen.push_str(&String::from_utf8_lossy(&chunk));
                        if seen.contains(&number) {
                            return true;
                        }
                    }
                    _ => return false,
                }
            }
        })
        .await;
        if shown == Ok(true) {
            latencies.push(t.elapsed().as_secs_f64() * 1000.0 - written);
        } else {
            if missed == 0 {
                let tail: String = seen
                    .chars()
                    .rev()
                    .take(600)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                eprintln!("live change {n} not shown within 10 s; the stream last sent: {tail}");
            }
            missed += 1;
        }
    }
    latencies.sort_by(f64::total_cmp);
    Ok((latencies, missed))
}
