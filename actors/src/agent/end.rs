//! The end of a conversing call: the tools it dispatched are waited for a little, what was
//! heard and said last is written down with the course's path, and the line's media stops.

use std::time::Duration;

use tokio::time::Instant;

use super::session::Agent;
use super::work::{Work, WorkRx};
use super::{AgentEnd, EndReason};

/// How long an ended call waits for the tools it dispatched to answer, so their runs are on
/// its record.
const TOOL_DRAIN: Duration = Duration::from_secs(5);

impl Agent<'_> {
    /// After the loop: tools still running are waited for a little, what was heard and said
    /// last is written down, and the line's media is stopped.
    pub(super) async fn end(
        mut self,
        reason: EndReason,
        inbox: &mut WorkRx,
        stop: &tokio_util::sync::CancellationToken,
    ) -> AgentEnd {
        self.reply.write(None);
        // Dispatched tools cannot be stopped: their runs belong on the call's record.
        if self.tools_in_flight > 0 && !stop.is_cancelled() {
            let until = Instant::now() + TOOL_DRAIN;
            while self.tools_in_flight > 0 {
                match tokio::time::timeout_at(until, inbox.recv()).await {
                    Ok(Some(Work::ToolDone { mut run, at_ms, .. })) => {
                        self.tools_in_flight -= 1;
                        run.event.at_ms = at_ms;
                        self.record.event(run.event);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
        // What the caller said last, if the call ended before the agent could answer it.
        if let Some(turn) = self.listening.take_turn() {
            self.record.turn(turn);
        }
        let now_ms = self.now_ms();
        self.reply.hung_up(self.line.sample_rate());
        self.reply.finish(&mut self.record, now_ms, true);
        self.tell_turns();
        if let Some(sink) = &self.plan.turns {
            sink.flush().await;
        }
        let duration_secs = self.answered.elapsed().as_secs() as i64;
        let stats = self.line.finish().await;
        let path = self.course.director().map(|d| d.path()).unwrap_or_default();
        AgentEnd {
            reason,
            duration_secs,
            stats,
            answered_by: self.machine.answered_by(),
            conversation: self.record.finish(path),
            director: self.course.into_director(),
        }
    }
}
