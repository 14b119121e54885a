/**
 * What `docket workflow` runs (workflow.ts has its options), loaded only
 * when one of its commands runs: `Workflows.control` over the queue, its
 * answers as text or JSON, its typed errors as exit codes (an unknown
 * execution id 1, a bad or unknown deferred token 2; nothing written).
 */
import { TokenParsed } from "@effect/workflow/DurableDeferred"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Execution, ExecutionDetail } from "../../internal/workflow/admin.js"
import { control } from "../../internal/workflow/control.js"
import * as Cursor from "../../internal/workflow/cursor.js"
import type { ExecutionState } from "../../internal/workflow/sql.js"
import { QueueRepo } from "../../QueueRepo.js"
import { CommandFailed, usage } from "../errors.js"
import { clip, isoSeconds, table } from "../format.js"
import type { DatabaseArgs } from "../options.js"
import { withExistingRepo } from "../queue.js"

/** Runs `f` with the control over the queue the arguments name. */
const withControl = <A, E>(database: DatabaseArgs, f: (c: Effect.Effect.Success<typeof control>) => Effect.Effect<A, E>) =>
  withExistingRepo(database, (repo) => Effect.flatMap(Effect.provideService(control, QueueRepo, repo), f))

/** An unknown execution id, as the command says it (exit 1). */
const notFound = <A, E extends { readonly _tag: string }, R>(id: string, effect: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    effect,
    (e): e is Extract<E, { readonly _tag: "ExecutionNotFound" }> => e._tag === "ExecutionNotFound",
    () => Effect.fail(new CommandFailed({ reason: `no workflow execution ${id}` }))
  )

const time = (ms: number | null) => (ms === null ? "-" : isoSeconds(ms))

const row = (e: Execution) => [e.executionId, e.workflow, e.state, String(e.runs), time(e.updatedAt), e.parent ?? "-"]

/** Executions as a text table. */
export const executionTable = (executions: ReadonlyArray<Execution>): string =>
  table([["id", "workflow", "state", "runs", "updated", "parent"], ...executions.map(row)], new Set([3]))

interface ListOptions {
  readonly state?: ExecutionState | undefined
  readonly workflow?: string | undefined
  readonly limit: number
  readonly before?: Cursor.Before | undefined
  readonly json: boolean
}

// A word for the shell: as it is when plain, else single-quoted.
const shellWord = (text: string) => (/^[A-Za-z0-9._:/@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`)

// The command that prints the next page, as the last line says it.
const nextCommand = (options: ListOptions, cursor: string) =>
  [
    "docket workflow list",
    ...(options.state === undefined ? [] : [`--state ${options.state}`]),
    ...(options.workflow === undefined ? [] : [`--name ${shellWord(options.workflow)}`]),
    ...(options.limit === 50 ? [] : [`--limit ${options.limit}`]),
    `--cursor ${shellWord(cursor)}`
  ].join(" ")

/** `docket workflow list`: a page, and the command for the next one (`--json`: `{ executions, cursor }`). */
export const list = (database: DatabaseArgs, options: ListOptions) =>
  withControl(database, (c) => c.list(options)).pipe(
    Effect.flatMap((executions) => {
      const cursor = Cursor.next(executions, options.limit)
      if (options.json) return Console.log(JSON.stringify({ executions, cursor }))
      if (executions.length === 0) return Console.log("no workflow executions")
      const more = cursor === null ? "no more executions" : `more: ${nextCommand(options, cursor)}`
      return Console.log(`${executionTable(executions)}\n${more}`)
    })
  )

const json = (value: unknown) => (value === null || value === undefined ? "-" : JSON.stringify(value))

/** An execution as text: a field a line, then its activities, deferreds, clocks and children. */
export const detailText = (d: ExecutionDetail): string => {
  const fields: Array<[string, string]> = [
    ["id", d.executionId],
    ["workflow", d.workflow],
    ["state", d.state],
    ["runs", String(d.runs)],
    ["parent", d.parent ?? "-"],
    ["created", time(d.createdAt)],
    ["updated", time(d.updatedAt)],
    ["completed", time(d.completedAt)],
    ["payload", json(d.payload)],
    ["result", json(d.result)]
  ]
  const lines = fields.map(([label, text]) => `${label.padEnd(10)}  ${text}`)
  const section = <A>(title: string, items: ReadonlyArray<A>, line: (a: A) => string) => {
    lines.push("", items.length === 0 ? `no ${title}` : `${title} (${items.length}):`)
    for (const item of items) lines.push(`  ${line(item)}`)
  }
  section("activities", d.activities, (a) => `${a.name}  attempt ${a.attempt}  ${time(a.at)}  ${clip(json(a.result), 400)}`)
  section("deferreds", d.deferreds, (x) => `${x.name}  ${time(x.at)}  ${clip(json(x.exit), 400)}`)
  section("clocks", d.clocks, (c) => `${c.name}  due ${time(c.dueAt)}`)
  section("children", d.children, (c) => `${c.executionId}  ${c.workflow}  ${c.state}`)
  return lines.join("\n")
}

/** `docket workflow show ID`. */
export const show = (database: DatabaseArgs, id: string, asJson: boolean) =>
  withControl(database, (c) => notFound(id, c.show(id))).pipe(
    Effect.flatMap((detail) => Console.log(asJson ? JSON.stringify(detail) : detailText(detail)))
  )

/** `docket workflow interrupt ID`: exit 1 when it had finished. */
export const interrupt = (database: DatabaseArgs, id: string) =>
  withControl(database, (c) => notFound(id, c.interrupt(id))).pipe(
    Effect.flatMap((done) =>
      done
        ? Console.log(`interrupted ${id}: its next run stops at its suspension point and runs its compensations`)
        : Effect.fail(new CommandFailed({ reason: `workflow execution ${id} is complete: nothing to interrupt` }))
    )
  )

/** `docket workflow resume ID`: exit 1 when it was not suspended. */
export const resume = (database: DatabaseArgs, id: string) =>
  withControl(database, (c) => notFound(id, c.resume(id))).pipe(
    Effect.flatMap((done) =>
      done
        ? Console.log(`resumed ${id}: another run replays it`)
        : Effect.fail(new CommandFailed({ reason: `workflow execution ${id} is not suspended: nothing to resume` }))
    )
  )

/** `docket workflow complete TOKEN`: the token is checked before the database is opened. */
export const complete = (
  database: DatabaseArgs,
  token: string,
  value: Option.Option<unknown>,
  fail: Option.Option<unknown>
) =>
  Effect.gen(function*() {
    if (Option.isSome(value) && Option.isSome(fail)) return yield* usage("give --value or --fail, not both")
    const parsed = Schema.decodeUnknownOption(TokenParsed.FromString)(token)
    if (Option.isNone(parsed)) {
      return yield* usage("invalid token: is not a deferred's token (DurableDeferred.token)")
    }
    const { deferredName, executionId, workflowName } = parsed.value
    const outcome = Option.isSome(fail) ? { failure: fail.value } : { success: Option.getOrNull(value) }
    yield* withControl(database, (c) =>
      Effect.catchTag(
        c.completeDeferred(token, outcome),
        "ExecutionNotFound",
        () => Effect.fail(usage(`token: no workflow execution ${executionId} (of ${workflowName}); nothing written`))
      ))
    yield* Console.log(
      `completed deferred ${deferredName} of ${workflowName} execution ${executionId} ` +
        `(${Option.isSome(fail) ? "failed" : "succeeded"}; the first completion wins)`
    )
  })

