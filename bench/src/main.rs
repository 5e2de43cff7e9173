//! `switchboard-bench`: the load and simulation harness.
//!
//! - `campaign-sim`: the real engine and store against the simulated carrier under virtual
//!   time; reports wall time, admissions per second, pacing as the carrier saw it, outcomes and
//!   peak memory.
//! - `enroll-csv`: enrolls a large CSV through the real HTTP API, streamed from a file; reports
//!   wall time and peak memory against the sqlite3 shell importing the same rows.
//! - `eval-cost`: the wall time of one campaign evaluation at several campaign sizes.
//! - `sip-load`: a SIP load generator against a running (or spawned) server.
//! - `outbound-load`: outbound calls through a SIP trunk to an answering peer, placed directly
//!   or by campaigns, against a spawned server.
//! - `converse`: many concurrent conversing calls (prerecorded caller turns, one talking over
//!   the agent) against stand-in model vendors with fixed latencies; reports the latency the
//!   server adds to a turn beyond the vendors' own, the barge-in stop time, and CPU and memory
//!   per conversing call.
//! - `overload`: SIPp's built-in `uac` scenario against a spawned server: the highest rate it
//!   takes with no failed call and no retransmission (`--find-sustainable`), or one flood at a
//!   fixed rate: goodput, refusals, setup time of admitted calls, the API's latency meanwhile,
//!   how long the server's CPU takes to quiet down after it and its memory before, at the peak
//!   and after.
//! - `amd`: answering-machine detection over a generated, labelled set of calls' audio.

mod amd;
mod converse;
mod dashboard;
mod enroll;
mod flow_sim;
mod greeting;
mod measure;
mod outbound_load;
mod overload;
mod progress;
mod raw;
mod rtp;
mod sip_load;
mod sipp;
mod spawn;
mod ua;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use serde_json::{Value, json};
use switchboard::runtime::simulation::{VirtualRun, all_day};
use switchboard_actors::campaign::CampaignStatus;
use switchboard_actors::contact::ContactState;
use switchboard_actors::ids::CampaignId;
use switchboard_actors::sim::SecondsRange;

use measure::{peak_rss_mib, round};
use progress::Progress;

#[derive(Parser)]
#[command(
    name = "switchboard-bench",
    about = "Switchboard's load and simulation harness"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a campaign through the real engine and store against the simulated carrier, in
    /// virtual time.
    CampaignSim(SimArgs),
    /// Enroll a generated CSV of contacts through the HTTP API of an in-process service.
    EnrollCsv(enroll::EnrollArgs),
    /// Measure one campaign evaluation's wall time at several campaign sizes.
    EvalCost(EvalArgs),
    /// Place SIP calls at a steady rate, stream audio, and measure the server.
    SipLoad(sip_load::SipLoadArgs),
    /// Place outbound calls through a SIP trunk to an answering peer (directly or by
    /// campaigns), and measure the server and the pacing the far end saw.
    OutboundLoad(Box<outbound_load::OutboundLoadArgs>),
    /// Converse on many calls at once against stand-in model vendors with fixed latencies, and
    /// measure the latency the server adds to each turn, barge-in and the cost per call.
    Converse(Box<converse::ConverseArgs>),
    /// Flood a spawned server with SIPp's `uac` calls: the sustainable rate, or goodput, setup
    /// time, API latency, CPU recovery and memory at a rate past it.
    Overload(Box<overload::OverloadArgs>),
    /// Generate voicemail greetings, people answering, silence and noise (espeak-ng, sox) and
    /// measure answering-machine detection on them.
    Amd(amd::AmdArgs),
    /// Time the flow simulator: a scripted dry run against a model that answers at once.
    FlowSim(flow_sim::FlowSimArgs),
    /// Fetch every dashboard page from a store of a million contacts and 100,000 calls: answer
    /// times, page weights, and how soon a live call reaches the open live page.
    Dashboard(dashboard::DashboardArgs),
}

#[derive(clap::Args)]
struct SimArgs {
    /// Contacts to enroll.
    #[arg(long, default_value_t = 100_000)]
    contacts: usize,
    /// Virtual days to run at most.
    #[arg(long, default_value_t = 120)]
    days: u64,
    /// max_attempts of the campaign.
    #[arg(long, default_value_t = 3)]
    max_attempts: i64,
    #[arg(long, default_value_t = 8)]
    max_in_flight: i64,
    /// min_seconds_between_calls.
    #[arg(long, default_value_t = 0)]
    min_gap: i64,
    #[arg(long, default_value_t = 100_000)]
    max_calls_per_day: i64,
    /// retry_no_answer_seconds (and retry_completed_seconds).
    #[arg(long, default_value_t = 1800)]
    retry_secs: i64,
    /// Outcome weights of the simulated carrier.
    #[arg(
        long,
        default_value = "answered=35,no_answer=35,busy=10,voicemail=15,failed=4,infra_error=1"
    )]
    mix: String,
    /// Ring seconds, min-max.
    #[arg(long, default_value = "3-25")]
    ring: SecondsRange,
    /// Talk seconds of answered calls, min-max.
    #[arg(long, default_value = "20-180")]
    talk: SecondsRange,
    /// Calls one workspace may have live at once.
    #[arg(long, default_value_t = 50)]
    workspace_concurrency: usize,
    /// The SQLite file (a temporary one when omitted).
    #[arg(long)]
    database: Option<std::path::PathBuf>,
    /// Run on this PostgreSQL database (`postgres://...`) instead of an SQLite file; it should
    /// be empty (it is migrated).
    #[arg(long)]
    database_url: Option<String>,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Let the runtime and database threads run on any core. By default the run keeps to one
    /// core: virtual time makes the work sequential, the two threads take turns, and on one core
    /// each hand-off is a context switch instead of waking another core.
    #[arg(long)]
    all_cores: bool,
}

#[derive(clap::Args)]
struct EvalArgs {
    /// Campaign sizes, comma-separated.
    #[arg(long, default_value = "10000,1000000", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Evaluations to time at each size.
    #[arg(long, default_value_t = 3000)]
    evaluations: u64,
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Ok(filter) = std::env::var("SWITCHBOARD_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    // Virtual time needs tokio's current-thread runtime (a paused clock).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = match cli.command {
        Command::CampaignSim(args) => {
            let json = args.json.clone();
            // Set on this thread before the database thread starts, which inherits it.
            let core = if args.all_cores {
                None
            } else {
                pin_to_one_core()
            };
            let mut report = rt.block_on(campaign_sim(args))?;
            report["pinned_to_core"] = json!(core);
            (report, json)
        }
        Command::EnrollCsv(args) => {
            let json = args.json.clone();
            (rt.block_on(enroll::enroll_csv(args))?, json)
        }
        Command::EvalCost(args) => {
            let json = args.json.clone();
            (rt.block_on(eval_cost(args))?, json)
        }
        Command::SipLoad(args) => {
            let json = args.json.clone();
            (in_real_time(sip_load::run(args))?, json)
        }
        Command::OutboundLoad(args) => {
            let json = args.json.clone();
            (in_real_time(outbound_load::run(*args))?, json)
        }
        Command::Converse(args) => {
            let json = args.json.clone();
            if args.sweep.is_empty() && args.chart_from.is_none() && args.chart.is_none() {
                (in_real_time(converse::run(*args))?, json)
            } else {
                (in_real_time(converse::sweep(*args))?, json)
            }
        }
        Command::Overload(args) => {
            let json = args.json.clone();
            (in_real_time(overload::run(*args))?, json)
        }
        // Writes its own JSON (with every file's verdict).
        Command::Amd(args) => (amd::run(args)?, None),
        Command::FlowSim(args) => {
            let json = args.json.clone();
            (in_real_time(flow_sim::run(args))?, json)
        }
        Command::Dashboard(args) => {
            let json = args.json.clone();
            (in_real_time(dashboard::run(args))?, json)
        }
    };
    let (report, json_path) = report;
    print_report(&report);
    if let Some(path) = json_path {
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Runs a real-time benchmark on every core (a multi-threaded runtime), with TLS ready.
fn in_real_time(
    run: impl std::future::Future<Output = anyhow::Result<Value>>,
) -> anyhow::Result<Value> {
    switchboard::edge::tls::install_crypto();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run)
}

fn print_report(report: &Value) {
    println!();
    if let Value::Object(map) = report {
        // The time series are for the JSON and HTML reports.
        for (k, v) in map.iter().filter(|(k, _)| *k != "samples") {
            match v {
                Value::Object(_) | Value::Array(_) => println!("{k:>28}: {v}"),
                Value::String(s) => println!("{k:>28}: {s}"),
                other => println!("{k:>28}: {other}"),
            }
        }
    }
}

/// Keeps this thread, and the threads it starts from now on, to the first core it may use;
/// answers that core.
fn pin_to_one_core() -> Option<usize> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is a valid (empty) set.
    // `sched_getaffinity` and `sched_setaffinity` read or write exactly `size` bytes of the set
    // passed, which lives on this stack frame for the whole call; pid 0 is the calling thread.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return None;
        }
        let core = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &allowed))?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut one);
        (libc::sched_setaffinity(0, size, &one) == 0).then_some(core)
    }
}

async fn campaign_sim(args: SimArgs) -> anyhow::Result<Value> {
    if args.contacts == 0 {
        bail!("--contacts must be positive");
    }
    let dir = tempfile::tempdir()?;
    let path = args
        .database
        .clone()
        .unwrap_or_else(|| dir.path().join("campaign-sim.db"));
    let db_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", path.display()));
    // The reference, in real time before the run's clock is paused: on SQLite a file of its
    // own beside the run's, on PostgreSQL a table of its own in the run's database.
    let raw_url = match &args.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", dir.path().join("raw.db").display()),
    };
    let raw_per_sec = raw::write_transactions_per_sec(&raw_url, 3.0).await?;
    let start: DateTime<Utc> = "2026-05-04T00:00:00Z".parse()?;
    let run = VirtualRun::new(&db_url, start, &args.mix, |config, sim| {
        config.workspace_max_concurrent_calls = args.workspace_concurrency;
        sim.ring_secs = args.ring;
        sim.talk_secs = args.talk;
    })
    .await?;
    let c: CampaignId = {
        let _held = run.hold.enter();
        let c = run
            .campaign(|s| {
                s.rules.max_attempts = args.max_attempts;
                s.rules.max_in_flight = args.max_in_flight;
                s.rules.min_seconds_between_calls = args.min_gap;
                s.rules.max_calls_per_day = args.max_calls_per_day;
                s.rules.retry_no_answer_seconds = args.retry_secs;
                s.rules.retry_completed_seconds = args.retry_secs.max(60);
                s.rules.stop_on_unclassified = true;
                s.calling_window = Some(all_day("UTC"));
            })
            .await;
        run.enroll(c, args.contacts, None).await;
        c
    };
    let total = args.contacts as i64;
    let wall = Instant::now();
    run.launch(c).await;
    let mut progress = Progress::new();
    let limit = start + chrono::Duration::days(args.days as i64);
    let mut last_count = Instant::now() - Duration::from_secs(10);
    let status = loop {
        // Looks every five virtual minutes: often enough to stop soon after the campaign does.
        tokio::time::sleep(Duration::from_secs(300)).await;
        let record = {
            let _held = run.hold.enter();
            run.record(c).await
        };
        // Counting open contacts reads the state index: only for the progress bar, once a
        // second.
        if last_count.elapsed() >= Duration::from_secs(1) {
            last_count = Instant::now();
            let open = {
                let _held = run.hold.enter();
                run.store.open_contacts(c).await?
            };
            let done = total - open;
            let day = (run.now() - start).num_hours() as f64 / 24.0;
            progress.show(
                done,
                total,
                &format!(
                    "virtual day {day:.1}, {} dials",
                    run.carrier.observations().dials
                ),
            );
        }
        if record.status != CampaignStatus::Running || run.now() >= limit {
            break record.status;
        }
    };
    eprintln!();
    let wall_secs = wall.elapsed().as_secs_f64();
    let seen = run.carrier.observations();
    let obs = seen.campaigns.get(&c).cloned().unwrap_or_default();
    let counts = {
        let _held = run.hold.enter();
        run.store.contact_counts(c).await?
    };
    let states: BTreeMap<&str, i64> = ContactState::ALL
        .iter()
        .map(|s| (s.as_str(), counts.get(*s)))
        .collect();
    let outcomes: BTreeMap<&str, u64> = seen
        .outcomes
        .iter()
        .map(|(o, n)| (o.as_str(), *n))
        .collect();
    let (evaluations, eval_time) = run.engine.stats().evaluations();
    let virtual_secs = (run.now() - start).num_seconds();
    run.engine.stop().await;
    let report = json!({
        "benchmark": "campaign-sim",
        "contacts": args.contacts,
        "final_status": status.as_str(),
        "wall_secs": round(wall_secs),
        "virtual_days": round(virtual_secs as f64 / 86_400.0),
        "admissions": obs.dials,
        "admissions_per_sec": round(obs.dials as f64 / wall_secs),
        "database": if args.database_url.is_some() { "postgresql" } else { "sqlite" },
        "raw_write_transactions_per_sec": round(raw_per_sec),
        "admissions_per_raw_write": round(obs.dials as f64 / wall_secs / raw_per_sec),
        "evaluations": evaluations,
        "mean_evaluation_us": round(eval_time.as_secs_f64() * 1e6 / evaluations.max(1) as f64),
        "max_in_flight": args.max_in_flight,
        "peak_observed_in_flight": obs.peak_live,
        "min_seconds_between_calls": args.min_gap,
        "smallest_observed_gap_secs": obs.min_gap_secs.map(round),
        "pacing_held": obs.peak_live as i64 <= args.max_in_flight
            && obs.min_gap_secs.is_none_or(|g| g >= args.min_gap as f64),
        "contact_states": states,
        "outcomes": outcomes,
        "peak_rss_mib": peak_rss_mib().map(round),
    });
    Ok(report)
}

async fn eval_cost(args: EvalArgs) -> anyhow::Result<Value> {
    let mut results = Vec::new();
    for size in &args.sizes {
        let size = *size;
        // Each size runs on its own runtime-paused clock in a child process-free way: a fresh
        // store and engine.
        let dir = tempfile::tempdir()?;
        let db_url = format!("sqlite://{}", dir.path().join("eval.db").display());
        let start: DateTime<Utc> = "2026-05-04T00:00:00Z".parse()?;
        let run = VirtualRun::new(&db_url, start, "no_answer=1", |_, _| {}).await?;
        let c = {
            let _held = run.hold.enter();
            let c = run
                .campaign(|s| {
                    s.rules.max_in_flight = 8;
                    s.rules.max_attempts = 3;
                    s.calling_window = Some(all_day("UTC"));
                })
                .await;
            run.enroll(c, size, None).await;
            c
        };
        run.launch(c).await;
        let mut progress = Progress::new();
        let (base, base_time) = run.engine.stats().evaluations();
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let (n, _) = run.engine.stats().evaluations();
            progress.show(
                (n - base).min(args.evaluations) as i64,
                args.evaluations as i64,
                &format!("evaluations at {size} contacts"),
            );
            if n - base >= args.evaluations {
                break;
            }
        }
        eprintln!();
        let (n, time) = run.engine.stats().evaluations();
        let mean_us = (time - base_time).as_secs_f64() * 1e6 / (n - base) as f64;
        run.engine.stop().await;
        // A fresh clock for the next size.
        tokio::time::resume();
        results.push(json!({"contacts": size, "evaluations": n - base, "mean_evaluation_us": round(mean_us)}));
    }
    let means: Vec<f64> = results
        .iter()
        .filter_map(|r| r["mean_evaluation_us"].as_f64())
        .collect();
    let ratio = match (means.first(), means.last()) {
        (Some(a), Some(b)) if *a > 0.0 => Some(round(b / a)),
        _ => None,
    };
    Ok(json!({
        "benchmark": "eval-cost",
        "sizes": results,
        "largest_to_smallest_ratio": ratio,
    }))
}
