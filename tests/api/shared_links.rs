use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::campaigns::agent;
use crate::helpers::spawn_app;

#[tokio::test]
async fn a_shared_link_opens_the_agents_page_until_it_is_revoked_or_expires() {
    let app = spawn_app().await;
    let agent_id = agent(&app, Some(300)).await;
    let r = app
        .patch(
            &format!("/agents/{agent_id}"),
            json!({"greeting_message": "Hi <b>there</b>", "description": "Books tables & answers questions"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let created = app
        .post("/shared-links", json!({"agent_id": agent_id}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let link = &created.body;
    assert_eq!(link["status"], "active");
    assert_eq!(link["is_revoked"], false);
    assert_eq!(link["agent_id"], agent_id.as_str());
    assert_eq!(link["company_id"], app.workspace_id.to_string());
    assert!(link["created_by"].is_string());
    let token = link["token"].as_str().unwrap();
    assert_eq!(token.len(), 32);
    let url = link["url"].as_str().unwrap().to_string();
    assert!(url.ends_with(&format!("/s/{token}")), "{url}");

    // The page needs no key and escapes what the agent says.
    let page = reqwest::get(&url).await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("Ava"));
    assert!(html.contains("Hi &lt;b&gt;there&lt;/b&gt;"), "{html}");
    assert!(html.contains("Books tables &amp; answers questions"));

    let id = link["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/shared-links/{id}")).await.body["token"],
        token
    );
    let list = app.get("/shared-links").await;
    assert_eq!(list.body["pagination"]["total"], 1);

    let revoked = app.post_empty(&format!("/shared-links/{id}/revoke")).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    assert_eq!(revoked.body["status"], "revoked");
    assert_eq!(revoked.body["is_revoked"], true);
    let gone = reqwest::get(&url).await.unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
    let unknown = reqwest::get(url.replace(token, &"a".repeat(32)))
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert_eq!(gone.text().await.unwrap(), unknown.text().await.unwrap());

    // An expired link answers 404 the same way.
    let soon = (app.store.now() + chrono::Duration::hours(1)).to_rfc3339();
    let short = app
        .post(
            "/shared-links",
            json!({"agent_id": agent_id, "expires_at": soon}),
        )
        .await;
    assert_eq!(short.status, StatusCode::CREATED, "{}", short.text);
    let short_url = short.body["url"].as_str().unwrap().to_string();
    app.clock.advance(std::time::Duration::from_secs(3601));
    assert_eq!(
        reqwest::get(&short_url).await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    let sid = short.body["id"].as_str().unwrap();
    assert_eq!(
        app.get(&format!("/shared-links/{sid}")).await.body["status"],
        "expired"
    );

    for (body, needle) in [
        (json!({}), "agent_id"),
        (json!({"agent_id": uuid::Uuid::new_v4()}), "agent_id"),
        (
            json!({"agent_id": agent_id, "expires_at": "2001-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (
            json!({"agent_id": agent_id, "expires_at": "2999-01-01T00:00:00Z"}),
            "expires_at",
        ),
        (json!({"agent_id": agent_id, "token": "mine"}), "token"),
    ] {
        let r = app.post("/shared-links", body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{needle}: {}", r.text);
        assert!(r.text.contains(needle), "{needle}: {}", r.text);
    }
    let (_, other) = app.other_workspace().await;
    let r = app
        .send(
            Method::GET,
            &format!("/shared-links/{id}"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}
