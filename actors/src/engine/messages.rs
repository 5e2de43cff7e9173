//! Every message the engine's actors exchange, and the data those messages carry.
//!
//! **Invariant:** this module imports nothing else of the engine. The actors depend on it (and on
//! [`super::shared`]), never on each other; only the supervisor names actor types.
//!
//! ```text
//!                 CampaignMsg                ContactMsg
//!   call ────────────────────▶ campaign ──────────────▶ contact
//!    ▲  │ QueueMsg                │ QueueMsg               │ QueueMsg, SupervisorMsg
//!    │  ▼                         ▼                        ▼
//!    │ queue ──── SupervisorMsg::Dispatch ──▶ supervisor ──┘ (starts the call actor)
//!    └──────────── CallMsg (the dialer's result) ─────────┘
//! ```

use chrono::{DateTime, Utc};
use ractor::RpcReplyPort;

use crate::contact::{ContactState, ExclusionReason};
use crate::ids::{CallId, CampaignId, ContactId, WorkspaceId};
use crate::inbound::InboundCall;
use crate::ports::{CallEnd, CallSpec, CampaignRules, DialResult, OpenAttempt, PortError};

/// To a `CampaignActor`.
// A message is moved once, into a mailbox: boxing its largest variant would only add an
// allocation per message.
#[allow(clippy::large_enum_variant)]
pub enum CampaignMsg {
    Evaluate,
    /// The API changed the campaign (status, settings or contacts).
    Changed,
    /// A workspace's balance went up: a campaign of it paused for credit looks again.
    FundsChanged {
        workspace: WorkspaceId,
    },
    /// The contact's call was handed to the dialer at `at` (the pacing gap counts from here).
    CallStarted {
        contact: ContactId,
        at: DateTime<Utc>,
    },
    /// A call ended. With a handover its end is not committed yet: the contact actor commits
    /// it (or, when the handover is dropped, the call actor does and reports again, `counted`
    /// since this actor has already seen the end).
    CallFinished {
        contact: ContactId,
        call: CallId,
        /// Boxed: it carries the call's conversation.
        end: Box<CallEnd>,
        handover: Option<Box<EndHandover>>,
        counted: bool,
    },
    CallCancelled {
        contact: ContactId,
        call: CallId,
    },
    /// The contact's call ended and it now waits for a disposition.
    SlotFreed {
        contact: ContactId,
    },
    /// The contact's attempt is over and its actor stops; `settled` is `None` when the store
    /// had already moved the contact on (its counts are then re-read).
    Resolved {
        contact: ContactId,
        settled: Option<Settled>,
    },
    DispositionLanded {
        call: CallId,
    },
}

/// How a settlement moved a contact, so its campaign keeps its per-state counts without
/// re-reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub from: ContactState,
    pub to: ContactState,
    /// Attempts the contact has used after the settlement (a refunded attempt not counted).
    pub attempts: i64,
}

/// To a `ContactActor`.
pub enum ContactMsg {
    /// The call ended; with a handover, its end is committed here (see [`EndHandover`]).
    CallFinished {
        call: CallId,
        end: Box<CallEnd>,
        handover: Option<Box<EndHandover>>,
    },
    CallCancelled {
        call: CallId,
    },
    /// The double-dial gap is over: place the second dial of the attempt.
    Redial,
    DispositionLanded {
        call: CallId,
    },
    DispositionTimeout,
    /// The campaign was stopped or archived: no retry will be scheduled.
    Closed {
        reason: ExclusionReason,
    },
}

/// To the `CallQueue`.
// A message is moved once, into a mailbox: boxing its largest variant would only add an
// allocation per message.
#[allow(clippy::large_enum_variant)]
pub enum QueueMsg {
    Enqueue {
        call: CallSpec,
    },
    /// A live call of the workspace ended (or never started): its workspace and node slots
    /// are free (its trunk's slot was freed in the queue's core at once, see
    /// `Shared::free_slot`).
    CallEnded {
        workspace: WorkspaceId,
    },
    /// A trunk's calls-per-second window opened: release what waited for it.
    WindowOpened,
    /// Cancel the campaign's calls that have not been dialled yet.
    CancelCampaign {
        campaign: CampaignId,
    },
}

/// To the `EngineSupervisor`.
pub enum SupervisorMsg {
    /// Reconcile the store and start the queue and the live campaigns; answers when done.
    Boot {
        reply: RpcReplyPort<Result<(), BootError>>,
    },
    /// Deliver to the call queue (sent while the queue was being restarted).
    ToQueue { msg: QueueMsg },
    /// Make sure the campaign's actor runs, then deliver `then` to it.
    Ensure {
        campaign: CampaignId,
        then: Option<CampaignMsg>,
    },
    /// Start a call actor for a call the queue released or an admission placed.
    Dispatch { call: CallSpec, placed: Placed },
    /// Start a call actor for an answered inbound call.
    Answer { call: Box<InboundCall> },
}

/// To a `CallActor`.
pub enum CallMsg {
    /// The far end rings.
    Ringing,
    /// The callee answered: the call is connected. `recorded`, if given, is told once the
    /// answer is recorded (or could not be).
    Answered {
        recorded: Option<tokio::sync::oneshot::Sender<()>>,
    },
    /// The dialer's answer: how the call went.
    Dialled { result: Box<DialResult> },
    /// An inbound call has run to its end (and recorded it).
    Ran,
    /// The dial failed without an answer (it panicked): the actor fails, and its supervisor
    /// ends the call as interrupted and frees its slot.
    Crashed { error: String },
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// Reconciling the store (interrupted calls, live campaigns) failed.
    #[error("reconciling the store: {0}")]
    Store(#[from] PortError),
    /// An actor could not be started.
    #[error("starting the {actor}: {reason}")]
    Spawn { actor: &'static str, reason: String },
}

/// How a call reached its actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Released by the queue: still `queued` in the store; the actor marks it `dialing`.
    Queued,
    /// Admitted into a claimed slot: already committed as `dialing`.
    Dialing,
}

/// A campaign call's end, handed by its call actor to the contact actor, which commits it in one
/// transaction with the attempt's next step (settlement, or the wait for a disposition) and then
/// answers `done`. If the handover is dropped unanswered, the call actor commits the end itself
/// and reports it again without a handover.
pub struct EndHandover {
    pub spec: CallSpec,
    pub done: tokio::sync::oneshot::Sender<()>,
}

/// What a contact actor starts from: the attempt as its campaign knows it.
pub struct AttemptStart {
    pub campaign: CampaignId,
    pub contact: ContactId,
    pub rules: CampaignRules,
    pub attempts: i64,
    pub infra_retries: i64,
    /// Set when the campaign is stopped or archived: the attempt ends without a retry.
    pub closed: Option<ExclusionReason>,
    /// Seed of the attempt's retry-time randomization (drawn from the campaign's generator, so
    /// a seeded run repeats).
    pub seed: u64,
    pub activation: Activation,
}

/// How a contact actor comes to life.
pub enum Activation {
    /// A fresh admission: the attempt and its call are committed; hand the call over (to the
    /// queue, or straight to a call actor when the admission claimed a slot).
    Admitted { call: CallSpec, placed: Placed },
    /// Rebuilt from the store.
    Resumed { open: OpenAttempt },
}
