//! The simulator's scripted model: the model's choices written in the request (at which caller
//! turn, which edge to take, which arguments to fill, what to say), played back as its
//! answers, so a flow's wiring is tested with no model at all.
//!
//! At each round the model is asked for, the first unused choice for the caller turn the call
//! is at (the caller's turns so far, words or keypad entries; 0 before the first) answers it:
//! where the round must fill arguments, it fills them with the choice's `arguments`; otherwise
//! it says the choice's `say`, then calls the edge to the choice's `edge` node with the
//! `arguments` (an edge the node does not offer is called all the same, and the flow answers
//! that there is none). A round with no choice left says nothing; a round after a function's
//! answer takes the next choice of the same turn, if there is one.

use std::sync::Mutex;

use async_trait::async_trait;
use futures_util::stream;
use serde_json::{Map, Value};
use switchboard_actors::flow::run::edge_function;
use switchboard_actors::vendors::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, ToolCall, VendorError,
};

/// One of the model's choices.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The caller turn it answers (1: the first; 0: before the caller has said anything).
    pub turn: usize,
    /// What the model says first.
    pub say: Option<String>,
    /// The node whose edge the model takes.
    pub edge: Option<String>,
    /// The edge's arguments (the node's variables), or those a node waits for.
    pub arguments: Map<String, Value>,
}

/// The choices, each marked once used.
pub struct ScriptedModel {
    choices: Mutex<Vec<(Choice, bool)>>,
}

impl ScriptedModel {
    pub fn new(choices: Vec<Choice>) -> ScriptedModel {
        ScriptedModel {
            choices: Mutex::new(choices.into_iter().map(|c| (c, false)).collect()),
        }
    }

    /// The choices never used, by their place in the request.
    pub fn unused(&self) -> Vec<usize> {
        let choices = self.choices.lock().unwrap_or_else(|e| e.into_inner());
        choices
            .iter()
            .enumerate()
            .filter(|(_, (_, used))| !used)
            .map(|(i, _)| i)
            .collect()
    }

    /// The next unused choice for `turn`, marked used.
    fn take(&self, turn: usize) -> Option<Choice> {
        let mut choices = self.choices.lock().unwrap_or_else(|e| e.into_inner());
        let (choice, used) = choices
            .iter_mut()
            .find(|(c, used)| !used && c.turn == turn)?;
        *used = true;
        Some(choice.clone())
    }
}

/// The events of one answer to `request` by `choice`.
fn answer(request: &ChatRequest, choice: Option<Choice>, round: usize) -> Vec<ChatEvent> {
    let mut events = Vec::new();
    if let Some(choice) = choice {
        let call = |name: String| ToolCall {
            id: format!("scripted-{round}"),
            name,
            arguments: Value::Object(choice.arguments.clone()).to_string(),
        };
        match (&request.force, &choice.edge) {
            (Some(forced), _) => events.push(ChatEvent::ToolCall(call(forced.clone()))),
            (None, edge) => {
                if let Some(say) = choice.say.as_ref().filter(|s| !s.trim().is_empty()) {
                    events.push(ChatEvent::Text(say.clone()));
                }
                if let Some(edge) = edge {
                    // The edge as the node offers it (a second edge to a node of the same name
                    // is suffixed), else its plain name.
                    let base = edge_function(edge);
                    let name = request
                        .tools
                        .iter()
                        .map(|t| &t.name)
                        .find(|n| {
                            **n == base || n.strip_prefix(&base).is_some_and(|r| r.starts_with('_'))
                        })
                        .cloned()
                        .unwrap_or(base);
                    events.push(ChatEvent::ToolCall(call(name)));
                }
            }
        }
    }
    events.push(ChatEvent::Done {
        finish_reason: Some("stop".into()),
        usage: None,
    });
    events
}

#[async_trait]
impl ChatModel for ScriptedModel {
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, VendorError> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::User(_)))
            .count();
        let round = request.messages.len();
        let choice = self.take(turn);
        let events = answer(&request, choice, round);
        Ok(Box::pin(stream::iter(events.into_iter().map(Ok))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use switchboard_actors::vendors::ToolSpec;

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        }
    }

    async fn events(model: &ScriptedModel, request: ChatRequest) -> Vec<ChatEvent> {
        let stream = model.stream(request).await.unwrap();
        stream.map(|e| e.unwrap()).collect().await
    }

    #[tokio::test]
    async fn each_turn_takes_its_choices_in_order() {
        let model = ScriptedModel::new(vec![
            Choice {
                turn: 1,
                say: Some("Let me check.".into()),
                edge: Some("check".into()),
                arguments: serde_json::json!({"time": "ten"})
                    .as_object()
                    .unwrap()
                    .clone(),
            },
            Choice {
                turn: 1,
                say: None,
                edge: None,
                arguments: serde_json::json!({"email": "a@b.c"})
                    .as_object()
                    .unwrap()
                    .clone(),
            },
            Choice {
                turn: 3,
                say: Some("Never reached.".into()),
                edge: None,
                arguments: Map::new(),
            },
        ]);
        // Before the caller speaks there is no choice: nothing is said.
        let opening = ChatRequest::default();
        assert_eq!(events(&model, opening).await.len(), 1);
        let first = ChatRequest {
            messages: vec![ChatMessage::User("Ten, please.".into())],
            tools: vec![tool("go_to_check"), tool("go_to_bye")],
            ..ChatRequest::default()
        };
        let got = events(&model, first.clone()).await;
        assert_eq!(got[0], ChatEvent::Text("Let me check.".into()));
        let ChatEvent::ToolCall(call) = &got[1] else {
            panic!("{got:?}")
        };
        assert_eq!(
            (call.name.as_str(), call.arguments.as_str()),
            ("go_to_check", r#"{"time":"ten"}"#)
        );
        // A forced round of the same turn fills the next choice's arguments.
        let forced = ChatRequest {
            force: Some("extract_arguments".into()),
            ..first
        };
        let got = events(&model, forced).await;
        let ChatEvent::ToolCall(call) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(call.name, "extract_arguments");
        assert_eq!(call.arguments, r#"{"email":"a@b.c"}"#);
        assert_eq!(model.unused(), [2]);
    }

    #[tokio::test]
    async fn an_edge_not_offered_is_called_by_its_plain_name() {
        let model = ScriptedModel::new(vec![Choice {
            turn: 0,
            say: None,
            edge: Some("front desk".into()),
            arguments: Map::new(),
        }]);
        let got = events(&model, ChatRequest::default()).await;
        let ChatEvent::ToolCall(call) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(call.name, "go_to_front_desk");
    }
}
