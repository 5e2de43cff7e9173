//! A campaign's contacts: enrollment (JSON or CSV), the list, and one contact with its calls and
//! why it is, or is not, being dialled now.

use axum::response::{IntoResponse, Response};

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::header;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_actors::contact::ContactState;
use switchboard_actors::ids::{CampaignId, ContactId};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::{JsonObject, ListResponse, Pagination, PathId, PathIds, Q};
use crate::http::openapi::body_schema;
use crate::http::state::AppState;
use crate::store::{Contact, EnrollCounts};

use crate::app::campaigns::contacts::{ContactDetail, contact_status};
use crate::app::campaigns::enroll::{
    InvalidRow, MAX_JSON_CONTACTS, SpoolReader, Submitted, enroll as enroll_submitted,
    enrolling_into, parse_json_contacts, receive, refuse_terminal,
};
use crate::app::campaigns::view::NOT_FOUND;
use crate::app::error::AppError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, enroll))
        .routes(routes!(get_contact))
}

#[derive(Debug, Serialize, ToSchema)]
struct EnrollResult {
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

/// Enroll contacts (JSON `{contacts: [...]}` up to 10,000, or a `text/csv` body)
#[utoipa::path(post, path = "/campaigns/{id}/contacts", operation_id = "enrollCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)),
    request_body(content((ContactsBody = "application/json"), (String = "text/csv")), description = "JSON {contacts: [{phone_number, timezone?, lead_id?, variables?, metadata?}]} or text/csv with a phone_number column, all or nothing"),
    responses((status = 200, body = EnrollResult), (status = 400), (status = 404), (status = 413)))]
pub async fn enroll(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    req: Request,
) -> Result<Response, ApiError> {
    let campaign = enrolling_into(&state, &auth, CampaignId::from_uuid(id)).await?;
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
    let (counts, invalid) = enroll_submitted(&state, &auth, &campaign, submitted).await?;
    tracing::info!(
        campaign = %campaign.id,
        enrolled = counts.enrolled,
        duplicates = counts.duplicates,
        excluded_dnc = counts.excluded,
        received_ms = received.as_millis() as u64,
        enrolled_ms = (started.elapsed() - received).as_millis() as u64,
        "contacts enrolled"
    );
    Ok(enroll_response(counts, invalid))
}

fn contact_state_schema() -> utoipa::openapi::schema::Object {
    crate::http::extract::one_of(ContactState::ALL.map(ContactState::as_str))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContactQuery {
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
pub async fn list_contacts(
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
        .ok_or(ApiError::not_found("Contact"))?;
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

/// Receives a CSV body into a spool (memory, then a temporary file), so that the upload's pace
/// never holds the enrollment's transaction open. Past `max_csv_body_bytes` (the declared length
/// or the bytes received) it is refused with 413.
async fn receive_csv(
    state: &crate::app::state::App,
    req: Request,
) -> Result<SpoolReader, AppError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    receive(state, declared, req.into_body().into_data_stream()).await
}
