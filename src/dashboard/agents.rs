//! Agents: the list, one agent's facts, the per-agent caller-ID opt-in for lead memory (the
//! spec's dashboard-only setting: an inbound SIP call's caller-ID is used to find the caller's
//! lead only for an agent opted in), and for a flow agent its graph (with what would stop it
//! saving now, at the nodes) and the flow simulator.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum_htmx::HxRequest;
use maud::{Markup, html};
use serde_json::{Map, Value, json};
use switchboard_actors::conversation::Speaker;
use switchboard_actors::ids::AgentId;

use super::layout::{denied, empty, page, problem, respond};
use super::layout::{not_found, unavailable};
use super::session::{fields, form_body};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::http::error::app_status;
use crate::store::{Agent, AgentType, Page};

async fn load(state: &App, viewer: &Viewer, id: &str) -> Result<Agent, Response> {
    if !viewer.scopes.allows(Scope::AgentsRead) {
        return Err(denied(viewer, Scope::AgentsRead));
    }
    let Ok(id) = uuid::Uuid::parse_str(id).map(AgentId::from_uuid) else {
        return Err(not_found(Some(viewer.clone())).await);
    };
    match state.store.agent(viewer.workspace_id, id).await {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(not_found(Some(viewer.clone())).await),
        Err(e) => Err(unavailable(viewer, e)),
    }
}

/// The opt-in's form: trusting, or no longer trusting, the caller-ID of inbound SIP calls.
fn caller_id_form(viewer: &Viewer, a: &Agent) -> Markup {
    let trusted = a.lead_memory_trust_caller_id;
    html! {
        @if viewer.scopes.allows(Scope::AgentsUpdate) {
            form.inline method="post" action=(Url::AgentCallerId { id: a.id }) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                input type="hidden" name="trust" value=(if trusted { "false" } else { "true" });
                button type="submit" class=[trusted.then_some("danger")]
                    aria-label=(format!("{} caller-ID for {}", if trusted { "Stop trusting" } else { "Trust" }, a.name)) {
                    (if trusted { "Stop trusting" } else { "Trust caller-ID" })
                }
            }
        }
    }
}

fn trust_words(a: &Agent) -> &'static str {
    match (a.lead_memory_enabled, a.lead_memory_trust_caller_id) {
        (_, false) => "Not trusted",
        (true, true) => "Trusted: inbound callers are recognised by their number",
        (false, true) => "Trusted (lead memory is off for this agent)",
    }
}

pub async fn list(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::AgentsRead) {
        return denied(&viewer, Scope::AgentsRead);
    }
    let agents = match state
        .store
        .list_agents(
            viewer.workspace_id,
            None,
            Page {
                limit: 100,
                offset: 0,
            },
        )
        .await
    {
        Ok(a) => a,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        p.muted { "A SIP call's caller-ID can be forged, so it finds the caller's lead (lead memory, returning callers) only for agents you opt in here." }
        @if agents.items.is_empty() {
            (empty("agents", html! { "Create one with " code { "POST /agents" } "." }))
        } @else {
            table {
                caption.sr-only { "Agents" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Active" }
                    th scope="col" { "Lead memory" } th scope="col" { "Caller-ID" }
                } }
                tbody {
                    @for a in &agents.items {
                        tr {
                            td { a href=(Url::Agent { id: a.id }) { (a.name) } }
                            td { (if a.agent_type == AgentType::Flow { "flow" } else { "prompt" }) }
                            td { (if a.is_active { "yes" } else { "no" }) }
                            td { (if a.lead_memory_enabled { "on" } else { "off" }) }
                            td { (trust_words(a)) (caller_id_form(&viewer, a)) }
                        }
                    }
                }
            }
            @if agents.total > 100 { p.muted { "The first 100 of " (agents.total) " agents." } }
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Agents", Some(Url::Agents), body),
    )
}

pub async fn show(State(state): State<App>, viewer: Viewer, Path(id): Path<String>) -> Response {
    match load(&state, &viewer, &id).await {
        Ok(a) => render(&state, &viewer, &a, StatusCode::OK, None).await,
        Err(r) => r,
    }
}

async fn render(
    state: &App,
    viewer: &Viewer,
    a: &Agent,
    status: StatusCode,
    notice: Option<&str>,
) -> Response {
    let flow = match (&a.agent_type, &a.flow_config) {
        (AgentType::Flow, Some(flow)) => {
            let issues =
                match crate::app::agents::save::flow_issues(state, viewer.workspace_id, flow).await
                {
                    Ok(i) => i,
                    Err(e) => return unavailable(viewer, format!("{e:?}")),
                };
            Some(super::flow_graph::render(flow, &issues))
        }
        _ => None,
    };
    let warnings = crate::app::agents::save::warnings(state, a);
    let body = html! {
        @if let Some(note) = notice { div.notice role="status" { (note) } }
        dl.facts {
            dt { "Type" } dd { (if a.agent_type == AgentType::Flow { "flow" } else { "prompt" }) }
            dt { "Active" } dd { (if a.is_active { "yes" } else { "no" }) }
            dt { "Language" } dd { (a.language) }
            dt { "Voice" } dd { (a.voice) }
            dt { "Longest call" } dd { @match a.max_call_duration_secs { Some(s) => { (s) " s" }, None => "no limit" } }
            dt { "Lead memory" } dd { (if a.lead_memory_enabled { "on" } else { "off" }) }
            dt { "Caller-ID" } dd { (trust_words(a)) (caller_id_form(viewer, a)) }
            @if let Some(url) = &a.webhook_url { dt { "Webhook" } dd { code { (url) } } }
        }
        @if viewer.scopes.allows(Scope::CallsRead) {
            p { a href=(Url::Calls.with_query(&format!("agent={}", a.id))) { "Calls by this agent" } }
        }
        @if let Some(graph) = flow {
            section aria-labelledby="flow-title" {
                h2 id="flow-title" { "Flow" }
                @if !warnings.is_empty() {
                    div.notice role="note" {
                        p { "These steps need a chat model, and none is configured: a call that reaches one ends there ("
                            code { "model_not_configured" } ")." }
                        ul { @for w in &warnings { li { strong { (w.node_id) } ": " (w.message) } } }
                    }
                }
                (graph)
            }
            section aria-labelledby="sim-title" {
                h2 id="sim-title" { "Simulate a call" }
                @if viewer.scopes.allows(Scope::FlowsTest) {
                    (simulator_form(viewer, a))
                } @else {
                    p.muted { "Simulating takes the flows:test scope." }
                }
                div id="simulation" aria-live="polite" {}
            }
        } @else {
            section aria-labelledby="prompt-title" {
                h2 id="prompt-title" { "Prompt" }
                pre.prompt { (a.system_prompt) }
            }
        }
    };
    respond(status, page(Some(viewer), &a.name, Some(Url::Agents), body))
}

fn simulator_form(viewer: &Viewer, a: &Agent) -> Markup {
    let action = Url::AgentSimulate { id: a.id };
    html! {
        form.card method="post" action=(action) hx-post=(action) hx-target="#simulation" hx-swap="innerHTML"
            hx-indicator="#sim-progress" hx-disabled-elt="find button" {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label for="turns" { "What the caller says, one turn per line; a line " code { "keys: 4719" } " presses keys" }
            textarea id="turns" name="turns" rows="4" required { "Hello." }
            label for="metadata" { "Metadata (JSON, the flow's custom keys)" }
            textarea id="metadata" name="metadata" rows="2" { "{}" }
            label.check { input type="checkbox" name="dry_run" value="true" checked; " Dry run: tools and integrations answer with their sample results; nothing is sent" }
            button type="submit" { "Run the simulation" }
            div id="sim-progress" class="indicator" role="status" {
                label for="sim-bar" { "Simulating" }
                progress id="sim-bar" {}
            }
        }
    }
}

/// The simulation's answer, in words: how it ended, the path, the transcript, the dispatches.
fn simulation(result: &crate::app::flow_test::FlowTestResult) -> Markup {
    html! {
        div.notice role="status" {
            "Ended in " strong { (result.final_node.as_deref().unwrap_or("—")) } " (" (result.end_reason.as_str().replace('_', " ")) ")"
            @if result.dry_run { " — a dry run" }
        }
        h3 { "Path" }
        ol.path { @for step in &result.path { li { strong { (step.node_id) } " — " (step.reason) } } }
        h3 { "Transcript" }
        ol.transcript {
            @for t in &result.transcript {
                li {
                    strong { (if t.role == Speaker::Agent { "Agent" } else { "Caller" }) }
                    @if let Some(node) = &t.node { " " span.node { "in " (node) } }
                    p {
                        (t.text)
                        @if let Some(digits) = &t.digits {
                            @if t.role == Speaker::Agent { "Sent keys " } @else { "Pressed " }
                            kbd.digits { (digits) }
                        }
                    }
                }
            }
        }
        @if !result.dispatches.is_empty() {
            h3 { "Tools and integrations" }
            table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Status" } th scope="col" { "Result" } } }
                tbody {
                    @for e in &result.dispatches {
                        tr {
                            td { (e.name) }
                            td { (format!("{:?}", e.status).to_lowercase()) }
                            td.preview { (e.error.as_deref().or(e.response_preview.as_deref()).unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// Runs the simulator from the page's form, as `POST /agents/{id}/flow/test` runs it.
pub async fn simulate(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    HxRequest(htmx): HxRequest,
    req: Request,
) -> Response {
    let form = fields(&form_body(req).await);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::FlowsTest) {
        return denied(&viewer, Scope::FlowsTest);
    }
    let a = match load(&state, &viewer, &id).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let turns: Vec<Value> = form
        .get("turns")
        .map(String::as_str)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.strip_prefix("keys:") {
            Some(keys) => json!({"digits": keys.trim()}),
            None => Value::String(l.to_owned()),
        })
        .collect();
    let metadata = match form
        .get("metadata")
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
    {
        None => Ok(Value::Object(Map::new())),
        Some(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| AppError::invalid_field("metadata", "must be a JSON object")),
    };
    let outcome = match metadata {
        Ok(metadata) => {
            let body = json!({"turns": turns, "metadata": metadata,
                "dry_run": form.contains_key("dry_run")});
            let body = body.as_object().cloned().unwrap_or_default();
            crate::app::flow_test::run_flow_test(&state, &viewer.auth(), a.id, body).await
        }
        Err(e) => Err(e),
    };
    let (status, markup) = match outcome {
        Ok(result) => (StatusCode::OK, simulation(&result)),
        Err(AppError::Internal(e)) => return unavailable(&viewer, e),
        Err(e) => (
            app_status(&e),
            html! { p.problem role="alert" { (e.to_string()) } },
        ),
    };
    if htmx {
        // htmx swaps in only a success; the refusal is still the answer.
        return (StatusCode::OK, Html(markup.into_string())).into_response();
    }
    let body = html! {
        p { a href=(Url::Agent { id: a.id }) { "← " (a.name) } }
        (markup)
    };
    respond(
        status,
        page(
            Some(&viewer),
            &format!("Simulation of {}", a.name),
            Some(Url::Agents),
            body,
        ),
    )
}

/// The caller-ID opt-in, through the same rules as `PATCH /agents/{id}`.
pub async fn caller_id(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let form = fields(&form_body(req).await);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::AgentsUpdate) {
        return denied(&viewer, Scope::AgentsUpdate);
    }
    let a = match load(&state, &viewer, &id).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let trust = form.get("trust").map(String::as_str) == Some("true");
    let mut body = Map::new();
    body.insert("lead_memory_trust_caller_id".into(), Value::Bool(trust));
    match crate::app::agents::save::update_agent(&state, &viewer.auth(), a.id, body).await {
        Ok(_) => Url::Agent { id: a.id }.redirect().into_response(),
        Err(AppError::Internal(e)) => unavailable(&viewer, e),
        Err(e) => problem(Some(&viewer), app_status(&e), "Not saved", &e.to_string()),
    }
}
