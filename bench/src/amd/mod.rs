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

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use switchboard::store::AnsweringMachineDetection;
use switchboard_sip::amd::{
    AmdEvent, AmdSettings, AnsweredBy, AnsweringMachineDetector, BeepDetector, BeepEvent,
    BeepSettings,
};
use switchboard_sip::audio_codec::{self, CodecType};
use switchboard_sip::vad::{Vad, VadChange};

use crate::progress::Progress;

mod output;

const RATE: u32 = 8000;
const FRAME: usize = 160;

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

/// Voicemail greetings, personal and business.
const GREETINGS: &[&str] = &[
    "Hi, you've reached John Smith. I can't take your call right now. Please leave a message after the tone.",
    "Hello, this is Sarah. Sorry I missed your call. Leave your name and number and I'll get back to you.",
    "The person you are calling is not available. Please leave a message after the beep.",
    "You have reached the voicemail box of five five five, one two three four. Please record your message at the tone.",
    "Thank you for calling Acme Dental. Our office is currently closed. Our hours are Monday through Friday, nine to five.",
    "Hey, it's Mike. Leave a message.",
    "Hi, you've reached the Johnsons. We're not home right now, so leave a message and we'll call you back.",
    "The number you have dialed is not available. At the tone, please record your message. When you are finished, hang up.",
    "Welcome to the voice mailbox of David Lee. Please leave a detailed message.",
    "Hello. You've reached Maria's phone. I'm either away or on another line. Please leave a message.",
    "Thanks for calling. Nobody is available to take your call. Please leave your name, number, and a brief message.",
    "Hi, this is Tom from Green Valley Realty. I'm with a client right now. Leave a message and I'll call you back shortly.",
    "Your call has been forwarded to an automated voice messaging system. Please leave a message after the tone.",
];

/// How people answer the phone.
const ANSWERS: &[&str] = &[
    "Hello?",
    "Yes?",
    "Hi, who is this?",
    "Hello, speaking.",
    "Hello.",
    "Yeah?",
    "Hi.",
    "Hello, who's calling?",
];

/// espeak-ng voices (with variants for other timbres).
const VOICES: &[&str] = &[
    "en-us",
    "en-gb",
    "en-us+f3",
    "en-gb-scotland",
    "en-029",
    "en-gb-x-rp+f2",
    "en-us+m4",
];

/// Voicemail tones seen in the field, in Hz.
const BEEP_HZ: &[u32] = &[440, 850, 1000, 1400, 1800];

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    Human,
    Machine,
    Silence,
    Noise,
}

impl Truth {
    pub(crate) const ALL: [Truth; 4] = [Truth::Human, Truth::Machine, Truth::Silence, Truth::Noise];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Truth::Human => "human",
            Truth::Machine => "machine",
            Truth::Silence => "silence",
            Truth::Noise => "noise",
        }
    }

    /// The right answer: a person is a person (unsure counts as one); a line where nobody
    /// speaks is a machine by the initial-silence rule.
    pub(crate) fn expected(self) -> AnsweredBy {
        match self {
            Truth::Human => AnsweredBy::Human,
            _ => AnsweredBy::Machine,
        }
    }
}

/// One generated file and what the detection made of it.
pub(crate) struct Case {
    pub name: String,
    pub truth: Truth,
    pub description: String,
    pub samples: Vec<i16>,
    /// The beep's frequency and where it starts, in ms.
    pub beep: Option<(u32, u32)>,
    pub result: Option<Outcome>,
}

pub(crate) struct Outcome {
    pub answered_by: AnsweredBy,
    pub reason: String,
    pub after_ms: u32,
    /// What the beep detector heard over the whole file: (frequency, start ms).
    pub beep_heard: Option<(u32, u32)>,
    /// When the detector (after a machine verdict) reported the end of the beep.
    pub beep_ended_ms: Option<u32>,
    /// When the first words ended (the end of the last frame of speech before the agent
    /// would greet early), and when it would greet early: the first pause of the listening
    /// (half the agent's default VAD stop) or the VAD's stop, whichever comes first.
    pub words_end_ms: Option<u32>,
    pub greet_early_ms: Option<u32>,
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

fn generate(dir: &Path, rng: &mut StdRng, variants: usize) -> anyhow::Result<Vec<Case>> {
    let mut cases = Vec::new();
    let mut progress = Progress::new();
    let total = (GREETINGS.len() + ANSWERS.len()) * variants + 4 + 8;
    for (g, text) in GREETINGS.iter().enumerate() {
        for v in 0..variants {
            let voice = *VOICES.choose(rng).context("voices")?;
            let speed = rng.random_range(140..=195);
            let speech = speak(dir, &format!("m{g}-{v}"), text, voice, speed, rng)?;
            let lead = rng.random_range(300..=1500);
            let mut samples = silence(lead);
            samples.extend(&speech);
            // Two greetings in three end with a beep.
            let beep = if (g + v) % 3 != 2 {
                samples.extend(silence(rng.random_range(200..=800)));
                let hz = *BEEP_HZ.choose(rng).context("beeps")?;
                let ms = *[150u32, 250, 400, 600, 1000].choose(rng).context("beeps")?;
                let at = ms_of(samples.len());
                samples.extend(tone(dir, hz, ms, rng)?);
                Some((hz, at))
            } else {
                None
            };
            samples.extend(silence(1000));
            let description = format!(
                "{voice} at {speed} wpm after {lead} ms{}: {text}",
                beep.map(|(hz, _)| format!(", beep {hz} Hz"))
                    .unwrap_or_default()
            );
            cases.push(case(
                dir,
                format!("machine-{g:02}-{v}"),
                Truth::Machine,
                description,
                samples,
                beep,
            )?);
            progress.show(cases.len() as i64, total as i64, "generating");
        }
    }
    for (a, text) in ANSWERS.iter().enumerate() {
        for v in 0..variants {
            let voice = *VOICES.choose(rng).context("voices")?;
            let speed = rng.random_range(140..=195);
            let speech = speak(dir, &format!("h{a}-{v}"), text, voice, speed, rng)?;
            let lead = rng.random_range(150..=1000);
            let after = rng.random_range(1000..=3000);
            let mut samples = silence(lead);
            samples.extend(&speech);
            samples.extend(silence(after));
            // One answer in three on a clean line, one with faint hiss (-60 to -48 dBFS), one
            // on a noisy line (pink noise at -42 to -32 dBFS: a street, a car), louder than
            // the fixed silence threshold.
            let hiss = match (a + v) % 3 {
                1 => {
                    let db = rng.random_range(-60.0..=-48.0);
                    add_noise(dir, &mut samples, "whitenoise", db)?;
                    format!(", hiss at {db:.0} dBFS")
                }
                2 => {
                    let db = rng.random_range(-42.0..=-32.0);
                    add_noise(dir, &mut samples, "pinknoise", db)?;
                    format!(", pink noise at {db:.0} dBFS")
                }
                _ => String::new(),
            };
            let description = format!(
                "{voice} at {speed} wpm after {lead} ms, then {after} ms of quiet{hiss}: {text}"
            );
            cases.push(case(
                dir,
                format!("human-{a:02}-{v}"),
                Truth::Human,
                description,
                samples,
                None,
            )?);
            progress.show(cases.len() as i64, total as i64, "generating");
        }
    }
    for (i, hiss) in [None, Some(-70.0), Some(-62.0), Some(-55.0)]
        .into_iter()
        .enumerate()
    {
        let mut samples = silence(6000);
        let description = match hiss {
            Some(db) => {
                add_noise(dir, &mut samples, "whitenoise", db)?;
                format!("6 s of quiet line, hiss at {db} dBFS")
            }
            None => "6 s of digital silence".to_string(),
        };
        cases.push(case(
            dir,
            format!("silence-{i}"),
            Truth::Silence,
            description,
            samples,
            None,
        )?);
        progress.show(cases.len() as i64, total as i64, "generating");
    }
    for (i, (kind, db)) in [
        ("whitenoise", -50.0),
        ("whitenoise", -40.0),
        ("whitenoise", -30.0),
        ("whitenoise", -20.0),
        ("pinknoise", -50.0),
        ("pinknoise", -40.0),
        ("pinknoise", -30.0),
        ("pinknoise", -20.0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut samples = silence(6000);
        add_noise(dir, &mut samples, kind, db)?;
        cases.push(case(
            dir,
            format!("noise-{i}"),
            Truth::Noise,
            format!("6 s of {kind} at {db} dBFS"),
            samples,
            None,
        )?);
        progress.show(cases.len() as i64, total as i64, "generating");
    }
    eprintln!();
    Ok(cases)
}

/// A file as a call carries it: through PCMU and back, and written out.
fn case(
    dir: &Path,
    name: String,
    truth: Truth,
    description: String,
    samples: Vec<i16>,
    beep: Option<(u32, u32)>,
) -> anyhow::Result<Case> {
    let samples = pcmu_round_trip(&samples);
    write_wav(&dir.join(format!("{name}.wav")), &samples)?;
    Ok(Case {
        name,
        truth,
        description,
        samples,
        beep,
        result: None,
    })
}

fn ms_of(samples: usize) -> u32 {
    (samples * 1000 / RATE as usize) as u32
}

fn silence(ms: u32) -> Vec<i16> {
    vec![0; (RATE / 1000 * ms) as usize]
}

fn run_tool(command: &mut Command) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// `text` spoken by espeak-ng, trimmed of its silences, at 8 kHz with its peak at -2 to
/// -12 dBFS.
fn speak(
    dir: &Path,
    name: &str,
    text: &str,
    voice: &str,
    speed: u32,
    rng: &mut StdRng,
) -> anyhow::Result<Vec<i16>> {
    let raw = dir.join(format!("{name}.espeak.wav"));
    let out = dir.join(format!("{name}.speech.wav"));
    let pitch = rng.random_range(30..=70);
    run_tool(
        Command::new("espeak-ng")
            .args([
                "-v",
                voice,
                "-s",
                &speed.to_string(),
                "-p",
                &pitch.to_string(),
            ])
            .arg("-w")
            .arg(&raw)
            .arg(text),
    )?;
    let peak = rng.random_range(2.0..=12.0f64);
    run_tool(
        Command::new("sox")
            .arg("-R")
            .arg(&raw)
            .args(["-r", "8000", "-c", "1", "-b", "16"])
            .arg(&out)
            .args(["silence", "1", "0.02", "0.5%", "reverse"])
            .args(["silence", "1", "0.02", "0.5%", "reverse"])
            .args(["gain", "-n", &format!("-{peak:.1}")]),
    )?;
    let samples = read_wav(&out)?;
    let _ = std::fs::remove_file(&raw);
    let _ = std::fs::remove_file(&out);
    Ok(samples)
}

/// A voicemail tone of `hz` for `ms`, peak -6 to -14 dBFS, with 5 ms edges.
fn tone(dir: &Path, hz: u32, ms: u32, rng: &mut StdRng) -> anyhow::Result<Vec<i16>> {
    let out = dir.join(format!("beep-{hz}-{ms}.wav"));
    let peak = rng.random_range(6.0..=14.0f64);
    run_tool(
        Command::new("sox")
            .arg("-R")
            .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
            .arg(&out)
            .args(["synth", &format!("{:.3}", f64::from(ms) / 1000.0), "sine"])
            .arg(hz.to_string())
            .args(["fade", "q", "0.005", "0", "0.005"])
            .args(["gain", "-n", &format!("-{peak:.1}")]),
    )?;
    let samples = read_wav(&out)?;
    let _ = std::fs::remove_file(&out);
    Ok(samples)
}

/// Adds sox's `kind` of noise (whitenoise, pinknoise) at an RMS level of `db` dBFS.
fn add_noise(dir: &Path, samples: &mut [i16], kind: &str, db: f64) -> anyhow::Result<()> {
    let out = dir.join(format!("{kind}.wav"));
    let secs = samples.len() as f64 / f64::from(RATE) + 0.1;
    run_tool(
        Command::new("sox")
            .arg("-R")
            .args(["-n", "-r", "8000", "-c", "1", "-b", "16"])
            .arg(&out)
            .args(["synth", &format!("{secs:.2}"), kind])
            .args(["gain", "-n", "-3"]),
    )?;
    let noise = read_wav(&out)?;
    let _ = std::fs::remove_file(&out);
    let rms = (noise.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>()
        / noise.len().max(1) as f64)
        .sqrt()
        .max(1.0);
    let gain = 32768.0 * 10f64.powf(db / 20.0) / rms;
    for (s, n) in samples.iter_mut().zip(&noise) {
        *s = (f64::from(*s) + f64::from(*n) * gain).clamp(-32768.0, 32767.0) as i16;
    }
    Ok(())
}

fn pcmu_round_trip(samples: &[i16]) -> Vec<i16> {
    let mut encoder = audio_codec::create_encoder(CodecType::PCMU);
    let mut decoder = audio_codec::create_decoder(CodecType::PCMU);
    let mut out = Vec::with_capacity(samples.len());
    let mut bytes = [0u8; FRAME];
    let mut pcm = [0i16; FRAME];
    for frame in samples.chunks(FRAME) {
        let n = encoder.encode_into(frame, &mut bytes).unwrap_or(0);
        let m = decoder.decode_into(&bytes[..n], &mut pcm).unwrap_or(0);
        out.extend_from_slice(&pcm[..m]);
    }
    out
}

fn read_wav(path: &Path) -> anyhow::Result<Vec<i16>> {
    let reader =
        hound::WavReader::open(path).with_context(|| format!("reading {}", path.display()))?;
    let spec = reader.spec();
    if spec.channels != 1 || spec.sample_rate != RATE || spec.bits_per_sample != 16 {
        bail!("{}: not 8 kHz mono 16-bit", path.display());
    }
    Ok(reader.into_samples().collect::<Result<_, _>>()?)
}

fn write_wav(path: &Path, samples: &[i16]) -> anyhow::Result<()> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(path, spec)?;
    for &s in samples {
        writer.write_sample(s)?;
    }
    writer.finalize()?;
    Ok(())
}
