/**
 * The contenders, in the order they take turns. Each is loaded on demand so a
 * worker child process loads only its own library (its memory is measured).
 */
import type { Contender } from "./types.js"

export const ALL = [
  "docket-pg",
  "docket-sqlite",
  "graphile-worker",
  "graphile-worker-lq",
  "pg-boss",
  "pg-boss-fast",
  "bullmq",
  "bullmq-pg",
  "effect-pq-pg",
  "effect-pq-sqlite",
  "pg-floor"
] as const

/**
 * Contenders run only when named (`--only`), not in the full benchmark:
 * Docket through PgBouncer (docs/benchmarks.md, "Through PgBouncer").
 */
export const OPT_IN = ["docket-pgbouncer", "docket-pgbouncer-poll"] as const

/** Every contender the harness knows: the full benchmark's, then the opt-in ones. */
export const KNOWN = [...ALL, ...OPT_IN] as const

export type Name = (typeof KNOWN)[number]

/** Contenders that W5 (scale-out to 4 worker processes) covers. */
export const W5_CONTENDERS: ReadonlyArray<Name> = ["docket-pg", "graphile-worker", "graphile-worker-lq"]

export const isName = (name: string): name is Name => (KNOWN as ReadonlyArray<string>).includes(name)

export const load = async (name: Name): Promise<Contender> => {
  switch (name) {
    case "docket-pg":
      return (await import("./docket.js")).docketPg
    case "docket-sqlite":
      return (await import("./docket.js")).docketSqlite
    case "graphile-worker":
      return (await import("./graphile-worker.js")).graphileWorker
    case "graphile-worker-lq":
      return (await import("./graphile-worker.js")).graphileWorkerLocalQueue
    case "pg-boss":
      return (await import("./pg-boss.js")).pgBoss
    case "pg-boss-fast":
      return (await import("./pg-boss.js")).pgBossFast
    case "bullmq":
      return (await import("./bullmq.js")).bullmq
    case "bullmq-pg":
      return (await import("./bullmq.js")).bullmqPg
    case "effect-pq-pg":
      return (await import("./effect-pq.js")).effectPqPg
    case "effect-pq-sqlite":
      return (await import("./effect-pq.js")).effectPqSqlite
    case "pg-floor":
      return (await import("./floor.js")).floor
    case "docket-pgbouncer":
      return (await import("./docket-pgbouncer.js")).docketPgBouncer
    case "docket-pgbouncer-poll":
      return (await import("./docket-pgbouncer.js")).docketPgBouncerPoll
  }
}
