//! The order in which writers take SQLite's write lock.
//!
//! SQLite has one write lock per database. Writers that find it taken wait in SQLite's busy
//! handler, which sleeps 1, 2, 5, 10... up to 100 ms between tries: under a steady stream of
//! writes (a flood of inbound calls, each recorded at its start and its end) an unlucky writer
//! sleeps through hundreds of milliseconds while others take the lock, whoever it serves. The
//! writes that go through the gate wait in process instead, one at a time, and are handed the
//! lock as soon as the writer before them is done: an [`Lane::Urgent`] one (a call a client is
//! waiting on) before every [`Lane::Normal`] one, each lane first come, first served.
//!
//! The gate is taken before the connection, so that writers waiting their turn hold no pooled
//! connection the urgent one would need.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Which queue a writer waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Before any normal writer: a request whose client waits for the write.
    Urgent,
    /// The rest, in order of arrival.
    Normal,
}

#[derive(Default)]
pub(crate) struct WriteGate {
    state: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    held: bool,
    urgent: VecDeque<oneshot::Sender<()>>,
    normal: VecDeque<oneshot::Sender<()>>,
}

/// The turn to write; the next writer's comes when it is dropped.
pub(crate) struct WriteTurn<'a> {
    gate: &'a WriteGate,
}

impl Drop for WriteTurn<'_> {
    fn drop(&mut self) {
        self.gate.pass();
    }
}

/// A writer waiting for its turn. Given up (its future dropped) after its turn was handed to
/// it, it passes the turn on.
struct Queued<'a> {
    gate: &'a WriteGate,
    turn: oneshot::Receiver<()>,
    taken: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        self.turn.close();
        if self.turn.try_recv().is_ok() {
            self.gate.pass();
        }
    }
}

impl WriteGate {
    /// Waits for this writer's turn in `lane`.
    pub(crate) async fn enter(&self, lane: Lane) -> WriteTurn<'_> {
        let mut queued = {
            let mut waiting = self.lock();
            if !waiting.held {
                waiting.held = true;
                return WriteTurn { gate: self };
            }
            let (give, turn) = oneshot::channel();
            match lane {
                Lane::Urgent => waiting.urgent.push_back(give),
                Lane::Normal => waiting.normal.push_back(give),
            }
            Queued {
                gate: self,
                turn,
                taken: false,
            }
        };
        // A sender is dropped unsent only once its receiver is gone, so this is the turn.
        let _ = (&mut queued.turn).await;
        queued.taken = true;
        WriteTurn { gate: self }
    }

    /// Hands the turn to the next writer still waiting, urgent ones first, or frees the gate.
    fn pass(&self) {
        let mut waiting = self.lock();
        loop {
            let next = match waiting.urgent.pop_front() {
                Some(next) => next,
                None => match waiting.normal.pop_front() {
                    Some(next) => next,
                    None => {
                        waiting.held = false;
                        return;
                    }
                },
            };
            // A writer that gave up before its turn came is skipped.
            if next.send(()).is_ok() {
                return;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // The state is consistent between statements: a panic elsewhere cannot leave it half
        // changed, so a poisoned lock is used as it is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    #[tokio::test]
    async fn urgent_writers_go_before_waiting_normal_ones_and_each_lane_in_order() {
        let gate = Arc::new(WriteGate::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = gate.enter(Lane::Normal).await;
        let mut waiters = Vec::new();
        for (name, lane) in [
            ("n1", Lane::Normal),
            ("n2", Lane::Normal),
            ("u1", Lane::Urgent),
            ("u2", Lane::Urgent),
        ] {
            let (gate, order) = (gate.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let _turn = gate.enter(lane).await;
                order.lock().unwrap().push(name);
                settle().await;
            }));
            settle().await;
        }
        drop(first);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["u1", "u2", "n1", "n2"]);
    }

    #[tokio::test]
    async fn a_writer_that_gives_up_never_keeps_the_turn() {
        let gate = Arc::new(WriteGate::default());
        let first = gate.enter(Lane::Normal).await;
        // One gives up while it waits, one after its turn was handed to it but before it ran.
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let _turn = gate.enter(Lane::Urgent).await;
            })
        };
        settle().await;
        waiting.abort();
        let _ = waiting.await;
        let handed = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let _turn = gate.enter(Lane::Normal).await;
                settle().await;
            })
        };
        settle().await;
        drop(first);
        handed.abort();
        let _ = handed.await;
        let after = tokio::time::timeout(Duration::from_secs(1), gate.enter(Lane::Normal)).await;
        assert!(after.is_ok(), "the turn was lost");
    }
}
