//! Leads and their tags: what creating, changing, tagging and deleting do and refuse.

use crate::app::auth::Auth;
use crate::app::dnc::NumberIn;
use crate::app::error::AppError;
use crate::app::fields::check_fields;
use crate::app::state::App;
use crate::store::{Lead, LeadFields, LeadTag};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_actors::ids::{LeadId, LeadTagId};
use utoipa::ToSchema;

pub async fn create(state: &App, auth: &Auth, body: Map<String, Value>) -> Result<Lead, AppError> {
    check_fields(&body, LEAD_FIELDS)?;
    if !body.get("phone_number").is_some_and(Value::is_string) {
        return Err(AppError::missing_field("phone_number"));
    }
    let tags = tag_ids(&body)?;
    let mut fields = LeadFields {
        metadata: json!({}),
        ..Default::default()
    };
    merge(state, auth, &body, &mut fields).await?;
    for tag in &tags {
        if state
            .store
            .lead_tag(auth.workspace_id, *tag)
            .await?
            .is_none()
        {
            return Err(invalid(
                "tag_ids",
                "every tag must be a lead tag of this workspace",
            ));
        }
    }
    let lead = state.store.create_lead(auth.workspace_id, &fields).await?;
    apply_tags(state, auth, lead.id, &tags).await?;
    let lead = state
        .store
        .lead(auth.workspace_id, lead.id)
        .await?
        .ok_or(AppError::not_found("Lead"))?;
    Ok(lead)
}

pub async fn update(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<Lead, AppError> {
    check_fields(&body, &LEAD_FIELDS[..8])?;
    if body.is_empty() {
        return Err(AppError::bad_request(format!(
            "No writable field sent; writable fields: {}",
            LEAD_FIELDS[..8].join(", ")
        )));
    }
    let id = LeadId::from_uuid(id);
    let lead = state
        .store
        .lead(auth.workspace_id, id)
        .await?
        .ok_or(AppError::not_found("Lead"))?;
    let mut fields = lead.fields;
    merge(state, auth, &body, &mut fields).await?;
    state
        .store
        .update_lead(auth.workspace_id, id, &fields)
        .await?
        .ok_or(AppError::not_found("Lead"))
}

pub async fn delete(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<Value, AppError> {
    if !state
        .store
        .delete_lead(auth.workspace_id, LeadId::from_uuid(id))
        .await?
    {
        return Err(AppError::not_found("Lead"));
    }
    Ok(json!({"success": true}))
}

pub async fn tag(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<Lead, AppError> {
    check_fields(&body, &["tag_ids"])?;
    let tags = tag_ids(&body)?;
    if tags.is_empty() {
        return Err(invalid("tag_ids", "must list at least one tag"));
    }
    let id = LeadId::from_uuid(id);
    if state.store.lead(auth.workspace_id, id).await?.is_none() {
        return Err(AppError::not_found("Lead"));
    }
    apply_tags(state, auth, id, &tags).await?;
    state
        .store
        .lead(auth.workspace_id, id)
        .await?
        .ok_or(AppError::not_found("Lead"))
}

pub async fn untag(
    state: &App,
    auth: &Auth,
    lead: uuid::Uuid,
    tag: uuid::Uuid,
) -> Result<Value, AppError> {
    let removed = state
        .store
        .untag_lead(
            auth.workspace_id,
            LeadId::from_uuid(lead),
            LeadTagId::from_uuid(tag),
        )
        .await?;
    crate::app::fields::deleted(removed, tag, "Tag on this lead")
}

pub async fn create_tag(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<LeadTag, AppError> {
    let (name, color) = tag_fields(&body, true)?;
    let tag = state
        .store
        .create_lead_tag(
            auth.workspace_id,
            &name.unwrap_or_default(),
            &color.unwrap_or_default(),
        )
        .await?;
    Ok(tag)
}

pub async fn update_tag(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<LeadTag, AppError> {
    let (name, color) = tag_fields(&body, false)?;
    if name.is_none() && color.is_none() {
        return Err(AppError::bad_request(
            "No writable field sent; writable fields: name, color",
        ));
    }
    state
        .store
        .update_lead_tag(
            auth.workspace_id,
            LeadTagId::from_uuid(id),
            name.as_deref(),
            color.as_deref(),
        )
        .await?
        .ok_or(AppError::not_found("Lead tag"))
}

pub async fn delete_tag(state: &App, auth: &Auth, id: uuid::Uuid) -> Result<Value, AppError> {
    let removed = state
        .store
        .delete_lead_tag(auth.workspace_id, LeadTagId::from_uuid(id))
        .await?;
    crate::app::fields::deleted(removed, id, "Lead tag")
}

pub const LEAD_FIELDS: &[&str] = &[
    "phone_number",
    "first_name",
    "last_name",
    "email",
    "company",
    "timezone",
    "notes",
    "metadata",
    "tag_ids",
];

/// The fields of a lead as the document describes them; the handlers read the body field by
/// field ([`merge`]).
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only.
pub struct LeadInput {
    /// The number in any common format; national forms are read in the workspace's country.
    pub phone_number: String,
    /// At most 100 characters; null clears it.
    #[schema(max_length = 100)]
    pub first_name: Option<String>,
    /// At most 100 characters; null clears it.
    #[schema(max_length = 100)]
    pub last_name: Option<String>,
    /// An email address, at most 254 characters; empty or null clears it.
    #[schema(max_length = 254, pattern = r"^$|^[^@\s]+@[^@\s]*\.[^@\s]*$")]
    pub email: Option<String>,
    /// At most 200 characters; null clears it.
    #[schema(max_length = 200)]
    pub company: Option<String>,
    /// An IANA time zone such as `America/New_York`; empty or null clears it.
    #[schema(max_length = 64)]
    pub timezone: Option<String>,
    /// At most 5000 characters; null clears it.
    #[schema(max_length = 5000)]
    pub notes: Option<String>,
    /// Any object, at most 16 KiB of JSON; null clears it.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Lead tags of the workspace to put on the new lead.
    pub tag_ids: Option<Vec<uuid::Uuid>>,
}

/// A lead tag's fields.
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only; [`tag_fields`] reads the body.
pub struct LeadTagInput {
    /// 1-50 characters, unique in the workspace.
    #[schema(min_length = 1, max_length = 50, pattern = r"\S")]
    pub name: String,
    /// Hex color `#rrggbb` (default `#6b7280`).
    #[schema(nullable = false, pattern = "^#[0-9a-fA-F]{6}$")]
    pub color: Option<String>,
}

/// The writable fields of a lead tag.
pub const TAG_FIELDS: &[&str] = &["name", "color"];

pub fn invalid(field: &str, rule: &str) -> AppError {
    AppError::invalid_field(field, rule.to_string())
}

pub fn text(body: &Map<String, Value>, key: &str, max: usize) -> Result<Option<String>, AppError> {
    match body.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(String::new())),
        Some(Value::String(s)) => {
            let s = s.trim().to_string();
            if s.chars().count() > max {
                return Err(invalid(key, &format!("must be at most {max} characters")));
            }
            Ok(Some(s))
        }
        Some(_) => Err(invalid(key, "must be a string")),
    }
}

/// Applies the sent fields over `f` (the stored lead, or empty on create).
pub async fn merge(
    state: &App,
    auth: &Auth,
    body: &Map<String, Value>,
    f: &mut LeadFields,
) -> Result<(), AppError> {
    if let Some(v) = body.get("phone_number") {
        let raw = v
            .as_str()
            .ok_or_else(|| invalid("phone_number", "must be a string"))?;
        f.phone_number =
            crate::app::dnc::parse_number(state, auth, raw, NumberIn::Field("phone_number"))
                .await?;
    }
    for (key, slot, max) in [
        ("first_name", &mut f.first_name, 100),
        ("last_name", &mut f.last_name, 100),
        ("company", &mut f.company, 200),
        ("notes", &mut f.notes, 5000),
    ] {
        if let Some(v) = text(body, key, max)? {
            *slot = v;
        }
    }
    if let Some(email) = text(body, "email", 254)? {
        if !email.is_empty() {
            let (local, domain) = email.split_once('@').unwrap_or_default();
            if local.is_empty() || !domain.contains('.') || email.contains(char::is_whitespace) {
                return Err(invalid("email", "must be an email address"));
            }
        }
        f.email = (!email.is_empty()).then_some(email);
    }
    if let Some(tz) = text(body, "timezone", 64)? {
        if !tz.is_empty() && tz.parse::<chrono_tz::Tz>().is_err() {
            return Err(invalid(
                "timezone",
                "must be an IANA time zone such as America/New_York",
            ));
        }
        f.timezone = (!tz.is_empty()).then_some(tz);
    }
    match body.get("metadata") {
        None => {}
        Some(Value::Null) => f.metadata = json!({}),
        Some(v @ Value::Object(_)) => {
            if v.to_string().len() > 16_384 {
                return Err(invalid("metadata", "must be at most 16 KiB of JSON"));
            }
            f.metadata = v.clone();
        }
        Some(_) => return Err(invalid("metadata", "must be an object")),
    }
    Ok(())
}

pub fn tag_ids(body: &Map<String, Value>) -> Result<Vec<LeadTagId>, AppError> {
    match body.get("tag_ids") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| {
                v.as_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| invalid("tag_ids", "must be an array of tag ids"))
            })
            .collect(),
        Some(_) => Err(invalid("tag_ids", "must be an array of tag ids")),
    }
}

pub async fn apply_tags(
    state: &App,
    auth: &Auth,
    lead: LeadId,
    tags: &[LeadTagId],
) -> Result<(), AppError> {
    if !tags.is_empty() && !state.store.tag_lead(auth.workspace_id, lead, tags).await? {
        return Err(invalid(
            "tag_ids",
            "every tag must be a lead tag of this workspace",
        ));
    }
    Ok(())
}

#[derive(Deserialize, ToSchema)]
pub struct TagInput {
    #[schema(min_items = 1)]
    /// Lead tag ids to put on the lead.
    #[allow(dead_code)]
    pub tag_ids: Vec<uuid::Uuid>,
}

pub fn tag_fields(
    body: &Map<String, Value>,
    create: bool,
) -> Result<(Option<String>, Option<String>), AppError> {
    check_fields(body, TAG_FIELDS)?;
    let name = match body.get("name") {
        None if create => return Err(AppError::missing_field("name")),
        None => None,
        Some(Value::String(s)) if (1..=50).contains(&s.trim().chars().count()) => {
            Some(s.trim().to_string())
        }
        Some(_) => return Err(invalid("name", "must be 1-50 characters")),
    };
    let color = match body.get("color") {
        None => create.then(|| "#6b7280".to_string()),
        Some(Value::String(c))
            if c.len() == 7
                && c.starts_with('#')
                && c[1..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Some(c.to_ascii_lowercase())
        }
        Some(_) => return Err(invalid("color", "must be a hex color such as #22c55e")),
    };
    Ok((name, color))
}
