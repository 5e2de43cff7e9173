//! What the benchmarks share to measure and report: a process's CPU and memory from /proc (and
//! its threads'), a server's sampled over a run, this process's peak memory, the machine's busy
//! share, percentiles and rounding, the test audio, and the HTML report page.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

/// USER_HZ on Linux: the unit of /proc CPU times.
const TICK_HZ: f64 = 100.0;

/// `x` to two decimals, as the reports give figures.
pub fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// p50, p99 and max of `values` (in place sorted), rounded.
pub fn spread(values: &mut [f64]) -> Value {
    values.sort_by(|a, b| a.total_cmp(b));
    serde_json::json!({
        "n": values.len(),
        "p50": round(percentile(values, 50.0)),
        "p99": round(percentile(values, 99.0)),
        "max": round(values.last().copied().unwrap_or(0.0)),
    })
}

/// User plus system CPU ticks of a process (all its threads).
fn cpu_ticks(stat: &str) -> Option<f64> {
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
}

pub fn rss_kib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of a process's RSS (its heap and stacks; not file pages it maps, such as
/// a memory-mapped database), in KiB.
pub fn rss_anon_kib(pid: u32) -> Option<f64> {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse::<f64>().ok()
}

/// Peak resident memory of this process, in MiB (Linux).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A process's CPU use between samples, in percent of one core.
pub struct CpuMeter {
    pid: Option<u32>,
    last: Option<(f64, Instant)>,
}

impl CpuMeter {
    pub fn new(pid: Option<u32>) -> CpuMeter {
        CpuMeter { pid, last: None }
    }

    /// CPU since the previous sample (none on the first), and RSS in KiB.
    pub fn sample(&mut self) -> (Option<f64>, Option<f64>) {
        let Some(pid) = self.pid else {
            return (None, None);
        };
        let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| cpu_ticks(&s));
        let now = Instant::now();
        let cpu = match (ticks, self.last) {
            (Some(t), Some((t0, at))) => {
                Some((t - t0) / TICK_HZ / now.duration_since(at).as_secs_f64() * 100.0)
            }
            _ => None,
        };
        if let Some(t) = ticks {
            self.last = Some((t, now));
        }
        (cpu, rss_kib(pid))
    }
}

/// CPU ticks of a process's threads, summed by thread name (digits dropped, so a pool's
/// workers add up), to see which part of a process works.
pub fn thread_ticks(pid: u32) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let name = stat
            .split_once('(')
            .and_then(|(_, r)| r.rsplit_once(')'))
            .map(|(n, _)| n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-'))
            .unwrap_or("?")
            .to_string();
        if let Some(t) = cpu_ticks(&stat) {
            *out.entry(name).or_insert(0.0) += t;
        }
    }
    out
}

/// Percent of one core each thread group used between two `thread_ticks` snapshots.
pub fn thread_cpu(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    secs: f64,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(name, t)| {
            let used = t - before.get(name).copied().unwrap_or(0.0);
            (
                name.clone(),
                round(used / TICK_HZ / secs.max(0.001) * 100.0),
            )
        })
        .filter(|(_, pct)| *pct > 0.0)
        .collect()
}

/// Samples the server's CPU (percent of one core) and RSS, and the machine's busy share (of
/// all its cores), every half second.
pub async fn sample_server(
    pid: Option<u32>,
    live: impl Fn() -> i64,
    out: Arc<tokio::sync::Mutex<Vec<Value>>>,
    started: Instant,
) {
    let mut meter = CpuMeter::new(pid);
    let mut machine = MachineMeter::default();
    loop {
        let (cpu, rss) = meter.sample();
        out.lock().await.push(serde_json::json!({
            "t": started.elapsed().as_secs_f64(),
            "live_calls": live(),
            "cpu_percent": cpu,
            "rss_kib": rss,
            "machine_busy_percent": machine.sample().map(round),
        }));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The whole machine's busy share between samples, in percent of all its cores.
#[derive(Default)]
pub struct MachineMeter {
    last: Option<(f64, f64)>,
}

impl MachineMeter {
    pub fn sample(&mut self) -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<f64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let total: f64 = cpu.iter().sum();
        // idle and iowait
        let idle = cpu.get(3)? + cpu.get(4).copied().unwrap_or(0.0);
        let busy = total - idle;
        let pct = self
            .last
            .map(|(b0, t0)| (busy - b0) / (total - t0).max(1.0) * 100.0);
        self.last = Some((busy, total));
        pct
    }
}

/// `len` samples of a sine tone at `rate`.
pub fn tone(rate: u32, hz: f64, len: usize, amplitude: f64) -> Vec<i16> {
    (0..len)
        .map(|i| {
            (amplitude * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin())
                as i16
        })
        .collect()
}

/// A mono 16-bit WAV (the first channel of others), resampled to `rate`.
pub fn load_wav(path: &Path, rate: u32) -> anyhow::Result<Vec<i16>> {
    let reader =
        hound::WavReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let spec = reader.spec();
    if spec.bits_per_sample != 16 || spec.sample_format != hound::SampleFormat::Int {
        bail!("{}: a 16-bit PCM WAV is needed", path.display());
    }
    let channels = usize::from(spec.channels.max(1));
    let samples: Vec<i16> = reader
        .into_samples::<i16>()
        .step_by(channels)
        .collect::<Result<_, _>>()?;
    if samples.is_empty() {
        bail!("{}: no audio", path.display());
    }
    Ok(switchboard_sip::media::resample(
        &samples,
        spec.sample_rate,
        rate,
    ))
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

/// A chart of the samples: `(sample key, title, colour)`.
pub type Chart<'a> = (&'a str, &'a str, &'a str);

/// The report as a table, then a line chart per sampled figure.
pub fn html(title: &str, report: &Value, samples: &[Value], charts: &[Chart]) -> String {
    let (w, h) = (800.0, 160.0);
    let charts: String = charts
        .iter()
        .map(|(key, name, color)| {
            let (line, max) = polyline(samples, key, w, h);
            format!(
                "<h2>{name} (max {max:.1})</h2><svg width=\"{w}\" height=\"{h}\" style=\"border:1px solid #ccc\">\
                 <polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{line}\"/></svg>"
            )
        })
        .collect();
    let rows: String = report
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("<tr><th>{k}</th><td>{}</td></tr>", escape(&v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}th{{text-align:left;padding-right:1em;vertical-align:top}}\
         td{{font-family:monospace;word-break:break-all}}</style></head><body>\
         <h1>{title}</h1><table>{rows}</table>{charts}</body></html>"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_measured() {
        let pid = std::process::id();
        let mut meter = CpuMeter::new(Some(pid));
        assert_eq!(meter.sample().0, None);
        assert!(meter.sample().1.unwrap() > 0.0);
        assert!(meter.sample().0.is_some());
        let threads = thread_ticks(pid);
        assert!(!threads.is_empty());
        let mut machine = MachineMeter::default();
        assert_eq!(machine.sample(), None);
        assert!(machine.sample().is_some());
    }

    #[test]
    fn percentiles_and_pages() {
        let mut v = vec![3.0, 1.0, 2.0];
        assert_eq!(spread(&mut v)["p50"], 2.0);
        let page = html(
            "T",
            &serde_json::json!({"a": "<b>"}),
            &[serde_json::json!({"t": 0.0, "x": 1.0})],
            &[("x", "X", "#000")],
        );
        assert!(page.contains("&lt;b&gt;") && page.contains("<polyline"));
    }
}
