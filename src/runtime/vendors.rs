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
