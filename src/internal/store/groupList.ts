/**
 * `QueueRepo.listGroups`: a kind's groups with unfinished items, a page at a
 * time in group order (sql/groupList.ts: a seek from the cursor, so a kind
 * with a million groups pages as fast as one with ten). The cursor is the
 * page's last group: the next page starts after it, so every group is listed
 * once across the pages however many are added or finish meanwhile.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { GroupInfo, GroupListOptions, GroupPage } from "../../Domain.js"
import { InvalidInput } from "../../Errors.js"
import type { GroupRecord } from "../sql/groupList.js"
import type { Storage } from "../storage.js"
import * as V from "../validate.js"
import { storage } from "./decode.js"
import type { Service } from "./service.js"

/** The operation. */
export type GroupList = Pick<Service, "listGroups">

/** A page's size when none is given. */
export const DEFAULT_GROUP_PAGE = 100

const checkOptions = (kind: string, options: GroupListOptions) =>
  Either.gen(function*() {
    yield* V.checkKind(kind)
    const limit = yield* V.checkIntegerIn("limit", options.limit ?? DEFAULT_GROUP_PAGE, 1, 1000)
    const after = options.after === undefined
      ? null
      : yield* Either.mapLeft(V.checkGroup(options.after), (e) => new InvalidInput({ field: "cursor", reason: e.reason }))
    const only = options.group === undefined ? null : yield* V.checkGroup(options.group)
    return { limit, after, only }
  })

// An ordered group is held by a failure while its first item waits for a retry.
const toInfo = (r: GroupRecord): GroupInfo => ({
  group: r.group,
  counts: { due: r.due, scheduled: r.scheduled, running: r.running, retrying: r.retrying },
  nextDueAt: r.nextDueAt,
  head: r.head,
  ordered: r.ordered,
  blocked: r.ordered && r.head.state === "waiting" && r.head.attempts > 0
})

/** The part over the storage. */
export const make = (store: Pick<Storage, "groupList">): GroupList => ({
  listGroups: (kind, options = {}) =>
    Effect.gen(function*() {
      const { after, limit, only } = yield* V.lift(checkOptions(kind, options))
      const records = yield* store.groupList(kind, after, limit, only).pipe(Effect.mapError(storage("listGroups")))
      const groups = records.map(toInfo)
      return { groups, cursor: groups.length === limit ? groups[groups.length - 1].group : null } satisfies GroupPage
    })
})
