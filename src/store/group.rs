//! Group commit for the writes that raise call events.
//!
//! Under a flood of calls (every answered inbound call is recorded at its start and its end)
//! writing one transaction per call spends most of each write on the way to it, not in it:
//! the writer's turn handed from task to task, a pooled connection checked out, a round trip
//! to the connection's thread for the script and another for its events and commit, and a
//! commit that writes every page the call touched (the calls table and its indexes, the
//! counts the dashboard keeps) to the log again. Here the writes of [`Lane::Normal`] that
//! arrive while another is being written wait in a queue; one writer task takes the whole
//! queue in one turn, on one connection, in one transaction: each write in a savepoint of its
//! own (a failing write is rolled back alone and answered its error, the rest go on), one
//! round trip for each write's statements (and one for its events, when it has any), one
//! commit for all. A write is answered once the commit is done, so its caller sees exactly
//! what it saw when it had a transaction of its own.
//!
//! A write whose caller gives up is still written (or not) with its group: it is never left
//! half done. Virtual runs (one connection, the simulator's clock) write directly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sqlx::{Execute, Executor};
use tokio::sync::oneshot;

use super::webhooks::{NewEvent, bind_events, call_events, insert_events_sql};
use super::{Lane, OPEN_SQL_PREFIX, Script, ScriptQuery, Store, StoreError, StoreResult};
use super::{classify, run_script, sql};

/// The most writes one transaction takes: a group holds SQLite's write lock for its whole
/// length, and an urgent writer (a request whose client is waiting) waits for it.
const MAX_GROUP: usize = 64;

/// What a savepoint of a group is called.
const SAVEPOINT: &str = "SAVEPOINT grouped_write; ";

type Happened = Box<dyn FnOnce(&Script) -> bool + Send>;

/// A write waiting for its group.
struct Job {
    query: ScriptQuery,
    happened: Happened,
    reply: oneshot::Sender<StoreResult<Script>>,
}

/// The writes waiting, and whether a writer task is taking them.
#[derive(Default)]
pub(crate) struct Groups {
    queue: Mutex<Queue>,
    /// Groups committed, and the writes they carried.
    groups: AtomicU64,
    writes: AtomicU64,
}

/// How many groups were committed and how many writes they carried, since the store opened.
#[derive(Debug, Clone, Copy, Default)]
pub struct GroupStats {
    pub groups: u64,
    pub writes: u64,
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    writing: bool,
}

impl Groups {
    fn committed(&self, writes: usize) {
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(writes as u64, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Each change to the queue is one push or one take: a panic elsewhere cannot leave it
        // half changed, so a poisoned lock is used as it is.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next writes to take, or `None` (and the writer stands down) when there are none.
    fn take(&self) -> Option<Vec<Job>> {
        let mut queue = self.lock();
        if queue.jobs.is_empty() {
            queue.writing = false;
            return None;
        }
        let take = queue.jobs.len().min(MAX_GROUP);
        let rest = queue.jobs.split_off(take);
        Some(std::mem::replace(&mut queue.jobs, rest))
    }
}

/// Stands the writer down if its task ends without emptying the queue (it panicked): the
/// writes still queued are answered with an error (their senders dropped), and the next write
/// starts a writer again.
struct Writer {
    groups: Arc<Groups>,
    /// Stood down by [`Groups::take`]: the queue may already have a new writer.
    done: bool,
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut queue = self.groups.lock();
        queue.writing = false;
        queue.jobs.clear();
    }
}

/// One write of a group: answered after the group's commit.
struct Written {
    reply: oneshot::Sender<StoreResult<Script>>,
    script: Script,
}

impl Store {
    /// What group commit has done (see [`super::group`]).
    pub fn group_stats(&self) -> GroupStats {
        GroupStats {
            groups: self.groups.groups.load(Ordering::Relaxed),
            writes: self.groups.writes.load(Ordering::Relaxed),
        }
    }

    /// Queues an event-raising script (made with `open_sql`) for the next group and waits
    /// for its group's commit.
    pub(super) async fn grouped(
        &self,
        query: ScriptQuery,
        happened: impl FnOnce(&Script) -> bool + Send + 'static,
    ) -> StoreResult<Script> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.groups.lock();
            queue.jobs.push(Job {
                query,
                happened: Box::new(happened),
                reply,
            });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start {
            let store = self.clone();
            tokio::spawn(async move {
                let mut writer = Writer {
                    groups: store.groups.clone(),
                    done: false,
                };
                while let Some(jobs) = writer.groups.take() {
                    store.write_group(jobs).await;
                }
                writer.done = true;
            });
        }
        answer
            .await
            .unwrap_or(Err(StoreError::Database(sqlx::Error::WorkerCrashed)))
    }

    /// Writes `jobs` in one transaction and answers each.
    async fn write_group(&self, jobs: Vec<Job>) {
        let turn = self.write_turn(Lane::Normal).await;
        let mut conn = match self.conn().await {
            Ok(conn) => conn,
            Err(err) => return fail_all(jobs, || StoreError::Database(clone_error(&err))),
        };
        if let Err(err) = (&mut *conn).execute("BEGIN IMMEDIATE").await {
            return fail_all(jobs, || classify(clone_error(&err)));
        }
        let mut written: Vec<Written> = Vec::with_capacity(jobs.len());
        let mut jobs = jobs.into_iter();
        let mut raised = false;
        while let Some(job) = jobs.next() {
            match self.write_one(&mut conn, job.query, job.happened).await {
                Ok((script, events)) => {
                    raised |= events;
                    written.push(Written {
                        reply: job.reply,
                        script,
                    });
                }
                Err(Failed::Alone(err)) => {
                    let _ = job.reply.send(Err(err));
                }
                Err(Failed::Transaction(err)) => {
                    // The connection's state is unknown: nothing of the group is kept.
                    let _ = (&mut *conn).execute("ROLLBACK").await;
                    close(&mut conn);
                    let _ = job.reply.send(Err(err));
                    let rest = written.into_iter().map(|w| w.reply);
                    let rest = rest.chain(jobs.map(|j| j.reply));
                    return rest.for_each(|r| {
                        let _ = r.send(Err(transaction_lost()));
                    });
                }
            }
        }
        if let Err(err) = (&mut *conn).execute("COMMIT").await {
            let _ = (&mut *conn).execute("ROLLBACK").await;
            close(&mut conn);
            for w in written {
                let _ = w.reply.send(Err(classify(clone_error(&err))));
            }
            return;
        }
        drop(conn);
        drop(turn);
        self.groups.committed(written.len());
        if raised {
            self.outbox_written();
        }
        for w in written {
            let _ = w.reply.send(Ok(w.script));
        }
    }

    /// Runs one write in its savepoint, with its events when `happened` says its change took
    /// place; whether it raised any.
    async fn write_one(
        &self,
        conn: &mut sqlx::SqliteConnection,
        mut query: ScriptQuery,
        happened: Happened,
    ) -> Result<(Script, bool), Failed> {
        let args = query
            .take_arguments()
            .map_err(|e| Failed::Alone(StoreError::Database(sqlx::Error::Encode(e))))?;
        let text = query.sql();
        let body = text
            .as_str()
            .strip_prefix(OPEN_SQL_PREFIX)
            .unwrap_or(text.as_str());
        let query = sqlx::query_with(sql(format!("{SAVEPOINT}{body}")), args.unwrap_or_default());
        let mut script = Script::default();
        if let Err(err) = run_script(conn, query, &mut script).await {
            return Err(self.roll_back_one(conn, classify(err)).await);
        }
        // The first entry is the savepoint's.
        if !script.changes.is_empty() {
            script.changes.remove(0);
        }
        let events: Vec<NewEvent> = if happened(&script) {
            match call_events(&script.rows, self.links.as_ref(), self.now()) {
                Ok(events) => events,
                Err(err) => return Err(self.roll_back_one(conn, err).await),
            }
        } else {
            Vec::new()
        };
        if !events.is_empty() {
            let insert = bind_events(sqlx::query(sql(insert_events_sql(events.len()))), &events);
            if let Err(err) = (&mut *conn).execute(insert).await {
                return Err(self.roll_back_one(conn, classify(err)).await);
            }
        }
        Ok((script, !events.is_empty()))
    }

    /// Undoes one write's part of the group: `err` is its answer; if even that fails, the
    /// whole transaction is lost.
    async fn roll_back_one(&self, conn: &mut sqlx::SqliteConnection, err: StoreError) -> Failed {
        let undo = "ROLLBACK TO grouped_write";
        match (&mut *conn).execute(undo).await {
            Ok(_) => Failed::Alone(err),
            Err(_) => Failed::Transaction(err),
        }
    }
}

/// How a write of a group failed.
enum Failed {
    /// Rolled back alone; the group goes on.
    Alone(StoreError),
    /// With the group's transaction.
    Transaction(StoreError),
}

fn fail_all(jobs: Vec<Job>, err: impl Fn() -> StoreError) {
    for job in jobs {
        let _ = job.reply.send(Err(err()));
    }
}

/// What the writes of a group are answered when another write lost its transaction.
fn transaction_lost() -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(
        "the write's transaction was rolled back with another write's failure".into(),
    ))
}

/// A connection whose transaction failed to end is not reused.
fn close(conn: &mut super::Conn<'_>) {
    if let super::Conn::Pooled(c) = conn {
        c.close_on_drop();
    }
}

/// `sqlx::Error` is not `Clone`: an error that answers several writes is told to each in
/// its own words.
fn clone_error(err: &sqlx::Error) -> sqlx::Error {
    match err {
        sqlx::Error::Database(db) => sqlx::Error::Protocol(db.message().to_owned()),
        other => sqlx::Error::Protocol(other.to_string()),
    }
}
