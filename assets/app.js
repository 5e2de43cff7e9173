// Switchboard dashboard: the few behaviours htmx does not cover. Served as a file: the page's
// Content-Security-Policy allows no inline script.
"use strict";

// A transcript turn's button plays the recording from that turn.
document.addEventListener("click", (event) => {
  const turn = event.target.closest("[data-seek-ms]");
  const player = document.getElementById("player");
  if (!turn || !player) return;
  player.currentTime = Number(turn.dataset.seekMs) / 1000;
  player.play().catch(() => {});
});
