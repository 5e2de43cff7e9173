//! The command line's shape: `serve` and the operator commands, as clap reads them.

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use switchboard_actors::ids::{ApiKeyId, WorkspaceId};

use super::serve::ServeArgs;

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
    /// The key that seals integrations' OAuth grants in the store: 64 hexadecimal digits,
    /// created (mode 0600) on first use. Keep it apart from the store's backups.
    #[arg(
        long,
        global = true,
        env = "SWITCHBOARD_SECRETS_KEY_FILE",
        default_value = "switchboard.key"
    )]
    pub secrets_key_file: std::path::PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve(Box<ServeArgs>),
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
    /// Register a workspace's own carrier accounts and put numbers on them.
    #[command(subcommand)]
    CarrierAccount(CarrierAccountCommand),
    /// The affiliate program: enroll partners, record referrals and referred revenue.
    #[command(subcommand)]
    Affiliate(AffiliateCommand),
    /// Connect third-party accounts (the API lists and disconnects them).
    #[command(subcommand)]
    Integration(IntegrationCommand),
    /// Bring the database to this version's schema (the service does it at start) and say
    /// where it stands.
    Migrate,
    /// The nodes that run on this database (alive, draining or gone), each with where it is
    /// reached and its last heartbeat.
    Nodes {
        #[arg(long)]
        json: bool,
    },
    /// Move a whole SQLite store into an empty PostgreSQL database, with the service stopped:
    /// every workspace's calls, transcripts, recordings' links, campaigns and contacts.
    Copy {
        /// The SQLite store: `sqlite://PATH`.
        #[arg(long)]
        from: String,
        /// The PostgreSQL database, empty: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
        #[arg(long)]
        to: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum IntegrationCommand {
    /// Connect an account for flow agents' integration_call nodes.
    Connect {
        #[arg(long)]
        workspace: WorkspaceId,
        // "`google_calendar` or `gmail`", from the catalog.
        #[arg(long, help = crate::domain::integrations::Provider::names_in_words())]
        provider: String,
        /// The account, e.g. its email address (Gmail sends from it).
        #[arg(long)]
        account: String,
        /// The OAuth client the account granted access to (with `--client-secret` and
        /// `--refresh-token`). Connecting an account again replaces its grant.
        #[arg(long, requires_all = ["client_secret", "refresh_token"])]
        client_id: Option<String>,
        #[arg(
            long,
            env = "SWITCHBOARD_OAUTH_CLIENT_SECRET",
            hide_env_values = true,
            requires = "client_id"
        )]
        client_secret: Option<String>,
        /// The account's refresh token (offline access), sealed in the store.
        #[arg(
            long,
            env = "SWITCHBOARD_OAUTH_REFRESH_TOKEN",
            hide_env_values = true,
            requires = "client_id"
        )]
        refresh_token: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum AffiliateCommand {
    /// Enroll a workspace as a partner (again: change its rates or parent).
    Enroll {
        #[arg(long)]
        workspace: WorkspaceId,
        /// The partner it is enrolled beneath (it becomes that partner's sub-affiliate).
        #[arg(long)]
        parent: Option<WorkspaceId>,
        /// Commission on referred customers' revenue, in basis points (2000 = 20%).
        #[arg(long, default_value_t = 2000)]
        commission_bps: i64,
        /// Override on its sub-affiliates' referred revenue, in basis points.
        #[arg(long, default_value_t = 500)]
        override_bps: i64,
        /// When the enrollment took effect (RFC 3339; default now). Overrides are earned only
        /// on revenue from then on.
        #[arg(long)]
        at: Option<DateTime<Utc>>,
        #[arg(long)]
        json: bool,
    },
    /// Record that a partner referred a customer workspace.
    Refer {
        #[arg(long)]
        referrer: WorkspaceId,
        #[arg(long)]
        customer: WorkspaceId,
        /// When (RFC 3339; default now).
        #[arg(long)]
        at: Option<DateTime<Utc>>,
        #[arg(long)]
        json: bool,
    },
    /// Record revenue from a customer workspace.
    Revenue {
        #[arg(long)]
        customer: WorkspaceId,
        #[arg(long)]
        amount_cents: i64,
        /// When (RFC 3339; default now).
        #[arg(long)]
        at: Option<DateTime<Utc>>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum CarrierAccountCommand {
    /// Register a carrier account (`untested`).
    #[command(visible_alias = "create")]
    Add {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        name: String,
        /// The carrier, e.g. `twilio`, `telnyx`.
        #[arg(long)]
        provider: String,
        /// The account's SIP trunk: JSON, or `@file` holding it (see the README).
        #[arg(long)]
        trunk: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change a carrier account's name, provider or SIP trunk. A trunk replaces the stored one
    /// whole, but keeps the stored password unless it has a `password` key (`null` clears it);
    /// a changed trunk makes the account `untested`.
    Update {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        id: uuid::Uuid,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        provider: Option<String>,
        /// The account's SIP trunk: JSON, or `@file` holding it.
        #[arg(long)]
        trunk: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show a carrier account and its trunk (never the password: `has_password` says whether
    /// one is stored).
    Show {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        id: uuid::Uuid,
        #[arg(long)]
        json: bool,
    },
    /// Put one of the workspace's numbers on a carrier account.
    Assign {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        account: uuid::Uuid,
        #[arg(long)]
        number: switchboard_actors::ids::PhoneNumberId,
        #[arg(long)]
        json: bool,
    },
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
    /// The secret agent webhook deliveries are signed with.
    #[command(subcommand)]
    SigningSecret(SigningSecretCommand),
}

#[derive(Subcommand, Debug)]
pub enum SigningSecretCommand {
    /// Show the workspace's signing secret (made on first use).
    Show {
        #[arg(long)]
        workspace: WorkspaceId,
        #[arg(long)]
        json: bool,
    },
    /// Replace it: every delivery from now on, pending retries included, is signed with the
    /// new one.
    Rotate {
        #[arg(long)]
        workspace: WorkspaceId,
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_provider_flag_names_the_catalog_s_providers() {
        let mut cli = Cli::command();
        let connect = cli
            .find_subcommand_mut("integration")
            .and_then(|c| c.find_subcommand_mut("connect"))
            .expect("integration connect");
        let provider = connect
            .get_arguments()
            .find(|a| a.get_id() == "provider")
            .expect("--provider");
        assert_eq!(
            provider.get_help().map(ToString::to_string).as_deref(),
            Some("`google_calendar` or `gmail`")
        );
    }
}
