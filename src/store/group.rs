//! Group commit for the writes that raise call events.
//!
//! Under a flood of calls (every answered inbound call is recorded at its start and its end)
//! writing one transaction per call spends most of each write on the way to it, not in it:
//! the writer's turn handed from task to task, a pooled connection checked out, a round trip
//! to the connection's thread for the script and another for its events and commit (on busy
//! cores each wake-up waits its turn to run), and a commit that writes every page the call
//! touched (the calls table and its indexes, the counts the dashboard keeps) to the log again.
//! Here the writes of [`Lane::Normal`] that arrive while another group is being written wait
//! in a queue; one writer task takes the queue in one turn, on one connection, in one
//! transaction. Writes with the same statements run together as one text, each in a
//! savepoint of its own and followed by a mark that tells where its results end: one round
//! trip for a chunk of them. A failing write is rolled back to its savepoint and answered its
//! error; the writes after it run again. The events of all are written with the one commit.
//! A write is answered once the commit is done, so its caller sees what it saw when it had a
//! transaction of its own.
//!
//! A write whose caller gives up is still written (or not) with its group: it is never left
//! half done. Virtual runs (one connection, the simulator's clock) write directly.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::db::{Exec, Step, query};
use super::webhooks::{NewEvent, bind_events, call_events, insert_events_sql};
use super::{Lane, Script, ScriptQuery, Store, StoreError, StoreResult, classify};

/// The most writes one transaction takes: a group holds SQLite's write lock for its whole
/// length, and an urgent writer (a request whose client is waiting) waits for it.
const MAX_GROUP: usize = 64;

/// The longest chunk of writes run as one text: each size a connection has run stays
/// prepared on it, so a few sizes, none very large.
const MAX_CHUNK: usize = 16;

/// What each write of a group opens (and a failing one is rolled back to).
const SAVEPOINT: &str = "SAVEPOINT grouped_write";

/// What each write of a group ends with: its row tells where the next write's results begin.
const MARK: &str = "SELECT 1 AS grouped_write_end";

/// The connection groups are written on.
pub(super) type WriterConn = Arc<tokio::sync::Mutex<super::db::DbConn>>;

type Happened = Box<dyn FnOnce(&Script) -> bool + Send>;

/// Binds a write's values onto a query, after those of the writes before it (again, if the
/// write is run again after another failed before it).
pub(super) type Binder = Box<dyn Fn(ScriptQuery) -> ScriptQuery + Send + Sync>;

/// A write waiting for its group.
struct Job {
    /// Its statements (the body of an `open_sql` script, without the transaction's start).
    body: String,
    bind: Binder,
    happened: Happened,
    reply: Reply,
}

/// The writes waiting, and whether a writer task is taking them.
#[derive(Default)]
pub(crate) struct Groups {
    queue: Mutex<Queue>,
    /// A group's transaction may have been left open (its rollback failed).
    unsettled: AtomicBool,
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
struct Standing {
    groups: Arc<Groups>,
    /// Stood down by [`Groups::take`]: the queue may already have a new writer.
    done: bool,
}

impl Drop for Standing {
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
    reply: Reply,
    script: Script,
}

impl Store {
    /// Marks the writer's connection as maybe inside a transaction still.
    fn unsettled(&self) {
        self.groups.unsettled.store(true, Ordering::Release);
    }

    /// What group commit has done (see [`super::group`]).
    pub fn group_stats(&self) -> GroupStats {
        GroupStats {
            groups: self.groups.groups.load(Ordering::Relaxed),
            writes: self.groups.writes.load(Ordering::Relaxed),
        }
    }

    /// Queues an event-raising write (`body`: the statements of an `open_sql` script, whose
    /// values `bind` binds) for the next group and waits for its group's commit.
    pub(super) async fn grouped(
        &self,
        writer: WriterConn,
        body: String,
        bind: Binder,
        happened: impl FnOnce(&Script) -> bool + Send + 'static,
    ) -> StoreResult<Script> {
        let (reply, answer) = oneshot::channel();
        let body = body.trim_end().trim_end_matches(';').to_owned();
        let start = {
            let mut queue = self.groups.lock();
            queue.jobs.push(Job {
                body,
                bind,
                happened: Box::new(happened),
                reply,
            });
            !std::mem::replace(&mut queue.writing, true)
        };
        if start {
            let store = self.clone();
            tokio::spawn(async move {
                let mut standing = Standing {
                    groups: store.groups.clone(),
                    done: false,
                };
                while let Some(jobs) = standing.groups.take() {
                    store.write_group(&mut *writer.lock().await, jobs).await;
                }
                standing.done = true;
            });
        }
        answer
            .await
            .unwrap_or(Err(StoreError::Database(sqlx::Error::WorkerCrashed)))
    }

    /// Writes `jobs` in one transaction and answers each.
    async fn write_group(&self, conn: &mut (impl Exec + ?Sized), jobs: Vec<Job>) {
        let turn = self.write_turn(Lane::Normal).await;
        if self.groups.unsettled.swap(false, Ordering::AcqRel) {
            // The last group failed to end its transaction: end it now.
            let _ = query("ROLLBACK").execute(&mut *conn).await;
        }
        if let Err(err) = query("BEGIN IMMEDIATE").execute(&mut *conn).await {
            return fail_all(jobs, || classify(clone_error(&err)));
        }
        let mut written: Vec<Written> = Vec::with_capacity(jobs.len());
        let mut events: Vec<NewEvent> = Vec::new();
        let mut waiting = chunks(jobs);
        while let Some(chunk) = waiting.pop() {
            match self.write_chunk(conn, chunk).await {
                Ok((done, rest, raised)) => {
                    written.extend(done);
                    events.extend(raised);
                    if !rest.is_empty() {
                        waiting.extend(chunks(rest));
                    }
                }
                Err((err, unanswered)) => {
                    // The transaction is lost: nothing of the group is kept.
                    let _ = query("ROLLBACK").execute(&mut *conn).await;
                    self.unsettled();
                    let mut replies = unanswered.into_iter();
                    if let Some(failing) = replies.next() {
                        let _ = failing.send(Err(err));
                    }
                    let kept = written.into_iter().map(|w| w.reply);
                    let queued = waiting.into_iter().flatten().map(|j| j.reply);
                    for reply in replies.chain(kept).chain(queued) {
                        let _ = reply.send(Err(transaction_lost()));
                    }
                    return;
                }
            }
        }
        let commit = bind_events(
            query(format!("{}COMMIT", insert_events_sql(events.len()))),
            &events,
        )
        .persistent(events.len() <= 4);
        if let Err(err) = commit.execute(&mut *conn).await {
            let _ = query("ROLLBACK").execute(&mut *conn).await;
            self.unsettled();
            for w in written {
                let _ = w.reply.send(Err(classify(clone_error(&err))));
            }
            return;
        }
        drop(turn);
        self.groups.committed(written.len());
        if !events.is_empty() {
            self.outbox_written();
        }
        for w in written {
            let _ = w.reply.send(Ok(w.script));
        }
    }

    /// Runs a chunk of writes with the same statements in one round trip, each in its
    /// savepoint. A write that fails is rolled back alone and answered its error; the writes
    /// after it are handed back (the second value) to be run again. The third value: the
    /// events of the writes that took place. An error: the transaction is lost, with the
    /// replies still to be answered (the first is the failing write's).
    async fn write_chunk(&self, conn: &mut (impl Exec + ?Sized), chunk: Vec<Job>) -> ChunkResult {
        let body = chunk.first().map(|j| j.body.as_str()).unwrap_or_default();
        let text = format!("{SAVEPOINT}; {body}; {MARK}; ").repeat(chunk.len());
        let mut writes = query(text);
        for job in &chunk {
            writes = (job.bind)(writes);
        }
        let mut scripts: Vec<Script> = Vec::with_capacity(chunk.len());
        let (failed, inside) = read_chunk(conn, writes, &mut scripts).await;
        let mut jobs = chunk.into_iter();
        let mut done = Vec::with_capacity(scripts.len());
        let mut events = Vec::new();
        for script in scripts {
            let Some(job) = jobs.next() else { break };
            if (job.happened)(&script) {
                match call_events(&script.rows, self.links.as_ref(), self.now()) {
                    Ok(raised) => events.extend(raised),
                    // Later writes stand on this one's savepoint: it cannot be undone alone.
                    Err(err) => return Err(lost(err, job.reply, done, jobs)),
                }
            }
            done.push(Written {
                reply: job.reply,
                script,
            });
        }
        let Some(err) = failed else {
            return Ok((done, Vec::new(), events));
        };
        let err = classify(err);
        let Some(job) = jobs.next() else {
            return Err((err, done.into_iter().map(|w| w.reply).collect()));
        };
        if !inside {
            // It failed outside its own savepoint (opening it): rolling back to the last one
            // would undo the write before it.
            return Err(lost(err, job.reply, done, jobs));
        }
        match query("ROLLBACK TO grouped_write").execute(&mut *conn).await {
            Ok(_) => {
                let _ = job.reply.send(Err(err));
                Ok((done, jobs.collect(), events))
            }
            Err(_) => Err(lost(err, job.reply, done, jobs)),
        }
    }
}

/// What [`Store::write_chunk`] answers.
type ChunkResult = Result<(Vec<Written>, Vec<Job>, Vec<NewEvent>), (StoreError, Vec<Reply>)>;

type Reply = oneshot::Sender<StoreResult<Script>>;

/// A chunk's replies when its transaction is lost: the failing write's first.
fn lost(
    err: StoreError,
    failing: Reply,
    done: Vec<Written>,
    rest: impl Iterator<Item = Job>,
) -> (StoreError, Vec<Reply>) {
    let mut replies = vec![failing];
    replies.extend(done.into_iter().map(|w| w.reply));
    replies.extend(rest.map(|j| j.reply));
    (err, replies)
}

/// Reads a chunk's results into one script per write, up to the first error (returned, with
/// whether it came after the failing write's savepoint was open): a write's results start
/// after its savepoint's and end at its mark.
async fn read_chunk(
    conn: &mut (impl Exec + ?Sized),
    query: ScriptQuery,
    scripts: &mut Vec<Script>,
) -> (Option<sqlx::Error>, bool) {
    let (steps, failed) = query.steps(conn).await;
    let mut current = Script::default();
    // The next result is the savepoint's (a write's first) or the mark's (its last).
    let (mut opening, mut closing) = (true, false);
    for step in steps {
        match step {
            Step::Done(done) => {
                if opening {
                    opening = false;
                } else if closing {
                    closing = false;
                    opening = true;
                    scripts.push(std::mem::take(&mut current));
                } else {
                    current.changes.push(done.rows_affected());
                }
            }
            Step::Row(row) => {
                if row.first_column() == Some("grouped_write_end") {
                    closing = true;
                } else {
                    current.rows.push(row);
                }
            }
        }
    }
    let inside = failed.is_some() && !opening;
    (failed, inside)
}

/// Splits writes into chunks of the same statements, each a power of two long (so that each
/// chunk's text is one the connection has prepared before), the first writes last (the
/// writer pops them).
fn chunks(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut kinds: Vec<Vec<Job>> = Vec::new();
    for job in jobs {
        match kinds.iter_mut().find(|k| k[0].body == job.body) {
            Some(kind) => kind.push(job),
            None => kinds.push(vec![job]),
        }
    }
    let mut chunks = Vec::new();
    for kind in kinds {
        let mut kind = kind.into_iter().peekable();
        while kind.peek().is_some() {
            let left = kind.len();
            let size = (1 << (usize::BITS - 1 - left.leading_zeros())).min(MAX_CHUNK);
            chunks.push(kind.by_ref().take(size).collect());
        }
    }
    chunks.reverse();
    chunks
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

/// `sqlx::Error` is not `Clone`: an error that answers several writes is told to each in
/// its own words.
fn clone_error(err: &sqlx::Error) -> sqlx::Error {
    match err {
        sqlx::Error::Database(db) => sqlx::Error::Protocol(db.message().to_owned()),
        other => sqlx::Error::Protocol(other.to_string()),
    }
}
