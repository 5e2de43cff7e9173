//! The flow simulator: a flow agent's call run on the text line, through the same director and
//! turn loop as a real call. The caller is a script of turns, or the model playing a described
//! caller. In a dry run, tool_call and integration_call nodes answer with the `sample_result`
//! declared on the node and nothing is dispatched.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use switchboard_actors::agent::director::Director;
use switchboard_actors::agent::text::{TextCaller, text_line};
use switchboard_actors::agent::{AgentPlan, EndReason, Mind, converse};
use switchboard_actors::call_tools::{
    CallParties, CallTools, IntegrationRun, Integrations, ToolRun,
};
use switchboard_actors::conversation::{ToolEvent, ToolStatus, Turn};
use switchboard_actors::flow::{Flow, FlowDirector, FlowRun, GraphIssue, Outcome, PathStep};
use switchboard_actors::vendors::{ChatMessage, ChatModel, ChatRequest};
use switchboard_sip::media::ListenSettings;
use tokio_util::sync::CancellationToken;

use crate::edge::speech::Tones;
use crate::store::{Agent, FlowConfig};

/// One turn of a scripted caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptTurn {
    /// The caller says these words.
    Says(String),
    /// The caller presses these keys, one after another (an entry, as the node gathers it).
    Presses(Vec<switchboard_sip::dtmf::Digit>),
}

/// Who plays the caller.
#[derive(Debug, Clone)]
pub enum Caller {
    /// These turns, in order; then the caller hangs up.
    Script(Vec<ScriptTurn>),
    /// The model plays a caller so described, for at most `max_turns` turns.
    Played {
        description: String,
        max_turns: usize,
    },
}

/// A simulation's settings.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub caller: Caller,
    /// The call's metadata (the flow's declared custom keys; the built-ins are the
    /// simulator's).
    pub metadata: Map<String, Value>,
    /// The agent's `{{variables}}`.
    pub variables: Map<String, Value>,
    pub dry_run: bool,
    /// A dry run's answers of tools whose node declares no `sample_result`: the tools'
    /// own (`config.sample_result`), by tool id.
    pub tool_samples: HashMap<String, Value>,
}

/// What a simulation did.
#[derive(Debug, Clone)]
pub struct Simulated {
    pub transcript: Vec<Turn>,
    pub path: Vec<PathStep>,
    /// Every function, tool and integration run, with its arguments and result.
    pub events: Vec<ToolEvent>,
    /// The values gathered, as `<node_id>.<name>`.
    pub values: Map<String, Value>,
    pub final_node: Option<String>,
    /// `agent_hangup`, `caller_hangup` (the script ended), `transferred`, or `time_limit`.
    pub end_reason: EndReason,
}

/// Why a simulation did not run.
#[derive(Debug, thiserror::Error)]
pub enum SimulationError {
    /// The flow cannot run: its issues.
    #[error("the flow cannot run: {} issue(s)", .0.len())]
    Invalid(Vec<GraphIssue>),
    /// The agent's task failed (a fault inside the service).
    #[error("the simulated call failed: {0}")]
    Failed(String),
}

/// The call's tools and the flow's integrations, as a real run dispatches them (a dry run
/// answers both from samples instead).
pub type Ports = (Option<Arc<dyn CallTools>>, Option<Arc<dyn Integrations>>);

/// Longest a simulation runs.
pub const TIME_LIMIT: Duration = Duration::from_secs(90);
/// Most caller turns of a simulation.
pub const MAX_TURNS: usize = 50;

/// The models of a simulation: the flow's (the configured one, or a scripted one) and the one
/// that plays a described caller.
pub struct Models {
    pub flow: Option<Arc<dyn ChatModel>>,
    pub caller: Option<Arc<dyn ChatModel>>,
}

/// Runs `agent` with `flow` (a version of its flow) on the text line; without a flow model a
/// flow whose steps need none runs whole, and one that reaches a step that needs it ends
/// `model_not_configured` there.
pub async fn simulate(
    agent: &Agent,
    flow: &FlowConfig,
    models: Models,
    (tools, integrations): Ports,
    simulation: Simulation,
) -> Result<Simulated, SimulationError> {
    let model = models.flow;
    let read = Flow::compile(flow).map_err(SimulationError::Invalid)?;
    let samples = samples(flow);
    let (tools, integrations): Ports = if simulation.dry_run {
        let dry = Arc::new(DryRun {
            specs: tools
                .as_ref()
                .map(|t| t.specs().to_vec())
                .unwrap_or_default(),
            by_id: tools.as_ref().map(|t| t.by_id()).unwrap_or_default(),
            samples,
            tool_samples: tools
                .as_ref()
                .map(|t| t.by_id())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(id, spec)| {
                    Some((spec.name, simulation.tool_samples.get(&id)?.clone()))
                })
                .collect(),
        });
        (Some(dry.clone()), Some(dry))
    } else {
        (tools, integrations)
    };
    let metadata = crate::runtime::flows::call_metadata(
        agent,
        switchboard_actors::ids::CallId::new(),
        "outbound",
        ("simulator", "simulator"),
        &simulation.metadata,
    );
    let by_id = tools.as_ref().map(|t| t.by_id()).unwrap_or_default();
    let run = FlowRun::new(Arc::new(read), metadata, by_id);
    let director = Box::new(FlowDirector::new(
        run,
        switchboard_actors::turns::fill(&agent.system_prompt, &simulation.variables),
        Some(agent.temperature as f32),
    ));
    let plan = AgentPlan {
        mind: Some(Mind {
            model: model.clone(),
            // A text line carries words, never audio.
            transcriber: None,
            director,
            notes: Vec::new(),
            // A text line hears no audio: these are never used.
            listen: ListenSettings {
                pause_secs: 0.4,
                pre_roll_secs: 0.3,
                max_secs: 60.0,
            },
            unfinished_grace: Duration::ZERO,
            max_continuous_speech: Duration::from_secs(60),
            tools,
            integrations,
        }),
        turns: None,
        greeting: String::new(),
        agent_speaks_first: false,
        voice: agent.voice.clone(),
        language: agent.language.clone(),
        silence_timeout: TIME_LIMIT,
        max_duration: TIME_LIMIT,
        amd: None,
    };
    let (line, mut caller) = text_line(CallParties::default());
    let stop = CancellationToken::new();
    // A text line voices nothing: no speech vendor is called.
    let speech: Arc<dyn switchboard_actors::agent::Speech> = Arc::new(Tones);
    let agent_stop = stop.clone();
    let call = tokio::spawn(async move {
        converse(
            Box::new(line),
            &plan,
            &speech,
            tokio::time::Instant::now(),
            agent_stop,
        )
        .await
    });
    let played = tokio::time::timeout(
        TIME_LIMIT,
        play(&mut caller, &simulation.caller, models.caller.as_deref()),
    )
    .await;
    if played.is_err() {
        stop.cancel();
    }
    caller.hang_up();
    let end = call
        .await
        .map_err(|e| SimulationError::Failed(e.to_string()))?;
    // The call's director as the call left it: the flow's values and where it stopped.
    let director = end.director.map(|d| d as Box<dyn std::any::Any>);
    let flow = director
        .as_ref()
        .and_then(|d| d.downcast_ref::<FlowDirector>());
    Ok(Simulated {
        transcript: end.conversation.transcript,
        path: end.conversation.path,
        events: end.conversation.events,
        values: flow.map(|f| f.values().clone()).unwrap_or_default(),
        final_node: flow.and_then(|f| f.position()),
        end_reason: match played {
            Err(_) => EndReason::TimeLimit,
            Ok(()) => end.reason,
        },
    })
}

/// The caller's side: the agent's opening, then each turn and the agent's reply, until the
/// script ends or the agent hangs up.
async fn play(caller: &mut TextCaller, who: &Caller, model: Option<&dyn ChatModel>) {
    let mut heard: Vec<(bool, String)> = Vec::new();
    let (said, hung_up) = caller.reply().await;
    heard.push((true, said.join(" ")));
    if hung_up {
        return;
    }
    for n in 0..MAX_TURNS {
        let turn = match who {
            Caller::Script(turns) => match turns.get(n) {
                Some(ScriptTurn::Says(words)) => words.clone(),
                Some(ScriptTurn::Presses(digits)) => {
                    if !caller.press(digits) {
                        return;
                    }
                    let keys: String = digits.iter().map(|d| d.as_char()).collect();
                    heard.push((false, format!("[keypad: {keys}]")));
                    let (said, hung_up) = caller.reply().await;
                    heard.push((true, said.join(" ")));
                    if hung_up {
                        return;
                    }
                    continue;
                }
                None => return,
            },
            Caller::Played {
                description,
                max_turns,
            } => {
                let Some(model) = model.filter(|_| n < *max_turns) else {
                    return;
                };
                match played_turn(model, description, &heard).await {
                    Some(turn) => turn,
                    None => return,
                }
            }
        };
        if !caller.say(&turn) {
            return;
        }
        heard.push((false, turn));
        let (said, hung_up) = caller.reply().await;
        heard.push((true, said.join(" ")));
        if hung_up {
            return;
        }
    }
}

/// The played caller's next line, from the conversation so far (`true`: the agent's).
async fn played_turn(
    model: &dyn ChatModel,
    description: &str,
    heard: &[(bool, String)],
) -> Option<String> {
    let mut messages = vec![ChatMessage::System(format!(
        "You are a caller on a phone call with an agent. {description}\n\
         Answer with your next line only, as you would say it; say \"[hang up]\" to end the call."
    ))];
    for (agent, text) in heard.iter().filter(|(_, t)| !t.is_empty()) {
        messages.push(if *agent {
            ChatMessage::User(text.clone())
        } else {
            ChatMessage::Assistant {
                text: Some(text.clone()),
                tool_calls: Vec::new(),
            }
        });
    }
    let request = ChatRequest {
        messages,
        temperature: Some(0.7),
        max_tokens: Some(200),
        ..ChatRequest::default()
    };
    let text = collect_text(model, request).await?;
    let text = text.trim();
    (!text.is_empty() && !text.contains("[hang up]")).then(|| text.to_string())
}

async fn collect_text(model: &dyn ChatModel, request: ChatRequest) -> Option<String> {
    use futures_util::StreamExt;
    let mut stream = model.stream(request).await.ok()?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event.ok()? {
            switchboard_actors::vendors::ChatEvent::Text(t) => text.push_str(&t),
            switchboard_actors::vendors::ChatEvent::Done { .. } => break,
            _ => {}
        }
    }
    Some(text)
}

/// The `sample_result` of each node that declares one.
fn samples(flow: &FlowConfig) -> HashMap<String, Value> {
    flow.nodes
        .iter()
        .filter_map(|n| Some((n.id().to_string(), n.sample_result()?.clone())))
        .collect()
}

/// A dry run's tools and integrations: each answers with its node's `sample_result`, else a
/// tool's own, else `{}`; nothing leaves the service.
struct DryRun {
    specs: Vec<switchboard_actors::vendors::ToolSpec>,
    by_id: HashMap<String, switchboard_actors::vendors::ToolSpec>,
    samples: HashMap<String, Value>,
    /// Tools' own samples, by function name.
    tool_samples: HashMap<String, Value>,
}

impl DryRun {
    fn answer(&self, node_id: &str, name: &str, arguments: Value) -> (Value, ToolEvent) {
        let sample = self
            .samples
            .get(node_id)
            .or_else(|| self.tool_samples.get(name))
            .cloned()
            .unwrap_or(json!({}));
        let event = ToolEvent {
            response_preview: Some(format!("dry run: {sample}")),
            raw_response_preview: None,
            ..ToolEvent::at_once(name, arguments, ToolStatus::Succeeded, None)
        };
        (sample, event)
    }
}

#[async_trait]
impl CallTools for DryRun {
    fn specs(&self) -> &[switchboard_actors::vendors::ToolSpec] {
        &self.specs
    }

    fn by_id(&self) -> HashMap<String, switchboard_actors::vendors::ToolSpec> {
        self.by_id.clone()
    }

    async fn run(
        &self,
        call: &switchboard_actors::vendors::ToolCall,
        _parties: &CallParties,
    ) -> ToolRun {
        let node = switchboard_actors::agent::director::node_of_dispatch(&call.id).unwrap_or("");
        let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let (sample, event) = self.answer(node, &call.name, arguments);
        ToolRun {
            content: sample.to_string(),
            event,
        }
    }
}

#[async_trait]
impl Integrations for DryRun {
    async fn run(
        &self,
        node_id: &str,
        _integration_id: &str,
        provider: &str,
        action: &str,
        arguments: &Map<String, Value>,
    ) -> IntegrationRun {
        let name = format!("{provider}.{action}");
        let (sample, event) = self.answer(node_id, &name, Value::Object(arguments.clone()));
        IntegrationRun {
            outcome: Outcome::Done(sample),
            event,
        }
    }
}

/// The caller's turns of a transcript.
pub fn caller_turns(transcript: &[Turn]) -> Vec<&Turn> {
    transcript
        .iter()
        .filter(|t| t.role == switchboard_actors::conversation::Speaker::User)
        .collect()
}

/// A past call's caller turns as a script: their words, or the keys they pressed (a turn that
/// was not heard has neither and is left out).
pub fn replayed(transcript: &[Turn]) -> Vec<ScriptTurn> {
    caller_turns(transcript)
        .into_iter()
        .filter_map(|t| match &t.digits {
            Some(keys) => switchboard_sip::dtmf::Digit::parse_all(keys)
                .ok()
                .filter(|d| !d.is_empty())
                .map(ScriptTurn::Presses),
            None => (!t.text.trim().is_empty()).then(|| ScriptTurn::Says(t.text.clone())),
        })
        .collect()
}

/// Each caller turn with where it was heard (its node) and answered (the node of the agent's
/// next turn, else the call's last node), in `original` and in `replay`; the first turn
/// where they differ.
pub fn compare(call: uuid::Uuid, original: &[Turn], replay: &[Turn]) -> Value {
    let places = |transcript: &[Turn]| -> Vec<(Option<String>, Option<String>)> {
        let last = transcript.iter().rev().find_map(|t| t.node.clone());
        transcript
            .iter()
            .enumerate()
            .filter(|(_, t)| t.role == switchboard_actors::conversation::Speaker::User)
            .map(|(i, t)| {
                let answered = transcript[i + 1..]
                    .iter()
                    .find(|n| n.role == switchboard_actors::conversation::Speaker::Agent)
                    .and_then(|n| n.node.clone())
                    .or_else(|| last.clone());
                (t.node.clone(), answered)
            })
            .collect()
    };
    let (before, after) = (places(original), places(replay));
    let texts = caller_turns(original);
    let mut first = None;
    let turns: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, turn)| {
            let was = before.get(i).cloned().unwrap_or_default();
            let is = after.get(i).cloned().unwrap_or_default();
            if first.is_none() && was != is {
                first = Some(i);
            }
            json!({
                "text": turn.text,
                "digits": turn.digits,
                "original": {"heard_in": was.0, "answered_in": was.1},
                "replay": {"heard_in": is.0, "answered_in": is.1},
            })
        })
        .collect();
    json!({"call_id": call, "turns": turns, "first_divergence": first})
}
