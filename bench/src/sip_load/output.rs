//! The sip-load report: setup latency percentiles, failures, RTP figures and the server's CPU
//! and memory over the run, as JSON and as an HTML page with charts.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::calls::Shared;
use crate::measure::percentile;

/// The charts of the HTML report.
pub(super) const CHARTS: &[crate::measure::Chart] = &[
    ("live_calls", "Concurrent calls", "#2a6"),
    ("cpu_percent", "Server CPU (% of one core)", "#c33"),
    ("rss_kib", "Server RSS (KiB)", "#36c"),
];

pub(super) async fn report(s: &Shared, wall: f64, samples: &[Value]) -> Value {
    let mut lat = s.latencies.lock().await.clone();
    lat.sort_by(|a, b| a.total_cmp(b));
    let t = &s.totals;
    let failures = s.failures.lock().await.clone();
    let failed: u64 = failures.values().sum();
    let peak_live = samples
        .iter()
        .filter_map(|v| v["live_calls"].as_i64())
        .max()
        .unwrap_or(0);
    let rss: Vec<f64> = samples
        .iter()
        .filter_map(|v| v["rss_kib"].as_f64())
        .collect();
    let base_rss = rss.first().copied().unwrap_or(0.0);
    let peak_rss = rss.iter().copied().fold(0.0, f64::max);
    // CPU while the most calls were live: the samples within 90% of the peak.
    let plateau: Vec<f64> = samples
        .iter()
        .filter(|v| v["live_calls"].as_i64().unwrap_or(0) as f64 >= 0.9 * peak_live as f64)
        .filter_map(|v| v["cpu_percent"].as_f64())
        .collect();
    let plateau_cpu = if plateau.is_empty() {
        0.0
    } else {
        plateau.iter().sum::<f64>() / plateau.len() as f64
    };
    let answered = t.answered.load(Ordering::Relaxed);
    let span = *s.last_answer.lock().await;
    let setup_rate = if span > 0.0 {
        answered as f64 / span
    } else {
        0.0
    };
    json!({
        "transport": s.args.transport,
        "codec": s.codec.name(),
        "rate_per_second": s.args.rate,
        "hold_secs": s.args.hold,
        "calls_placed": t.started.load(Ordering::Relaxed),
        "calls_answered": answered,
        "calls_failed": failed,
        "failures_by_status": failures,
        "achieved_setup_rate": setup_rate,
        "setup_ms_p50": percentile(&lat, 50.0),
        "setup_ms_p99": percentile(&lat, 99.0),
        "setup_ms_max": lat.last().copied().unwrap_or(0.0),
        "rtp_sent": t.rtp_sent.load(Ordering::Relaxed),
        "rtp_received": t.rtp_received.load(Ordering::Relaxed),
        "rtp_lost": t.rtp_lost.load(Ordering::Relaxed),
        "peak_concurrent_calls": peak_live,
        "server_rss_base_mib": base_rss / 1024.0,
        "server_rss_peak_mib": peak_rss / 1024.0,
        "server_rss_per_call_kib": if peak_live > 0 { (peak_rss - base_rss) / peak_live as f64 } else { 0.0 },
        "server_cpu_percent_at_peak": plateau_cpu,
        "server_cpu_percent_per_call": if peak_live > 0 { plateau_cpu / peak_live as f64 } else { 0.0 },
        "wall_secs": wall,
        "samples": samples.len(),
    })
}

/// The server's RTP counters from its Prometheus endpoint.
pub(super) async fn scrape_rtp(base: &str) -> anyhow::Result<Value> {
    let text = reqwest::get(format!("{base}/metrics"))
        .await?
        .text()
        .await?;
    let mut out = serde_json::Map::new();
    for line in text.lines() {
        for name in [
            "switchboard_inbound_calls_total",
            "switchboard_rtp_packets_sent_total",
            "switchboard_rtp_packets_received_total",
            "switchboard_rtp_packets_lost_total",
        ] {
            if let Some(v) = line
                .strip_prefix(name)
                .and_then(|r| r.trim().parse::<f64>().ok())
            {
                out.insert(name.to_string(), json!(v));
            }
        }
    }
    Ok(Value::Object(out))
}
