//! The nodes that run on this database, as their heartbeats show them.
//!
//! **Invariant:** a node writes its heartbeat every [`NODE_HEARTBEAT`] while it runs; one whose
//! heartbeat is older than [`NODE_GONE_AFTER`], or that marked itself stopped, is gone.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::db::{Row, query};
use super::{Store, StoreResult, ts};

/// How often a running node writes its heartbeat.
pub const NODE_HEARTBEAT: Duration = Duration::from_secs(5);

/// A node whose heartbeat is older than this is gone (three heartbeats missed).
pub const NODE_GONE_AFTER: Duration = Duration::from_secs(15);

/// What a node says of itself when it starts.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    /// `--node-id`: 1-64 letters, digits, `.`, `_` or `-`.
    pub id: String,
    /// `--advertise`: where other machines reach its SIP and media.
    pub advertise: String,
}

/// Whether a node runs, drains, or is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Alive,
    Draining,
    Gone,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::Draining => "draining",
            Self::Gone => "gone",
        }
    }
}

/// A node as its row shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRecord {
    pub id: String,
    pub advertise: String,
    pub version: String,
    /// The machine and process it runs as.
    pub host: String,
    pub pid: i64,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub draining: bool,
    pub stopped_at: Option<DateTime<Utc>>,
}

impl NodeRecord {
    /// Its state at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> NodeState {
        let silent = (now - self.heartbeat_at).to_std().unwrap_or_default();
        if self.stopped_at.is_some() || silent > NODE_GONE_AFTER {
            NodeState::Gone
        } else if self.draining {
            NodeState::Draining
        } else {
            NodeState::Alive
        }
    }
}

fn node_row(r: &Row) -> StoreResult<NodeRecord> {
    Ok(NodeRecord {
        id: r.try_get("id")?,
        advertise: r.try_get("advertise")?,
        version: r.try_get("version")?,
        host: r.try_get("host")?,
        pid: r.try_get("pid")?,
        started_at: r.try_get("started_at")?,
        heartbeat_at: r.try_get("heartbeat_at")?,
        draining: r.try_get("draining")?,
        stopped_at: r.try_get("stopped_at")?,
    })
}

impl Store {
    /// Records `node` as started now (a node id seen before starts afresh).
    pub async fn register_node(&self, node: &NodeIdentity) -> StoreResult<()> {
        let now = ts(self.now());
        query(
            "INSERT INTO nodes (id, advertise, version, host, pid, started_at, heartbeat_at, draining, stopped_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, FALSE, NULL) \
             ON CONFLICT (id) DO UPDATE SET advertise = excluded.advertise, version = excluded.version, \
             host = excluded.host, pid = excluded.pid, \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, draining = FALSE, stopped_at = NULL",
        )
        .bind(node.id.as_str())
        .bind(node.advertise.as_str())
        .bind(env!("CARGO_PKG_VERSION"))
        .bind(host_name())
        .bind(i64::from(std::process::id()))
        .bind(now)
        .bind(now)
        .execute(&mut self.conn().await?)
        .await?;
        Ok(())
    }

    /// Writes the node's heartbeat; `false` when its row is gone (it is registered again).
    pub async fn node_heartbeat(&self, node: &NodeIdentity) -> StoreResult<bool> {
        let done = query("UPDATE nodes SET heartbeat_at = ? WHERE id = ? AND stopped_at IS NULL")
            .bind(ts(self.now()))
            .bind(node.id.as_str())
            .execute(&mut self.conn().await?)
            .await?;
        if done.rows_affected() == 0 {
            self.register_node(node).await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Marks the node stopped (a graceful stop).
    pub async fn node_stopped(&self, id: &str) -> StoreResult<()> {
        let now = ts(self.now());
        query("UPDATE nodes SET stopped_at = ?, heartbeat_at = ? WHERE id = ?")
            .bind(now)
            .bind(now)
            .bind(id)
            .execute(&mut self.conn().await?)
            .await?;
        Ok(())
    }

    /// Every node that has run on this database, the latest started first.
    pub async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows = query(
            "SELECT id, advertise, version, host, pid, started_at, heartbeat_at, draining, stopped_at \
             FROM nodes ORDER BY started_at DESC, id",
        )
        .fetch_all(&mut self.read_conn().await?)
        .await?;
        rows.iter().map(node_row).collect()
    }

    /// The nodes other than `me` that are gone: stopped, silent for [`NODE_GONE_AFTER`], or
    /// of this machine with their process no longer running (a restart sees its previous
    /// process gone at once).
    pub async fn gone_nodes(&self, me: &str) -> StoreResult<Vec<String>> {
        let now = self.now();
        let host = host_name();
        Ok(self
            .nodes()
            .await?
            .into_iter()
            .filter(|n| n.id != me)
            .filter(|n| {
                n.state(now) == NodeState::Gone
                    || (n.host == host
                        && !process_runs(n.pid)
                        && n.pid != i64::from(std::process::id()))
            })
            .map(|n| n.id)
            .collect())
    }
}

/// This machine's host name (`node` when it cannot be read), as node ids and rows name it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                .take(48)
                .collect::<String>()
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into())
}

/// Whether a process `pid` runs on this machine (`/proc` lists it).
fn process_runs(pid: i64) -> bool {
    pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_gone_once_stopped_or_silent_for_three_heartbeats() {
        let now = Utc::now();
        let mut node = NodeRecord {
            id: "a".into(),
            advertise: "10.0.0.1".into(),
            version: "1".into(),
            host: "h".into(),
            pid: 1,
            started_at: now,
            heartbeat_at: now - chrono::Duration::seconds(14),
            draining: false,
            stopped_at: None,
        };
        assert_eq!(node.state(now), NodeState::Alive);
        node.draining = true;
        assert_eq!(node.state(now), NodeState::Draining);
        node.heartbeat_at = now - chrono::Duration::seconds(16);
        assert_eq!(node.state(now), NodeState::Gone);
        node.heartbeat_at = now;
        node.stopped_at = Some(now);
        assert_eq!(node.state(now), NodeState::Gone);
    }
}
