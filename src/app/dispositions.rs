//! Dispositions: what creating, changing and deleting one do and refuse. Protected
//! dispositions cannot be deleted.

use serde::Deserialize;
use serde_json::{Map, Value};
use switchboard_actors::ids::DispositionId;
use utoipa::ToSchema;

use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::fields::parse_fields;
use crate::app::state::App;
use crate::store::{DeleteOutcome, Disposition};

pub async fn create(
    state: &App,
    auth: &Auth,
    body: Map<String, Value>,
) -> Result<Disposition, AppError> {
    let input: DispositionInput = parse_fields(body, WRITABLE)?;
    let label = check_label(
        input
            .label
            .as_deref()
            .ok_or_else(|| AppError::missing_field("label"))?,
    )?;
    let description = check_description(input.description.as_deref().unwrap_or(""))?;
    let color = check_color(input.color.as_deref().unwrap_or("#6b7280"))?;
    let position = input.position.map(check_position).transpose()?;
    let created = state
        .store
        .create_disposition(auth.workspace_id, &label, &description, &color, position)
        .await?;
    Ok(created)
}

pub async fn update(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
    body: Map<String, Value>,
) -> Result<Disposition, AppError> {
    crate::app::fields::some_field(&body, WRITABLE)?;
    let input: DispositionInput = parse_fields(body, WRITABLE)?;
    let label = input.label.as_deref().map(check_label).transpose()?;
    let description = input
        .description
        .as_deref()
        .map(check_description)
        .transpose()?;
    let color = input.color.as_deref().map(check_color).transpose()?;
    let position = input.position.map(check_position).transpose()?;
    let updated = state
        .store
        .update_disposition(
            auth.workspace_id,
            DispositionId::from_uuid(id),
            label.as_deref(),
            description.as_deref(),
            color.as_deref(),
            position,
        )
        .await?;
    updated.ok_or(AppError::not_found("Disposition"))
}

pub async fn delete(
    state: &App,
    auth: &Auth,
    id: uuid::Uuid,
) -> Result<serde_json::Value, AppError> {
    match state
        .store
        .delete_disposition(auth.workspace_id, DispositionId::from_uuid(id))
        .await?
    {
        DeleteOutcome::Deleted => Ok(serde_json::json!({"success": true, "id": id})),
        DeleteOutcome::NotFound => Err(AppError::not_found("Disposition")),
        DeleteOutcome::Protected => Err(AppError::bad_request(
            "This disposition is protected and cannot be deleted",
        )),
    }
}

/// Longest description, in characters.
pub const DESCRIPTION_MAX: usize = 500;

fn check_label(label: &str) -> Result<String, AppError> {
    let label = label.trim();
    if label.is_empty() || label.chars().count() > 64 {
        return Err(AppError::invalid_field("label", "must be 1-64 characters"));
    }
    Ok(label.to_owned())
}

fn check_description(description: &str) -> Result<String, AppError> {
    let description = description.trim();
    if description.chars().count() > DESCRIPTION_MAX {
        return Err(AppError::invalid_field(
            "description",
            format!("must be at most {DESCRIPTION_MAX} characters"),
        ));
    }
    Ok(description.to_owned())
}

fn check_color(color: &str) -> Result<String, AppError> {
    let ok = color.len() == 7
        && color.starts_with('#')
        && color[1..].bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(AppError::invalid_field(
            "color",
            "must be a hex color like #1a2b3c",
        ));
    }
    Ok(color.to_ascii_lowercase())
}

fn check_position(position: i64) -> Result<i64, AppError> {
    if !(0..=10_000).contains(&position) {
        return Err(AppError::invalid_field(
            "position",
            "must be an integer from 0 to 10000",
        ));
    }
    Ok(position)
}

pub const WRITABLE: &[&str] = &["label", "description", "color", "position"];

#[derive(Deserialize, ToSchema)]
pub struct DispositionInput {
    /// 1-64 characters, unique in the workspace. It is trimmed and must contain a
    /// non-whitespace character, whitespace being Unicode White_Space as Rust's
    /// `char::is_whitespace` counts it, U+0085 included: a label made only of such characters
    /// is refused even though it matches the pattern.
    #[schema(min_length = 1, max_length = 64, pattern = r"\S")]
    pub label: Option<String>,
    /// What the disposition means, at most 500 characters (default empty). The end-of-call
    /// analysis reads it when it chooses a call's disposition.
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// Hex color `#rrggbb` (default `#6b7280`).
    #[schema(pattern = "^#[0-9a-fA-F]{6}$")]
    pub color: Option<String>,
    /// Sort position, 0-10000; new dispositions go last when omitted.
    #[schema(minimum = 0, maximum = 10000)]
    pub position: Option<i64>,
}
