//! Settings: integrations. The workspace's connected accounts, disconnecting one, and
//! connecting Google Calendar or Gmail through Google's consent page: the OAuth 2.0
//! authorization-code flow with PKCE and a state bound to the session that started it (the
//! spec's dashboard-only handshake; the API has no connect endpoint).
//!
//! The provider sends the browser back to `/callback` from its own site, and a SameSite=Strict
//! session cookie does not come with a cross-site navigation; the callback page (which needs no
//! session and reads nothing) hands the answer on to `/finish` from this site, where the
//! cookie comes along and the state is checked against the session's.

use std::collections::HashMap;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Duration;
use maud::{Markup, html};
use serde::Deserialize;
use switchboard_actors::ids::IntegrationId;

use super::assets::Asset;
use super::layout::unavailable;
use super::layout::{denied, page, respond, when};
use super::session::{fields, form_body, session_token};
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::{Scope, constant_time_eq, hash_key};
use crate::domain::integrations::Provider;
use crate::edge::google::OAuthGrant;
use crate::edge::google::client::Failure;
use crate::edge::google::oauth::{Handshake, authorize_url};
use crate::runtime::integrations::Providers;
use crate::runtime::integrations::connect;
use crate::store::{IntegrationStatus, OAuthHandshake};

/// How long a consent page may stay open.
const HANDSHAKE_MINUTES: i64 = 10;

fn redirect_uri(state: &App) -> String {
    format!("{}{}", state.public_url(), Url::IntegrationsCallback)
}

async fn render(
    state: &App,
    viewer: &Viewer,
    status: StatusCode,
    notice: Option<&str>,
    problem_text: Option<&str>,
) -> Response {
    if !viewer.scopes.allows(Scope::IntegrationsRead) {
        return denied(viewer, Scope::IntegrationsRead);
    }
    let listed = match state.store.list_integrations(viewer.workspace_id).await {
        Ok(l) => l,
        Err(e) => return unavailable(viewer, e),
    };
    let manage = viewer.scopes.allows(Scope::IntegrationsManage);
    let handshake = state.config.google_client.is_some() && state.providers.is_some();
    let body: Markup = html! {
        @if let Some(note) = notice { div.notice role="status" { (note) } }
        @if let Some(text) = problem_text { p.problem role="alert" { (text) } }
        section aria-labelledby="connect-title" {
            h2 id="connect-title" { "Connect an account" }
            @if !manage {
                p.muted { "Connecting takes the integrations:manage scope; the key you signed in with does not have it." }
            } @else if handshake {
                p { "You will be sent to Google to choose the account and allow access, then brought back here." }
                div.actions {
                    @for provider in Provider::ALL {
                        form method="post" action=(Url::IntegrationsConnect) {
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            input type="hidden" name="provider" value=(provider.name());
                            button type="submit" { "Connect " (provider.label()) }
                        }
                    }
                }
            } @else {
                p.muted {
                    "Connecting through Google needs the service's OAuth client: start it with "
                    code { "--google-client-id" } " and " code { "--google-client-secret" }
                    " (redirect URI " code { (redirect_uri(state)) } "). Until then, connect accounts with "
                    code { "switchboard integration connect" } "."
                }
            }
        }
        section aria-labelledby="list-title" {
            h2 id="list-title" { "Connected accounts" }
            @if listed.is_empty() {
                div.empty { p { "No integrations yet." } p { "Connect an account above; flows then use it in their integration_call nodes by its id." } }
            } @else {
                table {
                    thead { tr {
                        th scope="col" { "Provider" } th scope="col" { "Account" } th scope="col" { "Status" }
                        th scope="col" { "Connected" } th scope="col" { "Id" } th scope="col" { span.sr-only { "Actions" } }
                    } }
                    tbody {
                        @for i in &listed {
                            tr {
                                td { (i.provider.label()) }
                                td { (i.account) }
                                td { (i.status) }
                                td { (when(&i.connected_at)) }
                                td { code { (i.id) } }
                                td {
                                    @if manage && i.status == IntegrationStatus::Connected {
                                        form method="post" action=(Url::IntegrationDisconnect { id: i.id }) {
                                            input type="hidden" name="csrf" value=(viewer.csrf);
                                            button.danger type="submit" aria-label=(format!("Disconnect {}", i.account)) { "Disconnect" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let mut response = respond(
        status,
        page(Some(viewer), "Integrations", Some(Url::Integrations), body),
    );
    // The connect forms answer with a redirect to the provider's consent page, which the
    // policy's form-action must name.
    if let Some(providers) = state.providers.as_ref().filter(|_| handshake)
        && let Ok(url) = url::Url::parse(&providers.google.urls.authorize)
    {
        let origin = url.origin().ascii_serialization();
        let csp = super::CSP.replace(
            "form-action 'self'",
            &format!("form-action 'self' {origin}"),
        );
        if let Ok(value) = axum::http::HeaderValue::from_str(&csp) {
            response
                .headers_mut()
                .insert(axum::http::header::CONTENT_SECURITY_POLICY, value);
        }
    }
    response
}

#[derive(Deserialize)]
pub struct ListQuery {
    /// The integration a finished handshake connected.
    connected: Option<String>,
}

pub async fn list(
    State(state): State<App>,
    viewer: Viewer,
    Query(q): Query<ListQuery>,
) -> Response {
    let mut note = None;
    if let Some(id) = q
        .connected
        .as_deref()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        && let Ok(listed) = state.store.list_integrations(viewer.workspace_id).await
        && let Some(i) = listed
            .iter()
            .find(|i| i.id.as_uuid() == id && i.status == IntegrationStatus::Connected)
    {
        note = Some(format!("Connected {} ({}).", i.account, i.provider.label()));
    }
    render(&state, &viewer, StatusCode::OK, note.as_deref(), None).await
}

/// Starts a handshake and sends the browser to Google's consent page.
pub async fn start(State(state): State<App>, viewer: Viewer, req: Request) -> Response {
    let session = session_token(req.headers());
    let form = fields(&form_body(req).await);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::IntegrationsManage) {
        return denied(&viewer, Scope::IntegrationsManage);
    }
    let provider = form.get("provider").map(String::as_str).unwrap_or_default();
    let (Some(client), Some(providers), Some(provider), Some(session)) = (
        state.config.google_client.as_ref(),
        state.providers.as_ref(),
        Provider::parse(provider),
        session,
    ) else {
        return render(
            &state,
            &viewer,
            StatusCode::BAD_REQUEST,
            None,
            Some("That provider cannot be connected from here."),
        )
        .await;
    };
    let handshake = Handshake::start();
    let kept = OAuthHandshake {
        session_hash: session.to_vec(),
        workspace_id: viewer.workspace_id,
        provider,
        verifier: handshake.verifier.clone(),
        expires_at: state.store.now() + Duration::minutes(HANDSHAKE_MINUTES),
    };
    if let Err(e) = state
        .store
        .begin_oauth_handshake(&hash_key(&handshake.state), &kept)
        .await
    {
        return unavailable(&viewer, e);
    }
    match authorize_url(
        &providers.google.urls,
        client,
        &redirect_uri(&state),
        provider.scope(),
        &handshake,
    ) {
        Ok(url) => Redirect::to(&url).into_response(),
        Err(e) => unavailable(&viewer, e),
    }
}

#[derive(Deserialize)]
pub struct Answer {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

impl Answer {
    fn query(&self) -> String {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("code", &self.code),
            ("state", &self.state),
            ("error", &self.error),
        ] {
            if let Some(v) = v {
                q.append_pair(k, v);
            }
        }
        q.finish()
    }
}

/// Where the provider sends the browser back: a page that hands the answer on from this site.
pub async fn callback(Query(answer): Query<Answer>) -> Response {
    let next = Url::IntegrationsFinish.with_query(&answer.query());
    let markup = html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(format!("0; url={next}"));
                title { "Connecting · Switchboard" }
                link rel="stylesheet" href=(Url::asset(Asset::AppCss));
            }
            body { main id="main" { p { "Connecting… " a href=(next) { "Continue" } } } }
        }
    };
    respond(StatusCode::OK, markup)
}

/// Checks the answer against the session's handshake, redeems the code and connects the
/// account.
pub async fn finish(
    State(state): State<App>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(answer): Query<Answer>,
) -> Response {
    if !viewer.scopes.allows(Scope::IntegrationsManage) {
        return denied(&viewer, Scope::IntegrationsManage);
    }
    let refuse = |text: String| {
        let state = state.clone();
        let viewer = viewer.clone();
        async move { render(&state, &viewer, StatusCode::BAD_REQUEST, None, Some(&text)).await }
    };
    let Some(sent_state) = answer.state.as_deref() else {
        return refuse("Google's answer carried no state; nothing was connected.".into()).await;
    };
    let taken = match state
        .store
        .take_oauth_handshake(&hash_key(sent_state))
        .await
    {
        Ok(t) => t,
        Err(e) => return unavailable(&viewer, e),
    };
    let session = session_token(&headers);
    let Some(kept) = taken.filter(|h| {
        session.is_some_and(|s| constant_time_eq(&s, &h.session_hash))
            && h.workspace_id == viewer.workspace_id
    }) else {
        return refuse(
            "This answer does not belong to a connection started in this session (or it was already used); nothing was connected."
                .into(),
        )
        .await;
    };
    if kept.expires_at <= state.store.now() {
        return refuse("The connection took too long; start it again.".into()).await;
    }
    if let Some(error) = answer.error.as_deref() {
        return refuse(format!(
            "Google did not grant access ({error}); nothing was connected."
        ))
        .await;
    }
    let (Some(code), Some(client), Some(providers)) = (
        answer.code.as_deref(),
        state.config.google_client.as_ref(),
        state.providers.as_ref(),
    ) else {
        return refuse("Google's answer carried no code; nothing was connected.".into()).await;
    };
    match redeem(&state, providers, client, &kept, code).await {
        // Away from the address that carried the code.
        Ok(id) => {
            Redirect::to(&Url::Integrations.with_query(&format!("connected={id}"))).into_response()
        }
        Err(text) => render(&state, &viewer, StatusCode::BAD_GATEWAY, None, Some(&text)).await,
    }
}

fn words(failure: &Failure) -> String {
    match failure {
        Failure::Status(status, text) => format!("{text} (HTTP {status})"),
        Failure::Network(why) | Failure::Revoked(why) => why.clone(),
    }
}

/// The code and verifier traded for a refresh token, the account it belongs to asked, and
/// the integration connected (the same row again for an account connected before); its id.
async fn redeem(
    state: &App,
    providers: &Providers,
    client: &crate::edge::google::OAuthClient,
    kept: &OAuthHandshake,
    code: &str,
) -> Result<IntegrationId, String> {
    let google = &providers.google;
    let redeemed = google
        .redeem(client, code, &kept.verifier, &redirect_uri(state))
        .await
        .map_err(|e| format!("Google refused the connection: {}.", words(&e)))?;
    let account = google
        .account(&redeemed.access_token)
        .await
        .map_err(|e| format!("Google did not say which account this is: {}.", words(&e)))?;
    let secrets = providers
        .secrets()
        .map_err(|e| format!("The service's secrets key cannot be read: {e}"))?;
    let grant = OAuthGrant {
        client_id: client.client_id.clone(),
        client_secret: client.client_secret.clone(),
        refresh_token: redeemed.refresh_token,
    };
    let connected = connect(
        &state.store,
        &secrets,
        kept.workspace_id,
        kept.provider.name(),
        &account,
        Some(&grant),
    )
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "an integration could not be stored");
        "The service cannot store the integration right now.".to_string()
    })?;
    google.forget(connected.id).await;
    tracing::info!(integration = %connected.id, provider = %kept.provider, "integration connected from the dashboard");
    Ok(connected.id)
}

pub async fn disconnect(
    State(state): State<App>,
    viewer: Viewer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let form: HashMap<String, String> = fields(&form_body(req).await);
    if !viewer.checks(&form) {
        return viewer.refused();
    }
    if !viewer.scopes.allows(Scope::IntegrationsManage) {
        return denied(&viewer, Scope::IntegrationsManage);
    }
    let Ok(id) = uuid::Uuid::parse_str(&id).map(IntegrationId::from_uuid) else {
        return super::layout::not_found(Some(viewer)).await;
    };
    match state
        .store
        .disconnect_integration(viewer.workspace_id, id)
        .await
    {
        Ok(Some(done)) => {
            if let Some(p) = &state.providers {
                p.google.forget(id).await;
            }
            let note = format!("Disconnected {}.", done.account);
            render(&state, &viewer, StatusCode::OK, Some(&note), None).await
        }
        Ok(None) => super::layout::not_found(Some(viewer)).await,
        Err(e) => unavailable(&viewer, e),
    }
}
