//! Carrier accounts through the API and the operator's CLI: their trunks' rules, the write-only
//! password, tests of gateways, numbers on accounts, and the operator's switch. Past 600 lines
//! on purpose: one resource, whose trunk rules are checked from both doors.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard::domain::trunks::TrunkStatus;
use switchboard::store::TrunkLookup;

use crate::campaigns::number;
use crate::cli::switchboard;
use crate::helpers::{TestApp, spawn_app, spawn_app_with};

const PASSWORD: &str = "pw-Zq8-never-shown";

/// A trunk as a client sends it, with its password.
fn trunk_body() -> Value {
    json!({
        "gateways": [
            {"host": "sip.carrier.example", "port": 5060, "transport": "udp", "priority": 10},
            {"host": "192.0.2.10", "transport": "tls", "priority": 20}
        ],
        "username": "acct-1001",
        "password": PASSWORD,
        "from_domain": "carrier.example",
        "number_format": {"plus": false, "tech_prefix": "99#"},
        "headers": [{"name": "X-Account", "value": "1001"}],
        "calls_per_second": 5,
        "max_concurrent_calls": 30
    })
}

/// The stored password of an account's trunk, read as the dialer reads it.
async fn stored_password(app: &TestApp, id: &str) -> Option<String> {
    let id = id.parse().expect("uuid");
    match app
        .store
        .carrier_trunk(app.workspace_id, id)
        .await
        .expect("read")
    {
        TrunkLookup::Trunk(t) => t.trunk.password.map(|p| p.expose().to_owned()),
        other => panic!("no trunk: {other:?}"),
    }
}

/// Creates an account through the API; its id.
async fn create_account(app: &TestApp, body: Value) -> String {
    let r = app.post("/carrier-accounts", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.body["id"].as_str().expect("id").to_owned()
}

/// Records a test result as a test of the stored trunk would.
async fn record_test(app: &TestApp, id: &str, status: TrunkStatus, reason: Option<&str>) {
    let id = id.parse().expect("uuid");
    let TrunkLookup::Trunk(tested) = app
        .store
        .carrier_trunk(app.workspace_id, id)
        .await
        .expect("read")
    else {
        panic!("no trunk");
    };
    app.store
        .record_trunk_test(app.workspace_id, id, &tested, status, reason)
        .await
        .expect("recorded")
        .expect("trunk unchanged");
}

#[tokio::test]
async fn a_carrier_account_is_created_and_updated_with_a_trunk_whose_password_is_write_only() {
    let app = spawn_app().await;
    let r = app
        .post(
            "/carrier-accounts",
            json!({"name": " Main ", "provider": "telnyx", "trunk": trunk_body()}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert!(!r.text.contains(PASSWORD), "{}", r.text);
    let id = r.body["id"].as_str().expect("id").to_owned();
    assert_eq!(r.body["name"], "Main");
    assert_eq!(r.body["status"], "untested");
    assert!(r.body["status_reason"].is_null());
    assert!(r.body["tested_at"].is_null());
    assert!(r.body["updated_at"].is_string());
    let trunk = &r.body["trunk"];
    assert_eq!(trunk["has_password"], true);
    assert!(trunk.get("password").is_none(), "{trunk}");
    assert_eq!(trunk["username"], "acct-1001");
    assert_eq!(trunk["gateways"][1]["transport"], "tls");
    assert_eq!(trunk["gateways"][1]["port"], Value::Null);
    assert_eq!(
        trunk["number_format"],
        json!({"plus": false, "tech_prefix": "99#"})
    );
    assert_eq!(
        trunk["headers"],
        json!([{"name": "X-Account", "value": "1001"}])
    );
    assert_eq!(trunk["calls_per_second"], 5);
    assert_eq!(trunk["max_concurrent_calls"], 30);
    assert_eq!(stored_password(&app, &id).await.as_deref(), Some(PASSWORD));

    // No read shows the password: the account, the list, the status.
    for path in [
        format!("/carrier-accounts/{id}"),
        "/carrier-accounts".to_string(),
        "/carrier-accounts/status".to_string(),
    ] {
        let r = app.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert!(!r.text.contains(PASSWORD), "{path}: {}", r.text);
    }
    let list = app.get("/carrier-accounts").await;
    assert_eq!(list.body["data"][0]["trunk"]["has_password"], true);

    // A trunk update without a password keeps the stored one; any change makes the account
    // untested again.
    record_test(&app, &id, TrunkStatus::Active, None).await;
    assert_eq!(
        app.get(&format!("/carrier-accounts/{id}")).await.body["status"],
        "active"
    );
    let mut changed = trunk_body();
    changed.as_object_mut().expect("object").remove("password");
    changed["calls_per_second"] = json!(10);
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"trunk": changed}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "untested");
    assert!(r.body["tested_at"].is_null());
    assert_eq!(r.body["trunk"]["calls_per_second"], 10);
    assert_eq!(r.body["trunk"]["has_password"], true);
    assert_eq!(stored_password(&app, &id).await.as_deref(), Some(PASSWORD));

    // The same trunk again, or a new name, is no change of the trunk.
    record_test(
        &app,
        &id,
        TrunkStatus::Failing,
        Some("sip.carrier.example: timeout"),
    )
    .await;
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"name": "Renamed", "trunk": changed}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["name"], "Renamed");
    assert_eq!(r.body["status"], "failing");
    assert_eq!(r.body["status_reason"], "sip.carrier.example: timeout");
    assert!(r.body["tested_at"].is_string());

    // A new password is a change; null clears it.
    let mut with_password = changed.clone();
    with_password["password"] = json!("another-secret");
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"trunk": with_password}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["status"], "untested");
    assert!(!r.text.contains("another-secret"));
    assert_eq!(
        stored_password(&app, &id).await.as_deref(),
        Some("another-secret")
    );
    let mut cleared = changed.clone();
    cleared["password"] = Value::Null;
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"trunk": cleared}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["trunk"]["has_password"], false);
    assert_eq!(stored_password(&app, &id).await, None);

    // `trunk: null` removes the trunk.
    let r = app
        .patch(&format!("/carrier-accounts/{id}"), json!({"trunk": null}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.body["trunk"].is_null());
    assert_eq!(r.body["status"], "untested");

    // An account without a trunk.
    let r = app
        .post(
            "/carrier-accounts",
            json!({"name": "Bare", "provider": "twilio"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert!(r.body["trunk"].is_null());
}

#[tokio::test]
async fn invalid_trunks_and_fields_are_refused_naming_the_field() {
    let app = spawn_app().await;
    let create = |trunk: Value| json!({"name": "A", "provider": "p", "trunk": trunk});
    let cases = [
        (
            json!({"gateways": [{"host": "bad host"}]}),
            "trunk.gateways[0].host",
        ),
        (json!({"gateways": []}), "trunk.gateways"),
        (
            json!({"gateways": [{"host": "a.example", "port": 0}]}),
            "trunk.gateways[0].port",
        ),
        (
            json!({"gateways": [{"host": "a.example", "port": 70000}]}),
            "trunk.gateways[0].port",
        ),
        (
            json!({"gateways": [{"host": "a.example", "transport": "sctp"}]}),
            "trunk.gateways[0].transport",
        ),
        (
            json!({"gateways": [{"host": "a.example"}], "password": "x"}),
            "trunk.username",
        ),
        (
            json!({"gateways": [{"host": "a.example"}], "headers": [{"name": "Via", "value": "x"}]}),
            "trunk.headers[0].name",
        ),
        (
            json!({"gateways": [{"host": "a.example"}], "number_format": {"tech_prefix": "12a"}}),
            "trunk.number_format.tech_prefix",
        ),
        (
            json!({"gateways": [{"host": "a.example"}], "calls_per_second": 0}),
            "trunk.calls_per_second",
        ),
        (
            json!({"gateways": [{"host": "a.example"}], "username": "u", "password": 1234567}),
            "trunk.password",
        ),
    ];
    for (trunk, field) in cases {
        let r = app.post("/carrier-accounts", create(trunk.clone())).await;
        r.assert_invalid(field);
        assert_eq!(r.body["field"], field, "{trunk}: {}", r.text);
        assert!(!r.text.contains("1234567"), "{}", r.text);
    }
    // Unknown keys inside the trunk are refused, not ignored.
    let r = app
        .post(
            "/carrier-accounts",
            create(json!({"gateways": [{"host": "a.example"}], "pasword": "x"})),
        )
        .await;
    r.assert_invalid("pasword");
    let r = app
        .post("/carrier-accounts", json!({"name": "  ", "provider": "p"}))
        .await;
    r.assert_invalid("name");
    let r = app.post("/carrier-accounts", json!({"name": "A"})).await;
    r.assert_invalid("provider");
    let r = app
        .post(
            "/carrier-accounts",
            json!({"name": "A", "provider": "p", "status": "active"}),
        )
        .await;
    r.assert_invalid("status");

    // An update keeping the stored password on a trunk without a username breaks the rule.
    let id = create_account(
        &app,
        create(json!({"gateways": [{"host": "a.example"}], "username": "u", "password": "pw"})),
    )
    .await;
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"trunk": {"gateways": [{"host": "b.example"}]}}),
        )
        .await;
    r.assert_invalid("trunk.username");
    let r = app
        .patch(&format!("/carrier-accounts/{id}"), json!({}))
        .await;
    r.assert_invalid("Writable fields");
}

#[tokio::test]
async fn another_workspaces_carrier_account_reads_as_missing() {
    let app = spawn_app().await;
    let id = create_account(
        &app,
        json!({"name": "Mine", "provider": "p", "trunk": trunk_body()}),
    )
    .await;
    let (_, other) = app.other_workspace().await;
    for (method, path, body) in [
        (Method::GET, format!("/carrier-accounts/{id}"), None),
        (
            Method::PATCH,
            format!("/carrier-accounts/{id}"),
            Some(json!({"name": "Theirs"})),
        ),
        (Method::POST, format!("/carrier-accounts/{id}/test"), None),
        (Method::GET, format!("/carrier-accounts/{id}/numbers"), None),
    ] {
        let r = app.send(method.clone(), &path, Some(&other), body).await;
        assert_eq!(
            r.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            r.text
        );
        assert_eq!(r.error_code(), "CARRIER_ACCOUNT_NOT_FOUND");
    }
    let list = app
        .send(Method::GET, "/carrier-accounts", Some(&other), None)
        .await;
    assert_eq!(list.body["pagination"]["total"], 0);
    assert_eq!(
        app.get(&format!("/carrier-accounts/{id}")).await.body["name"],
        "Mine"
    );
}

#[tokio::test]
async fn testing_a_trunk_needs_a_trunk_and_a_running_sip_client() {
    let app = spawn_app().await;
    let bare = create_account(&app, json!({"name": "Bare", "provider": "p"})).await;
    let r = app
        .post_empty(&format!("/carrier-accounts/{bare}/test"))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.error_code(), "TRUNK_NOT_CONFIGURED");

    let id = create_account(
        &app,
        json!({"name": "Trunked", "provider": "p", "trunk": trunk_body()}),
    )
    .await;
    // This service runs no SIP client: nothing can be probed, and the status stays.
    let r = app
        .post_empty(&format!("/carrier-accounts/{id}/test"))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(r.error_code(), "SIP_NOT_RUNNING");
    assert_eq!(
        app.get(&format!("/carrier-accounts/{id}")).await.body["status"],
        "untested"
    );

    let missing = uuid::Uuid::now_v7();
    let r = app
        .post_empty(&format!("/carrier-accounts/{missing}/test"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "CARRIER_ACCOUNT_NOT_FOUND");

    let key = app.key_with_scopes("calls:read").await;
    let r = app
        .send(
            Method::POST,
            &format!("/carrier-accounts/{id}/test"),
            Some(&key),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.error_code(), "INSUFFICIENT_SCOPE");
}

#[tokio::test]
async fn a_numbers_outbound_sip_follows_its_carrier_accounts_trunk_status() {
    let app = spawn_app().await;
    let on = number(&app, "+972500000021", "active").await;
    let off = number(&app, "+972500000022", "active").await;
    let id = create_account(
        &app,
        json!({"name": "Main", "provider": "p", "trunk": trunk_body()}),
    )
    .await;
    assert!(
        app.store
            .assign_number_to_account(app.workspace_id, id.parse().unwrap(), on.parse().unwrap())
            .await
            .unwrap()
    );
    let outbound = |body: &Value| body["sip_outbound_configured"].clone();
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(outbound(&n.body), false, "{}", n.text);
    assert_eq!(
        n.body["carrier_account"],
        json!({"id": id, "name": "Main", "provider": "p", "status": "untested"})
    );

    record_test(&app, &id, TrunkStatus::Active, None).await;
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(outbound(&n.body), true, "{}", n.text);
    assert_eq!(n.body["carrier_account"]["status"], "active");
    let listed = app.get(&format!("/carrier-accounts/{id}/numbers")).await;
    assert_eq!(outbound(&listed.body["data"][0]), true, "{}", listed.text);

    // A changed trunk is untested: the number no longer counts as configured.
    let r = app
        .patch(
            &format!("/carrier-accounts/{id}"),
            json!({"trunk": {"gateways": [{"host": "sip2.carrier.example"}], "password": null}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(outbound(&n.body), false);
    record_test(&app, &id, TrunkStatus::Failing, Some("timeout")).await;
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(outbound(&n.body), false);
    assert_eq!(n.body["carrier_account"]["status"], "failing");

    // A number on no account: configured exactly when a default trunk serves it.
    let n = app.get(&format!("/phone-numbers/{off}")).await;
    assert_eq!(outbound(&n.body), false);
    assert!(n.body["carrier_account"].is_null());
    let default_trunk: switchboard_sip::trunk::Trunk =
        serde_json::from_value(json!({"gateways": [{"host": "127.0.0.1", "port": 5090}]})).unwrap();
    let with_default = app.store.clone().with_default_trunk(Some(&default_trunk));
    let off_id = off.parse().unwrap();
    let record = with_default
        .phone_number(app.workspace_id, off_id)
        .await
        .unwrap()
        .unwrap();
    assert!(record.sip_outbound_configured);
    let on_record = with_default
        .phone_number(app.workspace_id, on.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        !on_record.sip_outbound_configured,
        "an account's failing trunk wins"
    );
}

#[tokio::test]
async fn operators_manage_trunks_from_the_command_line_without_seeing_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "ops.db").await;
    let (ok, ws, out) = switchboard(&db, &["workspace", "create", "--name", "Acme", "--json"]);
    assert!(ok, "{out}");
    let ws = ws["id"].as_str().unwrap().to_owned();
    // `carrier-account <command> --workspace <ws> <args>`.
    let account = |command: &str, args: &[&str]| {
        let mut all = vec!["carrier-account", command, "--workspace", &ws];
        all.extend_from_slice(args);
        switchboard(&db, &all)
    };
    let file = dir.path().join("trunk.json");
    std::fs::write(&file, trunk_body().to_string()).unwrap();
    let file = format!("@{}", file.display());
    let (ok, created, out) = account(
        "create",
        &[
            "--name",
            "Main",
            "--provider",
            "telnyx",
            "--trunk",
            &file,
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert!(!out.contains(PASSWORD), "{out}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["trunk"]["has_password"], true);

    // An update without a password keeps it.
    let moved = r#"{"gateways": [{"host": "sip2.carrier.example"}], "username": "acct-1001"}"#;
    let (ok, updated, out) = account("update", &["--id", &id, "--trunk", moved, "--json"]);
    assert!(ok, "{out}");
    assert_eq!(updated["status"], "untested");
    let (ok, shown, out) = account("show", &["--id", &id, "--json"]);
    assert!(ok, "{out}");
    assert!(!out.contains(PASSWORD), "{out}");
    assert_eq!(shown["trunk"]["has_password"], true);
    assert_eq!(
        shown["trunk"]["gateways"][0]["host"],
        "sip2.carrier.example"
    );
    let (ok, _, text) = account("show", &["--id", &id]);
    assert!(ok, "{text}");
    assert!(
        text.contains("untested") && text.contains("a password"),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "{text}");

    // `password: null` clears it.
    let cleared = r#"{"gateways": [{"host": "sip2.carrier.example"}], "username": "acct-1001", "password": null}"#;
    let (ok, updated, out) = account(
        "update",
        &[
            "--id", &id, "--trunk", cleared, "--name", "Renamed", "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(updated["name"], "Renamed");
    assert_eq!(updated["trunk"]["has_password"], false);

    // Refusals name the field, or the account that is not there.
    let (ok, _, out) = account(
        "update",
        &[
            "--id",
            &id,
            "--trunk",
            r#"{"gateways": [{"host": "bad host"}]}"#,
        ],
    );
    assert!(!ok && out.contains("gateways[0].host"), "{out}");
    let other = uuid::Uuid::now_v7().to_string();
    let (ok, _, out) = account("show", &["--id", &other]);
    assert!(!ok && out.contains("no carrier account"), "{out}");
}

#[tokio::test]
async fn the_default_trunk_needs_the_sip_carrier_and_a_valid_trunk() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "serve.db").await;
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--http", "127.0.0.1:0", "--metrics-listen", "none"];
        args.extend_from_slice(extra);
        switchboard(&db, &args)
    };
    let trunk = r#"{"gateways": [{"host": "sip.carrier.example"}]}"#;
    let (ok, _, out) = serve(&["--outbound-trunk", trunk]);
    assert!(
        !ok && out.contains("--outbound-trunk needs --carrier sip"),
        "{out}"
    );
    let (ok, _, out) = serve(&[
        "--carrier",
        "sip",
        "--outbound-trunk",
        r#"{"gateways": [{"host": "sip.carrier.example", "port": 0}], "password": "hunter2hunter2"}"#,
    ]);
    assert!(
        !ok && out.contains("--outbound-trunk") && out.contains("gateways[0].port"),
        "{out}"
    );
    assert!(!out.contains("hunter2hunter2"), "{out}");
}

#[tokio::test]
async fn numbers_come_off_a_carrier_account_and_stop_being_used() {
    let app = spawn_app().await;
    let account = app
        .store
        .create_carrier_account(app.workspace_id, "Main trunk", "telnyx", None)
        .await
        .unwrap();
    let on = number(&app, "+972500000011", "active").await;
    let off = number(&app, "+972500000012", "active").await;
    assert!(
        app.store
            .assign_number_to_account(app.workspace_id, account.id, on.parse().unwrap())
            .await
            .unwrap()
    );

    let status = app.get("/carrier-accounts/status").await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.text);
    assert_eq!(
        status.body,
        json!({"enabled": true, "accounts": 1, "numbers": 1})
    );
    let list = app.get("/carrier-accounts").await;
    assert_eq!(list.body["data"][0]["name"], "Main trunk");
    assert_eq!(list.body["data"][0]["number_count"], 1);
    let id = account.id;
    let numbers = app.get(&format!("/carrier-accounts/{id}/numbers")).await;
    assert_eq!(numbers.body["pagination"]["total"], 1);
    assert_eq!(numbers.body["data"][0]["id"], on.as_str());
    assert_eq!(
        numbers.body["data"][0]["carrier_account"]["id"],
        id.to_string()
    );

    // A number not on this account, and an account not of this workspace.
    let r = app
        .delete(&format!("/carrier-accounts/{id}/numbers/{off}"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "NUMBER_NOT_FOUND");
    let stranger = uuid::Uuid::now_v7();
    let r = app
        .delete(&format!("/carrier-accounts/{stranger}/numbers/{on}"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "CARRIER_ACCOUNT_NOT_FOUND");

    let r = app
        .delete(&format!("/carrier-accounts/{id}/numbers/{on}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body, json!({"success": true, "id": on}));
    // The number is still the workspace's, but inactive and off the account.
    let n = app.get(&format!("/phone-numbers/{on}")).await;
    assert_eq!(n.status, StatusCode::OK, "{}", n.text);
    assert_eq!(n.body["is_active"], false);
    assert!(n.body["carrier_account"].is_null(), "{}", n.text);
    assert_eq!(
        app.get(&format!("/carrier-accounts/{id}/numbers"))
            .await
            .body["pagination"]["total"],
        0
    );

    // Without the scope: 403, as the spec says for these routes.
    let key = app.key_with_scopes("calls:read").await;
    let r = app
        .send(Method::GET, "/carrier-accounts", Some(&key), None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.error_code(), "INSUFFICIENT_SCOPE");
}

#[tokio::test]
async fn the_emergency_switch_closes_every_carrier_route() {
    let app = spawn_app_with(|c| c.carrier_accounts_enabled = false).await;
    let id = uuid::Uuid::now_v7();
    for (method, path) in [
        (Method::GET, "/carrier-accounts/status".to_string()),
        (Method::GET, "/carrier-accounts".to_string()),
        (Method::GET, format!("/carrier-accounts/{id}")),
        (Method::GET, format!("/carrier-accounts/{id}/numbers")),
        (
            Method::DELETE,
            format!("/carrier-accounts/{id}/numbers/{id}"),
        ),
        (Method::POST, "/carrier-accounts".to_string()),
        (Method::PATCH, format!("/carrier-accounts/{id}")),
        (Method::POST, format!("/carrier-accounts/{id}/test")),
    ] {
        let key = app.key.clone();
        let body = (method != Method::GET && method != Method::DELETE)
            .then(|| json!({"name": "A", "provider": "p"}));
        let r = app.send(method.clone(), &path, Some(&key), body).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {path}");
        assert_eq!(r.error_code(), "CARRIER_ACCOUNTS_NOT_ENABLED");
        assert_eq!(r.body["enabled"], false);
    }
}
