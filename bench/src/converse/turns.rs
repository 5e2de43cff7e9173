//! What the callers observed, tied to what the stand-in vendors were asked, and the latency
//! Switchboard added to each turn.
//!
//! A turn's reply is found from the call and the moment its first audio came back: of the
//! completions that call's agent asked for (the chat request names the call), the one whose
//! first sentence was synthesized last before that moment. Its last user message names the
//! transcriptions it answers (their item numbers), the text it was given to speak names the
//! reply and the part. The end of the caller's turn is when the last of those transcriptions
//! was answered: the transcripts end in a full stop, so the agent ends the turn on receiving it.
//!
//! Added latency = (chat request arrived - transcription answered)
//!               + (speech request arrived - first sentence written)
//!               + (first reply audio arrived - speech answered),
//! which is the time from the end of the turn to the first reply audio less the vendors' own
//! time on that path.

use std::collections::HashSet;
use std::time::Instant;

use super::vendors::Records;

/// One caller turn as the caller saw it.
#[derive(Debug, Clone)]
pub struct TurnSeen {
    pub call: usize,
    /// From 0.
    pub turn: u32,
    /// When the first reply packet carrying audio arrived; none if no reply came.
    pub first_audio: Option<Instant>,
}

/// Where the time of one turn went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Added {
    /// All that Switchboard added: the sum of the three parts.
    pub total: f64,
    /// From the transcription's answer to the chat request.
    pub to_chat: f64,
    /// From the first sentence to its speech request.
    pub to_speech: f64,
    /// From the speech answer to the first reply audio on the wire.
    pub to_audio: f64,
    /// The vendors' own time on the path (chat to its first sentence, and that speech).
    pub vendors: f64,
}

fn ms(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        later.duration_since(earlier).as_secs_f64() * 1000.0
    } else {
        -(earlier.duration_since(later).as_secs_f64() * 1000.0)
    }
}

/// Ties turns to the requests behind their replies; each reply serves one turn at most.
pub struct Matcher<'a> {
    records: &'a Records,
    used: HashSet<usize>,
}

impl<'a> Matcher<'a> {
    pub fn new(records: &'a Records) -> Matcher<'a> {
        Matcher {
            records,
            used: HashSet::new(),
        }
    }

    /// The added latency of `turn`, or why it could not be told.
    pub fn added(&mut self, turn: &TurnSeen) -> Result<Added, &'static str> {
        let audio = turn.first_audio.ok_or("no reply audio")?;
        let records = self.records;
        let (reply, chat, speech) = records
            .chat
            .iter()
            .enumerate()
            .filter(|(_, c)| c.call == Some(turn.call))
            .filter_map(|(i, c)| Some((i, c, records.tts.get(&(i as u64, 1))?)))
            .filter(|(_, _, speech)| speech.answered <= audio)
            .max_by_key(|(_, _, speech)| speech.answered)
            .ok_or("no reply synthesized before the audio came")?;
        if !self.used.insert(reply) {
            return Err("the reply was already heard in an earlier turn");
        }
        let first_sentence = chat.first_sentence.ok_or("no first sentence written")?;
        let turn_end = chat
            .items
            .iter()
            .map(|&i| records.stt.get(i as usize).map(|t| t.answered))
            .collect::<Option<Vec<_>>>()
            .and_then(|ends| ends.into_iter().max())
            .ok_or("the reply answers no known transcription")?;
        let to_chat = ms(chat.arrived, turn_end);
        let to_speech = ms(speech.arrived, first_sentence);
        let to_audio = ms(audio, speech.answered);
        Ok(Added {
            total: to_chat + to_speech + to_audio,
            to_chat,
            to_speech,
            to_audio,
            vendors: ms(first_sentence, chat.arrived) + ms(speech.answered, speech.arrived),
        })
    }
}

/// A barge-in's stop time in milliseconds: from when the agent could first have known the
/// caller was speaking to the last reply packet carrying audio after the caller started. That
/// moment is when the packet after the VAD's `start_secs` of speech went out (`heard`), else
/// the speech's start plus `start_secs`: the same on time, and a phone that sent its speech
/// late does not count its lateness against the server.
pub fn barge_in_ms(
    speech_start: Instant,
    heard: Option<Instant>,
    start_secs: f64,
    last_audio: Instant,
) -> f64 {
    match heard {
        Some(heard) => ms(last_audio, heard),
        None => ms(last_audio, speech_start) - start_secs * 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::vendors::{Chat, Timed};
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn added_latency_leaves_out_the_vendors_time() {
        let t0 = Instant::now();
        let timed = |a: u64, b: u64| Timed {
            arrived: at(t0, a),
            answered: at(t0, b),
        };
        let chat = |call: usize, items: Vec<u64>, a: u64, b: u64| Chat {
            call: Some(call),
            items,
            arrived: at(t0, a),
            first_sentence: Some(at(t0, b)),
        };
        // Items 0 and 1: two utterances of call 3's first turn; item 2: call 5's.
        let records = Records {
            stt: vec![timed(0, 100), timed(50, 150), timed(60, 160)],
            chat: vec![chat(3, vec![0, 1], 155, 475), chat(5, vec![2], 170, 490)],
            tts: HashMap::from([
                ((0, 1), timed(480, 600)),
                ((0, 2), timed(481, 601)),
                ((1, 1), timed(500, 620)),
            ]),
            tts_unmatched: 0,
        };
        let mut matcher = Matcher::new(&records);
        let turn = TurnSeen {
            call: 3,
            turn: 0,
            first_audio: Some(at(t0, 615)),
        };
        let added = matcher.added(&turn).unwrap();
        // (155 - 150) + (480 - 475) + (615 - 600)
        assert!((added.total - 25.0).abs() < 1e-6, "{added:?}");
        assert!((added.to_chat - 5.0).abs() < 1e-6);
        assert!((added.to_audio - 15.0).abs() < 1e-6);
        // Chat 155 -> 475, speech 480 -> 600.
        assert!((added.vendors - 440.0).abs() < 1e-6);
        // End of turn to audio, less the vendors' time.
        assert!((615.0 - 150.0 - added.vendors - added.total).abs() < 1e-6);
        // The same reply does not serve a second turn.
        assert!(matcher.added(&TurnSeen { turn: 1, ..turn }).is_err());
        // Audio that came before its reply's speech was answered has no reply.
        let early = TurnSeen {
            call: 5,
            turn: 0,
            first_audio: Some(at(t0, 610)),
        };
        assert!(matcher.added(&early).is_err());
        let none = TurnSeen {
            first_audio: None,
            ..early
        };
        assert_eq!(matcher.added(&none), Err("no reply audio"));
    }

    #[test]
    fn barge_in_counts_from_when_the_vad_could_know() {
        let t0 = Instant::now();
        assert!((barge_in_ms(t0, None, 0.2, at(t0, 230)) - 30.0).abs() < 1e-6);
        assert!((barge_in_ms(at(t0, 10), None, 0.2, at(t0, 200)) + 10.0).abs() < 1e-6);
        // The phone sent its speech 50 ms late: counted from the packet after the VAD's start.
        assert!((barge_in_ms(t0, Some(at(t0, 250)), 0.2, at(t0, 280)) - 30.0).abs() < 1e-6);
    }
}
