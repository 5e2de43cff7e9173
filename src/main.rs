//! The `switchboard` binary: parses the command line, sets up logging, and runs the service or
//! an operator command.

use anyhow::Context;
use clap::Parser;
use switchboard::cli::{Cli, Command, run_operator};
use switchboard::store::Store;
use tracing_subscriber::EnvFilter;

/// mimalloc (its version 2) rather than the system's: small allocations are cheaper, and with
/// the collection of quiet threads (`idle` below) the memory a flood of calls took is given
/// back to the system once it is freed. glibc keeps it in its per-thread arenas (after a 2x
/// flood, 150 MiB of 160 until `malloc_trim`), and mimalloc's version 3 keeps it in pages that
/// a few long-lived blocks pin (the same 150 MiB, even after every thread collected).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_huge_pages();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(idle::parked)
        .on_thread_unpark(idle::unparked)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(start()),
        Err(err) => {
            eprintln!("error: starting the runtime: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// mimalloc's option `allow_thp` (`mi_option_allow_thp` in version 2's mimalloc.h; the
/// numbering differs in version 3).
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 37;

/// Transparent huge pages off for this process. mimalloc advises the kernel to back its
/// arenas with 2 MiB pages, and then a few kilobytes in use keep a whole 2 MiB page resident:
/// 20 MiB more at rest and about 6 KiB more per live call, for no gain a telephony
/// workload can measure. The arena mimalloc reserved before `main` is covered too: the
/// process-wide flag overrides the advice on every mapping.
fn no_huge_pages() {
    // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) takes integers only and changes a flag
    // of the process's memory map; it reads or writes no memory of ours. Its failure (an old
    // kernel) leaves huge pages on, which is harmless, so the result is not needed.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    // SAFETY: mi_option_set takes an option number and a value; it is called here before any
    // other thread exists, as mimalloc asks of option changes.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
}

/// Memory given back when the process is quiet. mimalloc keeps freed pages for reuse, and
/// blocks one thread frees that another allocated wait in their page until the owning thread
/// collects them; a worker that goes quiet after a burst of calls would hold that memory for
/// good. So a worker thread that wakes after having had nothing to do for a while (parked
/// `QUIET` or longer) first collects its heap, which also returns unused pages to the system,
/// at most once per `EVERY`. Under load workers never park that long, so it costs nothing
/// there; a collection takes about 2 ms.
mod idle {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    const QUIET: Duration = Duration::from_millis(20);
    const EVERY: Duration = Duration::from_secs(1);

    thread_local! {
        static PARKED: Cell<Option<Instant>> = const { Cell::new(None) };
        static COLLECTED: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    pub fn parked() {
        PARKED.with(|p| p.set(Some(Instant::now())));
    }

    pub fn unparked() {
        let now = Instant::now();
        let quiet = PARKED.with(|p| p.get().is_some_and(|t| now.duration_since(t) >= QUIET));
        let due = COLLECTED.with(|c| c.get().is_none_or(|t| now.duration_since(t) >= EVERY));
        if quiet && due {
            COLLECTED.with(|c| c.set(Some(now)));
            // SAFETY: mi_collect takes no arguments but a flag and works on the calling
            // thread's own mimalloc heap (the global allocator here); it may be called from any
            // thread at any time.
            unsafe { libmimalloc_sys::mi_collect(true) };
        }
    }
}

async fn start() -> std::process::ExitCode {
    let cli = Cli::parse();
    let json_logs = matches!(&cli.command, Command::Serve(args) if args.log_format == "json");
    // The SIP stack logs every datagram at info, and the database driver each notice the server
    // sends (PostgreSQL's "already exists, skipping" at every start): only their warnings are
    // kept by default.
    let filter = EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,rsipstack=warn,sqlx=warn"));
    // Colours only where a person reads the log on a terminal, never in a file or a pipe.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
    if let Command::Copy { from, to } = &cli.command {
        return switchboard::cli::operator::copy(from, to).await;
    }
    let store = Store::open(&cli.database_url).await?;
    match cli.command {
        Command::Serve(args) => {
            let mut config = args.config(cli.database_url.clone())?;
            config.secrets_key_file = cli.secrets_key_file.clone();
            // Stopped when the service is: it lives until this arm ends.
            let _speech = args.local_speech(&mut config).await?;
            std::fs::create_dir_all(&config.data_dir)?;
            if let Some((workspace, key)) = store.bootstrap().await? {
                println!(
                    "Created workspace `default` ({workspace}) and an API key with every scope."
                );
                println!("API key (shown once, store it now): {key}");
            }
            let listener = tokio::net::TcpListener::bind(config.http).await?;
            let metrics = match config.metrics_listen {
                Some(addr) => Some(
                    tokio::net::TcpListener::bind(addr)
                        .await
                        .with_context(|| format!("binding the metrics listener on {addr}"))?,
                ),
                None => None,
            };
            let sip = args.sip_sockets().await?;
            switchboard::serve(listener, metrics, sip, store, config, shutdown_signal()).await
        }
        other => run_operator(&store, other, &cli.secrets_key_file).await,
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
