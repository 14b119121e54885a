/**
 * Transactional enqueue on PostgreSQL: an application's row and the job about
 * it are written in ONE transaction (`sql.withTransaction`). If the
 * transaction commits, both exist and the worker runs the job; if it rolls
 * back, neither exists: no job about an order that was never placed, and no
 * order whose job was lost.
 *
 *   DOCKET_DATABASE_URL=postgres://root@127.0.0.1:5432/mydb npx tsx examples/transactional.ts
 *
 * Without DOCKET_DATABASE_URL it makes a database of its own on 127.0.0.1
 * (as root, trust auth) and drops it at the end. Pointed at an existing
 * queue, it leaves nothing of its own behind and touches nothing of yours:
 * its pool claims only its own kind (a pool claims only the kinds it has
 * handlers for), and it drops its table at the end.
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Docket, Handler, Permanent, QueueRepo, Worker } from "docket"
import { Console, Data, Effect, Layer, Queue, Redacted, Schema } from "effect"

const ADMIN_URL = "postgres://root@127.0.0.1:5432/postgres"

/** The database: DOCKET_DATABASE_URL if it is PostgreSQL, else a new one, dropped after. */
const database = Effect.suspend(() => {
  const given = process.env.DOCKET_DATABASE_URL
  if (given !== undefined && /^postgres(ql)?:\/\//.test(given)) return Effect.succeed(given)
  const name = `docket_example_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const admin = (statement: string) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(ADMIN_URL) })),
      Effect.orDie
    )
  return Effect.acquireRelease(
    Effect.as(admin(`CREATE DATABASE ${name}`), ADMIN_URL.replace(/\/postgres$/, `/${name}`)),
    () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  )
})

class PaymentDeclined extends Data.TaggedError("PaymentDeclined")<{
  readonly customer: string
  /** The ids the rolled-back transaction had written (for the demonstration). */
  readonly orderId: number
  readonly jobId: number
}> {}

/** The job: send the receipt of an order (it reads the order the transaction wrote). */
const SendReceipt = Handler.make("docket-example.order-receipt", {
  payload: Schema.Struct({ orderId: Schema.Number }),
  run: ({ orderId }, job) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ customer: string; total_cents: number }>`
        SELECT customer, total_cents FROM docket_example_orders WHERE id = ${orderId}`
      if (rows.length === 0) return yield* new Permanent({ reason: `no order ${orderId}` })
      const { customer, total_cents } = rows[0]
      yield* Console.log(`receipt for order ${orderId} sent to ${customer}: ${(total_cents / 100).toFixed(2)} EUR (item ${job.id})`)
    })
})

/** Places an order: the row and its receipt job in one transaction. */
const placeOrder = (customer: string, totalCents: number, cardOk: boolean) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(Effect.gen(function*() {
      const [order] = yield* sql<{ id: number }>`
        INSERT INTO docket_example_orders (customer, total_cents) VALUES (${customer}, ${totalCents}) RETURNING id`
      const job = yield* Docket.client(SendReceipt).enqueue({ orderId: order.id })
      // Charging the card fails after both writes: the transaction rolls back.
      if (!cardOk) return yield* new PaymentDeclined({ customer, orderId: order.id, jobId: job.id })
      return { orderId: order.id, jobId: job.id }
    })))

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* QueueRepo.QueueRepo
  const events = yield* Effect.flatMap(Worker.Worker, (worker) => worker.subscribe)
  // The example's own table, dropped at the end (also when it fails).
  yield* Effect.acquireRelease(
    sql`CREATE TABLE IF NOT EXISTS docket_example_orders (
      id serial PRIMARY KEY, customer text NOT NULL, total_cents integer NOT NULL)`,
    () => Effect.orDie(sql`DROP TABLE IF EXISTS docket_example_orders`)
  )

  const placed = yield* placeOrder("Ada", 4200, true)
  yield* Console.log(`order ${placed.orderId} (Ada) and its receipt job ${placed.jobId} committed together`)

  const declined = yield* placeOrder("Bob", 999, false).pipe(
    Effect.flatMap(() => Effect.dieMessage("the payment should have been declined")),
    Effect.catchTag("PaymentDeclined", (declined) => Effect.succeed(declined))
  )
  const bobOrder = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM docket_example_orders WHERE id = ${declined.orderId}`
  const bobJob = yield* repo.get(declined.jobId)
  yield* Console.log(
    `order of ${declined.customer} rolled back (payment declined): order ${declined.orderId} exists: ` +
      `${bobOrder[0].n > 0}, its receipt job ${declined.jobId} exists: ${bobJob._tag === "Some"}`
  )

  // The worker runs the committed job; nothing else ever shows up.
  for (;;) {
    const event = yield* Queue.take(events)
    if (event._tag === "Dead") return yield* Effect.die(new Error(`job ${event.claim.id} dead: ${event.error}`))
    if (event._tag === "Completed" && event.claim.id === placed.jobId) break
  }
  const orders = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM docket_example_orders`
  const left = (yield* repo.stats).byKind[SendReceipt.kind] ?? { due: 0, scheduled: 0, running: 0, dead: 0 }
  yield* Console.log(
    `in the end: ${orders[0].n} order, ${left.due + left.scheduled + left.running + left.dead} jobs left in the queue`
  )
})

const main = Effect.gen(function*() {
  const url = yield* database
  // The queue (migrated) on the application's database, and a worker pool
  // whose handlers use the same SqlClient.
  // Pointed at a queue that is not its own, the example leaves nothing
  // behind and touches nothing of others: its completed job is deleted at
  // once (no history kept), and its pool prunes no one else's finished items.
  const AppLive = Worker.layer({ handlers: [SendReceipt], pruneEvery: false }).pipe(
    Layer.provideMerge(Docket.layerClient(url, { repo: { retention: { done: 0 } } }))
  )
  yield* program.pipe(Effect.scoped, Effect.provide(AppLive))
}).pipe(Effect.scoped)

NodeRuntime.runMain(main)
