//! The calls the generator places: its counters and what every call shares, and each call's
//! INVITE, its RTP for the hold time (the audio sent, what comes back counted) and its BYE.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchboard_sip::sdp::Codec;
use tokio::net::UdpSocket;
use tokio::sync::Mutex;

use super::args::SipLoadArgs;
use crate::ua::{Dialog, Invite};

/// The load's counters.
#[derive(Default)]
pub(super) struct Totals {
    pub(super) started: AtomicU64,
    pub(super) answered: AtomicU64,
    pub(super) completed: AtomicU64,
    pub(super) live: AtomicI64,
    pub(super) rtp_sent: AtomicU64,
    pub(super) rtp_received: AtomicU64,
    pub(super) rtp_lost: AtomicU64,
}

/// What every call reads (the settings, the target, the audio) and adds to.
pub(super) struct Shared {
    pub(super) args: SipLoadArgs,
    pub(super) target: SocketAddr,
    pub(super) slug: String,
    pub(super) codec: Codec,
    pub(super) audio: Vec<i16>,
    pub(super) totals: Totals,
    pub(super) latencies: Mutex<Vec<f64>>,
    /// When the last call was answered, since the run started.
    pub(super) last_answer: Mutex<f64>,
    pub(super) run_started: Instant,
    pub(super) failures: Mutex<BTreeMap<String, u64>>,
}

async fn fail(s: &Shared, why: String) {
    *s.failures.lock().await.entry(why).or_insert(0) += 1;
}

pub(super) async fn one_call(s: Arc<Shared>, n: u64) {
    s.totals.started.fetch_add(1, Ordering::Relaxed);
    if let Err(why) = call(&s, n).await {
        fail(&s, why).await;
    }
    s.totals.completed.fetch_add(1, Ordering::Relaxed);
}

async fn call(s: &Shared, n: u64) -> Result<(), String> {
    let media = UdpSocket::bind((s.args.local_ip, 0))
        .await
        .map_err(|e| format!("local media socket: {e}"))?;
    let invite = Invite {
        target: s.target,
        slug: &s.slug,
        local_ip: s.args.local_ip,
        tcp: s.args.transport == "tcp",
        codec: s.codec,
        media_port: media.local_addr().map_err(|e| e.to_string())?.port(),
        timeout: Duration::from_secs_f64(s.args.timeout),
        n,
    };
    let dialog = Dialog::invite(&invite).await?;
    s.latencies.lock().await.push(dialog.setup_ms);
    s.totals.answered.fetch_add(1, Ordering::Relaxed);
    {
        let mut last = s.last_answer.lock().await;
        *last = last.max(s.run_started.elapsed().as_secs_f64());
    }
    s.totals.live.fetch_add(1, Ordering::Relaxed);
    let streamed = stream_media(s, &media, dialog.remote_media).await;
    s.totals.live.fetch_sub(1, Ordering::Relaxed);
    dialog.bye().await?;
    streamed
}

/// Sends the audio every 20 ms for the hold time and counts what comes back.
async fn stream_media(s: &Shared, sock: &UdpSocket, remote: SocketAddr) -> Result<(), String> {
    let mut encoder = switchboard_sip::audio_codec::create_encoder(s.codec.codec_type());
    let frame = s.codec.frame_samples();
    let frames = (s.args.hold * 50.0).round() as u64;
    let ssrc: u32 = rand::random();
    let mut seq: u16 = rand::random();
    let mut ts: u32 = rand::random();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let mut buf = [0u8; 2048];
    let (mut first, mut max_seq, mut received, mut cycles) = (None::<u16>, 0u16, 0u64, 0u64);
    let mut offset = 0usize;
    let mut pcm = vec![0i16; frame];
    for _ in 0..frames {
        tokio::select! {
            _ = tick.tick() => {}
        }
        for v in pcm.iter_mut() {
            *v = s.audio[offset % s.audio.len()];
            offset += 1;
        }
        let payload = encoder.encode(&pcm);
        let mut pkt = Vec::with_capacity(12 + payload.len());
        pkt.extend_from_slice(&[0x80, s.codec.payload_type()]);
        pkt.extend_from_slice(&seq.to_be_bytes());
        pkt.extend_from_slice(&ts.to_be_bytes());
        pkt.extend_from_slice(&ssrc.to_be_bytes());
        pkt.extend_from_slice(&payload);
        if sock.send_to(&pkt, remote).await.is_ok() {
            s.totals.rtp_sent.fetch_add(1, Ordering::Relaxed);
        }
        seq = seq.wrapping_add(1);
        ts = ts.wrapping_add(Codec::TIMESTAMP_STEP);
        // Drain what arrived.
        while let Ok((n, _)) = sock.try_recv_from(&mut buf) {
            if n < 12 {
                continue;
            }
            let q = u16::from_be_bytes([buf[2], buf[3]]);
            received += 1;
            match first {
                None => {
                    first = Some(q);
                    max_seq = q;
                }
                Some(_) => {
                    if switchboard_sip::rtp::seq_before(max_seq, q) {
                        if q < max_seq {
                            cycles += 1;
                        }
                        max_seq = q;
                    }
                }
            }
        }
    }
    s.totals.rtp_received.fetch_add(received, Ordering::Relaxed);
    if let Some(first) = first {
        let expected = cycles * 65_536 + u64::from(max_seq) + 1 - u64::from(first);
        s.totals
            .rtp_lost
            .fetch_add(expected.saturating_sub(received), Ordering::Relaxed);
    }
    Ok(())
}
