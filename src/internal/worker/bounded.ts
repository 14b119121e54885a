/**
 * A bounded wait on the shutdown path. Shutdown runs as the scope's
 * finalizer, which is uninterruptible: every bounded wait in it is made
 * interruptible, or its timeout could never fire.
 */
import { Duration, Effect, type Option } from "effect"

/** `effect`'s result, or None if it has not ended within `ms` (it is then interrupted). */
export const boundedWait = <A, E>(effect: Effect.Effect<A, E>, ms: number): Effect.Effect<Option.Option<A>, E> =>
  Effect.timeoutOption(Effect.interruptible(effect), Duration.millis(ms))
