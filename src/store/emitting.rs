//! Write scripts that raise call events: the script's change and the events' outbox rows are
//! committed in one transaction, only when the change took place.

use super::db;
use super::group::Binder;
use super::webhooks::{bind_events, call_events, insert_events_sql};
use super::{Lane, Script, ScriptQuery, Store, StoreResult, classify, open_sql, run_script};

/// Scripts that write their call events in their own transaction.
impl Store {
    /// An event-raising write ([`Store::atomic_emitting_in`]) of the statements `body` (an [`open_sql`] script's, without
    /// its start) with the values `bind` binds. A normal write of a serving store is committed
    /// with the others waiting at the time (see [`super::group`]).
    pub(crate) async fn emitting_write(
        &self,
        lane: Lane,
        body: String,
        bind: Binder,
        happened: impl FnOnce(&Script) -> bool + Send + 'static,
    ) -> StoreResult<Script> {
        if lane == Lane::Normal
            && let Some(writer) = &self.writer
        {
            return self.grouped(writer.clone(), body, bind, happened).await;
        }
        let query = bind(db::query(open_sql(&body)));
        self.atomic_emitting_in(lane, query, happened).await
    }

    /// Runs a script made with [`open_sql`], whose body ends with call-event lookups
    /// (`CALL_EVENT_SQL`), and commits it with the events they found, in the same transaction:
    /// only if `happened` says the script's change took place (e.g. `changed(0) == 1`), waiting
    /// for the write lock in `lane`. Two round trips: the script, then the events' rows and
    /// the commit.
    pub(crate) async fn atomic_emitting_in(
        &self,
        lane: Lane,
        query: ScriptQuery,
        happened: impl FnOnce(&Script) -> bool + Send + 'static,
    ) -> StoreResult<Script> {
        let mut guard = self.script_guard(lane).await?;
        let mut script = Script::default();
        if let Err(err) = run_script(&mut guard.conn, query, &mut script).await {
            return Err(guard.roll_back(classify(err)).await);
        }
        // The first entry is BEGIN's.
        if !script.changes.is_empty() {
            script.changes.remove(0);
        }
        let events = if happened(&script) {
            match call_events(&script.rows, self.links.as_ref(), self.now()) {
                Ok(events) => events,
                Err(err) => return Err(guard.roll_back(err).await),
            }
        } else {
            Vec::new()
        };
        let commit = bind_events(
            db::query(format!("{}COMMIT", insert_events_sql(events.len()))),
            &events,
        );
        let mut tail = Script::default();
        if let Err(err) = run_script(&mut guard.conn, commit, &mut tail).await {
            return Err(guard.roll_back(classify(err)).await);
        }
        guard.armed = false;
        if !events.is_empty() {
            self.outbox_written();
        }
        Ok(script)
    }
}
