//! The latest turn of each call under way, for the dashboard's live page: every call's turn
//! sink passes through here on its way to the webhooks (if its agent wants `transcript.final`),
//! so a turn shows on an open live page as soon as it is final, and already while it is being
//! said (the agent's from each sentence's start, the caller's words as each utterance is
//! transcribed); the page's stream is woken at once instead of at its next read.
//!
//! Kept in memory only, one turn per call, and forgotten when the call ends (its sink is
//! flushed then).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use switchboard_actors::conversation::{Speaker, Turn, TurnSink};
use switchboard_actors::ids::CallId;

/// A call's latest turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestTurn {
    pub role: Speaker,
    pub text: String,
    /// Its number in the transcript, from 1 (a turn under way: the number it will have).
    pub number: u32,
    /// Being said now: not final yet.
    pub under_way: bool,
}

/// The latest turn of every call under way.
#[derive(Debug, Default)]
pub struct LiveTurns {
    turns: Mutex<HashMap<CallId, LatestTurn>>,
    changed: tokio::sync::Notify,
}

impl LiveTurns {
    /// The sink of call `call`: it keeps the call's latest turn here and hands every turn on
    /// to `next`.
    pub fn sink(
        self: &Arc<Self>,
        call: CallId,
        next: Option<Arc<dyn TurnSink>>,
    ) -> Arc<dyn TurnSink> {
        Arc::new(Sink {
            live: self.clone(),
            call,
            next,
        })
    }

    /// The latest turn of `call`, if it said anything yet.
    pub fn latest(&self, call: CallId) -> Option<LatestTurn> {
        self.lock().get(&call).cloned()
    }

    /// Resolves at the next change (a turn, or a call's end).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CallId, LatestTurn>> {
        self.turns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, call: CallId, turn: LatestTurn) {
        self.lock().insert(call, turn);
        self.changed.notify_waiters();
    }

    fn forget(&self, call: CallId) {
        self.lock().remove(&call);
        self.changed.notify_waiters();
    }
}

#[derive(Debug)]
struct Sink {
    live: Arc<LiveTurns>,
    call: CallId,
    next: Option<Arc<dyn TurnSink>>,
}

#[async_trait]
impl TurnSink for Sink {
    fn final_turn(&self, number: u32, turn: &Turn) {
        self.live.set(
            self.call,
            LatestTurn {
                role: turn.role,
                text: turn.text.clone(),
                number,
                under_way: false,
            },
        );
        if let Some(next) = &self.next {
            next.final_turn(number, turn);
        }
    }

    fn speaking(&self, role: Speaker, text: &str) {
        let number = match self.live.latest(self.call) {
            Some(t) if t.under_way && t.role == role => t.number,
            Some(t) => t.number + 1,
            None => 1,
        };
        self.live.set(
            self.call,
            LatestTurn {
                role,
                text: text.to_owned(),
                number,
                under_way: true,
            },
        );
        if let Some(next) = &self.next {
            next.speaking(role, text);
        }
    }

    async fn flush(&self) {
        if let Some(next) = &self.next {
            next.flush().await;
        }
        self.live.forget(self.call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: Speaker, text: &str) -> Turn {
        Turn {
            role,
            text: text.into(),
            start_ms: 0,
            end_ms: 100,
            interrupted: false,
            node: None,
            unheard: None,
            digits: None,
        }
    }

    #[tokio::test]
    async fn a_call_s_latest_turn_is_kept_until_it_ends_and_each_change_wakes_a_reader() {
        let live = Arc::new(LiveTurns::default());
        let call = CallId::new();
        let sink = live.sink(call, None);
        let woken = {
            let live = live.clone();
            tokio::spawn(async move { live.changed().await })
        };
        tokio::task::yield_now().await;
        sink.final_turn(1, &turn(Speaker::Agent, "Hello, how can I help?"));
        tokio::time::timeout(std::time::Duration::from_secs(1), woken)
            .await
            .expect("the reader was woken")
            .unwrap();
        sink.final_turn(2, &turn(Speaker::User, "I'd like a table."));
        assert_eq!(
            live.latest(call),
            Some(LatestTurn {
                role: Speaker::User,
                text: "I'd like a table.".into(),
                number: 2,
                under_way: false,
            })
        );
        // The agent's next turn shows while it is said, then as final.
        sink.speaking(Speaker::Agent, "For how many?");
        sink.speaking(Speaker::Agent, "For how many? And when?");
        let saying = live.latest(call).unwrap();
        assert_eq!(
            (
                saying.role,
                saying.text.as_str(),
                saying.number,
                saying.under_way
            ),
            (Speaker::Agent, "For how many? And when?", 3, true)
        );
        sink.final_turn(3, &turn(Speaker::Agent, "For how many? And when?"));
        assert!(!live.latest(call).unwrap().under_way);
        // The caller's words show as each utterance is heard, before their turn ends.
        sink.speaking(Speaker::User, "Four,");
        let heard = live.latest(call).unwrap();
        assert_eq!(
            (heard.role, heard.number, heard.under_way),
            (Speaker::User, 4, true)
        );
        sink.flush().await;
        assert_eq!(live.latest(call), None);
    }
}
