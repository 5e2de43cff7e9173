//! The vendors a call converses with, as the settings choose them: the chat model
//! (`--llm-*`), speech to text (`--stt-*`) and text to speech (`--tts`).

use std::sync::Arc;

use crate::config::{Config, Tts, VendorSettings};

/// The model vendors calls converse with, as configured (`--llm-*`, `--stt-*`), and the
/// outbound URL policy their tools obey. An agent converses when both vendors are set.
#[derive(Clone)]
pub struct Vendors {
    pub model: Option<std::sync::Arc<dyn switchboard_actors::vendors::ChatModel>>,
    pub transcriber: Option<std::sync::Arc<dyn switchboard_actors::vendors::Transcriber>>,
    pub egress: crate::edge::egress::Egress,
    /// What flows' integration_call nodes dispatch to.
    pub providers: std::sync::Arc<crate::runtime::integrations::Providers>,
    /// Where each call's latest turn is kept for the dashboard's live page.
    pub turns: std::sync::Arc<crate::runtime::live_turns::LiveTurns>,
}

/// The text-to-speech engine the settings ask for.
pub fn speech_engine(
    config: &Config,
) -> anyhow::Result<Arc<dyn switchboard_actors::agent::Speech>> {
    let engine: Arc<dyn switchboard_actors::agent::Speech> = match &config.tts {
        Tts::Auto => match crate::edge::speech::Espeak::find() {
            Some(espeak) => Arc::new(espeak),
            None => {
                tracing::info!("espeak-ng is not installed: prompts play as chimes");
                Arc::new(crate::edge::speech::Tones)
            }
        },
        Tts::Espeak => Arc::new(
            crate::edge::speech::Espeak::find()
                .ok_or_else(|| anyhow::anyhow!("--tts espeak: espeak-ng is not installed"))?,
        ),
        Tts::OpenAi {
            base_url,
            api_key,
            model,
        } => Arc::new(crate::edge::speech::OpenAiSpeech {
            base_url: base_url.clone(),
            api_key: api_key.clone(),
            model: model.clone(),
            client: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(30))
                .build()?,
        }),
        Tts::Tones => Arc::new(crate::edge::speech::Tones),
    };
    Ok(Arc::new(crate::edge::speech::Cached::new(engine)))
}

/// An endpoint for `settings`, when they are given.
fn vendor_endpoint(
    settings: &Option<VendorSettings>,
    timeouts: crate::edge::vendors::Timeouts,
) -> anyhow::Result<Option<crate::edge::vendors::Endpoint>> {
    Ok(match settings {
        Some(settings) => Some(crate::edge::vendors::Endpoint::new(
            settings.clone(),
            timeouts,
        )?),
        None => None,
    })
}

/// The chat model the settings name (`--llm-url`), if any.
pub fn chat_model(
    config: &Config,
) -> anyhow::Result<Option<Arc<dyn switchboard_actors::vendors::ChatModel>>> {
    let endpoint = vendor_endpoint(&config.llm, config.vendor_timeouts)?;
    Ok(endpoint.map(|endpoint| Arc::new(crate::edge::vendors::OpenAiChat { endpoint }) as _))
}

/// The speech-to-text engine the settings name (`--stt-url`), if any.
pub fn transcriber(
    config: &Config,
) -> anyhow::Result<Option<Arc<dyn switchboard_actors::vendors::Transcriber>>> {
    let endpoint = vendor_endpoint(&config.stt, config.vendor_timeouts)?;
    Ok(
        endpoint
            .map(|endpoint| Arc::new(crate::edge::vendors::OpenAiTranscriber { endpoint }) as _),
    )
}

/// An address as the log may show it: no user name, password, query or fragment.
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string().trim_end_matches('/').to_string()
        }
        Err(_) => "an address that does not parse".into(),
    }
}

/// What the start-up log says of each vendor: what is configured, or that none is and what
/// calls then do. `espeak` tells whether espeak-ng is installed.
pub fn described(config: &Config, espeak: bool) -> [(&'static str, String); 3] {
    let chat = match &config.llm {
        Some(v) => format!("{} at {}", v.model, shown(&v.base_url)),
        None => {
            "none (--llm-url): flows whose steps need no model run whole; at a step that needs \
             one the agent says its fallback line and hangs up"
                .into()
        }
    };
    let stt = match &config.stt {
        Some(v) => format!("{} at {}", v.model, shown(&v.base_url)),
        None => "none (--stt-url): what callers say is not understood; agents answer with the \
                 fallback line"
            .into(),
    };
    let tts = match &config.tts {
        Tts::OpenAi {
            base_url, model, ..
        } => format!("{model} at {}", shown(base_url)),
        Tts::Espeak => "espeak-ng".into(),
        Tts::Auto if espeak => "espeak-ng (the default; --tts openai for another)".into(),
        Tts::Auto => "none: espeak-ng is not installed, so agents speak in chimes".into(),
        Tts::Tones => "chimes (--tts tones)".into(),
    };
    [
        ("chat model", chat),
        ("speech to text", stt),
        ("text to speech", tts),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::vendors::VendorSettings;

    #[test]
    fn the_start_up_log_names_each_vendor_and_no_secret() {
        let mut config = Config::default();
        let none = described(&config, false);
        assert!(none[0].1.starts_with("none (--llm-url)"));
        assert!(none[1].1.starts_with("none (--stt-url)"));
        assert!(none[2].1.contains("chimes"));
        config.llm = Some(VendorSettings {
            base_url: "https://user:pw@llm.example/v1?key=abc".into(),
            api_key: Some("sk-secret".into()),
            model: "gpt-4o-mini".into(),
        });
        config.tts = Tts::Espeak;
        let some = described(&config, true);
        assert_eq!(some[0].1, "gpt-4o-mini at https://llm.example/v1");
        assert_eq!(some[2].1, "espeak-ng");
        let all = format!("{some:?}");
        assert!(!all.contains("sk-secret") && !all.contains("pw") && !all.contains("abc"));
    }
}
