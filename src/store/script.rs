//! Write scripts: several statements run as one transaction on the writer's connection, in
//! the writer's turn, with what each statement changed and returned.

use super::db::{Exec, Step, query};

use super::db::Row;
use super::{Conn, Lane, Store, StoreError, StoreResult, WriteTurn, classify};

/// A write script for [`Store::atomic`]: the statements of `body` (separated by `;`) as one
/// transaction.
pub(crate) fn atomic_sql(body: &str) -> String {
    format!("BEGIN IMMEDIATE; {body}; COMMIT")
}

/// A write script for [`Store::atomic_emitting_in`]: the statements of `body` in a transaction
/// left open for the events' rows.
pub(crate) fn open_sql(body: &str) -> String {
    format!("{OPEN_SQL_PREFIX}{body}")
}

/// How [`open_sql`] opens its transaction (a group of writes opens its own instead).
pub(crate) const OPEN_SQL_PREFIX: &str = "BEGIN IMMEDIATE; ";

/// What a script run by [`Store::atomic`] did.
#[derive(Debug, Default)]
pub(crate) struct Script {
    /// Rows changed by each statement of the body, in order.
    pub changes: Vec<u64>,
    /// Rows the body's statements returned, in order.
    pub rows: Vec<Row>,
}

impl Script {
    /// Rows changed by the body's statement at `index` (0 when there is no such statement).
    pub fn changed(&self, index: usize) -> u64 {
        self.changes.get(index).copied().unwrap_or(0)
    }
}

pub(crate) type ScriptQuery = super::db::Query<'static>;

/// Armed while a script runs: if the caller gives up half way (a dropped request), the
/// connection may be left inside the script's transaction, so it is not reused as it is. A
/// pooled connection is closed (SQLite rolls the transaction back); the single connection of a
/// virtual run is rolled back by its next user.
pub(super) struct ScriptGuard<'a> {
    pub(super) conn: Conn<'a>,
    abandoned: &'a std::sync::atomic::AtomicBool,
    pub(super) armed: bool,
    /// Released after the connection (fields drop in order).
    _turn: WriteTurn<'a>,
}

impl Drop for ScriptGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if !self.conn.close_on_drop() {
            self.abandoned
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

impl Store {
    /// Runs a script made with [`atomic_sql`]: several writes, one transaction, one round trip
    /// to the database. Later statements guard on earlier ones with `changes()`, so a script
    /// writes all of its rows or none of them. A failing statement rolls the whole script
    /// back, and so does a caller that gives up half way (see [`ScriptGuard`]).
    pub(crate) async fn atomic(&self, query: ScriptQuery) -> StoreResult<Script> {
        self.atomic_in(Lane::Normal, query).await
    }

    /// [`Store::atomic`], waiting for the write lock in `lane`.
    pub(crate) async fn atomic_in(&self, lane: Lane, query: ScriptQuery) -> StoreResult<Script> {
        let mut guard = self.script_guard(lane).await?;
        let mut script = Script::default();
        if let Err(err) = run_script(&mut guard.conn, query, &mut script).await {
            return Err(guard.roll_back(classify(err)).await);
        }
        guard.armed = false;
        // The first and last entries are BEGIN's and COMMIT's.
        script.changes.pop();
        if !script.changes.is_empty() {
            script.changes.remove(0);
        }
        Ok(script)
    }

    pub(super) async fn script_guard(&self, lane: Lane) -> StoreResult<ScriptGuard<'_>> {
        let turn = self.write_turn(lane).await;
        Ok(ScriptGuard {
            conn: self.conn().await?,
            abandoned: &self.abandoned,
            armed: true,
            _turn: turn,
        })
    }

    /// The turn to take SQLite's write lock, before a write transaction's connection (see
    /// [`write_gate`]).
    pub(crate) async fn write_turn(&self, lane: Lane) -> WriteTurn<'_> {
        self.writes.enter(lane).await
    }
}

impl ScriptGuard<'_> {
    /// Ends the transaction a failed script opened (harmless if none is open) and answers
    /// `err`.
    pub(super) async fn roll_back(&mut self, err: StoreError) -> StoreError {
        let _ = query("ROLLBACK").execute(&mut self.conn).await;
        self.armed = false;
        err
    }
}

/// Runs `query`'s statements on `conn`, adding what each did to `script`.
pub(super) async fn run_script(
    conn: &mut (impl Exec + ?Sized),
    query: ScriptQuery,
    script: &mut Script,
) -> Result<(), sqlx::Error> {
    let (steps, failed) = query.steps(conn).await;
    for step in steps {
        match step {
            Step::Done(done) => script.changes.push(done.rows_affected()),
            Step::Row(row) => script.rows.push(row),
        }
    }
    failed.map_or(Ok(()), Err)
}
