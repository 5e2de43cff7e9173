//! The campaign as the API shows it, and creating one (always `draft`).

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

use switchboard_actors::ids::{AgentId, CampaignId, PhoneNumberId, WorkspaceId};
use switchboard_actors::pacing::TickResult;
use switchboard_actors::window::CallingWindow;
use utoipa::ToSchema;

use crate::app::error::AppError;
use crate::app::state::App;
use crate::store::{
    Agent, CampaignRecord, CampaignSettings, CampaignStats, Disposition, PhoneNumberRecord,
};

pub const NOT_FOUND: AppError = AppError::not_found("Campaign");

/// `retry_rules`: a read-only view of the retry settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryRules {
    pub max_attempts: i64,
    pub max_infra_retries: i64,
    pub retry_no_answer_seconds: i64,
    pub retry_completed_seconds: i64,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    pub double_dial_gap_seconds: i64,
}

/// The campaign object.
#[derive(Debug, Serialize, ToSchema)]
pub struct CampaignView {
    pub id: uuid::Uuid,
    pub company_id: uuid::Uuid,
    pub name: String,
    pub description: String,
    /// draft, scheduled, running, paused, paused_insufficient_credit, paused_budget, paused_infra, paused_config, completed, stopped, archived.
    pub status: String,
    pub agent_id: Option<uuid::Uuid>,
    pub agent: Option<Agent>,
    pub from_phone_number_id: Option<uuid::Uuid>,
    pub from_phone_number: Option<PhoneNumberRecord>,
    /// Snapshot of the from-number taken at launch.
    pub from_number: Option<String>,
    pub regulatory_basis: Option<String>,
    pub retry_rules: RetryRules,
    /// `{timezone, days, start, end, use_contact_timezone}`; null uses the workspace's calling hours.
    #[schema(value_type = Option<Object>)]
    pub calling_window: Option<Value>,
    pub stop_disposition_ids: Vec<uuid::Uuid>,
    pub stop_dispositions: Vec<Disposition>,
    pub stop_on_no_answer: bool,
    pub stop_on_voicemail: bool,
    pub stop_on_unclassified: bool,
    /// 1-999 (default 3).
    pub max_attempts: i64,
    /// 0-20 (default 3).
    pub max_infra_retries: i64,
    /// 30-604800 (default 3600).
    pub retry_no_answer_seconds: i64,
    /// 60-604800 (default 86400).
    pub retry_completed_seconds: i64,
    pub randomize_retry_time: bool,
    pub double_dial_enabled: bool,
    /// 10-3600 (default 30).
    pub double_dial_gap_seconds: i64,
    /// 1-100000 (default 1000).
    pub max_calls_per_day: i64,
    /// 0-86400 (default 0).
    pub min_seconds_between_calls: i64,
    /// 1-8 (default 1).
    pub max_in_flight: i64,
    /// Positive cents, or null for no cap.
    pub budget_cents: Option<i64>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub daily_admitted_count: i64,
    pub daily_window_date: Option<NaiveDate>,
    pub last_admitted_at: Option<DateTime<Utc>>,
    pub estimate_cents: i64,
    pub spent_cents: i64,
    pub reserved_cents: i64,
    pub last_tick_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<String>)]
    pub last_tick_result: Option<TickResult>,
    pub last_error: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub total_leads: i64,
    pub stats: CampaignStats,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<uuid::Uuid>,
    /// Set when a command changed nothing (`Already running`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One campaign as the API shows it.
pub async fn view(
    state: &App,
    ws: WorkspaceId,
    c: CampaignRecord,
) -> Result<CampaignView, AppError> {
    let s = &c.settings;
    let agent = match s.agent_id {
        Some(id) => state.store.agent(ws, id).await?,
        None => None,
    };
    let from_phone_number = match s.from_phone_number_id {
        Some(id) => state.store.phone_number(ws, id).await?,
        None => None,
    };
    let stop_dispositions = state
        .store
        .existing_dispositions(ws, &s.rules.stop_disposition_ids)
        .await?;
    let stats = state.store.campaign_stats(ws, c.id).await?;
    let linked = Linked {
        agent,
        from_phone_number,
        stop_dispositions,
    };
    Ok(assemble(ws, c, linked, stats))
}

/// A page of campaigns as the API shows them: each agent and number they name read once, the
/// dispositions once, and every campaign's stats in two reads.
pub async fn views(
    state: &App,
    ws: WorkspaceId,
    campaigns: Vec<CampaignRecord>,
) -> Result<Vec<CampaignView>, AppError> {
    let store = &state.store;
    let mut agents: HashMap<AgentId, Option<Agent>> = HashMap::new();
    let mut numbers: HashMap<PhoneNumberId, Option<PhoneNumberRecord>> = HashMap::new();
    for c in &campaigns {
        if let Some(id) = c.settings.agent_id
            && !agents.contains_key(&id)
        {
            agents.insert(id, store.agent(ws, id).await?);
        }
        if let Some(id) = c.settings.from_phone_number_id
            && !numbers.contains_key(&id)
        {
            numbers.insert(id, store.phone_number(ws, id).await?);
        }
    }
    let dispositions = store.list_dispositions(ws).await?;
    let ids: Vec<CampaignId> = campaigns.iter().map(|c| c.id).collect();
    let mut stats = store.campaigns_stats(ws, &ids).await?;
    Ok(campaigns
        .into_iter()
        .map(|c| {
            let s = &c.settings;
            let linked = Linked {
                agent: s.agent_id.and_then(|id| agents.get(&id).cloned().flatten()),
                from_phone_number: s
                    .from_phone_number_id
                    .and_then(|id| numbers.get(&id).cloned().flatten()),
                stop_dispositions: crate::store::pick_dispositions(
                    &dispositions,
                    &s.rules.stop_disposition_ids,
                ),
            };
            let stats = stats.remove(&c.id).unwrap_or_default();
            assemble(ws, c, linked, stats)
        })
        .collect())
}

/// What a campaign's view shows of the records it names.
struct Linked {
    agent: Option<Agent>,
    from_phone_number: Option<PhoneNumberRecord>,
    stop_dispositions: Vec<Disposition>,
}

fn assemble(
    ws: WorkspaceId,
    c: CampaignRecord,
    linked: Linked,
    stats: CampaignStats,
) -> CampaignView {
    let Linked {
        agent,
        from_phone_number,
        stop_dispositions,
    } = linked;
    let s = c.settings;
    CampaignView {
        id: c.id.as_uuid(),
        company_id: ws.as_uuid(),
        name: s.name,
        description: s.description,
        status: c.status.as_str().to_owned(),
        agent_id: s.agent_id.map(|a| a.as_uuid()),
        agent,
        from_phone_number_id: s.from_phone_number_id.map(|p| p.as_uuid()),
        from_phone_number,
        from_number: c.from_number,
        regulatory_basis: s.regulatory_basis.map(|b| b.as_str().to_owned()),
        retry_rules: RetryRules {
            max_attempts: s.rules.max_attempts,
            max_infra_retries: s.rules.max_infra_retries,
            retry_no_answer_seconds: s.rules.retry_no_answer_seconds,
            retry_completed_seconds: s.rules.retry_completed_seconds,
            randomize_retry_time: s.rules.randomize_retry_time,
            double_dial_enabled: s.rules.double_dial_enabled,
            double_dial_gap_seconds: s.rules.double_dial_gap_seconds,
        },
        calling_window: s.calling_window.as_ref().map(CallingWindow::to_json),
        stop_disposition_ids: s
            .rules
            .stop_disposition_ids
            .iter()
            .map(|d| d.as_uuid())
            .collect(),
        stop_dispositions,
        stop_on_no_answer: s.rules.stop_on_no_answer,
        stop_on_voicemail: s.rules.stop_on_voicemail,
        stop_on_unclassified: s.rules.stop_on_unclassified,
        max_attempts: s.rules.max_attempts,
        max_infra_retries: s.rules.max_infra_retries,
        retry_no_answer_seconds: s.rules.retry_no_answer_seconds,
        retry_completed_seconds: s.rules.retry_completed_seconds,
        randomize_retry_time: s.rules.randomize_retry_time,
        double_dial_enabled: s.rules.double_dial_enabled,
        double_dial_gap_seconds: s.rules.double_dial_gap_seconds,
        max_calls_per_day: s.rules.max_calls_per_day,
        min_seconds_between_calls: s.rules.min_seconds_between_calls,
        max_in_flight: s.rules.max_in_flight,
        budget_cents: s.rules.budget_cents.map(|b| b.get()),
        starts_at: s.rules.starts_at,
        ends_at: s.rules.ends_at,
        daily_admitted_count: c.daily_admitted_count,
        daily_window_date: c.daily_window_date,
        last_admitted_at: c.last_admitted_at,
        estimate_cents: c.estimate_cents,
        spent_cents: c.spent_cents,
        reserved_cents: c.reserved_cents,
        last_tick_at: c.last_tick_at,
        last_tick_result: c.last_tick_result,
        last_error: c.last_error,
        started_at: c.started_at,
        completed_at: c.completed_at,
        total_leads: stats.total_contacts,
        stats,
        created_at: c.created_at,
        updated_at: c.updated_at,
        created_by: c.created_by.map(|k| k.as_uuid()),
        message: None,
    }
}

/// The calling window a campaign runs in: its own, else the workspace's, else the default.
pub async fn effective_window(
    state: &App,
    ws: WorkspaceId,
    settings: &CampaignSettings,
) -> Result<CallingWindow, AppError> {
    state
        .store
        .campaign_window(ws, settings)
        .await?
        .ok_or(AppError::not_found("Workspace"))
}

#[cfg(test)]
mod tests {
    use switchboard_actors::campaign::{INT_RULES, SettingKind, setting_named};
    use utoipa::PartialSchema;

    use super::*;

    /// The view's descriptions are written out (a doc comment each); they say what the settings
    /// table holds.
    #[test]
    fn the_view_describes_each_integer_setting_by_its_rule() {
        let schema = serde_json::to_value(CampaignView::schema()).unwrap();
        for rule in INT_RULES {
            assert_eq!(
                schema["properties"][rule.field]["description"],
                format!("{}-{} (default {}).", rule.min, rule.max, rule.default),
                "{}",
                rule.field
            );
        }
        let budget = setting_named("budget_cents").unwrap();
        assert_eq!(budget.kind, SettingKind::Budget);
        assert_eq!(
            schema["properties"]["budget_cents"]["description"],
            budget.doc.unwrap()
        );
    }
}
