//! Placing a call: what `POST /calls` does and refuses (the agent, the number, the do-not-call
//! list, the balance), and its idempotency key.

use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_actors::call::{PRIORITY_DEFAULT, PRIORITY_MAX, PRIORITY_MIN};
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::ids::{AgentId, CallId, PhoneNumberId};
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::ports::CallSpec;
use utoipa::ToSchema;

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::{Placed, parse_fields, replayed, request_hash, required};
use crate::app::state::App;
use crate::store::{CallInsert, CallRecord, DispositionSet, DispositionSource, NewCall};
use switchboard_actors::ids::DispositionId;

const CREATE_FIELDS: &[&str] = &[
    "agent_id",
    "to_number",
    "from_phone_number_id",
    "priority",
    "metadata",
    "variables",
    "idempotency_key",
    "ring_timeout_secs",
];

/// The range of a call's own ring timeout.
const RING_TIMEOUT_SECS: std::ops::RangeInclusive<i64> = 5..=300;

/// Largest metadata or variables object, serialized.
const MAX_OBJECT_BYTES: usize = 16 * 1024;

#[derive(Deserialize, ToSchema)]
pub struct CreateCall {
    /// The agent that talks; it must be active and have a positive max_call_duration_secs.
    agent_id: Option<uuid::Uuid>,
    /// Who to call: E.164, or a national form of the workspace's default country.
    to_number: Option<String>,
    /// An active number of the workspace to call from.
    from_phone_number_id: Option<uuid::Uuid>,
    /// 0-10, higher is placed first (default 5, the priority of campaign calls).
    #[schema(minimum = 0, maximum = 10)]
    priority: Option<i64>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Map<String, Value>>,
    /// Values for the agent's prompt placeholders.
    #[schema(value_type = Option<Object>)]
    variables: Option<Map<String, Value>>,
    /// 1-255 characters. Repeating a key with the same body answers the first call; with a
    /// different body, 400.
    #[schema(min_length = 1, max_length = 255)]
    idempotency_key: Option<String>,
    /// How long the callee's phone may ring before the call is given up as `no_answer`
    /// (5-300 s; default: the service's ring timeout, 30 s unless the operator set another).
    #[schema(minimum = 5, maximum = 300)]
    ring_timeout_secs: Option<i64>,
}

fn check_object(field: &str, value: Option<Map<String, Value>>) -> Result<Value, AppError> {
    let value = Value::Object(value.unwrap_or_default());
    if value.to_string().len() > MAX_OBJECT_BYTES {
        return Err(AppError::invalid_field(
            field,
            format!("at most {MAX_OBJECT_BYTES} bytes of JSON"),
        ));
    }
    Ok(value)
}

/// Places a call as `body` asks: queued by priority, then FIFO, within the workspace's
/// concurrency, once its reservation is covered.
pub async fn place_call(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<Placed<CallRecord>, AppError> {
    let ws = auth.workspace_id;
    let request_hash = request_hash(&body);
    let input: CreateCall = parse_fields(body, CREATE_FIELDS)?;
    let key = match input.idempotency_key {
        Some(k) if k.is_empty() || k.len() > 255 => {
            return Err(AppError::invalid_field(
                "idempotency_key",
                "must be 1-255 characters",
            ));
        }
        other => other,
    };
    let agent_id = AgentId::from_uuid(required(input.agent_id, "agent_id")?);
    let to = required(input.to_number, "to_number")?;
    let from_id = PhoneNumberId::from_uuid(required(
        input.from_phone_number_id,
        "from_phone_number_id",
    )?);
    let priority = input.priority.unwrap_or(PRIORITY_DEFAULT);
    if !(PRIORITY_MIN..=PRIORITY_MAX).contains(&priority) {
        return Err(AppError::invalid_field(
            "priority",
            format!("must be from {PRIORITY_MIN} to {PRIORITY_MAX}"),
        ));
    }
    if let Some(ring) = input.ring_timeout_secs
        && !RING_TIMEOUT_SECS.contains(&ring)
    {
        return Err(AppError::invalid_field(
            "ring_timeout_secs",
            format!(
                "must be from {} to {} seconds",
                RING_TIMEOUT_SECS.start(),
                RING_TIMEOUT_SECS.end()
            ),
        ));
    }
    let metadata = check_object("metadata", input.metadata)?;
    let variables = check_object("variables", input.variables)?;
    let country = state.store.default_country(ws).await?;
    let to = PhoneNumber::parse(&to, country)
        .map_err(|e| AppError::invalid_field("to_number", e.to_string()))?;

    let agent = state
        .store
        .agent(ws, agent_id)
        .await?
        .ok_or_else(|| AppError::invalid_field("agent_id", "no such agent"))?;
    if !agent.is_active {
        return Err(AppError::invalid_field(
            "agent_id",
            "the agent is deactivated",
        ));
    }
    let Some(cap) = agent.max_call_duration_secs.filter(|s| *s > 0) else {
        return Err(AppError::invalid_field(
            "agent_id",
            "the agent has no positive max_call_duration_secs",
        ));
    };
    let number = state
        .store
        .phone_number(ws, from_id)
        .await?
        .ok_or_else(|| AppError::invalid_field("from_phone_number_id", "no such number"))?;
    if !number.is_active || number.status != NumberStatus::Active {
        return Err(AppError::invalid_field(
            "from_phone_number_id",
            format!("{} is not active (status {})", number.number, number.status),
        ));
    }
    let now = state.store.now();
    if state
        .store
        .is_blocked(ws, to.as_str(), Some(agent_id), now)
        .await?
    {
        return Err(AppError::DoNotCall {
            number: to.as_str().to_owned(),
        });
    }
    let spec = CallSpec {
        id: CallId::new(),
        workspace_id: ws,
        campaign_id: None,
        contact_id: None,
        agent_id,
        from_phone_number_id: Some(from_id),
        from_number: number.number.clone(),
        to_number: to.as_str().to_owned(),
        priority,
        attempt: 1,
        max_duration_secs: cap,
        reserved_cents: state.config.outbound_cents_per_minute.per_minute_for(cap),
        queued_at: now,
        trunk: state.store.number_trunk(ws, from_id).await?,
    };
    let new = NewCall {
        spec: spec.clone(),
        metadata,
        variables,
        idempotency_key: key,
        request_hash: Some(request_hash.clone()),
        ring_timeout_secs: input.ring_timeout_secs,
    };
    match state.store.create_call(&new).await? {
        CallInsert::Created(call) => {
            state.engine.call_queued(spec);
            Ok(Placed::Created(call))
        }
        CallInsert::Replayed {
            call,
            request_hash: first,
        } => replayed(call, first.as_deref(), &request_hash),
        CallInsert::InsufficientFunds(funds) => Err(AppError::Billing {
            message: if funds.is_suspended {
                "The workspace is suspended; no calls are placed".into()
            } else {
                format!(
                    "Insufficient balance: {} cents available ({} reserved by queued and live calls); this call reserves {} cents",
                    funds.balance_cents - funds.reserved_cents,
                    funds.reserved_cents,
                    spec.reserved_cents
                )
            },
        }),
    }
}

pub async fn set_disposition(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<CallRecord, AppError> {
    let ws = auth.workspace_id;
    let input: DispositionInput = parse_fields(body, &["disposition_id"])?;
    let disposition = DispositionId::from_uuid(required(input.disposition_id, "disposition_id")?);
    let id = CallId::from_uuid(id);
    if state.store.call(ws, id).await?.is_none() {
        return Err(AppError::not_found("Call"));
    }
    if state.store.disposition(ws, disposition).await?.is_none() {
        return Err(AppError::invalid_field(
            "disposition_id",
            "no such disposition in this workspace",
        ));
    }
    let result = crate::runtime::engine::land_disposition(
        &state.store,
        &state.engine,
        ws,
        id,
        disposition,
        DispositionSource::Api,
    )
    .await?
    .ok_or(AppError::not_found("Call"))?;
    match result {
        DispositionSet::Set(call) | DispositionSet::Unchanged(call) => {
            Ok(call.presented(state.recording_links()))
        }
        DispositionSet::Conflict(_) => Err(AppError::Conflict {
            message: "Another disposition is already set on this call".into(),
        }),
        DispositionSet::NotAnswered(call) => Err(AppError::bad_request(format!(
            "A disposition lands on an answered call; this call is {}{}",
            call.status.as_str(),
            call.outcome
                .map(|o| format!(" ({})", o.as_str()))
                .unwrap_or_default()
        ))),
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = CallDispositionInput)]
pub struct DispositionInput {
    /// A disposition of the workspace.
    pub disposition_id: Option<uuid::Uuid>,
}
