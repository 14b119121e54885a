/**
 * The parts' lifecycle (src/internal/worker/part.ts): parts start in order
 * and stop in reverse, sharing one budget; a start or stop out of turn is a
 * defect; a late-bound hook is filled once and used only once filled.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Option } from "effect"
import { Budget } from "../../src/internal/worker/bounded.js"
import { LateBound, Lifecycle, type Part } from "../../src/internal/worker/part.js"

/** A part that records its start and stop (with the budget it was given) in `log`. */
const recording = (name: string, log: Array<string>, budgets: Array<Budget> = []): Part => ({
  name,
  start: () => Effect.sync(() => void log.push(`start ${name}`)),
  stop: (budget) =>
    Effect.sync(() => {
      budgets.push(budget)
      log.push(`stop ${name}`)
    })
})

const defectOf = <A, E>(exit: Exit.Exit<A, E>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined

describe("the parts' lifecycle", () => {
  it.scoped("starts the parts in order and stops them in reverse, every stop given the one shared budget", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const budgets: Array<Budget> = []
      const lifecycle = new Lifecycle(["a", "b", "c"].map((n) => recording(n, log, budgets)))
      expect(lifecycle.phase).toBe("built")
      yield* lifecycle.start(yield* Effect.scope)
      expect(lifecycle.phase).toBe("started")
      const budget = new Budget(10_000)
      yield* lifecycle.stop(budget)
      expect(lifecycle.phase).toBe("stopped")
      expect(log).toEqual(["start a", "start b", "start c", "stop c", "stop b", "stop a"])
      expect(budgets).toEqual([budget, budget, budget])
    }))

  it.scoped("a stop waits for each part's stop before the next one's", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const slow: Part = {
        name: "slow",
        start: () => Effect.void,
        stop: () => Effect.zipRight(Effect.yieldNow(), Effect.sync(() => void log.push("stop slow (after yielding)")))
      }
      const lifecycle = new Lifecycle([recording("first", log), slow])
      yield* lifecycle.start(yield* Effect.scope)
      yield* lifecycle.stop(new Budget(1000))
      expect(log).toEqual(["start first", "stop slow (after yielding)", "stop first"])
    }))

  it.scoped("a start or stop out of turn is a defect that names it: a second start, a stop before the start, a second stop", () =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const log: Array<string> = []
      const early = new Lifecycle([recording("a", log)])
      expect(String(defectOf(yield* Effect.exit(early.stop(new Budget(10)))))).toContain(
        "docket: the pool's lifecycle cannot go from built to stopping"
      )
      const twice = new Lifecycle([recording("a", log)])
      yield* twice.start(scope)
      expect(String(defectOf(yield* Effect.exit(twice.start(scope))))).toContain("cannot go from started to starting")
      yield* twice.stop(new Budget(10))
      expect(String(defectOf(yield* Effect.exit(twice.stop(new Budget(10)))))).toContain("cannot go from stopped to stopping")
      // Each part was started once and stopped once.
      expect(log).toEqual(["start a", "stop a"])
    }))

  it("a late-bound hook is filled once, and a call before it is filled is a defect", () => {
    const hooks = new LateBound<{ readonly f: () => number }>("the test's hooks")
    expect(() => hooks.get()).toThrow("docket: the test's hooks used before the pool was built")
    hooks.fill({ f: () => 1 })
    expect(hooks.get().f()).toBe(1)
    expect(() => hooks.fill({ f: () => 2 })).toThrow("docket: the test's hooks filled twice")
    expect(hooks.get().f()).toBe(1)
  })
  it.scoped("a stop that dies is logged and the parts stopped after it still stop", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const broken: Part = { name: "broken", start: () => Effect.void, stop: () => Effect.die(new Error("a bug")) }
      const lifecycle = new Lifecycle([recording("a", log), broken, recording("c", log)])
      yield* lifecycle.start(yield* Effect.scope)
      const exit = yield* Effect.exit(lifecycle.stop(new Budget(10_000)))
      expect(Exit.isSuccess(exit)).toBe(true)
      expect(log).toEqual(["start a", "start c", "stop c", "stop a"])
      expect(lifecycle.phase).toBe("stopped")
    }))

  it.effect("the budget: waits are charged to it, an uncharged effect (the grace) is not", () =>
    Effect.gen(function*() {
      let now = 0
      const budget = new Budget(10_000, () => now)
      yield* budget.uncharged(Effect.sync(() => {
        now += 60_000 // a whole grace spent
      }))
      expect(budget.left).toBe(10_000)
      now += 4_000 // a database wait, charged
      expect(budget.left).toBe(6_000)
      // Uncharged also when the effect fails.
      yield* Effect.exit(budget.uncharged(Effect.suspend(() => {
        now += 1_000
        return Effect.fail("cut off")
      })))
      expect(budget.left).toBe(6_000)
      now += 7_000
      expect(budget.left).toBe(0)
    }))
  it.scoped("a start cut short (a part's start fails) stops the parts it had started, in reverse, and only those", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const failing: Part = { name: "failing", start: () => Effect.die(new Error("no database")), stop: () => Effect.void }
      const lifecycle = new Lifecycle([recording("a", log), recording("b", log), failing, recording("d", log)])
      const exit = yield* Effect.exit(lifecycle.start(yield* Effect.scope))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(lifecycle.phase).toBe("starting")
      yield* lifecycle.stop(new Budget(10_000))
      expect(log).toEqual(["start a", "start b", "stop b", "stop a"])
      expect(lifecycle.phase).toBe("stopped")
    }))
})
