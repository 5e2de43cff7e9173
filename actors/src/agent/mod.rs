//! The agent on an answered call, for either direction and on any line.
//!
//! [`converse`] runs the agent until the call ends. It is small parts around one loop, each
//! owning its state (its fields are private to it; the session wires them):
//!
//! - the **line** ([`line::Line`]): what the agent does to and hears from the call (queue
//!   tagged audio or text, clear, hang up; media events in). A SIP call is one
//!   ([`line::SipLine`]); a text line ([`text::TextLine`]) carries turns as text, with no speech
//!   vendors;
//! - the **director** ([`director::Director`]): what the model is told and offered at each
//!   round, and what a function call does. A prompt agent ([`director::PromptAgent`]) is one.
//!   Each call runs its own copy of the plan's director and hands it back in [`AgentEnd`];
//! - the course ([`course::Course`]): the director, the steps waiting for the model's round,
//!   the dispatches and the transfer under way; its steps are done by [`steps`];
//! - turn-taking ([`listening::Listening`]): the caller's speech, the end of their turn, early
//!   transcripts, the quiet and still-there timers;
//! - the keypad ([`keypad::Keypad`]): the caller's keys gathered into an entry as the director
//!   says (a count, a terminator, a timeout), and the digits the agent sends ([`keys`]);
//! - the reply ([`reply::Reply`]): the utterance under way: the model's round being written,
//!   its sentences, their synthesis and playout, tool rounds, and what goes into the record of
//!   what was played;
//! - one handle per utterance ([`speech_handle::SpeechHandle`]): its id, what was queued and
//!   played, whether it was interrupted, its end. What comes back for an utterance carries
//!   its id; what comes back for one that is no longer current is dropped;
//! - the record ([`record::Record`]): the conversation, the model's context, the turns told;
//! - answering-machine handling ([`machine`]);
//! - the session ([`session`]): the loop, its timers and limits, and the call's end.
//!
//! On a call the agent runs as an actor linked to its call's actor ([`actor::AgentActor`]):
//! a failure inside it ends that call as interrupted and touches no other.
//!
//! Work the loop starts (a transcription, the model's reply, a synthesis, a tool) runs on its own
//! task and reports back as [`work::Work`]: the loop never waits on a vendor, so a hang-up, the
//! duration limit or a shutdown is seen at once whatever a vendor is doing.
//!
//! How the call started (an INVITE received, or one sent through a trunk) and how its start
//! and end are recorded belong to the callers: [`crate::inbound::run_call`] and the SIP dialer
//! ([`crate::sip_dialer`]).

pub mod actor;
mod caller;
mod course;
pub mod director;
mod end;
mod keypad;
mod keys;
pub mod line;
mod listening;
mod machine;
mod record;
mod reply;
mod saying;
mod session;
mod speech_handle;
mod steps;
pub mod text;
mod tools;
mod work;

#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod keypad_tests;
#[cfg(test)]
mod scripted;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod told;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_sip::amd::{AmdSettings, AnsweredBy};
use switchboard_sip::media::MediaStats;

use crate::call_tools::CallTools;
use crate::conversation::{Conversation, TurnSink};
use crate::vendors::{ChatModel, Transcriber};
use director::Director;
use switchboard_sip::media::ListenSettings;

pub use line::{Line, LineEvent, SipLine};
pub use session::converse;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SpeechError(pub String);

/// Text to speech.
#[async_trait]
pub trait Speech: Send + Sync + 'static {
    /// Mono 16-bit audio of `text` at `sample_rate`.
    async fn speak(
        &self,
        text: &str,
        voice: &str,
        language: &str,
        sample_rate: u32,
    ) -> Result<Arc<[i16]>, SpeechError>;
}

/// Why a conversation ended: one of the call's end reasons.
pub use crate::call::EndReason;

/// What an agent needs to converse: its vendors and its instructions. Without one (a prompt
/// agent with no speech to text configured) the agent greets and answers with
/// [`crate::turns::FALLBACK_LINE`].
#[derive(Clone)]
pub struct Mind {
    /// None: no chat model is configured. A flow whose steps need none still runs; when a
    /// step needs it, the agent says so and hangs up (`model_not_configured`).
    pub model: Option<Arc<dyn ChatModel>>,
    /// None: no speech to text is configured; a flow still runs on its keypad (the caller's
    /// speech goes on the record as unheard).
    pub transcriber: Option<Arc<dyn Transcriber>>,
    /// What the model is told and offered at each round, and what its functions do. Each
    /// call's agent runs a copy of it, as it is here, and hands that back at the end.
    pub director: Box<dyn Director>,
    /// What the service knows of the other party (the lead memory), given to the director.
    pub notes: Vec<String>,
    /// What the media captures of the caller's speech.
    pub listen: ListenSettings,
    /// After the caller stops, how much longer to wait when their words sound unfinished.
    pub unfinished_grace: Duration,
    /// A caller speaking this long without a pause has their turn ended for them.
    pub max_continuous_speech: Duration,
    /// The workspace's tools the model may call on this call, snapshotted when it started.
    pub tools: Option<Arc<dyn CallTools>>,
    /// Runs a flow's integration_call nodes.
    pub integrations: Option<Arc<dyn crate::call_tools::Integrations>>,
}

impl std::fmt::Debug for Mind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mind")
            .field("director", &self.director)
            .field("notes", &self.notes.len())
            .field("listen", &self.listen)
            .field("tools", &self.tools.as_ref().map(|t| t.specs().len()))
            .finish_non_exhaustive()
    }
}

/// Answering-machine detection on an outbound call.
#[derive(Debug, Clone)]
pub struct AmdPlan {
    pub settings: AmdSettings,
    /// Left after the beep when a machine answers; none: hang up at once.
    pub voicemail_message: Option<String>,
    /// The agent greets once the callee's first words end, while detection still decides; a
    /// machine verdict then cuts the greeting. Off: the greeting waits for the verdict.
    pub greet_early: bool,
}

/// How the agent runs a call.
#[derive(Debug, Clone)]
pub struct AgentPlan {
    pub greeting: String,
    pub agent_speaks_first: bool,
    pub voice: String,
    pub language: String,
    pub silence_timeout: Duration,
    /// The agent's cap on a call's length.
    pub max_duration: Duration,
    /// Answering-machine detection (outbound calls whose agent has it on).
    pub amd: Option<AmdPlan>,
    /// What the agent converses with; none: it greets and answers with a fallback line.
    pub mind: Option<Mind>,
    /// Where each turn goes once final (when the agent's webhook wants `transcript.final`).
    pub turns: Option<Arc<dyn TurnSink>>,
}

/// How a conversation ended.
#[derive(Debug, Clone)]
pub struct AgentEnd {
    pub reason: EndReason,
    /// Connected time, whole seconds.
    pub duration_secs: i64,
    pub stats: MediaStats,
    /// Who answered, when answering-machine detection ran and decided.
    pub answered_by: Option<AnsweredBy>,
    /// The transcript and the tools run.
    pub conversation: Conversation,
    /// The call's director as the call left it (its course's path, position and values);
    /// none without a mind.
    pub director: Option<Box<dyn Director>>,
}
