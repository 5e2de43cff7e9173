//! The user agent's side of one SIP call: an INVITE with an SDP offer (retransmitted over UDP
//! until something provisional comes), the ACK of its final answer, and the BYE that ends it.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use switchboard_sip::sdp::{Codec, MediaDescription};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UdpSocket};

/// A SIP conversation over UDP or TCP.
enum Signal {
    Udp(UdpSocket),
    Tcp(BufReader<TcpStream>),
}

impl Signal {
    async fn send(&mut self, to: SocketAddr, text: &str) -> std::io::Result<()> {
        match self {
            Signal::Udp(sock) => sock.send_to(text.as_bytes(), to).await.map(|_| ()),
            Signal::Tcp(stream) => stream.get_mut().write_all(text.as_bytes()).await,
        }
    }

    /// The next SIP message.
    async fn recv(&mut self) -> std::io::Result<String> {
        match self {
            Signal::Udp(sock) => {
                let mut buf = vec![0u8; 8192];
                let (n, _) = sock.recv_from(&mut buf).await?;
                Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
            }
            Signal::Tcp(stream) => {
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if stream.read_line(&mut line).await? == 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    if line == "\r\n" && head.is_empty() {
                        continue; // keep-alive
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let len = header(&head, "content-length")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0)
                    .min(65_535);
                let mut body = vec![0u8; len];
                stream.read_exact(&mut body).await?;
                head.push_str(&String::from_utf8_lossy(&body));
                Ok(head)
            }
        }
    }
}

fn header(msg: &str, name: &str) -> Option<String> {
    let head = msg.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

fn status(msg: &str) -> Option<u16> {
    msg.strip_prefix("SIP/2.0 ")?.get(..3)?.parse().ok()
}

/// What a call is placed with.
pub(crate) struct Invite<'a> {
    /// The server's SIP address.
    pub target: SocketAddr,
    /// The endpoint's slug: the user part of the request URI.
    pub slug: &'a str,
    pub local_ip: IpAddr,
    pub tcp: bool,
    pub codec: Codec,
    /// Where this side receives RTP (in the SDP offer).
    pub media_port: u16,
    /// How long to wait for the final answer.
    pub timeout: Duration,
    /// The call's number in the run (in its Call-ID).
    pub n: u64,
}

/// An answered call.
pub(crate) struct Dialog {
    signal: Signal,
    target: SocketAddr,
    /// The headers every request of the dialog carries but Via, CSeq and the To tag.
    from_tag: String,
    call_id: String,
    me: SocketAddr,
    uri: String,
    local_ip: IpAddr,
    tcp: bool,
    to_tag: String,
    remote_contact: String,
    /// Where the server takes the call's RTP.
    pub remote_media: SocketAddr,
    /// From sending the INVITE to its 200, in milliseconds.
    pub setup_ms: f64,
}

impl Dialog {
    /// Places the call and acknowledges its answer. A final answer other than 200 is an error
    /// named by its status code; a failure to reach the server, by what failed.
    pub async fn invite(invite: &Invite<'_>) -> Result<Dialog, String> {
        let ip = invite.local_ip;
        let signal = if invite.tcp {
            let stream = TcpStream::connect(invite.target)
                .await
                .map_err(|e| format!("tcp connect: {}", e.kind()))?;
            Signal::Tcp(BufReader::new(stream))
        } else {
            Signal::Udp(
                UdpSocket::bind((ip, 0))
                    .await
                    .map_err(|e| format!("local SIP socket: {e}"))?,
            )
        };
        let me = match &signal {
            Signal::Udp(sock) => sock.local_addr(),
            Signal::Tcp(stream) => stream.get_ref().local_addr(),
        }
        .map_err(|e| e.to_string())?;
        let n = invite.n;
        let mut dialog = Dialog {
            signal,
            target: invite.target,
            from_tag: format!("{:x}", rand::random::<u32>()),
            call_id: format!("{n}-{:x}@switchboard-bench", rand::random::<u64>()),
            me,
            uri: format!("sip:{}@{}", invite.slug, invite.target),
            local_ip: ip,
            tcp: invite.tcp,
            to_tag: String::new(),
            remote_contact: String::new(),
            remote_media: invite.target,
            setup_ms: 0.0,
        };
        let codec = invite.codec;
        let pt = codec.payload_type();
        let sdp = format!(
            "v=0\r\no=- {n} 1 IN IP4 {ip}\r\ns=-\r\nc=IN IP4 {ip}\r\nt=0 0\r\nm=audio {} RTP/AVP {pt}\r\n\
             a=rtpmap:{pt} {}/8000\r\na=sendrecv\r\n",
            invite.media_port,
            codec.encoding_name()
        );
        let branch = format!("z9hG4bK{:x}", rand::random::<u64>());
        let request = format!(
            "INVITE {} SIP/2.0\r\n{}Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
            dialog.uri,
            dialog.common("INVITE", 1, &branch),
            sdp.len()
        );
        let started = Instant::now();
        dialog
            .signal
            .send(dialog.target, &request)
            .await
            .map_err(|e| format!("send: {}", e.kind()))?;
        // Wait for the final answer, retransmitting over UDP until something provisional comes.
        let deadline = tokio::time::Instant::now() + invite.timeout;
        let mut retransmit = Duration::from_millis(500);
        let mut heard = false;
        let (code, msg) = loop {
            let wait = if heard || invite.tcp {
                deadline
            } else {
                (tokio::time::Instant::now() + retransmit).min(deadline)
            };
            match tokio::time::timeout_at(wait, dialog.signal.recv()).await {
                Ok(Ok(msg)) => {
                    let Some(code) = status(&msg) else { continue };
                    if !header(&msg, "cseq").unwrap_or_default().ends_with("INVITE") {
                        continue;
                    }
                    heard = true;
                    if code >= 200 {
                        break (code, msg);
                    }
                }
                Ok(Err(e)) => return Err(format!("receive: {}", e.kind())),
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err("timeout".into());
                }
                Err(_) => {
                    retransmit = (retransmit * 2).min(Duration::from_secs(4));
                    let _ = dialog.signal.send(dialog.target, &request).await;
                }
            }
        };
        let to = header(&msg, "to").unwrap_or_default();
        dialog.to_tag = to
            .split_once(";tag=")
            .map(|(_, t)| format!(";tag={}", t.split(';').next().unwrap_or(t)))
            .unwrap_or_default();
        if code != 200 {
            let ack = format!(
                "ACK {} SIP/2.0\r\n{}Content-Length: 0\r\n\r\n",
                dialog.uri,
                dialog.common("ACK", 1, &branch)
            );
            let _ = dialog.signal.send(dialog.target, &ack).await;
            return Err(code.to_string());
        }
        dialog.setup_ms = started.elapsed().as_secs_f64() * 1000.0;
        dialog.remote_contact = header(&msg, "contact")
            .map(|c| {
                c.trim_start_matches('<')
                    .split('>')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_else(|| dialog.uri.clone());
        let ack = dialog.in_dialog("ACK", 1);
        let _ = dialog.signal.send(dialog.target, &ack).await;
        let body = msg.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        dialog.remote_media = MediaDescription::parse(body.as_bytes())
            .map_err(|e| format!("answer SDP: {e}"))?
            .addr;
        Ok(dialog)
    }

    fn common(&self, method: &str, cseq: u32, branch: &str) -> String {
        let (ip, me, proto) = (self.local_ip, self.me, if self.tcp { "TCP" } else { "UDP" });
        let transport_param = if self.tcp { ";transport=tcp" } else { "" };
        format!(
            "Via: SIP/2.0/{proto} {me};branch={branch};rport\r\nMax-Forwards: 70\r\nFrom: <sip:bench@{ip}>;tag={}\r\n\
             To: <{}>{}\r\nCall-ID: {}\r\nCSeq: {cseq} {method}\r\nContact: <sip:bench@{me}{transport_param}>\r\n",
            self.from_tag, self.uri, self.to_tag, self.call_id
        )
    }

    /// A request within the dialog, to the server's contact, on a branch of its own.
    fn in_dialog(&self, method: &str, cseq: u32) -> String {
        format!(
            "{method} {} SIP/2.0\r\n{}Content-Length: 0\r\n\r\n",
            self.remote_contact,
            self.common(method, cseq, &format!("z9hG4bK{:x}", rand::random::<u64>()))
        )
    }

    /// Hangs up and waits for the BYE's answer (or the server's own BYE).
    pub async fn bye(mut self) -> Result<(), String> {
        let bye = self.in_dialog("BYE", 2);
        self.signal
            .send(self.target, &bye)
            .await
            .map_err(|e| format!("send BYE: {}", e.kind()))?;
        let bye_deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(bye_deadline, self.signal.recv()).await {
                Ok(Ok(msg)) => {
                    if status(&msg).is_some()
                        && header(&msg, "cseq").unwrap_or_default().ends_with("BYE")
                    {
                        return Ok(());
                    }
                    if msg.starts_with("BYE ") {
                        // The server hung up first (silence or duration cap).
                        return Ok(());
                    }
                }
                _ => return Err("BYE unanswered".into()),
            }
        }
    }
}
