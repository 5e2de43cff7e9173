//! The nodes that run on this database, as their heartbeats show them.
//!
//! **Invariant:** a node writes its heartbeat every [`NODE_HEARTBEAT`] while it runs; one whose
//! heartbeat is older than [`NODE_GONE_AFTER`], or that marked itself stopped, is gone.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use switchboard_actors::call::EndReason;
use switchboard_actors::events::EventKind;
use switchboard_actors::ids::CallId;

use super::db::{Query, Row, begin_write, query};
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
    /// Its PID namespace, and the random id its process drew at start.
    pub pid_ns: String,
    pub instance: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub draining: bool,
    pub stopped_at: Option<DateTime<Utc>>,
}

impl NodeRecord {
    /// Whether it ran on this machine, in this PID namespace, as another process that has
    /// ended.
    fn ended_here(&self) -> bool {
        let ns = pid_namespace();
        self.host == host_name()
            && !ns.is_empty()
            && self.pid_ns == ns
            && self.instance != instance()
            && !process_runs(self.pid)
    }

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
        pid_ns: r.try_get("pid_ns")?,
        instance: r.try_get("instance")?,
        started_at: r.try_get("started_at")?,
        heartbeat_at: r.try_get("heartbeat_at")?,
        draining: r.try_get("draining")?,
        stopped_at: r.try_get("stopped_at")?,
    })
}

impl Store {
    /// Records `node` as started now by this process (a node id seen before starts afresh);
    /// refused while another running process has the id: one whose heartbeat is fresh, unless
    /// it ran on this machine, in this PID namespace, and has ended.
    pub async fn register_node(&self, node: &NodeIdentity) -> StoreResult<()> {
        let existing = self.node_named(&node.id).await?;
        // One statement decides: a row that changed since it was read is not taken over.
        let ended = existing
            .as_ref()
            .filter(|n| n.ended_here())
            .map(|n| n.instance.clone());
        let now = self.now();
        let silent_since = now - chrono::Duration::from_std(NODE_GONE_AFTER).unwrap_or_default();
        let taken: Option<String> = query(
            "INSERT INTO nodes (id, advertise, version, host, pid, pid_ns, instance, started_at, heartbeat_at, draining, stopped_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, FALSE, NULL) \
             ON CONFLICT (id) DO UPDATE SET advertise = excluded.advertise, version = excluded.version, \
             host = excluded.host, pid = excluded.pid, pid_ns = excluded.pid_ns, instance = excluded.instance, \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, draining = FALSE, stopped_at = NULL \
             WHERE nodes.stopped_at IS NOT NULL OR nodes.heartbeat_at < ? OR nodes.instance = ? OR nodes.instance = ? \
             RETURNING id",
        )
        .bind(node.id.as_str())
        .bind(node.advertise.as_str())
        .bind(env!("CARGO_PKG_VERSION"))
        .bind(host_name())
        .bind(i64::from(std::process::id()))
        .bind(pid_namespace())
        .bind(instance())
        .bind(ts(now))
        .bind(ts(now))
        .bind(ts(silent_since))
        .bind(instance())
        .bind(ended)
        .scalar_optional(&mut self.conn().await?)
        .await?;
        if taken.is_some() {
            return Ok(());
        }
        let other = self.node_named(&node.id).await?;
        Err(super::StoreError::NodeInUse(format!(
            "node id `{}` is in use by a running node ({}): give this node another --node-id, \
             or wait {} s after that node stops",
            node.id,
            other.map_or_else(
                || "it has just started".to_owned(),
                |o| format!(
                    "host {}, process {}, last heartbeat {}",
                    o.host,
                    o.pid,
                    o.heartbeat_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            ),
            NODE_GONE_AFTER.as_secs()
        )))
    }

    async fn node_named(&self, id: &str) -> StoreResult<Option<NodeRecord>> {
        Ok(self.nodes().await?.into_iter().find(|n| n.id == id))
    }

    /// Writes this process's heartbeat for `node`; `false` when the row is not this process's
    /// any more (marked stopped, or taken by another process: it is left as it is), and the
    /// row is registered again only if it is gone altogether.
    pub async fn node_heartbeat(&self, node: &NodeIdentity) -> StoreResult<bool> {
        let done = query(
            "UPDATE nodes SET heartbeat_at = ? WHERE id = ? AND instance = ? AND stopped_at IS NULL",
        )
        .bind(ts(self.now()))
        .bind(node.id.as_str())
        .bind(instance())
        .execute(&mut self.conn().await?)
        .await?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        if self.node_named(&node.id).await?.is_none() {
            self.register_node(node).await?;
        }
        Ok(false)
    }

    /// Marks this process's node `id` stopped (a graceful stop).
    pub async fn node_stopped(&self, id: &str) -> StoreResult<()> {
        let now = ts(self.now());
        query("UPDATE nodes SET stopped_at = ?, heartbeat_at = ? WHERE id = ? AND instance = ?")
            .bind(now)
            .bind(now)
            .bind(id)
            .bind(instance())
            .execute(&mut self.conn().await?)
            .await?;
        Ok(())
    }

    /// Every node that has run on this database, the latest started first.
    pub async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows = query(
            "SELECT id, advertise, version, host, pid, pid_ns, instance, started_at, heartbeat_at, draining, stopped_at \
             FROM nodes ORDER BY started_at DESC, id",
        )
        .fetch_all(&mut self.read_conn().await?)
        .await?;
        rows.iter().map(node_row).collect()
    }

    /// The nodes other than `me` that are known gone at start: marked stopped, or run on this
    /// machine, in this PID namespace, by a process that has ended (a restart reconciles at
    /// once). A node that is only silent may be cut off for a while: the jobs' watch
    /// (`interrupt_calls_of`) decides on it by its own observation.
    pub async fn gone_nodes(&self, me: &str) -> StoreResult<Vec<String>> {
        Ok(self
            .nodes()
            .await?
            .into_iter()
            .filter(|n| n.id != me && (n.stopped_at.is_some() || n.ended_here()))
            .map(|n| n.id)
            .collect())
    }

    /// Ends as interrupted, at start, the live calls (`dialing`, `ringing`, `in_progress`) of
    /// this node, of no node, and of nodes known gone ([`Store::gone_nodes`]); every one when
    /// the store serves no node. Answers how many it ended.
    pub async fn interrupt_live_calls(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        match self.node() {
            Some(me) => {
                let mut nodes = self.gone_nodes(me).await?;
                nodes.push(me.to_owned());
                self.interrupt_calls_of(Some(&nodes), true, now).await
            }
            None => self.interrupt_calls_of(None, true, now).await,
        }
    }

    /// Ends as interrupted the live calls of `nodes` (with those of no node when `unowned`),
    /// or every live call for `None`, releasing their campaigns' reservations and writing their
    /// `call.ended` events in the same transaction; answers how many it ended.
    pub async fn interrupt_calls_of(
        &self,
        nodes: Option<&[String]>,
        unowned: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let at = ts(now);
        let live = |q: &mut Query<'static>, calls: &str| {
            q.push(format!(
                "{calls}status IN ('dialing', 'ringing', 'in_progress')"
            ));
            if let Some(nodes) = nodes {
                let unowned = if unowned {
                    format!("{calls}node_id IS NULL OR ")
                } else {
                    String::new()
                };
                q.push(format!(" AND ({unowned}{calls}node_id IN (NULL"));
                for node in nodes {
                    q.push(", ");
                    q.push_bind(node.clone());
                }
                q.push("))");
            }
        };
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let mut q = query(
            "UPDATE campaigns SET reserved_cents = MAX(0, reserved_cents - \
             (SELECT CAST(COALESCE(SUM(k.reserved_cents), 0) AS BIGINT) FROM calls k WHERE k.campaign_id = campaigns.id AND ",
        );
        live(&mut q, "k.");
        q.push(")) WHERE id IN (SELECT campaign_id FROM calls WHERE campaign_id IS NOT NULL AND ");
        live(&mut q, "");
        q.push(")");
        q.execute(&mut tx).await?;
        let mut q = query(
            "UPDATE calls SET status = 'ended', outcome = 'infra_error', end_reason = ?, ended_at = ?, updated_at = ? WHERE ",
        )
        .bind(EndReason::Interrupted.as_str())
        .bind(at)
        .bind(at);
        live(&mut q, "");
        q.push(" RETURNING id");
        // The events are those of the rows this statement ended.
        let ended: Vec<uuid::Uuid> = q.scalars(&mut tx).await?;
        let ended: Vec<(CallId, EventKind)> = ended
            .into_iter()
            .map(|id| (CallId::from_uuid(id), EventKind::CallEnded))
            .collect();
        let events = self.emit_call_events(&mut tx, &ended).await?;
        tx.commit().await?;
        drop(conn);
        if events > 0 {
            self.outbox_written();
        }
        Ok(ended.len() as u64)
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

/// The random id this process drew at start: a node's row is the process's that wrote it.
pub fn instance() -> &'static str {
    static INSTANCE: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| uuid::Uuid::new_v4().simple().to_string());
    &INSTANCE
}

/// This process's PID namespace (`pid:[4026531836]`; empty when it cannot be read): process
/// ids mean the same thing only within one.
fn pid_namespace() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
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
            pid_ns: "pid:[1]".into(),
            instance: "x".into(),
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
