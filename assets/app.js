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

// A campaign's chart (uPlot, loaded on the pages that have one): drawn from the numbers the
// page carries, again whenever htmx brings a fresh copy.
const PALETTE = ["#0550ae", "#116329", "#a40e26", "#7d4e00", "#6639ba", "#1b7c83", "#57606a", "#bf3989"];

function drawCharts(root) {
  if (typeof uPlot === "undefined" || !root.querySelectorAll) return;
  root.querySelectorAll("[data-chart]").forEach((el) => {
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    const data = JSON.parse(el.dataset.chart);
    const series = [{ label: "time" }].concat(
      data.series.map((s, i) => ({ label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2 })),
    );
    const width = Math.max(260, Math.min(el.clientWidth || 640, 900));
    new uPlot(
      { width, height: 220, series, scales: { x: { time: true } }, axes: [{}, { label: "calls" }] },
      [data.t].concat(data.series.map((s) => s.values)),
      el,
    );
  });
}

document.addEventListener("htmx:load", (event) => drawCharts(event.detail.elt));
document.addEventListener("DOMContentLoaded", () => drawCharts(document));

// An upload's progress, while htmx sends it.
document.addEventListener("htmx:xhr:progress", (event) => {
  const bar = document.getElementById("upload-bar");
  if (bar && event.detail.lengthComputable) {
    bar.value = Math.round((event.detail.loaded * 100) / event.detail.total);
  }
});

// A table wider than the screen scrolls sideways; keyboard users reach it by Tab and scroll it
// with the arrow keys.
function focusableScrolls(root) {
  if (!root.querySelectorAll) return;
  root.querySelectorAll("table, .flow-scroll").forEach((el) => {
    if (el.scrollWidth > el.clientWidth && !el.hasAttribute("tabindex")) {
      el.setAttribute("tabindex", "0");
    }
  });
}
document.addEventListener("DOMContentLoaded", () => focusableScrolls(document));
document.addEventListener("htmx:load", (event) => focusableScrolls(event.detail.elt));
window.addEventListener("resize", () => focusableScrolls(document));
