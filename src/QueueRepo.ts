/**
 * `QueueRepo`: Docket's storage service. One service, one implementation per
 * SQL dialect (PostgreSQL or SQLite), chosen once when the service is built
 * from the `SqlClient` in context.
 *
 * Every operation validates its input first (a typed `InvalidInput`, nothing
 * written) and reports database failures as a typed `StorageError`. Every
 * change after a claim is fenced by the claim's token: a worker whose lease was
 * lost, and whose item another worker claimed, changes nothing.
 *
 * @example
 * ```ts
 * const repo = yield* QueueRepo.QueueRepo
 * yield* repo.enqueue("email.send", { to: "a@example.com" }, { key: "msg-1" })
 * const [claim] = yield* repo.claim({ worker: "w1", limit: 1, lease: "30 seconds" })
 * yield* repo.complete(claim)
 * ```
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Either, Layer, Option, type Scope } from "effect"
import { InvalidInput, StorageError } from "./Errors.js"
import type { Dialect, FailRow, Fence, InsertRow } from "./internal/dialect.js"
import * as DirectPool from "./internal/directPool.js"
import * as Pg from "./internal/pg.js"
import { type ClaimRow, type FencedRow, type FencedStateRow, type ItemRow, type KeyRow, num, numOrNull } from "./internal/rows.js"
import * as Sqlite from "./internal/sqlite.js"
import { spanIfTraced } from "./internal/tracing.js"
import * as V from "./internal/validate.js"
import * as Wakeups from "./Wakeups.js"

export type {
  State,
  EnqueueOptions,
  EnqueueRequest,
  EnqueueResult,
  Claim,
  Item,
  FailNext,
  FailOutcome,
  ReleaseOutcome,
  Counts,
  Stats,
  DeadSelection,
  ClaimOptions,
  DeadPageOptions
} from "./Domain.js"
import type {
  State,
  EnqueueOptions,
  EnqueueRequest,
  EnqueueResult,
  Claim,
  Item,
  FailNext,
  FailOutcome,
  ReleaseOutcome,
  Counts,
  Stats,
  DeadSelection,
  ClaimOptions,
  DeadPageOptions
} from "./Domain.js"

type E = StorageError
type EI = InvalidInput | StorageError

/** The storage service. */
export interface Service {
  readonly dialect: "pg" | "sqlite"
  /** Adds an item; joins the caller's transaction when there is one. */
  readonly enqueue: (kind: string, payload: unknown, options?: EnqueueOptions) => Effect.Effect<EnqueueResult, EI>
  /** Adds many items in one statement, dedupe respected; results in input order. */
  readonly enqueueMany: (requests: ReadonlyArray<EnqueueRequest>) => Effect.Effect<ReadonlyArray<EnqueueResult>, EI>
  /** Leases up to `limit` due items: highest priority first, then run-after, then id. */
  readonly claim: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<Claim>, EI>
  /** Done: the item leaves the queue. False when the claim was stale. */
  readonly complete: (claim: Claim) => Effect.Effect<boolean, E>
  readonly completeMany: (claims: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyArray<boolean>, E>
  /** Records a failure: retry later (when attempts remain) or dead. */
  readonly fail: (claim: Claim, error: string, next: FailNext) => Effect.Effect<FailOutcome, EI>
  readonly failMany: (
    failures: ReadonlyArray<{ readonly claim: Claim; readonly error: string; readonly next: FailNext }>
  ) => Effect.Effect<ReadonlyArray<FailOutcome>, EI>
  /** Gives the item back unrun: waiting again, this attempt not counted. */
  readonly release: (claim: Claim) => Effect.Effect<ReleaseOutcome, E>
  readonly releaseMany: (claims: ReadonlyArray<Claim>) => Effect.Effect<ReadonlyArray<ReleaseOutcome>, E>
  /** Renews the lease for `lease` from now. False when the claim was stale. */
  readonly extend: (claim: Claim, lease: Duration.DurationInput) => Effect.Effect<boolean, EI>
  readonly extendMany: (
    claims: ReadonlyArray<Claim>,
    lease: Duration.DurationInput
  ) => Effect.Effect<ReadonlyArray<boolean>, EI>
  readonly stats: Effect.Effect<Stats, E>
  readonly get: (id: number) => Effect.Effect<Option.Option<Item>, E>
  readonly listDead: (options?: DeadPageOptions) => Effect.Effect<ReadonlyArray<Item>, EI>
  /** Dead items back to waiting with a fresh attempt budget; returns their ids. */
  readonly retryDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  readonly deleteDead: (selection: DeadSelection) => Effect.Effect<ReadonlyArray<number>, EI>
  /**
   * Time until the pool has something new to claim: the next waiting item that
   * is not yet due (enqueued with a delay or run-after time, or retried after a
   * backoff) becomes due, or the next lease ends (zero if one has ended). Items
   * already due are not reported: a claim takes them. None when neither exists.
   */
  readonly nextDueIn: Effect.Effect<Option.Option<Duration.Duration>, E>
}

/** The `QueueRepo` service tag. */
export class QueueRepo extends Context.Tag("docket/QueueRepo")<QueueRepo, Service>() {}

export interface Options {
  /** Largest accepted payload, as JSON bytes (default 1 MiB). */
  readonly maxPayloadBytes?: number | undefined
  /** Default attempts before dead (default 8, as the reference). */
  readonly defaultMaxAttempts?: number | undefined
}

export const DEFAULT_MAX_ATTEMPTS = 8

const storage = (operation: string) => (cause: SqlError) => new StorageError({ operation, cause })

const toClaim = (row: ClaimRow, worker: string): Claim => ({
  id: num(row.id),
  token: num(row.lease_seq),
  kind: row.kind,
  payloadJson: row.payload,
  key: row.dedupe_key,
  priority: num(row.priority),
  attempt: num(row.attempts),
  maxAttempts: num(row.max_attempts),
  runAt: num(row.run_at),
  createdAt: num(row.created_at),
  leaseUntil: num(row.lease_until),
  worker,
  lastError: row.last_error
})

const parsePayload = (json: string): unknown => {
  try {
    return JSON.parse(json)
  } catch {
    return json
  }
}

/** Decodes a stored row for people and tools. */
export const toItem = (row: ItemRow): Item => ({
  id: num(row.id),
  kind: row.kind,
  payload: parsePayload(row.payload),
  key: row.dedupe_key,
  priority: num(row.priority),
  state: row.state,
  runAt: num(row.run_at),
  attempts: num(row.attempts),
  maxAttempts: num(row.max_attempts),
  lastError: row.last_error,
  claimedBy: row.claimed_by,
  leaseUntil: numOrNull(row.lease_until),
  createdAt: num(row.created_at),
  updatedAt: num(row.updated_at)
})

const claimOrder = (a: Claim, b: Claim) => b.priority - a.priority || a.runAt - b.runAt || a.id - b.id

const INT32 = 2_147_483_647

const dialectOf = (sql: SqlClient.SqlClient, claimScope?: Scope.Scope): Effect.Effect<Dialect> =>
  Effect.map(Effect.serviceOption(DirectPool.DirectPool), (direct) =>
    sql.onDialectOrElse({
    pg: () => Pg.make(sql, claimScope, Option.getOrUndefined(direct)),
    sqlite: () => Sqlite.make(sql),
    orElse: () => {
      throw new Error("Docket supports PostgreSQL and SQLite only")
    }
  }))

/** Builds the service over the `SqlClient` in context (PostgreSQL or SQLite). */
export const make = (options: Options = {}): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* dialectOf(sql), yield* Wakeups.Wakeups, options)
  })

/**
 * As `make`, and on PostgreSQL claims run on a connection reserved from the
 * pool (see internal/pg.ts), released when the scope closes. `layer` uses it.
 */
export const makeScoped = (
  options: Options = {}
): Effect.Effect<Service, never, SqlClient.SqlClient | Wakeups.Wakeups | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return makeWith(yield* dialectOf(sql, yield* Effect.scope), yield* Wakeups.Wakeups, options)
  })

const makeWith = (dialect: Dialect, wakeups: Wakeups.Service, options: Options): Service => {
  const maxPayloadBytes = options.maxPayloadBytes ?? V.DEFAULT_MAX_PAYLOAD_BYTES
  const defaultMaxAttempts = options.defaultMaxAttempts ?? DEFAULT_MAX_ATTEMPTS

  // Checks and encodes one request (synchronously: in a bulk enqueue this runs
  // once per item, and an Effect per check cost 40% of the whole enqueue).
  const prepare = (request: EnqueueRequest, index: number | null): Either.Either<InsertRow, InvalidInput> => {
    const fail = (error: InvalidInput) =>
      Either.left(index === null ? error : new InvalidInput({ field: error.field, reason: `item ${index}: ${error.reason}` }))
    const kind = V.checkKind(request.kind)
    if (Either.isLeft(kind)) return fail(kind.left)
    const payload = V.encodePayload(request.payload, maxPayloadBytes)
    if (Either.isLeft(payload)) return fail(payload.left)
    const key = V.checkKey(request.key)
    if (Either.isLeft(key)) return fail(key.left)
    if (request.delay !== undefined && request.runAt !== undefined) {
      return fail(new InvalidInput({ field: "delay", reason: "give delay or runAt, not both" }))
    }
    let delayMs = 0
    if (request.delay !== undefined) {
      const checked = V.checkMillis("delay", request.delay, 0, V.MAX_DELAY_MS)
      if (Either.isLeft(checked)) return fail(checked.left)
      delayMs = checked.right
    }
    let runAt: number | null = null
    if (request.runAt !== undefined) {
      const checked = V.checkRunAt(request.runAt)
      if (Either.isLeft(checked)) return fail(checked.left)
      runAt = checked.right
    }
    let priority = 0
    if (request.priority !== undefined) {
      const checked = V.checkIntegerIn("priority", request.priority, -INT32, INT32)
      if (Either.isLeft(checked)) return fail(checked.left)
      priority = checked.right
    }
    let maxAttempts = defaultMaxAttempts
    if (request.maxAttempts !== undefined) {
      const checked = V.checkIntegerIn("maxAttempts", request.maxAttempts, 1, V.MAX_ATTEMPTS_LIMIT)
      if (Either.isLeft(checked)) return fail(checked.left)
      maxAttempts = checked.right
    }
    return Either.right({ kind: kind.right, payload: payload.right, key: key.right, priority, runAt, delayMs, maxAttempts })
  }

  // Inserts, then looks up the waiting item for each keyed row that was skipped.
  // If that item was claimed in between (so nothing waits any more), the row is
  // inserted again: every result is either a new item or one that waited.
  const insertAll = (rows: ReadonlyArray<InsertRow>): Effect.Effect<ReadonlyArray<EnqueueResult>, SqlError> =>
    Effect.gen(function*() {
      const results: Array<EnqueueResult | undefined> = new Array(rows.length)
      let pending = rows.map((_, i) => i)
      for (let round = 0; pending.length > 0; round++) {
        if (round === 5) {
          return yield* Effect.die(new Error("enqueue: a keyed item kept changing state while enqueuing"))
        }
        const inserted = yield* dialect.insert(pending.map((i) => rows[i]))
        const skipped = matchInserted(rows, pending, inserted, results)
        if (skipped.length === 0) break
        const pairs = skipped.map((i) => [rows[i].kind, rows[i].key!] as const)
        const waiting = yield* dialect.findWaiting(pairs)
        const byPair = new Map(waiting.map((w) => [pairKey(w.kind, w.dedupe_key!), num(w.id)]))
        pending = []
        for (const i of skipped) {
          const id = byPair.get(pairKey(rows[i].kind, rows[i].key!))
          if (id === undefined) pending.push(i)
          else results[i] = { _tag: "Deduplicated", id }
        }
      }
      return results as ReadonlyArray<EnqueueResult>
    })

  // This process's worker pools are woken at once (others by NOTIFY).
  const announce = (results: ReadonlyArray<EnqueueResult>) =>
    results.some((r) => r._tag === "Enqueued") ? wakeups.enqueued : Effect.void

  // Rows without a key cannot be skipped: one insert, its rows matched to the
  // input in order, no dedupe rounds (for a single enqueue the rounds' own
  // machinery cost more CPU than the rest of Docket's work in it).
  const insertUnkeyed = (rows: ReadonlyArray<InsertRow>): Effect.Effect<ReadonlyArray<EnqueueResult>, SqlError> =>
    Effect.map(dialect.insert(rows), (inserted) => {
      const results: Array<EnqueueResult | undefined> = new Array(rows.length)
      matchInserted(rows, rows.length === 1 ? [0] : rows.map((_, i) => i), inserted, results)
      return results as ReadonlyArray<EnqueueResult>
    })

  const enqueueRows = (rows: ReadonlyArray<InsertRow>) =>
    rows.length === 0
      ? Effect.succeed([])
      : (rows.some((r) => r.key !== null) ? dialect.atomic(insertAll(rows)) : insertUnkeyed(rows)).pipe(
        Effect.mapError(storage("enqueue")),
        Effect.tap(announce)
      )

  const self: Service = {
    dialect: dialect.name,
    enqueue: (kind, payload, opts = {}) =>
      Effect.suspend((): Effect.Effect<EnqueueResult, InvalidInput | StorageError> => {
        const row = prepare({ ...opts, kind, payload }, null)
        if (Either.isLeft(row)) return Effect.fail(row.left)
        return Effect.map(enqueueRows([row.right]), (results) => results[0])
      }).pipe(spanIfTraced("docket.enqueue", { attributes: { kind }, captureStackTrace: false })),
    enqueueMany: (requests) =>
      Effect.suspend((): Effect.Effect<ReadonlyArray<EnqueueResult>, InvalidInput | StorageError> => {
        const list = Array.isArray(requests) ? requests : Array.from(requests)
        const rows: Array<InsertRow> = new Array(list.length)
        for (let i = 0; i < list.length; i++) {
          const row = prepare(list[i], i)
          if (Either.isLeft(row)) return Effect.fail(row.left)
          rows[i] = row.right
        }
        return enqueueRows(rows)
      }).pipe(
        spanIfTraced("docket.enqueueMany", { attributes: { count: requests.length }, captureStackTrace: false })
      ),
    claim: ({ kinds, lease, limit, worker }) =>
      Effect.gen(function*() {
        const w = yield* V.lift(V.checkWorker(worker))
        const n = yield* V.lift(V.checkIntegerIn("limit", limit, 1, V.MAX_CLAIM_LIMIT))
        const leaseMs = yield* V.lift(V.checkMillis("lease", lease, 1, V.MAX_LEASE_MS))
        if (kinds !== undefined) {
          for (const kind of kinds) yield* V.lift(V.checkKind(kind))
        }
        const rows = yield* dialect.claim(w, n, leaseMs, kinds === undefined ? null : kinds).pipe(
          Effect.mapError(storage("claim"))
        )
        return rows.map((row) => toClaim(row, w)).sort(claimOrder)
      }),
    complete: (claim) => Effect.map(self.completeMany([claim]), (r) => r[0]),
    completeMany: (claims) =>
      claims.length === 0 ? Effect.succeed([]) : dialect.complete(claims.map(fence)).pipe(
        Effect.map((rows) => applied(claims, rows)),
        Effect.mapError(storage("complete"))
      ),
    fail: (claim, error, next) => Effect.map(self.failMany([{ claim, error, next }]), (r) => r[0]),
    failMany: (failures) =>
      Effect.gen(function*() {
        if (failures.length === 0) return []
        const rows: Array<FailRow> = []
        for (const { claim, error, next } of failures) {
          const delayMs = next._tag === "Dead" ? null : yield* V.lift(V.checkMillis("delay", next.delay, 0, V.MAX_DELAY_MS))
          rows.push({ id: claim.id, token: claim.token, error: V.normaliseError(String(error)), delayMs })
        }
        const outcomes = yield* withTwinFallback(rows, dialect.fail).pipe(Effect.mapError(storage("fail")))
        return failures.map(({ claim }): FailOutcome => {
          const outcome = outcomes.get(fenceKey(claim.id, claim.token))
          return outcome === undefined ? "stale" : outcome === "waiting" ? "retried" : outcome === "dead" ? "dead" : "absorbed"
        })
      }),
    release: (claim) => Effect.map(self.releaseMany([claim]), (r) => r[0]),
    releaseMany: (claims) =>
      claims.length === 0 ? Effect.succeed([]) : withTwinFallback(claims.map(fence), dialect.release).pipe(
        Effect.map((outcomes) =>
          claims.map((claim): ReleaseOutcome => {
            const outcome = outcomes.get(fenceKey(claim.id, claim.token))
            return outcome === undefined ? "stale" : outcome === "waiting" ? "released" : "absorbed"
          })
        ),
        Effect.mapError(storage("release"))
      ),
    extend: (claim, lease) => Effect.map(self.extendMany([claim], lease), (r) => r[0]),
    extendMany: (claims, lease) =>
      Effect.gen(function*() {
        const leaseMs = yield* V.lift(V.checkMillis("lease", lease, 1, V.MAX_LEASE_MS))
        if (claims.length === 0) return []
        const rows = yield* dialect.extend(claims.map(fence), leaseMs).pipe(Effect.mapError(storage("extend")))
        return applied(claims, rows)
      }),
    stats: dialect.stats.pipe(
      Effect.map((rows) => {
        const byKind: Record<string, Counts> = {}
        const total = { due: 0, scheduled: 0, running: 0, dead: 0 }
        for (const row of rows) {
          const counts = { due: num(row.due), scheduled: num(row.scheduled), running: num(row.running), dead: num(row.dead) }
          byKind[row.kind] = counts
          total.due += counts.due
          total.scheduled += counts.scheduled
          total.running += counts.running
          total.dead += counts.dead
        }
        return { ...total, byKind }
      }),
      Effect.mapError(storage("stats"))
    ),
    // An id that is not a positive safe integer names no item: None on every
    // dialect, without a query (PostgreSQL would refuse 1.5 or NaN as a bigint
    // and report a StorageError, while SQLite answered None).
    get: (id) =>
      !Number.isSafeInteger(id) || id < 1 ? Effect.succeed(Option.none()) : dialect.get(id).pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toItem)),
        Effect.mapError(storage("get"))
      ),
    listDead: (page = {}) =>
      Effect.gen(function*() {
        const kind = page.kind === undefined ? null : yield* V.lift(V.checkKind(page.kind))
        const after = page.after === undefined ? 0 : yield* V.lift(V.checkIntegerIn("page", page.after, 0, Number.MAX_SAFE_INTEGER))
        const limit = page.limit === undefined ? 100 : yield* V.lift(V.checkIntegerIn("page", page.limit, 1, 10_000))
        const rows = yield* dialect.listDead(kind, after, limit).pipe(Effect.mapError(storage("listDead")))
        return rows.map(toItem)
      }),
    retryDead: (selection) =>
      checkSelection(selection).pipe(
        Effect.flatMap((s) => Effect.mapError(dialect.retryDead(s), storage("retryDead"))),
        Effect.map((rows) => rows.map((r) => num(r.id)).sort((a, b) => a - b))
      ),
    deleteDead: (selection) =>
      checkSelection(selection).pipe(
        Effect.flatMap((s) => Effect.mapError(dialect.deleteDead(s), storage("deleteDead"))),
        Effect.map((rows) => rows.map((r) => num(r.id)).sort((a, b) => a - b))
      ),
    nextDueIn: dialect.nextDue.pipe(
      Effect.map((rows) => {
        const wait = rows[0]?.wait_ms
        if (wait === null || wait === undefined) return Option.none()
        const ms = num(wait)
        return ms > 1e14 ? Option.none() : Option.some(Duration.millis(Math.max(0, ms)))
      }),
      Effect.mapError(storage("nextDueIn"))
    ),
  }

  // Two items of one batch that share a key cannot both go back to waiting in
  // one statement (the unique index refuses the second). Then the batch is
  // applied one item at a time, in order: the first waits, the rest are
  // absorbed by it. A concurrent enqueue of the key can cause the same refusal;
  // the per-item retry resolves that too.
  const withTwinFallback = <Row extends Fence>(
    rows: ReadonlyArray<Row>,
    apply: (rows: ReadonlyArray<Row>) => Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError>
  ): Effect.Effect<Map<string, string>, SqlError> => {
    const collect = (result: ReadonlyArray<FencedStateRow>) =>
      new Map(result.map((r) => [fenceKey(num(r.id), num(r.lease_seq)), r.outcome]))
    const one = (row: Row, attemptsLeft: number): Effect.Effect<ReadonlyArray<FencedStateRow>, SqlError> =>
      apply([row]).pipe(
        Effect.catchIf(
          (error) => attemptsLeft > 0 && dialect.isUniqueViolation(error),
          () => one(row, attemptsLeft - 1)
        )
      )
    return apply(rows).pipe(
      Effect.map(collect),
      Effect.catchIf(
        (error) => dialect.isUniqueViolation(error),
        () => Effect.map(Effect.forEach(rows, (row) => one(row, 3)), (results) => collect(results.flat()))
      )
    )
  }

  return self
}

const fence = (claim: Claim): Fence => ({ id: claim.id, token: claim.token })

// Results are matched to claims by id AND token: one pool may hold two claims
// of one item (it claimed back an item whose lease ran out while it ran it),
// and only the current one may count as applied.
const fenceKey = (id: number, token: number) => `${id}:${token}`

const applied = (claims: ReadonlyArray<Claim>, rows: ReadonlyArray<FencedRow>): ReadonlyArray<boolean> => {
  const set = new Set(rows.map((r) => fenceKey(num(r.id), num(r.lease_seq))))
  return claims.map((c) => set.has(fenceKey(c.id, c.token)))
}

const pairKey = (kind: string, key: string) => `${kind}\u0000${key}`

// Walks the input in order beside the inserted rows (ascending ids follow
// input order), recording each inserted row's id; returns the indexes of rows
// that were skipped (their key was held).
const matchInserted = (
  rows: ReadonlyArray<InsertRow>,
  pending: ReadonlyArray<number>,
  inserted: ReadonlyArray<KeyRow>,
  results: Array<EnqueueResult | undefined>
): Array<number> => {
  const skipped: Array<number> = []
  let next = 0
  for (const i of pending) {
    const row = rows[i]
    const candidate = inserted[next]
    if (candidate !== undefined && candidate.kind === row.kind && (candidate.dedupe_key ?? null) === row.key) {
      results[i] = { _tag: "Enqueued", id: num(candidate.id) }
      next++
    } else if (row.key === null) {
      throw new Error(`enqueue: inserted rows do not follow input order at item ${i}`)
    } else {
      skipped.push(i)
    }
  }
  if (next !== inserted.length) throw new Error("enqueue: more rows inserted than matched")
  return skipped
}

const checkSelection = (selection: DeadSelection) =>
  Effect.gen(function*() {
    if ("ids" in selection) {
      if (!Array.isArray(selection.ids) || selection.ids.length === 0) {
        return yield* new InvalidInput({ field: "ids", reason: "give at least one id (or all)" })
      }
      for (const id of selection.ids) yield* V.lift(V.checkIntegerIn("ids", id, 1, Number.MAX_SAFE_INTEGER))
      return { ids: selection.ids, kind: null }
    }
    if (selection.all !== true) return yield* new InvalidInput({ field: "ids", reason: "give ids or all: true" })
    const kind = selection.kind === undefined ? null : yield* V.lift(V.checkKind(selection.kind))
    return { ids: null, kind }
  })

/** The service over the `SqlClient` in context, and the `Wakeups` its worker pools use. */
export const layer = (options: Options = {}): Layer.Layer<QueueRepo | Wakeups.Wakeups, never, SqlClient.SqlClient> =>
  Layer.scoped(QueueRepo, makeScoped(options)).pipe(Layer.provideMerge(Wakeups.layer))
