//! `EndpointActor`: one endpoint's calls, its rules and its `last_call_at` (see the module
//! docs of `endpoint`).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::time::Instant;

use super::{EndpointFacts, EndpointRoute, Registry};

pub(crate) enum EndpointMsg {
    /// A call from `source` asks for a seat.
    Admit {
        source: IpAddr,
        reply: RpcReplyPort<Seating>,
    },
    /// A seated call was answered and recorded at `at`.
    Called { at: DateTime<Utc> },
    /// A seated call is over.
    Left,
    /// The endpoint changed: read it again.
    Reload { reply: RpcReplyPort<()> },
    /// Time to write `last_call_at`.
    Flush,
    /// Time to see whether it has been idle long enough.
    Idle,
}

/// The answer to [`EndpointMsg::Admit`].
pub(crate) enum Seating {
    Seated(EndpointRoute),
    /// Deleted or deactivated since the actor started.
    Closed,
    Forbidden,
    Full,
    /// Its facts could not be read again after a change.
    Unavailable,
}

pub(crate) struct EndpointArgs {
    pub facts: EndpointFacts,
    pub registry: Arc<Registry>,
}

pub(crate) struct EndpointState {
    facts: EndpointFacts,
    registry: Arc<Registry>,
    /// Seated calls, ringing or answered.
    live: u32,
    /// Takes calls; `false` once deleted or deactivated (it stops with its last call).
    open: bool,
    /// A change was told but could not be read: read again before the next call.
    stale: bool,
    /// The latest call start not yet written.
    unwritten: Option<DateTime<Utc>>,
    flush_armed: bool,
    idle_armed: bool,
    /// The last admission or call end.
    active_at: Instant,
}

pub(crate) struct EndpointActor;

impl EndpointState {
    fn seat(&mut self, source: IpAddr) -> Seating {
        if !self.open {
            return Seating::Closed;
        }
        if !self.facts.sources.allows(source) {
            return Seating::Forbidden;
        }
        if self
            .facts
            .max_concurrent_calls
            .is_some_and(|cap| self.live >= cap)
        {
            return Seating::Full;
        }
        self.live += 1;
        Seating::Seated(self.facts.route.clone())
    }

    /// Reads the endpoint again: it stays open only if it still takes calls.
    async fn refresh(&mut self) -> bool {
        match self.registry.store.endpoint(&self.facts.route.slug).await {
            Ok(Some(facts)) => {
                self.facts = facts;
                self.open = true;
                self.stale = false;
            }
            Ok(None) => {
                self.open = false;
                self.stale = false;
            }
            Err(e) => {
                tracing::warn!(endpoint = %self.facts.route.id, error = %e, "a changed SIP endpoint could not be read");
                self.stale = true;
            }
        }
        !self.stale
    }

    /// Writes the latest call start; kept for the next try if the store fails.
    async fn flush(&mut self) {
        let Some(at) = self.unwritten else { return };
        match self.registry.store.last_call(self.facts.route.id, at).await {
            Ok(()) => {
                self.registry.writes.fetch_add(1, Ordering::Relaxed);
                if self.unwritten == Some(at) {
                    self.unwritten = None;
                }
            }
            Err(e) => {
                tracing::warn!(endpoint = %self.facts.route.id, error = %e, "an endpoint's last_call_at could not be written");
            }
        }
    }

    fn arm_flush(&mut self, myself: &ActorRef<EndpointMsg>) {
        if self.unwritten.is_some() && !self.flush_armed {
            self.flush_armed = true;
            myself.send_after(self.registry.settings.flush_every, || EndpointMsg::Flush);
        }
    }

    /// Watches for idleness once no call is left.
    fn arm_idle(&mut self, myself: &ActorRef<EndpointMsg>, wait: Duration) {
        if self.live == 0 && !self.idle_armed {
            self.idle_armed = true;
            myself.send_after(wait, || EndpointMsg::Idle);
        }
    }
}

impl Actor for EndpointActor {
    type Msg = EndpointMsg;
    type State = EndpointState;
    type Arguments = EndpointArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EndpointArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = EndpointState {
            facts: args.facts,
            registry: args.registry,
            live: 0,
            open: true,
            stale: false,
            unwritten: None,
            flush_armed: false,
            idle_armed: false,
            active_at: Instant::now(),
        };
        let idle = state.registry.settings.idle_after;
        state.arm_idle(&myself, idle);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let idle = state.registry.settings.idle_after;
        match msg {
            EndpointMsg::Admit { source, reply } => {
                state.active_at = Instant::now();
                let seating = if state.stale && !state.refresh().await {
                    Seating::Unavailable
                } else {
                    state.seat(source)
                };
                let _ = reply.send(seating);
            }
            EndpointMsg::Called { at } => {
                state.unwritten = state.unwritten.max(Some(at));
                state.arm_flush(&myself);
            }
            EndpointMsg::Left => {
                state.active_at = Instant::now();
                state.live = state.live.saturating_sub(1);
            }
            EndpointMsg::Reload { reply } => {
                state.refresh().await;
                let _ = reply.send(());
            }
            EndpointMsg::Flush => {
                state.flush_armed = false;
                state.flush().await;
                state.arm_flush(&myself);
            }
            EndpointMsg::Idle => {
                state.idle_armed = false;
                let quiet = state.active_at.elapsed();
                if state.live == 0 && quiet >= idle {
                    myself.stop(Some("idle".into()));
                    return Ok(());
                }
                state.arm_idle(&myself, idle.saturating_sub(quiet));
            }
        }
        if !state.open && state.live == 0 {
            // Deleted or deactivated, and its last call is over.
            myself.stop(Some("closed".into()));
            return Ok(());
        }
        state.arm_idle(&myself, idle);
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state
            .registry
            .forget(&state.facts.route.slug, myself.get_id());
        state.flush().await;
        Ok(())
    }
}
