//! The labelled set: what each file is ([`Truth`]), the file as a call carries it ([`Case`])
//! and what the detection made of it ([`Outcome`]).

use switchboard_sip::amd::AnsweredBy;

/// The calls' sample rate.
pub(crate) const RATE: u32 = 8000;
/// Samples in a 20 ms frame.
pub(crate) const FRAME: usize = 160;

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
