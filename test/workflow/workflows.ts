/**
 * The workflows the differential suite runs on every engine (Effect's
 * in-memory one and Docket's on SQLite and PostgreSQL): activities and their
 * retries, a workflow's own failure, compensation, deferreds, durable clocks
 * (several, and racing a deferred), children, interrupts, and a race between
 * a deferred and an activity. What
 * each did outside the engine (the activities' side effects, compensations)
 * goes to `log`, by the run's tag, so a run's record can be compared across
 * engines.
 */
import * as Activity from "@effect/workflow/Activity"
import * as DurableClock from "@effect/workflow/DurableClock"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import type { WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/** What ran, by the run's tag (side effects of activities, compensations). */
export const log = new Map<string, Array<string>>()
export const record = (tag: string, what: string) =>
  Effect.sync(() => {
    const entries = log.get(tag) ?? []
    entries.push(what)
    log.set(tag, entries)
  })
export const entries = (tag: string): ReadonlyArray<string> => log.get(tag) ?? []

const Tagged = { tag: Schema.String }

/** Three activities in sequence; the result joins theirs. */
export const Steps = Workflow.make({
  name: "Steps",
  payload: Tagged,
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
const step = (tag: string, name: string) =>
  Activity.make({ name, success: Schema.String, execute: Effect.as(record(tag, name), name.toUpperCase()) })
export const StepsLive = Steps.toLayer(({ tag }) =>
  Effect.gen(function*() {
    const a = yield* step(tag, "a")
    const b = yield* step(tag, "b")
    const c = yield* step(tag, "c")
    return `${a}${b}${c}`
  })
)

/** An activity that fails its first two attempts, retried. */
export class Flaky extends Schema.TaggedError<Flaky>()("Flaky", { attempt: Schema.Number }) {}
export const Retries = Workflow.make({
  name: "Retries",
  payload: Tagged,
  success: Schema.Number,
  error: Flaky,
  idempotencyKey: (p) => p.tag
})
export const RetriesLive = Retries.toLayer(({ tag }) =>
  Activity.make({
    name: "flaky",
    success: Schema.Number,
    error: Flaky,
    execute: Effect.gen(function*() {
      const attempt = yield* Activity.CurrentAttempt
      yield* record(tag, `flaky ${attempt}`)
      if (attempt < 3) return yield* new Flaky({ attempt })
      return attempt * 10
    })
  }).pipe(Activity.retry({ times: 3 }))
)

/** A saga: charge, provision; provisioning fails, the charge is refunded. */
export class ProvisionFailed extends Schema.TaggedError<ProvisionFailed>()("ProvisionFailed", {
  reason: Schema.String
}) {}
export const Saga = Workflow.make({
  name: "Saga",
  payload: { tag: Schema.String, fail: Schema.Boolean },
  success: Schema.String,
  error: ProvisionFailed,
  idempotencyKey: (p) => p.tag
})
export const SagaLive = Saga.toLayer(({ fail, tag }) =>
  Effect.gen(function*() {
    const charge = yield* Activity.make({
      name: "charge",
      success: Schema.String,
      execute: Effect.as(record(tag, "charge"), "ch_1")
    }).pipe(Saga.withCompensation((id) => record(tag, `refund ${id}`)))
    yield* Activity.make({
      name: "provision",
      error: ProvisionFailed,
      execute: fail ? Effect.zipRight(record(tag, "provision"), new ProvisionFailed({ reason: "no capacity" })) : record(tag, "provision")
    })
    return charge
  })
)

/** Waits for an approval (a deferred completed from outside), then acts on it. */
export const Approval = DurableDeferred.make("approval", { success: Schema.String })
export const Approve = Workflow.make({
  name: "Approve",
  payload: Tagged,
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
export const ApproveLive = Approve.toLayer(({ tag }) =>
  Effect.gen(function*() {
    yield* Activity.make({ name: "ask", execute: record(tag, "ask") }).pipe(
      Approve.withCompensation(() => record(tag, "compensated"))
    )
    const decision = yield* DurableDeferred.await(Approval)
    yield* Activity.make({ name: "act", execute: record(tag, `act ${decision}`) })
    return decision
  })
)

/** Sleeps on a durable clock (stored: no in-memory threshold), between two activities. */
export const Sleeper = Workflow.make({
  name: "Sleeper",
  payload: { tag: Schema.String, ms: Schema.Number },
  success: Schema.Number,
  idempotencyKey: (p) => p.tag
})
export const SleeperLive = Sleeper.toLayer(({ ms, tag }) =>
  Effect.gen(function*() {
    const before = yield* Activity.make({ name: "before", success: Schema.Number, execute: Effect.as(record(tag, "before"), Date.now()) })
    yield* DurableClock.sleep({ name: "nap", duration: ms, inMemoryThreshold: "1 millis" })
    const after = yield* Activity.make({ name: "after", success: Schema.Number, execute: Effect.as(record(tag, "after"), Date.now()) })
    return after - before
  })
)

/** A parent that runs three children and joins their results. */
export const Child = Workflow.make({
  name: "Child",
  payload: { tag: Schema.String, n: Schema.Number },
  success: Schema.Number,
  idempotencyKey: (p) => `${p.tag}/${p.n}`
})
export const ChildLive = Child.toLayer(({ n, tag }) =>
  Activity.make({ name: "square", success: Schema.Number, execute: Effect.as(record(tag, `child ${n}`), n * n) })
)
export const Parent = Workflow.make({
  name: "Parent",
  payload: Tagged,
  success: Schema.Number,
  idempotencyKey: (p) => p.tag
})
export const ParentLive = Parent.toLayer(({ tag }) =>
  Effect.gen(function*() {
    const squares = yield* Effect.all([1, 2, 3].map((n) => Child.execute({ tag, n })), { concurrency: 3 })
    yield* Activity.make({ name: "sum", execute: record(tag, "sum") })
    return squares.reduce((a, b) => a + b, 0)
  })
)

/** A parent that runs one child, then waits for an approval: a suspended parent with a finished child. */
export const Guardian = Workflow.make({
  name: "Guardian",
  payload: Tagged,
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
export const GuardianLive = Guardian.toLayer(({ tag }) =>
  Effect.gen(function*() {
    const square = yield* Child.execute({ tag, n: 7 })
    const decision = yield* DurableDeferred.await(Approval)
    return `${square} ${decision}`
  })
)

/** A race between a deferred and an activity: the activity wins unless the deferred was completed first. */
export const Race = Workflow.make({
  name: "Race",
  payload: Tagged,
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
export const Cancelled = DurableDeferred.make("cancelled", { success: Schema.String })
export const RaceLive = Race.toLayer(({ tag }) =>
  DurableDeferred.raceAll({
    name: "race",
    success: Schema.String,
    error: Schema.Never,
    effects: [
      DurableDeferred.await(Cancelled),
      Activity.make({ name: "work", success: Schema.String, execute: Effect.as(record(tag, "work"), "worked") })
    ]
  })
)

/** A stored durable clock, then `value` (typed: `raceAll` infers nothing from the clock's own type). */
const slept = (name: string, ms: number, value: string): Effect.Effect<string, never, WorkflowEngine | WorkflowInstance> =>
  Effect.as(DurableClock.sleep({ name, duration: ms, inMemoryThreshold: "1 millis" }), value)

/** A durable clock racing a deferred: the first to complete wins (the winner stored), then an activity. */
export const ClockRace = Workflow.make({
  name: "ClockRace",
  payload: { tag: Schema.String, ms: Schema.Number },
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
export const Poke = DurableDeferred.make("poke", { success: Schema.String })
export const ClockRaceLive = ClockRace.toLayer(({ ms, tag }) =>
  Effect.gen(function*() {
    const winner = yield* DurableDeferred.raceAll({
      name: "clockRace",
      success: Schema.String,
      error: Schema.Never,
      effects: [
        DurableDeferred.await(Poke),
        slept("nap", ms, "slept")
      ]
    })
    yield* Activity.make({ name: "won", execute: record(tag, `won ${winner}`) })
    return winner
  })
)

/** Two durable clocks racing, the later one reached first: the earlier one's due time wins. */
export const TwoClocks = Workflow.make({
  name: "TwoClocks",
  payload: { tag: Schema.String, short: Schema.Number, long: Schema.Number },
  success: Schema.String,
  idempotencyKey: (p) => p.tag
})
export const TwoClocksLive = TwoClocks.toLayer(({ long, short, tag }) =>
  Effect.gen(function*() {
    const winner = yield* DurableDeferred.raceAll({
      name: "clocks",
      success: Schema.String,
      error: Schema.Never,
      effects: [
        slept("long", long, "long"),
        slept("short", short, "short")
      ]
    })
    yield* Activity.make({ name: "won", execute: record(tag, `won ${winner}`) })
    return winner
  })
)

/** Every workflow above, registered. */
export const AllLive = Layer.mergeAll(
  StepsLive,
  RetriesLive,
  SagaLive,
  ApproveLive,
  SleeperLive,
  ChildLive,
  ParentLive,
  RaceLive,
  GuardianLive,
  ClockRaceLive,
  TwoClocksLive
)
