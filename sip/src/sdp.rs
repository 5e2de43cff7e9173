//! SDP offer/answer (RFC 3264) for one audio stream, with the codecs Switchboard speaks:
//! PCMU, PCMA and G.722. The answer takes the first codec of the offer that we support, so the
//! caller's preference order wins.

use std::net::{IpAddr, SocketAddr};

/// An audio codec both sides can use; it serializes as its [`Codec::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    Pcmu,
    Pcma,
    G722,
}

impl Codec {
    /// Every codec we speak, in our own order of preference (used in offers).
    pub const ALL: [Codec; 3] = [Codec::G722, Codec::Pcmu, Codec::Pcma];

    /// The static RTP payload type (RFC 3551).
    pub fn payload_type(self) -> u8 {
        match self {
            Codec::Pcmu => 0,
            Codec::Pcma => 8,
            Codec::G722 => 9,
        }
    }

    /// The `a=rtpmap` encoding name. G.722's RTP clock is 8000 Hz by RFC 3551's historical
    /// error, although its audio is sampled at 16 kHz.
    pub fn encoding_name(self) -> &'static str {
        match self {
            Codec::Pcmu => "PCMU",
            Codec::Pcma => "PCMA",
            Codec::G722 => "G722",
        }
    }

    /// Samples per second of the audio itself.
    pub fn sample_rate(self) -> u32 {
        match self {
            Codec::G722 => 16_000,
            _ => 8_000,
        }
    }

    /// Audio samples in one 20 ms packet.
    pub fn frame_samples(self) -> usize {
        self.sample_rate() as usize / 50
    }

    /// RTP timestamp units per 20 ms packet: 160 for all three (8000 Hz RTP clock).
    pub const TIMESTAMP_STEP: u32 = 160;

    /// The name the API and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Pcmu => "pcmu",
            Codec::Pcma => "pcma",
            Codec::G722 => "g722",
        }
    }

    /// The codec whose [`Codec::name`] is exactly `name` (a stored one); [`Codec::parse`]
    /// also reads the other spellings a configuration may use.
    pub fn from_name(name: &str) -> Option<Codec> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn parse(name: &str) -> Option<Codec> {
        match name.to_ascii_lowercase().as_str() {
            "pcmu" | "g711u" | "ulaw" => Some(Codec::Pcmu),
            "pcma" | "g711a" | "alaw" => Some(Codec::Pcma),
            "g722" => Some(Codec::G722),
            _ => None,
        }
    }

    pub fn codec_type(self) -> audio_codec::CodecType {
        match self {
            Codec::Pcmu => audio_codec::CodecType::PCMU,
            Codec::Pcma => audio_codec::CodecType::PCMA,
            Codec::G722 => audio_codec::CodecType::G722,
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an SDP body could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SdpError {
    #[error("the SDP body is not UTF-8 text")]
    NotText,
    #[error("the SDP has no audio stream")]
    NoAudio,
    #[error("the SDP has no usable connection address")]
    NoAddress,
    #[error("the SDP line {0:?} is malformed")]
    Malformed(String),
    #[error("no codec in common")]
    NoCommonCodec,
}

/// The parts of a session description Switchboard uses: where the peer wants audio sent and
/// the payload types it offered, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaDescription {
    /// Where to send RTP. Port 0 means the stream is declined.
    pub addr: SocketAddr,
    /// `(payload type, codec)` in the order offered; unknown payload types are left out.
    pub codecs: Vec<(u8, Codec)>,
    /// Whether the peer is on hold (`sendonly`/`inactive`, or a 0.0.0.0 address).
    pub on_hold: bool,
    /// The payload type the peer gave RFC 4733 `telephone-event` at 8000 Hz (keypad digits as
    /// events), if it offered them.
    pub telephone_event: Option<u8>,
}

/// The payload type Switchboard offers `telephone-event` under (the common choice).
pub const TELEPHONE_EVENT: u8 = 101;

impl MediaDescription {
    /// Reads the first audio stream of an SDP body.
    pub fn parse(body: &[u8]) -> Result<MediaDescription, SdpError> {
        let text = std::str::from_utf8(body).map_err(|_| SdpError::NotText)?;
        let mut session_ip: Option<IpAddr> = None;
        let mut media_ip: Option<IpAddr> = None;
        let mut port: Option<u16> = None;
        let mut formats: Vec<u8> = Vec::new();
        let mut rtpmaps: Vec<(u8, String)> = Vec::new();
        let mut in_audio = false;
        let mut seen_audio = false;
        let mut direction_hold = false;
        for raw in text.lines() {
            let line = raw.trim_end_matches('\r');
            let Some((kind, value)) = line.split_once('=') else {
                continue;
            };
            match kind {
                "m" => {
                    if seen_audio {
                        // Only the first audio stream is used; later streams are ignored.
                        in_audio = false;
                        continue;
                    }
                    let mut parts = value.split_ascii_whitespace();
                    if parts.next() != Some("audio") {
                        in_audio = false;
                        continue;
                    }
                    let p = parts
                        .next()
                        .and_then(|p| p.split('/').next())
                        .and_then(|p| p.parse::<u16>().ok())
                        .ok_or_else(|| SdpError::Malformed(line.to_string()))?;
                    let _proto = parts.next();
                    formats = parts.filter_map(|f| f.parse::<u8>().ok()).collect();
                    port = Some(p);
                    in_audio = true;
                    seen_audio = true;
                }
                "c" => {
                    let ip = parse_connection(value)
                        .ok_or_else(|| SdpError::Malformed(line.to_string()))?;
                    if in_audio {
                        media_ip = Some(ip);
                    } else if !seen_audio {
                        session_ip = Some(ip);
                    }
                }
                "a" if in_audio => {
                    if let Some(map) = value.strip_prefix("rtpmap:") {
                        let mut it = map.splitn(2, ' ');
                        if let (Some(pt), Some(enc)) = (it.next(), it.next())
                            && let Ok(pt) = pt.parse::<u8>()
                        {
                            rtpmaps.push((pt, enc.trim().to_string()));
                        }
                    } else if value == "sendonly" || value == "inactive" {
                        direction_hold = true;
                    }
                }
                _ => {}
            }
        }
        let port = port.ok_or(SdpError::NoAudio)?;
        let ip = media_ip.or(session_ip).ok_or(SdpError::NoAddress)?;
        let telephone_event = formats.iter().copied().find(|pt| {
            rtpmaps
                .iter()
                .any(|(p, enc)| p == pt && enc.eq_ignore_ascii_case("telephone-event/8000"))
        });
        let codecs = formats
            .into_iter()
            .filter_map(|pt| codec_of(pt, &rtpmaps).map(|c| (pt, c)))
            .collect();
        Ok(MediaDescription {
            addr: SocketAddr::new(ip, port),
            codecs,
            on_hold: direction_hold || ip.is_unspecified(),
            telephone_event,
        })
    }

    /// The first offered codec that we also support, with the payload type the offer gave it.
    pub fn choose(&self, supported: &[Codec]) -> Result<(u8, Codec), SdpError> {
        self.codecs
            .iter()
            .copied()
            .find(|(_, c)| supported.contains(c))
            .ok_or(SdpError::NoCommonCodec)
    }
}

fn parse_connection(value: &str) -> Option<IpAddr> {
    let mut parts = value.split_ascii_whitespace();
    if parts.next()? != "IN" {
        return None;
    }
    let _family = parts.next()?;
    // A multicast address may carry /ttl; take what comes before it.
    parts.next()?.split('/').next()?.parse().ok()
}

fn codec_of(pt: u8, rtpmaps: &[(u8, String)]) -> Option<Codec> {
    if let Some((_, enc)) = rtpmaps.iter().find(|(p, _)| *p == pt) {
        let mut it = enc.split('/');
        let name = it.next()?.to_ascii_uppercase();
        let rate = it
            .next()
            .and_then(|r| r.parse::<u32>().ok())
            .unwrap_or(8000);
        return match (name.as_str(), rate) {
            ("PCMU", 8000) => Some(Codec::Pcmu),
            ("PCMA", 8000) => Some(Codec::Pcma),
            ("G722", 8000) => Some(Codec::G722),
            _ => None,
        };
    }
    match pt {
        0 => Some(Codec::Pcmu),
        8 => Some(Codec::Pcma),
        9 => Some(Codec::G722),
        _ => None,
    }
}

/// Our side of a negotiated audio stream: where we take audio, the codec and the payload type
/// it was given, and `telephone-event`'s when both sides take digits as events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stream {
    pub addr: SocketAddr,
    pub payload_type: u8,
    pub codec: Codec,
    pub events: Option<u8>,
}

impl Stream {
    /// Its session description (an answer, or a refresh of one).
    pub fn describe(&self, session_id: u64, version: u64) -> String {
        describe(
            self.addr,
            &[(self.payload_type, self.codec)],
            self.events,
            session_id,
            version,
        )
    }
}

/// Writes a session description for one audio stream at `addr` with the given payloads, and
/// `telephone-event` (digits 0-15) under payload type `events` when given. `session_id` and
/// `version` fill the `o=` line (the version grows with each new offer or answer in a dialog).
pub fn describe(
    addr: SocketAddr,
    payloads: &[(u8, Codec)],
    events: Option<u8>,
    session_id: u64,
    version: u64,
) -> String {
    let family = if addr.is_ipv4() { "IP4" } else { "IP6" };
    let ip = addr.ip();
    let mut pts = String::new();
    let mut maps = String::new();
    for (pt, codec) in payloads {
        pts.push(' ');
        pts.push_str(&pt.to_string());
        maps.push_str(&format!("a=rtpmap:{pt} {}/8000\r\n", codec.encoding_name()));
    }
    if let Some(pt) = events {
        pts.push_str(&format!(" {pt}"));
        maps.push_str(&format!(
            "a=rtpmap:{pt} telephone-event/8000\r\na=fmtp:{pt} 0-15\r\n"
        ));
    }
    format!(
        "v=0\r\no=switchboard {session_id} {version} IN {family} {ip}\r\ns=switchboard\r\n\
         c=IN {family} {ip}\r\nt=0 0\r\nm=audio {port} RTP/AVP{pts}\r\n{maps}a=ptime:20\r\na=sendrecv\r\n",
        port = addr.port()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codecs_round_trip_through_their_names() {
        for codec in Codec::ALL {
            assert_eq!(Codec::from_name(codec.name()), Some(codec));
            assert_eq!(serde_json::to_value(codec).unwrap(), codec.name());
        }
        assert_eq!(Codec::from_name("PCMU"), None);
        assert_eq!(Codec::from_name("ulaw"), None);
    }

    const BARESIP: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
        m=audio 10000 RTP/AVP 9 0 8 101\r\na=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\n\
        a=rtpmap:8 PCMA/8000\r\na=rtpmap:101 telephone-event/8000\r\na=sendrecv\r\n";

    #[test]
    fn the_offer_order_decides_the_codec() {
        let d = MediaDescription::parse(BARESIP.as_bytes()).unwrap();
        assert_eq!(d.addr, "127.0.0.1:10000".parse().unwrap());
        assert_eq!(
            d.codecs,
            vec![(9, Codec::G722), (0, Codec::Pcmu), (8, Codec::Pcma)]
        );
        assert_eq!(d.choose(&Codec::ALL), Ok((9, Codec::G722)));
        assert_eq!(d.choose(&[Codec::Pcma, Codec::Pcmu]), Ok((0, Codec::Pcmu)));
        assert!(!d.on_hold);
        assert_eq!(d.telephone_event, Some(101));
    }

    #[test]
    fn dynamic_payload_types_are_read_from_rtpmap() {
        let sdp = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 96 8\r\na=rtpmap:96 opus/48000/2\r\n\
                   m=audio 4002 RTP/AVP 0\r\n";
        let d = MediaDescription::parse(sdp.as_bytes()).unwrap();
        assert_eq!(d.codecs, vec![(8, Codec::Pcma)]);
        assert_eq!(d.addr.port(), 4000);
        assert_eq!(d.telephone_event, None);
        // Events at another clock than the audio's are not taken.
        let wide = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 0 97 96\r\n\
                    a=rtpmap:97 telephone-event/48000\r\na=rtpmap:96 TELEPHONE-EVENT/8000\r\n";
        let d = MediaDescription::parse(wide.as_bytes()).unwrap();
        assert_eq!(d.telephone_event, Some(96));
        let opus_only =
            "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 96\r\na=rtpmap:96 opus/48000/2\r\n";
        let d = MediaDescription::parse(opus_only.as_bytes()).unwrap();
        assert_eq!(d.choose(&Codec::ALL), Err(SdpError::NoCommonCodec));
    }

    #[test]
    fn media_level_connection_wins_and_hold_is_seen() {
        let sdp = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 0\r\nc=IN IP4 10.0.0.2\r\na=sendonly\r\n";
        let d = MediaDescription::parse(sdp.as_bytes()).unwrap();
        assert_eq!(d.addr, "10.0.0.2:4000".parse().unwrap());
        assert!(d.on_hold);
    }

    #[test]
    fn broken_bodies_are_refused_with_a_reason() {
        assert_eq!(MediaDescription::parse(b"\xff\xfe"), Err(SdpError::NotText));
        assert_eq!(
            MediaDescription::parse(b"v=0\r\nc=IN IP4 1.2.3.4\r\n"),
            Err(SdpError::NoAudio)
        );
        assert_eq!(
            MediaDescription::parse(b"v=0\r\nm=audio 4000 RTP/AVP 0\r\n"),
            Err(SdpError::NoAddress)
        );
        assert!(matches!(
            MediaDescription::parse(b"v=0\r\nc=IN IP4 1.2.3.4\r\nm=audio x RTP/AVP 0\r\n"),
            Err(SdpError::Malformed(_))
        ));
    }

    #[test]
    fn an_answer_round_trips() {
        let sdp = describe(
            "192.0.2.7:20000".parse().unwrap(),
            &[(9, Codec::G722)],
            Some(TELEPHONE_EVENT),
            42,
            1,
        );
        let d = MediaDescription::parse(sdp.as_bytes()).unwrap();
        assert_eq!(d.addr, "192.0.2.7:20000".parse().unwrap());
        assert_eq!(d.codecs, vec![(9, Codec::G722)]);
        assert_eq!(d.telephone_event, Some(TELEPHONE_EVENT));
        assert!(sdp.contains("m=audio 20000 RTP/AVP 9 101\r\n"), "{sdp}");
        assert!(sdp.contains("a=rtpmap:9 G722/8000\r\n"));
        assert!(sdp.contains("a=fmtp:101 0-15\r\n"));
    }
}
