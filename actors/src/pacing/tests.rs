//! The pacing gates and the evaluation results, case by case.

use super::*;
use chrono::TimeZone;

#[test]
fn tick_results_read_back() {
    assert_eq!(
        TickResult::parse("admitted:3"),
        Some(TickResult::Admitted(3))
    );
    assert_eq!(TickResult::parse("admitted:-1"), None);
    assert_eq!(TickResult::parse("admitted:"), None);
    assert_eq!(TickResult::parse("paused"), None);
    for result in TickResult::NAMED {
        assert_eq!(
            TickResult::parse(&result.as_str()),
            Some(result),
            "{result}"
        );
        // A new result must be listed in NAMED to be read back: the match makes it named here.
        match result {
            TickResult::Admitted(_) => panic!("Admitted is not named"),
            TickResult::WaitingForStartsAt
            | TickResult::StartsAtReached
            | TickResult::CreditRestored
            | TickResult::InsufficientCredit
            | TickResult::Config(_)
            | TickResult::AllContactsDone
            | TickResult::DailyCapReached
            | TickResult::MaxInFlight
            | TickResult::WaitingForQueue
            | TickResult::MinSecondsBetweenCalls
            | TickResult::OutsideCallingWindow
            | TickResult::BudgetReached
            | TickResult::BudgetReservedByCallsInFlight
            | TickResult::StatusChanged
            | TickResult::InsufficientCreditForMore
            | TickResult::FundsChanged
            | TickResult::WaitingForCalls
            | TickResult::NoContactsDue
            | TickResult::RepeatedInfraErrors => {}
        }
    }
    let names: std::collections::HashSet<_> =
        TickResult::NAMED.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), TickResult::NAMED.len());
}

fn window(json: serde_json::Value) -> CallingWindow {
    CallingWindow::from_json(&json).expect("a valid window")
}

fn pacing(window: &CallingWindow, now: DateTime<Utc>) -> Pacing<'_> {
    Pacing {
        now,
        window,
        ends_at: None,
        admitted_today: 0,
        max_calls_per_day: 100,
        in_flight: 0,
        max_in_flight: 2,
        queued: 0,
        gap: Duration::zero(),
        last_call_at: None,
    }
}

#[test]
fn tick_results_have_one_string_form() {
    assert_eq!(TickResult::Admitted(3).to_string(), "admitted:3");
    assert_eq!(TickResult::DailyCapReached.as_str(), "daily_cap_reached");
    assert_eq!(
        TickResult::Config(ConfigProblem::AgentUnavailable).as_str(),
        "agent_unavailable"
    );
}

#[test]
fn campaign_gates_close_in_order_and_say_when_they_open() {
    let w = window(
        serde_json::json!({"timezone": "UTC", "days": ["mon","tue","wed","thu","fri","sat","sun"], "start": "00:00", "end": "23:59", "use_contact_timezone": false}),
    );
    let now = Utc.with_ymd_and_hms(2026, 3, 4, 12, 0, 0).unwrap();
    assert_eq!(pacing(&w, now).blocked(), None);
    assert_eq!(pacing(&w, now).free_slots(), 2);

    let capped = Pacing {
        admitted_today: 100,
        in_flight: 2,
        ..pacing(&w, now)
    };
    let blocked = capped.blocked().expect("the daily cap closes first");
    assert_eq!(blocked.reason, TickResult::DailyCapReached);
    assert_eq!(
        blocked.until,
        Some(Utc.with_ymd_and_hms(2026, 3, 5, 0, 0, 0).unwrap())
    );

    let full = Pacing {
        in_flight: 2,
        ..pacing(&w, now)
    };
    assert_eq!(
        full.blocked().map(|b| b.reason),
        Some(TickResult::MaxInFlight)
    );

    let spaced = Pacing {
        gap: Duration::seconds(30),
        last_call_at: Some(now - Duration::seconds(10)),
        ..pacing(&w, now)
    };
    assert_eq!(
        spaced.blocked(),
        Some(Blocked {
            reason: TickResult::MinSecondsBetweenCalls,
            until: Some(now + Duration::seconds(20)),
        })
    );
    assert_eq!(spaced.free_slots(), 1);
    let waiting = Pacing {
        queued: 1,
        ..spaced
    };
    assert_eq!(
        waiting.blocked().map(|b| b.reason),
        Some(TickResult::WaitingForQueue)
    );
}

#[test]
fn the_window_is_a_campaign_gate_only_without_contact_zones() {
    let hours = |own: bool| {
        window(
            serde_json::json!({"timezone": "UTC", "days": ["mon","tue","wed","thu","fri"], "start": "09:00", "end": "17:00", "use_contact_timezone": own}),
        )
    };
    // A Wednesday at 20:00 UTC.
    let now = Utc.with_ymd_and_hms(2026, 3, 4, 20, 0, 0).unwrap();
    let shared = hours(false);
    let blocked = pacing(&shared, now).blocked().expect("closed at 20:00");
    assert_eq!(blocked.reason, TickResult::OutsideCallingWindow);
    assert_eq!(
        blocked.until,
        Some(Utc.with_ymd_and_hms(2026, 3, 5, 9, 0, 0).unwrap())
    );
    let per_contact = hours(true);
    assert_eq!(pacing(&per_contact, now).blocked(), None);
}

#[test]
fn a_contact_hold_names_the_first_reason_the_engine_would_act_on() {
    let w = window(
        serde_json::json!({"timezone": "Asia/Jerusalem", "days": ["sun","mon","tue","wed","thu","fri","sat"], "start": "09:00", "end": "20:00", "use_contact_timezone": true}),
    );
    // 12:00 in Jerusalem, 05:00 in New York.
    let now = Utc.with_ymd_and_hms(2026, 3, 4, 10, 0, 0).unwrap();
    let campaign = CampaignFacts {
        status: CampaignStatus::Running,
        window: &w,
        ends_at: None,
        daily_window_date: Some(local_date(now, w.timezone)),
        daily_admitted_count: 5,
        max_calls_per_day: 5,
        disposition_timeout: Duration::minutes(5),
    };
    let contact = ContactFacts {
        state: ContactState::Pending,
        attempts: 0,
        excluded_reason: None,
        next_attempt_at: None,
        timezone: None,
        phone_number: "+972501234567",
        last_call_ended_at: None,
    };
    let hold = contact_hold(&campaign, &contact, now);
    assert_eq!(hold.reason(), "daily_cap_reached");
    assert_eq!(
        hold.message(None),
        "max_calls_per_day (5) reached for 2026-03-04"
    );

    let abroad = ContactFacts {
        phone_number: "+12125550100",
        ..contact
    };
    let hold = contact_hold(&campaign, &abroad, now);
    assert_eq!(hold.reason(), "outside_calling_window");
    assert_eq!(
        hold.until(),
        Some(Utc.with_ymd_and_hms(2026, 3, 4, 14, 0, 0).unwrap()),
        "09:00 in New York (EST, before its switch to summer time)"
    );

    let paused = CampaignFacts {
        status: CampaignStatus::Paused,
        ..campaign
    };
    assert_eq!(
        contact_hold(&paused, &contact, now).reason(),
        "campaign_paused"
    );
    let excluded = ContactFacts {
        state: ContactState::Excluded,
        excluded_reason: Some("do_not_call"),
        ..contact
    };
    assert_eq!(
        contact_hold(&paused, &excluded, now).reason(),
        "excluded:do_not_call"
    );
    let open = CampaignFacts {
        daily_admitted_count: 4,
        ..campaign
    };
    let retry = ContactFacts {
        next_attempt_at: Some(now + Duration::hours(1)),
        ..contact
    };
    assert_eq!(
        contact_hold(&open, &retry, now),
        ContactHold::RetryScheduled {
            at: now + Duration::hours(1)
        }
    );
    assert_eq!(
        contact_hold(&open, &contact, now),
        ContactHold::WaitingForASlot
    );
}
