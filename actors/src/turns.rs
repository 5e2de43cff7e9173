//! The pieces of a conversation's turns that need no call: the agent's own lines, the built-in
//! functions, how a streamed reply is cut into sentences, how much of an interrupted sentence
//! was heard, and whether a caller's words sound finished.

use std::time::Duration;

use crate::vendors::ToolSpec;

/// Said once when a vendor fails during a turn.
pub const APOLOGY_LINE: &str =
    "Sorry, I'm having trouble hearing you right now. Could you say that again?";
/// Said at the end of a caller's turn when the agent has no model to answer with.
pub const FALLBACK_LINE: &str =
    "Sorry, I can't answer questions on this line yet. Please try again later.";
/// Asked once before a silence ends the call.
pub const STILL_THERE_LINE: &str = "Are you still there?";
/// Said once per turn when a tool is still running after [`FILLER_AFTER`] and the agent has
/// nothing else to say.
pub const FILLER_LINE: &str = "One moment, please.";
/// How long a tool runs before the caller hears [`FILLER_LINE`].
pub const FILLER_AFTER: Duration = Duration::from_millis(1200);
/// The most model rounds with tool results in one turn; after it the model is offered no
/// more of the workspace's tools and must answer.
pub const MAX_TOOL_ROUNDS: u32 = 4;
/// The built-in function that lets the model hang up.
pub const END_CALL: &str = "end_call";

/// The built-in functions offered to every model.
/// The function that sends keypad digits, offered on an outbound call's line.
pub const SEND_DIGITS: &str = "send_digits";

/// What the model is told of [`SEND_DIGITS`].
pub fn send_digits_tool() -> ToolSpec {
    ToolSpec {
        name: SEND_DIGITS.into(),
        description: "Press keys on the phone's keypad, to answer an automated phone menu (\"press 2 for billing\") or enter a number it asks for.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"digits": {
                "type": "string",
                "description": "The keys to press, in order: 0-9, * and #."
            }},
            "required": ["digits"]
        }),
    }
}

pub fn builtin_tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: END_CALL.into(),
        description: "Hang up the call, once the conversation is over and you have said goodbye."
            .into(),
        parameters: serde_json::json!({"type": "object", "properties": {}}),
    }]
}

/// Cuts a streamed reply into sentences as its text arrives, so each can be spoken while the
/// model writes the next.
#[derive(Debug, Default)]
pub struct Sentences {
    pending: String,
}

/// A sentence shorter than this waits for more text (so "Dr." or "No." alone do not become a
/// clip of their own) unless the reply ends.
const MIN_SENTENCE_CHARS: usize = 12;

impl Sentences {
    /// Adds `text`; the sentences it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        let mut out = Vec::new();
        while let Some(end) = sentence_end(&self.pending) {
            let sentence = self.pending[..end].trim().to_string();
            self.pending = self.pending[end..].to_string();
            if !sentence.is_empty() {
                out.push(sentence);
            }
        }
        out
    }

    /// The rest, once the reply has ended.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        let rest = rest.trim();
        (!rest.is_empty()).then(|| rest.to_string())
    }
}

/// Where the first complete sentence of `text` ends (after its punctuation), if one does: final
/// punctuation followed by white space, or a line break.
fn sentence_end(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let end = i + c.len_utf8();
        if c == '\n' && !text[..i].trim().is_empty() {
            return Some(end);
        }
        if matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
            && next.is_some_and(char::is_whitespace)
            && text[..end].trim().chars().count() >= MIN_SENTENCE_CHARS
        {
            return Some(end);
        }
    }
    None
}

/// The words of `text` heard when `played` of its `total` samples were played: as many whole
/// words as that share of the sentence, by characters.
pub fn words_heard(text: &str, played: usize, total: usize) -> String {
    if total == 0 || played >= total {
        return text.to_string();
    }
    let budget = text.chars().count() * played / total;
    let mut out = String::new();
    for word in text.split_whitespace() {
        let next = if out.is_empty() {
            word.chars().count()
        } else {
            out.chars().count() + 1 + word.chars().count()
        };
        if next > budget {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Whether the caller's words sound unfinished: no final punctuation, or a last word that
/// leads into more ("and", "but", "because", ...).
pub fn sounds_unfinished(text: &str) -> bool {
    let text = text.trim();
    if text.is_empty() {
        return false;
    }
    let last = text.chars().last().unwrap_or('.');
    if matches!(last, ',' | ';' | ':' | '-' | '—') {
        return true;
    }
    if !matches!(last, '.' | '!' | '?' | '…' | '。' | '！' | '？') {
        return true;
    }
    let word = text
        .trim_end_matches(|c: char| !c.is_alphanumeric())
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or("")
        .to_lowercase();
    matches!(
        word.as_str(),
        "and" | "but" | "or" | "so" | "because" | "the" | "a" | "to" | "um" | "uh" | "with"
    )
}

/// `template` with every `{{name}}` replaced by `variables[name]`; unknown names stay as
/// written.
pub fn fill(template: &str, variables: &serde_json::Map<String, serde_json::Value>) -> String {
    crate::flow::tokens::replace(template, |name| match variables.get(name) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_reply_is_cut_into_sentences() {
        let mut s = Sentences::default();
        assert!(s.push("Hello there, this is").is_empty());
        assert_eq!(
            s.push(" Ava. How can I help you today? I can"),
            ["Hello there, this is Ava.", "How can I help you today?"]
        );
        assert_eq!(s.push(" book a visit."), Vec::<String>::new());
        assert_eq!(s.finish().as_deref(), Some("I can book a visit."));
        assert_eq!(s.finish(), None);
        // Short pieces wait for more; decimals do not end a sentence.
        let mut s = Sentences::default();
        assert!(s.push("No. ").is_empty());
        assert_eq!(
            s.push("It costs 3.50 dollars. Fine"),
            ["No. It costs 3.50 dollars."]
        );
    }

    #[test]
    fn an_interrupted_sentence_keeps_the_words_played() {
        let text = "Your appointment is on Tuesday at ten";
        assert_eq!(words_heard(text, 0, 100), "");
        assert_eq!(words_heard(text, 50, 100), "Your appointment");
        assert_eq!(words_heard(text, 100, 100), text);
        assert_eq!(words_heard(text, 5, 0), text);
    }

    #[test]
    fn unfinished_words_are_told_from_finished_ones() {
        assert!(sounds_unfinished("I would like to book"));
        assert!(sounds_unfinished("Tuesday, and"));
        assert!(sounds_unfinished("My number is,"));
        assert!(sounds_unfinished("Yes and."));
        assert!(!sounds_unfinished("I would like to book a visit."));
        assert!(!sounds_unfinished("Is it open?"));
        assert!(!sounds_unfinished(""));
    }

    #[test]
    fn variables_fill_their_tokens() {
        let vars = serde_json::json!({"name": "Dana", "visits": 3, "none": null});
        let vars = vars.as_object().unwrap();
        assert_eq!(
            fill(
                "Hi {{name}}, visit {{ visits }} of {{total}}{{none}}.",
                vars
            ),
            "Hi Dana, visit 3 of {{total}}{{none}}."
        );
        assert_eq!(fill("open {{name", vars), "open {{name");
    }
}
