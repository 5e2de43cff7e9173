//! Mustache tokens in a flow's texts: `{{<node_id>.<name>}}` (a value extracted or returned at
//! an earlier node) and `{{metadata.<key>}}` (the call's metadata), resolved when the text is
//! used. A token naming nothing resolves to an empty string.

use serde_json::{Map, Value};

/// The `{{a.b}}` tokens of a text, as (a, b); `{{x}}` gives (x, "").
pub fn tokens(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let inner = after[..end].trim();
        match inner.split_once('.') {
            Some((a, b)) => out.push((a.trim().to_string(), b.trim().to_string())),
            None => out.push((inner.to_string(), String::new())),
        }
        rest = &after[end + 2..];
    }
    out
}

/// `text` with each `{{...}}` token replaced by what `value` makes of its inside (trimmed);
/// `None` keeps the token as written.
pub fn replace(text: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        match value(after[..end].trim()) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 4 + end]),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// `text` with every token replaced: `values` holds `<node_id>.<name>` keys, `metadata` the
/// call's metadata (built-in and custom keys); a token naming nothing is an empty string.
pub fn resolve(text: &str, values: &Map<String, Value>, metadata: &Map<String, Value>) -> String {
    replace(text, |inner| {
        let value = match inner.split_once('.') {
            Some(("metadata", key)) => metadata.get(key.trim()),
            Some(_) => values.get(&inner.split_whitespace().collect::<String>()),
            None => None,
        };
        Some(value.map(stringified).unwrap_or_default())
    })
}

/// A value as text: a string as it is, anything else as its compact JSON (`true`, `3`,
/// `{"a":1}`), so `"true"` equals `true` and `"3"` equals `3`.
pub fn stringified(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_are_found_and_split() {
        assert_eq!(
            tokens("At {{ book.start_time }} for {{metadata.user_number}}, {{x}} {{open"),
            vec![
                ("book".to_string(), "start_time".to_string()),
                ("metadata".to_string(), "user_number".to_string()),
                ("x".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn tokens_resolve_and_a_missing_one_is_empty() {
        let values = json!({"ask.time": "2026-12-01 10:00", "check.n": 2});
        let metadata = json!({"user_number": "+15550001111", "id": "c1"});
        let text = "At {{ ask.time }} ({{check.n}}) for {{metadata.user_number}}{{metadata.order_id}}{{nope.x}}{{x}}.";
        assert_eq!(
            resolve(
                text,
                values.as_object().unwrap(),
                metadata.as_object().unwrap()
            ),
            "At 2026-12-01 10:00 (2) for +15550001111."
        );
        assert_eq!(resolve("{{open", &Map::new(), &Map::new()), "{{open");
    }
}
