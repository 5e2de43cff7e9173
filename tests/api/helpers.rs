//! A real service per test: a fresh SQLite file in a temporary directory, the real router on
//! an ephemeral port, real HTTP through reqwest.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Once};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use switchboard::domain::auth::Scopes;
use switchboard::{Config, Store};
use switchboard_actors::clock::AdjustableClock;
use switchboard_actors::ids::WorkspaceId;
use switchboard_sip::server::SipSockets;
use tokio::sync::oneshot;

pub struct TestApp {
    pub addr: SocketAddr,
    /// Where `GET /metrics` is served (its own listener, not the API's).
    pub metrics_addr: SocketAddr,
    pub store: Store,
    /// The service's clock (the store's): tests advance it instead of waiting for time to pass.
    pub clock: Arc<AdjustableClock>,
    pub workspace_id: WorkspaceId,
    /// An all-scope key of `workspace_id`.
    pub key: String,
    pub client: reqwest::Client,
    /// The database file's URL (the CLI and a restart use it).
    pub db_url: String,
    dir: tempfile::TempDir,
    /// Dropping it shuts the service down.
    stop: oneshot::Sender<()>,
    /// The service's task: it ends once the service has stopped.
    server: tokio::task::JoinHandle<()>,
}

/// A response: status, headers and the JSON body (`Value::Null` when not JSON).
pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    /// Asserts a 400 INVALID_REQUEST whose message mentions `needle`.
    #[track_caller]
    pub fn assert_invalid(&self, needle: &str) {
        assert_eq!(self.status, StatusCode::BAD_REQUEST, "{}", self.text);
        assert_eq!(self.error_code(), "INVALID_REQUEST");
        assert!(self.text.contains(needle), "{needle}: {}", self.text);
    }

    /// Asserts the spec's error shape and returns the code.
    #[track_caller]
    pub fn error_code(&self) -> &str {
        assert!(
            self.body["error"].is_string(),
            "error body lacks `error`: {}",
            self.text
        );
        self.body["code"]
            .as_str()
            .unwrap_or_else(|| panic!("error body lacks `code`: {}", self.text))
    }
}

/// With `TEST_LOG=1`, the service's logs go to the test's output (level from `SWITCHBOARD_LOG`,
/// default `info`). Installed once per test binary.
pub fn init_tracing() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if std::env::var_os("TEST_LOG").is_none() {
            return;
        }
        let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// The service on an existing store opened with `clock` (a workspace "test" with an all-scope
/// key is added).
pub async fn spawn_on(
    store: Store,
    clock: Arc<AdjustableClock>,
    db_url: String,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    init_tracing();
    switchboard::edge::tls::install_crypto();
    let dir = tempfile::tempdir().expect("temp dir");
    serve_store(store, clock, db_url, dir, None, configure).await
}

pub async fn spawn_app_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_on(None, configure).await
}

/// The service with its SIP server on `sip` (bound by the caller, on port 0).
pub async fn spawn_app_on(sip: Option<SipSockets>, configure: impl FnOnce(&mut Config)) -> TestApp {
    init_tracing();
    switchboard::edge::tls::install_crypto();
    let dir = tempfile::tempdir().expect("temp dir");
    let db_url = crate::database::fresh_database(dir.path(), "switchboard.db").await;
    let clock = Arc::new(AdjustableClock::default());
    let store = Store::open_with_clock(&db_url, clock.clone())
        .await
        .expect("store opens");
    serve_store(store, clock, db_url, dir, sip, configure).await
}

async fn serve_store(
    store: Store,
    clock: Arc<AdjustableClock>,
    db_url: String,
    dir: tempfile::TempDir,
    sip: Option<SipSockets>,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    let ws = store
        .create_workspace("test", "IL")
        .await
        .expect("workspace");
    let (_, key) = store
        .create_key(ws.id, "test", &Scopes::All, None)
        .await
        .expect("key");
    let (addr, metrics_addr, stop, server) =
        start(store.clone(), &db_url, &dir, sip, configure).await;
    TestApp {
        addr,
        metrics_addr,
        store,
        clock,
        workspace_id: ws.id,
        key,
        client: reqwest::Client::new(),
        db_url,
        dir,
        stop,
        server,
    }
}

/// Runs the service on `store` (the test settings, then `configure`) on a fresh port.
async fn start(
    store: Store,
    db_url: &str,
    dir: &tempfile::TempDir,
    sip: Option<SipSockets>,
    configure: impl FnOnce(&mut Config),
) -> (
    SocketAddr,
    SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let mut config = Config {
        database_url: db_url.to_owned(),
        data_dir: dir.path().join("data"),
        secrets_key_file: dir.path().join("secrets.key"),
        rate_limit_per_minute: 100_000,
        job_interval: Duration::from_millis(50),
        ..Config::default()
    };
    configure(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let metrics_addr = metrics.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        switchboard::serve(listener, Some(metrics), sip, store, config, shutdown)
            .await
            .expect("server runs");
    });
    (addr, metrics_addr, stop, server)
}

impl TestApp {
    /// Stops the service, waits until it has stopped, and starts it again on the same database
    /// file (opened afresh) with `configure`; the workspace and its key stay.
    pub async fn restart(mut self, configure: impl FnOnce(&mut Config)) -> TestApp {
        self.halt().await;
        let db_url = self.db_url.clone();
        self.resume_on(db_url, configure).await
    }

    /// Stops the service and closes its store (until [`TestApp::resume_on`]).
    pub async fn halt(&mut self) {
        drop(std::mem::replace(&mut self.stop, oneshot::channel().0));
        (&mut self.server).await.expect("the service stops cleanly");
        self.store.close().await;
    }

    /// Starts the halted service again on the database at `db_url` (its directory, secrets
    /// key and key as before).
    pub async fn resume_on(
        mut self,
        db_url: String,
        configure: impl FnOnce(&mut Config),
    ) -> TestApp {
        self.db_url = db_url;
        self.store = Store::open_with_clock(&self.db_url, self.clock.clone())
            .await
            .expect("store reopens");
        (self.addr, self.metrics_addr, self.stop, self.server) =
            start(self.store.clone(), &self.db_url, &self.dir, None, configure).await;
        self
    }

    /// The service's own directory (store, secrets key, data).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The service's Prometheus metrics, from their own listener.
    pub async fn metrics(&self) -> String {
        let resp = self
            .client
            .get(format!("http://{}/metrics", self.metrics_addr))
            .send()
            .await
            .expect("metrics are served");
        assert_eq!(resp.status(), StatusCode::OK);
        resp.text().await.expect("metrics text")
    }

    /// The values of the `/metrics` samples named `name` (whatever their labels), and the
    /// text they were read from.
    pub async fn metric_values(&self, name: &str) -> (Vec<f64>, String) {
        let text = self.metrics().await;
        let values = text
            .lines()
            .filter(|l| l.split([' ', '{']).next() == Some(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        (values, text)
    }

    /// Sends a request with `key` (or none); `body` is sent as JSON when given.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self.client.request(method, self.url(path));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        into_resp(req.send().await.expect("request sent")).await
    }

    /// Sends a raw body with a content type.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Resp {
        let req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(&self.key)
            .header("content-type", content_type)
            .body(body);
        into_resp(req.send().await.expect("request sent")).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, Some(&self.key), None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(&self.key), Some(body))
            .await
    }

    /// POST with no body at all.
    pub async fn post_empty(&self, path: &str) -> Resp {
        self.send(Method::POST, path, Some(&self.key), None).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PATCH, path, Some(&self.key), Some(body))
            .await
    }

    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PUT, path, Some(&self.key), Some(body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, Some(&self.key), None).await
    }

    /// Enrolls `phones` into campaign `id` and launches it; panics unless every number is
    /// enrolled and the launch is accepted.
    pub async fn enroll_and_launch(&self, id: &str, phones: &[&str]) {
        let contacts: Vec<Value> = phones
            .iter()
            .map(|p| serde_json::json!({"phone_number": p}))
            .collect();
        self.enroll_contacts_and_launch(id, contacts).await;
    }

    /// Enrolls `contacts` (the request's objects) into campaign `id` and launches it; panics
    /// unless every contact is enrolled and the launch is accepted.
    pub async fn enroll_contacts_and_launch(&self, id: &str, contacts: Vec<Value>) {
        let count = contacts.len();
        let enrolled = self
            .post(
                &format!("/campaigns/{id}/contacts"),
                serde_json::json!({"contacts": contacts}),
            )
            .await;
        assert_eq!(enrolled.body["enrolled"], count, "{}", enrolled.text);
        let launched = self.post_empty(&format!("/campaigns/{id}/launch")).await;
        assert_eq!(launched.status, StatusCode::OK, "{}", launched.text);
    }

    /// Reads `path` until its `status` is `status` and returns the body; panics if `within`
    /// passes first.
    pub async fn await_status(&self, path: &str, status: &str, within: Duration) -> Value {
        let what = format!("{path} becomes {status}");
        eventually(within, &what, || async move {
            let got = self.get(path).await;
            assert_eq!(got.status, StatusCode::OK, "{}", got.text);
            (got.body["status"] == status).then_some(got.body)
        })
        .await
    }

    /// A key of this workspace with the given scopes (`all` or a comma list).
    pub async fn key_with_scopes(&self, scopes: &str) -> String {
        let scopes = Scopes::parse(scopes).expect("scopes");
        self.store
            .create_key(self.workspace_id, "scoped", &scopes, None)
            .await
            .expect("key")
            .1
    }

    /// A second workspace and an all-scope key of it.
    pub async fn other_workspace(&self) -> (WorkspaceId, String) {
        let ws = self
            .store
            .create_workspace("other", "IL")
            .await
            .expect("workspace");
        let (_, key) = self
            .store
            .create_key(ws.id, "other", &Scopes::All, None)
            .await
            .expect("key");
        (ws.id, key)
    }
}

async fn into_resp(resp: reqwest::Response) -> Resp {
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp {
        status,
        headers,
        body,
        text,
    }
}

/// How often [`eventually`] checks again.
const POLL: Duration = Duration::from_millis(50);

/// Checks `check` until it answers `Some` and returns that; panics naming `what` if `within`
/// passes first. For what the service does in the background (a call ending, a job running,
/// a process starting): the test goes on as soon as it has happened.
/// Credits `cents` to workspace `ws`'s balance, as the operator's `credit` does.
pub async fn credit(store: &Store, ws: WorkspaceId, cents: i64) {
    store
        .apply_ledger_entry(
            ws,
            cents,
            switchboard::store::LedgerKind::Credit,
            "test credit",
            None,
        )
        .await
        .expect("credit")
        .expect("workspace exists");
}

pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(done) = check().await {
            return done;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: not within {within:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}
