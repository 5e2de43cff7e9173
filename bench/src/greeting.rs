//! Speech the benchmarks play: the answering peer's machine greeting (spoken by espeak-ng when
//! it is installed, else a speech-like pattern of voiced syllables with pitch movement and
//! pauses between words, then a beep) and a person's "hello", encoded once in 20 ms frames of
//! the peer's codec; and any other line spoken the same way (the converse callers').

use std::path::Path;

use switchboard_sip::sdp::Codec;

const TEXT: &str = "Hello, you have reached the voicemail of Dana Cohen. I am not available to \
    take your call right now. Please leave your name, your number and a short message after \
    the tone, and I will call you back as soon as I can. Thank you.";

/// The greeting as 16-bit samples at `rate`, and what made it (`espeak-ng` or `synthetic`).
pub fn samples(rate: u32, wav: Option<&Path>) -> anyhow::Result<(Vec<i16>, &'static str)> {
    let mut audio = match wav {
        Some(path) => (crate::measure::load_wav(path, rate)?, "wav"),
        None => match espeak(rate, TEXT) {
            Some(spoken) => (spoken, "espeak-ng"),
            None => (synthetic(rate), "synthetic"),
        },
    };
    // Half a second of quiet, then the beep.
    audio.0.extend(std::iter::repeat_n(0, rate as usize / 2));
    audio.0.extend(crate::measure::tone(
        rate,
        1000.0,
        rate as usize / 2,
        12_000.0,
    ));
    Ok(audio)
}

/// A person answering: "Hello?" (espeak-ng, else two voiced syllables), then a little quiet.
pub fn hello(rate: u32) -> Vec<i16> {
    let mut audio = espeak(rate, "Hello?").unwrap_or_else(|| {
        let mut s = synthetic(rate);
        s.truncate(rate as usize / 2);
        s
    });
    audio.extend(std::iter::repeat_n(0, rate as usize / 5));
    audio
}

/// Encodes audio into 20 ms frames.
pub fn frames(codec: Codec, audio: &[i16]) -> Vec<Vec<u8>> {
    let mut enc = switchboard_sip::audio_codec::create_encoder(codec.codec_type());
    audio
        .chunks(codec.frame_samples())
        .map(|chunk| {
            let mut frame = chunk.to_vec();
            frame.resize(codec.frame_samples(), 0);
            enc.encode(&frame)
        })
        .collect()
}

/// `text` spoken by espeak-ng at `rate`; none if it is not installed or fails.
pub(crate) fn espeak(rate: u32, text: &str) -> Option<Vec<i16>> {
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("greeting.wav");
    let status = std::process::Command::new("espeak-ng")
        .arg("-w")
        .arg(&path)
        .arg(text)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    crate::measure::load_wav(&path, rate).ok()
}

/// About twelve seconds of voiced syllables: a glottal pulse train (pitch gliding around
/// 110-190 Hz) through two formant-like resonances, shaped per syllable, with pauses.
pub(crate) fn synthetic(rate: u32) -> Vec<i16> {
    let rate_f = f64::from(rate);
    let mut out = Vec::with_capacity(rate as usize * 13);
    let mut seed: u32 = 0x2545_f491;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        f64::from(seed) / f64::from(u32::MAX)
    };
    let mut phase = 0.0f64;
    while out.len() < rate as usize * 12 {
        let syllables = 2 + (next() * 4.0) as usize;
        for _ in 0..syllables {
            let len = ((0.12 + next() * 0.16) * rate_f) as usize;
            let pitch0 = 110.0 + next() * 80.0;
            let glide = (next() - 0.5) * 40.0;
            let (f1, f2) = (300.0 + next() * 500.0, 900.0 + next() * 1400.0);
            for i in 0..len {
                let x = i as f64 / len as f64;
                let pitch = pitch0 + glide * x;
                phase += pitch / rate_f;
                let t = i as f64 / rate_f;
                let pulse = (phase.fract() * 2.0 - 1.0).abs();
                let voiced = pulse
                    * (0.6 * (2.0 * std::f64::consts::PI * f1 * t).sin()
                        + 0.4 * (2.0 * std::f64::consts::PI * f2 * t).sin());
                let envelope = (std::f64::consts::PI * x).sin().powf(0.7);
                out.push((voiced * envelope * 9_000.0) as i16);
            }
            out.extend(std::iter::repeat_n(
                0,
                ((0.03 + next() * 0.06) * rate_f) as usize,
            ));
        }
        out.extend(std::iter::repeat_n(
            0,
            ((0.15 + next() * 0.25) * rate_f) as usize,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_greeting_speaks_and_pauses() {
        let audio = synthetic(8000);
        assert!(audio.len() >= 8000 * 12);
        let levels: Vec<f64> = audio
            .chunks(160)
            .map(switchboard_sip::vad::level_db)
            .collect();
        let loud = levels.iter().filter(|db| **db > -30.0).count();
        let quiet = levels.iter().filter(|db| **db < -60.0).count();
        assert!(loud > levels.len() / 3, "{loud} of {}", levels.len());
        assert!(quiet > levels.len() / 10, "{quiet} of {}", levels.len());
        let encoded = frames(Codec::Pcmu, &audio);
        assert!(encoded.iter().all(|f| f.len() == 160));
    }
}
