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
//!
//! This file runs the steps in order (the stand-ins, the server and its agents, the idle
//! baseline, the calls, the report); `caller` is each call's side, `args` the command line.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use switchboard_sip::media::workers::Workers;

use crate::measure::{CpuMeter, sample_server, thread_cpu, thread_ticks};
use crate::progress::Progress;
use crate::spawn::Spawned;

mod args;
mod caller;
mod echo;
mod inside;
mod report;
mod sweep;
mod turns;
mod vendors;

pub use args::ConverseArgs;
use caller::{Seen, Shared, Totals, one_call};
use report::{Measured, report};
use vendors::{Latencies, StandIn};

/// Endpoints the calls take turns on.
const ENDPOINTS: usize = 10;

/// What the caller says each turn (when espeak-ng is installed).
const LINE: &str = "I would like to book a table for two people tomorrow evening";

/// Runs the benchmark once per `--sweep` point, with its chart.
pub async fn sweep(args: ConverseArgs) -> anyhow::Result<Value> {
    sweep::run(args, run).await
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
    let stand_in = StandIn::start(latencies(&args)).await?;
    let (line, made_by) = caller_line(args.wav.as_deref())?;
    let frames = encode_line(&line)?;
    let mut server = start_server(&bin, &stand_in.base_url, args.calls).await?;
    let pid = server.child.id().context("server pid")?;
    let endpoints = args.calls.min(ENDPOINTS);
    let (agents, routes) = agents_and_endpoints(&server, &args, endpoints).await?;
    let (base_cpu, base_rss) = idle_baseline(pid, args.baseline_secs).await;
    let shared = Arc::new(Shared {
        target: server.sip,
        speech: frames.speech,
        speech_pcm: frames.speech_pcm,
        silence: frames.silence,
        totals: Totals::default(),
        seen: Mutex::new(Seen::default()),
        media: Workers::start("bench-media", 0)?,
        args: args.clone(),
    });
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let live = shared.clone();
    let sampler = tokio::spawn(sample_server(
        Some(pid),
        move || live.totals.live.load(Ordering::Relaxed),
        samples.clone(),
        started,
    ));
    let mut me = CpuMeter::new(Some(std::process::id()));
    me.sample();
    let (scrape_before, threads_before) =
        (inside::scrape(&server.metrics).await, thread_ticks(pid));
    let calls = place_calls(&shared, &server, &agents, &routes).await?;
    wait_for_calls(&shared, calls).await;
    let wall = started.elapsed().as_secs_f64();
    let (bench_cpu, _) = me.sample();
    let inside = inside::figures(&scrape_before, &inside::scrape(&server.metrics).await, wall);
    let threads = thread_cpu(&threads_before, &thread_ticks(pid), wall);
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
        inside,
        threads,
    };
    Ok(report(&args, seen, &records, samples, measured))
}

/// The stand-in vendors' latencies the arguments set.
fn latencies(args: &ConverseArgs) -> Latencies {
    Latencies {
        stt: Duration::from_millis(args.stt_ms),
        llm: Duration::from_millis(args.llm_ms),
        chunk: Duration::from_millis(args.llm_chunk_ms),
        tts: Duration::from_millis(args.tts_ms),
        speech_secs: args.sentence_secs,
        spread: Duration::from_millis(args.vendor_spread_ms),
    }
}

/// The caller's line in 20 ms PCMU frames.
struct Frames {
    /// Encoded, and as audio.
    speech: Vec<Vec<u8>>,
    speech_pcm: Vec<Vec<i16>>,
    /// A frame of silence, encoded.
    silence: Vec<u8>,
}

/// The caller's line in 20 ms PCMU frames, and a frame of silence.
fn encode_line(line: &[i16]) -> anyhow::Result<Frames> {
    let codec = Codec::Pcmu;
    let speech = crate::greeting::frames(codec, line);
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
    Ok(Frames {
        speech,
        speech_pcm,
        silence,
    })
}

/// Starts the server with the stand-ins at `base` as its speech to text, chat model and speech,
/// with room for `calls` inbound calls at once: no share of the node kept for outbound calls
/// (`--sip-outbound-reserve 0`, the bench places none) and `--node-capacity` at least `calls`.
async fn start_server(bin: &PathBuf, base: &str, calls: usize) -> anyhow::Result<Spawned> {
    let mut flags: Vec<String> = ["--tts", "openai", "--tts-url", base, "--tts-model", "bench"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (kind, model) in [("llm", "bench-chat"), ("stt", "bench-transcribe")] {
        flags.extend([
            format!("--{kind}-url"),
            base.to_string(),
            format!("--{kind}-api-key"),
            "bench".into(),
            format!("--{kind}-model"),
            model.into(),
        ]);
    }
    // Below the ephemeral range, where the callers' media sockets are.
    flags.extend(["--rtp-ports".into(), "20000-31999".into()]);
    flags.extend([
        "--sip-outbound-reserve".into(),
        "0".into(),
        "--node-capacity".into(),
        calls.max(1000).to_string(),
    ]);
    crate::spawn::spawn_switchboard(bin, &flags).await
}

/// The server's CPU and RSS after `secs` idle.
async fn idle_baseline(pid: u32, secs: f64) -> (Option<f64>, Option<f64>) {
    let mut meter = CpuMeter::new(Some(pid));
    meter.sample();
    tokio::time::sleep(Duration::from_secs_f64(secs.max(0.5))).await;
    meter.sample()
}

/// Places the calls over the ramp, each on the next endpoint in turn: once a call's earlier
/// user of that endpoint is answered, the endpoint is pointed at the call's own agent.
async fn place_calls(
    shared: &Arc<Shared>,
    server: &Spawned,
    agents: &[String],
    routes: &[(String, String)],
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let args = &shared.args;
    let endpoints = routes.len();
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
    Ok(calls)
}

/// Waits for the calls to end, with the progress bar.
async fn wait_for_calls(shared: &Shared, calls: Vec<JoinHandle<()>>) {
    let mut progress = Progress::new();
    let show = |progress: &mut Progress| {
        let t = &shared.totals;
        progress.show(
            t.done.load(Ordering::Relaxed) as i64,
            shared.args.calls as i64,
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
}

/// One agent per call, and the endpoints the calls take turns on (the first calls' agents
/// are the endpoints' own; the others' are created alone and pointed to when their call comes).
async fn agents_and_endpoints(
    server: &Spawned,
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
