//! Just enough SIP for the answering peer: reading a datagram's start line and the headers a
//! UAS needs, and writing responses and a BYE from them.

/// One SIP message as received.
#[derive(Debug, Clone)]
pub struct Msg {
    /// The request method, or `None` for a response.
    pub method: Option<String>,
    /// The response status, or 0 for a request.
    pub code: u16,
    /// `(lower-case long name, value)` in order.
    headers: Vec<(String, String)>,
    pub body: String,
}

/// Compact header forms (RFC 3261 §7.3.3) to their long names.
fn long_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    match lower.as_str() {
        "v" => "via",
        "f" => "from",
        "t" => "to",
        "i" => "call-id",
        "m" => "contact",
        "l" => "content-length",
        "c" => "content-type",
        "k" => "supported",
        "x" => "session-expires",
        _ => return lower,
    }
    .to_string()
}

impl Msg {
    pub fn parse(datagram: &[u8]) -> Option<Msg> {
        let text = std::str::from_utf8(datagram).ok()?;
        let text = text.trim_start_matches("\r\n");
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let mut lines = head.split("\r\n");
        let start = lines.next()?;
        let (method, code) = if let Some(rest) = start.strip_prefix("SIP/2.0 ") {
            (None, rest.get(..3)?.parse().ok()?)
        } else {
            let method = start.split(' ').next()?;
            if method.is_empty() || !start.ends_with("SIP/2.0") {
                return None;
            }
            (Some(method.to_string()), 0)
        };
        let mut headers: Vec<(String, String)> = Vec::with_capacity(12);
        for line in lines {
            if line.starts_with([' ', '\t']) {
                // A folded continuation of the previous header.
                if let Some((_, v)) = headers.last_mut() {
                    v.push(' ');
                    v.push_str(line.trim());
                }
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            headers.push((long_name(name), value.trim().to_string()));
        }
        let mut msg = Msg {
            method,
            code,
            headers,
            body: String::new(),
        };
        let len = msg
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(body.len())
            .min(body.len());
        msg.body = body[..len].to_string();
        msg.header("call-id")?;
        Some(msg)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn call_id(&self) -> &str {
        self.header("call-id").unwrap_or("")
    }

    pub fn is(&self, method: &str) -> bool {
        self.method.as_deref() == Some(method)
    }

    /// The method a response answers (from CSeq).
    pub fn cseq_method(&self) -> &str {
        self.header("cseq")
            .and_then(|c| c.split_whitespace().nth(1))
            .unwrap_or("")
    }

    /// The To header carries a tag (an in-dialog request).
    pub fn has_to_tag(&self) -> bool {
        self.header("to").is_some_and(|t| t.contains(";tag="))
    }

    /// The user part of the From URI (`+972501234567` of `<sip:+972501234567@host>;tag=1`).
    pub fn caller(&self) -> String {
        uri_user(self.header("from").unwrap_or(""))
    }

    /// The Contact URI, where in-dialog requests go.
    pub fn contact_uri(&self) -> Option<String> {
        let c = self.header("contact")?;
        let inner = match (c.find('<'), c.find('>')) {
            (Some(a), Some(b)) if a < b => &c[a + 1..b],
            _ => c.split(';').next().unwrap_or(c),
        };
        Some(inner.trim().to_string())
    }

    /// A response to this request. `to_tag` is added to To when it has none.
    pub fn response(
        &self,
        code: u16,
        reason: &str,
        to_tag: &str,
        extra: &str,
        body: &str,
    ) -> String {
        let mut out = String::with_capacity(512 + body.len());
        out.push_str(&format!("SIP/2.0 {code} {reason}\r\n"));
        for (k, v) in &self.headers {
            if k == "via" {
                out.push_str(&format!("Via: {v}\r\n"));
            }
        }
        let to = self.header("to").unwrap_or("");
        let to = if to.contains(";tag=") || code == 100 {
            to.to_string()
        } else {
            format!("{to};tag={to_tag}")
        };
        out.push_str(&format!(
            "From: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            self.header("from").unwrap_or(""),
            self.call_id(),
            self.header("cseq").unwrap_or(""),
            body.len()
        ));
        out
    }

    /// A BYE from the callee of the dialog this INVITE set up.
    pub fn bye(&self, me: std::net::SocketAddr, to_tag: &str, cseq: u32) -> String {
        let target = self
            .contact_uri()
            .unwrap_or_else(|| format!("sip:{}", me.ip()));
        let to = self.header("to").unwrap_or("");
        let from = if to.contains(";tag=") {
            to.to_string()
        } else {
            format!("{to};tag={to_tag}")
        };
        format!(
            "BYE {target} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch=z9hG4bK{:x};rport\r\nMax-Forwards: 70\r\n\
             From: {from}\r\nTo: {}\r\nCall-ID: {}\r\nCSeq: {cseq} BYE\r\nContent-Length: 0\r\n\r\n",
            rand::random::<u64>(),
            self.header("from").unwrap_or(""),
            self.call_id(),
        )
    }
}

fn uri_user(header: &str) -> String {
    let Some(start) = header.find("sip:").or_else(|| header.find("sips:")) else {
        return String::new();
    };
    let rest = &header[start..];
    let rest = rest.split_once(':').map(|(_, r)| r).unwrap_or(rest);
    match rest.find('@') {
        Some(at) => rest[..at].to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &str = "INVITE sip:+972520000001@127.0.0.1:5090 SIP/2.0\r\n\
        Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKa;rport\r\n\
        Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKb\r\n\
        From: <sip:+972501000001@127.0.0.1>;tag=abc\r\nTo: <sip:+972520000001@127.0.0.1:5090>\r\n\
        Call-ID: 0190-call\r\nCSeq: 1 INVITE\r\nContact: <sip:127.0.0.1:5060;transport=udp>\r\n\
        Content-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\r\n";

    #[test]
    fn an_invite_is_read_and_answered() {
        let m = Msg::parse(INVITE.as_bytes()).unwrap();
        assert!(m.is("INVITE"));
        assert_eq!(m.call_id(), "0190-call");
        assert_eq!(m.caller(), "+972501000001");
        assert_eq!(m.body, "v=0\r");
        assert!(!m.has_to_tag());
        assert_eq!(
            m.contact_uri().as_deref(),
            Some("sip:127.0.0.1:5060;transport=udp")
        );
        let r = m.response(180, "Ringing", "t1", "", "");
        let back = Msg::parse(r.as_bytes()).unwrap();
        assert_eq!(back.code, 180);
        assert_eq!(back.cseq_method(), "INVITE");
        assert!(back.has_to_tag());
        assert_eq!(r.matches("Via:").count(), 2);
        let bye = m.bye("127.0.0.1:5090".parse().unwrap(), "t1", 1);
        assert!(bye.starts_with("BYE sip:127.0.0.1:5060;transport=udp SIP/2.0\r\n"));
        assert!(bye.contains("To: <sip:+972501000001@127.0.0.1>;tag=abc\r\n"));
    }

    #[test]
    fn compact_headers_and_garbage() {
        let m = Msg::parse(b"SIP/2.0 200 OK\r\ni: x\r\nCSeq: 2 BYE\r\n\r\n").unwrap();
        assert_eq!(m.code, 200);
        assert_eq!(m.call_id(), "x");
        assert_eq!(m.cseq_method(), "BYE");
        assert!(Msg::parse(b"hello").is_none());
        assert!(Msg::parse(b"\xff\xfe").is_none());
    }
}
