//! The campaign engine under tokio's paused clock: every pacing, retry, window, money and
//! status rule, run against the real store and the simulated carrier.

use std::collections::HashMap;
use std::time::Duration;

use switchboard_actors::campaign::CampaignStatus;

use crate::rig::{Rig, at, min_dial_gap, peak_concurrency};

const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test]
async fn a_campaign_runs_to_completion_within_its_pacing() {
    let rig = Rig::new(
        "2026-05-04T08:00:00Z",
        "answered=1,no_answer=1,busy=1,voicemail=1",
        |_, _| {},
    )
    .await;
    let c = rig
        .campaign(|s| {
            s.max_in_flight = 3;
            s.min_seconds_between_calls = 20;
            s.max_attempts = 2;
            s.retry_no_answer_seconds = 600;
            s.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 40, None).await;
    rig.launch(c).await;
    let done = rig.run_to(c, CampaignStatus::Completed, 3 * DAY).await;

    let calls = rig.calls(c).await;
    assert!(!calls.is_empty());
    assert!(
        peak_concurrency(&calls) <= 3,
        "{}",
        peak_concurrency(&calls)
    );
    assert!(
        min_dial_gap(&calls).unwrap() >= 20,
        "{:?}",
        min_dial_gap(&calls)
    );
    let seen = rig.carrier.observations();
    let obs = &seen.campaigns[&c];
    assert!(obs.peak_live <= 3, "carrier saw {} live", obs.peak_live);
    assert!(obs.min_gap_secs.unwrap() >= 20.0);
    assert_eq!(obs.dials as usize, calls.len());

    for contact in rig.contacts(c).await {
        assert!(
            ["retired", "exhausted"].contains(&contact.state.as_str()),
            "{} is {}",
            contact.phone_number,
            contact.state
        );
        assert!(contact.attempts >= 1 && contact.attempts <= 2);
        let mine: Vec<_> = calls
            .iter()
            .filter(|k| k.contact_id == Some(contact.id))
            .collect();
        assert_eq!(mine.len() as i64, contact.attempts);
        if let [first, second] = mine.as_slice() {
            let gap = second.started_at.unwrap() - first.ended_at.unwrap();
            assert!(gap.num_seconds() >= 600, "retry after {gap}");
        }
    }
    assert_eq!(done.reserved_cents, 0);
    let spent: i64 = calls.iter().map(|k| k.cost_cents).sum();
    assert_eq!(done.spent_cents, spent);
    assert!(done.completed_at.is_some() && done.started_at.is_some());
    let balance = rig
        .store
        .billing_account(rig.ws)
        .await
        .unwrap()
        .unwrap()
        .balance_cents;
    assert_eq!(balance, 10_000_000 - spent);
}

#[tokio::test]
async fn no_answers_retry_until_max_attempts_and_then_exhaust() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "no_answer=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.max_attempts = 3;
            s.retry_no_answer_seconds = 3600;
            s.max_in_flight = 2;
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
        assert_eq!(contact.state, "exhausted");
        assert_eq!(contact.attempts, 3);
        assert_eq!(contact.last_outcome.as_deref(), Some("no_answer"));
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
            s.stop_on_no_answer = true;
            s.max_attempts = 5;
        })
        .await;
    rig.enroll(c, 4, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    assert_eq!(rig.calls(c).await.len(), 4);
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, "retired");
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
            s.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 2, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let calls = rig.calls(c).await;
    for contact in rig.contacts(c).await {
        assert_eq!(contact.state, "retired");
        let call = calls
            .iter()
            .find(|k| k.contact_id == Some(contact.id))
            .unwrap();
        assert!((contact.updated_at - call.ended_at.unwrap()).num_seconds() >= 300);
    }
}

#[tokio::test]
async fn a_daily_cap_rolls_over_at_midnight_in_the_window_zone() {
    let rig = Rig::new("2026-05-04T10:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.max_calls_per_day = 5;
            s.stop_on_no_answer = true;
            s.calling_window = Some(crate::rig::all_day("America/New_York"));
        })
        .await;
    rig.enroll(c, 12, None).await;
    rig.launch(c).await;
    let first = rig
        .run_until(c, DAY, |r| {
            r.last_tick_result.as_deref() == Some("daily_cap_reached")
        })
        .await;
    assert_eq!(first.daily_admitted_count, 5);
    rig.run_to(c, CampaignStatus::Completed, 4 * DAY).await;
    let calls = rig.calls(c).await;
    let mut per_day: HashMap<String, usize> = HashMap::new();
    for k in &calls {
        let local = k
            .queued_at
            .with_timezone(&chrono_tz::America::New_York)
            .date_naive();
        *per_day.entry(local.to_string()).or_default() += 1;
    }
    let mut days: Vec<_> = per_day.into_iter().collect();
    days.sort();
    assert_eq!(
        days,
        [
            ("2026-05-04".to_owned(), 5),
            ("2026-05-05".to_owned(), 5),
            ("2026-05-06".to_owned(), 2)
        ]
    );
    let _ = at("2026-05-04T00:00:00Z");
}
