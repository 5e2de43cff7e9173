//! The gate every request passes: API-key authentication, the route's scope, and the rate limit.
//!
//! Order: a source address that has spent its limit (on requests without a valid key) is
//! refused before its key is looked up, so a flood of made-up keys costs no store reads ->
//! resolve the key (if any) -> charge the rate limit (per key, or per source address without a
//! valid key) -> check the route's scope. `X-RateLimit-*` headers go on every response, errors
//! included.
//!
//! **Invariant:** a route's scope comes from its own `#[utoipa::path]` declaration (see
//! [`super::routes::RouteTable`]); a route with no declared scope is public only if it declares
//! an empty security requirement.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use super::AppState;
use super::error::ApiError;
use super::routes::Access;
use crate::domain::auth::{Scope, Scopes};
use crate::store::KeyCheck;

/// The authenticated caller, available to handlers of scoped routes.
#[derive(Debug, Clone)]
pub struct Auth {
    pub workspace_id: WorkspaceId,
    pub key_id: ApiKeyId,
    pub scopes: Scopes,
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Auth>()
            .cloned()
            .ok_or(ApiError::MissingKey)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Bucket {
    Key(ApiKeyId),
    Source(IpAddr),
}

/// A fixed one-minute window per bucket, on the clock the caller reads (the store's, so the
/// windows follow the service's notion of time).
pub struct RateLimiter {
    limit: u32,
    windows: Mutex<HashMap<Bucket, (u64, u32)>>,
}

struct Charge {
    limit: u32,
    remaining: u32,
    reset: u64,
    allowed: bool,
}

impl RateLimiter {
    pub fn new(limit: u32) -> Self {
        Self {
            limit,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `bucket` has nothing left in the window of `now`: what its next request would
    /// be told, without charging it.
    fn spent(&self, bucket: Bucket, now: DateTime<Utc>) -> Option<Charge> {
        let window = u64::try_from(now.timestamp()).unwrap_or(0) / 60;
        let windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (w, n) = windows.get(&bucket)?;
        (*w == window && *n >= self.limit).then_some(Charge {
            limit: self.limit,
            remaining: 0,
            reset: (window + 1) * 60,
            allowed: false,
        })
    }

    /// Charges one request from `source` at `now` (the dashboard's sign-in); whether it may
    /// go on.
    pub fn allow_source(&self, source: IpAddr, now: DateTime<Utc>) -> bool {
        self.charge(Bucket::Source(source), now).allowed
    }

    /// Charges one request to `bucket` at `now`.
    fn charge(&self, bucket: Bucket, now: DateTime<Utc>) -> Charge {
        let window = u64::try_from(now.timestamp()).unwrap_or(0) / 60;
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if windows.len() > 100_000 {
            windows.retain(|_, (w, _)| *w == window);
        }
        let entry = windows.entry(bucket).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        let allowed = entry.1 < self.limit;
        if allowed {
            entry.1 += 1;
        }
        Charge {
            limit: self.limit,
            remaining: self.limit - entry.1,
            reset: (window + 1) * 60,
            allowed,
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub async fn gate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let access = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| state.routes.access(req.method(), p.as_str()))
        .unwrap_or(Access::Public);
    let source = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));

    let presented = bearer(req.headers()).map(str::to_owned);
    if presented.is_some()
        && let Some(spent) = state
            .limiter
            .spent(Bucket::Source(source), state.store.now())
    {
        let refused = ApiError::RateLimited { limit: spent.limit }.into_response();
        return with_rate_headers(refused, &spent);
    }
    let check = match &presented {
        None => None,
        Some(secret) => match state.store.check_key(secret).await {
            Ok(check) => Some(check),
            Err(err) => return ApiError::Internal(err.into()).into_response(),
        },
    };
    let bucket = match &check {
        Some(KeyCheck::Valid { key_id, .. }) => Bucket::Key(*key_id),
        _ => Bucket::Source(source),
    };
    let charge = state.limiter.charge(bucket, state.store.now());
    let response = if !charge.allowed {
        ApiError::RateLimited {
            limit: charge.limit,
        }
        .into_response()
    } else {
        match authorize(access, check) {
            Ok(auth) => {
                if let Some(auth) = auth {
                    req.extensions_mut().insert(auth);
                }
                next.run(req).await
            }
            Err(err) => err.into_response(),
        }
    };
    with_rate_headers(response, &charge)
}

fn authorize(access: Access, check: Option<KeyCheck>) -> Result<Option<Auth>, ApiError> {
    let Access::Scoped(required) = access else {
        // Public routes ignore whatever key was sent, but pass a valid one on.
        return Ok(match check {
            Some(KeyCheck::Valid {
                key_id,
                workspace_id,
                scopes,
            }) => Some(Auth {
                workspace_id,
                key_id,
                scopes,
            }),
            _ => None,
        });
    };
    match check {
        None => Err(ApiError::MissingKey),
        Some(KeyCheck::Invalid) => Err(ApiError::InvalidKey),
        Some(KeyCheck::Expired) => Err(ApiError::ExpiredKey),
        Some(KeyCheck::Valid {
            key_id,
            workspace_id,
            scopes,
        }) => {
            if scopes.allows(required) {
                Ok(Some(Auth {
                    workspace_id,
                    key_id,
                    scopes,
                }))
            } else if required == Scope::CarrierAccountsManage {
                // The spec answers 403 on carrier-account routes.
                Err(ApiError::ScopeForbidden { required })
            } else {
                Err(ApiError::InsufficientScope { required })
            }
        }
    }
}

/// The statuses [`authorize`] can answer on a route, for the OpenAPI document.
pub fn refusals(access: Access) -> &'static [StatusCode] {
    match access {
        Access::Public => &[],
        // The spec answers 403 on carrier-account routes for a key without the scope.
        Access::Scoped(Scope::CarrierAccountsManage) => {
            &[StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN]
        }
        Access::Scoped(_) => &[StatusCode::UNAUTHORIZED],
    }
}

fn with_rate_headers(mut response: Response, charge: &Charge) -> Response {
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(charge.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(charge.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(charge.reset));
    response
}

/// Used by tests and the discovery document.
pub fn scope_of(access: Access) -> Option<Scope> {
    match access {
        Access::Scoped(scope) => Some(scope),
        Access::Public => None,
    }
}
