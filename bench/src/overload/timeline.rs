//! Figures read off the samples: CPU over a stretch, when the server was back to quiet after
//! the flood, and its memory before, at the peak and after.

use super::watch::Sample;

/// The mean of `f` over the samples taken in `(from, to]` (a sample's CPU covers the 250 ms
/// before it).
pub(crate) fn mean(
    samples: &[Sample],
    from: f64,
    to: f64,
    f: impl Fn(&Sample) -> Option<f64>,
) -> Option<f64> {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.t > from && s.t <= to)
        .filter_map(f)
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The first moment at or after `end` from which the server's CPU stays at or below
/// `threshold` (percent of one core) for `window` seconds of samples in a row.
pub(crate) fn quiet_from(samples: &[Sample], end: f64, threshold: f64, window: f64) -> Option<f64> {
    let mut prev = end;
    let mut since: Option<f64> = None;
    for s in samples.iter().filter(|s| s.t > end) {
        match s.cpu_percent {
            Some(cpu) if cpu <= threshold => {
                let start = *since.get_or_insert(prev.max(end));
                if s.t - start >= window - 1e-9 {
                    return Some(start);
                }
            }
            _ => since = None,
        }
        prev = s.t;
    }
    None
}

/// RSS (MiB) in the last sample before `start`, the highest from `start` on, and in the first
/// sample at or after `after` (none when sampling stopped before).
pub(crate) fn rss(samples: &[Sample], start: f64, after: f64) -> (Option<f64>, f64, Option<f64>) {
    memory(samples, start, after, |s| s.rss_mib)
}

/// The same for the anonymous part of RSS.
pub(crate) fn rss_anon(
    samples: &[Sample],
    start: f64,
    after: f64,
) -> (Option<f64>, f64, Option<f64>) {
    memory(samples, start, after, |s| s.rss_anon_mib)
}

fn memory(
    samples: &[Sample],
    start: f64,
    after: f64,
    f: impl Fn(&Sample) -> Option<f64>,
) -> (Option<f64>, f64, Option<f64>) {
    let before = samples
        .iter()
        .filter(|s| s.t <= start)
        .filter_map(&f)
        .next_back();
    let peak = samples
        .iter()
        .filter(|s| s.t > start)
        .filter_map(&f)
        .fold(before.unwrap_or(0.0), f64::max);
    let later = samples.iter().filter(|s| s.t >= after).find_map(&f);
    (before, peak, later)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, cpu: f64, rss: f64) -> Sample {
        Sample {
            t,
            cpu_percent: Some(cpu),
            rss_mib: Some(rss),
            ..Sample::default()
        }
    }

    fn run() -> Vec<Sample> {
        // Idle, a flood from 1.0 to 2.0, busy until 3.0, a blip at 3.5, quiet after.
        let cpu = [
            2.0, 2.0, 2.0, 2.0, 190.0, 190.0, 190.0, 190.0, 120.0, 80.0, 40.0, 20.0, 3.0, 3.0, 9.0,
            3.0, 3.0, 3.0, 3.0, 3.0, 3.0,
        ];
        cpu.iter()
            .enumerate()
            .map(|(i, c)| {
                let t = (i + 1) as f64 * 0.25;
                at(t, *c, 40.0 + if t > 1.0 { 60.0 / t } else { 0.0 })
            })
            .collect()
    }

    #[test]
    fn quiet_after_a_blip() {
        let s = run();
        // Below 5% from 3.0 to 3.5, 9% in (3.5, 3.75], below again from 3.75 for a second.
        assert_eq!(quiet_from(&s, 2.0, 5.0, 1.0), Some(3.75));
        assert_eq!(quiet_from(&s, 2.0, 10.0, 1.0), Some(3.0));
        assert_eq!(quiet_from(&s, 2.0, 1.0, 1.0), None);
        assert_eq!(mean(&s, 0.0, 1.0, |s| s.cpu_percent), Some(2.0));
        assert_eq!(mean(&s, 10.0, 20.0, |s| s.cpu_percent), None);
    }

    #[test]
    fn memory_before_peak_after() {
        let s = run();
        let (before, peak, after) = rss(&s, 1.0, 5.0);
        assert_eq!(before, Some(40.0));
        assert!((peak - (40.0 + 60.0 / 1.25)).abs() < 1e-9);
        assert_eq!(after, Some(52.0));
        assert_eq!(rss(&s, 1.0, 99.0).2, None);
    }
}
