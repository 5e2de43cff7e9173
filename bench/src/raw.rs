//! The raw reference of the campaign benchmark: plain single-row write transactions, one after
//! the other from one client, on the same database the run uses, through the same driver and
//! with the store's own settings (SQLite: WAL, `synchronous=NORMAL`; PostgreSQL: the server's).

use std::str::FromStr;
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, Connection};

/// Write transactions per second (each `BEGIN`, one single-row `UPDATE`, `COMMIT`) for `secs`.
pub async fn write_transactions_per_sec(url: &str, secs: f64) -> anyhow::Result<f64> {
    let until = Duration::from_secs_f64(secs);
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS bench_raw_probe (id bigint PRIMARY KEY, n bigint NOT NULL); \
             INSERT INTO bench_raw_probe VALUES (1, 0) ON CONFLICT DO NOTHING",
        )
        .execute(&mut conn)
        .await?;
        let mut rate = Rate::start();
        while rate.running(until) {
            let mut tx = conn.begin().await?;
            sqlx::query("UPDATE bench_raw_probe SET n = n + 1 WHERE id = $1")
                .bind(1_i64)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        sqlx::raw_sql("DROP TABLE bench_raw_probe")
            .execute(&mut conn)
            .await?;
        return Ok(rate.per_sec());
    }
    let mut conn = sqlx::sqlite::SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .connect()
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS bench_raw_probe (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); \
         INSERT OR IGNORE INTO bench_raw_probe VALUES (1, 0)",
    )
    .execute(&mut conn)
    .await?;
    let mut rate = Rate::start();
    while rate.running(until) {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query("UPDATE bench_raw_probe SET n = n + 1 WHERE id = ?")
            .bind(1_i64)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(rate.per_sec())
}

/// Writes counted from a start.
struct Rate {
    start: Instant,
    done: u64,
}

impl Rate {
    fn start() -> Self {
        Self {
            start: Instant::now(),
            done: 0,
        }
    }

    /// Whether another write is to run (the one before counted), until `until` has passed.
    fn running(&mut self, until: Duration) -> bool {
        let more = self.start.elapsed() < until;
        if more {
            self.done += 1;
        }
        more
    }

    fn per_sec(&self) -> f64 {
        self.done as f64 / self.start.elapsed().as_secs_f64()
    }
}
