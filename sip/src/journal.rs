//! The INVITE journal: what identifies each INVITE we send ([`InviteKey`]), written down at the
//! two instants a restart after a crash depends on, so that it can end what the dead process
//! left ([`SipClient::abandon`]): CANCEL what only rang, BYE what may have been answered, and
//! ACK and BYE an answer that crosses its CANCEL.
//!
//! The journal is a file of JSON lines ([`InviteLog`]) that the transaction layer's message
//! hooks ([`Inspector`]) append to synchronously: an INVITE's key before the INVITE leaves, and
//! the callee's tag as soon as a response carries it (a 2xx before the transaction layer ACKs
//! it). A write into the page cache outlives the process however it dies (SIGKILL included),
//! and costs a few microseconds; the file is read once, at the next start, and rewritten with
//! only the live INVITEs whenever it grows past [`COMPACT_AFTER`].

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{self as rsip, Method, SipMessage, StatusCodeKind};
use rsipstack::transaction::endpoint::MessageInspector;
use rsipstack::transport::SipAddr;
use tokio::sync::mpsc;

use crate::headers::header_value;
use crate::trunk::TrunkTransport;

/// The journal is rewritten with only its live INVITEs once this much has been appended.
pub const COMPACT_AFTER: u64 = 1 << 20;

/// What identifies an INVITE we sent: enough for another process (a restart after a crash)
/// to CANCEL it, or to BYE the dialog once it may have been answered, so that nothing keeps
/// ringing or holding a callee for a process that is gone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InviteKey {
    pub request_uri: String,
    /// The Via, From (with our tag) and To header values of the INVITE.
    pub via: String,
    pub from: String,
    pub to: String,
    pub call_id: String,
    pub cseq: u32,
    /// Where the INVITE went.
    pub transport: TrunkTransport,
    pub destination: SocketAddr,
    /// The callee's tag and Contact (where in-dialog requests go), from the first response
    /// that carried them.
    pub remote_tag: Option<String>,
    pub remote_target: Option<String>,
    /// When a 2xx answered it (UNIX milliseconds), if one did.
    #[serde(default)]
    pub answered_at_ms: Option<u64>,
}

/// One line of the journal: an INVITE's key as it stands now, or the end of its INVITE.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Key(InviteKey),
    Done(String),
}

/// The journal file and the INVITEs of this process still live in it.
pub struct InviteLog {
    state: Mutex<LogState>,
}

struct LogState {
    path: PathBuf,
    file: File,
    live: HashMap<String, InviteKey>,
    appended: u64,
}

impl InviteLog {
    /// Opens the journal at `path`: the INVITEs a previous process left live in it, and a log
    /// that starts with them (each stays until [`InviteLog::done`]).
    pub fn open(path: &Path) -> std::io::Result<(InviteLog, Vec<InviteKey>)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let left = match File::open(path) {
            Ok(file) => read_live(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(e),
        };
        let file = rewrite(path, &left)?;
        let keys = left.values().cloned().collect();
        Ok((
            InviteLog {
                state: Mutex::new(LogState {
                    path: path.to_path_buf(),
                    file,
                    live: left,
                    appended: 0,
                }),
            },
            keys,
        ))
    }

    /// An INVITE is about to leave (a new one, or one with new credentials).
    pub fn sent(&self, key: InviteKey) {
        self.with(|state| {
            state.live.insert(key.call_id.clone(), key.clone());
            state.append(&Line::Key(key));
        });
    }

    /// A response to the INVITE with Call-ID `call_id` names the callee's tag and Contact; a
    /// 2xx (`answered`) marks it answered. Written only when it changes what a restart does.
    pub fn heard(
        &self,
        call_id: &str,
        tag: &str,
        target: impl FnOnce() -> Option<String>,
        answered: bool,
    ) {
        self.with(|state| {
            let Some(key) = state.live.get_mut(call_id) else {
                return;
            };
            let now_answered = answered && key.answered_at_ms.is_none();
            if key.remote_tag.as_deref() == Some(tag) && !now_answered {
                return;
            }
            key.remote_tag = Some(tag.to_string());
            if let Some(target) = target() {
                key.remote_target = Some(target);
            }
            if now_answered {
                key.answered_at_ms = Some(unix_ms());
            }
            let line = Line::Key(key.clone());
            state.append(&line);
        });
    }

    /// The INVITE with Call-ID `call_id` is over (its call ended, or it failed): a restart
    /// has nothing to end.
    pub fn done(&self, call_id: &str) {
        self.with(|state| {
            if state.live.remove(call_id).is_some() {
                state.append(&Line::Done(call_id.to_string()));
            }
        });
    }

    /// The INVITEs live in the journal now.
    pub fn live(&self) -> usize {
        self.state.lock().map(|s| s.live.len()).unwrap_or(0)
    }

    fn with(&self, f: impl FnOnce(&mut LogState)) {
        // A panic elsewhere while the lock was held leaves the map as it was between two
        // whole entries: still the best record there is.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut state);
    }
}

impl LogState {
    fn append(&mut self, line: &Line) {
        let Ok(mut text) = serde_json::to_vec(line) else {
            return;
        };
        text.push(b'\n');
        // One write call per line: a process killed mid-line leaves a torn last line, which
        // the reader skips.
        if let Err(e) = self.file.write_all(&text) {
            tracing::error!(error = %e, path = %self.path.display(), "the INVITE journal could not be written");
            return;
        }
        self.appended += text.len() as u64;
        if self.appended > COMPACT_AFTER {
            match rewrite(&self.path, &self.live) {
                Ok(file) => {
                    self.file = file;
                    self.appended = 0;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the INVITE journal could not be compacted");
                }
            }
        }
    }
}

/// The keys a journal leaves live: its lines in order, later ones winning, torn ones skipped.
fn read_live(file: File) -> HashMap<String, InviteKey> {
    let mut live = HashMap::new();
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Key(key)) => {
                live.insert(key.call_id.clone(), key);
            }
            Ok(Line::Done(call_id)) => {
                live.remove(&call_id);
            }
            Err(_) => {}
        }
    }
    live
}

/// Writes `live` to a fresh file beside `path`, puts it in place of `path` and answers it
/// open for appending.
fn rewrite(path: &Path, live: &HashMap<String, InviteKey>) -> std::io::Result<File> {
    let fresh = path.with_extension("new");
    {
        let mut out = File::create(&fresh)?;
        for key in live.values() {
            let mut text = serde_json::to_vec(&Line::Key(key.clone()))?;
            text.push(b'\n');
            out.write_all(&text)?;
        }
    }
    std::fs::rename(&fresh, path)?;
    OpenOptions::new().append(true).open(path)
}

pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The identity of an INVITE about to leave for `dest`.
fn invite_key(req: &rsip::Request, dest: Option<&SipAddr>) -> Option<InviteKey> {
    let value = |name: &str| header_value(&req.headers, name);
    let cseq = value("cseq")?.split_whitespace().next()?.parse().ok()?;
    let dest = dest?;
    let transport = match dest.r#type {
        Some(rsip::Transport::Tcp) => TrunkTransport::Tcp,
        Some(rsip::Transport::Tls) => TrunkTransport::Tls,
        _ => TrunkTransport::Udp,
    };
    Some(InviteKey {
        request_uri: req.uri.to_string(),
        via: value("via")?,
        from: value("from")?,
        to: value("to")?,
        call_id: value("call-id")?,
        cseq,
        transport,
        destination: dest.get_socketaddr().ok()?,
        remote_tag: None,
        remote_target: None,
        answered_at_ms: None,
    })
}

/// The first Contact of a response: where in-dialog requests go.
pub(crate) fn contact_of(resp: &rsip::Response) -> Option<String> {
    resp.typed_contact_headers()
        .ok()
        .and_then(|c| c.first().map(|c| c.uri.to_string()))
}

/// The To tag of a message, if it has one.
pub(crate) fn to_tag(msg: &SipMessage) -> Option<String> {
    let to = match msg {
        SipMessage::Request(r) => r.to_header().ok()?,
        SipMessage::Response(r) => r.to_header().ok()?,
    };
    to.tag().ok().flatten().map(|t| t.value().to_string())
}

/// The transaction layer's hooks that keep the journal: they see every message we send and
/// receive, before it is sent or acted on.
pub(crate) struct Inspector {
    pub log: Arc<InviteLog>,
    /// 2xx answers to INVITEs, for a restart that ends an INVITE ([`SipClient::abandon`]).
    pub crossing: Arc<Crossing>,
}

impl MessageInspector for Inspector {
    fn before_send(&self, msg: SipMessage, dest: Option<&SipAddr>) -> SipMessage {
        if let SipMessage::Request(req) = &msg
            && req.method == Method::Invite
            && to_tag(&msg).is_none()
            && let Some(key) = invite_key(req, dest)
        {
            self.log.sent(key);
        }
        msg
    }

    fn after_received(&self, msg: SipMessage, _from: Option<&SipAddr>) -> SipMessage {
        if let SipMessage::Response(resp) = &msg
            && resp
                .cseq_header()
                .ok()
                .and_then(|c| c.method().ok())
                .is_some_and(|m| m == Method::Invite)
            && let Some(tag) = to_tag(&msg)
        {
            let kind = resp.status_code.kind();
            let answered = kind == StatusCodeKind::Successful;
            if let Ok(call_id) = resp.call_id_header()
                && (answered || kind == StatusCodeKind::Provisional)
            {
                // Only an INVITE of ours in the journal costs the Contact's parse.
                self.log
                    .heard(call_id.value(), &tag, || contact_of(resp), answered);
            }
            if answered {
                self.crossing.answered(resp);
            }
        }
        msg
    }
}

/// The Call-IDs a restart is ending, and where a 2xx for one of them goes.
#[derive(Default)]
pub(crate) struct Crossing {
    watched: Mutex<HashMap<String, mpsc::UnboundedSender<rsip::Response>>>,
}

impl Crossing {
    /// 2xx answers for `call_id` go to the receiver from now on.
    pub(crate) fn watch(&self, call_id: &str) -> mpsc::UnboundedReceiver<rsip::Response> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut w) = self.watched.lock() {
            w.insert(call_id.to_string(), tx);
        }
        rx
    }

    pub(crate) fn unwatch(&self, call_id: &str) {
        if let Ok(mut w) = self.watched.lock() {
            w.remove(call_id);
        }
    }

    /// Hands a 2xx to the restart that watches its Call-ID, if any.
    pub fn answered(&self, resp: &rsip::Response) {
        let Ok(call_id) = resp.call_id_header() else {
            return;
        };
        if let Ok(w) = self.watched.lock()
            && let Some(tx) = w.get(call_id.value())
        {
            let _ = tx.send(resp.clone());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An INVITE's key, as a test writes one down.
    pub(crate) fn key(call_id: &str) -> InviteKey {
        InviteKey {
            request_uri: "sip:+15550001@127.0.0.1:5070".into(),
            via: "SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKabc".into(),
            from: "<sip:+15550002@127.0.0.1>;tag=ours".into(),
            to: "<sip:+15550001@127.0.0.1:5070>".into(),
            call_id: call_id.into(),
            cseq: 1,
            transport: TrunkTransport::Udp,
            destination: "127.0.0.1:5070".parse().unwrap(),
            remote_tag: None,
            remote_target: None,
            answered_at_ms: None,
        }
    }

    #[test]
    fn a_restart_finds_the_invites_left_live_with_what_was_heard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("invites.log");
        let (log, left) = InviteLog::open(&path).unwrap();
        assert!(left.is_empty());
        log.sent(key("a"));
        log.sent(key("b"));
        log.sent(key("c"));
        log.heard(
            "b",
            "theirs",
            || Some("sip:callee@127.0.0.1:5070".into()),
            false,
        );
        log.heard("c", "theirs", || None, true);
        log.done("a");
        // A torn last line, as a kill in the middle of a write would leave.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"key\":{\"request_uri\"")
            .unwrap();
        drop(log);
        let (log, mut left) = InviteLog::open(&path).unwrap();
        left.sort_by(|x, y| x.call_id.cmp(&y.call_id));
        assert_eq!(left.len(), 2);
        assert_eq!(left[0].call_id, "b");
        assert_eq!(left[0].remote_tag.as_deref(), Some("theirs"));
        assert_eq!(left[0].answered_at_ms, None);
        assert_eq!(left[1].call_id, "c");
        assert!(left[1].answered_at_ms.is_some());
        // They stay live until the restart has dealt with them.
        assert_eq!(log.live(), 2);
        log.done("b");
        log.done("c");
        drop(log);
        let (_, left) = InviteLog::open(&path).unwrap();
        assert!(left.is_empty());
    }

    #[test]
    fn the_journal_is_compacted_to_its_live_invites() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("invites.log");
        let (log, _) = InviteLog::open(&path).unwrap();
        let mut n: usize = 0;
        while std::fs::metadata(&path).unwrap().len() < COMPACT_AFTER / 2 || n < 10 {
            log.sent(key(&format!("call-{n}")));
            if !n.is_multiple_of(100) {
                log.done(&format!("call-{n}"));
            }
            n += 1;
        }
        for _ in 0..n {
            log.sent(key("again"));
            log.done("again");
        }
        assert!(std::fs::metadata(&path).unwrap().len() < COMPACT_AFTER);
        drop(log);
        let (_, left) = InviteLog::open(&path).unwrap();
        assert_eq!(left.len(), n.div_ceil(100));
    }
}
