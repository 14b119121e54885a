/**
 * Deciding an item's outcome from its handler's failure cause
 * (src/internal/decide.ts): each of the handler's outcomes, a typed failure
 * that is not one, a defect, and the delays the storage would refuse.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Data } from "effect"
import { decide, DONE } from "../../src/internal/decide.js"
import { MAX_DELAY_MS } from "../../src/internal/validate.js"
import { Cancel, Permanent, Retry, Snooze } from "../../src/Outcome.js"

class NotFound extends Data.TaggedError("NotFound")<{ readonly message: string }> {}

describe("decide", () => {
  it("Permanent is dead, Cancel cancelled, whatever attempts remain; the error reads <Tag>: <reason>", () => {
    expect(decide(Cause.fail(new Permanent({ reason: "410 Gone" })))).toEqual({ _tag: "Dead", error: "Permanent: 410 Gone" })
    expect(decide(Cause.fail(new Cancel({ reason: "not wanted" })))).toEqual({ _tag: "Cancel", error: "Cancel: not wanted" })
  })

  it("Retry: its delay in ms, or undefined for the kind's backoff; a delay the storage would refuse is ignored, and said so", () => {
    expect(decide(Cause.fail(new Retry({ reason: "busy", delay: "2 seconds" })))).toEqual({
      _tag: "Retry",
      error: "Retry: busy",
      delayMs: 2000
    })
    expect(decide(Cause.fail(new Retry({ reason: "busy" })))).toEqual({ _tag: "Retry", error: "Retry: busy", delayMs: undefined })
    const tooLong = decide(Cause.fail(new Retry({ reason: "busy", delay: MAX_DELAY_MS + 1 })))
    expect(tooLong).toMatchObject({ _tag: "Retry", delayMs: undefined })
    expect(tooLong._tag === "Retry" && tooLong.error).toMatch(/^Retry: busy \(its delay was ignored: must be from 0 to/)
  })

  it("Snooze: waiting after its delay; a delay out of range is an ordinary failure (InvalidSnooze), so it cannot loop", () => {
    expect(decide(Cause.fail(new Snooze({ delay: "1 minute", reason: "export not ready" })))).toEqual({
      _tag: "Snooze",
      error: "Snooze: export not ready",
      delayMs: 60_000
    })
    expect(decide(Cause.fail(new Snooze({ delay: 0 })))).toEqual({ _tag: "Snooze", error: "Snooze: snoozed for 0ms", delayMs: 0 })
    const bad = decide(Cause.fail(new Snooze({ delay: -1 })))
    expect(bad).toMatchObject({ _tag: "Retry", delayMs: undefined })
    expect(bad._tag === "Retry" && bad.error).toMatch(/^InvalidSnooze: the delay must be from 0 to/)
  })

  it("a typed failure that is not an outcome is retried with the kind's backoff, described by its tag", () => {
    expect(decide(Cause.fail(new NotFound({ message: "no user 7" })))).toEqual({
      _tag: "Retry",
      error: "NotFound: no user 7",
      delayMs: undefined
    })
    expect(decide(Cause.fail({ _tag: "Plain", message: "an object" }))).toMatchObject({ error: "Plain: an object" })
    expect(decide(Cause.fail("text"))).toMatchObject({ _tag: "Retry", error: "Error: text" })
    expect(decide(Cause.fail(new Error("")))).toMatchObject({ error: "Error" })
  })

  it("a defect is retried, recorded as Defect: <name>: <message>", () => {
    expect(decide(Cause.die(new TypeError("cannot read x of undefined")))).toEqual({
      _tag: "Retry",
      error: "Defect: TypeError: cannot read x of undefined",
      delayMs: undefined
    })
    expect(decide(Cause.die("thrown text"))).toMatchObject({ error: "Defect: thrown text" })
  })

  it("a run with no value to keep shares one Done (nothing made per item)", () => {
    expect(DONE).toEqual({ _tag: "Done" })
  })
})
