//! The queue's rules: priority then FIFO across trunks, slots per workspace and per trunk,
//! each trunk's calls-per-second window, claims that never pass a waiting call, and a rebuild
//! that keeps the trunks' live calls and windows.

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
