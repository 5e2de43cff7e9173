//! The dashboard's calls page: its filters (status, direction, campaign, agent, days) agree with
//! the API's, a refused filter is said beside its field, and the pages of the list hold every
//! call exactly once.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::call_detail::app_mixed;
use crate::campaigns::number;
use crate::dashboard::Session;
use crate::helpers::{TestApp, eventually};

/// The calls a page lists, by the links of its rows.
fn listed(text: &str) -> Vec<String> {
    text.match_indices("href=\"/app/calls/")
        .map(|(at, m)| text[at + m.len()..at + m.len() + 36].to_owned())
        .collect()
}

/// The address of the page's "Older" link, if it has one.
fn older(text: &str) -> Option<String> {
    let end = text.find("\">Older</a>")?;
    let start = text[..end].rfind("href=\"")? + "href=\"".len();
    Some(text[start..end].replace("&amp;", "&"))
}

async fn agent(app: &TestApp, name: &str) -> String {
    let resp = app.post("/agents", json!({"name": name})).await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    resp.body["id"].as_str().unwrap().to_owned()
}

/// Places `n` direct calls by `agent` and waits until the workspace has `total` ended calls.
async fn place(app: &TestApp, agent: &str, from: &str, n: usize, total: i64) {
    for i in 0..n {
        let resp = app
            .post(
                "/calls",
                json!({"agent_id": agent, "to_number": format!("+9725255{:05}", total as usize * 100 + i),
                       "from_phone_number_id": from}),
            )
            .await;
        assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    }
    eventually(Duration::from_secs(30), "every call ended", || async {
        let ended = app.get("/calls?status=ended&limit=1").await;
        (ended.body["pagination"]["total"].as_i64() == Some(total)).then_some(())
    })
    .await;
}

/// Every call of the workspace through the API, newest first.
async fn through_api(app: &TestApp) -> Vec<Value> {
    let mut all = Vec::new();
    loop {
        let page = app
            .get(&format!("/calls?limit=100&offset={}", all.len()))
            .await;
        let items = page.body["data"].as_array().unwrap().clone();
        if items.is_empty() {
            return all;
        }
        all.extend(items);
    }
}

#[tokio::test]
async fn the_calls_page_filters_as_the_api_does_and_pages_through_every_call_once() {
    let app = app_mixed(None, "busy=1", |_| {}).await;
    let ava = agent(&app, "Ava").await;
    let bo = agent(&app, "Bo").await;
    let from = number(&app, "+972501239000", "active").await;
    place(&app, &ava, &from, 30, 30).await;
    app.clock.advance(Duration::from_secs(2 * 86_400));
    place(&app, &bo, &from, 25, 55).await;
    let calls = through_api(&app).await;
    assert_eq!(calls.len(), 55);
    let day = |c: &Value| c["created_at"].as_str().unwrap()[..10].to_owned();
    let first_day = day(calls.last().unwrap());
    let on_first_day: HashSet<String> = calls
        .iter()
        .filter(|c| day(c) == first_day)
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(on_first_day.len() >= 25, "the first batch's day");

    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;

    // Paged newest first, each call once, and the pages keep the filters.
    let first = s.get("/app/calls").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let mut seen = listed(&first.text);
    assert_eq!(seen.len(), 50);
    let newest: Vec<String> = calls[..50]
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(seen, newest, "newest first, as the API lists them");
    let next = older(&first.text).expect("an older page");
    let second = s.get(&next).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert!(second.text.contains(">Newest</a>"));
    assert_eq!(older(&second.text), None, "{}", second.text);
    seen.extend(listed(&second.text));
    let distinct: HashSet<&String> = seen.iter().collect();
    assert_eq!((seen.len(), distinct.len()), (55, 55));

    // By agent, with a page of its own.
    let bos = s.get(&format!("/app/calls?agent={bo}")).await;
    assert_eq!(listed(&bos.text).len(), 25);
    assert!(
        bos.text
            .contains(&format!("<option value=\"{bo}\" selected>Bo</option>"))
    );
    let avas = s.get(&format!("/app/calls?agent={ava}&status=ended")).await;
    let avas_listed = listed(&avas.text);
    assert_eq!(avas_listed.len(), 30);
    assert!(avas_listed.iter().all(|id| !listed(&bos.text).contains(id)));
    assert!(
        avas.text.contains(">Ava</td>"),
        "the agent's name in its column"
    );

    // By direction.
    let inbound = s.get("/app/calls?direction=inbound").await;
    assert_eq!(inbound.status, StatusCode::OK);
    assert!(listed(&inbound.text).is_empty());
    assert!(inbound.text.contains("No call matches these filters."));
    let outbound = s.get("/app/calls?direction=outbound").await;
    assert_eq!(listed(&outbound.text).len(), 50);
    let rest = s.get(&older(&outbound.text).expect("older")).await;
    assert!(
        rest.text.contains("selected>outbound</option>"),
        "the filter kept"
    );
    assert_eq!(listed(&rest.text).len(), 5);

    // By days (UTC, the last one included).
    let one_day = s
        .get(&format!("/app/calls?from={first_day}&to={first_day}"))
        .await;
    let shown: HashSet<String> = listed(&one_day.text).into_iter().collect();
    assert_eq!(shown, on_first_day);
    let since = s.get(&format!("/app/calls?from={}", day(&calls[0]))).await;
    assert!(!listed(&since.text).is_empty());
    assert!(
        listed(&since.text)
            .iter()
            .all(|id| !on_first_day.contains(id))
    );

    // A refused filter: said beside its field, and no calls.
    let bad_day = s.get("/app/calls?from=2026-13-01&agent=nobody").await;
    assert_eq!(bad_day.status, StatusCode::BAD_REQUEST);
    assert!(
        bad_day.text.contains("id=\"from-error\""),
        "{}",
        bad_day.text
    );
    assert!(bad_day.text.contains("Give a date as YYYY-MM-DD."));
    assert!(bad_day.text.contains("That is not an agent's id."));
    assert!(bad_day.text.contains("aria-invalid=\"true\""));
    assert!(listed(&bad_day.text).is_empty());
    let backwards = s
        .get("/app/calls?from=2026-11-20&to=2026-11-10&status=ended")
        .await;
    assert_eq!(backwards.status, StatusCode::BAD_REQUEST);
    assert!(
        backwards
            .text
            .contains("The last day cannot come before the first.")
    );
    assert_eq!(
        s.get("/app/calls?status=nonsense").await.status,
        StatusCode::BAD_REQUEST
    );

    // Another workspace: its filters find nothing here, and nothing of here is offered there.
    let (_, other_key) = app.other_workspace().await;
    let mut o = Session::new(&app);
    o.sign_in(&other_key).await;
    let theirs = o.get(&format!("/app/calls?agent={ava}")).await;
    assert_eq!(theirs.status, StatusCode::OK);
    assert!(listed(&theirs.text).is_empty());
    assert!(!theirs.text.contains(">Ava<"), "{}", theirs.text);
    assert!(
        !o.get("/app/calls")
            .await
            .text
            .contains(calls[0]["id"].as_str().unwrap())
    );
}
