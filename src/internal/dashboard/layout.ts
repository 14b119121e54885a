/**
 * What every page shares: the frame (navigation, who may act, the style
 * sheet), the error page, the login page, an action's form (with the CSRF
 * token), and how times and ages read.
 */
import * as Duration from "effect/Duration"
import { CSS_PATH, ICON_PATH, JS_PATH } from "./assets.js"
import type { Access } from "./auth.js"
import { CSRF_FIELD } from "./auth.js"
import { type Html, html } from "./html.js"

/** What a page needs besides its data. */
export interface View {
  /** The base path ("" or "/docket"): every link starts with it. */
  readonly base: string
  readonly access: Access
  /** The database as shown (its password never: Database.describe). */
  readonly database: string | null
}

/** Whether this request may act (a logged-in session: forms carry its CSRF token). */
export const canAct = (view: View): view is View & { readonly access: { readonly _tag: "Session"; readonly csrf: string } } =>
  view.access._tag === "Session"

/** An epoch-ms time as UTC text (or "-"). */
export const time = (ms: number | null): string =>
  ms === null ? "-" : new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")

/** An age in whole seconds, as Effect's Duration writes it ("1m 30s"). */
export const age = (ms: number): string => Duration.format(Duration.seconds(Math.max(0, Math.round(ms / 1000))))

/** A path under the base with a query (empty values left out). */
export const link = (view: View, path: string, query: Readonly<Record<string, string | undefined>> = {}): string => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") params.set(k, v)
  const text = params.toString()
  return `${view.base}${path}${text === "" ? "" : `?${text}`}`
}

/** A POST form of one button (an action), with the session's CSRF token; nothing when this request may not act. */
export const actionForm = (
  view: View,
  path: string,
  label: string,
  options: { readonly danger?: boolean; readonly fields?: Html } = {}
): Html =>
  canAct(view)
    ? html`<form class="inline" method="post" action="${view.base}${path}"><input type="hidden" name="${CSRF_FIELD}" value="${view.access.csrf}">${options.fields}${options.danger === true ? html`<button type="submit" class="danger">${label}</button>` : html`<button type="submit">${label}</button>`}</form>`
    : html``

const who = (view: View): Html => {
  switch (view.access._tag) {
    case "ReadOnly":
      return html`<span class="badge" title="started without a token">read-only</span>`
    case "Anonymous":
    case "BadToken":
      return html`<span class="badge">read-only</span> <a href="${view.base}/login">log in to act</a>`
    case "Bearer":
      return html`<span class="badge">token</span>`
    case "Session":
      return html`<span class="badge">can act</span>${actionForm(view, "/logout", "log out")}`
  }
}

const NAV: ReadonlyArray<readonly [string, string]> = [
  ["/", "Overview"],
  ["/items", "Items"],
  ["/kinds", "Kinds"],
  ["/recurring", "Recurring"],
  ["/workers", "Workers"],
  ["/workflows", "Workflows"]
]

/** A whole page: the frame around `body`; `head` adds the page's own style sheets and scripts (files of the package). */
export const page = (view: View, title: string, body: Html, head: Html = html``): Html =>
  html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title} · Docket</title><link rel="stylesheet" href="${view.base}${CSS_PATH}"><link rel="icon" href="${view.base}${ICON_PATH}" type="image/svg+xml">
<script src="${view.base}${JS_PATH}" defer></script>${head}</head>
<body data-refresh="5000"><header><span class="brand">Docket</span><nav>${
    NAV.map(([path, name]) => html`<a href="${view.base}${path}">${name}</a>`)
  }</nav><span class="who">${view.database === null ? "" : html`<span class="muted">${view.database}</span>`}<span id="live-status" class="muted"></span>${who(view)}</span></header>
<main>${body}</main></body></html>`

/** The page of a refused or failed request. */
export const errorPage = (view: View, status: number, message: string): Html =>
  page(view, `Error ${status}`, html`<h1>Error ${status}</h1><p class="error">${message}</p><p><a href="${view.base}/">Back to the overview</a></p>`)

/** The login form (the token, posted to /login; nothing but the token is asked). */
export const loginPage = (view: View, problem: string | null): Html =>
  page(
    view,
    "Log in",
    html`<h1>Log in to act</h1>
${problem === null ? "" : html`<p class="error">${problem}</p>`}
${
      view.access._tag === "ReadOnly"
        ? html`<p>This dashboard was started without a token: it is read-only, and nobody can act on the queue through it.</p>`
        : html`<form class="stack" method="post" action="${view.base}/login"><label>Token <input type="password" name="token" autocomplete="current-password" required></label> <button type="submit">Log in</button></form>`
    }`
  )
