//! A campaign's contacts as the API shows them: each with why it is or is not being dialled
//! now.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::contact::{ContactState, ExclusionReason};
use switchboard_actors::pacing::{CampaignFacts, ContactFacts, contact_hold};
use switchboard_actors::window::CallingWindow;
use utoipa::ToSchema;

use crate::app::campaigns::view::effective_window;
use crate::app::error::AppError;
use crate::app::state::App;
use crate::store::{CallRecord, CampaignRecord, Contact};

/// Why a contact is, or is not, being dialled now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactStatus {
    /// `call_in_progress`, `awaiting_disposition`, `retry_scheduled`, `outside_calling_window`,
    /// `daily_cap_reached`, `waiting_for_a_slot`, `campaign_<status>`, `retired`, `exhausted`,
    /// `excluded:<reason>`.
    pub reason: String,
    /// When that changes, if known.
    pub until: Option<DateTime<Utc>>,
    pub message: String,
}

/// A contact with its calls (every dial of every attempt) and why it is where it is.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactDetail {
    #[serde(flatten)]
    pub contact: Contact,
    /// Every call placed for the contact, oldest first.
    pub calls: Vec<CallRecord>,
    pub dialing_status: ContactStatus,
}

/// Why each of `contacts` (of campaign `c`) is, or is not, being dialled now.
pub async fn dialing_statuses(
    state: &App,
    c: &CampaignRecord,
    contacts: &[Contact],
) -> Result<Vec<ContactStatus>, AppError> {
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    let mut statuses = Vec::with_capacity(contacts.len());
    for contact in contacts {
        // Only a contact awaiting its disposition needs its last call (for when that ends).
        let last_ended = if contact.state == ContactState::AwaitingDisposition {
            let calls = state
                .store
                .contact_calls(c.workspace_id, contact.id)
                .await?;
            calls.last().and_then(|k| k.ended_at)
        } else {
            None
        };
        statuses.push(hold_of(state, c, &window, contact, last_ended)?);
    }
    Ok(statuses)
}

fn hold_of(
    state: &App,
    c: &CampaignRecord,
    window: &CallingWindow,
    contact: &Contact,
    last_call_ended_at: Option<DateTime<Utc>>,
) -> Result<ContactStatus, AppError> {
    let campaign = CampaignFacts {
        status: c.status,
        window,
        ends_at: c.settings.rules.ends_at,
        daily_window_date: c.daily_window_date,
        daily_admitted_count: c.daily_admitted_count,
        max_calls_per_day: c.settings.rules.max_calls_per_day,
        disposition_timeout: chrono::Duration::from_std(state.config.disposition_timeout)
            .unwrap_or(chrono::Duration::MAX),
    };
    let facts = ContactFacts {
        state: contact.state,
        attempts: contact.attempts,
        excluded_reason: contact.excluded_reason.map(ExclusionReason::as_str),
        next_attempt_at: contact.next_attempt_at,
        timezone: contact.timezone.as_deref(),
        phone_number: &contact.phone_number,
        last_call_ended_at,
    };
    let hold = contact_hold(&campaign, &facts, state.store.now());
    Ok(ContactStatus {
        reason: hold.reason(),
        until: hold.until(),
        message: hold.message(c.last_tick_result),
    })
}

pub async fn contact_status(
    state: &App,
    c: &CampaignRecord,
    contact: &Contact,
    calls: &[CallRecord],
) -> Result<ContactStatus, AppError> {
    let window = effective_window(state, c.workspace_id, &c.settings).await?;
    hold_of(
        state,
        c,
        &window,
        contact,
        calls.last().and_then(|k| k.ended_at),
    )
}
