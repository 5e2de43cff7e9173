//! `--reference`: this run's main figures as ratios to an earlier run's report.

use serde_json::{Value, json};

use crate::measure::round;

/// The figures compared with a reference report: lower is better for all but the first
/// three.
const COMPARED: [&str; 9] = [
    "setup_rate_per_sec",
    "peak_concurrent_calls",
    "invites_at_peer",
    "server_cpu_percent_at_peak",
    "server_cpu_percent_per_call",
    "server_rss_per_call_kib",
    "server_rss_peak_mib",
    "rtp_lost_total",
    "failed_calls",
];

/// This run's figures divided by the reference's, where both have them.
pub fn ratios(report: &Value, reference: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let mut put = |name: String, a: Option<f64>, b: Option<f64>| {
        if let (Some(a), Some(b)) = (a, b)
            && b != 0.0
        {
            out.insert(name, json!(round(a / b)));
        }
    };
    for k in COMPARED {
        put(k.to_string(), report[k].as_f64(), reference[k].as_f64());
    }
    for k in [
        "pdd_api_to_invite_ms",
        "queued_to_invite_ms",
        "answer_to_first_rtp_ms",
    ] {
        for p in ["p50", "p99"] {
            put(
                format!("{k}.{p}"),
                report[k][p].as_f64(),
                reference[k][p].as_f64(),
            );
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_take_what_both_have() {
        let r = ratios(
            &json!({"setup_rate_per_sec": 200.0, "failed_calls": 0, "queued_to_invite_ms": {"p50": 4.0}}),
            &json!({"setup_rate_per_sec": 100.0, "failed_calls": 0, "queued_to_invite_ms": {"p50": 2.0}}),
        );
        assert_eq!(
            r,
            json!({"setup_rate_per_sec": 2.0, "queued_to_invite_ms.p50": 2.0})
        );
    }
}
