//! PATCH of a campaign: each writable field's rule, applied to the stored settings.

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};
use switchboard_actors::campaign::{self as rules, RegulatoryBasis, SettingKind};
use switchboard_actors::ids::CampaignId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::{JsonObject, PathId};
use crate::http::openapi::body_schema;
use crate::http::state::AppState;

use crate::app::campaigns::patch::update_campaign;
use crate::app::campaigns::view::CampaignView;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(update))
}

body_schema!(
    /// The body of `POST /campaigns`.
    CampaignCreate = json(body_schema(true))
);
body_schema!(
    /// The body of `PATCH /campaigns/{id}`.
    CampaignPatch = json(body_schema(false))
);

/// The schema of each writable field, from the settings table: its kind's schema, with the
/// setting's own description.
fn field_schemas() -> Map<String, Value> {
    rules::SETTINGS
        .iter()
        .map(|setting| {
            let mut schema = kind_schema(setting.kind);
            if let (Some(doc), Value::Object(schema)) = (setting.doc, &mut schema) {
                schema.insert("description".into(), json!(doc));
            }
            (setting.field.to_string(), schema)
        })
        .collect()
}

/// The schema of a value of one kind, as [`apply_changes`] reads it.
fn kind_schema(kind: SettingKind) -> Value {
    let uuid_or_null = || json!({"type": ["string", "null"], "format": "uuid"});
    match kind {
        SettingKind::Name => {
            json!({"type": "string", "pattern": "\\S", "maxLength": rules::NAME_MAX})
        }
        SettingKind::Description => {
            json!({"type": ["string", "null"], "maxLength": rules::DESCRIPTION_MAX})
        }
        SettingKind::Agent | SettingKind::PhoneNumber => uuid_or_null(),
        SettingKind::RegulatoryBasis => {
            let mut bases: Vec<Value> = RegulatoryBasis::ALL
                .iter()
                .map(|b| json!(b.as_str()))
                .collect();
            bases.push(Value::Null);
            json!({"enum": bases})
        }
        SettingKind::Dispositions => {
            json!({"type": "array", "items": {"type": "string", "format": "uuid"}})
        }
        SettingKind::Flag => json!({"type": "boolean"}),
        SettingKind::Int(rule) => {
            json!({"type": "integer", "minimum": rule.min, "maximum": rule.max, "default": rule.default})
        }
        SettingKind::Budget => json!({"type": ["integer", "null"], "exclusiveMinimum": 0}),
        SettingKind::CallingWindow => {
            let mut window = crate::http::openapi::schema_json(
                &<crate::http::call_windows::CallWindowBody as utoipa::PartialSchema>::schema(),
            );
            if let Value::Object(window) = &mut window {
                window.insert("type".into(), json!(["object", "null"]));
            }
            window
        }
        SettingKind::Time => json!({"type": ["string", "null"], "format": "date-time"}),
    }
}

/// A create body (`name` required) or a PATCH body (at least one field): the writable fields,
/// no other keys.
pub fn body_schema(create: bool) -> Value {
    let mut body = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": field_schemas(),
    });
    let rule = if create {
        ("required", json!(["name"]))
    } else {
        ("minProperties", json!(1))
    };
    if let Value::Object(body) = &mut body {
        body.insert(rule.0.into(), rule.1);
    }
    body
}

/// Update a campaign's writable fields (takes effect at the next evaluation)
#[utoipa::path(patch, path = "/campaigns/{id}", operation_id = "updateCampaign", tag = "campaigns", security(("bearer" = ["campaigns:manage"])),
    params(("id" = uuid::Uuid, Path)), request_body = CampaignPatch,
    responses((status = 200, body = CampaignView), (status = 400), (status = 404), (status = 409)))]
pub async fn update(
    State(state): State<AppState>,
    auth: Auth,
    PathId(id): PathId,
    JsonObject(body): JsonObject,
) -> Result<Json<CampaignView>, ApiError> {
    Ok(Json(
        update_campaign(&state, &auth, CampaignId::from_uuid(id), &body).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_campaign_body_schema_describes_every_writable_field_and_no_other() {
        let fields = field_schemas();
        let mut documented: Vec<&str> = fields.keys().map(String::as_str).collect();
        let mut writable = rules::WRITABLE_FIELDS.to_vec();
        documented.sort_unstable();
        writable.sort_unstable();
        assert_eq!(documented, writable);
        let attempts = &fields[rules::MAX_ATTEMPTS.field];
        assert_eq!(attempts["minimum"], rules::MAX_ATTEMPTS.min);
        assert_eq!(attempts["maximum"], rules::MAX_ATTEMPTS.max);
        assert!(rules::check_name(&"x".repeat(rules::NAME_MAX)).is_ok());
        assert!(rules::check_name(&"x".repeat(rules::NAME_MAX + 1)).is_err());
    }
}
