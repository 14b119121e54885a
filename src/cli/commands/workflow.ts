/**
 * `docket workflow list | show | interrupt | resume | complete`: durable
 * workflows' executions operated by id, without the workflows' code
 * (`Workflows.control`). What they run is in workflowRun.ts, loaded only when
 * one runs, so no other command (nor `--help`) loads @effect/workflow. A
 * SQLite file that does not exist is refused, not made.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CommandFailed } from "../errors.js"
import { type DatabaseArgs, databaseOption, integerOption, jsonOption, optionalText, refuse, withDefault } from "../options.js"
import type * as Run from "./workflowRun.js"
import * as Cursor from "../../internal/workflow/cursor.js"
import type { ExecutionState } from "../../internal/workflow/sql.js"

const STATES: ReadonlyArray<ExecutionState> = ["running", "suspended", "complete"]

/** Runs `f` with workflowRun.ts, loaded now; a clear line when @effect/workflow is not installed. */
const withRun = <A, E>(f: (run: typeof Run) => Effect.Effect<A, E>) =>
  Effect.flatMap(
    Effect.tryPromise({
      try: () => import("./workflowRun.js"),
      catch: (error) =>
        new CommandFailed({
          reason: /@effect\/workflow/.test(String(error))
            ? "docket workflow needs @effect/workflow (npm install @effect/workflow)"
            : `cannot load the workflow commands: ${String(error)}`
        })
    }),
    f
  )

const executionArg = (verb: string) =>
  Args.text({ name: "id" }).pipe(
    Args.withDescription(`The execution id of the workflow to ${verb} (docket workflow list prints them).`),
    Args.mapEffect((text) =>
      text.trim() === "" ? Effect.fail(HelpDoc.p("an execution id may not be empty")) : Effect.succeed(text)
    )
  )

const list = Command.make(
  "list",
  {
    database: databaseOption,
    state: Options.text("state").pipe(
      Options.withPseudoName("<running|suspended|complete>"),
      Options.withDescription("Only executions in this state: running (a run waits or runs), suspended, complete."),
      Options.mapEffect((text) =>
        STATES.includes(text as ExecutionState)
          ? Effect.succeed(text as ExecutionState)
          : Effect.fail(refuse(`--state: '${text}' is not one of ${STATES.join(", ")}`))
      ),
      Options.optional
    ),
    name: optionalText("name", "workflow", "Only executions of this workflow (its name)."),
    limit: integerOption("limit", "Executions per page, newest change first, from 1 to 1000.", { min: 1, max: 1000 }).pipe(
      withDefault(50)
    ),
    cursor: Options.text("cursor").pipe(
      Options.withPseudoName("<cursor>"),
      Options.withDescription("The next page: the cursor the previous page printed (same --state and --name)."),
      Options.mapEffect((text) => {
        const before = Cursor.decode(text)
        return before === undefined ? Effect.fail(refuse(`--cursor: '${text}' is not a cursor of this list`)) : Effect.succeed(before)
      }),
      Options.optional
    ),
    json: jsonOption
  },
  (args) =>
    withRun((run) =>
      run.list(args.database, {
        state: Option.getOrUndefined(args.state),
        workflow: Option.getOrUndefined(args.name),
        limit: args.limit,
        before: Option.getOrUndefined(args.cursor),
        json: args.json
      })
    )
).pipe(
  Command.withDescription(
    "Lists workflow executions, the most recently changed first, a page at a time: id, workflow, state, runs, " +
      "last change, parent; the last line gives the command for the next page."
  )
)

const show = Command.make(
  "show",
  { database: databaseOption, id: executionArg("show"), json: jsonOption },
  ({ database, id, json }) => withRun((run) => run.show(database, id, json))
).pipe(
  Command.withDescription(
    "Shows one execution: its state, payload and result, its activities (attempts and results), deferreds, " +
      "durable clocks not yet fired, and children."
  )
)

const interrupt = Command.make(
  "interrupt",
  { database: databaseOption, id: executionArg("interrupt") },
  ({ database, id }) => withRun((run) => run.interrupt(database, id))
).pipe(
  Command.withDescription(
    "Interrupts an unfinished execution: its next run stops at its suspension point and runs its compensations."
  )
)

const resume = Command.make(
  "resume",
  { database: databaseOption, id: executionArg("resume") },
  ({ database, id }) => withRun((run) => run.resume(database, id))
).pipe(Command.withDescription("Resumes a suspended execution: another run replays it from its stored steps."))

const jsonValue = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("<json>"),
    Options.withDescription(description),
    Options.mapEffect((text) => {
      try {
        return Effect.succeed(JSON.parse(text) as unknown)
      } catch {
        return Effect.fail(refuse(`--${name}: '${text}' is not JSON`))
      }
    }),
    Options.optional
  )

const complete = Command.make(
  "complete",
  {
    database: databaseOption,
    token: Args.text({ name: "token" }).pipe(
      Args.withDescription("The deferred's token (DurableDeferred.token in the workflow, or tokenFromPayload).")
    ),
    value: jsonValue("value", "Complete it with this success value (its encoded JSON). Default: null."),
    fail: jsonValue("fail", "Fail it with this error (its encoded JSON) instead.")
  },
  (args: { database: DatabaseArgs; token: string; value: Option.Option<unknown>; fail: Option.Option<unknown> }) =>
    withRun((run) => run.complete(args.database, args.token, args.value, args.fail))
).pipe(
  Command.withDescription(
    "Completes a DurableDeferred by its token (the first completion wins) and wakes its execution: " +
      "how an approval a workflow waits for is given from another process."
  )
)

/** The `workflow` group on its own (its help text), without its subcommands. */
export const workflowGroup = Command.make("workflow").pipe(
  Command.withDescription("Durable workflows' executions: list, show, interrupt, resume; complete a deferred.")
)

/** The subcommands of `workflow`. */
export const workflowCommands = [list, show, interrupt, resume, complete] as const

/** The `workflow` command and its subcommands. */
export const workflow = workflowGroup.pipe(Command.withSubcommands(workflowCommands))
