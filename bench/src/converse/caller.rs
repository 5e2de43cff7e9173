//! The callers: each places its call, says its turns as RTP (20 ms PCMU frames, quiet between
//! them), waits for the agent's reply audio and speaks again after it, talks over one reply
//! (the barge-in) when asked, and notes what it heard; the figures all the calls share.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchboard_sip::sdp::Codec;
use tokio::net::UdpSocket;
use tokio::sync::{Mutex, oneshot};

use super::args::ConverseArgs;
use super::echo::Echo;
use super::turns::TurnSeen;
use crate::rtp::{RtpOut, rtp_payload};
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
    /// The last reply packet carrying audio that came after `start`.
    pub(super) last_audio: Option<Instant>,
    /// The reply fell silent while the caller still spoke.
    pub(super) stopped: bool,
}

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
async fn call(s: &Shared, c: usize, slug: &str, routed: oneshot::Sender<()>) -> Result<(), String> {
    let a = &s.args;
    let media = UdpSocket::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("local media socket: {e}"))?;
    let invite = Invite {
        target: s.target,
        slug,
        local_ip: std::net::Ipv4Addr::LOCALHOST.into(),
        tcp: false,
        codec: Codec::Pcmu,
        media_port: media.local_addr().map_err(|e| e.to_string())?.port(),
        timeout: Duration::from_secs(15),
        n: c as u64,
    };
    let dialog = Dialog::invite(&invite).await;
    let _ = routed.send(());
    let dialog = dialog?;
    let remote = dialog.remote_media;
    let mut out = RtpOut::new(Codec::Pcmu.payload_type());
    let mut decoder = switchboard_sip::audio_codec::create_decoder(Codec::Pcmu.codec_type());
    let mut pcm = vec![0i16; 160];
    let mut buf = [0u8; 2048];
    // A phone's packet clock has no relation to the server's: each call's is set off by its own
    // part of the 20 ms (otherwise every call would send just after the server's media tick,
    // as both start when the call is answered).
    let offset = Duration::from_micros((c as u64 * 7_919) % 20_000);
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + offset,
        Duration::from_millis(20),
    );
    let mut talk = Conversation::new(s, c);
    let mut echo = a.echo_delay_ms.map(|ms| Echo {
        delay: (ms / 20) as usize,
        gain: 10f64.powf(-a.echo_db.abs() / 20.0),
        frames: Default::default(),
    });
    let mut encoder = switchboard_sip::audio_codec::create_encoder(Codec::Pcmu.codec_type());
    let mut mixed = vec![0u8; 400];
    loop {
        tokio::select! {
            biased;
            received = media.recv_from(&mut buf) => {
                let now = Instant::now();
                let Ok((n, _)) = received else { continue };
                let Some(payload) = rtp_payload(&buf[..n]) else { continue };
                let samples = decoder.decode_into(payload, &mut pcm).unwrap_or(0);
                if let Some(echo) = echo.as_mut() {
                    echo.heard(&pcm[..samples.min(pcm.len())]);
                }
                if !pcm[..samples.min(pcm.len())].iter().any(|v| v.unsigned_abs() > 200) {
                    continue;
                }
                talk.heard_audio(now);
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let (frame, speaking) = talk.frame();
                let frame = match echo.as_mut().and_then(|e| e.mixed(speaking, encoder.as_mut(), &mut mixed)) {
                    Some(n) => &mixed[..n],
                    None => frame,
                };
                let _ = media.send_to(out.packet(frame), remote).await;
                let sent = Instant::now();
                match talk.next(now, sent).await {
                    Some(phase) => talk.phase = phase,
                    None => break,
                }
            }
        }
    }
    talk.note().await;
    dialog.bye().await
}

/// One call's conversation as its caller keeps it: the phase, the turns said, the reply
/// audio heard, the barge-in under way.
struct Conversation<'a> {
    s: &'a Shared,
    c: usize,
    phase: Phase,
    /// Turns said so far.
    turn: u32,
    /// The last reply packet carrying audio.
    last_audio: Option<Instant>,
    turns: Vec<TurnSeen>,
    barge: Option<BargeSeen>,
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

impl<'a> Conversation<'a> {
    /// Call `c`'s conversation before its first turn.
    fn new(s: &'a Shared, c: usize) -> Conversation<'a> {
        let a = &s.args;
        Conversation {
            s,
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
            barge_turn: a.barge_in_turn.checked_sub(1),
            reply_over: Duration::from_millis(400),
            reply_ms: (2.0 * a.sentence_secs * 1000.0) as u64,
            whole: 0,
            cut_short: 0,
        }
    }

    /// Reply audio came at `now`: a reply awaited starts playing.
    fn heard_audio(&mut self, now: Instant) {
        self.last_audio = Some(now);
        if let Some(b) = self.barge.as_mut() {
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
    fn frame(&self) -> (&'a [u8], Option<&'a [i16]>) {
        match self.phase {
            Phase::Speaking { frame, .. } => {
                (&self.s.speech[frame], Some(&self.s.speech_pcm[frame][..]))
            }
            _ => (&self.s.silence, None),
        }
    }

    /// The phase after this tick's frame went out at `sent`; none once the last turn is over.
    async fn next(&mut self, now: Instant, sent: Instant) -> Option<Phase> {
        let s = self.s;
        Some(match self.phase {
            Phase::Quiet(until) if now >= until => {
                if self.turn == s.args.turns {
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
                            last_audio: None,
                            stopped: false,
                        });
                    }
                }
                if frame + 1 < s.speech.len() {
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
                        s.seen.lock().await.barges.push(b);
                    }
                    self.turn += 1;
                    Phase::Awaiting(sent)
                }
            }
            Phase::Awaiting(since)
                if now.duration_since(since).as_secs_f64() > s.args.reply_timeout =>
            {
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
        seen.replies_whole += self.whole;
        seen.replies_cut_short += self.cut_short;
    }
}
