//! The `converse` command line: the calls and their turns, the barge-in, the stand-in vendors'
//! latencies, the agents' voice detection, the echo on the callers' lines and the caller's
//! speech.

use std::path::PathBuf;

#[derive(clap::Args, Clone)]
pub struct ConverseArgs {
    /// The switchboard binary to start (default: the one beside this program).
    #[arg(long)]
    pub(super) spawn: Option<PathBuf>,
    /// Concurrent conversing calls.
    #[arg(long, default_value_t = 200)]
    pub(super) calls: usize,
    /// Caller turns per call.
    #[arg(long, default_value_t = 4)]
    pub(super) turns: u32,
    /// The turn (from 1) that starts while the agent's previous reply plays; 0: none.
    #[arg(long, default_value_t = 2)]
    pub(super) barge_in_turn: u32,
    /// How far into the reply's audio the barge-in starts, in milliseconds.
    #[arg(long, default_value_t = 600)]
    pub(super) barge_in_after_ms: u64,
    /// Speech to text: milliseconds to the transcript.
    #[arg(long, default_value_t = 150)]
    pub(super) stt_ms: u64,
    /// Chat model: milliseconds to the reply's first piece.
    #[arg(long, default_value_t = 300)]
    pub(super) llm_ms: u64,
    /// Chat model: milliseconds between the reply's pieces.
    #[arg(long, default_value_t = 20)]
    pub(super) llm_chunk_ms: u64,
    /// Text to speech: milliseconds to a sentence's audio.
    #[arg(long, default_value_t = 120)]
    pub(super) tts_ms: u64,
    /// Each vendor answer waits up to this many milliseconds more, spread evenly over the
    /// requests (measured, and left out like the rest of the vendors' time).
    #[arg(long, default_value_t = 20)]
    pub(super) vendor_spread_ms: u64,
    /// Seconds of audio per spoken sentence (a reply has two).
    #[arg(long, default_value_t = 1.5)]
    pub(super) sentence_secs: f64,
    /// The agents' vad_start_secs.
    #[arg(long, default_value_t = 0.2)]
    pub(super) vad_start_secs: f64,
    /// The agents' vad_stop_secs.
    #[arg(long, default_value_t = 0.4)]
    pub(super) vad_stop_secs: f64,
    /// Seconds over which the calls are placed.
    #[arg(long, default_value_t = 5.0)]
    pub(super) ramp_secs: f64,
    /// Seconds a turn waits for the reply's audio before it counts as failed.
    #[arg(long, default_value_t = 10.0)]
    pub(super) reply_timeout: f64,
    /// The callers' lines echo the agent's audio back, this many milliseconds late (in
    /// whole 20 ms frames; 0: at once, as an echo test number or SIPp's `-rtp_echo` does).
    /// Unset: no echo.
    #[arg(long)]
    pub(super) echo_delay_ms: Option<u64>,
    /// How far below the agent's level the echo comes back, in dB (0: full level).
    #[arg(long, default_value_t = 0.0)]
    pub(super) echo_db: f64,
    /// A mono 16-bit WAV the callers speak (default: espeak-ng, else a speech-like signal).
    #[arg(long)]
    pub(super) wav: Option<PathBuf>,
    /// Seconds of idle server sampled for the baseline.
    #[arg(long, default_value_t = 3.0)]
    pub(super) baseline_secs: f64,
    /// The agents are flow agents: a start node hands the caller to a conversation node (with
    /// a global end node), so every turn is briefed by the flow's director.
    #[arg(long)]
    pub flow: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Runs the bench once per number of calls given (`100,200,500,1000`), each on a fresh
    /// server, instead of once with `--calls`.
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<usize>,
    /// With `--sweep`: also runs each point against this switchboard binary (an earlier build,
    /// say), right after the point's own run, for a before and after on the same machine.
    #[arg(long, requires = "sweep")]
    pub compare: Option<PathBuf>,
    /// With `--sweep`: writes the chart of added latency against live calls (SVG) here.
    #[arg(long)]
    pub chart: Option<PathBuf>,
    /// Draws `--chart` from a sweep's `--json` report instead of running the bench.
    #[arg(long, requires = "chart", conflicts_with = "sweep")]
    pub chart_from: Option<PathBuf>,
}
