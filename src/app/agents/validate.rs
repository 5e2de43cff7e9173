//! The rules of an agent: every field's bounds and the webhook URL through the outbound policy.
//! Checked on the agent as it will be saved (the sent fields over the stored ones); a sent
//! flow's own checks are its reading's ([`switchboard_actors::flow::read`]).

use std::collections::HashSet;

use switchboard_actors::events::EventKind;
use switchboard_actors::flow::read::length_rule;

use crate::app::agents::rules::*;
use crate::app::error::AppError;
use crate::edge::webhooks;
use crate::store::{Agent, AgentType, AnsweringMachineDetection};

pub fn invalid(field: &str, rule: &str) -> AppError {
    AppError::invalid_field(field, rule.to_string())
}

pub fn chars(field: &str, value: &str, Chars(min, max): Chars) -> Result<(), AppError> {
    match length_rule(value.chars().count(), (min, max)) {
        Some(rule) => Err(invalid(field, &rule)),
        None => Ok(()),
    }
}

pub fn number(field: &str, value: f64, Number(min, max): Number) -> Result<(), AppError> {
    if !(min..=max).contains(&value) {
        return Err(invalid(
            field,
            &format!("must be a number from {min} to {max}"),
        ));
    }
    Ok(())
}

pub fn integer(field: &str, value: i64, Integer(min, max): Integer) -> Result<(), AppError> {
    if !(min..=max).contains(&value) {
        return Err(invalid(
            field,
            &format!("must be an integer from {min} to {max}"),
        ));
    }
    Ok(())
}

/// A webhook URL: at most 2048 characters and allowed by the outbound URL policy (its form and
/// any literal address now; names are resolved when it is called).
fn check_url(field: &str, url: &str, egress: &crate::edge::egress::Egress) -> Result<(), AppError> {
    if url.chars().count() > WEBHOOK_URL_MAX {
        return Err(invalid(
            field,
            &format!("must be at most {WEBHOOK_URL_MAX} characters"),
        ));
    }
    egress
        .check_form(url)
        .map(|_| ())
        .map_err(|e| invalid(field, &e.to_string()))
}

/// Each answering-machine detection parameter set is within its bounds ([`AMD_BOUNDS`]).
pub fn check_amd(amd: &AnsweringMachineDetection) -> Result<(), AppError> {
    let AnsweringMachineDetection {
        enabled: _,
        greet_early: _,
        initial_silence_ms,
        greeting_ms,
        after_greeting_silence_ms,
        total_analysis_time_ms,
        min_word_length_ms,
        between_words_silence_ms,
        maximum_number_of_words,
        maximum_word_length_ms,
        silence_threshold,
    } = *amd;
    let values = [
        initial_silence_ms,
        greeting_ms,
        after_greeting_silence_ms,
        total_analysis_time_ms,
        min_word_length_ms,
        between_words_silence_ms,
        maximum_number_of_words,
        maximum_word_length_ms,
        silence_threshold,
    ];
    for ((key, Integer(min, max)), value) in AMD_BOUNDS.iter().zip(values) {
        if let Some(value) = value
            && !(*min..=*max).contains(&i64::from(value))
        {
            return Err(invalid(
                &format!("answering_machine_detection.{key}"),
                &format!("must be an integer from {min} to {max}, or null for the default"),
            ));
        }
    }
    Ok(())
}

/// Every bound of the Agent object.
pub fn validate(agent: &Agent, egress: &crate::edge::egress::Egress) -> Result<(), AppError> {
    chars("name", &agent.name, NAME)?;
    chars("system_prompt", &agent.system_prompt, SYSTEM_PROMPT)?;
    chars("description", &agent.description, DESCRIPTION)?;
    chars("voice", &agent.voice, VOICE)?;
    chars(
        "background_sound",
        &agent.background_sound,
        BACKGROUND_SOUND,
    )?;
    number(
        "background_sound_volume",
        agent.background_sound_volume,
        BACKGROUND_SOUND_VOLUME,
    )?;
    chars("language", &agent.language, LANGUAGE)?;
    if !agent
        .language
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(invalid(
            "language",
            "must be a BCP 47 language tag such as en-US",
        ));
    }
    number("temperature", agent.temperature, TEMPERATURE)?;
    chars(
        "greeting_message",
        &agent.greeting_message,
        GREETING_MESSAGE,
    )?;
    number("vad_stop_secs", agent.vad_stop_secs, VAD_SECS)?;
    number("vad_start_secs", agent.vad_start_secs, VAD_SECS)?;
    number("vad_confidence", agent.vad_confidence, VAD_CONFIDENCE)?;
    integer(
        "silence_timeout_secs",
        agent.silence_timeout_secs,
        TIMEOUT_SECS,
    )?;
    integer(
        "max_continuous_speech_secs",
        agent.max_continuous_speech_secs,
        TIMEOUT_SECS,
    )?;
    let Integer(min, max) = MAX_CALL_DURATION_SECS;
    if let Some(secs) = agent.max_call_duration_secs
        && !(min..=max).contains(&secs)
    {
        return Err(invalid(
            "max_call_duration_secs",
            &format!("must be an integer from {min} to {max}, or null"),
        ));
    }
    if let Some(url) = &agent.webhook_url {
        check_url("webhook_url", url, egress)?;
    }
    if agent.webhook_events.len() > WEBHOOK_EVENTS_MAX {
        return Err(invalid(
            "webhook_events",
            &format!("must have at most {WEBHOOK_EVENTS_MAX} event kinds"),
        ));
    }
    for (i, event) in agent.webhook_events.iter().enumerate() {
        if EventKind::parse(event).is_none() {
            let kinds: Vec<&str> = EventKind::ALL.map(EventKind::as_str).to_vec();
            return Err(invalid(
                &format!("webhook_events[{i}]"),
                &format!("`{event}` is not an event kind; use {}", kinds.join(", ")),
            ));
        }
    }
    if agent.webhook_headers.len() > WEBHOOK_HEADERS_MAX {
        return Err(invalid(
            "webhook_headers",
            &format!("must have at most {WEBHOOK_HEADERS_MAX} headers"),
        ));
    }
    for (name, value) in &agent.webhook_headers {
        let token = !name.is_empty()
            && name.len() <= HEADER_NAME_MAX
            && name.bytes().all(|b| {
                b.is_ascii_alphanumeric() || webhooks::HEADER_NAME_SYMBOLS.as_bytes().contains(&b)
            });
        if !token {
            return Err(invalid(
                "webhook_headers",
                &format!("`{name}` is not a valid header name"),
            ));
        }
        if value.chars().count() > HEADER_VALUE_MAX || value.chars().any(|c| c == '\r' || c == '\n')
        {
            return Err(invalid(
                "webhook_headers",
                &format!(
                    "value of `{name}` must be one line of at most {HEADER_VALUE_MAX} characters"
                ),
            ));
        }
    }
    if agent.extraction_parameters.len() > PARAMETERS_MAX {
        return Err(invalid(
            "extraction_parameters",
            &format!("must have at most {PARAMETERS_MAX} parameters"),
        ));
    }
    let mut names = HashSet::new();
    for (i, param) in agent.extraction_parameters.iter().enumerate() {
        chars(
            &format!("extraction_parameters[{i}].name"),
            &param.name,
            PARAMETER_NAME,
        )?;
        chars(
            &format!("extraction_parameters[{i}].description"),
            &param.description,
            PARAMETER_DESCRIPTION,
        )?;
        if !names.insert(param.name.as_str()) {
            return Err(invalid(
                &format!("extraction_parameters[{i}].name"),
                &format!("`{}` is used more than once", param.name),
            ));
        }
    }
    check_amd(&agent.answering_machine_detection)?;
    if let Some(message) = &agent.voicemail_message {
        chars("voicemail_message", message, VOICEMAIL_MESSAGE)?;
    }
    if agent.agent_type == AgentType::Flow
        && agent
            .flow_config
            .as_ref()
            .is_none_or(|f| f.nodes.is_empty())
    {
        return Err(invalid(
            "flow_config",
            "a flow agent needs a flow_config with at least one node",
        ));
    }
    Ok(())
}
