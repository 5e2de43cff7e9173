//! A turn sink for the agent's tests: it keeps each final turn and each turn under way with
//! when (in virtual milliseconds from the start) it was told.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::time::Instant;

use super::scripted::ms_since;
use crate::conversation::{Speaker, Turn, TurnSink};

/// A turn sink that keeps each turn with when it was told, and each turn under way.
#[derive(Debug)]
pub struct Told {
    start: Instant,
    pub turns: Mutex<Vec<(u32, Turn, u64)>>,
    pub speaking: Mutex<Vec<(Speaker, String, u64)>>,
}

impl Told {
    pub fn new() -> Arc<Told> {
        Arc::new(Told {
            start: Instant::now(),
            turns: Mutex::new(Vec::new()),
            speaking: Mutex::new(Vec::new()),
        })
    }

    pub fn turns(&self) -> Vec<(u32, Turn, u64)> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Each turn under way as it was told: who, what so far, when.
    pub fn speaking(&self) -> Vec<(Speaker, String, u64)> {
        self.speaking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait]
impl TurnSink for Told {
    fn final_turn(&self, number: u32, turn: &Turn) {
        let at = ms_since(self.start);
        self.turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((number, turn.clone(), at));
    }

    fn speaking(&self, role: Speaker, text: &str) {
        let at = ms_since(self.start);
        self.speaking
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((role, text.to_owned(), at));
    }

    async fn flush(&self) {}
}
