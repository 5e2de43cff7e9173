//! A campaign's counts (contacts by state and last outcome, calls per timeline bucket), kept off
//! the admission's path. The triggers that see a contact change state or a call begin and end
//! append a row to a log (migration 0026 on SQLite, 0002 on PostgreSQL); [`Store::fold_counts`]
//! adds the logs into the counts in one transaction, every [`FOLD_EVERY`] admissions and on the
//! jobs' interval. Readers read what was folded plus what the logs still hold, in one
//! statement, so a count is exact whether or not a fold has run.

use std::sync::atomic::Ordering;

use super::db::query;
use super::script::atomic_sql;
use super::{Engine, Lane, Store, StoreError, StoreResult};

/// Admissions between two folds: a fold then adds about four log rows per admission (the
/// contact out of one count and into another, the call admitted and ended).
pub(crate) const FOLD_EVERY: u64 = 256;

/// A campaign's contacts by state and last outcome, as folded and as logged since, as a derived
/// table `n` (state, last_outcome, contacts, attempts). Binds `?1` the campaign, `?2` its
/// workspace.
macro_rules! contact_counts {
    () => {
        "(SELECT state, last_outcome, contacts, attempts FROM campaign_contact_counts \
           WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ?1 AND workspace_id = ?2) \
         UNION ALL SELECT state, last_outcome, contacts, attempts FROM contact_count_log \
           WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ?1 AND workspace_id = ?2)) AS n"
    };
}
pub(crate) use contact_counts;

/// A campaign's calls per bucket of one width and kind, as folded and as logged since, as a
/// derived table `b` (bucket, kind, calls). Binds `?1` the campaign, `?2` its workspace, `?3`
/// and `?4` the width (twice: PostgreSQL types a parameter by its first use).
macro_rules! call_buckets {
    () => {
        "(SELECT bucket, kind, calls FROM campaign_call_buckets \
           WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ?1 AND workspace_id = ?2) AND width = ?3 \
         UNION ALL SELECT substr(at, 1, CAST(?4 AS INTEGER)), kind, calls FROM call_count_log \
           WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ?1 AND workspace_id = ?2)) AS b"
    };
}
pub(crate) use call_buckets;

/// Adds the logs into the counts and empties them. On PostgreSQL the transaction reads one
/// snapshot, so it deletes exactly the log rows it added (a row another transaction commits
/// meanwhile waits for the next fold), and of two folds at once one fails and leaves its rows.
const FOLD_SQL: &str = "INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls) \
     SELECT l.campaign_id, w.width, substr(l.at, 1, CAST(w.width AS INTEGER)), l.kind, CAST(SUM(l.calls) AS BIGINT) \
     FROM call_count_log l CROSS JOIN timeline_widths w WHERE true \
     GROUP BY l.campaign_id, w.width, substr(l.at, 1, CAST(w.width AS INTEGER)), l.kind \
     ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = campaign_call_buckets.calls + excluded.calls; \
     DELETE FROM call_count_log; \
     INSERT INTO campaign_contact_counts (campaign_id, state, last_outcome, contacts, attempts) \
     SELECT campaign_id, state, last_outcome, CAST(SUM(contacts) AS BIGINT), CAST(SUM(attempts) AS BIGINT) \
     FROM contact_count_log WHERE true GROUP BY campaign_id, state, last_outcome \
     ON CONFLICT (campaign_id, state, last_outcome) DO UPDATE SET \
       contacts = campaign_contact_counts.contacts + excluded.contacts, \
       attempts = campaign_contact_counts.attempts + excluded.attempts; \
     DELETE FROM contact_count_log";

impl Store {
    /// Adds the count logs into the counts; answers how many log rows it folded.
    pub async fn fold_counts(&self) -> StoreResult<u64> {
        let script = match self.engine() {
            Engine::Sqlite => atomic_sql(FOLD_SQL),
            Engine::Postgres => {
                format!("BEGIN ISOLATION LEVEL REPEATABLE READ; {FOLD_SQL}; COMMIT")
            }
        };
        let done = self.atomic_in(Lane::Normal, query(script)).await?;
        Ok(done.changed(1) + done.changed(3))
    }

    /// [`Store::fold_counts`] when the logs hold rows (looked at with a read, so an idle
    /// service writes nothing), a failure left to the next fold (the logs keep their rows).
    pub async fn fold_counts_or_later(&self) {
        let logged: StoreResult<i64> = async {
            query(
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM call_count_log) \
                 OR EXISTS (SELECT 1 FROM contact_count_log) THEN 1 ELSE 0 END",
            )
            .scalar(&mut self.read_conn().await?)
            .await
            .map_err(StoreError::from)
        }
        .await;
        if matches!(logged, Ok(0)) {
            return;
        }
        if let Err(err) = self.fold_counts().await {
            tracing::debug!(error = %err, "counts not folded; the next fold takes them");
        }
    }

    /// Counts an admission; every [`FOLD_EVERY`]th starts a fold beside it, so that the logs
    /// stay a few hundred rows long while a campaign runs.
    pub(super) fn admitted(&self) {
        if self.admissions.fetch_add(1, Ordering::Relaxed) % FOLD_EVERY != FOLD_EVERY - 1 {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move { store.fold_counts_or_later().await });
    }
}
