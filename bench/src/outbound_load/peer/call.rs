//! One call's task: its legs as the peer plays them (busy, ringing until cancelled, or answered
//! after the ring), its RTP (a person's hello then the echo, or a machine's greeting), its end
//! (the caller's BYE or the peer's after the hold cap) and the retransmissions around them.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use switchboard_sip::rtp::LossCounter;
use switchboard_sip::sdp::{self, MediaDescription};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use super::mix::Kind;
use super::shared::{PeerCall, Shared};
use crate::outbound_load::sipmsg::Msg;
use crate::rtp::{RtpOut, rtp_payload};

/// SIP's T1, the first retransmission interval.
const T1: Duration = Duration::from_millis(500);
/// How long a call's task stays after its end to answer retransmissions.
const LINGER: Duration = Duration::from_secs(4);

/// What came while waiting for an ACK.
enum Waited {
    Ack,
    Bye(Msg),
    Cancel(Msg),
    Timeout,
}

/// How a call's media runs.
struct Media {
    rtp: UdpSocket,
    remote: SocketAddr,
    payload_type: u8,
    sdp: String,
}

/// One call as its task plays it, from the INVITE to a while after its end.
pub(super) struct Call {
    pub(super) sh: Arc<Shared>,
    pub(super) src: SocketAddr,
    pub(super) tag: String,
    pub(super) ended: Arc<AtomicBool>,
    pub(super) from: Arc<str>,
    pub(super) record: PeerCall,
    pub(super) invite: Msg,
    pub(super) rx: mpsc::UnboundedReceiver<Msg>,
}

impl Call {
    async fn reply(&self, msg: &Msg, code: u16, reason: &str, extra: &str, body: &str) -> String {
        let text = msg.response(code, reason, &self.tag, extra, body);
        self.sh.send(&text, self.src).await;
        text
    }

    fn end_pacing(&self) {
        self.sh.end(&self.ended, &self.from);
    }

    pub(super) async fn run(mut self) {
        let invite = self.invite.clone();
        self.reply(&invite, 100, "Trying", "", "").await;
        self.record.end = match self.record.kind {
            Kind::Busy => {
                self.end_pacing();
                let text = self.reply(&invite, 486, "Busy Here", "", "").await;
                self.until_ack(&text).await;
                "rejected"
            }
            Kind::NoAnswer => self.ring_out().await,
            Kind::Answer | Kind::Machine => self.answer().await,
        };
        self.end_pacing();
        self.record.ended_at = Instant::now();
        if self.record.answered_at.is_some() {
            self.sh.live.talking.fetch_sub(1, Ordering::Relaxed);
        }
        let live = &self.sh.live;
        live.rtp_sent
            .fetch_add(self.record.rtp_sent, Ordering::Relaxed);
        live.rtp_received
            .fetch_add(self.record.rtp_received, Ordering::Relaxed);
        live.rtp_lost
            .fetch_add(self.record.rtp_lost, Ordering::Relaxed);
        self.sh.calls.lock().unwrap().push(self.record.clone());
        // Answer retransmissions for a while, then forget the call.
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        loop {
            tokio::select! {
                _ = &mut linger => break,
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("BYE") || m.is("CANCEL") => {
                        self.reply(&m, 200, "OK", "", "").await;
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        self.sh.routes.lock().unwrap().remove(&self.record.call_id);
    }

    /// Retransmits a final response to the INVITE until its ACK (RFC 3261 timers G and H).
    async fn until_ack(&mut self, text: &str) -> Waited {
        let give_up = tokio::time::Instant::now() + T1 * 64;
        let mut every = T1;
        let mut next = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(give_up) => return Waited::Timeout,
                _ = tokio::time::sleep_until(next) => {
                    self.sh.send(text, self.src).await;
                    every = (every * 2).min(Duration::from_secs(4));
                    next = tokio::time::Instant::now() + every;
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("ACK") => return Waited::Ack,
                    Some(m) if m.is("INVITE") => self.sh.send(text, self.src).await,
                    Some(m) if m.is("BYE") => return Waited::Bye(m),
                    Some(m) if m.is("CANCEL") => return Waited::Cancel(m),
                    Some(_) => {}
                    None => return Waited::Timeout,
                },
            }
        }
    }

    /// The caller cancelled a ringing call: 200 for the CANCEL, 487 for the INVITE.
    async fn cancelled(&mut self, cancel: &Msg) -> &'static str {
        self.reply(cancel, 200, "OK", "", "").await;
        let invite = self.invite.clone();
        let text = self.reply(&invite, 487, "Request Terminated", "", "").await;
        self.until_ack(&text).await;
        "cancelled"
    }

    /// Rings until the caller gives up.
    async fn ring_out(&mut self) -> &'static str {
        let invite = self.invite.clone();
        let ringing = self.reply(&invite, 180, "Ringing", "", "").await;
        let cap = tokio::time::sleep(self.sh.cfg.ring_cap);
        tokio::pin!(cap);
        loop {
            tokio::select! {
                _ = &mut cap => {
                    self.end_pacing();
                    let text = self.reply(&invite, 480, "Temporarily Unavailable", "", "").await;
                    self.until_ack(&text).await;
                    return "rejected";
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("CANCEL") => return self.cancelled(&m).await,
                    Some(m) if m.is("INVITE") => self.sh.send(&ringing, self.src).await,
                    Some(_) => {}
                    None => return "cancelled",
                },
            }
        }
    }

    /// The media socket and answer for the INVITE's offer.
    async fn media(&self) -> Result<Media, String> {
        let offer =
            MediaDescription::parse(self.invite.body.as_bytes()).map_err(|e| e.to_string())?;
        let codec = self.sh.cfg.codec;
        let payload_type = offer
            .codecs
            .iter()
            .find(|(_, c)| *c == codec)
            .map(|(pt, _)| *pt)
            .ok_or("the offer lacks the peer's codec")?;
        let rtp = UdpSocket::bind((self.sh.cfg.ip, 0))
            .await
            .map_err(|e| e.to_string())?;
        let local = rtp.local_addr().map_err(|e| e.to_string())?;
        // The load peer takes no keypad events.
        let sdp = sdp::describe(
            local,
            &[(payload_type, codec)],
            None,
            rand::random::<u32>().into(),
            1,
        );
        Ok(Media {
            rtp,
            remote: offer.addr,
            payload_type,
            sdp,
        })
    }

    async fn answer(&mut self) -> &'static str {
        let invite = self.invite.clone();
        let media = match self.media().await {
            Ok(m) => m,
            Err(e) => {
                eprintln!("peer: refused the offer of {}: {e}", self.record.call_id);
                self.end_pacing();
                let text = self
                    .reply(&invite, 488, "Not Acceptable Here", "", "")
                    .await;
                self.until_ack(&text).await;
                return "bad_offer";
            }
        };
        let ringing = self.reply(&invite, 180, "Ringing", "", "").await;
        let ring = tokio::time::sleep(self.sh.cfg.ring);
        tokio::pin!(ring);
        loop {
            tokio::select! {
                _ = &mut ring => break,
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("CANCEL") => return self.cancelled(&m).await,
                    Some(m) if m.is("INVITE") => self.sh.send(&ringing, self.src).await,
                    Some(_) => {}
                    None => return "cancelled",
                },
            }
        }
        let contact = format!(
            "Contact: <sip:peer@{}>\r\nContent-Type: application/sdp\r\n",
            self.sh.addr
        );
        let ok = self.reply(&invite, 200, "OK", &contact, &media.sdp).await;
        self.record.answered_at = Some(Instant::now());
        self.sh.live.talking.fetch_add(1, Ordering::Relaxed);
        match self.until_ack(&ok).await {
            Waited::Ack => self.record.ack_at = Some(Instant::now()),
            Waited::Bye(bye) => {
                self.reply(&bye, 200, "OK", "", "").await;
                return "caller_bye";
            }
            // A CANCEL that crossed our 200: the INVITE is answered; its BYE follows.
            Waited::Cancel(cancel) => {
                self.reply(&cancel, 200, "OK", "", "").await;
            }
            Waited::Timeout => {
                self.end_pacing();
                self.hang_up().await;
                return "no_ack";
            }
        }
        self.talk(media, &ok, &contact).await
    }

    /// Echoes (or plays the greeting) until either side hangs up.
    async fn talk(&mut self, media: Media, ok: &str, contact: &str) -> &'static str {
        let machine = self.record.kind == Kind::Machine;
        // A person says hello and then echoes what they hear; a machine plays its greeting.
        let intro = if machine {
            &self.sh.cfg.greeting
        } else {
            &self.sh.cfg.hello
        };
        let mut loss = LossCounter::default();
        let mut out = RtpOut::new(media.payload_type);
        let mut buf = [0u8; 2048];
        let mut remote = media.remote;
        let mut latched = false;
        let mut frame = 0usize;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let cap = tokio::time::sleep(self.sh.cfg.hold_cap);
        tokio::pin!(cap);
        let end = loop {
            let speaking = machine || frame < intro.len();
            tokio::select! {
                got = media.rtp.recv_from(&mut buf) => {
                    let Ok((n, from)) = got else { continue };
                    let Some(payload) = rtp_payload(&buf[..n]) else { continue };
                    if self.record.first_rtp_at.is_none() {
                        self.record.first_rtp_at = Some(Instant::now());
                    }
                    loss.record(u16::from_be_bytes([buf[2], buf[3]]));
                    if !latched {
                        remote = from;
                        latched = true;
                    }
                    if !speaking {
                        // The echo: what came, in our own stream (sequence and timing go on).
                        let _ = media.rtp.send_to(out.packet(payload), from).await;
                    }
                }
                _ = tick.tick(), if speaking => {
                    let payload = intro.get(frame).unwrap_or(&self.sh.silence);
                    let _ = media.rtp.send_to(out.packet(payload), remote).await;
                    frame += 1;
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("BYE") => {
                        self.reply(&m, 200, "OK", "", "").await;
                        break "caller_bye";
                    }
                    Some(m) if m.is("INVITE") && !m.has_to_tag() => self.sh.send(ok, self.src).await,
                    Some(m) if m.is("INVITE") => {
                        // A re-INVITE (session refresh): the same media.
                        self.reply(&m, 200, "OK", contact, &media.sdp).await;
                    }
                    Some(m) if m.is("UPDATE") || m.is("OPTIONS") || m.is("INFO") => {
                        self.reply(&m, 200, "OK", "", "").await;
                    }
                    Some(m) if m.is("ACK") && self.record.ack_at.is_none() => {
                        self.record.ack_at = Some(Instant::now());
                    }
                    Some(_) => {}
                    None => break "caller_bye",
                },
                _ = &mut cap => {
                    self.end_pacing();
                    self.hang_up().await;
                    break "peer_bye";
                }
            }
        };
        self.record.rtp_sent = out.sent;
        self.record.rtp_received = loss.received;
        self.record.rtp_lost = loss.lost();
        end
    }

    /// Our BYE, retransmitted until answered (timer E; 32 s at most).
    async fn hang_up(&mut self) {
        let bye = self.invite.bye(self.sh.addr, &self.tag, 1);
        let target = self
            .invite
            .contact_uri()
            .and_then(|uri| contact_addr(&uri))
            .unwrap_or(self.src);
        let give_up = tokio::time::Instant::now() + T1 * 64;
        let mut every = T1;
        loop {
            self.sh.send(&bye, target).await;
            let wait = (tokio::time::Instant::now() + every).min(give_up);
            loop {
                match tokio::time::timeout_at(wait, self.rx.recv()).await {
                    Ok(Some(m)) if m.code >= 200 && m.cseq_method() == "BYE" => return,
                    Ok(Some(m)) if m.is("BYE") => {
                        self.reply(&m, 200, "OK", "", "").await;
                        return;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            if tokio::time::Instant::now() >= give_up {
                return;
            }
            every = (every * 2).min(Duration::from_secs(4));
        }
    }
}

/// The address of a `sip:user@host:port;params` URI with an IP host.
fn contact_addr(uri: &str) -> Option<SocketAddr> {
    let rest = uri.split_once(':')?.1;
    let host_port = rest.rsplit('@').next()?.split(';').next()?;
    if let Ok(addr) = host_port.parse::<SocketAddr>() {
        return Some(addr);
    }
    let ip: IpAddr = host_port.trim_matches(['[', ']']).parse().ok()?;
    Some(SocketAddr::new(ip, 5060))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_addresses() {
        assert_eq!(
            contact_addr("sip:127.0.0.1:5070;transport=udp"),
            Some("127.0.0.1:5070".parse().unwrap())
        );
        assert_eq!(
            contact_addr("sip:sb@10.0.0.2"),
            Some("10.0.0.2:5060".parse().unwrap())
        );
        assert_eq!(contact_addr("sip:sb@example.com"), None);
    }
}
