//! Webhook tool configurations: validated once, at the edge, into a [`WebhookConfig`] (method,
//! timeout, headers, payload settings), with the limits the API's document is built from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::edge::egress::Egress;

/// Header names a webhook may not set (the HTTP client owns them); one ending in `-` is a
/// prefix.
pub const FORBIDDEN_HEADERS: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "expect",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "proxy-",
];

/// A webhook tool's configuration (the spec's Tool config), valid once built by
/// [`webhook_config`]; it is stored, and serialized to clients, in the same JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookConfig {
    /// Passed the egress policy at save time; checked again at every delivery.
    pub url: String,
    #[serde(default)]
    pub method: WebhookMethod,
    /// 1-60.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Extra request headers; none of them one the HTTP client owns.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub payload_config: PayloadConfig,
    /// What the flow simulator's dry runs answer for the tool; never sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_result: Option<Value>,
}

fn default_timeout() -> u64 {
    30
}

/// The longest tool or parameter name, in characters (after camelCase).
pub const NAME_MAX: usize = 64;
/// The longest webhook URL, in characters.
pub const URL_MAX: usize = 2048;
/// The allowed `timeout_seconds`.
pub const TIMEOUT_SECONDS: std::ops::RangeInclusive<i64> = 1..=60;
/// The longest header value, in characters.
pub const HEADER_VALUE_MAX: usize = 8192;
/// The characters of an HTTP header name besides ASCII letters and digits (RFC 9110 §5.6.2).
pub const HEADER_NAME_SYMBOLS: &str = "!#$%&'*+-.^_`|~";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WebhookMethod {
    Get,
    #[default]
    Post,
    Put,
    Patch,
    Delete,
}

impl WebhookMethod {
    pub const ALL: [WebhookMethod; 5] = [
        WebhookMethod::Get,
        WebhookMethod::Post,
        WebhookMethod::Put,
        WebhookMethod::Patch,
        WebhookMethod::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WebhookMethod::Get => "GET",
            WebhookMethod::Post => "POST",
            WebhookMethod::Put => "PUT",
            WebhookMethod::Patch => "PATCH",
            WebhookMethod::Delete => "DELETE",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Some(match raw.to_ascii_uppercase().as_str() {
            "GET" => WebhookMethod::Get,
            "POST" => WebhookMethod::Post,
            "PUT" => WebhookMethod::Put,
            "PATCH" => WebhookMethod::Patch,
            "DELETE" => WebhookMethod::Delete,
            _ => return None,
        })
    }
}

/// What a delivery's payload holds besides the model's arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayloadConfig {
    #[serde(default)]
    pub extraction_parameters: Vec<ExtractionParameter>,
    #[serde(default)]
    pub static_parameters: Map<String, Value>,
    #[serde(default = "yes")]
    pub include_standard_metadata: bool,
}

impl Default for PayloadConfig {
    fn default() -> Self {
        PayloadConfig {
            extraction_parameters: Vec::new(),
            static_parameters: Map::new(),
            include_standard_metadata: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// A value the model extracts from the conversation; `name` is camelCase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtractionParameter {
    pub name: String,
    pub description: String,
    #[serde(default = "yes")]
    pub required: bool,
}

impl WebhookConfig {
    /// A stored webhook tool's configuration (`None` if the stored JSON is not one).
    pub fn from_stored(config: &Value) -> Option<Self> {
        serde_json::from_value(config.clone()).ok()
    }

    /// The stored (and client-facing) JSON.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    /// The names of its extraction parameters.
    pub fn parameter_names(&self) -> Vec<String> {
        self.payload_config
            .extraction_parameters
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }
}

/// `get weather`, `get_weather`, `GetWeather` → `getWeather`.
pub fn camel_case(name: &str) -> String {
    let mut out = String::new();
    for (i, word) in name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        let mut chars = word.chars();
        let Some(first) = chars.next() else { continue };
        if i == 0 {
            if word.chars().all(|c| !c.is_ascii_lowercase()) {
                out.push_str(&word.to_ascii_lowercase());
            } else {
                out.push(first.to_ascii_lowercase());
                out.push_str(chars.as_str());
            }
        } else {
            out.push(first.to_ascii_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// A field of a tool's configuration that breaks its rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid field `{field}`: {rule}")]
pub struct InvalidField {
    /// The field's path, e.g. `config.url`.
    pub field: String,
    /// What the field must be.
    pub rule: String,
}

fn invalid(field: &str, why: impl std::fmt::Display) -> InvalidField {
    InvalidField {
        field: field.to_owned(),
        rule: why.to_string(),
    }
}

/// A checked camelCase name: 1-64 characters, starting with a letter.
pub fn tool_name(field: &str, raw: &str) -> Result<String, InvalidField> {
    let name = camel_case(raw);
    if name.is_empty()
        || name.len() > NAME_MAX
        || !name.starts_with(|c: char| c.is_ascii_alphabetic())
    {
        return Err(invalid(
            field,
            format!(
                "must hold 1-{NAME_MAX} letters or digits (normalized to camelCase), starting with a letter"
            ),
        ));
    }
    Ok(name)
}

/// HTTP header names (RFC 9110 tokens), as a regular expression.
pub fn header_name_pattern() -> String {
    let symbols: String = HEADER_NAME_SYMBOLS
        .chars()
        .flat_map(|c| "-^]\\".contains(c).then_some('\\').into_iter().chain([c]))
        .collect();
    format!("^[A-Za-z0-9{symbols}]+$")
}

/// The names [`tool_name`] accepts, as a regular expression: every character other than an
/// ASCII letter or digit separates words, and the letters and digits (at most [`NAME_MAX`])
/// start with a letter.
pub fn tool_name_pattern() -> String {
    format!(
        "^[^A-Za-z0-9]*[A-Za-z](?:[^A-Za-z0-9]*[A-Za-z0-9]){{0,{}}}[^A-Za-z0-9]*$",
        NAME_MAX - 1
    )
}

/// Validates a webhook configuration and returns it normalized, with defaults filled in.
/// The URL is checked against the egress policy, its name resolved.
pub async fn webhook_config(
    egress: &Egress,
    config: &Value,
) -> Result<WebhookConfig, InvalidField> {
    let Some(obj) = config.as_object() else {
        return Err(invalid("config", "must be an object"));
    };
    if obj.is_empty() {
        return Err(invalid("config", "is required for webhook tools"));
    }
    if obj.contains_key("retry_count") {
        return Err(invalid(
            "config.retry_count",
            "is not supported: webhook tools are dispatched exactly once",
        ));
    }
    const KEYS: [&str; 6] = [
        "url",
        "method",
        "timeout_seconds",
        "headers",
        "payload_config",
        "sample_result",
    ];
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid(
            &format!("config.{k}"),
            format!("is not a webhook setting (allowed: {})", KEYS.join(", ")),
        ));
    }
    let url = obj
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("config.url", "is required (a string)"))?;
    if url.chars().count() > URL_MAX {
        return Err(invalid(
            "config.url",
            format!("must be at most {URL_MAX} characters"),
        ));
    }
    let checked = egress
        .check(url)
        .await
        .map_err(|e| invalid("config.url", e))?;
    let method = match obj.get("method") {
        None => WebhookMethod::Post,
        Some(m) => m.as_str().and_then(WebhookMethod::parse).ok_or_else(|| {
            invalid(
                "config.method",
                "must be one of GET, POST, PUT, PATCH, DELETE",
            )
        })?,
    };
    let timeout = match obj.get("timeout_seconds") {
        None => 30,
        Some(v) => match v.as_i64() {
            Some(n) if TIMEOUT_SECONDS.contains(&n) && v.is_i64() => n as u64,
            _ => {
                return Err(invalid(
                    "config.timeout_seconds",
                    format!(
                        "must be an integer from {} to {}",
                        TIMEOUT_SECONDS.start(),
                        TIMEOUT_SECONDS.end()
                    ),
                ));
            }
        },
    };
    let mut headers = BTreeMap::new();
    match obj.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (name, value) in h {
                let field = format!("config.headers.{name}");
                let valid_name = !name.is_empty()
                    && name.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || HEADER_NAME_SYMBOLS.as_bytes().contains(&b)
                    });
                if !valid_name {
                    return Err(invalid(&field, "is not a valid header name"));
                }
                let lower = name.to_ascii_lowercase();
                if FORBIDDEN_HEADERS.iter().any(|f| {
                    if f.ends_with('-') {
                        lower.starts_with(f)
                    } else {
                        lower == *f
                    }
                }) {
                    return Err(invalid(
                        &field,
                        "is set by the HTTP client and may not be configured",
                    ));
                }
                let Some(text) = value.as_str() else {
                    return Err(invalid(&field, "must be a string"));
                };
                if text.chars().any(|c| c == '\r' || c == '\n' || c == '\0')
                    || text.chars().count() > HEADER_VALUE_MAX
                {
                    return Err(invalid(
                        &field,
                        format!("must be one line of at most {HEADER_VALUE_MAX} characters"),
                    ));
                }
                headers.insert(name.clone(), text.to_string());
            }
        }
        Some(_) => return Err(invalid("config.headers", "must be an object of strings")),
    }
    let payload_config = payload_config(obj.get("payload_config"))?;
    Ok(WebhookConfig {
        url: checked.url.as_str().to_string(),
        method,
        timeout_seconds: timeout,
        headers,
        payload_config,
        sample_result: obj.get("sample_result").filter(|v| !v.is_null()).cloned(),
    })
}

fn payload_config(value: Option<&Value>) -> Result<PayloadConfig, InvalidField> {
    let empty = Map::new();
    let obj = match value {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(_) => return Err(invalid("config.payload_config", "must be an object")),
    };
    const KEYS: [&str; 3] = [
        "extraction_parameters",
        "static_parameters",
        "include_standard_metadata",
    ];
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid(
            &format!("config.payload_config.{k}"),
            format!("is not a payload setting (allowed: {})", KEYS.join(", ")),
        ));
    }
    let mut params = Vec::new();
    let mut seen = std::collections::HashSet::new();
    match obj.get("extraction_parameters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, p) in list.iter().enumerate() {
                let field = format!("config.payload_config.extraction_parameters[{i}]");
                let Some(p) = p.as_object() else {
                    return Err(invalid(
                        &field,
                        "must be an object {name, description, required}",
                    ));
                };
                if let Some(k) = p
                    .keys()
                    .find(|k| !["name", "description", "required"].contains(&k.as_str()))
                {
                    return Err(invalid(
                        &format!("{field}.{k}"),
                        "is not a parameter setting",
                    ));
                }
                let name = p
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid(&format!("{field}.name"), "is required"))?;
                let name = tool_name(&format!("{field}.name"), name)?;
                if !seen.insert(name.clone()) {
                    return Err(invalid(
                        &format!("{field}.name"),
                        format!("`{name}` is listed twice"),
                    ));
                }
                let description = p
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .ok_or_else(|| invalid(&format!("{field}.description"), "is required"))?;
                let required = match p.get("required") {
                    None => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(invalid(&format!("{field}.required"), "must be a boolean"));
                    }
                };
                params.push(ExtractionParameter {
                    name,
                    description: description.to_string(),
                    required,
                });
            }
        }
        Some(_) => {
            return Err(invalid(
                "config.payload_config.extraction_parameters",
                "must be a list",
            ));
        }
    }
    let statics = match obj.get("static_parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => {
            return Err(invalid(
                "config.payload_config.static_parameters",
                "must be an object",
            ));
        }
    };
    let include = match obj.get("include_standard_metadata") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(invalid(
                "config.payload_config.include_standard_metadata",
                "must be a boolean",
            ));
        }
    };
    Ok(PayloadConfig {
        extraction_parameters: params,
        static_parameters: statics,
        include_standard_metadata: include,
    })
}

/// The names of the extraction parameters in a stored tool config of any type (the flow
/// checks read them from every linked tool, so this reads the JSON as it is).
pub fn parameter_names(config: &Value) -> Vec<String> {
    config["payload_config"]["extraction_parameters"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
