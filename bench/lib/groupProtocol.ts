/** Messages between bench/groups.ts and its worker processes (bench/lib/groupChild.ts). */
import type { GroupLimit, GroupSystemName } from "../adapters/groups.js"
import type { Target } from "../adapters/types.js"

export interface GroupChildConfig {
  readonly system: GroupSystemName
  readonly target: Target
  readonly concurrency: number
  readonly limit: GroupLimit
  /** Runs of items with an index from this one on are counted apart, with their latency (W8's small groups). */
  readonly markFrom: number
}

export type GroupToChild = { readonly type: "go" } | { readonly type: "stop" }

export type GroupFromChild =
  | { readonly type: "loaded" }
  | { readonly type: "started" }
  | { readonly type: "progress"; readonly done: number; readonly marked: number }
  /** `records`: four numbers a run (index, group, start, end; `now()` of protocol.ts); `latencies`: enqueue to start of the marked ones, ms. */
  | { readonly type: "result"; readonly records: ReadonlyArray<number>; readonly latencies: ReadonlyArray<number> }
  | { readonly type: "error"; readonly message: string }
