//! The inbound INVITE path: rate and admission, 100 Trying, the endpoint, the offer, a media
//! port, the dialog, 180 and the ring, 200 with the answer, the media, and the call handed to
//! the router.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{self as rsip, Header, StatusCode};
use rsipstack::transaction::Transaction;

use super::shared::{Answer, InboundRouter, Routing, Shared};
use crate::admission::{Refusal, SetupPermit};
use crate::call::{Call, CallParts, Direction, LiveDialog, event_sink, sdp_type};
use crate::media::{self, MediaConfig};
use crate::sdp::{self, Codec, MediaDescription, SdpError};

impl<R: InboundRouter> Shared<R> {
    /// An out-of-dialog INVITE, from its admission to its answered call (see the module).
    pub(super) async fn invite(self: Arc<Self>, mut tx: Transaction) {
        let Some(source) = source_of(&tx) else {
            let _ = tx.reply(StatusCode::BadRequest).await;
            return;
        };
        let Some(permit) = self.admit(&mut tx, source).await else {
            return;
        };
        // Taken: the caller stops retransmitting while the call is set up.
        let _ = tx.send_trying().await;
        let slug = tx.original.uri.user().unwrap_or_default().to_string();
        let Some(answer) = self.route(&mut tx, &slug, source).await else {
            return;
        };
        let Some((offer, payload_type, codec)) = offer(&mut tx).await else {
            return;
        };
        let socket = match self.core.ports.bind().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "no RTP port for an inbound call");
                self.admission.refused(Refusal::RtpPorts);
                self.unavailable(&mut tx).await;
                return;
            }
        };
        let transport = tx
            .connection
            .as_ref()
            .map(|c| c.transport())
            .unwrap_or(rsip::Transport::Udp);
        let contact_key = match transport {
            rsip::Transport::Tcp => "tcp",
            rsip::Transport::Tls => "tls",
            _ => "udp",
        };
        let contact = self.core.contacts.get(contact_key).cloned();
        let mut dialog = match self.core.dialogs.get_or_create_server_invite(
            &tx,
            self.core.states.clone(),
            None,
            contact,
        ) {
            Ok(d) => d,
            Err(_) => {
                // No Contact header, or a malformed From/To.
                let _ = tx.reply(StatusCode::BadRequest).await;
                return;
            }
        };
        let id = dialog.id();
        let local = match socket.local_addr() {
            Ok(a) => SocketAddr::new(self.core.media_ip, a.port()),
            Err(_) => {
                let _ = tx.reply(StatusCode::ServerInternalError).await;
                return;
            }
        };
        let session_id: u64 = rand::random::<u32>().into();
        let stream = sdp::Stream {
            addr: local,
            payload_type,
            codec,
            events: offer.telephone_event,
        };
        let (events_tx, events_rx) = crate::call::event_stream();
        let core = &self.core;
        core.insert_live(
            id.clone(),
            LiveDialog {
                direction: Direction::Inbound,
                events: events_tx.clone(),
                media: None,
                answer: stream,
                session_id,
                version: 1,
                refreshed: Instant::now(),
            },
        );
        let control = dialog.clone();
        tokio::spawn(async move {
            let _ = dialog.handle(&mut tx).await;
        });
        let _ = control.ringing(None, None);
        tokio::time::sleep(core.settings.ring).await;
        if !core.is_live(&id) {
            // Cancelled while ringing.
            return;
        }
        let body = stream.describe(session_id, 1);
        if control
            .accept(Some(vec![sdp_type()]), Some(body.into_bytes()))
            .is_err()
        {
            return;
        }
        let media = match media::start(
            socket,
            MediaConfig {
                codec,
                payload_type,
                telephone_event: offer.telephone_event,
                remote: offer.addr,
                recording: answer.recording,
                vad: answer.vad,
                jitter_depth: core.settings.jitter_depth,
                counters: core.media_counters.clone(),
            },
            event_sink(&events_tx),
        )
        .await
        {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "inbound call media did not start");
                let _ = control.bye().await;
                return;
            }
        };
        core.set_media(&id, media.control());
        let from = tx_from(&control);
        let call = Call::new(
            core.clone(),
            CallParts {
                direction: Direction::Inbound,
                call_id: id.call_id.clone(),
                from,
                to: slug,
                remote: source,
                codec,
                media,
                events: events_rx,
                dialog: control,
                refresher: None,
                // Until the router has recorded the call (`Call::set_up`).
                setup: Some(permit),
            },
        );
        self.router.run_call(answer.target, call).await;
    }

    /// The source's INVITE rate and admission, unless the UDP gate decided them: the
    /// permit of an INVITE taken, or `None` once it has been refused (or dropped).
    async fn admit(&self, tx: &mut Transaction, source: SocketAddr) -> Option<SetupPermit> {
        // Over UDP the gate has usually decided already (source rate and admission): it
        // refused at the socket what it would refuse, and what it let through is taken.
        let decided = self.gate.passed_request(&tx.original);
        let allowed = decided || {
            let Some(allowed) = self.limiter.allow(source.ip()) else {
                // The rate cannot be told (a poisoned lock): refused, not let through.
                self.admission.refused(Refusal::Internal);
                self.unavailable(tx).await;
                return None;
            };
            allowed
        };
        if !allowed {
            // Over UDP the INVITE is dropped unanswered: the caller's own retransmissions
            // retry it after the window, a spoofed flood gets nothing reflected, and a scanner
            // cannot tell an over-limit INVITE from any other. Over TCP and TLS (no
            // retransmissions, no spoofing) the caller is told to come back.
            let reliable = tx.connection.as_ref().is_some_and(|c| c.is_reliable());
            if reliable {
                let retry = Header::RetryAfter("1".into());
                let _ = tx
                    .reply_with(StatusCode::ServiceUnavailable, vec![retry], None)
                    .await;
            }
            return None;
        }
        // Before any lookup, SDP or media: is there room for this call at all?
        let admitted = match decided {
            true => Ok(self.admission.admit_decided()),
            false => self.admission.admit(self.core.call_count()),
        };
        let permit = match admitted {
            Ok(permit) => permit,
            Err(why) => {
                tracing::debug!(reason = why.as_str(), "an INVITE was refused");
                self.unavailable(tx).await;
                return None;
            }
        };
        Some(permit)
    }

    /// The endpoint `slug` names, for a caller at `source`; `None` once refused.
    async fn route(
        &self,
        tx: &mut Transaction,
        slug: &str,
        source: SocketAddr,
    ) -> Option<Answer<R::Target>> {
        match self.router.route(slug, source.ip()).await {
            Routing::Unknown => {
                let _ = tx.reply(StatusCode::NotFound).await;
                None
            }
            Routing::Forbidden => {
                let _ = tx.reply(StatusCode::Forbidden).await;
                None
            }
            Routing::Busy => {
                self.unavailable(tx).await;
                None
            }
            Routing::Full => {
                let _ = tx.reply(StatusCode::BusyHere).await;
                None
            }
            Routing::Answer(answer) => Some(answer),
        }
    }
}

impl<R: InboundRouter> Shared<R> {
    /// Refuses an INVITE the server cannot take now: 503 with `Retry-After`.
    async fn unavailable(&self, tx: &mut Transaction) {
        let retry = self.admission.settings().retry_after_secs;
        let retry = Header::RetryAfter(retry.to_string().into());
        let _ = tx
            .reply_with(StatusCode::ServiceUnavailable, vec![retry], None)
            .await;
    }
}

fn tx_from(dialog: &InviteDialog) -> String {
    let req = dialog.initial_request();
    match req.from_header().ok().and_then(|f| f.uri().ok()) {
        Some(uri) => match uri.user() {
            Some(user) => user.to_string(),
            None => uri.to_string(),
        },
        None => String::new(),
    }
}

/// The caller's SDP offer and the codec chosen from it; `None` once refused (400 for a broken
/// body, 488 without a common codec or a media port).
async fn offer(tx: &mut Transaction) -> Option<(MediaDescription, u8, Codec)> {
    let offer = match MediaDescription::parse(&tx.original.body) {
        Ok(offer) => offer,
        Err(SdpError::NotText | SdpError::Malformed(_)) if !tx.original.body.is_empty() => {
            let _ = tx.reply(StatusCode::BadRequest).await;
            return None;
        }
        Err(_) => {
            let _ = tx.reply(StatusCode::NotAcceptableHere).await;
            return None;
        }
    };
    let Ok((payload_type, codec)) = offer.choose(&Codec::ALL) else {
        let _ = tx.reply(StatusCode::NotAcceptableHere).await;
        return None;
    };
    if offer.addr.port() == 0 {
        let _ = tx.reply(StatusCode::NotAcceptableHere).await;
        return None;
    }
    Some((offer, payload_type, codec))
}

fn source_of(tx: &Transaction) -> Option<SocketAddr> {
    tx.connection
        .as_ref()
        .and_then(|c| c.get_remote_addr())
        .and_then(|a| a.get_socketaddr().ok())
}
