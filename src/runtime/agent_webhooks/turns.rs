//! `transcript.final`: each turn of a call's transcript, raised as it becomes final.
//!
//! The call actor hands turns to a [`TurnEvents`] without waiting; one task per call writes
//! them to the outbox in order, and the actor flushes it before the call's end is recorded,
//! so a call's turns come before its `call.ended`. Made only for agents whose webhook wants
//! the kind.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_actors::conversation::{Turn, TurnSink};
use switchboard_actors::events::{EventData, EventKind, TranscriptFinal};
use switchboard_actors::ids::CallId;
use tokio::sync::{mpsc, oneshot};

use crate::store::{Agent, Store};

/// Attempts at writing one turn's event before it is given up (logged).
const ATTEMPTS: u32 = 3;

#[derive(Debug)]
enum Message {
    Turn {
        number: u32,
        turn: Turn,
        at: DateTime<Utc>,
    },
    Flush(oneshot::Sender<()>),
}

/// The `transcript.final` events of one call.
#[derive(Debug)]
pub struct TurnEvents {
    tx: mpsc::UnboundedSender<Message>,
}

impl TurnEvents {
    /// The sink for call `call` of `agent`, if its webhook wants `transcript.final`.
    pub fn for_call(store: &Store, call: CallId, agent: &Agent) -> Option<Arc<dyn TurnSink>> {
        let wanted = agent.webhook_url.is_some()
            && agent
                .webhook_events
                .iter()
                .any(|k| k == EventKind::TranscriptFinal.as_str());
        if !wanted {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write(store.clone(), call, rx));
        Some(Arc::new(TurnEvents { tx }))
    }
}

#[async_trait]
impl TurnSink for TurnEvents {
    fn final_turn(&self, number: u32, turn: &Turn) {
        let _ = self.tx.send(Message::Turn {
            number,
            turn: turn.clone(),
            at: Utc::now(),
        });
    }

    async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.tx.send(Message::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }
}

/// The event of turn `number`, final at `at`.
fn event(number: u32, turn: Turn, at: DateTime<Utc>) -> EventData {
    let lasted = chrono::Duration::milliseconds(turn.end_ms.saturating_sub(turn.start_ms) as i64);
    EventData::TranscriptFinal(TranscriptFinal {
        role: turn.role,
        text: turn.text,
        turn: number,
        started_at: at - lasted,
        ended_at: at,
        interrupted: turn.interrupted,
    })
}

/// Writes the call's turns in order until its sink is dropped.
async fn write(store: Store, call: CallId, mut rx: mpsc::UnboundedReceiver<Message>) {
    while let Some(message) = rx.recv().await {
        match message {
            Message::Flush(done) => {
                let _ = done.send(());
            }
            Message::Turn { number, turn, at } => {
                let data = event(number, turn, at);
                for attempt in 1..=ATTEMPTS {
                    match store.enqueue_call_event(call, &data).await {
                        Ok(_) => break,
                        Err(error) if attempt == ATTEMPTS => {
                            tracing::warn!(%call, turn = number, %error, "a transcript.final event could not be written");
                        }
                        Err(_) => {
                            tokio::time::sleep(std::time::Duration::from_millis(
                                50 * u64::from(attempt),
                            ))
                            .await;
                        }
                    }
                }
            }
        }
    }
}
