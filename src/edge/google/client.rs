//! Google's REST APIs as an integration reaches them: OAuth 2.0 access tokens from the
//! integration's refresh token, and authorized JSON requests.
//!
//! - An access token is asked of the token endpoint (`grant_type=refresh_token`) when the
//!   integration has none in memory or its own is within a minute of expiring, and once more
//!   when an API answers 401 (the request is then sent again, once).
//! - Access tokens live in memory only; the refresh token and client secret are stored sealed
//!   (see [`crate::domain::secrets`]), and none of them is ever logged or put in a call's events.
//! - The token endpoint refusing the grant (`invalid_grant`: the account revoked access, or
//!   the refresh token expired) is [`Failure::Revoked`]: the runner disconnects the
//!   integration, which stays in error until it is connected again.
//! - Every request goes through the outbound URL policy; the real Google base URLs are the
//!   defaults, and another base (a stand-in on a private network) needs the operator's
//!   `--egress-allow`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_actors::ids::IntegrationId;
use tokio::sync::Mutex;

use crate::edge::egress::Egress;
use crate::edge::webhooks::{ReadError, network_reason, read_limited};

/// Largest answer read from Google.
const READ_LIMIT: usize = 1 << 20;
/// An access token this close to its expiry is refreshed first.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// Where Google's APIs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoogleUrls {
    /// The OAuth 2.0 authorization endpoint (the consent page an operator is sent to).
    pub authorize: String,
    /// The OAuth 2.0 token endpoint.
    pub token: String,
    /// The OpenID Connect userinfo endpoint (which account consented).
    pub userinfo: String,
    /// The Calendar API v3 base.
    pub calendar: String,
    /// The Gmail API v1 base.
    pub gmail: String,
}

impl Default for GoogleUrls {
    fn default() -> Self {
        GoogleUrls {
            authorize: "https://accounts.google.com/o/oauth2/v2/auth".into(),
            token: "https://oauth2.googleapis.com/token".into(),
            userinfo: "https://openidconnect.googleapis.com/v1/userinfo".into(),
            calendar: "https://www.googleapis.com/calendar/v3".into(),
            gmail: "https://gmail.googleapis.com/gmail/v1".into(),
        }
    }
}

/// What an integration is authorized with: the OAuth client it was granted to, and the grant.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OAuthGrant {
    pub client_id: String,
    pub client_secret: String,
    pub refresh_token: String,
}

impl std::fmt::Debug for OAuthGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthGrant")
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The API (or the token endpoint) answered this status; its body, shortened.
    Status(u16, String),
    /// No answer in time, or the network failed; why.
    Network(String),
    /// The token endpoint refused the grant: access was revoked.
    Revoked(String),
}

/// An API's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// The body as JSON (`null` when it is empty, e.g. a 204).
    pub body: Value,
}

/// Google's APIs, with the access tokens of every integration in memory.
pub struct Google {
    egress: Egress,
    pub urls: GoogleUrls,
    timeout: Duration,
    tokens: Mutex<HashMap<IntegrationId, (String, Instant)>>,
    refreshes: std::sync::atomic::AtomicU64,
}

impl Google {
    pub fn new(egress: Egress, urls: GoogleUrls, timeout: Duration) -> Google {
        Google {
            egress,
            urls,
            timeout,
            tokens: Mutex::new(HashMap::new()),
            refreshes: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Access tokens asked of the token endpoint since start.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forgets an integration's access token (it was disconnected or connected again).
    pub async fn forget(&self, id: IntegrationId) {
        self.tokens.lock().await.remove(&id);
    }

    /// Sends `method url` with `body` as JSON, authorized for the integration `id`; a 401
    /// refreshes the access token and sends it again, once. Any status other than 2xx is a
    /// [`Failure::Status`].
    pub async fn send(
        &self,
        id: IntegrationId,
        grant: &OAuthGrant,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let mut token = self.access_token(id, grant, false).await?;
        let mut retried = false;
        loop {
            let (status, text) = self
                .exchange(method.clone(), url, body, Some(&token), None)
                .await?;
            if status == 401 && !retried {
                retried = true;
                token = self.access_token(id, grant, true).await?;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(Failure::Status(status, shortened(&text)));
            }
            let body = if text.trim().is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text)
                    .map_err(|_| Failure::Status(502, "the answer is not JSON".to_string()))?
            };
            return Ok(Answer { status, body });
        }
    }

    /// The integration's access token: the one in memory unless `fresh` or it is about to
    /// expire, else a new one from the token endpoint.
    async fn access_token(
        &self,
        id: IntegrationId,
        grant: &OAuthGrant,
        fresh: bool,
    ) -> Result<String, Failure> {
        // Held across the refresh: concurrent calls of one integration refresh once.
        let mut tokens = self.tokens.lock().await;
        if !fresh
            && let Some((token, expires)) = tokens.get(&id)
            && Instant::now() + EXPIRY_MARGIN < *expires
        {
            return Ok(token.clone());
        }
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", grant.refresh_token.as_str()),
            ("client_id", grant.client_id.as_str()),
            ("client_secret", grant.client_secret.as_str()),
        ];
        self.refreshes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (status, answer) = self.token_endpoint(&form).await?;
        if !(200..300).contains(&status) {
            tokens.remove(&id);
            let error = answer["error"].as_str().unwrap_or_default();
            return Err(if error == "invalid_grant" {
                Failure::Revoked(format!(
                    "the token endpoint refused the grant ({})",
                    answer["error_description"].as_str().unwrap_or(error)
                ))
            } else {
                Failure::Status(
                    status,
                    format!("the token endpoint answered: {}", shortened(error)),
                )
            });
        }
        let token = answer["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Failure::Status(502, "the token endpoint gave no access_token".into()))?
            .to_string();
        let lifetime = answer["expires_in"].as_u64().unwrap_or(3600);
        tokens.insert(
            id,
            (
                token.clone(),
                Instant::now() + Duration::from_secs(lifetime),
            ),
        );
        Ok(token)
    }

    /// A form posted to the token endpoint: its status and JSON answer (`null` if not JSON).
    pub(super) async fn token_endpoint(
        &self,
        form: &[(&str, &str)],
    ) -> Result<(u16, Value), Failure> {
        let (status, text) = self
            .exchange(
                reqwest::Method::POST,
                &self.urls.token,
                None,
                None,
                Some(form),
            )
            .await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// One request through the outbound URL policy: its status and body.
    pub(super) async fn exchange(
        &self,
        method: reqwest::Method,
        url: &str,
        json: Option<&Value>,
        bearer: Option<&str>,
        form: Option<&[(&str, &str)]>,
    ) -> Result<(u16, String), Failure> {
        let checked = self
            .egress
            .check(url)
            .await
            .map_err(|e| Failure::Network(format!("the URL may not be called: {e}")))?;
        let client = self
            .egress
            .client(&checked, self.timeout)
            .map_err(|_| Failure::Network("the HTTP client could not be built".into()))?;
        let mut request = client.request(method, checked.url.clone());
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        if let Some(body) = json {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        if let Some(form) = form {
            let body = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(form)
                .finish();
            request = request
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body);
        }
        let started = Instant::now();
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Err(Failure::Network(format!(
                    "no answer within {} s",
                    self.timeout.as_secs_f32()
                )));
            }
            Err(e) => return Err(Failure::Network(network_reason(&e))),
        };
        let status = response.status().as_u16();
        let body = match read_limited(response, READ_LIMIT, started, self.timeout).await {
            Ok(body) if body.len() >= READ_LIMIT => {
                return Err(Failure::Network("the answer is larger than 1 MiB".into()));
            }
            Ok(body) => body,
            Err(ReadError::Timeout) => {
                return Err(Failure::Network(format!(
                    "no answer within {} s",
                    self.timeout.as_secs_f32()
                )));
            }
            Err(ReadError::Network(reason)) => return Err(Failure::Network(reason)),
        };
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// An answer's text cut for a message or preview: at most [`SHORTENED_CHARS`] characters, the
/// last three `...` when it was cut.
pub fn shortened(text: &str) -> String {
    const ELLIPSIS: &str = "...";
    if text.chars().count() <= SHORTENED_CHARS {
        return text.to_string();
    }
    let keep = SHORTENED_CHARS - ELLIPSIS.len();
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    format!("{}{ELLIPSIS}", &text[..end])
}

/// The most characters of a [`shortened`] text.
pub const SHORTENED_CHARS: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortened_text_is_at_most_500_characters_with_its_ellipsis() {
        let long = "é".repeat(800);
        let cut = shortened(&long);
        assert_eq!(cut.chars().count(), SHORTENED_CHARS);
        assert!(cut.ends_with("..."));
        let exact = "x".repeat(SHORTENED_CHARS);
        assert_eq!(shortened(&exact), exact);
    }
}
