//! The dashboard's settings over HTTP: connecting an integration through the OAuth handshake
//! (authorization code, PKCE, a state bound to the session) against the Google stand-in, its
//! refusals, disconnecting; and the webhook signing secret, masked, revealed and rotated.

use reqwest::StatusCode;

use crate::dashboard::Session;
use crate::google::{ACCOUNT, GoogleStandIn};
use crate::helpers::{TestApp, spawn_app_with};

/// Follows the handshake from the connect button to the consent page's answer: the callback
/// page's address and the authorize URL's query.
async fn consent(
    app: &TestApp,
    s: &mut Session,
    csrf: &str,
    provider: &str,
) -> (String, std::collections::HashMap<String, String>) {
    let started = s
        .post(
            "/app/settings/integrations/connect",
            &[("csrf", csrf), ("provider", provider)],
        )
        .await;
    assert_eq!(started.status, StatusCode::SEE_OTHER, "{}", started.text);
    let authorize = started.location().to_string();
    let query: std::collections::HashMap<String, String> = url::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    // The browser at Google: no cookie of ours goes there.
    let answer = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&authorize)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::FOUND);
    let back = answer.headers()["location"].to_str().unwrap().to_string();
    assert!(
        back.starts_with(&app.url("/app/settings/integrations/callback")),
        "{back}"
    );
    (back, query)
}

/// The callback page, reached from Google's site (no session cookie), hands the answer on.
async fn hand_on(back: &str) -> String {
    let page = reqwest::get(back).await.unwrap().text().await.unwrap();
    let marker = "content=\"0; url=";
    let start = page.find(marker).unwrap_or_else(|| panic!("{page}")) + marker.len();
    page[start..]
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&")
}

#[tokio::test]
async fn an_account_is_connected_through_the_oauth_handshake_and_only_by_its_own_session() {
    let google = GoogleStandIn::start().await;
    let app = spawn_app_with(|c| google.serve(c)).await;
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get("/app/settings/integrations").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("No integrations yet."));
    let csrf = page.hidden("csrf");

    // Without the token nothing starts.
    let forged = s
        .post(
            "/app/settings/integrations/connect",
            &[("provider", "google_calendar")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);

    let (back, query) = consent(&app, &mut s, &csrf, "google_calendar").await;
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["access_type"], "offline");
    assert!(query["scope"].contains("auth/calendar"), "{query:?}");
    assert_eq!(
        query["redirect_uri"],
        app.url("/app/settings/integrations/callback")
    );
    let finish = hand_on(&back).await;
    assert!(finish.starts_with("/app/settings/integrations/finish?"));

    // Another session of the same workspace cannot finish it (and spends it).
    let mut other = Session::new(&app);
    other.sign_in(&app.key).await;
    let stolen = other.get(&finish).await;
    assert_eq!(stolen.status, StatusCode::BAD_REQUEST, "{}", stolen.text);
    assert!(stolen.text.contains("does not belong"), "{}", stolen.text);
    assert_eq!(s.get(&finish).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(google.codes(), (0, 0), "no code was redeemed");

    // Its own session finishes it: the code and the verifier redeemed, the account asked.
    let (back, _) = consent(&app, &mut s, &csrf, "google_calendar").await;
    let finish = hand_on(&back).await;
    let done = s.get(&finish).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    let done = s.get(done.location()).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert!(
        done.text
            .contains(&format!("Connected {ACCOUNT} (Google Calendar).")),
        "{}",
        done.text
    );
    assert_eq!(google.codes(), (1, 0), "the verifier matched the challenge");
    let listed = app.get("/integrations").await.body;
    let integration = &listed["data"][0];
    assert_eq!(integration["provider"], "google_calendar");
    assert_eq!(integration["account"], ACCOUNT);
    assert_eq!(integration["status"], "connected");
    // A state answers once.
    let replay = s.get(&finish).await;
    assert_eq!(replay.status, StatusCode::BAD_REQUEST);
    // A state this service never handed out.
    let made_up = s
        .get("/app/settings/integrations/finish?code=code-9&state=made-up")
        .await;
    assert_eq!(made_up.status, StatusCode::BAD_REQUEST);

    // The grant is kept sealed (as one connected from the command line), never shown.
    let id = integration["id"].as_str().unwrap();
    let (_, _, sealed) = app
        .store
        .integration_for_run(switchboard_actors::ids::IntegrationId::from_uuid(
            id.parse().unwrap(),
        ))
        .await
        .unwrap()
        .unwrap();
    let sealed = sealed.expect("a sealed grant");
    assert!(!sealed.contains(crate::google::REFRESH_TOKEN));
    let page = s.get("/app/settings/integrations").await;
    assert!(page.text.contains(ACCOUNT));
    assert!(!page.text.contains(crate::google::REFRESH_TOKEN));
    assert!(!page.text.contains(crate::google::CLIENT_SECRET));

    // Refused at Google: nothing connected, and the page says why.
    google.consent_error(Some("access_denied"));
    let (back, _) = consent(&app, &mut s, &csrf, "gmail").await;
    let denied = s.get(&hand_on(&back).await).await;
    assert_eq!(denied.status, StatusCode::BAD_REQUEST);
    assert!(denied.text.contains("access_denied"), "{}", denied.text);
    assert_eq!(
        app.get("/integrations").await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Disconnecting from the page.
    let gone = s
        .post(
            &format!("/app/settings/integrations/{id}/disconnect"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text);
    assert!(gone.text.contains(&format!("Disconnected {ACCOUNT}.")));
    assert_eq!(
        app.get("/integrations").await.body["data"][0]["status"],
        "disconnected"
    );

    // Another workspace cannot disconnect it, and sees none of it.
    let (_, other_key) = app.other_workspace().await;
    let mut foreign = Session::new(&app);
    foreign.sign_in(&other_key).await;
    let foreign_page = foreign.get("/app/settings/integrations").await;
    assert!(!foreign_page.text.contains(ACCOUNT));
    let foreign_csrf = foreign_page.hidden("csrf");
    let refused = foreign
        .post(
            &format!("/app/settings/integrations/{id}/disconnect"),
            &[("csrf", &foreign_csrf)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_webhook_signing_secret_is_masked_revealed_and_rotated_by_writes() {
    let app = spawn_app_with(|_| {}).await;
    let secret = app.get("/webhook-signing-secret").await.body["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let mut s = Session::new(&app);
    s.sign_in(&app.key).await;
    let page = s.get("/app/settings/webhooks").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(!page.text.contains(&secret), "masked");
    assert!(page.text.contains(&secret[secret.len() - 4..]));
    let csrf = page.hidden("csrf");
    assert_eq!(
        s.post("/app/settings/webhooks/reveal", &[]).await.status,
        StatusCode::FORBIDDEN
    );
    let revealed = s
        .post("/app/settings/webhooks/reveal", &[("csrf", &csrf)])
        .await;
    assert!(revealed.text.contains(&secret), "{}", revealed.text);
    assert_eq!(
        s.post("/app/settings/webhooks/rotate", &[]).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get("/webhook-signing-secret").await.body["secret"],
        secret.as_str(),
        "a refused rotation changes nothing"
    );
    let rotated = s
        .post("/app/settings/webhooks/rotate", &[("csrf", &csrf)])
        .await;
    let now = app.get("/webhook-signing-secret").await.body["secret"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(now, secret);
    assert!(rotated.text.contains(&now), "the new secret is shown");

    // A key without webhooks:manage is told which scope the page needs.
    let narrow = app.key_with_scopes("calls:read").await;
    let mut n = Session::new(&app);
    n.sign_in(&narrow).await;
    let refused = n.get("/app/settings/webhooks").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.text.contains("webhooks:manage"));
}
