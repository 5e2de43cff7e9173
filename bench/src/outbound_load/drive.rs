//! What the run drives and how: the far end in use, the sampling, the calls placed directly
//! (`POST /calls` at a rate) or by campaigns, the warm-up before them and the drain after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::{Value, json};

use super::args::OutboundLoadArgs;
use super::peer::Peer;
use super::server::{Api, Server};
use super::sipp::Sipp;
use crate::measure::round;
use crate::progress::Progress;

/// The far end in use.
pub(super) enum Far {
    Bench(Peer),
    Sipp(Sipp),
}

impl Far {
    pub(super) fn addr(&self) -> std::net::SocketAddr {
        match self {
            Far::Bench(p) => p.addr,
            Far::Sipp(s) => s.addr,
        }
    }

    /// Calls in flight and calls talking at the far end.
    pub(super) fn live(&self) -> (i64, i64) {
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
pub(super) struct Placed {
    pub(super) at: Instant,
    pub(super) status: u16,
    pub(super) api_ms: f64,
    pub(super) call_id: Option<String>,
}

/// What the run drove, for the report.
#[derive(Default)]
pub(super) struct Drive {
    pub(super) placed: Vec<Placed>,
    /// Campaign id, its calling number.
    pub(super) campaigns: Vec<(String, String)>,
    pub(super) contacts_per_campaign: usize,
    /// Campaigns that ran out of contacts before the end.
    pub(super) completed_early: usize,
    pub(super) started: Option<Instant>,
    pub(super) secs: f64,
}

/// Samples the far end's live calls, the server's CPU and RSS, this process's CPU (the peer's
/// thread apart) and the machine's, every half second.
pub(super) async fn sample(
    far: Arc<Far>,
    server: u32,
    out: Arc<Mutex<Vec<Value>>>,
    started: Instant,
) {
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
pub(super) async fn drive_direct(
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
pub(super) async fn drive_campaigns(
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
pub(super) async fn drain(args: &OutboundLoadArgs, api: &Api, far: &Far) {
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
pub(super) async fn warm_up(
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
pub(super) fn placed_at(drive: &Drive) -> HashMap<&str, Instant> {
    drive
        .placed
        .iter()
        .filter_map(|p| Some((p.call_id.as_deref()?, p.at)))
        .collect()
}
