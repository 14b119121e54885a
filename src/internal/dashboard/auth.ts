/**
 * Who may act, and whether a request is the dashboard's own. Without a token
 * the dashboard is read-only: every action is refused. With one, an action
 * needs it: as a bearer header (`Authorization: Bearer T`, for the API), or
 * as the session a login made (an HttpOnly, SameSite=Strict cookie) together
 * with that session's CSRF token in the form (or an `x-docket-csrf` header).
 * Every POST is also refused when the browser says it comes from another
 * site (Sec-Fetch-Site) or from another origin (Origin).
 *
 * Tokens are compared as SHA-256 digests with `timingSafeEqual`, so the time
 * a comparison takes says nothing about the token. A session is a random id,
 * its issue time and an HMAC of both keyed by the token: a new token ends
 * every session, and nothing is stored on the server.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

/** The session cookie's name. */
export const SESSION_COOKIE = "docket_session"
/** The form field (and header `x-docket-csrf`) that carries a session's CSRF token. */
export const CSRF_FIELD = "_csrf"
/** How long a login lasts. */
export const SESSION_MS = 12 * 3600 * 1000

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()

/** Whether `given` is `token`, in time independent of where they differ. */
export const sameSecret = (given: string, token: string): boolean => timingSafeEqual(digest(given), digest(token))

const mac = (token: string, purpose: string, value: string) =>
  createHmac("sha256", token).update(`${purpose}:${value}`, "utf8").digest("base64url")

/** A new session's cookie value for `token`. */
export const newSession = (token: string, nowMs: number): string => {
  const id = `${randomBytes(18).toString("base64url")}~${nowMs}`
  return `${id}.${mac(token, "session", id)}`
}

/** The session id of a cookie value made by `newSession` with this token and not yet expired; else null. */
export const sessionId = (cookie: string | undefined, token: string, nowMs: number): string | null => {
  if (cookie === undefined || cookie.length > 200) return null
  const dot = cookie.lastIndexOf(".")
  if (dot < 1) return null
  const id = cookie.slice(0, dot)
  if (!sameSecret(cookie.slice(dot + 1), mac(token, "session", id))) return null
  const issued = Number(id.slice(id.indexOf("~") + 1))
  return Number.isSafeInteger(issued) && nowMs - issued >= 0 && nowMs - issued < SESSION_MS ? id : null
}

/** A session's CSRF token: what its forms carry. */
export const csrfToken = (token: string, session: string): string => mac(token, "csrf", session)

/** What a request may do. */
export type Access =
  /** No token was configured: nothing can act. */
  | { readonly _tag: "ReadOnly" }
  /** A token is configured; this request presents none (or an expired session). */
  | { readonly _tag: "Anonymous" }
  /** A bearer header with the wrong token (another scheme, e.g. a proxy's Basic, is no token attempt). */
  | { readonly _tag: "BadToken" }
  | { readonly _tag: "Bearer" }
  | { readonly _tag: "Session"; readonly csrf: string }

/** The parts of a request `access` and `crossSite` read. */
export interface RequestFacts {
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly cookies: Readonly<Record<string, string | undefined>>
}

/** What a request may do, given the configured token (null: read-only). */
export const access = (request: RequestFacts, token: string | null, nowMs: number): Access => {
  if (token === null) return { _tag: "ReadOnly" }
  // Only the Bearer scheme is a token attempt: a proxy that guards the
  // dashboard with Basic authentication makes the browser send
  // `Authorization: Basic ...` on every request, and that must neither hide
  // the session cookie nor count as a wrong token.
  const authorization = request.headers["authorization"]
  if (authorization !== undefined && /^Bearer(\s|$)/i.test(authorization)) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    return match !== null && sameSecret(match[1], token) ? { _tag: "Bearer" } : { _tag: "BadToken" }
  }
  const session = sessionId(request.cookies[SESSION_COOKIE], token, nowMs)
  return session === null ? { _tag: "Anonymous" } : { _tag: "Session", csrf: csrfToken(token, session) }
}

/**
 * Why a POST is refused as coming from elsewhere, or null: a browser's
 * Sec-Fetch-Site other than same-origin, or an Origin whose host is not the
 * Host the request was sent to ("null" included) and that is not one of
 * `origins` (the public origin a proxy serves the dashboard at, which
 * rewrites Host to the dashboard's own address). A client that sends
 * neither header (curl, a script) is not a browser another site can drive.
 */
export const crossSite = (request: RequestFacts, origins: ReadonlyArray<string> = []): string | null => {
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin") return `a ${site} request`
  const origin = request.headers["origin"]
  if (origin === undefined) return null
  const host = request.headers["host"]
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return "an unreadable Origin"
  }
  if (origins.includes(url.origin)) return null
  return host !== undefined && url.host === host ? null : `a request from ${origin}`
}

/** A public origin: as browsers send it in Origin, and its host name as Host carries it. */
export interface PublicOrigin {
  readonly origin: string
  readonly hostname: string
}

/**
 * A public origin as configured ("https://ops.example.com", any path left
 * out) in the form browsers send it in Origin, or an error message.
 */
export const publicOrigin = (input: string): PublicOrigin | string => {
  let url: URL
  try {
    url = new URL(input)
  } catch {
    return `publicOrigin must be a URL like https://ops.example.com (got "${input}")`
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return `publicOrigin must be an http or https URL (got "${input}")`
  }
  return { origin: url.origin, hostname: url.hostname }
}

/** The names a loopback-bound dashboard answers to: a page of another name is a DNS-rebinding attempt. */
export const LOOPBACK_HOSTS: ReadonlyArray<string> = ["127.0.0.1", "localhost", "[::1]"]

/** Whether the Host header names one of `hosts` (any port), case-insensitively. */
export const hostAllowed = (host: string | undefined, hosts: ReadonlyArray<string>): boolean => {
  if (host === undefined) return false
  const name = (host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.replace(/:\d+$/, "")).toLowerCase()
  return hosts.some((h) => h.toLowerCase() === name)
}

/** Wrong tokens (logins or bearer headers) one address may present in a minute; then it is refused for the rest of it. */
export const MAX_WRONG_TOKENS = 10
const WINDOW_MS = 60_000
const MAX_ADDRESSES = 10_000

/**
 * The wrong tokens presented lately, by remote address: past
 * MAX_WRONG_TOKENS in a minute, every token from that address is refused
 * (429), the right one too, until the minute has passed. Guessing online is
 * then hopeless for any token of 16 characters or more. Behind a proxy every
 * client shares the proxy's address: a guesser locks the others out for a
 * minute, not in.
 */
export class WrongTokens {
  private readonly byAddress = new Map<string, Array<number>>()

  private recent(address: string, nowMs: number): Array<number> {
    const list = (this.byAddress.get(address) ?? []).filter((t) => nowMs - t < WINDOW_MS)
    if (list.length === 0) this.byAddress.delete(address)
    else this.byAddress.set(address, list)
    return list
  }

  /** Whether tokens from this address are refused now. */
  blocked(address: string, nowMs: number): boolean {
    return this.recent(address, nowMs).length >= MAX_WRONG_TOKENS
  }

  /** Records a wrong token from this address. */
  failed(address: string, nowMs: number): void {
    // A flood of addresses cannot grow the map without bound.
    if (this.byAddress.size >= MAX_ADDRESSES && !this.byAddress.has(address)) this.byAddress.clear()
    this.byAddress.set(address, [...this.recent(address, nowMs), nowMs])
  }
}
