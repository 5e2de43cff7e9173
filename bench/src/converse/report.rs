//! The converse report: each turn's added latency tied to the stand-ins' records, the
//! barge-ins, the echo's false barge-ins, and the server's use per call.

use serde_json::{Value, json};

use super::args::ConverseArgs;
use super::caller::Seen;
use super::turns::{Matcher, barge_in_ms};
use super::vendors;
use crate::measure::round;
use crate::measure::spread;

/// What the run measured besides the calls' own figures.
pub(super) struct Measured {
    pub(super) made_by: &'static str,
    pub(super) line_secs: f64,
    pub(super) base_cpu: Option<f64>,
    pub(super) base_rss: Option<f64>,
    pub(super) bench_cpu: Option<f64>,
    pub(super) wall: f64,
    /// The server's own figures over the calls (see `inside`).
    pub(super) inside: Value,
    /// The server's CPU by thread group over the calls, percent of one core.
    pub(super) threads: std::collections::BTreeMap<String, f64>,
}

/// The report: the calls' figures tied to the stand-ins' records, and the server's use.
pub(super) fn report(
    args: &ConverseArgs,
    seen: Seen,
    records: &vendors::Records,
    samples: Vec<Value>,
    m: Measured,
) -> Value {
    let Measured {
        made_by,
        line_secs,
        base_cpu,
        base_rss,
        bench_cpu,
        wall,
        inside,
        threads,
    } = m;
    let mut matcher = Matcher::new(records);
    let (mut added, mut parts, mut vendor_ms) = (Vec::new(), [vec![], vec![], vec![]], Vec::new());
    let mut unmatched = std::collections::BTreeMap::<&str, u64>::new();
    let mut by_turn = vec![Vec::new(); args.turns as usize];
    for turn in &seen.turns {
        match matcher.added(turn) {
            Ok(a) => {
                if let Some(v) = by_turn.get_mut(turn.turn as usize) {
                    v.push(a.total);
                }
                added.push(a.total);
                parts[0].push(a.to_chat);
                parts[1].push(a.to_speech);
                parts[2].push(a.to_audio);
                vendor_ms.push(a.vendors);
            }
            Err(why) => *unmatched.entry(why).or_insert(0) += 1,
        }
    }
    // From when the phone had sent the VAD's start of speech, and (beside it) from its first
    // speech packet plus the VAD's start, which also counts a phone that ran late.
    let barges = |heard: bool| -> Vec<f64> {
        seen.barges
            .iter()
            .filter(|b| b.stopped)
            .filter_map(|b| {
                let from = if heard { b.heard } else { None };
                Some(barge_in_ms(
                    b.start,
                    from,
                    args.vad_start_secs,
                    b.last_audio?,
                ))
            })
            .collect()
    };
    let (mut barge, mut barge_from_speech) = (barges(true), barges(false));
    let barge_not_stopped = seen.barges.iter().filter(|b| !b.stopped).count();
    let plateau = plateau(&samples, args.calls as i64);
    let machine_busy = plateau.2;
    let per_call = |v: Option<f64>, base: Option<f64>| {
        v.zip(base).map(|(v, b)| round((v - b) / args.calls as f64))
    };
    let base_rss_mib = base_rss.map(|k| round(k / 1024.0));
    json!({
        "benchmark": "converse",
        "calls": args.calls,
        "turns_per_call": args.turns,
        "barge_in_turn": args.barge_in_turn,
        "caller_speech": made_by,
        "caller_line_secs": round(line_secs),
        "vendor_latency_ms": {"stt": args.stt_ms, "llm_first_piece": args.llm_ms,
            "llm_between_pieces": args.llm_chunk_ms, "tts": args.tts_ms,
            "spread": args.vendor_spread_ms},
        "vad": {"start_secs": args.vad_start_secs, "stop_secs": args.vad_stop_secs},
        "calls_failed": seen.failures.values().sum::<u64>(),
        "failures": seen.failures,
        "turns": seen.turns.len(),
        "turns_answered": seen.turns.iter().filter(|t| t.first_audio.is_some()).count(),
        "turns_measured": added.len(),
        "turns_not_measured": unmatched,
        "added_latency_ms": spread(&mut added),
        "added_latency_ms_by_turn": by_turn.iter_mut().map(|v| spread(v)).collect::<Vec<_>>(),
        "added_parts_ms": {
            "transcript_to_chat_request": spread(&mut parts[0]),
            "first_sentence_to_speech_request": spread(&mut parts[1]),
            "speech_answer_to_first_audio": spread(&mut parts[2]),
        },
        "vendor_time_on_path_ms": spread(&mut vendor_ms),
        "barge_ins": seen.barges.len(),
        "barge_ins_not_stopped": barge_not_stopped,
        "barge_ins_audio_resumed": seen.barges.iter().filter(|b| b.resumed).count(),
        "barge_in_stop_ms": spread(&mut barge),
        "barge_in_stop_from_speech_ms": spread(&mut barge_from_speech),
        "echo": args.echo_delay_ms.map(|ms| json!({"delay_ms": ms / 20 * 20, "below_agent_db": args.echo_db})),
        "agents": if args.flow { "flow" } else { "prompt" },
        "replies_whole": seen.replies_whole,
        "false_barge_ins": seen.replies_cut_short,
        "stand_in_requests": {"stt": records.stt.len(),
            "chat_turns": records.chat.iter().filter(|c| c.call.is_some()).count(),
            "chat_analyses": records.chat.iter().filter(|c| c.call.is_none()).count(),
            "tts": records.tts.len() as u64 + records.tts_unmatched},
        "server_idle_cpu_percent": base_cpu.map(round),
        "server_idle_rss_mib": base_rss_mib,
        "server_cpu_percent_all_calls_live": plateau.0.map(round),
        "server_rss_mib_all_calls_live": plateau.1.map(|k| round(k / 1024.0)),
        "server_cpu_core_secs_per_sec_per_call": plateau.0.zip(base_cpu)
            .map(|(v, b)| ((v - b) / args.calls as f64 * 1000.0).round() / 100_000.0),
        "server_cpu_percent_per_call": per_call(plateau.0, base_cpu),
        "server_rss_kib_per_call": per_call(plateau.1, base_rss),
        "bench_cpu_percent": bench_cpu.map(round),
        "machine_idle_percent_all_calls_live": machine_busy.map(|b| round(100.0 - b)),
        "server_threads_cpu_percent": threads,
        "server_inside": inside,
        "wall_secs": round(wall),
        "samples": samples,
    })
}

/// Mean server CPU (percent of a core), RSS (KiB) and the machine's busy share (percent of
/// all its cores) over the samples taken while every call was live.
fn plateau(samples: &[Value], calls: i64) -> (Option<f64>, Option<f64>, Option<f64>) {
    let mean = |key: &str| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s["live_calls"].as_i64() == Some(calls))
            .filter_map(|s| s[key].as_f64())
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    (
        mean("cpu_percent"),
        mean("rss_kib"),
        mean("machine_busy_percent"),
    )
}
