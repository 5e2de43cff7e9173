//! The transitions of a campaign (launch, resume, pause, stop, archive) through the spec's
//! state table, with the preflight a launch and a resume must pass.

use switchboard_actors::campaign::{
    self as rules, AgentFacts, AuditEvent, Command, NumberFacts, Preflight, Transition,
    TransitionError,
};
use switchboard_actors::ids::{CampaignId, WorkspaceId};

use crate::app::auth::Auth;
use crate::app::campaigns::view::{CampaignView, NOT_FOUND, effective_window, view};
use crate::app::error::AppError;
use crate::app::state::App;
use crate::store::{CampaignRecord, StatusChange};

pub async fn preflight(
    state: &App,
    ws: WorkspaceId,
    c: &CampaignRecord,
) -> Result<Option<String>, AppError> {
    let s = &c.settings;
    let agent = match s.agent_id {
        Some(id) => state.store.agent(ws, id).await?.map(|a| AgentFacts {
            is_active: a.is_active,
            max_call_duration_secs: a.max_call_duration_secs,
        }),
        None => None,
    };
    let number = match s.from_phone_number_id {
        Some(id) => state.store.phone_number(ws, id).await?,
        None => None,
    };
    let window = effective_window(state, ws, s).await?;
    let check = Preflight {
        agent_id_set: s.agent_id.is_some(),
        agent,
        from_number_id_set: s.from_phone_number_id.is_some(),
        from_number: number.as_ref().map(|n| NumberFacts {
            is_active: n.is_active,
            status: n.status,
            number: n.number.clone(),
            trunk: None,
        }),
        window: &window,
        now: state.store.now(),
        starts_at: s.rules.starts_at,
        ends_at: s.rules.ends_at,
    }
    .check();
    match check {
        Ok(()) => Ok(number.map(|n| n.number)),
        Err(problem) => Err(AppError::CampaignNotReady {
            message: problem.to_string(),
        }),
    }
}

/// Runs a command against the state table; answers the campaign as it now is.
pub async fn command(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    command: Command,
) -> Result<CampaignView, AppError> {
    let ws = auth.workspace_id;
    let id = CampaignId::from_uuid(id);
    // A concurrent command may win the optimistic check; decide again from the fresh status.
    for _ in 0..3 {
        let current = state.store.campaign_any(ws, id).await?.ok_or(NOT_FOUND)?;
        let transition = rules::transition(current.status, command).map_err(|e| match e {
            TransitionError::Archived => NOT_FOUND,
            other => AppError::bad_request(other.to_string()),
        })?;
        let (to, event, from_number) = match transition {
            Transition::Unchanged(message) => {
                let mut v = view(state, ws, current).await?;
                v.message = Some(message.to_owned());
                return Ok(v);
            }
            Transition::Start(event) => {
                let from_number = preflight(state, ws, &current).await?;
                (
                    rules::start_status(state.store.now(), current.settings.rules.starts_at),
                    event,
                    from_number,
                )
            }
            Transition::To(to) => (to, AuditEvent::of_command(to), None),
        };
        let change = StatusChange {
            from: current.status,
            to,
            event,
            actor: Some(auth.key_id),
            from_number,
        };
        if state.store.change_campaign_status(ws, id, &change).await? {
            state.engine.campaign_changed(id);
            let now = state.store.campaign_any(ws, id).await?.ok_or(NOT_FOUND)?;
            return view(state, ws, now).await;
        }
    }
    Err(AppError::Conflict {
        message: "The campaign is changing status concurrently; retry".into(),
    })
}
