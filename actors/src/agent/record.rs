//! The call's record as the agent keeps it: the conversation (transcript, tool events, vendor
//! failures, the course's path), the model's context, and how many turns the plan's sink has
//! been told.

use crate::conversation::{Conversation, ToolEvent, Turn, TurnSink};
use crate::vendors::{ChatMessage, ToolCall};

/// What the call has said, heard and done so far.
#[derive(Debug, Default)]
pub(super) struct Record {
    conversation: Conversation,
    /// The model's context (its system prompt comes from the director each round).
    history: Vec<ChatMessage>,
    /// Turns handed to the plan's sink so far.
    told: usize,
}

impl Record {
    /// A tool's or a function's run, on the call's record.
    pub fn event(&mut self, event: ToolEvent) {
        self.conversation.events.push(event);
    }

    /// A vendor failed `at_ms` into the call.
    pub fn vendor_failed(
        &mut self,
        vendor: &str,
        what: &str,
        error: &dyn std::fmt::Display,
        at_ms: u64,
    ) {
        self.conversation.vendor_failed(vendor, what, error, at_ms);
    }

    /// A turn of the transcript.
    pub fn turn(&mut self, turn: Turn) {
        self.conversation.transcript.push(turn);
    }

    /// A message of the model's context.
    pub fn context(&mut self, message: ChatMessage) {
        self.history.push(message);
    }

    /// How many messages the model's context holds.
    pub fn context_len(&self) -> usize {
        self.history.len()
    }

    /// A function call and its result, in the model's context.
    pub fn tool_exchange(&mut self, call: ToolCall, content: String) {
        let tool_call_id = call.id.clone();
        self.history.push(ChatMessage::Assistant {
            text: None,
            tool_calls: vec![call],
        });
        self.history.push(ChatMessage::Tool {
            tool_call_id,
            content,
        });
    }

    /// The messages of the model's next round: `system`, then the context.
    pub fn messages(&self, system: String) -> Vec<ChatMessage> {
        let mut messages = Vec::with_capacity(self.history.len() + 1);
        messages.push(ChatMessage::System(system));
        messages.extend(self.history.iter().cloned());
        messages
    }

    /// Hands the transcript's turns not yet told to `sink`; each turn not yet placed is
    /// marked with `position` (where the director's course was when it was written down).
    pub fn tell(&mut self, sink: Option<&dyn TurnSink>, position: Option<String>) {
        for turn in self.conversation.transcript.iter_mut().skip(self.told) {
            if turn.node.is_none() {
                turn.node.clone_from(&position);
            }
        }
        let Some(sink) = sink else {
            self.told = self.conversation.transcript.len();
            return;
        };
        while let Some(turn) = self.conversation.transcript.get(self.told) {
            self.told += 1;
            sink.final_turn(self.told as u32, turn);
        }
    }

    /// The call's record, with the course's `path`.
    pub fn finish(mut self, path: Vec<super::director::PathStep>) -> Conversation {
        self.conversation.path = path;
        self.conversation
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::conversation::Speaker;

    #[derive(Debug, Default)]
    struct Sink(Mutex<Vec<(u32, String, Option<String>)>>);

    #[async_trait::async_trait]
    impl TurnSink for Sink {
        fn final_turn(&self, number: u32, turn: &Turn) {
            let mut told = self.0.lock().unwrap();
            told.push((number, turn.text.clone(), turn.node.clone()));
        }
        async fn flush(&self) {}
    }

    fn turn(text: &str) -> Turn {
        Turn {
            role: Speaker::User,
            text: text.into(),
            start_ms: 0,
            end_ms: 0,
            interrupted: false,
            node: None,
            unheard: None,
            digits: None,
        }
    }

    #[test]
    fn each_turn_is_told_once_with_where_the_course_was() {
        let (mut record, sink) = (Record::default(), Sink::default());
        record.turn(turn("Hello."));
        record.tell(Some(&sink), Some("ask".into()));
        record.turn(turn("Noon."));
        record.tell(Some(&sink), Some("check".into()));
        record.tell(Some(&sink), None);
        let told = sink.0.lock().unwrap().clone();
        assert_eq!(
            told,
            [
                (1, "Hello.".into(), Some("ask".into())),
                (2, "Noon.".into(), Some("check".into())),
            ]
        );
    }

    #[test]
    fn a_tool_exchange_goes_into_the_context_after_the_system_prompt() {
        let mut record = Record::default();
        record.context(ChatMessage::User("Book noon.".into()));
        let call = ToolCall {
            id: "1".into(),
            name: "book".into(),
            arguments: "{}".into(),
        };
        record.tool_exchange(call, "{\"ok\":true}".into());
        assert_eq!(record.context_len(), 3);
        let messages = record.messages("Be brief.".into());
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[0], ChatMessage::System("Be brief.".into()));
        assert!(
            matches!(&messages[3], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "1")
        );
        let conversation = record.finish(Vec::new());
        assert!(conversation.transcript.is_empty() && conversation.path.is_empty());
    }
}
