//! A campaign's contacts: enrollment (JSON or CSV), the list, and one contact with its calls and
//! why it is, or is not, being dialled now.

use axum::response::{IntoResponse, Response};

use super::staging::{SpoolReader, Submitted, enroll_staged, parse_json_contacts, receive_csv};
use super::*;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, enroll))
        .routes(routes!(get_contact))
}

/// At most this many contacts in one JSON request.
pub const MAX_JSON_CONTACTS: usize = 10_000;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InvalidRow {
    /// 1-based position among the submitted contacts (CSV: data rows, after the header).
    pub row: usize,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnrollResult {
    pub enrolled: i64,
    pub duplicates: i64,
    pub excluded_dnc: i64,
    pub invalid: Vec<InvalidRow>,
}

body_schema!(
    /// The JSON body of `POST /campaigns/{id}/contacts`; a contact that breaks a rule is
    /// reported in `invalid` and the others are enrolled.
    ContactsBody = json(contacts_schema())
);

fn contacts_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["contacts"],
        "properties": {
            "contacts": {
                "type": "array",
                "maxItems": MAX_JSON_CONTACTS,
                "items": {
                    "description": "{phone_number, timezone?, lead_id?, variables?, metadata?}: phone_number E.164 (or national in the workspace's country), lead_id a lead of the workspace. An item that is not such an object is reported in `invalid`, not refused.",
                },
            },
        },
    })
}

/// The answer, `{enrolled, duplicates, excluded_dnc, invalid: [...]}` as [`EnrollResult`]
/// serializes, with the invalid rows streamed from their spool when they did not fit in memory.
fn enroll_response(counts: EnrollCounts, invalid: SpoolReader) -> Response {
    let head = format!(
        "{{\"enrolled\":{},\"duplicates\":{},\"excluded_dnc\":{},\"invalid\":[",
        counts.enrolled, counts.duplicates, counts.excluded
    );
    let body = match invalid {
        SpoolReader::Memory(rows) => {
            let mut body = head.into_bytes();
            body.extend_from_slice(&rows);
            body.extend_from_slice(b"]}");
            axum::body::Body::from(body)
        }
        SpoolReader::File(file) => {
            let rows = futures_util::stream::unfold(Some(file), |file| async move {
                let mut file = file?;
                let read = tokio::task::spawn_blocking(move || {
                    let mut chunk = vec![0; 1 << 16];
                    let n = std::io::Read::read(&mut file, &mut chunk);
                    (file, n, chunk)
                })
                .await;
                match read {
                    Err(e) => Some((Err(std::io::Error::other(e)), None)),
                    Ok((_, Ok(0), _)) => None,
                    Ok((_, Err(e), _)) => Some((Err(e), None)),
                    Ok((file, Ok(n), mut chunk)) => {
                        chunk.truncate(n);
                        Some((Ok(axum::body::Bytes::from(chunk)), Some(file)))
                    }
                }
            });
            use futures_util::StreamExt;
            let stream = futures_util::stream::iter([Ok(axum::body::Bytes::from(head))])
                .chain(rows)
                .chain(futures_util::stream::iter([Ok(
                    axum::body::Bytes::from_static(b"]}"),
                )]));
            axum::body::Body::from_stream(stream)
        }
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Contacts are not enrolled into a stopped, completed or archived campaign.
fn refuse_terminal(campaign: &CampaignRecord) -> Result<(), ApiError> {
    if campaign.status.is_terminal() {
        return Err(ApiError::bad_request(format!(
            "Campaign is {}; contacts cannot be enrolled",
            campaign.status.as_str()
        )));
    }
    Ok(())
}

/// What an upload enrolled, for a person to read: the counts and the first invalid rows.
pub(crate) struct EnrollReport {
    pub counts: EnrollCounts,
    pub invalid: Vec<InvalidRow>,
    pub invalid_total: usize,
}

/// Enrolls an uploaded CSV (the dashboard's form) exactly as `POST /campaigns/{id}/contacts`
/// enrolls a `text/csv` body; answers the report with at most `shown` invalid rows.
pub(crate) async fn enroll_csv_upload<S, E>(
    state: &AppState,
    auth: &Auth,
    id: CampaignId,
    declared: Option<u64>,
    body: S,
    shown: usize,
) -> Result<EnrollReport, ApiError>
where
    S: futures_util::Stream<Item = Result<axum::body::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let campaign = state
        .store
        .campaign(auth.workspace_id, id)
        .await?
        .ok_or(NOT_FOUND)?;
    refuse_terminal(&campaign)?;
    let received = super::staging::receive(state, declared, body).await?;
    let (counts, invalid) = enroll_staged(state, auth, &campaign, Submitted::Csv(received)).await?;
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    let rows = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<InvalidRow>> {
        let mut bytes = b"[".to_vec();
        std::io::Read::read_to_end(&mut invalid.into_buf_read(), &mut bytes)?;
        bytes.push(b']');
        Ok(serde_json::from_slice(&bytes)?)
    })
    .await
    .map_err(|e| ApiError::Internal(anyhow::Error::new(e)))?
    .map_err(|e| ApiError::Internal(anyhow::Error::new(e)))?;
    let invalid_total = rows.len();
    Ok(EnrollReport {
        counts,
        invalid: rows.into_iter().take(shown).collect(),
        invalid_total,
    })
}

/// Enroll contacts (JSON `{contacts: [...]}` up to 10,000, or a `text/csv` body)
#[utoipa::path(post, path = "/campaigns/{id}/contacts", operation_id = "enrollCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)),
    request_body(content((ContactsBody = "application/json"), (String = "text/csv")), description = "JSON {contacts: [{phone_number, timezone?, lead_id?, variables?, metadata?}]} or text/csv with a phone_number column, all or nothing"),
    responses((status = 200, body = EnrollResult), (status = 400), (status = 404), (status = 413)))]
async fn enroll(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    req: Request,
) -> Result<Response, ApiError> {
    let ws = auth.workspace_id;
    let campaign = state
        .store
        .campaign(ws, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let is_csv = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/csv"));
    let started = std::time::Instant::now();
    let submitted = if is_csv {
        // Refused before the upload is read rather than after.
        refuse_terminal(&campaign)?;
        Submitted::Csv(receive_csv(&state, req).await?)
    } else {
        let JsonObject(body) = JsonObject::from_request(req, &state).await?;
        let contacts = parse_json_contacts(body)?;
        refuse_terminal(&campaign)?;
        Submitted::Json(contacts)
    };
    let received = started.elapsed();
    let (counts, invalid) = enroll_staged(&state, &auth, &campaign, submitted).await?;
    tracing::info!(
        campaign = %campaign.id,
        enrolled = counts.enrolled,
        duplicates = counts.duplicates,
        excluded_dnc = counts.excluded,
        received_ms = received.as_millis() as u64,
        enrolled_ms = (started.elapsed() - received).as_millis() as u64,
        "contacts enrolled"
    );
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    Ok(enroll_response(counts, invalid))
}

fn contact_state_schema() -> utoipa::openapi::schema::Object {
    crate::http::extract::one_of(ContactState::ALL.map(ContactState::as_str))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContactQuery {
    /// pending, dialing, awaiting_disposition, scheduled, retired, exhausted or excluded.
    #[param(schema_with = contact_state_schema)]
    state: Option<String>,
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// List a campaign's contacts
#[utoipa::path(get, path = "/campaigns/{id}/contacts", operation_id = "listCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ContactQuery), responses((status = 200, body = ListResponse<Contact>), (status = 404)))]
async fn list_contacts(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    Q(q): Q<ContactQuery>,
) -> Result<Json<ListResponse<Contact>>, ApiError> {
    let page = Pagination {
        limit: q.limit,
        offset: q.offset,
    }
    .page()?;
    let contact_state = q
        .state
        .as_deref()
        .map(|s| {
            ContactState::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid query parameter `state`: `{s}` is not a contact state"
                ))
            })
        })
        .transpose()?;
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    Ok(Json(ListResponse::new(
        state
            .store
            .list_contacts(auth.workspace_id, c.id, contact_state, page)
            .await?,
        page,
    )))
}

/// Why a contact is, or is not, being dialled now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactStatus {
    /// `call_in_progress`, `awaiting_disposition`, `retry_scheduled`, `outside_calling_window`,
    /// `daily_cap_reached`, `waiting_for_a_slot`, `campaign_<status>`, `retired`, `exhausted`,
    /// `excluded:<reason>`.
    pub reason: String,
    /// When that changes, if known.
    pub until: Option<DateTime<Utc>>,
    pub message: String,
}

/// A contact with its calls (every dial of every attempt) and why it is where it is.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactDetail {
    #[serde(flatten)]
    pub contact: Contact,
    /// Every call placed for the contact, oldest first.
    pub calls: Vec<CallRecord>,
    pub dialing_status: ContactStatus,
}

async fn contact_status(
    state: &AppState,
    c: &CampaignRecord,
    contact: &Contact,
    calls: &[CallRecord],
) -> Result<ContactStatus, ApiError> {
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    hold_of(
        state,
        c,
        &window,
        contact,
        calls.last().and_then(|k| k.ended_at),
    )
}

/// Why each of `contacts` (of campaign `c`) is, or is not, being dialled now.
pub(crate) async fn dialing_statuses(
    state: &AppState,
    c: &CampaignRecord,
    contacts: &[Contact],
) -> Result<Vec<ContactStatus>, ApiError> {
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    let mut statuses = Vec::with_capacity(contacts.len());
    for contact in contacts {
        // Only a contact awaiting its disposition needs its last call (for when that ends).
        let last_ended = if contact.state == ContactState::AwaitingDisposition.as_str() {
            let calls = state
                .store
                .contact_calls(c.workspace_id, contact.id)
                .await?;
            calls.last().and_then(|k| k.ended_at)
        } else {
            None
        };
        statuses.push(hold_of(state, c, &window, contact, last_ended)?);
    }
    Ok(statuses)
}

fn hold_of(
    state: &AppState,
    c: &CampaignRecord,
    window: &CallingWindow,
    contact: &Contact,
    last_call_ended_at: Option<DateTime<Utc>>,
) -> Result<ContactStatus, ApiError> {
    let campaign = CampaignFacts {
        status: c.status,
        window,
        ends_at: c.settings.ends_at,
        daily_window_date: c.daily_window_date,
        daily_admitted_count: c.daily_admitted_count,
        max_calls_per_day: c.settings.max_calls_per_day,
        disposition_timeout: chrono::Duration::from_std(state.config.disposition_timeout)
            .unwrap_or(chrono::Duration::MAX),
    };
    let Some(contact_state) = ContactState::parse(&contact.state) else {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "contact {} has an unknown state {:?}",
            contact.id,
            contact.state
        )));
    };
    let facts = ContactFacts {
        state: contact_state,
        attempts: contact.attempts,
        excluded_reason: contact.excluded_reason.as_deref(),
        next_attempt_at: contact.next_attempt_at,
        timezone: contact.timezone.as_deref(),
        phone_number: &contact.phone_number,
        last_call_ended_at,
    };
    let hold = contact_hold(&campaign, &facts, state.store.now());
    Ok(ContactStatus {
        reason: hold.reason(),
        until: hold.until(),
        message: hold.message(c.last_tick_result.as_deref()),
    })
}

/// Get one contact of a campaign, with its calls and why it is or is not being dialled now
#[utoipa::path(get, path = "/campaigns/{id}/contacts/{contact_id}", operation_id = "getCampaignContact", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path), ("contact_id" = uuid::Uuid, Path)), responses((status = 200, body = ContactDetail), (status = 404)))]
async fn get_contact(
    State(state): State<AppState>,
    auth: Auth,
    PathIds(id, contact_id): PathIds,
) -> Result<Json<ContactDetail>, ApiError> {
    let c = state
        .store
        .campaign(auth.workspace_id, CampaignId::from_uuid(id))
        .await?
        .ok_or(NOT_FOUND)?;
    let contact = state
        .store
        .contact(auth.workspace_id, c.id, ContactId::from_uuid(contact_id))
        .await?
        .ok_or(ApiError::NotFound {
            resource: "Contact",
        })?;
    let calls = state
        .store
        .contact_calls(auth.workspace_id, contact.id)
        .await?;
    let dialing_status = contact_status(&state, &c, &contact, &calls).await?;
    Ok(Json(ContactDetail {
        contact,
        calls,
        dialing_status,
    }))
}
