//! A campaign's chart: its calls counted by when they were admitted and by when, and how,
//! they ended, in at most 400 buckets across its life so far. The page carries the numbers
//! twice: as the chart's data (drawn by the vendored uPlot from `app.js`) and as a table.

use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde_json::{Value, json};
use switchboard_actors::ids::CampaignId;

use super::assets::Asset;
use super::layout::unavailable;
use super::viewer::Viewer;
use crate::app::state::App;

/// The chart's script and style, on the pages that draw it.
pub const SCRIPTS: &[Asset] = &[Asset::UplotJs];
pub const STYLES: &[Asset] = &[Asset::UplotCss];

/// The chart's buckets: the finest step that keeps the campaign's life so far within 400.
fn step_for(span_secs: i64) -> i64 {
    crate::store::TIMELINE_STEPS
        .iter()
        .map(|(step, _, _)| *step)
        .find(|step| span_secs / step <= 400)
        .unwrap_or(86_400)
}

/// Admissions and outcomes over time, as the chart's data and a table of the same numbers.
pub async fn timeline(state: &App, viewer: &Viewer, c: &Value) -> Result<Markup, Response> {
    let time = |k: &str| {
        c[k].as_str()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let Some(start) = time("started_at") else {
        return Ok(html! { p.muted { "The chart starts when the campaign is launched." } });
    };
    let end = time("completed_at").unwrap_or_else(|| state.store.now());
    let step = step_for((end - start).num_seconds().max(1));
    let id = c["id"]
        .as_str()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .map(CampaignId::from_uuid);
    let Some(id) = id else {
        return Ok(html! {});
    };
    let data = state
        .store
        .campaign_timeline(viewer.workspace_id, id, step)
        .await
        .map_err(|e| unavailable(viewer, e))?;
    // Buckets start at whole steps of UTC time, as the stored times' prefixes do.
    let first = start.timestamp() / step * step;
    // Two buckets at least, so the time axis has a span.
    let last = (end.timestamp() / step * step).max(first + step);
    let buckets: Vec<i64> = (0..=((last - first) / step).min(400))
        .map(|i| first + i * step)
        .collect();
    let index = |at: i64| ((at - first) / step).clamp(0, buckets.len() as i64 - 1) as usize;
    let mut admitted = vec![0i64; buckets.len()];
    for (at, n) in &data.admitted {
        admitted[index(*at)] += n;
    }
    let mut outcomes: Vec<(String, Vec<i64>)> = Vec::new();
    for (at, outcome, n) in &data.ended {
        let i = match outcomes.iter().position(|(o, _)| o == outcome) {
            Some(i) => i,
            None => {
                outcomes.push((outcome.clone(), vec![0; buckets.len()]));
                outcomes.len() - 1
            }
        };
        outcomes[i].1[index(*at)] += n;
    }
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    let mut series = vec![json!({"label": "admitted", "values": admitted})];
    series.extend(
        outcomes
            .iter()
            .map(|(o, v)| json!({"label": o, "values": v})),
    );
    let chart = json!({"t": buckets, "step": step, "series": series}).to_string();
    let label = format!(
        "Calls admitted and their outcomes, per {} since launch",
        if step < 60 {
            format!("{step} seconds")
        } else if step < 3600 {
            format!("{} minutes", step / 60)
        } else {
            format!("{} hours", step / 3600)
        }
    );
    Ok(html! {
        figure.chart {
            div id="timeline" class="timeline" data-chart=(chart) role="img" aria-label=(label) {}
            figcaption.muted { (label) }
        }
        details {
            summary { "The chart's numbers" }
            table {
                thead { tr {
                    th scope="col" { "From (UTC)" } th scope="col" { "Admitted" }
                    @for (o, _) in &outcomes { th scope="col" { (o) } }
                } }
                tbody {
                    @for (i, at) in buckets.iter().enumerate() {
                        @if admitted[i] > 0 || outcomes.iter().any(|(_, v)| v[i] > 0) {
                            tr {
                                td { (DateTime::from_timestamp(*at, 0).map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_default()) }
                                td.num { (admitted[i]) }
                                @for (_, v) in &outcomes { td.num { (v[i]) } }
                            }
                        }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_keeps_at_most_four_hundred_buckets() {
        assert_eq!(step_for(30), 10);
        assert_eq!(step_for(3_600), 10);
        assert_eq!(step_for(86_400), 600);
        assert_eq!(step_for(10 * 86_400), 3600);
        assert_eq!(step_for(30 * 86_400), 86_400);
    }
}
