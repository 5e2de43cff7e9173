//! The INVITE journal: what identifies each INVITE we send ([`InviteKey`]), written down by the
//! service ([`InviteJournal`]) so that a restart after a crash can end what the dead process
//! left ([`SipClient::abandon`]): CANCEL what rang, BYE what was answered.

use rsipstack::sip::{self as rsip, StatusCodeKind};
use rsipstack::transaction::Transaction;
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transport::SipAddr;
use std::net::SocketAddr;

use super::SipClient;
use super::resolve::{Target, sip_transport};
use crate::call::header_value;
use crate::trunk::TrunkTransport;

/// What identifies an INVITE we sent: enough for another process (a restart after a crash)
/// to CANCEL it, or to BYE the dialog once it is answered, so that nothing keeps ringing or
/// holding a callee for a process that is gone.
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
    /// Once answered: the callee's tag and Contact (where in-dialog requests go).
    pub remote_tag: Option<String>,
    pub remote_target: Option<String>,
}

/// Where the dialer writes down the INVITEs it sends (the service keeps them with the call).
#[async_trait::async_trait]
pub trait InviteJournal: Send + Sync + 'static {
    /// The INVITE of a call is on its way (written again when it is answered, with the
    /// callee's tag).
    async fn invite_sent(&self, call_id: &str, key: &InviteKey);
}

/// The identity of an INVITE as sent to `target`.
pub(super) fn invite_key(req: &rsip::Request, target: &Target) -> Option<InviteKey> {
    let value = |name: &str| header_value(&req.headers, name);
    let cseq = value("cseq")?.split_whitespace().next()?.parse().ok()?;
    Some(InviteKey {
        request_uri: req.uri.to_string(),
        via: value("via")?,
        from: value("from")?,
        to: value("to")?,
        call_id: value("call-id")?,
        cseq,
        transport: target.transport,
        destination: target.addr.get_socketaddr().ok()?,
        remote_tag: None,
        remote_target: None,
    })
}

impl SipClient {
    /// Ends what a previous process left of a call: CANCELs its INVITE, or BYEs its dialog
    /// when it was answered. Returns the final response's code, if one came.
    pub async fn abandon(&self, key: &InviteKey) -> Option<u16> {
        let (method, uri, to, cseq, via) = match (&key.remote_tag, &key.remote_target) {
            (Some(tag), target) => (
                "BYE",
                target.clone().unwrap_or_else(|| key.request_uri.clone()),
                format!("{};tag={tag}", key.to),
                key.cseq + 1,
                // A new transaction: the Via of the INVITE with a fresh branch.
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
                    .join(";"),
            ),
            (None, _) => (
                "CANCEL",
                key.request_uri.clone(),
                key.to.clone(),
                key.cseq,
                key.via.clone(),
            ),
        };
        let text = format!(
            "{method} {uri} SIP/2.0\r\nVia: {via}\r\nFrom: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {cseq} {method}\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
            key.from, key.call_id
        );
        let request = rsip::Request::try_from(text.as_str()).ok()?;
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
                if let rsip::SipMessage::Response(resp) = msg
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
}
