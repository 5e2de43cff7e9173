//! The service's side of the call actor's [`Integrations`] port: an integration_call node's
//! dispatch, checked against the store at each run, then sent to the provider.
//!
//! Each run reads the integration again, so a disconnect applies to the next dispatch and a
//! reconnect ends the error at once. The hard failures, as the spec names them:
//! - `integration_foreign`: the id is not an integration of the call's workspace (another
//!   company's, or none), or one of another provider than the node's;
//! - `integration_disconnected`: disconnected, connected without an OAuth grant, or its
//!   grant refused by Google (`invalid_grant`; the integration is then disconnected, and
//!   stays in error until it is connected again);
//! - `missing_required_argument`: a required argument resolved to nothing (nothing is sent);
//! - `provider_4xx` / `provider_5xx`: the provider's status, and an argument the provider
//!   would refuse (a time that is not ISO 8601, an unknown zone, a malformed address), which
//!   is not sent;
//! - `network_timeout`: no answer in time, or the network failed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value};
use switchboard_actors::call_tools::{IntegrationRun, Integrations};
use switchboard_actors::conversation::{ToolEvent, ToolStatus};
use switchboard_actors::flow::Outcome;
use switchboard_actors::flow::routing::HardFailure;
use switchboard_actors::ids::{IntegrationId, WorkspaceId};

use crate::domain::integrations::Action;
use crate::domain::secrets::{Secrets, SecretsError};
use crate::edge::egress::Egress;
use crate::edge::google::actions::{self, Account, ActionError, Done};
use crate::edge::google::client::{Failure, Google, GoogleUrls, OAuthGrant, shortened};
use crate::store::{Integration, IntegrationStatus, Store};

/// The providers of every call: Google, the store, and the secrets key that opens grants.
pub struct Providers {
    store: Store,
    pub google: Google,
    secrets_path: PathBuf,
    secrets: std::sync::Mutex<Option<Arc<Secrets>>>,
}

impl Providers {
    pub fn new(
        store: Store,
        egress: Egress,
        urls: GoogleUrls,
        timeout: Duration,
        secrets_path: PathBuf,
    ) -> Providers {
        Providers {
            store,
            google: Google::new(egress, urls, timeout),
            secrets_path,
            secrets: std::sync::Mutex::new(None),
        }
    }

    /// The secrets key, read (or created) on first use.
    pub fn secrets(&self) -> Result<Arc<Secrets>, SecretsError> {
        let mut held = self.secrets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(secrets) = held.as_ref() {
            return Ok(secrets.clone());
        }
        let secrets = Arc::new(Secrets::load_or_create(&self.secrets_path)?);
        *held = Some(secrets.clone());
        Ok(secrets)
    }

    /// The integrations of one call of `workspace`.
    pub fn for_call(self: &Arc<Self>, workspace: WorkspaceId) -> Arc<dyn Integrations> {
        Arc::new(CallIntegrations {
            providers: self.clone(),
            workspace,
        })
    }
}

/// A grant sealed for the integration `id`.
pub fn seal_grant(secrets: &Secrets, id: IntegrationId, grant: &OAuthGrant) -> String {
    let plain = serde_json::to_vec(grant).unwrap_or_default();
    secrets.seal(&plain, id.as_uuid().as_bytes())
}

fn open_grant(secrets: &Secrets, id: IntegrationId, sealed: &str) -> Option<OAuthGrant> {
    let plain = secrets.open(sealed, id.as_uuid().as_bytes()).ok()?;
    serde_json::from_slice(&plain).ok()
}

/// Connects `account` of `provider` for `workspace` (again: the same integration, connected
/// again), with its OAuth grant sealed.
pub async fn connect(
    store: &Store,
    secrets: &Secrets,
    workspace: WorkspaceId,
    provider: &str,
    account: &str,
    grant: Option<&OAuthGrant>,
) -> crate::store::StoreResult<Integration> {
    store
        .connect_integration(workspace, provider, account, |id| {
            grant.map(|g| seal_grant(secrets, id, g))
        })
        .await
}

/// Why a dispatch failed, for the call's events.
struct Refusal {
    why: HardFailure,
    error: String,
    status_code: Option<u16>,
}

fn refusal(why: HardFailure, error: impl Into<String>) -> Refusal {
    Refusal {
        why,
        error: error.into(),
        status_code: None,
    }
}

struct CallIntegrations {
    providers: Arc<Providers>,
    workspace: WorkspaceId,
}

impl CallIntegrations {
    /// The integration `raw_id`, if this call may use it for `provider`, with its grant.
    async fn usable(
        &self,
        raw_id: &str,
        provider: &str,
    ) -> Result<(IntegrationId, Integration, OAuthGrant), Refusal> {
        let foreign = || {
            refusal(
                HardFailure::ForeignIntegration,
                format!("{raw_id:?} is not an integration of this workspace"),
            )
        };
        let id = uuid::Uuid::parse_str(raw_id.trim())
            .map(IntegrationId::from_uuid)
            .map_err(|_| foreign())?;
        let (workspace, integration, sealed) = match self
            .providers
            .store
            .integration_for_run(id)
            .await
        {
            Ok(Some(found)) => found,
            Ok(None) => return Err(foreign()),
            Err(e) => {
                tracing::warn!(integration = %id, error = %e, "an integration could not be read");
                return Err(refusal(
                    HardFailure::Timeout,
                    "the integration could not be read",
                ));
            }
        };
        if workspace != self.workspace {
            return Err(foreign());
        }
        if integration.provider.name() != provider {
            return Err(refusal(
                HardFailure::ForeignIntegration,
                format!(
                    "the integration is a {} account, not a {provider} account",
                    integration.provider
                ),
            ));
        }
        let disconnected = |why: &str| refusal(HardFailure::Disconnected, why.to_string());
        if integration.status != IntegrationStatus::Connected {
            return Err(disconnected(
                "the integration is disconnected: connect it again to use it",
            ));
        }
        let Some(sealed) = sealed else {
            return Err(disconnected(
                "the integration was connected without an OAuth grant: connect it again with one",
            ));
        };
        let secrets = self.providers.secrets().map_err(|e| {
            tracing::error!(error = %e, "the secrets key cannot be read");
            disconnected("the service's secrets key cannot be read")
        })?;
        let grant = open_grant(&secrets, id, &sealed).ok_or_else(|| {
            disconnected("the integration's grant does not open with this service's secrets key: connect it again")
        })?;
        Ok((id, integration, grant))
    }

    async fn dispatch(
        &self,
        raw_id: &str,
        provider: &str,
        action: &str,
        args: &Map<String, Value>,
    ) -> Result<Done, Refusal> {
        let (id, integration, grant) = self.usable(raw_id, provider).await?;
        let account = Account {
            google: &self.providers.google,
            id,
            grant: &grant,
            address: &integration.account,
        };
        let ran = match Action::find(provider, action) {
            Some(action) => actions::run(&account, action, args).await,
            None => Err(ActionError::Invalid(format!(
                "`{provider}.{action}` is not in the action catalog"
            ))),
        };
        match ran {
            Ok(done) => Ok(done),
            Err(ActionError::Missing(name)) => Err(refusal(
                HardFailure::MissingArgument,
                format!("`{name}` is required and resolved to nothing: nothing was sent"),
            )),
            Err(ActionError::Invalid(why)) => Err(refusal(
                HardFailure::Provider(400),
                format!("{why}: not sent, the provider refuses it"),
            )),
            Err(ActionError::Failure(Failure::Status(code, body))) => Err(Refusal {
                why: HardFailure::Provider(code),
                error: format!("the provider answered {code}: {body}"),
                status_code: Some(code),
            }),
            Err(ActionError::Failure(Failure::Network(why))) => {
                Err(refusal(HardFailure::Timeout, why))
            }
            Err(ActionError::Failure(Failure::Revoked(why))) => {
                tracing::warn!(integration = %id, "Google refused an integration's grant: it is disconnected");
                if let Err(e) = self
                    .providers
                    .store
                    .disconnect_integration(self.workspace, id)
                    .await
                {
                    tracing::warn!(integration = %id, error = %e, "a revoked integration could not be marked disconnected");
                }
                self.providers.google.forget(id).await;
                Err(refusal(
                    HardFailure::Disconnected,
                    format!("{why}: the integration is disconnected until it is connected again"),
                ))
            }
        }
    }
}

#[async_trait]
impl Integrations for CallIntegrations {
    async fn run(
        &self,
        node_id: &str,
        integration_id: &str,
        provider: &str,
        action: &str,
        arguments: &Map<String, Value>,
    ) -> IntegrationRun {
        let started = Instant::now();
        let result = self
            .dispatch(integration_id, provider, action, arguments)
            .await;
        let mut event = ToolEvent::at_once(
            &format!("{provider}.{action}"),
            Value::Object(arguments.clone()),
            ToolStatus::Succeeded,
            None,
        );
        event.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let outcome = match result {
            Ok(done) => {
                event.response_preview = Some(shortened(&done.view.to_string()));
                if !done.raw.is_null() {
                    event.raw_response_preview = Some(shortened(&done.raw.to_string()));
                }
                Outcome::Done(done.view)
            }
            Err(refused) => {
                tracing::info!(
                    node = node_id,
                    provider,
                    action,
                    failure = refused.why.as_str(),
                    "an integration failed"
                );
                event.status = match refused.why {
                    HardFailure::Timeout => ToolStatus::TimedOut,
                    _ => ToolStatus::Failed,
                };
                event.status_code = refused.status_code;
                event.error = Some(format!("{}: {}", refused.why.as_str(), refused.error));
                Outcome::Failed(refused.why)
            }
        };
        IntegrationRun { outcome, event }
    }
}
