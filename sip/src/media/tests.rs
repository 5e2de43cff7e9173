//! The media session on loopback sockets.

use std::time::Duration;

use rtp_rs::{RtpPacketBuilder, RtpReader, Seq};
use tokio::sync::mpsc;

use super::*;
use crate::vad::level_db;
use crate::vad::tests::tone;

#[test]
fn resampling_keeps_duration() {
    let x = tone(2205, 1000.0, 22050.0);
    assert_eq!(resample(&x, 22050, 8000).len(), 800);
    assert_eq!(resample(&x, 22050, 22050), x);
    // Halfway between two samples is their mean; a whole step lands on a sample.
    assert_eq!(
        resample(&[0, 100, 200, 300], 8000, 16000),
        [0, 50, 100, 150, 200, 250, 300, 300]
    );
    assert_eq!(resample(&[10, 20, 30, 40, 50, 60], 24000, 8000), [10, 40]);
    assert_eq!(
        resample(&[-100, -201], 8000, 16000),
        [-100, -150, -201, -201]
    );
}

/// A session on loopback: the peer's socket, our address, the handle and the events.
struct Rig {
    peer: UdpSocket,
    ours: SocketAddr,
    handle: MediaHandle,
    events: mpsc::UnboundedReceiver<MediaEvent>,
}

async fn rig(recording: Option<PathBuf>, vad: VadSettings) -> Rig {
    rig_with(recording, vad, None).await
}

/// A rig whose session takes digits as events under `telephone_event`.
async fn rig_with(
    recording: Option<PathBuf>,
    vad: VadSettings,
    telephone_event: Option<u8>,
) -> Rig {
    let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let ours = socket.local_addr().unwrap();
    let (etx, events) = mpsc::unbounded_channel();
    let handle = start(
        socket,
        MediaConfig {
            codec: Codec::Pcmu,
            payload_type: 0,
            telephone_event,
            remote: peer.local_addr().unwrap(),
            recording,
            vad,
            jitter_depth: 2,
            counters: Arc::default(),
        },
        Box::new(move |e| {
            let _ = etx.send(e);
        }),
    )
    .await
    .unwrap();
    Rig {
        peer,
        ours,
        handle,
        events,
    }
}

impl Rig {
    /// Sends `frames` of 440 Hz tone from the peer as PCMU, out of order in pairs, a pair
    /// every 40 ms.
    async fn send_tone(&self, frames: u16) {
        self.send_tone_from(0, frames).await;
    }

    /// [`Rig::send_tone`] continuing the stream from its frame `first`.
    async fn send_tone_from(&self, first: u16, frames: u16) {
        // Not the agent's 440 Hz: a peer saying what the agent plays would be its echo.
        self.send_wave(first, frames, 250.0).await;
    }

    /// A voicemail beep: 440 Hz.
    async fn send_beep(&self, frames: u16) {
        self.send_wave(0, frames, 440.0).await;
    }

    /// `frames` 20 ms frames of a `hz` tone, from frame `first` of the stream.
    async fn send_wave(&self, first: u16, frames: u16, hz: f64) {
        let mut enc = audio_codec::create_encoder(audio_codec::CodecType::PCMU);
        let packets: Vec<Vec<u8>> = (first..first + frames)
            .map(|i| {
                let pcm: Vec<i16> = (0..160)
                    .map(|n| {
                        let t = f64::from(n) / 8000.0;
                        (8000.0 * (2.0 * std::f64::consts::PI * hz * t).sin()) as i16
                    })
                    .collect();
                RtpPacketBuilder::new()
                    .payload_type(0)
                    .ssrc(7)
                    .sequence(Seq::from(100 + i))
                    .timestamp(160 * u32::from(i))
                    .payload(&enc.encode(&pcm))
                    .build()
                    .unwrap()
            })
            .collect();
        for pair in packets.chunks(2) {
            for packet in pair.iter().rev() {
                self.peer.send_to(packet, self.ours).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }
}

#[tokio::test]
async fn media_flows_both_ways_and_is_recorded() {
    let dir = std::env::temp_dir().join(format!("sb-media-{}", std::process::id()));
    let path = dir.join("call.wav");
    let vad = VadSettings {
        start_secs: 0.04,
        stop_secs: 0.2,
        confidence: 0.5,
    };
    let mut rig = rig(Some(path.clone()), vad).await;
    rig.handle.play(tone(1600, 6000.0, 8000.0).into());
    // The peer sends 0.4 s of tone.
    rig.send_tone(20).await;
    let mut got = 0;
    let mut buf = [0u8; 1500];
    while got < 10 {
        let (len, _) = rig.peer.recv_from(&mut buf).await.unwrap();
        let rtp = RtpReader::new(&buf[..len]).unwrap();
        assert_eq!(rtp.payload_type(), 0);
        assert_eq!(rtp.payload().len(), 160);
        got += 1;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats = rig.handle.finish().await.unwrap();
    assert_eq!(stats.packets_received, 20);
    assert_eq!(stats.packets_lost, 0);
    assert_eq!(stats.packets_discarded, 0);
    let mut events = Vec::new();
    while let Ok(e) = rig.events.try_recv() {
        events.push(e);
    }
    assert!(events.contains(&MediaEvent::SpeechStarted), "{events:?}");
    assert!(events.contains(&MediaEvent::SpeechStopped), "{events:?}");
    assert!(events.contains(&MediaEvent::PlayoutDone), "{events:?}");
    let reader = hound::WavReader::open(&path).unwrap();
    assert_eq!(reader.spec().channels, 2);
    assert_eq!(reader.spec().sample_rate, 8000);
    let samples: Vec<i16> = reader.into_samples().map(|s| s.unwrap()).collect();
    let left: Vec<i16> = samples.iter().step_by(2).copied().collect();
    let right: Vec<i16> = samples.iter().skip(1).step_by(2).copied().collect();
    assert!(level_db(&left) > -30.0, "caller channel holds the tone");
    assert!(level_db(&right) > -30.0, "agent channel holds the prompt");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn answering_machine_detection_reports_through_the_media_events() {
    let mut rig = rig(None, VadSettings::default()).await;
    rig.handle.control().detect_answering_machine(AmdSettings {
        initial_silence_ms: 200,
        ..AmdSettings::default()
    });
    // Nothing from the peer: silence, then a machine.
    let verdict = tokio::time::timeout(Duration::from_secs(5), rig.events.recv())
        .await
        .unwrap()
        .unwrap();
    let MediaEvent::Amd(verdict) = verdict else {
        panic!("{verdict:?}");
    };
    assert_eq!(verdict.answered_by, crate::amd::AnsweredBy::Machine);
    assert_eq!(verdict.reason.code(), "INITIALSILENCE");
    // Then its beep: 0.6 s of 440 Hz.
    rig.send_beep(30).await;
    let started = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rig.events.recv().await {
                Some(MediaEvent::Beep(BeepEvent::Started { frequency_hz, .. })) => {
                    break frequency_hz;
                }
                Some(_) => continue,
                None => panic!("the events ended"),
            }
        }
    })
    .await
    .expect("the beep is heard");
    assert!(started.abs_diff(440) <= 25, "{started} Hz");
    rig.handle.finish().await.unwrap();
}

/// The next event that `pick` accepts, within 5 s.
async fn next_matching<T>(
    events: &mut mpsc::UnboundedReceiver<MediaEvent>,
    mut pick: impl FnMut(MediaEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = events.recv().await.expect("the events go on");
            if let Some(found) = pick(event) {
                break found;
            }
        }
    })
    .await
    .expect("the event comes")
}

#[tokio::test]
async fn listening_hands_over_the_callers_utterance_with_its_pause() {
    let mut rig = rig(None, VadSettings::default()).await;
    rig.handle.control().listen(ListenSettings {
        pause_secs: 0.2,
        pre_roll_secs: 0.5,
        max_secs: 30.0,
    });
    // 1 s of speech, then silence.
    rig.send_tone(50).await;
    let paused = next_pause(&mut rig.events).await;
    let utterance = next_utterance(&mut rig.events).await;
    // The speech, what came before the VAD decided, and the silence that ended it.
    let secs = utterance as f64 / 8000.0;
    assert!((1.6..=2.4).contains(&secs), "utterance of {secs} s");
    assert!(paused < utterance, "{paused} then {utterance}");
    rig.handle.finish().await.unwrap();
}

/// The length of the next pause's audio.
async fn next_pause(events: &mut mpsc::UnboundedReceiver<MediaEvent>) -> usize {
    next_matching(events, |e| match e {
        MediaEvent::Pause(audio) => Some(audio.len()),
        _ => None,
    })
    .await
}

/// The length of the next utterance.
async fn next_utterance(events: &mut mpsc::UnboundedReceiver<MediaEvent>) -> usize {
    next_matching(events, |e| match e {
        MediaEvent::Utterance(audio) => Some(audio.len()),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn a_dropped_utterance_is_not_handed_over_and_speaking_again_is_told() {
    let mut rig = rig(None, VadSettings::default()).await;
    let listen = ListenSettings {
        pause_secs: 0.2,
        pre_roll_secs: 0.5,
        max_secs: 30.0,
    };
    rig.handle.control().listen(listen);
    rig.send_tone(50).await;
    next_pause(&mut rig.events).await;
    rig.handle.control().drop_utterance();
    // The VAD hears the caller stop; nothing of the dropped utterance is handed over.
    let mut between = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), rig.events.recv()).await {
            Ok(Some(MediaEvent::SpeechStopped)) => break,
            Ok(Some(e)) => between.push(format!("{e:?}")),
            other => panic!("no end of speech: {other:?}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    while let Ok(e) = rig.events.try_recv() {
        between.push(format!("{e:?}"));
    }
    assert!(
        between.iter().all(|e| !e.starts_with("Utterance")),
        "{between:?}"
    );

    // Speaking again after a pause (before the VAD's stop) is told, and makes an
    // utterance of its own.
    rig.send_tone_from(50, 25).await;
    next_pause(&mut rig.events).await;
    rig.handle.control().drop_utterance();
    rig.send_tone_from(75, 25).await;
    next_matching(&mut rig.events, |e| match e {
        MediaEvent::Resumed => Some(()),
        _ => None,
    })
    .await;
    let utterance = next_utterance(&mut rig.events).await;
    let secs = utterance as f64 / 8000.0;
    assert!((0.5..=2.0).contains(&secs), "utterance of {secs} s");
    rig.handle.finish().await.unwrap();
}

#[tokio::test]
async fn playout_yields_by_itself_on_the_frame_speech_starts_once_asked_to() {
    let mut rig = rig(None, VadSettings::default()).await;
    let control = rig.handle.control();
    control.yield_to_speech(true);
    control.play_tagged(vec![1000i16; 80_000].into(), 5);
    tokio::time::sleep(Duration::from_millis(200)).await;
    rig.send_tone(25).await;
    // The cut comes with (before) the VAD's start: nobody had to ask for it.
    let mut order = Vec::new();
    while order.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), rig.events.recv()).await {
            Ok(Some(MediaEvent::Cut { tag, played })) => {
                assert_eq!(tag, 5);
                assert!(played > 0 && played < 80_000, "{played}");
                order.push("cut");
            }
            Ok(Some(MediaEvent::SpeechStarted)) => order.push("speech"),
            Ok(Some(_)) => {}
            other => panic!("{other:?} after {order:?}"),
        }
    }
    assert_eq!(order, ["cut", "speech"]);
    // The rest of that reply, sent before its sender heard of the speech, is dropped; what it
    // sends once it has heard plays.
    control.play_heard(vec![1000i16; 800].into(), 6, 0);
    control.play_heard(vec![1000i16; 800].into(), 7, 1);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), rig.events.recv()).await {
            Ok(Some(MediaEvent::Cut { tag, played })) => seen.push((tag, Some(played))),
            Ok(Some(MediaEvent::PlayedOut(tag))) => seen.push((tag, None)),
            Ok(Some(_)) => {}
            other => panic!("{other:?} after {seen:?}"),
        }
    }
    assert_eq!(seen, [(6, Some(0)), (7, None)]);
    rig.handle.finish().await.unwrap();
}

#[tokio::test]
async fn tagged_audio_is_reported_played_out_or_cut() {
    let mut rig = rig(None, VadSettings::default()).await;
    let control = rig.handle.control();
    control.play_tagged(vec![1000i16; 800].into(), 7);
    assert_eq!(
        next_matching(&mut rig.events, |e| match e {
            MediaEvent::PlayedOut(tag) => Some(tag),
            _ => None,
        })
        .await,
        7
    );
    control.play_tagged(vec![1000i16; 16_000].into(), 8);
    control.play_tagged(vec![1000i16; 16_000].into(), 9);
    tokio::time::sleep(Duration::from_millis(300)).await;
    control.clear();
    let (tag, played) = next_matching(&mut rig.events, |e| match e {
        MediaEvent::Cut { tag, played } => Some((tag, played)),
        _ => None,
    })
    .await;
    assert_eq!(tag, 8);
    assert!((1600..=4000).contains(&played), "{played} samples played");
    rig.handle.finish().await.unwrap();
}

/// Every event the session raised within `ms`.
async fn events_within(rig: &mut Rig, ms: u64) -> Vec<MediaEvent> {
    let mut events = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(Some(e)) = tokio::time::timeout_at(until, rig.events.recv()).await {
        events.push(e);
    }
    events
}

fn digits_of(events: &[MediaEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            MediaEvent::Digit(d) => Some(d.as_char()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_caller_s_events_are_one_digit_each() {
    let mut rig = rig_with(None, VadSettings::default(), Some(101)).await;
    let mut seq = 500u16;
    for (code, at) in [(1u8, 8000u32), (11, 9600)] {
        // Five packets as the key sounds, then its end three times.
        for n in 1..=8u16 {
            let event = crate::dtmf::Event {
                code,
                end: n >= 5,
                volume: 10,
                duration: 160 * n.min(5),
            };
            let packet = RtpPacketBuilder::new()
                .payload_type(101)
                .ssrc(7)
                .sequence(Seq::from(seq))
                .timestamp(at)
                .marked(n == 1)
                .payload(&event.to_bytes())
                .build()
                .unwrap();
            seq += 1;
            rig.peer.send_to(&packet, rig.ours).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let events = events_within(&mut rig, 300).await;
    assert_eq!(digits_of(&events), "1#", "{events:?}");
    let stats = rig.handle.finish().await.unwrap();
    assert_eq!(stats.packets_received, 16);
    assert_eq!(stats.packets_lost, 0);
    assert_eq!(stats.packets_ignored, 0);
}

#[tokio::test]
async fn a_caller_s_tones_are_digits_in_band() {
    let mut rig = rig(None, VadSettings::default()).await;
    let mut enc = audio_codec::create_encoder(audio_codec::CodecType::PCMU);
    let mut frames = Vec::new();
    for key in ['4', '2'] {
        let digit = crate::dtmf::Digit::from_char(key).unwrap();
        for index in 0..4 {
            let mut pcm = [0i16; 160];
            crate::dtmf::tones::tone(digit, index, 8000, &mut pcm);
            frames.push(pcm);
        }
        frames.extend([[0i16; 160]; 3]);
    }
    for (i, pcm) in frames.iter().enumerate() {
        let packet = RtpPacketBuilder::new()
            .payload_type(0)
            .ssrc(7)
            .sequence(Seq::from(i as u16))
            .timestamp(160 * i as u32)
            .payload(&enc.encode(pcm))
            .build()
            .unwrap();
        rig.peer.send_to(&packet, rig.ours).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = events_within(&mut rig, 200).await;
    assert_eq!(digits_of(&events), "42", "{events:?}");
}

/// What the peer receives within `ms`: (payload type, marker, timestamp, payload) each.
async fn received(rig: &Rig, ms: u64) -> Vec<(u8, bool, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1500];
    let until = tokio::time::Instant::now() + Duration::from_millis(ms);
    while let Ok(Ok((len, _))) = tokio::time::timeout_at(until, rig.peer.recv_from(&mut buf)).await
    {
        let rtp = RtpReader::new(&buf[..len]).unwrap();
        out.push((
            rtp.payload_type(),
            rtp.mark(),
            rtp.timestamp(),
            rtp.payload().to_vec(),
        ));
    }
    out
}

#[tokio::test]
async fn digits_go_out_as_events_when_the_peer_takes_them() {
    let mut rig = rig_with(None, VadSettings::default(), Some(96)).await;
    let keys = crate::dtmf::Digit::parse_all("7#").unwrap();
    rig.handle.control().send_digits(&keys);
    let packets = received(&rig, 600).await;
    let mut reader = crate::dtmf::EventReader::default();
    let sent: String = packets
        .iter()
        .filter(|p| p.0 == 96)
        .filter_map(|p| reader.read(p.2, &p.3))
        .map(|d| d.as_char())
        .collect();
    assert_eq!(sent, "7#");
    let events: Vec<_> = packets.iter().filter(|p| p.0 == 96).collect();
    assert_eq!(events.len(), 14, "seven packets a digit");
    assert!(events[0].1 && !events[1].1, "the marker starts each event");
    let ends = events
        .iter()
        .filter(|p| crate::dtmf::Event::parse(&p.3).unwrap().end)
        .count();
    assert_eq!(ends, 6, "each end three times");
    // Audio goes on around them.
    assert!(packets.iter().any(|p| p.0 == 0));
    let after = events_within(&mut rig, 100).await;
    assert!(after.contains(&MediaEvent::DigitsSent), "{after:?}");
}

#[tokio::test]
async fn digits_go_out_as_tones_otherwise() {
    let rig = rig(None, VadSettings::default()).await;
    let keys = crate::dtmf::Digit::parse_all("305").unwrap();
    rig.handle.control().send_digits(&keys);
    let packets = received(&rig, 800).await;
    assert!(packets.iter().all(|p| p.0 == 0));
    let mut dec = audio_codec::create_decoder(audio_codec::CodecType::PCMU);
    let mut detector = crate::dtmf::tones::ToneDetector::new(8000);
    let mut heard = String::new();
    for p in &packets {
        let mut pcm = [0i16; 160];
        dec.decode_into(&p.3, &mut pcm).unwrap();
        heard.extend(detector.feed(&pcm).map(|d| d.as_char()));
    }
    assert_eq!(heard, "305");
}
