//! Opening a store: the database its URL names ([`Engine`]), its pools and connections, its
//! migrations, and what is said when it cannot be opened.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use switchboard_actors::clock::{SharedClock, SystemClock};

use super::db::DbConn;
use super::{Pool, Store, StoreError, StoreResult};

/// Connections to the database file of a serving store.
const POOL_SIZE: u32 = 8;

/// Connections to a PostgreSQL server: its readers do not wait for its writers, so the
/// store's reads and writes share one pool.
const PG_POOL_SIZE: u32 = 16;

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

/// What opening a database made: its pools and connections.
struct Opened {
    pool: Pool,
    writer: Option<Arc<tokio::sync::Mutex<DbConn>>>,
    readers: Option<SqlitePool>,
    routers: Option<SqlitePool>,
}

/// The databases a store is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// A file (or memory) of the embedded SQLite: `sqlite://PATH`, `sqlite::memory:` or a path.
    Sqlite,
    /// A PostgreSQL server: `postgres://` or `postgresql://`.
    Postgres,
}

/// The database `url` names, or why it names none. The URL is never repeated in the error:
/// it may carry a password.
pub fn engine_of(url: &str) -> StoreResult<Engine> {
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        None | Some("sqlite") => Ok(Engine::Sqlite),
        Some("postgres" | "postgresql") => Ok(Engine::Postgres),
        other => {
            // Named only when it reads as a scheme: nothing else of the URL is repeated.
            let named = other.filter(|other| {
                other.len() <= 20
                    && other
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            });
            let what = match named {
                Some(other) => format!("a `{other}://` database"),
                None => "a database".to_owned(),
            };
            Err(StoreError::DatabaseUrl(format!(
                "--database-url names {what}, which Switchboard does not use: give \
                 sqlite://PATH (created if missing) or postgres://USER@HOST/DATABASE"
            )))
        }
    }
}

/// A migration's outcome, a database made by a newer version said as such.
fn migrated(done: Result<(), sqlx::migrate::MigrateError>) -> StoreResult<()> {
    match done {
        Err(sqlx::migrate::MigrateError::VersionMissing(version)) => {
            Err(StoreError::DatabaseUrl(format!(
                "the database was migrated by another version of Switchboard (its migration \
                 {version} is not one of this version's): run the version that made it, or a newer one"
            )))
        }
        other => Ok(other?),
    }
}

/// Why a PostgreSQL server at `options` could not be used, said without the URL's password.
fn pg_connect_error(options: &PgConnectOptions, err: sqlx::Error) -> StoreError {
    let server = format!("{}:{}", options.get_host(), options.get_port());
    let said = match &err {
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("28P01" | "28000") => format!(
                "the PostgreSQL server at {server} refused the login of user `{}`: check the user \
                 and password of --database-url",
                options.get_username()
            ),
            Some("3D000") => format!(
                "the PostgreSQL server at {server} has no database `{}`: create it (createdb) \
                 or name another in --database-url",
                options.get_database().unwrap_or("")
            ),
            _ => format!(
                "the PostgreSQL server at {server} refused the connection: {}",
                db.message()
            ),
        },
        sqlx::Error::PoolTimedOut => {
            format!("the PostgreSQL server at {server} does not answer (timed out)")
        }
        other => format!("the PostgreSQL server at {server} does not answer: {other}"),
    };
    StoreError::Unavailable(said)
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
        let conn = match engine_of(url)? {
            Engine::Sqlite => {
                DbConn::Sqlite(SqliteConnection::connect_with(&Self::connect_options(url)?).await?)
            }
            Engine::Postgres => {
                DbConn::Postgres(sqlx::PgConnection::connect_with(&Self::pg_options(url)?).await?)
            }
        };
        store.single = Some(Arc::new(tokio::sync::Mutex::new(conn)));
        Ok(store)
    }

    fn connect_options(url: &str) -> StoreResult<SqliteConnectOptions> {
        Ok(SqliteConnectOptions::from_str(url)?
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

    fn pg_options(url: &str) -> StoreResult<PgConnectOptions> {
        PgConnectOptions::from_str(url).map_err(|_| {
            StoreError::DatabaseUrl(
                "--database-url is not a PostgreSQL URL Switchboard can read: give \
                 postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
                    .into(),
            )
        })
    }

    async fn connect(
        url: &str,
        clock: SharedClock,
        pool: SqlitePoolOptions,
        size: u32,
    ) -> StoreResult<Self> {
        let opened = match engine_of(url)? {
            Engine::Sqlite => Self::connect_sqlite(url, pool, size).await?,
            Engine::Postgres => {
                let options = Self::pg_options(url)?;
                // One connection first, so that a server that is down or refuses the login is
                // said at once (the pool would try again until its timeout).
                sqlx::PgConnection::connect_with(&options)
                    .await
                    .map_err(|err| pg_connect_error(&options, err))?
                    .close()
                    .await?;
                let pool = PgPoolOptions::new()
                    .max_connections(PG_POOL_SIZE.max(size))
                    .acquire_timeout(Duration::from_secs(10))
                    .idle_timeout(IDLE_CLOSE)
                    .connect_with(options)
                    .await?;
                migrated(sqlx::migrate!("./migrations/postgres").run(&pool).await)?;
                Opened {
                    pool: Pool::Postgres(pool),
                    writer: None,
                    readers: None,
                    routers: None,
                }
            }
        };
        Ok(Self {
            pool: opened.pool,
            readers: opened.readers,
            routers: opened.routers,
            single: None,
            writer: opened.writer,
            abandoned: Arc::default(),
            admissions: Arc::default(),
            writes: Arc::default(),
            groups: Arc::default(),
            clock,
            default_trunk: None,
            node: None,
            outbox: Arc::default(),
            links: None,
            analysis: false,
        })
    }

    async fn connect_sqlite(url: &str, pool: SqlitePoolOptions, size: u32) -> StoreResult<Opened> {
        let options = Self::connect_options(url)?;
        let pool = pool
            .max_connections(size)
            .connect_with(options.clone())
            .await?;
        migrated(sqlx::migrate!("./migrations/sqlite").run(&pool).await)?;
        let mut opened = Opened {
            pool: Pool::Sqlite(pool),
            writer: None,
            readers: None,
            routers: None,
        };
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if size == 1 || in_memory {
            return Ok(opened);
        }
        // Groups of writes run as one text per kind and size (see `group`): room for them
        // beside the store's own statements.
        let conn =
            SqliteConnection::connect_with(&options.clone().statement_cache_capacity(256)).await?;
        opened.writer = Some(Arc::new(tokio::sync::Mutex::new(DbConn::Sqlite(conn))));
        let options = options.read_only(true).create_if_missing(false);
        let pool = |size| {
            SqlitePoolOptions::new()
                .max_connections(size)
                .idle_timeout(IDLE_CLOSE)
                .connect_with(options.clone())
        };
        opened.readers = Some(pool(READERS).await?);
        opened.routers = Some(pool(ROUTERS).await?);
        Ok(opened)
    }
}
