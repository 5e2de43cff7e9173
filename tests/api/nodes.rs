//! Nodes on one database: a call is written as the node's that carries it, a node that starts
//! ends as interrupted only its own live calls and those of nodes that are gone, and a
//! campaign's lease is held by one node at a time, its epoch raised at each new owner.

use std::sync::Arc;
use std::time::Duration;

use switchboard::store::{LEASE_HELD, NodeIdentity, Store};
use switchboard_actors::clock::AdjustableClock;

use crate::helpers::eventually;

#[tokio::test]
async fn a_starting_node_leaves_another_running_nodes_calls_and_ends_a_gone_nodes() {
    let app = crate::helpers::spawn_app_with(|c| {
        crate::calls::answering_for(c, "60");
        c.node.id = "node-a".into();
    })
    .await;
    let (id, _, _) = crate::calls::place_direct(&app, "+972525550101").await;
    let path = format!("/calls/{id}");
    eventually(Duration::from_secs(10), "the call is answered", || async {
        (app.get(&path).await.body["status"] == "in_progress").then_some(())
    })
    .await;
    let row = crate::database::text_row(
        &app.db_url,
        "SELECT node_id FROM calls WHERE id = $1",
        id.parse().unwrap(),
    )
    .await;
    assert_eq!(row[0].as_deref(), Some("node-a"));

    // A second node starts on the same database while the first runs: the call is not its.
    let b = Store::open(&app.db_url).await.unwrap().with_node("node-b");
    b.register_node(&NodeIdentity {
        id: "node-b".into(),
        advertise: "localhost".into(),
    })
    .await
    .unwrap();
    assert_eq!(b.interrupt_live_calls(b.now()).await.unwrap(), 0);
    assert_eq!(app.get(&path).await.body["status"], "in_progress");

    // Once the first node is gone, the next start ends its call as interrupted.
    app.store.node_stopped("node-a").await.unwrap();
    assert_eq!(b.interrupt_live_calls(b.now()).await.unwrap(), 1);
    let ended = app.get(&path).await.body;
    assert_eq!(ended["status"], "ended", "{ended}");
    assert_eq!(ended["end_reason"], "interrupted", "{ended}");
    b.close().await;
}

/// Two stores (two nodes) on one database and a campaign between them: one holds the lease
/// until it expires, the other then takes it with a higher epoch, and the first one's lease no
/// longer holds or renews; a released lease is taken at once; and of many nodes racing for a
/// free lease exactly one gets it.
#[tokio::test]
async fn a_campaign_lease_is_held_by_one_node_and_passes_on_with_a_higher_epoch() {
    let app = crate::helpers::spawn_app().await;
    let agent = crate::campaigns::agent(&app, Some(120)).await;
    let number = crate::campaigns::number(&app, "+972501230000", "active").await;
    let campaign = crate::calls::one_pass_campaign(&app, "Leased", &agent, &number).await;
    let campaign = switchboard_actors::ids::CampaignId::from_uuid(campaign.parse().unwrap());
    let clock_a = Arc::new(AdjustableClock::default());
    let clock_b = Arc::new(AdjustableClock::default());
    let a = Store::open_with_clock(&app.db_url, clock_a.clone())
        .await
        .unwrap();
    let b = Store::open_with_clock(&app.db_url, clock_b.clone())
        .await
        .unwrap();

    let first = a
        .take_lease(campaign, "a")
        .await
        .unwrap()
        .expect("a free lease");
    assert_eq!((first.owner.as_str(), first.epoch), ("a", 1));
    assert_eq!(b.take_lease(campaign, "b").await.unwrap(), None);
    let renewed = a.renew_lease(&first).await.unwrap().expect("renewed");
    assert_eq!(renewed.epoch, 1);
    assert!(renewed.expires_at >= first.expires_at);
    assert_eq!(a.take_lease(campaign, "a").await.unwrap().unwrap().epoch, 1);

    // Past its expiry, as b's clock sees it, b takes it over.
    clock_b.advance(LEASE_HELD + Duration::from_secs(1));
    let second = b.take_lease(campaign, "b").await.unwrap().expect("expired");
    assert_eq!((second.owner.as_str(), second.epoch), ("b", 2));
    assert!(!a.lease_holds(&first).await.unwrap());
    assert_eq!(a.renew_lease(&first).await.unwrap(), None);
    assert!(b.lease_holds(&second).await.unwrap());
    assert_eq!(a.take_lease(campaign, "a").await.unwrap(), None);
    let held = a.leases().await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].owner, "b");

    // Released, it is taken at once.
    assert!(b.release_lease(&second).await.unwrap());
    assert!(!a.release_lease(&first).await.unwrap());
    let third = a
        .take_lease(campaign, "a")
        .await
        .unwrap()
        .expect("released");
    assert_eq!(third.epoch, 3);
    // Taken back by its own owner once expired, it is a new epoch too: whatever wrote under
    // the old one is fenced off.
    clock_a.advance(LEASE_HELD * 3);
    let fourth = a.take_lease(campaign, "a").await.unwrap().expect("expired");
    assert_eq!((fourth.owner.as_str(), fourth.epoch), ("a", 4));
    assert!(!a.lease_holds(&third).await.unwrap());

    // Many takers at once for a free lease, on two stores that agree on the time: one wins.
    let other = crate::calls::one_pass_campaign(&app, "Raced", &agent, &number).await;
    let other = switchboard_actors::ids::CampaignId::from_uuid(other.parse().unwrap());
    let c = Store::open_with_clock(&app.db_url, clock_a.clone())
        .await
        .unwrap();
    let takers = (0..8).map(|i| {
        let store = if i % 2 == 0 { a.clone() } else { c.clone() };
        tokio::spawn(async move { store.take_lease(other, &format!("n{i}")).await })
    });
    let mut won = 0;
    for taker in takers {
        if taker.await.unwrap().unwrap().is_some() {
            won += 1;
        }
    }
    assert_eq!(won, 1);
    a.close().await;
    b.close().await;
    c.close().await;
}

/// On PostgreSQL a key's rate limit holds across nodes: requests to two nodes on one database
/// are counted together, and the one past the limit is refused on whichever node it reaches.
#[tokio::test]
async fn a_keys_rate_limit_is_counted_across_nodes() {
    if crate::database::postgres_server().is_none() {
        return;
    }
    let limited = |id: &'static str| {
        move |c: &mut switchboard::config::Config| {
            c.rate_limit_per_minute = 5;
            c.node.id = id.into();
        }
    };
    let a = crate::helpers::spawn_app_with(limited("node-a")).await;
    let clock = Arc::new(AdjustableClock::default());
    let store = Store::open_with_clock(&a.db_url, clock.clone())
        .await
        .unwrap();
    let b = crate::helpers::spawn_on(store, clock, a.db_url.clone(), limited("node-b")).await;
    // All in one minute's window.
    let second = chrono::Utc::now().timestamp() % 60;
    if second > 50 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
    let mut seen = Vec::new();
    for i in 0..7 {
        let node = if i % 2 == 0 { &a } else { &b };
        let resp = node
            .send(reqwest::Method::GET, "/agents", Some(&a.key), None)
            .await;
        seen.push((
            resp.status.as_u16(),
            resp.headers["x-ratelimit-remaining"]
                .to_str()
                .unwrap()
                .to_owned(),
        ));
    }
    let statuses: Vec<u16> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429], "{seen:?}");
    assert_eq!(seen[4].1, "0", "{seen:?}");
    assert_eq!(seen[0].1, "4", "{seen:?}");
}
