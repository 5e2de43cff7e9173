//! `overload`: SIPp's built-in `uac` scenario as the caller against a spawned server, at the rate
//! it sustains and far past it. Each run starts a fresh server (sip-load's `--spawn` set-up: a
//! temporary database, an agent that never hangs up by itself and an endpoint), warms it up,
//! measures it idle, runs SIPp and keeps sampling after SIPp is done.
//!
//! - `--find-sustainable`: short runs at rising rates until a run has a failed call or an INVITE
//!   or BYE retransmission (or SIPp cannot place the calls at the rate), then halves the gap to
//!   the last clean rate; reports the highest clean rate.
//! - otherwise one flood: `--rate` for `--secs`, with goodput as a share of `--sustainable`,
//!   refusals and failures, the setup time of admitted calls, the API's latency meanwhile, the
//!   seconds until the server's CPU is quiet again and its memory before, at the peak and
//!   `--after-secs` after the flood.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::measure::round;
use crate::measure::{spread, thread_cpu, thread_ticks};

mod outbound;
mod sipp;
mod timeline;
mod watch;

use sipp::{Audio, Load, Outcome, Sipp};
use watch::Sample;

#[derive(clap::Args, Clone)]
pub struct OverloadArgs {
    /// The switchboard binary to run (default: the one beside this bench).
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// More arguments for `switchboard serve` (repeat; e.g. --server-arg=--sip-t1-ms=200).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// The SIPp binary.
    #[arg(long, default_value = "sipp")]
    sipp: PathBuf,
    /// More arguments for SIPp (repeat; e.g. --sipp-arg=-max_sched_loops --sipp-arg=5000).
    #[arg(long = "sipp-arg", allow_hyphen_values = true)]
    sipp_args: Vec<String>,
    /// Step the rate up with short runs and report the highest with no failed call and no
    /// INVITE or BYE retransmission.
    #[arg(long)]
    find_sustainable: bool,
    /// New calls per second (the flood's rate).
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// Seconds of new calls.
    #[arg(long, default_value_t = 30.0)]
    secs: f64,
    /// The sustainable rate, for the goodput's share of it.
    #[arg(long)]
    sustainable: Option<f64>,
    /// How long each call lasts before SIPp's BYE, in ms (SIPp's -d).
    #[arg(long, default_value_t = 1000)]
    hold_ms: u64,
    /// Hold each call for this many calls to be up at once at --rate (sets --hold-ms).
    #[arg(long)]
    concurrent: Option<u64>,
    /// `none` (the server's audio goes unanswered), `echo` (SIPp echoes it back, -rtp_echo) or
    /// `pcap` (the built-in uac_pcap scenario plays G.711; calls last about 9 s).
    #[arg(long, default_value = "none")]
    audio: String,
    /// Seconds to keep sampling after the flood's last new call.
    #[arg(long, default_value_t = 30.0)]
    after_secs: f64,
    /// Calls placed (20 a second) before measuring, so the figures start from a server that has
    /// loaded what it loads once.
    #[arg(long, default_value_t = 20)]
    warmup_calls: u64,
    /// Seconds of idle server measured before each run.
    #[arg(long, default_value_t = 2.0)]
    idle_secs: f64,
    /// The server counts as quiet again when its CPU stays at or below the larger of this (percent
    /// of one core) and 1.5 times its idle CPU, for a second.
    #[arg(long, default_value_t = 5.0)]
    quiet_cpu: f64,
    /// Milliseconds between API probes (`GET /calls?limit=1`).
    #[arg(long, default_value_t = 100)]
    probe_ms: u64,
    /// --find-sustainable: the first rate, the step up, the highest rate tried and the seconds
    /// of each run.
    #[arg(long, default_value_t = 100.0)]
    start_rate: f64,
    #[arg(long, default_value_t = 100.0)]
    step: f64,
    #[arg(long, default_value_t = 5000.0)]
    max_rate: f64,
    #[arg(long, default_value_t = 10.0)]
    step_secs: f64,
    /// Outbound calls a second placed through the API while the flood runs (and for a few
    /// seconds before it), over a trunk to the bench's answering peer: 0 places none.
    #[arg(long, default_value_t = 0.0)]
    pub outbound_rate: f64,
    /// Seconds each of those outbound calls lasts (the agent hangs up).
    #[arg(long, default_value_t = 5)]
    pub outbound_hold: u64,
    /// Also run a campaign to the same peer (8 calls at a time, each lasting --outbound-hold
    /// seconds), launched a few seconds before the flood and paused when it ends: its calls a
    /// second and how soon a freed slot is taken again, before and during the flood.
    #[arg(long)]
    pub campaign: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One measured run: what SIPp saw, and the samples around it.
struct Measured {
    outcome: Outcome,
    samples: Vec<Sample>,
    /// On the run's clock (seconds since the server started): SIPp's start, its last new call
    /// and its exit.
    start: f64,
    flood_end: f64,
    exit: f64,
    idle_cpu: Option<f64>,
    api: Vec<watch::Probe>,
    metrics_before: Value,
    metrics_after: Value,
    /// Inbound calls the server still held up when sampling ended.
    open_calls_after: Option<u64>,
    threads_flood: Value,
    threads_after: Value,
    /// The outbound calls placed before and during the flood (`--outbound-rate`).
    outbound: Value,
}

/// The rate and length of one run.
struct Plan {
    rate: f64,
    secs: f64,
    /// Seconds to sample after the last new call (0: until SIPp is done).
    after: f64,
}

pub async fn run(args: OverloadArgs) -> anyhow::Result<Value> {
    let bin = match &args.spawn {
        Some(bin) => bin.clone(),
        None => crate::spawn::default_binary()?,
    };
    let mut args = args;
    args.spawn = Some(bin);
    let audio = Audio::parse(&args.audio)?;
    if let Some(n) = args.concurrent {
        if audio == Audio::Pcap {
            bail!("--concurrent sets the hold, which uac_pcap's calls do not have: use --rate");
        }
        args.hold_ms = (n as f64 * 1000.0 / args.rate.max(0.001)).round() as u64;
    }
    if args.find_sustainable {
        find_sustainable(&args, audio).await
    } else {
        flood(&args, audio).await
    }
}

async fn flood(args: &OverloadArgs, audio: Audio) -> anyhow::Result<Value> {
    let plan = Plan {
        rate: args.rate,
        secs: args.secs,
        after: args.after_secs,
    };
    eprintln!(
        "flood: {} calls/s for {} s, calls of {} ms, audio {}",
        plan.rate,
        plan.secs,
        audio.call_ms(args.hold_ms),
        args.audio
    );
    let m = measure(args, audio, &plan).await?;
    let o = &m.outcome;
    let flood_secs = o
        .offer_ended
        .map(|e| e - o.started)
        .unwrap_or(m.flood_end - m.start)
        .max(0.001);
    let goodput = o.successful as f64 / flood_secs;
    let threshold = quiet_threshold(args, m.idle_cpu);
    let quiet = timeline::quiet_from(&m.samples, m.flood_end, threshold, 1.0);
    let recovery = quiet.map(|q| q - m.flood_end);
    let (rss_before, rss_peak, rss_after) =
        timeline::rss(&m.samples, m.start, m.flood_end + args.after_secs);
    let (anon_before, anon_peak, anon_after) =
        timeline::rss_anon(&m.samples, m.start, m.flood_end + args.after_secs);
    let rss_ratio = match (rss_before, rss_after) {
        (Some(b), Some(a)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let share = args.sustainable.map(|s| goodput / s.max(0.001));
    let mut setup = o.setup_ms.clone();
    let api = watch::api_report(&m.api);
    let cpu = |f: fn(&Sample) -> Option<f64>| {
        timeline::mean(&m.samples, m.start, m.flood_end, f).map(round)
    };
    let retransmissions = o.invite_retransmissions + o.bye_retransmissions;
    let samples: Vec<Value> = m.samples.iter().map(Sample::json).collect();
    let calls = json!({
        "benchmark": "overload",
        "mode": "flood",
        "scenario": scenario_name(audio),
        "audio": args.audio,
        "rate_per_sec": args.rate,
        "secs": args.secs,
        "call_ms": audio.call_ms(args.hold_ms),
        "calls_offered": o.offered,
        "flood_secs": round(flood_secs),
        "offered_per_sec": round(o.offered as f64 / flood_secs),
        "successful": o.successful,
        "goodput_per_sec": round(goodput),
        "sustainable_per_sec": args.sustainable,
        "goodput_share_of_sustainable": share.map(round),
        "failed": o.failed,
        "failed_by_cause": o.failed_by_cause,
        "refused_by_code": o.refused_by_code,
        "invite_retransmissions": o.invite_retransmissions,
        "invite_timeouts": o.invite_timeouts,
        "bye_retransmissions": o.bye_retransmissions,
        "bye_timeouts": o.bye_timeouts,
        "retransmissions_all_messages": o.retransmissions,
        "unexpected_responses": o.unexpected,
        "setup_ms_admitted": spread(&mut setup),
        "outbound": m.outbound,
    });
    let server = json!({
        "api_during_flood": api,
        "server_cpu_idle_percent": m.idle_cpu.map(round),
        "server_cpu_flood_percent": cpu(|s| s.cpu_percent),
        "sipp_cpu_flood_percent": cpu(|s| s.sipp_cpu_percent),
        "machine_busy_flood_percent": cpu(|s| s.machine_percent),
        "quiet_threshold_cpu_percent": round(threshold),
        "recovery_secs": recovery.map(round),
        "server_cpu_after_percent": timeline::mean(&m.samples, m.flood_end + args.after_secs - 5.0,
            m.flood_end + args.after_secs, |s| s.cpu_percent).map(round),
        "rss_before_mib": rss_before.map(round),
        "rss_peak_mib": round(rss_peak),
        "rss_after_mib": rss_after.map(round),
        "rss_after_secs": args.after_secs,
        "rss_after_to_before": rss_ratio.map(round),
        "rss_anon_before_mib": anon_before.map(round),
        "rss_anon_peak_mib": round(anon_peak),
        "rss_anon_after_mib": anon_after.map(round),
        "server_cpu_by_thread_flood": m.threads_flood,
        "server_cpu_by_thread_after": m.threads_after,
        "metrics_before": m.metrics_before,
        "metrics_after": m.metrics_after,
        "open_calls_after": m.open_calls_after,
        "sipp_exit_after_flood_secs": round(m.exit - m.flood_end),
        "goals": {
            "no_invite_or_bye_retransmissions": retransmissions == 0,
            "goodput_at_least_90_percent": share.map(|s| s >= 0.9),
            "recovery_under_5_secs": recovery.is_some_and(|r| r < 5.0),
            "rss_after_within_1_5x": rss_ratio.map(|r| r <= 1.5),
        },
        "samples": samples,
    });
    let mut report = calls;
    if let (Value::Object(r), Value::Object(more)) = (&mut report, server) {
        r.extend(more);
    }
    Ok(report)
}

/// Short runs at rising rates; then halves the gap between the last clean rate and the first
/// one that was not, down to a quarter step.
async fn find_sustainable(args: &OverloadArgs, audio: Audio) -> anyhow::Result<Value> {
    let mut steps = Vec::new();
    let mut good: Option<f64> = None;
    let mut bad: Option<f64> = None;
    let mut rate = args.start_rate;
    eprintln!(
        "{:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "rate", "offered", "ok", "failed", "inv_rtx", "bye_rtx", "setup_p99", "cpu_%", "verdict"
    );
    loop {
        let plan = Plan {
            rate,
            secs: args.step_secs,
            after: 0.0,
        };
        let m = measure(args, audio, &plan).await?;
        let o = &m.outcome;
        let calls = (rate * args.step_secs).round() as u64;
        let flood_secs = o.offer_ended.map(|e| e - o.started).unwrap_or(f64::MAX);
        // SIPp could not place the calls at the rate: the generator is the limit.
        let kept_pace = o.offered >= calls && flood_secs <= args.step_secs * 1.05 + 0.5;
        let clean = o.successful >= calls
            && o.failed == 0
            && o.invite_retransmissions == 0
            && o.bye_retransmissions == 0;
        let mut setup = o.setup_ms.clone();
        let setup = spread(&mut setup);
        let cpu = timeline::mean(&m.samples, m.start, m.flood_end, |s| s.cpu_percent);
        let verdict = match (clean, kept_pace) {
            (true, true) => "clean",
            (_, false) => "sipp-slow",
            (false, true) => "failing",
        };
        eprintln!(
            "{:>8} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9.0} {:>8}",
            rate,
            o.offered,
            o.successful,
            o.failed,
            o.invite_retransmissions,
            o.bye_retransmissions,
            setup["p99"],
            cpu.unwrap_or(0.0),
            verdict
        );
        steps.push(json!({
            "rate_per_sec": rate,
            "calls": calls,
            "offered": o.offered,
            "successful": o.successful,
            "failed": o.failed,
            "failed_by_cause": o.failed_by_cause,
            "refused_by_code": o.refused_by_code,
            "invite_retransmissions": o.invite_retransmissions,
            "bye_retransmissions": o.bye_retransmissions,
            "setup_ms": setup,
            "server_cpu_percent": cpu.map(round),
            "machine_busy_percent": timeline::mean(&m.samples, m.start, m.flood_end,
                |s| s.machine_percent).map(round),
            "verdict": verdict,
        }));
        if !kept_pace {
            break;
        }
        if clean {
            good = Some(rate);
        } else {
            bad = Some(rate);
        }
        rate = match (good, bad) {
            (_, None) if rate + args.step <= args.max_rate => rate + args.step,
            (_, None) => break,
            (Some(g), Some(b)) if b - g > args.step / 4.0 + 1e-9 => ((g + b) / 2.0).round(),
            (None, Some(b)) if b > args.step / 4.0 => (b / 2.0).round(),
            _ => break,
        };
    }
    Ok(json!({
        "benchmark": "overload",
        "mode": "find-sustainable",
        "scenario": scenario_name(audio),
        "audio": args.audio,
        "call_ms": audio.call_ms(args.hold_ms),
        "secs_per_step": args.step_secs,
        "sustainable_per_sec": good,
        "first_failing_per_sec": bad,
        "steps": steps,
    }))
}

fn scenario_name(audio: Audio) -> &'static str {
    match audio {
        Audio::Pcap => "uac_pcap",
        _ => "uac",
    }
}

/// The CPU (percent of one core) at or below which the server counts as quiet.
fn quiet_threshold(args: &OverloadArgs, idle: Option<f64>) -> f64 {
    args.quiet_cpu.max(1.5 * idle.unwrap_or(0.0))
}

/// Starts a fresh server, warms it up, measures it idle, runs SIPp at the plan's rate while
/// probing the API, and samples until `plan.after` seconds past the last new call.
async fn measure(args: &OverloadArgs, audio: Audio, plan: &Plan) -> anyhow::Result<Measured> {
    let bin = args.spawn.as_ref().context("server binary")?;
    let mut server_args = args.server_args.clone();
    let peer = if args.outbound_rate > 0.0 || args.campaign {
        let (peer, flags) = outbound::start_peer(args.outbound_hold)?;
        server_args.splice(0..0, flags);
        Some(peer)
    } else {
        None
    };
    let mut server = crate::spawn::spawn_server(bin, &server_args).await?;
    let outbound = match peer {
        Some(peer) => Some(outbound::Outbound::prepare(peer, &server, args.outbound_hold).await?),
        None => None,
    };
    let pid = server.child.id().context("server pid")?;
    eprintln!("server pid {pid} (for a profiler)");
    let started = Instant::now();
    let epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)?
        .as_secs_f64();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let sipp_pid = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(watch::sample(
        pid,
        sipp_pid.clone(),
        samples.clone(),
        started,
        stop.clone(),
    ));
    let load = |rate: f64, calls: u64, timeout_secs: u64| Load {
        bin: &args.sipp,
        target: server.sip,
        slug: &server.slug,
        rate,
        calls,
        hold_ms: args.hold_ms,
        audio,
        timeout_secs,
        extra: &args.sipp_args,
    };
    if args.warmup_calls > 0 {
        let warm = Load {
            audio: Audio::None,
            hold_ms: 200,
            ..load(20.0, args.warmup_calls, 60)
        };
        let warm = Sipp::start(&warm).await?;
        warm.finish().await?;
    }
    let idle_from = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs_f64(args.idle_secs.max(0.5))).await;
    let idle_cpu = timeline::mean(
        &samples.lock().expect("samples"),
        idle_from + 0.3,
        f64::MAX,
        |s| s.cpu_percent,
    );
    let metrics_before = watch::scrape_metrics(&server.metrics).await;
    let calls = (plan.rate * plan.secs).round().max(1.0) as u64;
    let call_secs = audio.call_ms(args.hold_ms) as f64 / 1000.0;
    // Room for SIPp's INVITE timeouts (about 32 s after the last new call) in a flood; a step of
    // the search needs only its calls' own time.
    let grace = if plan.after > 0.0 { 40.0 } else { 5.0 };
    let timeout = (plan.secs * 1.2 + call_secs + grace).ceil() as u64;
    let flooding = Arc::new(AtomicBool::new(false));
    let placing_stop = Arc::new(AtomicBool::new(false));
    let placing = outbound
        .as_ref()
        .filter(|_| args.outbound_rate > 0.0)
        .map(|o| o.place(args.outbound_rate, flooding.clone(), placing_stop.clone()));
    let campaign = match outbound.as_ref().filter(|_| args.campaign) {
        Some(o) => Some(o.launch_campaign(args.outbound_hold).await?),
        None => None,
    };
    if outbound.is_some() {
        // Calls placed before the flood: the reference for those placed during it (for a
        // campaign, two rounds of its calls ending and the next ones starting).
        let lead = if args.campaign {
            2 * args.outbound_hold + 3
        } else {
            3
        };
        tokio::time::sleep(Duration::from_secs(lead)).await;
    }
    let threads0 = thread_ticks(pid);
    let start = started.elapsed().as_secs_f64();
    let flood_at = Instant::now();
    flooding.store(true, Ordering::Relaxed);
    let caller = Sipp::start(&load(plan.rate, calls, timeout)).await?;
    sipp_pid.store(caller.child.id().unwrap_or(0), Ordering::Relaxed);
    let api_stop = Arc::new(AtomicBool::new(false));
    let prober = tokio::spawn(watch::probe_api(
        server.http.clone(),
        server.key.clone(),
        Duration::from_millis(args.probe_ms.max(1)),
        api_stop.clone(),
    ));
    let outcome = caller.finish().await?;
    placing_stop.store(true, Ordering::Relaxed);
    let flood_over = Instant::now();
    if let (Some(o), Some(id)) = (&outbound, &campaign) {
        o.pause_campaign(id).await;
    }
    let exit = started.elapsed().as_secs_f64();
    api_stop.store(true, Ordering::Relaxed);
    let threads1 = thread_ticks(pid);
    let flood_end = outcome
        .offer_ended
        .map(|e| e - epoch)
        .filter(|t| *t > start && *t <= exit)
        .unwrap_or(exit);
    let api = prober.await.unwrap_or_default();
    let until = (flood_end + plan.after).max(exit + 0.5);
    let now = started.elapsed().as_secs_f64();
    if until > now {
        tokio::time::sleep(Duration::from_secs_f64(until - now)).await;
    }
    // The samples at `until` are taken before the bench's own requests below: listing the
    // open calls reads the whole calls table, which the server's memory would show.
    tokio::time::sleep(watch::SAMPLE_EVERY * 2).await;
    let end = started.elapsed().as_secs_f64();
    let threads2 = thread_ticks(pid);
    let metrics_after = watch::scrape_metrics(&server.metrics).await;
    let open_calls_after = watch::open_calls(&server.http, &server.key, 50_000).await;
    let outbound = match outbound {
        Some(o) => {
            let placed = match placing {
                Some(placing) => Some(placing.await.unwrap_or_default()),
                None => None,
            };
            let flood = flood_at..flood_over;
            o.report(placed, campaign.map(|id| (id, flood))).await
        }
        None => Value::Null,
    };
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    let samples = samples.lock().expect("samples").clone();
    Ok(Measured {
        outcome,
        samples,
        start,
        flood_end,
        exit,
        idle_cpu,
        api,
        metrics_before,
        metrics_after,
        open_calls_after,
        threads_flood: json!(thread_cpu(&threads0, &threads1, exit - start)),
        threads_after: json!(thread_cpu(&threads1, &threads2, end - exit)),
        outbound,
    })
}
