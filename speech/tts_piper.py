# SPDX-License-Identifier: GPL-3.0-or-later
"""Piper text-to-speech worker, run by server.py as a child process.

This is the only file that imports piper (piper-tts is GPL-3.0-or-later), so the licence
boundary is a process boundary: server.py talks to it over a pipe and never links it, and
Switchboard itself only ever speaks HTTP to server.py.

Protocol (stdin/stdout, one request at a time):
  on start   -> one JSON line: {"ready": true, "sample_rate": 22050, "voice": ..., "load_s": ...}
  request    <- one JSON line: {"text": "...", "length_scale": 1.0}
  response   -> frames, each a 1-byte kind + 4-byte little-endian length + payload:
                b"A" raw 16-bit LE mono PCM at sample_rate (one frame per sentence, as piper
                     makes them), b"E" a UTF-8 error message, b"D" (length 0) the end.
  cancel     <- the line {"cancel": true} while a response runs: it stops after the sentence
                in hand and ends with b"D" (a cancel that arrives after b"D" is ignored).
Logs go to stderr. Nothing here downloads anything: the model is a file path.
"""

import os

# onnxruntime's Linux wheels (1.32.0 here) start a OneDS telemetry client that looks up
# mobile.events.data.microsoft.com every few seconds; only this variable, set before the
# import, turns it off (onnxruntime.disable_telemetry_events() afterwards does not).
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import argparse
import json
import select
import struct
import sys
import time
from pathlib import Path


def frame(out, kind: bytes, payload: bytes = b"") -> None:
    out.write(kind + struct.pack("<I", len(payload)) + payload)
    out.flush()


class Lines:
    """Lines from stdin read straight from the descriptor, so select() tells the truth about
    whether one is waiting (a buffered sys.stdin may hold it where select cannot see)."""

    def __init__(self, fd: int = 0):
        self.fd, self.buf, self.eof = fd, b"", False

    def _fill(self, timeout):
        if self.eof or not select.select([self.fd], [], [], timeout)[0]:
            return
        got = os.read(self.fd, 65536)
        self.eof = not got
        self.buf += got

    def get(self, block: bool = True):
        """The next line; None at the end of input, or (block=False) when none is waiting."""
        while b"\n" not in self.buf:
            if self.eof:
                return None
            before = len(self.buf)
            self._fill(None if block else 0)
            if not block and len(self.buf) == before and not self.eof:
                return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="piper .onnx voice")
    ap.add_argument("--config", help="its .onnx.json (default: MODEL.json)")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--volume", type=float, default=0.8,
                    help="peak level after piper's per-sentence normalisation (headroom for resampling and G.711)")
    args = ap.parse_args()

    t0 = time.monotonic()
    import onnxruntime
    from piper import PiperConfig, PiperVoice, SynthesisConfig

    model = Path(args.model)
    config = Path(args.config) if args.config else Path(f"{model}.json")
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = max(1, args.threads)
    opts.inter_op_num_threads = 1
    # PiperVoice.load() would give onnxruntime its default thread pool (every core); build it
    # ourselves so synthesis leaves room for transcription on a small machine.
    voice = PiperVoice(
        config=PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8"))),
        session=onnxruntime.InferenceSession(str(model), sess_options=opts,
                                             providers=["CPUExecutionProvider"]),
        download_dir=model.parent,
    )
    for _ in voice.synthesize("Hello."):  # warm-up: first run pays for allocations
        pass
    out = sys.stdout.buffer
    out.write((json.dumps({
        "ready": True,
        "sample_rate": voice.config.sample_rate,
        "voice": model.name.removesuffix(".onnx"),
        "load_s": round(time.monotonic() - t0, 3),
    }) + "\n").encode())
    out.flush()

    lines = Lines()
    while (line := lines.get()) is not None:
        try:
            req = json.loads(line) if line.strip() else {}
            if "text" not in req:
                continue  # a blank line, or a cancel for a response already ended
            syn = SynthesisConfig(length_scale=req.get("length_scale"), volume=args.volume)
            for chunk in voice.synthesize(str(req["text"]), syn_config=syn):
                frame(out, b"A", chunk.audio_int16_bytes)
                waiting = lines.get(block=False)
                if waiting is not None and json.loads(waiting or b"{}").get("cancel"):
                    break
        except BrokenPipeError:
            return 0
        except Exception as e:  # report and carry on: one bad input must not kill the voice
            frame(out, b"E", f"{type(e).__name__}: {e}".encode()[:2000])
        frame(out, b"D")
    return 0


if __name__ == "__main__":
    sys.exit(main())
