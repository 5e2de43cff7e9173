//! Session timers (RFC 4028) of an answered outbound call: who refreshes and when, and the
//! task that drives its dialog: refreshes, the peer's refreshes watched, and the INVITE
//! transaction closed after the fork window.

use std::sync::Arc;
use std::time::Duration;

use rsipstack::dialog::DialogId;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::{self as rsip, Header, StatusCode, StatusCodeKind};
use rsipstack::transaction::key::TransactionKey;
use rsipstack::transaction::transaction::TransactionEvent;

use crate::call::{Core, EndCause, sdp_type};
use crate::headers::{header_has_token, header_value};

/// The session timer a 2xx set up: its interval and whether we refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SessionTimer {
    pub(super) interval: Duration,
    pub(super) we_refresh: bool,
    pub(super) use_update: bool,
}

pub(super) fn session_timer(resp: &rsip::Response) -> Option<SessionTimer> {
    let value = header_value(&resp.headers, "session-expires")
        .or_else(|| header_value(&resp.headers, "x"))?;
    let mut parts = value.split(';');
    let secs: u64 = parts.next()?.trim().parse().ok()?;
    if secs == 0 {
        return None;
    }
    let refresher = parts
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("refresher"))
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    Some(SessionTimer {
        interval: Duration::from_secs(secs),
        // A 2xx without a refresher leaves it to us, the UAC (RFC 4028 §7.2).
        we_refresh: refresher.as_deref() != Some("uas"),
        use_update: header_has_token(&resp.headers, "allow", "UPDATE"),
    })
}

/// Runs an answered outbound call's dialog: answers the peer's in-dialog requests (through
/// the shared [`Core::on_state`]) and keeps the session timer.
pub(super) async fn drive(
    core: Arc<Core>,
    dialog: InviteDialog,
    id: DialogId,
    timer: Option<SessionTimer>,
    invite: Option<TransactionKey>,
) {
    let now = tokio::time::Instant::now();
    let mut invite = invite;
    let fork_window_ends = now + FORK_WINDOW;
    let mut next = timer.map(|t| {
        if t.we_refresh {
            now + t.interval / 2
        } else {
            now + expiry_margin(t.interval)
        }
    });
    // Nothing left to do (no session timer, the fork window over): the task ends, and the
    // call's end is the shared state loop's to notice.
    while invite.is_some() || next.is_some() {
        let wake = next.unwrap_or_else(|| now + Duration::from_secs(86_400 * 365));
        tokio::select! {
            _ = tokio::time::sleep_until(fork_window_ends), if invite.is_some() => {
                if let Some(key) = invite.take()
                    && let Some(tx) = core.endpoint.transactions.get(&key)
                {
                    let _ = tx.send(TransactionEvent::Terminate(key));
                }
            }
            _ = tokio::time::sleep_until(wake), if next.is_some() => {
                let Some(t) = timer else { return };
                if t.we_refresh {
                    if refresh(&core, &dialog, &id, t).await {
                        next = Some(tokio::time::Instant::now() + t.interval / 2);
                        continue;
                    }
                    tracing::info!(call_id = %id.call_id, "the session refresh failed; ending the call");
                } else {
                    let since = core.refreshed_at(&id).map(|at| at.elapsed()).unwrap_or_default();
                    let margin = expiry_margin(t.interval);
                    if since < margin {
                        next = Some(tokio::time::Instant::now() + (margin - since));
                        continue;
                    }
                    tracing::info!(call_id = %id.call_id, "the peer stopped refreshing the session; ending the call");
                }
                core.end(&id, EndCause::SessionExpired);
                let _ = dialog.bye().await;
                core.dialogs.remove_dialog(&id);
                return;
            }
        }
    }
}

/// How long the INVITE transaction of an answered call stays open after the answer, to ACK
/// and hang up a second 2xx from another branch of a forking proxy. RFC 6026 keeps it for
/// 64*T1 (32 s) in all; past this window the endpoint still re-sends our ACK to
/// retransmissions of the answer (it keeps the ACK until the transaction expiry), so closing
/// the transaction early only stops watching for forks that answer seconds late, and frees
/// its buffers and task sooner on every answered call.
const FORK_WINDOW: Duration = Duration::from_secs(4);

/// When, after a refresh by the peer, we give the session up: before it expires at the
/// carrier (RFC 4028 §10: interval minus the smaller of 32 s and a third of it).
pub(super) fn expiry_margin(interval: Duration) -> Duration {
    interval - std::cmp::min(Duration::from_secs(32), interval / 3)
}

/// Sends one session refresh; `true` if the peer accepted it.
async fn refresh(core: &Core, dialog: &InviteDialog, id: &DialogId, timer: SessionTimer) -> bool {
    let Some(offer) = core.next_offer(id) else {
        return false;
    };
    let headers = vec![
        Header::Supported("timer".into()),
        Header::Other(
            "Session-Expires".into(),
            format!("{};refresher=uac", timer.interval.as_secs()),
        ),
        sdp_type(),
    ];
    let sent = if timer.use_update {
        dialog.update(Some(headers), Some(offer)).await
    } else {
        dialog.reinvite(Some(headers), Some(offer)).await
    };
    match sent {
        Ok(Some(resp)) => {
            resp.status_code.kind() == StatusCodeKind::Successful
                // A refresh that crossed one of the peer's requests: the session is alive.
                || resp.status_code == StatusCode::RequestPending
        }
        _ => false,
    }
}
