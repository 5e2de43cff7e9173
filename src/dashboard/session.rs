//! Signing in and out, the session behind every page, and the CSRF token of every write.
//!
//! Signing in exchanges an API key for a session: a random 256-bit token in an HttpOnly,
//! SameSite=Strict cookie (`Secure` when the service's public URL is https), stored as its
//! SHA-256 with the key's id, for 12 hours or until the key expires. Each request reads the
//! key's workspace and scopes through it, so revoking the key ends the session at once. The
//! sign-in form itself carries a token matched against a cookie set with it, so another site
//! cannot sign a browser into its workspace. Every write's form carries the session's CSRF
//! token, compared in constant time.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Duration;
use maud::html;

use super::layout::{page, problem, respond};
use super::urls::{BASE, Url};
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::{constant_time_eq, hash_key};
use crate::store::KeyCheck;

const SESSION_COOKIE: &str = "sb_session";
const SIGN_IN_COOKIE: &str = "sb_sign_in";
/// How long a session lasts (less if its key expires sooner).
const SESSION_HOURS: i64 = 12;

/// Largest form body a dashboard page takes.
const FORM_LIMIT: usize = 64 * 1024;

/// A request's form body as text (empty when it cannot be read: no field then checks).
pub async fn form_body(req: Request) -> String {
    axum::body::to_bytes(req.into_body(), FORM_LIMIT)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A form body's fields in order, repeated names kept (a group of checkboxes).
pub fn pairs(body: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

/// A form body's fields.
pub fn fields(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// The SHA-256 of the request's session cookie, if it has one.
pub fn session_token(headers: &HeaderMap) -> Option<[u8; 32]> {
    cookie(headers, SESSION_COOKIE).map(hash_key)
}

fn random_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// A cookie for the dashboard's addresses: HttpOnly, SameSite=Strict, Secure over https.
fn set_cookie(state: &App, name: &str, value: &str, max_age: i64) -> HeaderValue {
    let secure = crate::app::state::public_url(&state.config).starts_with("https://");
    let text = format!(
        "{name}={value}; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

impl axum::extract::OptionalFromRequestParts<App> for Viewer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &App,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(
            <Viewer as FromRequestParts<App>>::from_request_parts(parts, state)
                .await
                .ok(),
        )
    }
}

impl FromRequestParts<App> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &App) -> Result<Self, Response> {
        let sign_in = || Url::SignIn.redirect().into_response();
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(sign_in());
        };
        match state.store.dashboard_session(&hash_key(token)).await {
            Ok(Some(s)) => Ok(Viewer {
                workspace_id: s.workspace_id,
                key_id: s.key_id,
                scopes: s.scopes,
                csrf: s.csrf,
            }),
            Ok(None) => Err(sign_in()),
            Err(e) => {
                tracing::error!(error = %e, "a dashboard session could not be read");
                Err(problem(
                    None,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Unavailable",
                    "The service cannot read sessions right now. Try again shortly.",
                ))
            }
        }
    }
}

fn sign_in_form(token: &str, error: Option<&str>) -> maud::Markup {
    page(
        None,
        "Sign in",
        None,
        html! {
            p { "Sign in with an API key of your workspace. The pages show what the key's scopes allow." }
            form.card method="post" action=(Url::SignIn) {
                input type="hidden" name="sign_in" value=(token);
                label for="key" { "API key" }
                input id="key" name="key" type="password" autocomplete="off" required
                    aria-describedby=[error.map(|_| "key-error")];
                @if let Some(error) = error {
                    p.field-error id="key-error" role="alert" { (error) }
                }
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// The sign-in form, with a fresh token in it and its cookie.
pub async fn sign_in_page(State(state): State<App>) -> Response {
    let token = random_token();
    let mut response = respond(StatusCode::OK, sign_in_form(&token, None));
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, SIGN_IN_COOKIE, &token, 3600),
    );
    response
}

/// Exchanges a key for a session.
pub async fn sign_in(State(state): State<App>, req: Request) -> Response {
    let source = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(req.into_body(), 16 * 1024).await {
        Ok(body) => String::from_utf8_lossy(&body).into_owned(),
        Err(_) => {
            return problem(
                None,
                StatusCode::BAD_REQUEST,
                "Sign in",
                "The form could not be read.",
            );
        }
    };
    let form = fields(&body);
    let again = |status: StatusCode, error: &str| {
        let token = random_token();
        let mut response = respond(status, sign_in_form(&token, Some(error)));
        response.headers_mut().append(
            header::SET_COOKIE,
            set_cookie(&state, SIGN_IN_COOKIE, &token, 3600),
        );
        response
    };
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    let sent = form.get("sign_in").map(String::as_str).unwrap_or_default();
    if expected.is_empty() || !constant_time_eq(expected.as_bytes(), sent.as_bytes()) {
        return again(
            StatusCode::FORBIDDEN,
            "This sign-in form has expired. Enter the key again.",
        );
    }
    if let Some(ip) = source
        && !state.limiter.allow_source(ip, state.store.now())
    {
        return again(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many attempts from this address. Wait a minute and try again.",
        );
    }
    let key = form.get("key").map(|k| k.trim()).unwrap_or_default();
    let (key_id, workspace_id, scopes) = match state.store.check_key(key).await {
        Ok(KeyCheck::Valid {
            key_id,
            workspace_id,
            scopes,
        }) => (key_id, workspace_id, scopes),
        Ok(KeyCheck::Expired) => return again(StatusCode::UNAUTHORIZED, "That key has expired."),
        Ok(KeyCheck::Invalid) => {
            return again(
                StatusCode::UNAUTHORIZED,
                "That key is not valid: it is unknown or revoked.",
            );
        }
        Err(e) => {
            tracing::error!(error = %e, "a key could not be checked");
            return again(
                StatusCode::SERVICE_UNAVAILABLE,
                "The service cannot check keys right now.",
            );
        }
    };
    let now = state.store.now();
    let mut expires = now + Duration::hours(SESSION_HOURS);
    if let Ok(keys) = state.store.list_keys(workspace_id).await
        && let Some(at) = keys
            .iter()
            .find(|k| k.id == key_id)
            .and_then(|k| k.expires_at)
    {
        expires = expires.min(at);
    }
    let token = random_token();
    let created = state
        .store
        .create_dashboard_session(
            &hash_key(&token),
            workspace_id,
            key_id,
            &random_token(),
            expires,
        )
        .await;
    if let Err(e) = created {
        tracing::error!(error = %e, "a dashboard session could not be started");
        return again(
            StatusCode::SERVICE_UNAVAILABLE,
            "The service cannot start a session right now.",
        );
    }
    let max_age = (expires - now).num_seconds().max(0);
    let mut response = super::pages::landing(&scopes).redirect().into_response();
    let headers = response.headers_mut();
    headers.append(
        header::SET_COOKIE,
        set_cookie(&state, SESSION_COOKIE, &token, max_age),
    );
    headers.append(
        header::SET_COOKIE,
        set_cookie(&state, SIGN_IN_COOKIE, "", 0),
    );
    response
}

/// Ends the session.
pub async fn sign_out(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    let token = cookie(req.headers(), SESSION_COOKIE)
        .unwrap_or_default()
        .to_string();
    if !viewer.checks(&fields(&form_body(req).await)) {
        return viewer.refused();
    }
    if let Err(e) = state.store.end_dashboard_session(&hash_key(&token)).await {
        tracing::error!(error = %e, "a dashboard session could not be ended");
    }
    let mut response = Url::SignIn.redirect().into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, SESSION_COOKIE, "", 0),
    );
    response
}
