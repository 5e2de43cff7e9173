//! What an operation refuses or fails with. Each variant names the rule it stands for; the
//! doors say it in their own terms (the REST API maps each to its status and the spec's code in
//! `http::error`, the dashboard words it beside the field at fault).

use crate::store::{StoreError, UniqueRule};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What is not about one field: fields that conflict with each other, a reused idempotency
    /// key, a value that cannot be read.
    #[error("{message}")]
    BadRequest { message: String },
    /// One field breaks its rule.
    #[error("Invalid field `{field}`: {rule}")]
    InvalidField { field: String, rule: String },
    /// A required field is absent.
    #[error("Missing field `{field}`")]
    MissingField { field: String },
    /// Unknown or read-only fields, with the writable ones.
    #[error("Unknown or read-only field(s): {}. Writable fields: {}", .fields.join(", "), .writable.join(", "))]
    UnknownFields {
        fields: Vec<String>,
        writable: &'static [&'static str],
    },
    /// The number is on the workspace's do-not-call list for this agent.
    #[error("{number} is on the do-not-call list; it is not dialled")]
    DoNotCall { number: String },
    /// No payment method, or a balance that does not cover the cost.
    #[error("{message}")]
    Billing { message: String },
    /// The operator's emergency switch for carrier accounts is off.
    #[error("Carrier accounts are not enabled")]
    CarrierAccountsDisabled,
    /// Something the workspace does not have, under its own code (CARRIER_ACCOUNT_NOT_FOUND,
    /// NUMBER_NOT_FOUND).
    #[error("{message}")]
    CodedNotFound { code: &'static str, message: String },
    /// Missing, in another workspace, or archived; all read the same.
    #[error("{resource} not found")]
    NotFound { resource: &'static str },
    /// The change collides with an existing resource or the resource's state.
    #[error("{message}")]
    Conflict { message: String },
    /// A conflict under its own code: TRUNK_NOT_CONFIGURED (testing an account without a
    /// trunk), TRUNK_CHANGED (the trunk changed while it was being tested).
    #[error("{message}")]
    CodedConflict { code: &'static str, message: String },
    /// An upload larger than the service takes (`max_csv_body_bytes`).
    #[error("Request body larger than {limit} bytes")]
    UploadTooLarge { limit: usize },
    /// An upload with more rows than one request may enroll.
    #[error("More than {limit} contacts in one upload; split the file")]
    TooManyRows { limit: usize },
    /// A launch or resume whose preflight failed; `message` names the problem.
    #[error("Campaign is not ready: {message}")]
    CampaignNotReady { message: String },
    /// A daily quota of creations is used up.
    #[error("{message}")]
    Quota { message: String },
    /// A tool test's delivery failed: `code` is DOWNSTREAM_HTTP_ERROR, WEBHOOK_NETWORK_ERROR or
    /// WEBHOOK_TIMEOUT, `status` the HTTP status it answers with (502 or 504); `extra` adds
    /// details, status_code, downstream_response, payload_sent and delivery_id.
    #[error("{message}")]
    Webhook {
        status: u16,
        code: &'static str,
        message: String,
        extra: serde_json::Value,
    },
    /// The flow does not hold together; `issues` lists each problem.
    #[error("The flow is invalid: {} issue(s)", .issues.len())]
    FlowInvalid {
        issues: Vec<crate::runtime::flows::FlowIssue>,
    },
    /// The service runs no SIP client, so trunks cannot be probed.
    #[error("SIP is not running on this service, so trunks cannot be tested")]
    SipNotRunning,
    /// The service runs without a chat model (`--llm-url`).
    #[error(
        "No chat model is configured on this service (--llm-url), so flows cannot be simulated"
    )]
    ModelNotConfigured,
    /// The database cannot be reached (its server down, the network to it lost); nothing was
    /// written.
    #[error("The database cannot be reached right now; nothing was changed, try again shortly")]
    DatabaseUnavailable,
    /// The database's disk is full; nothing was written.
    #[error("The database's disk is full; nothing was changed. Free space on it and try again")]
    DatabaseFull,
    /// Anything unexpected; the detail is logged by the door, never shown.
    #[error("Internal error")]
    Internal(#[source] anyhow::Error),
}

impl AppError {
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

    /// The workspace has no such `resource`.
    pub const fn not_found(resource: &'static str) -> Self {
        Self::NotFound { resource }
    }

    /// The field a refusal is about, when it is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::InvalidField { field, .. } | Self::MissingField { field } => Some(field),
            _ => None,
        }
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict { rule } => Self::Conflict {
                message: conflict_message(&rule).into(),
            },
            other if other.is_unavailable() => {
                tracing::warn!(error = %other, "the database cannot be reached");
                Self::DatabaseUnavailable
            }
            other if other.is_full() => {
                tracing::error!(error = %other, "the database's disk is full");
                Self::DatabaseFull
            }
            other => Self::Internal(other.into()),
        }
    }
}

impl From<crate::edge::webhooks::InvalidField> for AppError {
    fn from(err: crate::edge::webhooks::InvalidField) -> Self {
        Self::InvalidField {
            field: err.field,
            rule: err.rule,
        }
    }
}

impl From<anyhow::Error> for AppError {
    fn from(err: anyhow::Error) -> Self {
        match err.downcast::<StoreError>() {
            Ok(store) => store.into(),
            Err(err) => Self::Internal(err),
        }
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
