//! The campaign engine under tokio's paused clock: what follows a call (retries, stop outcomes,
//! dispositions and their timeout, infra errors), stopping with calls in flight, and recovery
//! from restarts and failed actors, run against the real store and the simulated carrier.

use std::collections::HashMap;
use std::time::Duration;

use switchboard::store::DispositionSource;
use switchboard_actors::call::EndReason;
use switchboard_actors::campaign::CampaignStatus;
use switchboard_actors::contact::{CallOutcome, ContactState};
use switchboard_actors::pacing::TickResult;

use crate::rig::{DAY, Rig};

#[tokio::test]
async fn no_answers_retry_until_max_attempts_and_then_exhaust() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "no_answer=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.max_attempts = 3;
            s.rules.retry_no_answer_seconds = 3600;
            s.rules.max_in_flight = 2;
        })
        .await;
    rig.enroll(c, 5, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, 2 * DAY).await;
    let calls = rig.calls(c).await;
    assert_eq!(calls.len(), 15);
    let mut per_contact: HashMap<_, Vec<_>> = HashMap::new();
    for k in &calls {
        per_contact.entry(k.contact_id).or_default().push(k);
    }
    for (_, ks) in per_contact {
        assert_eq!(ks.iter().map(|k| k.attempt).collect::<Vec<_>>(), [1, 2, 3]);
        for w in ks.windows(2) {
            assert!((w[1].started_at.unwrap() - w[0].ended_at.unwrap()).num_seconds() >= 3600);
        }
    }
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, ContactState::Exhausted);
        assert_eq!(contact.attempts, 3);
        assert_eq!(contact.last_outcome, Some(CallOutcome::NoAnswer));
    }
    // Raising max_attempts does not revive exhausted contacts.
    let record = rig.record(c).await;
    assert_eq!(record.status, CampaignStatus::Completed);
}

#[tokio::test]
async fn a_stop_outcome_retires_the_contact_after_one_attempt() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.stop_on_no_answer = true;
            s.rules.max_attempts = 5;
        })
        .await;
    rig.enroll(c, 4, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    assert_eq!(rig.calls(c).await.len(), 4);
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, ContactState::Retired);
    }
}

#[tokio::test]
async fn unclassified_answers_wait_for_the_disposition_timeout() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |config, _| {
        config.disposition_timeout = Duration::from_secs(300);
    })
    .await;
    let c = rig
        .campaign(|s| {
            s.rules.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 2, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let calls = rig.calls(c).await;
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, ContactState::Retired);
        let call = calls
            .iter()
            .find(|k| k.contact_id == Some(contact.id))
            .unwrap();
        assert!((contact.updated_at - call.ended_at.unwrap()).num_seconds() >= 300);
    }
}

#[tokio::test]
async fn a_disposition_that_lands_unannounced_still_decides_at_the_timeout() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |config, _| {
        config.disposition_timeout = Duration::from_secs(300);
    })
    .await;
    let stop = {
        let _held = rig.hold.enter();
        rig.store.list_dispositions(rig.ws).await.unwrap()[0].id
    };
    let c = rig
        .campaign(|s| {
            s.rules.max_attempts = 3;
            s.rules.retry_completed_seconds = 600;
            s.rules.stop_disposition_ids = vec![stop];
        })
        .await;
    rig.enroll(c, 1, None).await;
    rig.launch(c).await;
    // The call ends answered and the contact waits for its disposition.
    let deadline = tokio::time::Instant::now() + DAY;
    let call = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the contact did not await its disposition within a day"
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        if rig.contacts(c).await[0].state == ContactState::AwaitingDisposition {
            break rig.calls(c).await[0].id;
        }
    };
    // The disposition is written without the engine hearing of it: the timeout finds it.
    {
        let _held = rig.hold.enter();
        rig.store
            .set_call_disposition(rig.ws, call, stop, DispositionSource::Api)
            .await
            .unwrap()
            .unwrap();
    }
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let contact = &rig.contacts(c).await[0];
    assert_eq!(contact.state, ContactState::Retired);
    assert_eq!(contact.last_disposition_id, Some(stop.as_uuid()));
    assert_eq!(
        rig.calls(c).await.len(),
        1,
        "a stop disposition is not retried"
    );
}

#[tokio::test]
async fn infra_errors_give_attempts_back_then_pause_the_campaign() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "infra_error=1", |config, _| {
        config.infra_pause_after = 5;
    })
    .await;
    let c = rig.campaign(|s| s.rules.max_infra_retries = 3).await;
    rig.enroll(c, 10, None).await;
    rig.launch(c).await;
    let paused = rig.run_to(c, CampaignStatus::PausedInfra, DAY).await;
    assert_eq!(
        paused.last_tick_result,
        Some(TickResult::RepeatedInfraErrors)
    );
    // Wait for the last call to settle, then check: no attempt was spent on an infra error.
    tokio::time::sleep(Duration::from_secs(600)).await;
    for contact in rig.contacts(c).await {
        assert_eq!(contact.attempts, 0, "{contact:?}");
    }
    assert!(rig.calls(c).await.len() >= 5);
}

#[tokio::test]
async fn a_no_answer_is_dialled_twice_within_one_attempt() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "no_answer=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.max_attempts = 1;
            s.rules.double_dial_enabled = true;
            s.rules.double_dial_gap_seconds = 45;
        })
        .await;
    rig.enroll(c, 3, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let calls = rig.calls(c).await;
    assert_eq!(calls.len(), 6);
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, ContactState::Exhausted);
        assert_eq!(contact.attempts, 1);
        let mine: Vec<_> = calls
            .iter()
            .filter(|k| k.contact_id == Some(contact.id))
            .collect();
        assert_eq!(mine.len(), 2);
        assert!(mine.iter().all(|k| k.attempt == 1));
        let gap = mine[1].started_at.unwrap() - mine[0].ended_at.unwrap();
        assert!(gap.num_seconds() >= 45, "{gap}");
    }
}

#[tokio::test]
async fn stop_cancels_queued_calls_and_lets_live_ones_finish() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |config, sim| {
        config.workspace_max_concurrent_calls = 1;
        sim.talk_secs = "600-600".parse().unwrap();
    })
    .await;
    let c = rig
        .campaign(|s| {
            s.rules.max_in_flight = 2;
            s.rules.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 10, None).await;
    rig.launch(c).await;
    // One call live, one queued behind the workspace limit.
    rig.run_until(c, DAY, |r| r.daily_admitted_count == 2).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    rig.command(c, CampaignStatus::Stopped).await;
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await;
    let calls = rig.calls(c).await;
    assert_eq!(calls.len(), 2);
    let statuses: Vec<&str> = calls.iter().map(|k| k.status.as_str()).collect();
    assert!(statuses.contains(&"cancelled"), "{statuses:?}");
    assert!(statuses.contains(&"ended"), "{statuses:?}");
    let contacts = rig.contacts(c).await;
    assert!(
        contacts
            .iter()
            .all(|x| x.state == ContactState::Excluded || x.state == ContactState::Retired)
    );
    assert_eq!(
        contacts
            .iter()
            .filter(|x| x.state == ContactState::Retired)
            .count(),
        1
    );
    assert_eq!(rig.record(c).await.reserved_cents, 0);
}

/// Twenty contacts, answered or unanswered, two attempts ten minutes apart.
async fn retrying_campaign(rig: &Rig, max_in_flight: i64) -> switchboard_actors::ids::CampaignId {
    let c = rig
        .campaign(|s| {
            s.rules.max_in_flight = max_in_flight;
            s.rules.max_attempts = 2;
            s.rules.retry_no_answer_seconds = 600;
            s.rules.retry_completed_seconds = 600;
            s.rules.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 20, None).await;
    c
}

/// Runs to completion, then checks that no attempt was dialled twice, every contact is
/// terminal and nothing stays reserved; answers how many calls were interrupted.
async fn completes_without_redials(rig: &Rig, c: switchboard_actors::ids::CampaignId) -> usize {
    let done = rig.run_to(c, CampaignStatus::Completed, 3 * DAY).await;
    assert_eq!(done.reserved_cents, 0);
    let calls = rig.calls(c).await;
    let mut dialled: HashMap<_, usize> = HashMap::new();
    for k in calls.iter().filter(|k| k.started_at.is_some()) {
        *dialled.entry((k.contact_id, k.attempt)).or_default() += 1;
    }
    assert!(dialled.values().all(|n| *n == 1), "{dialled:?}");
    for contact in rig.contacts(c).await {
        assert!([ContactState::Retired, ContactState::Exhausted].contains(&contact.state));
    }
    calls
        .iter()
        .filter(|k| k.end_reason == Some(EndReason::Interrupted))
        .count()
}

#[tokio::test]
async fn a_restart_mid_call_neither_redials_nor_loses_anyone() {
    let mut rig = Rig::new("2026-05-04T08:00:00Z", "answered=1,no_answer=1", |_, _| {}).await;
    let c = retrying_campaign(&rig, 4).await;
    rig.launch(c).await;
    for _ in 0..3 {
        // Run until calls are live, then cut the engine off.
        let deadline = tokio::time::Instant::now() + DAY;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no call was live within a day"
            );
            tokio::time::sleep(Duration::from_secs(7)).await;
            if rig.carrier.observations().live > 0 {
                break;
            }
        }
        rig.restart().await;
    }
    assert!(completes_without_redials(&rig, c).await >= 1);
}

#[tokio::test]
async fn failed_actors_are_rebuilt_from_the_store() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    let mut rig = Rig::new("2026-05-04T08:00:00Z", "answered=1,no_answer=1", |_, _| {}).await;
    let c = retrying_campaign(&rig, 3).await;
    // A flaky database: a few evaluation reads fail (the campaign actor fails and is rebuilt),
    // and a few call ends fail to commit. The 4th end fails once, with its attempt's next step:
    // the contact actor fails and is rebuilt, and the call actor commits the end itself. The
    // 18th fails twice: the call actor fails too, and its call is ended interrupted.
    let (due, finish) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    rig.faults = Some(Arc::new(move |op: &str| match op {
        "due_contacts" => [5, 40, 90].contains(&due.fetch_add(1, SeqCst)),
        "finish_call" => [3, 17, 18].contains(&finish.fetch_add(1, SeqCst)),
        _ => false,
    }));
    rig.restart().await;
    rig.launch(c).await;
    assert_eq!(completes_without_redials(&rig, c).await, 1);
}
