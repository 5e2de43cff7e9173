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
            trunk: None,
        }
    }

    fn on(trunk: TrunkLimits, ws: WorkspaceId, priority: i64) -> CallSpec {
        CallSpec {
            trunk: Some(trunk),
            ..spec_in(ws, priority)
        }
    }

    fn cps(n: u32) -> TrunkLimits {
        TrunkLimits {
            trunk: Uuid::new_v4(),
            calls_per_second: Some(n),
            max_concurrent: None,
        }
    }

    fn concurrent(n: u32) -> TrunkLimits {
        TrunkLimits {
            trunk: Uuid::new_v4(),
            calls_per_second: None,
            max_concurrent: Some(n),
        }
    }

    fn t0() -> DateTime<Utc> {
        "2026-05-04T08:00:00Z".parse().expect("instant")
    }

    fn ms(n: i64) -> chrono::Duration {
        chrono::Duration::milliseconds(n)
    }

    fn ids(calls: &[CallSpec]) -> Vec<CallId> {
        calls.iter().map(|c| c.id).collect()
    }

    /// `n` calls of one workspace on `trunk`.
    fn calls_on(trunk: TrunkLimits, n: usize) -> Vec<CallSpec> {
        let ws = WorkspaceId::new();
        (0..n).map(|_| on(trunk, ws, 0)).collect()
    }

    /// A queue holding `n` calls of one workspace on `trunk`, and the calls in queue order.
    fn queued_on(trunk: TrunkLimits, n: usize) -> (QueueCore, Vec<CallSpec>) {
        let mut core = QueueCore::default();
        let calls = calls_on(trunk, n);
        for c in &calls {
            core.push(c.clone());
        }
        (core, calls)
    }

    /// Dispatches at `at_ms` after [`t0`], with room everywhere but on the trunks: exactly
    /// `expected` are released, and the queue is asked to wake after `wake_ms`, if given.
    fn releases(
        core: &mut QueueCore,
        at_ms: i64,
        expected: &[CallSpec],
        wake_ms: Option<u64>,
    ) -> Vec<CallSpec> {
        let released = core.dispatch(100, 100, t0() + ms(at_ms));
        assert_eq!(
            ids(&released.calls),
            ids(expected),
            "released at {at_ms} ms"
        );
        assert_eq!(
            released.window_opens_in,
            wake_ms.map(Duration::from_millis),
            "wake-up asked at {at_ms} ms"
        );
        released.calls
    }

    /// The call ended: every slot it took is free.
    fn end(core: &mut QueueCore, spec: &CallSpec) {
        core.free_slot(spec.workspace_id);
        if let Some(t) = spec.trunk {
            core.free_trunk(t.trunk);
        }
    }

    #[test]
    fn a_claim_takes_a_free_slot_but_never_passes_a_waiting_call() {
        let (a, b) = (WorkspaceId::new(), WorkspaceId::new());
        let now = t0();
        let mut core = QueueCore::default();
        // Two slots per workspace, three on the node.
        assert!(core.claim(&spec_in(a, 0), 2, 3, now));
        assert!(core.claim(&spec_in(a, 0), 2, 3, now));
        assert!(
            !core.claim(&spec_in(a, 0), 2, 3, now),
            "the workspace is full"
        );
        assert!(core.claim(&spec_in(b, 0), 2, 3, now));
        assert!(!core.claim(&spec_in(b, 0), 2, 3, now), "the node is full");
        assert_eq!(core.stats().live, 3);
        assert_eq!(core.stats().peak_live, 3);

        // A call of `a` waits for a slot: the slot that frees goes to it, not to a claim.
        let waiting = spec_in(a, 0);
        core.push(waiting.clone());
        core.free_slot(a);
        assert!(
            !core.claim(&spec_in(a, 0), 2, 3, now),
            "a call of the workspace is waiting"
        );
        let released = core.dispatch(2, 3, now);
        assert_eq!(ids(&released.calls), [waiting.id]);
        assert_eq!(released.window_opens_in, None);
        // Another workspace's waiting call does not hold `b` back once the node has room.
        core.push(spec_in(a, 0));
        core.free_slot(b);
        assert!(core.claim(&spec_in(b, 0), 2, 3, now));
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

    #[test]
    fn a_trunk_starts_at_most_its_calls_per_second_and_the_rest_later_in_order() {
        let (mut core, calls) = queued_on(cps(5), 12);
        let first = releases(&mut core, 0, &calls[..5], Some(1000));
        // Within the same second nothing more starts, and the queue learns when it may.
        releases(&mut core, 400, &[], Some(600));
        // Calls ending does not open the window: it is about starts, not live calls.
        for c in &first {
            end(&mut core, c);
        }
        releases(&mut core, 999, &[], Some(1));
        releases(&mut core, 1000, &calls[5..10], Some(1000));
        // Nothing waits any more: no wake-up.
        releases(&mut core, 2000, &calls[10..], None);
        assert_eq!(core.stats().waiting, 0);
    }

    #[test]
    fn the_window_slides_with_each_start() {
        let calls = calls_on(cps(2), 4);
        let mut core = QueueCore::default();
        core.push(calls[0].clone());
        releases(&mut core, 0, &calls[..1], None);
        for c in &calls[1..] {
            core.push(c.clone());
        }
        // Starts at 0 ms and 500 ms: the next may go at 1000 ms, the last at 1500 ms.
        releases(&mut core, 500, &calls[1..2], Some(500));
        releases(&mut core, 1000, &calls[2..3], Some(500));
        releases(&mut core, 1499, &[], Some(1));
        releases(&mut core, 1500, &calls[3..], None);
    }

    #[test]
    fn a_trunk_holds_at_most_its_concurrent_calls() {
        let (mut core, calls) = queued_on(concurrent(2), 4);
        // A call's end wakes the queue, not a timer.
        releases(&mut core, 0, &calls[..2], None);
        releases(&mut core, 5000, &[], None);
        end(&mut core, &calls[0]);
        releases(&mut core, 5000, &calls[2..3], None);
        end(&mut core, &calls[1]);
        end(&mut core, &calls[2]);
        releases(&mut core, 5000, &calls[3..], None);
    }

    #[test]
    fn a_full_trunk_does_not_hold_back_its_workspace_on_another_trunk() {
        let (ws, now) = (WorkspaceId::new(), t0());
        let busy = concurrent(1);
        let mut core = QueueCore::default();
        let live = on(busy, ws, 0);
        assert!(core.claim(&live, 10, 100, now));
        // The waiting call on the full trunk is first in line by priority and by age.
        let [stuck, other, untrunked] = [on(busy, ws, 9), on(cps(10), ws, 0), spec_in(ws, 0)];
        for c in [&stuck, &other, &untrunked] {
            core.push(c.clone());
        }
        let released = core.dispatch(10, 100, now);
        assert_eq!(ids(&released.calls), [other.id, untrunked.id]);
        assert_eq!(core.stats().waiting, 1);
        // Its trunk frees: it goes next.
        end(&mut core, &live);
        assert_eq!(ids(&core.dispatch(10, 100, now).calls), [stuck.id]);
    }

    #[test]
    fn priority_then_fifo_hold_across_trunks() {
        let ws = WorkspaceId::new();
        let (t1, t2) = (cps(10), concurrent(10));
        let mut core = QueueCore::default();
        let now = t0();
        let old_low = on(t1, ws, 0);
        let high = on(t2, ws, 5);
        let young_low = on(t2, ws, 0);
        let younger_low = on(t1, ws, 0);
        for c in [&old_low, &high, &young_low, &younger_low] {
            core.push(c.clone());
        }
        // One slot in the workspace: each release is the best of every trunk's head.
        let mut order = Vec::new();
        for _ in 0..4 {
            let released = core.dispatch(1, 100, now);
            assert_eq!(released.calls.len(), 1);
            end(&mut core, &released.calls[0]);
            order.extend(ids(&released.calls));
        }
        assert_eq!(order, [high.id, old_low.id, young_low.id, younger_low.id]);
    }

    #[test]
    fn a_claim_needs_room_on_its_trunk_and_counts_as_a_start() {
        let ws = WorkspaceId::new();
        let now = t0();
        let mut core = QueueCore::default();

        let paced = cps(1);
        let first = on(paced, ws, 0);
        assert!(core.claim(&first, 10, 100, now));
        assert!(
            !core.claim(&on(paced, ws, 0), 10, 100, now + ms(999)),
            "one start a second"
        );
        // The claimed start holds back the queue's release on the trunk too.
        let waiting = on(paced, ws, 0);
        core.push(waiting.clone());
        let held = core.dispatch(10, 100, now + ms(200));
        assert!(held.calls.is_empty());
        assert_eq!(held.window_opens_in, Some(Duration::from_millis(800)));
        // And a claim does not pass the call waiting on that trunk once the window opens.
        assert!(!core.claim(&on(paced, ws, 0), 10, 100, now + ms(1000)));
        assert_eq!(
            ids(&core.dispatch(10, 100, now + ms(1000)).calls),
            [waiting.id]
        );

        let capped = concurrent(1);
        let live = on(capped, ws, 0);
        assert!(core.claim(&live, 10, 100, now));
        assert!(
            !core.claim(&on(capped, ws, 0), 10, 100, now),
            "the trunk is full"
        );
        // Another trunk of the workspace still has room.
        assert!(core.claim(&on(concurrent(1), ws, 0), 10, 100, now));
        end(&mut core, &live);
        assert!(core.claim(&on(capped, ws, 0), 10, 100, now));
    }

    #[test]
    fn a_rebuild_keeps_the_trunks_live_calls_and_windows() {
        let ws = WorkspaceId::new();
        let now = t0();
        let (paced, capped) = (cps(1), concurrent(1));
        let mut core = QueueCore::default();
        assert!(core.claim(&on(paced, ws, 0), 10, 100, now));
        let live = on(capped, ws, 0);
        assert!(core.claim(&live, 10, 100, now));

        let old = std::mem::take(&mut core);
        let mut core = QueueCore::rebuilt(HashMap::from([(ws, 2)]), old);
        assert_eq!(core.stats().peak_live, 2);
        let (a, b) = (on(paced, ws, 0), on(capped, ws, 0));
        core.push(a.clone());
        core.push(b.clone());
        let held = core.dispatch(10, 100, now + ms(500));
        assert!(held.calls.is_empty());
        assert_eq!(held.window_opens_in, Some(Duration::from_millis(500)));
        end(&mut core, &live);
        assert_eq!(
            ids(&core.dispatch(10, 100, now + ms(1000)).calls),
            [a.id, b.id]
        );
    }
}
