//! Gmail's `send_email`: the node's arguments read as the spec says (`to`, `cc`, `bcc` one
//! address or a list; `body` plain text, or HTML with `html: true`; `subject`), and the MIME
//! message (RFC 5322 with RFC 2047 encoded words, the body in base64) that Gmail's
//! `users.messages.send` takes as `raw` (base64url).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value};

/// An email to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    pub to: Vec<String>,
    pub cc: Vec<String>,
    pub bcc: Vec<String>,
    pub subject: String,
    pub body: String,
    pub html: bool,
}

/// Why the arguments make no email.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    /// A required argument is absent or empty (a hard failure: `missing_required_argument`).
    #[error("`{0}` is required")]
    Missing(&'static str),
    /// An address that is not one (the provider would refuse it with a 400).
    #[error("`{field}` holds {value:?}, which is not an email address")]
    Invalid { field: &'static str, value: String },
}

/// One address or a list of them, each checked: no line breaks, one `@` between a local part
/// and a domain, nothing that would start another address or header.
fn addresses(
    arguments: &Map<String, Value>,
    field: &'static str,
) -> Result<Vec<String>, EmailError> {
    let values: Vec<&Value> = match arguments.get(field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one) => vec![one],
    };
    let mut out = Vec::new();
    for value in values {
        let text = match value {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        if text.is_empty() {
            continue;
        }
        let valid = !text
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || ",;<>\"()[]\\".contains(c))
            && text.matches('@').count() == 1
            && text.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            });
        if !valid {
            return Err(EmailError::Invalid { field, value: text });
        }
        out.push(text);
    }
    Ok(out)
}

fn text(arguments: &Map<String, Value>, field: &str) -> String {
    match arguments.get(field) {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

impl Email {
    /// The email a node's arguments describe.
    pub fn of(arguments: &Map<String, Value>) -> Result<Email, EmailError> {
        let to = addresses(arguments, "to")?;
        if to.is_empty() {
            return Err(EmailError::Missing("to"));
        }
        let body = text(arguments, "body");
        if body.trim().is_empty() {
            return Err(EmailError::Missing("body"));
        }
        let html = match arguments.get("html") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
            _ => false,
        };
        Ok(Email {
            to,
            cc: addresses(arguments, "cc")?,
            bcc: addresses(arguments, "bcc")?,
            // A subject is one line.
            subject: text(arguments, "subject")
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" "),
            body,
            html,
        })
    }

    /// The message, from `from`, lines ending in CRLF.
    pub fn mime(&self, from: &str) -> String {
        let mut out = String::new();
        let mut header = |name: &str, value: &str| {
            out.push_str(name);
            out.push_str(": ");
            out.push_str(value);
            out.push_str("\r\n");
        };
        header("From", from);
        header("To", &self.to.join(", "));
        if !self.cc.is_empty() {
            header("Cc", &self.cc.join(", "));
        }
        // Gmail reads Bcc from the message and leaves it out of what recipients get.
        if !self.bcc.is_empty() {
            header("Bcc", &self.bcc.join(", "));
        }
        header("Subject", &encoded_word(&self.subject));
        header("MIME-Version", "1.0");
        let kind = if self.html { "text/html" } else { "text/plain" };
        header("Content-Type", &format!("{kind}; charset=UTF-8"));
        header("Content-Transfer-Encoding", "base64");
        out.push_str("\r\n");
        let encoded = STANDARD.encode(self.body.as_bytes());
        for line in encoded.as_bytes().chunks(76) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push_str("\r\n");
        }
        out
    }

    /// The message as Gmail's `raw`: base64url without padding.
    pub fn raw(&self, from: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.mime(from).as_bytes())
    }
}

/// A header value in printable ASCII as it is; anything else as an RFC 2047 encoded word.
fn encoded_word(value: &str) -> String {
    if value.chars().all(|c| (' '..='~').contains(&c)) {
        value.to_string()
    } else {
        format!("=?UTF-8?B?{}?=", STANDARD.encode(value.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn one_address_or_a_list_and_plain_text_by_default() {
        let email = Email::of(&args(json!({
            "to": "ada@example.com",
            "cc": ["bob@example.com", " carol@example.org "],
            "bcc": [],
            "subject": "Your visit",
            "body": "See you at ten."
        })))
        .unwrap();
        assert_eq!(email.to, ["ada@example.com"]);
        assert_eq!(email.cc, ["bob@example.com", "carol@example.org"]);
        assert!(email.bcc.is_empty());
        assert!(!email.html);
        let mime = email.mime("desk@example.com");
        assert_eq!(
            mime,
            "From: desk@example.com\r\nTo: ada@example.com\r\nCc: bob@example.com, carol@example.org\r\n\
             Subject: Your visit\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\n\
             Content-Transfer-Encoding: base64\r\n\r\nU2VlIHlvdSBhdCB0ZW4u\r\n"
        );
        // `raw` is that message, base64url without padding.
        let raw = email.raw("desk@example.com");
        assert!(!raw.contains('=') && !raw.contains('+') && !raw.contains('/'));
        assert_eq!(URL_SAFE_NO_PAD.decode(raw).unwrap(), mime.as_bytes());
    }

    #[test]
    fn html_bodies_non_ascii_subjects_and_long_bodies() {
        let body = "<p>Bienvenue à notre cabinet.</p>".repeat(5);
        let email = Email::of(&args(json!({
            "to": ["ada@example.com"], "bcc": "audit@example.com",
            "subject": "Réservation\nconfirmée", "body": body, "html": true
        })))
        .unwrap();
        let mime = email.mime("desk@example.com");
        assert!(mime.contains("Content-Type: text/html; charset=UTF-8\r\n"));
        assert!(mime.contains("Bcc: audit@example.com\r\n"));
        let subject = format!(
            "Subject: =?UTF-8?B?{}?=\r\n",
            STANDARD.encode("Réservation confirmée")
        );
        assert!(mime.contains(&subject), "{mime}");
        let (_, encoded) = mime.split_once("\r\n\r\n").unwrap();
        assert!(encoded.lines().all(|l| l.len() <= 76));
        let decoded = STANDARD.decode(encoded.replace("\r\n", "")).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), body);
    }

    #[test]
    fn missing_and_broken_arguments_are_named() {
        assert_eq!(
            Email::of(&args(json!({"body": "Hi"}))),
            Err(EmailError::Missing("to"))
        );
        assert_eq!(
            Email::of(&args(json!({"to": ["", " "], "body": "Hi"}))),
            Err(EmailError::Missing("to"))
        );
        assert_eq!(
            Email::of(&args(json!({"to": "ada@example.com", "body": "  "}))),
            Err(EmailError::Missing("body"))
        );
        for bad in [
            "ada@example.com\r\nBcc: everyone@example.com",
            "ada@example.com, eve@example.com",
            "Ada <ada@example.com>",
            "no-at-sign",
            "a@b@example.com",
            "ada@localhost",
        ] {
            let err = Email::of(&args(json!({"to": bad, "body": "Hi"}))).unwrap_err();
            assert!(
                matches!(err, EmailError::Invalid { field: "to", .. }),
                "{bad}: {err:?}"
            );
        }
    }
}
