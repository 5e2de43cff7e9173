//! The local speech server (`speech/server.py`, installed by `speech/install.sh`): Whisper
//! tiny.en and a piper voice behind the same OpenAI-compatible audio API as any vendor, so a
//! newcomer with no account is understood. `serve --speech local` starts it as a child process
//! on loopback, waits until it answers, and stops it with the service.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

/// How long the server may take to load its models and answer (about 5 s on two cores).
const START_WITHIN: Duration = Duration::from_secs(120);

/// The speech server, running until dropped.
pub struct LocalSpeech {
    _child: tokio::process::Child,
    /// Its API base, e.g. `http://127.0.0.1:8090/v1`.
    pub base_url: String,
}

/// Where the speech server is: its script and the Python of its virtualenv.
#[derive(Debug, Clone)]
pub struct SpeechInstall {
    pub server: PathBuf,
    pub python: PathBuf,
}

impl SpeechInstall {
    /// The install `speech/install.sh` makes, from the directory `speech/` sits in.
    pub fn under(root: &Path) -> SpeechInstall {
        SpeechInstall {
            server: root.join("speech").join("server.py"),
            python: root
                .join("target")
                .join("speech")
                .join("bin")
                .join("python"),
        }
    }
}

impl LocalSpeech {
    /// Starts the server of `install` on `listen` (a loopback address) and waits until it
    /// answers.
    pub async fn start(install: &SpeechInstall, listen: SocketAddr) -> anyhow::Result<LocalSpeech> {
        for (path, what) in [
            (&install.server, "the speech server"),
            (&install.python, "its Python"),
        ] {
            if !path.is_file() {
                bail!(
                    "--speech local: {what} is not at {} (run speech/install.sh in the repository first)",
                    path.display()
                );
            }
        }
        let mut child = tokio::process::Command::new(&install.python)
            .arg(&install.server)
            // It exits by itself if the service dies without stopping it (SIGKILL).
            .args([
                "--listen",
                &listen.to_string(),
                "--quiet",
                "--exit-with-parent",
            ])
            // Nothing is downloaded: the weights are inside the installed packages.
            .env("HF_HUB_OFFLINE", "1")
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("--speech local: starting {}", install.python.display()))?;
        let health = format!("http://{listen}/health");
        super::tls::install_crypto();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let deadline = tokio::time::Instant::now() + START_WITHIN;
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("--speech local: the speech server stopped as it started ({status})");
            }
            if let Ok(r) = client.get(&health).send().await
                && r.status().is_success()
            {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "--speech local: the speech server did not answer on {listen} within {START_WITHIN:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::info!(%listen, "local speech server ready");
        Ok(LocalSpeech {
            _child: child,
            base_url: format!("http://{listen}/v1"),
        })
    }
}
