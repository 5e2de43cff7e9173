//! `switchboard nodes`: the nodes that run on this database, as their heartbeats show them,
//! with the campaign leases each holds.

use serde_json::json;

use crate::store::Store;

/// Lists every node, the latest started first: a table, or with `json` one JSON array.
pub async fn list(store: &Store, json: bool) -> anyhow::Result<()> {
    let now = store.now();
    let nodes = store.nodes().await?;
    let leases = store.leases().await?;
    let held = |id: &str| leases.iter().filter(|l| l.owner == id).count();
    if json {
        let rows: Vec<_> = nodes
            .iter()
            .map(|n| {
                json!({
                    "id": n.id,
                    "state": n.state(now).as_str(),
                    "advertise": n.advertise,
                    "version": n.version,
                    "started_at": n.started_at,
                    "heartbeat_at": n.heartbeat_at,
                    "stopped_at": n.stopped_at,
                    "seconds_since_heartbeat": (now - n.heartbeat_at).num_seconds().max(0),
                    "leases": held(&n.id),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return Ok(());
    }
    if nodes.is_empty() {
        println!("No node has run on this database yet.");
        return Ok(());
    }
    let id_width = nodes.iter().map(|n| n.id.len()).max().unwrap_or(2).max(2);
    let at_width = nodes
        .iter()
        .map(|n| n.advertise.len())
        .max()
        .unwrap_or(9)
        .max(9);
    println!(
        "{:id_width$}  {:8}  {:at_width$}  {:10}  {:6}  LAST HEARTBEAT",
        "ID", "STATE", "ADVERTISE", "VERSION", "LEASES"
    );
    for n in &nodes {
        println!(
            "{:id_width$}  {:8}  {:at_width$}  {:10}  {:6}  {} s ago",
            n.id,
            n.state(now).as_str(),
            n.advertise,
            n.version,
            held(&n.id),
            (now - n.heartbeat_at).num_seconds().max(0),
        );
    }
    Ok(())
}
