//! The dashboard's agents and workspace pages over HTTP: the caller-ID opt-in, a flow's graph
//! with what would stop it saving marked at its node, the simulator run from the page, tools'
//! "send test", SIP endpoints (the slug shown once, then masked), and the read-only pages with
//! their scopes.

use reqwest::StatusCode;
use serde_json::json;
use switchboard::domain::secrets::Secrets;
use switchboard::runtime::integrations::connect;

use crate::campaigns::agent;
use crate::dashboard::Session;
use crate::flow_integrations::routing;
use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use crate::tools::{receiver, webhook};
use crate::vendor::VendorServer;

/// A calendar integration of the app's workspace, connected without a grant (enough for a
/// flow to name it).
pub(crate) async fn calendar_without_grant(app: &TestApp) -> switchboard::store::Integration {
    let secrets = Secrets::load_or_create(&app.dir().join("secrets.key")).unwrap();
    connect(
        &app.store,
        &secrets,
        app.workspace_id,
        "google_calendar",
        "desk@example.com",
        None,
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn agents_show_their_flow_and_its_issues_simulate_and_take_the_caller_id_opt_in() {
    let vendor = VendorServer::start().await;
    let app = spawn_app_with(|c| vendor.serve(c)).await;
    let calendar = calendar_without_grant(&app).await;
    let router = app
        .post(
            "/agents",
            json!({"name": "Router", "type": "flow", "flow_config": routing(&calendar.id.to_string())}),
        )
        .await;
    assert_eq!(router.status, StatusCode::CREATED, "{}", router.text);
    let router = router.body["id"].as_str().unwrap().to_string();
    let greeter = app
        .post(
            "/agents",
            json!({"name": "Greeter", "type": "flow", "flow_config": {"flow_config_version": 1, "nodes": [
                {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "done"},
                {"id": "done", "type": "end", "greeting": "Bye.", "is_literal": true}]}}),
        )
        .await;
    assert_eq!(greeter.status, StatusCode::CREATED, "{}", greeter.text);
    let greeter = greeter.body["id"].as_str().unwrap().to_string();
    let ava = agent(&app, Some(120)).await;

    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let list = s.get("/app/agents").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    for name in ["Router", "Greeter", "Ava", "Not trusted"] {
        assert!(list.text.contains(name), "{name}: {}", list.text);
    }
    let csrf = list.hidden("csrf");

    // The caller-ID opt-in: a write with the token, through the agent's own rules.
    let forged = s
        .post(
            &format!("/app/agents/{ava}/caller-id"),
            &[("trust", "true")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.get(&format!("/agents/{ava}")).await.body["lead_memory_trust_caller_id"],
        false
    );
    let trusted = s
        .post(
            &format!("/app/agents/{ava}/caller-id"),
            &[("csrf", &csrf), ("trust", "true")],
        )
        .await;
    assert_eq!(trusted.status, StatusCode::SEE_OTHER, "{}", trusted.text);
    assert_eq!(
        app.get(&format!("/agents/{ava}")).await.body["lead_memory_trust_caller_id"],
        true
    );
    let page = s.get(&format!("/app/agents/{ava}")).await;
    assert!(page.text.contains("Stop trusting"), "{}", page.text);
    assert!(page.text.contains("Prompt"));

    // A flow that holds together is drawn, with nothing marked.
    let page = s.get(&format!("/app/agents/{router}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("<svg"), "{}", page.text);
    assert!(page.text.contains("kind-integration_call"));
    assert!(page.text.contains("$.available = &quot;false&quot;"));
    assert!(!page.text.contains("would not save"));
    assert!(!page.text.contains("style="), "no inline style");
    // Its integration disconnected: the node that uses it is marked, with why.
    let gone = app.delete(&format!("/integrations/{}", calendar.id)).await;
    assert_eq!(gone.status, StatusCode::OK);
    let page = s.get(&format!("/app/agents/{router}")).await;
    assert!(page.text.contains("would not save"), "{}", page.text);
    assert!(page.text.contains("node kind-integration_call flawed"));

    // The simulator, from the page's form (as htmx sends it).
    let refused = s
        .post(
            &format!("/app/agents/{greeter}/simulate"),
            &[("turns", "Hello.")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let ran = s
        .post(
            &format!("/app/agents/{greeter}/simulate"),
            &[
                ("csrf", &csrf),
                ("turns", "Hello.\nAnyone there?"),
                ("metadata", "{}"),
                ("dry_run", "true"),
            ],
        )
        .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.text);
    assert!(
        ran.text.contains("Ended in <strong>done</strong>"),
        "{}",
        ran.text
    );
    assert!(ran.text.contains("Bye."));
    let bad = s
        .post(
            &format!("/app/agents/{greeter}/simulate"),
            &[("csrf", &csrf), ("turns", "Hi."), ("metadata", "[1]")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.text.contains("metadata"), "{}", bad.text);

    // Another workspace sees none of them.
    let (_, other_key) = app.other_workspace().await;
    let mut other = Session::new(&app);
    other.sign_in(&other_key).await;
    let other_csrf = other.get("/app/agents").await.hidden("csrf");
    assert!(!other.get("/app/agents").await.text.contains("Router"));
    assert_eq!(
        other.get(&format!("/app/agents/{router}")).await.status,
        StatusCode::NOT_FOUND
    );
    let foreign = other
        .post(
            &format!("/app/agents/{ava}/caller-id"),
            &[("csrf", &other_csrf), ("trust", "false")],
        )
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&format!("/agents/{ava}")).await.body["lead_memory_trust_caller_id"],
        true
    );
}

#[tokio::test]
async fn tools_are_tested_and_sip_slugs_are_shown_once_from_the_workspace_pages() {
    let app = spawn_app_with(|c| c.egress_allow = vec!["127.0.0.0/8".parse().unwrap()]).await;
    let (addr, log) = receiver().await;
    let tool = app
        .post("/tools", webhook(&format!("http://{addr}/orders")))
        .await;
    assert_eq!(tool.status, StatusCode::CREATED, "{}", tool.text);
    let tool = tool.body["id"].as_str().unwrap().to_string();
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get("/app/tools").await;
    assert!(page.text.contains("lookUpOrder"), "{}", page.text);
    let csrf = page.hidden("csrf");
    assert_eq!(
        s.post(&format!("/app/tools/{tool}/test"), &[]).await.status,
        StatusCode::FORBIDDEN
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing sent without the token"
    );
    let tested = s
        .post(&format!("/app/tools/{tool}/test"), &[("csrf", &csrf)])
        .await;
    assert_eq!(tested.status, StatusCode::OK, "{}", tested.text);
    assert!(
        tested.text.contains("the webhook answered 200"),
        "{}",
        tested.text
    );
    assert_eq!(log.lock().unwrap().len(), 1, "one delivery");

    // A SIP endpoint created here shows its address once; the list masks the slug.
    let created = s
        .post(
            "/app/sip-endpoints",
            &[("csrf", &csrf), ("name", "Front desk")],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let api = app.get("/sip-endpoints").await.body;
    let slug = api["data"][0]["slug"].as_str().unwrap().to_string();
    assert!(created.text.contains(&slug), "shown once: {}", created.text);
    let later = s.get("/app/sip-endpoints").await;
    assert!(!later.text.contains(&slug), "masked after");
    assert!(later.text.contains(&slug[slug.len() - 4..]));
    let blank = s
        .post("/app/sip-endpoints", &[("csrf", &csrf), ("name", " ")])
        .await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST, "{}", blank.text);
    // Said beside the name, in the API's words.
    assert!(
        blank
            .text
            .contains("aria-invalid=\"true\" aria-describedby=\"name-error\""),
        "{}",
        blank.text
    );
    assert!(
        blank
            .text
            .contains("<p class=\"field-error\" id=\"name-error\">"),
        "{}",
        blank.text
    );

    for page in [
        "/app/numbers",
        "/app/do-not-call",
        "/app/dispositions",
        "/app/leads",
        "/app/billing",
    ] {
        let r = s.get(page).await;
        assert_eq!(r.status, StatusCode::OK, "{page}: {}", r.text);
    }
    assert!(
        s.get("/app/dispositions")
            .await
            .text
            .contains("Voicemail left")
    );

    // A narrow key is told which scope each page needs.
    let narrow = app.key_with_scopes("calls:read").await;
    let mut n = Session::new(&app);
    n.sign_in(&narrow).await;
    for (page, scope) in [
        ("/app/tools", "tools:read"),
        ("/app/sip-endpoints", "phone_numbers:search"),
        ("/app/billing", "billing:read"),
        ("/app/agents", "agents:read"),
    ] {
        let r = n.get(page).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{page}");
        assert!(r.text.contains(scope), "{page}: {}", r.text);
    }
}

#[tokio::test]
async fn a_flow_s_page_names_the_steps_that_need_a_model_when_none_is_configured() {
    let app = spawn_app().await;
    let created = app
        .post(
            "/agents",
            json!({"name": "Helper", "type": "flow", "flow_config": {"flow_config_version": 1, "nodes": [
                {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "help"},
                {"id": "help", "type": "conversation", "instructions": "Help the caller.",
                 "transitions": [{"next_step_id": "done", "when": {"variable": "caller.last_words", "contains": "bye"}}]},
                {"id": "done", "type": "end", "greeting": "Bye.", "is_literal": true}]}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["warnings"][0]["node_id"], "help");
    let helper = created.body["id"].as_str().unwrap().to_string();
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get(&format!("/app/agents/{helper}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(
        page.text
            .contains("These steps need a chat model, and none is configured"),
        "{}",
        page.text
    );
    assert!(page.text.contains("<strong>help</strong>"), "{}", page.text);
    // A flow of literal lines needs none: nothing is said.
    app.patch(
        &format!("/agents/{helper}"),
        json!({"flow_config": {"flow_config_version": 1, "nodes": [
            {"id": "start", "type": "start", "greeting": "Hi.", "is_literal": true, "next_step_id": "done"},
            {"id": "done", "type": "end", "greeting": "Bye.", "is_literal": true}]}}),
    )
    .await;
    let page = s.get(&format!("/app/agents/{helper}")).await;
    assert!(!page.text.contains("need a chat model"), "{}", page.text);
}
