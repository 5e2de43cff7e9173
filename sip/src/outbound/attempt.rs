//! One INVITE to one target, to its end or to the answer: the INVITE built by the trunk's
//! rules, the wait for the far end (provisional responses, early media, the response timeout,
//! the ring timeout and its CANCEL, the deadline after the CANCEL), the final response read
//! into an outcome, and an answer connected to its media, session timer and [`Call`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rsipstack::dialog::DialogId;
use rsipstack::dialog::authenticate::Credential;
use rsipstack::dialog::dialog::DialogState;
use rsipstack::dialog::invitation::{InviteAsyncResult, InviteOption};
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{self as rsip, Header, StatusCode, StatusCodeKind};
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::media::Media;
use super::resolve::{Target, host_port, uri, uri_user};
use super::session_timer::{drive, session_timer};
use super::{
    Answered, Attempt, DialFailure, DialPlan, FailureKind, MIN_SE, SESSION_EXPIRES, SipClient,
};
use crate::call::{Call, CallParts, Core, Direction, LiveDialog};
use crate::headers::header_value;
use crate::trunk::TrunkTransport;

/// Which gateway a failure names, and since when the dial runs.
pub(super) struct Failing<'a> {
    pub gateway: &'a str,
    pub started: Instant,
}

impl Failing<'_> {
    pub fn fail(&self, kind: FailureKind, detail: String, early_media: bool) -> DialFailure {
        DialFailure {
            kind,
            sip_code: None,
            reason_phrase: None,
            q850_cause: None,
            gateway: Some(self.gateway.to_string()),
            detail,
            elapsed: self.started.elapsed(),
            early_media,
            recorded: false,
        }
    }
}

/// An answered INVITE, as [`SipClient::connect`] takes it.
struct Dialled {
    dialog: InviteDialog,
    id: DialogId,
    resp: rsip::Response,
    events: (crate::call::EventTx, crate::call::EventRx),
    journaled: Journaled,
}

impl SipClient {
    /// One INVITE to one target, to its end or to the answer.
    pub(super) async fn attempt(
        &self,
        plan: &DialPlan,
        target: &Target,
        media: &mut Media,
        cancel: &CancellationToken,
        started: Instant,
    ) -> Attempt {
        let core = &self.core;
        let failing = Failing {
            gateway: &target.gateway,
            started,
        };
        let option = match invite_option(core, plan, target, media) {
            Ok(option) => option,
            Err(e) => return Attempt::Final(failing.fail(FailureKind::Local, e, false)),
        };
        let call_id = option.call_id.clone().unwrap_or_default();
        // The INVITE's provisional responses come through the shared state loop, to here.
        let (progress_tx, mut progress) = mpsc::unbounded_channel();
        let _dialing = Dialing::register(core, call_id, progress_tx);
        let (dialog, mut invite) = match core.dialogs.do_invite_async(option, core.states.clone()) {
            Ok(started) => started,
            Err(e) => {
                return Attempt::Next(failing.fail(FailureKind::Transport, e.to_string(), false));
            }
        };
        // Dropped before a final response (the dial's owner went away): CANCEL, so nothing
        // keeps ringing the callee.
        let mut pending = CancelOnDrop(Some(dialog.clone()));
        // The journal's entry (written as the INVITE left) is dropped with a failed attempt,
        // and kept for an answered call until its dialog ends.
        let journaled = Journaled(core.invite_log.clone(), Some(call_id_of(&dialog)));
        let (events_tx, events_rx) = crate::call::event_stream();
        let attempt_start = tokio::time::Instant::now();
        let ring_deadline = tokio::time::Instant::from_std(started + plan.ring_timeout);
        let response_deadline = attempt_start + plan.response_timeout;
        let mut heard = false;
        let mut cancelled: Option<FailureKind> = None;
        // Once we CANCEL, the INVITE gets one transaction expiry (64 x T1 by RFC 3261 §9.1)
        // to end, whatever the far end does with our CANCEL.
        let mut given_up_at = ring_deadline;
        let result = loop {
            tokio::select! {
                result = &mut invite => break result,
                Some(state) = progress.recv() => match *state {
                    DialogState::Trying(_) => heard = true,
                    DialogState::Early(_, resp) => {
                        heard = true;
                        if let Some(ringing) = &plan.on_ringing {
                            ringing();
                        }
                        if !resp.body.is_empty()
                            && let Err(e) = media.start(&resp.body, &events_tx).await
                        {
                            tracing::debug!(error = %e, "early media not started");
                        }
                    }
                    _ => {}
                },
                _ = tokio::time::sleep_until(response_deadline), if !heard && cancelled.is_none() => {
                    // Nothing from this target: leave it (its transaction ends on its own).
                    invite.abort();
                    return Attempt::Next(failing.fail(FailureKind::NoResponse, format!("no response from {} in {:?}", target.gateway, plan.response_timeout), false));
                }
                _ = tokio::time::sleep_until(ring_deadline), if cancelled.is_none() && !heard => {
                    // Nothing at all from this target, which a CANCEL could not reach either.
                    invite.abort();
                    return Attempt::Final(failing.fail(FailureKind::NoResponse, format!("no response from {} within the ring timeout", target.gateway), false));
                }
                _ = tokio::time::sleep_until(ring_deadline), if cancelled.is_none() && heard => {
                    cancelled = Some(FailureKind::RingTimeout);
                    given_up_at = send_cancel(&dialog, core.settings.transaction_expiry());
                }
                _ = cancel.cancelled(), if cancelled.is_none() => {
                    cancelled = Some(FailureKind::Cancelled);
                    given_up_at = send_cancel(&dialog, core.settings.transaction_expiry());
                }
                _ = tokio::time::sleep_until(given_up_at), if cancelled.is_some() => {
                    // Our CANCEL was answered (or not) and the INVITE never ended: give it up.
                    invite.abort();
                    pending.0 = None;
                    core.dialogs.remove_dialog(&dialog.id());
                    let kind = cancelled.unwrap_or(FailureKind::RingTimeout);
                    return Attempt::Final(failing.fail(
                        kind,
                        format!(
                            "cancelled; no final response from {} within {:?} of the CANCEL",
                            target.gateway,
                            core.settings.transaction_expiry()
                        ),
                        media.running.is_some(),
                    ));
                }
            }
        };
        let early_media = media.running.is_some();
        let (id, resp) = match settle(
            result,
            &mut pending,
            (heard, cancelled),
            early_media,
            &failing,
        ) {
            Ok(answer) => answer,
            Err(attempt) => return attempt,
        };
        let dialled = Dialled {
            dialog,
            id,
            resp,
            events: (events_tx, events_rx),
            journaled,
        };
        self.connect(plan, target, media, dialled, &failing).await
    }

    /// The answered INVITE: the media on the answer's SDP (or the early one), the live dialog,
    /// the journal's entry with the callee's tag, the session timer, and the call.
    async fn connect(
        &self,
        plan: &DialPlan,
        target: &Target,
        media: &mut Media,
        dialled: Dialled,
        failing: &Failing<'_>,
    ) -> Attempt {
        let core = &self.core;
        let Dialled {
            dialog,
            id,
            resp,
            events: (events_tx, events_rx),
            mut journaled,
        } = dialled;
        let early_media = media.running.is_some();
        let code = u16::from(resp.status_code.clone());
        let phrase = resp.status_code.text().to_string();
        // Answered: the media runs on the answer's SDP (or the early one).
        let sdp_result = if resp.body.is_empty() {
            if early_media {
                Ok(())
            } else {
                Err("the answer has no SDP".to_string())
            }
        } else {
            media.start(&resp.body, &events_tx).await
        };
        if let Err(e) = sdp_result {
            let _ = dialog.bye().await;
            core.dialogs.remove_dialog(&id);
            return Attempt::Final(DialFailure {
                sip_code: Some(code),
                reason_phrase: Some(phrase),
                ..failing.fail(FailureKind::Local, e, early_media)
            });
        }
        let Some((handle, stream)) = media.running.take() else {
            let _ = dialog.bye().await;
            core.dialogs.remove_dialog(&id);
            return Attempt::Final(failing.fail(
                FailureKind::Local,
                "the media did not start".into(),
                early_media,
            ));
        };
        core.insert_live(
            id.clone(),
            LiveDialog {
                direction: Direction::Outbound,
                events: events_tx,
                media: Some(handle.control()),
                answer: stream,
                session_id: media.session_id,
                version: 1,
                refreshed: Instant::now(),
            },
        );
        let timer = session_timer(&resp);
        let refresher = tokio::spawn(drive(
            core.clone(),
            dialog.clone(),
            id.clone(),
            timer,
            TransactionKey::from_response(&resp, TransactionRole::Client).ok(),
        ));
        let remote = target
            .addr
            .get_socketaddr()
            .unwrap_or_else(|_| SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0));
        let call = Call::new(
            core.clone(),
            CallParts {
                direction: Direction::Outbound,
                call_id: id.call_id.clone(),
                from: plan.from_number.clone(),
                to: plan.to_number.clone(),
                remote,
                codec: stream.codec,
                media: handle,
                events: events_rx,
                dialog,
                refresher: Some(refresher),
                setup: None,
            },
        );
        // The call's dialog ends its journal entry (`Teardown`).
        journaled.1 = None;
        Attempt::Answered(Box::new(Answered {
            call,
            gateway: target.gateway.clone(),
            ring: failing.started.elapsed(),
            early_media,
        }))
    }
}

/// What the INVITE's end came to: the answer (its dialog and 2xx), or the attempt's end. `heard`
/// says whether the target answered anything before; `cancelled`, whether (and why) we
/// CANCELled.
fn settle(
    result: Result<InviteAsyncResult, tokio::task::JoinError>,
    pending: &mut CancelOnDrop,
    (heard, cancelled): (bool, Option<FailureKind>),
    early_media: bool,
    failing: &Failing<'_>,
) -> Result<(DialogId, rsip::Response), Attempt> {
    if matches!(result, Ok(Ok((_, Some(_))))) {
        // A final response ended the INVITE; anything else leaves it to the CANCEL on drop
        // (the callee may be ringing still).
        pending.0 = None;
    }
    let (id, resp) = match result {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => {
            let f = failing.fail(FailureKind::Transport, e.to_string(), early_media);
            // Once the target has answered anything, the callee may be ringing there: no
            // other target is tried.
            return Err(if early_media || cancelled.is_some() || heard {
                Attempt::Final(DialFailure {
                    kind: cancelled.unwrap_or(FailureKind::Transport),
                    ..f
                })
            } else {
                Attempt::Next(f)
            });
        }
        Err(e) => {
            return Err(Attempt::Final(failing.fail(
                FailureKind::Local,
                format!("the INVITE task failed: {e}"),
                early_media,
            )));
        }
    };
    let Some(resp) = resp else {
        let f = failing.fail(
            cancelled.unwrap_or(FailureKind::NoResponse),
            format!("no final response from {}", failing.gateway),
            early_media,
        );
        return Err(if early_media || cancelled.is_some() {
            Attempt::Final(f)
        } else {
            Attempt::Next(f)
        });
    };
    let code = u16::from(resp.status_code.clone());
    let phrase = resp.status_code.text().to_string();
    if let Some(kind) = cancelled {
        // Our CANCEL ended it (487), or a 200 OK crossed it and rsipstack has ACKed and BYEd
        // that answer: either way nobody was connected.
        return Err(Attempt::Final(DialFailure {
            kind,
            sip_code: Some(code),
            reason_phrase: Some(phrase),
            q850_cause: q850_cause(&resp),
            ..failing.fail(
                kind,
                format!("cancelled; the far end answered {code}"),
                early_media,
            )
        }));
    }
    if resp.status_code.kind() != StatusCodeKind::Successful {
        let f = DialFailure {
            sip_code: Some(code),
            reason_phrase: Some(phrase),
            q850_cause: q850_cause(&resp),
            ..failing.fail(FailureKind::Response, format!("{code}"), early_media)
        };
        let retry_elsewhere = matches!(resp.status_code.kind(), StatusCodeKind::ServerFailure)
            || resp.status_code == StatusCode::RequestTimeout && !heard;
        return Err(if retry_elsewhere && !early_media {
            Attempt::Next(f)
        } else {
            Attempt::Final(f)
        });
    }
    Ok((id, resp))
}

/// The INVITE to `target` for `plan`, offering `media`'s SDP: From and To by the trunk's
/// rules, our Contact for the target's transport, session timers asked for, the trunk's
/// extra headers and credentials.
fn invite_option(
    core: &Core,
    plan: &DialPlan,
    target: &Target,
    media: &Media,
) -> Result<InviteOption, String> {
    let trunk = &plan.trunk;
    let from_host = trunk.from_host().unwrap_or(&target.host).to_string();
    let caller = uri(&format!(
        "sip:{}@{}",
        uri_user(&trunk.from_user_for(&plan.from_number)),
        host_port(&from_host, None)
    ));
    let callee = uri(&format!(
        "sip:{}@{}",
        uri_user(&trunk.request_user_for(&plan.to_number)),
        host_port(&target.host, target.port)
    ));
    let (caller, callee) = match (caller, callee) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return Err(e);
        }
    };
    let contact_key = match target.transport {
        TrunkTransport::Udp => "udp",
        TrunkTransport::Tcp => "tcp",
        TrunkTransport::Tls => "tls",
    };
    let Some(contact) = core.contacts.get(contact_key).cloned() else {
        return Err(format!("SIP over {contact_key} is not configured"));
    };
    let mut headers = vec![
        Header::Supported("timer".into()),
        Header::Other(
            "Session-Expires".into(),
            SESSION_EXPIRES.as_secs().to_string(),
        ),
        Header::Other("Min-SE".into(), MIN_SE.as_secs().to_string()),
    ];
    headers.extend(
        trunk
            .headers
            .iter()
            .map(|h| Header::Other(h.name.clone(), h.value.clone())),
    );
    let credential = match (&trunk.username, &trunk.password) {
        (Some(username), Some(password)) => Some(Credential {
            username: username.clone(),
            password: password.expose().to_string(),
            realm: None,
            auth_username: trunk.auth_username.clone(),
        }),
        _ => None,
    };
    let call_id = plan
        .call_id
        .clone()
        .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
    Ok(InviteOption {
        caller,
        callee,
        destination: Some(target.addr.clone()),
        content_type: Some("application/sdp".into()),
        offer: Some(media.offer()),
        contact,
        credential,
        headers: Some(headers),
        support_prack: true,
        call_id: Some(call_id),
        ..Default::default()
    })
}

/// The Q.850 cause of a response's `Reason` header.
pub(super) fn q850_cause(resp: &rsip::Response) -> Option<u16> {
    let reason = header_value(&resp.headers, "reason")?;
    reason.split(',').find_map(|r| {
        let mut parts = r.split(';');
        let protocol = parts.next()?.trim();
        if !protocol.eq_ignore_ascii_case("q.850") {
            return None;
        }
        parts.find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("cause")
                .then(|| v.trim().parse().ok())?
        })
    })
}

/// An attempt's entry in the INVITE journal: done when dropped, unless the call took it.
struct Journaled(Option<Arc<crate::outbound::InviteLog>>, Option<String>);

impl Drop for Journaled {
    fn drop(&mut self) {
        if let (Some(log), Some(call_id)) = (&self.0, &self.1) {
            log.done(call_id);
        }
    }
}

fn call_id_of(dialog: &InviteDialog) -> String {
    dialog.id().call_id.clone()
}

/// Cancels an INVITE whose dial is dropped before its final response.
struct CancelOnDrop(Option<InviteDialog>);

/// CANCELs a ringing INVITE without waiting for the CANCEL's own answer (which may never
/// come); when the INVITE must have ended by.
fn send_cancel(dialog: &InviteDialog, expiry: Duration) -> tokio::time::Instant {
    let dialog = dialog.clone();
    tokio::spawn(async move {
        let _ = dialog.cancel().await;
    });
    tokio::time::Instant::now() + expiry
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(dialog) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = dialog.cancel().await;
            });
        }
    }
}

/// An outbound INVITE's place in [`Core::dialing`], for as long as it waits for its answer.
struct Dialing<'a> {
    core: &'a Core,
    call_id: String,
}

impl<'a> Dialing<'a> {
    fn register(
        core: &'a Core,
        call_id: String,
        progress: mpsc::UnboundedSender<Box<DialogState>>,
    ) -> Dialing<'a> {
        core.add_dialing(call_id.clone(), progress);
        Dialing { core, call_id }
    }
}

impl Drop for Dialing<'_> {
    fn drop(&mut self) {
        self.core.remove_dialing(&self.call_id);
    }
}
