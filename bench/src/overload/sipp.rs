//! SIPp as the caller: its built-in `uac` scenario (or `uac_pcap`), and what its trace files say
//! about the run.
//!
//! SIPp writes, in the folder it runs in:
//! - `-trace_stat -stf stat.csv -fd 1`: a row of call counters each second (`OutgoingCall(C)`,
//!   `SuccessfulCall(C)`, `FailedCall(C)` and the failure causes, `Retransmissions(C)`);
//! - `-trace_counts`: per scenario message, sent, retransmitted, timed out and unexpected
//!   (`0_INVITE_Retrans`, `7_BYE_Timeout`, `1_100_Unexp` ...), cumulative, each second;
//! - `-trace_error_codes`: the status codes of the unexpected responses (the refusals);
//! - `-trace_rtt -rtt_freq 1`: each call's response time, INVITE to 200 (the scenario's `rtd`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::sipp::{SippCsv, launch};

/// When the counter of `series` reached `total`, interpolated between the rows around it.
fn reached(series: &[(f64, f64)], total: f64) -> Option<f64> {
    let i = series.iter().position(|&(_, n)| n >= total)?;
    let (t1, n1) = series[i];
    let Some(&(t0, n0)) = i.checked_sub(1).and_then(|p| series.get(p)) else {
        return Some(t1);
    };
    Some(t0 + (t1 - t0) * ((total - n0) / (n1 - n0).max(1.0)))
}

/// What a SIPp run did, from its trace files.
#[derive(Debug, Default, Clone)]
pub(crate) struct Outcome {
    /// Unix seconds: SIPp's start and when it had placed its last call (interpolated between
    /// its one-second rows).
    pub started: f64,
    pub offer_ended: Option<f64>,
    pub offered: u64,
    pub successful: u64,
    pub failed: u64,
    /// The nonzero `Failed...(C)` counters, by cause.
    pub failed_by_cause: BTreeMap<String, u64>,
    /// Unexpected responses (the refusals) by status code.
    pub refused_by_code: BTreeMap<String, u64>,
    pub invite_retransmissions: u64,
    pub invite_timeouts: u64,
    pub bye_retransmissions: u64,
    pub bye_timeouts: u64,
    /// All of SIPp's retransmissions (every message).
    pub retransmissions: u64,
    /// Responses SIPp did not expect where they came (in the scenario's `_Unexp` counters).
    pub unexpected: u64,
    /// INVITE to 200 of each answered call, in ms (SIPp's resolution is 1 ms).
    pub setup_ms: Vec<f64>,
}

impl Outcome {
    /// Reads the four trace files' texts; `total` is the calls the run was to place.
    pub(crate) fn read(stat: &str, counts: &str, codes: &str, rtt: &str, total: u64) -> Outcome {
        let stat = SippCsv::parse(stat);
        let counts = SippCsv::parse(counts);
        let int = |name: &str| stat.last(name).unwrap_or(0.0) as u64;
        let failed_by_cause = stat
            .last_row()
            .filter(|(k, _)| k.starts_with("Failed") && k.ends_with("(C)") && *k != "FailedCall(C)")
            .filter_map(|(k, v)| Some((k.trim_end_matches("(C)").to_string(), v.parse().ok()?)))
            .filter(|(_, n): &(String, u64)| *n > 0)
            .collect();
        let started = stat.first_time().unwrap_or(0.0);
        Outcome {
            started,
            offer_ended: reached(&stat.series("CurrentTime", "OutgoingCall(C)"), total as f64),
            offered: int("OutgoingCall(C)"),
            successful: int("SuccessfulCall(C)"),
            failed: int("FailedCall(C)"),
            failed_by_cause,
            refused_by_code: error_codes(codes),
            invite_retransmissions: counts.last_sum("_INVITE_Retrans"),
            invite_timeouts: counts.last_sum("_INVITE_Timeout"),
            bye_retransmissions: counts.last_sum("_BYE_Retrans"),
            bye_timeouts: counts.last_sum("_BYE_Timeout"),
            retransmissions: int("Retransmissions(C)"),
            unexpected: counts.last_sum("_Unexp"),
            setup_ms: response_times(rtt),
        }
    }
}

/// `-trace_error_codes`: per row, the time, then the codes received since the row before,
/// comma-separated (`...;00:00:01:007000;503,503,`).
fn error_codes(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((_, codes)) = line.rsplit_once(';') else {
            continue;
        };
        for code in codes.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            *out.entry(code.to_string()).or_insert(0) += 1;
        }
    }
    out
}

/// `-trace_rtt`: `Date_ms;response_time_ms;rtd_no`, one row per answered call.
fn response_times(text: &str) -> Vec<f64> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split(';').nth(1)?.trim().parse().ok())
        .collect()
}

/// How the calls carry audio.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Audio {
    /// None from SIPp (the server's audio goes to a port nobody reads).
    None,
    /// SIPp echoes the server's audio back (`-rtp_echo`) for the whole call.
    Echo,
    /// The built-in `uac_pcap` scenario: plays G.711 A-law from a capture (8 s of pause with
    /// audio, then a DTMF digit; each call lasts about 9 s whatever `-d` says).
    Pcap,
}

impl Audio {
    pub(crate) fn parse(s: &str) -> anyhow::Result<Audio> {
        Ok(match s {
            "none" => Audio::None,
            "echo" => Audio::Echo,
            "pcap" => Audio::Pcap,
            other => bail!("--audio {other}: none, echo or pcap"),
        })
    }

    /// How long a call lasts, in ms, for a `-d` of `hold_ms`.
    pub(crate) fn call_ms(self, hold_ms: u64) -> u64 {
        match self {
            Audio::Pcap => 9_000,
            _ => hold_ms,
        }
    }
}

/// One SIPp run: `calls` calls at `rate` per second, each held `hold_ms`.
pub(crate) struct Load<'a> {
    pub bin: &'a Path,
    pub target: SocketAddr,
    pub slug: &'a str,
    pub rate: f64,
    pub calls: u64,
    pub hold_ms: u64,
    pub audio: Audio,
    /// SIPp quits after this many seconds whatever is still open.
    pub timeout_secs: u64,
    pub extra: &'a [String],
}

pub(crate) struct Sipp {
    pub child: tokio::process::Child,
    dir: tempfile::TempDir,
    total: u64,
}

/// Where Debian's sip-tester (and a source install) keep SIPp's captures.
const PCAP_DIRS: &[&str] = &[
    "/usr/share/sip-tester",
    "/usr/share/sipp/pcap",
    "/usr/local/share/sipp/pcap",
];

impl Sipp {
    pub(crate) async fn start(load: &Load<'_>) -> anyhow::Result<Sipp> {
        let dir = tempfile::tempdir()?;
        let port = crate::spawn::free_port()?;
        let mut cmd = tokio::process::Command::new(load.bin);
        let scenario = if load.audio == Audio::Pcap {
            "uac_pcap"
        } else {
            "uac"
        };
        cmd.args(["-sn", scenario, "-s", load.slug])
            .arg(load.target.to_string())
            .args(["-i", "127.0.0.1", "-mi", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .arg("-r")
            .arg(format!("{}", load.rate))
            .arg("-d")
            .arg(load.hold_ms.to_string())
            .arg("-m")
            .arg(load.calls.to_string())
            // No cap on open calls: calls waiting on timeouts must not slow the offer.
            .arg("-l")
            .arg(load.calls.max(1).to_string())
            .arg("-timeout")
            .arg(format!("{}s", load.timeout_secs))
            .args(["-nostdin", "-trace_stat", "-stf", "stat.csv", "-fd", "1"])
            .args(["-trace_counts", "-trace_error_codes", "-trace_rtt"])
            .args(["-rtt_freq", "1"]);
        match load.audio {
            Audio::None => {}
            Audio::Echo => {
                cmd.arg("-rtp_echo")
                    .arg("-mp")
                    .arg(crate::spawn::free_port()?.to_string());
            }
            Audio::Pcap => {
                let found = PCAP_DIRS
                    .iter()
                    .map(PathBuf::from)
                    .find(|d| d.join("g711a.pcap").exists())
                    .context("SIPp's pcap/g711a.pcap not found (apt-get install sip-tester)")?;
                std::os::unix::fs::symlink(found, dir.path().join("pcap"))?;
            }
        }
        let child = launch(cmd.args(load.extra), dir.path(), load.bin)?;
        Ok(Sipp {
            child,
            dir,
            total: load.calls,
        })
    }

    /// Waits for SIPp to end and reads its trace files.
    pub(crate) async fn finish(mut self) -> anyhow::Result<Outcome> {
        let status = self.child.wait().await?;
        let read = |suffix: &str| -> String {
            std::fs::read_dir(self.dir.path())
                .into_iter()
                .flatten()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().ends_with(suffix))
                .and_then(|e| std::fs::read_to_string(e.path()).ok())
                .unwrap_or_default()
        };
        let stat = read("stat.csv");
        if stat.is_empty() {
            bail!("sipp wrote no statistics ({status}): {}", read("sipp.err"));
        }
        Ok(Outcome::read(
            &stat,
            &read("_counts.csv"),
            &read("_error_codes.csv"),
            &read("_rtt.csv"),
            self.total,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Trimmed from a run of `sipp -sn uac` against a server that refused some calls with 503
    // and left others unanswered.
    const STAT: &str = "StartTime;LastResetTime;CurrentTime;ElapsedTime(P);ElapsedTime(C);\
TargetRate;CallRate(P);CallRate(C);OutgoingCall(P);OutgoingCall(C);CurrentCall;\
SuccessfulCall(P);SuccessfulCall(C);FailedCall(P);FailedCall(C);FailedMaxUDPRetrans(P);\
FailedMaxUDPRetrans(C);FailedUnexpectedMessage(P);FailedUnexpectedMessage(C);\
FailedOutboundCongestion(P);FailedOutboundCongestion(C);Retransmissions(P);Retransmissions(C);
2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:00.000000\t1795424400.000000;00:00:00;00:00:00;100;0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;0;
2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:01.000000\t1795424401.000000;00:00:01;00:00:01;100;100;100;100;100;50;40;40;10;10;0;0;10;10;0;0;30;30;
2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:01.000000\t1795424401.000000;2026-11-23\t09:00:02.000000\t1795424402.000000;00:00:01;00:00:02;100;50;75;50;150;20;90;130;5;15;0;0;5;15;0;0;40;70;
2026-11-23\t09:00:00.000000\t1795424400.000000;2026-11-23\t09:00:02.000000\t1795424402.000000;2026-11-23\t09:00:40.000000\t1795424440.000000;00:00:38;00:00:40;100;0;3;0;150;0;0;130;5;20;5;5;0;15;0;0;10;80;
";
    const COUNTS: &str = "CurrentTime;ElapsedTime;0_INVITE_Sent;0_INVITE_Retrans;0_INVITE_Timeout;\
1_100_Recv;1_100_Retrans;1_100_Timeout;1_100_Unexp;4_200_Recv;4_200_Retrans;4_200_Timeout;\
4_200_Unexp;7_BYE_Sent;7_BYE_Retrans;7_BYE_Timeout;8_200_Recv;8_200_Retrans;8_200_Timeout;8_200_Unexp;
2026-11-23\t09:00:01.000000\t1795424401.000000;00:00:01:000000;100;20;0;90;0;0;10;40;0;0;0;40;2;0;40;0;0;0;
2026-11-23\t09:00:40.000000\t1795424440.000000;00:00:40:000000;150;62;5;140;0;0;15;130;0;0;0;130;3;0;130;0;0;0;
";
    const CODES: &str = "2026-11-23\t09:00:00.0\t1795424400.0;00:00:00:000000;
2026-11-23\t09:00:01.0\t1795424401.0;00:00:01:000000;503,503,503,503,503,503,503,503,503,503,
2026-11-23\t09:00:02.0\t1795424402.0;00:00:02:000000;503,503,503,503,486,
";
    const RTT: &str = "Date_ms;response_time_ms;rtd_no\n10.0;1;1\n20.0;3;1\n30.0;2;1\n40.0;250;1\n";

    #[test]
    fn sipp_traces_are_read() {
        let o = Outcome::read(STAT, COUNTS, CODES, RTT, 150);
        assert_eq!(o.started, 1_795_424_400.0);
        // 100 placed by 09:00:01, 150 by :02.
        assert_eq!(o.offer_ended, Some(1_795_424_402.0));
        assert_eq!((o.offered, o.successful, o.failed), (150, 130, 20));
        assert_eq!(o.failed_by_cause["FailedUnexpectedMessage"], 15);
        assert_eq!(o.failed_by_cause["FailedMaxUDPRetrans"], 5);
        assert!(!o.failed_by_cause.contains_key("FailedOutboundCongestion"));
        assert_eq!(o.refused_by_code["503"], 14);
        assert_eq!(o.refused_by_code["486"], 1);
        assert_eq!((o.invite_retransmissions, o.invite_timeouts), (62, 5));
        assert_eq!((o.bye_retransmissions, o.bye_timeouts), (3, 0));
        assert_eq!((o.retransmissions, o.unexpected), (80, 15));
        assert_eq!(o.setup_ms, vec![1.0, 3.0, 2.0, 250.0]);
    }

    #[test]
    fn the_offer_ends_between_rows() {
        let s = [(0.0, 0.0), (1.0, 100.0), (2.0, 300.0)];
        assert_eq!(reached(&s, 200.0), Some(1.5));
        assert_eq!(reached(&s, 100.0), Some(1.0));
        assert_eq!(reached(&s, 400.0), None);
        assert!(Outcome::read("", "", "", "", 10).offer_ended.is_none());
    }
}
