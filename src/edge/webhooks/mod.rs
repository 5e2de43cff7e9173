//! Webhook tools: building the payload the production contract sends, and delivering it once
//! through the egress policy. Their configuration is validated once, at the edge, in
//! `config.rs` (re-exported here).

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::edge::egress::{Egress, EgressError};

mod config;
pub mod signed;

pub use config::*;

/// Longest downstream response preview, in characters.
pub const PREVIEW_CHARS: usize = 2000;

/// Most of a downstream response read at all.
const READ_LIMIT: usize = 64 * 1024;

/// The flat payload: the nine standard metadata fields (when included), then static
/// parameters, then the arguments.
pub fn payload(
    config: &WebhookConfig,
    metadata: &Map<String, Value>,
    arguments: &Map<String, Value>,
) -> Map<String, Value> {
    let pc = &config.payload_config;
    let mut flat = Map::new();
    if pc.include_standard_metadata {
        flat.extend(metadata.clone());
    }
    flat.extend(pc.static_parameters.clone());
    flat.extend(arguments.clone());
    flat
}

/// How one delivery went.
#[derive(Debug)]
pub enum Outcome {
    /// A 2xx.
    Delivered {
        status: u16,
        body: String,
    },
    /// Any other status (redirects included: they are never followed).
    Status {
        status: u16,
        body: String,
    },
    Timeout,
    Network(String),
}

impl Outcome {
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Delivered { .. } => "delivered",
            Outcome::Status { .. } => "http_error",
            Outcome::Timeout => "timeout",
            Outcome::Network(_) => "network_error",
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::Delivered { status, .. } | Outcome::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Text safe to show: control characters (other than newline and tab) removed, capped.
pub fn preview(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .take(PREVIEW_CHARS)
        .collect()
}

/// A value as a query parameter: strings as they are, everything else as compact JSON.
fn query_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How a delivery the outbound URL policy refused begins its reason.
const NOT_ALLOWED: &str = "the URL is not allowed: ";

/// Whether a delivery's network reason is the outbound URL policy's refusal.
pub fn is_refusal(reason: &str) -> bool {
    reason.starts_with(NOT_ALLOWED)
}

/// A webhook URL as deliveries are logged: without its query or fragment (they may carry
/// secrets).
pub fn logged_url(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or_default()
}

/// Sends the payload once, as the production contract does.
pub async fn deliver(
    egress: &Egress,
    config: &WebhookConfig,
    payload: &Map<String, Value>,
) -> Outcome {
    let url = config.url.as_str();
    let method = config.method.as_str();
    let timeout = Duration::from_secs(config.timeout_seconds);
    // Checked again now: a name may resolve elsewhere than it did at save time.
    let checked = match egress.check(url).await {
        Ok(c) => c,
        Err(e @ EgressError::Unresolved(_)) => return Outcome::Network(e.to_string()),
        Err(e) => return Outcome::Network(format!("{NOT_ALLOWED}{e}")),
    };
    let client = match egress.client(&checked, timeout) {
        Ok(c) => c,
        Err(_) => return Outcome::Network("the HTTP client could not be built".into()),
    };
    let mut url = checked.url.clone();
    let verb = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
    if verb == reqwest::Method::GET {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in payload {
            pairs.append_pair(k, &query_value(v));
        }
        drop(pairs);
    }
    let mut req = client.request(verb.clone(), url);
    let mut has_content_type = false;
    for (name, value) in &config.headers {
        has_content_type |= name.eq_ignore_ascii_case("content-type");
        req = req.header(name.as_str(), value.as_str());
    }
    if verb != reqwest::Method::GET {
        if !has_content_type {
            req = req.header("content-type", "application/json");
        }
        req = req.body(Value::Object(payload.clone()).to_string());
    }
    let started = Instant::now();
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return Outcome::Timeout,
        Err(e) => return Outcome::Network(network_reason(&e)),
    };
    let status = resp.status().as_u16();
    let body = match read_limited(resp, READ_LIMIT, started, timeout).await {
        Ok(body) => body,
        Err(ReadError::Timeout) => return Outcome::Timeout,
        Err(ReadError::Network(reason)) => return Outcome::Network(reason),
    };
    let body = preview(&body);
    if (200..300).contains(&status) {
        Outcome::Delivered { status, body }
    } else {
        Outcome::Status { status, body }
    }
}

/// How reading an answer's body ended early.
#[derive(Debug)]
pub(crate) enum ReadError {
    Timeout,
    Network(String),
}

/// Reads an answer's body until its end or until at least `limit` bytes are read (the rest is
/// left unread), giving up once `timeout` has passed since `started`.
pub(crate) async fn read_limited(
    mut resp: reqwest::Response,
    limit: usize,
    started: Instant,
    timeout: Duration,
) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, resp.chunk()).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Ok(Some(chunk))) => {
                body.extend_from_slice(&chunk);
                if body.len() >= limit {
                    return Ok(body);
                }
            }
            Ok(Ok(None)) => return Ok(body),
            Ok(Err(e)) if e.is_timeout() => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Network(network_reason(&e))),
        }
    }
}

/// Why a request failed, without the URL (it may carry secrets in its query).
pub(crate) fn network_reason(e: &reqwest::Error) -> String {
    if e.is_connect() {
        "the connection failed".into()
    } else if e.is_request() {
        "the request could not be sent".into()
    } else {
        "the exchange failed".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_camel_case() {
        assert_eq!(camel_case("get weather"), "getWeather");
        assert_eq!(camel_case("get_weather-now"), "getWeatherNow");
        assert_eq!(camel_case("GetWeather"), "getWeather");
        assert_eq!(camel_case("HTTP request"), "httpRequest");
        assert_eq!(camel_case("lookup2 order"), "lookup2Order");
        assert!(tool_name("name", "  __ ").is_err());
        assert!(tool_name("name", "2fast").is_err());
    }

    #[test]
    fn a_stored_config_reads_back_into_the_same_json() {
        let stored = serde_json::json!({
            "url": "https://hooks.example.com/order?x=1",
            "method": "PATCH",
            "timeout_seconds": 12,
            "headers": {"Authorization": "Bearer t", "X-Trace": "1"},
            "payload_config": {
                "extraction_parameters": [
                    {"name": "orderNumber", "description": "The order", "required": false}
                ],
                "static_parameters": {"source": "switchboard", "n": 2},
                "include_standard_metadata": false
            }
        });
        let config = WebhookConfig::from_stored(&stored).expect("a webhook config");
        assert_eq!(config.method, WebhookMethod::Patch);
        assert_eq!(config.parameter_names(), ["orderNumber"]);
        assert_eq!(config.to_json().unwrap(), stored);
        assert!(WebhookConfig::from_stored(&serde_json::json!({"method": "GET"})).is_none());
    }

    #[test]
    fn previews_are_sanitized_and_capped() {
        let raw = format!("ok\u{1b}[31m\u{0}\n{}", "x".repeat(5000));
        let p = preview(raw.as_bytes());
        assert!(p.starts_with("ok[31m\n"));
        assert_eq!(p.chars().count(), PREVIEW_CHARS);
    }
}
