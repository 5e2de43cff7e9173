//! The dashboard in a real browser: Debian's headless Chromium driven over WebDriver
//! (chromedriver), each page checked with axe-core run in the page and saved as a screenshot
//! under `target/screenshots/`. `./scripts/test` installs Chromium, its driver and axe-core.

use std::time::Duration;

use serde_json::{Value, json};

use crate::call_detail::{app_mixed, direct_call};
use crate::calls::sim_app;
use crate::campaigns::{agent, number};
use crate::webdriver::{Browser, check};

#[tokio::test]
async fn an_operator_signs_in_reads_a_call_and_manages_keys_in_a_real_browser() {
    let app = app_mixed(None, "busy=1", |_| {}).await;
    let call = direct_call(&app, "+972525550302").await;
    let browser = Browser::start(1280).await;
    browser.go(&app.url("/app/campaigns")).await;
    browser.wait_url("/app/sign-in").await;
    check(&browser, "sign-in").await;
    browser.type_in("#key", "sb_wrong").await;
    browser.click("form.card button").await;
    browser.wait_text(".field-error", "not valid").await;
    check(&browser, "sign-in-error").await;
    browser.type_in("#key", &app.key).await;
    browser.click("form.card button").await;
    browser.wait_url("/app/campaigns").await;
    // The session cookie is HttpOnly: the page's script cannot read it.
    assert_eq!(browser.run("return document.cookie;").await, "");
    check(&browser, "campaigns").await;

    browser.go(&app.url("/app/calls")).await;
    check(&browser, "calls").await;
    browser.click(&format!("a[href='/app/calls/{call}']")).await;
    browser.wait_url(&call).await;
    browser.wait_text("dl.facts", "+972525550302").await;
    check(&browser, "call").await;

    browser.go(&app.url("/app/live")).await;
    browser.wait_text("main", "No calls under way").await;
    // The page's event stream is open (htmx's extension, under the CSP).
    let open = browser
        .run("return !!document.querySelector('[sse-connect]')['htmx-internal-data'];")
        .await;
    assert_eq!(open, true);
    check(&browser, "live").await;

    browser.go(&app.url("/app/settings/keys")).await;
    check(&browser, "keys").await;
    browser.type_in("#name", "browser").await;
    browser.click("input[value='calls:read']").await;
    browser.click("form.card button").await;
    let secret = browser.wait_text("code.secret", "sb_").await;
    assert!(secret.starts_with("sb_"), "{secret}");
    check(&browser, "key-created").await;
    browser.click("button[aria-label='Revoke browser']").await;
    browser.wait_text("table tbody", "revoked").await;
    let api = app
        .send(reqwest::Method::GET, "/calls", Some(&secret), None)
        .await;
    assert_eq!(api.status, reqwest::StatusCode::UNAUTHORIZED);

    // Readable at phone width too.
    browser.quit().await;
    let phone = Browser::start(390).await;
    phone.sign_in(&app, &app.key).await;
    phone.go(&app.url(&format!("/app/calls/{call}"))).await;
    let overflow = phone
        .run("return document.documentElement.scrollWidth > window.innerWidth;")
        .await;
    assert_eq!(overflow, false, "the call page fits a phone's width");
    check(&phone, "call-phone").await;
    phone.quit().await;
}

#[tokio::test]
async fn a_call_s_recording_plays_and_a_transcript_turn_seeks_it() {
    use crate::converse::{Live, call_slug, conversing_app_with};
    use crate::sip_calls::{ended_call, endpoint};
    use crate::vendor::{Reply, VendorServer};
    let vendor = VendorServer::start().await;
    vendor.transcript("I would like to book a table.", Duration::ZERO);
    vendor.reply(Reply::text(&["Of course."]));
    vendor.reply(Reply::text(&[
        "{\"summary\": \"The caller wanted a table.\", \"extracted\": {}}",
    ]));
    let s = conversing_app_with(&vendor, |_| {}).await;
    let (_, _, slug) = endpoint(&s.app, json!({"vad_stop_secs": 0.5}), json!({})).await;
    // The live page, open before the call, follows it without a reload.
    let browser = Browser::start(1280).await;
    browser.sign_in(&s.app, &s.app.key).await;
    browser.go(&s.app.url("/app/live")).await;
    browser.wait_text("main", "No calls under way").await;
    // The test reads the live page too, for when each of the agent's turns has been said.
    let live = Live::open(&s.app).await;
    let (ua, media) = call_slug(&s, &slug).await;
    browser.wait_text("main", "in_progress").await;
    live.agent_said("Hello, you have reached the front desk.")
        .await;
    ua.stream_tone(media, 75).await;
    browser.wait_text("main", "Agent: Of course.").await;
    check(&browser, "live-call").await;
    live.agent_said("Of course.").await;
    ua.bye().await;
    browser.wait_text("main", "No calls under way").await;
    let call = ended_call(&s.app, 1).await;
    let id = call["id"].as_str().unwrap().to_string();
    let detail = s.app.get(&format!("/calls/{id}")).await.body;
    assert!(detail["recording_url"].is_string(), "{detail}");
    let caller_ms = detail["transcript"][1]["start_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("a caller turn: {detail}"));
    assert!(caller_ms > 1000, "{detail}");

    browser.go(&s.app.url(&format!("/app/calls/{id}"))).await;
    browser
        .wait_text("main", "I would like to book a table.")
        .await;
    // The player's link is to this origin, whatever host the public URL names.
    let src = browser
        .run("return document.getElementById('player').getAttribute('src');")
        .await;
    assert!(
        src.as_str()
            .is_some_and(|s| s.starts_with("/calls/") && s.contains("/recording?sig=")),
        "{src}"
    );
    // The player loads the recording through its signed link and plays: its time moves.
    let played = browser
        .call(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": "const done = arguments[arguments.length - 1];
                const p = document.getElementById('player'); p.muted = true;
                p.play().then(() => setTimeout(() => done(p.currentTime), 1000)).catch(e => done('failed: ' + e));",
                "args": []})),
        )
        .await;
    assert!(
        played.as_f64().is_some_and(|t| t > 0.2),
        "the player's time: {played}"
    );
    // The caller's turn's button seeks the recording to the turn.
    browser
        .run("document.getElementById('player').pause(); return true;")
        .await;
    browser
        .click("ol.transcript li:nth-of-type(2) button.seek")
        .await;
    let at = browser
        .run("return document.getElementById('player').currentTime;")
        .await
        .as_f64()
        .unwrap();
    assert!(
        (at - caller_ms as f64 / 1000.0).abs() < 0.3,
        "seeked to {at} s; the turn starts at {caller_ms} ms"
    );
    check(&browser, "call-recording").await;
    browser.quit().await;
}

#[tokio::test]
async fn an_operator_creates_launches_and_watches_a_campaign_in_a_real_browser() {
    let app = sim_app("answered=2,no_answer=1").await;
    let agent = agent(&app, Some(120)).await;
    let number = number(&app, "+972501230000", "active").await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app, &app.key).await;
    browser.type_in("#new-name", "Browser spring").await;
    browser.click("form.inline button").await;
    browser.wait_text("h1", "Browser spring").await;
    let path = browser.url().await;
    check(&browser, "campaign-new").await;

    // Settings: a value the rules refuse is named beside its field, and the form keeps the rest.
    browser
        .click(&format!("#agent_id option[value='{agent}']"))
        .await;
    browser
        .click(&format!("#from_phone_number_id option[value='{number}']"))
        .await;
    browser
        .type_in(
            "#calling_window",
            r#"{"timezone": "UTC", "start": "00:00", "end": "24:00"}"#,
        )
        .await;
    browser.type_in("#budget_cents", "lots").await;
    browser
        .run("document.getElementById('max_attempts').value = '0'; return true;")
        .await;
    browser.click("form.settings button[type=submit]").await;
    browser
        .wait_text("#budget_cents-error", "positive integer")
        .await;
    // Both refusals at once, each beside its field.
    browser.wait_text("#max_attempts-error", "1").await;
    browser
        .wait_text("form.settings", "2 fields need a change")
        .await;
    check(&browser, "campaign-settings-error").await;
    browser
        .run("document.getElementById('budget_cents').value = ''; document.getElementById('max_in_flight').value = '3'; document.getElementById('max_attempts').value = '1'; return true;")
        .await;
    browser.click("form.settings button[type=submit]").await;
    browser.wait_text(".notice", "Saved").await;
    let id = path.rsplit('/').next().unwrap();
    let saved = app.get(&format!("/campaigns/{id}")).await;
    assert_eq!(saved.body["agent_id"], agent.as_str(), "{}", saved.text);
    assert_eq!(saved.body["max_in_flight"], 3);

    // Contacts from a CSV file, through the form (with its progress bar); the report lists the
    // invalid row.
    let csv = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        csv.path(),
        "phone_number,first_name\n+972501110001,Dana\n+972501110002,Eli\n+972501110003,Noa\nnope,X\n",
    )
    .unwrap();
    browser.go(&format!("{path}/contacts")).await;
    browser.type_in("#file", csv.path().to_str().unwrap()).await;
    browser.click("form.upload button").await;
    let report = browser.wait_text("#report", "enrolled").await;
    assert!(report.contains("3 enrolled"), "{report}");
    assert!(report.contains("1 invalid"), "{report}");
    browser.wait_text("#contacts tbody", "+972501110003").await;
    check(&browser, "campaign-upload").await;

    // Launched, the page follows the campaign without a reload until every contact is done.
    browser.go(&path).await;
    browser.click("form[action$='/launch'] button").await;
    browser.wait_text("#summary", "running").await;
    browser
        .run("document.body.dataset.loaded = 'once'; return true;")
        .await;
    browser
        .wait_text_within("#summary", "Every contact is done", Duration::from_secs(40))
        .await;
    assert_eq!(
        browser.run("return document.body.dataset.loaded;").await,
        "once",
        "the page was not reloaded"
    );
    let drawn = browser
        .run("return document.querySelectorAll('#timeline canvas').length;")
        .await;
    assert_eq!(drawn, 1, "the chart is drawn");
    check(&browser, "campaign-done").await;
    browser.go(&format!("{path}/contacts")).await;
    browser.wait_text("#contacts tbody", "+972501110003").await;
    check(&browser, "campaign-contacts").await;

    // A form without the session's CSRF token is refused, and changes nothing.
    browser.go(&app.url("/app/campaigns")).await;
    browser
        .run("document.querySelectorAll('form.inline input[name=csrf]').forEach(e => e.remove()); return true;")
        .await;
    browser.type_in("#new-name", "Forged").await;
    browser.click("form.inline button").await;
    browser.wait_text("main", "Form expired").await;
    let listed = app.get("/campaigns").await.body;
    assert_eq!(listed["data"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(saved_name(&app, id).await, "Browser spring");
    // Another workspace's campaign is not there.
    let (_, other_key) = app.other_workspace().await;
    let foreign = app
        .send(
            reqwest::Method::POST,
            "/campaigns",
            Some(&other_key),
            Some(json!({"name": "Theirs"})),
        )
        .await;
    let foreign = foreign.body["id"].as_str().unwrap().to_string();
    browser
        .go(&app.url(&format!("/app/campaigns/{foreign}")))
        .await;
    browser.wait_text("main", "There is nothing here").await;
    check(&browser, "not-found").await;
    browser.quit().await;

    // The campaign's page fits a phone's width.
    let phone = Browser::start(390).await;
    phone.sign_in(&app, &app.key).await;
    phone.go(&path).await;
    phone.wait_text("main", "Every contact is done").await;
    let overflow = phone
        .run("return document.documentElement.scrollWidth > window.innerWidth;")
        .await;
    assert_eq!(overflow, false, "the campaign page fits a phone's width");
    check(&phone, "campaign-phone").await;
    phone.quit().await;
}

async fn saved_name(app: &crate::helpers::TestApp, id: &str) -> String {
    app.get(&format!("/campaigns/{id}")).await.body["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn an_operator_connects_an_integration_through_the_oauth_stand_in_in_a_real_browser() {
    use crate::google::{ACCOUNT, GoogleStandIn};
    let google = GoogleStandIn::start().await;
    let app = crate::helpers::spawn_app_with(|c| google.serve(c)).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app, &app.key).await;
    browser.go(&app.url("/app/settings/integrations")).await;
    browser.wait_text("main", "No integrations yet.").await;
    check(&browser, "integrations").await;
    // To Google's consent page and back: the session cookie (SameSite=Strict) is not sent on
    // the way back from another site, and the handshake still finishes in this session.
    browser.click("form[action$='/connect'] button").await;
    let note = browser.wait_text(".notice", "Connected").await;
    assert_eq!(note, format!("Connected {ACCOUNT} (Google Calendar)."));
    assert!(
        browser
            .url()
            .await
            .contains("/app/settings/integrations?connected=")
    );
    browser.wait_text("table tbody", ACCOUNT).await;
    assert_eq!(google.codes(), (1, 0));
    check(&browser, "integrations-connected").await;

    browser.go(&app.url("/app/settings/webhooks")).await;
    browser.wait_text("main", "Signing secret").await;
    check(&browser, "webhooks").await;
    browser.click("form[action$='/reveal'] button").await;
    let secret = browser.wait_text("code.secret", "whsec_").await;
    assert_eq!(
        app.get("/webhook-signing-secret").await.body["secret"],
        secret.as_str()
    );
    browser.quit().await;
}

/// A flow whose nodes have editor positions, fanned out left to right, with long conditions.
fn placed_flow() -> Value {
    json!({"flow_config_version": 1, "nodes": [
        {"id": "start", "type": "start", "greeting": "Hello.", "is_literal": true, "next_step_id": "ask",
         "position": {"x": 0, "y": 0}},
        {"id": "ask", "type": "conversation", "instructions": "Find out what the caller wants.",
         "position": {"x": 260, "y": 160},
         "transitions": [
            {"next_step_id": "window_table", "condition": "the caller asks for a table by the window on a Saturday evening"},
            {"next_step_id": "hours", "when": {"variable": "caller.last_words", "contains": ["opening hours", "when are you open"]}}
         ]},
        {"id": "window_table", "type": "end", "greeting": "Booked.", "is_literal": true, "position": {"x": 40, "y": 420}},
        {"id": "hours", "type": "end", "greeting": "Noon to ten.", "is_literal": true, "position": {"x": 520, "y": 420}}
    ]})
}

#[tokio::test]
async fn agents_flows_and_the_workspace_pages_pass_axe_in_a_real_browser() {
    use crate::vendor::VendorServer;
    let vendor = VendorServer::start().await;
    let app = crate::helpers::spawn_app_with(|c| vendor.serve(c)).await;
    let calendar = crate::dashboard_agents::calendar_without_grant(&app).await;
    let router = app
        .post(
            "/agents",
            json!({"name": "Router", "type": "flow",
                   "flow_config": crate::flow_integrations::routing(&calendar.id.to_string())}),
        )
        .await;
    let router = router.body["id"].as_str().unwrap().to_string();
    agent(&app, Some(120)).await;
    app.post(
        "/sip-endpoints",
        json!({"name": "Front desk", "inbound_agent_id": router}),
    )
    .await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app, &app.key).await;
    browser.go(&app.url("/app/agents")).await;
    browser.wait_text("main", "Router").await;
    check(&browser, "agents").await;
    browser.go(&app.url(&format!("/app/agents/{router}"))).await;
    browser.wait_text("main", "The graph in words").await;
    check(&browser, "agent-flow").await;
    // A flow with positions is drawn where they put its nodes, its long labels whole.
    let placed = app
        .post(
            "/agents",
            json!({"name": "Placed", "type": "flow", "flow_config": placed_flow()}),
        )
        .await;
    let placed = placed.body["id"].as_str().unwrap().to_string();
    browser.go(&app.url(&format!("/app/agents/{placed}"))).await;
    browser.wait_text("main", "The graph in words").await;
    let label = browser.wait_text("svg", "by the window").await;
    assert!(!label.contains('…'), "{label}");
    browser
        .run("document.querySelector('figure.flow').scrollIntoView(); return true;")
        .await;
    check(&browser, "agent-flow-placed").await;
    browser.go(&app.url(&format!("/app/agents/{router}"))).await;
    browser.wait_text("main", "The graph in words").await;
    // The simulator from the page: its answer replaces the empty result without a reload.
    browser
        .run("document.getElementById('metadata').value = '{\"start\": \"x\", \"end\": \"y\"}'; return true;")
        .await;
    browser.click("form[action$='/simulate'] button").await;
    let result = browser
        .wait_text_within("#simulation", "Ended in", Duration::from_secs(20))
        .await;
    assert!(result.contains("start"), "{result}");
    check(&browser, "agent-simulation").await;
    for (path, name, text) in [
        ("/app/tools", "tools", "No tools yet."),
        ("/app/sip-endpoints", "sip-endpoints", "Front desk"),
        ("/app/numbers", "numbers", "No phone numbers yet."),
        (
            "/app/do-not-call",
            "do-not-call",
            "No do-not-call entries yet.",
        ),
        ("/app/dispositions", "dispositions", "Voicemail left"),
        ("/app/leads", "leads", "No leads yet."),
        ("/app/billing", "billing", "Balance"),
    ] {
        browser.go(&app.url(path)).await;
        browser.wait_text("main", text).await;
        check(&browser, name).await;
    }
    browser.quit().await;
}
