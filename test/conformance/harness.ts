/**
 * Runs a test program against a fresh database of a backend, with the
 * migrated SqlClient and QueueRepo provided.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { type Backend, repoLayer } from "../support/db.js"

export const withRepo = <A, E>(
  backend: Backend,
  program: Effect.Effect<A, E, QueueRepo.QueueRepo | SqlClient.SqlClient>,
  options: QueueRepo.Options = {}
): Effect.Effect<A, E | unknown> =>
  Effect.flatMap(Effect.promise(() => backend.fresh()), (url) =>
    Effect.provide(program, repoLayer(url, options)))
