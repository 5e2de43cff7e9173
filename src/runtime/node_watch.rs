//! The node's heartbeat, and its watch over the other nodes on the database: a node whose
//! heartbeat has not moved for [`NODE_GONE_AFTER`], as this node sees it while its own
//! heartbeats land, is gone, and the live calls it carried are ended as interrupted. The watch
//! compares each node's heartbeat with itself over this node's own time, so neither a clock
//! that is wrong elsewhere nor a database that was away (every heartbeat old at once) ends a
//! running node's calls.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::store::{NODE_GONE_AFTER, NODE_HEARTBEAT, NodeIdentity, NodeRecord, Store};

/// What this node has seen of the others' heartbeats.
#[derive(Default)]
pub struct Watch {
    /// Each node's heartbeat as last seen changed, and since when (this node's time).
    seen: HashMap<String, (DateTime<Utc>, Instant)>,
    /// The silences already acted on (a node, the heartbeat it fell silent at).
    acted: HashSet<(String, DateTime<Utc>)>,
}

impl Watch {
    /// This node could not reach the database: what it saw says nothing of the others' time.
    pub fn lost(&mut self) {
        self.seen.clear();
    }

    /// Looks at `nodes` at `now`: the ids of the nodes other than `me` found gone since the
    /// last look (stopped while watched, or silent for [`NODE_GONE_AFTER`] of this node's
    /// watching).
    pub fn look(&mut self, me: &str, nodes: &[NodeRecord], now: Instant) -> Vec<String> {
        let mut gone = Vec::new();
        for n in nodes.iter().filter(|n| n.id != me) {
            let first_look = !self.seen.contains_key(&n.id);
            if first_look && n.stopped_at.is_some() {
                // Stopped before this watch began: the start's reconciliation took its calls.
                self.acted.insert((n.id.clone(), n.heartbeat_at));
            }
            let silent_for = match self.seen.get(&n.id) {
                Some((beat, since)) if *beat == n.heartbeat_at => now.duration_since(*since),
                _ => {
                    self.seen.insert(n.id.clone(), (n.heartbeat_at, now));
                    Duration::ZERO
                }
            };
            if (n.stopped_at.is_some() || silent_for >= NODE_GONE_AFTER)
                && self.acted.insert((n.id.clone(), n.heartbeat_at))
            {
                gone.push(n.id.clone());
            }
        }
        gone
    }
}

/// Writes `node`'s heartbeat every [`NODE_HEARTBEAT`] and ends the live calls of the nodes
/// the watch finds gone, until `stop` turns true.
pub async fn run(store: Store, node: NodeIdentity, stop: watch::Receiver<bool>) {
    let watch = std::sync::Mutex::new(Watch::default());
    // Each use is one call that cannot panic half way: a poisoned lock is used as it is.
    let watch =
        |f: &mut dyn FnMut(&mut Watch)| f(&mut watch.lock().unwrap_or_else(|p| p.into_inner()));
    crate::runtime::schedule::every(NODE_HEARTBEAT, stop, || async {
        match store.node_heartbeat(&node).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(node = %node.id, "the node's row is not this process's; its heartbeat was not written")
            }
            Err(err) => {
                tracing::warn!(node = %node.id, error = %err, "the node's heartbeat was not written");
                watch(&mut |w| w.lost());
                return;
            }
        }
        let nodes = match store.nodes().await {
            Ok(nodes) => nodes,
            Err(err) => {
                tracing::warn!(error = %err, "the nodes could not be read");
                watch(&mut |w| w.lost());
                return;
            }
        };
        let mut gone = Vec::new();
        watch(&mut |w| gone = w.look(&node.id, &nodes, Instant::now()));
        if gone.is_empty() {
            return;
        }
        match store.interrupt_calls_of(Some(&gone), false, store.now()).await {
            Ok(0) => tracing::info!(nodes = ?gone, "nodes are gone"),
            Ok(ended) => {
                tracing::warn!(nodes = ?gone, calls = ended, "nodes are gone; the calls they carried were ended as interrupted")
            }
            Err(err) => tracing::warn!(nodes = ?gone, error = %err, "the calls of gone nodes were not ended"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, beat: DateTime<Utc>) -> NodeRecord {
        NodeRecord {
            id: id.into(),
            advertise: "10.0.0.1".into(),
            version: "1".into(),
            host: "h".into(),
            pid: 1,
            pid_ns: "pid:[1]".into(),
            instance: id.into(),
            started_at: beat,
            heartbeat_at: beat,
            draining: false,
            stopped_at: None,
        }
    }

    #[test]
    fn a_node_is_gone_after_it_stays_silent_while_this_one_watches_and_only_once() {
        let t0 = Instant::now();
        // Heartbeats written long ago by another clock: old is not silent until watched.
        let old = Utc::now() - chrono::Duration::hours(3);
        let mut w = Watch::default();
        let mut b = node("b", old);
        let c = node("c", old);
        assert!(
            w.look("a", &[node("a", old), b.clone(), c.clone()], t0)
                .is_empty()
        );
        let t1 = t0 + Duration::from_secs(10);
        b.heartbeat_at = old + chrono::Duration::seconds(5);
        assert!(w.look("a", &[b.clone(), c.clone()], t1).is_empty());
        // c has not moved for 15 s of watching; b moved 5 s ago.
        let t2 = t0 + NODE_GONE_AFTER;
        assert_eq!(w.look("a", &[b.clone(), c.clone()], t2), ["c"]);
        assert!(
            w.look("a", &[b.clone(), c.clone()], t2 + Duration::from_secs(5))
                .is_empty()
        );
        assert_eq!(
            w.look("a", &[b.clone(), c.clone()], t1 + NODE_GONE_AFTER),
            ["b"]
        );
        // This node lost the database: it starts watching afresh.
        let mut w = Watch::default();
        w.look("a", std::slice::from_ref(&c), t0);
        w.lost();
        assert!(w.look("a", std::slice::from_ref(&c), t2).is_empty());
        // A node stopped before the watch began was the start's to reconcile; one that stops
        // while watched is gone at once.
        let mut stopped = node("d", old);
        stopped.stopped_at = Some(old);
        assert!(w.look("a", std::slice::from_ref(&stopped), t2).is_empty());
        let mut e = node("e", old);
        assert!(w.look("a", std::slice::from_ref(&e), t2).is_empty());
        e.stopped_at = Some(old);
        e.heartbeat_at = old + chrono::Duration::seconds(1);
        assert_eq!(w.look("a", &[stopped, e], t2), ["e"]);
    }
}
