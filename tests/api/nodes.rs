//! Nodes on one database: a call is written as the node's that carries it, and a node that
//! starts ends as interrupted only its own live calls and those of nodes that are gone.

use std::time::Duration;

use switchboard::store::{NodeIdentity, Store};

use crate::helpers::eventually;

#[tokio::test]
async fn a_starting_node_leaves_another_running_nodes_calls_and_ends_a_gone_nodes() {
    let app = crate::helpers::spawn_app_with(|c| {
        crate::calls::answering_for(c, "60");
        c.node.id = "node-a".into();
    })
    .await;
    let (id, _, _) = crate::calls::place_direct(&app, "+972525550101").await;
    let path = format!("/calls/{id}");
    eventually(Duration::from_secs(10), "the call is answered", || async {
        (app.get(&path).await.body["status"] == "in_progress").then_some(())
    })
    .await;
    let row = crate::database::text_row(
        &app.db_url,
        "SELECT node_id FROM calls WHERE id = $1",
        id.parse().unwrap(),
    )
    .await;
    assert_eq!(row[0].as_deref(), Some("node-a"));

    // A second node starts on the same database while the first runs: the call is not its.
    let b = Store::open(&app.db_url).await.unwrap().with_node("node-b");
    b.register_node(&NodeIdentity {
        id: "node-b".into(),
        advertise: "localhost".into(),
    })
    .await
    .unwrap();
    assert_eq!(b.interrupt_live_calls(b.now()).await.unwrap(), 0);
    assert_eq!(app.get(&path).await.body["status"], "in_progress");

    // Once the first node is gone, the next start ends its call as interrupted.
    app.store.node_stopped("node-a").await.unwrap();
    assert_eq!(b.interrupt_live_calls(b.now()).await.unwrap(), 1);
    let ended = app.get(&path).await.body;
    assert_eq!(ended["status"], "ended", "{ended}");
    assert_eq!(ended["end_reason"], "interrupted", "{ended}");
    b.close().await;
}
