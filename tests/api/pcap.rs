//! Captures for SIPp to play (`play_pcap_audio`): a callee who says something.

use std::path::Path;

/// G.711 µ-law of one sample.
fn ulaw(sample: i16) -> u8 {
    const BIAS: i32 = 0x84;
    let mut s = i32::from(sample);
    let sign = if s < 0 {
        s = -s;
        0x80
    } else {
        0
    };
    s = (s + BIAS).min(32_635 + BIAS);
    let exponent = (7 - (s.leading_zeros() as i32 - 17)).clamp(0, 7);
    let mantissa = (s >> (exponent + 3)) & 0x0f;
    !(sign | (exponent << 4) as u8 | mantissa as u8)
}

/// Writes a capture of `secs` of a 300 Hz tone at a speaking level, as 20 ms PCMU packets
/// (payload type 0), to `path`.
pub fn speech(path: &Path, secs: f64) {
    let mut out = Vec::new();
    // The global header: microsecond timestamps, Ethernet.
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for word in [0u32, 0, 65_535, 1] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    let packets = (secs * 50.0) as u32;
    for n in 0..packets {
        let mut rtp = vec![0x80, 0x00];
        rtp.extend_from_slice(&(n as u16).to_be_bytes());
        rtp.extend_from_slice(&(n * 160).to_be_bytes());
        rtp.extend_from_slice(&0x5eed_u32.to_be_bytes());
        rtp.extend((0..160).map(|i| {
            let t = f64::from(n * 160 + i) / 8000.0;
            ulaw((8000.0 * (2.0 * std::f64::consts::PI * 300.0 * t).sin()) as i16)
        }));
        let udp_len = 8 + rtp.len() as u16;
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        frame[16..18].copy_from_slice(&(20 + udp_len).to_be_bytes());
        frame.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
        frame.extend_from_slice(&6000u16.to_be_bytes());
        frame.extend_from_slice(&6002u16.to_be_bytes());
        frame.extend_from_slice(&udp_len.to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(&rtp);
        let micros = u64::from(n) * 20_000;
        out.extend_from_slice(&((micros / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((micros % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    std::fs::write(path, out).expect("the capture is written");
}

#[test]
fn ulaw_matches_the_table_s_corners() {
    assert_eq!(ulaw(0), 0xff);
    assert_eq!(ulaw(-1), 0x7f);
    assert_eq!(ulaw(32_767), 0x80);
    assert_eq!(ulaw(-32_768), 0x00);
}
