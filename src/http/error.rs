//! The one error type of the HTTP layer. Every failure answers `{error, code, ...}`; this is the
//! only place that maps errors to status codes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::domain::auth::Scope;
use crate::store::{StoreError, UniqueRule};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 INVALID_REQUEST: what is not about one body field: invalid JSON, a bad path or query
    /// parameter, fields that conflict with each other, a reused idempotency key.
    #[error("{message}")]
    BadRequest { message: String },
    /// 400 INVALID_REQUEST: one field breaks its rule; the body names it in `field`.
    #[error("Invalid field `{field}`: {rule}")]
    InvalidField { field: String, rule: String },
    /// 400 INVALID_REQUEST: a required field is absent; the body names it in `field`.
    #[error("Missing field `{field}`")]
    MissingField { field: String },
    /// 400 INVALID_REQUEST: unknown or read-only fields; the body lists the writable ones.
    #[error("Unknown or read-only field(s): {}. Writable fields: {}", .fields.join(", "), .writable.join(", "))]
    UnknownFields {
        fields: Vec<String>,
        writable: &'static [&'static str],
    },
    /// 401 MISSING_KEY
    #[error("Missing API key: send Authorization: Bearer <key>")]
    MissingKey,
    /// 401 INVALID_KEY: unknown or revoked.
    #[error("Invalid API key")]
    InvalidKey,
    /// 401 EXPIRED_KEY
    #[error("API key expired")]
    ExpiredKey,
    /// 401 INSUFFICIENT_SCOPE
    #[error("This API key lacks the scope {required}")]
    InsufficientScope { required: Scope },
    /// 400 DO_NOT_CALL: the number is on the workspace's do-not-call list for this agent.
    #[error("{number} is on the do-not-call list; it is not dialled")]
    DoNotCall { number: String },
    /// 402 BILLING_ERROR: no payment method or insufficient balance.
    #[error("{message}")]
    Billing { message: String },
    /// 403 INVALID_SIGNATURE: a signed link (recordings) with a missing, altered or expired
    /// signature; it never says whether the resource exists.
    #[error("Invalid or expired signature")]
    InvalidSignature,
    /// 416 RANGE_NOT_SATISFIABLE
    #[error("Range not satisfiable: the file has {size} bytes")]
    RangeNotSatisfiable { size: u64 },
    /// 403 INSUFFICIENT_SCOPE on the routes the spec answers with 403 (carrier accounts).
    #[error("This API key lacks the scope {required}")]
    ScopeForbidden { required: Scope },
    /// 403 CARRIER_ACCOUNTS_NOT_ENABLED: the operator's emergency switch is off.
    #[error("Carrier accounts are not enabled")]
    CarrierAccountsDisabled,
    /// 404 with a specific code (CARRIER_ACCOUNT_NOT_FOUND, NUMBER_NOT_FOUND).
    #[error("{message}")]
    CodedNotFound { code: &'static str, message: String },
    /// 404 NOT_FOUND: missing, in another workspace, or archived; all read the same.
    #[error("{resource} not found")]
    NotFound { resource: &'static str },
    /// 404 NOT_FOUND for a path no route serves.
    #[error("No route for {path}")]
    NoRoute { path: String },
    /// 405 METHOD_NOT_ALLOWED
    #[error("Method not allowed on this path")]
    MethodNotAllowed,
    /// 409 CONFLICT: the change collides with an existing resource.
    #[error("{message}")]
    Conflict { message: String },
    /// 409 with a specific code: TRUNK_NOT_CONFIGURED (testing an account without a trunk),
    /// TRUNK_CHANGED (the trunk changed while it was being tested).
    #[error("{message}")]
    CodedConflict { code: &'static str, message: String },
    /// 413 PAYLOAD_TOO_LARGE
    #[error("Request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// 413 PAYLOAD_TOO_LARGE: an upload with more rows than one request may enroll.
    #[error("More than {limit} contacts in one upload; split the file")]
    TooManyRows { limit: usize },
    /// 415 UNSUPPORTED_MEDIA_TYPE
    #[error("{message}")]
    UnsupportedMediaType { message: String },
    /// 422 CAMPAIGN_NOT_READY: launch or resume preflight failed; `message` names the problem.
    #[error("Campaign is not ready: {message}")]
    CampaignNotReady { message: String },
    /// 429 RATE_LIMIT
    #[error("Rate limit exceeded: {limit} requests per minute")]
    RateLimited { limit: u32 },
    /// 429 RATE_LIMIT: a daily quota of creations is used up.
    #[error("{message}")]
    Quota { message: String },
    /// 502/504 from a tool test delivery: `code` is DOWNSTREAM_HTTP_ERROR,
    /// WEBHOOK_NETWORK_ERROR or WEBHOOK_TIMEOUT; `extra` adds details, status_code,
    /// downstream_response, payload_sent and delivery_id.
    #[error("{message}")]
    Webhook {
        status: StatusCode,
        code: &'static str,
        message: String,
        extra: Value,
    },
    /// 400 FLOW_INVALID: the flow's integration_call nodes do not hold together; `issues`
    /// lists each problem.
    #[error("The flow is invalid: {} issue(s)", .issues.len())]
    FlowInvalid {
        issues: Vec<crate::runtime::flows::FlowIssue>,
    },
    /// 503 SIP_NOT_RUNNING: the service runs no SIP client, so trunks cannot be probed.
    #[error("SIP is not running on this service, so trunks cannot be tested")]
    SipNotRunning,
    /// 503 MODEL_NOT_CONFIGURED: the service runs without a chat model (`--llm-url`).
    #[error(
        "No chat model is configured on this service (--llm-url), so flows cannot be simulated"
    )]
    ModelNotConfigured,
    /// 500 INTERNAL_ERROR: logged here; the detail never reaches the client.
    #[error("Internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
        }
    }

    /// `field` (a name or a path such as `nodes[2].id`) breaks `rule`.
    pub fn invalid_field(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::InvalidField {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// The required `field` is absent.
    pub fn missing_field(field: impl Into<String>) -> Self {
        Self::MissingField {
            field: field.into(),
        }
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. }
            | Self::InvalidField { .. }
            | Self::MissingField { .. }
            | Self::UnknownFields { .. }
            | Self::DoNotCall { .. }
            | Self::FlowInvalid { .. } => StatusCode::BAD_REQUEST,
            Self::MissingKey
            | Self::InvalidKey
            | Self::ExpiredKey
            | Self::InsufficientScope { .. } => StatusCode::UNAUTHORIZED,
            Self::Billing { .. } => StatusCode::PAYMENT_REQUIRED,
            Self::InvalidSignature
            | Self::ScopeForbidden { .. }
            | Self::CarrierAccountsDisabled => StatusCode::FORBIDDEN,
            Self::CodedNotFound { .. } => StatusCode::NOT_FOUND,
            Self::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::NotFound { .. } | Self::NoRoute { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict { .. } | Self::CodedConflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge { .. } | Self::TooManyRows { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::CampaignNotReady { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } | Self::Quota { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Webhook { status, .. } => *status,
            Self::SipNotRunning | Self::ModelNotConfigured => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { .. }
            | Self::InvalidField { .. }
            | Self::MissingField { .. }
            | Self::UnknownFields { .. } => "INVALID_REQUEST",
            Self::DoNotCall { .. } => "DO_NOT_CALL",
            Self::FlowInvalid { .. } => "FLOW_INVALID",
            Self::MissingKey => "MISSING_KEY",
            Self::InvalidKey => "INVALID_KEY",
            Self::ExpiredKey => "EXPIRED_KEY",
            Self::InsufficientScope { .. } => "INSUFFICIENT_SCOPE",
            Self::Billing { .. } => "BILLING_ERROR",
            Self::InvalidSignature => "INVALID_SIGNATURE",
            Self::ScopeForbidden { .. } => "INSUFFICIENT_SCOPE",
            Self::CarrierAccountsDisabled => "CARRIER_ACCOUNTS_NOT_ENABLED",
            Self::CodedNotFound { code, .. } => code,
            Self::RangeNotSatisfiable { .. } => "RANGE_NOT_SATISFIABLE",
            Self::NotFound { .. } | Self::NoRoute { .. } => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::Conflict { .. } => "CONFLICT",
            Self::CodedConflict { code, .. } => code,
            Self::PayloadTooLarge { .. } | Self::TooManyRows { .. } => "PAYLOAD_TOO_LARGE",
            Self::UnsupportedMediaType { .. } => "UNSUPPORTED_MEDIA_TYPE",
            Self::CampaignNotReady { .. } => "CAMPAIGN_NOT_READY",
            Self::RateLimited { .. } | Self::Quota { .. } => "RATE_LIMIT",
            Self::Webhook { code, .. } => code,
            Self::SipNotRunning => "SIP_NOT_RUNNING",
            Self::ModelNotConfigured => "MODEL_NOT_CONFIGURED",
            Self::Internal(_) => "INTERNAL_ERROR",
        }
    }

    /// The JSON body: `{error, code}` plus the variant's extra keys.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(self.to_string()));
        body.insert("code".into(), Value::String(self.code().into()));
        match self {
            Self::InvalidField { field, .. } | Self::MissingField { field } => {
                body.insert("field".into(), Value::String(field.clone()));
            }
            Self::UnknownFields { fields, writable } => {
                body.insert(
                    "details".into(),
                    json!({"unknown_fields": fields, "writable_fields": writable}),
                );
            }
            Self::CarrierAccountsDisabled => {
                body.insert("enabled".into(), Value::Bool(false));
            }
            Self::FlowInvalid { issues } => {
                body.insert("issues".into(), json!(issues));
            }
            Self::InsufficientScope { required } | Self::ScopeForbidden { required } => {
                body.insert(
                    "required_scope".into(),
                    Value::String(required.as_str().into()),
                );
            }
            Self::CampaignNotReady { message } => {
                body.insert("message".into(), Value::String(message.clone()));
            }
            Self::Webhook {
                extra: Value::Object(extra),
                ..
            } => {
                body.extend(extra.clone());
            }
            _ => {}
        }
        Value::Object(body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(err) = &self {
            tracing::error!(error = ?err, "internal error");
        }
        if let Self::RangeNotSatisfiable { size } = &self {
            let range = format!("bytes */{size}");
            return (
                self.status_code(),
                [(axum::http::header::CONTENT_RANGE, range)],
                Json(self.body()),
            )
                .into_response();
        }
        (self.status_code(), Json(self.body())).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict { rule } => Self::Conflict {
                message: conflict_message(&rule).into(),
            },
            other => Self::Internal(other.into()),
        }
    }
}

impl From<crate::edge::webhooks::InvalidField> for ApiError {
    fn from(err: crate::edge::webhooks::InvalidField) -> Self {
        Self::InvalidField {
            field: err.field,
            rule: err.rule,
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        crate::store::classify(err).into()
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(err: anyhow::Error) -> Self {
        Self::Internal(err)
    }
}

/// A broken uniqueness rule, as the client reads it.
fn conflict_message(rule: &UniqueRule) -> &'static str {
    match rule {
        UniqueRule::CampaignName => {
            "A campaign with this name already exists (names are unique among non-archived campaigns)"
        }
        UniqueRule::DispositionLabel => "A disposition with this label already exists",
        UniqueRule::DoNotCallNumber => "This phone number is already on the do-not-call list",
        UniqueRule::PhoneNumberHeld => "This phone number is already registered",
        UniqueRule::LeadNumber
        | UniqueRule::LeadTagName
        | UniqueRule::SipSlug
        | UniqueRule::CallIdempotencyKey
        | UniqueRule::ToolIdempotencyKey
        | UniqueRule::Other { .. } => "The change conflicts with an existing resource",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_field_is_a_400_that_names_the_field_and_its_rule() {
        let err = ApiError::invalid_field("nodes[2].id", "must be 1-100 characters");
        assert_eq!(err.status_code(), StatusCode::BAD_REQUEST);
        assert_eq!(
            err.body(),
            json!({
                "error": "Invalid field `nodes[2].id`: must be 1-100 characters",
                "code": "INVALID_REQUEST",
                "field": "nodes[2].id",
            })
        );
    }

    #[test]
    fn a_missing_field_is_a_400_that_names_the_field() {
        let err = ApiError::missing_field("name");
        assert_eq!(err.status_code(), StatusCode::BAD_REQUEST);
        assert_eq!(
            err.body(),
            json!({"error": "Missing field `name`", "code": "INVALID_REQUEST", "field": "name"})
        );
    }
}
