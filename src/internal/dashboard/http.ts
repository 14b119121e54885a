/**
 * What every route shares: the configuration, the headers every response
 * carries (the Content-Security-Policy among them), reading a request's
 * query, form and cookies, and the guard every action passes.
 */
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { type Access, access, CSRF_FIELD, crossSite, type RequestFacts, sameSecret, type WrongTokens } from "./auth.js"
import type { View } from "./layout.js"
import type { Confirmations } from "./bulk.js"
import { type OverviewCache, Problem, type TotalsCache, type WorkflowCountsCache } from "./model.js"

/** The dashboard's configuration, checked (Dashboard.ts). */
export interface Config {
  /** "" or a path like "/docket" (no trailing slash). */
  readonly base: string
  /** The token actions need; null for a read-only dashboard. */
  readonly token: string | null
  /** The origins besides the request's own Host whose posts are not cross-site (the public origin behind a proxy). */
  readonly origins: ReadonlyArray<string>
  /** The database as pages show it (never its password), or null to show none. */
  readonly database: string | null
  /** The wrong tokens presented lately, by address (this router's own). */
  readonly wrongTokens: WrongTokens
  /** The overview, read at most every 2 s (this router's own). */
  readonly overview: OverviewCache
  /** /metrics' counters' totals, read at most every 2 s. */
  readonly totals: TotalsCache
  /** /metrics' workflow counts, read at most every 2 s. */
  readonly workflowCounts: WorkflowCountsCache
  /** The items bulk confirmation pages asked about (this router's own). */
  readonly confirmations: Confirmations
}

/** After an action: the cached reads (overview, counters' totals) are read again by the next page or scrape. */
export const forgetReads = (config: Config): Effect.Effect<void> =>
  Effect.sync(() => {
    config.overview.clear()
    config.totals.clear()
    config.workflowCounts.clear()
  })

/** The address a request came from, as the wrong-token count keys it. */
export const addressOf = (request: HttpServerRequest.HttpServerRequest): string => Option.getOrElse(request.remoteAddress, () => "unknown")

/** A 429 when this address presented too many wrong tokens lately. */
export const tooManyWrongTokens = (config: Config, request: HttpServerRequest.HttpServerRequest): Effect.Effect<void, Problem> =>
  config.wrongTokens.blocked(addressOf(request), Date.now())
    ? Effect.fail(new Problem({ status: 429, message: "too many wrong tokens from this address: try again in a minute" }))
    : Effect.void

/** No inline script or style, nothing from another origin, no framing, forms only to this origin. */
export const CSP =
  "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

/** The headers of every response. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin"
}

/** A response with the security headers, not cached unless it says so. */
export const secured = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.setHeaders(response, {
    ...SECURITY_HEADERS,
    ...(response.headers["cache-control"] === undefined ? { "cache-control": "no-store" } : {})
  })

/** The request's headers and cookies, as the auth checks read them. */
export const factsOf = (request: HttpServerRequest.HttpServerRequest): RequestFacts => ({
  headers: request.headers,
  cookies: request.cookies
})

/** What this request may do. */
export const accessOf = (config: Config, request: HttpServerRequest.HttpServerRequest): Access =>
  access(factsOf(request), config.token, Date.now())

/** The view of a page for this request. */
export const viewOf = (config: Config, request: HttpServerRequest.HttpServerRequest): View => ({
  base: config.base,
  access: accessOf(config, request),
  database: config.database
})

/** The request's query string. */
export const queryOf = (request: HttpServerRequest.HttpServerRequest): URLSearchParams =>
  new URL(request.url, "http://dashboard.invalid").searchParams

/** The largest body an action reads (a form, a JSON body): a bigger one is refused unread. */
export const MAX_BODY_BYTES = 64 * 1024

/** A request's body as text, at most MAX_BODY_BYTES (413 beyond, 400 when it cannot be read). */
export const bodyText = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, Problem> =>
  Number(request.headers["content-length"] ?? 0) > MAX_BODY_BYTES
    ? Effect.fail(new Problem({ status: 413, message: `the body is over ${MAX_BODY_BYTES} bytes` }))
    : request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(MAX_BODY_BYTES)),
      Effect.catchTag("RequestError", () => Effect.fail(new Problem({ status: 400, message: "the body could not be read (or is too large)" })))
    )

/** A POST's form fields (urlencoded), or none for another body. */
export const formOf = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<UrlParams.UrlParams, Problem> => {
  const type = request.headers["content-type"] ?? ""
  if (!type.startsWith("application/x-www-form-urlencoded")) return Effect.succeed(UrlParams.empty)
  return Effect.map(bodyText(request), (text) => UrlParams.fromInput(new URLSearchParams(text)))
}

/** A form field's value, or "". */
export const field = (form: UrlParams.UrlParams, name: string): string => Option.getOrElse(UrlParams.getFirst(form, name), () => "")

/**
 * The guard of every action (a POST): refused when cross-site (403), when
 * the dashboard is read-only (403), without credentials (401), with a wrong
 * bearer token (403), or for a session without its CSRF token (403). A
 * bearer request needs no CSRF token: no browser adds that header by itself.
 */
export const authorize = (
  config: Config,
  request: HttpServerRequest.HttpServerRequest,
  form: UrlParams.UrlParams
): Effect.Effect<void, Problem> => {
  const foreign = crossSite(factsOf(request), config.origins)
  if (foreign !== null) return Effect.fail(new Problem({ status: 403, message: `refused: ${foreign} cannot act here` }))
  const who = accessOf(config, request)
  if (who._tag === "Bearer" || who._tag === "BadToken") {
    if (config.wrongTokens.blocked(addressOf(request), Date.now())) return tooManyWrongTokens(config, request)
  }
  switch (who._tag) {
    case "ReadOnly":
      return Effect.fail(new Problem({ status: 403, message: "read-only: this dashboard was started without a token" }))
    case "BadToken":
      config.wrongTokens.failed(addressOf(request), Date.now())
      return Effect.fail(new Problem({ status: 403, message: "the bearer token is not this dashboard's token" }))
    case "Anonymous":
      return Effect.fail(new Problem({ status: 401, message: "log in, or send Authorization: Bearer <token>" }))
    case "Bearer":
      return Effect.void
    case "Session": {
      const given = request.headers["x-docket-csrf"] ?? field(form, CSRF_FIELD)
      return given !== "" && sameSecret(given, who.csrf)
        ? Effect.void
        : Effect.fail(new Problem({ status: 403, message: "missing or wrong CSRF token (reload the page and try again)" }))
    }
  }
}

/** A JSON answer with the security headers. */
export const json = (body: unknown, status = 200): HttpServerResponse.HttpServerResponse =>
  secured(HttpServerResponse.unsafeJson(body, { status }))

/** A Problem as the API answers it: `{ "error": message }` with its status. */
export const jsonProblem = (problem: Problem): HttpServerResponse.HttpServerResponse =>
  json({ error: problem.message, status: problem.status }, problem.status)
