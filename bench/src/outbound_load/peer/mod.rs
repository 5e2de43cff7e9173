//! The answering peer: a SIP UAS on one UDP socket standing in for a carrier's far end. Each
//! INVITE gets an outcome from the configured shares:
//!
//! - `answer`: 180, then 200 with SDP after the ring delay; a short "hello" as a person says it
//!   (so answering-machine detection hears a person), then the RTP that arrives is echoed back
//!   to its sender (its payload, in the peer's own stream) and counted (sequence gaps are
//!   losses);
//! - `machine`: answered the same way, but it plays a greeting (speech or a speech-like pattern,
//!   then a beep, then silence) instead of echoing, as an answering machine would;
//! - `busy`: 486;
//! - `no_answer`: 180 and nothing more until the caller's CANCEL (200, then 487).
//!
//! It notes per call when the INVITE came, the answer, the ACK, the first RTP and the end, and
//! the RTP sent, received and lost; per calling number (each campaign calls from its own) the
//! calls in flight at once and the smallest gap between INVITEs: the pacing as the far end saw
//! it. One task per call; the RTP path reuses one buffer per call and allocates nothing.
//!
//! Cut by role: `mix` (what the peer does with each call, and in what shares), `shared` (the
//! socket, the routes to the calls and the figures kept), `call` (one call's task). This file
//! runs the peer on its own thread and dispatches what the socket reads to the calls.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use tokio::sync::mpsc;

mod call;
mod mix;
mod shared;

use crate::outbound_load::sipmsg::Msg;
use call::Call;
pub use mix::Mix;
pub use shared::{FarEnd, Live, PeerCall, PeerConfig};
use shared::{Route, Shared};

/// The running peer, on a thread of its own (named `peer`, so its CPU can be read apart).
pub struct Peer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    /// Starts the peer on its own thread and single-threaded runtime.
    pub fn start(cfg: PeerConfig) -> anyhow::Result<Peer> {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("peer".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow::Error::from(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Shared::bind(cfg).await {
                        Ok(shared) => {
                            let dispatcher = tokio::spawn(dispatch(shared.clone()));
                            let _ = ready_tx.send(Ok(shared));
                            let _ = stopped.await;
                            dispatcher.abort();
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })?;
        let shared = ready
            .recv()
            .context("the peer's thread ended before it started")??;
        Ok(Peer {
            addr: shared.addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn live(&self) -> &Live {
        &self.shared.live
    }

    /// Pacing by calling number.
    pub fn far_ends(&self) -> BTreeMap<String, FarEnd> {
        self.shared.far.lock().unwrap().clone()
    }

    /// The calls that have ended so far.
    pub fn calls(&self) -> Vec<PeerCall> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// Forgets the calls so far (a warm-up before the measured run).
    pub fn forget(&self) {
        self.shared.calls.lock().unwrap().clear();
        self.shared.far.lock().unwrap().clear();
        let live = &self.shared.live;
        for counter in [
            &live.invites,
            &live.rtp_sent,
            &live.rtp_received,
            &live.rtp_lost,
            &live.stray,
        ] {
            counter.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn shares(&self) -> BTreeMap<&'static str, f64> {
        self.shared.cfg.mix.shares()
    }

    pub fn stop(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads the SIP socket and hands each message to its call.
async fn dispatch(sh: Arc<Shared>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok((n, src)) = sh.sock.recv_from(&mut buf).await else {
            continue;
        };
        let Some(msg) = Msg::parse(&buf[..n]) else {
            sh.live.stray.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let route = {
            let routes = sh.routes.lock().unwrap();
            routes
                .get(msg.call_id())
                .map(|r| (r.tx.clone(), r.ended.clone(), r.from.clone()))
        };
        match route {
            Some((tx, ended, from)) => {
                // The caller's BYE or CANCEL ends the call for pacing right here, before any
                // INVITE behind it in the socket is read.
                if msg.is("BYE") || msg.is("CANCEL") {
                    sh.end(&ended, &from);
                }
                let _ = tx.send(msg);
            }
            None if msg.is("INVITE") && !msg.has_to_tag() => {
                let now = Instant::now();
                let kind = sh.mix.lock().unwrap().next();
                let from: Arc<str> = msg.caller().into();
                let ended = Arc::new(AtomicBool::new(false));
                let (tx, rx) = mpsc::unbounded_channel();
                sh.begin(&from, now);
                sh.routes.lock().unwrap().insert(
                    msg.call_id().to_string(),
                    Route {
                        tx,
                        ended: ended.clone(),
                        from: from.clone(),
                    },
                );
                let call = Call {
                    sh: sh.clone(),
                    src,
                    tag: format!("{:x}", rand::random::<u64>()),
                    ended,
                    from,
                    record: PeerCall {
                        call_id: msg.call_id().to_string(),
                        kind,
                        invite_at: now,
                        invite_wall: Utc::now(),
                        answered_at: None,
                        ack_at: None,
                        first_rtp_at: None,
                        ended_at: now,
                        end: "",
                        rtp_sent: 0,
                        rtp_received: 0,
                        rtp_lost: 0,
                    },
                    invite: msg,
                    rx,
                };
                tokio::spawn(call.run());
            }
            None if msg.is("OPTIONS") => {
                let text = msg.response(200, "OK", "peer", "", "");
                sh.send(&text, src).await;
            }
            None if msg.method.is_some() && !msg.is("ACK") => {
                let text = msg.response(481, "Call/Transaction Does Not Exist", "peer", "", "");
                sh.send(&text, src).await;
            }
            None => {
                sh.live.stray.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::Duration;

    use switchboard_sip::sdp::Codec;

    use super::*;

    struct Nobody;

    #[async_trait::async_trait]
    impl switchboard_sip::server::InboundRouter for Nobody {
        type Target = ();
        async fn route(&self, _: &str, _: IpAddr) -> switchboard_sip::server::Routing<()> {
            switchboard_sip::server::Routing::Unknown
        }
        async fn run_call(&self, _: (), _: switchboard_sip::call::Call) {}
    }

    /// Switchboard's own SIP client dials the peer once for each kind of outcome.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_dialer_meets_every_outcome() {
        use switchboard_sip::outbound::{DialPlan, FailureKind};
        use switchboard_sip::server::{SipServer, SipSettings, SipSockets};

        let audio = vec![4000i16; 8000];
        let peer = Peer::start(PeerConfig {
            ip: "127.0.0.1".parse().unwrap(),
            port: 0,
            mix: "answer=1,machine=1,busy=1,no_answer=1".parse().unwrap(),
            ring: Duration::from_millis(100),
            codec: Codec::Pcmu,
            hold_cap: Duration::from_secs(20),
            ring_cap: Duration::from_secs(20),
            greeting: crate::greeting::frames(Codec::Pcmu, &audio),
            hello: crate::greeting::frames(Codec::Pcmu, &audio[..4000]),
        })
        .unwrap();
        let sockets = SipSockets::bind("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let server = SipServer::start(
            SipSettings {
                rtp_ports: (42_000, 42_999),
                t1: Duration::from_millis(100),
                ..SipSettings::default()
            },
            sockets,
            Nobody,
        )
        .await
        .unwrap();
        let client = server.client();
        let trunk: switchboard_sip::trunk::Trunk = serde_json::from_value(serde_json::json!(
            {"gateways": [{"host": "127.0.0.1", "port": peer.addr.port()}]}
        ))
        .unwrap();
        let plan = |n: u32| DialPlan {
            trunk: trunk.clone(),
            from_number: "+972501000000".into(),
            to_number: format!("+97252000000{n}"),
            call_id: Some(format!("call-{n}")),
            ring_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(2),
            recording: None,
            vad: Default::default(),
            on_ringing: None,
        };
        let cancel = tokio_util::sync::CancellationToken::new;
        for n in 0..2 {
            let mut answered = client.dial(plan(n), cancel()).await.expect("answered");
            tokio::time::sleep(Duration::from_millis(600)).await;
            answered.call.hangup().await;
            let stats = answered.call.finish().await.unwrap();
            assert!(stats.packets_received >= 10, "call {n}: {stats:?}");
            assert_eq!(stats.packets_lost, 0);
        }
        let busy = client.dial(plan(2), cancel()).await.err().expect("busy");
        assert_eq!(busy.sip_code, Some(486));
        let unanswered = client
            .dial(plan(3), cancel())
            .await
            .err()
            .expect("no answer");
        assert_eq!(unanswered.kind, FailureKind::RingTimeout);

        let deadline = Instant::now() + Duration::from_secs(10);
        while peer.calls().len() < 4 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut calls = peer.calls();
        calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        let ends: Vec<(&str, &str)> = calls.iter().map(|c| (c.kind.name(), c.end)).collect();
        assert_eq!(
            ends,
            [
                ("answer", "caller_bye"),
                ("machine", "caller_bye"),
                ("busy", "rejected"),
                ("no_answer", "cancelled")
            ]
        );
        // A person says hello (25 frames) and echoes what comes; the machine plays its greeting.
        assert!(calls[0].rtp_sent >= 25 && calls[0].rtp_received >= 25);
        assert!(calls[1].rtp_sent >= 20 && calls[1].rtp_received >= 10);
        assert!(calls.iter().all(|c| c.rtp_lost == 0));
        assert!(calls[0].ack_at.is_some() && calls[0].first_rtp_at.is_some());
        let far = peer.far_ends();
        let number = &far["+972501000000"];
        assert_eq!((number.invites, number.max_live, number.live), (4, 1, 0));
        assert!(number.min_gap_secs.unwrap() > 0.0);
        assert_eq!(peer.live().in_flight.load(Ordering::Relaxed), 0);
        peer.stop();
        server.shutdown().await;
    }
}
