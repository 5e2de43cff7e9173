//! Request extractors that fail in the spec's error shape, never with a framework's plain-text
//! rejection: JSON bodies (size-capped, objects only, unknown and read-only fields refused with
//! the writable ones listed), UUID path ids, query strings and pagination.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::error::ApiError;
use super::state::AppState;
use crate::app::error::AppError;

/// Reads a request body up to `limit` bytes.
pub async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|err| {
            let too_large = std::error::Error::source(&err)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || err.to_string().contains("length limit");
            if too_large {
                ApiError::PayloadTooLarge { limit }
            } else {
                ApiError::bad_request(format!("Could not read the request body: {err}"))
            }
        })
}

/// A JSON object body. An empty body reads as `{}` only where the handler allows it.
pub struct JsonObject(pub Map<String, Value>);

impl FromRequest<AppState> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = read_body(req, state.config.max_json_body_bytes).await?;
        parse_object(&bytes).map(JsonObject)
    }
}

/// An optional JSON object body: no body at all reads as `None`.
pub struct OptionalJsonObject(pub Option<Map<String, Value>>);

impl FromRequest<AppState> for OptionalJsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let bytes = read_body(req, state.config.max_json_body_bytes).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonObject(None));
        }
        parse_object(&bytes).map(|o| OptionalJsonObject(Some(o)))
    }
}

pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "Request body is empty; send a JSON object",
        ));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) if holds_nul(&value) => Err(ApiError::bad_request(
            "Invalid JSON: text may not hold the NUL character (\\u0000)",
        )),
        Ok(Value::Object(mut map)) => {
            map.values_mut().for_each(whole_numbers_as_integers);
            Ok(map)
        }
        Ok(_) => Err(ApiError::bad_request("Request body must be a JSON object")),
        Err(err) => Err(ApiError::bad_request(format!("Invalid JSON: {err}"))),
    }
}

/// Whether any text of `value` (a string, or an object's key) holds the NUL character, which
/// no stored text may hold.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
        _ => false,
    }
}

/// JSON does not tell `3` from `3.0`, and JSON Schema reads both as the integer 3: a number with
/// no fractional part becomes an integer, so integer fields accept either spelling.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// One UUID path parameter (`{id}`); anything else is a 400 naming the parameter.
pub struct PathId(pub Uuid);

/// Two UUID path parameters, in path order.
pub struct PathIds(pub Uuid, pub Uuid);

async fn uuid_params(parts: &mut Parts, state: &AppState) -> Result<Vec<Uuid>, ApiError> {
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::bad_request(format!("Invalid path: {e}")))?;
    params
        .into_iter()
        .map(|(name, value)| {
            Uuid::parse_str(&value).map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid path parameter `{name}`: `{value}` is not a UUID"
                ))
            })
        })
        .collect()
}

impl FromRequestParts<AppState> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match uuid_params(parts, state).await?.as_slice() {
            [id] => Ok(PathId(*id)),
            _ => Err(AppError::Internal(anyhow::anyhow!("route expects one id parameter")).into()),
        }
    }
}

impl FromRequestParts<AppState> for PathIds {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match uuid_params(parts, state).await?.as_slice() {
            [a, b] => Ok(PathIds(*a, *b)),
            _ => Err(AppError::Internal(anyhow::anyhow!("route expects two id parameters")).into()),
        }
    }
}

/// A query string; a malformed or out-of-type parameter is a 400 naming it.
pub struct Q<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if parts
            .uri
            .query()
            .is_some_and(|q| q.to_ascii_lowercase().contains("%00"))
        {
            return Err(ApiError::bad_request(
                "Invalid query: text may not hold the NUL character (%00)",
            ));
        }
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ApiError::bad_request(format!("Invalid query: {}", e.body_text())))
    }
}

pub use crate::domain::schema::one_of;

pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 100;

/// `limit` (1-100, default 50) and `offset` (default 0).
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Pagination {
    /// Items per page, 1-100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// Items to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

impl Pagination {
    pub fn page(&self) -> Result<crate::store::Page, ApiError> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::bad_request(format!(
                "Invalid query parameter `limit`: must be from 1 to {MAX_LIMIT}"
            )));
        }
        let offset = self.offset.unwrap_or(0);
        if offset < 0 {
            return Err(ApiError::bad_request(
                "Invalid query parameter `offset`: must not be negative",
            ));
        }
        Ok(crate::store::Page { limit, offset })
    }
}

/// `pagination` of every list response.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageInfo {
    pub total: i64,
    pub limit: i64,
    pub offset: i64,
    pub has_more: bool,
}

/// `{data: [...], pagination: {...}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListResponse<T> {
    pub data: Vec<T>,
    pub pagination: PageInfo,
}

impl<T> ListResponse<T> {
    pub fn new(paged: crate::store::Paged<T>, page: crate::store::Page) -> Self {
        let has_more = page.offset + (paged.items.len() as i64) < paged.total;
        Self {
            data: paged.items,
            pagination: PageInfo {
                total: paged.total,
                limit: page.limit,
                offset: page.offset,
                has_more,
            },
        }
    }
}

/// `{data: ...}` for single objects where the spec wraps them, and for unpaged lists.
#[derive(Debug, Serialize, ToSchema)]
pub struct Data<T> {
    pub data: T,
}
