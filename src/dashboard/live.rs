//! Live calls: who is being called or talking, through which agent, in which state and for how
//! long, and what is being said or was last said on it. The page subscribes to `/live/events` (server-sent events through htmx's
//! extension); the stream reads the workspace's calls under way four times a second and sends
//! the table again when it changed (a call placed, ringing or answered shows within a quarter
//! of a second; durations move every second while a call is up). The session
//! is checked again at every read: a revoked key or an expired session ends the stream, and so
//! does the service beginning to stop (it would otherwise wait on the open page forever).

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::{DateTime, Utc};
use futures_util::stream::{self, Stream};
use maud::{Markup, html};
use switchboard_actors::call::{CallDirection, CallStatus};
use switchboard_actors::ids::{AgentId, WorkspaceId};

use super::assets::Asset;
use super::layout::{denied, page as shell, respond};
use super::session::session_token;
use super::urls::Url;
use super::viewer::Viewer;
use crate::app::state::App;
use crate::domain::auth::Scope;
use crate::runtime::live_turns::{LatestTurn, LiveTurns};
use crate::store::CallRecord;
use switchboard_actors::conversation::Speaker;

/// Most calls the table shows.
const SHOWN: i64 = 200;
/// How often the stream reads the calls.
const EVERY: Duration = Duration::from_millis(250);
/// How often the stream asks whether the session still stands.
const SESSION_EVERY: Duration = Duration::from_secs(1);

fn seconds(since: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let s = (now - since).num_seconds().max(0);
    format!("{}:{:02}", s / 60, s % 60)
}

/// A turn as the table shows it: who, and at most this many characters (of a final turn its
/// start; of a turn being said its latest words).
const TURN_CHARS: usize = 160;

fn shortened(text: &str, under_way: bool) -> String {
    let chars = text.chars().count();
    if chars <= TURN_CHARS {
        text.to_owned()
    } else if under_way {
        format!(
            "…{}",
            text.chars().skip(chars - TURN_CHARS).collect::<String>()
        )
    } else {
        format!("{}…", text.chars().take(TURN_CHARS).collect::<String>())
    }
}

fn saying(turn: Option<LatestTurn>) -> Markup {
    html! {
        @if let Some(t) = turn {
            strong { (if t.role == Speaker::Agent { "Agent: " } else { "Caller: " }) }
            (shortened(&t.text, t.under_way))
            @if t.under_way { " " span.muted { "(speaking)" } }
        } @else { span.muted { "—" } }
    }
}

fn table(
    calls: &[CallRecord],
    agents: &HashMap<AgentId, String>,
    turns: &LiveTurns,
    now: DateTime<Utc>,
) -> Markup {
    html! {
        @if calls.is_empty() {
            div.empty { p { "No calls under way. Calls appear here as they are placed or answered." } }
        } @else {
            table {
                caption.sr-only { "Calls under way" }
                thead { tr {
                    th scope="col" { "Who" } th scope="col" { "Direction" } th scope="col" { "Agent" }
                    th scope="col" { "State" } th scope="col" { "For" } th scope="col" { "Last said" }
                } }
                tbody {
                    @for c in calls {
                        @let who = if c.direction == CallDirection::Inbound { &c.from_number } else { &c.to_number };
                        @let since = if c.status == CallStatus::InProgress { c.answered_at.unwrap_or(c.created_at) } else { c.created_at };
                        tr {
                            td { a href=(Url::Call { id: c.id }) { (who) } }
                            td { (c.direction) }
                            td { (c.agent_id.and_then(|a| agents.get(&a)).map(String::as_str).unwrap_or("—")) }
                            td { span class=(format!("status st-{}", c.status)) { (c.status) } }
                            td.num { (seconds(since, now)) }
                            td.said { (saying(turns.latest(c.id))) }
                        }
                    }
                }
            }
        }
    }
}

/// The calls under way, with their agents' names (kept in `agents` across reads).
async fn read(
    state: &App,
    ws: WorkspaceId,
    agents: &mut HashMap<AgentId, String>,
) -> Result<Markup, crate::store::StoreError> {
    let calls = state.store.calls_under_way(ws, SHOWN).await?;
    for id in calls.iter().filter_map(|c| c.agent_id) {
        if let std::collections::hash_map::Entry::Vacant(slot) = agents.entry(id) {
            let name = state.store.agent(ws, id).await?.map(|a| a.name);
            slot.insert(name.unwrap_or_default());
        }
    }
    Ok(table(&calls, agents, &state.live_turns, state.store.now()))
}

pub async fn page(State(state): State<App>, viewer: Viewer) -> Response {
    if !viewer.scopes.allows(Scope::CallsRead) {
        return denied(&viewer, Scope::CallsRead);
    }
    let mut agents = HashMap::new();
    let now = match read(&state, viewer.workspace_id, &mut agents).await {
        Ok(now) => now,
        Err(e) => return super::layout::unavailable(&viewer, e),
    };
    let body = html! {
        script src=(Url::asset(Asset::HtmxSse)) defer {}
        p.muted { "Updated as calls change, without reloading." }
        // Not a live region: its durations change every second, and a screen reader would read
        // the table out again each time. The table is there to be read at will.
        div hx-ext="sse" sse-connect=(Url::LiveEvents) sse-swap="calls" {
            (now)
        }
    };
    respond(
        StatusCode::OK,
        shell(Some(&viewer), "Live calls", Some(Url::Live), body),
    )
}

/// What a live page's stream keeps between its reads.
struct Follow {
    state: App,
    ws: WorkspaceId,
    /// The session cookie's token, checked again as the stream goes on.
    token: [u8; 32],
    /// Agents' names, read once each.
    agents: HashMap<AgentId, String>,
    /// The table last sent.
    last: String,
    /// Wait before the next read (not before the first).
    wait: bool,
    /// When the session was last found standing.
    checked: Option<Instant>,
}

/// The stream of the table, sent when it changed.
pub async fn events(
    State(state): State<App>,
    viewer: Viewer,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Response> {
    if !viewer.scopes.allows(Scope::CallsRead) {
        return Err(denied(&viewer, Scope::CallsRead));
    }
    let token = session_token(&headers).unwrap_or_default();
    let start = Follow {
        state,
        ws: viewer.workspace_id,
        token,
        agents: HashMap::new(),
        last: String::new(),
        wait: false,
        checked: None,
    };
    let updates = stream::unfold(start, |mut f| async move {
        loop {
            if f.wait {
                // A turn or a call's end wakes the stream at once; other changes are read
                // within a quarter of a second. The service stopping ends it.
                tokio::select! {
                    _ = tokio::time::sleep(EVERY) => {}
                    _ = f.state.live_turns.changed() => {}
                    _ = f.state.closing.cancelled() => return None,
                }
            }
            f.wait = true;
            // The session still stands (the key not revoked, the session not expired): asked
            // once a second, not at every read.
            if f.checked.is_none_or(|at| at.elapsed() >= SESSION_EVERY) {
                match f.state.store.dashboard_session(&f.token).await {
                    Ok(Some(s)) if s.workspace_id == f.ws => f.checked = Some(Instant::now()),
                    _ => return None,
                }
            }
            let html = match read(&f.state, f.ws, &mut f.agents).await {
                Ok(markup) => markup.into_string(),
                Err(e) => {
                    tracing::warn!(error = %e, "live calls could not be read");
                    continue;
                }
            };
            if html != f.last {
                f.last.clone_from(&html);
                let event = Event::default().event("calls").data(html);
                return Some((Ok(event), f));
            }
        }
    });
    Ok(Sse::new(updates).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_turn_shows_its_start_once_final_and_its_latest_words_while_said() {
        let text = format!("{}{}", "a".repeat(150), "b".repeat(50));
        let done = shortened(&text, false);
        assert_eq!(done, format!("{}{}…", "a".repeat(150), "b".repeat(10)));
        let saying = shortened(&text, true);
        assert_eq!(saying, format!("…{}{}", "a".repeat(110), "b".repeat(50)));
        assert_eq!(shortened("Hello", true), "Hello");
    }
}
