//! The `switchboard` command line: `serve`, and the operator commands for what the spec keeps
//! dashboard-only (workspaces, API keys, owned numbers, credits). Every command takes
//! `--database-url` (default `sqlite://switchboard.db`, created if missing).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use serde_json::json;
use switchboard_actors::ids::{ApiKeyId, WorkspaceId};
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::sim::{OutcomeMix, SecondsRange, SimConfig};

use crate::auth::Scopes;
use crate::config::{Carrier, Config};
use crate::store::Store;

#[derive(Parser, Debug)]
#[command(
    name = "switchboard",
    version,
    about = "Self-hosted telephony and campaign runtime for AI voice agents"
)]
pub struct Cli {
    /// The store.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_DATABASE_URL",
        default_value = "sqlite://switchboard.db"
    )]
    pub database_url: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve(ServeArgs),
    /// Manage workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Register numbers a workspace already owns.
    #[command(subcommand)]
    Number(NumberCommand),
    /// Adjust balances.
    #[command(subcommand)]
    Billing(BillingCommand),
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// HTTP listen address.
    #[arg(long, env = "SWITCHBOARD_HTTP", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// Directory for recordings and other files.
    #[arg(long, env = "SWITCHBOARD_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Requests per minute per API key.
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT", default_value_t = 60)]
    pub rate_limit: u32,
    /// Seconds a purchased number stays in pending_requirements.
    #[arg(
        long,
        env = "SWITCHBOARD_NUMBER_ACTIVATION_DELAY_SECS",
        default_value_t = 86_400
    )]
    pub number_activation_delay_secs: u64,
    /// Log format: text or json.
    #[arg(long, env = "SWITCHBOARD_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
    /// Where outbound calls go: `none` (calls fail as infra errors) or `sim` (the simulated
    /// carrier: nobody is called; for demos, dry runs and benchmarks).
    #[arg(long, env = "SWITCHBOARD_CARRIER", default_value = "none", value_parser = ["none", "sim"])]
    pub carrier: String,
    /// Simulated carrier: outcome weights, e.g. `answered=40,no_answer=30,busy=8,voicemail=15,failed=5,infra_error=2`.
    #[arg(long, env = "SWITCHBOARD_SIM_MIX")]
    pub sim_mix: Option<OutcomeMix>,
    /// Simulated carrier: ring seconds, `min-max`.
    #[arg(long, env = "SWITCHBOARD_SIM_RING_SECS", default_value = "3-25")]
    pub sim_ring_secs: SecondsRange,
    /// Simulated carrier: talk seconds of answered calls, `min-max`.
    #[arg(long, env = "SWITCHBOARD_SIM_TALK_SECS", default_value = "20-180")]
    pub sim_talk_secs: SecondsRange,
    /// Simulated carrier: seed of the outcome draws.
    #[arg(long, env = "SWITCHBOARD_SIM_SEED", default_value_t = 1)]
    pub sim_seed: u64,
    /// Simulated carrier: append one line per dial to this file.
    #[arg(long, env = "SWITCHBOARD_SIM_DIAL_LOG")]
    pub sim_dial_log: Option<PathBuf>,
    /// Seconds between evaluations of a campaign when nothing else wakes it.
    #[arg(
        long,
        env = "SWITCHBOARD_EVALUATION_INTERVAL_SECS",
        default_value_t = 60
    )]
    pub evaluation_interval_secs: u64,
    /// Seconds an answered call waits for a disposition before it counts as unclassified.
    #[arg(
        long,
        env = "SWITCHBOARD_DISPOSITION_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub disposition_timeout_secs: u64,
    /// Calls one workspace may have live at once.
    #[arg(long, env = "SWITCHBOARD_WORKSPACE_CONCURRENCY", default_value_t = 10)]
    pub workspace_concurrency: usize,
    /// Calls this node places at once over all workspaces.
    #[arg(long, env = "SWITCHBOARD_NODE_CAPACITY", default_value_t = 1000)]
    pub node_capacity: usize,
    /// The host in SIP endpoint URIs (`sip:<slug>@<host>`): the name or address SIP trunks
    /// reach this service at.
    #[arg(long, env = "SWITCHBOARD_SIP_HOST", default_value = "localhost")]
    pub sip_host: String,
}

#[derive(Subcommand, Debug)]
pub enum WorkspaceCommand {
    /// Create a workspace.
    Create {
        #[arg(long)]
        name: String,
        /// Default country (ISO 3166 code) for reading national number forms.
        #[arg(long, default_value = "IL")]
        country: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Create an API key; it is printed once.
    Create {
        #[arg(long)]
        workspace: WorkspaceId,
        /// `all` or a comma-separated list of scopes.
        #[arg(long)]
        scopes: String,
        /// Expiry, RFC 3339 (e.g. 2027-01-01T00:00:00Z).
        #[arg(long)]
        expires_at: Option<DateTime<Utc>>,
        #[arg(long, default_value = "")]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// List a workspace's keys (never their secrets).
    List {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key.
    Revoke {
        /// The key's id.
        id: ApiKeyId,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum NumberCommand {
    /// Register a number the workspace already owns.
    Add {
        #[arg(long)]
        workspace: WorkspaceId,
        /// The number, E.164.
        #[arg(long)]
        number: String,
        /// `active` or `pending_requirements`.
        #[arg(long, default_value = "active")]
        status: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum BillingCommand {
    /// Add credit to a workspace's balance (negative to debit).
    Credit {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long, allow_hyphen_values = true)]
        amount_cents: i64,
        #[arg(long)]
        json: bool,
    },
}

fn print(json: bool, value: serde_json::Value, text: String) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

async fn workspace_must_exist(store: &Store, id: WorkspaceId) -> anyhow::Result<()> {
    if store.workspace(id).await?.is_none() {
        bail!("no workspace {id}");
    }
    Ok(())
}

/// Runs an operator command (everything but `serve`).
pub async fn run_operator(store: &Store, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(_) => unreachable!("serve is handled by main"),
        Command::Workspace(WorkspaceCommand::Create {
            name,
            country,
            json,
        }) => {
            let name = name.trim();
            if name.is_empty() {
                bail!("--name must not be empty");
            }
            let country = switchboard_actors::phone::parse_country(&country)?;
            let ws = store
                .create_workspace(name, &format!("{country:?}"))
                .await?;
            print(
                json,
                json!({"id": ws.id, "name": ws.name}),
                format!("workspace {} created: {}", ws.name, ws.id),
            );
        }
        Command::Key(KeyCommand::Create {
            workspace,
            scopes,
            expires_at,
            name,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            let scopes = Scopes::parse(&scopes)?;
            if expires_at.is_some_and(|at| at <= Utc::now()) {
                bail!("--expires-at is in the past");
            }
            let (key, secret) = store
                .create_key(workspace, &name, &scopes, expires_at)
                .await?;
            print(
                json,
                json!({"id": key.id, "key": secret, "scopes": key.scopes, "expires_at": key.expires_at}),
                format!("key {} created (shown once):\n{secret}", key.id),
            );
        }
        Command::Key(KeyCommand::List { workspace, json }) => {
            workspace_must_exist(store, workspace).await?;
            let keys = store.list_keys(workspace).await?;
            let text = keys
                .iter()
                .map(|k| {
                    let state = if k.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    format!("{}  {}…  {}  {}", k.id, k.prefix, state, k.scopes.join(","))
                })
                .collect::<Vec<_>>()
                .join("\n");
            print(json, json!({"data": keys}), text);
        }
        Command::Key(KeyCommand::Revoke { id, json }) => {
            if !store.revoke_key(id).await? {
                bail!("no active key {id}");
            }
            print(
                json,
                json!({"id": id, "revoked": true}),
                format!("key {id} revoked"),
            );
        }
        Command::Number(NumberCommand::Add {
            workspace,
            number,
            status,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            if status != "active" && status != "pending_requirements" {
                bail!("--status must be active or pending_requirements");
            }
            let country = store.default_country(workspace).await?;
            let parsed = PhoneNumber::parse(&number, country)
                .with_context(|| format!("--number {number}"))?;
            let added = store.add_owned_number(workspace, &parsed, &status).await?;
            print(
                json,
                serde_json::to_value(&added)?,
                format!("number {} added: {}", added.number, added.id),
            );
        }
        Command::Billing(BillingCommand::Credit {
            workspace,
            amount_cents,
            json,
        }) => {
            if amount_cents == 0 {
                bail!("--amount-cents must not be zero");
            }
            let entry = store
                .apply_ledger_entry(workspace, amount_cents, "credit", "operator credit", None)
                .await?
                .with_context(|| format!("no workspace {workspace}"))?;
            print(
                json,
                json!({"workspace_id": workspace, "amount_cents": amount_cents, "balance_cents": entry.balance_after_cents}),
                format!(
                    "balance of {workspace} is now {} cents",
                    entry.balance_after_cents
                ),
            );
        }
    }
    Ok(())
}

impl ServeArgs {
    pub fn config(&self, database_url: String) -> Config {
        Config {
            http: self.http,
            database_url,
            data_dir: self.data_dir.clone(),
            rate_limit_per_minute: self.rate_limit,
            number_activation_delay: Duration::from_secs(self.number_activation_delay_secs),
            carrier: match self.carrier.as_str() {
                "sim" => Carrier::Sim(SimConfig {
                    mix: self.sim_mix.clone().unwrap_or_default(),
                    ring_secs: self.sim_ring_secs,
                    talk_secs: self.sim_talk_secs,
                    seed: self.sim_seed,
                    dial_log: self.sim_dial_log.clone(),
                }),
                _ => Carrier::None,
            },
            evaluation_interval: Duration::from_secs(self.evaluation_interval_secs.max(1)),
            disposition_timeout: Duration::from_secs(self.disposition_timeout_secs),
            workspace_max_concurrent_calls: self.workspace_concurrency.max(1),
            node_capacity: self.node_capacity.max(1),
            sip_host: self.sip_host.clone(),
            ..Config::default()
        }
    }
}
