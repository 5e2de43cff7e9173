use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::campaigns::{agent, number};
use crate::helpers::spawn_app;

#[tokio::test]
async fn leads_are_created_filtered_updated_and_soft_deleted() {
    let app = spawn_app().await;
    let vip = app
        .post("/lead-tags", json!({"name": "VIP", "color": "#22C55E"}))
        .await;
    assert_eq!(vip.status, StatusCode::CREATED, "{}", vip.text);
    assert_eq!(vip.body["color"], "#22c55e");
    let vip_id = vip.body["id"].as_str().unwrap().to_string();
    let cold = app.post("/lead-tags", json!({"name": "cold"})).await;
    let cold_id = cold.body["id"].as_str().unwrap().to_string();
    assert_eq!(cold.body["color"], "#6b7280");
    // Names are unique ignoring case.
    let dup = app.post("/lead-tags", json!({"name": "vip"})).await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);

    // National form, normalized with the workspace's country (IL).
    let dana = app
        .post(
            "/leads",
            json!({"phone_number": "052-555-0101", "first_name": "Dana", "last_name": "Levi",
                   "email": "dana@example.com", "company": "Acme", "timezone": "Asia/Jerusalem",
                   "metadata": {"crm_id": 7}, "tag_ids": [vip_id]}),
        )
        .await;
    assert_eq!(dana.status, StatusCode::CREATED, "{}", dana.text);
    assert_eq!(dana.body["phone_number"], "+972525550101");
    assert_eq!(dana.body["tags"][0]["name"], "VIP");
    let dana_id = dana.body["id"].as_str().unwrap().to_string();
    let omer = app
        .post(
            "/leads",
            json!({"phone_number": "+972525550102", "first_name": "Omer"}),
        )
        .await;
    let omer_id = omer.body["id"].as_str().unwrap().to_string();
    assert_eq!(omer.body["tags"], json!([]));

    // The same number twice is a conflict.
    let again = app
        .post("/leads", json!({"phone_number": "+972 52-555-0101"}))
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    for (body, needle) in [
        (json!({"first_name": "x"}), "phone_number"),
        (json!({"phone_number": "12"}), "phone_number"),
        (
            json!({"phone_number": "+972525550109", "email": "nope"}),
            "email",
        ),
        (
            json!({"phone_number": "+972525550109", "timezone": "Mars/Base"}),
            "timezone",
        ),
        (
            json!({"phone_number": "+972525550109", "metadata": [1]}),
            "metadata",
        ),
        (
            json!({"phone_number": "+972525550109", "tag_ids": [uuid::Uuid::new_v4()]}),
            "tag_ids",
        ),
        (
            json!({"phone_number": "+972525550109", "status": "hot"}),
            "status",
        ),
    ] {
        let r = app.post("/leads", body).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{needle}: {}", r.text);
        assert!(r.text.contains(needle), "{needle}: {}", r.text);
    }

    let all = app.get("/leads").await;
    assert_eq!(all.body["pagination"]["total"], 2);
    assert_eq!(all.body["data"][0]["id"], omer_id.as_str(), "newest first");
    let tagged = app.get(&format!("/leads?tag_id={vip_id}")).await;
    assert_eq!(tagged.body["pagination"]["total"], 1);
    assert_eq!(tagged.body["data"][0]["id"], dana_id.as_str());
    let found = app.get("/leads?q=acm").await;
    assert_eq!(found.body["data"][0]["id"], dana_id.as_str());
    let by_phone = app.get("/leads?phone=0525550102").await;
    assert_eq!(by_phone.body["data"][0]["id"], omer_id.as_str());
    assert_eq!(
        app.get("/leads?q=100%25").await.body["pagination"]["total"],
        0
    );

    // Tag and untag.
    let t = app
        .post(
            &format!("/leads/{omer_id}/tags"),
            json!({"tag_ids": [cold_id, vip_id]}),
        )
        .await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.text);
    let names: Vec<&str> = t.body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["cold", "VIP"]);
    let u = app
        .delete(&format!("/leads/{omer_id}/tags/{cold_id}"))
        .await;
    assert_eq!(u.status, StatusCode::OK);
    assert_eq!(
        app.delete(&format!("/leads/{omer_id}/tags/{cold_id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // Update only what is sent.
    let p = app
        .patch(
            &format!("/leads/{dana_id}"),
            json!({"notes": "Call after 5", "email": null}),
        )
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.text);
    assert_eq!(p.body["notes"], "Call after 5");
    assert_eq!(p.body["email"], Value::Null);
    assert_eq!(p.body["first_name"], "Dana");
    let clash = app
        .patch(
            &format!("/leads/{dana_id}"),
            json!({"phone_number": "+972525550102"}),
        )
        .await;
    assert_eq!(clash.status, StatusCode::CONFLICT);

    // Deleting a tag takes it off the leads; deleting a lead hides it and frees its number.
    assert_eq!(
        app.delete(&format!("/lead-tags/{vip_id}")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.get(&format!("/leads/{dana_id}")).await.body["tags"],
        json!([])
    );
    let d = app.delete(&format!("/leads/{dana_id}")).await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.text);
    assert_eq!(d.body, json!({"success": true}));
    assert_eq!(
        app.get(&format!("/leads/{dana_id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get("/leads").await.body["pagination"]["total"], 1);
    assert_eq!(
        app.delete(&format!("/leads/{dana_id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let reused = app
        .post("/leads", json!({"phone_number": "+972525550101"}))
        .await;
    assert_eq!(reused.status, StatusCode::CREATED, "{}", reused.text);

    // Other workspaces see nothing; scopes are enforced.
    let (_, other) = app.other_workspace().await;
    let r = app
        .send(
            Method::GET,
            &format!("/leads/{omer_id}"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let reader = app.key_with_scopes("leads:read").await;
    let r = app
        .send(
            Method::POST,
            "/leads",
            Some(&reader),
            Some(json!({"phone_number": "+972525550199"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.error_code(), "INSUFFICIENT_SCOPE");
}

#[tokio::test]
async fn campaign_contacts_reference_leads_of_the_workspace_only() {
    let app = spawn_app().await;
    let agent_id = agent(&app, Some(300)).await;
    let from = number(&app, "+972500000001", "active").await;
    let campaign = app
        .post(
            "/campaigns",
            json!({"name": "Leads", "agent_id": agent_id, "from_phone_number_id": from}),
        )
        .await;
    assert_eq!(campaign.status, StatusCode::CREATED, "{}", campaign.text);
    let cid = campaign.body["id"].as_str().unwrap();
    let lead = app
        .post("/leads", json!({"phone_number": "+972525550111"}))
        .await;
    let lead_id = lead.body["id"].as_str().unwrap();
    let stranger = uuid::Uuid::new_v4();
    let r = app
        .post(
            &format!("/campaigns/{cid}/contacts"),
            json!({"contacts": [
                {"phone_number": "+972525550111", "lead_id": lead_id},
                {"phone_number": "+972525550112", "lead_id": stranger},
            ]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["enrolled"], 1);
    assert_eq!(r.body["invalid"][0]["row"], 2);
    assert!(
        r.body["invalid"][0]["error"]
            .as_str()
            .unwrap()
            .contains("not a lead")
    );
}
