/**
 * The workflows' pages, API and actions: executions listed (by state and
 * workflow), one execution (what `docket workflow show` prints), interrupt
 * and resume, through `Workflows.control` (../workflow/control.ts). That
 * module, and @effect/workflow with it, is loaded at the first workflow
 * request, never by the rest of the dashboard (an optional peer: without it
 * these pages answer 501). The control needs the `SqlClient` beside the
 * `QueueRepo` (Docket.layerClient provides both); without one, 501 too.
 * Actions go through the same guard as every other (http.ts `authorize`).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as QueueRepo from "../../QueueRepo.js"
import type { Admin, Execution, ExecutionDetail } from "../workflow/admin.js"
import * as Cursor from "../workflow/cursor.js"
import type { ExecutionState } from "../workflow/sql.js"
import { authorize, type Config, forgetReads, formOf, json, jsonProblem, queryOf, secured, viewOf } from "./http.js"
import { errorPage, type View } from "./layout.js"
import { Problem, toProblem } from "./model.js"
import { htmlResponse } from "./web.js"
import * as WorkflowPages from "./workflowPages.js"
import type { WorkflowFilter } from "./workflowPages.js"

export const EXECUTION_STATES: ReadonlyArray<ExecutionState> = ["running", "suspended", "complete"]
export const WORKFLOW_ACTIONS = ["interrupt", "resume"] as const
type WorkflowAction = typeof WORKFLOW_ACTIONS[number]

let module: Promise<typeof import("../workflow/control.js")> | undefined

/** The control over the queue in context (the module loaded at the first call). */
const control: Effect.Effect<Admin, Problem, QueueRepo.QueueRepo> = Effect.gen(function*() {
  const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
  if (Option.isNone(sql)) {
    return yield* new Problem({ status: 501, message: "workflows need the SqlClient beside the QueueRepo (Docket.layerClient)" })
  }
  const m = yield* Effect.tryPromise({
    try: () => (module ??= import("../workflow/control.js")),
    catch: () => new Problem({ status: 501, message: "workflows need @effect/workflow installed" })
  })
  return yield* Effect.provideService(m.control, SqlClient.SqlClient, sql.value)
})

const problemOf = (id: string) => (e: { readonly _tag: string }): Problem =>
  e._tag === "ExecutionNotFound"
    ? new Problem({ status: 404, message: `no workflow execution ${id}` })
    : toProblem(e as Parameters<typeof toProblem>[0])

/** The filter of a query: `state`, `workflow`, `limit` (1 to 1000, default 50), `cursor` (the previous page's). */
export const readWorkflowFilter = (params: URLSearchParams): Effect.Effect<WorkflowFilter, Problem> => {
  const state = params.get("state") ?? ""
  const workflow = params.get("workflow") ?? ""
  const limit = Number(params.get("limit") ?? 50)
  const cursor = params.get("cursor") ?? ""
  const before = cursor === "" ? undefined : Cursor.decode(cursor)
  if (cursor !== "" && before === undefined) return Effect.fail(new Problem({ status: 400, message: "invalid cursor" }))
  if (state !== "" && !EXECUTION_STATES.includes(state as ExecutionState)) {
    return Effect.fail(new Problem({ status: 400, message: `invalid state: must be one of ${EXECUTION_STATES.join(", ")}` }))
  }
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
    return Effect.fail(new Problem({ status: 400, message: "invalid limit: must be an integer from 1 to 1000" }))
  }
  return Effect.succeed({
    state: state === "" ? undefined : state as ExecutionState,
    workflow: workflow === "" ? undefined : workflow,
    limit,
    before
  })
}

/** The executions a filter matches, newest change first. */
export const executions = (f: WorkflowFilter): Effect.Effect<ReadonlyArray<Execution>, Problem, QueueRepo.QueueRepo> =>
  Effect.flatMap(control, (c) => Effect.mapError(c.list(f), toProblem))

/** One execution with everything stored about it; 404 when there is none. */
export const execution = (id: string): Effect.Effect<ExecutionDetail, Problem, QueueRepo.QueueRepo> =>
  Effect.flatMap(control, (c) => Effect.mapError(c.show(id), problemOf(id)))

/** Interrupts or resumes an execution; 409 when it is not in a state the action applies to. */
export const act = (id: string, action: string): Effect.Effect<string, Problem, QueueRepo.QueueRepo> =>
  Effect.gen(function*() {
    if (!WORKFLOW_ACTIONS.includes(action as WorkflowAction)) {
      return yield* new Problem({ status: 404, message: `no action ${action} (${WORKFLOW_ACTIONS.join(", ")})` })
    }
    const c = yield* control
    const done = yield* Effect.mapError(action === "interrupt" ? c.interrupt(id) : c.resume(id), problemOf(id))
    if (!done) {
      const message = action === "interrupt"
        ? `workflow execution ${id} is complete: nothing to interrupt`
        : `workflow execution ${id} is not suspended: nothing to resume`
      return yield* new Problem({ status: 409, message })
    }
    return action === "interrupt" ? "interrupted" : "resumed"
  })

const params = Effect.map(HttpRouter.params, (p) => ({ id: p.id ?? "", action: p.action ?? "" }))

/** The workflows' routes (pages, forms, API), under the base path. */
export const routes = (config: Config) => {
  const at = (path: string) => `${config.base}${path}` as HttpRouter.PathInput
  const guarded = <A, R>(effect: Effect.Effect<A, Problem, R>) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      yield* Effect.flatMap(formOf(request), (form) => authorize(config, request, form))
      return yield* effect
    }).pipe(Effect.ensuring(forgetReads(config)))
  const api = <R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, Problem, R>) =>
    Effect.catchTag(effect, "Problem", (p) => Effect.succeed(jsonProblem(p)))
  const page = <R>(f: (view: View, query: URLSearchParams) => Effect.Effect<HttpServerResponse.HttpServerResponse, Problem, R>) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const view = viewOf(config, request)
      return yield* Effect.catchTag(f(view, queryOf(request)), "Problem", (p) =>
        Effect.succeed(htmlResponse(errorPage(view, p.status, p.message), p.status)))
    })
  const notPost = json({ error: "actions are POST only", status: 405 }, 405).pipe(HttpServerResponse.setHeader("allow", "POST"))
  return HttpRouter.empty.pipe(
    HttpRouter.get(at("/api/workflows"), api(Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const filter = yield* readWorkflowFilter(queryOf(request))
      const page = yield* executions(filter)
      return json({ executions: page, cursor: Cursor.next(page, filter.limit) })
    }))),
    HttpRouter.get(at("/api/workflows/:id"), api(Effect.flatMap(params, ({ id }) => Effect.map(execution(id), json)))),
    HttpRouter.post(at("/api/workflows/:id/:action"), api(guarded(Effect.flatMap(params, ({ action, id }) =>
      Effect.map(act(id, action), (outcome) => json({ executionId: id, action, outcome })))))),
    HttpRouter.get(at("/api/workflows/:id/:action"), Effect.succeed(notPost)),
    HttpRouter.get(at("/workflows"), page((view, query) =>
      Effect.gen(function*() {
        const filter = yield* readWorkflowFilter(query)
        const page = yield* executions(filter)
        return htmlResponse(WorkflowPages.listPage(view, filter, page, Cursor.next(page, filter.limit)))
      }))),
    HttpRouter.get(at("/workflows/:id"), page((view, query) =>
      Effect.flatMap(params, ({ id }) =>
        Effect.map(execution(id), (d) => htmlResponse(WorkflowPages.executionPage(view, d, query.get("done"))))))),
    HttpRouter.post(at("/workflows/:id/:action"), page(() =>
      guarded(Effect.flatMap(params, ({ action, id }) =>
        Effect.map(act(id, action), (outcome) =>
          secured(HttpServerResponse.redirect(`${config.base}/workflows/${encodeURIComponent(id)}?done=${outcome}`, { status: 303 }))
        ))))),
    HttpRouter.get(at("/workflows/:id/:action"), page((view) =>
      Effect.succeed(
        htmlResponse(errorPage(view, 405, "Actions are POST only: use the button on the page."), 405).pipe(
          HttpServerResponse.setHeader("allow", "POST")
        )
      )))
  )
}
