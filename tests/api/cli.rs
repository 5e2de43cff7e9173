//! The operator command line, run as a real process against a real database file.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::eventually;

pub fn switchboard(db: &str, args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("--database-url")
        .arg(db)
        .args(args)
        .output()
        .expect("switchboard runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (
        out.status.success(),
        json,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

#[test]
fn a_database_url_of_another_kind_or_a_server_that_is_down_is_refused_plainly_and_its_password_never_shown()
 {
    let dir = tempfile::tempdir().unwrap();
    // Port 1 of loopback: nothing listens there.
    for (url, says) in [
        (
            "postgres://switchboard:hunter2-secret@127.0.0.1:1/switchboard",
            "127.0.0.1:1 does not answer",
        ),
        (
            "postgresql://switchboard:hunter2-secret@127.0.0.1:1/db?connect_timeout=2",
            "127.0.0.1:1 does not answer",
        ),
        (
            "mysql://root:hunter2-secret@localhost/db",
            "a `mysql://` database",
        ),
        (
            "hunter2-secret@host with spaces://x",
            "names a database, which",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .current_dir(dir.path())
            .args([
                "--database-url",
                url,
                "workspace",
                "create",
                "--name",
                "Acme",
            ])
            .output()
            .expect("switchboard runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert!(
            err.contains("sqlite://PATH") || url.starts_with("postgres"),
            "{url}: {err}"
        );
        assert!(!err.contains("hunter2"), "{url}: {err}");
        assert!(
            !err.contains("unable to open database file"),
            "{url}: {err}"
        );
    }
    // Nothing was created where a file would have been.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn migrate_brings_a_database_to_this_version_and_one_made_by_another_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "migrate.db").await;
    let (ok, _, out) = switchboard(&db, &["migrate"]);
    assert!(ok, "{out}");
    assert!(out.contains("database is at schema version"), "{out}");
    // Run again, it finds nothing to do.
    let (ok, _, again) = switchboard(&db, &["migrate"]);
    assert!(ok, "{again}");
    assert_eq!(again, out);
    // A migration this version does not have: the database was made by another one.
    let bytes = if db.starts_with("postgres") {
        "'\\x00'"
    } else {
        "X'00'"
    };
    crate::database::execute(
        &db,
        &format!(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'later', TRUE, {bytes}, 1)"
        ),
    )
    .await;
    for command in [&["migrate"][..], &["workspace", "create", "--name", "Acme"]] {
        let (ok, _, out) = switchboard(&db, command);
        assert!(!ok, "{out}");
        assert!(
            out.contains("migrated by another version of Switchboard (its migration 9999"),
            "{out}"
        );
    }
}

#[tokio::test]
async fn operators_create_workspaces_keys_numbers_and_credit_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "ops.db").await;

    let (ok, ws, out) = switchboard(&db, &["workspace", "create", "--name", "Acme", "--json"]);
    assert!(ok, "{out}");
    let ws_id = ws["id"].as_str().unwrap().to_owned();

    let (ok, key, out) = switchboard(
        &db,
        &[
            "key",
            "create",
            "--workspace",
            &ws_id,
            "--scopes",
            "campaigns:manage,billing:read",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    let secret = key["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sb_"));
    assert_eq!(
        key["scopes"],
        serde_json::json!(["billing:read", "campaigns:manage"])
    );

    let (ok, list, out) = switchboard(&db, &["key", "list", "--workspace", &ws_id, "--json"]);
    assert!(ok, "{out}");
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert!(!out.contains(&secret), "listing never shows the secret");

    let (ok, number, out) = switchboard(
        &db,
        &[
            "number",
            "add",
            "--workspace",
            &ws_id,
            "--number",
            "050-123-4567",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(number["number"], "+972501234567");
    assert_eq!(number["status"], "active");

    let (ok, credit, out) = switchboard(
        &db,
        &[
            "billing",
            "credit",
            "--workspace",
            &ws_id,
            "--amount-cents",
            "2500",
            "--json",
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(credit["balance_cents"], 2500);

    // The key works against a service on the same file, within its scopes.
    let store = switchboard::Store::open(&db).await.unwrap();
    let check = store.check_key(&secret).await.unwrap();
    assert!(matches!(check, switchboard::store::KeyCheck::Valid { .. }));

    let key_id = key["id"].as_str().unwrap();
    let (ok, _, out) = switchboard(&db, &["key", "revoke", key_id, "--json"]);
    assert!(ok, "{out}");
    assert!(matches!(
        store.check_key(&secret).await.unwrap(),
        switchboard::store::KeyCheck::Invalid
    ));

    // Bad input is refused with a message, not a panic.
    for args in [
        &[
            "key",
            "create",
            "--workspace",
            &ws_id,
            "--scopes",
            "calls:fly",
        ][..],
        &["number", "add", "--workspace", &ws_id, "--number", "hello"][..],
        &[
            "billing",
            "credit",
            "--workspace",
            &uuid::Uuid::now_v7().to_string(),
            "--amount-cents",
            "5",
        ][..],
        &["key", "revoke", key_id][..],
        &["workspace", "create", "--name", "  "][..],
    ] {
        let (ok, _, out) = switchboard(&db, args);
        assert!(!ok, "{args:?} should fail");
        assert!(out.contains("error"), "{out}");
        assert!(!out.contains("panicked"), "{out}");
    }
}

#[tokio::test]
async fn the_first_serve_creates_a_default_workspace_and_prints_a_working_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "serve.db").await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "--database-url",
            &db,
            "serve",
            "--metrics-listen",
            "none",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let key = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(pos) = line.find("sb_") {
                return line[pos..].trim().to_owned();
            }
        }
        panic!("no key printed");
    })
    .await
    .expect("key printed in time");
    switchboard::edge::tls::install_crypto();
    let client = reqwest::Client::new();
    let (client, url, key) = (&client, &format!("http://127.0.0.1:{port}/campaigns"), &key);
    let resp = eventually(
        std::time::Duration::from_secs(5),
        "the service answers",
        || async move { client.get(url).bearer_auth(key).send().await.ok() },
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let body: Value = resp.json().await.unwrap();
    assert!(body["data"].is_array() && body["pagination"].is_object());
    // SIGTERM stops it gracefully.
    let pid = child.id().unwrap();
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .unwrap();
    assert!(status.success(), "graceful exit: {status}");
}

/// `switchboard nodes` lists the service's node as alive while it runs, with the id and
/// address `/healthz` names, and as gone once it has stopped.
#[tokio::test]
async fn nodes_lists_the_running_node_alive_and_a_stopped_one_gone() {
    let mut app = crate::helpers::spawn_app_with(|c| {
        c.node.id = "node-a".into();
        c.node.advertise = "10.1.2.3".into();
    })
    .await;
    let health = app.send(reqwest::Method::GET, "/healthz", None, None).await;
    assert_eq!(health.body["node"]["id"], "node-a", "{}", health.text);
    assert_eq!(health.body["node"]["advertise"], "10.1.2.3");
    let db = app.db_url.clone();
    let listed = tokio::task::spawn_blocking(move || switchboard(&db, &["nodes", "--json"]))
        .await
        .unwrap();
    assert!(listed.0, "{}", listed.2);
    let nodes = listed.1.as_array().expect("a JSON array").clone();
    assert_eq!(nodes.len(), 1, "{}", listed.2);
    assert_eq!(nodes[0]["id"], "node-a");
    assert_eq!(nodes[0]["state"], "alive");
    assert_eq!(nodes[0]["advertise"], "10.1.2.3");
    assert_eq!(nodes[0]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(nodes[0]["leases"], 0);

    app.halt().await;
    let db = app.db_url.clone();
    let (ok, json, text) =
        tokio::task::spawn_blocking(move || switchboard(&db, &["nodes", "--json"]))
            .await
            .unwrap();
    assert!(ok, "{text}");
    assert_eq!(json[0]["state"], "gone", "{text}");
    assert!(json[0]["stopped_at"].is_string(), "{text}");
    let db = app.db_url.clone();
    let (ok, _, table) = tokio::task::spawn_blocking(move || switchboard(&db, &["nodes"]))
        .await
        .unwrap();
    assert!(ok, "{table}");
    assert!(
        table.contains("node-a") && table.contains("gone"),
        "{table}"
    );
}

#[test]
fn a_node_id_that_is_not_a_plain_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("n.db").display());
    let (ok, _, text) = switchboard(
        &db,
        &["serve", "--node-id", "node a/1", "--http", "127.0.0.1:0"],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("--node-id `node a/1` must be 1-64 letters"),
        "{text}"
    );
}

/// A second process started with the id of a running node is refused, and says which node has
/// it; the running node goes on.
#[tokio::test]
async fn a_node_id_in_use_by_a_running_node_is_refused() {
    let app = crate::helpers::spawn_app_with(|c| c.node.id = "node-dup".into()).await;
    let db = app.db_url.clone();
    // A node that wrongly starts would serve on: the wait ends the test then.
    let started = tokio::task::spawn_blocking(move || {
        switchboard(
            &db,
            &[
                "serve",
                "--node-id",
                "node-dup",
                "--http",
                "127.0.0.1:0",
                "--metrics-listen",
                "none",
            ],
        )
    });
    let (ok, _, text) = tokio::time::timeout(std::time::Duration::from_secs(30), started)
        .await
        .expect("the second node is refused at once")
        .unwrap();
    assert!(!ok, "{text}");
    assert!(
        text.contains("node id `node-dup` is in use by a running node"),
        "{text}"
    );
    let health = app.send(reqwest::Method::GET, "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);
}
