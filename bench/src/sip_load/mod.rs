//! `sip-load`: a SIP user agent load generator. It places calls at a steady rate to one SIP
//! URI over UDP or TCP, streams a WAV file (or a tone) as RTP for the hold time, counts the RTP
//! coming back, hangs up, and reports setup latency, failures by status, RTP figures and the
//! server's CPU and memory over the run (text, JSON and an HTML page with charts).
//!
//! With `--spawn <switchboard binary>` it starts its own server on a temporary database, with an
//! agent and an endpoint, and measures that process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use switchboard_sip::sdp::Codec;
use tokio::net::UdpSocket;
use tokio::sync::Mutex;

use crate::progress::Progress;

mod output;

use output::{report, scrape_rtp};

use crate::measure::sample_server;
use crate::spawn::spawn_server;
use crate::ua::{Dialog, Invite};

#[derive(clap::Args, Clone)]
pub struct SipLoadArgs {
    /// The server's SIP address (host:port). Not needed with --spawn.
    #[arg(long)]
    target: Option<SocketAddr>,
    /// The endpoint's slug (the user part of the URI). Not needed with --spawn.
    #[arg(long)]
    slug: Option<String>,
    /// Start this switchboard binary as the server (temporary database, an agent and an
    /// endpoint) and measure it.
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// The server's process id, to sample its CPU and memory (set by --spawn).
    #[arg(long)]
    server_pid: Option<u32>,
    /// `udp` or `tcp`.
    #[arg(long, default_value = "udp", value_parser = ["udp", "tcp"])]
    transport: String,
    /// New calls per second.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// Calls to place in all.
    #[arg(long, default_value_t = 500)]
    total: u64,
    /// Seconds each answered call is held, streaming audio.
    #[arg(long, default_value_t = 10.0)]
    hold: f64,
    /// `pcmu`, `pcma` or `g722`.
    #[arg(long, default_value = "pcmu")]
    codec: String,
    /// A mono 16-bit WAV to stream (looped); a 440 Hz tone when omitted.
    #[arg(long)]
    wav: Option<PathBuf>,
    /// The address to place calls from.
    #[arg(long, default_value = "127.0.0.1")]
    local_ip: std::net::IpAddr,
    /// Seconds to wait for a final answer to an INVITE.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML report with charts here.
    #[arg(long)]
    html: Option<PathBuf>,
}

#[derive(Default)]
struct Totals {
    started: AtomicU64,
    answered: AtomicU64,
    completed: AtomicU64,
    live: AtomicI64,
    rtp_sent: AtomicU64,
    rtp_received: AtomicU64,
    rtp_lost: AtomicU64,
}

struct Shared {
    args: SipLoadArgs,
    target: SocketAddr,
    slug: String,
    codec: Codec,
    audio: Vec<i16>,
    totals: Totals,
    latencies: Mutex<Vec<f64>>,
    /// When the last call was answered, since the run started.
    last_answer: Mutex<f64>,
    run_started: Instant,
    failures: Mutex<BTreeMap<String, u64>>,
}

/// Runs the load and returns the report.
pub async fn run(mut args: SipLoadArgs) -> anyhow::Result<Value> {
    let codec = Codec::parse(&args.codec).context("--codec: pcmu, pcma or g722")?;
    let mut spawned = None;
    if let Some(bin) = args.spawn.clone() {
        let server = spawn_server(&bin, &[]).await?;
        args.target = Some(server.sip);
        args.slug = Some(server.slug.clone());
        args.server_pid = Some(server.child.id().context("server pid")?);
        spawned = Some(server);
    }
    let target = args.target.context("--target (or --spawn) is required")?;
    let slug = args
        .slug
        .clone()
        .context("--slug (or --spawn) is required")?;
    let audio = match &args.wav {
        Some(path) => crate::measure::load_wav(path, codec.sample_rate())?,
        None => tone(codec.sample_rate()),
    };
    let shared = Arc::new(Shared {
        target,
        slug,
        codec,
        audio,
        totals: Totals::default(),
        latencies: Mutex::new(Vec::new()),
        last_answer: Mutex::new(0.0),
        run_started: Instant::now(),
        failures: Mutex::new(BTreeMap::new()),
        args: args.clone(),
    });
    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Value>::new()));
    let live = shared.clone();
    let sampler = tokio::spawn(sample_server(
        args.server_pid,
        move || live.totals.live.load(Ordering::Relaxed),
        samples.clone(),
        started,
    ));
    let interval = Duration::from_secs_f64(1.0 / args.rate.max(0.001));
    let mut calls = Vec::with_capacity(args.total as usize);
    let mut next = tokio::time::Instant::now();
    let mut progress = Progress::new();
    for i in 0..args.total {
        tokio::time::sleep_until(next).await;
        next += interval;
        let s = shared.clone();
        calls.push(tokio::spawn(async move { one_call(s, i).await }));
        let t = &shared.totals;
        progress.show(
            t.completed.load(Ordering::Relaxed) as i64,
            args.total as i64,
            &format!("live {}", t.live.load(Ordering::Relaxed)),
        );
    }
    for call in calls {
        let _ = call.await;
        let t = &shared.totals;
        progress.show(
            t.completed.load(Ordering::Relaxed) as i64,
            args.total as i64,
            &format!("live {}", t.live.load(Ordering::Relaxed)),
        );
    }
    eprintln!();
    let wall = started.elapsed().as_secs_f64();
    sampler.abort();
    let samples = samples.lock().await.clone();
    let mut server_rtp = Value::Null;
    if let Some(server) = &spawned {
        // The server's own RTP counters, once its calls have recorded their ends.
        tokio::time::sleep(Duration::from_secs(2)).await;
        server_rtp = scrape_rtp(&server.metrics).await.unwrap_or(Value::Null);
    }
    if let Some(mut server) = spawned {
        let _ = server.child.start_kill();
        let _ = server.child.wait().await;
    }
    let mut report = report(&shared, wall, &samples).await;
    report["server_rtp"] = server_rtp;
    if let Some(path) = &args.html {
        let page = crate::measure::html("Switchboard SIP load", &report, &samples, output::CHARTS);
        std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report)
}

async fn fail(s: &Shared, why: String) {
    *s.failures.lock().await.entry(why).or_insert(0) += 1;
}

async fn one_call(s: Arc<Shared>, n: u64) {
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

fn tone(rate: u32) -> Vec<i16> {
    crate::measure::tone(rate, 440.0, rate as usize, 8000.0)
}
