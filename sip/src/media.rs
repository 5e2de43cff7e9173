//! One call's audio: RTP in and out every 20 ms, decoding and encoding, voice activity
//! detection on the caller's side, and the stereo recording (caller left, other side right).
//! On request ([`MediaControl::detect_answering_machine`]), answering-machine detection runs on
//! the peer's decoded frames in the same loop and reports through the same events.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use audio_codec::{Decoder, Encoder};
use rtp_rs::{RtpPacketBuilder, RtpReader, Seq};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::amd::{AmdEvent, AmdSettings, AmdVerdict, AnsweringMachineDetector, BeepEvent};
use crate::rtp::{JitterBuffer, LossCounter, Slot};
use crate::sdp::Codec;
pub use crate::vad::{Vad, VadChange, VadSettings};

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
}

/// How to run one call's media.
pub struct MediaConfig {
    pub codec: Codec,
    /// The payload type the peer gave the codec.
    pub payload_type: u8,
    /// Where the peer asked for audio.
    pub remote: SocketAddr,
    /// Where to write the stereo WAV; none for no recording.
    pub recording: Option<PathBuf>,
    pub vad: VadSettings,
    /// Packets held back to reorder (each 20 ms).
    pub jitter_depth: usize,
}

enum Command {
    Play(Arc<[i16]>, u64),
    Clear,
    Retarget(SocketAddr),
    DetectAnsweringMachine(AmdSettings),
    Listen(ListenSettings),
    TakeUtterance,
    DropUtterance,
    YieldToSpeech(bool),
}

/// Where a session's events go.
pub type EventSink = Box<dyn Fn(MediaEvent) + Send + Sync>;

/// A cloneable way to steer a running session.
#[derive(Clone)]
pub struct MediaControl {
    /// Commands travel boxed: a channel allocates room for 32 messages when it is made, and
    /// a call holds it for its whole life.
    commands: mpsc::UnboundedSender<Box<Command>>,
}

impl MediaControl {
    /// Queues audio (mono, at the codec's sample rate) after what is already queued.
    pub fn play(&self, samples: Arc<[i16]>) {
        let _ = self.commands.send(Box::new(Command::Play(samples, 0)));
    }

    /// Queues audio like [`MediaControl::play`], and tells how it went: a
    /// [`MediaEvent::PlayedOut`] once it is sent in full, or a [`MediaEvent::Cut`] with how
    /// much of it was sent if a `clear` stops it. `tag` (not 0) names it in those events.
    pub fn play_tagged(&self, samples: Arc<[i16]>, tag: u64) {
        let _ = self.commands.send(Box::new(Command::Play(samples, tag)));
    }

    /// Captures the caller's speech from now on: [`MediaEvent::Pause`] and
    /// [`MediaEvent::Utterance`] follow their speech.
    pub fn listen(&self, settings: ListenSettings) {
        let _ = self.commands.send(Box::new(Command::Listen(settings)));
    }

    /// Hands over what the caller has said so far as an [`MediaEvent::Utterance`] (nothing if
    /// they have said nothing since the last one).
    pub fn take_utterance(&self) {
        let _ = self.commands.send(Box::new(Command::TakeUtterance));
    }

    /// Forgets what the caller has said so far (its early transcript ended their turn): no
    /// [`MediaEvent::Utterance`] is made of it, nor of the silence that follows unless they
    /// speak again.
    pub fn drop_utterance(&self) {
        let _ = self.commands.send(Box::new(Command::DropUtterance));
    }

    /// With `true`, the session drops what is queued to play itself, on the frame the VAD
    /// hears the caller start speaking (as [`MediaControl::clear`] would, with its
    /// [`MediaEvent::Cut`]), so the agent stops within that frame rather than after a round
    /// trip through its task. Off by default (a voicemail message must play to its end).
    pub fn yield_to_speech(&self, on: bool) {
        let _ = self.commands.send(Box::new(Command::YieldToSpeech(on)));
    }

    /// Drops whatever is still queued to play (the caller spoke over the agent).
    pub fn clear(&self) {
        let _ = self.commands.send(Box::new(Command::Clear));
    }

    /// Sends audio somewhere else from now on (a re-INVITE moved the peer).
    pub fn retarget(&self, remote: SocketAddr) {
        let _ = self.commands.send(Box::new(Command::Retarget(remote)));
    }

    /// Starts answering-machine detection on the peer's audio from the next frame on (an
    /// outbound call, right after the answer): a [`MediaEvent::Amd`] verdict follows, and on a
    /// machine the [`MediaEvent::Beep`]s of its voicemail tone. Sent again, it starts over.
    pub fn detect_answering_machine(&self, settings: AmdSettings) {
        let _ = self
            .commands
            .send(Box::new(Command::DetectAnsweringMachine(settings)));
    }
}

/// The control side of a running media session.
pub struct MediaHandle {
    control: MediaControl,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<MediaStats, MediaError>>,
    /// A handle dropped without `finish` (its owner failed) stops the session too.
    _stop_on_drop: tokio_util::sync::DropGuard,
    pub local: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("media socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("recording: {0}")]
    Recording(#[from] hound::Error),
    #[error("the media task stopped abnormally")]
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
        self.stop.cancel();
        self.task.await.map_err(|_| MediaError::Aborted)?
    }
}

/// Starts a call's media on `socket`. Events go to `events`.
pub fn start(
    socket: UdpSocket,
    config: MediaConfig,
    events: EventSink,
) -> Result<MediaHandle, MediaError> {
    let local = socket.local_addr()?;
    let recorder = match &config.recording {
        Some(path) => Some(Recorder::create(path, config.codec.sample_rate())?),
        None => None,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let session = Session::new(socket, config, recorder, events, rx);
    let task = tokio::spawn(session.run(stop.clone()));
    Ok(MediaHandle {
        control: MediaControl { commands: tx },
        _stop_on_drop: stop.clone().drop_guard(),
        stop,
        task,
        local,
    })
}

/// Bytes of recording gathered before a write: 128 ms of 8 kHz stereo (64 ms at 16 kHz), so
/// about 8 writes a second per call, at half the default buffer's memory.
const RECORDING_BUFFER: usize = 4096;

/// The stereo WAV writer.
struct Recorder {
    writer: hound::WavWriter<BufWriter<File>>,
}

impl Recorder {
    fn create(path: &PathBuf, rate: u32) -> Result<Recorder, hound::Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let file = BufWriter::with_capacity(RECORDING_BUFFER, File::create(path)?);
        Ok(Recorder {
            writer: hound::WavWriter::new(file, spec)?,
        })
    }

    fn frame(&mut self, left: &[i16], right: &[i16]) -> Result<(), hound::Error> {
        let mut w = self.writer.get_i16_writer((left.len() * 2) as u32);
        for (l, r) in left.iter().zip(right) {
            w.write_sample(*l);
            w.write_sample(*r);
        }
        w.flush()
    }
}

struct Session {
    socket: UdpSocket,
    codec: Codec,
    payload_type: u8,
    remote: SocketAddr,
    latched: bool,
    recorder: Option<Recorder>,
    events: EventSink,
    commands: mpsc::UnboundedReceiver<Box<Command>>,
    encoder: Box<dyn Encoder>,
    decoder: Box<dyn Decoder>,
    jitter: JitterBuffer,
    loss: LossCounter,
    vad: Vad,
    /// Answering-machine detection while it listens; `None` otherwise (inbound calls, and
    /// once it is done), so a call without it pays one branch a frame.
    amd: Option<Box<AnsweringMachineDetector>>,
    /// Audio to send, with the tag it was queued with (0: untagged).
    playout: VecDeque<(Arc<[i16]>, u64)>,
    play_offset: usize,
    /// The caller's speech being captured, when listening; `None` otherwise.
    capture: Option<Box<Capture>>,
    /// Playout stops by itself when the caller starts speaking.
    yield_to_speech: bool,
    playing: bool,
    ssrc: u32,
    seq: u16,
    timestamp: u32,
    stats: MediaStats,
}

impl Session {
    fn new(
        socket: UdpSocket,
        config: MediaConfig,
        recorder: Option<Recorder>,
        events: EventSink,
        commands: mpsc::UnboundedReceiver<Box<Command>>,
    ) -> Session {
        Session {
            socket,
            codec: config.codec,
            payload_type: config.payload_type,
            remote: config.remote,
            latched: false,
            recorder,
            events,
            commands,
            encoder: audio_codec::create_encoder(config.codec.codec_type()),
            decoder: audio_codec::create_decoder(config.codec.codec_type()),
            jitter: JitterBuffer::new(config.jitter_depth),
            loss: LossCounter::default(),
            vad: Vad::new(config.vad),
            amd: None,
            playout: VecDeque::new(),
            play_offset: 0,
            capture: None,
            yield_to_speech: false,
            playing: false,
            ssrc: rand::random(),
            seq: rand::random(),
            timestamp: rand::random(),
            stats: MediaStats::default(),
        }
    }

    async fn run(mut self, stop: CancellationToken) -> Result<MediaStats, MediaError> {
        let mut tick = tokio::time::interval_at(Instant::now(), Duration::from_millis(20));
        tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let mut buf = vec![0u8; 2048];
        let n = self.codec.frame_samples();
        let mut caller = vec![0i16; n];
        let mut agent = vec![0i16; n];
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                Some(cmd) = self.commands.recv() => self.command(*cmd),
                received = self.socket.recv_from(&mut buf) => {
                    match received {
                        Ok((len, from)) => self.receive(&buf[..len], from),
                        // ICMP port unreachable and the like surface here on some systems;
                        // the peer may come back, so keep going.
                        Err(_) => continue,
                    }
                }
                _ = tick.tick() => {
                    self.frame(&mut caller, &mut agent).await?;
                }
            }
        }
        if let Some(rec) = self.recorder.take() {
            rec.writer.finalize()?;
        }
        self.stats.packets_received = self.loss.received;
        self.stats.packets_lost = self.loss.lost();
        self.stats.packets_discarded = self.jitter.discarded;
        Ok(self.stats)
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Play(samples, tag) => {
                if !samples.is_empty() {
                    self.playout.push_back((samples, tag));
                    self.playing = true;
                }
            }
            Command::Clear => self.clear_playout(),
            Command::YieldToSpeech(on) => self.yield_to_speech = on,
            Command::Listen(settings) => {
                self.capture = Some(Box::new(Capture::new(settings, self.codec.sample_rate())));
            }
            Command::TakeUtterance => {
                if let Some(capture) = self.capture.as_mut()
                    && let Some(audio) = capture.take()
                {
                    (self.events)(MediaEvent::Utterance(audio));
                }
            }
            Command::DropUtterance => {
                if let Some(capture) = self.capture.as_mut() {
                    capture.utterance.clear();
                    capture.dropped = capture.capturing;
                }
            }
            Command::Retarget(addr) => {
                self.remote = addr;
                self.latched = false;
            }
            Command::DetectAnsweringMachine(settings) => {
                self.amd = Some(Box::new(AnsweringMachineDetector::new(
                    settings,
                    self.codec.sample_rate(),
                )));
            }
        }
    }

    fn receive(&mut self, packet: &[u8], from: SocketAddr) {
        let Ok(rtp) = RtpReader::new(packet) else {
            self.stats.packets_ignored += 1;
            return;
        };
        // Symmetric RTP: the first packet fixes where we send from then on, which gets through
        // NATs (and peers whose SDP names another of their addresses). Packets from anywhere
        // else after that are ignored.
        if from != self.remote {
            if !self.latched {
                self.remote = from;
            } else {
                self.stats.packets_ignored += 1;
                return;
            }
        }
        self.latched = true;
        if rtp.payload_type() != self.payload_type {
            self.stats.packets_ignored += 1;
            return;
        }
        let seq = u16::from(rtp.sequence_number());
        self.loss.record(seq);
        self.jitter.push(seq, rtp.payload().to_vec());
    }

    async fn frame(&mut self, caller: &mut [i16], agent: &mut [i16]) -> Result<(), MediaError> {
        // The caller's side.
        caller.fill(0);
        if let Slot::Packet(payload) = self.jitter.pop() {
            let _ = self.decoder.decode_into(&payload, caller);
        }
        let change = self.vad.feed(caller);
        if change == Some(VadChange::Started) && self.yield_to_speech && !self.playout.is_empty() {
            // The caller speaks over the agent: this frame already goes out silent.
            self.clear_playout();
        }
        if let Some(change) = change {
            (self.events)(match change {
                VadChange::Started => MediaEvent::SpeechStarted,
                VadChange::Stopped => MediaEvent::SpeechStopped,
            });
        }
        if let Some(capture) = self.capture.as_mut() {
            capture.feed(caller, change, self.vad.silence_secs(), &self.events);
        }
        if let Some(amd) = self.amd.as_mut() {
            amd.feed(caller, |e| (self.events)(e.into()));
            if amd.finished() {
                self.amd = None;
            }
        }
        // The agent's side.
        self.fill_agent(agent);
        let mut payload = [0u8; 400];
        let len = self.encoder.encode_into(agent, &mut payload).unwrap_or(0);
        if len > 0 {
            let packet = RtpPacketBuilder::new()
                .payload_type(self.payload_type)
                .ssrc(self.ssrc)
                .sequence(Seq::from(self.seq))
                .timestamp(self.timestamp)
                .marked(self.stats.packets_sent == 0)
                .payload(&payload[..len])
                .build();
            if let Ok(packet) = packet
                && self.socket.send_to(&packet, self.remote).await.is_ok()
            {
                self.stats.packets_sent += 1;
            }
            self.seq = self.seq.wrapping_add(1);
            self.timestamp = self.timestamp.wrapping_add(Codec::TIMESTAMP_STEP);
        }
        if let Some(rec) = self.recorder.as_mut() {
            rec.frame(caller, agent)?;
        }
        Ok(())
    }

    /// Drops what is queued to play; the clip cut short (tagged) is reported with how much of
    /// it was sent.
    fn clear_playout(&mut self) {
        if let Some((_, tag)) = self.playout.front()
            && *tag != 0
        {
            (self.events)(MediaEvent::Cut {
                tag: *tag,
                played: self.play_offset,
            });
        }
        self.playout.clear();
        self.play_offset = 0;
    }

    fn fill_agent(&mut self, out: &mut [i16]) {
        let mut filled = 0;
        while filled < out.len() {
            let Some((front, tag)) = self.playout.front() else {
                break;
            };
            let take = (front.len() - self.play_offset).min(out.len() - filled);
            out[filled..filled + take]
                .copy_from_slice(&front[self.play_offset..self.play_offset + take]);
            filled += take;
            self.play_offset += take;
            if self.play_offset == front.len() {
                let tag = *tag;
                self.playout.pop_front();
                self.play_offset = 0;
                if tag != 0 {
                    (self.events)(MediaEvent::PlayedOut(tag));
                }
            }
        }
        out[filled..].fill(0);
        if self.playing && self.playout.is_empty() {
            self.playing = false;
            (self.events)(MediaEvent::PlayoutDone);
        }
    }
}

/// The caller's speech as [`MediaControl::listen`] captures it.
struct Capture {
    settings: ListenSettings,
    rate: f64,
    /// The last moments before speech starts, oldest first.
    pre_roll: VecDeque<i16>,
    pre_roll_len: usize,
    /// The utterance so far, while the caller speaks.
    utterance: Vec<i16>,
    capturing: bool,
    /// A pause has been reported for the silence going on now.
    paused: bool,
    /// The utterance was dropped during a pause: the silence that follows is not one.
    dropped: bool,
}

impl Capture {
    fn new(settings: ListenSettings, rate: u32) -> Capture {
        let pre_roll_len = (settings.pre_roll_secs.max(0.0) * f64::from(rate)) as usize;
        Capture {
            settings,
            rate: f64::from(rate),
            pre_roll: VecDeque::with_capacity(pre_roll_len),
            pre_roll_len,
            utterance: Vec::new(),
            capturing: false,
            paused: false,
            dropped: false,
        }
    }

    /// One frame of the caller's audio, with what the VAD made of it and how long the caller
    /// has been silent.
    fn feed(
        &mut self,
        frame: &[i16],
        change: Option<VadChange>,
        silence_secs: f64,
        events: &EventSink,
    ) {
        if !self.capturing {
            self.pre_roll.extend(frame.iter().copied());
            let excess = self.pre_roll.len().saturating_sub(self.pre_roll_len);
            self.pre_roll.drain(..excess);
            if change == Some(VadChange::Started) {
                self.capturing = true;
                self.paused = false;
                self.utterance.extend(self.pre_roll.drain(..));
            }
            return;
        }
        self.utterance.extend_from_slice(frame);
        if change == Some(VadChange::Stopped) {
            self.capturing = false;
            if std::mem::take(&mut self.dropped) {
                self.utterance.clear();
            } else if let Some(audio) = self.take() {
                events(MediaEvent::Utterance(audio));
            }
            return;
        }
        if silence_secs == 0.0 {
            if self.paused {
                events(MediaEvent::Resumed);
            }
            self.paused = false;
            self.dropped = false;
        } else if !self.paused && silence_secs + 1e-9 >= self.settings.pause_secs {
            self.paused = true;
            events(MediaEvent::Pause(self.utterance.as_slice().into()));
        }
        if self.utterance.len() as f64 >= self.settings.max_secs * self.rate
            && let Some(audio) = self.take()
        {
            events(MediaEvent::Utterance(audio));
        }
    }

    /// The utterance so far, and a fresh start for the next.
    fn take(&mut self) -> Option<Arc<[i16]>> {
        if self.utterance.is_empty() {
            return None;
        }
        let audio: Arc<[i16]> = self.utterance.as_slice().into();
        self.utterance = Vec::new();
        Some(audio)
    }
}

/// Converts mono 16-bit audio between sample rates by linear interpolation (enough for speech
/// prompts; the codecs band-limit the result anyway).
pub fn resample(input: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || input.is_empty() {
        return input.to_vec();
    }
    let out_len = (input.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..out_len)
        .map(|i| {
            let pos = i as f64 * step;
            let j = pos as usize;
            let frac = pos - j as f64;
            let a = f64::from(input[j.min(input.len() - 1)]);
            let b = f64::from(input[(j + 1).min(input.len() - 1)]);
            (a + (b - a) * frac).round() as i16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::vad::level_db;
    use crate::vad::tests::tone;

    #[test]
    fn resampling_keeps_duration() {
        let x = tone(2205, 1000.0, 22050.0);
        assert_eq!(resample(&x, 22050, 8000).len(), 800);
        assert_eq!(resample(&x, 22050, 22050), x);
    }

    /// A session on loopback: the peer's socket, our address, the handle and the events.
    struct Rig {
        peer: UdpSocket,
        ours: SocketAddr,
        handle: MediaHandle,
        events: mpsc::UnboundedReceiver<MediaEvent>,
    }

    async fn rig(recording: Option<PathBuf>, vad: VadSettings) -> Rig {
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let ours = socket.local_addr().unwrap();
        let (etx, events) = mpsc::unbounded_channel();
        let handle = start(
            socket,
            MediaConfig {
                codec: Codec::Pcmu,
                payload_type: 0,
                remote: peer.local_addr().unwrap(),
                recording,
                vad,
                jitter_depth: 2,
            },
            Box::new(move |e| {
                let _ = etx.send(e);
            }),
        )
        .unwrap();
        Rig {
            peer,
            ours,
            handle,
            events,
        }
    }

    impl Rig {
        /// Sends `frames` of 440 Hz tone from the peer as PCMU, out of order in pairs, a pair
        /// every 40 ms.
        async fn send_tone(&self, frames: u16) {
            self.send_tone_from(0, frames).await;
        }

        /// [`Rig::send_tone`] continuing the stream from its frame `first`.
        async fn send_tone_from(&self, first: u16, frames: u16) {
            let mut enc = audio_codec::create_encoder(audio_codec::CodecType::PCMU);
            let packets: Vec<Vec<u8>> = (first..first + frames)
                .map(|i| {
                    let pcm = tone(160, 8000.0, 8000.0);
                    RtpPacketBuilder::new()
                        .payload_type(0)
                        .ssrc(7)
                        .sequence(Seq::from(100 + i))
                        .timestamp(160 * u32::from(i))
                        .payload(&enc.encode(&pcm))
                        .build()
                        .unwrap()
                })
                .collect();
            for pair in packets.chunks(2) {
                for packet in pair.iter().rev() {
                    self.peer.send_to(packet, self.ours).await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        }
    }

    #[tokio::test]
    async fn media_flows_both_ways_and_is_recorded() {
        let dir = std::env::temp_dir().join(format!("sb-media-{}", std::process::id()));
        let path = dir.join("call.wav");
        let vad = VadSettings {
            start_secs: 0.04,
            stop_secs: 0.2,
            confidence: 0.5,
        };
        let mut rig = rig(Some(path.clone()), vad).await;
        rig.handle.play(tone(1600, 6000.0, 8000.0).into());
        // The peer sends 0.4 s of tone.
        rig.send_tone(20).await;
        let mut got = 0;
        let mut buf = [0u8; 1500];
        while got < 10 {
            let (len, _) = rig.peer.recv_from(&mut buf).await.unwrap();
            let rtp = RtpReader::new(&buf[..len]).unwrap();
            assert_eq!(rtp.payload_type(), 0);
            assert_eq!(rtp.payload().len(), 160);
            got += 1;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stats = rig.handle.finish().await.unwrap();
        assert_eq!(stats.packets_received, 20);
        assert_eq!(stats.packets_lost, 0);
        assert_eq!(stats.packets_discarded, 0);
        let mut events = Vec::new();
        while let Ok(e) = rig.events.try_recv() {
            events.push(e);
        }
        assert!(events.contains(&MediaEvent::SpeechStarted), "{events:?}");
        assert!(events.contains(&MediaEvent::SpeechStopped), "{events:?}");
        assert!(events.contains(&MediaEvent::PlayoutDone), "{events:?}");
        let reader = hound::WavReader::open(&path).unwrap();
        assert_eq!(reader.spec().channels, 2);
        assert_eq!(reader.spec().sample_rate, 8000);
        let samples: Vec<i16> = reader.into_samples().map(|s| s.unwrap()).collect();
        let left: Vec<i16> = samples.iter().step_by(2).copied().collect();
        let right: Vec<i16> = samples.iter().skip(1).step_by(2).copied().collect();
        assert!(level_db(&left) > -30.0, "caller channel holds the tone");
        assert!(level_db(&right) > -30.0, "agent channel holds the prompt");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn answering_machine_detection_reports_through_the_media_events() {
        let mut rig = rig(None, VadSettings::default()).await;
        rig.handle.control().detect_answering_machine(AmdSettings {
            initial_silence_ms: 200,
            ..AmdSettings::default()
        });
        // Nothing from the peer: silence, then a machine.
        let verdict = tokio::time::timeout(Duration::from_secs(5), rig.events.recv())
            .await
            .unwrap()
            .unwrap();
        let MediaEvent::Amd(verdict) = verdict else {
            panic!("{verdict:?}");
        };
        assert_eq!(verdict.answered_by, crate::amd::AnsweredBy::Machine);
        assert_eq!(verdict.reason.code(), "INITIALSILENCE");
        // Then its beep: 0.6 s of 440 Hz.
        rig.send_tone(30).await;
        let started = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match rig.events.recv().await {
                    Some(MediaEvent::Beep(BeepEvent::Started { frequency_hz, .. })) => {
                        break frequency_hz;
                    }
                    Some(_) => continue,
                    None => panic!("the events ended"),
                }
            }
        })
        .await
        .expect("the beep is heard");
        assert!(started.abs_diff(440) <= 25, "{started} Hz");
        rig.handle.finish().await.unwrap();
    }

    /// The next event that `pick` accepts, within 5 s.
    async fn next_matching<T>(
        events: &mut mpsc::UnboundedReceiver<MediaEvent>,
        mut pick: impl FnMut(MediaEvent) -> Option<T>,
    ) -> T {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let event = events.recv().await.expect("the events go on");
                if let Some(found) = pick(event) {
                    break found;
                }
            }
        })
        .await
        .expect("the event comes")
    }

    #[tokio::test]
    async fn listening_hands_over_the_callers_utterance_with_its_pause() {
        let mut rig = rig(None, VadSettings::default()).await;
        rig.handle.control().listen(ListenSettings {
            pause_secs: 0.2,
            pre_roll_secs: 0.5,
            max_secs: 30.0,
        });
        // 1 s of speech, then silence.
        rig.send_tone(50).await;
        let paused = next_pause(&mut rig.events).await;
        let utterance = next_utterance(&mut rig.events).await;
        // The speech, what came before the VAD decided, and the silence that ended it.
        let secs = utterance as f64 / 8000.0;
        assert!((1.6..=2.4).contains(&secs), "utterance of {secs} s");
        assert!(paused < utterance, "{paused} then {utterance}");
        rig.handle.finish().await.unwrap();
    }

    /// The length of the next pause's audio.
    async fn next_pause(events: &mut mpsc::UnboundedReceiver<MediaEvent>) -> usize {
        next_matching(events, |e| match e {
            MediaEvent::Pause(audio) => Some(audio.len()),
            _ => None,
        })
        .await
    }

    /// The length of the next utterance.
    async fn next_utterance(events: &mut mpsc::UnboundedReceiver<MediaEvent>) -> usize {
        next_matching(events, |e| match e {
            MediaEvent::Utterance(audio) => Some(audio.len()),
            _ => None,
        })
        .await
    }

    #[tokio::test]
    async fn a_dropped_utterance_is_not_handed_over_and_speaking_again_is_told() {
        let mut rig = rig(None, VadSettings::default()).await;
        let listen = ListenSettings {
            pause_secs: 0.2,
            pre_roll_secs: 0.5,
            max_secs: 30.0,
        };
        rig.handle.control().listen(listen);
        rig.send_tone(50).await;
        next_pause(&mut rig.events).await;
        rig.handle.control().drop_utterance();
        // The VAD hears the caller stop; nothing of the dropped utterance is handed over.
        let mut between = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(5), rig.events.recv()).await {
                Ok(Some(MediaEvent::SpeechStopped)) => break,
                Ok(Some(e)) => between.push(format!("{e:?}")),
                other => panic!("no end of speech: {other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        while let Ok(e) = rig.events.try_recv() {
            between.push(format!("{e:?}"));
        }
        assert!(
            between.iter().all(|e| !e.starts_with("Utterance")),
            "{between:?}"
        );

        // Speaking again after a pause (before the VAD's stop) is told, and makes an
        // utterance of its own.
        rig.send_tone_from(50, 25).await;
        next_pause(&mut rig.events).await;
        rig.handle.control().drop_utterance();
        rig.send_tone_from(75, 25).await;
        next_matching(&mut rig.events, |e| match e {
            MediaEvent::Resumed => Some(()),
            _ => None,
        })
        .await;
        let utterance = next_utterance(&mut rig.events).await;
        let secs = utterance as f64 / 8000.0;
        assert!((0.5..=2.0).contains(&secs), "utterance of {secs} s");
        rig.handle.finish().await.unwrap();
    }

    #[tokio::test]
    async fn playout_yields_by_itself_on_the_frame_speech_starts_once_asked_to() {
        let mut rig = rig(None, VadSettings::default()).await;
        let control = rig.handle.control();
        control.yield_to_speech(true);
        control.play_tagged(vec![1000i16; 80_000].into(), 5);
        tokio::time::sleep(Duration::from_millis(200)).await;
        rig.send_tone(25).await;
        // The cut comes with (before) the VAD's start: nobody had to ask for it.
        let mut order = Vec::new();
        while order.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(5), rig.events.recv()).await {
                Ok(Some(MediaEvent::Cut { tag, played })) => {
                    assert_eq!(tag, 5);
                    assert!(played > 0 && played < 80_000, "{played}");
                    order.push("cut");
                }
                Ok(Some(MediaEvent::SpeechStarted)) => order.push("speech"),
                Ok(Some(_)) => {}
                other => panic!("{other:?} after {order:?}"),
            }
        }
        assert_eq!(order, ["cut", "speech"]);
        rig.handle.finish().await.unwrap();
    }

    #[tokio::test]
    async fn tagged_audio_is_reported_played_out_or_cut() {
        let mut rig = rig(None, VadSettings::default()).await;
        let control = rig.handle.control();
        control.play_tagged(vec![1000i16; 800].into(), 7);
        assert_eq!(
            next_matching(&mut rig.events, |e| match e {
                MediaEvent::PlayedOut(tag) => Some(tag),
                _ => None,
            })
            .await,
            7
        );
        control.play_tagged(vec![1000i16; 16_000].into(), 8);
        control.play_tagged(vec![1000i16; 16_000].into(), 9);
        tokio::time::sleep(Duration::from_millis(300)).await;
        control.clear();
        let (tag, played) = next_matching(&mut rig.events, |e| match e {
            MediaEvent::Cut { tag, played } => Some((tag, played)),
            _ => None,
        })
        .await;
        assert_eq!(tag, 8);
        assert!((1600..=4000).contains(&played), "{played} samples played");
        rig.handle.finish().await.unwrap();
    }
}
