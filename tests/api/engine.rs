//! The campaign engine under tokio's paused clock: the pacing and admission rules (in-flight
//! and daily caps, calling windows in each zone, the workspace limit, a trunk's calls per second
//! and concurrent calls, money, configuration, do-not-call and scheduled starts), run against
//! the real store and the simulated carrier.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_actors::call::CallStatus;
use switchboard_actors::campaign::{CampaignStatus, ConfigProblem};
use switchboard_actors::contact::{CallOutcome, ContactState, ExclusionReason};
use switchboard_actors::money::Cents;
use switchboard_actors::pacing::TickResult;
use switchboard_actors::ports::{DialProgress, DialRequest, DialResult, Dialer, TrunkLimits};
use tokio::time::Instant;

use crate::rig::{DAY, Rig, at, hours, min_dial_gap, peak_concurrency};

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
            s.rules.max_in_flight = 3;
            s.rules.min_seconds_between_calls = 20;
            s.rules.max_attempts = 2;
            s.rules.retry_no_answer_seconds = 600;
            s.rules.stop_on_unclassified = true;
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
    crate::engine_store::counts_agree_before_and_after_a_fold(&rig, c, &calls).await;
}

#[tokio::test]
async fn a_daily_cap_rolls_over_at_midnight_in_the_window_zone() {
    let rig = Rig::new("2026-05-04T10:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.max_calls_per_day = 5;
            s.rules.stop_on_no_answer = true;
            s.calling_window = Some(crate::rig::all_day("America/New_York"));
        })
        .await;
    rig.enroll(c, 12, None).await;
    rig.launch(c).await;
    let first = rig
        .run_until(c, DAY, |r| {
            r.last_tick_result == Some(TickResult::DailyCapReached)
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

#[tokio::test]
async fn lowering_the_daily_cap_below_todays_admissions_stops_admission_for_the_day() {
    // 10:00 in New York: the rest of the run stays within one local day.
    let rig = Rig::new("2026-05-04T14:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.max_calls_per_day = 100;
            s.rules.min_seconds_between_calls = 60;
            s.rules.stop_on_no_answer = true;
            s.calling_window = Some(crate::rig::all_day("America/New_York"));
        })
        .await;
    rig.enroll(c, 40, None).await;
    rig.launch(c).await;
    rig.run_until(c, DAY, |r| r.daily_admitted_count >= 6).await;
    rig.patch(c, |s| s.rules.max_calls_per_day = 3).await;
    // An evaluation already under way when the PATCH landed may still finish.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let capped = rig.record(c).await;
    let calls = rig.calls(c).await.len();
    tokio::time::sleep(Duration::from_secs(2 * 3600)).await;
    let later = rig.record(c).await;
    assert_eq!(later.status, CampaignStatus::Running);
    assert_eq!(later.last_tick_result, Some(TickResult::DailyCapReached));
    assert_eq!(later.daily_admitted_count, capped.daily_admitted_count);
    assert_eq!(rig.calls(c).await.len(), calls, "no call was admitted");
}

#[tokio::test]
async fn calling_hours_follow_the_zone_across_a_dst_change() {
    // New York springs forward on Sunday 2026-03-08: 09:00 local is 14:00 UTC before, 13:00 after.
    let rig = Rig::new("2026-03-06T12:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.stop_on_no_answer = true;
            s.rules.max_calls_per_day = 2;
            s.calling_window = Some(hours("America/New_York", "09:00", "10:00", false));
        })
        .await;
    rig.enroll(c, 8, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, 6 * DAY).await;
    let calls = rig.calls(c).await;
    assert_eq!(calls.len(), 8);
    let mut first_hour_utc: HashMap<String, u32> = HashMap::new();
    for k in &calls {
        let start = k.started_at.unwrap();
        let local = start.with_timezone(&chrono_tz::America::New_York);
        use chrono::Timelike;
        assert_eq!(local.hour(), 9, "dialled at {local}");
        first_hour_utc
            .entry(local.date_naive().to_string())
            .or_insert(start.hour());
    }
    assert_eq!(first_hour_utc["2026-03-06"], 14);
    assert_eq!(first_hour_utc["2026-03-07"], 14);
    assert_eq!(first_hour_utc["2026-03-08"], 13);
    assert_eq!(first_hour_utc["2026-03-09"], 13);
}

#[tokio::test]
async fn each_contact_is_called_within_the_hours_of_its_own_zone() {
    let rig = Rig::new("2026-05-04T00:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.stop_on_no_answer = true;
            s.rules.max_in_flight = 2;
            s.calling_window = Some(hours("UTC", "09:00", "17:00", true));
        })
        .await;
    rig.enroll(c, 5, Some("Asia/Tokyo")).await;
    let la: Vec<switchboard::store::NewContact> = (0..5)
        .map(|i| switchboard::store::NewContact {
            phone_number: format!("+97253{:07}", 2_000_000 + i),
            timezone: Some("America/Los_Angeles".into()),
            lead_id: None,
            variables: serde_json::json!({}),
            metadata: serde_json::json!({}),
            excluded: None,
        })
        .collect();
    rig.store
        .enroll_contacts(rig.ws, c, &la, rig.key)
        .await
        .unwrap()
        .unwrap();
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, 2 * DAY).await;
    let contacts = rig.contacts(c).await;
    let calls = rig.calls(c).await;
    assert_eq!(calls.len(), 10);
    for k in &calls {
        let contact = contacts
            .iter()
            .find(|x| Some(x.id) == k.contact_id)
            .unwrap();
        let zone: chrono_tz::Tz = contact.timezone.as_deref().unwrap().parse().unwrap();
        use chrono::Timelike;
        let local = k.started_at.unwrap().with_timezone(&zone);
        assert!(
            (9..17).contains(&local.hour()),
            "{} dialled at {local}",
            contact.phone_number
        );
    }
}

#[tokio::test]
async fn calls_share_the_workspace_limit_and_direct_calls_keep_their_priority() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |config, _| {
        config.workspace_max_concurrent_calls = 2;
    })
    .await;
    for i in 0..5 {
        rig.direct_call(&format!("+97254{:07}", 3_000_000 + i), 9)
            .await;
    }
    let c = rig
        .campaign(|s| {
            s.rules.max_in_flight = 2;
            s.rules.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 6, None).await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let calls = rig.all_calls().await;
    assert_eq!(calls.len(), 11);
    assert!(
        peak_concurrency(&calls) <= 2,
        "{}",
        peak_concurrency(&calls)
    );
    assert!(rig.carrier.observations().peak_live <= 2);
    let last_direct = calls
        .iter()
        .filter(|k| k.campaign_id.is_none())
        .filter_map(|k| k.started_at)
        .max()
        .unwrap();
    let first_campaign = calls
        .iter()
        .filter(|k| k.campaign_id.is_some())
        .filter_map(|k| k.started_at)
        .min()
        .unwrap();
    assert!(
        last_direct <= first_campaign,
        "a campaign call ({first_campaign}) went ahead of a direct call queued before it ({last_direct})"
    );
}

#[tokio::test]
async fn the_budget_pauses_the_campaign_and_raising_it_does_not_resume() {
    // The agent's 600 s cap at 10 cents a minute reserves 100 cents a call.
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |_, sim| {
        sim.talk_secs = "60-60".parse().unwrap();
    })
    .await;
    let c = rig
        .campaign(|s| {
            s.rules.budget_cents = Some(Cents::new(150));
            s.rules.stop_on_unclassified = true;
        })
        .await;
    rig.enroll(c, 50, None).await;
    rig.launch(c).await;
    let paused = rig.run_to(c, CampaignStatus::PausedBudget, DAY).await;
    assert_eq!(paused.reserved_cents, 0);
    assert!(paused.spent_cents <= 150);
    assert!(
        paused.spent_cents + 100 > 150,
        "spent {}",
        paused.spent_cents
    );
    assert_eq!(paused.spent_cents, 10 * rig.calls(c).await.len() as i64);
    assert!(paused.last_error.as_deref().unwrap().contains("budget"));

    rig.patch(c, |s| s.rules.budget_cents = Some(Cents::new(10_000)))
        .await;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(rig.record(c).await.status, CampaignStatus::PausedBudget);
}

#[tokio::test]
async fn low_credit_pauses_and_a_top_up_resumes_automatically() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "answered=1", |_, sim| {
        sim.talk_secs = "60-60".parse().unwrap();
    })
    .await;
    rig.set_balance(125).await;
    let c = rig.campaign(|s| s.rules.stop_on_unclassified = true).await;
    rig.enroll(c, 10, None).await;
    rig.launch(c).await;
    let paused = rig
        .run_to(c, CampaignStatus::PausedInsufficientCredit, DAY)
        .await;
    assert_eq!(
        paused.last_tick_result,
        Some(TickResult::InsufficientCredit)
    );
    // 125 cents: two calls of 10 cents, then 105 left covers one reservation, 95 does not.
    assert_eq!(rig.calls(c).await.len(), 3);

    rig.set_balance(100_000).await;
    rig.engine.funds_changed(rig.ws);
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let kinds: Vec<String> = rig.events(c).await.into_iter().map(|e| e.0).collect();
    assert!(kinds.contains(&"resumed".to_owned()), "{kinds:?}");
}

#[tokio::test]
async fn a_deactivated_agent_pauses_for_configuration() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "no_answer=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| s.rules.retry_no_answer_seconds = 3600)
        .await;
    rig.enroll(c, 3, None).await;
    rig.launch(c).await;
    rig.run_until(c, DAY, |r| r.daily_admitted_count >= 3).await;
    {
        let _held = rig.hold.enter();
        rig.store.deactivate_agent(rig.ws, rig.agent).await.unwrap();
    }
    rig.engine.campaign_changed(c);
    let paused = rig.run_to(c, CampaignStatus::PausedConfig, DAY).await;
    assert_eq!(
        paused.last_tick_result,
        Some(TickResult::Config(ConfigProblem::AgentUnavailable))
    );
    assert!(paused.last_error.is_some());
}

/// Puts `number` on the rig's workspace's do-not-call list for every agent.
async fn block(rig: &Rig, number: &str) {
    let _held = rig.hold.enter();
    rig.store
        .create_dnc_entry(
            rig.ws,
            &switchboard::store::NewDncEntry {
                phone_number: number,
                reason: "asked",
                source: switchboard::store::DncSource::Api,
                expires_at: None,
                agent_ids: &[],
                created_by: None,
            },
        )
        .await
        .unwrap();
}

/// The contact with `number` was excluded for do-not-call and never dialled.
async fn excluded_unreached(rig: &Rig, c: switchboard_actors::ids::CampaignId, number: &str) {
    let contacts = rig.contacts(c).await;
    let blocked = contacts.iter().find(|x| x.phone_number == number).unwrap();
    assert_eq!(blocked.state, ContactState::Excluded);
    assert_eq!(blocked.excluded_reason, Some(ExclusionReason::DoNotCall));
    assert!(rig.calls(c).await.iter().all(|k| k.to_number != number));
}

#[tokio::test]
async fn do_not_call_is_checked_at_admission() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig.campaign(|s| s.rules.stop_on_no_answer = true).await;
    rig.enroll(c, 3, None).await;
    block(&rig, "+972521000001").await;
    rig.launch(c).await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    excluded_unreached(&rig, c, "+972521000001").await;
}

#[tokio::test]
async fn a_number_blocked_while_its_contact_waits_in_line_is_not_dialled() {
    // One call at a time: the last contact waits in line, already read as due, while the
    // first is on the phone; its number is put on the list then.
    let rig = Rig::new("2026-05-04T08:00:00Z", "busy=1", |_, _| {}).await;
    let c = rig
        .campaign(|s| {
            s.rules.max_in_flight = 1;
            s.rules.stop_on_no_answer = true;
        })
        .await;
    rig.enroll(c, 3, None).await;
    rig.launch(c).await;
    let deadline = Instant::now() + DAY;
    while rig.carrier.observations().dials == 0 {
        assert!(Instant::now() < deadline, "nothing dialled within a day");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    block(&rig, "+972521000002").await;
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    excluded_unreached(&rig, c, "+972521000002").await;
    assert_eq!(rig.calls(c).await.len(), 2);
}

#[tokio::test]
async fn a_scheduled_campaign_starts_at_starts_at() {
    let rig = Rig::new("2026-05-04T08:00:00Z", "busy=1", |_, _| {}).await;
    let starts = at("2026-05-04T11:00:00Z");
    let c = rig
        .campaign(|s| {
            s.rules.starts_at = Some(starts);
            s.rules.stop_on_no_answer = true;
        })
        .await;
    rig.enroll(c, 2, None).await;
    rig.launch(c).await;
    assert_eq!(rig.record(c).await.status, CampaignStatus::Scheduled);
    rig.run_to(c, CampaignStatus::Completed, DAY).await;
    let calls = rig.calls(c).await;
    assert!(calls.iter().all(|k| k.started_at.unwrap() >= starts));
    let kinds: Vec<String> = rig.events(c).await.into_iter().map(|e| e.0).collect();
    assert!(kinds.contains(&"started".to_owned()), "{kinds:?}");
}

/// What the carrier saw: when each dial started, and the most calls live at once.
#[derive(Default)]
struct Dials {
    starts: Vec<Instant>,
    live: usize,
    peak_live: usize,
}

/// The simulated carrier, watched.
struct Watched {
    carrier: Arc<dyn Dialer>,
    dials: Arc<Mutex<Dials>>,
}

#[async_trait::async_trait]
impl Dialer for Watched {
    async fn dial(&self, request: DialRequest, progress: DialProgress) -> DialResult {
        {
            let mut d = self.dials.lock().unwrap();
            d.starts.push(Instant::now());
            d.live += 1;
            d.peak_live = d.peak_live.max(d.live);
        }
        let result = self.carrier.dial(request, progress).await;
        self.dials.lock().unwrap().live -= 1;
        result
    }
}

/// A rig whose every call is answered, with room for 100 live calls in the workspace, whose
/// dials are watched.
async fn watched_rig(talk_secs: &str) -> (Rig, Arc<Mutex<Dials>>) {
    let dials = Arc::new(Mutex::new(Dials::default()));
    let seen = dials.clone();
    let talk = talk_secs.parse().unwrap();
    let rig = Rig::with_dialer(
        "2026-05-04T08:00:00Z",
        "answered=1",
        |config, sim| {
            config.workspace_max_concurrent_calls = 100;
            sim.talk_secs = talk;
        },
        Arc::new(move |carrier| {
            Arc::new(Watched {
                carrier,
                dials: seen.clone(),
            })
        }),
    )
    .await;
    (rig, dials)
}

/// Queues `n` direct calls on `trunk` and waits until every call has ended; none may fail.
async fn call_all_on(rig: &Rig, trunk: TrunkLimits, n: usize) {
    for i in 0..n {
        rig.direct_call_on(&format!("+97254{:07}", 4_000_000 + i), 0, Some(trunk))
            .await;
    }
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let calls = rig.all_calls().await;
        if calls.len() == n && calls.iter().all(|c| c.status == CallStatus::Ended) {
            for c in &calls {
                assert_eq!(c.outcome, Some(CallOutcome::Answered), "{}", c.id);
            }
            return;
        }
        assert!(Instant::now() < deadline, "calls still open after an hour");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_trunk_starts_at_most_its_calls_per_second() {
    let (rig, dials) = watched_rig("30-90").await;
    let trunk = TrunkLimits {
        trunk: uuid::Uuid::new_v4(),
        calls_per_second: Some(5),
        max_concurrent: None,
    };
    call_all_on(&rig, trunk, 50).await;
    let starts = dials.lock().unwrap().starts.clone();
    assert_eq!(starts.len(), 50);
    for (i, first) in starts.iter().enumerate() {
        let within = starts[i..]
            .iter()
            .filter(|s| **s - *first < Duration::from_secs(1))
            .count();
        assert!(within <= 5, "{within} dials within a second of dial {i}");
    }
    // The queue wakes itself as each window opens: the calls (which last at least 35 s) do not
    // have to end first, and 50 calls at 5 a second take 9 seconds.
    let span = starts[49] - starts[0];
    assert!(
        span >= Duration::from_secs(9) && span <= Duration::from_secs(10),
        "50 dials took {span:?}"
    );
}

#[tokio::test]
async fn a_trunk_holds_at_most_its_concurrent_calls() {
    let (rig, dials) = watched_rig("10-20").await;
    let trunk = TrunkLimits {
        trunk: uuid::Uuid::nil(),
        calls_per_second: None,
        max_concurrent: Some(3),
    };
    call_all_on(&rig, trunk, 20).await;
    let dials = dials.lock().unwrap();
    assert_eq!(dials.starts.len(), 20);
    assert_eq!(
        dials.peak_live, 3,
        "the trunk's three calls are used, never more"
    );
}
