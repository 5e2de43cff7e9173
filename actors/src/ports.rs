//! The ports the engine needs from the outside world: the store ([`EngineStore`]) and the
//! carrier ([`Dialer`]). The service implements the store with SQL; the simulated carrier
//! ([`crate::sim`]) and the SIP dialer implement [`Dialer`].

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};

use crate::call::{CallStatus, EndReason};
pub use crate::campaign::CampaignRules;
use crate::campaign::{AgentFacts, CampaignStatus, NumberFacts};
use crate::contact::{CallOutcome, ContactState, ExclusionReason};
use crate::conversation::Conversation;
use crate::ids::{
    AgentId, CallId, CampaignId, ContactId, DispositionId, PhoneNumberId, WorkspaceId,
};
pub use crate::limits::TrunkLimits;
use crate::money::Cents;
use crate::window::CallingWindow;
use switchboard_sip::amd::AnsweredBy;
use switchboard_sip::sdp::Codec;

/// A failure of a port (database down, corrupt row, ...). The engine logs it and retries at
/// its next evaluation; an actor that cannot go on fails and is restarted by its supervisor.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The operation failed in the service behind the port; `source` is its own error.
    #[error("{operation}: {source}")]
    Failed {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A fault injected on purpose (resilience tests).
    #[error("injected fault in {operation}")]
    Injected { operation: &'static str },
}

impl PortError {
    /// `operation` failed with `source`.
    pub fn failed(
        operation: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Failed {
            operation,
            source: Box::new(source),
        }
    }
}

pub type PortResult<T> = Result<T, PortError>;

/// Everything one evaluation reads about a campaign.
#[derive(Debug, Clone)]
pub struct EngineCampaign {
    pub id: CampaignId,
    pub workspace_id: WorkspaceId,
    pub status: CampaignStatus,
    pub rules: CampaignRules,
    /// The campaign's own window, else the workspace's calling hours.
    pub window: CallingWindow,
    pub agent_id: Option<AgentId>,
    /// `None` when agent_id is unset or names no agent of the workspace.
    pub agent: Option<AgentFacts>,
    pub from_phone_number_id: Option<PhoneNumberId>,
    pub from_number: Option<NumberFacts>,
    pub daily_admitted_count: i64,
    pub daily_window_date: Option<NaiveDate>,
    pub last_admitted_at: Option<DateTime<Utc>>,
    pub spent_cents: Cents,
    pub reserved_cents: Cents,
}

/// Contacts of a campaign per state, and the attempts already made by the open ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContactCounts {
    pub by_state: HashMap<ContactState, i64>,
    /// Sum of `attempts` over contacts that are not terminal.
    pub open_attempts: i64,
}

impl ContactCounts {
    pub fn get(&self, state: ContactState) -> i64 {
        self.by_state.get(&state).copied().unwrap_or(0)
    }

    pub fn open(&self) -> i64 {
        self.by_state
            .iter()
            .filter(|(s, _)| !s.is_terminal())
            .map(|(_, n)| n)
            .sum()
    }

    pub fn total(&self) -> i64 {
        self.by_state.values().sum()
    }

    /// Moves one contact between states; `attempts_delta` adjusts `open_attempts`, and a contact
    /// that becomes terminal takes its `attempts` out of it.
    pub fn shift(&mut self, from: ContactState, to: ContactState, attempts_after: i64) {
        *self.by_state.entry(from).or_default() -= 1;
        *self.by_state.entry(to).or_default() += 1;
        if to.is_terminal() && !from.is_terminal() {
            self.open_attempts -= attempts_after;
        }
    }
}

/// A contact whose next attempt is due.
#[derive(Debug, Clone)]
pub struct DueContact {
    pub id: ContactId,
    pub phone_number: String,
    pub timezone: Option<String>,
    pub state: ContactState,
    pub attempts: i64,
    /// On the workspace's do-not-call list (for every agent or for the campaign's) right now.
    pub blocked: bool,
}

/// One read of a campaign's due contacts.
#[derive(Debug, Clone, Default)]
pub struct DueScan {
    /// Due now, earliest first.
    pub due: Vec<DueContact>,
    /// The next_attempt_at of the earliest contact not yet due.
    pub next_due_at: Option<DateTime<Utc>>,
}

/// One call the queue will place.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    pub id: CallId,
    pub workspace_id: WorkspaceId,
    pub campaign_id: Option<CampaignId>,
    pub contact_id: Option<ContactId>,
    pub agent_id: AgentId,
    pub from_phone_number_id: Option<PhoneNumberId>,
    pub from_number: String,
    pub to_number: String,
    pub priority: i64,
    /// The contact's attempt this call belongs to (1 for direct calls).
    pub attempt: i64,
    pub max_duration_secs: i64,
    pub reserved_cents: Cents,
    pub queued_at: DateTime<Utc>,
    /// The SIP trunk that carries the call and its caps; `None` when no trunk's caps apply
    /// (the simulated carrier, or a number no trunk serves).
    pub trunk: Option<TrunkLimits>,
}

/// Admitting one contact: the attempt and its call are committed together, before any dial.
#[derive(Debug, Clone)]
pub struct Admission {
    pub call: CallSpec,
    pub contact_id: ContactId,
    pub campaign_id: CampaignId,
    /// The window-zone date the admission counts against (`daily_window_date`).
    pub daily_date: NaiveDate,
    pub max_calls_per_day: i64,
    pub budget_cents: Option<Cents>,
    pub now: DateTime<Utc>,
    /// The evaluation's record, written with the admission.
    pub tick: TickRecord,
    /// A call slot is already taken for it: the call is committed as `dialing` (started now)
    /// rather than `queued`.
    pub dialing: bool,
}

/// What the store answered to an [`Admission`]; nothing was written unless `Admitted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitResult {
    Admitted,
    /// The campaign left `running` (paused, stopped, archived) since the evaluation began.
    NotRunning,
    /// The contact is no longer due (excluded, already dialing).
    ContactGone,
    /// The workspace balance, less what live calls reserve, does not cover one reservation.
    InsufficientCredit,
    /// spent + reserved + this reservation would pass budget_cents.
    OverBudget,
    /// The daily cap was reached.
    DailyCap,
    /// The contact's number is on the do-not-call list (checked again at admission).
    DoNotCall,
}

/// A workspace's money as admission sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Funds {
    pub balance_cents: Cents,
    /// Reserved by the workspace's queued and live calls.
    pub reserved_cents: Cents,
    pub is_suspended: bool,
}

impl Funds {
    pub fn covers(&self, reservation: Cents) -> bool {
        !self.is_suspended && self.balance_cents - self.reserved_cents >= reservation
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub struct CallEnd {
    pub outcome: CallOutcome,
    pub started_at: Option<DateTime<Utc>>,
    pub answered_at: Option<DateTime<Utc>>,
    pub ended_at: DateTime<Utc>,
    /// Connected seconds that are billed (answered and voicemail calls).
    pub billable_secs: i64,
    pub cost_cents: Cents,
    pub end_reason: EndReason,
    /// A disposition label the agent chose during the call, if any (the end-of-call analysis
    /// runs after the end and lands its choice as `POST /calls/{id}/disposition` does).
    pub disposition_label: Option<String>,
    /// What the network said (SIP calls).
    pub network: NetworkDetails,
    /// The transcript, tool events and vendor failures, stored with the end.
    pub conversation: Conversation,
}

/// What the network said about a call: the SIP final response, who answered, the media.
/// Empty for calls that never reached a network (the simulator, interrupted calls).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkDetails {
    pub sip_code: Option<u16>,
    pub sip_reason: Option<String>,
    /// The Q.850 cause of the response's `Reason` header.
    pub q850_cause: Option<u16>,
    /// Answering-machine detection's verdict on an answered call.
    pub answered_by: Option<AnsweredBy>,
    pub codec: Option<Codec>,
    /// A recording of the call exists.
    pub recorded: bool,
}

/// The last call of an open attempt, as stored.
#[derive(Debug, Clone)]
pub struct StoredCall {
    pub id: CallId,
    pub status: CallStatus,
    pub outcome: Option<CallOutcome>,
    pub end_reason: Option<EndReason>,
    pub ended_at: Option<DateTime<Utc>>,
    pub disposition_id: Option<DispositionId>,
}

/// A contact in `dialing` or `awaiting_disposition`, for rebuilding its actor.
#[derive(Debug, Clone)]
pub struct OpenAttempt {
    pub contact_id: ContactId,
    pub state: ContactState,
    pub attempts: i64,
    pub infra_retries: i64,
    pub call: Option<StoredCall>,
}

/// The resolution of an attempt, written in one statement guarded by the contact still being in
/// `dialing` or `awaiting_disposition` on `call_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Settlement {
    pub contact_id: ContactId,
    pub call_id: CallId,
    pub state: ContactState,
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// An infra error within max_infra_retries: the attempt is given back.
    pub refund_attempt: bool,
    pub infra_retry: bool,
    pub outcome: CallOutcome,
    pub disposition_id: Option<DispositionId>,
    pub excluded_reason: Option<ExclusionReason>,
    pub now: DateTime<Utc>,
    /// Applies only while the call still has no disposition: an answer settled as unclassified
    /// after the disposition timeout, without reading the call first.
    pub require_no_disposition: bool,
}

/// An evaluation's record on the campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct TickRecord {
    pub at: DateTime<Utc>,
    pub result: crate::pacing::TickResult,
    pub last_error: Option<String>,
    pub estimate_cents: Cents,
}

/// The engine's storage port.
#[async_trait::async_trait]
pub trait EngineStore: Send + Sync + 'static {
    /// Campaigns the engine runs: launched and not terminal (scheduled, running, paused_*).
    async fn live_campaigns(&self) -> PortResult<Vec<CampaignId>>;
    /// A campaign in any status (archived included); `None` if it does not exist.
    async fn campaign(&self, id: CampaignId) -> PortResult<Option<EngineCampaign>>;
    async fn contact_counts(&self, id: CampaignId) -> PortResult<ContactCounts>;
    /// Up to `limit` pending or scheduled contacts with next_attempt_at <= now, earliest first,
    /// each with whether the do-not-call list blocks it for `agent`; and when the next contact
    /// not yet due is.
    async fn due_contacts(
        &self,
        id: CampaignId,
        agent: Option<AgentId>,
        now: DateTime<Utc>,
        limit: i64,
    ) -> PortResult<DueScan>;
    /// Moves contacts whose window is closed to their next opening.
    async fn defer_contacts(
        &self,
        deferrals: &[(ContactId, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> PortResult<()>;
    /// Excludes a pending or scheduled contact; `false` if it was no longer either.
    async fn exclude_contact(
        &self,
        id: ContactId,
        reason: ExclusionReason,
        now: DateTime<Utc>,
    ) -> PortResult<bool>;
    async fn funds(&self, ws: WorkspaceId) -> PortResult<Funds>;
    /// Commits an attempt and its call (`queued`, or `dialing` when a slot was claimed) in one
    /// transaction, re-checking status, daily cap, balance and budget inside it.
    async fn admit(&self, admission: &Admission) -> PortResult<AdmitResult>;
    async fn record_tick(&self, id: CampaignId, tick: &TickRecord) -> PortResult<()>;
    /// An engine-decided status change with its audit event, applied only from `from`; with
    /// `tick`, the evaluation that decided it is recorded in the same transaction.
    async fn engine_transition(
        &self,
        id: CampaignId,
        from: CampaignStatus,
        to: CampaignStatus,
        reason: &str,
        tick: Option<&TickRecord>,
        now: DateTime<Utc>,
    ) -> PortResult<bool>;
    /// Contacts in `dialing` or `awaiting_disposition`, with their last call.
    async fn open_attempts(&self, id: CampaignId) -> PortResult<Vec<OpenAttempt>>;
    async fn open_attempt(&self, contact: ContactId) -> PortResult<Option<OpenAttempt>>;
    /// Queued calls of every workspace, in queue order.
    async fn queued_calls(&self) -> PortResult<Vec<CallSpec>>;
    /// Live (`dialing`) calls per workspace.
    async fn live_calls(&self) -> PortResult<HashMap<WorkspaceId, usize>>;
    /// Ends every `dialing` call as interrupted and releases its reservation. Run once at start.
    async fn interrupt_live_calls(&self, now: DateTime<Utc>) -> PortResult<u64>;
    /// `queued` -> `dialing`; `false` if the call is no longer queued (cancelled).
    async fn mark_dialing(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool>;
    /// A live call was answered at `now` (its `answered_at`); `false` if it was not live or
    /// already answered.
    async fn call_answered(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool>;
    /// A live call's far end rings (`dialing` -> `ringing`); `false` if it was no longer
    /// dialing.
    async fn call_ringing(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool>;
    /// Ends the call, releases its reservation and charges its cost, in one transaction.
    async fn finish_call(&self, call: &CallSpec, end: &CallEnd) -> PortResult<()>;
    /// `queued` -> `cancelled`, releasing the reservation; `false` if it had left the queue.
    async fn cancel_call(
        &self,
        call: &CallSpec,
        reason: EndReason,
        now: DateTime<Utc>,
    ) -> PortResult<bool>;
    /// Commits another call within the same attempt (double dial); `false` if the contact left
    /// `dialing`.
    async fn redial(&self, call: &CallSpec, contact: ContactId) -> PortResult<bool>;
    /// `dialing` -> `awaiting_disposition` for an answered call: `None` if the contact had left
    /// `dialing`, else the disposition the call already has, if any. With `ending`, the call's
    /// end (as [`EngineStore::finish_call`]) is committed in the same transaction.
    async fn await_disposition(
        &self,
        contact: ContactId,
        call: CallId,
        now: DateTime<Utc>,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> PortResult<Option<Option<DispositionId>>>;
    async fn call_disposition(&self, call: CallId) -> PortResult<Option<DispositionId>>;
    /// Writes a settlement; `false` if the contact had already left the attempt (or, with
    /// `require_no_disposition`, the call has a disposition). With `ending`, the call's end (as
    /// [`EngineStore::finish_call`]) is committed in the same transaction.
    async fn settle_contact(
        &self,
        settlement: &Settlement,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> PortResult<bool>;
}

/// What the dialer is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct DialRequest {
    pub call_id: CallId,
    pub workspace_id: WorkspaceId,
    pub campaign_id: Option<CampaignId>,
    pub contact_id: Option<ContactId>,
    pub attempt: i64,
    pub agent_id: AgentId,
    /// The number the call is made from (its carrier account's trunk carries it).
    pub from_phone_number_id: Option<PhoneNumberId>,
    pub from_number: String,
    pub to_number: String,
    /// The agent's duration cap: the call is hung up at this length.
    pub max_duration_secs: i64,
}

/// What the dialer reports when the call is over.
#[derive(Debug, Clone, PartialEq)]
pub struct DialResult {
    pub outcome: CallOutcome,
    /// Seconds from the dial to the answer (or to giving up).
    pub ring_secs: i64,
    /// Connected seconds (answered or voicemail), capped at max_duration_secs.
    pub talk_secs: i64,
    pub end_reason: EndReason,
    pub disposition_label: Option<String>,
    pub network: NetworkDetails,
    /// What the agent and the other party said, and the tools run (answered calls).
    pub conversation: Conversation,
}

/// How a dialer tells the call's owner what happens before the call is over: the answer.
/// Reporting is optional (a dialer whose calls are never answered reports nothing), and only
/// the first answer counts.
pub struct DialProgress {
    on_ringing: Option<Box<dyn FnOnce() + Send>>,
    on_answer: Option<AnswerHook>,
    /// The call's actor: an answered call's agent runs as an actor linked to it.
    owner: Option<ractor::ActorCell>,
}

/// What runs when a call is answered; given a sender, the owner says on it when the answer is
/// recorded.
type AnswerHook = Box<dyn FnOnce(Option<tokio::sync::oneshot::Sender<()>>) + Send>;

/// How long a dialer waits for the call's owner to record the answer before the call goes
/// on anyway (a store that stalls does not hold up a callee who is speaking).
pub const ANSWER_RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl DialProgress {
    /// Progress that runs `on_ringing` when the far end first says it rings, and `on_answer`
    /// when the call is answered (with a sender to tell once the answer is recorded, when the
    /// dialer waits for that).
    pub fn new(
        on_ringing: impl FnOnce() + Send + 'static,
        on_answer: impl FnOnce(Option<tokio::sync::oneshot::Sender<()>>) + Send + 'static,
    ) -> Self {
        Self {
            on_ringing: Some(Box::new(on_ringing)),
            on_answer: Some(Box::new(on_answer)),
            owner: None,
        }
    }

    /// The same progress, of a call whose actor is `owner`.
    pub fn with_owner(mut self, owner: ractor::ActorCell) -> Self {
        self.owner = Some(owner);
        self
    }

    /// The call's actor, which an answered call's agent is linked to.
    pub fn owner(&self) -> Option<ractor::ActorCell> {
        self.owner.clone()
    }

    /// Progress nobody listens to.
    pub fn ignored() -> Self {
        Self {
            on_ringing: None,
            on_answer: None,
            owner: None,
        }
    }

    /// The far end rings (a 180 or 183): what to run, once, when it first says so; a dialer
    /// that hears it on another task takes it there.
    pub fn take_ringing(&mut self) -> Option<Box<dyn FnOnce() + Send>> {
        self.on_ringing.take()
    }

    /// The callee answered: the call is connected.
    pub fn answered(&mut self) {
        if let Some(on_answer) = self.on_answer.take() {
            on_answer(None);
        }
    }

    /// The callee answered; resolves once the owner has recorded the answer (at most
    /// [`ANSWER_RECORD_WAIT`]), so that what the call says next (its turns' events) comes
    /// after `call.answered`.
    pub async fn answered_and_recorded(&mut self) {
        let Some(on_answer) = self.on_answer.take() else {
            return;
        };
        let (recorded, done) = tokio::sync::oneshot::channel();
        on_answer(Some(recorded));
        let _ = tokio::time::timeout(ANSWER_RECORD_WAIT, done).await;
    }
}

impl std::fmt::Debug for DialProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DialProgress")
            .field("answer_pending", &self.on_answer.is_some())
            .finish()
    }
}

/// The carrier port: places one call and resolves when it is over, reporting the answer
/// through `progress` as it happens.
#[async_trait::async_trait]
pub trait Dialer: Send + Sync + 'static {
    async fn dial(&self, request: DialRequest, progress: DialProgress) -> DialResult;
}
