//! Outbound calls through a SIP trunk, and OPTIONS probes of a trunk's gateways.
//!
//! [`SipClient::dial`] places one call:
//!
//! - Gateways are tried by priority; a gateway without a port is looked up in DNS (SRV, then
//!   A/AAAA, RFC 3263) and each address it names is a target. A target that answers 5xx, that
//!   says nothing within the response timeout, or that cannot be reached is left for the next,
//!   unless early media has started (the callee may already hear something).
//! - Digest challenges (401/407) are answered once with the trunk's credentials.
//! - 180/183 with SDP start the media (early media: ringback and announcements are recorded);
//!   reliable provisionals (`Require: 100rel`) are acknowledged with PRACK.
//! - Our ring timer ends an unanswered call with CANCEL. A 200 OK that crosses our CANCEL is
//!   ACKed and then ended with BYE, and the call counts as not answered.
//! - Session timers (RFC 4028): we ask for `Session-Expires`; when the answer makes us the
//!   refresher we refresh at half the interval (UPDATE if the peer allows it, else
//!   re-INVITE), and when the peer refreshes and stops doing so the call ends before the
//!   session would expire at the carrier.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::call::{Call, Core};
use crate::media::VadSettings;
use crate::trunk::Trunk;

mod attempt;
mod media;
mod probe;
mod resolve;
mod restart;
mod session_timer;
#[cfg(test)]
mod tests;

pub use crate::journal::{InviteKey, InviteLog};
use media::Media;
use resolve::resolve;
pub use restart::Abandoned;

/// The session interval we ask for, and the smallest we accept.
pub const SESSION_EXPIRES: Duration = Duration::from_secs(1800);
pub const MIN_SE: Duration = Duration::from_secs(90);

/// One call to place.
#[derive(Clone)]
pub struct DialPlan {
    pub trunk: Trunk,
    /// Our number (E.164), the From user unless the trunk names one.
    pub from_number: String,
    /// The callee (E.164).
    pub to_number: String,
    /// The SIP Call-ID to use (a fresh one when absent).
    pub call_id: Option<String>,
    /// How long the callee's phone may ring before we CANCEL.
    pub ring_timeout: Duration,
    /// A target that sends no response at all within this is left for the next.
    pub response_timeout: Duration,
    /// Where to record the call (early media included); none for no recording.
    pub recording: Option<PathBuf>,
    pub vad: VadSettings,
    /// Told when the far end says it rings (each 180 or 183).
    pub on_ringing: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for DialPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DialPlan")
            .field("trunk", &self.trunk)
            .field("from_number", &self.from_number)
            .field("to_number", &self.to_number)
            .field("call_id", &self.call_id)
            .field("ring_timeout", &self.ring_timeout)
            .finish_non_exhaustive()
    }
}

/// An answered outbound call.
pub struct Answered {
    pub call: Call,
    /// The gateway that answered (`host[:port];transport=...`).
    pub gateway: String,
    /// From the first INVITE to the 200 OK.
    pub ring: Duration,
    /// Early media flowed before the answer.
    pub early_media: bool,
}

/// Why a dial did not end in an answered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A final response from the far end (busy, not found, declined, 5xx from the last
    /// gateway, ...): see `sip_code`.
    Response,
    /// Our ring timer ran out and we cancelled.
    RingTimeout,
    /// The dial was cancelled from outside before the answer.
    Cancelled,
    /// No target sent any response in time.
    NoResponse,
    /// No target could be reached (connection refused, DNS gave nothing, ...).
    Transport,
    /// Something on our side (no RTP port, no usable SDP in the answer).
    Local,
}

/// A dial that did not end in an answered call.
#[derive(Debug, Clone)]
pub struct DialFailure {
    pub kind: FailureKind,
    pub sip_code: Option<u16>,
    pub reason_phrase: Option<String>,
    /// The Q.850 cause of a `Reason: Q.850;cause=N` header, if the response had one.
    pub q850_cause: Option<u16>,
    /// The gateway that answered last (or was tried last).
    pub gateway: Option<String>,
    pub detail: String,
    /// From the first INVITE to the end of the dial.
    pub elapsed: Duration,
    pub early_media: bool,
    /// Audio was recorded (early media).
    pub recorded: bool,
}

/// Places calls and probes gateways through the running SIP server.
#[derive(Clone)]
pub struct SipClient {
    pub(crate) core: Arc<Core>,
}

/// What one INVITE to one target came to.
enum Attempt {
    Answered(Box<Answered>),
    /// Worth trying the next target (5xx, no response, unreachable), and nothing was heard.
    Next(DialFailure),
    Final(DialFailure),
}

impl SipClient {
    /// Places one call. `cancel` ends it before the answer (an API cancel, a shutdown).
    pub async fn dial(
        &self,
        plan: DialPlan,
        cancel: CancellationToken,
    ) -> Result<Answered, DialFailure> {
        let started = Instant::now();
        let fail = |kind, detail: String| DialFailure {
            kind,
            sip_code: None,
            reason_phrase: None,
            q850_cause: None,
            gateway: None,
            detail,
            elapsed: started.elapsed(),
            early_media: false,
            recorded: false,
        };
        let socket = match self.core.ports.bind().await {
            Ok(socket) => socket,
            Err(e) => return Err(fail(FailureKind::Local, format!("no RTP port: {e}"))),
        };
        let local = match socket.local_addr() {
            Ok(a) => SocketAddr::new(self.core.media_ip, a.port()),
            Err(e) => return Err(fail(FailureKind::Local, format!("RTP socket: {e}"))),
        };
        let mut media = Media {
            socket: Some(socket),
            local,
            session_id: rand::random::<u32>().into(),
            running: None,
            recording: plan.recording.clone(),
            vad: plan.vad,
            jitter_depth: self.core.settings.jitter_depth,
            counters: self.core.media_counters.clone(),
        };
        let mut last: Option<DialFailure> = None;
        let ring_deadline = started + plan.ring_timeout;
        for gw in plan.trunk.ordered_gateways() {
            let lookup = tokio::time::timeout(plan.response_timeout, resolve(gw)).await;
            let targets = match lookup.unwrap_or_else(|_| {
                Err(format!(
                    "{} was not resolved within {:?}",
                    gw.host, plan.response_timeout
                ))
            }) {
                Ok(targets) => targets,
                Err(e) => {
                    let mut f = fail(FailureKind::Transport, e);
                    f.gateway = Some(gw.to_string());
                    last = Some(f);
                    continue;
                }
            };
            for target in targets {
                if cancel.is_cancelled() {
                    return Err(fail(FailureKind::Cancelled, "cancelled".into()));
                }
                if Instant::now() >= ring_deadline {
                    // The ring timeout counts across all gateways: no time is left for this
                    // one. The last gateway's failure stands.
                    let mut failure = last.unwrap_or_else(|| {
                        fail(FailureKind::RingTimeout, "the ring timeout passed".into())
                    });
                    failure.elapsed = started.elapsed();
                    failure.recorded = media.stop().await;
                    return Err(failure);
                }
                match self
                    .attempt(&plan, &target, &mut media, &cancel, started)
                    .await
                {
                    Attempt::Answered(answered) => return Ok(*answered),
                    Attempt::Final(mut failure) => {
                        failure.recorded = media.stop().await;
                        return Err(failure);
                    }
                    Attempt::Next(failure) => {
                        tracing::debug!(gateway = %target.gateway, detail = %failure.detail, "trying the next gateway");
                        last = Some(failure);
                    }
                }
            }
        }
        let mut failure = last.unwrap_or_else(|| fail(FailureKind::Transport, "no gateway".into()));
        failure.elapsed = started.elapsed();
        failure.recorded = media.stop().await;
        Err(failure)
    }
}
