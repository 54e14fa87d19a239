/* Usage by model and day as stacked bars, drawn as inline SVG: no chart library, nothing fetched.
 *
 * The bars are for people to see at a glance, so costs become JavaScript numbers here; the exact
 * amounts are in the totals table and the history. Every day of the range gets a slot, days without
 * usage included, so gaps show as gaps. One colour per model, the same in the legend. */
"use strict";

const TollgateChart = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const COLOURS = ["#3558d6", "#e07b39", "#2a9d8f", "#c2417a", "#7a5af8", "#b08900", "#0e7490", "#667085"];
  const W = 900, H = 290, LEFT = 70, RIGHT = 16, TOP = 16, BOTTOM = 50;
  const DAY_MS = 86400000;

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function isoDay(ms) { return new Date(ms).toISOString().slice(0, 10); }
  function dayMs(day) { return Date.parse(day + "T00:00:00Z"); }

  /** Every day from the first with usage (or two weeks back) to today, at most the last 90. */
  function dayRange(days) {
    const today = dayMs(isoDay(Date.now()));
    const last = Math.max(today, ...days.map(dayMs));
    let first = Math.min(last - 13 * DAY_MS, ...days.map(dayMs));
    first = Math.max(first, last - 89 * DAY_MS);
    const range = [];
    for (let t = first; t <= last; t += DAY_MS) range.push(isoDay(t));
    return range;
  }

  /** A round step for about five gridlines up to ``max``. */
  function niceStep(max) {
    const rough = max / 5, power = Math.pow(10, Math.floor(Math.log10(rough)));
    for (const m of [1, 2, 2.5, 5, 10]) if (rough <= m * power) return m * power;
    return 10 * power;
  }

  function tickLabel(v) { return String(Number(v.toPrecision(6))); }

  /** Sums ``daily`` rows (key × model × day) into {model → {day → {cost, requests}}}. */
  function byModelAndDay(daily) {
    const sums = new Map();
    for (const row of daily) {
      if (!sums.has(row.model)) sums.set(row.model, new Map());
      const days = sums.get(row.model);
      const cell = days.get(row.day) || { cost: 0, requests: 0 };
      cell.cost += Number(row.cost);
      cell.requests += row.requests;
      days.set(row.day, cell);
    }
    return sums;
  }

  /** Draws the chart and its legend; returns each model's colour, in the legend's order. */
  function draw(container, legend, daily) {
    container.replaceChildren();
    legend.replaceChildren();
    if (!daily.length) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "No usage yet: requests appear here once they are charged.";
      container.append(empty);
      return new Map();
    }
    const sums = byModelAndDay(daily);
    const total = (m) => [...sums.get(m).values()].reduce((a, c) => a + c.cost, 0);
    const models = [...sums.keys()].sort((a, b) => total(b) - total(a) || a.localeCompare(b));
    const days = dayRange(daily.map((r) => r.day));
    const dayTotals = days.map((d) => models.reduce((a, m) => a + ((sums.get(m).get(d) || {}).cost || 0), 0));
    const step = niceStep(Math.max(...dayTotals) || 1);
    const top = Math.max(step, Math.ceil(Math.max(...dayTotals) / step) * step);
    const plotW = W - LEFT - RIGHT, plotH = H - TOP - BOTTOM, band = plotW / days.length;
    const y = (v) => TOP + plotH - (v / top) * plotH;

    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Credits per day by model" });
    for (let v = 0; v <= top + step / 2; v += step) {
      svg.append(el("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }));
      svg.append(el("text", { x: LEFT - 8, y: y(v) + 4, "text-anchor": "end" }, tickLabel(v)));
    }
    const every = Math.ceil(days.length / 12);
    days.forEach((day, i) => {
      const x = LEFT + i * band, width = Math.max(2, band * 0.68), left = x + (band - width) / 2;
      let base = 0;
      for (const [index, model] of models.entries()) {
        const cell = sums.get(model).get(day);
        if (!cell) continue;
        const bar = el("rect", {
          class: "bar", "data-model": model, "data-day": day, x: left, width,
          y: y(base + cell.cost), height: Math.max(1, y(base) - y(base + cell.cost)),
          fill: COLOURS[index % COLOURS.length],
        });
        bar.append(el("title", {}, `${model}, ${day}: ${tickLabel(cell.cost)} credits, ${cell.requests} requests`));
        svg.append(bar);
        base += cell.cost;
      }
      if (i % every === 0 || i === days.length - 1) {
        svg.append(el("text", { x: x + band / 2, y: TOP + plotH + 16, "text-anchor": "middle" }, day.slice(5)));
      }
    });
    svg.append(el("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: TOP + plotH, y2: TOP + plotH }));
    svg.append(el("line", { class: "axis", x1: LEFT, x2: LEFT, y1: TOP, y2: TOP + plotH }));
    svg.append(el("text", { class: "title", x: LEFT + plotW / 2, y: H - 8, "text-anchor": "middle" }, "Day (UTC)"));
    svg.append(el("text", {
      class: "title", x: 0, y: 0, "text-anchor": "middle", transform: `translate(16 ${TOP + plotH / 2}) rotate(-90)`,
    }, "Credits"));
    container.append(svg);

    for (const [index, model] of models.entries()) {
      const item = document.createElement("li"), swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.backgroundColor = COLOURS[index % COLOURS.length];
      item.dataset.model = model;
      item.append(swatch, document.createTextNode(model));
      legend.append(item);
    }
    return new Map(models.map((model, index) => [model, COLOURS[index % COLOURS.length]]));
  }

  return { draw };
})();
