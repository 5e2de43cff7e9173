//! The sip-load report: setup latency percentiles, failures, RTP figures and the server's CPU
//! and memory over the run, as JSON and as an HTML page with charts.

use super::*;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

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

/// Samples the server's CPU (percent of one core) and RSS every half second.
pub(super) async fn sample_server(
    pid: Option<u32>,
    s: Arc<Shared>,
    out: Arc<Mutex<Vec<Value>>>,
    started: Instant,
) {
    let tick_hz = 100.0; // USER_HZ on Linux
    let mut last: Option<(f64, Instant)> = None;
    loop {
        let cpu_ticks = pid.and_then(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let rest = stat.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
        });
        let rss = pid.and_then(|p| {
            let status = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        });
        let now = Instant::now();
        let cpu = match (cpu_ticks, last) {
            (Some(t), Some((t0, at))) => {
                Some((t - t0) / tick_hz / now.duration_since(at).as_secs_f64() * 100.0)
            }
            _ => None,
        };
        if let Some(t) = cpu_ticks {
            last = Some((t, now));
        }
        out.lock().await.push(json!({
            "t": started.elapsed().as_secs_f64(),
            "live_calls": s.totals.live.load(Ordering::Relaxed),
            "cpu_percent": cpu,
            "rss_kib": rss,
        }));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn polyline(samples: &[Value], key: &str, w: f64, h: f64) -> (String, f64) {
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter_map(|v| Some((v["t"].as_f64()?, v[key].as_f64()?)))
        .collect();
    let tmax = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let vmax = points.iter().map(|p| p.1).fold(1.0, f64::max);
    let line = points
        .iter()
        .map(|(t, v)| format!("{:.1},{:.1}", t / tmax * w, h - v / vmax * h))
        .collect::<Vec<_>>()
        .join(" ");
    (line, vmax)
}

pub(super) fn html(report: &Value, samples: &[Value]) -> String {
    let (w, h) = (800.0, 160.0);
    let chart = |key: &str, title: &str, color: &str| {
        let (line, max) = polyline(samples, key, w, h);
        format!(
            "<h2>{title} (max {max:.1})</h2><svg width=\"{w}\" height=\"{h}\" style=\"border:1px solid #ccc\">\
             <polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{line}\"/></svg>"
        )
    };
    let rows: String = report
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("<tr><th>{k}</th><td>{v}</td></tr>"))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Switchboard SIP load</title>\
         <style>body{{font-family:sans-serif;margin:2em}}th{{text-align:left;padding-right:1em}}</style></head><body>\
         <h1>Switchboard SIP load</h1><table>{rows}</table>{}{}{}</body></html>",
        chart("live_calls", "Concurrent calls", "#2a6"),
        chart("cpu_percent", "Server CPU (% of one core)", "#c33"),
        chart("rss_kib", "Server RSS (KiB)", "#36c"),
    )
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
