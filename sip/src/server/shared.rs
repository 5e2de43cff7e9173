//! What the server's parts share: the service's side of inbound calls ([`InboundRouter`] and
//! what it answers), the state the listeners' loops hold ([`Shared`]) and the error of
//! starting ([`SipError`]).

use std::net::IpAddr;
use std::sync::Arc;

use async_trait::async_trait;

use crate::admission::{Admission, RateLimiter};
use crate::call::{Call, Core};
use crate::gate::Gate;
use crate::media::VadSettings;

/// What the service decides about an inbound INVITE.
pub enum Routing<T> {
    /// No such endpoint, or it is deleted or inactive: 404, the same for every reason.
    Unknown,
    /// The source address is not allowed to call this endpoint: 403.
    Forbidden,
    /// No capacity for another call now: 503.
    Busy,
    /// The endpoint has as many calls as its cap allows: 486 Busy Here.
    Full,
    /// Answer, with what the service needs to run the call.
    Answer(Answer<T>),
}

/// How to answer a routed call.
pub struct Answer<T> {
    pub target: T,
    /// Where to record the call; none for no recording.
    pub recording: Option<std::path::PathBuf>,
    pub vad: VadSettings,
}

/// The service's side of inbound calls.
#[async_trait]
pub trait InboundRouter: Send + Sync + 'static {
    type Target: Send + 'static;

    /// Which endpoint `slug` names and whether `source` may call it.
    async fn route(&self, slug: &str, source: IpAddr) -> Routing<Self::Target>;

    /// Runs an answered call to its end. The call's media is already flowing; end it with
    /// [`Call::hangup`] or wait for [`CallEvent::Ended`](crate::call::CallEvent::Ended), then [`Call::finish`].
    async fn run_call(&self, target: Self::Target, call: Call);
}

/// What the loops handing on incoming transactions hold.
pub(super) struct Shared<R: InboundRouter> {
    pub(super) router: R,
    pub(super) core: Arc<Core>,
    pub(super) limiter: Arc<RateLimiter>,
    pub(super) admission: Arc<Admission>,
    pub(super) gate: Arc<Gate>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SipError {
    #[error("SIP transport: {0}")]
    Transport(String),
    #[error("SIP over TLS: {0}")]
    Tls(String),
    #[error("SIP over TLS is configured but no TLS listener was given")]
    NoTlsListener,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
