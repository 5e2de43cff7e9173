//! The agent's reply: its sentences in order, their audio as it is synthesized, what the line
//! played of them, its tool rounds, and what goes into the transcript and the model's context
//! once it has been said (only what was played, when it was cut short).

use std::collections::{BTreeMap, HashMap, VecDeque};

use tokio::time::Instant;

use super::EndReason;
use super::line::Clip;
use super::record::Record;
use super::speech_handle::{SpeechHandle, SpeechId};
use super::work::Abort;
use crate::conversation::{Speaker, Turn};
use crate::turns::{MAX_TOOL_ROUNDS, words_heard};
use crate::vendors::{ChatMessage, ToolCall};

/// A sentence queued on the line.
struct Queued {
    tag: u64,
    text: String,
    len: usize,
    index: u32,
}

/// The agent's reply being written and spoken: a model's answer, or one of the agent's own
/// lines (a greeting, an apology), which is a reply written whole.
#[derive(Default)]
pub(super) struct Reply {
    /// The utterance: its id (what comes back for it carries it), its playout, its end.
    handle: SpeechHandle,
    /// The model's round being written for it (aborted when dropped).
    writer: Option<Abort>,
    /// Sentences received so far (their indexes are 0..sentences).
    sentences: u32,
    /// The next sentence to queue for playing.
    next: u32,
    /// Synthesized sentences waiting for their turn (`None`: it could not be synthesized).
    ready: BTreeMap<u32, Option<Clip>>,
    /// Queued sentences, in order.
    queued: VecDeque<Queued>,
    /// When the first of them started playing.
    playing_since: Option<Instant>,
    /// What has been played of this reply.
    said: String,
    /// What has been played of the sentences from `round_start` on: the words of this reply
    /// the model's context has not had yet (earlier ones went in with their tool calls).
    said_round: String,
    /// The first sentence written after the last tool results.
    round_start: u32,
    /// What the model has written in this round: it goes into the context with the round's
    /// tool calls.
    written: String,
    /// The workspace's tools the model called in this round (dispatched, or answered at
    /// once when the model named no such tool).
    tool_calls: Vec<ToolCall>,
    /// Their results, by call id.
    results: HashMap<String, String>,
    /// Tools of this reply still running.
    tools_running: u32,
    /// Since when tools of this reply have been running.
    tools_since: Option<Instant>,
    /// The filler line has been said this turn.
    filler_said: bool,
    /// Model rounds that followed tool results.
    rounds: u32,
    /// The model has finished the reply (a line is finished from the start).
    complete: bool,
    /// The call ends once the reply is said, and why (the model asked to hang up, or the agent
    /// cannot go on).
    end_call: Option<EndReason>,
    /// The director's course took over mid-round: the model does not continue this reply.
    no_more_rounds: bool,
    /// The turn has been written down.
    done: bool,
    /// When its first audio started, in ms from the answer.
    started_ms: Option<u64>,
}

impl Reply {
    /// Whether the model may be offered tools again in this reply.
    pub fn may_offer_tools(&self) -> bool {
        self.rounds < MAX_TOOL_ROUNDS
    }

    /// The call ends once this reply is said, for `reason`.
    pub fn hang_up_after(&mut self, reason: EndReason) {
        self.end_call = Some(reason);
    }

    /// Whether the call ends once this reply is said, and why.
    pub fn hangs_up(&self) -> Option<EndReason> {
        self.end_call
    }

    /// A tool the model called was dispatched for this reply.
    pub fn tool_dispatched(&mut self, call: ToolCall) {
        self.tool_calls.push(call);
        self.tools_running += 1;
        self.tools_since.get_or_insert_with(Instant::now);
    }

    /// A tool dispatched for this reply came back with `content`.
    pub fn tool_returned(&mut self, call_id: String, content: String) {
        self.tools_running = self.tools_running.saturating_sub(1);
        if self.tools_running == 0 {
            self.tools_since = None;
        }
        self.results.insert(call_id, content);
    }

    /// A function the model called was answered at once with `content`.
    pub fn answered(&mut self, call: ToolCall, content: String) {
        self.results.insert(call.id.clone(), content);
        self.tool_calls.push(call);
    }

    /// The director's course took over: the model does not continue this reply.
    pub fn no_more_rounds(&mut self) {
        self.no_more_rounds = true;
    }

    /// Tools of this reply are still running.
    pub fn tools_pending(&self) -> bool {
        self.tools_running > 0
    }

    /// Since when tools of this reply have been running.
    pub fn tools_since(&self) -> Option<Instant> {
        self.tools_since
    }

    /// The filler line has been said for this reply's tools.
    pub fn filler_said(&mut self) {
        self.filler_said = true;
    }

    /// The model wrote `text` (a sentence) in this round.
    pub fn written(&mut self, text: &str) {
        append(&mut self.written, text);
    }

    /// The model's round is over (or failed): whether it had written any sentence.
    pub fn round_over(&mut self) -> bool {
        self.complete = true;
        self.sentences > 0
    }

    /// The model speaks again in this reply: it is not complete.
    pub fn reopen(&mut self) {
        self.complete = false;
    }

    /// One of the agent's own lines, written whole.
    pub fn line() -> Reply {
        Reply {
            complete: true,
            ..Reply::default()
        }
    }

    /// Whether it has a sentence or a tool under way and has not been written down yet (a
    /// model's round still being written is [`Reply::writing`]).
    pub fn in_progress(&self) -> bool {
        !self.done && (self.sentences > 0 || self.tools_running > 0)
    }

    /// Whether something of it is queued on the line.
    pub fn playing(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Its utterance's id.
    pub fn id(&self) -> SpeechId {
        self.handle.id()
    }

    /// Whether what came back for `id` is still wanted.
    pub fn is_current(&self, id: SpeechId) -> bool {
        self.handle.is_current(id)
    }

    /// Whether it takes more sentences: under way (or being written) and not interrupted.
    pub fn is_open(&self) -> bool {
        (self.in_progress() || self.writing()) && !self.handle.interrupted()
    }

    /// Whether the model's round is being written for it.
    pub fn writing(&self) -> bool {
        self.writer.is_some()
    }

    /// The model's round now written for it (`None`: none; one under way is aborted).
    pub fn write(&mut self, round: Option<Abort>) {
        self.writer = round;
    }

    /// Whether something of it is on the line (until the line says it is idle).
    pub fn sounding(&self) -> bool {
        self.handle.sounding()
    }

    /// Whether any of its sentences reached the line.
    pub fn queued_any(&self) -> bool {
        self.handle.queued_sentences() > 0
    }

    /// The line has played all it had.
    pub fn line_idle(&mut self) {
        self.handle.line_idle();
    }

    /// Cuts it short: what comes back for it from now on is stale.
    pub fn interrupt(&mut self) {
        self.writer = None;
        if self.handle.interrupt() {
            let handle = &self.handle;
            tracing::debug!(
                queued = handle.queued_sentences(),
                played = handle.played_sentences(),
                played_ms = handle.played_ms(),
                "the agent's utterance was interrupted"
            );
        }
    }

    /// The turn as it is being said: what was played of it, then what is playing or queued.
    pub fn under_way(&self) -> String {
        let mut text = self.said.clone();
        for q in &self.queued {
            append(&mut text, &q.text);
        }
        text
    }

    /// Takes a new sentence; its index.
    pub fn add_sentence(&mut self) -> u32 {
        self.sentences += 1;
        self.sentences - 1
    }

    /// Sentence `index` is ready (`None`: it has no audio); the sentences now due to play, in
    /// order, with their tags. `now_ms` starts the turn's clock at its first.
    pub fn ready(&mut self, index: u32, clip: Option<Clip>, now_ms: u64) -> Vec<(Clip, u64)> {
        self.ready.insert(index, clip);
        let mut due = Vec::new();
        while let Some(clip) = self.ready.remove(&self.next) {
            let index = self.next;
            self.next += 1;
            let Some(clip) = clip else { continue };
            let tag = self.handle.tag(index);
            if self.queued.is_empty() {
                self.playing_since = Some(Instant::now());
            }
            self.handle.queued(Instant::now());
            self.queued.push_back(Queued {
                tag,
                text: clip.text.clone(),
                len: clip.len(),
                index,
            });
            self.started_ms.get_or_insert(now_ms);
            due.push((clip, tag));
        }
        due
    }

    /// Takes sentence `tag` off the queue.
    fn dequeue(&mut self, tag: u64) -> Option<Queued> {
        let at = self.queued.iter().position(|q| q.tag == tag)?;
        self.queued.remove(at)
    }

    /// The line played `tag` in full; the next sentence starts now.
    pub fn played_out(&mut self, tag: u64) {
        if let Some(done) = self.dequeue(tag) {
            self.handle.played(Instant::now());
            self.played(&done.text, done.index);
            self.playing_since = Some(Instant::now());
        }
    }

    /// The line cut `tag` after `played` of it; nothing after it plays.
    pub fn cut(&mut self, tag: u64, played: usize) {
        if let Some(cut) = self.dequeue(tag) {
            self.handle.cut(Instant::now());
            self.played(&words_heard(&cut.text, played, cut.len), cut.index);
        }
        self.queued.clear();
    }

    /// The call ended while a sentence played: its words up to now count as played, from
    /// when it started at `rate` samples a second (a text line's sentences arrive whole).
    pub fn hung_up(&mut self, rate: Option<u32>) {
        let (Some(front), Some(since)) = (self.queued.front(), self.playing_since) else {
            return;
        };
        let played = match rate {
            Some(rate) => (since.elapsed().as_millis() as u64 * u64::from(rate) / 1000) as usize,
            None => front.len,
        };
        self.cut(front.tag, played);
    }

    /// `text` of sentence `index` has been played (all of it, or the words heard before a
    /// cut).
    fn played(&mut self, text: &str, index: u32) {
        append(&mut self.said, text);
        if index >= self.round_start {
            append(&mut self.said_round, text);
        }
    }

    /// Whether a tool still running, with everything before it said, calls for the filler.
    pub fn filler_due(&self) -> bool {
        self.tools_running > 0
            && !self.filler_said
            && self.queued.is_empty()
            && self.next == self.sentences
    }

    /// Ends the turn once the model has finished and every sentence has been played (or could
    /// not be synthesized); `true` if it has ended now.
    pub fn said(&mut self, record: &mut Record, now_ms: u64) -> bool {
        if !self.complete
            || !self.queued.is_empty()
            || self.next < self.sentences
            || self.done
            || self.tools_running > 0
            || !self.tool_calls.is_empty()
        {
            return false;
        }
        self.done = true;
        self.handle.finish();
        self.finish(record, now_ms, false);
        true
    }

    /// Ends the agent's turn: what was played goes into the transcript and the model's context
    /// (only that, when it was interrupted), and the reply is cleared.
    pub fn finish(&mut self, record: &mut Record, now_ms: u64, interrupted: bool) {
        let said = std::mem::take(&mut self.said);
        let said_round = std::mem::take(&mut self.said_round);
        let started = self.started_ms.take();
        self.queued.clear();
        if interrupted {
            self.done = true;
            self.interrupt();
        }
        if said.is_empty() {
            return;
        }
        record.turn(Turn {
            role: Speaker::Agent,
            text: said,
            start_ms: started.unwrap_or(now_ms),
            end_ms: now_ms,
            interrupted,
            node: None,
            unheard: None,
            digits: None,
        });
        if said_round.is_empty() {
            return;
        }
        record.context(ChatMessage::Assistant {
            text: Some(if interrupted {
                format!("{said_round} [interrupted]")
            } else {
                said_round
            }),
            tool_calls: vec![],
        });
    }

    /// The tool calls of a reply cut short go into the context with the results already in
    /// (the others follow when they answer).
    pub fn flush_tools(&mut self, record: &mut Record) {
        let calls = std::mem::take(&mut self.tool_calls);
        let answered: Vec<ToolCall> = calls
            .into_iter()
            .filter(|c| self.results.contains_key(&c.id))
            .collect();
        self.tools_running = 0;
        self.tools_since = None;
        if answered.is_empty() {
            return;
        }
        record.context(ChatMessage::Assistant {
            text: None,
            tool_calls: answered.clone(),
        });
        for call in answered {
            if let Some(content) = self.results.remove(&call.id) {
                record.context(ChatMessage::Tool {
                    tool_call_id: call.id,
                    content,
                });
            }
        }
    }

    /// Once the model has finished a round and every tool it called has answered: the round's
    /// text, calls and results go into the context; `true` if the model is to continue the
    /// reply with them (it did not also hang up).
    pub fn round_done(&mut self, record: &mut Record) -> bool {
        if !self.complete || self.tools_running > 0 || self.tool_calls.is_empty() {
            return false;
        }
        let text = std::mem::take(&mut self.written);
        let calls = std::mem::take(&mut self.tool_calls);
        record.context(ChatMessage::Assistant {
            text: (!text.trim().is_empty()).then_some(text),
            tool_calls: calls.clone(),
        });
        for call in calls {
            let content = self.results.remove(&call.id).unwrap_or_default();
            record.context(ChatMessage::Tool {
                tool_call_id: call.id,
                content,
            });
        }
        // After its last round with tools the model has had its say: a model that keeps
        // calling functions it is not offered does not loop.
        if self.end_call.is_some() || self.no_more_rounds || self.rounds > MAX_TOOL_ROUNDS {
            return false;
        }
        self.rounds += 1;
        self.complete = false;
        self.round_start = self.sentences;
        self.said_round.clear();
        true
    }
}

/// `text` after `said`, a space between.
pub(super) fn append(said: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !said.is_empty() {
        said.push(' ');
    }
    said.push_str(text);
}
