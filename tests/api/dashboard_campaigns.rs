//! A campaign's pages over HTTP: creating one, its settings judged by the PATCH rules (the
//! API's words beside the field, nothing saved), launch refused by the preflight and then
//! accepted, its progress against the simulated carrier, a CSV upload's report, its contacts
//! with why each is or is not dialled, the commands that follow its status, and another
//! workspace's ids.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::calls::sim_app;
use crate::campaigns::{agent, number};
use crate::dashboard::Session;
use crate::helpers::eventually;

/// Text as the page writes it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The rule of an API `InvalidField` error, as the page words it beside the field.
fn rule_words(api_error: &str) -> String {
    let rule = api_error
        .split_once("`: ")
        .map(|(_, r)| r)
        .unwrap_or(api_error);
    let mut words = rule.to_string();
    words[..1].make_ascii_uppercase();
    escaped(&words)
}

#[tokio::test]
async fn a_campaign_is_created_edited_launched_and_followed_from_its_page() {
    let app = sim_app("answered=1").await;
    let agent = agent(&app, Some(120)).await;
    let number = number(&app, "+972501230000", "active").await;
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let list = s.get("/app/campaigns").await;
    let csrf = list.hidden("csrf");

    // Creating: a blank name is refused beside the field; a name opens the new draft.
    let blank = s
        .post("/app/campaigns", &[("csrf", &csrf), ("name", "  ")])
        .await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST, "{}", blank.text);
    assert!(
        blank.text.contains("id=\"new-name-error\""),
        "{}",
        blank.text
    );
    let created = s
        .post("/app/campaigns", &[("csrf", &csrf), ("name", "Spring")])
        .await;
    assert_eq!(created.status, StatusCode::SEE_OTHER, "{}", created.text);
    let path = created.location().to_string();
    let id = path.rsplit('/').next().unwrap().to_string();
    let api = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(api.body["status"], "draft");
    let page = s.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    for text in ["Spring", "Not evaluated yet", "Save settings", ">Launch<"] {
        assert!(page.text.contains(text), "{text}: {}", page.text);
    }

    // Launch without an agent: the preflight's own message, and the campaign stays a draft.
    let refused = s.post(&format!("{path}/launch"), &[("csrf", &csrf)]).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let api_refusal = app.post_empty(&format!("/campaigns/{id}/launch")).await;
    let message = api_refusal.body["error"].as_str().unwrap();
    assert!(
        refused.text.contains(&escaped(message)),
        "{message}: {}",
        refused.text
    );
    assert_eq!(
        app.get(&format!("/campaigns/{id}")).await.body["status"],
        "draft"
    );

    // A value the PATCH rules refuse: the API's words beside the field, the value kept, and
    // nothing saved (not even the valid field sent with it).
    let bad = s
        .post(
            &format!("{path}/settings"),
            &[
                ("csrf", &csrf),
                ("name", "Spring sale"),
                ("max_attempts", "0"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    let api_bad = app
        .patch(&format!("/campaigns/{id}"), json!({"max_attempts": 0}))
        .await;
    let words = rule_words(api_bad.body["error"].as_str().unwrap());
    assert!(bad.text.contains(&words), "{words}: {}", bad.text);
    assert!(bad.text.contains("id=\"max_attempts-error\""));
    assert!(bad.text.contains("id=\"max_attempts\" name=\"max_attempts\" type=\"text\" inputmode=\"numeric\" value=\"0\""), "the value is kept");
    let unchanged = app.get(&format!("/campaigns/{id}")).await.body;
    assert_eq!(unchanged["name"], "Spring");
    assert_eq!(unchanged["max_attempts"], api.body["max_attempts"]);

    // Every field the rules refuse is named at once, each beside its own input.
    let three = s
        .post(
            &format!("{path}/settings"),
            &[
                ("csrf", &csrf),
                ("max_attempts", "0"),
                ("max_in_flight", "99"),
                ("starts_at", "tomorrow"),
            ],
        )
        .await;
    assert_eq!(three.status, StatusCode::BAD_REQUEST, "{}", three.text);
    assert!(
        three.text.contains("Not saved: 3 fields need a change."),
        "{}",
        three.text
    );
    for field in ["max_attempts", "max_in_flight", "starts_at"] {
        assert!(
            three.text.contains(&format!("id=\"{field}-error\"")),
            "{field}: {}",
            three.text
        );
        assert!(
            three.text.contains(&format!("href=\"#{field}\"")),
            "{field}"
        );
    }

    // A calling window that is not JSON is refused beside its field.
    let not_json = s
        .post(
            &format!("{path}/settings"),
            &[("csrf", &csrf), ("calling_window", "{nope")],
        )
        .await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert!(not_json.text.contains("id=\"calling_window-error\""));

    // Valid settings are saved through the same rules, and only what changed is sent.
    let window = r#"{"timezone": "UTC", "start": "00:00", "end": "24:00"}"#;
    let saved = s
        .post(
            &format!("{path}/settings"),
            &[
                ("csrf", &csrf),
                ("name", "Spring sale"),
                ("agent_id", &agent),
                ("from_phone_number_id", &number),
                ("max_attempts", "1"),
                ("max_in_flight", "2"),
                ("budget_cents", ""),
                ("calling_window", window),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    assert!(saved.text.contains("Saved: "), "{}", saved.text);
    let now = app.get(&format!("/campaigns/{id}")).await.body;
    assert_eq!(now["name"], "Spring sale");
    assert_eq!(now["agent_id"], agent.as_str());
    assert_eq!(now["max_attempts"], 1);
    assert_eq!(now["max_in_flight"], 2);
    assert_eq!(now["calling_window"]["timezone"], "UTC");
    assert!(saved.text.contains("updated"), "the audit event is listed");

    // A CSV upload: the report counts and lists the invalid rows by their row number.
    let csv = "phone_number,timezone,first_name\n+972501110001,,Dana\n+972501110002,,Eli\nnot-a-number,,X\n+972501110003,Mars/Base,Y\n+972501110001,,Dana\n";
    let forged = s
        .post_multipart(&format!("{path}/contacts"), &[("file", Some("c.csv"), csv)])
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.get(&format!("/campaigns/{id}")).await.body["stats"]["total_contacts"],
        0,
        "nothing is enrolled without the token"
    );
    let uploaded = s
        .post_multipart(
            &format!("{path}/contacts"),
            &[("csrf", None, &csrf), ("file", Some("c.csv"), csv)],
        )
        .await;
    assert_eq!(uploaded.status, StatusCode::OK, "{}", uploaded.text);
    let report = &uploaded.text;
    assert!(
        report.contains("<strong>2</strong> enrolled, <strong>1</strong> duplicates (already in the campaign, or earlier in the upload)"),
        "{report}"
    );
    assert!(report.contains("<strong>2</strong> invalid"), "{report}");
    assert!(
        report.contains("<td class=\"num\">3</td>"),
        "row 3 is listed"
    );
    assert!(report.contains("Mars/Base"), "{report}");

    // The contacts, each with why it is or is not dialled: a draft admits nobody.
    let contacts = s.get(&format!("{path}/contacts")).await;
    assert_eq!(contacts.status, StatusCode::OK);
    assert!(contacts.text.contains("+972501110002"));
    assert!(
        contacts
            .text
            .contains("The campaign is draft; nobody is admitted"),
        "{}",
        contacts.text
    );

    // Launched: the page follows it while it runs, and the simulated carrier's calls show.
    let launched = s.post(&format!("{path}/launch"), &[("csrf", &csrf)]).await;
    assert_eq!(launched.status, StatusCode::SEE_OTHER, "{}", launched.text);
    let done = eventually(
        Duration::from_secs(20),
        "both contacts are done and the campaign completed",
        || {
            let (app, id) = (&app, id.clone());
            async move {
                let c = app.get(&format!("/campaigns/{id}")).await.body;
                let k = &c["stats"]["contacts"];
                (k["retired"].as_i64()? + k["exhausted"].as_i64()? == 2
                    && c["status"] == "completed")
                    .then_some(c)
            }
        },
    )
    .await;
    let summary = s.get(&format!("{path}/summary")).await.text;
    let chart = s.get(&format!("{path}/chart")).await.text;
    assert!(chart.contains("data-chart="), "{chart}");
    assert!(chart.contains("&quot;admitted&quot;"), "{chart}");
    // Every attempt counted once as admitted, and once by its outcome.
    let data = chart
        .split("data-chart=\"")
        .nth(1)
        .and_then(|d| d.split('"').next());
    let data: Value = serde_json::from_str(&data.unwrap().replace("&quot;", "\"")).unwrap();
    let sum = |label: &str| -> i64 {
        data["series"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| (s["label"] == "admitted") == (label == "admitted"))
            .flat_map(|s| {
                s["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
            })
            .sum()
    };
    let attempts = done["stats"]["attempts"].as_i64().unwrap();
    assert_eq!(
        (sum("admitted"), sum("ended")),
        (attempts, attempts),
        "{chart}"
    );
    assert!(
        summary.contains(&format!(
            "<dt>Attempts</dt><dd>{}</dd>",
            done["stats"]["attempts"].as_i64().unwrap()
        )),
        "{summary}"
    );
    let exhausted = s.get(&format!("{path}/contacts?state=exhausted")).await;
    assert!(
        exhausted.text.contains("attempts were made"),
        "{}",
        exhausted.text
    );
    assert!(!exhausted.text.contains("not-a-number"));
    // Its calls, and only its calls, on the calls page filtered by it.
    let shown = s.get(&path).await.text;
    assert!(
        shown.contains(&format!("href=\"/app/calls?campaign={id}\"")),
        "{shown}"
    );
    let its_calls = s.get(&format!("/app/calls?campaign={id}")).await.text;
    let by_api = app
        .get(&format!("/calls?campaign_id={id}&limit=100"))
        .await
        .body;
    let ids: Vec<&str> = by_api["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids.len() as i64,
        done["stats"]["attempts"].as_i64().unwrap()
    );
    assert_eq!(
        its_calls.matches("href=\"/app/calls/").count(),
        ids.len(),
        "{its_calls}"
    );
    assert!(ids.iter().all(|c| its_calls.contains(c)));
    assert!(
        its_calls.contains("selected>Spring sale</option>"),
        "{its_calls}"
    );

    // Done: no command is left but the contacts, and the page says why.
    assert_eq!(done["status"], "completed");
    assert!(summary.contains("Every contact is done"), "{summary}");
    assert!(!summary.contains(">Pause<"));

    // Pausing, resuming and stopping through the page, on a campaign that keeps running (one
    // call an hour).
    let slow = app
        .post(
            "/campaigns",
            json!({"name": "Slow", "agent_id": agent, "from_phone_number_id": number,
                   "min_seconds_between_calls": 3600,
                   "calling_window": {"timezone": "UTC", "start": "00:00", "end": "24:00"}}),
        )
        .await;
    let slow_id = slow.body["id"].as_str().unwrap().to_string();
    let slow_path = format!("/app/campaigns/{slow_id}");
    app.post(
        &format!("/campaigns/{slow_id}/contacts"),
        json!({"contacts": [{"phone_number": "+972501110011"}, {"phone_number": "+972501110012"}]}),
    )
    .await;
    let launched = s
        .post(&format!("{slow_path}/launch"), &[("csrf", &csrf)])
        .await;
    assert_eq!(launched.status, StatusCode::SEE_OTHER, "{}", launched.text);
    let running = s.get(&slow_path).await;
    assert!(
        running.text.contains("hx-trigger=\"every 2s\""),
        "a running campaign's progress follows it"
    );
    assert!(running.text.contains(">Pause<") && running.text.contains(">Stop<"));
    let paused = s
        .post(&format!("{slow_path}/pause"), &[("csrf", &csrf)])
        .await;
    assert_eq!(paused.status, StatusCode::SEE_OTHER, "{}", paused.text);
    assert_eq!(
        app.get(&format!("/campaigns/{slow_id}")).await.body["status"],
        "paused"
    );
    let again = s
        .post(&format!("{slow_path}/pause"), &[("csrf", &csrf)])
        .await;
    assert!(again.text.contains("Already paused"), "{}", again.text);
    assert!(again.text.contains(">Resume<"), "{}", again.text);
    let waiting = s.get(&format!("{slow_path}/contacts")).await;
    assert!(
        waiting
            .text
            .contains("The campaign is paused; nobody is admitted"),
        "{}",
        waiting.text
    );
    let forged = s.post(&format!("{slow_path}/resume"), &[]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    let stopped = s
        .post(&format!("{slow_path}/stop"), &[("csrf", &csrf)])
        .await;
    assert_eq!(stopped.status, StatusCode::SEE_OTHER);
    let page = s.get(&slow_path).await;
    assert!(page.text.contains("cannot be edited"), "{}", page.text);
    assert!(!page.text.contains(">Resume<") && !page.text.contains(">Stop<"));

    // Another workspace's session sees none of it.
    let (_, other_key) = app.other_workspace().await;
    let mut other = Session::new(&app);
    other.sign_in(&other_key).await;
    let other_csrf = other.get("/app/campaigns").await.hidden("csrf");
    for page in [
        path.clone(),
        format!("{path}/summary"),
        format!("{path}/chart"),
        format!("{path}/contacts"),
    ] {
        assert_eq!(
            other.get(&page).await.status,
            StatusCode::NOT_FOUND,
            "{page}"
        );
    }
    let foreign = other
        .post(
            &format!("{path}/settings"),
            &[("csrf", &other_csrf), ("name", "Mine")],
        )
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    // Nor can it command the campaign or enroll into it.
    for command in ["launch", "pause", "resume", "stop"] {
        let refused = other
            .post(&format!("{path}/{command}"), &[("csrf", &other_csrf)])
            .await;
        assert_eq!(refused.status, StatusCode::NOT_FOUND, "{command}");
    }
    let upload = other
        .post_multipart(
            &format!("{path}/contacts"),
            &[
                ("csrf", None, &other_csrf),
                ("file", Some("c.csv"), "phone_number\n+972525550999\n"),
            ],
        )
        .await;
    assert_eq!(upload.status, StatusCode::NOT_FOUND, "{}", upload.text);
    assert_eq!(
        app.get(&format!("/campaigns/{id}")).await.body["name"],
        "Spring sale"
    );
}

#[tokio::test]
async fn the_settings_form_keeps_an_agent_beyond_the_choices_it_lists() {
    let app = sim_app("answered=1").await;
    // The form lists the first 100 agents; the campaign's is the 101st.
    for _ in 0..100 {
        agent(&app, Some(120)).await;
    }
    app.clock.advance(Duration::from_secs(1));
    let resp = app
        .post(
            "/agents",
            json!({"name": "Latest", "max_call_duration_secs": 60}),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text);
    let latest = resp.body["id"].as_str().unwrap().to_owned();
    let campaign = app
        .post("/campaigns", json!({"name": "Far", "agent_id": latest}))
        .await;
    assert_eq!(campaign.status, StatusCode::CREATED, "{}", campaign.text);
    let id = campaign.body["id"].as_str().unwrap();
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get(&format!("/app/campaigns/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text.contains(&format!(
            "<option value=\"{latest}\" selected>Latest</option>"
        )),
        "the campaign's agent is offered, chosen: {}",
        page.text
    );
    // Saved as a browser sends the form (every field, the agent as chosen): it stays.
    let csrf = page.hidden("csrf");
    let saved = s
        .post(
            &format!("/app/campaigns/{id}/settings"),
            &[("csrf", &csrf), ("name", "Far away"), ("agent_id", &latest)],
        )
        .await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    let stored = app.get(&format!("/campaigns/{id}")).await.body;
    assert_eq!(
        (stored["name"].as_str(), stored["agent_id"].as_str()),
        (Some("Far away"), Some(latest.as_str()))
    );
}
