//! `CallQueue`: the single admission queue for every outbound call, campaign or direct.
//!
//! Ordered by priority (higher first), then FIFO. A call is released only while its workspace
//! has fewer than `workspace_max_concurrent_calls` live calls and the node fewer than
//! `node_capacity`. A campaign call gets the default priority, so it never jumps ahead of a
//! direct call queued before it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::Shared;
use super::campaign::CampaignMsg;
use super::supervisor::SupervisorMsg;
use crate::ids::{CallId, CampaignId, WorkspaceId};
use crate::ports::CallSpec;

pub enum QueueMsg {
    Enqueue(CallSpec),
    /// A live call of the workspace ended (or never started): its slot is free.
    CallEnded(WorkspaceId),
    /// Cancel the campaign's calls that have not been dialled yet.
    CancelCampaign(CampaignId),
    Stats(RpcReplyPort<QueueStats>),
}

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

pub struct QueueState {
    shared: Arc<Shared>,
    supervisor: ActorRef<SupervisorMsg>,
    waiting: HashMap<WorkspaceId, BinaryHeap<Entry>>,
    /// Ids of waiting calls, so a call handed over twice is queued once.
    waiting_ids: HashSet<CallId>,
    live: HashMap<WorkspaceId, usize>,
    node_live: usize,
    peak_live: usize,
    seq: u64,
}

impl QueueState {
    fn push(&mut self, spec: CallSpec) {
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

    /// Releases calls while there is room: each time the best head among workspaces with a free
    /// slot.
    fn dispatch(&mut self) {
        let per_workspace = self.shared.config.workspace_max_concurrent_calls;
        while self.node_live < self.shared.config.node_capacity {
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
            *self.live.entry(ws).or_default() += 1;
            self.node_live += 1;
            self.peak_live = self.peak_live.max(self.node_live);
            let _ = self.supervisor.cast(SupervisorMsg::Dispatch(entry.spec));
        }
        self.waiting.retain(|_, heap| !heap.is_empty());
    }
}

pub struct CallQueue;

impl Actor for CallQueue {
    type Msg = QueueMsg;
    type State = QueueState;
    type Arguments = (Arc<Shared>, ActorRef<SupervisorMsg>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (shared, supervisor): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let live = shared.store.live_calls().await?;
        let node_live = live.values().sum();
        let queued = shared.store.queued_calls().await?;
        let mut state = QueueState {
            shared,
            supervisor,
            waiting: HashMap::new(),
            waiting_ids: HashSet::new(),
            live,
            node_live,
            peak_live: node_live,
            seq: 0,
        };
        for spec in queued {
            state.push(spec);
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.dispatch();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            QueueMsg::Enqueue(spec) => state.push(spec),
            QueueMsg::CallEnded(ws) => {
                if let Some(n) = state.live.get_mut(&ws) {
                    *n = n.saturating_sub(1);
                }
                state.node_live = state.node_live.saturating_sub(1);
            }
            QueueMsg::CancelCampaign(campaign) => {
                let mut cancelled = Vec::new();
                for heap in state.waiting.values_mut() {
                    if heap.iter().any(|e| e.spec.campaign_id == Some(campaign)) {
                        let (gone, keep): (Vec<Entry>, Vec<Entry>) = std::mem::take(heap)
                            .into_iter()
                            .partition(|e| e.spec.campaign_id == Some(campaign));
                        *heap = keep.into_iter().collect();
                        for e in gone {
                            state.waiting_ids.remove(&e.spec.id);
                            cancelled.push(e.spec);
                        }
                    }
                }
                let now = state.shared.clock.now();
                for spec in cancelled {
                    if state
                        .shared
                        .store
                        .cancel_call(&spec, "campaign_closed", now)
                        .await?
                        && let Some(contact) = spec.contact_id
                    {
                        state.shared.to_campaign(
                            campaign,
                            CampaignMsg::CallCancelled {
                                contact,
                                call: spec.id,
                            },
                        );
                    }
                }
            }
            QueueMsg::Stats(reply) => {
                let _ = reply.send(QueueStats {
                    waiting: state.waiting.values().map(BinaryHeap::len).sum(),
                    live: state.node_live,
                    peak_live: state.peak_live,
                });
                return Ok(());
            }
        }
        state.dispatch();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_priority_first_then_fifo() {
        let spec = |p| CallSpec {
            id: crate::ids::CallId::new(),
            workspace_id: WorkspaceId::new(),
            campaign_id: None,
            contact_id: None,
            agent_id: crate::ids::AgentId::new(),
            from_phone_number_id: None,
            from_number: String::new(),
            to_number: String::new(),
            priority: p,
            attempt: 1,
            max_duration_secs: 60,
            reserved_cents: 10,
            queued_at: chrono::Utc::now(),
        };
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
