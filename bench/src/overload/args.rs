//! The `overload` command line: the server and SIPp, the flood or the search for the
//! sustainable rate, the calls' length and audio, what is measured around the flood, and the
//! outbound calls placed beside it.

use std::path::PathBuf;

#[derive(clap::Args, Clone)]
pub struct OverloadArgs {
    /// The switchboard binary to run (default: the one beside this bench).
    #[arg(long)]
    pub(super) spawn: Option<PathBuf>,
    /// More arguments for `switchboard serve` (repeat; e.g. --server-arg=--sip-t1-ms=200).
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    pub(super) server_args: Vec<String>,
    /// The SIPp binary.
    #[arg(long, default_value = "sipp")]
    pub(super) sipp: PathBuf,
    /// More arguments for SIPp (repeat; e.g. --sipp-arg=-max_sched_loops --sipp-arg=5000).
    #[arg(long = "sipp-arg", allow_hyphen_values = true)]
    pub(super) sipp_args: Vec<String>,
    /// Step the rate up with short runs and report the highest with no failed call and no
    /// INVITE or BYE retransmission.
    #[arg(long)]
    pub(super) find_sustainable: bool,
    /// New calls per second (the flood's rate).
    #[arg(long, default_value_t = 100.0)]
    pub(super) rate: f64,
    /// Seconds of new calls.
    #[arg(long, default_value_t = 30.0)]
    pub(super) secs: f64,
    /// The sustainable rate, for the goodput's share of it.
    #[arg(long)]
    pub(super) sustainable: Option<f64>,
    /// How long each call lasts before SIPp's BYE, in ms (SIPp's -d).
    #[arg(long, default_value_t = 1000)]
    pub(super) hold_ms: u64,
    /// Hold each call for this many calls to be up at once at --rate (sets --hold-ms).
    #[arg(long)]
    pub(super) concurrent: Option<u64>,
    /// `none` (the server's audio goes unanswered), `echo` (SIPp echoes it back, -rtp_echo) or
    /// `pcap` (the built-in uac_pcap scenario plays G.711; calls last about 9 s).
    #[arg(long, default_value = "none")]
    pub(super) audio: String,
    /// Seconds to keep sampling after the flood's last new call.
    #[arg(long, default_value_t = 30.0)]
    pub(super) after_secs: f64,
    /// Calls placed (20 a second) before measuring, so the figures start from a server that has
    /// loaded what it loads once.
    #[arg(long, default_value_t = 20)]
    pub(super) warmup_calls: u64,
    /// Seconds of idle server measured before each run.
    #[arg(long, default_value_t = 2.0)]
    pub(super) idle_secs: f64,
    /// The server counts as quiet again when its CPU stays at or below the larger of this (percent
    /// of one core) and 1.5 times its idle CPU, for a second.
    #[arg(long, default_value_t = 5.0)]
    pub(super) quiet_cpu: f64,
    /// Milliseconds between API probes (`GET /calls?limit=1`).
    #[arg(long, default_value_t = 100)]
    pub(super) probe_ms: u64,
    /// --find-sustainable: the first rate, the step up, the highest rate tried and the seconds
    /// of each run.
    #[arg(long, default_value_t = 100.0)]
    pub(super) start_rate: f64,
    #[arg(long, default_value_t = 100.0)]
    pub(super) step: f64,
    #[arg(long, default_value_t = 5000.0)]
    pub(super) max_rate: f64,
    #[arg(long, default_value_t = 10.0)]
    pub(super) step_secs: f64,
    /// Outbound calls a second placed through the API while the flood runs (and for a few
    /// seconds before it), over a trunk to the bench's answering peer: 0 places none.
    #[arg(long, default_value_t = 0.0)]
    pub outbound_rate: f64,
    /// Seconds each of those outbound calls lasts (the agent hangs up).
    #[arg(long, default_value_t = 5)]
    pub outbound_hold: u64,
    /// Also run a campaign to the same peer (8 calls at a time, each lasting --outbound-hold
    /// seconds), launched a few seconds before the flood and paused when it ends: its calls a
    /// second and how soon a freed slot is taken again, before and during the flood.
    #[arg(long)]
    pub campaign: bool,
    #[arg(long)]
    pub json: Option<PathBuf>,
}
