//! One call's audio: RTP in and out every 20 ms, decoding and encoding, voice activity
//! detection on the caller's side, and the stereo recording (caller left, other side right).
//! On request ([`MediaControl::detect_answering_machine`]), answering-machine detection runs on
//! the peer's decoded frames in the same loop and reports through the same events.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::net::UdpSocket;

use crate::amd::{AmdEvent, AmdSettings, AmdVerdict, BeepEvent};
use crate::dtmf::Digit;
use crate::sdp::Codec;
pub use crate::vad::{Vad, VadChange, VadSettings};

mod batch;
mod capture;
pub mod echo;
mod recorder;
mod session;
pub mod source;
#[cfg(test)]
mod tests;
pub mod workers;

use recorder::Recorder;
use session::Session;
use workers::{StreamControl, StreamHandle, Workers};

/// What happens on a call's media, as the agent needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaEvent {
    /// The caller started speaking.
    SpeechStarted,
    /// The caller stopped speaking.
    SpeechStopped,
    /// Everything queued with [`MediaHandle::play`] has been sent.
    PlayoutDone,
    /// Who answered, once answering-machine detection decides.
    Amd(AmdVerdict),
    /// The voicemail tone after a machine's greeting.
    Beep(BeepEvent),
    /// While listening ([`MediaControl::listen`]): the caller has paused mid-speech for the
    /// listening's `pause`; what they said so far (mono, at the codec's rate), for an early
    /// transcript. Once per pause.
    Pause(Arc<[i16]>),
    /// While listening: the caller spoke again after a [`MediaEvent::Pause`] (the VAD never
    /// heard them stop).
    Resumed,
    /// While listening: the caller's utterance, from just before their speech started to its
    /// end. It follows `SpeechStopped`, or comes alone when the utterance reached the
    /// listening's `max_secs` or was taken with [`MediaControl::take_utterance`] (the caller
    /// may still be speaking, and what follows makes the next one).
    Utterance(Arc<[i16]>),
    /// Audio queued with [`MediaControl::play_tagged`] has been sent in full.
    PlayedOut(u64),
    /// Audio queued with [`MediaControl::play_tagged`] was cut short by
    /// [`MediaControl::clear`] after `played` of its samples had been sent (0: it was next).
    Cut { tag: u64, played: usize },
    /// The caller pressed a key: an RFC 4733 event, or its tones heard in the audio (until
    /// the caller's first event, which says it sends digits as events).
    Digit(Digit),
    /// Every digit queued with [`MediaControl::send_digits`] has been sent.
    DigitsSent,
}

/// What [`MediaControl::listen`] captures of the caller's speech.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListenSettings {
    /// A silence this long inside an utterance (shorter than the VAD's stop) gives a
    /// [`MediaEvent::Pause`].
    pub pause_secs: f64,
    /// Audio kept from before the VAD decides speech has started (at least its start time).
    pub pre_roll_secs: f64,
    /// An utterance this long is handed over even while the caller goes on.
    pub max_secs: f64,
}

impl From<AmdEvent> for MediaEvent {
    fn from(event: AmdEvent) -> Self {
        match event {
            AmdEvent::Verdict(v) => MediaEvent::Amd(v),
            AmdEvent::Beep(b) => MediaEvent::Beep(b),
        }
    }
}

/// Figures for one call's media, once it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MediaStats {
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Packets the caller sent that never arrived (from the sequence numbers).
    pub packets_lost: u64,
    /// Packets that arrived too late or twice.
    pub packets_discarded: u64,
    /// Packets that were not RTP, or from another source, or of another payload type.
    pub packets_ignored: u64,
    /// Of those, the packets from an address the call did not negotiate (see [`source`]).
    pub packets_foreign: u64,
    /// Frames of the caller's audio that were only the agent's own echo (see [`echo`]).
    pub echo_frames: u64,
}

/// Figures every media session of a server adds to, for its metrics.
#[derive(Debug, Default)]
pub struct MediaCounters {
    /// RTP packets ignored because they came from an address no call negotiated.
    pub foreign_packets: AtomicU64,
}

/// How to run one call's media.
pub struct MediaConfig {
    pub codec: Codec,
    /// The payload type the peer gave the codec.
    pub payload_type: u8,
    /// The payload type of RFC 4733 `telephone-event`, when both sides take digits as events
    /// (else digits are heard and sent as tones).
    pub telephone_event: Option<u8>,
    /// Where the peer asked for audio (the signalled address, see [`source`]).
    pub remote: SocketAddr,
    /// Where to write the stereo WAV; none for no recording.
    pub recording: Option<PathBuf>,
    pub vad: VadSettings,
    /// Packets held back to reorder (each 20 ms).
    pub jitter_depth: usize,
    /// The server's figures, which the session adds to.
    pub counters: Arc<MediaCounters>,
}

/// What a running session is asked to do (see [`MediaControl`]).
pub(super) enum Command {
    /// Audio, its tag, and how many of the session's speech starts its sender had heard of
    /// (`None`: play it whatever the caller did).
    Play(Arc<[i16]>, u64, Option<u64>),
    Clear,
    Retarget(SocketAddr),
    DetectAnsweringMachine(AmdSettings),
    Listen(ListenSettings),
    TakeUtterance,
    DropUtterance,
    YieldToSpeech(bool),
    SendDigits(Vec<Digit>),
}

/// Where a session's events go.
pub type EventSink = Box<dyn Fn(MediaEvent) + Send + Sync>;

/// A cloneable way to steer a running session.
#[derive(Clone)]
pub struct MediaControl {
    commands: StreamControl<Session>,
}

impl MediaControl {
    /// Queues audio (mono, at the codec's sample rate) after what is already queued.
    pub fn play(&self, samples: Arc<[i16]>) {
        self.commands.send(Command::Play(samples, 0, None));
    }

    /// Queues audio like [`MediaControl::play`], and tells how it went: a
    /// [`MediaEvent::PlayedOut`] once it is sent in full, or a [`MediaEvent::Cut`] with how
    /// much of it was sent if a `clear` stops it. `tag` (not 0) names it in those events.
    pub fn play_tagged(&self, samples: Arc<[i16]>, tag: u64) {
        self.commands.send(Command::Play(samples, tag, None));
    }

    /// [`MediaControl::play_tagged`] from a sender that has been told of `starts_heard`
    /// [`MediaEvent::SpeechStarted`]s. If the session has since dropped its playout on the
    /// caller's speech ([`MediaControl::yield_to_speech`]), the audio was sent before its
    /// sender knew and is dropped too (a [`MediaEvent::Cut`] with nothing played): the rest of
    /// an interrupted reply, still arriving from speech synthesis, does not play over the
    /// caller while the agent catches up.
    pub fn play_heard(&self, samples: Arc<[i16]>, tag: u64, starts_heard: u64) {
        self.commands
            .send(Command::Play(samples, tag, Some(starts_heard)));
    }

    /// Captures the caller's speech from now on: [`MediaEvent::Pause`] and
    /// [`MediaEvent::Utterance`] follow their speech.
    pub fn listen(&self, settings: ListenSettings) {
        self.commands.send(Command::Listen(settings));
    }

    /// Hands over what the caller has said so far as an [`MediaEvent::Utterance`] (nothing if
    /// they have said nothing since the last one).
    pub fn take_utterance(&self) {
        self.commands.send(Command::TakeUtterance);
    }

    /// Forgets what the caller has said so far (its early transcript ended their turn): no
    /// [`MediaEvent::Utterance`] is made of it, nor of the silence that follows unless they
    /// speak again.
    pub fn drop_utterance(&self) {
        self.commands.send(Command::DropUtterance);
    }

    /// With `true`, the session drops what is queued to play itself, on the frame the VAD
    /// hears the caller start speaking (as [`MediaControl::clear`] would, with its
    /// [`MediaEvent::Cut`]), so the agent stops within that frame rather than after a round
    /// trip through its task. Off by default (a voicemail message must play to its end).
    pub fn yield_to_speech(&self, on: bool) {
        self.commands.send(Command::YieldToSpeech(on));
    }

    /// Sends keypad digits after those already queued: as RFC 4733 events when the peer takes
    /// them, else as tones; the agent's audio waits meanwhile. A
    /// [`MediaEvent::DigitsSent`] follows once all are out.
    pub fn send_digits(&self, digits: &[Digit]) {
        self.commands.send(Command::SendDigits(digits.to_vec()));
    }

    /// Drops whatever is still queued to play (the caller spoke over the agent).
    pub fn clear(&self) {
        self.commands.send(Command::Clear);
    }

    /// The peer's address from a new offer or answer (a re-INVITE, an UPDATE, the answer
    /// after early media): audio goes there from now on, and only it is heard. The same
    /// address again changes nothing.
    pub fn retarget(&self, remote: SocketAddr) {
        self.commands.send(Command::Retarget(remote));
    }

    /// Starts answering-machine detection on the peer's audio from the next frame on (an
    /// outbound call, right after the answer): a [`MediaEvent::Amd`] verdict follows, and on a
    /// machine the [`MediaEvent::Beep`]s of its voicemail tone. Sent again, it starts over.
    pub fn detect_answering_machine(&self, settings: AmdSettings) {
        self.commands
            .send(Command::DetectAnsweringMachine(settings));
    }
}

/// The control side of a running media session. Dropped without `finish` (its owner
/// failed), it stops the session too.
pub struct MediaHandle {
    control: MediaControl,
    session: StreamHandle<Session>,
    pub local: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("media socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("recording: {0}")]
    Recording(#[from] hound::Error),
    #[error("the media worker stopped abnormally")]
    Aborted,
}

impl MediaHandle {
    pub fn control(&self) -> MediaControl {
        self.control.clone()
    }

    /// Queues audio (mono, at the codec's sample rate) after what is already queued.
    pub fn play(&self, samples: Arc<[i16]>) {
        self.control.play(samples)
    }

    /// Drops whatever is still queued to play.
    pub fn clear(&self) {
        self.control.clear()
    }

    /// Stops the session, closes the recording and returns the figures.
    pub async fn finish(self) -> Result<MediaStats, MediaError> {
        self.session.finish().await.ok_or(MediaError::Aborted)?
    }
}

/// The media threads (0: one per core), set before the first call.
static THREADS: AtomicUsize = AtomicUsize::new(0);
static WORKERS: OnceLock<Workers<Session>> = OnceLock::new();

/// Sets how many threads carry the calls' media (0: one per core). It applies from the first
/// call on; later changes do nothing.
pub fn set_threads(threads: usize) {
    THREADS.store(threads, Ordering::Relaxed);
}

/// Each media worker's figures so far; none before the first call.
pub fn worker_figures() -> Vec<workers::WorkerFigures> {
    WORKERS.get().map(Workers::figures).unwrap_or_default()
}

/// The media workers, started with the first call.
fn workers() -> Result<&'static Workers<Session>, MediaError> {
    if let Some(w) = WORKERS.get() {
        return Ok(w);
    }
    let started = Workers::start("media", THREADS.load(Ordering::Relaxed))?;
    // Two first calls at once: the loser's threads end as its pool is dropped.
    Ok(WORKERS.get_or_init(|| started))
}

/// The turn to create a recording file.
static CREATING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// Starts a call's media on `socket`, on the media workers. Events go to `events`.
pub async fn start(
    socket: UdpSocket,
    config: MediaConfig,
    events: EventSink,
) -> Result<MediaHandle, MediaError> {
    let local = socket.local_addr()?;
    let recorder = match config.recording.clone() {
        // Creating a file takes from microseconds to milliseconds (a filesystem allocating
        // inodes among many just deleted): on a blocking thread, never the runtime's.
        // One at a time: files created at once in one directory queue on its lock anyway, and
        // a flood of calls waits here (counted among the calls being set up, which admission
        // caps) instead of spinning on that lock.
        Some(path) => {
            let rate = config.codec.sample_rate();
            let _turn = CREATING.acquire().await.map_err(|_| MediaError::Aborted)?;
            let created = tokio::task::spawn_blocking(move || Recorder::create(&path, rate));
            Some(created.await.map_err(|_| MediaError::Aborted)??)
        }
        None => None,
    };
    let socket = socket.into_std()?;
    socket.set_nonblocking(true)?;
    let mut session = Session::new(socket, config, recorder, events);
    session.begin();
    let session = workers()?.add(session);
    Ok(MediaHandle {
        control: MediaControl {
            commands: session.control(),
        },
        session,
        local,
    })
}

/// Converts mono 16-bit audio between sample rates by linear interpolation (enough for speech
/// prompts; the codecs band-limit the result anyway). Whole-number arithmetic: every sentence
/// an agent says passes through here.
pub fn resample(input: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || input.is_empty() || from == 0 || to == 0 {
        return input.to_vec();
    }
    let (from, to) = (u64::from(from), u64::from(to));
    let out_len = (input.len() as u64 * to / from) as usize;
    let last = input.len() - 1;
    let half = (to / 2) as i64;
    let mut out = Vec::with_capacity(out_len);
    for i in 0..out_len as u64 {
        // Output sample i sits at input position i * from / to: sample j, and `rem / to` of
        // the way to the next.
        let at = i * from;
        let (j, rem) = ((at / to) as usize, (at % to) as i64);
        let a = i64::from(input[j.min(last)]);
        let b = i64::from(input[(j + 1).min(last)]);
        // a + (b - a) * rem / to, rounded to the nearest.
        let step = ((b - a) * rem + half).div_euclid(to as i64);
        out.push((a + step) as i16);
    }
    out
}
