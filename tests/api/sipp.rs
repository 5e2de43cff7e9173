//! SIPp (Debian's `sip-tester`) as the far end of outbound calls: a UAS playing a scenario of
//! `tests/sipp/`, echoing the audio or speaking a capture.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use switchboard_sip::trunk::{Gateway, TrunkTransport};

/// A free UDP port on loopback (and its TCP twin free too, for SIPp's own sockets).
pub fn free_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let port = udp.local_addr().expect("addr").port();
        if port.is_multiple_of(2) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A running SIPp UAS.
pub struct Sipp {
    child: tokio::process::Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// The capture the callee plays, if it speaks.
    _capture: Option<tempfile::TempDir>,
}

impl Sipp {
    /// Starts SIPp's UAS on `scenario` (a file in tests/sipp/) for `calls` calls, echoing
    /// RTP back (`-rtp_echo`).
    pub async fn start(scenario: &str, calls: u32, extra: &[&str]) -> Sipp {
        Sipp::start_with(scenario, calls, extra, |_| vec![]).await
    }

    /// As [`Sipp::start`], with placeholders of the scenario replaced (given SIPp's port).
    pub async fn start_with(
        scenario: &str,
        calls: u32,
        extra: &[&str],
        replace: impl Fn(u16) -> Vec<(&'static str, String)>,
    ) -> Sipp {
        Sipp::launch(scenario, calls, extra, replace, true).await
    }

    async fn launch(
        scenario: &str,
        calls: u32,
        extra: &[&str],
        replace: impl Fn(u16) -> Vec<(&'static str, String)>,
        echo: bool,
    ) -> Sipp {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let media = free_port();
        let template = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/sipp")
            .join(scenario);
        let mut text = std::fs::read_to_string(&template).expect("the scenario exists");
        for (from, to) in replace(port) {
            text = text.replace(from, &to);
        }
        let scenario = dir.path().join(scenario);
        std::fs::write(&scenario, text).expect("the scenario is written");
        let log = dir.path().join("sipp.log");
        let mut child = sipp(dir.path())
            .arg("-sf")
            .arg(&scenario)
            .args(["-i", "127.0.0.1", "-mi", "127.0.0.1"])
            .args(["-p", &port.to_string(), "-mp", &media.to_string()])
            .args(["-m", &calls.to_string()])
            .args(echo.then_some("-rtp_echo"))
            .args(["-nostdin", "-timeout", "40s", "-timeout_error"])
            .args(["-trace_err", "-error_file"])
            .arg(&log)
            .args(["-trace_msg", "-message_file"])
            .arg(dir.path().join("messages.log"))
            .args(extra)
            .spawn()
            .expect("sipp runs (Debian package sip-tester; ./scripts/test installs it)");
        // The first INVITE waits until SIPp has bound its SIP and media sockets.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match (udp_bound(port), udp_bound(media)) {
                (Some(true), Some(true)) => break,
                // Where the kernel does not list its sockets, a moment is enough.
                (None, _) | (_, None) => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    break;
                }
                _ => {}
            }
            if let Ok(Some(status)) = child.try_wait() {
                let errors = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("sipp exited ({status}) before it listened on {port}: {errors}");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "sipp did not listen on ports {port} and {media} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Sipp {
            child,
            port,
            log,
            _dir: dir,
            _capture: None,
        }
    }

    /// As [`Sipp::start`], on a scenario with a `<!-- SPEAKS ... -->` mark: there, 1.5 s
    /// after the answer, the callee says something (a second of a tone). It does not echo
    /// (a far end sends one stream).
    pub async fn start_speaking(scenario: &str, calls: u32) -> Sipp {
        let capture = tempfile::tempdir().expect("temp dir");
        let pcap = capture.path().join("hello.pcap");
        crate::pcap::speech(&pcap, 1.0);
        let speaks = format!(
            r#"<pause milliseconds="1500"/>
  <nop><action><exec play_pcap_audio="{}"/></action></nop>"#,
            pcap.display()
        );
        let speaking = |_| {
            vec![(
                "<!-- SPEAKS: Sipp::start_speaking plays a capture here -->",
                speaks.clone(),
            )]
        };
        let mut sipp = Sipp::launch(scenario, calls, &[], speaking, false).await;
        sipp._capture = Some(capture);
        sipp
    }

    /// SIPp as a caller: it calls `slug` at the service's SIP address `server` once, running
    /// `scenario` with its placeholders replaced, and echoes nothing (it sends what the
    /// scenario plays).
    pub async fn call(
        scenario: &str,
        server: std::net::SocketAddr,
        slug: &str,
        replace: impl Fn(u16) -> Vec<(&'static str, String)>,
    ) -> Sipp {
        let remote = server.to_string();
        Sipp::launch(scenario, 1, &["-s", slug, &remote], replace, false).await
    }

    pub fn gateway(&self, priority: u16) -> Gateway {
        Gateway {
            host: "127.0.0.1".into(),
            port: Some(self.port),
            transport: TrunkTransport::Udp,
            priority,
        }
    }

    /// What SIPp sent and received so far.
    pub fn messages(&self) -> String {
        std::fs::read_to_string(self.log.with_file_name("messages.log")).unwrap_or_default()
    }

    /// Waits for SIPp to finish its calls; its scenario must have passed.
    pub async fn passed(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("sipp finished in time")
            .expect("sipp ran");
        let messages =
            std::fs::read_to_string(self.log.with_file_name("messages.log")).unwrap_or_default();
        let errors = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            status.success(),
            "sipp failed ({status}): {errors}\n--- messages ---\n{messages}"
        );
    }
}

/// Whether a UDP socket is bound to `port`, by the kernel's list of them (Linux's
/// `/proc/net/udp`); `None` where there is no such list.
fn udp_bound(port: u16) -> Option<bool> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let port = format!("{port:04X}");
    Some(table.lines().skip(1).any(|line| {
        line.split_whitespace()
            .nth(1)
            .and_then(|local| local.rsplit_once(':'))
            .is_some_and(|(_, p)| p == port)
    }))
}

/// SIPp, run in `dir`, quiet, killed with its handle.
pub fn sipp(dir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sipp");
    command
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}
