/**
 * Reading items: one or several by id, the counts by kind, and when the next
 * item becomes due. An id that is not a positive safe integer names no item:
 * it is answered without a query.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Storage } from "../storage.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The item reads. */
export type Items = Pick<Service, "get" | "getMany" | "stats" | "nextDueIn">

const isId = (id: number) => Number.isSafeInteger(id) && id >= 1

/** The item reads over the storage. */
export const make = (store: Pick<Storage, "itemGet" | "itemGetMany" | "insightStats" | "itemNextDue">): Items => ({
  stats: Effect.mapError(store.insightStats, storage("stats")),
  // None on every dialect, without a query (PostgreSQL would refuse 1.5 or
  // NaN as a bigint and report a StorageError, while SQLite answered None).
  get: (id) => (!isId(id) ? Effect.succeed(Option.none()) : Effect.mapError(store.itemGet(id), storage("get"))),
  // As `get`: ids that name no item are left out without a query.
  getMany: (ids) => {
    const valid = [...new Set(ids)].filter(isId)
    return valid.length === 0 ? Effect.succeed([]) : Effect.mapError(store.itemGetMany(valid), storage("getMany"))
  },
  nextDueIn: Effect.mapError(store.itemNextDue, storage("nextDueIn"))
})
