//! The labelled set's generation: voicemail greetings (in several voices and speeds, some with
//! a beep after them) and people's short answers (on clean, hissing or noisy lines) spoken by
//! espeak-ng and shaped by sox, silent lines and lines of noise; each brought through PCMU and
//! back, as a call carries it, and written out as a WAV file.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use switchboard_sip::audio_codec::{self, CodecType};

use super::cases::{Case, FRAME, RATE, Truth};
use crate::progress::Progress;

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

/// The labelled set, drawn from `rng`: each greeting and answer in `variants` versions, then
/// silent lines and noisy ones; every file written to `dir` as a call carries it.
pub(super) fn generate(dir: &Path, rng: &mut StdRng, variants: usize) -> anyhow::Result<Vec<Case>> {
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
