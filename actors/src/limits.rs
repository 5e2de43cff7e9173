//! The limits a SIP trunk puts on the calls through it, as the call queue and a campaign's
//! preflight read them.

/// A SIP trunk's caps, as the call queue enforces them: a call waits for room on its trunk
/// beside its workspace's and the node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrunkLimits {
    /// The trunk: its carrier account's id, or `Uuid::nil()` for the operator's default trunk.
    pub trunk: uuid::Uuid,
    /// New calls started through the trunk in any one second; `None`: no cap.
    pub calls_per_second: Option<u32>,
    /// Calls live on the trunk at once; `None`: no cap.
    pub max_concurrent: Option<u32>,
}

impl TrunkLimits {
    /// The caps of `trunk`, known by `id` (its carrier account's id, or `Uuid::nil()` for the
    /// operator's default trunk).
    pub fn of(id: uuid::Uuid, trunk: &switchboard_sip::trunk::Trunk) -> Self {
        Self {
            trunk: id,
            calls_per_second: trunk.calls_per_second,
            max_concurrent: trunk.max_concurrent_calls,
        }
    }
}
