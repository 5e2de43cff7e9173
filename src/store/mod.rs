//! The store: one SQLite file, migrated on open.
//!
//! Every resource query takes the caller's [`WorkspaceId`] and filters on it, so an id from
//! another workspace reads exactly like a missing one. Timestamps are written through [`ts`] in
//! one fixed form so that text order is time order.
//!
//! **Invariant:** a multi-row change (a campaign transition and its audit event, a balance change
//! and its ledger entry) happens in one transaction. Write transactions `BEGIN IMMEDIATE`: the
//! write lock is taken up front, so one that reads before it writes cannot fail on upgrade
//! (SQLITE_BUSY_SNAPSHOT) when another writer commits in between.
//!
//! This file holds the connection pools, the virtual-time single connection and the errors;
//! every query is built and run through `db.rs`, and the resources live in their own modules.

mod affiliates;
mod agents;
mod analysis_status;
mod billing;
mod call_details;
mod calls;
mod campaign_settings;
mod campaigns;
mod carrier_accounts;
mod contacts;
mod dashboard;
mod db;
mod dispositions;
mod dnc;
mod emitting;
mod engine_calls;
mod engine_reads;
mod group;
mod inbound;
mod integrations;
mod keys;
mod lead_memory;
mod leads;
mod numbers;
mod outbound;
mod script;
mod shared_links;
mod signing_secrets;
mod sip_endpoints;
mod tools;
mod webhooks;
mod workspaces;
mod write_gate;

pub use affiliates::*;
pub use agents::*;
pub use analysis_status::*;
pub use billing::*;
pub use call_details::*;
pub use calls::*;
pub use campaign_settings::CampaignSettings;
pub use campaigns::*;
pub use carrier_accounts::*;
pub use contacts::*;
pub use dashboard::*;
pub use db::Exec;
pub use dispositions::*;
pub use dnc::*;
pub use group::*;
pub use inbound::*;
pub use integrations::*;
pub use keys::*;
pub use lead_memory::*;
pub use leads::*;
pub use numbers::*;
pub use outbound::*;
pub(crate) use script::*;
pub use shared_links::*;
pub use sip_endpoints::*;
pub use tools::*;
pub use webhooks::*;
pub use workspaces::*;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use db::{Row, query};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use switchboard_actors::clock::{SharedClock, SystemClock};
use switchboard_actors::ports::TrunkLimits;
use write_gate::WriteGate;
pub(crate) use write_gate::{Lane, WriteTurn};

pub use switchboard_actors::ids::WorkspaceId;

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken.
    #[error("unique rule {rule:?} violated")]
    Conflict { rule: UniqueRule },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The database URL names no database this version opens.
    #[error("{0}")]
    DatabaseUrl(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The uniqueness rules of the schema, as a violation names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UniqueRule {
    /// A campaign's name among the workspace's non-archived campaigns.
    CampaignName,
    /// A disposition's label in the workspace.
    DispositionLabel,
    /// A number on the workspace's do-not-call list.
    DoNotCallNumber,
    /// A number held (not released) by any workspace.
    PhoneNumberHeld,
    /// A live lead's number in the workspace.
    LeadNumber,
    /// A lead tag's name in the workspace.
    LeadTagName,
    /// A SIP endpoint's slug.
    SipSlug,
    /// A call's idempotency key in the workspace.
    CallIdempotencyKey,
    /// A tool's idempotency key in the workspace.
    ToolIdempotencyKey,
    /// A rule not listed above; `constraint` is the database's description, for the log.
    Other { constraint: String },
}

/// Maps a unique-constraint violation to [`StoreError::Conflict`], everything else through.
/// This is the one place that reads database error kinds, and the one that names the rule
/// from SQLite's message (`UNIQUE constraint failed: table.column, ...`, or the index name).
pub(crate) fn classify(err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        let message = db.message();
        let constraint = message.rsplit(':').next().unwrap_or(message).trim();
        let rule = match constraint {
            c if c.contains("campaigns.workspace_id") || c.contains("campaigns_live_name") => {
                UniqueRule::CampaignName
            }
            c if c.contains("dispositions") => UniqueRule::DispositionLabel,
            c if c.contains("dnc_entries") => UniqueRule::DoNotCallNumber,
            c if c.contains("phone_numbers") => UniqueRule::PhoneNumberHeld,
            c if c.starts_with("leads.") => UniqueRule::LeadNumber,
            c if c.starts_with("lead_tags.") => UniqueRule::LeadTagName,
            c if c.starts_with("sip_endpoints.") => UniqueRule::SipSlug,
            c if c.starts_with("calls.") => UniqueRule::CallIdempotencyKey,
            c if c.starts_with("tools.") => UniqueRule::ToolIdempotencyKey,
            c => UniqueRule::Other {
                constraint: c.to_owned(),
            },
        };
        return StoreError::Conflict { rule };
    }
    StoreError::Database(err)
}

/// Connections to the database file of a serving store.
const POOL_SIZE: u32 = 8;

/// Read-only connections of a serving store, for the reads that must not wait behind writes
/// (see [`Store::read_conn`]).
const READERS: u32 = 4;

/// Read-only connections of a serving store for routing inbound INVITEs (see
/// [`Store::route_conn`]).
const ROUTERS: u32 = 2;

/// How long a serving store's connection may sit unused before it is closed. Each connection
/// keeps its own page cache and memory map of the file, and a burst (a flood of calls, a
/// large import) wakes every one of them: closed, they give that memory back, and a quiet
/// store keeps only the connections it still uses. Opening one again takes about a
/// millisecond.
const IDLE_CLOSE: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    /// Read-only connections for the control plane's and the engine's hot reads: with WAL a
    /// reader never waits for SQLite's write lock, and on its own pool it never waits for a
    /// connection that writers hold (a flood of calls writes through every pooled one). None
    /// for an in-memory database (another connection would see another database).
    readers: Option<SqlitePool>,
    /// Read-only connections for routing inbound INVITEs, apart from `readers` so that a flood
    /// of calls does not queue the API's reads behind its lookups.
    routers: Option<SqlitePool>,
    /// Set for virtual runs: every query goes through this one connection, without the pool's
    /// per-query checkout and release round trips.
    single: Option<Arc<tokio::sync::Mutex<SqliteConnection>>>,
    /// The connection groups of writes are committed on (see [`group`]), set for a serving
    /// store: one writer, so one page cache that no other writer invalidates and one cache of
    /// the groups' prepared texts.
    writer: Option<Arc<tokio::sync::Mutex<SqliteConnection>>>,
    /// Set when a script on the single connection was given up half way: its next user rolls
    /// back whatever transaction was left open.
    abandoned: Arc<std::sync::atomic::AtomicBool>,
    /// The order of the writes that take SQLite's write lock through it.
    writes: Arc<WriteGate>,
    /// The event-raising writes waiting to be committed together (see [`group`]).
    groups: Arc<Groups>,
    clock: SharedClock,
    /// The caps of the operator's default trunk, when one serves numbers on no carrier account
    /// (`serve --carrier sip --outbound-trunk`): such numbers show `sip_outbound_configured`,
    /// and their calls wait for room on it.
    default_trunk: Option<TrunkLimits>,
    /// Wakes the webhook dispatcher when an event is committed.
    outbox: Arc<tokio::sync::Notify>,
    /// How calls show their `recording_url` in webhook events (the API's way); set by a
    /// serving store, absent in virtual runs.
    links: Option<crate::domain::signing::RecordingLinks>,
    /// A chat model is configured: an answered call that ends with a transcript gets a pending
    /// end-of-call analysis (else it is skipped).
    analysis: bool,
}

/// The columns [`Store::trunk_of`] reads, for a number `n` joined with its account `ta`
/// (`LEFT JOIN carrier_accounts ta ON ta.id = n.carrier_account_id AND ta.workspace_id =
/// n.workspace_id`).
pub(crate) const TRUNK_COLUMNS: &str = "n.carrier_account_id AS trunk_number_account, \
     ta.trunk IS NOT NULL AS trunk_set, CAST(ta.trunk ->> 'calls_per_second' AS BIGINT) AS trunk_cps, \
     CAST(ta.trunk ->> 'max_concurrent_calls' AS BIGINT) AS trunk_max";
pub(crate) const TRUNK_JOIN: &str = "LEFT JOIN carrier_accounts ta ON ta.id = n.carrier_account_id AND ta.workspace_id = n.workspace_id";

/// A connection for one query or transaction: from the pool, or the single one.
pub(crate) enum Conn<'a> {
    Pooled(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Single(tokio::sync::MutexGuard<'a, SqliteConnection>),
}

impl std::ops::Deref for Conn<'_> {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        match self {
            Self::Pooled(c) => c,
            Self::Single(c) => c,
        }
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            Self::Pooled(c) => c,
            Self::Single(c) => c,
        }
    }
}

impl Exec for Conn<'_> {
    fn sqlite(&mut self) -> &mut SqliteConnection {
        self
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// The SQLite database `url` names (`sqlite://PATH`, `sqlite::memory:`, or a path), or why it
/// names none. The URL is never repeated in the error: it may carry a password.
fn sqlite_url(url: &str) -> StoreResult<&str> {
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        None | Some("sqlite") => Ok(url),
        Some("postgres" | "postgresql") => Err(StoreError::DatabaseUrl(
            "this version of Switchboard stores its data in SQLite only: give --database-url \
             sqlite://PATH (a PostgreSQL URL, postgres://..., is not supported yet)"
                .into(),
        )),
        Some(other) => {
            // Named only when it reads as a scheme: nothing else of the URL is repeated.
            let named = other.len() <= 20
                && other
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            let what = if named {
                format!("a `{other}://` database")
            } else {
                "a database".to_owned()
            };
            Err(StoreError::DatabaseUrl(format!(
                "--database-url names {what}, which Switchboard does not use: give \
                 sqlite://PATH (created if missing)"
            )))
        }
    }
}

/// The stored form of a timestamp.
pub fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl Store {
    /// Opens (creating if missing) and migrates the database at `url`.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::open_with_clock(url, Arc::new(SystemClock)).await
    }

    /// Opens the store with the clock every timestamp it writes is read from (the engine's).
    pub async fn open_with_clock(url: &str, clock: SharedClock) -> StoreResult<Self> {
        let options = SqlitePoolOptions::new().idle_timeout(IDLE_CLOSE);
        Self::connect(url, clock, options, POOL_SIZE).await
    }

    /// Opens the store for a run under tokio's paused clock (tests, the campaign simulator).
    /// Call it *before* pausing the clock: a paused clock jumps to its next timer whenever the
    /// runtime waits on SQLite's worker threads, so every connection is opened here, in real
    /// time and kept. Every query goes through one dedicated connection: the simulated engine is
    /// the only user, a single connection keeps its page cache (another connection's write
    /// would invalidate it), and it needs no per-query checkout from the pool.
    pub async fn open_virtual(url: &str, clock: SharedClock) -> StoreResult<Self> {
        let options = SqlitePoolOptions::new()
            .acquire_timeout(Duration::from_secs(365 * 86_400))
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false);
        let mut store = Self::connect(url, clock, options, 1).await?;
        let conn = SqliteConnection::connect_with(&Self::connect_options(url)?).await?;
        store.single = Some(Arc::new(tokio::sync::Mutex::new(conn)));
        Ok(store)
    }

    fn connect_options(url: &str) -> StoreResult<SqliteConnectOptions> {
        Ok(SqliteConnectOptions::from_str(sqlite_url(url)?)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // Reads through a memory map: a connection whose page cache another connection's
            // write invalidated re-reads pages without copying them.
            .pragma("mmap_size", "1073741824")
            // Statement and savepoint journals (a group of writes keeps one per write) in
            // memory: as files, each group created and deleted one, and creating files on a
            // filesystem that has just deleted many is slow for every other file (recordings).
            .pragma("temp_store", "memory"))
    }

    /// A read-only connection for one query that reads: from the readers' pool of a serving
    /// store, else as [`Store::conn`].
    pub(crate) async fn read_conn(&self) -> Result<Conn<'_>, sqlx::Error> {
        self.conn_from(self.readers.as_ref()).await
    }

    /// A read-only connection for routing an inbound INVITE: from the routers' pool of a
    /// serving store, else as [`Store::conn`].
    pub(crate) async fn route_conn(&self) -> Result<Conn<'_>, sqlx::Error> {
        self.conn_from(self.routers.as_ref()).await
    }

    /// A connection from `pool` when there is one and this is not a virtual run.
    async fn conn_from(&self, pool: Option<&SqlitePool>) -> Result<Conn<'_>, sqlx::Error> {
        match (&self.single, pool) {
            (None, Some(pool)) => Ok(Conn::Pooled(pool.acquire().await?)),
            _ => self.conn().await,
        }
    }

    /// A connection for one query, or for a transaction (`db::begin_write`).
    pub(crate) async fn conn(&self) -> Result<Conn<'_>, sqlx::Error> {
        match &self.single {
            Some(single) => {
                let mut conn = single.lock().await;
                if self
                    .abandoned
                    .swap(false, std::sync::atomic::Ordering::SeqCst)
                {
                    use sqlx::Executor;
                    let _ = conn.execute("ROLLBACK").await;
                }
                Ok(Conn::Single(conn))
            }
            None => Ok(Conn::Pooled(self.pool.acquire().await?)),
        }
    }

    async fn connect(
        url: &str,
        clock: SharedClock,
        pool: SqlitePoolOptions,
        size: u32,
    ) -> StoreResult<Self> {
        let options = Self::connect_options(url)?;
        let pool = pool
            .max_connections(size)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let serving = size > 1 && !in_memory;
        let writer = if serving {
            // Groups of writes run as one text per kind and size (see `group`): room for
            // them beside the store's own statements.
            let conn =
                SqliteConnection::connect_with(&options.clone().statement_cache_capacity(256))
                    .await?;
            Some(Arc::new(tokio::sync::Mutex::new(conn)))
        } else {
            None
        };
        let (readers, routers) = if serving {
            let options = options.read_only(true).create_if_missing(false);
            let pool = |size| {
                SqlitePoolOptions::new()
                    .max_connections(size)
                    .idle_timeout(IDLE_CLOSE)
                    .connect_with(options.clone())
            };
            (Some(pool(READERS).await?), Some(pool(ROUTERS).await?))
        } else {
            (None, None)
        };
        Ok(Self {
            pool,
            readers,
            routers,
            single: None,
            writer,
            abandoned: Arc::default(),
            writes: Arc::default(),
            groups: Arc::default(),
            clock,
            default_trunk: None,
            outbox: Arc::default(),
            links: None,
            analysis: false,
        })
    }

    /// The store of a service whose calls show recording links made by `links` (in webhook
    /// events as in the API).
    pub fn with_recording_links(self, links: crate::domain::signing::RecordingLinks) -> Self {
        Self {
            links: Some(links),
            ..self
        }
    }

    /// The store of a service whose default trunk serves numbers on no carrier account, or not.
    pub fn with_default_trunk(self, default_trunk: Option<&switchboard_sip::trunk::Trunk>) -> Self {
        Self {
            default_trunk: default_trunk.map(|t| TrunkLimits::of(uuid::Uuid::nil(), t)),
            ..self
        }
    }

    pub fn default_trunk(&self) -> bool {
        self.default_trunk.is_some()
    }

    /// The store of a service that analyses answered calls after their end (a chat model is
    /// configured), or not.
    pub fn with_analysis(self, analysis: bool) -> Self {
        Self { analysis, ..self }
    }

    /// Whether ended calls get an end-of-call analysis.
    pub fn analysis(&self) -> bool {
        self.analysis
    }

    /// The trunk caps of a call from a number: its carrier account's trunk, else (a number on
    /// no account) the operator's default trunk. Read from the columns [`TRUNK_COLUMNS`]
    /// selects.
    pub(crate) fn trunk_of(&self, r: &Row) -> StoreResult<Option<TrunkLimits>> {
        let account: Option<uuid::Uuid> = r.try_get("trunk_number_account")?;
        let has_trunk: Option<bool> = r.try_get("trunk_set")?;
        Ok(match (account, has_trunk) {
            (Some(account), Some(true)) => {
                let cap = |c: &str| -> StoreResult<Option<u32>> {
                    let v: Option<i64> = r.try_get(c)?;
                    Ok(v.and_then(|v| u32::try_from(v).ok()))
                };
                Some(TrunkLimits {
                    trunk: account,
                    calls_per_second: cap("trunk_cps")?,
                    max_concurrent: cap("trunk_max")?,
                })
            }
            (Some(_), _) => None,
            (None, _) => self.default_trunk,
        })
    }

    /// The current time, at the store's precision, from the store's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1").execute(&mut *self.conn().await?).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// One page of a list.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}

/// Items of one page and the total count.
#[derive(Debug)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub total: i64,
}

/// A stored value that does not parse.
pub(crate) fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

/// A text column holding one of a closed set of values (a status, a kind, a direction) as
/// its typed value: `parse` is the type's own; a value it does not know is corrupt data.
pub(crate) fn coded<T>(
    r: &Row,
    column: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<T> {
    let text: String = r.try_get(column)?;
    parse(&text).ok_or_else(|| corrupt(column, text))
}

/// A nullable [`coded`] column: NULL is `None`.
pub(crate) fn opt_coded<T>(
    r: &Row,
    column: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<Option<T>> {
    let text: Option<String> = r.try_get(column)?;
    text.map(|text| parse(&text).ok_or_else(|| corrupt(column, text)))
        .transpose()
}

/// A nullable id column as its typed id.
pub(crate) fn opt_id<T: From<uuid::Uuid>>(r: &Row, column: &str) -> Result<Option<T>, sqlx::Error> {
    Ok(r.try_get::<Option<uuid::Uuid>, _>(column)?.map(T::from))
}

impl Store {
    /// Marks a workspace's row as gone for good: `column` (e.g. `released_at`) set to now and
    /// `is_active` cleared; `false` if there was no such row or it was gone already. `table` and
    /// `column` are constants of the caller.
    pub(crate) async fn retire_row(
        &self,
        table: &str,
        column: &str,
        ws: WorkspaceId,
        id: uuid::Uuid,
    ) -> StoreResult<bool> {
        let at = ts(self.now());
        let done = query(format!(
            "UPDATE {table} SET {column} = ?, is_active = FALSE, updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND {column} IS NULL"
        ))
        .bind(at.clone())
        .bind(at)
        .bind(ws.as_uuid())
        .bind(id)
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests;
