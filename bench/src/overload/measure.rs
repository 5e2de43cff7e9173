//! One measured run: a fresh server under watch, warmed up and measured idle; then SIPp's flood
//! at the plan's rate while the API is probed (and outbound calls are placed beside it when
//! asked); then the samples until the plan's time after the flood.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::args::OverloadArgs;
use super::outbound::{self, Outbound, Placed};
use super::sipp::{Audio, Load, Outcome, Sipp};
use super::timeline;
use super::watch::{self, Probe, Sample};
use crate::measure::{thread_cpu, thread_ticks};
use crate::spawn::Spawned;

/// One measured run: what SIPp saw, and the samples around it.
pub(super) struct Measured {
    pub(super) outcome: Outcome,
    pub(super) samples: Vec<Sample>,
    /// On the run's clock (seconds since the server started): SIPp's start, its last new call
    /// and its exit.
    pub(super) start: f64,
    pub(super) flood_end: f64,
    pub(super) exit: f64,
    pub(super) idle_cpu: Option<f64>,
    pub(super) api: Vec<Probe>,
    pub(super) metrics_before: Value,
    pub(super) metrics_after: Value,
    /// Inbound calls the server still held up when sampling ended.
    pub(super) open_calls_after: Option<u64>,
    pub(super) threads_flood: Value,
    pub(super) threads_after: Value,
    /// The outbound calls placed before and during the flood (`--outbound-rate`).
    pub(super) outbound: Value,
}

/// The rate and length of one run.
pub(super) struct Plan {
    pub(super) rate: f64,
    pub(super) secs: f64,
    /// Seconds to sample after the last new call (0: until SIPp is done).
    pub(super) after: f64,
}

/// Starts a fresh server, warms it up, measures it idle, runs SIPp at the plan's rate while
/// probing the API, and samples until `plan.after` seconds past the last new call.
pub(super) async fn measure(
    args: &OverloadArgs,
    audio: Audio,
    plan: &Plan,
) -> anyhow::Result<Measured> {
    let mut watched = watch_fresh_server(args).await?;
    if args.warmup_calls > 0 {
        let warm = Load {
            audio: Audio::None,
            hold_ms: 200,
            ..watched.load(args, audio, 20.0, args.warmup_calls, 60)
        };
        let warm = Sipp::start(&warm).await?;
        warm.finish().await?;
    }
    let (idle_cpu, metrics_before) = idle(args, &watched).await;
    let beside = start_beside(args, &watched).await?;
    let flood = flood(args, audio, plan, &watched, &beside).await?;
    let after = after_flood(plan, &watched, &flood).await;
    let outbound = match watched.outbound.take() {
        Some(o) => {
            let placed = match beside.placing {
                Some(placing) => Some(placing.await.unwrap_or_default()),
                None => None,
            };
            o.report(placed, beside.campaign.map(|id| (id, flood.span)))
                .await
        }
        None => Value::Null,
    };
    let samples = watched.stop().await;
    Ok(Measured {
        outcome: flood.outcome,
        samples,
        start: flood.start,
        flood_end: flood.flood_end,
        exit: flood.exit,
        idle_cpu,
        api: flood.api,
        metrics_before,
        metrics_after: after.metrics,
        open_calls_after: after.open_calls,
        threads_flood: json!(thread_cpu(
            &flood.threads_before,
            &flood.threads_after,
            flood.exit - flood.start
        )),
        threads_after: json!(thread_cpu(
            &flood.threads_after,
            &after.threads,
            after.end - flood.exit
        )),
        outbound,
    })
}

/// A fresh server under watch: the process, the outbound side's set-up (when asked), and the
/// sampler, on the run's clock.
struct Watched {
    server: Spawned,
    pid: u32,
    outbound: Option<Outbound>,
    /// The run's clock, and the Unix time when it started.
    started: Instant,
    epoch: f64,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// SIPp's pid once it runs, for the sampler.
    sipp_pid: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<()>,
}

/// Starts the server (with the answering peer as its trunk, for outbound calls) and the
/// sampler.
async fn watch_fresh_server(args: &OverloadArgs) -> anyhow::Result<Watched> {
    let bin = args.spawn.as_ref().context("server binary")?;
    let mut server_args = args.server_args.clone();
    let peer = if args.outbound_rate > 0.0 || args.campaign {
        let (peer, flags) = outbound::start_peer(args.outbound_hold)?;
        server_args.splice(0..0, flags);
        Some(peer)
    } else {
        None
    };
    let server = crate::spawn::spawn_server(bin, &server_args).await?;
    let outbound = match peer {
        Some(peer) => Some(Outbound::prepare(peer, &server, args.outbound_hold).await?),
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
    Ok(Watched {
        server,
        pid,
        outbound,
        started,
        epoch,
        samples,
        sipp_pid,
        stop,
        sampler,
    })
}

impl Watched {
    /// SIPp's load on this server: `rate` calls a second, `calls` in all.
    fn load<'a>(
        &'a self,
        args: &'a OverloadArgs,
        audio: Audio,
        rate: f64,
        calls: u64,
        timeout_secs: u64,
    ) -> Load<'a> {
        Load {
            bin: &args.sipp,
            target: self.server.sip,
            slug: &self.server.slug,
            rate,
            calls,
            hold_ms: args.hold_ms,
            audio,
            timeout_secs,
            extra: &args.sipp_args,
        }
    }

    /// Seconds on the run's clock.
    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Stops the sampler and the server; answers the samples.
    async fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.sampler.await;
        let _ = self.server.child.start_kill();
        let _ = self.server.child.wait().await;
        self.samples.lock().expect("samples").clone()
    }
}

/// The server idle for `--idle-secs`: its mean CPU, and its metrics.
async fn idle(args: &OverloadArgs, watched: &Watched) -> (Option<f64>, Value) {
    let idle_from = watched.now();
    tokio::time::sleep(Duration::from_secs_f64(args.idle_secs.max(0.5))).await;
    let idle_cpu = timeline::mean(
        &watched.samples.lock().expect("samples"),
        idle_from + 0.3,
        f64::MAX,
        |s| s.cpu_percent,
    );
    let metrics_before = watch::scrape_metrics(&watched.server.metrics).await;
    (idle_cpu, metrics_before)
}

/// The outbound calls placed beside the flood (`--outbound-rate`, `--campaign`).
struct Beside {
    /// Set when the flood starts, so each call placed knows whether it came during it.
    flooding: Arc<AtomicBool>,
    /// Stops the placing when the flood is over.
    placing_stop: Arc<AtomicBool>,
    placing: Option<JoinHandle<Vec<Placed>>>,
    /// The campaign's id.
    campaign: Option<String>,
}

/// Starts placing outbound calls and launches the campaign, as asked, and lets them run a
/// while before the flood: the reference for those placed during it.
async fn start_beside(args: &OverloadArgs, watched: &Watched) -> anyhow::Result<Beside> {
    let flooding = Arc::new(AtomicBool::new(false));
    let placing_stop = Arc::new(AtomicBool::new(false));
    let outbound = watched.outbound.as_ref();
    let placing = outbound
        .filter(|_| args.outbound_rate > 0.0)
        .map(|o| o.place(args.outbound_rate, flooding.clone(), placing_stop.clone()));
    let campaign = match outbound.filter(|_| args.campaign) {
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
    Ok(Beside {
        flooding,
        placing_stop,
        placing,
        campaign,
    })
}

/// The flood as it went.
struct Flood {
    outcome: Outcome,
    /// On the run's clock: SIPp's start, its last new call and its exit.
    start: f64,
    flood_end: f64,
    exit: f64,
    /// The API probes meanwhile.
    api: Vec<Probe>,
    /// The server's threads' CPU ticks at SIPp's start and at its exit.
    threads_before: std::collections::BTreeMap<String, f64>,
    threads_after: std::collections::BTreeMap<String, f64>,
    /// From SIPp's start to its exit.
    span: Range<Instant>,
}

/// Runs SIPp at the plan's rate while probing the API, to its exit; the outbound calls beside
/// it stop there, and the campaign is paused.
async fn flood(
    args: &OverloadArgs,
    audio: Audio,
    plan: &Plan,
    watched: &Watched,
    beside: &Beside,
) -> anyhow::Result<Flood> {
    let calls = (plan.rate * plan.secs).round().max(1.0) as u64;
    let call_secs = audio.call_ms(args.hold_ms) as f64 / 1000.0;
    // Room for SIPp's INVITE timeouts (about 32 s after the last new call) in a flood; a step of
    // the search needs only its calls' own time.
    let grace = if plan.after > 0.0 { 40.0 } else { 5.0 };
    let timeout = (plan.secs * 1.2 + call_secs + grace).ceil() as u64;
    let threads_before = thread_ticks(watched.pid);
    let start = watched.now();
    let flood_at = Instant::now();
    beside.flooding.store(true, Ordering::Relaxed);
    let caller = Sipp::start(&watched.load(args, audio, plan.rate, calls, timeout)).await?;
    watched
        .sipp_pid
        .store(caller.child.id().unwrap_or(0), Ordering::Relaxed);
    let api_stop = Arc::new(AtomicBool::new(false));
    let prober = tokio::spawn(watch::probe_api(
        watched.server.http.clone(),
        watched.server.key.clone(),
        Duration::from_millis(args.probe_ms.max(1)),
        api_stop.clone(),
    ));
    let outcome = caller.finish().await?;
    beside.placing_stop.store(true, Ordering::Relaxed);
    let flood_over = Instant::now();
    if let (Some(o), Some(id)) = (&watched.outbound, &beside.campaign) {
        o.pause_campaign(id).await;
    }
    let exit = watched.now();
    api_stop.store(true, Ordering::Relaxed);
    let threads_after = thread_ticks(watched.pid);
    let flood_end = outcome
        .offer_ended
        .map(|e| e - watched.epoch)
        .filter(|t| *t > start && *t <= exit)
        .unwrap_or(exit);
    let api = prober.await.unwrap_or_default();
    Ok(Flood {
        outcome,
        start,
        flood_end,
        exit,
        api,
        threads_before,
        threads_after,
        span: flood_at..flood_over,
    })
}

/// The server once the plan's time after the flood has gone by.
struct After {
    /// On the run's clock.
    end: f64,
    threads: std::collections::BTreeMap<String, f64>,
    metrics: Value,
    /// Inbound calls the server still held up.
    open_calls: Option<u64>,
}

/// Samples until `plan.after` seconds past the last new call (half a second past SIPp's exit
/// at least), then reads the server's threads, metrics and open calls.
async fn after_flood(plan: &Plan, watched: &Watched, flood: &Flood) -> After {
    let until = (flood.flood_end + plan.after).max(flood.exit + 0.5);
    let now = watched.now();
    if until > now {
        tokio::time::sleep(Duration::from_secs_f64(until - now)).await;
    }
    // The samples at `until` are taken before the bench's own requests below: listing the
    // open calls reads the whole calls table, which the server's memory would show.
    tokio::time::sleep(watch::SAMPLE_EVERY * 2).await;
    let end = watched.now();
    let threads = thread_ticks(watched.pid);
    let metrics = watch::scrape_metrics(&watched.server.metrics).await;
    let open_calls = watch::open_calls(&watched.server.http, &watched.server.key, 50_000).await;
    After {
        end,
        threads,
        metrics,
        open_calls,
    }
}
