//! The agent as an actor linked to its call's actor: a panic inside the agent fails this actor,
//! its call's actor hears of it through its supervision and ends the call as interrupted;
//! the line it held (the SIP dialog and its media) is let go as the agent's task unwinds.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::line::Line;
use super::work::Abort;
use super::{AgentEnd, AgentPlan, Speech, converse};

/// What the agent runs on.
pub struct AgentArgs {
    pub line: Box<dyn Line>,
    pub plan: AgentPlan,
    pub speech: Arc<dyn Speech>,
    /// When the call was connected.
    pub answered: Instant,
    /// Ends the call early (service shutdown).
    pub stop: CancellationToken,
    /// Resilience tests: the agent fails (a panic) as it starts.
    pub fail: bool,
}

/// How the agent's run ended.
pub enum AgentMsg {
    Ended,
    Crashed(String),
}

pub struct AgentActor;

pub struct AgentState {
    start: Option<(AgentArgs, oneshot::Sender<AgentEnd>)>,
    run: Option<JoinHandle<()>>,
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = (AgentArgs, oneshot::Sender<AgentEnd>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        start: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(AgentState {
            start: Some(start),
            run: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((args, end)) = state.start.take() else {
            return Ok(());
        };
        let mut work = Abort(tokio::spawn(async move {
            if args.fail {
                panic!("injected fault in a call's agent");
            }
            let ended = converse(
                args.line,
                &args.plan,
                &args.speech,
                args.answered,
                args.stop,
            )
            .await;
            let _ = end.send(ended);
        }));
        // The watcher owns the agent's task: stopping the actor stops the agent.
        state.run = Some(tokio::spawn(async move {
            let msg = match work.join().await {
                Ok(()) => AgentMsg::Ended,
                Err(error) => AgentMsg::Crashed(error.to_string()),
            };
            let _ = myself.cast(msg);
        }));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AgentMsg::Ended => {
                myself.stop(None);
                Ok(())
            }
            AgentMsg::Crashed(error) => Err(format!("the agent failed: {error}").into()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(run) = state.run.take() {
            run.abort();
        }
        Ok(())
    }
}

/// Runs the agent on `args.line` until the call ends: as an actor linked to `owner` (the
/// call's actor) when there is one, else on this task. `None` if the agent failed.
pub async fn run(args: AgentArgs, owner: Option<ActorCell>) -> Option<AgentEnd> {
    let Some(owner) = owner else {
        if args.fail {
            panic!("injected fault in a call's agent");
        }
        return Some(
            converse(
                args.line,
                &args.plan,
                &args.speech,
                args.answered,
                args.stop,
            )
            .await,
        );
    };
    let (end, ended) = oneshot::channel();
    if let Err(error) = Actor::spawn_linked(None, AgentActor, (args, end), owner).await {
        tracing::error!(%error, "the call's agent could not start");
        return None;
    }
    ended.await.ok()
}
