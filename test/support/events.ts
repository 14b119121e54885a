/** Waiting on a worker's events (a latch, never a sleep). */
import { Duration, Effect, Queue } from "effect"
import type { Event } from "../../src/Events.js"

/** Takes events until one matches; fails after `timeout`. Returns the match and all events seen. */
export const waitForEvent = (
  queue: Queue.Dequeue<Event>,
  predicate: (event: Event) => boolean,
  timeout: Duration.DurationInput = "20 seconds"
) =>
  Effect.gen(function*() {
    const seen: Array<Event> = []
    for (;;) {
      const event = yield* Queue.take(queue)
      seen.push(event)
      if (predicate(event)) return { event, seen }
    }
  }).pipe(
    Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new Error(`no matching event within ${Duration.format(Duration.decode(timeout))}`)
    })
  )

/** Waits until `n` events match. */
export const waitForCount = (
  queue: Queue.Dequeue<Event>,
  predicate: (event: Event) => boolean,
  n: number,
  timeout: Duration.DurationInput = "20 seconds"
) =>
  Effect.gen(function*() {
    const matched: Array<Event> = []
    while (matched.length < n) {
      const event = yield* Queue.take(queue)
      if (predicate(event)) matched.push(event)
    }
    return matched
  }).pipe(
    Effect.timeoutFail({ duration: timeout, onTimeout: () => new Error(`fewer than ${n} matching events within the timeout`) })
  )
