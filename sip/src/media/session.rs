//! The session: every 20 ms (a media worker's frame, see [`super::workers`]), the caller's next
//! frame in and the agent's next frame out.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use audio_codec::{Decoder, Encoder};
use rtp_rs::RtpReader;
use std::net::UdpSocket;
use tokio::time::Instant;

use super::batch::Batch;
use super::capture::Capture;
use super::echo::EchoCanceller;
use super::recorder::Recorder;
use super::source::{Source, SourcePolicy};
use super::workers::Stream;
use super::{Command, EventSink, MediaConfig, MediaCounters, MediaError, MediaEvent, MediaStats};
use crate::amd::AnsweringMachineDetector;
use crate::dtmf::tones::{ToneDetector, tone};
use crate::dtmf::{DigitSender, EventReader, Frame, Sent};
use crate::rtp::{JitterBuffer, LossCounter, Slot};
use crate::sdp::Codec;
use crate::vad::{Vad, VadChange};

/// An RTP header without CSRCs or extension (RFC 3550 section 5.1), and the largest payload a
/// frame encodes to.
const RTP_HEADER: usize = 12;
const MAX_PAYLOAD: usize = 400;

/// How long the echo of digits we send may come back: the echo canceller's reach (640 ms).
const ECHO_FRAMES: u32 = 32;

thread_local! {
    /// The packets a media worker reads for its sessions, one session at a time.
    static BATCH: std::cell::RefCell<Batch> = std::cell::RefCell::new(Batch::new());
}

pub(super) struct Session {
    /// The call's media socket, non-blocking.
    socket: UdpSocket,
    codec: Codec,
    payload_type: u8,
    /// RFC 4733 events' payload type, when the peer takes digits as events.
    telephone_event: Option<u8>,
    events_in: EventReader,
    /// Hears digits as tones in the caller's audio until their first event arrives.
    tones: Option<Box<ToneDetector>>,
    /// Digits being sent.
    digits: DigitSender,
    /// Frames left in which the caller's tones are not sought: while digits are sent and
    /// [`ECHO_FRAMES`] after, so their echo is not taken for the caller's keys.
    keys_echo: u32,
    /// Where audio goes, and whose packets are the caller's.
    source: SourcePolicy,
    counters: Arc<MediaCounters>,
    recorder: Option<Recorder>,
    events: EventSink,
    encoder: Box<dyn Encoder>,
    decoder: Box<dyn Decoder>,
    /// Decodes what we send as the far end hears it, for the echo canceller.
    echo_decoder: Box<dyn Decoder>,
    echo: EchoCanceller,
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
    /// Speech starts heard so far, and how many there were when playout last stopped by
    /// itself: audio sent by someone told of fewer is dropped.
    starts: u64,
    yielded_at: u64,
    playing: bool,
    ssrc: u32,
    seq: u16,
    timestamp: u32,
    stats: MediaStats,
    /// Why the session stopped by itself (the recording could not be written).
    failed: Option<MediaError>,
    /// The caller's frame as it came and as heard, the agent's frame.
    caller: Vec<i16>,
    heard: Vec<i16>,
    agent: Vec<i16>,
}

impl Session {
    pub(super) fn new(
        socket: UdpSocket,
        config: MediaConfig,
        recorder: Option<Recorder>,
        events: EventSink,
    ) -> Session {
        let n = config.codec.frame_samples();
        Session {
            socket,
            codec: config.codec,
            payload_type: config.payload_type,
            telephone_event: config.telephone_event,
            events_in: EventReader::default(),
            tones: Some(Box::new(ToneDetector::new(config.codec.sample_rate()))),
            digits: DigitSender::default(),
            keys_echo: 0,
            source: SourcePolicy::new(config.remote, Instant::now()),
            counters: config.counters,
            recorder,
            events,
            encoder: audio_codec::create_encoder(config.codec.codec_type()),
            decoder: audio_codec::create_decoder(config.codec.codec_type()),
            echo_decoder: audio_codec::create_decoder(config.codec.codec_type()),
            echo: EchoCanceller::default(),
            jitter: JitterBuffer::new(config.jitter_depth),
            loss: LossCounter::default(),
            vad: Vad::new(config.vad),
            amd: None,
            playout: VecDeque::new(),
            play_offset: 0,
            capture: None,
            yield_to_speech: false,
            starts: 0,
            yielded_at: 0,
            playing: false,
            ssrc: rand::random(),
            seq: rand::random(),
            timestamp: rand::random(),
            stats: MediaStats::default(),
            failed: None,
            caller: vec![0; n],
            heard: vec![0; n],
            agent: vec![0; n],
        }
    }

    /// The session starts now: what reached the socket before (while the call rang) decides
    /// nothing, as only the signalled address's packets are kept.
    pub(super) fn begin(&mut self) {
        let mut buf = [0u8; 2048];
        while let Ok((len, from)) = self.socket.recv_from(&mut buf) {
            if self.source.before_start(from) {
                self.receive(&buf[..len], from);
            }
        }
        self.source.started(Instant::now());
        self.count_foreign(0, None);
    }

    /// Reads every packet that arrived since the last frame, several to a system call. A
    /// bounded number: a flood is read at the next frame.
    fn read(&mut self) {
        BATCH.with_borrow_mut(|batch| {
            for _ in 0..8 {
                let n = batch.read(&self.socket);
                for i in 0..n {
                    if let Some((packet, from)) = batch.packet(i) {
                        self.receive(packet, from);
                    }
                }
                if n < batch.capacity() {
                    return;
                }
            }
        });
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Play(samples, tag, heard) => {
                if heard.is_some_and(|heard| heard < self.yielded_at) {
                    if tag != 0 {
                        (self.events)(MediaEvent::Cut { tag, played: 0 });
                    }
                } else if !samples.is_empty() {
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
            Command::Retarget(addr) => self.source.signal(addr, Instant::now()),
            Command::SendDigits(digits) => self.digits.push(&digits),
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
        let seq = u16::from(rtp.sequence_number());
        let event = Some(rtp.payload_type()) == self.telephone_event;
        let ours = rtp.payload_type() == self.payload_type || event;
        let before = self.source.foreign;
        // The caller's packets take the fast path; only a stranger's need the clock.
        let source = if self.source.known(from) {
            Source::Caller
        } else {
            self.source
                .admit(from, rtp.ssrc(), seq, ours, Instant::now())
        };
        if source == Source::Foreign {
            self.stats.packets_ignored += 1;
            self.count_foreign(before, Some(from));
            return;
        }
        if !ours {
            self.stats.packets_ignored += 1;
            return;
        }
        self.loss.record(seq);
        if event {
            // A digit's packets hold the audio's place in the sequence: their slots play
            // silence. The first event says digits come as events: tones are no longer sought.
            self.jitter.push_copy(seq, &[]);
            self.tones = None;
            if let Some(digit) = self.events_in.read(rtp.timestamp(), rtp.payload()) {
                (self.events)(MediaEvent::Digit(digit));
            }
            return;
        }
        self.jitter.push_copy(seq, rtp.payload());
    }

    /// Adds the foreign packets counted since `before` to the server's figure; the call's
    /// first is logged.
    fn count_foreign(&mut self, before: u64, from: Option<SocketAddr>) {
        let new = self.source.foreign - before;
        if new == 0 {
            return;
        }
        self.counters
            .foreign_packets
            .fetch_add(new, Ordering::Relaxed);
        if before == 0 {
            tracing::warn!(
                from = ?from,
                signalled = %self.source.target(),
                "RTP from an address the call did not negotiate; ignored"
            );
        }
    }

    /// One 20 ms frame: `caller` is what the line carried (recorded as it is), `heard` the
    /// same without the agent's echo (what the VAD, the capture and detection judge).
    fn media_frame(
        &mut self,
        caller: &mut [i16],
        agent: &mut [i16],
        heard: &mut [i16],
    ) -> Result<(), MediaError> {
        // The caller's side.
        caller.fill(0);
        if let Slot::Packet(payload) = self.jitter.pop() {
            if !payload.is_empty() {
                let _ = self.decoder.decode_into(&payload, caller);
            }
            self.jitter.recycle(payload);
        }
        heard.copy_from_slice(caller);
        self.echo.cancel(heard);
        let caller_heard: &[i16] = heard;
        let change = self.vad.feed(caller_heard);
        if change == Some(VadChange::Started) {
            self.starts += 1;
            if self.yield_to_speech && !self.playout.is_empty() {
                // The caller speaks over the agent: this frame already goes out silent.
                self.clear_playout();
                self.yielded_at = self.starts;
            }
        }
        if let Some(change) = change {
            (self.events)(match change {
                VadChange::Started => MediaEvent::SpeechStarted,
                VadChange::Stopped => MediaEvent::SpeechStopped,
            });
        }
        if let Some(capture) = self.capture.as_mut() {
            capture.feed(caller_heard, change, self.vad.silence_secs(), &self.events);
        }
        if let Some(amd) = self.amd.as_mut() {
            amd.feed(caller_heard, |e| (self.events)(e.into()));
            if amd.finished() {
                self.amd = None;
            }
        }
        if self.keys_echo > 0 {
            self.keys_echo -= 1;
        } else if let Some(digit) = self.tones.as_mut().and_then(|t| t.feed(caller_heard)) {
            (self.events)(MediaEvent::Digit(digit));
        }
        // The agent's side: digits being sent, else its audio.
        let digit = self.digit_frame(agent);
        if let Some((event, started, first)) = digit.and_then(|f| f.event)
            && let Some(pt) = self.telephone_event
        {
            // The far end hears nothing of it: no echo can come back.
            heard.fill(0);
            self.echo.sent(heard);
            let payload = event.to_bytes();
            self.send(pt, started, first, &payload);
            if let Some(rec) = self.recorder.as_mut() {
                rec.frame(caller, agent)?;
            }
            return Ok(());
        }
        let mut payload = [0u8; 400];
        let len = self.encoder.encode_into(agent, &mut payload).unwrap_or(0);
        // What the far end will hear of it, for the echo it may send back. Silence is silence
        // in the stateless codecs; G.722's decoder has to follow every frame.
        if self.codec != Codec::G722 && agent.iter().all(|s| *s == 0) {
            self.echo.sent(agent);
        } else if len > 0
            && self
                .echo_decoder
                .decode_into(&payload[..len], heard)
                .is_ok()
        {
            self.echo.sent(heard);
        }
        if len > 0 {
            let first = self.stats.packets_sent == 0;
            self.send(self.payload_type, self.timestamp, first, &payload[..len]);
        }
        if let Some(rec) = self.recorder.as_mut() {
            rec.frame(caller, agent)?;
        }
        Ok(())
    }

    /// This frame of the digits being sent, its tone in `agent` (silence between digits), or
    /// none and the agent's audio in `agent`.
    fn digit_frame(&mut self, agent: &mut [i16]) -> Option<Frame> {
        let Some(frame) = self.digits.next_frame(self.timestamp) else {
            self.fill_agent(agent);
            return None;
        };
        self.keys_echo = ECHO_FRAMES;
        if let Some(tones) = self.tones.as_mut() {
            tones.reset();
        }
        match frame.sent {
            Sent::Tone(digit, index) => tone(digit, index, self.codec.sample_rate(), agent),
            Sent::Gap => agent.fill(0),
        }
        if self.digits.idle() {
            (self.events)(MediaEvent::DigitsSent);
        }
        Some(frame)
    }

    /// Sends one RTP packet of this frame; the stream's clock moves on a frame either way. The
    /// packet is written on the stack: nothing is allocated per packet.
    fn send(&mut self, payload_type: u8, timestamp: u32, marked: bool, payload: &[u8]) {
        let mut packet = [0u8; RTP_HEADER + MAX_PAYLOAD];
        let len = RTP_HEADER + payload.len().min(MAX_PAYLOAD);
        packet[0] = 0x80; // version 2, no padding, no extension, no CSRC
        packet[1] = (u8::from(marked) << 7) | (payload_type & 0x7f);
        packet[2..4].copy_from_slice(&self.seq.to_be_bytes());
        packet[4..8].copy_from_slice(&timestamp.to_be_bytes());
        packet[8..12].copy_from_slice(&self.ssrc.to_be_bytes());
        packet[RTP_HEADER..len].copy_from_slice(&payload[..len - RTP_HEADER]);
        // A full socket buffer drops the packet, as the network would.
        if self
            .socket
            .send_to(&packet[..len], self.source.target())
            .is_ok()
        {
            self.stats.packets_sent += 1;
        }
        self.seq = self.seq.wrapping_add(1);
        self.timestamp = self.timestamp.wrapping_add(Codec::TIMESTAMP_STEP);
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

impl Stream for Session {
    type Command = Command;
    type Done = Result<MediaStats, MediaError>;

    fn command(&mut self, command: Command) {
        Session::command(self, command);
    }

    fn frame(&mut self) -> bool {
        self.read();
        let (mut caller, mut agent, mut heard) = (
            std::mem::take(&mut self.caller),
            std::mem::take(&mut self.agent),
            std::mem::take(&mut self.heard),
        );
        let result = self.media_frame(&mut caller, &mut agent, &mut heard);
        (self.caller, self.agent, self.heard) = (caller, agent, heard);
        match result {
            Ok(()) => true,
            Err(e) => {
                self.failed = Some(e);
                false
            }
        }
    }

    fn finish(mut self) -> Result<MediaStats, MediaError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(rec) = self.recorder.take() {
            rec.finish()?;
        }
        self.stats.packets_received = self.loss.received;
        self.stats.packets_lost = self.loss.lost();
        self.stats.packets_discarded = self.jitter.discarded;
        self.stats.packets_foreign = self.source.foreign;
        self.stats.echo_frames = self.echo.echo_frames;
        Ok(self.stats)
    }
}
