//! `converse`: N concurrent conversing calls against stand-in model vendors with fixed
//! latencies.
//!
//! The bench starts the stand-ins ([`vendors`]) and a server pointed at them (speech to text,
//! the chat model and OpenAI-compatible speech), with one agent per call: each agent's system
//! prompt names its call, so a chat request tells which call it serves. The calls take turns on
//! a few SIP endpoints, each pointed at the agent of the call about to use it. Each call
//! then speaks prerecorded turns as RTP (PCMU, 20 ms a packet, silence between), waits for the
//! agent's reply audio, and speaks again after it; one turn talks over the reply (a barge-in)
//! and notes when the agent's audio stops.
//!
//! It reports per turn the latency Switchboard adds between the end of the caller's turn and
//! the first reply audio, less the vendors' own time ([`turns`] says how requests and turns
//! are tied), the barge-in stop time, and the server's CPU and memory per conversing call over
//! its idle baseline.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;
use tokio::net::UdpSocket;
use tokio::sync::{Mutex, oneshot};

use crate::measure::{CpuMeter, spread};
use crate::progress::Progress;
use crate::rtp::{RtpOut, rtp_payload};
use crate::ua::{Dialog, Invite};

mod echo;
mod report;
mod turns;
mod vendors;

use echo::Echo;
use report::{Measured, report};

use turns::{Matcher, TurnSeen, barge_in_ms};
use vendors::{Latencies, StandIn};

/// Endpoints the calls take turns on.
const ENDPOINTS: usize = 10;

/// What the caller says each turn (when espeak-ng is installed).
const LINE: &str = "I would like to book a table for two people tomorrow evening";

#[derive(clap::Args, Clone)]
pub struct ConverseArgs {
    /// The switchboard binary to start (default: the one beside this program).
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// Concurrent conversing calls.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Caller turns per call.
    #[arg(long, default_value_t = 4)]
    turns: u32,
    /// The turn (from 1) that starts while the agent's previous reply plays; 0: none.
    #[arg(long, default_value_t = 2)]
    barge_in_turn: u32,
    /// How far into the reply's audio the barge-in starts, in milliseconds.
    #[arg(long, default_value_t = 600)]
    barge_in_after_ms: u64,
    /// Speech to text: milliseconds to the transcript.
    #[arg(long, default_value_t = 150)]
    stt_ms: u64,
    /// Chat model: milliseconds to the reply's first piece.
    #[arg(long, default_value_t = 300)]
    llm_ms: u64,
    /// Chat model: milliseconds between the reply's pieces.
    #[arg(long, default_value_t = 20)]
    llm_chunk_ms: u64,
    /// Text to speech: milliseconds to a sentence's audio.
    #[arg(long, default_value_t = 120)]
    tts_ms: u64,
    /// Each vendor answer waits up to this many milliseconds more, spread evenly over the
    /// requests (measured, and left out like the rest of the vendors' time).
    #[arg(long, default_value_t = 20)]
    vendor_spread_ms: u64,
    /// Seconds of audio per spoken sentence (a reply has two).
    #[arg(long, default_value_t = 1.5)]
    sentence_secs: f64,
    /// The agents' vad_start_secs.
    #[arg(long, default_value_t = 0.2)]
    vad_start_secs: f64,
    /// The agents' vad_stop_secs.
    #[arg(long, default_value_t = 0.4)]
    vad_stop_secs: f64,
    /// Seconds over which the calls are placed.
    #[arg(long, default_value_t = 5.0)]
    ramp_secs: f64,
    /// Seconds a turn waits for the reply's audio before it counts as failed.
    #[arg(long, default_value_t = 10.0)]
    reply_timeout: f64,
    /// The callers' lines echo the agent's audio back, this many milliseconds late (in
    /// whole 20 ms frames; 0: at once, as an echo test number or SIPp's `-rtp_echo` does).
    /// Unset: no echo.
    #[arg(long)]
    echo_delay_ms: Option<u64>,
    /// How far below the agent's level the echo comes back, in dB (0: full level).
    #[arg(long, default_value_t = 0.0)]
    echo_db: f64,
    /// A mono 16-bit WAV the callers speak (default: espeak-ng, else a speech-like signal).
    #[arg(long)]
    wav: Option<PathBuf>,
    /// Seconds of idle server sampled for the baseline.
    #[arg(long, default_value_t = 3.0)]
    baseline_secs: f64,
    /// The agents are flow agents: a start node hands the caller to a conversation node (with
    /// a global end node), so every turn is briefed by the flow's director.
    #[arg(long)]
    pub flow: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Default)]
struct Totals {
    live: AtomicI64,
    done: AtomicU64,
    turns_heard: AtomicU64,
}

/// A barge-in as the caller saw it.
#[derive(Debug, Clone, Copy)]
struct BargeSeen {
    /// When the caller's first speech packet went out.
    start: Instant,
    /// The last reply packet carrying audio that came after `start`.
    last_audio: Option<Instant>,
    /// The reply fell silent while the caller still spoke.
    stopped: bool,
}

#[derive(Default)]
struct Seen {
    turns: Vec<TurnSeen>,
    barges: Vec<BargeSeen>,
    failures: std::collections::BTreeMap<String, u64>,
    /// Replies heard whole, and replies that stopped short though the caller never spoke
    /// over them (the agent took something else, such as its own echo, for the caller).
    replies_whole: u64,
    replies_cut_short: u64,
}

struct Shared {
    args: ConverseArgs,
    target: std::net::SocketAddr,
    /// The caller's line, encoded in 20 ms PCMU frames, and as audio.
    speech: Vec<Vec<u8>>,
    speech_pcm: Vec<Vec<i16>>,
    silence: Vec<u8>,
    totals: Totals,
    seen: Mutex<Seen>,
}

/// Runs the benchmark and returns the report.
pub async fn run(args: ConverseArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(
        args.calls > 0 && args.turns > 0,
        "--calls and --turns must be positive"
    );
    let bin = match &args.spawn {
        Some(bin) => bin.clone(),
        None => crate::spawn::default_binary()?,
    };
    let latencies = Latencies {
        stt: Duration::from_millis(args.stt_ms),
        llm: Duration::from_millis(args.llm_ms),
        chunk: Duration::from_millis(args.llm_chunk_ms),
        tts: Duration::from_millis(args.tts_ms),
        speech_secs: args.sentence_secs,
        spread: Duration::from_millis(args.vendor_spread_ms),
    };
    let stand_in = StandIn::start(latencies).await?;
    let (line, made_by) = caller_line(args.wav.as_deref())?;
    let codec = Codec::Pcmu;
    let speech = crate::greeting::frames(codec, &line);
    let speech_pcm: Vec<Vec<i16>> = line
        .chunks(160)
        .map(|c| {
            let mut frame = c.to_vec();
            frame.resize(160, 0);
            frame
        })
        .collect();
    let silence = crate::greeting::frames(codec, &[0; 160])
        .pop()
        .context("encoding silence")?;
    let base = &stand_in.base_url;
    let mut flags: Vec<String> = ["--tts", "openai", "--tts-url", base, "--tts-model", "bench"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (kind, model) in [("llm", "bench-chat"), ("stt", "bench-transcribe")] {
        flags.extend([
            format!("--{kind}-url"),
            base.clone(),
            format!("--{kind}-api-key"),
            "bench".into(),
            format!("--{kind}-model"),
            model.into(),
        ]);
    }
    // Below the ephemeral range, where the callers' media sockets are.
    flags.extend(["--rtp-ports".into(), "20000-31999".into()]);
    let mut server = crate::spawn::spawn_switchboard(&bin, &flags).await?;
    let pid = server.child.id().context("server pid")?;
    let endpoints = args.calls.min(ENDPOINTS);
    let (agents, routes) = agents_and_endpoints(&server, &args, endpoints).await?;
    // The idle baseline.
    let mut meter = CpuMeter::new(Some(pid));
    meter.sample();
    tokio::time::sleep(Duration::from_secs_f64(args.baseline_secs.max(0.5))).await;
    let (base_cpu, base_rss) = meter.sample();
    let shared = Arc::new(Shared {
        target: server.sip,
        speech,
        speech_pcm,
        silence,
        totals: Totals::default(),
        seen: Mutex::new(Seen::default()),
        args: args.clone(),
    });
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let live = shared.clone();
    let sampler = tokio::spawn(crate::measure::sample_server(
        Some(pid),
        move || live.totals.live.load(Ordering::Relaxed),
        samples.clone(),
        started,
    ));
    let mut me = CpuMeter::new(Some(std::process::id()));
    me.sample();
    let gap = Duration::from_secs_f64(args.ramp_secs.max(0.0) / args.calls as f64);
    let mut calls = Vec::with_capacity(args.calls);
    let mut next = tokio::time::Instant::now();
    let client = reqwest::Client::new();
    // Per call: its INVITE has been answered (or has failed), so its endpoint is free.
    let mut routed: Vec<Option<tokio::sync::oneshot::Receiver<()>>> = Vec::new();
    for c in 0..args.calls {
        tokio::time::sleep_until(next).await;
        next += gap;
        let (slug, endpoint) = &routes[c % endpoints];
        if c >= endpoints {
            if let Some(earlier) = routed.get_mut(c - endpoints).and_then(Option::take) {
                let _ = tokio::time::timeout(Duration::from_secs(30), earlier).await;
            }
            let patched = client
                .patch(format!("{}/sip-endpoints/{endpoint}", server.http))
                .bearer_auth(&server.key)
                .json(&json!({"inbound_agent_id": agents[c]}))
                .send()
                .await?;
            anyhow::ensure!(
                patched.status().is_success(),
                "pointing an endpoint at call {c}'s agent: {}",
                patched.status()
            );
        }
        let (done, answered) = tokio::sync::oneshot::channel();
        routed.push(Some(answered));
        let s = shared.clone();
        let slug = slug.clone();
        calls.push(tokio::spawn(
            async move { one_call(s, c, slug, done).await },
        ));
    }
    let mut progress = Progress::new();
    let show = |progress: &mut Progress| {
        let t = &shared.totals;
        progress.show(
            t.done.load(Ordering::Relaxed) as i64,
            args.calls as i64,
            &format!(
                "live {}, turns answered {}",
                t.live.load(Ordering::Relaxed),
                t.turns_heard.load(Ordering::Relaxed)
            ),
        );
    };
    for call in calls {
        while !call.is_finished() {
            show(&mut progress);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let _ = call.await;
    }
    show(&mut progress);
    eprintln!();
    let wall = started.elapsed().as_secs_f64();
    let (bench_cpu, _) = me.sample();
    sampler.abort();
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    let samples = samples.lock().await.clone();
    let seen = std::mem::take(&mut *shared.seen.lock().await);
    let records = stand_in.records();
    let measured = Measured {
        made_by,
        line_secs: line.len() as f64 / 8000.0,
        base_cpu,
        base_rss,
        bench_cpu,
        wall,
    };
    Ok(report(&args, seen, &records, samples, measured))
}

/// One agent per call, and the endpoints the calls take turns on (the first calls' agents
/// are the endpoints' own; the others' are created alone and pointed to when their call comes).
async fn agents_and_endpoints(
    server: &crate::spawn::Spawned,
    args: &ConverseArgs,
    endpoints: usize,
) -> anyhow::Result<(Vec<String>, Vec<(String, String)>)> {
    // The server takes a few endpoints a day: calls take turns on them, and each endpoint is
    // pointed at the agent of the call about to use it just before the call is placed.
    eprintln!("creating {} agents and {endpoints} endpoints", args.calls);
    let (mut agents, mut routes) = (Vec::with_capacity(args.calls), Vec::new());
    for c in 0..args.calls {
        let mut agent = json!({
            "name": format!("Bench {c}"),
            "system_prompt": format!("You are the agent of a benchmark call [bench-call {c}]."),
            "greeting_message": "Hello.",
            "agent_speaks_first": false,
            "vad_start_secs": args.vad_start_secs,
            "vad_stop_secs": args.vad_stop_secs,
            "silence_timeout_secs": 3600,
            "max_call_duration_secs": 3600,
        });
        if args.flow {
            agent["type"] = json!("flow");
            agent["flow_config"] = json!({"flow_config_version": 1, "nodes": [
                {"id": "start", "type": "start", "agent_speaks_first": false, "next_step_id": "talk"},
                {"id": "talk", "type": "conversation", "name": "Talk", "instructions": "Answer the caller briefly."},
                {"id": "bye", "type": "end", "greeting": "Goodbye.", "is_literal": true,
                 "is_global": true, "global_condition": "the caller wants to hang up"}
            ]});
        }
        if c < endpoints {
            routes.push(crate::spawn::create_endpoint(server, &agent).await?);
            agents.push(String::new());
        } else {
            agents.push(crate::spawn::create_agent(server, &agent).await?);
        }
    }
    Ok((agents, routes))
}

/// The caller's line, trimmed of leading and trailing quiet, at 8 kHz; and what made it.
fn caller_line(wav: Option<&std::path::Path>) -> anyhow::Result<(Vec<i16>, &'static str)> {
    let (mut audio, made_by) = match wav {
        Some(path) => (crate::measure::load_wav(path, 8000)?, "wav"),
        None => match crate::greeting::espeak(8000, LINE) {
            Some(audio) => (audio, "espeak-ng"),
            None => {
                let mut audio = crate::greeting::synthetic(8000);
                audio.truncate(8000 * 2);
                (audio, "synthetic")
            }
        },
    };
    let loud = |s: &i16| s.unsigned_abs() > 300;
    let end = audio.iter().rposition(loud).map_or(0, |i| i + 1);
    audio.truncate(end);
    let start = audio.iter().position(loud).unwrap_or(0);
    audio.drain(..start);
    anyhow::ensure!(
        audio.len() >= 8000 / 2,
        "the caller's line is under half a second"
    );
    Ok((audio, made_by))
}

async fn one_call(s: Arc<Shared>, c: usize, slug: String, routed: oneshot::Sender<()>) {
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
    // A little quiet first, different per call, so the calls' turns do not fall in step.
    let mut phase =
        Phase::Quiet(Instant::now() + Duration::from_millis(300 + (c as u64 * 137) % 1500));
    let mut turn: u32 = 0;
    let mut last_audio: Option<Instant> = None;
    let mut turns: Vec<TurnSeen> = Vec::new();
    let mut barge: Option<BargeSeen> = None;
    let reply_over = Duration::from_millis(400);
    let barge_turn = a.barge_in_turn.checked_sub(1);
    let mut echo = a.echo_delay_ms.map(|ms| Echo {
        delay: (ms / 20) as usize,
        gain: 10f64.powf(-a.echo_db.abs() / 20.0),
        frames: Default::default(),
    });
    let mut encoder = switchboard_sip::audio_codec::create_encoder(Codec::Pcmu.codec_type());
    let mut mixed = vec![0u8; 400];
    // A reply lasts two sentences; one that stops this much short was cut.
    let reply_ms = (2.0 * a.sentence_secs * 1000.0) as u64;
    let (mut whole, mut cut_short) = (0u64, 0u64);
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
                last_audio = Some(now);
                if let Some(b) = barge.as_mut() {
                    b.last_audio = Some(now);
                }
                if let Phase::Awaiting(_) = phase {
                    if let Some(t) = turns.last_mut() {
                        t.first_audio = Some(now);
                    }
                    s.totals.turns_heard.fetch_add(1, Ordering::Relaxed);
                    phase = Phase::Hearing { since: now };
                }
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let frame = match phase {
                    Phase::Speaking { frame, .. } => &s.speech[frame],
                    _ => &s.silence,
                };
                let speaking = match phase {
                    Phase::Speaking { frame, .. } => Some(&s.speech_pcm[frame][..]),
                    _ => None,
                };
                let frame = match echo.as_mut().and_then(|e| e.mixed(speaking, encoder.as_mut(), &mut mixed)) {
                    Some(n) => &mixed[..n],
                    None => frame,
                };
                let _ = media.send_to(out.packet(frame), remote).await;
                let sent = Instant::now();
                phase = match phase {
                    Phase::Quiet(until) if now >= until => {
                        if turn == a.turns {
                            break;
                        }
                        Phase::Speaking { frame: 0, barge: false }
                    }
                    Phase::Speaking { frame, barge: is_barge } => {
                        if frame == 0 {
                            turns.push(TurnSeen { call: c, turn, first_audio: None });
                            if is_barge {
                                barge = Some(BargeSeen { start: sent, last_audio: None, stopped: false });
                            }
                        }
                        if frame + 1 < s.speech.len() {
                            Phase::Speaking { frame: frame + 1, barge: is_barge }
                        } else {
                            if let Some(mut b) = barge.take() {
                                // Stopped: no reply audio for a while before the line ended.
                                b.stopped = b.last_audio.is_none_or(|l| sent.duration_since(l) >= reply_over);
                                s.seen.lock().await.barges.push(b);
                            }
                            turn += 1;
                            Phase::Awaiting(sent)
                        }
                    }
                    Phase::Awaiting(since) if now.duration_since(since).as_secs_f64() > a.reply_timeout => {
                        Phase::Quiet(now + Duration::from_millis(500))
                    }
                    Phase::Hearing { since } => {
                        if barge_turn == Some(turn)
                            && now.duration_since(since) >= Duration::from_millis(a.barge_in_after_ms)
                        {
                            Phase::Speaking { frame: 0, barge: true }
                        } else if let Some(l) = last_audio.filter(|l| now.duration_since(*l) >= reply_over) {
                            let heard = l.duration_since(since).as_millis() as u64;
                            if heard + 300 < reply_ms {
                                cut_short += 1;
                            } else {
                                whole += 1;
                            }
                            Phase::Quiet(now + Duration::from_millis(300 + (c as u64 * 61 + u64::from(turn) * 97) % 500))
                        } else {
                            phase
                        }
                    }
                    other => other,
                };
            }
        }
    }
    {
        let mut seen = s.seen.lock().await;
        seen.turns.extend(turns);
        seen.replies_whole += whole;
        seen.replies_cut_short += cut_short;
    }
    dialog.bye().await
}
