//! The server's own figures over the calls, from its `/metrics` before and after: how busy
//! its async runtime and its media workers were, and how late the media workers' frames ran.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::measure::round;

/// One scrape of `/metrics`: each sample's name with its labels, and its value.
pub(super) type Scrape = BTreeMap<String, f64>;

/// Reads the server's `/metrics` (empty if it does not answer).
pub(super) async fn scrape(metrics_url: &str) -> Scrape {
    let Ok(resp) = reqwest::get(format!("{metrics_url}/metrics")).await else {
        return Scrape::new();
    };
    let Ok(text) = resp.text().await else {
        return Scrape::new();
    };
    parse(&text)
}

fn parse(text: &str) -> Scrape {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// What grew between the scrapes `before` and `after`, `secs` apart.
pub(super) fn figures(before: &Scrape, after: &Scrape, secs: f64) -> Value {
    let grew = |prefix: &str| -> f64 {
        after
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| v - before.get(k).copied().unwrap_or(0.0))
            .sum()
    };
    let share = |prefix: &str| round(grew(prefix) / secs.max(0.001) * 100.0);
    json!({
        "runtime_busy_percent_of_a_core": share("switchboard_runtime_busy_seconds_total{"),
        "media_busy_percent_of_a_core": share("switchboard_media_busy_seconds_total{"),
        "media_frame_passes": grew("switchboard_media_frame_lag_seconds_count{"),
        "media_frame_lag_ms": lag(before, after),
        "media_frame_lag_mean_ms": round(
            grew("switchboard_media_frame_lag_seconds_sum{")
                / grew("switchboard_media_frame_lag_seconds_count{").max(1.0) * 1000.0
        ),
    })
}

/// The media workers' frame lag between the scrapes, by the histogram's buckets: for p50,
/// p90, p99 and the largest, the bucket's upper bound in milliseconds (none: past the last).
fn lag(before: &Scrape, after: &Scrape) -> Value {
    let mut buckets: BTreeMap<u64, f64> = BTreeMap::new();
    let mut over = 0.0;
    for (k, v) in after {
        let Some(rest) = k.strip_prefix("switchboard_media_frame_lag_seconds_bucket{") else {
            continue;
        };
        let Some(le) = rest.split("le=\"").nth(1).and_then(|r| r.split('"').next()) else {
            continue;
        };
        let n = v - before.get(k).copied().unwrap_or(0.0);
        match le.parse::<f64>() {
            Ok(bound) if bound.is_finite() => {
                *buckets
                    .entry((bound * 1000.0).round() as u64)
                    .or_insert(0.0) += n
            }
            _ => over += n,
        }
    }
    // Cumulative counts per bound; `over` is the +Inf bucket (all passes).
    let at = |p: f64| -> Value {
        let want = p * over;
        buckets
            .iter()
            .find(|(_, n)| **n >= want)
            .map_or(Value::Null, |(ms, _)| json!(ms))
    };
    let largest = buckets
        .iter()
        .find(|(_, n)| **n >= over)
        .map_or(Value::Null, |(ms, _)| json!(ms));
    json!({"p50_at_most": at(0.5), "p90_at_most": at(0.9), "p99_at_most": at(0.99),
        "max_at_most": largest, "passes": over})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_shares_and_lag_buckets_are_read_from_the_difference() {
        let before = parse(
            "switchboard_media_busy_seconds_total{worker=\"0\"} 1\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 10\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"0.005\"} 10\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 10\n",
        );
        let after = parse(
            "# TYPE x counter\n\
             switchboard_media_busy_seconds_total{worker=\"0\"} 2\n\
             switchboard_media_busy_seconds_total{worker=\"1\"} 0.5\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"0.001\"} 100\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"0.005\"} 109\n\
             switchboard_media_frame_lag_seconds_bucket{worker=\"0\",le=\"+Inf\"} 110\n",
        );
        let f = figures(&before, &after, 10.0);
        assert_eq!(f["media_busy_percent_of_a_core"], 15.0);
        assert_eq!(f["media_frame_lag_ms"]["p50_at_most"], 1);
        assert_eq!(f["media_frame_lag_ms"]["p99_at_most"], 5);
        assert_eq!(f["media_frame_lag_ms"]["max_at_most"], Value::Null);
    }
}
