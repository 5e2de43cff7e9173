//! Service settings. Every flag of `switchboard serve` has a `SWITCHBOARD_*` environment
//! equivalent; see the README's table.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use switchboard_actors::money::Cents;
use switchboard_actors::sim::SimConfig;

pub use crate::edge::vendors::VendorSettings;

/// How long one request to an integration's provider may take, by default.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Which carrier places outbound calls.
#[derive(Debug, Clone, Default)]
pub enum Carrier {
    /// No carrier: every call ends at once as `infra_error` (`no_carrier`), so a campaign
    /// launched without one pauses as `paused_infra` instead of pretending to call.
    #[default]
    None,
    /// The simulated carrier (demos, dry runs, benchmarks): nobody is called.
    Sim(SimConfig),
    /// SIP trunks: a number's carrier account's trunk, else the operator's default trunk
    /// (`Config::outbound_trunk`).
    Sip,
}

/// A fault injected into outbound calls (resilience tests only).
#[derive(Clone)]
pub struct CallFaultHook(pub switchboard_actors::sip_dialer::CallFault);

impl std::fmt::Debug for CallFaultHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallFaultHook")
    }
}

/// A fault injected into inbound calls (resilience tests only).
#[derive(Clone)]
pub struct InboundFaultHook(pub switchboard_actors::inbound::InboundFault);

impl std::fmt::Debug for InboundFaultHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InboundFaultHook")
    }
}

/// A function that wraps a dialer in another.
pub type WrapDialer = std::sync::Arc<
    dyn Fn(
            std::sync::Arc<dyn switchboard_actors::ports::Dialer>,
        ) -> std::sync::Arc<dyn switchboard_actors::ports::Dialer>
        + Send
        + Sync,
>;

/// Wraps the dialer the carrier setting selects (tests only: e.g. a dialer that scripts what
/// answered calls said).
#[derive(Clone)]
pub struct DialerHook(pub WrapDialer);

impl std::fmt::Debug for DialerHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DialerHook")
    }
}

/// Which text-to-speech engine speaks agents' prompts.
#[derive(Debug, Clone, Default)]
pub enum Tts {
    /// `espeak-ng` when it is installed, else the chime fallback.
    #[default]
    Auto,
    Espeak,
    /// An OpenAI-compatible `POST {base_url}/audio/speech` endpoint.
    OpenAi {
        base_url: String,
        api_key: Option<String>,
        model: String,
    },
    /// The fallback: a chime as long as the text, no words.
    Tones,
}

/// Settings of a running service.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the HTTP control plane listens.
    pub http: SocketAddr,
    /// Where `GET /metrics` is served (never on the API's port); none for nowhere.
    pub metrics_listen: Option<SocketAddr>,
    /// The store, e.g. `sqlite://switchboard.db`.
    pub database_url: String,
    /// Recordings and other files.
    pub data_dir: PathBuf,
    /// Requests per minute per API key (and per source address without a valid key).
    pub rate_limit_per_minute: u32,
    /// How long a purchased number waits in `pending_requirements` before the activation job
    /// makes it active (the regulatory review).
    pub number_activation_delay: Duration,
    /// How often background jobs look for work.
    pub job_interval: Duration,
    /// Largest JSON body accepted.
    pub max_json_body_bytes: usize,
    /// Largest CSV body accepted for contact enrollment.
    pub max_csv_body_bytes: usize,
    /// Most data rows of one CSV enrollment.
    pub max_csv_rows: usize,
    /// Price of one outbound minute, in cents (per-second billing).
    pub outbound_cents_per_minute: Cents,
    /// Price of one inbound minute, in cents.
    pub inbound_cents_per_minute: Cents,
    /// Monthly price of a purchased number, in cents.
    pub number_monthly_cents: i64,
    /// Where outbound calls go.
    pub carrier: Carrier,
    /// The operator's default trunk (`--outbound-trunk`, with `--carrier sip` only): numbers on
    /// no carrier account call through it.
    pub outbound_trunk: Option<switchboard_sip::trunk::Trunk>,
    /// How long an outbound SIP call may ring before it is cancelled as `no_answer`, unless
    /// the call sets its own (`ring_timeout_secs`).
    pub ring_timeout: Duration,
    /// Resilience tests: calls this picks fail inside (panic) once answered.
    pub call_fault: Option<CallFaultHook>,
    /// Resilience tests: inbound calls this picks fail inside (panic) once answered.
    pub inbound_fault: Option<InboundFaultHook>,
    /// Tests: wraps the dialer `carrier` selects.
    pub dialer_hook: Option<DialerHook>,
    /// How often each campaign is evaluated when nothing else wakes it.
    pub evaluation_interval: Duration,
    /// How long an answered call waits for a disposition before it is unclassified.
    pub disposition_timeout: Duration,
    /// Calls one workspace may have live at once.
    pub workspace_max_concurrent_calls: usize,
    /// Calls this node places at once.
    pub node_capacity: usize,
    /// This node among the nodes on one database (`--node-id`, `--advertise`).
    pub node: crate::store::NodeIdentity,
    /// The host in SIP endpoint URIs.
    pub sip_host: String,
    /// SIP endpoints one workspace may create per day.
    pub sip_endpoint_daily_limit: i64,
    /// The SIP server, when `serve --sip` runs one.
    pub sip: Option<switchboard_sip::server::SipSettings>,
    /// Text to speech for agents' prompts.
    pub tts: Tts,
    /// The chat model agents converse with; none without `--llm-url`.
    pub llm: Option<VendorSettings>,
    /// Speech to text of what callers say; none without `--stt-url`.
    pub stt: Option<VendorSettings>,
    /// How long a model vendor's request may take (`--vendor-*-timeout-*`).
    pub vendor_timeouts: crate::edge::vendors::Timeouts,
    /// The address clients reach the HTTP API at, for links the service hands out (recording
    /// URLs); by default `http://<http listen address>`.
    pub public_url: Option<String>,
    /// Longest inbound call when the agent sets no `max_call_duration_secs`.
    pub inbound_max_call_secs: u64,
    /// SIP endpoint actors: how often `last_call_at` is written, and when an actor without
    /// calls stops.
    pub endpoints: switchboard_actors::endpoint::EndpointSettings,
    /// Private ranges webhooks may reach anyway (none by default: only public addresses).
    pub egress_allow: Vec<switchboard_sip::acl::IpNet>,
    /// Where flows' Google integrations are reached (Google's own APIs by default).
    pub google: crate::edge::google::GoogleUrls,
    /// The service's own Google OAuth client, through which the dashboard connects accounts
    /// (none: accounts are connected with `switchboard integration connect`).
    pub google_client: Option<crate::edge::google::OAuthClient>,
    /// How long one request to an integration's provider may take (10 s).
    pub integration_timeout: Duration,
    /// The key that seals integrations' OAuth grants in the store (created on first use).
    pub secrets_key_file: PathBuf,
    /// The emergency switch of carrier accounts (on by default).
    pub carrier_accounts_enabled: bool,
    /// Affiliate earnings on revenue younger than this are not yet payable.
    pub affiliate_hold_days: i64,
    /// Agent webhooks: the wait before the first retry of a failed delivery; each next wait
    /// doubles (10 s).
    pub webhook_retry_base: Duration,
    /// Agent webhooks: the longest wait between two attempts (1 h).
    pub webhook_retry_cap: Duration,
    /// Agent webhooks: how long a delivery is retried before it fails for good (24 h).
    pub webhook_retry_window: Duration,
    /// Agent webhooks: one attempt's limit, the answer included (10 s).
    pub webhook_timeout: Duration,
    /// Agent webhooks: deliveries under way at once, over every call (16).
    pub webhook_concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            database_url: "sqlite://switchboard.db".into(),
            data_dir: PathBuf::from("data"),
            rate_limit_per_minute: 60,
            number_activation_delay: Duration::from_secs(24 * 3600),
            job_interval: Duration::from_secs(5),
            max_json_body_bytes: 1 << 20,
            max_csv_body_bytes: 256 << 20,
            max_csv_rows: 2_000_000,
            outbound_cents_per_minute: Cents::new(10),
            inbound_cents_per_minute: Cents::new(5),
            number_monthly_cents: 500,
            carrier: Carrier::None,
            outbound_trunk: None,
            ring_timeout: switchboard_actors::sip_dialer::DEFAULT_RING_TIMEOUT,
            call_fault: None,
            inbound_fault: None,
            dialer_hook: None,
            evaluation_interval: Duration::from_secs(60),
            disposition_timeout: Duration::from_secs(300),
            workspace_max_concurrent_calls: 10,
            node_capacity: 1000,
            node: crate::store::NodeIdentity {
                id: default_node_id(),
                advertise: "localhost".into(),
            },
            sip_host: "localhost".into(),
            sip_endpoint_daily_limit: 20,
            sip: None,
            tts: Tts::Auto,
            llm: None,
            stt: None,
            vendor_timeouts: crate::edge::vendors::Timeouts::default(),
            public_url: None,
            inbound_max_call_secs: 3600,
            endpoints: Default::default(),
            egress_allow: Vec::new(),
            google: crate::edge::google::GoogleUrls::default(),
            google_client: None,
            integration_timeout: PROVIDER_TIMEOUT,
            secrets_key_file: PathBuf::from("switchboard.key"),
            carrier_accounts_enabled: true,
            affiliate_hold_days: 30,
            webhook_retry_base: Duration::from_secs(10),
            webhook_retry_cap: Duration::from_secs(3600),
            webhook_retry_window: Duration::from_secs(24 * 3600),
            webhook_timeout: Duration::from_secs(10),
            webhook_concurrency: 16,
        }
    }
}

impl Config {
    /// Refuses settings that do not hold together, before anything starts.
    pub fn check(&self) -> anyhow::Result<()> {
        for (flag, url) in [
            ("google-auth-url", &self.google.authorize),
            ("google-token-url", &self.google.token),
            ("google-userinfo-url", &self.google.userinfo),
            ("google-calendar-url", &self.google.calendar),
            ("google-gmail-url", &self.google.gmail),
        ] {
            let parsed =
                url::Url::parse(url).map_err(|e| anyhow::anyhow!("--{flag} is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                anyhow::bail!("--{flag} must be http or https");
            }
        }
        if let Some(trunk) = &self.outbound_trunk {
            if !matches!(self.carrier, Carrier::Sip) {
                anyhow::bail!("--outbound-trunk needs --carrier sip");
            }
            trunk
                .validate()
                .map_err(|err| anyhow::anyhow!("--outbound-trunk: {err}"))?;
        }
        if let Some(llm) = &self.llm {
            llm.check("llm")?;
        }
        if let Some(stt) = &self.stt {
            stt.check("stt")?;
        }
        Ok(())
    }

    /// The trunk numbers on no carrier account call through, when calls go out over SIP.
    pub fn default_trunk(&self) -> Option<&switchboard_sip::trunk::Trunk> {
        match self.carrier {
            Carrier::Sip => self.outbound_trunk.as_ref(),
            _ => None,
        }
    }
}

/// `--node-id` checked: 1-64 letters, digits, `.`, `_` or `-`.
pub fn node_id(id: &str) -> anyhow::Result<String> {
    let fits = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !fits {
        anyhow::bail!("--node-id `{id}` must be 1-64 letters, digits, `.`, `_` or `-`");
    }
    Ok(id.to_owned())
}

/// The host name, the process id and a few characters drawn at start, e.g.
/// `sb-3-41822-9f2c1a`: a new id for each start, apart even for containers on one host that
/// share its name and each run as process 1.
pub fn default_node_id() -> String {
    format!(
        "{}-{}-{}",
        crate::store::host_name(),
        std::process::id(),
        &crate::store::instance()[..6]
    )
}
