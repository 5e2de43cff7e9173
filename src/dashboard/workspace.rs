//! The workspace's other resources, each behind the scope its API needs: tools (with a
//! "send test" button, one delivery as `POST /tools/{id}/test` makes it), SIP endpoints (the
//! slug, the caller's only credential, shown whole once when created here, then masked), phone
//! numbers, the do-not-call list, dispositions, leads, and billing (balance and ledger).

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Map, Value};
use switchboard_actors::ids::ToolId;

use super::layout::{denied, empty, money, page, respond, when};
use super::layout::{not_found, unavailable};
use super::session::{fields, form_body};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::http::error::app_status;
use crate::store::{LeadFilter, Page, ToolType};

/// Rows a list shows.
const ROWS: Page = Page {
    limit: 100,
    offset: 0,
};

fn more(shown: usize, total: i64, what: &str) -> Markup {
    html! { @if total > shown as i64 { p.muted { "The first " (shown) " of " (total) " " (what) "." } } }
}

/// A call's SIP address as the calls pages show it: its slug masked (`sip:desk-••••••••k9uj@host`);
/// anything else (a phone number) as it is.
pub fn masked_address(address: &str) -> String {
    match address
        .strip_prefix("sip:")
        .and_then(|rest| rest.split_once('@'))
    {
        Some((slug, host)) => format!("sip:{}@{host}", masked(slug)),
        None => address.to_string(),
    }
}

/// A webhook's answer as the page shows it: JSON pretty-printed, also when it came as a string
/// that holds JSON.
fn shown_body(body: &Value) -> String {
    let parsed = body
        .as_str()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .filter(|v| v.is_object() || v.is_array());
    match (parsed, body) {
        (Some(json), _) => serde_json::to_string_pretty(&json).unwrap_or_default(),
        (None, Value::String(text)) => text.clone(),
        (None, other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A SIP slug as the page shows it after its creation: the prefix and the last four.
pub fn masked(slug: &str) -> String {
    match slug.rsplit_once('-') {
        Some((prefix, secret)) if secret.len() > 4 => {
            format!("{prefix}-{}{}", "•".repeat(8), &secret[secret.len() - 4..])
        }
        _ => "•".repeat(8),
    }
}

async fn tools_page(
    state: &App,
    viewer: &Viewer,
    status: StatusCode,
    result: Option<(&str, Result<Value, AppError>)>,
) -> Response {
    if !viewer.scopes.allows(Scope::ToolsRead) {
        return denied(viewer, Scope::ToolsRead);
    }
    let tools = match state
        .store
        .list_tools(viewer.workspace_id, None, ROWS)
        .await
    {
        Ok(t) => t,
        Err(e) => return unavailable(viewer, e),
    };
    let testing = viewer.scopes.allows(Scope::ToolsUpdate);
    let body = html! {
        @if let Some((name, outcome)) = &result {
            @match outcome {
                Ok(answer) => div.notice role="status" {
                    p { "Test of " strong { (name) } ": the webhook answered " (answer["status_code"]) "." }
                    pre.prompt { (shown_body(&answer["response_body"])) }
                },
                Err(e) => div.problem role="alert" {
                    p { "Test of " (name) ": " (e.to_string()) }
                    @if let AppError::Webhook { extra, .. } = e && let Some(details) = extra.get("details").and_then(Value::as_str) { p { (details) } }
                },
            }
        }
        @if tools.items.is_empty() {
            (empty("tools", html! { "Create one with " code { "POST /tools" } "." }))
        } @else {
            table {
                caption.sr-only { "Tools" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Active" } th scope="col" { "Endpoint" } th scope="col" { span.sr-only { "Actions" } } } }
                tbody {
                    @for t in &tools.items {
                        tr {
                            td { (t.name) }
                            td { (t.tool_type.as_str()) }
                            td { (if t.is_active { "yes" } else { "no" }) }
                            td { @if let Some(url) = t.config["url"].as_str() { code { (crate::edge::webhooks::logged_url(url)) } } }
                            td {
                                @if testing && t.tool_type == ToolType::Webhook {
                                    form method="post" action=(Url::ToolTest { id: t.id }) {
                                        input type="hidden" name="csrf" value=(viewer.csrf);
                                        button type="submit" aria-label=(format!("Send a test to {}", t.name)) { "Send test" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (more(tools.items.len(), tools.total, "tools"))
        }
    };
    respond(status, page(Some(viewer), "Tools", Some(Url::Tools), body))
}

pub async fn tools(State(state): State<App>, viewer: Viewer) -> Response {
    tools_page(&state, &viewer, StatusCode::OK, None).await
}

/// One test delivery, answered on the tools page.
pub async fn test_tool(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    if !viewer.checks(&fields(&form_body(req).await)) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::ToolsUpdate) {
        return denied(&viewer, Scope::ToolsUpdate);
    }
    let Ok(id) = uuid::Uuid::parse_str(&id).map(ToolId::from_uuid) else {
        return not_found(Some(viewer)).await;
    };
    let name = match state.store.tool(viewer.workspace_id, id).await {
        Ok(Some(t)) => t.name,
        Ok(None) => return not_found(Some(viewer)).await,
        Err(e) => return unavailable(&viewer, e),
    };
    let outcome = crate::app::tools::test_tool(&state, &viewer.auth(), id, None).await;
    if let Err(AppError::Internal(e)) = outcome {
        return unavailable(&viewer, e);
    }
    let status = match &outcome {
        Ok(_) => StatusCode::OK,
        Err(e) => app_status(e),
    };
    tools_page(&state, &viewer, status, Some((&name, outcome))).await
}

async fn endpoints_page(
    state: &App,
    viewer: &Viewer,
    status: StatusCode,
    created: Option<Result<&crate::app::sip_endpoints::SipEndpointView, &AppError>>,
) -> Response {
    if !viewer.scopes.allows(Scope::PhoneNumbersSearch) {
        return denied(viewer, Scope::PhoneNumbersSearch);
    }
    let ws = viewer.workspace_id;
    let read = async {
        Ok::<_, crate::store::StoreError>((
            state.store.list_sip_endpoints(ws, ROWS).await?,
            state.store.list_agents(ws, None, ROWS).await?.items,
        ))
    };
    let (endpoints, agents) = match read.await {
        Ok(r) => r,
        Err(e) => return unavailable(viewer, e),
    };
    let host = &state.config.sip_host;
    // A refusal of one of the form's fields is said beside it; any other above the form.
    let refused = match &created {
        Some(Err(e)) => Some((
            super::campaign_form::error_field(e)
                .filter(|f| ["name", "inbound_agent_id"].contains(f)),
            super::campaign_form::error_words(e),
        )),
        _ => None,
    };
    let beside = |field: &str| {
        refused
            .as_ref()
            .filter(|(f, _)| *f == Some(field))
            .map(|(_, words)| words.clone())
    };
    let described = |field: &str| beside(field).map(|_| format!("{field}-error"));
    let body = html! {
        @match (&created, &refused) {
            (Some(Ok(e)), _) => div.notice role="status" {
                p { strong { "Your endpoint's address. Copy it now: the slug in it is the caller's only credential and is not shown again." } }
                p { code.secret { (e.sip_uri) } }
            },
            (_, Some((None, words))) => p.problem role="alert" { (words) },
            _ => {},
        }
        @if viewer.scopes.allows(Scope::PhoneNumbersConfigure) {
            form.inline method="post" action=(Url::SipEndpoints) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                label for="ep-name" { "New endpoint" }
                input id="ep-name" name="name" type="text" required maxlength="100" placeholder="Name"
                    aria-invalid=[beside("name").map(|_| "true")] aria-describedby=[described("name")];
                @if let Some(words) = beside("name") { p.field-error id="name-error" { (words) } }
                label for="ep-agent" { "Agent" }
                select id="ep-agent" name="inbound_agent_id"
                    aria-invalid=[beside("inbound_agent_id").map(|_| "true")] aria-describedby=[described("inbound_agent_id")] {
                    option value="" { "None" }
                    @for a in &agents { option value=(a.id) { (a.name) } }
                }
                @if let Some(words) = beside("inbound_agent_id") { p.field-error id="inbound_agent_id-error" { (words) } }
                button type="submit" { "Create" }
            }
        }
        @if endpoints.items.is_empty() {
            (empty("SIP endpoints", html! { "Create one above; a trunk then sends calls to " code { "sip:<slug>@" (host) } "." }))
        } @else {
            table {
                caption.sr-only { "SIP endpoints" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Address" } th scope="col" { "Agent" } th scope="col" { "Active" } th scope="col" { "Last call" } } }
                tbody {
                    @for e in &endpoints.items {
                        tr {
                            td { (e.name) }
                            td { code { "sip:" (masked(&e.slug)) "@" (host) } }
                            td { (e.inbound_agent_id.and_then(|id| agents.iter().find(|a| a.id == id)).map(|a| a.name.as_str()).unwrap_or("—")) }
                            td { (if e.is_active { "yes" } else { "no" }) }
                            td { @if let Some(t) = &e.last_call_at { (when(t)) } @else { "—" } }
                        }
                    }
                }
            }
            (more(endpoints.items.len(), endpoints.total, "endpoints"))
        }
    };
    respond(
        status,
        page(Some(viewer), "SIP endpoints", Some(Url::SipEndpoints), body),
    )
}

pub async fn endpoints(State(state): State<App>, viewer: Viewer) -> Response {
    endpoints_page(&state, &viewer, StatusCode::OK, None).await
}

/// Creates an endpoint as `POST /sip-endpoints` does, and shows its slug this once.
pub async fn create_endpoint(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    let form = fields(&form_body(req).await);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::PhoneNumbersConfigure) {
        return denied(&viewer, Scope::PhoneNumbersConfigure);
    }
    let mut body = Map::new();
    body.insert(
        "name".into(),
        Value::String(form.get("name").cloned().unwrap_or_default()),
    );
    if let Some(agent) = form.get("inbound_agent_id").filter(|a| !a.is_empty()) {
        body.insert("inbound_agent_id".into(), Value::String(agent.clone()));
    }
    match crate::app::sip_endpoints::create_endpoint(&state, &viewer.auth(), body).await {
        Ok(view) => endpoints_page(&state, &viewer, StatusCode::CREATED, Some(Ok(&view))).await,
        Err(AppError::Internal(e)) => unavailable(&viewer, e),
        Err(e) => endpoints_page(&state, &viewer, app_status(&e), Some(Err(&e))).await,
    }
}

pub async fn numbers(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::PhoneNumbersSearch) {
        return denied(&viewer, Scope::PhoneNumbersSearch);
    }
    let numbers = match state
        .store
        .list_phone_numbers(viewer.workspace_id, ROWS)
        .await
    {
        Ok(n) => n,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        @if numbers.items.is_empty() {
            (empty("phone numbers", html! { "Buy one with " code { "POST /phone-numbers" } ", or bring your own." }))
        } @else {
            table {
                caption.sr-only { "Phone numbers" }
                thead { tr { th scope="col" { "Number" } th scope="col" { "Name" } th scope="col" { "Provider" } th scope="col" { "Status" } th scope="col" { "Active" } } }
                tbody {
                    @for n in &numbers.items {
                        tr { td { (n.number) } td { (n.friendly_name) } td { (n.provider) } td { (n.status) } td { (if n.is_active { "yes" } else { "no" }) } }
                    }
                }
            }
            (more(numbers.items.len(), numbers.total, "numbers"))
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Phone numbers", Some(Url::Numbers), body),
    )
}

pub async fn do_not_call(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::DoNotCallRead) {
        return denied(&viewer, Scope::DoNotCallRead);
    }
    let entries = match state
        .store
        .list_dnc_entries(viewer.workspace_id, state.store.now(), ROWS)
        .await
    {
        Ok(e) => e,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        @if entries.items.is_empty() {
            (empty("do-not-call entries", html! { "Add numbers with " code { "POST /do-not-call" } "; every dial is checked against them." }))
        } @else {
            table {
                caption.sr-only { "Do-not-call list" }
                thead { tr { th scope="col" { "Number" } th scope="col" { "Reason" } th scope="col" { "Source" } th scope="col" { "Agents" } th scope="col" { "Expires" } } }
                tbody {
                    @for e in &entries.items {
                        tr {
                            td { (e.phone_number) }
                            td { (e.reason) }
                            td { (e.source.as_str()) }
                            td { @if e.agents.is_empty() { "all" } @else { (e.agents.len()) } }
                            td { @if let Some(t) = &e.expires_at { (when(t)) } @else { "never" } }
                        }
                    }
                }
            }
            (more(entries.items.len(), entries.total, "entries"))
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Do not call", Some(Url::DoNotCall), body),
    )
}

pub async fn dispositions(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::DispositionsRead) {
        return denied(&viewer, Scope::DispositionsRead);
    }
    let items = match state.store.list_dispositions(viewer.workspace_id).await {
        Ok(d) => d,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        table {
            caption.sr-only { "Dispositions, in their order" }
            thead { tr { th scope="col" { "Label" } th scope="col" { "Description" } th scope="col" { "Built in" } } }
            tbody {
                @for d in &items {
                    tr { td { (d.label) } td { (d.description) } td { (if d.is_protected { "yes" } else { "no" }) } }
                }
            }
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Dispositions", Some(Url::Dispositions), body),
    )
}

pub async fn leads(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::LeadsRead) {
        return denied(&viewer, Scope::LeadsRead);
    }
    let leads = match state
        .store
        .list_leads(viewer.workspace_id, &LeadFilter::default(), ROWS)
        .await
    {
        Ok(l) => l,
        Err(e) => return unavailable(&viewer, e),
    };
    let body = html! {
        @if leads.items.is_empty() {
            (empty("leads", html! { "Import them with " code { "POST /leads" } "; calls to their numbers then remember them." }))
        } @else {
            table {
                caption.sr-only { "Leads" }
                thead { tr { th scope="col" { "Number" } th scope="col" { "Name" } th scope="col" { "Company" } th scope="col" { "Tags" } th scope="col" { "Added" } } }
                tbody {
                    @for l in &leads.items {
                        tr {
                            td { (l.fields.phone_number) }
                            td { (l.fields.first_name) " " (l.fields.last_name) }
                            td { (l.fields.company) }
                            td { (l.tags.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")) }
                            td { (when(&l.created_at)) }
                        }
                    }
                }
            }
            (more(leads.items.len(), leads.total, "leads"))
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Leads", Some(Url::Leads), body),
    )
}

pub async fn billing(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::BillingRead) {
        return denied(&viewer, Scope::BillingRead);
    }
    let ws = viewer.workspace_id;
    let read = async {
        Ok::<_, crate::store::StoreError>((
            state.store.billing_account(ws).await?,
            state
                .store
                .ledger(
                    ws,
                    Page {
                        limit: 50,
                        offset: 0,
                    },
                )
                .await?,
        ))
    };
    let (account, ledger) = match read.await {
        Ok(r) => r,
        Err(e) => return unavailable(&viewer, e),
    };
    let Some(account) = account else {
        return not_found(Some(viewer)).await;
    };
    let body = html! {
        dl.facts {
            dt { "Balance" } dd { (money(account.balance_cents)) " " (account.currency) }
            dt { "Payment method" } dd { (account.payment_method.as_ref().map(|p| p.label.as_str()).unwrap_or("none")) }
            dt { "Automatic top-up" } dd {
                @if account.auto_topup_enabled { (money(account.auto_topup_amount_cents)) " when below " (money(account.low_balance_threshold_cents)) } @else { "off" }
            }
            @if account.is_suspended { dt { "Suspended" } dd.problem { "yes: calls are refused until the balance is topped up" } }
        }
        h2 { "Ledger" }
        @if ledger.items.is_empty() {
            p.muted { "No entries yet. Credit the balance with " code { "POST /billing/top-up" } " (or turn on automatic top-up) before placing calls." }
        } @else {
            table {
                caption.sr-only { "Ledger, newest first" }
                thead { tr { th scope="col" { "When" } th scope="col" { "Kind" } th scope="col" { "Description" } th scope="col" { "Amount" } th scope="col" { "Balance after" } } }
                tbody {
                    @for e in &ledger.items {
                        tr { td { (when(&e.created_at)) } td { (e.kind.as_str()) } td { (e.description) } td.num { (money(e.amount_cents)) } td.num { (money(e.balance_after_cents)) } }
                    }
                }
            }
            (more(ledger.items.len(), ledger.total, "entries"))
        }
    };
    respond(
        StatusCode::OK,
        page(Some(&viewer), "Billing", Some(Url::Billing), body),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_masked_to_its_prefix_and_last_four() {
        assert_eq!(masked("acme-abcdefghijklmnopqrstuvwx"), "acme-••••••••uvwx");
        assert_eq!(masked("nodash"), "••••••••");
        assert_eq!(
            masked_address("sip:acme-abcdefghijklmnopqrstuvwx@pbx.example:5060"),
            "sip:acme-••••••••uvwx@pbx.example:5060"
        );
        assert_eq!(masked_address("+14155550100"), "+14155550100");
    }

    #[test]
    fn a_webhook_s_json_answer_is_shown_as_json_even_inside_a_string() {
        let pretty = "{\n  \"status\": \"shipped\"\n}";
        assert_eq!(
            shown_body(&serde_json::json!({"status": "shipped"})),
            pretty
        );
        assert_eq!(
            shown_body(&Value::String("{\"status\": \"shipped\"}".into())),
            pretty
        );
        assert_eq!(
            shown_body(&Value::String("plain text".into())),
            "plain text"
        );
        assert_eq!(shown_body(&Value::String("42".into())), "42");
    }
}
