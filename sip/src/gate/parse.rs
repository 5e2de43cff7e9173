//! Reading a new INVITE from a raw datagram: the request line and the few headers the gate needs
//! (Via, From, To, Call-ID, CSeq), without the full parser, and the Via of a stateless answer.

use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Invite,
    Ack,
}

/// The parts of an INVITE or ACK the gate needs, as slices of the datagram. Each header is
/// kept as (name as written, value).
pub(super) struct Request<'a> {
    pub(super) method: Method,
    pub(super) vias: Vec<(&'a [u8], &'a [u8])>,
    pub(super) from: (&'a [u8], &'a [u8]),
    pub(super) to: (&'a [u8], &'a [u8]),
    pub(super) call_id_line: (&'a [u8], &'a [u8]),
    pub(super) cseq: (&'a [u8], &'a [u8]),
    pub(super) call_id: &'a [u8],
    pub(super) from_tag: &'a [u8],
    pub(super) to_tag: Option<&'a [u8]>,
    pub(super) branch: &'a [u8],
}

impl<'a> Request<'a> {
    /// Reads an INVITE or ACK from `packet`; `None` for any other message and for anything
    /// the gate does not read with certainty.
    pub(super) fn parse(packet: &'a [u8]) -> Option<Request<'a>> {
        let method = if packet.starts_with(b"INVITE ") {
            Method::Invite
        } else if packet.starts_with(b"ACK ") {
            Method::Ack
        } else {
            return None;
        };
        let mut lines = Lines { rest: packet };
        let request_line = lines.next()?;
        if !request_line.ends_with(b" SIP/2.0") {
            return None;
        }
        let mut vias = Vec::new();
        let (mut from, mut to, mut call_id, mut cseq) = (None, None, None, None);
        loop {
            let line = lines.next()?;
            if line.is_empty() {
                break;
            }
            // A folded continuation line: leave the message to the full parser.
            if line[0] == b' ' || line[0] == b'\t' {
                return None;
            }
            let colon = line.iter().position(|&b| b == b':')?;
            let name = line[..colon].trim_ascii();
            let value = line[colon + 1..].trim_ascii();
            let slot = match name {
                n if n.eq_ignore_ascii_case(b"via") || n.eq_ignore_ascii_case(b"v") => {
                    vias.push((name, value));
                    continue;
                }
                n if n.eq_ignore_ascii_case(b"from") || n.eq_ignore_ascii_case(b"f") => &mut from,
                n if n.eq_ignore_ascii_case(b"to") || n.eq_ignore_ascii_case(b"t") => &mut to,
                n if n.eq_ignore_ascii_case(b"call-id") || n.eq_ignore_ascii_case(b"i") => {
                    &mut call_id
                }
                n if n.eq_ignore_ascii_case(b"cseq") => &mut cseq,
                _ => continue,
            };
            // A header the gate needs, twice: not a message to answer from raw bytes.
            if slot.replace((name, value)).is_some() {
                return None;
            }
        }
        let (from, to, call_id_line, cseq) = (from?, to?, call_id?, cseq?);
        let top = first_value(vias.first()?.1);
        let branch = param(params_of_via(top), b"branch")?;
        let from_tag = param(header_params(from.1), b"tag")?;
        let to_tag = param(header_params(to.1), b"tag");
        let call_id = call_id_line.1;
        if call_id.is_empty() || branch.is_empty() || from_tag.is_empty() {
            return None;
        }
        // CSeq names the request's method.
        let method_name: &[u8] = match method {
            Method::Invite => b"INVITE",
            Method::Ack => b"ACK",
        };
        if !cseq.1.ends_with(method_name) {
            return None;
        }
        Some(Request {
            method,
            vias,
            from,
            to,
            call_id_line,
            cseq,
            call_id,
            from_tag,
            to_tag,
            branch,
        })
    }
}

/// The header lines of a message: CRLF (or bare LF) separated; `None` past the end.
pub(super) struct Lines<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let end = self.rest.iter().position(|&b| b == b'\n')?;
        let line = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// The first value of a comma-separated header (Via may carry several).
pub(super) fn first_value(value: &[u8]) -> &[u8] {
    let mut quoted = false;
    for (i, &b) in value.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => return value[..i].trim_ascii(),
            _ => {}
        }
    }
    value
}

/// A via-parm's parameters (after `SIP/2.0/UDP host:port`).
pub(super) fn params_of_via(via: &[u8]) -> &[u8] {
    match via.iter().position(|&b| b == b';') {
        Some(i) => &via[i..],
        None => b"",
    }
}

/// A From or To value's header parameters: after the `>` of a name-addr, or after the URI.
pub(super) fn header_params(value: &[u8]) -> &[u8] {
    let after = match value.iter().rposition(|&b| b == b'>') {
        Some(i) => &value[i + 1..],
        None => value,
    };
    match after.iter().position(|&b| b == b';') {
        Some(i) => &after[i..],
        None => b"",
    }
}

/// The value of parameter `name` in `;a=b;c` parameters (empty for a flag).
pub(super) fn param<'a>(params: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    params.split(|&b| b == b';').find_map(|p| {
        let p = p.trim_ascii();
        let (n, v) = match p.iter().position(|&b| b == b'=') {
            Some(i) => (p[..i].trim_ascii(), p[i + 1..].trim_ascii()),
            None => (p, &p[p.len()..]),
        };
        n.eq_ignore_ascii_case(name).then_some(v)
    })
}

/// The top Via of a response to a request from `source`, with `received` when the sent-by
/// host is not the source address and `rport` filled in when the client asked for it, and
/// where the response goes: the source with `rport`, else the sent-by port at the source
/// address.
pub(super) fn top_via(value: &[u8], source: SocketAddr) -> (Vec<u8>, SocketAddr) {
    let top = first_value(value);
    let others = &value[top.len()..];
    let (sent, params) = top.split_at(top.len() - params_of_via(top).len());
    let sent_by = sent
        .split(|b| b.is_ascii_whitespace())
        .rfind(|s| !s.is_empty());
    let (host, port) = sent_by.map(split_host_port).unwrap_or((b"", None));
    let mut out = sent.to_vec();
    let mut rport = false;
    for p in params
        .split(|&b| b == b';')
        .map(<[u8]>::trim_ascii)
        .filter(|p| !p.is_empty())
    {
        let name = p.split(|&b| b == b'=').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"received") {
            continue;
        }
        out.push(b';');
        if p.eq_ignore_ascii_case(b"rport") {
            rport = true;
            out.extend_from_slice(format!("rport={}", source.port()).as_bytes());
        } else {
            out.extend_from_slice(p);
        }
    }
    let host_is_source = std::str::from_utf8(host)
        .ok()
        .and_then(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().ok())
        == Some(source.ip());
    if !host_is_source {
        out.extend_from_slice(format!(";received={}", source.ip()).as_bytes());
    }
    out.extend_from_slice(others);
    let to = if rport {
        source
    } else {
        SocketAddr::new(source.ip(), port.unwrap_or(5060))
    };
    (out, to)
}

/// `host:port`, `host`, `[v6]:port` or `[v6]`.
pub(super) fn split_host_port(sent_by: &[u8]) -> (&[u8], Option<u16>) {
    let colon = if sent_by.first() == Some(&b'[') {
        sent_by
            .iter()
            .position(|&b| b == b']')
            .and_then(|close| (sent_by.get(close + 1) == Some(&b':')).then_some(close + 1))
    } else {
        sent_by.iter().position(|&b| b == b':')
    };
    match colon {
        Some(i) => {
            let port = std::str::from_utf8(&sent_by[i + 1..])
                .ok()
                .and_then(|p| p.parse().ok());
            (&sent_by[..i], port)
        }
        None => (sent_by, None),
    }
}
