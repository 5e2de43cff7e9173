//! `flow-sim`: the flow simulator's own time. A booking flow (ask, check the calendar, confirm,
//! and again) runs a scripted dry run of `--turns` caller turns against a stand-in model that
//! answers at once, `--runs` times, in process: what is measured is the director, the turn
//! loop, the text line and the dry run's ports, not a vendor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use switchboard::runtime::simulator::{Caller, Models, ScriptTurn, Simulation, simulate};
use switchboard::store::{Agent, AgentType, FlowConfig};
use switchboard_actors::vendors::{
    ChatEvent, ChatMessage, ChatModel, ChatRequest, ChatStream, ToolCall, VendorError,
};

#[derive(clap::Args)]
pub struct FlowSimArgs {
    /// Caller turns of each simulation.
    #[arg(long, default_value_t = 20)]
    turns: usize,
    /// Simulations to time.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// Write the figures as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// The flow: ask for a time, check it (an integration answered from its sample), confirm,
/// then back to asking for the next booking.
fn flow() -> Value {
    json!({"nodes": [
        {"id": "start", "type": "start", "greeting": "Hi, this is Ada.", "is_literal": true, "next_step_id": "ask"},
        {"id": "ask", "type": "conversation", "instructions": "Ask when the caller wants to meet.",
         "variables": [{"name": "time", "description": "When"}],
         "transitions": [{"next_step_id": "check", "condition": "the caller gave a time"}]},
        {"id": "check", "type": "integration_call", "integration_id": "00000000-0000-0000-0000-000000000000",
         "provider": "google_calendar", "action": "check_availability",
         "args_template": {"start_time": "{{ask.time}}", "email": {"type": "ai_extract", "description": "The caller's email"}},
         "custom": [{"path": "$.busy", "equals": true, "next_step_id": "ask"}],
         "success_next_step_id": "confirm", "error_next_step_id": "bye",
         "sample_result": {"busy": false}},
        {"id": "confirm", "type": "conversation", "greeting": "Booked for {{ask.time}}.", "is_literal": true,
         "transitions": [{"next_step_id": "ask", "condition": "the caller wants another booking"}]},
        {"id": "bye", "type": "end", "greeting": "Goodbye!", "is_literal": true, "is_global": true,
         "global_condition": "the caller wants to hang up"}
    ], "flow_config_version": 1})
}

/// A model that answers at once: it fills asked-for arguments, takes the edge the caller's
/// last words call for, and otherwise asks a question.
struct AtOnce {
    requests: AtomicU64,
}

#[async_trait]
impl ChatModel for AtOnce {
    async fn stream(&self, request: ChatRequest) -> Result<ChatStream, VendorError> {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let said = request
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                ChatMessage::User(text) => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let offered = |name: &str| request.tools.iter().any(|t| t.name == name);
        let call = |name: &str, arguments: &str| {
            ChatEvent::ToolCall(ToolCall {
                id: format!("c{n}"),
                name: name.into(),
                arguments: arguments.into(),
            })
        };
        let events = if request.force.is_some() {
            vec![call("extract_arguments", r#"{"email": "ada@example.com"}"#)]
        } else if offered("go_to_check") && said.contains(" at ") {
            vec![call("go_to_check", r#"{"time": "ten"}"#)]
        } else if offered("go_to_ask") && said.contains("another") {
            vec![call("go_to_ask", "{}")]
        } else {
            vec![ChatEvent::Text("When would you like to meet?".into())]
        };
        let done = ChatEvent::Done {
            finish_reason: None,
            usage: None,
        };
        let items = events.into_iter().chain([done]).map(Ok);
        Ok(Box::pin(futures_util::stream::iter(items)))
    }
}

pub async fn run(args: FlowSimArgs) -> anyhow::Result<Value> {
    let mut agent = Agent::new("Booker".into());
    agent.agent_type = AgentType::Flow;
    agent.system_prompt = "You are Ada from Acme.".into();
    let config: FlowConfig = serde_json::from_value(flow())?;
    agent.flow_config = Some(config.clone());
    let script: Vec<ScriptTurn> = (0..args.turns)
        .map(|i| {
            ScriptTurn::Says(if i % 2 == 0 {
                "Book me at ten.".to_string()
            } else {
                "And another one, please.".to_string()
            })
        })
        .collect();
    let model = Arc::new(AtOnce {
        requests: AtomicU64::new(0),
    });
    let mut times = Vec::with_capacity(args.runs);
    let mut turns_seen = 0;
    for _ in 0..args.runs {
        let simulation = Simulation {
            caller: Caller::Script(script.clone()),
            metadata: Default::default(),
            variables: Default::default(),
            dry_run: true,
            tool_samples: Default::default(),
        };
        let start = Instant::now();
        let done = simulate(
            &agent,
            &config,
            Models {
                flow: Some(model.clone() as _),
                caller: None,
            },
            (None, None),
            simulation,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        times.push(start.elapsed());
        turns_seen = done.transcript.len();
    }
    times.sort();
    let pick = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let requests = model.requests.load(Ordering::Relaxed) as f64 / args.runs as f64;
    let figures = json!({
        "caller_turns": args.turns,
        "runs": args.runs,
        "transcript_turns": turns_seen,
        "model_requests_per_run": requests,
        "simulation_ms": {"p50": ms(pick(0.5)), "p99": ms(pick(0.99)), "max": ms(pick(1.0))},
        "per_caller_turn_ms_p50": ms(pick(0.5)) / args.turns.max(1) as f64,
    });
    Ok(figures)
}
