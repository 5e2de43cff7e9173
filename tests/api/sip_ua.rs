//! A small hand-driven SIP user agent over real UDP (and TCP) sockets: it writes requests byte
//! by byte so tests control every header, timing and malformation.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// A UDP and TCP port, and the TCP port after it, free on loopback right now, for baresip (a
/// separate process binds them).
pub fn free_sip_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        let port = udp.local_addr().expect("addr").port();
        // baresip also listens for TLS on the next port.
        if port < u16::MAX
            && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok()
        {
            return port;
        }
    }
}

/// A parsed SIP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: u16,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<String> {
        let lower = format!("{}:", name.to_ascii_lowercase());
        self.text
            .split("\r\n\r\n")
            .next()?
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with(&lower))
            .map(|l| l[lower.len()..].trim().to_string())
    }

    pub fn cseq_method(&self) -> String {
        self.header("CSeq")
            .and_then(|c| c.split_whitespace().nth(1).map(str::to_string))
            .unwrap_or_default()
    }

    pub fn body(&self) -> &str {
        self.text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or("")
    }

    /// The status line and header names, without values that differ per call.
    pub fn shape(&self) -> Vec<String> {
        let head = self.text.split("\r\n\r\n").next().unwrap_or("");
        let mut lines = head.lines();
        let mut shape = vec![lines.next().unwrap_or("").to_string()];
        let mut names: Vec<String> = lines
            .filter_map(|l| l.split(':').next().map(|n| n.trim().to_ascii_lowercase()))
            .collect();
        names.sort();
        shape.extend(names);
        shape
    }
}

fn rand_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn new_branch() -> String {
    format!("z9hG4bK{}", rand_token())
}

/// An SDP offer for `payloads` (`pt name/rate`) at `port`.
pub fn offer(port: u16, payloads: &[(u8, &str)]) -> String {
    let pts: Vec<String> = payloads.iter().map(|(pt, _)| pt.to_string()).collect();
    let maps: String = payloads
        .iter()
        .map(|(pt, m)| format!("a=rtpmap:{pt} {m}\r\n"))
        .collect();
    format!(
        "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio {port} RTP/AVP {}\r\n{maps}a=sendrecv\r\n",
        pts.join(" ")
    )
}

/// One dialog's worth of state, driven over UDP.
pub struct Ua {
    pub sock: UdpSocket,
    pub server: SocketAddr,
    pub media: UdpSocket,
    pub call_id: String,
    pub from_tag: String,
    pub to_tag: Option<String>,
    pub branch: String,
    pub remote_contact: Option<String>,
    pub slug: String,
    /// Packets of media sent so far (the next packet's sequence number).
    rtp_sent: std::sync::atomic::AtomicU16,
}

impl Ua {
    pub async fn new(server: SocketAddr, slug: &str) -> Ua {
        Ua::from_ip(server, slug, "127.0.0.1").await
    }

    /// A user agent on another loopback address (another source, as far as the server sees).
    pub async fn from_ip(server: SocketAddr, slug: &str, ip: &str) -> Ua {
        Ua {
            sock: UdpSocket::bind((ip, 0)).await.expect("bind"),
            server,
            media: UdpSocket::bind("127.0.0.1:0").await.expect("bind media"),
            call_id: format!("{}@test", rand_token()),
            from_tag: rand_token(),
            to_tag: None,
            branch: format!("z9hG4bK{}", rand_token()),
            remote_contact: None,
            slug: slug.to_string(),
            rtp_sent: Default::default(),
        }
    }

    pub fn local(&self) -> SocketAddr {
        self.sock.local_addr().expect("addr")
    }

    pub fn media_port(&self) -> u16 {
        self.media.local_addr().expect("addr").port()
    }

    pub fn invite_text(&self, sdp: &str) -> String {
        let me = self.local();
        format!(
            "INVITE sip:{slug}@{srv} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch={b};rport\r\nMax-Forwards: 70\r\n\
             From: <sip:+15550001111@127.0.0.1>;tag={ft}\r\nTo: <sip:{slug}@{srv}>\r\nCall-ID: {cid}\r\nCSeq: 1 INVITE\r\n\
             Contact: <sip:caller@{me}>\r\nContent-Type: application/sdp\r\nContent-Length: {len}\r\n\r\n{sdp}",
            slug = self.slug,
            srv = self.server,
            b = self.branch,
            ft = self.from_tag,
            cid = self.call_id,
            len = sdp.len()
        )
    }

    /// An OPTIONS request from this user agent (its own branch).
    pub fn options_text(&self) -> String {
        self.invite_text("")
            .replacen("INVITE ", "OPTIONS ", 1)
            .replace("CSeq: 1 INVITE", "CSeq: 1 OPTIONS")
            .replace("z9hG4bK", "z9hG4bKopt")
    }

    pub async fn send_raw(&self, bytes: &[u8]) {
        self.sock.send_to(bytes, self.server).await.expect("send");
    }

    pub async fn invite(&self, sdp: &str) {
        self.send_raw(self.invite_text(sdp).as_bytes()).await;
    }

    pub async fn invite_with_offer(&self) {
        let sdp = offer(self.media_port(), &[(0, "PCMU/8000"), (8, "PCMA/8000")]);
        self.invite(&sdp).await;
    }

    /// The next response (requests from the server are answered or skipped as noted).
    pub async fn reply(&mut self, within: Duration) -> Option<Reply> {
        let mut buf = vec![0u8; 65536];
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (n, _) = tokio::time::timeout_at(deadline, self.sock.recv_from(&mut buf))
                .await
                .ok()?
                .ok()?;
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            if !text.starts_with("SIP/2.0 ") {
                continue;
            }
            let code: u16 = text[8..11].parse().ok()?;
            let reply = Reply { code, text };
            if let Some(to) = reply.header("To")
                && let Some(tag) = to.split(";tag=").nth(1)
            {
                self.to_tag = Some(tag.split(';').next().unwrap_or(tag).to_string());
            }
            if let Some(contact) = reply.header("Contact") {
                self.remote_contact = Some(
                    contact
                        .trim_start_matches('<')
                        .split('>')
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
            }
            return Some(reply);
        }
    }

    /// Responses until a final one (>= 200) for `method`.
    pub async fn final_reply(&mut self, method: &str, within: Duration) -> (Vec<u16>, Reply) {
        let mut provisional = Vec::new();
        loop {
            let r = self
                .reply(within)
                .await
                .unwrap_or_else(|| panic!("no final response to {method}"));
            if r.cseq_method() != method {
                continue;
            }
            if r.code < 200 {
                provisional.push(r.code);
                continue;
            }
            return (provisional, r);
        }
    }

    fn in_dialog(&self, method: &str, cseq: u32, branch: &str, uri: &str) -> String {
        let me = self.local();
        let to_tag = self
            .to_tag
            .as_ref()
            .map(|t| format!(";tag={t}"))
            .unwrap_or_default();
        format!(
            "{method} {uri} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch={branch};rport\r\nMax-Forwards: 70\r\n\
             From: <sip:+15550001111@127.0.0.1>;tag={ft}\r\nTo: <sip:{slug}@{srv}>{to_tag}\r\nCall-ID: {cid}\r\nCSeq: {cseq} {method}\r\n\
             Contact: <sip:caller@{me}>\r\nContent-Length: 0\r\n\r\n",
            ft = self.from_tag,
            slug = self.slug,
            srv = self.server,
            cid = self.call_id,
        )
    }

    /// A re-INVITE in the dialog (CSeq 2) offering `sdp`.
    pub async fn reinvite(&self, sdp: &str) {
        let head = self.in_dialog("INVITE", 2, &new_branch(), &self.target());
        let text = head.replace(
            "Content-Length: 0\r\n\r\n",
            &format!(
                "Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
                sdp.len()
            ),
        );
        self.send_raw(text.as_bytes()).await;
    }

    /// Where in-dialog requests go: the server's Contact.
    fn target(&self) -> String {
        self.remote_contact
            .clone()
            .unwrap_or_else(|| format!("sip:{}@{}", self.slug, self.server))
    }

    /// An in-dialog request without a body, as a new transaction.
    async fn send_in_dialog(&self, method: &str, cseq: u32) {
        let text = self.in_dialog(method, cseq, &new_branch(), &self.target());
        self.send_raw(text.as_bytes()).await;
    }

    /// ACK for the 2xx of the re-INVITE.
    pub async fn ack_reinvite(&self) {
        self.send_in_dialog("ACK", 2).await;
    }

    /// ACK for a 2xx (a new transaction to the remote Contact).
    pub async fn ack_2xx(&self) {
        self.send_in_dialog("ACK", 1).await;
    }

    /// ACK for a non-2xx final response (same branch as the INVITE).
    pub async fn ack_error(&self) {
        let uri = format!("sip:{}@{}", self.slug, self.server);
        let text = self.in_dialog("ACK", 1, &self.branch.clone(), &uri);
        self.send_raw(text.as_bytes()).await;
    }

    pub async fn cancel(&self) {
        let uri = format!("sip:{}@{}", self.slug, self.server);
        let me = self.local();
        let text = format!(
            "CANCEL {uri} SIP/2.0\r\nVia: SIP/2.0/UDP {me};branch={b};rport\r\nMax-Forwards: 70\r\n\
             From: <sip:+15550001111@127.0.0.1>;tag={ft}\r\nTo: <sip:{slug}@{srv}>\r\nCall-ID: {cid}\r\nCSeq: 1 CANCEL\r\nContent-Length: 0\r\n\r\n",
            b = self.branch,
            ft = self.from_tag,
            slug = self.slug,
            srv = self.server,
            cid = self.call_id,
        );
        self.send_raw(text.as_bytes()).await;
    }

    pub async fn bye(&self) {
        self.send_in_dialog("BYE", 3).await;
    }

    /// A BYE on `branch`: sent twice, the second is a retransmission of the first.
    pub fn bye_text(&self, branch: &str) -> String {
        self.in_dialog("BYE", 3, branch, &self.target())
    }

    /// Waits for a request from the server (e.g. its BYE) and answers it 200.
    pub async fn expect_request(&mut self, method: &str, within: Duration) -> String {
        self.answer_request(method, within, 200, "OK").await
    }

    /// Waits for a request from the server and answers it `code`.
    pub async fn answer_request(
        &mut self,
        method: &str,
        within: Duration,
        code: u16,
        reason: &str,
    ) -> String {
        let mut buf = vec![0u8; 65536];
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (n, from) = tokio::time::timeout_at(deadline, self.sock.recv_from(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no {method} from the server"))
                .expect("recv");
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            if !text.starts_with(&format!("{method} ")) {
                continue;
            }
            let reply = reply_to(&text, code, reason);
            self.sock
                .send_to(reply.as_bytes(), from)
                .await
                .expect("send");
            return text;
        }
    }

    /// Sends one RTP packet of PCMU `payload` to `to`, on the same stream as [`Ua::stream_tone`].
    pub async fn send_rtp(&self, to: SocketAddr, payload: &[u8]) {
        let i = self
            .rtp_sent
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut pkt = vec![0x80u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        pkt[2..4].copy_from_slice(&i.wrapping_add(1).to_be_bytes());
        pkt[4..8].copy_from_slice(&(u32::from(i) * 160).to_be_bytes());
        pkt.extend_from_slice(payload);
        let _ = self.media.send_to(&pkt, to).await;
    }

    /// Streams `frames` 20 ms PCMU packets of a tone to `to` (the server's media address).
    pub async fn stream_tone(&self, to: SocketAddr, frames: u16) {
        // One RTP stream across calls of this: sequence and timestamp go on from the last.
        let first = self
            .rtp_sent
            .fetch_add(frames, std::sync::atomic::Ordering::Relaxed);
        for i in first..first.wrapping_add(frames) {
            let mut pkt = vec![0x80u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7];
            pkt[2..4].copy_from_slice(&i.wrapping_add(1).to_be_bytes());
            pkt[4..8].copy_from_slice(&(u32::from(i) * 160).to_be_bytes());
            pkt.extend((0..160).map(|n| if (n / 9) % 2 == 0 { 0x10 } else { 0x90 }));
            let _ = self.media.send_to(&pkt, to).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The server's media address from an SDP answer.
pub fn media_addr(sdp: &str) -> SocketAddr {
    let ip = sdp
        .lines()
        .find_map(|l| l.strip_prefix("c=IN IP4 "))
        .expect("c= line")
        .trim();
    let port = sdp
        .lines()
        .find_map(|l| l.strip_prefix("m=audio "))
        .and_then(|m| m.split_whitespace().next())
        .expect("m= line")
        .trim();
    format!("{ip}:{port}").parse().expect("media address")
}

/// A response to `request` with its Via, From, To, Call-ID and CSeq.
pub fn reply_to(request: &str, code: u16, reason: &str) -> String {
    let mut out = format!("SIP/2.0 {code} {reason}\r\n");
    for line in request
        .split("\r\n\r\n")
        .next()
        .unwrap_or("")
        .lines()
        .skip(1)
    {
        let lower = line.to_ascii_lowercase();
        if ["via:", "from:", "to:", "call-id:", "cseq:"]
            .iter()
            .any(|h| lower.starts_with(h))
        {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Content-Length: 0\r\n\r\n");
    out
}

/// A callee's response to `request`: `reply_to` with our To `tag` and Contact (at `port`), and
/// an SDP answer in a 2xx to an INVITE.
pub fn callee_response(request: &str, code: u16, reason: &str, port: u16, tag: &str) -> String {
    let mut text = reply_to(request, code, reason);
    if let Some(line) = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("to:") && !l.contains("tag="))
    {
        text = text.replacen(line, &format!("{line};tag={tag}"), 1);
    }
    text = text.replacen(
        "Content-Length: 0\r\n",
        &format!("Contact: <sip:callee@127.0.0.1:{port}>\r\nContent-Length: 0\r\n"),
        1,
    );
    if code == 200 && request.starts_with("INVITE ") {
        let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40996 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n";
        text = text.replace(
            "Content-Length: 0\r\n\r\n",
            &format!(
                "Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
                sdp.len()
            ),
        );
    }
    text
}

/// A header's value in a message's text, case-insensitively (empty when absent).
pub fn header_of(text: &str, name: &str) -> String {
    let lower = format!("{}:", name.to_ascii_lowercase());
    text.lines()
        .find(|l| l.to_ascii_lowercase().starts_with(&lower))
        .map(|l| l[lower.len()..].trim().to_string())
        .unwrap_or_default()
}

/// Sends one request over a fresh TCP connection and returns the first final response.
pub async fn tcp_request(server: SocketAddr, text: &str) -> Option<Reply> {
    let mut stream = TcpStream::connect(server).await.ok()?;
    stream.write_all(text.as_bytes()).await.ok()?;
    let mut acc = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        acc.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&acc).to_string();
        for msg in text.split("SIP/2.0 ").skip(1) {
            let code: u16 = msg.get(..3)?.parse().ok()?;
            if code >= 200 && msg.contains("\r\n\r\n") {
                return Some(Reply {
                    code,
                    text: format!("SIP/2.0 {msg}"),
                });
            }
        }
    }
}
