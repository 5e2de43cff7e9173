//! Reading SIP headers by name, whatever form the parser gave them.

use rsipstack::sip as rsip;

/// The value of the first header named `name` (case-insensitive, compact forms not included).
pub(crate) fn header_value(headers: &rsip::Headers, name: &str) -> Option<String> {
    headers.iter().find_map(|h| {
        let text = h.to_string();
        let (n, v) = text.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// Whether a comma-separated header (Supported, Require, Allow) lists `token`.
pub(crate) fn header_has_token(headers: &rsip::Headers, name: &str, token: &str) -> bool {
    headers.iter().any(|h| {
        let text = h.to_string();
        text.split_once(':').is_some_and(|(n, v)| {
            n.trim().eq_ignore_ascii_case(name)
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))
        })
    })
}
