//! `amd`: how well answering-machine detection tells people from machines. It generates a
//! labelled set with espeak-ng and sox in a temporary folder (voicemail greetings in several
//! voices and speeds, some with a beep after them; short answers of people followed by silence
//! or faint line noise; silent lines; lines of white or pink noise), brings every file to what a
//! call carries (8 kHz mono 16-bit, through PCMU and back), runs the detection over each as
//! 20 ms frames, and reports the confusion matrix, accuracy, the share of people taken for
//! machines, the beep detector's recall and false alarms, and the time to a verdict (text, JSON
//! and an HTML page).
//!
//! The set is drawn from a seed, so two runs with the same seed and tools measure the same
//! audio.
//!
//! This file runs the detection over the set and writes the report; `generate` makes the set,
//! `cases` says what its files are, `output` builds the report.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use switchboard::store::AnsweringMachineDetection;
use switchboard_sip::amd::{
    AmdEvent, AmdSettings, AnsweredBy, AnsweringMachineDetector, BeepDetector, BeepEvent,
    BeepSettings,
};
use switchboard_sip::vad::{Vad, VadChange};

mod cases;
mod generate;
mod output;

use cases::{FRAME, Outcome, RATE};
use generate::generate;

#[derive(clap::Args)]
pub struct AmdArgs {
    /// Versions of each greeting and answer (voice, speed, pitch, level, pauses, beep).
    #[arg(long, default_value_t = 3)]
    variants: usize,
    /// Seed of the draw.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Overrides a detection parameter, as an agent's `answering_machine_detection` names it,
    /// e.g. `--set maximum_number_of_words=2` (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    overrides: Vec<String>,
    /// Keep the generated WAV files here (a temporary folder, removed, when omitted).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Write the report, with every file's verdict, as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an HTML report here.
    #[arg(long)]
    html: Option<PathBuf>,
}

/// The agent's default VAD, and the pause its listening reports (half its stop, at least
/// 0.2 s).
fn agent_vad() -> (Vad, f64) {
    let agent = switchboard::store::Agent::new("bench".into());
    let vad = Vad::new(switchboard::runtime::inbound::vad_settings(&agent));
    (vad, (agent.vad_stop_secs / 2.0).max(0.2))
}

/// The settings of `--set` over the defaults, read as an agent's overrides are.
fn settings(overrides: &[String]) -> anyhow::Result<AmdSettings> {
    let mut object = serde_json::Map::new();
    for o in overrides {
        let (name, value) = o
            .split_once('=')
            .with_context(|| format!("--set {o}: NAME=VALUE"))?;
        let value: u32 = value
            .parse()
            .with_context(|| format!("--set {o}: a whole number"))?;
        object.insert(name.to_string(), json!(value));
    }
    let amd: AnsweringMachineDetection =
        serde_json::from_value(Value::Object(object)).context("--set")?;
    amd.settings().context("--set: detection is on")
}

pub fn run(args: AmdArgs) -> anyhow::Result<Value> {
    let settings = settings(&args.overrides)?;
    for tool in ["espeak-ng", "sox"] {
        let found = Command::new(tool).arg("--version").output().is_ok();
        if !found {
            bail!(
                "`{tool}` is needed to generate the audio (Debian: apt-get install espeak-ng sox)"
            );
        }
    }
    let temp = tempfile::tempdir()?;
    let dir = match &args.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => temp.path().to_path_buf(),
    };
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut cases = generate(&dir, &mut rng, args.variants.max(1))?;
    let started = std::time::Instant::now();
    for case in &mut cases {
        case.result = Some(detect(settings, &case.samples));
    }
    let cpu_ms = started.elapsed().as_secs_f64() * 1000.0;
    let audio_secs: f64 = cases
        .iter()
        .map(|c| c.samples.len() as f64 / f64::from(RATE))
        .sum();
    let report = output::report(&cases, settings, cpu_ms, audio_secs, args.seed);
    output::print_matrix(&report);
    let full = output::with_files(&report, &cases);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&full)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.html {
        std::fs::write(path, output::html(&full))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report)
}

/// Runs the detection a call runs over `samples`, then silence until it decides (the line
/// goes quiet after the file), and the beep detector alone over the whole file.
fn detect(settings: AmdSettings, samples: &[i16]) -> Outcome {
    let mut amd = AnsweringMachineDetector::new(settings, RATE);
    let mut verdict = None;
    let mut beep_ended_ms = None;
    let mut at_ms = 0;
    let silence = [0i16; FRAME];
    let tail = std::iter::repeat_n(&silence[..], 400);
    let (mut vad, pause_secs) = agent_vad();
    let (mut words_end_ms, mut greet_early_ms, mut heard) = (None, None, false);
    for frame in samples.chunks(FRAME).chain(tail) {
        at_ms += 20;
        if greet_early_ms.is_none() {
            let change = vad.feed(frame);
            heard |= change == Some(VadChange::Started);
            if vad.silence_secs() == 0.0 {
                words_end_ms = Some(at_ms);
            }
            let paused = heard && vad.silence_secs() + 1e-9 >= pause_secs;
            if paused || change == Some(VadChange::Stopped) {
                greet_early_ms = Some(at_ms);
            }
        }
        amd.feed(frame, |e| match e {
            AmdEvent::Verdict(v) => verdict = Some(v),
            AmdEvent::Beep(BeepEvent::Ended { .. }) => beep_ended_ms = Some(at_ms),
            AmdEvent::Beep(_) => {}
        });
        if verdict.is_some() && (amd.finished() || at_ms as usize >= samples.len() / 8) {
            break;
        }
    }
    let mut beeps = BeepDetector::new(BeepSettings::default(), RATE);
    let beep_heard = samples
        .chunks(FRAME)
        .filter_map(|f| beeps.feed(f))
        .find_map(|e| match e {
            BeepEvent::Started {
                frequency_hz,
                at_ms,
            } => Some((frequency_hz, at_ms)),
            BeepEvent::Ended { .. } => None,
        });
    match verdict {
        Some(v) => Outcome {
            answered_by: v.answered_by,
            reason: v.reason.to_string(),
            after_ms: v.after_ms,
            beep_heard,
            beep_ended_ms,
            words_end_ms,
            greet_early_ms,
        },
        // The analysis always ends within its total time; kept total for the report.
        None => Outcome {
            answered_by: AnsweredBy::Unsure,
            reason: "NONE".into(),
            after_ms: at_ms,
            beep_heard,
            beep_ended_ms,
            words_end_ms,
            greet_early_ms,
        },
    }
}
