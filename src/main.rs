//! The `switchboard` binary: parses the command line, sets up logging, and runs the service or
//! an operator command.

use clap::Parser;
use switchboard::cli::{Cli, Command, run_operator};
use switchboard::store::Store;
use tracing_subscriber::EnvFilter;

/// mimalloc rather than the system's: after a flood of calls, the memory their buffers took is
/// given back to the system within moments (glibc keeps it in its per-thread arenas), and small
/// allocations are cheaper.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let json_logs = matches!(&cli.command, Command::Serve(args) if args.log_format == "json");
    // The SIP stack logs every datagram at info; only its warnings are kept by default.
    let filter = EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,rsipstack=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json_logs {
        builder.json().init();
    } else {
        builder.init();
    }
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let store = Store::open(&cli.database_url).await?;
    match cli.command {
        Command::Serve(args) => {
            let config = args.config(cli.database_url.clone())?;
            std::fs::create_dir_all(&config.data_dir)?;
            if let Some((workspace, key)) = store.bootstrap().await? {
                println!(
                    "Created workspace `default` ({workspace}) and an API key with every scope."
                );
                println!("API key (shown once, store it now): {key}");
            }
            let listener = tokio::net::TcpListener::bind(config.http).await?;
            let sip = args.sip_sockets().await?;
            switchboard::serve(listener, sip, store, config, shutdown_signal()).await
        }
        other => run_operator(&store, other).await,
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
    tracing::info!("shutdown signal received; draining");
}
