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
//!
//! This file runs the modes and reports them; `measure` runs one measured flood, `sipp` the
//! caller, `watch` and `timeline` sample the server and read the samples, `outbound` places
//! outbound calls beside the flood, and `args` is the command line.

use anyhow::bail;
use serde_json::{Value, json};

use crate::measure::{round, spread};

mod args;
mod measure;
mod outbound;
mod sipp;
mod timeline;
mod watch;

pub use args::OverloadArgs;
use measure::{Plan, measure};
use sipp::Audio;
use watch::Sample;

/// Runs the benchmark and returns the report.
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
