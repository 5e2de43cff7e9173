//! `GET /metrics` in Prometheus' text format, on its own listener (`--metrics-listen`,
//! 127.0.0.1:9464 unless set; `none` turns it off), never on the API's port: operational
//! figures are not public.
//!
//! Gauges are what is true now; a name ending in `_total` is a counter (what has happened
//! since the process started).

use std::fmt::Write;
use std::sync::OnceLock;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use switchboard_sip::admission::Refusal;

use super::state::AppState;

/// The metrics listener, serving until [`Listener::stop`].
pub struct Listener {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Serves [`router`] on `listener`.
    pub fn spawn(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<Listener> {
        tracing::info!(addr = %listener.local_addr()?, "metrics listening");
        let app = router(state);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(error = %e, "the metrics listener stopped");
            }
        });
        Ok(Listener { stop, task })
    }

    /// Stops serving and waits until it has stopped.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// The metrics listener's router: `GET /metrics`, and 404 for anything else.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state(state)
}

async fn metrics(State(state): State<AppState>) -> Response {
    // The engine's own figures, read at scrape time.
    let queue = state.engine.queue_stats();
    metrics::gauge!("switchboard_calls_waiting").set(queue.waiting as f64);
    metrics::gauge!("switchboard_calls_live").set(queue.live as f64);
    metrics::gauge!("switchboard_campaigns_running").set(state.engine.running_campaigns() as f64);
    if let Some(sip) = &state.sip {
        let admission = sip.admission();
        metrics::gauge!("switchboard_sip_calls").set(sip.calls() as f64);
        metrics::counter!("switchboard_sip_invites_admitted_total").absolute(admission.admitted);
        for (why, n) in Refusal::ALL.iter().zip(admission.refused) {
            metrics::counter!("switchboard_sip_invites_refused_total", "reason" => why.as_str())
                .absolute(n);
        }
        metrics::gauge!("switchboard_sip_setups").set(admission.setting_up as f64);
        metrics::gauge!("switchboard_sip_lag_seconds").set(admission.lag_us as f64 / 1e6);
        let tx = sip.transactions();
        for (table, n) in [
            ("running", tx.running),
            ("finished", tx.finished),
            ("waiting_ack", tx.waiting_ack),
        ] {
            metrics::gauge!("switchboard_sip_transactions", "table" => table).set(n as f64);
        }
        metrics::gauge!("switchboard_sip_transaction_timers").set(tx.timers as f64);
        metrics::counter!("switchboard_rtp_foreign_packets_total")
            .absolute(sip.foreign_rtp_packets());
    }
    let groups = state.store.group_stats();
    metrics::counter!("switchboard_store_write_groups_total").absolute(groups.groups);
    metrics::counter!("switchboard_store_grouped_writes_total").absolute(groups.writes);
    if let Some(endpoints) = &state.endpoints {
        metrics::gauge!("switchboard_sip_endpoint_actors").set(endpoints.running() as f64);
        metrics::counter!("switchboard_sip_endpoint_last_call_writes_total")
            .absolute(endpoints.writes());
    }
    let (evaluations, took) = state.engine.stats().evaluations();
    metrics::counter!("switchboard_campaign_evaluations_total").absolute(evaluations);
    let mut text = state.metrics.render();
    // A counter in seconds is a float, which the recorder's counters (integers) cannot hold.
    let _ = write!(
        text,
        "# HELP switchboard_campaign_evaluation_seconds_total Time spent evaluating campaigns.\n\
         # TYPE switchboard_campaign_evaluation_seconds_total counter\n\
         switchboard_campaign_evaluation_seconds_total {}\n",
        took.as_secs_f64()
    );
    runtime_figures(&mut text);
    media_figures(&mut text);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The async runtime's figures: its worker threads' busy time and the tasks alive (the
/// agents, dialogs and requests).
fn runtime_figures(text: &mut String) {
    let m = tokio::runtime::Handle::current().metrics();
    let _ = write!(
        text,
        "# HELP switchboard_runtime_tasks Tasks alive on the async runtime.\n\
         # TYPE switchboard_runtime_tasks gauge\n\
         switchboard_runtime_tasks {}\n\
         # HELP switchboard_runtime_queue_depth Tasks waiting in the runtime's global queue.\n\
         # TYPE switchboard_runtime_queue_depth gauge\n\
         switchboard_runtime_queue_depth {}\n\
         # HELP switchboard_runtime_busy_seconds_total Time each runtime worker spent running tasks.\n\
         # TYPE switchboard_runtime_busy_seconds_total counter\n",
        m.num_alive_tasks(),
        m.global_queue_depth(),
    );
    for w in 0..m.num_workers() {
        let _ = writeln!(
            text,
            "switchboard_runtime_busy_seconds_total{{worker=\"{w}\"}} {}",
            m.worker_total_busy_duration(w).as_secs_f64()
        );
    }
}

/// The media workers' figures: streams each carries, time spent in frames, and how late each
/// frame pass ended against its due time (the delay the pass's last call's packet saw).
fn media_figures(text: &mut String) {
    use switchboard_sip::media::{worker_figures, workers::LAG_BUCKETS_MS};
    let figures = worker_figures();
    if figures.is_empty() {
        return;
    }
    let _ = write!(
        text,
        "# HELP switchboard_media_streams Calls' media each media worker carries.\n\
         # TYPE switchboard_media_streams gauge\n"
    );
    for (w, f) in figures.iter().enumerate() {
        let _ = writeln!(
            text,
            "switchboard_media_streams{{worker=\"{w}\"}} {}",
            f.streams
        );
    }
    let _ = write!(
        text,
        "# HELP switchboard_media_busy_seconds_total Time each media worker spent in frames.\n\
         # TYPE switchboard_media_busy_seconds_total counter\n"
    );
    for (w, f) in figures.iter().enumerate() {
        let _ = writeln!(
            text,
            "switchboard_media_busy_seconds_total{{worker=\"{w}\"}} {}",
            f.busy.as_secs_f64()
        );
    }
    let _ = write!(
        text,
        "# HELP switchboard_media_frame_lag_seconds How late each frame pass ended against its due time.\n\
         # TYPE switchboard_media_frame_lag_seconds histogram\n"
    );
    for (w, f) in figures.iter().enumerate() {
        let mut below = 0;
        for (bound, n) in LAG_BUCKETS_MS.iter().zip(f.lag) {
            below += n;
            let _ = writeln!(
                text,
                "switchboard_media_frame_lag_seconds_bucket{{worker=\"{w}\",le=\"{}\"}} {below}",
                *bound as f64 / 1000.0
            );
        }
        let _ = write!(
            text,
            "switchboard_media_frame_lag_seconds_bucket{{worker=\"{w}\",le=\"+Inf\"}} {}\n\
             switchboard_media_frame_lag_seconds_sum{{worker=\"{w}\"}} {}\n\
             switchboard_media_frame_lag_seconds_count{{worker=\"{w}\"}} {}\n",
            f.passes,
            f.lag_total.as_secs_f64(),
            f.passes
        );
    }
}

/// The process-wide Prometheus recorder (installed once; later services share it).
pub fn handle() -> anyhow::Result<PrometheusHandle> {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = match PrometheusBuilder::new().install_recorder() {
        Ok(handle) => handle,
        // Another thread won the race; use its recorder.
        Err(_) => {
            return HANDLE
                .get()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("metrics recorder unavailable"));
        }
    };
    Ok(HANDLE.get_or_init(|| handle).clone())
}
