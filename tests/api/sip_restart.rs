//! A crash never leaves a callee ringing or on dead air. `switchboard serve --carrier sip` is
//! killed with SIGKILL at the instant its INVITE reaches the far end, at the instant the far end
//! answers, and at the instant our ACK arrives; the restart CANCELs what only rang, BYEs what
//! may have been answered (with the callee's tag, written down before our ACK), ACKs and BYEs
//! an answer that crosses its CANCEL, records an answer it learns of, and never redials.
//!
//! The far end is scripted here, on a UDP socket, so each kill comes at its exact instant.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard::store::{CallRecord, Store};
use switchboard_actors::call::{CallStatus, EndReason};
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::ids::{CallId, WorkspaceId};
use switchboard_sip::trunk::{Gateway, TrunkTransport};
use tokio::net::UdpSocket;

use crate::crash::get_json;
use crate::helpers::eventually;
use crate::sip_outbound::{Sipp, trunk};
use crate::sip_ua::{callee_response, free_sip_port, header_of as header};

const SECS: Duration = Duration::from_secs(10);

/// The service as a process on a database file, to be killed and started again.
struct Killable {
    dir: tempfile::TempDir,
    db: String,
    http: u16,
    sip: u16,
    trunk: String,
    store: Store,
    ws: WorkspaceId,
    key: String,
    child: Option<tokio::process::Child>,
}

impl Killable {
    /// The service dialling out through `gateway`, up, with an agent and a calling number.
    async fn start(gateway: Gateway) -> (Killable, String, String) {
        switchboard::edge::tls::install_crypto();
        let dir = tempfile::tempdir().unwrap();
        let db = crate::database::fresh_database(dir.path(), "crash.db").await;
        let store = Store::open(&db).await.unwrap();
        let ws = store.create_workspace("crash", "IL").await.unwrap();
        let (_, key) = store
            .create_key(ws.id, "test", &switchboard::domain::auth::Scopes::All, None)
            .await
            .unwrap();
        crate::helpers::credit(&store, ws.id, 100_000).await;
        let mut k = Killable {
            dir,
            db,
            http: free_sip_port(),
            sip: free_sip_port(),
            trunk: serde_json::to_string(&trunk(vec![gateway])).unwrap(),
            store,
            ws: ws.id,
            key,
            child: None,
        };
        k.spawn().await;
        let agent = k
            .post(
                "/agents",
                json!({"name": "Ava", "max_call_duration_secs": 60}),
            )
            .await;
        let parsed = switchboard_actors::phone::PhoneNumber::parse(
            "+972501230000",
            switchboard_actors::phone::parse_country("IL").unwrap(),
        )
        .unwrap();
        let number = k
            .store
            .add_owned_number(k.ws, &parsed, NumberStatus::Active)
            .await
            .unwrap()
            .id
            .to_string();
        (k, agent["id"].as_str().unwrap().to_string(), number)
    }

    /// Starts the service and waits until its API answers.
    async fn spawn(&mut self) {
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args([
                "--database-url",
                &self.db,
                "serve",
                "--metrics-listen",
                "none",
            ])
            .args(["--http", &format!("127.0.0.1:{}", self.http)])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--carrier", "sip", "--outbound-trunk", &self.trunk, "--sip"])
            .args(["--sip-listen", &format!("127.0.0.1:{}", self.sip)])
            .args(["--rtp-ports", "30000-30999", "--tts", "tones"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("switchboard starts");
        self.child = Some(child);
        let base = format!("http://127.0.0.1:{}/", self.http);
        eventually(Duration::from_secs(20), "the service is up", || async {
            reqwest::get(&base).await.ok().map(|_| ())
        })
        .await;
    }

    /// SIGKILL, at once.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().unwrap();
            child.wait().await.unwrap();
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{}{path}", self.http))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Places a call that may ring for 5 minutes.
    async fn place(&self, agent: &str, number: &str) -> CallId {
        let call = self
            .post(
                "/calls",
                json!({"agent_id": agent, "to_number": "+972541234567",
                    "from_phone_number_id": number, "ring_timeout_secs": 300}),
            )
            .await;
        call["id"].as_str().unwrap().parse().unwrap()
    }

    /// The call once the restart has reconciled it.
    async fn reconciled(&self, id: CallId) -> CallRecord {
        eventually(SECS * 2, "the call is reconciled", || async {
            let call = self.store.call(self.ws, id).await.unwrap()?;
            (call.status == CallStatus::Ended).then_some(call)
        })
        .await
    }

    /// How many calls the workspace has (a redial would be another).
    async fn calls(&self) -> usize {
        let url = format!("http://127.0.0.1:{}/calls", self.http);
        let list = get_json(&reqwest::Client::new(), &url, &self.key).await;
        list["data"].as_array().unwrap().len()
    }
}

/// The far end: a trunk on one UDP socket, answering as each test scripts it.
struct FarEnd {
    sock: UdpSocket,
}

impl FarEnd {
    async fn new() -> FarEnd {
        FarEnd {
            sock: UdpSocket::bind("127.0.0.1:0").await.unwrap(),
        }
    }

    fn gateway(&self) -> Gateway {
        Gateway {
            host: "127.0.0.1".into(),
            port: Some(self.sock.local_addr().unwrap().port()),
            transport: TrunkTransport::Udp,
            priority: 0,
        }
    }

    /// The next request of `method` (others, such as retransmissions, are passed over).
    async fn request(&self, method: &str) -> (String, SocketAddr) {
        loop {
            let (text, from) = self.any_request().await;
            if text.starts_with(&format!("{method} ")) {
                return (text, from);
            }
        }
    }

    /// The next request, whatever it is.
    async fn any_request(&self) -> (String, SocketAddr) {
        let mut buf = vec![0u8; 65536];
        loop {
            let (n, from) = tokio::time::timeout(SECS * 3, self.sock.recv_from(&mut buf))
                .await
                .expect("a request came")
                .unwrap();
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            if !text.starts_with("SIP/2.0 ") {
                return (text, from);
            }
        }
    }

    /// Answers `request` with `code` (To tag `theirs`), with an SDP body for a 2xx.
    async fn respond(&self, request: &str, to: SocketAddr, code: u16, reason: &str) {
        let port = self.sock.local_addr().unwrap().port();
        let text = callee_response(request, code, reason, port, "theirs");
        self.sock.send_to(text.as_bytes(), to).await.unwrap();
    }
}

#[tokio::test]
async fn killed_as_the_invite_arrives_the_restart_cancels_that_very_invite() {
    let far = FarEnd::new().await;
    let (mut k, agent, number) = Killable::start(far.gateway()).await;
    let id = k.place(&agent, &number).await;
    let (invite, _) = far.request("INVITE").await;
    k.kill().await;
    k.spawn().await;
    let (cancel, from) = far.request("CANCEL").await;
    // The INVITE's own transaction: its branch, Call-ID, From and CSeq number.
    assert_eq!(header(&cancel, "via"), header(&invite, "via"), "{cancel}");
    assert_eq!(header(&cancel, "call-id"), header(&invite, "call-id"));
    assert_eq!(header(&cancel, "from"), header(&invite, "from"));
    assert_eq!(
        header(&cancel, "cseq").split_whitespace().next(),
        header(&invite, "cseq").split_whitespace().next()
    );
    far.respond(&cancel, from, 200, "OK").await;
    let call = k.reconciled(id).await;
    assert_eq!(call.end_reason, Some(EndReason::Interrupted));
    assert!(call.answered_at.is_none());
    assert_eq!(k.calls().await, 1, "never redialled");
}

#[tokio::test]
async fn killed_as_our_ack_arrives_the_restart_hangs_up_the_answered_call() {
    let far = FarEnd::new().await;
    let (mut k, agent, number) = Killable::start(far.gateway()).await;
    let id = k.place(&agent, &number).await;
    let (invite, from) = far.request("INVITE").await;
    // Answered at once, no ringing first: the tag comes with the 200 alone.
    far.respond(&invite, from, 200, "OK").await;
    let _ = far.request("ACK").await;
    k.kill().await;
    k.spawn().await;
    let (bye, from) = far.request("BYE").await;
    assert!(header(&bye, "to").contains("tag=theirs"), "{bye}");
    assert!(bye.starts_with("BYE sip:callee@127.0.0.1:"), "{bye}");
    far.respond(&bye, from, 200, "OK").await;
    let call = k.reconciled(id).await;
    assert_eq!(call.end_reason, Some(EndReason::Interrupted));
    assert!(
        call.answered_at.is_some(),
        "the carrier counts it connected: {call:?}"
    );
    assert_eq!(k.calls().await, 1, "never redialled");
}

#[tokio::test]
async fn killed_as_the_far_end_answers_the_restart_hangs_up_with_the_rung_tag() {
    let far = FarEnd::new().await;
    let (mut k, agent, number) = Killable::start(far.gateway()).await;
    let id = k.place(&agent, &number).await;
    let (invite, from) = far.request("INVITE").await;
    far.respond(&invite, from, 180, "Ringing").await;
    // The 200 and the kill at the same instant: the dead process may or may not have read it.
    far.respond(&invite, from, 200, "OK").await;
    k.kill().await;
    k.spawn().await;
    // If it had read the 200, the restart BYEs at once; if not, it CANCELs, and the answer
    // (retransmitted, as a callee does until its ACK) is ACKed and BYEd.
    let bye = loop {
        let (request, from) = far.any_request().await;
        if request.starts_with("CANCEL ") {
            far.respond(&request, from, 200, "OK").await;
            far.respond(&invite, from, 200, "OK").await;
        } else if request.starts_with("BYE ") {
            far.respond(&request, from, 200, "OK").await;
            break request;
        }
    };
    assert!(header(&bye, "to").contains("tag=theirs"), "{bye}");
    let call = k.reconciled(id).await;
    assert_eq!(call.end_reason, Some(EndReason::Interrupted));
    assert_eq!(k.calls().await, 1, "never redialled");
}

#[tokio::test]
async fn an_answer_crossing_the_restarts_cancel_is_acked_hung_up_and_recorded() {
    let far = FarEnd::new().await;
    let (mut k, agent, number) = Killable::start(far.gateway()).await;
    let id = k.place(&agent, &number).await;
    let (invite, from) = far.request("INVITE").await;
    far.respond(&invite, from, 180, "Ringing").await;
    eventually(SECS, "the call rings", || async {
        let call = k.store.call(k.ws, id).await.unwrap()?;
        (call.status == CallStatus::Ringing).then_some(())
    })
    .await;
    k.kill().await;
    k.spawn().await;
    // The restart CANCELs the INVITE that rang; the callee answers all the same.
    let (cancel, cancel_from) = far.request("CANCEL").await;
    far.respond(&cancel, cancel_from, 200, "OK").await;
    far.respond(&invite, cancel_from, 200, "OK").await;
    let (ack, _) = far.request("ACK").await;
    assert!(header(&ack, "to").contains("tag=theirs"), "{ack}");
    let (bye, from) = far.request("BYE").await;
    assert!(header(&bye, "to").contains("tag=theirs"), "{bye}");
    far.respond(&bye, from, 200, "OK").await;
    let answered = eventually(SECS, "the answer is recorded", || async {
        let call = k.store.call(k.ws, id).await.unwrap()?;
        call.answered_at.map(|_| call)
    })
    .await;
    assert_eq!(answered.status, CallStatus::Ended);
    assert_eq!(answered.end_reason, Some(EndReason::Interrupted));
    assert_eq!(k.calls().await, 1, "never redialled");
}

/// With SIPp as the far end: a call left ringing is CANCELled by the restart, ended as
/// interrupted and never redialled.
#[tokio::test]
async fn a_restart_cancels_what_a_killed_process_left_ringing() {
    let sipp = Sipp::start("ringing_until_cancel.xml", 1, &[]).await;
    let (mut k, agent, number) = Killable::start(sipp.gateway(0)).await;
    let id = k.place(&agent, &number).await;
    // Ringing at SIPp (its 180 came back).
    eventually(Duration::from_secs(20), "the call rings", || async {
        let call = k.store.call(k.ws, id).await.unwrap()?;
        (call.status == CallStatus::Ringing).then_some(())
    })
    .await;
    k.kill().await;
    k.spawn().await;
    sipp.passed().await;
    let ended = k.reconciled(id).await;
    assert_eq!(ended.end_reason, Some(EndReason::Interrupted));
}
