//! SIP endpoints at run time: one [`EndpointActor`](actor) per endpoint with calls, started on
//! its first INVITE and stopped when idle. It owns what belongs to one endpoint: who may call it
//! (its source filter), its live calls and their optional cap, and its `last_call_at`, written
//! in batches. The router only finds the actor ([`Endpoints::admit`]); the control plane tells
//! it when the endpoint changed ([`Endpoints::reload`]), so a deleted or deactivated endpoint
//! answers 404 from then on.
//!
//! A call holds a [`Seat`] from its INVITE until it ends, however it ends (refused later,
//! cancelled while ringing, hung up, failed inside): the seat gives itself back as it drops.

mod actor;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use switchboard_sip::acl::SourceFilter;

use crate::ids::{AgentId, SipEndpointId, WorkspaceId};
use crate::ports::{PortError, PortResult};
use actor::{EndpointActor, EndpointArgs, EndpointMsg, Seating};

/// Where an endpoint's calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRoute {
    pub id: SipEndpointId,
    pub workspace_id: WorkspaceId,
    pub slug: String,
    /// The agent answering its calls.
    pub agent_id: AgentId,
}

/// What an endpoint's actor holds: its route and its rules.
#[derive(Debug, Clone)]
pub struct EndpointFacts {
    pub route: EndpointRoute,
    pub sources: SourceFilter,
    /// Calls at once, ringing or answered; none: no cap of its own.
    pub max_concurrent_calls: Option<u32>,
}

/// What endpoint actors need from the store.
#[async_trait]
pub trait EndpointStore: Send + Sync + 'static {
    /// The endpoint `slug` names when it takes calls (not deleted, active, with an agent).
    async fn endpoint(&self, slug: &str) -> PortResult<Option<EndpointFacts>>;
    /// Moves the endpoint's `last_call_at` to `at`, unless it is later already.
    async fn last_call(&self, id: SipEndpointId, at: DateTime<Utc>) -> PortResult<()>;
}

/// How endpoint actors behave.
#[derive(Debug, Clone, Copy)]
pub struct EndpointSettings {
    /// The longest a call's start waits before `last_call_at` is written with its batch.
    pub flush_every: Duration,
    /// An actor without calls for this long stops (the next INVITE starts it again).
    pub idle_after: Duration,
}

impl Default for EndpointSettings {
    fn default() -> Self {
        Self {
            flush_every: Duration::from_secs(5),
            idle_after: Duration::from_secs(60),
        }
    }
}

/// What an INVITE for an endpoint gets.
#[derive(Debug)]
pub enum Admission {
    /// Taken: the call holds its seat until it ends.
    Seated { route: EndpointRoute, seat: Seat },
    /// No such endpoint, or deleted or inactive.
    Unknown,
    /// The source may not call it.
    Forbidden,
    /// The endpoint has its cap of calls already.
    Full,
    /// The endpoint could not be looked up now.
    Unavailable,
}

/// A call's place on its endpoint, given back when dropped.
#[derive(Debug)]
pub struct Seat {
    actor: ActorRef<EndpointMsg>,
}

impl Seat {
    /// The call was answered and recorded at `at`: the endpoint's `last_call_at`.
    pub fn called(&self, at: DateTime<Utc>) {
        let _ = self.actor.cast(EndpointMsg::Called { at });
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        // An actor that has stopped meanwhile counts nothing any more.
        let _ = self.actor.cast(EndpointMsg::Left);
    }
}

/// How long the router waits for an endpoint's actor before answering 503.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The endpoint actors running now, by slug, and their supervisor.
#[derive(Clone)]
pub struct Endpoints {
    registry: Arc<Registry>,
    supervisor: ActorRef<()>,
}

struct Registry {
    store: Arc<dyn EndpointStore>,
    settings: EndpointSettings,
    actors: Mutex<HashMap<String, (SipEndpointId, ActorRef<EndpointMsg>)>>,
    /// Moves on every change told to [`Endpoints::reload`]: an actor started from facts read
    /// before a change is not kept.
    epoch: AtomicU64,
    /// `last_call_at` writes done, over every endpoint.
    writes: AtomicU64,
}

impl Registry {
    fn find(&self, slug: &str) -> Option<ActorRef<EndpointMsg>> {
        let actors = self.actors.lock().unwrap_or_else(|e| e.into_inner());
        actors.get(slug).map(|(_, a)| a.clone())
    }

    /// Drops `slug`'s entry if it is still the actor `id`.
    fn forget(&self, slug: &str, id: ActorId) {
        let mut actors = self.actors.lock().unwrap_or_else(|e| e.into_inner());
        if actors.get(slug).is_some_and(|(_, a)| a.get_id() == id) {
            actors.remove(slug);
        }
    }
}

impl Endpoints {
    /// Starts the supervisor of endpoint actors.
    pub async fn start(
        store: Arc<dyn EndpointStore>,
        settings: EndpointSettings,
    ) -> Result<Self, ractor::SpawnErr> {
        let registry = Arc::new(Registry {
            store,
            settings,
            actors: Mutex::new(HashMap::new()),
            epoch: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let (supervisor, _) = Actor::spawn(None, EndpointSupervisor, registry.clone()).await?;
        Ok(Endpoints {
            registry,
            supervisor,
        })
    }

    /// Admits a call from `source` to the endpoint `slug` names.
    pub async fn admit(&self, slug: &str, source: IpAddr) -> Admission {
        // A second try covers an actor that stopped (idle) between finding it and asking it.
        for _ in 0..3 {
            let actor = match self.registry.find(slug) {
                Some(actor) => actor,
                None => match self.spawn(slug).await {
                    Ok(Some(actor)) => actor,
                    Ok(None) => return Admission::Unknown,
                    Err(e) => {
                        tracing::warn!(error = %e, "SIP endpoint lookup failed");
                        return Admission::Unavailable;
                    }
                },
            };
            let asked = actor
                .call(
                    |reply| EndpointMsg::Admit { source, reply },
                    Some(ASK_TIMEOUT),
                )
                .await;
            match asked {
                Ok(ractor::rpc::CallResult::Success(seating)) => {
                    return match seating {
                        Seating::Seated(route) => Admission::Seated {
                            route,
                            seat: Seat { actor },
                        },
                        Seating::Closed => Admission::Unknown,
                        Seating::Forbidden => Admission::Forbidden,
                        Seating::Full => Admission::Full,
                        Seating::Unavailable => Admission::Unavailable,
                    };
                }
                Ok(ractor::rpc::CallResult::Timeout) => return Admission::Unavailable,
                _ => self.registry.forget(slug, actor.get_id()),
            }
        }
        Admission::Unavailable
    }

    /// Starts the actor of the endpoint `slug` names; `None` when there is no such endpoint.
    async fn spawn(&self, slug: &str) -> PortResult<Option<ActorRef<EndpointMsg>>> {
        let registry = &self.registry;
        for _ in 0..3 {
            let epoch = registry.epoch.load(Ordering::SeqCst);
            let Some(facts) = registry.store.endpoint(slug).await? else {
                return Ok(None);
            };
            let id = facts.route.id;
            let args = EndpointArgs {
                facts,
                registry: registry.clone(),
            };
            let (actor, _) =
                Actor::spawn_linked(None, EndpointActor, args, self.supervisor.get_cell())
                    .await
                    .map_err(|e| PortError::failed("start an endpoint actor", e))?;
            let mut actors = registry.actors.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, running)) = actors.get(slug) {
                // Another INVITE started one first.
                let running = running.clone();
                drop(actors);
                actor.stop(None);
                return Ok(Some(running));
            }
            if registry.epoch.load(Ordering::SeqCst) != epoch {
                // Changed while it was read: read it again.
                drop(actors);
                actor.stop(None);
                continue;
            }
            actors.insert(slug.to_owned(), (id, actor.clone()));
            return Ok(Some(actor));
        }
        Err(PortError::failed(
            "start an endpoint actor",
            std::io::Error::other("the endpoint kept changing while it was read"),
        ))
    }

    /// The endpoint `id` changed (or was deleted): its actor reads it again before this
    /// returns, and stops taking calls if it no longer takes any.
    pub async fn reload(&self, id: SipEndpointId) {
        self.registry.epoch.fetch_add(1, Ordering::SeqCst);
        let actor = {
            let actors = self
                .registry
                .actors
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            actors
                .values()
                .find(|(endpoint, _)| *endpoint == id)
                .map(|(_, a)| a.clone())
        };
        if let Some(actor) = actor {
            let _ = actor
                .call(|reply| EndpointMsg::Reload { reply }, Some(ASK_TIMEOUT))
                .await;
        }
    }

    /// Endpoint actors running now.
    pub fn running(&self) -> usize {
        let actors = self
            .registry
            .actors
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        actors.len()
    }

    /// `last_call_at` writes done so far, over every endpoint.
    pub fn writes(&self) -> u64 {
        self.registry.writes.load(Ordering::Relaxed)
    }

    /// Stops every endpoint actor, each writing what it has not written yet.
    pub async fn stop(&self) {
        let actors: Vec<_> = {
            let actors = self
                .registry
                .actors
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            actors.values().map(|(_, a)| a.clone()).collect()
        };
        for actor in actors {
            let _ = actor.stop_and_wait(None, Some(ASK_TIMEOUT)).await;
        }
        let _ = self.supervisor.stop_and_wait(None, Some(ASK_TIMEOUT)).await;
    }
}

/// Supervises endpoint actors: one that fails is forgotten, and the next INVITE for its
/// endpoint starts it again from the store (its live calls go on; their count starts over).
struct EndpointSupervisor;

impl Actor for EndpointSupervisor {
    type Msg = ();
    type State = Arc<Registry>;
    type Arguments = Arc<Registry>;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        registry: Arc<Registry>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(registry)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        registry: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            tracing::error!(error = %err, "a SIP endpoint's actor failed; the next call starts it again");
            forget_cell(registry, &cell);
        }
        Ok(())
    }
}

fn forget_cell(registry: &Registry, cell: &ActorCell) {
    let mut actors = registry.actors.lock().unwrap_or_else(|e| e.into_inner());
    actors.retain(|_, (_, a)| a.get_id() != cell.get_id());
}
