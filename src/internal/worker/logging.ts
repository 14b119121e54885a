/**
 * Log annotations for the item a fiber runs. Logs written while an item runs
 * carry its kind, id and attempt and the worker's name. Setting the fiber's
 * log annotations per item (a HashMap built, hashed and compared on every
 * set) cost a quarter of a no-op item's run; instead each slot fiber's
 * loggers are wrapped once and find the item through `currentItem` (fibers
 * the handler forks keep their item, like annotations). Annotations the
 * handler sets itself win over these.
 */
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import type { Claim } from "../../Domain.js"

/** What a slot fiber holds: its slot, whose running item changes. */
export interface SlotRef {
  readonly current: { readonly claim: Claim } | undefined
}

/**
 * In a slot fiber, its slot; in a fiber forked while an item runs, that item
 * (fixed at the fork, so a fiber that outlives its item keeps it). Nothing is
 * set per item.
 */
export const currentItem = FiberRef.unsafeMake<SlotRef | Claim | undefined>(undefined, {
  fork: (value) => (value !== undefined && "current" in value ? value.current?.claim : value),
  // A joined child's value must not replace the slot (by default a join
  // copies the child's fiber refs into the parent): the slot's next item
  // would log as the joined child's item.
  join: (parent) => parent
})

const itemOf = (value: SlotRef | Claim | undefined): Claim | undefined =>
  value !== undefined && "current" in value ? value.current?.claim : value

/** Wraps a logger so it annotates the current item's kind, id and attempt and the worker. */
export const annotated = (worker: string) => (logger: Logger.Logger<unknown, unknown>): Logger.Logger<unknown, unknown> =>
  Logger.make((options) => {
    const claim = itemOf(FiberRefs.getOrDefault(options.context, currentItem))
    if (claim === undefined) return logger.log(options)
    let annotations = options.annotations
    if (!HashMap.has(annotations, "kind")) annotations = HashMap.set(annotations, "kind", claim.kind)
    if (!HashMap.has(annotations, "id")) annotations = HashMap.set(annotations, "id", claim.id)
    if (!HashMap.has(annotations, "attempt")) annotations = HashMap.set(annotations, "attempt", claim.attempt)
    if (!HashMap.has(annotations, "worker")) annotations = HashMap.set(annotations, "worker", worker)
    return logger.log({ ...options, annotations })
  })
