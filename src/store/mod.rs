//! The store: one SQLite file, migrated on open.
//!
//! Every resource query takes the caller's [`WorkspaceId`] and filters on it, so an id from
//! another workspace reads exactly like a missing one. Timestamps are written through [`ts`] in
//! one fixed form so that text order is time order.
//!
//! **Invariant:** a multi-row change (a campaign transition and its audit event, a balance change
//! and its ledger entry) happens in one transaction.

mod agents;
mod billing;
mod calls;
mod campaigns;
mod dispositions;
mod dnc;
mod keys;
mod numbers;
mod workspaces;

pub use agents::*;
pub use billing::*;
pub use calls::*;
pub use campaigns::*;
pub use dispositions::*;
pub use dnc::*;
pub use keys::*;
pub use numbers::*;
pub use workspaces::*;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use switchboard_actors::clock::{SharedClock, SystemClock};

pub use switchboard_actors::ids::WorkspaceId;

/// Errors of the store layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was broken; `constraint` names the index.
    #[error("unique constraint {constraint} violated")]
    Conflict { constraint: String },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Maps a unique-constraint violation to [`StoreError::Conflict`], everything else through.
/// This is the one place that reads database error kinds.
pub(crate) fn classify(err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        let message = db.message();
        let constraint = message
            .rsplit(':')
            .next()
            .unwrap_or(message)
            .trim()
            .to_owned();
        return StoreError::Conflict { constraint };
    }
    StoreError::Database(err)
}

/// Connections to the database file of a serving store.
const POOL_SIZE: u32 = 8;

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    clock: SharedClock,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
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
        Self::connect(url, clock, SqlitePoolOptions::new(), POOL_SIZE).await
    }

    /// Opens the store for a run under tokio's paused clock (tests, the campaign simulator).
    /// Call it *before* pausing the clock: a paused clock jumps to its next timer whenever the
    /// runtime waits on SQLite's worker threads, so every connection is opened here, in real
    /// time, and the pool never closes, reopens or times out one afterwards. One connection:
    /// the simulated engine is the only user, and a single connection keeps its page cache
    /// (another connection's write would invalidate it).
    pub async fn open_virtual(url: &str, clock: SharedClock) -> StoreResult<Self> {
        let options = SqlitePoolOptions::new()
            .acquire_timeout(Duration::from_secs(365 * 86_400))
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false);
        let store = Self::connect(url, clock, options, 1).await?;
        drop(store.pool.acquire().await?);
        Ok(store)
    }

    async fn connect(
        url: &str,
        clock: SharedClock,
        pool: SqlitePoolOptions,
        size: u32,
    ) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // Reads through a memory map: a connection whose page cache another connection's
            // write invalidated re-reads pages without copying them.
            .pragma("mmap_size", "1073741824");
        let pool = pool.max_connections(size).connect_with(options).await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Self { pool, clock })
    }

    /// The current time, at the store's precision, from the store's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn clock(&self) -> SharedClock {
        self.clock.clone()
    }

    /// A write transaction. `BEGIN IMMEDIATE` takes the write lock up front, so a transaction
    /// that reads before it writes cannot fail on upgrade (SQLITE_BUSY_SNAPSHOT) when another
    /// writer commits in between; writers queue on the busy timeout instead.
    pub(crate) async fn begin(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
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

/// Marks a query built with `format!` as safe. Only constant column lists, table names and `?`
/// placeholders are ever formatted into SQL; values are always bound.
pub(crate) fn sql(text: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(text)
}
