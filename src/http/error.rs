//! The one error type of the HTTP layer. Every failure answers `{error, code, ...}`; this is the
//! only place that maps errors to status codes: the gate's and the extractors' own, and every
//! [`AppError`] an operation returns, to its status and the spec's code.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::app::error::AppError;
use crate::domain::auth::Scope;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What an operation refused or failed with: see [`app_status`] and [`app_code`].
    #[error(transparent)]
    App(#[from] AppError),
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
    /// 404 NOT_FOUND for a path no route serves.
    #[error("No route for {path}")]
    NoRoute { path: String },
    /// 405 METHOD_NOT_ALLOWED
    #[error("Method not allowed on this path")]
    MethodNotAllowed,
    /// 413 PAYLOAD_TOO_LARGE
    #[error("Request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// 415 UNSUPPORTED_MEDIA_TYPE
    #[error("{message}")]
    UnsupportedMediaType { message: String },
    /// 429 RATE_LIMIT
    #[error("Rate limit exceeded: {limit} requests per minute")]
    RateLimited { limit: u32 },
}

/// The status an operation's refusal answers with.
pub fn app_status(e: &AppError) -> StatusCode {
    match e {
        AppError::BadRequest { .. }
        | AppError::InvalidField { .. }
        | AppError::MissingField { .. }
        | AppError::UnknownFields { .. }
        | AppError::DoNotCall { .. }
        | AppError::FlowInvalid { .. } => StatusCode::BAD_REQUEST,
        AppError::Billing { .. } => StatusCode::PAYMENT_REQUIRED,
        AppError::CarrierAccountsDisabled => StatusCode::FORBIDDEN,
        AppError::CodedNotFound { .. } | AppError::NotFound { .. } => StatusCode::NOT_FOUND,
        AppError::Conflict { .. } | AppError::CodedConflict { .. } => StatusCode::CONFLICT,
        AppError::UploadTooLarge { .. } | AppError::TooManyRows { .. } => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        AppError::CampaignNotReady { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        AppError::Quota { .. } => StatusCode::TOO_MANY_REQUESTS,
        AppError::Webhook { status, .. } => {
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
        }
        AppError::SipNotRunning | AppError::ModelNotConfigured | AppError::DatabaseUnavailable => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        AppError::DatabaseFull => StatusCode::INSUFFICIENT_STORAGE,
        AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The spec's code for an operation's refusal.
pub fn app_code(e: &AppError) -> &'static str {
    match e {
        AppError::BadRequest { .. }
        | AppError::InvalidField { .. }
        | AppError::MissingField { .. }
        | AppError::UnknownFields { .. } => "INVALID_REQUEST",
        AppError::DoNotCall { .. } => "DO_NOT_CALL",
        AppError::FlowInvalid { .. } => "FLOW_INVALID",
        AppError::Billing { .. } => "BILLING_ERROR",
        AppError::CarrierAccountsDisabled => "CARRIER_ACCOUNTS_NOT_ENABLED",
        AppError::CodedNotFound { code, .. } | AppError::CodedConflict { code, .. } => code,
        AppError::NotFound { .. } => "NOT_FOUND",
        AppError::Conflict { .. } => "CONFLICT",
        AppError::UploadTooLarge { .. } | AppError::TooManyRows { .. } => "PAYLOAD_TOO_LARGE",
        AppError::CampaignNotReady { .. } => "CAMPAIGN_NOT_READY",
        AppError::Quota { .. } => "RATE_LIMIT",
        AppError::Webhook { code, .. } => code,
        AppError::SipNotRunning => "SIP_NOT_RUNNING",
        AppError::ModelNotConfigured => "MODEL_NOT_CONFIGURED",
        AppError::DatabaseUnavailable => "DATABASE_UNAVAILABLE",
        AppError::DatabaseFull => "DATABASE_FULL",
        AppError::Internal(_) => "INTERNAL_ERROR",
    }
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::bad_request(message).into()
    }

    /// `field` (a name or a path such as `nodes[2].id`) breaks `rule`.
    pub fn invalid_field(field: impl Into<String>, rule: impl Into<String>) -> Self {
        AppError::invalid_field(field, rule).into()
    }

    /// The required `field` is absent.
    pub fn missing_field(field: impl Into<String>) -> Self {
        AppError::missing_field(field).into()
    }

    /// The workspace has no such `resource`.
    pub fn not_found(resource: &'static str) -> Self {
        AppError::not_found(resource).into()
    }

    pub fn status_code(&self) -> StatusCode {
        match self {
            Self::App(e) => app_status(e),
            Self::MissingKey
            | Self::InvalidKey
            | Self::ExpiredKey
            | Self::InsufficientScope { .. } => StatusCode::UNAUTHORIZED,
            Self::InvalidSignature | Self::ScopeForbidden { .. } => StatusCode::FORBIDDEN,
            Self::RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::NoRoute { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::App(e) => app_code(e),
            Self::MissingKey => "MISSING_KEY",
            Self::InvalidKey => "INVALID_KEY",
            Self::ExpiredKey => "EXPIRED_KEY",
            Self::InsufficientScope { .. } | Self::ScopeForbidden { .. } => "INSUFFICIENT_SCOPE",
            Self::InvalidSignature => "INVALID_SIGNATURE",
            Self::RangeNotSatisfiable { .. } => "RANGE_NOT_SATISFIABLE",
            Self::NoRoute { .. } => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::PayloadTooLarge { .. } => "PAYLOAD_TOO_LARGE",
            Self::UnsupportedMediaType { .. } => "UNSUPPORTED_MEDIA_TYPE",
            Self::RateLimited { .. } => "RATE_LIMIT",
        }
    }

    /// The JSON body: `{error, code}` plus the variant's extra keys.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("error".into(), Value::String(self.to_string()));
        body.insert("code".into(), Value::String(self.code().into()));
        match self {
            Self::App(AppError::InvalidField { field, .. } | AppError::MissingField { field }) => {
                body.insert("field".into(), Value::String(field.clone()));
            }
            Self::App(AppError::UnknownFields { fields, writable }) => {
                body.insert(
                    "details".into(),
                    json!({"unknown_fields": fields, "writable_fields": writable}),
                );
            }
            Self::App(AppError::CarrierAccountsDisabled) => {
                body.insert("enabled".into(), Value::Bool(false));
            }
            Self::App(AppError::FlowInvalid { issues }) => {
                body.insert("issues".into(), json!(issues));
            }
            Self::InsufficientScope { required } | Self::ScopeForbidden { required } => {
                body.insert(
                    "required_scope".into(),
                    Value::String(required.as_str().into()),
                );
            }
            Self::App(AppError::CampaignNotReady { message }) => {
                body.insert("message".into(), Value::String(message.clone()));
            }
            Self::App(AppError::Webhook {
                extra: Value::Object(extra),
                ..
            }) => {
                body.extend(extra.clone());
            }
            _ => {}
        }
        Value::Object(body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Self::App(AppError::Internal(err)) = &self {
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

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        ApiError::App(self).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        Self::App(err.into())
    }
}

impl From<crate::edge::webhooks::InvalidField> for ApiError {
    fn from(err: crate::edge::webhooks::InvalidField) -> Self {
        Self::App(err.into())
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        crate::store::classify(err).into()
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(err: anyhow::Error) -> Self {
        Self::App(err.into())
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

    /// A database whose disk is full (an SQLite database held to a few pages, which fails as a
    /// full disk does) answers 507 `DATABASE_FULL`, and the store says the write may land later.
    #[tokio::test]
    async fn a_full_database_is_a_507_that_says_so() {
        use sqlx::{Connection, Executor};
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        conn.execute("CREATE TABLE t (b BLOB); PRAGMA max_page_count = 3")
            .await
            .unwrap();
        let mut refused = None;
        for _ in 0..20 {
            if let Err(err) = sqlx::query("INSERT INTO t (b) VALUES (zeroblob(4000))")
                .execute(&mut conn)
                .await
            {
                refused = Some(crate::store::StoreError::from(err));
                break;
            }
        }
        let refused = refused.expect("the database fills up");
        assert!(refused.is_full() && refused.may_pass(), "{refused:?}");
        assert!(!refused.is_unavailable());
        let err = ApiError::from(crate::app::error::AppError::from(refused));
        assert_eq!(err.status_code(), StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(err.body()["code"], "DATABASE_FULL");
        assert!(
            err.body()["error"]
                .as_str()
                .unwrap()
                .contains("disk is full"),
            "{}",
            err.body()
        );
    }
}
