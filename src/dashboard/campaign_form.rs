//! A campaign's settings as a form: every writable field of `PATCH /campaigns/{id}`, shown with
//! its current value, and a submitted form turned into the PATCH body of the fields that
//! changed. The API's own rules judge that body, so the page refuses exactly what the API
//! refuses, with the same words, shown beside the field.

use maud::{Markup, html};
use serde_json::{Map, Value};
use switchboard_actors::campaign::{self as rules, RegulatoryBasis};

use super::urls::Url;
use crate::app::error::AppError;

use crate::store::{Agent, Disposition, PhoneNumberRecord};

/// The choices the form offers: the workspace's agents, numbers and dispositions.
pub struct Choices {
    pub agents: Vec<Agent>,
    pub numbers: Vec<PhoneNumberRecord>,
    pub dispositions: Vec<Disposition>,
}

/// What a field holds as the page shows it.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Fields that take a text that may be empty (null).
const NULLABLE_TEXT: [&str; 6] = [
    "description",
    "agent_id",
    "from_phone_number_id",
    "regulatory_basis",
    "starts_at",
    "ends_at",
];

/// The PATCH body of what the submitted form (`pairs`, in order) changed against `current` (the
/// campaign's view as JSON). A value that breaks no rule of its own kind is passed on as typed;
/// one that does (`ten` as an attempt count) goes on as text, for the API's rule to name.
pub fn changes(
    pairs: &[(String, String)],
    current: &Value,
) -> Result<Map<String, Value>, AppError> {
    let one = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
    };
    let mut body = Map::new();
    let mut offer = |field: &str, value: Value| {
        if current.get(field) != Some(&value) {
            body.insert(field.to_owned(), value);
        }
    };
    if let Some(name) = one("name") {
        offer("name", Value::String(name));
    }
    for field in NULLABLE_TEXT {
        if let Some(v) = one(field) {
            let value = if v.is_empty() {
                Value::Null
            } else {
                Value::String(v)
            };
            // No description is stored as an empty one.
            if field == "description" && value == Value::Null && current[field] == "" {
                continue;
            }
            offer(field, value);
        }
    }
    for rule in rules::INT_RULES {
        if let Some(v) = one(rule.field) {
            offer(rule.field, number_or_text(v));
        }
    }
    if let Some(v) = one("budget_cents") {
        offer(
            "budget_cents",
            if v.is_empty() {
                Value::Null
            } else {
                number_or_text(v)
            },
        );
    }
    // A checkbox is sent only when ticked; the form marks that it carried them.
    if one("has_flags").is_some() {
        for field in rules::BOOL_FIELDS {
            offer(field, Value::Bool(one(field).is_some()));
        }
        let ids: Vec<Value> = pairs
            .iter()
            .filter(|(k, _)| k == "stop_disposition_ids")
            .map(|(_, v)| Value::String(v.clone()))
            .collect();
        let mut was: Vec<String> = current["stop_disposition_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let mut now: Vec<String> = ids.iter().map(shown).collect();
        was.sort();
        now.sort();
        if was != now {
            offer("stop_disposition_ids", Value::Array(ids));
        }
    }
    if let Some(v) = one("calling_window") {
        let value = if v.is_empty() {
            Value::Null
        } else {
            serde_json::from_str::<Value>(&v).map_err(|e| {
                AppError::invalid_field(
                    "calling_window",
                    format!("must be a JSON object or empty (the workspace's window): {e}"),
                )
            })?
        };
        offer("calling_window", value);
    }
    Ok(body)
}

fn number_or_text(v: String) -> Value {
    v.parse::<i64>()
        .map(Value::from)
        .unwrap_or(Value::String(v))
}

/// Where an error belongs: the field it names, else the form as a whole.
pub fn error_field(e: &AppError) -> Option<&str> {
    match e {
        AppError::InvalidField { field, .. } | AppError::MissingField { field } => {
            Some(field.as_str())
        }
        _ => None,
    }
}

/// An error in words, as the page shows it beside its field.
pub fn error_words(e: &AppError) -> String {
    match e {
        AppError::InvalidField { rule, .. } => {
            let mut words = rule.clone();
            if let Some(first) = words.get_mut(..1) {
                first.make_ascii_uppercase();
            }
            words
        }
        other => other.to_string(),
    }
}

/// The settings form; `values` is the campaign's view as JSON (or what was submitted, with
/// each refusal of `errors` beside its field: (the field, if one, and the words)).
pub fn form(
    action: Url,
    csrf: &str,
    values: &Value,
    choices: &Choices,
    errors: &[(Option<String>, String)],
) -> Markup {
    let err = |field: &str| -> Option<String> {
        errors
            .iter()
            .find(|(f, _)| f.as_deref() == Some(field))
            .map(|(_, m)| m.to_owned())
    };
    let described = |field: &str| err(field).map(|_| format!("{field}-error"));
    let text = |field: &str, label: &str, hint: &str| -> Markup {
        html! {
            div.field {
                label for=(field) { (label) }
                input id=(field) name=(field) type="text" value=(shown(&values[field]))
                    aria-invalid=[err(field).map(|_| "true")] aria-describedby=[described(field)];
                @if !hint.is_empty() { span.hint { (hint) } }
                @if let Some(e) = err(field) { p.field-error id=(format!("{field}-error")) { (e) } }
            }
        }
    };
    let number = |rule: rules::IntRule, label: &str| -> Markup {
        let field = rule.field;
        html! {
            div.field {
                label for=(field) { (label) }
                input id=(field) name=(field) type="text" inputmode="numeric" value=(shown(&values[field]))
                    aria-invalid=[err(field).map(|_| "true")] aria-describedby=[described(field)];
                span.hint { (rule.min) "–" (rule.max) }
                @if let Some(e) = err(field) { p.field-error id=(format!("{field}-error")) { (e) } }
            }
        }
    };
    let select = |field: &str, label: &str, mut options: Vec<(String, String)>| -> Markup {
        let current = shown(&values[field]);
        // The value it holds is always offered, even when it is not among the choices listed
        // (the newest 100), so that saving another field keeps it.
        if !current.is_empty() && !options.iter().any(|(v, _)| *v == current) {
            let named = match field {
                "agent_id" => values["agent"]["name"].as_str(),
                "from_phone_number_id" => values["from_phone_number"]["number"].as_str(),
                _ => None,
            };
            options.insert(0, (current.clone(), named.unwrap_or(&current).to_owned()));
        }
        html! {
            div.field {
                label for=(field) { (label) }
                select id=(field) name=(field) aria-describedby=[described(field)] {
                    option value="" { "None" }
                    @for (value, text) in &options {
                        option value=(value) selected[*value == current] { (text) }
                    }
                }
                @if let Some(e) = err(field) { p.field-error id=(format!("{field}-error")) { (e) } }
            }
        }
    };
    let stops: Vec<String> = values["stop_disposition_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .map(shown)
        .collect();
    let window = match &values["calling_window"] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => serde_json::to_string_pretty(v).unwrap_or_default(),
    };
    let general: Vec<&str> = errors
        .iter()
        .filter(|(f, _)| f.is_none())
        .map(|(_, m)| m.as_str())
        .collect();
    let fields: Vec<(&str, &str)> = errors
        .iter()
        .filter_map(|(f, m)| Some((f.as_deref()?, m.as_str())))
        .collect();
    html! {
        form.settings method="post" action=(action) novalidate {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="has_flags" value="1";
            @for message in &general { p.problem role="alert" { (message) } }
            @if !fields.is_empty() {
                div.problem role="alert" {
                    p { "Not saved: " (fields.len()) @if fields.len() == 1 { " field needs" } @else { " fields need" } " a change." }
                    ul {
                        @for (field, message) in &fields {
                            li { a href=(format!("#{field}")) { (field.replace('_', " ")) } ": " (message) }
                        }
                    }
                }
            }
            (text("name", "Name", ""))
            div.field {
                label for="description" { "Description" }
                textarea id="description" name="description" rows="2" aria-describedby=[described("description")] { (shown(&values["description"])) }
                @if let Some(e) = err("description") { p.field-error id="description-error" { (e) } }
            }
            (select("agent_id", "Agent", choices.agents.iter().map(|a| (a.id.to_string(), a.name.clone())).collect()))
            (select("from_phone_number_id", "Caller number", choices.numbers.iter().map(|n| (n.id.to_string(), format!("{} ({})", n.number, n.status))).collect()))
            (select("regulatory_basis", "Regulatory basis", RegulatoryBasis::ALL.iter().map(|b| (b.as_str().to_owned(), b.as_str().replace('_', " "))).collect()))
            fieldset.numbers {
                legend { "Pacing and retries" }
                (number(rules::MAX_ATTEMPTS, "Attempts per contact"))
                (number(rules::MAX_IN_FLIGHT, "Calls at once"))
                (number(rules::MAX_CALLS_PER_DAY, "Calls per day"))
                (number(rules::MIN_SECONDS_BETWEEN_CALLS, "Seconds between calls"))
                (number(rules::RETRY_NO_ANSWER_SECONDS, "Retry after no answer (s)"))
                (number(rules::RETRY_COMPLETED_SECONDS, "Retry after an answer (s)"))
                (number(rules::DOUBLE_DIAL_GAP_SECONDS, "Double-dial gap (s)"))
                (number(rules::MAX_INFRA_RETRIES, "Carrier-failure retries"))
            }
            div.field {
                label for="budget_cents" { "Budget (cents)" }
                input id="budget_cents" name="budget_cents" type="text" inputmode="numeric" value=(shown(&values["budget_cents"]))
                    aria-invalid=[err("budget_cents").map(|_| "true")] aria-describedby=[described("budget_cents")];
                span.hint { "Empty for no cap" }
                @if let Some(e) = err("budget_cents") { p.field-error id="budget_cents-error" { (e) } }
            }
            fieldset {
                legend { "Stop and retry rules" }
                @for field in rules::BOOL_FIELDS {
                    label.check {
                        input type="checkbox" name=(field) value="true" checked[values[field] == Value::Bool(true)];
                        " " (field.replace('_', " "))
                    }
                }
                @if let Some(e) = err("stop_disposition_ids") { p.field-error id="stop_disposition_ids-error" { (e) } }
                @for d in &choices.dispositions {
                    label.check {
                        input type="checkbox" name="stop_disposition_ids" value=(d.id) checked[stops.contains(&d.id.to_string())];
                        " stop on “" (d.label) "”"
                    }
                }
            }
            (text("starts_at", "Starts at", "ISO 8601 with offset, e.g. 2026-12-01T09:00:00Z; empty to start at launch"))
            (text("ends_at", "Ends at", "ISO 8601 with offset; empty for no end"))
            div.field {
                label for="calling_window" { "Calling window (JSON)" }
                textarea id="calling_window" name="calling_window" rows="6" aria-describedby="calling_window-hint" { (window) }
                span.hint id="calling_window-hint" { "Empty to use the workspace's window. "
                    code { r#"{"timezone": "Europe/Berlin", "days": ["mon","tue"], "start": "09:00", "end": "17:00"}"# } }
                @if let Some(e) = err("calling_window") { p.field-error id="calling_window-error" role="alert" { (e) } }
            }
            button type="submit" { "Save settings" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_what_changed_is_sent_and_typed_as_the_api_reads_it() {
        let current = json!({"name": "Spring", "description": "", "max_attempts": 3, "budget_cents": null,
            "stop_on_no_answer": false, "stop_on_voicemail": true, "stop_on_unclassified": false,
            "randomize_retry_time": false, "double_dial_enabled": false, "stop_disposition_ids": [],
            "calling_window": null, "agent_id": null});
        let body = changes(
            &pairs(&[
                ("name", "Spring"),
                ("description", ""),
                ("max_attempts", "5"),
                ("budget_cents", "ten"),
                ("has_flags", "1"),
                ("stop_on_voicemail", "true"),
                ("stop_on_no_answer", "true"),
                ("calling_window", ""),
                ("agent_id", ""),
            ]),
            &current,
        )
        .unwrap();
        assert_eq!(
            Value::Object(body),
            json!({"max_attempts": 5, "budget_cents": "ten", "stop_on_no_answer": true})
        );
        let e = changes(&pairs(&[("calling_window", "{nope")]), &current).unwrap_err();
        assert_eq!(error_field(&e), Some("calling_window"));
    }
}
