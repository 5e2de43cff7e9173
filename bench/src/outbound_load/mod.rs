//! `outbound-load`: outbound calls through a SIP trunk, end to end. It starts the release
//! `switchboard serve --carrier sip` on loopback with a fresh store, its default trunk pointing
//! at an answering peer (the bench's own, or SIPp's UAS), sets up a workspace, an agent and
//! calling numbers through the store and the API, and then places calls in real time: directly
//! (`POST /calls` at a rate) or through campaigns the engine paces. It reports the setup rate,
//! post-dial delay, concurrent calls, RTP on both sides, the server's CPU and memory, the
//! outcomes the service recorded against what the peer did, and whether each campaign's pacing
//! held at the far end (text, JSON and an HTML page with charts).
//!
//! This file runs the steps in order (set up, measure, collect, report); the parts below it do
//! them: `args` (the command line), `drive` (the far end in use, the sampling, the drivers,
//! the warm-up and the drain), `peer` and `sipp` (the far ends), `server` (the server under
//! test and its API), `output` (the report), `compare` (its ratios to a reference run).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;

use crate::greeting;
use crate::measure::{thread_cpu, thread_ticks};

mod args;
mod compare;
mod drive;
mod output;
pub(crate) mod peer;
pub(crate) mod server;
mod sipmsg;
mod sipp;

pub use args::OutboundLoadArgs;
pub(crate) use drive::create_campaign;
use drive::{Drive, Far, drain, drive_campaigns, drive_direct, sample, warm_up};
use peer::{FarEnd, Peer, PeerCall, PeerConfig};
use server::{Api, Server, ServerLog};

/// Runs the benchmark and returns the report.
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
    let (far, greeting_source) = start_far_end(&args, codec).await?;
    let campaigns = if args.mode == "campaigns" {
        args.campaigns.max(1)
    } else {
        0
    };
    let server = start_server(&args, &bin, &far, campaigns).await?;
    let api = server.client();
    let agent = create_agent(&api, &args).await?;
    let warm_agent = if args.warmup > 0 {
        Some(warm_up(&args, &api, &server.numbers[0].1, &far).await?)
    } else {
        None
    };
    let Measured {
        drive,
        samples,
        server_threads,
        wall,
        far,
    } = measure(&args, &api, &agent, &server, far, campaigns).await?;
    let seen = collect(&api, &server, warm_agent.as_deref(), &samples, far).await?;
    let kept = server.stop(args.keep).await;
    let mut report = output::report(output::Inputs {
        args: &args,
        codec,
        drive: &drive,
        records: &seen.records,
        peer_calls: &seen.peer_calls,
        far_ends: &seen.far_ends,
        shares: &seen.shares,
        sipp: seen.sipp_stats,
        log: &seen.log,
        samples: &seen.samples,
        server_threads,
        wall,
    });
    report["greeting"] = greeting_source;
    if let Some(dir) = kept {
        report["server_dir"] = json!(dir.display().to_string());
    }
    compare_and_write(&args, &mut report, &seen.samples)?;
    report["samples"] = json!(seen.samples);
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

/// Starts the far end: SIPp's UAS, or the bench's peer with its greeting (and what made the
/// greeting, for the report).
async fn start_far_end(args: &OutboundLoadArgs, codec: Codec) -> anyhow::Result<(Far, Value)> {
    if args.peer == "sipp" {
        let far = Far::Sipp(sipp::Sipp::start(&args.sipp, args.ring_ms).await?);
        return Ok((far, Value::Null));
    }
    let (audio, source) = greeting::samples(codec.sample_rate(), args.greeting_wav.as_deref())?;
    let far = Far::Bench(Peer::start(PeerConfig {
        ip: "127.0.0.1".parse()?,
        port: 0,
        mix: args.mix.clone(),
        ring: Duration::from_millis(args.ring_ms),
        codec,
        hold_cap: Duration::from_secs(args.hold + 20),
        ring_cap: Duration::from_secs(310),
        greeting: greeting::frames(codec, &audio),
        hello: greeting::frames(codec, &greeting::hello(codec.sample_rate())),
    })?);
    Ok((far, json!(source)))
}

/// Starts the server with the far end as its trunk and a calling number per campaign (one for
/// direct calls), and says where it runs.
async fn start_server(
    args: &OutboundLoadArgs,
    bin: &Path,
    far: &Far,
    campaigns: usize,
) -> anyhow::Result<Server> {
    let numbers: Vec<String> = (0..campaigns.max(1))
        .map(|i| format!("+97250{:07}", 1_000_000 + i))
        .collect();
    let server = server::start(server::Launch {
        bin,
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
    Ok(server)
}

/// The agent of the run's calls: it speaks first and ends each answered call after `--hold`
/// seconds; answers its id.
async fn create_agent(api: &Api, args: &OutboundLoadArgs) -> anyhow::Result<String> {
    Ok(api
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
        .to_string())
}

/// What the measured part of the run gave.
struct Measured {
    drive: Drive,
    /// What the sampler took (it has been stopped).
    samples: Arc<Mutex<Vec<Value>>>,
    /// The server's CPU by thread while the calls were placed.
    server_threads: BTreeMap<String, f64>,
    wall: f64,
    /// The far end, still shared with the stopped sampler's task.
    far: Arc<Far>,
}

/// Places the calls (directly or by campaigns) while sampling, then waits for them to end.
async fn measure(
    args: &OutboundLoadArgs,
    api: &Api,
    agent: &str,
    server: &Server,
    far: Far,
    campaigns: usize,
) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let far = Arc::new(far);
    let sampler = tokio::spawn(sample(far.clone(), server.pid, samples.clone(), started));
    let threads_before = thread_ticks(server.pid);
    let drive = if campaigns > 0 {
        drive_campaigns(args, api, agent, server, campaigns).await?
    } else {
        drive_direct(args, api, agent, &server.numbers[0].1).await?
    };
    let threads_after = thread_ticks(server.pid);
    eprintln!();
    drain(args, api, &far).await;
    let wall = started.elapsed().as_secs_f64();
    sampler.abort();
    Ok(Measured {
        server_threads: thread_cpu(&threads_before, &threads_after, drive.secs),
        drive,
        samples,
        wall,
        far,
    })
}

/// What the run left to report, gathered once the calls have ended.
struct Collected {
    /// The service's records of the run's calls (the warm-up's left out).
    records: Vec<Value>,
    samples: Vec<Value>,
    peer_calls: Vec<PeerCall>,
    far_ends: BTreeMap<String, FarEnd>,
    shares: BTreeMap<&'static str, f64>,
    sipp_stats: Value,
    /// The server's log of the run's calls.
    log: ServerLog,
}

/// Reads the service's call records and the samples, stops the far end and takes what it saw,
/// and keeps the server's log of the run's calls.
async fn collect(
    api: &Api,
    server: &Server,
    warm_agent: Option<&str>,
    samples: &Mutex<Vec<Value>>,
    far: Arc<Far>,
) -> anyhow::Result<Collected> {
    let mut records = api.all("/calls?direction=outbound").await?;
    if let Some(warm) = warm_agent {
        records.retain(|r| r["agent_id"].as_str() != Some(warm));
    }
    let samples = samples.lock().unwrap().clone();
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
        let ids: HashSet<&str> = records.iter().filter_map(|r| r["id"].as_str()).collect();
        ServerLog {
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
    Ok(Collected {
        records,
        samples,
        peer_calls,
        far_ends,
        shares,
        sipp_stats,
        log,
    })
}

/// Adds the ratios to a reference report (`--reference`) and writes the HTML page (`--html`).
fn compare_and_write(
    args: &OutboundLoadArgs,
    report: &mut Value,
    samples: &[Value],
) -> anyhow::Result<()> {
    if let Some(path) = &args.reference {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let reference: Value = serde_json::from_str(&text)?;
        report["ratios_to_reference"] = compare::ratios(report, &reference);
    }
    if let Some(path) = &args.html {
        let page =
            crate::measure::html("Switchboard outbound load", report, samples, output::CHARTS);
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
