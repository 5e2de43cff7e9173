//! `outbound-load`: outbound calls through a SIP trunk, end to end. It starts the release
//! `switchboard serve --carrier sip` on loopback with a fresh store, its default trunk pointing
//! at an answering peer (the bench's own, or SIPp's UAS), sets up a workspace, an agent and
//! calling numbers through the store and the API, and then places calls in real time: directly
//! (`POST /calls` at a rate) or through campaigns the engine paces. It reports the setup rate,
//! post-dial delay, concurrent calls, RTP on both sides, the server's CPU and memory, the
//! outcomes the service recorded against what the peer did, and whether each campaign's pacing
//! held at the far end (text, JSON and an HTML page with charts).
//!
//! Past 600 lines on purpose: the run (setup, sampling, the direct and the campaign drivers,
//! the drain) is one sequence over the same state; the report lives in `output`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;

use crate::measure::round;
use crate::progress::Progress;

mod output;
pub(crate) mod peer;
pub(crate) mod server;
mod sipmsg;
mod sipp;

use crate::greeting;
use peer::{Mix, Peer, PeerConfig};
use server::{Api, Server};

#[derive(clap::Args, Clone)]
pub struct OutboundLoadArgs {
    /// The switchboard binary to start (default: `switchboard` beside this binary).
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// The far end: `bench` (the built-in answering peer) or `sipp` (SIPp's UAS with
    /// -rtp_echo, answering every call: the reference).
    #[arg(long, default_value = "bench", value_parser = ["bench", "sipp"])]
    peer: String,
    /// `direct` (POST /calls at --rate) or `campaigns` (--campaigns campaigns the engine paces).
    #[arg(long, default_value = "direct", value_parser = ["direct", "campaigns"])]
    mode: String,
    /// Direct calls placed per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Seconds to place calls (direct) or to let the campaigns run.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Calls of one second placed and ended before the run (and left out of its figures), so
    /// that the resident memory the run starts from already holds what the service loads once,
    /// on its first calls (number metadata, caches, worker threads).
    #[arg(long, default_value_t = 10)]
    warmup: u64,
    /// Seconds an answered call lasts: the agent's max_call_duration_secs, so the server hangs
    /// up.
    #[arg(long, default_value_t = 10)]
    hold: u64,
    /// What the peer does with calls, by weight: answer (echoes the audio), machine (plays a
    /// greeting), busy (486), no_answer (rings until cancelled).
    #[arg(long, default_value = "answer=70,machine=10,busy=10,no_answer=10")]
    mix: Mix,
    /// Milliseconds the peer rings before it answers.
    #[arg(long, default_value_t = 500)]
    ring_ms: u64,
    /// How long unanswered calls ring, 5-300 s (the service's ring timeout, and
    /// ring_timeout_secs of direct calls).
    #[arg(long, default_value_t = 5)]
    ring_timeout: u64,
    /// Campaigns to run (each calls from its own number).
    #[arg(long, default_value_t = 4)]
    campaigns: usize,
    /// Each campaign's max_in_flight (1-8).
    #[arg(long, default_value_t = 8)]
    max_in_flight: i64,
    /// Each campaign's min_seconds_between_calls.
    #[arg(long, default_value_t = 0)]
    min_gap: i64,
    /// Contacts per campaign (default: more than the run can call).
    #[arg(long)]
    contacts: Option<usize>,
    /// The peer's codec: `pcmu`, `pcma` or `g722` (SIPp answers PCMU).
    #[arg(long, default_value = "pcmu")]
    codec: String,
    /// A mono 16-bit WAV for the machine's greeting (default: espeak-ng, else a synthetic
    /// one).
    #[arg(long)]
    greeting_wav: Option<PathBuf>,
    /// The agent's answering-machine detection: `on` (the service's default; machines become
    /// `voicemail`) or `off`. Default: on with the bench peer, off with SIPp (its echo starts
    /// with silence, which the detection takes for a machine).
    #[arg(long, value_parser = ["on", "off"])]
    amd: Option<String>,
    /// The server's text to speech (`tones`, `espeak`, ...).
    #[arg(long, default_value = "tones")]
    tts: String,
    /// The SIPp binary, for --peer sipp.
    #[arg(long, default_value = "sipp")]
    sipp: PathBuf,
    /// More arguments for `switchboard serve` (repeat; e.g. --server-arg=--sip-t1-ms=200).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// Environment for the server, `NAME=VALUE` (repeat; e.g. MALLOC_ARENA_MAX=2).
    #[arg(long = "server-env")]
    server_env: Vec<String>,
    /// The server's log filter. Its per-call RTP counters come from the dialer's "outbound call
    /// ended" lines at info.
    #[arg(long, default_value = "warn,switchboard_actors::sip_dialer=info")]
    server_log: String,
    /// A JSON report of an earlier run: the main figures are given as ratios to it.
    #[arg(long)]
    reference: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML report with charts here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Keep the server's directory (database, recordings, log) and print where it is.
    #[arg(long)]
    keep: bool,
}

impl OutboundLoadArgs {
    fn amd_on(&self) -> bool {
        self.amd.as_deref() != Some("off")
    }
}

/// The far end in use.
enum Far {
    Bench(Peer),
    Sipp(sipp::Sipp),
}

impl Far {
    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Far::Bench(p) => p.addr,
            Far::Sipp(s) => s.addr,
        }
    }

    /// Calls in flight and calls talking at the far end.
    fn live(&self) -> (i64, i64) {
        use std::sync::atomic::Ordering::Relaxed;
        match self {
            Far::Bench(p) => (
                p.live().in_flight.load(Relaxed),
                p.live().talking.load(Relaxed),
            ),
            Far::Sipp(s) => {
                let n = s.stats()["CurrentCall"].as_f64().unwrap_or(0.0) as i64;
                (n, n)
            }
        }
    }
}

/// One `POST /calls` of the direct mode.
#[derive(Clone)]
struct Placed {
    at: Instant,
    status: u16,
    api_ms: f64,
    call_id: Option<String>,
}

/// What the run drove, for the report.
#[derive(Default)]
struct Drive {
    placed: Vec<Placed>,
    /// Campaign id, its calling number.
    campaigns: Vec<(String, String)>,
    contacts_per_campaign: usize,
    /// Campaigns that ran out of contacts before the end.
    completed_early: usize,
    started: Option<Instant>,
    secs: f64,
}

pub async fn run(mut args: OutboundLoadArgs) -> anyhow::Result<Value> {
    if args.amd.is_none() {
        args.amd = Some(if args.peer == "sipp" { "off" } else { "on" }.into());
    }
    let codec = Codec::parse(&args.codec).context("--codec: pcmu, pcma or g722")?;
    if !(1..=8).contains(&args.max_in_flight) {
        bail!("--max-in-flight must be 1-8 (a campaign's limit)");
    }
    if !(5..=300).contains(&args.ring_timeout) {
        bail!("--ring-timeout must be 5-300");
    }
    raise_fd_limit();
    let bin = match &args.spawn {
        Some(b) => b.clone(),
        None => crate::spawn::default_binary()?,
    };
    let mut greeting_source = Value::Null;
    let far = if args.peer == "sipp" {
        Far::Sipp(sipp::Sipp::start(&args.sipp, args.ring_ms).await?)
    } else {
        let (audio, source) = greeting::samples(codec.sample_rate(), args.greeting_wav.as_deref())?;
        greeting_source = json!(source);
        Far::Bench(Peer::start(PeerConfig {
            ip: "127.0.0.1".parse()?,
            port: 0,
            mix: args.mix.clone(),
            ring: Duration::from_millis(args.ring_ms),
            codec,
            hold_cap: Duration::from_secs(args.hold + 20),
            ring_cap: Duration::from_secs(310),
            greeting: greeting::frames(codec, &audio),
            hello: greeting::frames(codec, &greeting::hello(codec.sample_rate())),
        })?)
    };
    let campaigns = if args.mode == "campaigns" {
        args.campaigns.max(1)
    } else {
        0
    };
    let numbers: Vec<String> = (0..campaigns.max(1))
        .map(|i| format!("+97250{:07}", 1_000_000 + i))
        .collect();
    let server = server::start(server::Launch {
        bin: &bin,
        trunk_to: far.addr(),
        numbers,
        tts: &args.tts,
        log_filter: &args.server_log,
        ring_timeout: args.ring_timeout,
        extra: &args.server_args,
        env: &args.server_env,
    })
    .await?;
    eprintln!(
        "server: pid {}, {}, directory {}; far end: {} at {}",
        server.pid,
        server.base,
        server.dir.path().display(),
        args.peer,
        far.addr()
    );
    let api = server.client();
    let agent = api
        .must(
            Method::POST,
            "/agents",
            Some(&json!({"name": "Outbound bench",
                "greeting_message": "Hello, this is the outbound load test calling. How are you today?",
                "agent_speaks_first": true, "max_call_duration_secs": args.hold.max(1),
                "silence_timeout_secs": 3600,
                "answering_machine_detection": {"enabled": args.amd_on()}})),
        )
        .await?["id"]
        .as_str()
        .context("no agent id")?
        .to_string();

    let warm_agent = if args.warmup > 0 {
        Some(warm_up(&args, &api, &server.numbers[0].1, &far).await?)
    } else {
        None
    };

    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let far = Arc::new(far);
    let sampler = tokio::spawn(sample(far.clone(), server.pid, samples.clone(), started));
    let threads_before = crate::measure::thread_ticks(server.pid);
    let drive = if campaigns > 0 {
        drive_campaigns(&args, &api, &agent, &server, campaigns).await?
    } else {
        drive_direct(&args, &api, &agent, &server.numbers[0].1).await?
    };
    let drive_secs = drive.secs;
    let threads_after = crate::measure::thread_ticks(server.pid);
    eprintln!();
    drain(&args, &api, &far).await;
    let wall = started.elapsed().as_secs_f64();
    sampler.abort();
    let mut records = api.all("/calls?direction=outbound").await?;
    if let Some(warm) = &warm_agent {
        records.retain(|r| r["agent_id"].as_str() != Some(warm));
    }
    let samples = samples.lock().unwrap().clone();
    let server_threads = crate::measure::thread_cpu(&threads_before, &threads_after, drive_secs);
    let far = Arc::try_unwrap(far)
        .ok()
        .context("the far end is still in use")?;
    let (peer_calls, far_ends, shares, sipp_stats) = match far {
        Far::Bench(p) => {
            let calls = p.calls();
            let far_ends = p.far_ends();
            let shares = p.shares();
            p.stop();
            (calls, far_ends, shares, Value::Null)
        }
        Far::Sipp(s) => {
            let stats = s.stop().await;
            let shares = BTreeMap::from([("answer", 1.0)]);
            (Vec::new(), BTreeMap::new(), shares, stats)
        }
    };
    let log = {
        let log = server.log.lock().unwrap();
        // The run's calls only (not the warm-up's).
        let ids: std::collections::HashSet<&str> =
            records.iter().filter_map(|r| r["id"].as_str()).collect();
        server::ServerLog {
            calls: log
                .calls
                .iter()
                .filter(|(id, _)| ids.contains(id.as_str()))
                .map(|(id, c)| (id.clone(), c.clone()))
                .collect(),
            warnings: log.warnings.clone(),
            examples: log.examples.clone(),
        }
    };
    let kept = server.stop(args.keep).await;
    let mut report = output::report(output::Inputs {
        args: &args,
        codec,
        drive: &drive,
        records: &records,
        peer_calls: &peer_calls,
        far_ends: &far_ends,
        shares: &shares,
        sipp: sipp_stats,
        log: &log,
        samples: &samples,
        server_threads,
        wall,
    });
    report["greeting"] = greeting_source;
    if let Some(dir) = kept {
        report["server_dir"] = json!(dir.display().to_string());
    }
    if let Some(path) = &args.reference {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let reference: Value = serde_json::from_str(&text)?;
        report["ratios_to_reference"] = output::ratios(&report, &reference);
    }
    if let Some(path) = &args.html {
        let page = crate::measure::html(
            "Switchboard outbound load",
            &report,
            &samples,
            output::CHARTS,
        );
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    report["samples"] = json!(samples);
    Ok(report)
}

/// Lets this process (and the server it starts, which inherits it) open as many sockets and
/// files as the hard limit allows: each call holds an RTP socket on both sides and a recording.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit read and write the one rlimit struct on this stack frame.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Samples the far end's live calls, the server's CPU and RSS, this process's CPU (the peer's
/// thread apart) and the machine's, every half second.
async fn sample(far: Arc<Far>, server: u32, out: Arc<Mutex<Vec<Value>>>, started: Instant) {
    let mut server_meter = crate::measure::CpuMeter::new(Some(server));
    let me = std::process::id();
    let mut bench_meter = crate::measure::CpuMeter::new(Some(me));
    let sipp_pid = match far.as_ref() {
        Far::Sipp(s) => s.child.id(),
        Far::Bench(_) => None,
    };
    let mut sipp_meter = crate::measure::CpuMeter::new(sipp_pid);
    let mut machine = crate::measure::MachineMeter::default();
    let mut peer_last: Option<(f64, Instant)> = None;
    loop {
        let (cpu, rss) = server_meter.sample();
        let (bench_cpu, _) = bench_meter.sample();
        let (sipp_cpu, _) = sipp_meter.sample();
        let machine_busy = machine.sample();
        let peer_ticks = crate::measure::thread_ticks(me).get("peer").copied();
        let now = Instant::now();
        let peer_cpu = match (peer_ticks, peer_last) {
            (Some(t), Some((t0, at))) => {
                Some((t - t0) / 100.0 / now.duration_since(at).as_secs_f64() * 100.0)
            }
            _ => None,
        };
        if let Some(t) = peer_ticks {
            peer_last = Some((t, now));
        }
        let (in_flight, talking) = far.live();
        out.lock().unwrap().push(json!({
            "t": round(started.elapsed().as_secs_f64()),
            "in_flight": in_flight,
            "talking": talking,
            "server_cpu_percent": cpu.map(round),
            "server_rss_kib": rss,
            "server_rss_anon_kib": crate::measure::rss_anon_kib(server),
            "bench_cpu_percent": bench_cpu.map(round),
            "peer_cpu_percent": peer_cpu.or(sipp_cpu).map(round),
            "machine_busy_percent": machine_busy.map(round),
        }));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `POST /calls` at the rate for the duration, each request on its own task.
async fn drive_direct(
    args: &OutboundLoadArgs,
    api: &Api,
    agent: &str,
    number_id: &str,
) -> anyhow::Result<Drive> {
    let placed = Arc::new(Mutex::new(Vec::new()));
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.001));
    let total = (args.duration * args.rate).round().max(1.0) as u64;
    let started = Instant::now();
    let mut next = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    let mut progress = Progress::new();
    for i in 0..total {
        tokio::time::sleep_until(next).await;
        next += interval;
        let body = json!({"agent_id": agent, "to_number": format!("+97252{:07}", i),
            "from_phone_number_id": number_id, "ring_timeout_secs": args.ring_timeout});
        let api = api.clone();
        let placed = placed.clone();
        tasks.push(tokio::spawn(async move {
            let at = Instant::now();
            let (status, call_id) = api.place_call(&body).await;
            placed.lock().unwrap().push(Placed {
                at,
                status,
                api_ms: at.elapsed().as_secs_f64() * 1000.0,
                call_id,
            });
        }));
        progress.show(i as i64 + 1, total as i64, "calls placed");
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = started.elapsed().as_secs_f64();
    let placed = placed.lock().unwrap().clone();
    Ok(Drive {
        placed,
        started: Some(started),
        secs,
        ..Drive::default()
    })
}

/// Creates a campaign calling from `number_id` at `(max_in_flight, min_seconds_between_calls)`,
/// one attempt per contact, any time of day; answers its id.
pub(crate) async fn create_campaign(
    api: &Api,
    name: &str,
    agent: &str,
    number_id: &str,
    (max_in_flight, min_gap): (i64, i64),
) -> anyhow::Result<String> {
    let created = api
        .must(
            Method::POST,
            "/campaigns",
            Some(
                &json!({"name": name, "agent_id": agent, "from_phone_number_id": number_id,
                "max_in_flight": max_in_flight, "min_seconds_between_calls": min_gap,
                "max_attempts": 1, "max_calls_per_day": 100_000,
                "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
            ),
        )
        .await?;
    Ok(created["id"]
        .as_str()
        .context("no campaign id")?
        .to_string())
}

/// Creates the campaigns (each with its own number), enrolls contacts, launches them, lets
/// them run for the duration and pauses them.
async fn drive_campaigns(
    args: &OutboundLoadArgs,
    api: &Api,
    agent: &str,
    server: &Server,
    campaigns: usize,
) -> anyhow::Result<Drive> {
    // More contacts than the run can call: a slot turns over at most twice a second.
    let contacts = args.contacts.unwrap_or_else(|| {
        let by_gap = if args.min_gap > 0 {
            args.duration / args.min_gap as f64
        } else {
            f64::INFINITY
        };
        let by_slots = args.duration * 2.0 * args.max_in_flight as f64;
        (by_gap.min(by_slots).ceil() as usize + 20).min(100_000)
    });
    let mut ids = Vec::with_capacity(campaigns);
    let mut next_number = 0usize;
    for (c, (number, number_id)) in server.numbers.iter().enumerate().take(campaigns) {
        let pacing = (args.max_in_flight, args.min_gap);
        let name = format!("Outbound bench {c}");
        let id = create_campaign(api, &name, agent, number_id, pacing).await?;
        let mut left = contacts;
        while left > 0 {
            let n = left.min(10_000);
            let batch: Vec<Value> = (0..n)
                .map(|i| json!({"phone_number": format!("+97252{:07}", next_number + i)}))
                .collect();
            next_number += n;
            left -= n;
            api.must(
                Method::POST,
                &format!("/campaigns/{id}/contacts"),
                Some(&json!({"contacts": batch})),
            )
            .await?;
        }
        ids.push((id, number.clone()));
    }
    let started = Instant::now();
    for (id, _) in &ids {
        api.must(Method::POST, &format!("/campaigns/{id}/launch"), None)
            .await?;
    }
    let mut progress = Progress::new();
    let end = started + Duration::from_secs_f64(args.duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(250)).await;
        progress.show(
            (started.elapsed().as_secs_f64() * 10.0) as i64,
            (args.duration * 10.0) as i64,
            "tenths of a second of campaigns",
        );
    }
    let secs = started.elapsed().as_secs_f64();
    let mut completed_early = 0;
    for (id, _) in &ids {
        let (status, v) = api
            .send(Method::POST, &format!("/campaigns/{id}/pause"), None)
            .await?;
        if status == 409 || v["status"] == "completed" {
            completed_early += 1;
        }
    }
    Ok(Drive {
        campaigns: ids,
        contacts_per_campaign: contacts,
        completed_early,
        started: Some(started),
        secs,
        ..Drive::default()
    })
}

/// Waits for the calls under way to end: nothing queued or live at the service and nothing
/// in flight at the far end, or the longest a call can take.
async fn drain(args: &OutboundLoadArgs, api: &Api, far: &Far) {
    let deadline = Instant::now() + Duration::from_secs(args.hold + args.ring_timeout + 30);
    while Instant::now() < deadline {
        let mut open = 0i64;
        for status in ["queued", "dialing", "ringing", "in_progress"] {
            if let Ok((_, v)) = api
                .send(
                    Method::GET,
                    &format!("/calls?status={status}&limit=1"),
                    None,
                )
                .await
            {
                open += v["pagination"]["total"].as_i64().unwrap_or(0);
            }
        }
        let (in_flight, _) = far.live();
        eprint!("\rdraining: {open} calls open at the service, {in_flight} at the far end     ");
        if open == 0 && in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!();
    // The server writes a call's end after its BYE; give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// Places `--warmup` calls of one second, waits for their end and clears the far end's
/// record of them; the warm-up agent's id, to leave its calls out of the report.
async fn warm_up(
    args: &OutboundLoadArgs,
    api: &Api,
    number_id: &str,
    far: &Far,
) -> anyhow::Result<String> {
    let agent = api
        .must(
            Method::POST,
            "/agents",
            Some(&json!({"name": "Warm-up", "greeting_message": "Hello.",
                "agent_speaks_first": true, "max_call_duration_secs": 1,
                "answering_machine_detection": {"enabled": false}})),
        )
        .await?["id"]
        .as_str()
        .context("no agent id")?
        .to_string();
    let mut ids = Vec::new();
    for i in 0..args.warmup {
        let body = json!({"agent_id": agent, "to_number": format!("+97253{:07}", i),
            "from_phone_number_id": number_id, "ring_timeout_secs": args.ring_timeout});
        let call = api.must(Method::POST, "/calls", Some(&body)).await?;
        ids.push(call["id"].as_str().context("no call id")?.to_string());
    }
    let deadline = Instant::now() + Duration::from_secs(args.ring_timeout + 30);
    for id in &ids {
        loop {
            let call = api.must(Method::GET, &format!("/calls/{id}"), None).await?;
            if call["status"] == "ended" {
                break;
            }
            if Instant::now() > deadline {
                bail!("warm-up call {id} did not end: {call}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    while far.live().0 > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if let Far::Bench(peer) = far {
        peer.forget();
    }
    eprintln!("warm-up: {} calls placed and ended", ids.len());
    Ok(agent)
}

/// Call ids to when their `POST /calls` was sent.
fn placed_at(drive: &Drive) -> HashMap<&str, Instant> {
    drive
        .placed
        .iter()
        .filter_map(|p| Some((p.call_id.as_deref()?, p.at)))
        .collect()
}
