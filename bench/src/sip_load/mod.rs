//! `sip-load`: a SIP user agent load generator. It places calls at a steady rate to one SIP
//! URI over UDP or TCP, streams a WAV file (or a tone) as RTP for the hold time, counts the RTP
//! coming back, hangs up, and reports setup latency, failures by status, RTP figures and the
//! server's CPU and memory over the run (text, JSON and an HTML page with charts).
//!
//! With `--spawn <switchboard binary>` it starts its own server on a temporary database, with an
//! agent and an endpoint, and measures that process.
//!
//! This file runs the load and writes the report; `calls` places each call, `output` builds the
//! report, `args` is the command line.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use switchboard_sip::sdp::Codec;
use tokio::sync::Mutex;

use crate::measure::sample_server;
use crate::progress::Progress;
use crate::spawn::spawn_server;

mod args;
mod calls;
mod output;

pub use args::SipLoadArgs;
use calls::{Shared, Totals, one_call};
use output::{report, scrape_rtp};

/// Runs the load and returns the report.
pub async fn run(mut args: SipLoadArgs) -> anyhow::Result<Value> {
    let codec = Codec::parse(&args.codec).context("--codec: pcmu, pcma or g722")?;
    let mut spawned = None;
    if let Some(bin) = args.spawn.clone() {
        let server = spawn_server(&bin, &[]).await?;
        args.target = Some(server.sip);
        args.slug = Some(server.slug.clone());
        args.server_pid = Some(server.child.id().context("server pid")?);
        spawned = Some(server);
    }
    let target = args.target.context("--target (or --spawn) is required")?;
    let slug = args
        .slug
        .clone()
        .context("--slug (or --spawn) is required")?;
    let audio = match &args.wav {
        Some(path) => crate::measure::load_wav(path, codec.sample_rate())?,
        None => tone(codec.sample_rate()),
    };
    let shared = Arc::new(Shared {
        target,
        slug,
        codec,
        audio,
        totals: Totals::default(),
        latencies: Mutex::new(Vec::new()),
        last_answer: Mutex::new(0.0),
        run_started: Instant::now(),
        failures: Mutex::new(BTreeMap::new()),
        args: args.clone(),
    });
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let live = shared.clone();
    let sampler = tokio::spawn(sample_server(
        args.server_pid,
        move || live.totals.live.load(Ordering::Relaxed),
        samples.clone(),
        started,
    ));
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.001));
    let mut calls = Vec::with_capacity(args.total as usize);
    let mut next = tokio::time::Instant::now();
    let mut progress = Progress::new();
    for i in 0..args.total {
        tokio::time::sleep_until(next).await;
        next += interval;
        let s = shared.clone();
        calls.push(tokio::spawn(async move { one_call(s, i).await }));
        let t = &shared.totals;
        progress.show(
            t.completed.load(Ordering::Relaxed) as i64,
            args.total as i64,
            &format!("live {}", t.live.load(Ordering::Relaxed)),
        );
    }
    for call in calls {
        let _ = call.await;
        let t = &shared.totals;
        progress.show(
            t.completed.load(Ordering::Relaxed) as i64,
            args.total as i64,
            &format!("live {}", t.live.load(Ordering::Relaxed)),
        );
    }
    eprintln!();
    let wall = started.elapsed().as_secs_f64();
    sampler.abort();
    let samples = samples.lock().await.clone();
    let mut server_rtp = Value::Null;
    if let Some(server) = &spawned {
        // The server's own RTP counters, once its calls have recorded their ends.
        tokio::time::sleep(Duration::from_secs(2)).await;
        server_rtp = scrape_rtp(&server.metrics).await.unwrap_or(Value::Null);
    }
    if let Some(mut server) = spawned {
        let _ = server.child.start_kill();
        let _ = server.child.wait().await;
    }
    let mut report = report(&shared, wall, &samples).await;
    report["server_rtp"] = server_rtp;
    if let Some(path) = &args.html {
        let page = crate::measure::html("Switchboard SIP load", &report, &samples, output::CHARTS);
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report)
}

fn tone(rate: u32) -> Vec<i16> {
    crate::measure::tone(rate, 440.0, rate as usize, 8000.0)
}
