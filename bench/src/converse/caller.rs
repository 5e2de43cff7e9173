//! The callers: each places its call, says its turns as RTP (20 ms PCMU frames, quiet between
//! them), waits for the agent's reply audio and speaks again after it, talks over one reply
//! (the barge-in) when asked, and notes what it heard; the figures all the calls share.
//!
//! The calls' media run on media workers as the server's do ([`Workers`]): a phone's packets
//! cost the machine what they must and no more, so the bench takes as little of it from the
//! server as it can. A reply packet's arrival is the kernel's time stamp on it, not the time
//! the worker read it.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchboard_sip::audio_codec::{Decoder, Encoder};
use switchboard_sip::media::workers::{Stream, Workers};
use switchboard_sip::sdp::Codec;
use tokio::sync::{Mutex, oneshot};

use super::args::ConverseArgs;
use super::echo::Echo;
use super::turns::TurnSeen;
use crate::rtp::{RtpOut, StampedSocket, rtp_payload};
use crate::ua::{Dialog, Invite};

/// The calls under way and done, and the turns answered, for the progress bar and the
/// sampler.
#[derive(Default)]
pub(super) struct Totals {
    pub(super) live: AtomicI64,
    pub(super) done: AtomicU64,
    pub(super) turns_heard: AtomicU64,
}

/// A barge-in as the caller saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct BargeSeen {
    /// When the caller's first speech packet went out.
    pub(super) start: Instant,
    /// When the packet that completed the voice detector's `vad_start_secs` of speech went
    /// out (the first packet after them): from then on the server has heard enough to stop.
    pub(super) heard: Option<Instant>,
    /// The last reply packet carrying audio that came after `start`.
    pub(super) last_audio: Option<Instant>,
    /// The reply fell silent while the caller still spoke.
    pub(super) stopped: bool,
    /// Reply audio came again after a gap of at least [`RESUMED_AFTER`] once the caller had
    /// started: the agent spoke over the caller a second time.
    pub(super) resumed: bool,
}

/// A gap in the reply's audio this long, then audio again, is a second start, not one sound.
const RESUMED_AFTER: Duration = Duration::from_millis(100);

/// What all the callers saw.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) turns: Vec<TurnSeen>,
    pub(super) barges: Vec<BargeSeen>,
    pub(super) failures: std::collections::BTreeMap<String, u64>,
    /// Replies heard whole, and replies that stopped short though the caller never spoke
    /// over them (the agent took something else, such as its own echo, for the caller).
    pub(super) replies_whole: u64,
    pub(super) replies_cut_short: u64,
}

/// What every call reads (the settings, the server, the caller's line) and adds to.
pub(super) struct Shared {
    pub(super) args: ConverseArgs,
    pub(super) target: std::net::SocketAddr,
    /// The caller's line, encoded in 20 ms PCMU frames, and as audio.
    pub(super) speech: Vec<Vec<u8>>,
    pub(super) speech_pcm: Vec<Vec<i16>>,
    pub(super) silence: Vec<u8>,
    pub(super) totals: Totals,
    pub(super) seen: Mutex<Seen>,
    /// The threads that carry the calls' media.
    pub(super) media: Workers<Caller>,
}

/// Runs call `c` on endpoint `slug` and counts it; `routed` is told once its INVITE is
/// answered (or has failed).
pub(super) async fn one_call(s: Arc<Shared>, c: usize, slug: String, routed: oneshot::Sender<()>) {
    s.totals.live.fetch_add(1, Ordering::Relaxed);
    let result = call(&s, c, &slug, routed).await;
    s.totals.live.fetch_sub(1, Ordering::Relaxed);
    s.totals.done.fetch_add(1, Ordering::Relaxed);
    if let Err(why) = result {
        *s.seen.lock().await.failures.entry(why).or_insert(0) += 1;
    }
}

/// Where a call's conversation stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Quiet until then, then the next turn.
    Quiet(Instant),
    /// Sending the line's frames (the next one to send); `barge` while the reply plays.
    Speaking { frame: usize, barge: bool },
    /// The line has been said: waiting for the reply's audio.
    Awaiting(Instant),
    /// The reply is playing.
    Hearing { since: Instant },
}

/// One conversing call: places it, says its turns and hangs up.
async fn call(
    s: &Arc<Shared>,
    c: usize,
    slug: &str,
    routed: oneshot::Sender<()>,
) -> Result<(), String> {
    let media = UdpSocket::bind("127.0.0.1:0")
        .and_then(StampedSocket::new)
        .map_err(|e| format!("local media socket: {e}"))?;
    let invite = Invite {
        target: s.target,
        slug,
        local_ip: std::net::Ipv4Addr::LOCALHOST.into(),
        tcp: false,
        codec: Codec::Pcmu,
        media_port: media.port(),
        timeout: Duration::from_secs(15),
        n: c as u64,
    };
    let dialog = Dialog::invite(&invite).await;
    let _ = routed.send(());
    let dialog = dialog?;
    let a = &s.args;
    let caller = Caller {
        socket: media,
        remote: dialog.remote_media,
        out: RtpOut::new(Codec::Pcmu.payload_type()),
        decoder: switchboard_sip::audio_codec::create_decoder(Codec::Pcmu.codec_type()),
        encoder: switchboard_sip::audio_codec::create_encoder(Codec::Pcmu.codec_type()),
        pcm: vec![0; 160],
        buf: vec![0; 2048],
        mixed: vec![0; 400],
        echo: a.echo_delay_ms.map(|ms| Echo {
            delay: (ms / 20) as usize,
            gain: 10f64.powf(-a.echo_db.abs() / 20.0),
            frames: Default::default(),
        }),
        talk: Conversation::new(s.clone(), c),
    };
    let talk = s
        .media
        .add(caller)
        .ended()
        .await
        .ok_or("the bench's media worker stopped")?;
    talk.note().await;
    dialog.bye().await
}

/// A call's phone: its socket, its packets and its conversation.
pub(super) struct Caller {
    socket: StampedSocket,
    remote: SocketAddr,
    out: RtpOut,
    decoder: Box<dyn Decoder>,
    encoder: Box<dyn Encoder>,
    pcm: Vec<i16>,
    buf: Vec<u8>,
    mixed: Vec<u8>,
    echo: Option<Echo>,
    talk: Conversation,
}

impl Caller {
    /// The reply packets that came since the last frame, each at the time it arrived.
    fn read(&mut self) {
        for _ in 0..64 {
            let Ok((n, arrived)) = self.socket.recv(&mut self.buf) else {
                return;
            };
            let Some(payload) = rtp_payload(&self.buf[..n]) else {
                continue;
            };
            let samples = self
                .decoder
                .decode_into(payload, &mut self.pcm)
                .unwrap_or(0);
            let pcm = &self.pcm[..samples.min(self.pcm.len())];
            if let Some(echo) = self.echo.as_mut() {
                echo.heard(pcm);
            }
            if pcm.iter().any(|v| v.unsigned_abs() > 200) {
                self.talk.heard_audio(arrived);
            }
        }
    }
}

impl Stream for Caller {
    type Command = ();
    type Done = Conversation;

    fn command(&mut self, _: ()) {}

    fn frame(&mut self) -> bool {
        self.read();
        let now = Instant::now();
        let (frame, speaking) = self.talk.frame();
        let frame = match self
            .echo
            .as_mut()
            .and_then(|e| e.mixed(speaking, self.encoder.as_mut(), &mut self.mixed))
        {
            Some(n) => &self.mixed[..n],
            None => frame,
        };
        let _ = self.socket.send_to(self.out.packet(frame), self.remote);
        let sent = Instant::now();
        match self.talk.next(now, sent) {
            Some(phase) => {
                self.talk.phase = phase;
                true
            }
            None => false,
        }
    }

    fn finish(self) -> Conversation {
        self.talk
    }
}

/// One call's conversation as its caller keeps it: the phase, the turns said, the reply
/// audio heard, the barge-in under way.
pub(super) struct Conversation {
    s: Arc<Shared>,
    c: usize,
    phase: Phase,
    /// Turns said so far.
    turn: u32,
    /// The last reply packet carrying audio.
    last_audio: Option<Instant>,
    turns: Vec<TurnSeen>,
    barge: Option<BargeSeen>,
    barges: Vec<BargeSeen>,
    /// The turn (from 0) that talks over the reply before it.
    barge_turn: Option<u32>,
    /// How long a reply must go quiet to be over.
    reply_over: Duration,
    /// A reply lasts two sentences; one that stops this much short was cut.
    reply_ms: u64,
    /// Replies heard whole, and cut short.
    whole: u64,
    cut_short: u64,
}

impl Conversation {
    /// Call `c`'s conversation before its first turn.
    fn new(s: Arc<Shared>, c: usize) -> Conversation {
        let a = &s.args;
        Conversation {
            c,
            // A little quiet first, different per call, so the calls' turns do not fall in
            // step.
            phase: Phase::Quiet(
                Instant::now() + Duration::from_millis(300 + (c as u64 * 137) % 1500),
            ),
            turn: 0,
            last_audio: None,
            turns: Vec::new(),
            barge: None,
            barges: Vec::new(),
            barge_turn: a.barge_in_turn.checked_sub(1),
            reply_over: Duration::from_millis(400),
            reply_ms: (2.0 * a.sentence_secs * 1000.0) as u64,
            whole: 0,
            cut_short: 0,
            s,
        }
    }

    /// Reply audio came at `now`: a reply awaited starts playing.
    fn heard_audio(&mut self, now: Instant) {
        self.last_audio = Some(now);
        if let Some(b) = self.barge.as_mut() {
            b.resumed |= b
                .last_audio
                .is_some_and(|l| now.duration_since(l) >= RESUMED_AFTER);
            b.last_audio = Some(now);
        }
        if let Phase::Awaiting(_) = self.phase {
            if let Some(t) = self.turns.last_mut() {
                t.first_audio = Some(now);
            }
            self.s.totals.turns_heard.fetch_add(1, Ordering::Relaxed);
            self.phase = Phase::Hearing { since: now };
        }
    }

    /// This tick's frame (the line's while speaking, else silence), and the line's audio
    /// while speaking.
    fn frame(&self) -> (&[u8], Option<&[i16]>) {
        match self.phase {
            Phase::Speaking { frame, .. } => {
                (&self.s.speech[frame], Some(&self.s.speech_pcm[frame][..]))
            }
            _ => (&self.s.silence, None),
        }
    }

    /// The phase after this tick's frame went out at `sent`; none once the last turn is over.
    fn next(&mut self, now: Instant, sent: Instant) -> Option<Phase> {
        // What it reads of the shared settings, copied out before `self` changes below.
        let (turns, line_frames, reply_timeout) = (
            self.s.args.turns,
            self.s.speech.len(),
            self.s.args.reply_timeout,
        );
        // Packets of 20 ms that make the voice detector's start.
        let vad_frames = (self.s.args.vad_start_secs / 0.020).round() as usize;
        Some(match self.phase {
            Phase::Quiet(until) if now >= until => {
                if self.turn == turns {
                    return None;
                }
                Phase::Speaking {
                    frame: 0,
                    barge: false,
                }
            }
            Phase::Speaking {
                frame,
                barge: is_barge,
            } => {
                if frame == 0 {
                    self.turns.push(TurnSeen {
                        call: self.c,
                        turn: self.turn,
                        first_audio: None,
                    });
                    if is_barge {
                        self.barge = Some(BargeSeen {
                            start: sent,
                            heard: None,
                            last_audio: None,
                            stopped: false,
                            resumed: false,
                        });
                    }
                }
                if let Some(b) = self.barge.as_mut()
                    && frame == vad_frames
                {
                    b.heard = Some(sent);
                }
                if frame + 1 < line_frames {
                    Phase::Speaking {
                        frame: frame + 1,
                        barge: is_barge,
                    }
                } else {
                    if let Some(mut b) = self.barge.take() {
                        // Stopped: no reply audio for a while before the line ended.
                        b.stopped = b
                            .last_audio
                            .is_none_or(|l| sent.duration_since(l) >= self.reply_over);
                        self.barges.push(b);
                    }
                    self.turn += 1;
                    Phase::Awaiting(sent)
                }
            }
            Phase::Awaiting(since) if now.duration_since(since).as_secs_f64() > reply_timeout => {
                Phase::Quiet(now + Duration::from_millis(500))
            }
            Phase::Hearing { since } => self.hearing(now, since),
            other => other,
        })
    }

    /// While the reply plays (since `since`): the barge-in starts, the reply is over (heard
    /// whole or cut short) and a quiet follows, or it plays on.
    fn hearing(&mut self, now: Instant, since: Instant) -> Phase {
        let c = self.c as u64;
        if self.barge_turn == Some(self.turn)
            && now.duration_since(since) >= Duration::from_millis(self.s.args.barge_in_after_ms)
        {
            Phase::Speaking {
                frame: 0,
                barge: true,
            }
        } else if let Some(l) = self
            .last_audio
            .filter(|l| now.duration_since(*l) >= self.reply_over)
        {
            let heard = l.duration_since(since).as_millis() as u64;
            if heard + 300 < self.reply_ms {
                self.cut_short += 1;
            } else {
                self.whole += 1;
            }
            Phase::Quiet(
                now + Duration::from_millis(300 + (c * 61 + u64::from(self.turn) * 97) % 500),
            )
        } else {
            self.phase
        }
    }

    /// Adds what this call saw to what all the calls saw.
    async fn note(self) {
        let mut seen = self.s.seen.lock().await;
        seen.turns.extend(self.turns);
        seen.barges.extend(self.barges);
        seen.replies_whole += self.whole;
        seen.replies_cut_short += self.cut_short;
    }
}
