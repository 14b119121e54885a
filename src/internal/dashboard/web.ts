/**
 * The pages' routes (server-rendered HTML, working with JavaScript off), the
 * form actions (POST, then a redirect back: reloading repeats nothing), the
 * login and logout, and the style sheet.
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as QueueRepo from "../../QueueRepo.js"
import * as Assets from "./assets.js"
import * as Bulk from "./bulk.js"
import * as Chart from "./chart.js"
import * as GroupPages from "./groupPages.js"
import { crossSite, newSession, SESSION_COOKIE, SESSION_MS, sameSecret } from "./auth.js"
import type { Html } from "./html.js"
import {
  addressOf, authorize, type Config, factsOf, field, forgetReads, formOf, queryOf, secured, tooManyWrongTokens, viewOf
} from "./http.js"
import { errorPage, loginPage, type View } from "./layout.js"
import * as Model from "./model.js"
import { type ItemAction, Problem } from "./model.js"
import * as Pages from "./pages.js"

type Handler = (
  request: HttpServerRequest.HttpServerRequest,
  repo: QueueRepo.Service,
  view: View,
  params: Readonly<Record<string, string | undefined>>
) => Effect.Effect<HttpServerResponse.HttpServerResponse, Problem>

/** An HTML page's response. */
export const htmlResponse = (body: Html, status = 200): HttpServerResponse.HttpServerResponse =>
  secured(HttpServerResponse.text(body.value, { status, contentType: "text/html; charset=utf-8" }))

const route = (config: Config, handler: Handler) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const repo = yield* QueueRepo.QueueRepo
    const params = yield* HttpRouter.params
    const view = viewOf(config, request)
    return yield* handler(request, repo, view, params).pipe(
      Effect.catchTag("Problem", (p) => Effect.succeed(htmlResponse(errorPage(view, p.status, p.message), p.status)))
    )
  })

const show = (read: Effect.Effect<Html, Problem>) => Effect.map(read, (body) => htmlResponse(body))

/** A redirect after a POST (303: the browser GETs the page). */
const seeOther = (location: string) => secured(HttpServerResponse.redirect(location, { status: 303 }))

// The notices an action's redirect may ask for: a fixed set, so that a link
// cannot make the page say what its sender likes.
const NOTICES: Readonly<Record<string, string>> = {
  retried: "Retried: the item waits to run again.",
  cancelled: "Cancelled: the item will not run.",
  cancelledRunning: "Cancelled: its worker stops the run.",
  "due now": "Due now: a worker takes it at its next claim.",
  enqueued: "Enqueued now from its recurring schedule."
}

/** The notice `done` names, or null: only NOTICES' own keys (not "constructor" or "__proto__"). */
const noticeOf = (done: string | null): string | null =>
  done !== null && Object.hasOwn(NOTICES, done) ? NOTICES[done] : null

const notPost = (view: View) =>
  htmlResponse(errorPage(view, 405, "Actions are POST only: use the button on the page."), 405).pipe(
    HttpServerResponse.setHeader("allow", "POST")
  )

/** The pages' and forms' routes, under the base path. */
export const routes = (config: Config) => {
  const at = (path: string) => `${config.base}${path}` as HttpRouter.PathInput
  const page = (handler: Handler) => route(config, handler)
  const action = (handler: Handler) =>
    page((request, repo, view, params) =>
      Effect.flatMap(formOf(request), (form) => authorize(config, request, form)).pipe(
        Effect.zipRight(handler(request, repo, view, params)),
        Effect.ensuring(forgetReads(config))
      ))
  const refused = page((_, __, view) => Effect.succeed(notPost(view)))
  const overview = page((_, repo, view) => show(Effect.map(config.overview.read(repo), (o) => Pages.overviewPage(view, o))))
  return HttpRouter.empty.pipe(
    HttpRouter.get(at("/"), overview),
    HttpRouter.get(at("/items"), page((request, repo, view) =>
      show(Effect.gen(function*() {
        const filter = yield* Model.readFilter(queryOf(request))
        return Pages.itemsPage(view, filter, yield* Model.items(repo, filter), Date.now(), bulkNotice(queryOf(request)))
      })))),
    HttpRouter.get(at("/items/:id"), page((request, repo, view, p) =>
      show(Effect.gen(function*() {
        const item = yield* Model.item(repo, yield* Model.readId(p.id))
        const group = GroupPages.groupCell(view, item, yield* Model.groupOf(repo, item))
        return Pages.itemPage(view, item, Date.now(), noticeOf(queryOf(request).get("done")), group)
      })))),
    HttpRouter.post(at("/items/bulk/:action"), action(bulkAction(config))),
    HttpRouter.post(at("/recurring/:name/run"), action((_, repo, __, p) =>
      Effect.map(Bulk.runSchedule(repo, p.name ?? ""), (id) => seeOther(`${config.base}/items/${id}?done=enqueued`))
    )),
    HttpRouter.post(at("/items/:id/:action"), action((_, repo, __, p) =>
      Effect.gen(function*() {
        const id = yield* Model.readId(p.id)
        const name = p.action as ItemAction
        if (!Model.ITEM_ACTIONS.includes(name)) return yield* new Problem({ status: 404, message: "no such action" })
        const outcome = yield* Model.actOnItem(repo, id, name)
        return seeOther(name === "delete" ? `${config.base}/items?state=dead` : `${config.base}/items/${id}?done=${encodeURIComponent(outcome)}`)
      }))),
    HttpRouter.get(at("/kinds"), page((_, repo, view) => show(Effect.map(Model.kinds(repo), (k) => Pages.kindsPage(view, k))))),
    HttpRouter.get(at("/kinds/:kind/groups"), page((request, repo, view, p) =>
      show(Effect.gen(function*() {
        const kind = p.kind ?? ""
        const groups = yield* Model.groups(repo, kind, queryOf(request).get("cursor") ?? undefined)
        return GroupPages.groupsPage(view, kind, groups, Date.now())
      })))),
    HttpRouter.post(at("/kinds/:kind/:action"), action(kindAction(config))),
    HttpRouter.get(at("/recurring"), page((_, repo, view) => show(Effect.map(Model.schedules(repo), (s) => Pages.recurringPage(view, s))))),
    HttpRouter.get(at("/workers"), page((_, repo, view) => show(Effect.map(Model.workers(repo), (w) => Pages.workersPage(view, w))))),
    HttpRouter.get(at("/login"), page((_, __, view) => Effect.succeed(htmlResponse(loginPage(view, null))))),
    HttpRouter.post(at("/login"), page((request, _, view) => login(config, request, view))),
    HttpRouter.post(at("/logout"), action(() =>
      Effect.succeed(seeOther(`${config.base}/`).pipe(
        HttpServerResponse.unsafeSetCookie(SESSION_COOKIE, "", { httpOnly: true, sameSite: "strict", path: cookiePath(config), maxAge: 0 })
      )))),
    HttpRouter.get(at(Assets.CSS_PATH), asset(Assets.CSS, "text/css; charset=utf-8")),
    HttpRouter.get(at(Assets.JS_PATH), asset(Assets.JS, "text/javascript; charset=utf-8")),
    HttpRouter.get(at(Assets.ICON_PATH), asset(Assets.ICON, "image/svg+xml")),
    HttpRouter.get(at(Chart.CHART_JS_PATH), asset(Chart.CHART_JS, "text/javascript; charset=utf-8")),
    HttpRouter.get(at(Chart.UPLOT_JS_PATH), page(() => Effect.map(Chart.uplotFile("uPlot.iife.min.js"), (js) =>
      secured(Chart.assetResponse(js, "text/javascript; charset=utf-8"))))),
    HttpRouter.get(at(Chart.UPLOT_CSS_PATH), page(() => Effect.map(Chart.uplotFile("uPlot.min.css"), (css) =>
      secured(Chart.assetResponse(css, "text/css; charset=utf-8")))))
  ).pipe(
    // An action's URL opened by GET (a link, a prefetch): 405, nothing done.
    HttpRouter.get(at("/items/bulk/:action"), refused),
    HttpRouter.get(at("/items/:id/:action"), refused),
    HttpRouter.get(at("/kinds/:kind/:action"), refused),
    HttpRouter.get(at("/recurring/:name/run"), refused),
    HttpRouter.get(at("/logout"), refused),
    HttpRouter.all(at("/*"), page((_, __, view) => Effect.succeed(htmlResponse(errorPage(view, 404, "No such page."), 404))))
  )
}

// A file of the package: cached for a year (its name changes with its content).
const asset = (body: string, contentType: string) => Effect.succeed(secured(Chart.assetResponse(body, contentType)))

const FILTER_FIELDS = ["state", "kind", "key", "q"] as const

// A bulk action by form: the first post shows the count and asks to confirm
// (the items it counted kept under a random id the form carries); the
// confirmation's post acts on those items (Bulk.Confirmations), then goes back
// to the list. An unknown or expired confirmation asks again (409): a person
// confirmed those items, and acting on others would betray it.
const bulkAction = (config: Config): Handler => (request, repo, view, p) =>
  Effect.gen(function*() {
    const name = p.action as Bulk.BulkAction
    if (!Bulk.BULK_ACTIONS.includes(name)) return yield* new Problem({ status: 404, message: "no such action" })
    const form = yield* formOf(request)
    const filter = yield* Model.readFilter(new URLSearchParams(FILTER_FIELDS.map((f): [string, string] => [f, field(form, f)])))
    const confirmed = field(form, "confirm") === "" ? Option.none() : config.confirmations.take(field(form, "confirm"), name, filter)
    if (Option.isNone(confirmed)) {
      const matched = yield* Bulk.collect(repo, filter, name)
      const key = config.confirmations.put(name, filter, matched.ids)
      const again = field(form, "confirm") !== ""
      return htmlResponse(Pages.confirmBulkPage(view, filter, name, matched, key, again), again ? 409 : 200)
    }
    const ids = confirmed.value
    const changed = yield* Bulk.apply(repo, ids, name)
    const back = new URLSearchParams()
    for (const f of FILTER_FIELDS) if (filter[f] !== undefined) back.set(f, filter[f])
    back.set("bulk", name)
    back.set("n", String(changed))
    return seeOther(`${config.base}/items?${back.toString()}`)
  })

// Pause, resume or limits of a kind by form, then back to the kinds.
const kindAction = (config: Config): Handler => (request, repo, _, p) =>
  Effect.gen(function*() {
    const kind = p.kind ?? ""
    if (p.action === "pause" || p.action === "resume") {
      yield* Model.actOnKind(repo, kind, { _tag: p.action })
    } else if (p.action === "limits") {
      const form = yield* formOf(request)
      const limits = { concurrency: yield* Model.readConcurrency(field(form, "concurrency")), rate: yield* Model.readRate(field(form, "rate")) }
      yield* Model.actOnKind(repo, kind, { _tag: "limits", limits })
    } else {
      return yield* new Problem({ status: 404, message: "no such action" })
    }
    return seeOther(`${config.base}/kinds`)
  })

// A bulk action's notice, from its redirect: a known action and a count only.
const bulkNotice = (query: URLSearchParams): string | null => {
  const action = query.get("bulk")
  const n = Number(query.get("n"))
  if (!Number.isSafeInteger(n) || n < 0) return null
  const done = action === "retry"
    ? "Retried"
    : action === "cancel"
    ? "Cancelled"
    : action === "delete"
    ? "Deleted"
    : action === "run-now"
    ? "Made due now:"
    : null
  return done === null ? null : `${done} ${n} ${n === 1 ? "item" : "items"}.`
}

const cookiePath = (config: Config) => (config.base === "" ? "/" : config.base)

// A login: from this origin only, with the token (compared in constant
// time); sets the session cookie (HttpOnly, SameSite=Strict, Secure behind
// an https proxy) and goes to the overview.
const login = (config: Config, request: HttpServerRequest.HttpServerRequest, view: View) =>
  Effect.gen(function*() {
    const foreign = crossSite(factsOf(request), config.origins)
    if (foreign !== null) return yield* new Problem({ status: 403, message: `refused: ${foreign} cannot log in here` })
    if (config.token === null) return htmlResponse(loginPage(view, null), 403)
    yield* tooManyWrongTokens(config, request)
    const given = field(yield* formOf(request), "token")
    if (given === "" || !sameSecret(given, config.token)) {
      config.wrongTokens.failed(addressOf(request), Date.now())
      return htmlResponse(loginPage(view, "That is not the token."), 403)
    }
    const secure = request.headers["x-forwarded-proto"] === "https"
    return seeOther(`${config.base}/`).pipe(
      HttpServerResponse.unsafeSetCookie(SESSION_COOKIE, newSession(config.token, Date.now()), {
        httpOnly: true,
        sameSite: "strict",
        path: cookiePath(config),
        maxAge: `${SESSION_MS} millis`,
        secure
      })
    )
  })
