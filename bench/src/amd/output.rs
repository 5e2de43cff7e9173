//! The amd report: the confusion matrix, accuracy, people taken for machines, the beep
//! detector's recall and false alarms, and time to a verdict; as text, JSON and an HTML page.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use switchboard_sip::amd::{AmdSettings, AnsweredBy};

use super::cases::{Case, Outcome, RATE, Truth};
use crate::measure::round;

const VERDICTS: [AnsweredBy; 3] = [AnsweredBy::Human, AnsweredBy::Machine, AnsweredBy::Unsure];

fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Whether a verdict is right: a person kept (unsure counts as one), or a machine found.
fn right(truth: Truth, verdict: AnsweredBy) -> bool {
    match truth {
        Truth::Human => verdict.counts_as_human(),
        _ => verdict == truth.expected(),
    }
}

fn share(n: usize, of: usize) -> f64 {
    if of == 0 {
        return 0.0;
    }
    round(n as f64 / of as f64)
}

/// The verdict's times, p50 and p99, in ms.
fn times<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> Value {
    let mut ms: Vec<u32> = outcomes.map(|o| o.after_ms).collect();
    ms.sort_unstable();
    json!({"files": ms.len(), "p50": percentile(&ms, 50.0), "p99": percentile(&ms, 99.0), "max": ms.last().copied().unwrap_or(0)})
}

/// p50, p99 and the largest of `ms`.
fn spread(mut ms: Vec<u32>) -> Value {
    ms.sort_unstable();
    json!({"files": ms.len(), "p50": percentile(&ms, 50.0), "p99": percentile(&ms, 99.0), "max": ms.last().copied().unwrap_or(0)})
}

/// What the greeting's timing does on these files: the silence a person hears between the end
/// of their first words and the agent's greeting (synthesis aside: a greeting is cached),
/// greeting early and waiting for the verdict; and the machines that heard part of an early
/// greeting before their verdict cut it.
fn greeting_timing(done: &[(&Case, &Outcome)]) -> Value {
    let people: Vec<&Outcome> = done
        .iter()
        .filter(|(c, r)| c.truth == Truth::Human && r.answered_by.counts_as_human())
        .map(|(_, r)| *r)
        .filter(|r| r.words_end_ms.is_some())
        .collect();
    let silence = |greet: &dyn Fn(&Outcome) -> u32| -> Vec<u32> {
        people
            .iter()
            .map(|r| greet(r).saturating_sub(r.words_end_ms.unwrap_or(0)))
            .collect()
    };
    let early = silence(&|r| r.greet_early_ms.map_or(r.after_ms, |g| g.min(r.after_ms)));
    let waiting = silence(&|r| r.after_ms);
    let machines: Vec<&Outcome> = done
        .iter()
        .filter(|(c, r)| c.truth == Truth::Machine && r.answered_by == AnsweredBy::Machine)
        .map(|(_, r)| *r)
        .collect();
    let greeted = machines
        .iter()
        .filter(|r| r.greet_early_ms.is_some_and(|g| g < r.after_ms))
        .count();
    let starts = people
        .iter()
        .map(|r| r.greet_early_ms.map_or(r.after_ms, |g| g.min(r.after_ms)))
        .collect();
    json!({
        "greeting_starts_ms_after_the_answer_greeting_early": spread(starts),
        "greeting_starts_ms_after_the_answer_waiting_for_the_verdict": times(people.iter().copied()),
        "silence_before_greeting_ms_greeting_early": spread(early),
        "silence_before_greeting_ms_waiting_for_the_verdict": spread(waiting),
        "machines_that_heard_part_of_an_early_greeting_share": share(greeted, machines.len()),
    })
}

pub(super) fn report(
    cases: &[Case],
    settings: AmdSettings,
    cpu_ms: f64,
    audio_secs: f64,
    seed: u64,
) -> Value {
    let done: Vec<(&Case, &Outcome)> = cases
        .iter()
        .filter_map(|c| c.result.as_ref().map(|r| (c, r)))
        .collect();
    let mut matrix = serde_json::Map::new();
    for truth in Truth::ALL {
        let row: BTreeMap<&str, usize> = VERDICTS
            .iter()
            .map(|v| {
                let n = done
                    .iter()
                    .filter(|(c, r)| c.truth == truth && r.answered_by == *v)
                    .count();
                (v.as_str(), n)
            })
            .collect();
        matrix.insert(truth.as_str().into(), json!(row));
    }
    let count = |truth: Truth| done.iter().filter(|(c, _)| c.truth == truth).count();
    let people = count(Truth::Human);
    let machines = count(Truth::Machine);
    let spoken: Vec<_> = done
        .iter()
        .filter(|(c, _)| matches!(c.truth, Truth::Human | Truth::Machine))
        .collect();
    let spoken_right = spoken
        .iter()
        .filter(|(c, r)| right(c.truth, r.answered_by))
        .count();
    let strict_right = spoken
        .iter()
        .filter(|(c, r)| r.answered_by == c.truth.expected())
        .count();
    let all_right = done
        .iter()
        .filter(|(c, r)| right(c.truth, r.answered_by))
        .count();
    let people_as_machines = done
        .iter()
        .filter(|(c, r)| c.truth == Truth::Human && r.answered_by == AnsweredBy::Machine)
        .count();
    let machines_missed = done
        .iter()
        .filter(|(c, r)| c.truth == Truth::Machine && r.answered_by != AnsweredBy::Machine)
        .count();
    let with_beep: Vec<_> = done.iter().filter(|(c, _)| c.beep.is_some()).collect();
    let beeps_heard = with_beep
        .iter()
        .filter(|(c, r)| {
            // Heard at the right place: within 100 ms of where the tone starts.
            matches!((c.beep, r.beep_heard), (Some((_, at)), Some((_, heard))) if heard.abs_diff(at) <= 100)
        })
        .count();
    let beep_errors_hz: Vec<u32> = with_beep
        .iter()
        .filter_map(|(c, r)| Some(c.beep?.0.abs_diff(r.beep_heard?.0)))
        .collect();
    let beeps_followed = with_beep
        .iter()
        .filter(|(_, r)| r.beep_ended_ms.is_some())
        .count();
    let without_beep: Vec<_> = done.iter().filter(|(c, _)| c.beep.is_none()).collect();
    let false_beeps = without_beep
        .iter()
        .filter(|(_, r)| r.beep_heard.is_some())
        .count();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (c, r) in &done {
        let code = r.reason.split('-').next().unwrap_or_default();
        *reasons
            .entry(format!("{}:{code}", c.truth.as_str()))
            .or_default() += 1;
    }
    let misclassified: Vec<String> = done
        .iter()
        .filter(|(c, r)| !right(c.truth, r.answered_by))
        .map(|(c, r)| format!("{} {} {}", c.name, r.answered_by.as_str(), r.reason))
        .collect();
    json!({
        "benchmark": "amd",
        "seed": seed,
        "files": done.len(),
        "audio_secs": round(audio_secs),
        "settings": settings_json(&settings),
        "confusion_matrix": matrix,
        "accuracy": share(spoken_right, spoken.len()),
        "accuracy_unsure_as_wrong": share(strict_right, spoken.len()),
        "accuracy_all_files": share(all_right, done.len()),
        "humans": people,
        "humans_classified_machine": people_as_machines,
        "humans_classified_machine_share": share(people_as_machines, people),
        "machines": machines,
        "machines_missed_share": share(machines_missed, machines),
        "reasons": reasons,
        "beeps": with_beep.len(),
        "beep_recall": share(beeps_heard, with_beep.len()),
        "beep_frequency_error_hz_max": beep_errors_hz.iter().max().copied().unwrap_or(0),
        "beeps_followed_to_their_end_after_a_machine_verdict": share(beeps_followed, with_beep.len()),
        "files_without_beep": without_beep.len(),
        "beep_false_positives": false_beeps,
        "time_to_verdict_ms": times(done.iter().map(|(_, r)| *r)),
        "time_to_verdict_ms_humans": times(done.iter().filter(|(c, _)| c.truth == Truth::Human).map(|(_, r)| *r)),
        "time_to_verdict_ms_machines": times(done.iter().filter(|(c, _)| c.truth == Truth::Machine).map(|(_, r)| *r)),
        "greeting": greeting_timing(&done),
        "analysis_cpu_ms_per_audio_sec": round(cpu_ms / audio_secs.max(1e-9)),
        "misclassified": misclassified,
    })
}

fn settings_json(s: &AmdSettings) -> Value {
    json!({
        "initial_silence_ms": s.initial_silence_ms,
        "greeting_ms": s.greeting_ms,
        "after_greeting_silence_ms": s.after_greeting_silence_ms,
        "total_analysis_time_ms": s.total_analysis_time_ms,
        "min_word_length_ms": s.min_word_length_ms,
        "between_words_silence_ms": s.between_words_silence_ms,
        "maximum_number_of_words": s.maximum_number_of_words,
        "maximum_word_length_ms": s.maximum_word_length_ms,
        "silence_threshold": s.silence_threshold,
    })
}

/// The confusion matrix as a table, on standard output.
pub(super) fn print_matrix(report: &Value) {
    println!();
    println!(
        "{:>12} | {:>7} {:>7} {:>7}",
        "truth", "human", "machine", "unsure"
    );
    println!("{:-<12}-+-{:-<23}", "", "");
    for truth in Truth::ALL {
        let row = &report["confusion_matrix"][truth.as_str()];
        println!(
            "{:>12} | {:>7} {:>7} {:>7}",
            truth.as_str(),
            row["human"].as_u64().unwrap_or(0),
            row["machine"].as_u64().unwrap_or(0),
            row["unsure"].as_u64().unwrap_or(0)
        );
    }
}

/// The report with every file's description and verdict.
pub(super) fn with_files(report: &Value, cases: &[Case]) -> Value {
    let files: Vec<Value> = cases
        .iter()
        .filter_map(|c| {
            let r = c.result.as_ref()?;
            Some(json!({
                "name": c.name,
                "truth": c.truth.as_str(),
                "description": c.description,
                "secs": round(c.samples.len() as f64 / f64::from(RATE)),
                "beep_hz": c.beep.map(|b| b.0),
                "beep_at_ms": c.beep.map(|b| b.1),
                "answered_by": r.answered_by.as_str(),
                "reason": r.reason,
                "after_ms": r.after_ms,
                "beep_heard_hz": r.beep_heard.map(|b| b.0),
                "beep_heard_at_ms": r.beep_heard.map(|b| b.1),
            }))
        })
        .collect();
    let mut full = report.clone();
    full["file_results"] = json!(files);
    full
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(super) fn html(full: &Value) -> String {
    let figures: String = full
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "file_results" | "confusion_matrix"))
                .map(|(k, v)| format!("<tr><th>{k}</th><td>{}</td></tr>", escape(&v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let matrix: String = Truth::ALL
        .iter()
        .map(|t| {
            let row = &full["confusion_matrix"][t.as_str()];
            let cells: String = VERDICTS
                .iter()
                .map(|v| {
                    let colour = if right(*t, *v) { "#dfd" } else { "#fdd" };
                    format!("<td style=\"background:{colour}\">{}</td>", row[v.as_str()])
                })
                .collect();
            format!("<tr><th>{}</th>{cells}</tr>", t.as_str())
        })
        .collect();
    let rows: String = full["file_results"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .map(|f| {
                    let cell = |k: &str| match &f[k] {
                        Value::String(s) => escape(s),
                        Value::Null => String::new(),
                        v => v.to_string(),
                    };
                    format!(
                        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        cell("name"),
                        cell("truth"),
                        cell("answered_by"),
                        cell("reason"),
                        cell("after_ms"),
                        cell("beep_hz"),
                        cell("beep_heard_hz"),
                        cell("description"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Switchboard answering-machine detection</title>\
         <style>body{{font-family:sans-serif;margin:2em}}th{{text-align:left;padding-right:1em}}\
         td{{padding:0 .6em}}table{{border-collapse:collapse;margin-bottom:2em}}</style></head><body>\
         <h1>Switchboard answering-machine detection</h1>\
         <h2>Confusion matrix (rows: truth)</h2><table><tr><th></th><th>human</th><th>machine</th><th>unsure</th></tr>{matrix}</table>\
         <h2>Figures</h2><table>{figures}</table>\
         <h2>Files</h2><table><tr><th>file</th><th>truth</th><th>verdict</th><th>cause</th><th>ms</th><th>beep Hz</th><th>heard Hz</th><th>audio</th></tr>{rows}</table>\
         </body></html>"
    )
}
