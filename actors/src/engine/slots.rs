//! The call queue's contents and live-call counts ([`QueueCore`]): calls waiting per workspace,
//! ordered by priority (higher first) then FIFO, and the slots taken by live calls. A pure data
//! structure: the `CallQueue` actor drives it, and an admission may claim a slot through it
//! directly (see [`QueueCore::claim`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::ids::{CallId, CampaignId, WorkspaceId};
use crate::ports::CallSpec;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub waiting: usize,
    pub live: usize,
    pub peak_live: usize,
}

struct Entry {
    priority: i64,
    seq: u64,
    spec: CallSpec,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// The greatest entry is served first: highest priority, then lowest sequence.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The queue's contents and live-call counts. They sit behind a lock in the engine's `Shared`, so that a
/// campaign admitting a contact can take a free slot at once ([`QueueCore::claim`]) and commit
/// its call as `dialing` with the attempt, without a second write to mark it.
#[derive(Default)]
pub struct QueueCore {
    waiting: HashMap<WorkspaceId, BinaryHeap<Entry>>,
    /// Ids of waiting calls, so a call handed over twice is queued once.
    waiting_ids: HashSet<CallId>,
    /// Live calls per workspace (the per-workspace limit).
    live: HashMap<WorkspaceId, usize>,
    /// Live calls on the node (the node's capacity).
    node_live: usize,
    /// The most calls live at once since the engine started, for metrics; kept across rebuilds.
    peak_live: usize,
    /// Arrival order: the tie-break after priority (FIFO).
    seq: u64,
}

impl QueueCore {
    /// An empty queue with the live counts read from the store (the queued calls are pushed
    /// next), keeping the peak seen so far.
    pub(crate) fn rebuilt(live: HashMap<WorkspaceId, usize>, peak_live: usize) -> Self {
        let node_live = live.values().sum();
        Self {
            live,
            node_live,
            peak_live: peak_live.max(node_live),
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, spec: CallSpec) {
        if !self.waiting_ids.insert(spec.id) {
            return;
        }
        self.seq += 1;
        self.waiting
            .entry(spec.workspace_id)
            .or_default()
            .push(Entry {
                priority: spec.priority,
                seq: self.seq,
                spec,
            });
    }

    pub(crate) fn take_slot(&mut self, ws: WorkspaceId) {
        *self.live.entry(ws).or_default() += 1;
        self.node_live += 1;
        self.peak_live = self.peak_live.max(self.node_live);
    }

    pub(crate) fn free_slot(&mut self, ws: WorkspaceId) {
        if let Some(n) = self.live.get_mut(&ws) {
            *n = n.saturating_sub(1);
        }
        self.node_live = self.node_live.saturating_sub(1);
    }

    /// Takes a slot for a call about to be committed as `dialing`, if the workspace and the node
    /// have room and no call of the workspace is waiting (a claim never passes the queue). The
    /// slot is given back when the call ends (`QueueMsg::CallEnded`).
    pub fn claim(&mut self, ws: WorkspaceId, per_workspace: usize, node_capacity: usize) -> bool {
        let room = self.node_live < node_capacity
            && self.live.get(&ws).copied().unwrap_or(0) < per_workspace
            && self.waiting.get(&ws).is_none_or(BinaryHeap::is_empty);
        if room {
            self.take_slot(ws);
        }
        room
    }

    /// Releases calls while there is room: each time the best head among workspaces with a free
    /// slot. Returns the released calls.
    pub(crate) fn dispatch(&mut self, per_workspace: usize, node_capacity: usize) -> Vec<CallSpec> {
        let mut released = Vec::new();
        while self.node_live < node_capacity {
            let best = self
                .waiting
                .iter()
                .filter(|(ws, heap)| {
                    !heap.is_empty() && self.live.get(*ws).copied().unwrap_or(0) < per_workspace
                })
                .filter_map(|(ws, heap)| heap.peek().map(|e| (*ws, e.priority, e.seq)))
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.2.cmp(&a.2)));
            let Some((ws, _, _)) = best else { break };
            let Some(entry) = self.waiting.get_mut(&ws).and_then(BinaryHeap::pop) else {
                break;
            };
            self.waiting_ids.remove(&entry.spec.id);
            self.take_slot(ws);
            released.push(entry.spec);
        }
        self.waiting.retain(|_, heap| !heap.is_empty());
        released
    }

    /// Takes the campaign's waiting calls out of the queue.
    pub(crate) fn remove_campaign(&mut self, campaign: CampaignId) -> Vec<CallSpec> {
        let mut removed = Vec::new();
        for heap in self.waiting.values_mut() {
            if heap.iter().any(|e| e.spec.campaign_id == Some(campaign)) {
                let (gone, keep): (Vec<Entry>, Vec<Entry>) = std::mem::take(heap)
                    .into_iter()
                    .partition(|e| e.spec.campaign_id == Some(campaign));
                *heap = keep.into_iter().collect();
                for e in gone {
                    self.waiting_ids.remove(&e.spec.id);
                    removed.push(e.spec);
                }
            }
        }
        removed
    }

    pub fn stats(&self) -> QueueStats {
        QueueStats {
            waiting: self.waiting.values().map(BinaryHeap::len).sum(),
            live: self.node_live,
            peak_live: self.peak_live,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_in(ws: WorkspaceId, priority: i64) -> CallSpec {
        CallSpec {
            id: crate::ids::CallId::new(),
            workspace_id: ws,
            campaign_id: None,
            contact_id: None,
            agent_id: crate::ids::AgentId::new(),
            from_phone_number_id: None,
            from_number: String::new(),
            to_number: String::new(),
            priority,
            attempt: 1,
            max_duration_secs: 60,
            reserved_cents: crate::money::Cents::new(10),
            queued_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_claim_takes_a_free_slot_but_never_passes_a_waiting_call() {
        let (a, b) = (WorkspaceId::new(), WorkspaceId::new());
        let mut core = QueueCore::default();
        // Two slots per workspace, three on the node.
        assert!(core.claim(a, 2, 3));
        assert!(core.claim(a, 2, 3));
        assert!(!core.claim(a, 2, 3), "the workspace is full");
        assert!(core.claim(b, 2, 3));
        assert!(!core.claim(b, 2, 3), "the node is full");
        assert_eq!(core.stats().live, 3);
        assert_eq!(core.stats().peak_live, 3);

        // A call of `a` waits for a slot: the slot that frees goes to it, not to a claim.
        let waiting = spec_in(a, 0);
        core.push(waiting.clone());
        core.free_slot(a);
        assert!(!core.claim(a, 2, 3), "a call of the workspace is waiting");
        let released = core.dispatch(2, 3);
        assert_eq!(
            released.iter().map(|c| c.id).collect::<Vec<_>>(),
            [waiting.id]
        );
        // Another workspace's waiting call does not hold `b` back once the node has room.
        core.push(spec_in(a, 0));
        core.free_slot(b);
        assert!(core.claim(b, 2, 3));
        assert_eq!(core.stats().waiting, 1);
    }

    #[test]
    fn higher_priority_first_then_fifo() {
        let spec = |p| spec_in(WorkspaceId::new(), p);
        let mut heap = BinaryHeap::new();
        for (seq, p) in [(1, 5), (2, 9), (3, 5), (4, 0), (5, 9)] {
            heap.push(Entry {
                priority: p,
                seq,
                spec: spec(p),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|e| e.seq)).collect();
        assert_eq!(order, [2, 5, 1, 3, 4]);
    }
}
