/**
 * The JSON API under `<base>/api` (what the pages show, as data; the actions
 * with a bearer token or a session and its CSRF token), and `/metrics`.
 * Errors are `{ "error": ..., "status": ... }` with the status: 400 bad input,
 * 401 no credentials, 403 refused, 404 unknown, 405 wrong method, 409 not in
 * a state the action applies to, 503 the database failed.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as QueueRepo from "../../QueueRepo.js"
import { authorize, bodyText, type Config, forgetReads, formOf, json, jsonProblem, queryOf, secured } from "./http.js"
import * as Bulk from "./bulk.js"
import * as Metrics from "./metrics.js"
import * as Model from "./model.js"
import { type ItemAction, type LimitsInput, Problem } from "./model.js"

type Handler = (
  request: HttpServerRequest.HttpServerRequest,
  repo: QueueRepo.Service,
  params: Readonly<Record<string, string | undefined>>
) => Effect.Effect<HttpServerResponse.HttpServerResponse, Problem>

/** A route's handler with the request, the repository and the path's parameters; a Problem answered as JSON. */
export const route = (handler: Handler) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const repo = yield* QueueRepo.QueueRepo
    const params = yield* HttpRouter.params
    return yield* handler(request, repo, params).pipe(Effect.catchTag("Problem", (p) => Effect.succeed(jsonProblem(p))))
  })

const ok = <A>(read: Effect.Effect<A, Problem>) => Effect.map(read, (body) => json(body))

/** The body of POST .../limits: `{ concurrency?: number | null, rate?: { limit, period } | "100/1m" | null }`. */
const readLimits = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<LimitsInput, Problem> =>
  Effect.gen(function*() {
    const text = yield* bodyText(request)
    const body = yield* Effect.try({
      try: (): unknown => JSON.parse(text),
      catch: () => new Problem({ status: 400, message: "the body must be a JSON object" })
    })
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return yield* new Problem({ status: 400, message: "the body must be a JSON object" })
    }
    const given = body as { readonly concurrency?: unknown; readonly rate?: unknown }
    const concurrency = given.concurrency
    if (concurrency !== undefined && concurrency !== null && typeof concurrency !== "number") {
      return yield* new Problem({ status: 400, message: "invalid concurrency: a number, or null to remove it" })
    }
    const rate = typeof given.rate === "string" ? yield* Model.readRate(given.rate) : given.rate
    if (rate !== undefined && rate !== null) {
      const r = rate as { readonly limit?: unknown; readonly period?: unknown }
      if (typeof r !== "object" || typeof r.limit !== "number" || typeof r.period !== "number") {
        return yield* new Problem({ status: 400, message: "invalid rate: { limit, period (ms) }, \"N/PERIOD\", or null" })
      }
      return { concurrency, rate: { limit: r.limit, period: r.period } }
    }
    return { concurrency, rate: rate as null | undefined }
  })

const notPost = json({ error: "actions are POST only", status: 405 }, 405).pipe(HttpServerResponse.setHeader("allow", "POST"))

// GET /api/throughput?minutes=&kind=: finished and retried items per minute.
const throughputRoute: Handler = (request, repo) => {
  const query = queryOf(request)
  const minutes = Number(query.get("minutes") ?? 60)
  const kind = query.get("kind") ?? undefined
  return Number.isSafeInteger(minutes) && minutes >= 1 && minutes <= 1440
    ? ok(Model.throughput(repo, minutes, kind === "" ? undefined : kind))
    : Effect.fail(new Problem({ status: 400, message: "invalid minutes: an integer from 1 to 1440" }))
}

// POST /api/items/bulk/:action?<filter>: the action on every match, no confirmation (an API caller chose the filter).
const bulkRoute: Handler = (request, repo, p) =>
  Effect.gen(function*() {
    const name = p.action as Bulk.BulkAction
    if (!Bulk.BULK_ACTIONS.includes(name)) {
      return yield* new Problem({ status: 404, message: `no bulk action ${String(p.action)} (${Bulk.BULK_ACTIONS.join(", ")})` })
    }
    const filter = yield* Model.readFilter(queryOf(request))
    const matched = yield* Bulk.collect(repo, filter, name)
    const changed = yield* Bulk.apply(repo, matched.ids, name)
    return json({ action: name, matched: matched.ids.length, changed, more: matched.more })
  })

// POST /api/items/:id/:action.
const itemRoute: Handler = (_, repo, p) =>
  Effect.gen(function*() {
    const id = yield* Model.readId(p.id)
    const name = p.action as ItemAction
    if (!Model.ITEM_ACTIONS.includes(name)) {
      return yield* new Problem({ status: 404, message: `no action ${String(p.action)} (${Model.ITEM_ACTIONS.join(", ")})` })
    }
    return json({ id, action: name, outcome: yield* Model.actOnItem(repo, id, name) })
  })

// POST /api/kinds/:kind/pause|resume|limits.
const kindRoute: Handler = (request, repo, p) =>
  Effect.gen(function*() {
    const kind = p.kind ?? ""
    const name = p.action
    const outcome = name === "pause" || name === "resume"
      ? yield* Model.actOnKind(repo, kind, { _tag: name })
      : name === "limits"
      ? yield* Effect.flatMap(readLimits(request), (limits) => Model.actOnKind(repo, kind, { _tag: "limits", limits }))
      : yield* new Problem({ status: 404, message: `no action ${String(name)} (pause, resume, limits)` })
    return json({ kind, action: name, outcome })
  })

/** The API's routes and /metrics, under the base path. */
export const routes = (config: Config) => {
  const at = (path: string) => `${config.base}${path}` as HttpRouter.PathInput
  // An action: authorized first (token, CSRF, origin); the overview's cache cleared after.
  const action = (run: Handler): Handler => (request, repo, params) =>
    Effect.flatMap(formOf(request), (form) => authorize(config, request, form)).pipe(
      Effect.zipRight(run(request, repo, params)),
      Effect.ensuring(forgetReads(config))
    )
  const metrics = route((_, repo) =>
    Effect.map(
      Effect.all([config.overview.read(repo), config.totals.read(repo), config.workflowCounts.read(repo)]),
      ([o, totals, workflows]) =>
        secured(HttpServerResponse.text(Metrics.render(o, totals, workflows), { contentType: Metrics.CONTENT_TYPE }))
    )
  )
  return HttpRouter.empty.pipe(
    HttpRouter.get(at("/api/overview"), route((_, repo) => ok(config.overview.read(repo)))),
    HttpRouter.get(at("/api/throughput"), route(throughputRoute)),
    HttpRouter.get(at("/api/items"), route((request, repo) => ok(Effect.flatMap(Model.readFilter(queryOf(request)), (f) => Model.items(repo, f))))),
    HttpRouter.get(at("/api/items/:id"), route((_, repo, p) => ok(Effect.flatMap(Model.readId(p.id), (id) => Model.item(repo, id))))),
    HttpRouter.post(at("/api/items/bulk/:action"), route(action(bulkRoute))),
    HttpRouter.post(
      at("/api/recurring/:name/run"),
      route(action((_, repo, p) => Effect.map(Bulk.runSchedule(repo, p.name ?? ""), (id) => json({ name: p.name, id }))))
    ),
    HttpRouter.get(at("/api/recurring/:name/run"), Effect.succeed(notPost)),
    HttpRouter.post(at("/api/items/:id/:action"), route(action(itemRoute))),
    HttpRouter.get(at("/api/items/:id/:action"), Effect.succeed(notPost)),
    HttpRouter.get(at("/api/kinds"), route((_, repo) => ok(Model.kinds(repo)))),
    HttpRouter.post(at("/api/kinds/:kind/:action"), route(action(kindRoute))),
    HttpRouter.get(at("/api/kinds/:kind/:action"), Effect.succeed(notPost)),
    HttpRouter.get(at("/api/recurring"), route((_, repo) => ok(Model.schedules(repo)))),
    HttpRouter.get(at("/api/workers"), route((_, repo) => ok(Model.workers(repo)))),
    HttpRouter.all(at("/api/*"), Effect.succeed(json({ error: "no such API endpoint", status: 404 }, 404))),
    HttpRouter.get(at("/metrics"), metrics)
  )
}
