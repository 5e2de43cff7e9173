//! How long a finished transaction is remembered.
//!
//! The transaction layer keeps the last message of every finished transaction until the
//! transaction expiry (RFC 3261's 64*T1, 32 s; Switchboard's default 32*T1, see
//! [`crate::server::SipSettings::transaction_expiry`]), to answer a retransmission of its
//! request again. Those are parsed messages of a few kilobytes each, one or two per call (the
//! INVITE's answer and the BYE's): after a flood of calls, tens of thousands of them hold the
//! process's memory all that time. Like
//! Kamailio's and OpenSIPS's wait timer (5 s by default), Switchboard keeps them for less:
//! a sweep every `16*T1` forgets each entry that was already there at the sweep before, so an
//! entry lives `16*T1` to `32*T1` (8 to 16 s at the default T1), after which:
//!
//! - a retransmitted BYE or other non-INVITE request gets `481` from the server instead of the
//!   cached answer; by then the caller has retransmitted it five times or more unanswered, and
//!   a `481` to a BYE ends the dialog for it all the same (RFC 3261 §15.1.1);
//! - an answered INVITE is forgotten only once its ACK has come (its key is no longer among
//!   those awaiting ACK): a caller that has the 2xx no longer retransmits the INVITE, so
//!   nothing can start the call again;
//! - our own INVITE's ACK, kept to re-ACK a retransmitted 2xx, is gone: the callee has by then
//!   retransmitted its 2xx five times or more and seen no ACK, and will end the call itself.
//!
//! The gate's memory of the INVITEs it refused and passed is aged on the same sweep
//! ([`Gate::age`]).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use rsipstack::transaction::endpoint::EndpointInner;
use tokio_util::sync::CancellationToken;

use crate::gate::Gate;

/// Sweeps the transaction layer's finished transactions every `every` until `stop`.
pub(crate) fn spawn(
    endpoint: Arc<EndpointInner>,
    gate: Arc<Gate>,
    every: Duration,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut sweep = Sweep::default();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {
                    let forgotten = sweep.run(&endpoint);
                    gate.age();
                    if forgotten > 0 {
                        tracing::debug!(forgotten, "finished transactions forgotten");
                    }
                }
            }
        }
    });
}

/// One sweep's memory of the entries the sweep before saw, as hashes of their keys.
#[derive(Default)]
struct Sweep {
    keys: RandomState,
    previous: HashSet<u64>,
}

impl Sweep {
    /// Forgets every finished transaction the previous sweep saw, except an answered INVITE
    /// still awaiting its ACK; returns how many it forgot.
    fn run(&mut self, endpoint: &EndpointInner) -> usize {
        let awaiting_ack: HashSet<u64> = endpoint.waiting_ack.with(|waiting| {
            waiting
                .values()
                .map(|key| self.keys.hash_one(key))
                .collect()
        });
        let mut seen = HashSet::with_capacity(self.previous.len());
        let mut forgotten = 0;
        endpoint.finished_transactions.retain(|key, _| {
            let hash = self.keys.hash_one(key);
            if self.previous.contains(&hash) && !awaiting_ack.contains(&hash) {
                forgotten += 1;
                false
            } else {
                seen.insert(hash);
                true
            }
        });
        self.previous = seen;
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsipstack::transaction::endpoint::EndpointBuilder;
    use rsipstack::transaction::key::{TransactionKey, TransactionRole};

    fn key(branch: &str, method: &str) -> TransactionKey {
        let text = format!(
            "{method} sip:a@127.0.0.1 SIP/2.0\r\n\
             Via: SIP/2.0/UDP 127.0.0.1:5070;branch=z9hG4bK{branch}\r\n\
             From: <sip:b@127.0.0.1>;tag=f{branch}\r\n\
             To: <sip:a@127.0.0.1>\r\n\
             Call-ID: c{branch}\r\n\
             CSeq: 1 {method}\r\n\
             Content-Length: 0\r\n\r\n"
        );
        let Ok(rsipstack::sip::SipMessage::Request(req)) =
            rsipstack::sip::SipMessage::try_from(text.as_bytes())
        else {
            panic!("a request")
        };
        match TransactionKey::from_request(&req, TransactionRole::Server) {
            Ok(key) => key,
            Err(e) => panic!("a key: {e}"),
        }
    }

    #[tokio::test]
    async fn an_entry_lives_one_to_two_sweeps_and_an_invite_awaiting_ack_stays() {
        let endpoint = EndpointBuilder::new().build();
        let inner = endpoint.inner.clone();
        let (bye, invite, acked_invite) = (key("1", "BYE"), key("2", "INVITE"), key("3", "INVITE"));
        inner.finished_transactions.insert(bye.clone(), None);
        inner.finished_transactions.insert(invite.clone(), None);
        inner
            .finished_transactions
            .insert(acked_invite.clone(), None);
        let dialog = rsipstack::dialog::DialogId {
            call_id: "c2".into(),
            local_tag: "l".into(),
            remote_tag: "f2".into(),
        };
        inner.waiting_ack.insert(dialog.clone(), invite.clone());

        let mut sweep = Sweep::default();
        assert_eq!(sweep.run(&inner), 0, "the first sweep only looks");
        let late = key("4", "BYE");
        inner.finished_transactions.insert(late.clone(), None);

        assert_eq!(
            sweep.run(&inner),
            2,
            "the BYE and the acknowledged INVITE go"
        );
        assert!(!inner.finished_transactions.contains_key(&bye));
        assert!(!inner.finished_transactions.contains_key(&acked_invite));
        assert!(
            inner.finished_transactions.contains_key(&invite),
            "an answer still awaiting its ACK stays"
        );
        assert!(
            inner.finished_transactions.contains_key(&late),
            "an entry newer than the sweep before stays one more"
        );

        inner.waiting_ack.remove(&dialog);
        assert_eq!(
            sweep.run(&inner),
            2,
            "then the ACKed INVITE and the late BYE go"
        );
        assert_eq!(inner.finished_transactions.len(), 0);
    }
}
