//! The `outbound-load` command line: the far end, how calls are placed (directly or by
//! campaigns) and their pacing, the peer's mix, and the server's settings.

use std::path::PathBuf;

use super::peer::Mix;

#[derive(clap::Args, Clone)]
pub struct OutboundLoadArgs {
    /// The switchboard binary to start (default: `switchboard` beside this binary).
    #[arg(long)]
    pub(super) spawn: Option<PathBuf>,
    /// The far end: `bench` (the built-in answering peer) or `sipp` (SIPp's UAS with
    /// -rtp_echo, answering every call: the reference).
    #[arg(long, default_value = "bench", value_parser = ["bench", "sipp"])]
    pub(super) peer: String,
    /// `direct` (POST /calls at --rate) or `campaigns` (--campaigns campaigns the engine paces).
    #[arg(long, default_value = "direct", value_parser = ["direct", "campaigns"])]
    pub(super) mode: String,
    /// Direct calls placed per second.
    #[arg(long, default_value_t = 20.0)]
    pub(super) rate: f64,
    /// Seconds to place calls (direct) or to let the campaigns run.
    #[arg(long, default_value_t = 30.0)]
    pub(super) duration: f64,
    /// Calls of one second placed and ended before the run (and left out of its figures), so
    /// that the resident memory the run starts from already holds what the service loads once,
    /// on its first calls (number metadata, caches, worker threads).
    #[arg(long, default_value_t = 10)]
    pub(super) warmup: u64,
    /// Seconds an answered call lasts: the agent's max_call_duration_secs, so the server hangs
    /// up.
    #[arg(long, default_value_t = 10)]
    pub(super) hold: u64,
    /// What the peer does with calls, by weight: answer (echoes the audio), machine (plays a
    /// greeting), busy (486), no_answer (rings until cancelled).
    #[arg(long, default_value = "answer=70,machine=10,busy=10,no_answer=10")]
    pub(super) mix: Mix,
    /// Milliseconds the peer rings before it answers.
    #[arg(long, default_value_t = 500)]
    pub(super) ring_ms: u64,
    /// How long unanswered calls ring, 5-300 s (the service's ring timeout, and
    /// ring_timeout_secs of direct calls).
    #[arg(long, default_value_t = 5)]
    pub(super) ring_timeout: u64,
    /// Campaigns to run (each calls from its own number).
    #[arg(long, default_value_t = 4)]
    pub(super) campaigns: usize,
    /// Each campaign's max_in_flight (1-8).
    #[arg(long, default_value_t = 8)]
    pub(super) max_in_flight: i64,
    /// Each campaign's min_seconds_between_calls.
    #[arg(long, default_value_t = 0)]
    pub(super) min_gap: i64,
    /// Contacts per campaign (default: more than the run can call).
    #[arg(long)]
    pub(super) contacts: Option<usize>,
    /// The peer's codec: `pcmu`, `pcma` or `g722` (SIPp answers PCMU).
    #[arg(long, default_value = "pcmu")]
    pub(super) codec: String,
    /// A mono 16-bit WAV for the machine's greeting (default: espeak-ng, else a synthetic
    /// one).
    #[arg(long)]
    pub(super) greeting_wav: Option<PathBuf>,
    /// The agent's answering-machine detection: `on` (the service's default; machines become
    /// `voicemail`) or `off`. Default: on with the bench peer, off with SIPp (its echo starts
    /// with silence, which the detection takes for a machine).
    #[arg(long, value_parser = ["on", "off"])]
    pub(super) amd: Option<String>,
    /// The server's text to speech (`tones`, `espeak`, ...).
    #[arg(long, default_value = "tones")]
    pub(super) tts: String,
    /// The SIPp binary, for --peer sipp.
    #[arg(long, default_value = "sipp")]
    pub(super) sipp: PathBuf,
    /// More arguments for `switchboard serve` (repeat; e.g. --server-arg=--sip-t1-ms=200).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub(super) server_args: Vec<String>,
    /// Environment for the server, `NAME=VALUE` (repeat; e.g. MALLOC_ARENA_MAX=2).
    #[arg(long = "server-env")]
    pub(super) server_env: Vec<String>,
    /// The server's log filter. Its per-call RTP counters come from the dialer's "outbound call
    /// ended" lines at info.
    #[arg(long, default_value = "warn,switchboard_actors::sip_dialer=info")]
    pub(super) server_log: String,
    /// A JSON report of an earlier run: the main figures are given as ratios to it.
    #[arg(long)]
    pub(super) reference: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HTML report with charts here.
    #[arg(long)]
    pub(super) html: Option<PathBuf>,
    /// Keep the server's directory (database, recordings, log) and print where it is.
    #[arg(long)]
    pub(super) keep: bool,
}

impl OutboundLoadArgs {
    pub(super) fn amd_on(&self) -> bool {
        self.amd.as_deref() != Some("off")
    }
}
