//! The call queue's contents and live-call counts ([`QueueCore`]): calls waiting per workspace
//! and trunk, ordered by priority (higher first) then FIFO, and the slots taken by live calls
//! per workspace, per trunk and on the node, with each trunk's recent starts (its
//! calls-per-second window). A pure data structure: the `CallQueue` actor drives it, and an
//! admission may claim a slot through it directly (see [`QueueCore::claim`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::ids::{CallId, CampaignId, WorkspaceId};
use crate::ports::{CallSpec, TrunkLimits};

/// The span of a trunk's calls-per-second window.
const WINDOW: Duration = Duration::from_secs(1);
/// The shortest wait for a window to open: a wake-up never comes back at once.
const MIN_WAIT: Duration = Duration::from_millis(1);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub waiting: usize,
    pub live: usize,
    pub peak_live: usize,
}

/// What one [`QueueCore::dispatch`] released.
#[derive(Debug, Default)]
pub(crate) struct Released {
    pub calls: Vec<CallSpec>,
    /// Set when calls still wait that only a trunk's calls-per-second window holds back: the
    /// window opens after this long, and nothing else will wake the queue for it.
    pub window_opens_in: Option<Duration>,
}

/// Calls wait in one line per workspace and trunk, so that a call waiting for its trunk never
/// holds back a call of its workspace on another trunk.
type Line = (WorkspaceId, Option<Uuid>);

fn line_of(spec: &CallSpec) -> Line {
    (spec.workspace_id, spec.trunk.map(|t| t.trunk))
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

/// Whether a trunk can take one more call now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    Free,
    /// Its live calls are at `max_concurrent`: a call's end makes room.
    Full,
    /// It started `calls_per_second` calls within the last second: room comes back after this
    /// long.
    Window(Duration),
}

/// One trunk's use: its live calls and the instants of its recent starts.
#[derive(Debug, Clone, Default)]
struct TrunkUse {
    live: usize,
    /// Start instants within the last second (older ones are dropped as new ones come), oldest
    /// first.
    starts: VecDeque<DateTime<Utc>>,
}

/// A start at or before this instant has left the window at `now`.
fn window_start(now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::seconds(1)
}

impl TrunkUse {
    /// Starts that count against the window at `now` (a start the clock has not reached yet
    /// counts too).
    fn recent(&self, now: DateTime<Utc>) -> usize {
        let since = window_start(now);
        self.starts.len() - self.starts.partition_point(|s| *s <= since)
    }

    fn room(&self, limits: &TrunkLimits, now: DateTime<Utc>) -> Room {
        // A cap of 0 (which a trunk's rules refuse) counts as 1: a call waits, never forever.
        let cap = |n: u32| usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        if limits.max_concurrent.is_some_and(|n| self.live >= cap(n)) {
            return Room::Full;
        }
        if let Some(per_second) = limits.calls_per_second.map(cap) {
            let recent = self.recent(now);
            if recent >= per_second {
                // Room comes back when all but `per_second - 1` of the recent starts have left
                // the window: the start that leaves last is the one `per_second` from the end.
                let opens = self
                    .starts
                    .get(self.starts.len() - per_second)
                    .map_or(now, |s| *s + chrono::Duration::seconds(1));
                let wait = (opens - now).to_std().unwrap_or(MIN_WAIT);
                return Room::Window(wait.clamp(MIN_WAIT, WINDOW));
            }
        }
        Room::Free
    }

    fn start(&mut self, now: DateTime<Utc>) {
        let since = window_start(now);
        while self.starts.front().is_some_and(|s| *s <= since) {
            self.starts.pop_front();
        }
        // Kept in order even if the clock stepped back.
        let at = self.starts.partition_point(|s| *s <= now);
        self.starts.insert(at, now);
        self.live += 1;
    }

    fn idle(&self, now: DateTime<Utc>) -> bool {
        self.live == 0 && self.recent(now) == 0
    }
}

/// The best releasable head of a [`QueueCore`] scan.
struct Scan {
    best: Option<Line>,
    /// When a head that only its trunk's calls-per-second window holds back can go.
    window_opens_in: Option<Duration>,
}

/// The queue's contents and live-call counts. They sit behind a lock in the engine's `Shared`, so that a
/// campaign admitting a contact can take a free slot at once ([`QueueCore::claim`]) and commit
/// its call as `dialing` with the attempt, without a second write to mark it.
#[derive(Default)]
pub struct QueueCore {
    waiting: HashMap<Line, BinaryHeap<Entry>>,
    /// Ids of waiting calls, so a call handed over twice is queued once.
    waiting_ids: HashSet<CallId>,
    /// Live calls per workspace (the per-workspace limit).
    live: HashMap<WorkspaceId, usize>,
    /// Live calls and recent starts per trunk (the trunk's caps). Kept across rebuilds: the
    /// store does not know them.
    trunks: HashMap<Uuid, TrunkUse>,
    /// Live calls on the node (the node's capacity).
    node_live: usize,
    /// The most calls live at once since the engine started, for metrics; kept across rebuilds.
    peak_live: usize,
    /// Arrival order: the tie-break after priority (FIFO).
    seq: u64,
}

impl QueueCore {
    /// An empty queue with the live counts read from the store (the queued calls are pushed
    /// next), keeping what only memory knows from `previous`: the peak seen so far and each
    /// trunk's live calls and recent starts.
    pub(crate) fn rebuilt(live: HashMap<WorkspaceId, usize>, previous: QueueCore) -> Self {
        let node_live = live.values().sum();
        Self {
            live,
            node_live,
            peak_live: previous.peak_live.max(node_live),
            trunks: previous.trunks,
            ..Self::default()
        }
    }

    pub(crate) fn push(&mut self, spec: CallSpec) {
        if !self.waiting_ids.insert(spec.id) {
            return;
        }
        self.seq += 1;
        self.waiting.entry(line_of(&spec)).or_default().push(Entry {
            priority: spec.priority,
            seq: self.seq,
            spec,
        });
    }

    /// Takes the call's slots: its workspace's, the node's and its trunk's, where it counts
    /// as a start in the trunk's window.
    fn take_slot(&mut self, spec: &CallSpec, now: DateTime<Utc>) {
        *self.live.entry(spec.workspace_id).or_default() += 1;
        self.node_live += 1;
        self.peak_live = self.peak_live.max(self.node_live);
        if let Some(t) = spec.trunk {
            self.trunks.entry(t.trunk).or_default().start(now);
        }
    }

    /// A live call of the workspace ended (or never started): its workspace and node slots are
    /// free. Its trunk's slot is freed apart, by [`QueueCore::free_trunk`].
    pub(crate) fn free_slot(&mut self, ws: WorkspaceId) {
        if let Some(n) = self.live.get_mut(&ws) {
            *n = n.saturating_sub(1);
        }
        self.node_live = self.node_live.saturating_sub(1);
    }

    /// A live call on the trunk ended (or never started): one more call fits on it. Its start
    /// stays in the trunk's window.
    pub(crate) fn free_trunk(&mut self, trunk: Uuid) {
        if let Some(t) = self.trunks.get_mut(&trunk) {
            t.live = t.live.saturating_sub(1);
        }
    }

    fn trunk_room(&self, limits: Option<&TrunkLimits>, now: DateTime<Utc>) -> Room {
        match limits {
            None => Room::Free,
            Some(l) => self
                .trunks
                .get(&l.trunk)
                .map_or(Room::Free, |t| t.room(l, now)),
        }
    }

    fn workspace_has_room(&self, ws: WorkspaceId, per_workspace: usize) -> bool {
        self.live.get(&ws).copied().unwrap_or(0) < per_workspace
    }

    /// The best head (priority, then FIFO) among lines whose workspace has a free slot and
    /// whose trunk has room; the node's capacity is the caller's to check.
    fn scan(&self, per_workspace: usize, now: DateTime<Utc>) -> Scan {
        let mut best: Option<(Line, &Entry)> = None;
        let mut window_opens_in: Option<Duration> = None;
        for (line, heap) in &self.waiting {
            let Some(head) = heap.peek() else { continue };
            if !self.workspace_has_room(line.0, per_workspace) {
                continue;
            }
            match self.trunk_room(head.spec.trunk.as_ref(), now) {
                Room::Free => {
                    if best.is_none_or(|(_, b)| head > b) {
                        best = Some((*line, head));
                    }
                }
                Room::Full => {}
                Room::Window(wait) => {
                    window_opens_in = Some(window_opens_in.map_or(wait, |w| w.min(wait)));
                }
            }
        }
        Scan {
            best: best.map(|(line, _)| line),
            window_opens_in,
        }
    }

    /// Takes the slots for `spec`, a call about to be committed as `dialing`, if its workspace,
    /// its trunk and the node have room and no waiting call could take them instead: none waits
    /// in its line and none the queue could release now (a claim never passes the queue). The
    /// call counts as a start in its trunk's window. Its slots are given back when it ends
    /// ([`super::shared::Shared::free_slot`]).
    pub fn claim(
        &mut self,
        spec: &CallSpec,
        per_workspace: usize,
        node_capacity: usize,
        now: DateTime<Utc>,
    ) -> bool {
        let room = self.node_live < node_capacity
            && self.workspace_has_room(spec.workspace_id, per_workspace)
            && self.trunk_room(spec.trunk.as_ref(), now) == Room::Free
            && self
                .waiting
                .get(&line_of(spec))
                .is_none_or(BinaryHeap::is_empty)
            && self.scan(per_workspace, now).best.is_none();
        if room {
            self.take_slot(spec, now);
        }
        room
    }

    /// Releases calls while there is room: each time the best head (priority, then FIFO)
    /// among lines whose workspace has a free slot and whose trunk has room (fewer live calls
    /// than its `max_concurrent`, fewer starts within the last second than its
    /// `calls_per_second`). `now` is the engine's clock.
    pub(crate) fn dispatch(
        &mut self,
        per_workspace: usize,
        node_capacity: usize,
        now: DateTime<Utc>,
    ) -> Released {
        let mut released = Released::default();
        while self.node_live < node_capacity {
            let scan = self.scan(per_workspace, now);
            let Some(line) = scan.best else {
                released.window_opens_in = scan.window_opens_in;
                break;
            };
            let Some(entry) = self.waiting.get_mut(&line).and_then(BinaryHeap::pop) else {
                break;
            };
            self.waiting_ids.remove(&entry.spec.id);
            self.take_slot(&entry.spec, now);
            released.calls.push(entry.spec);
        }
        self.waiting.retain(|_, heap| !heap.is_empty());
        self.trunks.retain(|_, t| !t.idle(now));
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
mod tests;
