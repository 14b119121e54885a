/**
 * Groups of a kind as things a person operates (issue 36, "Actors"): pausing
 * one group (a tenant that misbehaves) while the kind's other groups go on,
 * and resuming it. A paused group's items are not started by any worker in
 * any process (running ones finish; enqueues are kept). One operation a
 * member, each over the kinds storage area (internal/storage/kinds.ts).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { InvalidInput } from "../../Errors.js"
import type * as Wakeups from "../../Wakeups.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The operations on groups. */
export type Groups = Pick<Service, "pauseGroup" | "resumeGroup">

/** Checks a group a person names: as an item's group, but required. */
export const checkGroupName = (group: unknown): Either.Either<string, InvalidInput> =>
  Either.flatMap(V.checkGroup(group), (checked) =>
    checked === null
      ? Either.left(new InvalidInput({ field: "group", reason: "must be given (the group to act on)" }))
      : Either.right(checked))

/** The operations over the storage. A resume wakes this process's pools; on PostgreSQL its statement notifies every process's. */
export const make = (store: Pick<Storage, "groupSetPaused">, wakeups: Wakeups.Service): Groups => {
  const named = (kind: string, group: string) =>
    Effect.zip(V.lift(V.checkKind(kind)), V.lift(checkGroupName(group)))
  return {
    pauseGroup: (kind, group) =>
      Effect.flatMap(named(kind, group), ([k, g]) =>
        Effect.mapError(store.groupSetPaused(k, g, true), storage("pauseGroup"))),
    resumeGroup: (kind, group) =>
      Effect.flatMap(named(kind, group), ([k, g]) =>
        store.groupSetPaused(k, g, false).pipe(Effect.mapError(storage("resumeGroup")), Effect.zipRight(wakeups.enqueued)))
  }
}
