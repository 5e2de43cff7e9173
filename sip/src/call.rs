//! A live call of either direction, and the state every live dialog shares.
//!
//! Once answered, an inbound and an outbound call are the same [`Call`]: its dialog, its media
//! and one stream of [`CallEvent`]s. The [`Core`] holds what the server and the dialer share:
//! rsipstack's endpoint and dialog layer, the RTP ports, the local Contacts and the table of
//! live dialogs that in-dialog requests (BYE, re-INVITE, UPDATE, OPTIONS) are answered from.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rsipstack::dialog::DialogId;
use rsipstack::dialog::dialog::{DialogState, DialogStateSender, TerminatedReason};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{self as rsip, Header, StatusCode};
use rsipstack::transaction::endpoint::EndpointInner;
use tokio::sync::mpsc;

use crate::admission::CallCounter;
use crate::headers::{header_has_token, header_value};
use crate::journal::{Crossing, InviteKey, InviteLog};
use crate::media::{self, MediaControl, MediaEvent, MediaHandle};
use crate::rtp::RtpPorts;
use crate::sdp::{self, Codec, MediaDescription};
use crate::settings::SipSettings;

/// Who placed the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// A peer called one of our SIP endpoints.
    Inbound,
    /// We called out through a trunk.
    Outbound,
}

/// Why a call's dialog ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndCause {
    /// The other party sent BYE.
    PeerHangup,
    /// We sent BYE.
    LocalHangup,
    /// The caller cancelled before the answer (inbound).
    PeerCancelled,
    /// The caller never acknowledged the answer (inbound).
    AckTimeout,
    /// The session timer ran out without a refresh (RFC 4028), or our refresh failed.
    SessionExpired,
    /// Anything else the dialog reported.
    Failed,
}

impl EndCause {
    fn of(reason: &TerminatedReason, direction: Direction) -> EndCause {
        // rsipstack names BYEs by the transaction role of their sender: in an inbound call
        // the peer is the UAC, in an outbound one the UAS.
        match (reason, direction) {
            (TerminatedReason::UacBye, Direction::Inbound) => EndCause::PeerHangup,
            (TerminatedReason::UasBye, Direction::Inbound) => EndCause::LocalHangup,
            (TerminatedReason::UasBye, Direction::Outbound) => EndCause::PeerHangup,
            (TerminatedReason::UacBye, Direction::Outbound) => EndCause::LocalHangup,
            (TerminatedReason::UacCancel, Direction::Inbound) => EndCause::PeerCancelled,
            (TerminatedReason::Timeout, Direction::Inbound) => EndCause::AckTimeout,
            _ => EndCause::Failed,
        }
    }
}

/// What happens on a live call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallEvent {
    Media(MediaEvent),
    Ended(EndCause),
}

/// A live dialog, as in-dialog requests are answered from it.
pub(crate) struct LiveDialog {
    pub direction: Direction,
    pub events: EventTx,
    pub media: Option<MediaControl>,
    /// Our media address, and the payload types and codec in use.
    pub answer: sdp::Stream,
    pub session_id: u64,
    pub version: u64,
    /// When the peer last refreshed the session (re-INVITE or UPDATE), for session timers.
    pub refreshed: Instant,
}

/// What the SIP server and the dialer share.
pub(crate) struct Core {
    pub settings: SipSettings,
    pub ports: RtpPorts,
    /// What every call's media adds to (foreign packets), for `/metrics`.
    pub media_counters: Arc<media::MediaCounters>,
    /// The address written into SDP.
    pub media_ip: IpAddr,
    pub endpoint: Arc<EndpointInner>,
    pub dialogs: Arc<DialogLayer>,
    /// Where every dialog, inbound and outbound, reports its states: one channel for all, read
    /// by one loop, rather than a buffer per call.
    pub states: DialogStateSender,
    /// Outbound INVITEs waiting for their answer, by Call-ID: where their provisional
    /// responses go (a 100 tells the dialer the gateway is there, a 183's SDP starts early
    /// media).
    pub dialing: Mutex<HashMap<String, DialingTx>>,
    pub live: Mutex<HashMap<DialogId, LiveDialog>>,
    /// How many entries `live` and `dialing` hold together, kept as they change: what
    /// admission and the UDP gate weigh, read without a lock.
    pub calls: Arc<CallCounter>,
    /// The INVITE journal, when kept.
    pub invite_log: Option<Arc<InviteLog>>,
    /// What the journal of the previous process left live, until the service takes it.
    pub left_over: Mutex<Vec<InviteKey>>,
    /// 2xx answers a restart waits for while it ends an INVITE of a previous process.
    pub crossing: Arc<Crossing>,
    /// Our Contact per transport (`udp`, `tcp`, `tls`).
    pub contacts: HashMap<&'static str, rsip::Uri>,
}

impl Core {
    pub fn insert_live(&self, id: DialogId, dialog: LiveDialog) {
        if let Ok(mut live) = self.live.lock()
            && live.insert(id, dialog).is_none()
        {
            self.calls.add();
        }
    }

    /// Takes a call out of the live table (it ended).
    pub fn remove_live(&self, id: &DialogId) -> Option<LiveDialog> {
        let entry = self.live.lock().ok()?.remove(id)?;
        self.calls.remove();
        Some(entry)
    }

    /// An outbound INVITE waits for its answer; its provisional responses go to `progress`.
    pub fn add_dialing(&self, call_id: String, progress: DialingTx) {
        if let Ok(mut dialing) = self.dialing.lock()
            && dialing.insert(call_id, progress).is_none()
        {
            self.calls.add();
        }
    }

    /// The outbound INVITE with this Call-ID no longer waits.
    pub fn remove_dialing(&self, call_id: &str) {
        if let Ok(mut dialing) = self.dialing.lock()
            && dialing.remove(call_id).is_some()
        {
            self.calls.remove();
        }
    }

    /// Calls on this server now: answered or being answered, and outbound ones ringing.
    pub fn call_count(&self) -> usize {
        self.calls.get()
    }

    pub fn is_live(&self, id: &DialogId) -> bool {
        self.live
            .lock()
            .map(|l| l.contains_key(id))
            .unwrap_or(false)
    }

    pub fn set_media(&self, id: &DialogId, media: MediaControl) {
        if let Ok(mut live) = self.live.lock()
            && let Some(entry) = live.get_mut(id)
        {
            entry.media = Some(media);
        }
    }

    /// The SDP of our side as it is now, with the next version number (a refresh we send).
    pub fn next_offer(&self, id: &DialogId) -> Option<Vec<u8>> {
        let mut live = self.live.lock().ok()?;
        let entry = live.get_mut(id)?;
        entry.version += 1;
        Some(
            entry
                .answer
                .describe(entry.session_id, entry.version)
                .into_bytes(),
        )
    }

    /// When the peer last refreshed the session.
    pub fn refreshed_at(&self, id: &DialogId) -> Option<Instant> {
        self.live.lock().ok()?.get(id).map(|e| e.refreshed)
    }

    /// Tells the call it ended, once (the dialog's own `Terminated` then finds nothing).
    pub fn end(&self, id: &DialogId, cause: EndCause) {
        if let Some(entry) = self.remove_live(id) {
            let _ = entry.events.send(Box::new(CallEvent::Ended(cause)));
        }
    }

    /// Acts on one dialog state change of a live call.
    pub fn on_state(&self, state: DialogState) {
        match state {
            DialogState::Trying(ref id) | DialogState::Early(ref id, _) => {
                let dialing = self
                    .dialing
                    .lock()
                    .ok()
                    .and_then(|d| d.get(&id.call_id).cloned());
                if let Some(dialing) = dialing {
                    let _ = dialing.send(Box::new(state));
                }
            }
            DialogState::Terminated(id, reason) => {
                self.dialogs.remove_dialog(&id);
                let direction = self
                    .live
                    .lock()
                    .ok()
                    .and_then(|l| l.get(&id).map(|e| e.direction));
                if let Some(direction) = direction {
                    self.end(&id, EndCause::of(&reason, direction));
                }
            }
            DialogState::Updated(id, req, handle) => {
                let reply = self.refresh(&id, &req);
                tokio::spawn(async move {
                    let _ = match reply {
                        Ok((body, headers)) => {
                            handle.respond(StatusCode::OK, Some(headers), body).await
                        }
                        Err(code) => handle.respond(code, None, None).await,
                    };
                });
            }
            DialogState::Options(_, _, handle) | DialogState::Info(_, _, handle) => {
                tokio::spawn(async move {
                    let _ = handle.reply(StatusCode::OK).await;
                });
            }
            DialogState::Message(_, _, handle)
            | DialogState::Notify(_, _, handle)
            | DialogState::Refer(_, _, handle)
            | DialogState::Publish(_, _, handle) => {
                tokio::spawn(async move {
                    let _ = handle.reply(StatusCode::NotImplemented).await;
                });
            }
            _ => {}
        }
    }

    /// Answers a re-INVITE or UPDATE (a media change or a session refresh): the same codec at
    /// the same media address, or 488 if the new offer no longer includes it. A new peer
    /// address moves the media there. A request without SDP (an UPDATE that only refreshes
    /// the session) is answered without SDP; a refresh's `Session-Expires` is echoed back.
    fn refresh(
        &self,
        id: &DialogId,
        req: &rsip::Request,
    ) -> Result<(Option<Vec<u8>>, Vec<Header>), StatusCode> {
        let mut live = self
            .live
            .lock()
            .map_err(|_| StatusCode::ServerInternalError)?;
        let entry = live
            .get_mut(id)
            .ok_or(StatusCode::CallTransactionDoesNotExist)?;
        entry.refreshed = Instant::now();
        let mut headers = Vec::new();
        if let Some(se) = header_value(&req.headers, "session-expires") {
            let se = if se.to_ascii_lowercase().contains("refresher=") {
                se
            } else {
                format!("{se};refresher=uac")
            };
            headers.push(Header::Other("Session-Expires".into(), se));
            if header_has_token(&req.headers, "supported", "timer") {
                headers.push(Header::Require("timer".into()));
            }
        }
        let codec = entry.answer.codec;
        if req.body.is_empty() && req.method == rsip::Method::Update {
            return Ok((None, headers));
        }
        if !req.body.is_empty() {
            let offer =
                MediaDescription::parse(&req.body).map_err(|_| StatusCode::NotAcceptableHere)?;
            if !offer.codecs.iter().any(|(_, c)| *c == codec) {
                return Err(StatusCode::NotAcceptableHere);
            }
            if let Some(media) = &entry.media
                && offer.addr.port() != 0
                && !offer.addr.ip().is_unspecified()
            {
                media.retarget(offer.addr);
            }
        }
        entry.version += 1;
        headers.push(sdp_type());
        let body = entry.answer.describe(entry.session_id, entry.version);
        Ok((Some(body.into_bytes()), headers))
    }
}

/// The media task's events, into a call's event stream.
pub(crate) fn event_sink(events: &EventTx) -> media::EventSink {
    let sink = events.clone();
    Box::new(move |e| {
        let _ = sink.send(Box::new(CallEvent::Media(e)));
    })
}

/// Where an outbound INVITE's provisional responses go.
pub(crate) type DialingTx = mpsc::UnboundedSender<Box<DialogState>>;

/// The sending side of a call's event stream.
pub(crate) type EventTx = mpsc::UnboundedSender<Box<CallEvent>>;

/// The receiving side of a call's event stream.
pub(crate) type EventRx = mpsc::UnboundedReceiver<Box<CallEvent>>;

/// A call's event stream. Its events travel boxed: a channel allocates room for 32 messages
/// when it is made, and a call holds its stream for its whole life.
pub(crate) fn event_stream() -> (EventTx, EventRx) {
    mpsc::unbounded_channel()
}

pub(crate) fn sdp_type() -> Header {
    Header::ContentType("application/sdp".into())
}

/// A call's dialog, and how it ended. Dropped before the call ended (its owner failed), it
/// BYEs the dialog; in any case the live entry goes and the session refresher stops. The media
/// stops with its own handle.
struct Teardown {
    core: Arc<Core>,
    id: DialogId,
    dialog: InviteDialog,
    ended: Option<EndCause>,
    refresher: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if let Some(task) = self.refresher.take() {
            task.abort();
        }
        self.core.remove_live(&self.id);
        if let Some(log) = &self.core.invite_log {
            // An outbound call's INVITE is over with its dialog (inbound ones are not in it).
            log.done(&self.id.call_id);
        }
        if self.ended.is_none()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let dialog = self.dialog.clone();
            let dialogs = self.core.dialogs.clone();
            let id = self.id.clone();
            runtime.spawn(async move {
                let _ = dialog.bye().await;
                dialogs.remove_dialog(&id);
            });
        }
    }
}

/// An answered call, inbound or outbound, as the service runs it.
pub struct Call {
    pub direction: Direction,
    /// The SIP Call-ID.
    pub call_id: String,
    /// The calling party: the caller's user part (a number or a name) inbound, our number
    /// outbound.
    pub from: String,
    /// The called party: the slug inbound, the callee's number outbound.
    pub to: String,
    /// The peer's signalling address.
    pub remote: SocketAddr,
    pub codec: Codec,
    pub media: MediaHandle,
    events: EventRx,
    teardown: Teardown,
    /// An inbound call's place among the INVITEs being set up, held until its owner has
    /// recorded it ([`Call::set_up`]) so that admission counts calls the database has yet to
    /// take.
    setup: Option<crate::admission::SetupPermit>,
}

/// The parts a [`Call`] is made of.
pub(crate) struct CallParts {
    pub direction: Direction,
    pub call_id: String,
    pub from: String,
    pub to: String,
    pub remote: SocketAddr,
    pub codec: Codec,
    pub media: MediaHandle,
    pub events: EventRx,
    pub dialog: InviteDialog,
    pub refresher: Option<tokio::task::JoinHandle<()>>,
    pub setup: Option<crate::admission::SetupPermit>,
}

impl Call {
    pub(crate) fn new(core: Arc<Core>, parts: CallParts) -> Call {
        let id = parts.dialog.id();
        Call {
            direction: parts.direction,
            call_id: parts.call_id,
            from: parts.from,
            to: parts.to,
            remote: parts.remote,
            codec: parts.codec,
            media: parts.media,
            events: parts.events,
            teardown: Teardown {
                core,
                id,
                dialog: parts.dialog,
                ended: None,
                refresher: parts.refresher,
            },
            setup: parts.setup,
        }
    }

    /// Says the call is set up (its owner has recorded it): it stops counting among the
    /// INVITEs being set up. Dropping the call does it too.
    pub fn set_up(&mut self) {
        self.setup = None;
    }

    /// The next thing that happens on the call; `None` once it has ended and said so.
    pub async fn next_event(&mut self) -> Option<CallEvent> {
        if self.teardown.ended.is_some() {
            return None;
        }
        let event = self.events.recv().await.map(|event| *event);
        match event {
            Some(CallEvent::Ended(cause)) => self.set_ended(cause),
            None => self.set_ended(EndCause::Failed),
            _ => {}
        }
        event.or(Some(CallEvent::Ended(EndCause::Failed)))
    }

    fn set_ended(&mut self, cause: EndCause) {
        self.teardown.ended = Some(cause);
    }

    /// Ends the call from our side with a BYE (nothing happens if it already ended).
    pub async fn hangup(&mut self) {
        if self.teardown.ended.is_none() {
            self.set_ended(EndCause::LocalHangup);
            let _ = self.teardown.dialog.bye().await;
        }
    }

    /// What transfers the call (REFER on its dialog), usable while the call goes on.
    pub fn transferer(&self) -> crate::transfer::Transferer {
        crate::transfer::Transferer::new(self.teardown.dialog.clone(), self.remote)
    }

    /// How the call ended, once it has.
    pub fn end_cause(&self) -> Option<EndCause> {
        self.teardown.ended
    }

    /// Stops the media and closes the recording.
    pub async fn finish(self) -> Result<media::MediaStats, media::MediaError> {
        let Call {
            media, teardown, ..
        } = self;
        let stats = media.finish().await;
        drop(teardown);
        stats
    }
}
