//! PATCH of a campaign: each writable field's rule, applied to the stored settings.

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};
use switchboard_actors::campaign::{self as rules, RegulatoryBasis};
use switchboard_actors::ids::CampaignId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::auth::Auth;
use crate::http::error::ApiError;
use crate::http::extract::{JsonObject, PathId};
use crate::http::openapi::body_schema;
use crate::http::state::AppState;

use crate::app::campaigns::patch::{DESCRIPTION_MAX, update_campaign};
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

/// The schema of each writable field, as [`apply_changes`] reads it.
fn field_schemas() -> Map<String, Value> {
    let uuid_or_null = || json!({"type": ["string", "null"], "format": "uuid"});
    let mut bases: Vec<Value> = RegulatoryBasis::ALL
        .iter()
        .map(|b| json!(b.as_str()))
        .collect();
    bases.push(Value::Null);
    let mut window = crate::http::openapi::schema_json(
        &<crate::http::call_windows::CallWindowBody as utoipa::PartialSchema>::schema(),
    );
    if let Value::Object(window) = &mut window {
        window.insert("type".into(), json!(["object", "null"]));
    }
    let mut fields = Map::new();
    fields.insert(
        "name".into(),
        json!({"type": "string", "pattern": "\\S", "maxLength": rules::NAME_MAX, "description": "Trimmed; not blank."}),
    );
    fields.insert(
        "description".into(),
        json!({"type": ["string", "null"], "maxLength": DESCRIPTION_MAX}),
    );
    fields.insert("agent_id".into(), uuid_or_null());
    fields.insert("from_phone_number_id".into(), uuid_or_null());
    fields.insert("regulatory_basis".into(), json!({"enum": bases}));
    fields.insert(
        "stop_disposition_ids".into(),
        json!({"type": "array", "items": {"type": "string", "format": "uuid"}, "description": "Dispositions of the workspace."}),
    );
    for field in rules::BOOL_FIELDS {
        fields.insert(field.into(), json!({"type": "boolean"}));
    }
    for rule in rules::INT_RULES {
        fields.insert(
            rule.field.into(),
            json!({"type": "integer", "minimum": rule.min, "maximum": rule.max, "default": rule.default}),
        );
    }
    fields.insert(
        "budget_cents".into(),
        json!({"type": ["integer", "null"], "exclusiveMinimum": 0, "description": "Positive cents, or null for no cap."}),
    );
    fields.insert("calling_window".into(), window);
    for field in ["starts_at", "ends_at"] {
        fields.insert(
            field.into(),
            json!({"type": ["string", "null"], "format": "date-time", "description": "RFC 3339 with offset; `starts_at` before `ends_at`."}),
        );
    }
    fields
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
