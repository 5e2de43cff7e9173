//! The engine's writes as the database holds them, on SQLite and on PostgreSQL: two admitters
//! (two stores, as two processes would be) racing for the same contacts dial each once, and a
//! campaign's counts agree with its contacts and calls before and after they are folded.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use switchboard::domain::auth::Scopes;
use switchboard::runtime::simulation::all_day;
use switchboard::store::{
    Agent, CallFilter, CallRecord, CampaignSettings, Contact, LedgerKind, NewContact, Page,
    StatusChange, Store,
};
use switchboard_actors::campaign::{AuditEvent, CampaignStatus, NumberStatus};
use switchboard_actors::ids::{AgentId, ApiKeyId, CallId, CampaignId, PhoneNumberId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::pacing::TickResult;
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::ports::{Admission, AdmitResult, CallSpec, TickRecord};

use crate::rig::Rig;

const CONTACTS: usize = 40;

/// A workspace with credit, a key, an agent and a number, made through `store`.
struct Seed {
    ws: WorkspaceId,
    key: ApiKeyId,
    agent: AgentId,
    number: PhoneNumberId,
}

async fn seed(store: &Store) -> Seed {
    let ws = store.create_workspace("race", "IL").await.unwrap();
    store
        .apply_ledger_entry(ws.id, 10_000_000, LedgerKind::Credit, "credit", None)
        .await
        .unwrap();
    let (key, _) = store
        .create_key(ws.id, "race", &Scopes::All, None)
        .await
        .unwrap();
    let agent = store
        .create_agent(ws.id, &Agent::new("Racer".into()))
        .await
        .unwrap();
    let number = store
        .add_owned_number(
            ws.id,
            &PhoneNumber::from_e164_unchecked("+972501110000".into()),
            NumberStatus::Active,
        )
        .await
        .unwrap();
    Seed {
        ws: ws.id,
        key: key.id,
        agent: agent.id,
        number: number.id,
    }
}

/// A running campaign of `n` contacts numbered from `first`, and its contacts.
async fn running_campaign(
    store: &Store,
    s: &Seed,
    first: usize,
    n: usize,
) -> (CampaignId, Vec<Contact>) {
    let mut settings = CampaignSettings::defaults(format!("race {first}"));
    settings.agent_id = Some(s.agent);
    settings.from_phone_number_id = Some(s.number);
    settings.calling_window = Some(all_day("UTC"));
    let campaign = store.create_campaign(s.ws, &settings, s.key).await.unwrap();
    let contacts: Vec<NewContact> = (first..first + n)
        .map(|i| NewContact {
            phone_number: format!("+9725{:08}", 31_000_000 + i),
            timezone: None,
            lead_id: None,
            variables: serde_json::json!({}),
            metadata: serde_json::json!({}),
            excluded: None,
        })
        .collect();
    store
        .enroll_contacts(s.ws, campaign.id, &contacts, s.key)
        .await
        .unwrap()
        .unwrap();
    let launch = StatusChange {
        from: CampaignStatus::Draft,
        to: CampaignStatus::Running,
        event: AuditEvent::Launched,
        actor: Some(s.key),
        from_number: Some("+972501110000".into()),
    };
    assert!(
        store
            .change_campaign_status(s.ws, campaign.id, &launch)
            .await
            .unwrap()
    );
    (campaign.id, contacts_of(store, s, campaign.id).await)
}

async fn contacts_of(store: &Store, s: &Seed, c: CampaignId) -> Vec<Contact> {
    store
        .list_contacts(
            s.ws,
            c,
            None,
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
        .unwrap()
        .items
}

/// Admitting `contact` with a call of its own, under a daily cap of `cap`; `dialing`: placed
/// at once (its event committed with it) rather than queued.
fn admission(s: &Seed, c: CampaignId, contact: &Contact, cap: i64, dialing: bool) -> Admission {
    let now = Utc::now();
    Admission {
        call: CallSpec {
            id: CallId::new(),
            workspace_id: s.ws,
            campaign_id: Some(c),
            contact_id: Some(contact.id),
            agent_id: s.agent,
            from_phone_number_id: Some(s.number),
            from_number: "+972501110000".into(),
            to_number: contact.phone_number.clone(),
            priority: 0,
            attempt: 1,
            max_duration_secs: 600,
            reserved_cents: Cents::new(50),
            queued_at: now,
            trunk: None,
        },
        contact_id: contact.id,
        campaign_id: c,
        daily_date: now.date_naive(),
        max_calls_per_day: cap,
        budget_cents: None,
        now,
        tick: TickRecord {
            at: now,
            result: TickResult::Admitted(1),
            last_error: None,
            estimate_cents: Cents::new(0),
        },
        dialing,
    }
}

/// Runs every admission at once, each on its store (0 or 1), and counts the answers.
async fn race(
    stores: &Arc<[Store; 2]>,
    admissions: Vec<(usize, Admission)>,
) -> HashMap<String, usize> {
    let start = Arc::new(tokio::sync::Barrier::new(admissions.len()));
    let mut runs = Vec::new();
    for (side, admission) in admissions {
        let (stores, start) = (stores.clone(), start.clone());
        runs.push(tokio::spawn(async move {
            start.wait().await;
            stores[side].admit(&admission).await
        }));
    }
    let mut answers: HashMap<String, usize> = HashMap::new();
    for run in runs {
        let answer = run
            .await
            .unwrap()
            .expect("an admission is answered, not failed");
        *answers.entry(format!("{answer:?}")).or_default() += 1;
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admitters_racing_for_the_same_contacts_dial_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = crate::database::fresh_database(dir.path(), "race.db").await;
    let stores = Arc::new([
        Store::open(&url).await.expect("first store"),
        Store::open(&url).await.expect("second store"),
    ]);
    let store = &stores[0];
    let s = seed(store).await;

    // Each contact admitted by both stores at once: half of the pairs as queued calls, half as
    // calls placed at once.
    let (c, enrolled) = running_campaign(store, &s, 0, CONTACTS).await;
    let both = enrolled
        .iter()
        .enumerate()
        .flat_map(|(i, k)| (0..2).map(move |side| (side, i, k)))
        .map(|(side, i, k)| (side, admission(&s, c, k, 100_000, i % 2 == 0)))
        .collect();
    let answers = race(&stores, both).await;
    let admitted = format!("{:?}", AdmitResult::Admitted);
    let gone = format!("{:?}", AdmitResult::ContactGone);
    assert_eq!(answers.get(&admitted), Some(&CONTACTS), "{answers:?}");
    assert_eq!(answers.get(&gone), Some(&CONTACTS), "{answers:?}");

    // What the database holds: one attempt and one call per contact, each admission counted
    // once against the campaign.
    let calls = store
        .list_calls(
            s.ws,
            &CallFilter {
                campaign_id: Some(c),
                ..CallFilter::default()
            },
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
        .unwrap()
        .items;
    assert_eq!(calls.len(), CONTACTS);
    for contact in contacts_of(store, &s, c).await {
        assert_eq!(contact.attempts, 1, "{}", contact.phone_number);
        assert_eq!(contact.state.to_string(), "dialing");
        let mine = calls.iter().filter(|k| k.contact_id == Some(contact.id));
        assert_eq!(mine.count(), 1, "{}", contact.phone_number);
    }
    let record = store.campaign(s.ws, c).await.unwrap().unwrap();
    assert_eq!(record.daily_admitted_count, CONTACTS as i64);
    assert_eq!(record.reserved_cents, 50 * CONTACTS as i64);
    let stats = store.campaign_stats(s.ws, c).await.unwrap();
    assert_eq!(stats.contacts["dialing"], CONTACTS as i64);
    assert_eq!(stats.attempts, CONTACTS as i64);

    // Different contacts of one campaign, half on each store, under a daily cap of five: five
    // are admitted, however the two interleave.
    let (capped, enrolled) = running_campaign(store, &s, CONTACTS, 20).await;
    let halves = enrolled
        .iter()
        .enumerate()
        .map(|(i, k)| (i % 2, admission(&s, capped, k, 5, i % 4 < 2)))
        .collect();
    let answers = race(&stores, halves).await;
    assert_eq!(answers.get(&admitted), Some(&5), "{answers:?}");
    assert_eq!(
        answers.get(&format!("{:?}", AdmitResult::DailyCap)),
        Some(&15),
        "{answers:?}"
    );
    let record = store.campaign(s.ws, capped).await.unwrap().unwrap();
    assert_eq!(record.daily_admitted_count, 5);
}

/// The campaign's counts (read from what the triggers logged, then from what a fold added into
/// the counts) agree with its contacts and calls.
pub async fn counts_agree_before_and_after_a_fold(rig: &Rig, c: CampaignId, calls: &[CallRecord]) {
    let contacts = rig.contacts(c).await;
    let mut by_state: HashMap<String, i64> = HashMap::new();
    for contact in &contacts {
        *by_state.entry(contact.state.to_string()).or_default() += 1;
    }
    let look = || async {
        let stats = rig.store.campaign_stats(rig.ws, c).await.unwrap();
        let day = rig
            .store
            .campaign_timeline(rig.ws, c, 86_400)
            .await
            .unwrap();
        let minutes = rig.store.campaign_timeline(rig.ws, c, 60).await.unwrap();
        (stats, day, minutes)
    };
    let (stats, day, minutes) = look().await;
    let n = calls.len() as i64;
    assert_eq!(stats.total_contacts, contacts.len() as i64);
    assert_eq!(stats.attempts, n);
    for (state, count) in &by_state {
        assert_eq!(stats.contacts[state], *count, "{state}");
    }
    let sums = |t: &switchboard::store::Timeline| {
        (
            t.admitted.iter().map(|(_, n)| n).sum::<i64>(),
            t.ended.iter().map(|(_, _, n)| n).sum::<i64>(),
        )
    };
    assert_eq!(sums(&day), (n, n));
    assert_eq!(sums(&minutes), (n, n));
    assert_eq!(stats.call_outcomes.values().sum::<i64>(), n);

    assert!(
        rig.store.fold_counts().await.unwrap() > 0,
        "the logs held rows"
    );
    assert_eq!(
        rig.store.fold_counts().await.unwrap(),
        0,
        "a fold empties the logs"
    );
    let (folded, folded_day, folded_minutes) = look().await;
    assert_eq!(format!("{folded:?}"), format!("{stats:?}"));
    assert_eq!(format!("{folded_day:?}"), format!("{day:?}"));
    assert_eq!(format!("{folded_minutes:?}"), format!("{minutes:?}"));
}
