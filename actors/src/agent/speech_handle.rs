//! One utterance of the agent (a model's reply, or one of its own lines): its id, what was
//! queued on the line and what was played of it, whether it was interrupted, and its end,
//! which can be awaited.
//!
//! Work started for an utterance (the model's round, a sentence's synthesis, a tool's run,
//! the line's playout marks) carries its [`SpeechId`]; the session drops a result whose
//! utterance is no longer the current one, or was interrupted.
//!
//! ```text
//!   new ──queued──► on the line ──line idle──► quiet ──finish──► done
//!    │                  │                                         ▲
//!    └──────────────────┴────────────── interrupt ────────────────┘ (interrupted)
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;
use tokio::time::Instant;

/// An utterance's id: unique in the process, so a result of one utterance never passes for
/// another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct SpeechId(u64);

/// The next utterance's id.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The sentences of an utterance are numbered below this in its playout marks.
const SENTENCES_PER_TAG: u64 = 1 << 20;

/// One utterance of the agent, from its first sentence to its end.
#[derive(Debug)]
pub(super) struct SpeechHandle {
    id: SpeechId,
    /// Sentences handed to the line.
    queued: u32,
    /// Sentences the line played in full.
    played: u32,
    /// When its first sentence was queued, and when the line last reported one played or cut.
    started: Option<Instant>,
    played_until: Option<Instant>,
    /// The line cut one of its sentences short (and dropped those after it).
    cut: bool,
    /// Something of it is on the line: queued, and the line has not yet said it is idle.
    on_line: bool,
    interrupted: bool,
    /// Its end (said in full, or interrupted), for whoever awaits it.
    done: watch::Sender<bool>,
}

impl Default for SpeechHandle {
    fn default() -> Self {
        SpeechHandle::new()
    }
}

impl SpeechHandle {
    /// A new utterance, with an id of its own.
    pub fn new() -> SpeechHandle {
        SpeechHandle {
            id: SpeechId(NEXT_ID.fetch_add(1, Ordering::Relaxed)),
            queued: 0,
            played: 0,
            started: None,
            played_until: None,
            cut: false,
            on_line: false,
            interrupted: false,
            done: watch::Sender::new(false),
        }
    }

    pub fn id(&self) -> SpeechId {
        self.id
    }

    /// Whether a result of `id` is still wanted: it is this utterance's, and this one was not
    /// interrupted.
    pub fn is_current(&self, id: SpeechId) -> bool {
        self.id == id && !self.interrupted
    }

    /// The playout mark of sentence `index`: the line reports it played out or cut by it.
    pub fn tag(&self, index: u32) -> u64 {
        self.id.0 * SENTENCES_PER_TAG + u64::from(index) + 1
    }

    /// A sentence was handed to the line.
    pub fn queued(&mut self, now: Instant) {
        self.queued += 1;
        self.on_line = true;
        self.started.get_or_insert(now);
    }

    /// The line played one of its sentences in full.
    pub fn played(&mut self, now: Instant) {
        self.played += 1;
        self.played_until = Some(now);
    }

    /// The line cut one of its sentences short; nothing of it plays after.
    pub fn cut(&mut self, now: Instant) {
        self.cut = true;
        self.played_until = Some(now);
    }

    /// The line has played all it had: the utterance is quiet once all it queued has been
    /// played (or cut).
    pub fn line_idle(&mut self) {
        if self.cut || self.played >= self.queued {
            self.on_line = false;
        }
    }

    /// It was said in full.
    pub fn finish(&mut self) {
        self.done.send_replace(true);
    }

    /// Cuts it short: whatever comes back for it from now on is dropped. `true` if it was
    /// still under way.
    pub fn interrupt(&mut self) -> bool {
        let under_way = !self.is_done();
        if under_way {
            self.interrupted = true;
        }
        self.done.send_replace(true);
        under_way
    }

    /// Whether something of it is on the line.
    pub fn sounding(&self) -> bool {
        self.on_line
    }

    /// Whether it has ended (said in full, or interrupted).
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// Sentences handed to the line so far.
    pub fn queued_sentences(&self) -> u32 {
        self.queued
    }

    /// Sentences played in full so far.
    pub fn played_sentences(&self) -> u32 {
        self.played
    }

    /// How long it has played, from its first sentence to the last one played or cut.
    pub fn played_ms(&self) -> u64 {
        match (self.started, self.played_until) {
            (Some(from), Some(to)) => to.saturating_duration_since(from).as_millis() as u64,
            _ => 0,
        }
    }

    /// Resolves once it has ended (or was dropped unfinished: nobody will end it then). The
    /// session's loop polls [`SpeechHandle::is_done`] instead: it never awaits one part.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "for whoever holds the handle and waits")
    )]
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut done = self.done.subscribe();
        async move {
            let _ = done.wait_for(|done| *done).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test(start_paused = true)]
    async fn an_utterance_played_out_is_done_and_quiet_once_the_line_is_idle() {
        let mut speech = SpeechHandle::new();
        speech.queued(at(0));
        speech.queued(at(0));
        speech.played(at(800));
        speech.line_idle();
        assert!(speech.sounding(), "a sentence is still queued");
        speech.played(at(1500));
        speech.line_idle();
        speech.finish();
        assert!(!speech.sounding() && speech.is_done() && !speech.interrupted());
        assert_eq!(
            (speech.queued_sentences(), speech.played_sentences()),
            (2, 2)
        );
        assert_eq!(speech.played_ms(), 1500);
        // Interrupting it after it has ended changes nothing.
        assert!(!speech.interrupt());
        assert!(!speech.interrupted() && speech.is_current(speech.id()));
    }

    #[tokio::test(start_paused = true)]
    async fn interrupting_before_the_playout_ends_makes_its_results_stale() {
        let mut speech = SpeechHandle::new();
        let id = speech.id();
        speech.queued(at(0));
        assert!(speech.is_current(id));
        assert!(speech.interrupt());
        assert!(speech.interrupted() && speech.is_done() && !speech.is_current(id));
        // What was queued stays on the line until the line reports the cut.
        assert!(speech.sounding());
        speech.cut(at(300));
        speech.line_idle();
        assert!(!speech.sounding());
        assert_eq!((speech.played_sentences(), speech.played_ms()), (0, 300));
    }

    #[test]
    fn a_result_of_another_utterance_is_never_current() {
        let (old, new) = (SpeechHandle::new(), SpeechHandle::new());
        assert!(!new.is_current(old.id()));
        assert_ne!(old.tag(0), new.tag(0));
        assert_ne!(new.tag(0), new.tag(1));
    }

    #[tokio::test(start_paused = true)]
    async fn an_utterance_can_be_awaited_to_its_end() {
        let mut speech = SpeechHandle::new();
        let done = tokio::spawn(speech.wait());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!done.is_finished());
        speech.finish();
        done.await.expect("the waiter ends");
        // Dropped unfinished: its waiters are let go.
        let dropped = SpeechHandle::new();
        let waiting = dropped.wait();
        drop(dropped);
        waiting.await;
        // Interrupted: the same.
        let mut cut = SpeechHandle::new();
        let waiting = cut.wait();
        cut.interrupt();
        waiting.await;
    }
}
