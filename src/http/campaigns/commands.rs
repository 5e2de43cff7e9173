//! The campaign commands (launch, resume, pause, stop, DELETE = archive) through the spec's
//! transition table, with the launch preflight, and the audit events they leave.

use super::*;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(archive))
        .routes(routes!(launch))
        .routes(routes!(resume))
        .routes(routes!(pause))
        .routes(routes!(stop))
        .routes(routes!(events))
}

async fn preflight(
    state: &AppState,
    ws: WorkspaceId,
    c: &CampaignRecord,
) -> Result<Option<String>, ApiError> {
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
            status: n.status.clone(),
            number: n.number.clone(),
            trunk: None,
        }),
        window: &window,
        now: state.store.now(),
        starts_at: s.starts_at,
        ends_at: s.ends_at,
    }
    .check();
    match check {
        Ok(()) => Ok(number.map(|n| n.number)),
        Err(problem) => Err(ApiError::CampaignNotReady {
            message: problem.to_string(),
        }),
    }
}

/// Runs a command against the state table; answers the campaign as it now is.
pub(crate) async fn command(
    state: &AppState,
    auth: &Auth,
    id: uuid::Uuid,
    command: Command,
) -> Result<CampaignView, ApiError> {
    let ws = auth.workspace_id;
    let id = CampaignId::from_uuid(id);
    // A concurrent command may win the optimistic check; decide again from the fresh status.
    for _ in 0..3 {
        let current = state.store.campaign_any(ws, id).await?.ok_or(NOT_FOUND)?;
        let transition = rules::transition(current.status, command).map_err(|e| match e {
            TransitionError::Archived => NOT_FOUND,
            other => ApiError::bad_request(other.to_string()),
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
                    rules::start_status(state.store.now(), current.settings.starts_at),
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
    Err(ApiError::Conflict {
        message: "The campaign is changing status concurrently; retry".into(),
    })
}

/// Launch a campaign (preflight: active from-number, agent with a duration cap, reachable calling window)
#[utoipa::path(post, path = "/campaigns/{id}/launch", operation_id = "launchCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
async fn launch(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Launch).await?))
}

/// Resume a paused campaign (same preflight as launch)
#[utoipa::path(post, path = "/campaigns/{id}/resume", operation_id = "resumeCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 422)))]
async fn resume(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Resume).await?))
}

/// Pause a campaign (never lifted automatically)
#[utoipa::path(post, path = "/campaigns/{id}/pause", operation_id = "pauseCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
async fn pause(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Pause).await?))
}

/// Stop a campaign for good (it stays readable)
#[utoipa::path(post, path = "/campaigns/{id}/stop", operation_id = "stopCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = CampaignView), (status = 400), (status = 404)))]
async fn stop(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(command(&state, &auth, id, Command::Stop).await?))
}

#[derive(Serialize, ToSchema)]
struct Archived {
    success: bool,
    id: uuid::Uuid,
    status: &'static str,
}

/// Archive a campaign (from any status; frees its name)
#[utoipa::path(delete, path = "/campaigns/{id}", operation_id = "archiveCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), responses((status = 200, body = Archived), (status = 404)))]
async fn archive(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
) -> Result<Json<Archived>, ApiError> {
    command(&state, &auth, id, Command::Archive).await?;
    Ok(Json(Archived {
        success: true,
        id,
        status: "archived",
    }))
}

/// A campaign's audit events, oldest first
#[utoipa::path(get, path = "/campaigns/{id}/events", operation_id = "listCampaignEvents", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), Pagination), responses((status = 200, body = ListResponse<CampaignEvent>), (status = 404)))]
async fn events(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(p): Q<Pagination>,
) -> Result<Json<ListResponse<CampaignEvent>>, ApiError> {
    let page = p.page()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .campaign_events(auth.workspace_id, c.id, page)
            .await?,
        page,
    )))
}
