//! The gate every request passes: API-key authentication, the route's scope, and the rate limit.
//!
//! Order: a source address that has spent its limit (on requests without a valid key) is
//! refused before its key is looked up, so a flood of made-up keys costs no store reads ->
//! resolve the key (if any) -> charge the rate limit (per key, or per source address without a
//! valid key) -> check the route's scope. `X-RateLimit-*` headers go on every response, errors
//! included.
//!
//! **Invariant:** a route's scope comes from its own `#[utoipa::path]` declaration (see
//! [`super::table::RouteTable`]); a route with no declared scope is public only if it declares
//! an empty security requirement.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::access::Access;
use super::error::ApiError;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::app::error::AppError;
use crate::app::limits::{Bucket, Charge};
use crate::domain::auth::Scope;
use crate::store::KeyCheck;

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
            Err(err) => return AppError::from(err).into_response(),
        },
    };
    let bucket = match &check {
        Some(KeyCheck::Valid { key_id, .. }) => Bucket::Key(*key_id),
        _ => Bucket::Source(source),
    };
    let charge = match state
        .limiter
        .charge_shared(&state.store, bucket.clone(), state.store.now())
        .await
    {
        Ok(charge) => charge,
        // The request is not refused for its count: this node counts it alone meanwhile.
        Err(err) => {
            tracing::warn!(error = %err, "the rate limit could not be counted in the database");
            state.limiter.charge(bucket, state.store.now())
        }
    };
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

fn with_rate_headers(mut response: Response, charge: &Charge) -> Response {
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(charge.limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(charge.remaining));
    headers.insert("x-ratelimit-reset", HeaderValue::from(charge.reset));
    response
}
