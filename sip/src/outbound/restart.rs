//! A restart ends what a previous process left: the INVITEs its journal still has live get a
//! BYE (answered) or a CANCEL (only rang), and an answer that crosses a CANCEL is ACKed and BYEd
//! ([`Crossing`]). The requests are sent outside the dialog layer, which knows nothing of
//! another process's dialogs.

use rsipstack::sip::{self as rsip, SipMessage, StatusCodeKind};
use rsipstack::transaction::Transaction;
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transport::SipAddr;
use tokio::sync::mpsc;

use super::SipClient;
use super::resolve::sip_transport;
use crate::journal::{InviteKey, contact_of, to_tag, unix_ms};

/// What a restart did about one INVITE a previous process left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    /// The final response to our CANCEL, if one was sent and answered.
    pub cancel: Option<u16>,
    /// The final response to our BYE, if one was sent and answered.
    pub bye: Option<u16>,
    /// When the callee answered (UNIX milliseconds), as the journal says.
    pub answered_at_ms: Option<u64>,
}

impl SipClient {
    /// The INVITEs the previous process's journal left live (taken once).
    pub fn left_over(&self) -> Vec<InviteKey> {
        self.core
            .left_over
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    /// Forgets an INVITE a previous process left that needs nothing more (its call ended).
    pub fn forget(&self, key: &InviteKey) {
        if let Some(log) = &self.core.invite_log {
            log.done(&key.call_id);
        }
    }

    /// Ends what a previous process left of a call: a BYE to a dialog it saw answered (the 2xx
    /// and the callee's tag were written down before its ACK), a CANCEL to an INVITE that only
    /// rang. An answer the dead process never read is retransmitted by the callee until it is
    /// ACKed: one that comes within a transaction expiry (watched on a task of its own) is
    /// ACKed and BYEd, and `on_answer` is told when (UNIX milliseconds).
    pub async fn abandon(
        &self,
        key: &InviteKey,
        on_answer: impl FnOnce(u64) + Send + 'static,
    ) -> Abandoned {
        let (bye, cancel) = match (&key.remote_tag, key.answered_at_ms) {
            (Some(tag), Some(_)) => {
                let bye = self.send_raw(key, Raw::Bye(tag)).await;
                self.forget(key);
                (bye, None)
            }
            _ => {
                // Forgotten once the watch for a crossing answer is over: a restart killed
                // before then CANCELs and watches again.
                let answers = self.core.crossing.watch(&key.call_id);
                let cancel = self.send_raw(key, Raw::Cancel).await;
                self.watch_crossing(key.clone(), answers, on_answer);
                (None, cancel)
            }
        };
        Abandoned {
            cancel,
            bye,
            answered_at_ms: key.answered_at_ms,
        }
    }

    /// The callee may have answered just before our CANCEL reached it: its 2xx comes here (the
    /// dead process's port is ours now) until the transaction expiry, and is ACKed and BYEd.
    fn watch_crossing(
        &self,
        key: InviteKey,
        mut answers: mpsc::UnboundedReceiver<rsip::Response>,
        on_answer: impl FnOnce(u64) + Send + 'static,
    ) {
        let client = self.clone();
        let expiry = self.core.settings.transaction_expiry();
        tokio::spawn(async move {
            if let Ok(Some(resp)) = tokio::time::timeout(expiry, answers.recv()).await {
                on_answer(unix_ms());
                client.end_crossed(&key, &resp).await;
            }
            client.core.crossing.unwatch(&key.call_id);
            client.forget(&key);
        });
    }

    /// ACKs and BYEs a 2xx that answered an INVITE of a previous process.
    async fn end_crossed(&self, key: &InviteKey, resp: &rsip::Response) {
        let Some(tag) = to_tag(&SipMessage::Response(resp.clone())) else {
            return;
        };
        let key = InviteKey {
            remote_tag: Some(tag.clone()),
            remote_target: contact_of(resp),
            ..key.clone()
        };
        self.send_ack(&key, &tag).await;
        let _ = self.send_raw(&key, Raw::Bye(&tag)).await;
    }

    /// Sends a request outside any dialog layer state, as a new client transaction (CANCEL
    /// and BYE); the final response's code, if one came within 16 x T1.
    async fn send_raw(&self, key: &InviteKey, raw: Raw<'_>) -> Option<u16> {
        let request = raw_request(key, raw)?;
        let endpoint = &self.core.endpoint;
        let txkey = TransactionKey::from_request(&request, TransactionRole::Client).ok()?;
        let mut tx = Transaction::new_client(txkey, request, endpoint.clone(), None);
        tx.destination = Some(SipAddr {
            r#type: Some(sip_transport(key.transport)),
            addr: key.destination.into(),
        });
        let wait = async {
            tx.send().await.ok()?;
            while let Some(msg) = tx.receive().await {
                if let SipMessage::Response(resp) = msg
                    && resp.status_code.kind() != StatusCodeKind::Provisional
                {
                    return Some(u16::from(resp.status_code));
                }
            }
            None
        };
        tokio::time::timeout(self.core.settings.t1 * 16, wait)
            .await
            .ok()
            .flatten()
    }

    /// The ACK of a 2xx (its own transaction, never answered), straight to the transport.
    async fn send_ack(&self, key: &InviteKey, tag: &str) {
        let Some(request) = raw_request(key, Raw::Ack(tag)) else {
            return;
        };
        let dest = SipAddr {
            r#type: Some(sip_transport(key.transport)),
            addr: key.destination.into(),
        };
        let endpoint = &self.core.endpoint;
        if let Ok((connection, _)) = endpoint.transport_layer.lookup(&dest, None).await {
            let _ = connection.send(request.into(), Some(&dest)).await;
        }
    }
}

/// A request of ours outside the dialog layer.
enum Raw<'a> {
    Cancel,
    Bye(&'a str),
    Ack(&'a str),
}

/// The CANCEL, BYE or ACK for the INVITE `key` names (a BYE and an ACK to the callee's tag).
fn raw_request(key: &InviteKey, raw: Raw<'_>) -> Option<rsip::Request> {
    let fresh_branch = || {
        key.via
            .split(';')
            .map(|p| {
                if p.trim_start().starts_with("branch=") {
                    format!("branch=z9hG4bK{}", rand::random::<u64>())
                } else {
                    p.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(";")
    };
    let in_dialog = |tag: &str| {
        (
            key.remote_target
                .clone()
                .unwrap_or_else(|| key.request_uri.clone()),
            format!("{};tag={tag}", key.to),
        )
    };
    let (method, uri, to, cseq, via) = match raw {
        Raw::Cancel => (
            "CANCEL",
            key.request_uri.clone(),
            key.to.clone(),
            key.cseq,
            key.via.clone(),
        ),
        Raw::Bye(tag) => {
            let (uri, to) = in_dialog(tag);
            ("BYE", uri, to, key.cseq + 1, fresh_branch())
        }
        Raw::Ack(tag) => {
            let (uri, to) = in_dialog(tag);
            ("ACK", uri, to, key.cseq, fresh_branch())
        }
    };
    let text = format!(
        "{method} {uri} SIP/2.0\r\nVia: {via}\r\nFrom: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {cseq} {method}\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
        key.from, key.call_id
    );
    rsip::Request::try_from(text.as_str()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::tests::key;

    #[test]
    fn requests_for_a_left_invite_match_its_transaction_and_dialog() {
        let mut k = key("x");
        let cancel = raw_request(&k, Raw::Cancel).unwrap().to_string();
        assert!(cancel.starts_with("CANCEL sip:+15550001@127.0.0.1:5070 SIP/2.0\r\n"));
        assert!(cancel.contains("branch=z9hG4bKabc"), "{cancel}");
        assert!(cancel.contains("CSeq: 1 CANCEL"), "{cancel}");
        k.remote_target = Some("sip:callee@127.0.0.1:5071".into());
        let bye = raw_request(&k, Raw::Bye("theirs")).unwrap().to_string();
        assert!(
            bye.starts_with("BYE sip:callee@127.0.0.1:5071 SIP/2.0\r\n"),
            "{bye}"
        );
        assert!(bye.contains(";tag=theirs"), "{bye}");
        assert!(
            !bye.contains("branch=z9hG4bKabc"),
            "a new transaction: {bye}"
        );
        assert!(bye.contains("CSeq: 2 BYE"), "{bye}");
        let ack = raw_request(&k, Raw::Ack("theirs")).unwrap().to_string();
        assert!(ack.contains("CSeq: 1 ACK"), "{ack}");
    }
}
