//! The outbound-load report: what the far end saw (setup rate, post-dial delay, concurrent
//! calls, RTP, pacing per campaign), what the service recorded (outcomes against what the peer
//! did), what the server used (CPU, RSS, by thread) and said (warnings), and the targets.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;

use super::args::OutboundLoadArgs;
use super::drive::{Drive, placed_at};
use super::peer::{FarEnd, PeerCall};
use super::server::ServerLog;
use crate::measure::{round, spread};

/// The charts of the HTML report.
pub const CHARTS: &[crate::measure::Chart] = &[
    ("talking", "Calls talking at the far end", "#2a6"),
    ("in_flight", "Calls in flight at the far end", "#8a2"),
    ("server_cpu_percent", "Server CPU (% of one core)", "#c33"),
    ("server_rss_kib", "Server RSS (KiB)", "#36c"),
    ("peer_cpu_percent", "Peer CPU (% of one core)", "#a6c"),
    (
        "machine_busy_percent",
        "Machine busy (% of all cores)",
        "#999",
    ),
];

/// A far-end gap this much under min_seconds_between_calls still counts as held: the INVITEs
/// of two admissions can be delayed unequally on their way.
const GAP_TOLERANCE_SECS: f64 = 0.05;

/// The setup rate target is met within this share: paced requests arrive a little late, never
/// early.
const RATE_TOLERANCE: f64 = 0.01;

pub struct Inputs<'a> {
    pub args: &'a OutboundLoadArgs,
    pub codec: Codec,
    pub drive: &'a Drive,
    pub records: &'a [Value],
    pub peer_calls: &'a [PeerCall],
    pub far_ends: &'a BTreeMap<String, FarEnd>,
    pub shares: &'a BTreeMap<&'static str, f64>,
    pub sipp: Value,
    pub log: &'a ServerLog,
    pub samples: &'a [Value],
    pub server_threads: BTreeMap<String, f64>,
    pub wall: f64,
}

fn count<'a>(items: impl Iterator<Item = &'a str>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for i in items {
        *out.entry(i.to_string()).or_insert(0) += 1;
    }
    out
}

/// The most at once of a set of `[start, end)` intervals (seconds).
fn peak(mut spans: Vec<(f64, f64)>) -> i64 {
    let mut edges: Vec<(f64, i64)> = spans
        .drain(..)
        .flat_map(|(a, b)| [(a, 1), (b, -1)])
        .collect();
    // Ends before starts at the same instant.
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut now, mut most) = (0i64, 0i64);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The least-squares slope of y over x; none without spread in x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (points.len() >= 2 && sxx > 0.0).then(|| sxy / sxx)
}

/// The report: the run's settings, then what the far end saw, what the service recorded,
/// what the server used, the pacing or the API's answers (by mode), and the targets.
pub fn report(i: Inputs) -> Value {
    let args = i.args;
    let far = far_end(&i);
    let service = service(&i);
    let resources = resources(&i, far.peak_talking);
    let (dial_rate, setup_rate) = setup_rates(&i, &far.invites);
    let api_failed = i
        .drive
        .placed
        .iter()
        .filter(|p| !(200..300).contains(&p.status))
        .count();
    let rtp_lost = far.rtp_lost + service.rtp_lost;
    let all_failed = service.failed + api_failed;
    let mut report = json!({
        "benchmark": "outbound-load",
        "peer": args.peer,
        "mode": args.mode,
        "codec": i.codec.name(),
        "hold_secs": args.hold,
        "amd": args.amd_on(),
        "ring_ms": args.ring_ms,
        "duration_secs": args.duration,
        "wall_secs": round(i.wall),
        "peer_mix": i.shares,
        "setup_rate_per_sec": setup_rate,
        "dial_rate_per_sec_at_service": dial_rate,
        "rtp_lost_total": rtp_lost,
        "failed_calls": all_failed,
        "targets": {
            "concurrent_500_without_rtp_loss": far.peak_talking >= 500 && rtp_lost == 0,
            "setups_200_per_sec_without_failures": setup_rate >= 200.0 * (1.0 - RATE_TOLERANCE) && all_failed == 0,
            "rss_under_64_kib_per_call": far.peak_talking > 0 && resources.rss_per_call < 64.0,
        },
    });
    for part in [far.json, service.json, resources.json] {
        if let (Value::Object(r), Value::Object(m)) = (&mut report, part) {
            r.extend(m);
        }
    }
    if args.mode == "direct" {
        let api_statuses: BTreeMap<String, u64> = {
            let s: Vec<String> = i
                .drive
                .placed
                .iter()
                .map(|p| p.status.to_string())
                .collect();
            count(s.iter().map(String::as_str))
        };
        let mut api_ms: Vec<f64> = i.drive.placed.iter().map(|p| p.api_ms).collect();
        report["rate_per_sec"] = json!(args.rate);
        report["ring_timeout_secs"] = json!(args.ring_timeout);
        report["calls_requested"] = json!(i.drive.placed.len());
        report["api_statuses"] = json!(api_statuses);
        report["api_ms"] = spread(&mut api_ms);
    } else {
        let (pacing, pacing_held) = pacing(&i);
        report["campaigns"] = json!(i.drive.campaigns.len());
        report["contacts_per_campaign"] = json!(i.drive.contacts_per_campaign);
        report["campaigns_out_of_contacts"] = json!(i.drive.completed_early);
        report["pacing"] = json!(pacing);
        report["pacing_held"] = json!((args.peer == "bench").then_some(pacing_held));
        report["pacing_gap_tolerance_secs"] = json!(GAP_TOLERANCE_SECS);
    }
    if !i.sipp.is_null() {
        report["sipp"] = i.sipp;
    }
    report
}

/// What the far end saw, and what the rest of the report takes from it.
struct FarSeen {
    json: Value,
    /// When each INVITE came, in seconds from the start of the drive.
    invites: Vec<f64>,
    /// The most calls talking at once.
    peak_talking: i64,
    /// RTP the peer found lost.
    rtp_lost: u64,
}

/// What the far end saw: its INVITEs (and their count a second), the most calls at once, the
/// delays from the API to the INVITE and from the answer to the ACK and the first RTP, the
/// calls by kind and by end, and the peer's RTP.
fn far_end(i: &Inputs) -> FarSeen {
    let start = i.drive.started.unwrap_or_else(std::time::Instant::now);
    let since = |t: std::time::Instant| t.saturating_duration_since(start).as_secs_f64();
    let ms = |a: std::time::Instant, b: std::time::Instant| {
        b.saturating_duration_since(a).as_secs_f64() * 1000.0
    };
    let bench_peer = i.args.peer == "bench";
    let invites: Vec<f64> = i.peer_calls.iter().map(|c| since(c.invite_at)).collect();
    let window = i.drive.secs.max(0.001);
    let mut per_second = vec![0u64; window.floor() as usize];
    for t in &invites {
        if let Some(slot) = per_second.get_mut(*t as usize) {
            *slot += 1;
        }
    }
    // The steady state: whole seconds after the first.
    let steady = per_second.get(1..).filter(|s| !s.is_empty());
    let talking_spans: Vec<(f64, f64)> = i
        .peer_calls
        .iter()
        .filter_map(|c| Some((since(c.answered_at?), since(c.ended_at))))
        .collect();
    let flight_spans: Vec<(f64, f64)> = i
        .peer_calls
        .iter()
        .map(|c| (since(c.invite_at), since(c.ended_at)))
        .collect();
    let peak_talking = if bench_peer {
        peak(talking_spans)
    } else {
        i.samples
            .iter()
            .filter_map(|s| s["talking"].as_i64())
            .max()
            .unwrap_or(0)
    };
    let placed = placed_at(i.drive);
    let mut pdd_api: Vec<f64> = i
        .peer_calls
        .iter()
        .filter_map(|c| Some(ms(*placed.get(c.call_id.as_str())?, c.invite_at)))
        .collect();
    let mut ok_to_ack: Vec<f64> = i
        .peer_calls
        .iter()
        .filter_map(|c| Some(ms(c.answered_at?, c.ack_at?)))
        .collect();
    let mut answer_to_rtp: Vec<f64> = i
        .peer_calls
        .iter()
        .filter_map(|c| Some(ms(c.answered_at?, c.first_rtp_at?)))
        .collect();
    let peer_sum = |f: fn(&PeerCall) -> u64| i.peer_calls.iter().map(f).sum::<u64>();
    let (peer_sent, peer_received, peer_lost) = (
        peer_sum(|c| c.rtp_sent),
        peer_sum(|c| c.rtp_received),
        peer_sum(|c| c.rtp_lost),
    );
    let json = json!({
        "invites_at_peer": if bench_peer { json!(i.peer_calls.len()) } else { i.sipp["IncomingCall"].clone() },
        "setup_rate_lowest_second": steady.and_then(|s| s.iter().min()).filter(|_| bench_peer),
        "setup_rate_highest_second": steady.and_then(|s| s.iter().max()).filter(|_| bench_peer),
        "pdd_api_to_invite_ms": if pdd_api.is_empty() { Value::Null } else { spread(&mut pdd_api) },
        "answer_to_ack_ms": if ok_to_ack.is_empty() { Value::Null } else { spread(&mut ok_to_ack) },
        "answer_to_first_rtp_ms": if answer_to_rtp.is_empty() { Value::Null } else { spread(&mut answer_to_rtp) },
        "peak_concurrent_calls": peak_talking,
        "peak_in_flight": if bench_peer { json!(peak(flight_spans)) } else { Value::Null },
        "peer_calls_by_kind": count(i.peer_calls.iter().map(|c| c.kind.name())),
        "peer_calls_by_end": count(i.peer_calls.iter().map(|c| c.end)),
        "peer_rtp": if bench_peer { json!({"sent": peer_sent, "received": peer_received, "lost": peer_lost}) } else { Value::Null },
    });
    FarSeen {
        json,
        invites,
        peak_talking,
        rtp_lost: peer_lost,
    }
}

/// What the service recorded, and what the rest of the report takes from it.
struct Recorded {
    json: Value,
    /// Calls recorded as failed (or failed on infrastructure).
    failed: usize,
    /// RTP the server found lost.
    rtp_lost: u64,
}

/// What the service recorded (outcomes, end reasons, SIP codes, who answered, recordings, talk
/// time, each against what the peer did with the call, and the wait from queue to INVITE),
/// the server's RTP counts from its log and the warnings it logged.
fn service(i: &Inputs) -> Recorded {
    let field = |r: &'_ Value, k: &str| r[k].as_str().unwrap_or("null").to_string();
    let outcomes = count(
        i.records
            .iter()
            .map(|r| r["outcome"].as_str().unwrap_or("null")),
    );
    let end_reasons = count(
        i.records
            .iter()
            .map(|r| r["end_reason"].as_str().unwrap_or("null")),
    );
    let sip_codes: BTreeMap<String, u64> = {
        let codes: Vec<String> = i
            .records
            .iter()
            .map(|r| {
                r["sip_code"]
                    .as_i64()
                    .map_or("null".into(), |c| c.to_string())
            })
            .collect();
        count(codes.iter().map(String::as_str))
    };
    let answered_by = count(
        i.records
            .iter()
            .filter(|r| matches!(r["outcome"].as_str(), Some("answered" | "voicemail")))
            .map(|r| r["answered_by"].as_str().unwrap_or("null")),
    );
    let recorded = i
        .records
        .iter()
        .filter(|r| r["recording_url"].is_string())
        .count();
    let failed = i
        .records
        .iter()
        .filter(|r| matches!(r["outcome"].as_str(), Some("failed" | "infra_error")))
        .count();
    let mut talk_secs: Vec<f64> = i
        .records
        .iter()
        .filter(|r| r["outcome"] == "answered")
        .filter_map(|r| r["duration_secs"].as_f64())
        .collect();
    let by_id: HashMap<String, &Value> = i.records.iter().map(|r| (field(r, "id"), r)).collect();
    let mut versus: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut mismatched = 0u64;
    let mut unrecorded = 0u64;
    let mut queued_to_invite: Vec<f64> = Vec::new();
    for c in i.peer_calls {
        let Some(r) = by_id.get(&c.call_id) else {
            unrecorded += 1;
            continue;
        };
        let outcome = field(r, "outcome");
        if outcome != c.kind.expected_outcome(i.args.amd_on()) {
            mismatched += 1;
        }
        *versus
            .entry(c.kind.name().to_string())
            .or_default()
            .entry(outcome)
            .or_insert(0) += 1;
        if let Some(q) = r["queued_at"]
            .as_str()
            .and_then(|q| q.parse::<chrono::DateTime<chrono::Utc>>().ok())
        {
            queued_to_invite.push((c.invite_wall - q).num_microseconds().unwrap_or(0) as f64 / 1e3);
        }
    }
    let peer_seen: std::collections::HashSet<&str> =
        i.peer_calls.iter().map(|c| c.call_id.as_str()).collect();
    let never_reached_peer = i
        .records
        .iter()
        .filter(|r| !peer_seen.contains(r["id"].as_str().unwrap_or("")))
        .count();
    let (server_sent, server_received, server_lost) = i
        .log
        .calls
        .values()
        .fold((0, 0, 0), |(s, r, l), c| (s + c.0, r + c.1, l + c.2));
    let mut warnings: Vec<(&String, &u64)> = i.log.warnings.iter().collect();
    warnings.sort_by(|a, b| b.1.cmp(a.1));
    warnings.truncate(12);
    let json = json!({
        "queued_to_invite_ms": if queued_to_invite.is_empty() { Value::Null } else { spread(&mut queued_to_invite) },
        "server_rtp": {"calls": i.log.calls.len(), "sent": server_sent, "received": server_received, "lost": server_lost},
        "calls_recorded_by_service": i.records.len(),
        "outcomes": outcomes,
        "end_reasons": end_reasons,
        "sip_codes": sip_codes,
        "answered_by": answered_by,
        "recordings": recorded,
        "answered_talk_secs": if talk_secs.is_empty() { Value::Null } else { spread(&mut talk_secs) },
        "peer_kind_vs_outcome": versus,
        "outcome_mismatches": mismatched,
        "calls_unknown_to_service": unrecorded,
        "calls_never_at_peer": if i.args.peer == "bench" { json!(never_reached_peer) } else { Value::Null },
        "server_warnings": warnings.into_iter().map(|(k, v)| (k.clone(), *v)).collect::<BTreeMap<_, _>>(),
        "server_warning_examples": i.log.examples,
    });
    Recorded {
        json,
        failed,
        rtp_lost: server_lost,
    }
}

/// What the server used, and what the targets take from it.
struct Resources {
    json: Value,
    /// The server's RSS per call at the peak, over the RSS the run started from.
    rss_per_call: f64,
}

/// What the server used at the peak of calls (the plateau: the samples within 90% of it): its
/// CPU, in all and per call and by thread; its RSS, with what each call at the peak holds and
/// how it grew with the calls; and the CPU of the peer, the bench and the machine.
fn resources(i: &Inputs, peak_talking: i64) -> Resources {
    let talking_now: Vec<i64> = i
        .samples
        .iter()
        .map(|s| s["talking"].as_i64().unwrap_or(0))
        .collect();
    let sampled_peak = talking_now.iter().copied().max().unwrap_or(0);
    let plateau: Vec<&Value> = i
        .samples
        .iter()
        .filter(|s| {
            sampled_peak > 0
                && s["talking"].as_i64().unwrap_or(0) as f64 >= 0.9 * sampled_peak as f64
        })
        .collect();
    let at_plateau = |k: &str| {
        let v: Vec<f64> = plateau.iter().filter_map(|s| s[k].as_f64()).collect();
        round(mean(&v))
    };
    let series = |k: &str| -> Vec<f64> { i.samples.iter().filter_map(|s| s[k].as_f64()).collect() };
    let rss = series("server_rss_kib");
    let rss_base = rss.first().copied().unwrap_or(0.0);
    let rss_peak = rss.iter().copied().fold(0.0, f64::max);
    let cpu_max = i
        .samples
        .iter()
        .filter_map(|s| s["server_cpu_percent"].as_f64())
        .fold(0.0, f64::max);
    let server_cpu = at_plateau("server_cpu_percent");
    // How RSS grew with the calls talking while they ramped up to the peak (least squares).
    let ramp_end = talking_now
        .iter()
        .position(|n| *n == sampled_peak)
        .unwrap_or(0);
    let ramp: Vec<(f64, f64)> = i.samples[..=ramp_end.min(i.samples.len().saturating_sub(1))]
        .iter()
        .filter_map(|s| Some((s["talking"].as_f64()?, s["server_rss_kib"].as_f64()?)))
        .collect();
    let rss_slope = slope(&ramp);
    // What the calls at their peak hold: the highest RSS while they talked, over the RSS the
    // run started from (after the warm-up).
    let rss_at_peak = plateau
        .iter()
        .filter_map(|s| s["server_rss_kib"].as_f64())
        .fold(0.0, f64::max);
    let per_call = |base: f64, at_peak: f64| {
        if peak_talking > 0 {
            round((at_peak - base) / peak_talking as f64)
        } else {
            0.0
        }
    };
    let rss_per_call = per_call(rss_base, rss_at_peak);
    // The anonymous part alone (heap and stacks), without file pages such as the database's
    // memory map, which grows with the calls table rather than with the calls live.
    let anon_base = series("server_rss_anon_kib")
        .first()
        .copied()
        .unwrap_or(0.0);
    let anon_at_peak = plateau
        .iter()
        .filter_map(|s| s["server_rss_anon_kib"].as_f64())
        .fold(0.0, f64::max);
    let rss_anon_per_call = per_call(anon_base, anon_at_peak);
    let json = json!({
        "server_cpu_percent_at_peak": server_cpu,
        "server_cpu_percent_max": round(cpu_max),
        "server_cpu_percent_per_call": if peak_talking > 0 { round(server_cpu / peak_talking as f64) } else { 0.0 },
        "server_cpu_by_thread": i.server_threads,
        "server_rss_base_mib": round(rss_base / 1024.0),
        "server_rss_peak_mib": round(rss_peak / 1024.0),
        "server_rss_at_peak_calls_mib": round(rss_at_peak / 1024.0),
        "server_rss_per_call_kib": rss_per_call,
        "server_rss_anon_per_call_kib": rss_anon_per_call,
        "server_rss_slope_kib_per_call": rss_slope.map(round),
        "peer_cpu_percent_at_peak": at_plateau("peer_cpu_percent"),
        "bench_cpu_percent_at_peak": at_plateau("bench_cpu_percent"),
        "machine_busy_percent_at_peak": at_plateau("machine_busy_percent"),
    });
    Resources { json, rss_per_call }
}

/// Pacing at the far end, per campaign (each calls from its own number), and whether every
/// campaign's held.
fn pacing(i: &Inputs) -> (Vec<Value>, bool) {
    let args = i.args;
    let mut pacing = Vec::new();
    let mut pacing_held = true;
    for (id, number) in &i.drive.campaigns {
        let digits = number.trim_start_matches('+');
        let seen = i
            .far_ends
            .iter()
            .find(|(from, _)| from.trim_start_matches('+') == digits)
            .map(|(_, f)| f.clone())
            .unwrap_or_default();
        let held = seen.max_live <= args.max_in_flight
            && seen
                .min_gap_secs
                .is_none_or(|g| g + GAP_TOLERANCE_SECS >= args.min_gap as f64);
        pacing_held &= held;
        pacing.push(json!({
            "campaign": id, "from": number, "invites": seen.invites,
            "max_in_flight": args.max_in_flight, "observed_max_in_flight": seen.max_live,
            "min_seconds_between_calls": args.min_gap,
            "observed_min_gap_secs": seen.min_gap_secs.map(|g| (g * 1000.0).round() / 1000.0),
            "held": held,
        }));
    }
    (pacing, pacing_held)
}

/// The service's dial rate (calls started over the time they took), and the setup rate: at the
/// bench's peer, its INVITEs over the time from the first to the last of them; with SIPp, the
/// dial rate.
fn setup_rates(i: &Inputs, invites: &[f64]) -> (Option<f64>, f64) {
    let mut dials: Vec<f64> = i
        .records
        .iter()
        .filter_map(|r| {
            r["started_at"]
                .as_str()?
                .parse::<chrono::DateTime<chrono::Utc>>()
                .ok()
        })
        .map(|t| t.timestamp_micros() as f64 / 1e6)
        .collect();
    dials.sort_by(|a, b| a.total_cmp(b));
    let dial_rate = match (dials.first(), dials.last()) {
        (Some(a), Some(b)) if b > a => Some(round((dials.len() - 1) as f64 / (b - a))),
        _ => None,
    };
    let span = match (
        invites.iter().copied().reduce(f64::min),
        invites.iter().copied().reduce(f64::max),
    ) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => i.drive.secs.max(0.001),
    };
    let setup_rate = if i.args.peer == "bench" {
        round(invites.len().saturating_sub(1) as f64 / span)
    } else {
        dial_rate.unwrap_or(0.0)
    };
    (dial_rate, setup_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_count_overlaps_and_end_before_start() {
        assert_eq!(peak(vec![(0.0, 2.0), (1.0, 3.0), (2.0, 4.0)]), 2);
        assert_eq!(peak(vec![]), 0);
        assert_eq!(slope(&[(0.0, 10.0), (2.0, 14.0), (4.0, 18.0)]), Some(2.0));
        assert_eq!(slope(&[(1.0, 1.0)]), None);
    }
}
