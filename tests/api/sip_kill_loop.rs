//! A kill loop over a SIP campaign: `switchboard serve --carrier sip` dials a campaign's
//! contacts through a scripted trunk, and is killed with SIGKILL 21 times, in turn at the instant
//! an INVITE reaches the far end, at the instant the far end answers, and at the instant our ACK
//! arrives, and started again each time on the same database. At the end: no contact dialled
//! twice, none lost (every contact settled, every dial a call on record), and no callee left
//! ringing or connected once the last restart has had one transaction expiry.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::crash::{completed, get_json, running_campaign, settled};
use crate::sip_ua::{callee_response, free_sip_port, header_of as header};

const CONTACTS: usize = 60;
const KILLS: usize = 21;
/// The services' transaction expiry here (`--sip-transaction-expire-ms`).
const EXPIRY: Duration = Duration::from_secs(4);

/// When the far end has the service killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Instant {
    /// As the INVITE arrives (nothing answered).
    Invite,
    /// As the far end sends its 180 and 200.
    Answer,
    /// As our ACK of the 200 arrives.
    Ack,
}

/// What the far end thinks of one INVITE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leg {
    Ringing,
    /// Answered, not yet ACKed.
    Answered,
    Connected,
    Over,
}

#[derive(Default)]
struct FarState {
    /// The instant at which the next new INVITE has the service killed, if armed.
    armed: Option<Instant>,
    /// The INVITE whose ACK has the service killed.
    ack_target: Option<String>,
    /// INVITEs by Call-ID: their leg, the INVITE's text and where it came from.
    legs: HashMap<String, (Leg, String, SocketAddr)>,
    /// New INVITEs (Call-IDs) per dialled number.
    dials: HashMap<String, Vec<String>>,
}

/// A trunk that answers every INVITE busy, except the one it has been armed for, and ends
/// whatever a CANCEL or a BYE ends.
struct FarEnd {
    sock: Arc<UdpSocket>,
    state: Arc<Mutex<FarState>>,
    kills: mpsc::UnboundedReceiver<Instant>,
}

impl FarEnd {
    async fn start() -> FarEnd {
        let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let state = Arc::new(Mutex::new(FarState::default()));
        let (kill_tx, kills) = mpsc::unbounded_channel();
        let (s, st) = (sock.clone(), state.clone());
        tokio::spawn(async move {
            let port = s.local_addr().unwrap().port();
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = s.recv_from(&mut buf).await {
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                for (out, kill) in handle(&st, &text, from, port) {
                    if let Some(out) = out {
                        let _ = s.send_to(out.as_bytes(), from).await;
                    }
                    if let Some(instant) = kill {
                        let _ = kill_tx.send(instant);
                    }
                }
            }
        });
        // A callee re-sends a 200 until it is ACKed (RFC 3261 §13.3.1.4).
        let (s, st) = (sock.clone(), state.clone());
        tokio::spawn(async move {
            let port = s.local_addr().unwrap().port();
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let pending: Vec<(String, SocketAddr)> = {
                    let state = st.lock().unwrap();
                    state
                        .legs
                        .values()
                        .filter(|(leg, ..)| *leg == Leg::Answered)
                        .map(|(_, invite, from)| (invite.clone(), *from))
                        .collect()
                };
                for (invite, from) in pending {
                    let ok = callee_response(&invite, 200, "OK", port, "far");
                    let _ = s.send_to(ok.as_bytes(), from).await;
                }
            }
        });
        FarEnd { sock, state, kills }
    }

    fn port(&self) -> u16 {
        self.sock.local_addr().unwrap().port()
    }

    fn arm(&self, instant: Option<Instant>) {
        self.state.lock().unwrap().armed = instant;
    }

    fn legs_left(&self) -> Vec<(String, Leg)> {
        let state = self.state.lock().unwrap();
        state
            .legs
            .iter()
            .filter(|(_, (leg, ..))| *leg != Leg::Over)
            .map(|(id, (leg, ..))| (id.clone(), *leg))
            .collect()
    }
}

/// The far end's answer to one datagram: what to send back, and whether to kill now.
fn handle(
    state: &Mutex<FarState>,
    text: &str,
    from: SocketAddr,
    port: u16,
) -> Vec<(Option<String>, Option<Instant>)> {
    let mut state = state.lock().unwrap();
    let call_id = header(text, "call-id");
    let method = text.split(' ').next().unwrap_or("");
    match method {
        "INVITE" if !header(text, "to").contains("tag=") => {
            if state.legs.contains_key(&call_id) {
                return vec![]; // a retransmission
            }
            let number = text
                .split(' ')
                .nth(1)
                .and_then(|uri| uri.strip_prefix("sip:"))
                .and_then(|uri| uri.split('@').next())
                .unwrap_or("")
                .to_string();
            state.dials.entry(number).or_default().push(call_id.clone());
            match state.armed.take() {
                None => {
                    state
                        .legs
                        .insert(call_id, (Leg::Over, text.to_string(), from));
                    vec![(
                        Some(callee_response(text, 486, "Busy Here", port, "far")),
                        None,
                    )]
                }
                Some(Instant::Invite) => {
                    state
                        .legs
                        .insert(call_id, (Leg::Ringing, text.to_string(), from));
                    vec![(None, Some(Instant::Invite))]
                }
                Some(Instant::Answer) => {
                    state
                        .legs
                        .insert(call_id, (Leg::Answered, text.to_string(), from));
                    vec![
                        (
                            Some(callee_response(text, 180, "Ringing", port, "far")),
                            None,
                        ),
                        (
                            Some(callee_response(text, 200, "OK", port, "far")),
                            Some(Instant::Answer),
                        ),
                    ]
                }
                Some(Instant::Ack) => {
                    state
                        .legs
                        .insert(call_id.clone(), (Leg::Answered, text.to_string(), from));
                    // Killed when its ACK comes.
                    state.ack_target = Some(call_id);
                    vec![(Some(callee_response(text, 200, "OK", port, "far")), None)]
                }
            }
        }
        "ACK" => {
            let Some(entry) = state.legs.get_mut(&call_id) else {
                return vec![];
            };
            if entry.0 != Leg::Answered {
                return vec![]; // the ACK of a 486 or a 487
            }
            entry.0 = Leg::Connected;
            if state.ack_target.as_deref() == Some(call_id.as_str()) {
                state.ack_target = None;
                return vec![(None, Some(Instant::Ack))];
            }
            vec![]
        }
        "CANCEL" => {
            let mut out = vec![(Some(callee_response(text, 200, "OK", port, "far")), None)];
            if let Some(entry) = state.legs.get_mut(&call_id)
                && entry.0 == Leg::Ringing
            {
                entry.0 = Leg::Over;
                let invite = entry.1.clone();
                out.push((
                    Some(callee_response(
                        &invite,
                        487,
                        "Request Terminated",
                        port,
                        "far",
                    )),
                    None,
                ));
            }
            out
        }
        "BYE" => {
            if let Some(entry) = state.legs.get_mut(&call_id) {
                entry.0 = Leg::Over;
            }
            vec![(Some(callee_response(text, 200, "OK", port, "far")), None)]
        }
        _ if text.starts_with("SIP/2.0 ") => vec![],
        _ => vec![(Some(callee_response(text, 200, "OK", port, "far")), None)],
    }
}

fn serve(
    db: &str,
    dir: &std::path::Path,
    http: u16,
    sip: u16,
    trunk: &str,
) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["--database-url", db, "serve", "--metrics-listen", "none"])
        .args(["--http", &format!("127.0.0.1:{http}")])
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--carrier", "sip", "--outbound-trunk", trunk, "--sip"])
        .args(["--sip-listen", &format!("127.0.0.1:{sip}")])
        .args(["--rtp-ports", "31000-31999", "--tts", "tones"])
        .args(["--sip-t1-ms", "100"])
        .args([
            "--sip-transaction-expire-ms",
            &EXPIRY.as_millis().to_string(),
        ])
        .args(["--evaluation-interval-secs", "1", "--rate-limit", "1000000"])
        .args(["--disposition-timeout-secs", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("switchboard starts")
}

#[tokio::test]
async fn killing_a_sip_campaign_at_the_invite_the_answer_and_the_ack_loses_and_leaves_nothing() {
    let mut far = FarEnd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let db = crate::database::fresh_database(dir.path(), "kills.db").await;
    let trunk = format!(
        r#"{{"gateways": [{{"host": "127.0.0.1", "port": {}}}]}}"#,
        far.port()
    );

    // A running campaign, one attempt per contact, prepared straight in the store.
    let (c, secret) = running_campaign(&db, CONTACTS, 5_000_000, |s| {
        s.rules.max_in_flight = 2;
        s.rules.max_attempts = 1;
    })
    .await;

    let sip = free_sip_port();
    let instants = [Instant::Invite, Instant::Answer, Instant::Ack];
    let mut killed = HashMap::<&str, usize>::new();
    for k in 0..KILLS {
        let instant = instants[k % instants.len()];
        far.arm(Some(instant));
        let mut child = serve(&db, dir.path(), free_sip_port(), sip, &trunk);
        let at = tokio::time::timeout(Duration::from_secs(60), far.kills.recv())
            .await
            .unwrap_or_else(|_| panic!("kill {k}: the far end never saw its instant"))
            .expect("the far end runs");
        child.start_kill().expect("SIGKILL");
        child.wait().await.unwrap();
        *killed.entry(format!("{at:?}").leak()).or_default() += 1;
    }
    far.arm(None);

    // The last run settles the campaign.
    let http = free_sip_port();
    let _child = serve(&db, dir.path(), http, sip, &trunk);
    switchboard::edge::tls::install_crypto();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{http}");
    let url = format!("{base}/campaigns/{}", c);
    completed(&client, &url, &secret, Duration::from_secs(120)).await;
    // Within one transaction expiry after the last restart, nobody rings or talks for a dead
    // process.
    let deadline = tokio::time::Instant::now() + EXPIRY;
    let left = loop {
        let left = far.legs_left();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("kills by instant: {killed:?}; callees left ringing or connected: {left:?}");
    assert!(
        left.is_empty(),
        "callees left ringing or connected a transaction expiry ({EXPIRY:?}) after the campaign completed: {left:?}"
    );

    // No contact dialled twice (one attempt each).
    let dials = far.state.lock().unwrap().dials.clone();
    let twice: Vec<_> = dials.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(twice.is_empty(), "dialled twice: {twice:?}");
    // None lost: every contact settled, every dial a call on record.
    settled(&client, &url, &secret, CONTACTS).await;
    let calls = get_json(
        &client,
        &format!("{base}/calls?campaign_id={c}&limit=100"),
        &secret,
    )
    .await;
    let placed: Vec<&str> = calls["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["id"].as_str())
        .collect();
    // (A call can be on record without a dial: a kill between its commit and its INVITE.)
    let dialled: usize = dials.values().map(Vec::len).sum();
    for ids in dials.values() {
        assert!(placed.contains(&ids[0].as_str()), "{ids:?} is on record");
    }
    eprintln!(
        "kills: {KILLS}; contacts: {CONTACTS}; calls on record: {}; dials: {dialled}; double dials: {}; lost: 0",
        placed.len(),
        twice.len()
    );
}
