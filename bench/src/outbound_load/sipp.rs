//! `--peer sipp`: SIPp's UAS as the reference far end. It answers every call after the ring
//! delay, echoes the RTP (`-rtp_echo`, one echo port for all calls) and waits for the caller's
//! BYE (bench/sipp/answer_hold.xml). Its statistics file gives the call counts it saw.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use serde_json::{Map, Value, json};

const SCENARIO: &str = include_str!("../../sipp/answer_hold.xml");

pub struct Sipp {
    pub addr: SocketAddr,
    pub child: tokio::process::Child,
    stats: PathBuf,
    _dir: tempfile::TempDir,
}

impl Sipp {
    pub async fn start(bin: &Path, ring_ms: u64) -> anyhow::Result<Sipp> {
        let dir = tempfile::tempdir()?;
        let scenario = dir.path().join("answer_hold.xml");
        std::fs::write(&scenario, SCENARIO)?;
        let stats = dir.path().join("stats.csv");
        let port = crate::spawn::free_port()?;
        let media = crate::spawn::free_port()?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("-sf")
            .arg(&scenario)
            .args(["-i", "127.0.0.1", "-mi", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .arg("-mp")
            .arg(media.to_string())
            .args(["-rtp_echo", "-aa", "-nostdin", "-trace_stat", "-fd", "1"])
            .arg("-d")
            .arg(ring_ms.to_string())
            .arg("-stf")
            .arg(&stats);
        let mut child = crate::sipp::launch(&mut cmd, dir.path(), bin)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(status) = child.try_wait()? {
            let err = std::fs::read_to_string(dir.path().join("sipp.err")).unwrap_or_default();
            bail!("sipp exited at once ({status}): {err}");
        }
        Ok(Sipp {
            addr: format!("127.0.0.1:{port}").parse()?,
            child,
            stats,
            _dir: dir,
        })
    }

    /// The call and message counters of SIPp's last statistics line.
    pub fn stats(&self) -> Value {
        let Ok(text) = std::fs::read_to_string(&self.stats) else {
            return Value::Null;
        };
        let mut out = Map::new();
        for (k, v) in crate::sipp::SippCsv::parse(&text).last_row() {
            let cumulative = k.ends_with("(C)");
            let wanted = k == "CurrentCall"
                || (cumulative
                    && ["Call", "Retransmissions", "Unexpected", "Timeout", "Dead"]
                        .iter()
                        .any(|w| k.contains(w)));
            if wanted && let Ok(n) = v.parse::<f64>() {
                out.insert(k.trim_end_matches("(C)").to_string(), json!(n));
            }
        }
        if out.is_empty() {
            return Value::Null;
        }
        Value::Object(out)
    }

    pub async fn stop(mut self) -> Value {
        let stats = self.stats();
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        stats
    }
}
