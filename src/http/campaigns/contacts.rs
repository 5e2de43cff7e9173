//! A campaign's contacts: enrollment (JSON or CSV), the list, and one contact with its calls and
//! why it is, or is not, being dialled now.

use super::*;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, enroll))
        .routes(routes!(get_contact))
}

/// At most this many contacts in one JSON request.
pub const MAX_JSON_CONTACTS: usize = 10_000;

#[derive(Debug, Serialize, ToSchema)]
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

struct RawContact {
    phone_number: String,
    timezone: Option<String>,
    lead_id: Option<String>,
    variables: Map<String, Value>,
    metadata: Map<String, Value>,
}

fn parse_json_contacts(
    body: Map<String, Value>,
) -> Result<Vec<Result<RawContact, String>>, ApiError> {
    check_fields(&body, &["contacts"])?;
    let items = match body.get("contacts") {
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ApiError::invalid_field("contacts", "must be an array"));
        }
        None => return Err(ApiError::missing_field("contacts")),
    };
    if items.len() > MAX_JSON_CONTACTS {
        return Err(ApiError::bad_request(format!(
            "Too many contacts: at most {MAX_JSON_CONTACTS} per request (send CSV for more)"
        )));
    }
    Ok(items
        .iter()
        .map(|item| {
            let obj = item.as_object().ok_or("must be an object")?;
            if let Some(k) = obj.keys().find(|k| !["phone_number", "timezone", "lead_id", "variables", "metadata"].contains(&k.as_str())) {
                return Err(format!("unknown field `{k}`; allowed: phone_number, timezone, lead_id, variables, metadata"));
            }
            let text = |k: &str| -> Result<Option<String>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(format!("`{k}` must be a string")),
                }
            };
            let object = |k: &str| -> Result<Map<String, Value>, String> {
                match obj.get(k) {
                    None | Some(Value::Null) => Ok(Map::new()),
                    Some(Value::Object(m)) => Ok(m.clone()),
                    Some(_) => Err(format!("`{k}` must be an object")),
                }
            };
            Ok(RawContact {
                phone_number: text("phone_number")?.ok_or("missing `phone_number`")?,
                timezone: text("timezone")?,
                lead_id: text("lead_id")?,
                variables: object("variables")?,
                metadata: object("metadata")?,
            })
        })
        .collect())
}

fn parse_csv_contacts(bytes: &[u8]) -> Result<Vec<Result<RawContact, String>>, ApiError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| ApiError::bad_request(format!("Invalid CSV header: {e}")))?
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let phone_col = headers
        .iter()
        .position(|h| h == "phone_number")
        .ok_or_else(|| ApiError::bad_request("CSV header must name a `phone_number` column"))?;
    let tz_col = headers.iter().position(|h| h == "timezone");
    let lead_col = headers.iter().position(|h| h == "lead_id");
    Ok(reader
        .records()
        .map(|record| {
            let record = record.map_err(|e| format!("unreadable CSV row: {e}"))?;
            let cell = |i: Option<usize>| {
                i.and_then(|i| record.get(i))
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            };
            let mut variables = Map::new();
            for (i, name) in headers.iter().enumerate() {
                if Some(i) != Some(phone_col)
                    && Some(i) != tz_col
                    && Some(i) != lead_col
                    && !name.is_empty()
                    && let Some(v) = record.get(i)
                {
                    variables.insert(name.clone(), Value::String(v.to_owned()));
                }
            }
            Ok(RawContact {
                phone_number: cell(Some(phone_col)).ok_or("missing phone_number")?,
                timezone: cell(tz_col),
                lead_id: cell(lead_col),
                variables,
                metadata: Map::new(),
            })
        })
        .collect())
}

/// Enroll contacts (JSON `{contacts: [...]}` up to 10,000, or a `text/csv` body)
#[utoipa::path(post, path = "/campaigns/{id}/contacts", operation_id = "enrollCampaignContacts", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)),
    request_body(content((ContactsBody = "application/json"), (String = "text/csv")), description = "JSON {contacts: [{phone_number, timezone?, lead_id?, variables?, metadata?}]} or text/csv with a phone_number column"),
    responses((status = 200, body = EnrollResult), (status = 400), (status = 404), (status = 413)))]
async fn enroll(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    req: Request,
) -> Result<Json<EnrollResult>, ApiError> {
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
    let raw = if is_csv {
        let bytes = read_body(req, state.config.max_csv_body_bytes).await?;
        parse_csv_contacts(&bytes)?
    } else {
        let JsonObject(body) = JsonObject::from_request(req, &state).await?;
        parse_json_contacts(body)?
    };
    if campaign.status.is_terminal() {
        return Err(ApiError::bad_request(format!(
            "Campaign is {}; contacts cannot be enrolled",
            campaign.status.as_str()
        )));
    }
    let country = state.store.default_country(ws).await?;
    let blocked = state
        .store
        .blocked_numbers(ws, campaign.settings.agent_id, state.store.now())
        .await?;
    // Contacts may reference the workspace's leads; any other id is an invalid row.
    let mut lead_ids: Vec<LeadId> = raw
        .iter()
        .filter_map(|r| r.as_ref().ok()?.lead_id.as_deref()?.parse().ok())
        .collect();
    lead_ids.sort_by_key(|l| l.as_uuid());
    lead_ids.dedup();
    let leads = state.store.existing_leads(ws, &lead_ids).await?;
    let mut seen = std::collections::HashSet::with_capacity(raw.len());
    let mut contacts = Vec::with_capacity(raw.len());
    let mut invalid = Vec::new();
    let mut duplicates = 0;
    for (i, item) in raw.into_iter().enumerate() {
        let row = i + 1;
        let checked = item.and_then(|c| {
            let number = PhoneNumber::parse(&c.phone_number, country).map_err(|e| e.to_string())?;
            if let Some(tz) = &c.timezone {
                tz.parse::<chrono_tz::Tz>()
                    .map_err(|_| format!("`{tz}` is not an IANA time zone"))?;
            }
            let lead_id = c
                .lead_id
                .as_deref()
                .map(|l| {
                    uuid::Uuid::parse_str(l)
                        .map(LeadId::from_uuid)
                        .map_err(|_| format!("lead_id `{l}` is not a UUID"))
                })
                .transpose()?;
            if let Some(lead) = lead_id
                && !leads.contains(&lead)
            {
                return Err(format!("lead_id `{lead}` is not a lead of this workspace"));
            }
            Ok(NewContact {
                excluded: blocked
                    .contains(number.as_str())
                    .then_some(ExclusionReason::DoNotCall),
                phone_number: number.as_str().to_owned(),
                timezone: c.timezone,
                lead_id,
                variables: Value::Object(c.variables),
                metadata: Value::Object(c.metadata),
            })
        });
        match checked {
            Ok(contact) => {
                if seen.insert(contact.phone_number.clone()) {
                    contacts.push(contact);
                } else {
                    duplicates += 1;
                }
            }
            Err(error) => invalid.push(InvalidRow { row, error }),
        }
    }
    let counts = state
        .store
        .enroll_contacts(auth.workspace_id, campaign.id, &contacts, auth.key_id)
        .await?
        .ok_or(NOT_FOUND)?;
    if campaign.status != CampaignStatus::Draft {
        state.engine.campaign_changed(campaign.id);
    }
    Ok(Json(EnrollResult {
        enrolled: counts.enrolled,
        duplicates: duplicates + counts.duplicates,
        excluded_dnc: counts.excluded,
        invalid,
    }))
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
    let now = state.store.now();
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    let campaign = CampaignFacts {
        status: c.status,
        window: &window,
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
        last_call_ended_at: calls.last().and_then(|k| k.ended_at),
    };
    let hold = contact_hold(&campaign, &facts, now);
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
