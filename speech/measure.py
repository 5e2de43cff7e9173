#!/usr/bin/env python3
"""Measures the local speech server: transcription speed and accuracy on 8 kHz telephone
audio, time to first audio of synthesis, load time and memory.

  python speech/measure.py                     # starts server.py itself on a free port
  python speech/measure.py --url http://127.0.0.1:8090/v1   # against a running server
  python speech/measure.py -- --beam-size 5    # arguments after -- go to the started server

Figures:
  RTF          processing seconds / audio seconds (below 1 is faster than real time; the
               server's own X-Processing-Ms, so HTTP is left out; 'wall' includes it)
  first audio  request sent -> first byte of the audio body, response_format=pcm (streamed)
  WER          word errors (substitutions + deletions + insertions) / reference words, after
               lower-casing, dropping punctuation and writing numbers as words
               ("4" -> "four", "7pm" -> "seven pm"), so "for 4" counts as "for four"
  load         process start -> GET /health answers (imports, model load, warm-up)
  RSS          resident memory of the server and its child processes (piper), after the run

Only loopback addresses are contacted; every loop is bounded.
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import uuid
import wave
from pathlib import Path

HERE = Path(__file__).resolve().parent
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
TTS_ONE = "Thank you, your table for four is booked for tomorrow at seven pm."
TTS_LONG = ("Thank you for calling. We have a table for four tomorrow at seven pm. "
            "Would you like me to book it under your name?")


def number_words(n: int) -> str:
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    return " ".join(ONES[int(d)] for d in str(n))


def normalise(text: str, numbers: bool = True) -> list:
    t = text.lower().replace("’", "'")
    t = re.sub(r"\b([ap])\.\s?m\.?", r"\1m", t)
    if numbers:
        t = re.sub(r"(\d+):(\d\d)", lambda m: f"{m.group(1)} {int(m.group(2))}"
                   if m.group(2) != "00" else m.group(1), t)
        t = re.sub(r"(\d+)\s*([ap]m)\b", r"\1 \2", t)
        t = re.sub(r"\d+", lambda m: " " + number_words(int(m.group())) + " ", t)
    t = re.sub(r"[^a-z0-9' ]+", " ", t)
    return [w.strip("'") for w in t.split() if w.strip("'")]


def edit_distance(ref: list, hyp: list) -> int:
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)]


# ---------------------------------------------------------------------------------------------

class Client:
    def __init__(self, url: str):
        u = urllib.parse.urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1") and not u.hostname.startswith("127."):
            raise SystemExit(f"{url}: measure.py only talks to a server on this machine (loopback)")
        self.host, self.port, self.base = u.hostname, u.port or 80, u.path.rstrip("/")

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=120)

    def get(self, path):
        c = self.conn()
        c.request("GET", self.base + path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body

    def transcribe(self, wav: bytes, fmt="json"):
        boundary = uuid.uuid4().hex
        parts = []
        for name, value in (("model", "whisper-1"), ("language", "en"), ("response_format", fmt)):
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                         f"{value}\r\n".encode())
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                     f'filename="audio.wav"\r\nContent-Type: audio/wav\r\n\r\n'.encode() + wav + b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        body = b"".join(parts)
        c = self.conn()
        t0 = time.perf_counter()
        c.request("POST", self.base + "/audio/transcriptions", body=body,
                  headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        r = c.getresponse()
        data = r.read()
        wall = time.perf_counter() - t0
        c.close()
        if r.status != 200:
            raise RuntimeError(f"transcription answered {r.status}: {data[:300]!r}")
        server = float(r.getheader("X-Processing-Ms") or wall * 1000) / 1000
        return json.loads(data)["text"], server, wall

    def speak(self, text, fmt="pcm", rate=None):
        req = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": fmt}
        if rate:
            req["sample_rate"] = rate
        c = self.conn()
        t0 = time.perf_counter()
        c.request("POST", self.base + "/audio/speech", body=json.dumps(req),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"speech answered {r.status}: {r.read()[:300]!r}")
        first = r.read(1)
        t_first = time.perf_counter() - t0
        data = first + r.read()
        total = time.perf_counter() - t0
        c.close()
        return data, t_first, total, int(r.getheader("X-Sample-Rate") or 24000)


def rss_kib(pid: int) -> dict:
    """VmRSS and VmHWM (peak) in KiB of pid and its children."""
    pids = [pid] + [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == pid]
    out = {"rss": 0, "peak": 0, "processes": len(pids)}
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out["rss"] += int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    out["peak"] += int(line.split()[1])
        except OSError:
            pass
    return out


def _ppid(p: int) -> int:
    try:
        return int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wav_bytes(samples: bytes, rate: int) -> bytes:
    import io
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return buf.getvalue()


def main():
    argv = sys.argv[1:]
    server_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server's base, e.g. http://127.0.0.1:8090/v1")
    ap.add_argument("--sentences", type=Path, default=HERE / "sentences")
    ap.add_argument("--repeat", type=int, default=3, help="runs per sentence (median taken)")
    ap.add_argument("--tts-repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    repeat, tts_repeat = max(1, min(args.repeat, 20)), max(1, min(args.tts_repeat, 50))

    proc = None
    result = {"machine": {"cores": os.cpu_count(), "loadavg_at_start": os.getloadavg()}}
    if args.url:
        client = Client(args.url)
    else:
        port = free_port()
        cmd = [sys.executable, str(HERE / "server.py"), "--listen", f"127.0.0.1:{port}",
               "--quiet", *server_args]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        client = Client(f"http://127.0.0.1:{port}/v1")
        deadline = t0 + 180
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited {proc.returncode}:\n{proc.stderr.read()}")
            try:
                if client.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.perf_counter() > deadline:
                proc.kill()
                raise SystemExit("server did not come up in 180 s")
            time.sleep(0.05)
        result["load_s"] = round(time.perf_counter() - t0, 2)
        result["rss_after_load_mib"] = round(rss_kib(proc.pid)["rss"] / 1024, 1)
        result["server_args"] = server_args
    try:
        result["server"] = json.loads(client.get("/health")[1])
        measure(client, args.sentences, repeat, tts_repeat, result)
        if proc:
            r = rss_kib(proc.pid)
            result["rss_after_run_mib"] = round(r["rss"] / 1024, 1)
            result["rss_peak_mib"] = round(r["peak"] / 1024, 1)
            result["server_processes"] = r["processes"]
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    result["machine"]["loadavg_at_end"] = os.getloadavg()
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


def measure(client, folder, repeat, tts_repeat, result):
    # Speech to text on the telephone sentences.
    rows, audio_total, proc_total, wall_total, errs, errs_raw, words = [], 0, 0, 0, 0, 0, 0
    for wav_path in sorted(folder.glob("*.wav")):
        ref = wav_path.with_suffix(".txt").read_text().strip()
        data = wav_path.read_bytes()
        with wave.open(str(wav_path)) as w:
            secs, rate = w.getnframes() / w.getframerate(), w.getframerate()
        runs = [client.transcribe(data) for _ in range(repeat)]
        hyp = runs[0][0]
        proc_s = statistics.median(r[1] for r in runs)
        wall_s = statistics.median(r[2] for r in runs)
        r_words = normalise(ref)
        e = edit_distance(r_words, normalise(hyp))
        e_raw = edit_distance(normalise(ref, False), normalise(hyp, False))
        rows.append({"file": wav_path.name, "rate": rate, "seconds": round(secs, 2),
                     "reference": ref, "heard": hyp, "errors": e, "words": len(r_words),
                     "wer": round(e / len(r_words), 3), "wer_raw": round(e_raw / len(r_words), 3),
                     "processing_s": round(proc_s, 3), "wall_s": round(wall_s, 3),
                     "rtf": round(proc_s / secs, 3)})
        audio_total += secs
        proc_total += proc_s
        wall_total += wall_s
        errs += e
        errs_raw += e_raw
        words += len(r_words)
    result["stt"] = {"sentences": rows, "audio_s": round(audio_total, 2),
                     "processing_s": round(proc_total, 2), "wall_s": round(wall_total, 2),
                     "rtf": round(proc_total / audio_total, 3) if audio_total else None,
                     "rtf_wall": round(wall_total / audio_total, 3) if audio_total else None,
                     "wer": round(errs / words, 3) if words else None,
                     "wer_raw": round(errs_raw / words, 3) if words else None,
                     "errors": errs, "words": words, "runs_per_sentence": repeat}

    # Silence (with a little noise) should come back empty, not as a hallucinated "Thank you."
    import random
    rnd = random.Random(7)
    noise = b"".join(int(rnd.gauss(0, 60)).to_bytes(2, "little", signed=True) for _ in range(16000))
    result["silence_2s_heard"] = client.transcribe(wav_bytes(noise, 8000))[0]

    if result["server"].get("tts") is None:
        return
    # Text to speech: time to first audio, one sentence and three.
    for key, text in (("tts_one_sentence", TTS_ONE), ("tts_three_sentences", TTS_LONG)):
        runs = [client.speak(text) for _ in range(tts_repeat)]
        pcm, _, _, rate = runs[0]
        audio_s = len(pcm) / 2 / rate
        total = statistics.median(r[2] for r in runs)
        result[key] = {"text": text, "first_audio_s": round(statistics.median(r[1] for r in runs), 3),
                       "first_audio_min_s": round(min(r[1] for r in runs), 3),
                       "total_s": round(total, 3), "audio_s": round(audio_s, 2),
                       "rtf": round(total / audio_s, 3), "rate": rate, "runs": tts_repeat}

    # Loopback: the server's voice at 8 kHz, heard back by the server's recogniser.
    pcm, _, _, rate = client.speak(TTS_LONG, "pcm", 8000)
    heard = client.transcribe(wav_bytes(pcm, rate))[0]
    r_words = normalise(TTS_LONG)
    result["loopback_8k"] = {"said": TTS_LONG, "heard": heard,
                             "wer": round(edit_distance(r_words, normalise(heard)) / len(r_words), 3)}


def report(r):
    p = print
    if "load_s" in r:
        p(f"load: {r['load_s']} s to /health (stt {r['server']['stt'] and r['server']['stt']['load_s']} s, "
          f"tts {r['server']['tts'] and r['server']['tts']['load_s']} s)   RSS after load "
          f"{r['rss_after_load_mib']} MiB, after run {r.get('rss_after_run_mib')} MiB, peak "
          f"{r.get('rss_peak_mib')} MiB ({r.get('server_processes')} processes)")
    s = r["stt"]
    p(f"\nspeech to text, {s['runs_per_sentence']} runs each, median:")
    p(f"{'file':22} {'kHz':>4} {'sec':>5} {'proc':>6} {'RTF':>6} {'WER':>5}  heard")
    for x in s["sentences"]:
        p(f"{x['file']:22} {x['rate'] / 1000:>4g} {x['seconds']:>5} {x['processing_s']:>6} "
          f"{x['rtf']:>6} {x['wer']:>5}  {x['heard']!r}" +
          ("" if x["errors"] == 0 else f"  (said: {x['reference']!r})"))
    p(f"overall: {s['audio_s']} s of audio in {s['processing_s']} s -> RTF {s['rtf']} "
      f"(wall incl. HTTP {s['rtf_wall']}), i.e. {round(1 / s['rtf'], 1) if s['rtf'] else '-'}x real time;"
      f" WER {s['wer']} ({s['errors']}/{s['words']} words), {s['wer_raw']} without number normalisation")
    p(f"2 s of near-silence heard as: {r['silence_2s_heard']!r}")
    for key in ("tts_one_sentence", "tts_three_sentences"):
        if key in r:
            t = r[key]
            p(f"\n{key}: first audio {t['first_audio_s']} s (min {t['first_audio_min_s']}), "
              f"all {t['total_s']} s for {t['audio_s']} s of audio at {t['rate']} Hz (RTF {t['rtf']})")
    if "loopback_8k" in r:
        p(f"loopback (server voice at 8 kHz -> server recogniser): WER {r['loopback_8k']['wer']}, "
          f"heard {r['loopback_8k']['heard']!r}")
    m = r["machine"]
    p(f"\nload average at start {tuple(round(x, 2) for x in m['loadavg_at_start'])}, at end "
      f"{tuple(round(x, 2) for x in m['loadavg_at_end'])} on {m['cores']} cores")


if __name__ == "__main__":
    main()
