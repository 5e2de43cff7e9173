//! What the bench watches while SIPp runs: the server's CPU and memory (and SIPp's, and the
//! machine's) every 250 ms, the API's latency, and the server's `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::measure::{CpuMeter, MachineMeter, round};

pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// One sample. CPU figures are percent of one core since the sample before.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    /// Seconds since the run started.
    pub t: f64,
    pub cpu_percent: Option<f64>,
    pub rss_mib: Option<f64>,
    /// The anonymous part of it (not the database's memory-mapped pages).
    pub rss_anon_mib: Option<f64>,
    pub sipp_cpu_percent: Option<f64>,
    /// The whole machine, percent of all its cores.
    pub machine_percent: Option<f64>,
}

impl Sample {
    pub(crate) fn json(&self) -> Value {
        let r = |v: Option<f64>| v.map(round);
        json!({
            "t": round(self.t),
            "cpu_percent": r(self.cpu_percent),
            "rss_mib": r(self.rss_mib),
            "rss_anon_mib": r(self.rss_anon_mib),
            "sipp_cpu_percent": r(self.sipp_cpu_percent),
            "machine_percent": r(self.machine_percent),
        })
    }
}

/// Samples `server`, and SIPp once `sipp` holds its pid, until `stop`.
pub(crate) async fn sample(
    server: u32,
    sipp: Arc<AtomicU32>,
    out: Arc<Mutex<Vec<Sample>>>,
    started: Instant,
    stop: Arc<AtomicBool>,
) {
    let mut meter = CpuMeter::new(Some(server));
    let mut machine = MachineMeter::default();
    let mut caller: Option<(u32, CpuMeter)> = None;
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let pid = sipp.load(Ordering::Relaxed);
        if pid != 0 && caller.as_ref().is_none_or(|(p, _)| *p != pid) {
            caller = Some((pid, CpuMeter::new(Some(pid))));
        }
        let (cpu, rss) = meter.sample();
        let s = Sample {
            t: started.elapsed().as_secs_f64(),
            cpu_percent: cpu,
            rss_mib: rss.map(|k| k / 1024.0),
            rss_anon_mib: crate::measure::rss_anon_kib(server).map(|k| k / 1024.0),
            sipp_cpu_percent: caller.as_mut().and_then(|(_, m)| m.sample().0),
            machine_percent: machine.sample(),
        };
        out.lock().expect("samples").push(s);
    }
}

/// One API request: its latency in ms, and its error (a transport error or a status other than
/// 2xx).
pub(crate) struct Probe {
    pub latency_ms: f64,
    pub error: Option<String>,
}

/// `GET /calls?limit=1` every `every` until `stop`; each request on its own task, so a slow
/// answer does not delay the next request.
pub(crate) async fn probe_api(
    base: String,
    key: String,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Vec<Probe> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("HTTP client");
    let url = format!("{base}/calls?limit=1");
    let mut tick = tokio::time::interval(every);
    let mut sent = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        sent.push(tokio::spawn(async move {
            let at = Instant::now();
            let result = client.get(&url).bearer_auth(&key).send().await;
            let error = match result {
                Ok(r) if r.status().is_success() => r.bytes().await.err().map(|e| e.to_string()),
                Ok(r) => Some(r.status().to_string()),
                Err(e) => Some(if e.is_timeout() {
                    "timeout".into()
                } else {
                    e.to_string()
                }),
            };
            Probe {
                latency_ms: at.elapsed().as_secs_f64() * 1000.0,
                error,
            }
        }));
    }
    let mut out = Vec::with_capacity(sent.len());
    for p in sent {
        if let Ok(p) = p.await {
            out.push(p);
        }
    }
    out
}

/// The API's latency over the probes (p50, p99, max, ms) and its errors by kind.
pub(crate) fn api_report(probes: &[Probe]) -> Value {
    let mut ms: Vec<f64> = probes.iter().map(|p| p.latency_ms).collect();
    let mut errors = Map::new();
    for e in probes.iter().filter_map(|p| p.error.as_deref()) {
        let n = errors.get(e).and_then(Value::as_u64).unwrap_or(0);
        errors.insert(e.to_string(), json!(n + 1));
    }
    json!({"latency_ms": crate::measure::spread(&mut ms), "errors": errors})
}

/// Inbound calls the server still records as up (`GET /calls?status=in_progress`, paged), at most
/// `cap`; none when the API does not answer in 10 s.
pub(crate) async fn open_calls(base: &str, key: &str, cap: u64) -> Option<u64> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .ok()?;
    let mut n = 0;
    while n < cap {
        let page: Value = client
            .get(format!(
                "{base}/calls?status=in_progress&direction=inbound&limit=100&offset={n}"
            ))
            .bearer_auth(key)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let got = page["data"].as_array()?.len() as u64;
        n += got;
        if got < 100 {
            break;
        }
    }
    Some(n)
}

/// The server's `switchboard_sip_*` series and its live calls, from `/metrics`; null when the
/// server does not answer in 5 s.
pub(crate) async fn scrape_metrics(base: &str) -> Value {
    let text = async {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .text()
            .await
    };
    match text.await {
        Ok(text) => sip_series(&text),
        Err(_) => Value::Null,
    }
}

/// The `switchboard_sip_*` lines (and `switchboard_calls_live`) of a Prometheus text page, by
/// series (name and labels).
fn sip_series(text: &str) -> Value {
    let mut out = Map::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if !(line.starts_with("switchboard_sip_") || line.starts_with("switchboard_calls_live")) {
            continue;
        }
        if let Some((series, v)) = line.rsplit_once(' ')
            && let Ok(v) = v.trim().parse::<f64>()
        {
            out.insert(series.to_string(), json!(v));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sip_series_are_picked_from_metrics() {
        let page = "# TYPE switchboard_sip_invites_refused_total counter\n\
            switchboard_sip_invites_refused_total{reason=\"overload\"} 12\n\
            switchboard_sip_lag_seconds 0.004\n\
            switchboard_http_requests_total{route=\"/calls\"} 3\n\
            switchboard_calls_live 7\n";
        let v = sip_series(page);
        assert_eq!(
            v["switchboard_sip_invites_refused_total{reason=\"overload\"}"],
            12.0
        );
        assert_eq!(v["switchboard_sip_lag_seconds"], 0.004);
        assert_eq!(v["switchboard_calls_live"], 7.0);
        assert_eq!(v.as_object().unwrap().len(), 3);
    }

    #[test]
    fn api_latency_and_errors() {
        let probes: Vec<Probe> = (1..=100)
            .map(|i| Probe {
                latency_ms: i as f64,
                error: (i > 98).then(|| "timeout".to_string()),
            })
            .collect();
        let r = api_report(&probes);
        assert_eq!(r["latency_ms"]["p50"], 51.0);
        assert_eq!(r["latency_ms"]["p99"], 99.0);
        assert_eq!(r["latency_ms"]["max"], 100.0);
        assert_eq!(r["errors"]["timeout"], 2);
    }
}
