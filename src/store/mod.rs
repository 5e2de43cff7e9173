//! The store: an SQLite file (the default) or a PostgreSQL database, migrated on open
//! (`open.rs`).
//!
//! Every resource query takes the caller's [`WorkspaceId`] and filters on it, so an id from
//! another workspace reads exactly like a missing one. Timestamps are written through [`ts`]:
//! on SQLite in one fixed form so that text order is time order, on PostgreSQL as
//! `timestamptz`.
//!
//! **Invariant:** a multi-row change (a campaign transition and its audit event, a balance change
//! and its ledger entry) happens in one transaction. Write transactions `BEGIN IMMEDIATE`: the
//! write lock is taken up front, so one that reads before it writes cannot fail on upgrade
//! (SQLITE_BUSY_SNAPSHOT) when another writer commits in between.
//!
//! This file holds the store's connections (its pools, the virtual-time single connection) and
//! errors; `open.rs` opens them; every query is built and run through `db.rs` (with
//! `values.rs` and `dialect.rs`, what differs between the two databases), and the resources
//! live in their own modules.

mod affiliates;
mod agents;
mod analysis_status;
mod billing;
mod call_details;
mod calls;
mod campaign_settings;
mod campaign_stats;
mod campaigns;
mod carrier_accounts;
mod contacts;
mod copy;
mod counts;
mod dashboard;
mod db;
mod dialect;
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
mod leases;
mod nodes;
mod numbers;
mod open;
mod outbound;
mod script;
mod shared_links;
mod signing_secrets;
mod sip_endpoints;
mod tools;
mod values;
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
pub use campaign_stats::*;
pub use campaigns::*;
pub use carrier_accounts::*;
pub use contacts::*;
pub use copy::*;
pub use dashboard::*;
pub use db::{Exec, OwnedTx};
pub use dispositions::*;
pub use dnc::*;
pub use group::*;
pub use inbound::*;
pub use integrations::*;
pub use keys::*;
pub use lead_memory::*;
pub use leads::*;
pub use leases::*;
pub use nodes::*;
pub use numbers::*;
pub use open::*;
pub use outbound::*;
pub(crate) use script::*;
pub use shared_links::*;
pub use sip_endpoints::*;
pub use tools::*;
pub use values::Ts;
pub use webhooks::*;
pub use workspaces::*;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use db::{DbConn, Row, query};
use sqlx::{PgPool, SqlitePool};
use switchboard_actors::clock::SharedClock;
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
    /// The database server could not be reached or refused the store's login.
    #[error("{0}")]
    Unavailable(String),
    /// Another running node already has this node's id.
    #[error("{0}")]
    NodeInUse(String),
}

impl StoreError {
    /// The database could not be reached, rather than refusing what was asked: its server is
    /// down or restarting, the connection to it was lost, or no connection came free in time.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Unavailable(_) => true,
            Self::Database(err) => match err {
                sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed => true,
                // SQLSTATE class 08 (connection exception), 57P01-57P03 (the server shutting
                // down or starting).
                sqlx::Error::Database(db) => db.code().is_some_and(|c| {
                    c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03")
                }),
                _ => false,
            },
            _ => false,
        }
    }
}

impl StoreError {
    /// The database's disk is full (SQLite's `SQLITE_FULL`, PostgreSQL's SQLSTATE 53100): the
    /// write was refused whole, and one tried again once space is freed can land.
    pub fn is_full(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Database(db)) => {
                db.code().is_some_and(|c| matches!(&*c, "13" | "53100"))
            }
            _ => false,
        }
    }

    /// A failure that passes by itself (the database unreachable, its disk full, or the write
    /// lost to another): the same write tried again later can land.
    pub fn may_pass(&self) -> bool {
        let closed = matches!(self, Self::Database(sqlx::Error::PoolClosed));
        (self.is_unavailable() && !closed) || self.is_full() || self.is_contended()
    }

    /// The write lost to another (SQLite busy or locked; PostgreSQL's serialization failure
    /// or deadlock): the same write tried again can land.
    pub fn is_contended(&self) -> bool {
        match self {
            Self::Database(sqlx::Error::Database(db)) => db
                .code()
                .is_some_and(|c| matches!(&*c, "5" | "6" | "517" | "40001" | "40P01")),
            _ => false,
        }
    }
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
/// This is the one place that reads database errors. The rule is told by the table its
/// constraint belongs to: PostgreSQL names the constraint (every unique constraint and index
/// of the schema is named after its table), SQLite names its columns (`table.column, ...`) or
/// its index.
pub(crate) fn classify(err: sqlx::Error) -> StoreError {
    let sqlx::Error::Database(db) = &err else {
        return StoreError::Database(err);
    };
    if !db.is_unique_violation() {
        return StoreError::Database(err);
    }
    let constraint = match db.constraint() {
        Some(name) => name.to_owned(),
        None => {
            let message = db.message();
            let named = message.rsplit(':').next().unwrap_or(message).trim();
            named
                .trim_start_matches("index ")
                .trim_matches('\'')
                .to_owned()
        }
    };
    let of = |table: &str| {
        constraint.starts_with(table)
            && matches!(constraint.as_bytes().get(table.len()), Some(b'.' | b'_'))
    };
    let rule = match () {
        _ if of("campaigns") => UniqueRule::CampaignName,
        _ if of("dispositions") => UniqueRule::DispositionLabel,
        _ if of("dnc_entries") => UniqueRule::DoNotCallNumber,
        _ if of("phone_numbers") => UniqueRule::PhoneNumberHeld,
        _ if of("leads") => UniqueRule::LeadNumber,
        _ if of("lead_tags") => UniqueRule::LeadTagName,
        _ if of("sip_endpoints") => UniqueRule::SipSlug,
        _ if of("calls") => UniqueRule::CallIdempotencyKey,
        _ if of("tools") => UniqueRule::ToolIdempotencyKey,
        _ => UniqueRule::Other { constraint },
    };
    StoreError::Conflict { rule }
}

#[derive(Clone)]
pub struct Store {
    pool: Pool,
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
    single: Option<Arc<tokio::sync::Mutex<DbConn>>>,
    /// The connection groups of writes are committed on (see [`group`]), set for a serving
    /// store: one writer, so one page cache that no other writer invalidates and one cache of
    /// the groups' prepared texts.
    writer: Option<Arc<tokio::sync::Mutex<DbConn>>>,
    /// Set when a script on the single connection was given up half way: its next user rolls
    /// back whatever transaction was left open.
    abandoned: Arc<std::sync::atomic::AtomicBool>,
    /// Admissions so far, to fold the count logs every few hundred (see [`counts`]).
    admissions: Arc<std::sync::atomic::AtomicU64>,
    /// The order of the writes that take SQLite's write lock through it.
    writes: Arc<WriteGate>,
    /// The event-raising writes waiting to be committed together (see [`group`]).
    groups: Arc<Groups>,
    clock: SharedClock,
    /// The caps of the operator's default trunk, when one serves numbers on no carrier account
    /// (`serve --carrier sip --outbound-trunk`): such numbers show `sip_outbound_configured`,
    /// and their calls wait for room on it.
    default_trunk: Option<TrunkLimits>,
    /// The node this store serves (`--node-id`): written on the calls it dials and answers.
    node: Option<Arc<str>>,
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

/// The connections of a store's database.
#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A connection for one query or transaction: from a pool, or the single one.
pub(crate) enum Conn<'a> {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>),
    Single(tokio::sync::MutexGuard<'a, DbConn>),
}

impl Conn<'_> {
    /// Closes a pooled connection when it is dropped instead of returning it to its pool.
    pub(crate) fn close_on_drop(&mut self) -> bool {
        match self {
            Self::Sqlite(c) => c.close_on_drop(),
            Self::Postgres(c) => c.close_on_drop(),
            Self::Single(_) => return false,
        }
        true
    }
}

impl Exec for Conn<'_> {
    fn db(&mut self) -> db::Db<'_> {
        match self {
            Self::Sqlite(c) => c.db(),
            Self::Postgres(c) => c.db(),
            Self::Single(c) => c.db(),
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// The stored form of a timestamp.
pub fn ts(t: DateTime<Utc>) -> Ts {
    Ts(t)
}

impl Store {
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
            (None, Some(pool)) => Ok(Conn::Sqlite(pool.acquire().await?)),
            _ => self.conn().await,
        }
    }

    /// A connection for one query, or for a transaction (`db::begin_write`).
    pub(crate) async fn conn(&self) -> Result<Conn<'_>, sqlx::Error> {
        if let Some(single) = &self.single {
            let mut conn = Conn::Single(single.lock().await);
            if self
                .abandoned
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                let _ = query("ROLLBACK").execute(&mut conn).await;
            }
            return Ok(conn);
        }
        Ok(match &self.pool {
            Pool::Sqlite(pool) => Conn::Sqlite(pool.acquire().await?),
            Pool::Postgres(pool) => Conn::Postgres(pool.acquire().await?),
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

    /// The store of node `id`: the calls it dials and answers are written as the node's.
    pub fn with_node(self, id: &str) -> Self {
        Self {
            node: Some(id.into()),
            ..self
        }
    }

    /// The node this store serves, if it was given one.
    pub fn node(&self) -> Option<&str> {
        self.node.as_deref()
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

    /// The database the store is kept in.
    pub fn engine(&self) -> Engine {
        match self.pool {
            Pool::Sqlite(_) => Engine::Sqlite,
            Pool::Postgres(_) => Engine::Postgres,
        }
    }

    /// The last migration applied to the database.
    pub async fn schema_version(&self) -> StoreResult<i64> {
        Ok(
            query("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
                .scalar::<Option<i64>>(&mut self.conn().await?)
                .await?
                .unwrap_or(0),
        )
    }

    pub async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1").execute(&mut self.conn().await?).await?;
        Ok(())
    }

    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }

    /// A write transaction of its own, on a connection of its own.
    pub async fn begin(&self) -> StoreResult<db::OwnedTx> {
        let mut conn = match &self.pool {
            Pool::Sqlite(pool) => DbConn::Sqlite(pool.acquire().await?.detach()),
            Pool::Postgres(pool) => DbConn::Postgres(pool.acquire().await?.detach()),
        };
        query(match conn.db() {
            db::Db::Sqlite(_) => "BEGIN IMMEDIATE",
            db::Db::Postgres(_) => "BEGIN",
        })
        .execute(&mut conn)
        .await?;
        Ok(db::OwnedTx(conn))
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
        .bind(at)
        .bind(at)
        .bind(ws.as_uuid())
        .bind(id)
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests;
