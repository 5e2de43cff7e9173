//! SIP trunks: where outbound calls leave, and how they are addressed.
//!
//! A trunk is one or more gateways (tried by priority, lowest first), digest credentials, the
//! From identity, the number format the carrier expects and extra headers. The service stores
//! trunks and hands them to the dialer; this module knows their rules: what a valid trunk is,
//! how a number becomes a Request-URI and which gateway comes first.
//!
//! Unknown keys are refused when a trunk is read, so a misspelt field is an error, never a
//! silently ignored setting. The password is never serialized: a serialized trunk (as the
//! service stores and answers it) carries everything else. With the `openapi` feature the types
//! describe themselves for an OpenAPI document; the schemas' bounds are this module's limits.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a gateway is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum TrunkTransport {
    #[default]
    Udp,
    Tcp,
    Tls,
}

impl TrunkTransport {
    pub fn name(self) -> &'static str {
        match self {
            TrunkTransport::Udp => "udp",
            TrunkTransport::Tcp => "tcp",
            TrunkTransport::Tls => "tls",
        }
    }

    /// The port a gateway without one listens on when DNS names none (RFC 3263 §4.2).
    pub fn default_port(self) -> u16 {
        match self {
            TrunkTransport::Tls => 5061,
            _ => 5060,
        }
    }
}

/// One gateway of a trunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    /// A host name or an IP address (IPv6 without brackets).
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 253))]
    pub host: String,
    /// Absent: the port (and target hosts) come from DNS SRV records, else the transport's
    /// default port (RFC 3263).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65535))]
    pub port: Option<u16>,
    #[serde(default)]
    pub transport: TrunkTransport,
    /// Lower is tried first (default 0); equal priorities keep their listed order.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 65535))]
    pub priority: u16,
}

impl fmt::Display for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port};transport={}", self.transport.name()),
            None => write!(f, "{host};transport={}", self.transport.name()),
        }
    }
}

/// How a number is written in the Request-URI and To header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NumberFormat {
    /// `+972501234567` (true) or `972501234567` (false).
    #[serde(default = "yes")]
    pub plus: bool,
    /// Digits the carrier wants before the number (a "tech prefix"), e.g. `1234#`: 1-16
    /// digits, `*` or `#`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9*#]{1,16}$"))]
    pub tech_prefix: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for NumberFormat {
    fn default() -> Self {
        NumberFormat {
            plus: true,
            tech_prefix: None,
        }
    }
}

impl NumberFormat {
    /// `number` (E.164 with its `+`) as the carrier wants it.
    pub fn apply(&self, number: &str) -> String {
        let digits = number.strip_prefix('+').unwrap_or(number);
        let prefix = self.tech_prefix.as_deref().unwrap_or("");
        if self.plus {
            format!("{prefix}+{digits}")
        } else {
            format!("{prefix}{digits}")
        }
    }
}

/// A header added to every INVITE sent through the trunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExtraHeader {
    /// A SIP header name (a token of at most 64 characters) the dialer does not write itself.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[A-Za-z0-9.!%*_+`'~-]{1,64}$"))]
    pub name: String,
    /// At most 255 characters, no control characters.
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 255, pattern = "^[^\\x00-\\x1f\\x7f-\\x9f]*$")
    )]
    pub value: String,
}

/// A password that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The password itself, for the digest computation and the store.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// A SIP trunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Trunk {
    /// 1-8 gateways, tried by priority.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 8))]
    pub gateways: Vec<Gateway>,
    /// The digest user (unless `auth_username` is set), and the From user of the OPTIONS
    /// probes a trunk test sends (`switchboard` when absent). Never a call's From user: that
    /// is `from_user`, else the calling number.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.!~*'()&=+$,;?/#-]{1,255}$")
    )]
    pub username: Option<String>,
    /// A separate user for the digest computation (some carriers name an account id here).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.!~*'()&=+$,;?/#-]{1,255}$")
    )]
    pub auth_username: Option<String>,
    /// Write-only: stored, used for digest authentication, never serialized, returned or
    /// logged. 1-255 characters without control characters; it needs a `username`.
    #[serde(default, skip_serializing_if = "never_serialized")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, write_only, min_length = 1, max_length = 255)
    )]
    pub password: Option<Secret>,
    /// The From user of every call through the trunk; absent: the calling number in the
    /// trunk's number format (never `username`).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.!~*'()&=+$,;?/#-]{1,255}$")
    )]
    pub from_user: Option<String>,
    /// The user of the Request-URI and To header; absent: the dialed number in the trunk's
    /// number format. For a peer that routes by a fixed user rather than by number, such as
    /// another Switchboard's SIP endpoint (`sip:<slug>@host`): every call through the trunk
    /// then reaches that user, and the dialed number stays on the call record.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.!~*'()&=+$,;?/#-]{1,255}$")
    )]
    pub request_user: Option<String>,
    /// The From host; absent: the host of the first gateway listed (whatever its priority).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 253))]
    pub from_domain: Option<String>,
    #[serde(default)]
    pub number_format: NumberFormat,
    /// At most 16 headers.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub headers: Vec<ExtraHeader>,
    /// New calls per second through the trunk; absent: no cap.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(format = Int64, minimum = 1, maximum = 4294967295_u64)
    )]
    pub calls_per_second: Option<u32>,
    /// Calls live on the trunk at once; absent: no cap.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(format = Int64, minimum = 1, maximum = 4294967295_u64)
    )]
    pub max_concurrent_calls: Option<u32>,
}

/// The password's serialization rule: never. (`skip_serializing_if` rather than
/// `skip_serializing`, which would also drop the field from the OpenAPI schema, where it is a
/// write-only field of the request.)
fn never_serialized(_: &Option<Secret>) -> bool {
    true
}

/// Why a trunk is not valid; `field` names the offending field (`gateways[0].host`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TrunkError {
    pub field: String,
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> TrunkError {
    TrunkError {
        field: field.into(),
        message: message.into(),
    }
}

/// Limits of a trunk's fields.
pub const MAX_GATEWAYS: usize = 8;
pub const MAX_HEADERS: usize = 16;
pub const MAX_TEXT: usize = 255;

/// Headers the dialer writes itself: a trunk may not set them.
const RESERVED_HEADERS: &[&str] = &[
    "via",
    "v",
    "from",
    "f",
    "to",
    "t",
    "call-id",
    "i",
    "cseq",
    "contact",
    "m",
    "max-forwards",
    "content-length",
    "l",
    "content-type",
    "c",
    "route",
    "record-route",
    "authorization",
    "proxy-authorization",
    "supported",
    "k",
    "require",
    "session-expires",
    "x",
    "min-se",
];

/// A host name (RFC 1123 labels) or an IP address.
fn valid_host(host: &str) -> bool {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// RFC 3261 `token` characters (header names).
fn valid_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&b))
}

/// A SIP user part we can write without escaping: unreserved and user-unreserved characters.
fn valid_user(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TEXT
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.!~*'()&=+$,;?/#".contains(&b))
}

/// Printable text without line breaks (a header value, a password).
fn valid_text(s: &str) -> bool {
    s.len() <= MAX_TEXT && !s.chars().any(|c| c.is_control())
}

impl Trunk {
    /// Checks every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), TrunkError> {
        if self.gateways.is_empty() {
            return Err(invalid("gateways", "a trunk needs at least one gateway"));
        }
        if self.gateways.len() > MAX_GATEWAYS {
            return Err(invalid(
                "gateways",
                format!("at most {MAX_GATEWAYS} gateways"),
            ));
        }
        for (i, gw) in self.gateways.iter().enumerate() {
            if !valid_host(&gw.host) {
                return Err(invalid(
                    format!("gateways[{i}].host"),
                    "must be a host name or an IP address",
                ));
            }
            if gw.port == Some(0) {
                return Err(invalid(format!("gateways[{i}].port"), "must be 1-65535"));
            }
        }
        for (field, value) in [
            ("username", &self.username),
            ("auth_username", &self.auth_username),
            ("from_user", &self.from_user),
            ("request_user", &self.request_user),
        ] {
            if let Some(v) = value
                && !valid_user(v)
            {
                return Err(invalid(
                    field,
                    "must be 1-255 characters a SIP user part allows unescaped",
                ));
            }
        }
        if let Some(p) = &self.password
            && (p.0.is_empty() || !valid_text(&p.0))
        {
            return Err(invalid(
                "password",
                "must be 1-255 characters without control characters",
            ));
        }
        if self.password.is_some() && self.username.is_none() {
            return Err(invalid("username", "a password needs a username"));
        }
        if let Some(d) = &self.from_domain
            && !valid_host(d)
        {
            return Err(invalid(
                "from_domain",
                "must be a host name or an IP address",
            ));
        }
        if let Some(prefix) = &self.number_format.tech_prefix
            && (prefix.is_empty()
                || prefix.len() > 16
                || !prefix
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"*#".contains(&b)))
        {
            return Err(invalid(
                "number_format.tech_prefix",
                "must be 1-16 digits, * or #",
            ));
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(invalid("headers", format!("at most {MAX_HEADERS} headers")));
        }
        for (i, h) in self.headers.iter().enumerate() {
            if !valid_token(&h.name) || h.name.len() > 64 {
                return Err(invalid(
                    format!("headers[{i}].name"),
                    "must be a SIP header name (a token of at most 64 characters)",
                ));
            }
            if RESERVED_HEADERS.contains(&h.name.to_ascii_lowercase().as_str()) {
                return Err(invalid(
                    format!("headers[{i}].name"),
                    format!("{} is written by the dialer itself", h.name),
                ));
            }
            if !valid_text(&h.value) {
                return Err(invalid(
                    format!("headers[{i}].value"),
                    "must be at most 255 characters without line breaks",
                ));
            }
        }
        if self.calls_per_second == Some(0) {
            return Err(invalid("calls_per_second", "must be at least 1"));
        }
        if self.max_concurrent_calls == Some(0) {
            return Err(invalid("max_concurrent_calls", "must be at least 1"));
        }
        Ok(())
    }

    /// The gateways in the order they are tried: by priority, then as listed.
    pub fn ordered_gateways(&self) -> Vec<&Gateway> {
        let mut gws: Vec<&Gateway> = self.gateways.iter().collect();
        gws.sort_by_key(|g| g.priority);
        gws
    }

    /// The From user for a call from `from_number` (E.164).
    pub fn from_user_for(&self, from_number: &str) -> String {
        match &self.from_user {
            Some(user) => user.clone(),
            None => self.number_format.apply(from_number),
        }
    }

    /// The Request-URI and To user for a call to `to_number` (E.164).
    pub fn request_user_for(&self, to_number: &str) -> String {
        match &self.request_user {
            Some(user) => user.clone(),
            None => self.number_format.apply(to_number),
        }
    }

    /// The host of the From URI.
    pub fn from_host(&self) -> Option<&str> {
        self.from_domain
            .as_deref()
            .or_else(|| self.gateways.first().map(|g| g.host.as_str()))
    }
}

/// What an OPTIONS probe of one gateway found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GatewayProbe {
    /// The gateway as configured (`host[:port];transport=...`).
    pub gateway: String,
    /// The gateway answered (any final response but 408 and 5xx counts: it is there and
    /// speaks SIP; a 401/407 to OPTIONS is common and fine).
    pub ok: bool,
    /// The final response's status code, if one came.
    pub status: Option<u16>,
    /// The reason phrase, or why nothing came (timeout, DNS, transport).
    pub detail: String,
}

#[cfg(test)]
mod tests;
