//! `--outbound-rate`: outbound calls placed through the API while the flood runs, over a SIP
//! trunk to the bench's own answering peer. They show whether the inbound flood starves the
//! outbound side: how many were placed and answered, and how long each waited from its
//! `POST /calls` to its INVITE at the far end, before and during the flood. `--campaign` runs
//! a campaign to the same peer alongside: whether the engine keeps placing its calls at the
//! pace it had before the flood.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;

use crate::greeting;
use crate::measure::round;
use crate::outbound_load::create_campaign;
use crate::outbound_load::peer::{Peer, PeerConfig};
use crate::outbound_load::server::{Api, stock_workspace};
use crate::spawn::Spawned;

/// The answering peer and what the server needs to call it.
pub(crate) struct Outbound {
    peer: Peer,
    api: Api,
    agent: String,
    number_id: String,
    /// The campaign's own calling number.
    campaign_number_id: String,
}

/// Calls at a time of the `--campaign` campaign (the most a campaign allows).
const CAMPAIGN_IN_FLIGHT: i64 = 8;

/// One `POST /calls`.
pub(crate) struct Placed {
    at: Instant,
    /// How long the `POST /calls` took to be answered.
    post: Duration,
    status: u16,
    call_id: Option<String>,
    /// Placed while the flood was on (else before it).
    in_flood: bool,
}

/// Starts the answering peer; answers it with the server flags that make it the default trunk.
pub(crate) fn start_peer(hold_secs: u64) -> anyhow::Result<(Peer, Vec<String>)> {
    let codec = Codec::Pcmu;
    let peer = Peer::start(PeerConfig {
        ip: "127.0.0.1".parse()?,
        port: 0,
        mix: "answer=100".parse().map_err(|e| anyhow::anyhow!("{e}"))?,
        ring: Duration::from_millis(200),
        codec,
        hold_cap: Duration::from_secs(hold_secs + 20),
        ring_cap: Duration::from_secs(60),
        greeting: Vec::new(),
        hello: greeting::frames(codec, &greeting::hello(codec.sample_rate())),
    })?;
    let trunk = json!({"gateways": [{"host": "127.0.0.1", "port": peer.addr.port(),
        "transport": "udp"}]});
    let flags = vec![
        "--carrier".into(),
        "sip".into(),
        "--outbound-trunk".into(),
        trunk.to_string(),
        "--ring-timeout-secs".into(),
        "10".into(),
        // The workspace's own cap (10 by default) would queue these calls whatever the flood
        // does; the node's capacity and its outbound reserve still hold.
        "--workspace-concurrency".into(),
        "100000".into(),
    ];
    Ok((peer, flags))
}

impl Outbound {
    /// Credits the server's workspace and gives it an active calling number (through its store,
    /// as an operator would), and creates the agent the calls run.
    pub(crate) async fn prepare(
        peer: Peer,
        server: &Spawned,
        hold_secs: u64,
    ) -> anyhow::Result<Outbound> {
        let store = switchboard::Store::open(&server.db_url).await?;
        let switchboard::store::KeyCheck::Valid { workspace_id, .. } =
            store.check_key(&server.key).await?
        else {
            anyhow::bail!("the server's key is not valid in its store");
        };
        let numbers = stock_workspace(
            &store,
            workspace_id,
            &["+972501000000".into(), "+972501000001".into()],
        )
        .await?;
        let mut ids = numbers.into_iter().map(|(_, id)| id);
        let number_id = ids.next().context("no number")?;
        let campaign_number_id = ids.next().context("no second number")?;
        let agent = crate::spawn::create_agent(
            server,
            &json!({"name": "Outbound during the flood",
                "greeting_message": "Hello, this is a call placed during a flood.",
                "agent_speaks_first": true, "max_call_duration_secs": hold_secs.max(1),
                "silence_timeout_secs": 3600,
                "answering_machine_detection": {"enabled": false}}),
        )
        .await?;
        let api = Api::new(&server.http, &server.key);
        Ok(Outbound {
            peer,
            api,
            agent,
            number_id,
            campaign_number_id,
        })
    }

    /// Creates a campaign of more contacts than it can call in the run, each call lasting
    /// `hold_secs`, and launches it; answers its id.
    pub(crate) async fn launch_campaign(&self, hold_secs: u64) -> anyhow::Result<String> {
        use reqwest::Method;
        let pacing = (CAMPAIGN_IN_FLIGHT, 0);
        let (api, agent, number) = (&self.api, &self.agent, &self.campaign_number_id);
        let id = create_campaign(api, "Campaign during the flood", agent, number, pacing).await?;
        // A slot turns over once per call: far more than a few minutes can call.
        let contacts: Vec<Value> = (0..(600 * CAMPAIGN_IN_FLIGHT as u64 / hold_secs.max(1)))
            .map(|i| json!({"phone_number": format!("+97253{i:07}")}))
            .collect();
        self.api
            .must(
                Method::POST,
                &format!("/campaigns/{id}/contacts"),
                Some(&json!({"contacts": contacts})),
            )
            .await?;
        self.api
            .must(Method::POST, &format!("/campaigns/{id}/launch"), None)
            .await?;
        Ok(id)
    }

    /// Pauses the campaign: no call starts after the flood.
    pub(crate) async fn pause_campaign(&self, id: &str) {
        let path = format!("/campaigns/{id}/pause");
        let _ = self.api.send(reqwest::Method::POST, &path, None).await;
    }

    /// Places `rate` calls a second until `stop`; `flooding` tells whether the flood is on.
    pub(crate) fn place(
        &self,
        rate: f64,
        flooding: Arc<AtomicBool>,
        stop: Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<Vec<Placed>> {
        let api = self.api.clone();
        let (agent, number) = (self.agent.clone(), self.number_id.clone());
        let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
        tokio::spawn(async move {
            let placed = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            let mut next = tokio::time::Instant::now();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep_until(next).await;
                next += interval;
                i += 1;
                let body = json!({"agent_id": agent, "to_number": format!("+97252{i:07}"),
                    "from_phone_number_id": number});
                let (api, placed) = (api.clone(), placed.clone());
                let in_flood = flooding.load(Ordering::Relaxed);
                tasks.push(tokio::spawn(async move {
                    let at = Instant::now();
                    let (status, call_id) = api.place_call(&body).await;
                    placed.lock().expect("placed").push(Placed {
                        at,
                        post: at.elapsed(),
                        status,
                        call_id,
                        in_flood,
                    });
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
            std::mem::take(&mut *placed.lock().expect("placed"))
        })
    }

    /// The outbound side's figures, once its calls have ended: the calls placed through the API
    /// (`placed`) and the campaign's (`campaign`, with the flood's span); stops the peer.
    pub(crate) async fn report(
        self,
        placed: Option<Vec<Placed>>,
        campaign: Option<(String, std::ops::Range<Instant>)>,
    ) -> Value {
        let records = self
            .api
            .all("/calls?direction=outbound")
            .await
            .unwrap_or_default();
        let outcome: HashMap<String, String> = records
            .iter()
            .filter_map(|r| Some((r["id"].as_str()?.to_string(), outcome_of(r)?.to_string())))
            .collect();
        let peer_calls = self.peer.calls();
        let invites: HashMap<String, Instant> = peer_calls
            .iter()
            .map(|c| (c.call_id.clone(), c.invite_at))
            .collect();
        let ends: HashMap<String, Instant> = peer_calls
            .into_iter()
            .map(|c| (c.call_id, c.ended_at))
            .collect();
        self.peer.stop();
        let campaign = match campaign {
            Some((id, flood)) => {
                let calls: Vec<&Value> = records
                    .iter()
                    .filter(|r| r["campaign_id"].as_str() == Some(id.as_str()))
                    .collect();
                campaign_report(&calls, &invites, &ends, flood)
            }
            None => Value::Null,
        };
        let Some(placed) = placed else {
            return json!({"campaign": campaign});
        };
        let part = |flood: bool| {
            let calls: Vec<&Placed> = placed.iter().filter(|p| p.in_flood == flood).collect();
            let mut by_outcome = BTreeMap::<String, u64>::new();
            let mut delay = Vec::new();
            let mut post: Vec<f64> = calls
                .iter()
                .map(|p| p.post.as_secs_f64() * 1000.0)
                .collect();
            let mut refused = 0;
            for p in &calls {
                let Some(id) = &p.call_id else {
                    refused += 1;
                    *by_outcome.entry(format!("http_{}", p.status)).or_default() += 1;
                    continue;
                };
                let o = outcome
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| "unrecorded".into());
                *by_outcome.entry(o).or_default() += 1;
                if let Some(invite) = invites.get(id) {
                    delay.push(invite.saturating_duration_since(p.at).as_secs_f64() * 1000.0);
                }
            }
            json!({
                "placed": calls.len(),
                "refused_by_api": refused,
                "outcomes": by_outcome,
                "post_ms": crate::measure::spread(&mut post),
                "api_to_invite_ms": crate::measure::spread(&mut delay),
            })
        };
        json!({"before_flood": part(false), "during_flood": part(true), "campaign": campaign})
    }
}

/// The campaign's calls by when their INVITE reached the peer: before the flood (from its
/// launch) and during it, each with calls a second and how long a slot stayed free. The campaign
/// keeps `CAMPAIGN_IN_FLIGHT` calls up, so past the first ones, its k-th INVITE fills the slot
/// the (k - CAMPAIGN_IN_FLIGHT)-th call to end freed (`refill_ms`: from that end at the peer to
/// this INVITE at the peer).
fn campaign_report(
    calls: &[&Value],
    invites: &HashMap<String, Instant>,
    ends: &HashMap<String, Instant>,
    flood: std::ops::Range<Instant>,
) -> Value {
    let ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
    let mut at: Vec<Instant> = ids
        .iter()
        .filter_map(|id| invites.get(*id).copied())
        .collect();
    let mut ended: Vec<Instant> = ids.iter().filter_map(|id| ends.get(*id).copied()).collect();
    at.sort();
    ended.sort();
    let slots = CAMPAIGN_IN_FLIGHT as usize;
    let phase = |from: Option<Instant>, to: Instant| {
        let inside = |t: &Instant| from.is_none_or(|f| *t >= f) && *t < to;
        let count = at.iter().filter(|t| inside(t)).count();
        let mut refill: Vec<f64> = at
            .iter()
            .enumerate()
            .skip(slots)
            .filter(|(_, t)| inside(t))
            .filter_map(|(k, t)| Some(t.saturating_duration_since(*ended.get(k - slots)?)))
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        let from = from.or(at.first().copied()).unwrap_or(to);
        let secs = to.saturating_duration_since(from).as_secs_f64().max(0.001);
        json!({
            "invites": count,
            "per_sec": round(count as f64 / secs),
            "refill_ms": crate::measure::spread(&mut refill),
        })
    };
    let mut outcomes = BTreeMap::<String, u64>::new();
    for c in calls {
        let o = outcome_of(c).unwrap_or("unknown");
        *outcomes.entry(o.to_string()).or_default() += 1;
    }
    json!({
        "in_flight": CAMPAIGN_IN_FLIGHT,
        "before_flood": phase(None, flood.start),
        "during_flood": phase(Some(flood.start), flood.end),
        "outcomes": outcomes,
    })
}

/// A call record's outcome, or its status while it has none.
fn outcome_of(call: &Value) -> Option<&str> {
    call["outcome"].as_str().or(call["status"].as_str())
}
