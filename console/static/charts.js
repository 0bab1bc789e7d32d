// uPlot charts of the console's metric history. Any element
//   <div class="chart" data-src="/history.json" data-series="a,b" data-unit="records/s">
// is drawn from {"series": {"a": [[unix_s, value], ...], ...}} and redrawn every 10 s.
"use strict";

const PALETTE = ["#1f4e79", "#d9822b", "#1e7b34", "#a4262c", "#6f42c1"];

function hhmm(unixSeconds) {
  const d = new Date(unixSeconds * 1000);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

// Axis numbers kept short (1.5k, 2.3M) so they fit the axis however large the values grow.
function compact(v) {
  const a = Math.abs(v);
  for (const [limit, suffix] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= limit) return `${+(v / limit).toFixed(1)}${suffix}`;
  }
  return `${+v.toFixed(2)}`;
}

// The last hour, or less while the console has not sampled for an hour yet (at least five
// minutes), so a young console's charts are not a sliver at the right edge.
function timeRange(u, windowSeconds) {
  const now = Date.now() / 1000;
  const first = u.data[0].length ? u.data[0][0] : now;
  return [Math.max(now - windowSeconds, Math.min(first, now - 300)), now];
}

function toColumns(doc, names) {
  const times = new Set();
  for (const n of names) for (const [t] of doc.series[n] || []) times.add(t);
  const xs = [...times].sort((a, b) => a - b);
  const cols = [xs];
  for (const n of names) {
    const byTime = new Map(doc.series[n] || []);
    cols.push(xs.map((t) => (byTime.has(t) ? byTime.get(t) : null)));
  }
  return cols;
}

async function drawChart(el) {
  const names = el.dataset.series.split(",");
  const labels = (el.dataset.labels || "").split(",");
  const url = `${el.dataset.src}?series=${encodeURIComponent(el.dataset.series)}`;
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) {
    el.textContent = `history unavailable (HTTP ${response.status})`;
    return;
  }
  const doc = await response.json();
  const data = toColumns(doc, names);
  el.dataset.points = String(data[0].length);
  if (el._plot) {
    el._plot.setData(data, true);
    return;
  }
  const opts = {
    width: Math.max(300, el.clientWidth),
    height: 200,
    series: [{}, ...names.map((n, i) => ({ label: labels[i] || n, stroke: PALETTE[i % PALETTE.length], width: 1.5 }))],
    // Hours and minutes on the time axis, spaced so that labels never run together.
    axes: [{ space: 70, values: (u, splits) => splits.map(hhmm) }, { size: 60, values: (u, splits) => splits.map(compact) }],
    scales: {
      x: { time: true, range: (u) => timeRange(u, doc.window_s) },
      y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
    },
  };
  el._plot = new uPlot(opts, data, el);
  el.classList.add("drawn");
}

function drawAll() {
  for (const el of document.querySelectorAll(".chart[data-series]")) {
    drawChart(el).catch((err) => { el.textContent = `chart failed: ${err}`; });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  drawAll();
  setInterval(drawAll, 10000);
});
