/**
 * The PostgreSQL schema Docket's objects live in (`Database.Options.schema`):
 * `public` by default, where every database made before the option keeps its
 * tables; another one for a database shared by several applications, or a
 * worker role that may touch nothing else (docs/operations.md, "A schema of
 * its own").
 *
 * Every statement Docket sends names its objects qualified by the schema
 * (`"docket".docket_items`), never through a connection's `search_path`: a
 * session `SET`, or a startup `options=-c search_path=...`, does not survive
 * a pooler in transaction mode (PgBouncer hands each transaction whichever
 * server connection is free). The texts in internal/sql/ name the objects
 * bare; `qualify` rewrites a text once (memoized) by the explicit list of
 * Docket's objects below, and the channels' names with them. In `public`
 * nothing is rewritten: the statements, and the channels old releases listen
 * on, stay exactly as before the option existed.
 *
 * The server-side functions name tables bare in their bodies; outside public
 * they carry `SET search_path` (Migrations.ts sets it on each), so they
 * resolve in their own schema whatever the caller's path.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { InvalidInput } from "../Errors.js"
import { CANCEL_CHANNEL, NOTIFY_CHANNEL, WORKFLOW_CHANNEL } from "./sql/notify.js"

/** The default schema: where every database made before the option has its objects. */
export const PUBLIC = "public"

/**
 * The longest schema name: a channel is the schema, a dot and
 * `docket_cancel` (14 characters), and PostgreSQL refuses a channel name of
 * 64 bytes or more.
 */
export const MAX_LENGTH = 63 - 1 - CANCEL_CHANNEL.length

/**
 * Docket's tables and views (docket_items_all), as the statements name them.
 * test/schema.test.ts checks this list and the two below against a migrated
 * schema's catalog: an object a new migration adds and this list misses fails
 * it, instead of escaping qualification.
 */
export const RELATIONS = [
  "docket_items",
  "docket_done",
  "docket_items_all",
  "docket_kinds",
  "docket_kind_slots",
  "docket_groups",
  "docket_group_starts",
  "docket_schedules",
  "docket_workers",
  "docket_minute_counts",
  "docket_counts",
  "docket_migrations",
  "docket_workflow_executions",
  "docket_workflow_activities",
  "docket_workflow_deferreds",
  "docket_workflow_clocks"
] as const

/** Docket's sequences (the identity of docket_items.id). */
export const SEQUENCES = ["docket_items_id_seq"] as const

/** Docket's functions, with their arguments (a GRANT needs them: several names are overloaded). */
export const FUNCTIONS = [
  "docket_now_ms()",
  "docket_claim(text, integer, bigint, text[])",
  "docket_claim(text, integer, bigint, text[], integer)",
  "docket_claim_from(text, integer, bigint, text[], boolean)",
  "docket_claim_after(text, integer, bigint, text[], integer[], bigint[], bigint[], bigint)",
  "docket_claim_next(text, integer, bigint, text[], integer, integer[], bigint[], bigint[], bigint)",
  "docket_claim_groups(text, integer, bigint, text, integer, boolean)",
  "docket_enqueue_one(text, text, text, integer, bigint, bigint, integer)",
  "docket_enqueue_one(text, text, text, integer, bigint, bigint, integer, text)",
  "docket_enqueue_one(text, text, text, integer, bigint, bigint, integer, text, text)"
] as const

/**
 * Functions left without `SET search_path`: docket_now_ms is LANGUAGE sql and
 * touches no table, and a SET clause would keep PostgreSQL from inlining it
 * into every statement that reads the clock.
 */
export const UNPINNED_FUNCTIONS: ReadonlyArray<string> = ["docket_now_ms"]

const NAME = /^[a-z_][a-z0-9_]*$/

/** Checks a schema name: a plain lower-case identifier PostgreSQL does not reserve. */
export const check = (name: unknown): Either.Either<string, InvalidInput> => {
  const invalid = (reason: string) => Either.left(new InvalidInput({ field: "schema", reason }))
  if (typeof name !== "string") return invalid("must be a string")
  if (name.length === 0) return invalid("must not be empty")
  if (name.length > MAX_LENGTH) return invalid(`must be at most ${MAX_LENGTH} characters (got ${name.length})`)
  if (!NAME.test(name)) {
    return invalid(
      `${JSON.stringify(name)} is not a plain identifier: lower-case letters, digits and _, not starting with a digit`
    )
  }
  if (name.startsWith("pg_")) return invalid(`${JSON.stringify(name)}: names starting with pg_ are PostgreSQL's own`)
  return Either.right(name)
}

/** The schema as statements use it. */
export interface PgSchema {
  readonly name: string
  /** `name` as a quoted identifier. */
  readonly quoted: string
  /** Whether this is `public`, where nothing is rewritten. */
  readonly isPublic: boolean
  /** A statement's text with Docket's objects and channels those of this schema (memoized). */
  readonly qualify: (text: string) => string
  /** The channel enqueues notify (and pools listen on). */
  readonly itemsChannel: string
  /** The channel cancels of running items notify. */
  readonly cancelChannel: string
  /** The channel a workflow execution's completion notifies (its id the payload). */
  readonly workflowChannel: string
  /** An object of Docket's, qualified (`"docket".docket_items`; bare in public). */
  readonly object: (name: string) => string
}

const NAMES = [...new Set([...RELATIONS, ...SEQUENCES, ...FUNCTIONS.map((f) => f.slice(0, f.indexOf("(")))])]
  .sort((a, b) => b.length - a.length)

// A statement's tokens that matter: string literals, quoted identifiers and
// comments are passed over whole (a name inside them is not an object), and a
// bare name of Docket's that is neither qualified already (`x.docket_items`)
// nor a qualifier itself (`docket_items.id`, a column of the table in FROM).
const TOKENS = new RegExp(
  String.raw`'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*[\s\S]*?\*/|(?<![\w$.])(` + NAMES.join("|") +
    String.raw`)(?![\w$])(?!\s*\.)`,
  "g"
)

// Texts are constants, so the memo stays small; a cap keeps a text built per
// call (none today) from growing it for ever.
const MEMO_LIMIT = 10_000

/** The schema `name` (checked by `check` first). */
export const make = (name: string): PgSchema => {
  const isPublic = name === PUBLIC
  const quoted = `"${name}"`
  const itemsChannel = isPublic ? NOTIFY_CHANNEL : `${name}.${NOTIFY_CHANNEL}`
  const cancelChannel = isPublic ? CANCEL_CHANNEL : `${name}.${CANCEL_CHANNEL}`
  const workflowChannel = isPublic ? WORKFLOW_CHANNEL : `${name}.${WORKFLOW_CHANNEL}`
  const literals = new Map([
    [`'${NOTIFY_CHANNEL}'`, `'${itemsChannel}'`],
    [`'${CANCEL_CHANNEL}'`, `'${cancelChannel}'`],
    [`'${WORKFLOW_CHANNEL}'`, `'${workflowChannel}'`]
  ])
  const memo = new Map<string, string>()
  const rewrite = (text: string) =>
    text.replace(TOKENS, (token: string, object: string | undefined) =>
      object !== undefined ? `${quoted}.${object}` : literals.get(token) ?? token)
  return {
    name,
    quoted,
    isPublic,
    qualify: isPublic ? (text) => text : (text) => {
      let done = memo.get(text)
      if (done === undefined) {
        if (memo.size >= MEMO_LIMIT) memo.clear()
        done = rewrite(text)
        memo.set(text, done)
      }
      return done
    },
    itemsChannel,
    cancelChannel,
    workflowChannel,
    object: (object) => (isPublic ? object : `${quoted}.${object}`)
  }
}

/** The default: `public`, as before the option. */
export const publicSchema: PgSchema = make(PUBLIC)

/** The schema a `Database.layer` was given, travelling in the context beside its SqlClient (as DirectPool does). */
export class Current extends Context.Tag("docket/PgSchema")<Current, PgSchema>() {}

/** The schema in context, else `public`. */
export const current: Effect.Effect<PgSchema> = Effect.map(
  Effect.serviceOption(Current),
  Option.getOrElse(() => publicSchema)
)
