/**
 * `Dashboard`: a web dashboard and a JSON API over a queue's database, and
 * `/metrics` for Prometheus. It reads the database only (through
 * `QueueRepo`), so one dashboard shows every worker on every host.
 *
 * Pages (server-rendered, working with JavaScript off), under `basePath`:
 * `/` (overview), `/items?state=&kind=&key=&q=` (a list paged by cursor),
 * `/items/ID`, `/kinds`, `/recurring`, `/workers`, `/login`. The API under
 * `/api` and the metrics at `/metrics` (docs/dashboard.md).
 *
 * Without a `token` the dashboard is read-only: every action answers 403
 * and no page offers one. With a token, actions (retry, cancel, delete, run
 * now; pause, resume, limits of a kind) need it: a login (an HttpOnly,
 * SameSite=Strict session cookie, and a CSRF token in each form) or
 * `Authorization: Bearer <token>` for the API. Every stored string is
 * rendered escaped, every response carries a Content-Security-Policy with
 * no inline script, and cross-site posts are refused.
 *
 * @example
 * ```ts
 * // Beside an application's own routes, on its HttpServer:
 * const DashboardLive = Dashboard.layer({ basePath: "/docket", token: process.env.DOCKET_DASHBOARD_TOKEN })
 * DashboardLive.pipe(
 *   Layer.provide(Docket.layerClient("postgres://app@db/app")),
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 4680, host: "127.0.0.1" })),
 *   Layer.launch, NodeRuntime.runMain)
 * ```
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { HorizonThreshold } from "./Domain.js"
import { InvalidInput } from "./Errors.js"
import * as Horizon from "./internal/horizon.js"
import * as Api from "./internal/dashboard/api.js"
import { hostAllowed, LOOPBACK_HOSTS, publicOrigin, type PublicOrigin, WrongTokens } from "./internal/dashboard/auth.js"
import * as Constants from "./internal/dashboard/constants.js"
import { type Config, json } from "./internal/dashboard/http.js"
import { Confirmations } from "./internal/dashboard/bulk.js"
import { OverviewCache, TotalsCache, WorkflowCountsCache } from "./internal/dashboard/model.js"
import * as Web from "./internal/dashboard/web.js"
import * as Workflows from "./internal/dashboard/workflows.js"
import type * as QueueRepo from "./QueueRepo.js"

/** How the dashboard is served. */
export interface Options {
  /** The path it is served under: "" (default) or a path like "/docket" (no trailing slash). */
  readonly basePath?: string | undefined
  /**
   * The token every action needs (at least 16 characters); none (default)
   * makes the dashboard read-only. The CLI reads DOCKET_DASHBOARD_TOKEN.
   */
  readonly token?: string | undefined
  /** The database URL, shown in the header with its password and query left out; none shows nothing. */
  readonly database?: string | undefined
  /**
   * The host names (any port) the dashboard answers to, from the request's
   * Host header; others get 421 and nothing. Default: any. `docket dashboard`
   * bound to a loopback address sets `LOOPBACK_HOSTS`, so that a web page
   * whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot read it.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /**
   * The address people open the dashboard at when a reverse proxy serves it
   * (e.g. "https://ops.example.com"): a form posted from that origin is not
   * cross-site even when the proxy rewrites Host to the dashboard's own
   * address, and its host name joins `allowedHosts` when the proxy keeps
   * Host. Without it, such a proxy's users could read but never act.
   */
  readonly publicOrigin?: string | undefined
  /**
   * When the overview and /metrics name who holds back the xmin horizon of
   * a PostgreSQL database (`QueueRepo.horizon`; default 5 minutes or 100,000
   * transactions). A bad one throws an `InvalidInput` on "horizon".
   */
  readonly horizon?: HorizonThreshold | undefined
}

/** The names a dashboard bound to a loopback address answers to: 127.0.0.1, localhost, [::1]. */
export { LOOPBACK_HOSTS }

/** The port `docket dashboard` listens on by default. */
export const DEFAULT_PORT = Constants.DEFAULT_PORT

/** The shortest token accepted: a guessable token would be an open door. */
export const MIN_TOKEN_LENGTH = Constants.MIN_TOKEN_LENGTH

/**
 * A database URL as the dashboard shows it: PostgreSQL's without password
 * or query (either can hold a secret), a SQLite file as its path.
 */
export const describeDatabase = (url: string): string => {
  if (!/^postgres(ql)?:\/\//i.test(url)) return url.replace(/^sqlite:(\/\/)?/i, "").replace(/^file:(\/\/)?/i, "")
  try {
    const u = new URL(url)
    const user = u.username === "" ? "" : `${decodeURIComponent(u.username)}@`
    return `${u.protocol}//${user}${u.host}${u.pathname}`
  } catch {
    return "postgres://(unreadable URL)"
  }
}

/** The public origin of the options, checked (an `InvalidInput` on "dashboard" when it is not an http(s) URL), or null. */
const publicOf = (options: Options): PublicOrigin | null => {
  if (options.publicOrigin === undefined || options.publicOrigin === "") return null
  const checked = publicOrigin(options.publicOrigin)
  if (typeof checked === "string") throw new InvalidInput({ field: "dashboard", reason: checked })
  return checked
}

/**
 * The options checked; a bad one throws an `InvalidInput` on "dashboard"
 * ("horizon" for the threshold): a program's mistake, found when it starts.
 */
const configOf = (options: Options, known: PublicOrigin | null): Config => {
  const base = options.basePath ?? ""
  if (base !== "" && !/^(\/[A-Za-z0-9._~-]+)+$/.test(base)) {
    throw new InvalidInput({ field: "dashboard", reason: `basePath must be "" or like "/docket" (got "${base}")` })
  }
  const token = options.token === undefined || options.token === "" ? null : options.token
  if (token !== null && (token.length < MIN_TOKEN_LENGTH || token.length > 1024 || /\s/.test(token))) {
    throw new InvalidInput({
      field: "dashboard",
      reason: `the token must be ${MIN_TOKEN_LENGTH} to 1024 characters without spaces (openssl rand -hex 24 makes one)`
    })
  }
  return {
    base,
    token,
    origins: known === null ? [] : [known.origin],
    database: options.database === undefined ? null : describeDatabase(options.database),
    wrongTokens: new WrongTokens(),
    overview: new OverviewCache(Either.getOrThrowWith(Horizon.resolve(options.horizon), (e) => e)),
    totals: new TotalsCache(),
    workflowCounts: new WorkflowCountsCache(),
    confirmations: new Confirmations()
  }
}

/**
 * The dashboard's routes, under `basePath`: concatenate them with an
 * application's own router (`HttpRouter.concat`) to serve both. Needs
 * `QueueRepo` (e.g. `Docket.layerClient(url)`). Throws an `InvalidInput` for
 * a bad base path or token.
 */
export const router = (options: Options = {}): HttpRouter.HttpRouter<never, QueueRepo.QueueRepo> => {
  const known = publicOf(options)
  const config = configOf(options, known)
  const routes = HttpRouter.concat(HttpRouter.concat(Api.routes(config), Workflows.routes(config)), Web.routes(config))
  const hosts = options.allowedHosts === undefined || known === null
    ? options.allowedHosts
    : [...options.allowedHosts, known.hostname]
  if (hosts === undefined) return routes
  const misdirected = json({ error: "this dashboard does not answer to that host name", status: 421 }, 421)
  return HttpRouter.use(routes, (route) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      hostAllowed(request.headers["host"], hosts) ? route : Effect.succeed(misdirected)))
}

/** Serves the dashboard on the `HttpServer` in context (e.g. `NodeHttpServer.layer`). */
export const layer = (options: Options = {}): Layer.Layer<never, never, HttpServer.HttpServer | QueueRepo.QueueRepo> =>
  HttpServer.serve(router(options))
