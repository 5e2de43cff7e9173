"""Audio and form plumbing for server.py: the error type every module answers with, WAV
decoding (PCM 8/16/24/32-bit, float, G.711 A-law and mu-law), resampling, WAV headers and
multipart/form-data parsing. numpy only; PyAV (inside faster-whisper) for non-WAV uploads.
"""

import os

# Set before anything imports huggingface_hub or onnxruntime (faster-whisper's VAD; piper in
# tts_piper.py, which sets it too): onnxruntime otherwise starts a telemetry client that keeps
# looking up mobile.events.data.microsoft.com, and nothing may be downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import io
import math
import struct
from email.message import Message

import numpy as np  # noqa: E402


class ApiError(Exception):
    """An error answered in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status, message, type_="invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def body(self):
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


# ---------------------------------------------------------------------------------------------
# Audio: WAV decoding (PCM 8/16/24/32, float, G.711 A-law and mu-law) and resampling.

def _g711_tables():
    ulaw = np.empty(256, np.int16)
    alaw = np.empty(256, np.int16)
    for i in range(256):
        v = ~i & 0xFF
        s = (((v & 0x0F) << 3) + 0x84) << ((v >> 4) & 7)
        ulaw[i] = -(s - 0x84) if v & 0x80 else s - 0x84
        v = i ^ 0x55
        e, m = (v >> 4) & 7, v & 0x0F
        s = (m << 4) + 8 if e == 0 else ((m << 4) + 0x108) << (e - 1)
        alaw[i] = s if v & 0x80 else -s
    return ulaw, alaw


ULAW, ALAW = _g711_tables()


def parse_wav(data: bytes):
    """(float32 mono samples in [-1, 1], sample rate) of a RIFF/WAVE file, or None if `data`
    is not one. Placeholder sizes (0 or 0xFFFFFFFF, as streaming writers leave) mean 'to the
    end'. Raises ApiError for a WAV in an encoding this does not read."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    pos, fmt = 12, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = pos + 8
        if cid == b"fmt ":
            tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", data[body:body + 16])
            if tag == 0xFFFE and size >= 40:  # WAVE_FORMAT_EXTENSIBLE: the tag is in the GUID
                tag = struct.unpack("<H", data[body + 24:body + 26])[0]
            fmt = (tag, channels, rate, bits)
        elif cid == b"data":
            if fmt is None:
                raise ApiError(400, "the WAV file has its data before its fmt chunk", param="file")
            end = len(data) if size in (0, 0xFFFFFFFF) else min(len(data), body + size)
            return _pcm(data[body:end], *fmt)
        pos = body + size + (size & 1)
    raise ApiError(400, "the WAV file has no data chunk", param="file")


def _pcm(raw: bytes, tag: int, channels: int, rate: int, bits: int):
    if channels < 1 or rate < 1000:
        raise ApiError(400, f"the WAV file says {channels} channels at {rate} Hz", param="file")
    width = max(1, bits // 8)
    raw = raw[: len(raw) // (width * channels) * (width * channels)]
    if tag == 1 and bits == 16:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif tag == 1 and bits == 8:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif tag == 1 and bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = (np.where(v & 0x800000, v - (1 << 24), v)).astype(np.float32) / 8388608.0
    elif tag == 1 and bits == 32:
        x = np.frombuffer(raw, "<i4").astype(np.float32) / 2147483648.0
    elif tag == 3 and bits in (32, 64):
        x = np.frombuffer(raw, "<f4" if bits == 32 else "<f8").astype(np.float32)
    elif tag in (6, 7) and bits == 8:
        x = (ALAW if tag == 6 else ULAW)[np.frombuffer(raw, np.uint8)].astype(np.float32) / 32768.0
    else:
        raise ApiError(400, f"WAV format tag {tag} with {bits}-bit samples is not supported "
                            "(PCM 8/16/24/32-bit, float, A-law and mu-law are)", param="file")
    if channels > 1:
        x = x.reshape(-1, channels).mean(axis=1)
    return np.clip(x, -1.0, 1.0), rate


def resample(x: np.ndarray, src: int, dst: int, half_taps: int = 16) -> np.ndarray:
    """Band-limited (Hann-windowed sinc) resampling of a 1-D float array; no extra packages.
    Cheap enough at telephone rates: about 2*half_taps multiply-adds per output sample when
    upsampling (more when downsampling, where the filter widens to cut at the new Nyquist)."""
    if src == dst or len(x) == 0:
        return x.astype(np.float32, copy=False)
    x = x.astype(np.float32, copy=False)
    n_out = int(round(len(x) * dst / src))
    cutoff = min(1.0, dst / src) * 0.95  # of the input Nyquist: a little below, for the window
    width = int(math.ceil(half_taps / min(1.0, dst / src)))
    t = np.arange(n_out, dtype=np.float64) * (src / dst)
    base = np.floor(t).astype(np.int64)
    frac = (t - base).astype(np.float32)
    padded = np.concatenate([np.zeros(width, np.float32), x, np.zeros(width + 1, np.float32)])
    out = np.zeros(n_out, np.float32)
    for k in range(-width + 1, width + 1):
        d = frac - k  # distance from the output point to input sample base+k
        w = cutoff * np.sinc(cutoff * d) * (0.5 + 0.5 * np.cos(np.pi * d / width))
        out += padded[base + k + width] * w
    return out


def to_int16_bytes(x: np.ndarray) -> bytes:
    return (np.clip(x, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def wav_header(rate: int, data_len: int = 0xFFFFFFFF) -> bytes:
    """A 16-bit mono WAV header; the default sizes are the 'unknown, streamed' placeholders."""
    riff = 0xFFFFFFFF if data_len == 0xFFFFFFFF else 36 + data_len
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) +
            b"data" + struct.pack("<I", data_len))


def decode_upload(data: bytes):
    """(float32 mono 16 kHz samples, seconds of audio) of an uploaded file."""
    parsed = parse_wav(data)
    if parsed is not None:
        x, rate = parsed
        return resample(x, rate, 16000), len(x) / rate
    try:  # not a WAV: faster-whisper's own decoder (PyAV, with FFmpeg inside its wheel)
        from faster_whisper.audio import decode_audio
        x = decode_audio(io.BytesIO(data), sampling_rate=16000)
    except Exception as e:
        raise ApiError(400, "could not decode the audio file: it is not a WAV, and FFmpeg "
                            f"(PyAV) could not read it either ({type(e).__name__}: {e})",
                       param="file") from e
    return x, len(x) / 16000


# ---------------------------------------------------------------------------------------------
# Multipart form parsing (the cgi module is deprecated and gone in Python 3.13).

def header_params(value: str, header: str = "content-type") -> Message:
    m = Message()
    m[header] = value
    return m


def parse_multipart(content_type: str, body: bytes):
    """{name: (filename or None, bytes)} of a multipart/form-data body."""
    boundary = header_params(content_type).get_param("boundary")
    if not boundary:
        raise ApiError(400, "multipart/form-data without a boundary")
    sep = b"\r\n--" + boundary.encode("latin-1")
    fields = {}
    for part in (b"\r\n" + body).split(sep)[1:]:
        if part.startswith(b"--"):
            break
        head, found, data = part.partition(b"\r\n\r\n")
        if not found:
            continue
        disposition = ""
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, _, value = line.partition(":")
            if key.strip().lower() == "content-disposition":
                disposition = value.strip()
        d = header_params(disposition, "content-disposition")
        name = d.get_param("name", header="content-disposition")
        if name:
            fields[name] = (d.get_param("filename", header="content-disposition"), data)
    return fields
