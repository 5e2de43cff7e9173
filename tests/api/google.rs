//! A stand-in of the Google APIs flows' integrations call, on loopback: the OAuth token
//! endpoint, Calendar (calendars, events, free/busy, the calendar list) and Gmail's send. It
//! keeps what it is sent, checks access tokens as Google does (401 for an unknown or expired
//! one), and fails on demand.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use switchboard::edge::google::{GoogleUrls, OAuthGrant};

pub const CLIENT_ID: &str = "client-1.apps.example.com";
pub const CLIENT_SECRET: &str = "client-secret-1";
pub const REFRESH_TOKEN: &str = "refresh-token-1";

/// The grant the stand-in honours.
pub fn grant() -> OAuthGrant {
    OAuthGrant {
        client_id: CLIENT_ID.into(),
        client_secret: CLIENT_SECRET.into(),
        refresh_token: REFRESH_TOKEN.into(),
    }
}

/// An injected fault of the next API request.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    Status(u16),
    /// Answer after this long.
    Stall(Duration),
}

#[derive(Default)]
struct Inner {
    /// Access tokens issued and still honoured.
    tokens: Vec<String>,
    issued: u64,
    expires_in: u64,
    revoked: bool,
    faults: VecDeque<Fault>,
    /// (calendar, event).
    events: Vec<(String, Value)>,
    sent: Vec<Value>,
    /// Every API request: method and path.
    requests: Vec<String>,
    /// The query of the last events listing.
    last_query: String,
    /// Authorization codes handed out and not yet redeemed: code, PKCE challenge, redirect URI.
    codes: Vec<(String, String, String)>,
    /// The consent page's answer: none (consent), or an OAuth error (`access_denied`).
    consent_error: Option<String>,
    /// Codes redeemed, and codes refused (a wrong verifier or redirect URI).
    redeemed: u64,
    refused_codes: u64,
}

/// The account the consent page signs in as.
pub const ACCOUNT: &str = "desk@example.com";

#[derive(Clone)]
pub struct GoogleStandIn {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

type Shared = Arc<Mutex<Inner>>;

impl GoogleStandIn {
    pub async fn start() -> GoogleStandIn {
        let inner: Shared = Arc::new(Mutex::new(Inner {
            expires_in: 3600,
            ..Inner::default()
        }));
        let app = axum::Router::new()
            .route("/authorize", get(authorize))
            .route("/userinfo", get(userinfo))
            .route("/token", post(token))
            .route("/calendar/v3/calendars/{calendar}", get(calendar))
            .route(
                "/calendar/v3/calendars/{calendar}/events",
                get(list_events).post(create_event),
            )
            .route(
                "/calendar/v3/calendars/{calendar}/events/{event}",
                axum::routing::delete(delete_event),
            )
            .route("/calendar/v3/freeBusy", post(free_busy))
            .route("/calendar/v3/users/me/calendarList", get(calendar_list))
            .route("/gmail/v1/users/me/messages/send", post(send))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        GoogleStandIn { addr, inner }
    }

    /// The service pointed here (loopback allowed by the outbound URL policy), with a
    /// 1-second provider timeout.
    pub fn serve(&self, config: &mut switchboard::config::Config) {
        let base = format!("http://{}", self.addr);
        config.google = GoogleUrls {
            authorize: format!("{base}/authorize"),
            userinfo: format!("{base}/userinfo"),
            token: format!("{base}/token"),
            calendar: format!("{base}/calendar/v3"),
            gmail: format!("{base}/gmail/v1"),
        };
        config.google_client = Some(switchboard::edge::google::OAuthClient {
            client_id: CLIENT_ID.into(),
            client_secret: CLIENT_SECRET.into(),
        });
        config.egress_allow = vec!["127.0.0.0/8".parse().unwrap()];
        config.integration_timeout = Duration::from_secs(1);
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap())
    }

    /// Access tokens issued so far.
    /// The consent page refuses with `error` (or consents again with `None`).
    pub fn consent_error(&self, error: Option<&str>) {
        self.with(|i| i.consent_error = error.map(str::to_owned));
    }

    /// Codes redeemed, and codes refused.
    pub fn codes(&self) -> (u64, u64) {
        self.with(|i| (i.redeemed, i.refused_codes))
    }

    pub fn issued(&self) -> u64 {
        self.with(|i| i.issued)
    }

    /// Lifetime of the access tokens issued from now on.
    pub fn expires_in(&self, secs: u64) {
        self.with(|i| i.expires_in = secs);
    }

    /// Stops honouring every access token issued so far (the next request answers 401).
    pub fn invalidate_tokens(&self) {
        self.with(|i| i.tokens.clear());
    }

    /// The account revokes access: the refresh token stops working.
    pub fn revoke(&self, revoked: bool) {
        self.with(|i| i.revoked = revoked);
    }

    pub fn fail_next(&self, fault: Fault) {
        self.with(|i| i.faults.push_back(fault));
    }

    /// An event already in `calendar`.
    pub fn add_event(&self, calendar: &str, event: Value) {
        self.with(|i| i.events.push((calendar.to_string(), event)));
    }

    pub fn events(&self, calendar: &str) -> Vec<Value> {
        self.with(|i| {
            i.events
                .iter()
                .filter(|(c, _)| c == calendar)
                .map(|(_, e)| e.clone())
                .collect()
        })
    }

    /// Gmail messages sent, each `{raw, mime}` (the message decoded).
    pub fn sent(&self) -> Vec<Value> {
        self.with(|i| i.sent.clone())
    }

    pub fn last_query(&self) -> String {
        self.with(|i| i.last_query.clone())
    }

    pub fn requests(&self) -> Vec<String> {
        self.with(|i| i.requests.clone())
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": status.as_u16(), "message": message}})),
    )
        .into_response()
}

/// Checks the bearer token and plays the next fault; `Err` is the answer to give instead.
async fn authorized(inner: &Shared, headers: &HeaderMap, request: String) -> Result<(), Response> {
    let (known, fault) = {
        let mut i = inner.lock().unwrap();
        i.requests.push(request);
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string();
        (i.tokens.contains(&token), i.faults.pop_front())
    };
    if !known {
        return Err(error(StatusCode::UNAUTHORIZED, "Invalid Credentials"));
    }
    match fault {
        Some(Fault::Status(code)) => Err(error(
            StatusCode::from_u16(code).unwrap(),
            "injected failure",
        )),
        Some(Fault::Stall(wait)) => {
            tokio::time::sleep(wait).await;
            Ok(())
        }
        None => Ok(()),
    }
}

async fn token(State(inner): State<Shared>, body: String) -> Response {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    let mut i = inner.lock().unwrap();
    if field("grant_type") == "authorization_code"
        && field("client_id") == CLIENT_ID
        && field("client_secret") == CLIENT_SECRET
    {
        let code = field("code").to_string();
        let Some(at) = i.codes.iter().position(|(c, _, _)| *c == code) else {
            i.refused_codes += 1;
            return (
                StatusCode::BAD_REQUEST,
                Json(
                    json!({"error": "invalid_grant", "error_description": "Malformed auth code."}),
                ),
            )
                .into_response();
        };
        let (_, challenge, redirect_uri) = i.codes.remove(at);
        // PKCE, RFC 7636 S256: BASE64URL(SHA256(code_verifier)) must be the challenge.
        let digest = ring::digest::digest(&ring::digest::SHA256, field("code_verifier").as_bytes());
        let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        if computed != challenge || field("redirect_uri") != redirect_uri {
            i.refused_codes += 1;
            return (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant", "error_description": "Bad code verifier or redirect URI."}))).into_response();
        }
        i.redeemed += 1;
        i.issued += 1;
        let token = format!("access-{}", i.issued);
        i.tokens.push(token.clone());
        return Json(
            json!({"access_token": token, "refresh_token": REFRESH_TOKEN,
            "expires_in": i.expires_in, "token_type": "Bearer"}),
        )
        .into_response();
    }
    if field("grant_type") != "refresh_token"
        || field("client_id") != CLIENT_ID
        || field("client_secret") != CLIENT_SECRET
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    if i.revoked || field("refresh_token") != REFRESH_TOKEN {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant", "error_description": "Token has been expired or revoked."})),
        )
            .into_response();
    }
    i.issued += 1;
    let token = format!("access-{}", i.issued);
    i.tokens.push(token.clone());
    Json(json!({"access_token": token, "expires_in": i.expires_in, "token_type": "Bearer"}))
        .into_response()
}

/// Google's consent page, consenting at once (or refusing as told): back to the redirect URI
/// with a code bound to the PKCE challenge.
async fn authorize(
    State(inner): State<Shared>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    if get("client_id") != CLIENT_ID
        || get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").len() != 43
    {
        return error(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let mut target = url::Url::parse(&get("redirect_uri")).unwrap();
    let mut i = inner.lock().unwrap();
    match i.consent_error.clone() {
        Some(e) => {
            target.query_pairs_mut().append_pair("error", &e);
        }
        None => {
            let code = format!("code-{}", i.codes.len() + i.redeemed as usize + 1);
            i.codes
                .push((code.clone(), get("code_challenge"), get("redirect_uri")));
            target.query_pairs_mut().append_pair("code", &code);
        }
    }
    target.query_pairs_mut().append_pair("state", &get("state"));
    (StatusCode::FOUND, [("location", target.to_string())]).into_response()
}

async fn userinfo(State(inner): State<Shared>, headers: HeaderMap) -> Response {
    if let Err(r) = authorized(&inner, &headers, "GET userinfo".into()).await {
        return r;
    }
    Json(json!({"sub": "1001", "email": ACCOUNT, "email_verified": true})).into_response()
}

async fn calendar(
    State(inner): State<Shared>,
    Path(calendar): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorized(&inner, &headers, format!("GET calendars/{calendar}")).await {
        return r;
    }
    Json(json!({"id": calendar, "summary": "Desk", "timeZone": "America/New_York"})).into_response()
}

fn instant(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

async fn create_event(
    State(inner): State<Shared>,
    Path(calendar): Path<String>,
    headers: HeaderMap,
    Json(mut event): Json<Value>,
) -> Response {
    if let Err(r) = authorized(
        &inner,
        &headers,
        format!("POST calendars/{calendar}/events"),
    )
    .await
    {
        return r;
    }
    if instant(&event["start"]["dateTime"]).is_none()
        || instant(&event["end"]["dateTime"]).is_none()
    {
        return error(StatusCode::BAD_REQUEST, "Invalid start or end time.");
    }
    let mut i = inner.lock().unwrap();
    let id = format!("evt{}", i.events.len() + 1);
    event["id"] = json!(id);
    event["status"] = json!("confirmed");
    event["htmlLink"] = json!(format!("https://calendar.example.com/event?eid={id}"));
    i.events.push((calendar, event.clone()));
    Json(event).into_response()
}

async fn list_events(
    State(inner): State<Shared>,
    Path(calendar): Path<String>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorized(&inner, &headers, format!("GET calendars/{calendar}/events")).await {
        return r;
    }
    let mut i = inner.lock().unwrap();
    i.last_query = query.unwrap_or_default();
    let items: Vec<Value> = i
        .events
        .iter()
        .filter(|(c, _)| *c == calendar)
        .map(|(_, e)| e.clone())
        .collect();
    Json(json!({"kind": "calendar#events", "timeZone": "America/New_York", "items": items}))
        .into_response()
}

async fn delete_event(
    State(inner): State<Shared>,
    Path((calendar, event)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorized(
        &inner,
        &headers,
        format!("DELETE calendars/{calendar}/events/{event}"),
    )
    .await
    {
        return r;
    }
    let mut i = inner.lock().unwrap();
    let before = i.events.len();
    i.events
        .retain(|(c, e)| !(*c == calendar && e["id"] == json!(event)));
    if i.events.len() == before {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn free_busy(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Err(r) = authorized(&inner, &headers, "POST freeBusy".into()).await {
        return r;
    }
    let (Some(from), Some(to)) = (instant(&body["timeMin"]), instant(&body["timeMax"])) else {
        return error(StatusCode::BAD_REQUEST, "Bad Request");
    };
    let i = inner.lock().unwrap();
    let mut calendars = serde_json::Map::new();
    for item in body["items"].as_array().into_iter().flatten() {
        let id = item["id"].as_str().unwrap_or_default();
        let busy: Vec<Value> = i
            .events
            .iter()
            .filter(|(c, _)| c == id)
            .filter_map(|(_, e)| Some((instant(&e["start"]["dateTime"])?, instant(&e["end"]["dateTime"])?)))
            .filter(|(s, e)| *s < to && *e > from)
            .map(|(s, e)| json!({"start": s.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), "end": e.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}))
            .collect();
        calendars.insert(id.to_string(), json!({"busy": busy}));
    }
    Json(json!({"kind": "calendar#freeBusy", "timeMin": body["timeMin"], "timeMax": body["timeMax"], "calendars": calendars}))
        .into_response()
}

async fn calendar_list(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Query(_q): Query<Vec<(String, String)>>,
) -> Response {
    if let Err(r) = authorized(&inner, &headers, "GET calendarList".into()).await {
        return r;
    }
    Json(json!({"items": [
        {"id": "desk@example.com", "primary": true, "accessRole": "owner"},
        {"id": "team@group.example.com", "accessRole": "writer"}
    ]}))
    .into_response()
}

async fn send(
    State(inner): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Err(r) = authorized(&inner, &headers, "POST messages/send".into()).await {
        return r;
    }
    let Some(mime) = body["raw"]
        .as_str()
        .and_then(|raw| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(raw)
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return error(StatusCode::BAD_REQUEST, "Invalid raw message");
    };
    let mut i = inner.lock().unwrap();
    let id = format!("msg{}", i.sent.len() + 1);
    i.sent.push(json!({"raw": body["raw"], "mime": mime}));
    Json(json!({"id": id, "threadId": id, "labelIds": ["SENT"]})).into_response()
}
