//! `switchboard serve`: its flags, and the service's settings they make.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use switchboard_actors::sim::{OutcomeMix, SecondsRange, SimConfig};

use crate::config::{Carrier, Config, Tts, VendorSettings};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// HTTP listen address.
    #[arg(long, env = "SWITCHBOARD_HTTP", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// Where `GET /metrics` (Prometheus) is served, apart from the API; `none` for nowhere.
    #[arg(long, env = "SWITCHBOARD_METRICS_LISTEN", default_value = "127.0.0.1:9464", value_parser = listen_or_none)]
    pub metrics_listen: ListenOrNone,
    /// Directory for recordings and other files.
    #[arg(long, env = "SWITCHBOARD_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Requests per minute per API key.
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT", default_value_t = 60)]
    pub rate_limit: u32,
    /// Seconds a purchased number stays in pending_requirements.
    #[arg(
        long,
        env = "SWITCHBOARD_NUMBER_ACTIVATION_DELAY_SECS",
        default_value_t = 86_400
    )]
    pub number_activation_delay_secs: u64,
    /// Log format: text or json.
    #[arg(long, env = "SWITCHBOARD_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
    /// Where outbound calls go: `none` (calls fail as infra errors), `sim` (the simulated
    /// carrier: nobody is called; for demos, dry runs and benchmarks) or `sip` (SIP trunks:
    /// each number's carrier account's trunk, else `--outbound-trunk`).
    #[arg(long, env = "SWITCHBOARD_CARRIER", default_value = "none", value_parser = ["none", "sim", "sip"])]
    pub carrier: String,
    /// With `--carrier sip`: the default trunk, for numbers on no carrier account. JSON, or
    /// `@file` holding it.
    #[arg(long, env = "SWITCHBOARD_OUTBOUND_TRUNK", hide_env_values = true)]
    pub outbound_trunk: Option<String>,
    /// Simulated carrier: outcome weights, e.g. `answered=40,no_answer=30,busy=8,voicemail=15,failed=5,infra_error=2`.
    #[arg(long, env = "SWITCHBOARD_SIM_MIX")]
    pub sim_mix: Option<OutcomeMix>,
    /// Simulated carrier: ring seconds, `min-max`.
    #[arg(long, env = "SWITCHBOARD_SIM_RING_SECS", default_value = "3-25")]
    pub sim_ring_secs: SecondsRange,
    /// Simulated carrier: talk seconds of answered calls, `min-max`.
    #[arg(long, env = "SWITCHBOARD_SIM_TALK_SECS", default_value = "20-180")]
    pub sim_talk_secs: SecondsRange,
    /// Simulated carrier: seed of the outcome draws.
    #[arg(long, env = "SWITCHBOARD_SIM_SEED", default_value_t = 1)]
    pub sim_seed: u64,
    /// Simulated carrier: append one line per dial to this file.
    #[arg(long, env = "SWITCHBOARD_SIM_DIAL_LOG")]
    pub sim_dial_log: Option<PathBuf>,
    /// Seconds between evaluations of a campaign when nothing else wakes it.
    #[arg(
        long,
        env = "SWITCHBOARD_EVALUATION_INTERVAL_SECS",
        default_value_t = 60
    )]
    pub evaluation_interval_secs: u64,
    /// Seconds an answered call waits for a disposition before it counts as unclassified.
    #[arg(
        long,
        env = "SWITCHBOARD_DISPOSITION_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub disposition_timeout_secs: u64,
    /// Calls one workspace may have live at once.
    #[arg(long, env = "SWITCHBOARD_WORKSPACE_CONCURRENCY", default_value_t = 10)]
    pub workspace_concurrency: usize,
    /// Calls this node places at once over all workspaces.
    #[arg(long, env = "SWITCHBOARD_NODE_CAPACITY", default_value_t = 1000)]
    pub node_capacity: usize,
    /// This node's name among the nodes on one database (1-64 letters, digits, `.`, `_`, `-`);
    /// the default is the host name, the process id and six characters drawn at start.
    #[arg(long, env = "SWITCHBOARD_NODE_ID")]
    pub node_id: Option<String>,
    /// Where other machines reach this node's SIP and media (an address, or a name); the
    /// default is `--sip-host`.
    #[arg(long, env = "SWITCHBOARD_ADVERTISE")]
    pub advertise: Option<String>,
    /// The host in SIP endpoint URIs (`sip:<slug>@<host>`): the name or address SIP trunks
    /// reach this service at.
    #[arg(long, env = "SWITCHBOARD_SIP_HOST", default_value = "localhost")]
    pub sip_host: String,
    /// Run the SIP server (UDP and TCP; TLS too with --sip-tls-cert and --sip-tls-key).
    #[arg(long, env = "SWITCHBOARD_SIP")]
    pub sip: bool,
    /// SIP listen address (UDP and TCP).
    #[arg(long, env = "SWITCHBOARD_SIP_LISTEN", default_value = "0.0.0.0:5060")]
    pub sip_listen: SocketAddr,
    /// The address peers reach this node at, written into Contact and SDP (default: the
    /// listen address, or the first non-loopback address when listening on 0.0.0.0).
    #[arg(long, env = "SWITCHBOARD_SIP_PUBLIC_IP")]
    pub sip_public_ip: Option<std::net::IpAddr>,
    /// SIP over TLS listen address.
    #[arg(
        long,
        env = "SWITCHBOARD_SIP_TLS_LISTEN",
        default_value = "0.0.0.0:5061"
    )]
    pub sip_tls_listen: SocketAddr,
    /// PEM certificate chain for SIP over TLS.
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_CERT", requires = "sip_tls_key")]
    pub sip_tls_cert: Option<PathBuf>,
    /// PEM private key for SIP over TLS.
    #[arg(long, env = "SWITCHBOARD_SIP_TLS_KEY", requires = "sip_tls_cert")]
    pub sip_tls_key: Option<PathBuf>,
    /// UDP ports for call media, `low-high` (even ports are used).
    #[arg(long, env = "SWITCHBOARD_RTP_PORTS", default_value = "20000-39999")]
    pub rtp_ports: PortRange,
    /// Threads that carry the calls' audio (0: one per core).
    #[arg(long, env = "SWITCHBOARD_MEDIA_THREADS", default_value_t = 0)]
    pub media_threads: usize,
    /// INVITEs accepted per second from one source address; more get 503.
    #[arg(long, env = "SWITCHBOARD_SIP_INVITES_PER_SECOND", default_value_t = 20)]
    pub sip_invites_per_second: u32,
    /// Milliseconds an inbound call rings before the agent answers.
    #[arg(long, env = "SWITCHBOARD_SIP_RING_MS", default_value_t = 200)]
    pub sip_ring_ms: u64,
    /// Seconds an outbound SIP call rings before it is cancelled as `no_answer` (5-300), unless
    /// the call sets its own `ring_timeout_secs`.
    #[arg(long, env = "SWITCHBOARD_RING_TIMEOUT_SECS", default_value_t = 30)]
    pub ring_timeout_secs: u64,
    /// SIP timer T1 in milliseconds (retransmissions).
    #[arg(long, env = "SWITCHBOARD_SIP_T1_MS", default_value_t = 500)]
    pub sip_t1_ms: u64,
    /// The SIP transaction expiry in milliseconds: the longest wait for a first answer, for an
    /// ACK or for late retransmissions (RFC 3261's 64 x T1, 32 s); default 32 x T1 (16 s).
    #[arg(long, env = "SWITCHBOARD_SIP_TRANSACTION_EXPIRE_MS")]
    pub sip_transaction_expire_ms: Option<u64>,
    /// Of `--node-capacity`, the calls inbound INVITEs may not take: room kept for outbound
    /// calls (default a tenth).
    #[arg(long, env = "SWITCHBOARD_SIP_OUTBOUND_RESERVE")]
    pub sip_outbound_reserve: Option<usize>,
    /// Inbound INVITEs being set up at once; more are refused with 503.
    #[arg(long, env = "SWITCHBOARD_SIP_MAX_SETUPS", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub sip_max_setups: u64,
    /// The runtime's lateness (milliseconds) above which inbound INVITEs are refused with 503.
    #[arg(long, env = "SWITCHBOARD_SIP_MAX_LAG_MS", default_value_t = 40,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub sip_max_lag_ms: u64,
    /// `Retry-After` of a refused INVITE, seconds.
    #[arg(long, env = "SWITCHBOARD_SIP_RETRY_AFTER_SECS", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub sip_retry_after_secs: u32,
    /// `local`: start the local speech server (`speech/`, installed by `speech/install.sh`) and
    /// use it for speech to text and, unless `--tts` says otherwise, text to speech. `none`: only
    /// the vendors the other flags name.
    #[arg(long, env = "SWITCHBOARD_SPEECH", default_value = "none", value_parser = ["none", "local"])]
    pub speech: String,
    /// With `--speech local`: where it listens (loopback).
    #[arg(
        long,
        env = "SWITCHBOARD_SPEECH_LISTEN",
        default_value = "127.0.0.1:8090"
    )]
    pub speech_listen: SocketAddr,
    /// With `--speech local`: the directory holding `speech/` and `target/speech/` (the
    /// repository).
    #[arg(long, env = "SWITCHBOARD_SPEECH_ROOT", default_value = ".")]
    pub speech_root: PathBuf,
    /// Text to speech: `auto` (espeak-ng if installed, else the chime fallback), `espeak`,
    /// `openai` (an OpenAI-compatible speech endpoint) or `tones` (the chime fallback).
    #[arg(long, env = "SWITCHBOARD_TTS", default_value = "auto", value_parser = ["auto", "espeak", "openai", "tones"])]
    pub tts: String,
    /// OpenAI-compatible speech: the API base URL.
    #[arg(
        long,
        env = "SWITCHBOARD_TTS_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub tts_url: String,
    /// OpenAI-compatible speech: the API key.
    #[arg(long, env = "SWITCHBOARD_TTS_API_KEY", hide_env_values = true)]
    pub tts_api_key: Option<String>,
    /// OpenAI-compatible speech: the model.
    #[arg(long, env = "SWITCHBOARD_TTS_MODEL", default_value = "gpt-4o-mini-tts")]
    pub tts_model: String,
    /// The chat model agents converse with: an OpenAI-compatible API base URL (OpenAI, Ollama,
    /// vLLM, llama.cpp's server). Unset: no chat model.
    #[arg(long, env = "SWITCHBOARD_LLM_URL")]
    pub llm_url: Option<String>,
    /// The chat model's API key.
    #[arg(long, env = "SWITCHBOARD_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<String>,
    /// The chat model's name.
    #[arg(long, env = "SWITCHBOARD_LLM_MODEL", default_value = "gpt-4o-mini")]
    pub llm_model: String,
    /// Speech to text of what callers say: an OpenAI-compatible API base URL (OpenAI, a
    /// faster-whisper server). Unset: no speech to text.
    #[arg(long, env = "SWITCHBOARD_STT_URL")]
    pub stt_url: Option<String>,
    /// The speech-to-text API key.
    #[arg(long, env = "SWITCHBOARD_STT_API_KEY", hide_env_values = true)]
    pub stt_api_key: Option<String>,
    /// The speech-to-text model's name.
    #[arg(long, env = "SWITCHBOARD_STT_MODEL", default_value = "whisper-1")]
    pub stt_model: String,
    /// Model vendors (chat and speech to text): longest wait for a connection, milliseconds.
    #[arg(long, env = "SWITCHBOARD_VENDOR_CONNECT_TIMEOUT_MS", default_value_t = 3000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub vendor_connect_timeout_ms: u64,
    /// Model vendors: longest wait from the request to the answer's start (a chat stream's
    /// first event, a transcription's status), milliseconds.
    #[arg(long, env = "SWITCHBOARD_VENDOR_FIRST_BYTE_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub vendor_first_byte_timeout_ms: u64,
    /// Model vendors: longest wait between two events of a chat stream, milliseconds.
    #[arg(long, env = "SWITCHBOARD_VENDOR_IDLE_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub vendor_idle_timeout_ms: u64,
    /// Model vendors: longest whole exchange, seconds.
    #[arg(long, env = "SWITCHBOARD_VENDOR_TOTAL_TIMEOUT_SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub vendor_total_timeout_secs: u64,
    /// The base URL clients reach the HTTP API at, for recording links (default
    /// `http://<--http>`).
    #[arg(long, env = "SWITCHBOARD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Private address ranges webhooks may reach (comma-separated CIDRs); none by default, so
    /// webhooks reach public addresses only.
    #[arg(long, env = "SWITCHBOARD_EGRESS_ALLOW", value_delimiter = ',')]
    pub egress_allow: Vec<switchboard_sip::acl::IpNet>,
    /// Google's OAuth 2.0 token endpoint, for flows' integrations (a stand-in needs
    /// `--egress-allow` for its address).
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_TOKEN_URL",
        default_value = "https://oauth2.googleapis.com/token"
    )]
    pub google_token_url: String,
    /// Google's OAuth 2.0 consent page, where the dashboard sends an operator connecting an
    /// account.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_AUTH_URL",
        default_value = "https://accounts.google.com/o/oauth2/v2/auth"
    )]
    pub google_auth_url: String,
    /// Google's OpenID Connect userinfo endpoint (which account was connected).
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_USERINFO_URL",
        default_value = "https://openidconnect.googleapis.com/v1/userinfo"
    )]
    pub google_userinfo_url: String,
    /// The service's Google OAuth client id; with `--google-client-secret`, the dashboard
    /// connects Google accounts itself (its redirect URI is
    /// `<public URL>/app/settings/integrations/callback`).
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_CLIENT_ID",
        requires = "google_client_secret"
    )]
    pub google_client_id: Option<String>,
    /// The service's Google OAuth client secret (better given in the environment).
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_CLIENT_SECRET",
        hide_env_values = true,
        requires = "google_client_id"
    )]
    pub google_client_secret: Option<String>,
    /// The Google Calendar API v3 base.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_CALENDAR_URL",
        default_value = "https://www.googleapis.com/calendar/v3"
    )]
    pub google_calendar_url: String,
    /// The Gmail API v1 base.
    #[arg(
        long,
        env = "SWITCHBOARD_GOOGLE_GMAIL_URL",
        default_value = "https://gmail.googleapis.com/gmail/v1"
    )]
    pub google_gmail_url: String,
    /// The emergency switch of carrier accounts: `false` makes every carrier-account route
    /// answer 403 CARRIER_ACCOUNTS_NOT_ENABLED.
    #[arg(long, env = "SWITCHBOARD_CARRIER_ACCOUNTS_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub carrier_accounts_enabled: bool,
    /// Days affiliate earnings are held before they become payable.
    #[arg(long, env = "SWITCHBOARD_AFFILIATE_HOLD_DAYS", default_value_t = 30)]
    pub affiliate_hold_days: u32,
}

/// A `low-high` range of UDP ports.
#[derive(Debug, Clone, Copy)]
pub struct PortRange(pub u16, pub u16);

impl std::str::FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| format!("expected low-high, got {s:?}"))?;
        let low: u16 = a.trim().parse().map_err(|_| format!("bad port {a:?}"))?;
        let high: u16 = b.trim().parse().map_err(|_| format!("bad port {b:?}"))?;
        if low == 0 || low > high {
            return Err(format!("the range {s:?} is empty"));
        }
        Ok(PortRange(low, high))
    }
}

/// A listen address, or `none` for no listener.
#[derive(Debug, Clone, Copy)]
pub struct ListenOrNone(pub Option<SocketAddr>);

fn listen_or_none(value: &str) -> Result<ListenOrNone, String> {
    if value.eq_ignore_ascii_case("none") {
        return Ok(ListenOrNone(None));
    }
    value
        .parse()
        .map(|addr| ListenOrNone(Some(addr)))
        .map_err(|e| format!("an address such as 127.0.0.1:9464, or none: {e}"))
}

/// A model endpoint's settings, when its URL is given (and not empty).
fn vendor(url: &Option<String>, api_key: &Option<String>, model: &str) -> Option<VendorSettings> {
    let url = url.as_deref().map(str::trim).filter(|u| !u.is_empty())?;
    Some(VendorSettings {
        base_url: url.to_string(),
        api_key: api_key.clone().filter(|k| !k.is_empty()),
        model: model.trim().to_string(),
    })
}

impl ServeArgs {
    /// The SIP settings, reading the TLS files if configured.
    fn sip_settings(&self) -> anyhow::Result<Option<switchboard_sip::server::SipSettings>> {
        if !self.sip {
            return Ok(None);
        }
        switchboard_sip::media::set_threads(self.media_threads);
        let tls = match (&self.sip_tls_cert, &self.sip_tls_key) {
            (Some(cert), Some(key)) => Some(switchboard_sip::server::TlsSettings {
                cert_pem: std::fs::read(cert)
                    .with_context(|| format!("reading {}", cert.display()))?,
                key_pem: std::fs::read(key)
                    .with_context(|| format!("reading {}", key.display()))?,
            }),
            _ => None,
        };
        Ok(Some(switchboard_sip::server::SipSettings {
            tls,
            public_ip: self.sip_public_ip,
            rtp_ip: None,
            rtp_ports: (self.rtp_ports.0, self.rtp_ports.1),
            invites_per_second: self.sip_invites_per_second,
            ring: Duration::from_millis(self.sip_ring_ms),
            t1: Duration::from_millis(self.sip_t1_ms.max(10)),
            transaction_expiry: self
                .sip_transaction_expire_ms
                .map(|ms| Duration::from_millis(ms.max(100))),
            admission: switchboard_sip::admission::AdmissionSettings {
                max_calls: self.node_capacity.max(1),
                outbound_reserve: self
                    .sip_outbound_reserve
                    .unwrap_or(self.node_capacity / 10)
                    .min(self.node_capacity.saturating_sub(1)),
                max_setups: self.sip_max_setups as usize,
                max_lag: Duration::from_millis(self.sip_max_lag_ms),
                retry_after_secs: self.sip_retry_after_secs,
            },
            ..Default::default()
        }))
    }

    /// Binds the SIP sockets on the flags' addresses when `--sip` is given.
    pub async fn sip_sockets(&self) -> anyhow::Result<Option<switchboard_sip::server::SipSockets>> {
        if !self.sip {
            return Ok(None);
        }
        let tls = (self.sip_tls_cert.is_some() && self.sip_tls_key.is_some())
            .then_some(self.sip_tls_listen);
        let sockets = switchboard_sip::server::SipSockets::bind(self.sip_listen, tls)
            .await
            .with_context(|| format!("binding SIP on {}", self.sip_listen))?;
        Ok(Some(sockets))
    }

    /// The default trunk, read and checked; only `--carrier sip` takes one.
    fn outbound_trunk(&self) -> anyhow::Result<Option<switchboard_sip::trunk::Trunk>> {
        let Some(value) = &self.outbound_trunk else {
            return Ok(None);
        };
        if self.carrier != "sip" {
            anyhow::bail!(
                "--outbound-trunk needs --carrier sip (it is {})",
                self.carrier
            );
        }
        crate::domain::trunks::read_trunk(value)
            .map(Some)
            .context("--outbound-trunk")
    }

    /// Starts the local speech server when `--speech local` asks for it, and points speech to
    /// text (and text to speech, left at `auto`) at it; the server runs while the answer lives.
    pub async fn local_speech(
        &self,
        config: &mut Config,
    ) -> anyhow::Result<Option<crate::edge::local_speech::LocalSpeech>> {
        use crate::edge::local_speech::{LocalSpeech, SpeechInstall};
        if self.speech != "local" {
            return Ok(None);
        }
        if !self.speech_listen.ip().is_loopback() {
            anyhow::bail!("--speech-listen must be a loopback address");
        }
        let speech =
            LocalSpeech::start(&SpeechInstall::under(&self.speech_root), self.speech_listen)
                .await?;
        if config.stt.is_none() {
            config.stt = Some(VendorSettings {
                base_url: speech.base_url.clone(),
                api_key: None,
                model: "whisper-1".into(),
            });
        }
        if matches!(config.tts, Tts::Auto) {
            config.tts = Tts::OpenAi {
                base_url: speech.base_url.clone(),
                api_key: None,
                model: "tts-1".into(),
            };
        }
        Ok(Some(speech))
    }

    pub fn config(&self, database_url: String) -> anyhow::Result<Config> {
        Ok(Config {
            http: self.http,
            metrics_listen: self.metrics_listen.0,
            database_url,
            data_dir: self.data_dir.clone(),
            rate_limit_per_minute: self.rate_limit,
            number_activation_delay: Duration::from_secs(self.number_activation_delay_secs),
            carrier: match self.carrier.as_str() {
                "sim" => Carrier::Sim(SimConfig {
                    mix: self.sim_mix.clone().unwrap_or_default(),
                    ring_secs: self.sim_ring_secs,
                    talk_secs: self.sim_talk_secs,
                    seed: self.sim_seed,
                    dial_log: self.sim_dial_log.clone(),
                }),
                "sip" => Carrier::Sip,
                _ => Carrier::None,
            },
            outbound_trunk: self.outbound_trunk()?,
            ring_timeout: Duration::from_secs(self.ring_timeout_secs.clamp(5, 300)),
            evaluation_interval: Duration::from_secs(self.evaluation_interval_secs.max(1)),
            disposition_timeout: Duration::from_secs(self.disposition_timeout_secs),
            workspace_max_concurrent_calls: self.workspace_concurrency.max(1),
            node_capacity: self.node_capacity.max(1),
            node: crate::store::NodeIdentity {
                id: match &self.node_id {
                    Some(id) => crate::config::node_id(id)?,
                    None => crate::config::default_node_id(),
                },
                advertise: self
                    .advertise
                    .clone()
                    .unwrap_or_else(|| self.sip_host.clone()),
            },
            sip_host: self.sip_host.clone(),
            sip: self.sip_settings()?,
            tts: match self.tts.as_str() {
                "espeak" => Tts::Espeak,
                "openai" => Tts::OpenAi {
                    base_url: self.tts_url.clone(),
                    api_key: self.tts_api_key.clone(),
                    model: self.tts_model.clone(),
                },
                "tones" => Tts::Tones,
                _ => Tts::Auto,
            },
            llm: vendor(&self.llm_url, &self.llm_api_key, &self.llm_model),
            stt: vendor(&self.stt_url, &self.stt_api_key, &self.stt_model),
            vendor_timeouts: crate::edge::vendors::Timeouts {
                connect: Duration::from_millis(self.vendor_connect_timeout_ms),
                first_byte: Duration::from_millis(self.vendor_first_byte_timeout_ms),
                idle: Duration::from_millis(self.vendor_idle_timeout_ms),
                total: Duration::from_secs(self.vendor_total_timeout_secs),
            },
            public_url: self.public_url.clone(),
            egress_allow: self.egress_allow.clone(),
            google: crate::edge::google::GoogleUrls {
                authorize: self.google_auth_url.clone(),
                token: self.google_token_url.clone(),
                userinfo: self.google_userinfo_url.clone(),
                calendar: self.google_calendar_url.clone(),
                gmail: self.google_gmail_url.clone(),
            },
            google_client: self
                .google_client_id
                .clone()
                .zip(self.google_client_secret.clone())
                .map(
                    |(client_id, client_secret)| crate::edge::google::OAuthClient {
                        client_id,
                        client_secret,
                    },
                ),
            carrier_accounts_enabled: self.carrier_accounts_enabled,
            affiliate_hold_days: i64::from(self.affiliate_hold_days),
            ..Config::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn serve_config(args: &[&str]) -> Config {
        let cli = Cli::try_parse_from(["switchboard", "serve"].iter().chain(args)).unwrap();
        let Command::Serve(serve) = cli.command else {
            unreachable!("serve parses as serve")
        };
        serve.config("sqlite::memory:".into()).unwrap()
    }

    #[test]
    fn model_endpoints_are_set_by_their_url() {
        let config = serve_config(&[]);
        assert!(config.llm.is_none() && config.stt.is_none());

        let config = serve_config(&[
            "--llm-url",
            "http://127.0.0.1:11434/v1",
            "--llm-model",
            "llama3.2",
            "--stt-url",
            "https://api.openai.com/v1",
            "--stt-api-key",
            "sk-stt-secret",
        ]);
        let llm = config.llm.as_ref().unwrap();
        assert_eq!(
            (llm.base_url.as_str(), llm.model.as_str(), &llm.api_key),
            ("http://127.0.0.1:11434/v1", "llama3.2", &None)
        );
        let stt = config.stt.as_ref().unwrap();
        assert_eq!(stt.model, "whisper-1");
        assert_eq!(stt.api_key.as_deref(), Some("sk-stt-secret"));
        assert!(config.check().is_ok());
        assert!(!format!("{config:?}").contains("sk-stt-secret"));
        assert!(
            crate::runtime::vendors::chat_model(&config)
                .unwrap()
                .is_some()
        );
        assert!(
            crate::runtime::vendors::transcriber(&config)
                .unwrap()
                .is_some()
        );
        assert!(
            crate::runtime::vendors::chat_model(&Config::default())
                .unwrap()
                .is_none()
        );

        let bad = serve_config(&["--llm-url", "ftp://models.example"]);
        assert!(bad.check().unwrap_err().to_string().contains("--llm-url"));
        let bad = serve_config(&["--stt-url", "http://127.0.0.1:8000/v1", "--stt-model", " "]);
        assert!(bad.check().unwrap_err().to_string().contains("--stt-model"));
    }
}
