/**
 * Runs a test program against a fresh database of a backend, with the
 * migrated SqlClient and QueueRepo provided (and a worker pool, for the
 * runtime suites); and the database's clock, for checking the times it
 * computes.
 */
import { SqlClient } from "@effect/sql"
import { expect } from "@effect/vitest"
import { Effect, Layer, type Scope } from "effect"
import type * as QueueRepo from "../../src/QueueRepo.js"
import * as Worker from "../../src/Worker.js"
import { type Backend, repoLayer, unsafe } from "./db.js"

export const withRepo = <A, E>(
  backend: Backend,
  program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>,
  options: QueueRepo.Options = {}
): Effect.Effect<A, E | unknown> =>
  Effect.flatMap(Effect.promise(() => backend.fresh()), (url) =>
    Effect.provide(program, repoLayer(url, options)))

/** The database's clock, in epoch ms. */
export const dbNow = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    pg: () => unsafe<{ ms: string | number }>("SELECT docket_now_ms() AS ms"),
    orElse: () => sql.unsafe<{ ms: string | number }>("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) AS ms")
  })).pipe(Effect.map((rows) => Number(rows[0].ms)))

/** A value within `slack` ms of [low, high]. */
export const expectAround = (value: number, low: number, high: number, slack = 2_000) => {
  expect(value).toBeGreaterThanOrEqual(low - slack)
  expect(value).toBeLessThanOrEqual(high + slack)
}

/** Runs `body` with a fresh database, a QueueRepo and a worker pool (options given) in one scope. */
export const withPool = <A, E>(
  backend: Backend,
  options: Worker.Options,
  body: (url: string) => Effect.Effect<A, E, QueueRepo.QueueRepo | Worker.Worker | Scope.Scope | SqlClient.SqlClient>
): Effect.Effect<A, unknown> =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(() => backend.fresh())
    return yield* Effect.scoped(
      Effect.provide(body(url), Worker.layer(options).pipe(Layer.provideMerge(repoLayer(url))))
    )
  }).pipe(Effect.timeout("45 seconds"))
