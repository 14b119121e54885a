/**
 * The overview's throughput chart: uPlot, served from the package's own
 * files (nothing from a CDN), and a script of the dashboard's that fetches
 * `<base>/api/throughput` and draws items finished and attempts retried per
 * minute over the last hour (done, dead, cancelled, retried; a new script gets
 * a new name: assets are cached for a year). uPlot needs no eval and sets its
 * styles through the CSSOM (element.style), which `style-src 'self'` allows,
 * so the CSP is unchanged. With JavaScript off the overview's table shows the
 * same figures.
 *
 * Where uPlot's files are: `npm run build` copies them into dist/vendor/uplot/
 * (scripts/build.mjs), so an installed package has them beside its compiled
 * modules and needs no front-end package at run time; a git checkout runs
 * from src/ and reads them from node_modules (uplot is a devDependency).
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { Problem } from "./model.js"

const require = createRequire(import.meta.url)

type UplotFile = "uPlot.iife.min.js" | "uPlot.min.css"

// dist/internal/dashboard/chart.js -> dist/vendor/uplot/.
const VENDORED = fileURLToPath(new URL("../../vendor/uplot/", import.meta.url))
const vendored = existsSync(`${VENDORED}version.json`)

const pathOf = (file: UplotFile): string => vendored ? `${VENDORED}${file}` : require.resolve(`uplot/dist/${file}`)

/** uPlot's version, in its files' names: a new uPlot gets new URLs. */
const UPLOT_VERSION: string = (() => {
  try {
    const manifest = vendored ? JSON.parse(readFileSync(`${VENDORED}version.json`, "utf8")) : require("uplot/package.json")
    return String((manifest as { version: unknown }).version)
  } catch {
    return "missing"
  }
})()

export const UPLOT_JS_PATH = `/assets/uplot-${UPLOT_VERSION}.min.js`
export const UPLOT_CSS_PATH = `/assets/uplot-${UPLOT_VERSION}.min.css`
export const CHART_JS_PATH = "/assets/chart-2.js"

const files = new Map<string, string>()

/** A file of uPlot, read once; a 404 when it is missing (a build without it). */
export const uplotFile = (file: UplotFile): Effect.Effect<string, Problem> =>
  Effect.try({
    try: () => {
      const cached = files.get(file)
      if (cached !== undefined) return cached
      const text = readFileSync(pathOf(file), "utf8")
      files.set(file, text)
      return text
    },
    catch: () => new Problem({ status: 404, message: "uPlot's files are missing from the package: the chart cannot be drawn" })
  })

/** A served file of the package: cached for a year (its name changes with its content). */
export const assetResponse = (body: string, contentType: string) =>
  HttpServerResponse.text(body, { contentType }).pipe(HttpServerResponse.setHeader("cache-control", "public, max-age=31536000, immutable"))

/**
 * The chart's script: finds `#throughput-chart`, fetches its `data-src`
 * (`/api/throughput`: one point a minute for the last 60 minutes, zeros
 * included, as aligned columns), and draws it; again every 30 seconds while
 * the tab is visible (its points are minutes; each read is one query). Times on the axis and in the legend are uPlot's own (the
 * browser's zone). Colours are the style sheet's.
 */
export const CHART_JS = `"use strict";
(function () {
  var el = document.getElementById("throughput-chart");
  if (el === null || typeof uPlot !== "function") return;
  var src = el.getAttribute("data-src");
  var css = getComputedStyle(document.documentElement);
  function color(name) { return css.getPropertyValue(name).trim() || "currentColor"; }
  var plot = null;
  // The API's aligned columns: every minute of the window (zeros included), its start in epoch ms.
  function columns(s) {
    return [s.minutes.map(function (m) { return m / 1000; }), s.done, s.dead, s.cancelled, s.retried];
  }
  function options() {
    var axis = { stroke: color("--muted"), grid: { stroke: color("--line") }, ticks: { stroke: color("--line") } };
    return {
      width: Math.max(300, el.clientWidth), height: 220,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      axes: [axis, Object.assign({ label: "per minute", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000] }, axis)],
      series: [
        {},
        { label: "done", stroke: color("--done"), width: 2 },
        { label: "dead", stroke: color("--dead"), width: 2 },
        { label: "cancelled", stroke: color("--muted"), width: 1, dash: [4, 4] },
        { label: "retried", stroke: color("--warn"), width: 1 }
      ]
    };
  }
  function draw(data) {
    if (plot === null) {
      el.textContent = "";
      plot = new uPlot(options(), data, el);
      el.setAttribute("data-drawn", "true");
    } else {
      plot.setData(data);
    }
  }
  function load() {
    if (document.hidden) return;
    fetch(src, { headers: { "accept": "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (series) { draw(columns(series)); })
      .catch(function (error) { if (plot === null) el.textContent = "The chart could not be loaded (" + error.message + ")."; });
  }
  load();
  // Every 30 s: its points are minutes, and /api/throughput is read per request (not from the overview's cache).
  window.setInterval(load, 30000);
  window.addEventListener("resize", function () { if (plot !== null) plot.setSize({ width: Math.max(300, el.clientWidth), height: 220 }); });
})();
`
