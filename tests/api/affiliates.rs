//! The affiliate program, fed by the operator command line and read over HTTP.

use chrono::{Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard::domain::auth::Scopes;
use switchboard::{Config, Store};

use crate::cli::switchboard;

#[tokio::test]
async fn partners_see_direct_and_override_earnings_with_a_hold_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "aff.db").await;
    let ws = |name: &str| {
        let (ok, v, out) = switchboard(&db, &["workspace", "create", "--name", name, "--json"]);
        assert!(ok, "{out}");
        v["id"].as_str().unwrap().to_string()
    };
    let (parent, sub, idle, customer_a, customer_b) =
        (ws("Parent"), ws("Sub"), ws("Idle"), ws("A"), ws("B"));
    let run = |args: &[&str]| {
        let (ok, _, out) = switchboard(&db, args);
        assert!(ok, "{args:?}: {out}");
    };
    run(&[
        "affiliate",
        "enroll",
        "--workspace",
        &parent,
        "--commission-bps",
        "2000",
        "--override-bps",
        "1000",
    ]);
    // Not enrolled: no parent by that id.
    let (ok, _, _) = switchboard(
        &db,
        &[
            "affiliate",
            "enroll",
            "--workspace",
            &sub,
            "--parent",
            &customer_a,
        ],
    );
    assert!(!ok);
    let days_ago = |d: i64| (Utc::now() - Duration::days(d)).to_rfc3339();
    // The parent referred the sub-affiliate (a customer too) 90 days ago; the sub enrolled 60
    // days ago; the sub referred customer A 80 days ago and B 10 days ago.
    run(&[
        "affiliate",
        "refer",
        "--referrer",
        &parent,
        "--customer",
        &sub,
        "--at",
        &days_ago(90),
    ]);
    run(&[
        "affiliate",
        "enroll",
        "--workspace",
        &sub,
        "--parent",
        &parent,
        "--commission-bps",
        "3000",
        "--at",
        &days_ago(60),
    ]);
    run(&[
        "affiliate",
        "enroll",
        "--workspace",
        &idle,
        "--parent",
        &parent,
    ]);
    let clock = std::sync::Arc::new(switchboard_actors::clock::AdjustableClock::default());
    let store = Store::open_with_clock(&db, clock.clone()).await.unwrap();
    run(&[
        "affiliate",
        "refer",
        "--referrer",
        &sub,
        "--customer",
        &customer_a,
        "--at",
        &days_ago(80),
    ]);
    run(&[
        "affiliate",
        "refer",
        "--referrer",
        &sub,
        "--customer",
        &customer_b,
        "--at",
        &days_ago(10),
    ]);
    // Revenue: A before the sub's enrollment (no override), A after, B recent (held), and the
    // sub's own spend (direct commission for the parent).
    for (customer, cents, when) in [
        (&customer_a, "10000", days_ago(70)),
        (&customer_a, "20000", days_ago(40)),
        (&customer_b, "5000", days_ago(5)),
        (&sub, "7000", days_ago(50)),
        (&customer_a, "999", days_ago(1)),
    ] {
        run(&[
            "affiliate",
            "revenue",
            "--customer",
            customer,
            "--amount-cents",
            cents,
            "--at",
            &when,
        ]);
    }

    let key_of = |ws: &str| {
        let store = store.clone();
        let ws = ws.parse().unwrap();
        async move {
            store
                .create_key(ws, "k", &Scopes::parse("affiliates:read").unwrap(), None)
                .await
                .unwrap()
                .1
        }
    };
    let app = crate::helpers::spawn_on(store.clone(), clock, db.clone(), |c: &mut Config| {
        c.affiliate_hold_days = 30
    })
    .await;
    let parent_key = key_of(&parent).await;
    let stats = app
        .send(Method::GET, "/affiliates/stats", Some(&parent_key), None)
        .await;
    assert_eq!(stats.status, StatusCode::OK, "{}", stats.text);
    let s = &stats.body["summary"];
    // Override 10% on A 20000 (after enrollment), B 5000, A 999 (held): 2000 + 500 + 99.
    assert_eq!(s["override_earned_cents"], 2599);
    assert_eq!(s["override_payable_cents"], 2000);
    // Direct 20% on the sub's own 7000.
    assert_eq!(s["direct_earned_cents"], 1400);
    assert_eq!(s["direct_payable_cents"], 1400);
    assert_eq!(s["sub_affiliates"], 2);
    assert_eq!(s["referred_customers"], 1);
    let rows = app
        .send(
            Method::GET,
            "/affiliates/sub-affiliates",
            Some(&parent_key),
            None,
        )
        .await;
    assert_eq!(rows.status, StatusCode::OK, "{}", rows.text);
    let data = rows.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "the idle partner is kept as a row of zeros");
    let row = |id: &str| data.iter().find(|r| r["company_id"] == id).unwrap().clone();
    let sub_row = row(&sub);
    assert_eq!(sub_row["my_override_cents"], 2599);
    assert_eq!(sub_row["my_override_payable_cents"], 2000);
    assert_eq!(sub_row["my_direct_cents"], 1400);
    assert_eq!(sub_row["referred_customers"], 2);
    let idle_row = row(&idle);
    for k in [
        "my_override_cents",
        "my_override_payable_cents",
        "my_direct_cents",
    ] {
        assert_eq!(idle_row[k], 0, "{k}");
    }
    let sum = |k: &str| data.iter().map(|r| r[k].as_i64().unwrap()).sum::<i64>();
    assert_eq!(json!(sum("my_override_cents")), s["override_earned_cents"]);
    assert!(sum("my_direct_cents") <= s["direct_earned_cents"].as_i64().unwrap());

    // The sub-affiliate's own view: its 30% on A and B.
    let sub_key = key_of(&sub).await;
    let mine = app
        .send(Method::GET, "/affiliates/stats", Some(&sub_key), None)
        .await;
    // 30% of A 10000 + 20000 + 999 and B 5000 (all after the referrals).
    assert_eq!(
        mine.body["summary"]["direct_earned_cents"],
        3000 + 6000 + 299 + 1500
    );
    assert_eq!(
        app.send(
            Method::GET,
            "/affiliates/sub-affiliates",
            Some(&sub_key),
            None
        )
        .await
        .body,
        json!({"data": []})
    );

    // A workspace outside the program: zeros, and an empty list.
    let outsider = key_of(&customer_a).await;
    let none = app
        .send(Method::GET, "/affiliates/stats", Some(&outsider), None)
        .await;
    assert_eq!(none.body["summary"]["enrolled"], false);
    assert_eq!(none.body["summary"]["direct_earned_cents"], 0);

    for path in [
        format!("/affiliates/sub-affiliates?company_id={sub}"),
        format!("/affiliates/stats?company_id={sub}"),
        "/affiliates/sub-affiliates?limit=5".to_string(),
    ] {
        let r = app.send(Method::GET, &path, Some(&parent_key), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(r.body["error"].is_string());
    }
    let _: Value = stats.body;
}
