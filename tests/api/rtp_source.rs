//! Nobody but the caller the SIP dialog negotiated with hears the agent: a second socket on
//! loopback that sends to a call's media port (before the caller, ahead of the caller, after a
//! refresh, or blindly to every port while the call rings) gets no packet, and the caller gets
//! the agent's audio all along. A caller behind a NAT, whose RTP comes from another port than
//! its SDP names, still gets the audio.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::UdpSocket;

use crate::sip_calls::{SipApp, endpoint, sip_app_with};
use crate::sip_ua::{Ua, media_addr, offer};

const SECS: Duration = Duration::from_secs(10);

/// A service whose calls ring for `ring_ms` and take media ports in `ports`.
async fn app(ring_ms: u64, ports: (u16, u16)) -> (SipApp, String) {
    let s = sip_app_with(ring_ms, 100, None, |c| {
        if let Some(sip) = c.sip.as_mut() {
            sip.rtp_ports = ports;
        }
    })
    .await;
    let (_, _, slug) = endpoint(
        &s.app,
        json!({"agent_speaks_first": true, "silence_timeout_secs": 30}),
        json!({}),
    )
    .await;
    (s, slug)
}

/// Sends the INVITE offering media at `port`, acknowledges the 200; the server's media
/// address.
async fn answer(ua: &mut Ua, port: u16) -> SocketAddr {
    ua.invite(&offer(port, &[(0, "PCMU/8000")])).await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    ua.ack_2xx().await;
    media_addr(r.body())
}

/// Counts what arrives on `socket` until dropped.
fn counter(socket: Arc<UdpSocket>) -> (Heard, tokio::task::JoinHandle<()>) {
    let heard = Heard::default();
    let seen = heard.clone();
    let task = tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((_, from)) = socket.recv_from(&mut buf).await {
            seen.0.lock().unwrap().push(from);
        }
    });
    (heard, task)
}

/// Where each packet a socket received came from.
#[derive(Clone, Default)]
struct Heard(Arc<std::sync::Mutex<Vec<SocketAddr>>>);

impl Heard {
    /// Packets from `from` (the call's media: tests running beside this one may send to a
    /// port they closed and this socket took over).
    fn from(&self, from: SocketAddr) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|a| **a == from)
            .count()
    }
}

/// One PCMU packet of a stream.
fn packet(ssrc: u32, seq: u16) -> Vec<u8> {
    let mut pkt = vec![0x80u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    pkt[2..4].copy_from_slice(&seq.to_be_bytes());
    pkt[4..8].copy_from_slice(&(u32::from(seq) * 160).to_be_bytes());
    pkt[8..12].copy_from_slice(&ssrc.to_be_bytes());
    pkt.extend((0..160).map(|n| if (n / 9) % 2 == 0 { 0x10 } else { 0x90 }));
    pkt
}

/// Streams `frames` packets from `socket` to `to`, one every 20 ms, in sequence from `first`.
async fn stream(socket: &UdpSocket, to: SocketAddr, ssrc: u32, first: u16, frames: u16) {
    for i in 0..frames {
        let _ = socket.send_to(&packet(ssrc, first + i), to).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Packets a second, from a count over a window.
fn rate(count: usize, window: Duration) -> f64 {
    count as f64 / window.as_secs_f64()
}

/// The caller, streaming for `window` from its own media socket, got the agent's audio at
/// about 50 packets a second, and the attacker got nothing.
async fn caller_alone_heard(caller: Arc<UdpSocket>, to: SocketAddr, attacker: &Heard) {
    let (heard, task) = counter(caller.clone());
    let started = std::time::Instant::now();
    stream(&caller, to, 7, 1000, 100).await;
    task.abort();
    let pps = rate(heard.from(to), started.elapsed());
    let stolen = attacker.from(to);
    eprintln!("caller: {pps:.1} packets/s; attacker: {stolen} packets");
    assert!(pps > 40.0, "the caller got {pps} packets a second");
    assert_eq!(stolen, 0, "the attacker got the agent's audio");
}

/// An answered call whose media port an attacker streams to (`ssrc`, from sequence number
/// `first`), `lead` before the caller starts; the caller must hear the agent alone.
async fn race(lead: Duration, ssrc: u32, first: u16) {
    let (s, slug) = app(0, (40_000, 49_999)).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    let port = ua.media_port();
    let ours = answer(&mut ua, port).await;
    let attacker = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let (stolen, listen) = counter(attacker.clone());
    let streaming = {
        let attacker = attacker.clone();
        tokio::spawn(async move { stream(&attacker, ours, ssrc, first, 150).await })
    };
    tokio::time::sleep(lead).await;
    caller_alone_heard(Arc::new(ua.media), ours, &stolen).await;
    streaming.abort();
    listen.abort();
}

#[tokio::test]
async fn a_socket_spraying_before_the_callers_first_packet_gets_nothing() {
    // The attacker's own stream, in sequence; the caller starts 300 ms later.
    race(Duration::from_millis(300), 99, 1).await;
}

#[tokio::test]
async fn a_socket_streaming_ahead_of_the_caller_gets_nothing() {
    // The caller's very stream (its SSRC and sequence numbers), each packet 100 ms ahead of
    // the caller's, for the whole call.
    race(Duration::from_millis(100), 7, 1000).await;
}

#[tokio::test]
async fn a_single_packet_after_a_refresh_with_the_same_sdp_gets_nothing() {
    let (s, slug) = app(0, (40_000, 49_999)).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    let port = ua.media_port();
    let ours = answer(&mut ua, port).await;
    let spare = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let caller = Arc::new(std::mem::replace(&mut ua.media, spare));
    stream(&caller, ours, 7, 1, 10).await;
    // A session refresh with the same SDP, then one stray packet.
    while ua.reply(Duration::from_millis(200)).await.is_some() {}
    ua.reinvite(&offer(port, &[(0, "PCMU/8000")])).await;
    let (_, r) = ua.final_reply("INVITE", SECS).await;
    assert_eq!(r.code, 200, "{}", r.text);
    ua.ack_reinvite().await;
    let attacker = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let (stolen, listen) = counter(attacker.clone());
    attacker.send_to(&packet(99, 1), ours).await.unwrap();
    caller_alone_heard(caller, ours, &stolen).await;
    listen.abort();
}

#[tokio::test]
async fn a_blind_sweep_of_the_port_range_while_the_call_rings_gets_nothing() {
    let ports = (38_000, 38_199);
    let (s, slug) = app(1500, ports).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    ua.invite(&offer(ua.media_port(), &[(0, "PCMU/8000")]))
        .await;
    let attacker = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let (stolen, listen) = counter(attacker.clone());
    // While the call rings, a packet to every port of the range, again and again, in
    // sequence per round.
    let sweep = {
        let attacker = attacker.clone();
        tokio::spawn(async move {
            for round in 0..u16::MAX {
                for port in (ports.0..=ports.1).step_by(2) {
                    let to = SocketAddr::from(([127, 0, 0, 1], port));
                    let _ = attacker.send_to(&packet(99, round), to).await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let (provisional, r) = ua.final_reply("INVITE", SECS).await;
    assert!(provisional.contains(&180), "{provisional:?}");
    assert_eq!(r.code, 200, "{}", r.text);
    sweep.abort();
    ua.ack_2xx().await;
    let ours = media_addr(r.body());
    assert!((ports.0..=ports.1).contains(&ours.port()));
    caller_alone_heard(Arc::new(ua.media), ours, &stolen).await;
    listen.abort();
}

#[tokio::test]
async fn a_caller_behind_a_nat_gets_the_audio_at_the_port_it_sends_from() {
    let (s, slug) = app(0, (40_000, 49_999)).await;
    let mut ua = Ua::new(s.sip, &slug).await;
    // The SDP names a port nobody listens on; the caller sends from, and listens on, another.
    let signalled = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = signalled.local_addr().unwrap().port();
    drop(signalled);
    let ours = answer(&mut ua, port).await;
    let caller = Arc::new(ua.media);
    // After the wait for the signalled address and the probation, the audio comes here: the
    // caller streams until it hears the agent.
    let mut buf = [0u8; 2048];
    let mut seq = 1;
    let deadline = tokio::time::Instant::now() + SECS;
    loop {
        caller.send_to(&packet(7, seq), ours).await.unwrap();
        seq += 1;
        let heard = tokio::time::timeout(Duration::from_millis(20), caller.recv_from(&mut buf));
        if let Ok(Ok((_, from))) = heard.await
            && from == ours
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the caller never got the agent's audio at the port it sends from"
        );
    }
    caller_alone_heard(caller, ours, &Heard::default()).await;
}
