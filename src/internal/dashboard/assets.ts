/**
 * The files the pages load from the package itself (nothing from a CDN: the
 * dashboard works offline): the style sheet. Served under `<base>/assets/`
 * with a long cache life; their names carry a version, so a new release's
 * pages never read an old file.
 */

/** The style sheet: plain CSS (no inline styles: the CSP refuses them). */
export const CSS = `
:root { color-scheme: light dark; --fg: #1d2430; --muted: #5d6b7e; --bg: #fbfcfd; --line: #d9dee5; --accent: #2558c4;
  --dead: #b3261e; --done: #21804a; --warn: #9a6700; }
@media (prefers-color-scheme: dark) { :root { --fg: #e4e8ee; --muted: #9aa7b8; --bg: #141820; --line: #2d3542;
  --accent: #7aa5ff; --dead: #ff8a80; --done: #6fd39a; --warn: #e6b450; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header .brand { font-weight: 700; }
header nav a { margin-right: 1rem; }
header .who { margin-left: auto; color: var(--muted); display: flex; gap: .6rem; align-items: center; }
main { padding: 1rem 1.2rem 3rem; max-width: 1400px; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
h1 { font-size: 1.35rem; margin: .4rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.6rem 0 .6rem; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1rem; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: color-mix(in srgb, var(--line) 35%, transparent); padding: .6rem .8rem; overflow: auto; max-height: 28rem;
  white-space: pre-wrap; word-break: break-word; border-radius: 4px; }
.muted { color: var(--muted); }
.state-dead, .bad { color: var(--dead); }
.state-done, .good { color: var(--done); }
.state-scheduled, .warn { color: var(--warn); }
.badge { display: inline-block; padding: 0 .45rem; border: 1px solid var(--line); border-radius: 9px; font-size: .85em; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem; margin-bottom: 1rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .6rem .9rem; min-width: 9rem; }
.card .v { font-size: 1.4rem; font-weight: 650; font-variant-numeric: tabular-nums; }
form.inline { display: inline; margin: 0 .3rem 0 0; }
form.filters { display: flex; gap: .6rem; flex-wrap: wrap; align-items: end; margin-bottom: 1rem; }
form.filters label, form.stack label { display: flex; flex-direction: column; font-size: .85em; color: var(--muted); }
input, select, button { font: inherit; padding: .25rem .45rem; }
button { cursor: pointer; border: 1px solid var(--line); border-radius: 4px; background: transparent; color: var(--fg); }
button.danger { color: var(--dead); border-color: var(--dead); }
.error { border: 1px solid var(--dead); padding: .8rem 1rem; border-radius: 6px; }
meter { width: 10rem; }
.chart { min-height: 220px; margin-bottom: .8rem; }
.chart .u-legend { color: var(--fg); }
.pager { margin-top: .6rem; }
`

/** The style sheet's path under the base path (its name carries a version: a changed file gets a new name). */
export const CSS_PATH = "/assets/dashboard-1.css"

/**
 * Live refresh, for the pages that mark regions with `data-live` (each with
 * an id): every few seconds (the body's `data-refresh`, ms) while the tab is
 * visible, the page's own URL is fetched again and each region replaced by
 * the one of the same id in the answer, parsed with DOMParser (the server
 * escaped it; no script in it runs). A region holding the focus is left
 * alone, so typing in a filter is never interrupted. Without JavaScript the
 * pages are the same, reloaded by hand. A file of the package, loaded with
 * script-src 'self': no inline script anywhere.
 */
export const JS = `"use strict";
(function () {
  var body = document.body;
  var every = Number(body.getAttribute("data-refresh")) || 5000;
  var status = document.getElementById("live-status");
  var busy = false;
  function refresh() {
    if (busy || document.hidden || document.querySelector("[data-live]") === null) return;
    busy = true;
    fetch(window.location.href, { headers: { "accept": "text/html" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (region) {
          var next = region.id === "" ? null : fresh.getElementById(region.id);
          if (next !== null && !region.contains(document.activeElement)) region.replaceWith(document.importNode(next, true));
        });
        if (status !== null) status.textContent = "live, updated " + new Date().toLocaleTimeString();
      })
      .catch(function (error) {
        if (status !== null) status.textContent = "live refresh failed (" + error.message + "), retrying";
      })
      .finally(function () { busy = false; });
  }
  if (status !== null) status.textContent = "live";
  window.setInterval(refresh, every);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
})();
`

/** The script's path under the base path. */
export const JS_PATH = "/assets/dashboard-1.js"

/**
 * The tab's icon: without one a browser asks for /favicon.ico, which is not
 * the dashboard's under a base path, and logs its 404 on every page.
 */
export const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2558c4"/><path d="M4 4h5a3 4 0 0 1 0 8H4z" fill="#fff"/></svg>`

/** The icon's path under the base path. */
export const ICON_PATH = "/assets/icon-1.svg"
