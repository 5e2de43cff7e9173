//! Blind transfer of a live call (RFC 3515 REFER, the basic transfer of RFC 5589 §6): the
//! peer is asked to call the destination itself; once it accepts (2xx, usually 202), our part
//! of the call is over and the caller hangs up our leg with BYE.
//!
//! The destination is a `sip:`/`sips:` URI as given, or an E.164 number sent to the peer that
//! carries the call (`sip:+4930123456@<its address>`: a trunk routes it as it routes any
//! number). A peer that refuses the REFER (405, 501, 403, ...), or does not answer within
//! [`REFER_TIMEOUT`], leaves the call as it was, and the refusal is the answer. Calling the
//! destination ourselves and bridging the two legs is not done.

use std::net::SocketAddr;
use std::time::Duration;

use rsipstack::dialog::invite_dialog::InviteDialog;

/// How long the peer has to answer a REFER.
pub const REFER_TIMEOUT: Duration = Duration::from_secs(10);

/// What transfers one call.
#[derive(Clone)]
pub struct Transferer {
    dialog: InviteDialog,
    remote: SocketAddr,
}

/// The Refer-To URI for `to` on a call whose peer is at `remote`; why not, when `to` is
/// neither a SIP URI nor an E.164 number.
pub fn refer_target(to: &str, remote: SocketAddr) -> Result<String, String> {
    let to = to.trim();
    let lower = to.to_ascii_lowercase();
    if lower.starts_with("sip:") || lower.starts_with("sips:") {
        if to
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '<' || c == '>')
        {
            return Err(format!("{to:?} is not a SIP URI"));
        }
        return Ok(to.to_string());
    }
    let digits = to.strip_prefix('+').unwrap_or_default();
    if (2..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(format!("sip:{to}@{remote}"));
    }
    Err(format!("{to:?} is neither an E.164 number nor a sip: URI"))
}

impl Transferer {
    pub(crate) fn new(dialog: InviteDialog, remote: SocketAddr) -> Transferer {
        Transferer { dialog, remote }
    }

    /// Asks the peer to call `to`: the status it accepted the REFER with, or why not.
    pub async fn refer(&self, to: &str) -> Result<u16, String> {
        let target = refer_target(to, self.remote)?;
        let refer_to = rsipstack::sip::ReferTo::new(format!("<{target}>"));
        let sent = tokio::time::timeout(REFER_TIMEOUT, self.dialog.refer(refer_to, None, None));
        match sent.await {
            Err(_) => Err(format!(
                "the peer did not answer the REFER within {} s",
                REFER_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => Err(format!("the REFER could not be sent: {e}")),
            Ok(Ok(None)) => Err("the call is not established".into()),
            Ok(Ok(Some(response))) => {
                let code = u16::from(response.status_code.clone());
                if (200..300).contains(&code) {
                    Ok(code)
                } else {
                    Err(format!("the peer refused the transfer ({code})"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_goes_to_the_peer_and_a_uri_as_given() {
        let peer: SocketAddr = "203.0.113.5:5060".parse().unwrap();
        assert_eq!(
            refer_target("+4930123456", peer).unwrap(),
            "sip:+4930123456@203.0.113.5:5060"
        );
        let v6: SocketAddr = "[2001:db8::1]:5080".parse().unwrap();
        assert_eq!(
            refer_target("+15550100", v6).unwrap(),
            "sip:+15550100@[2001:db8::1]:5080"
        );
        assert_eq!(
            refer_target(" sip:desk@pbx.example.com ", peer).unwrap(),
            "sip:desk@pbx.example.com"
        );
        for bad in [
            "4930123456",
            "+49 30",
            "+",
            "sip:a b@x",
            "sip:<x>",
            "mailto:a@b",
        ] {
            assert!(refer_target(bad, peer).is_err(), "{bad}");
        }
    }
}
