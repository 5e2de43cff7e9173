//! One signed POST of an event's envelope to an agent's webhook URL, through the outbound URL
//! policy (checked now: a name may resolve elsewhere than it did when the URL was saved).
//!
//! The agent's `webhook_headers` are sent first; none may stand in for the headers the service
//! writes itself (its `X-Switchboard-*` headers, `Content-Type`, and the ones the HTTP client
//! owns): such names are left out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use switchboard_actors::ids::EventId;

use crate::domain::signing::SigningSecret;
use crate::edge::egress::Egress;
use crate::edge::webhooks::{FORBIDDEN_HEADERS, ReadError, network_reason, read_limited};

/// The signature header: `v1=<hex HMAC-SHA256 over "{timestamp}.{body}">`.
pub const SIGNATURE_HEADER: &str = "X-Switchboard-Signature";
/// The Unix time (seconds) the signature covers.
pub const TIMESTAMP_HEADER: &str = "X-Switchboard-Timestamp";
/// The event kind, e.g. `call.ended`.
pub const EVENT_HEADER: &str = "X-Switchboard-Event";
/// The event's id (the same on every attempt).
pub const DELIVERY_HEADER: &str = "X-Switchboard-Delivery";

/// What to send.
pub struct SignedPost<'a> {
    pub url: &'a str,
    pub event_id: EventId,
    /// The event kind (`X-Switchboard-Event`).
    pub kind: &'a str,
    /// The envelope, exactly as signed and sent.
    pub body: &'a [u8],
    pub secret: &'a SigningSecret,
    /// The agent's extra headers.
    pub headers: &'a BTreeMap<String, String>,
    /// The Unix time the signature covers.
    pub timestamp: i64,
    /// For the whole exchange: connecting, sending, the answer and its body.
    pub timeout: Duration,
    /// The most of the answer's body read.
    pub read_limit: usize,
}

/// How one POST went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// A 2xx, with the answer's body (at most the read limit).
    Delivered { status: u16, body: Vec<u8> },
    /// Any other status (a redirect included: redirects are never followed).
    Status { status: u16 },
    /// The outbound URL policy refused the URL.
    Refused(String),
    /// No answer within the timeout.
    Timeout,
    /// The exchange failed (connection refused, reset, ...).
    Network(String),
}

impl SendOutcome {
    /// The answer's HTTP status, if one came.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            SendOutcome::Delivered { status, .. } | SendOutcome::Status { status } => Some(*status),
            _ => None,
        }
    }

    /// Why the attempt failed, as recorded on the delivery; `None` when delivered.
    pub fn error(&self, timeout: Duration) -> Option<String> {
        match self {
            SendOutcome::Delivered { .. } => None,
            SendOutcome::Status { status } => Some(format!("the webhook answered HTTP {status}")),
            SendOutcome::Refused(reason) => Some(format!("the URL is not allowed: {reason}")),
            SendOutcome::Timeout => Some(format!(
                "no answer within {} seconds",
                timeout.as_secs_f64()
            )),
            SendOutcome::Network(reason) => Some(reason.clone()),
        }
    }
}

/// Whether the agent may not set header `name`: the service writes it, or the HTTP client
/// owns it.
pub fn reserved_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("x-switchboard-")
        || name == "content-type"
        || FORBIDDEN_HEADERS
            .iter()
            .any(|forbidden| match forbidden.strip_suffix('-') {
                Some(prefix) => name.starts_with(prefix) && name[prefix.len()..].starts_with('-'),
                None => name == *forbidden,
            })
}

/// Sends one signed POST.
pub async fn send(egress: &Egress, post: SignedPost<'_>) -> SendOutcome {
    let checked = match egress.check(post.url).await {
        Ok(checked) => checked,
        Err(e) => return SendOutcome::Refused(e.to_string()),
    };
    let client = match egress.client(&checked, post.timeout) {
        Ok(client) => client,
        Err(_) => return SendOutcome::Network("the HTTP client could not be built".into()),
    };
    let mut request = client.post(checked.url.clone());
    for (name, value) in post.headers {
        if !reserved_header(name) {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let signature = post.secret.sign_delivery(post.timestamp, post.body);
    let request = request
        .header("content-type", "application/json")
        .header(SIGNATURE_HEADER, format!("v1={signature}"))
        .header(TIMESTAMP_HEADER, post.timestamp.to_string())
        .header(EVENT_HEADER, post.kind)
        .header(DELIVERY_HEADER, post.event_id.to_string())
        .body(post.body.to_vec());
    let started = Instant::now();
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) if e.is_timeout() => return SendOutcome::Timeout,
        Err(e) => return SendOutcome::Network(network_reason(&e)),
    };
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return SendOutcome::Status { status };
    }
    match read_limited(response, post.read_limit, started, post.timeout).await {
        Ok(body) => SendOutcome::Delivered { status, body },
        Err(ReadError::Timeout) => SendOutcome::Timeout,
        Err(ReadError::Network(reason)) => SendOutcome::Network(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_headers_and_the_clients_are_reserved() {
        for name in [
            "X-Switchboard-Signature",
            "x-switchboard-timestamp",
            "X-SWITCHBOARD-ANYTHING",
            "Content-Type",
            "Host",
            "content-length",
            "Transfer-Encoding",
            "Proxy-Authorization",
        ] {
            assert!(reserved_header(name), "{name}");
        }
        for name in ["Authorization", "X-Team", "X-Switchboardish", "Proxyish"] {
            assert!(!reserved_header(name), "{name}");
        }
    }
}
