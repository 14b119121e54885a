/**
 * The claimer's mode: one value, changed only by the claimer (claimer.ts),
 * every change checked against `ALLOWED` below. A change it does not
 * allow is a defect of the pool (thrown, naming both modes): going on would
 * claim while stopping, or stop twice.
 *
 * The modes (and who reads them):
 * - `claiming`: claims whenever there is room: its last claim got all it
 *   asked for (or none was sent yet). Starving slots grow the prefetch only
 *   in this mode.
 * - `drained`: its last claim found fewer items than it asked for: it sleeps
 *   until a wake-up, the next due time or the poll. An outcome written while
 *   that claim was in flight, or since, makes it claim again at once (it may
 *   have made a held-back item due; the claim may have read from before it:
 *   claimer.ts, `wrote`). `whenIdle` may resolve (once nothing runs, is
 *   buffered or unwritten, and no such claim is owed).
 * - `empty`: its last claim found nothing: as `drained`.
 * - `stopping`: shutdown began: no claim is sent and no item starts (the
 *   slots end); the claim in flight ends, and its result leaves the mode as
 *   it is. As `drained` for `whenIdle`: no claim is to come.
 * - `stopped`: its fiber has ended.
 *
 * Allowed changes:
 * - from `claiming`, `drained` or `empty`: to any of those three (a claim's
 *   result), or to `stopping`;
 * - from `stopping`: to `stopped`;
 * - from `stopped`: none.
 *
 * Two facts that combine with any mode are not modes: a prefetch paused
 * (prefetch.ts: prefetched items had to be given back; cleared when a slot
 * frees) and a turn owed to the claimer (state.ts, `yieldForClaimer`).
 */

/** The claimer's mode; see the module doc. */
export type ClaimerMode = "claiming" | "drained" | "empty" | "stopping" | "stopped"

/** The claimer's first mode. */
export const INITIAL: ClaimerMode = "claiming"

/** The changes allowed from each mode. */
export const ALLOWED: { readonly [M in ClaimerMode]: ReadonlyArray<ClaimerMode> } = {
  claiming: ["claiming", "drained", "empty", "stopping"],
  drained: ["claiming", "drained", "empty", "stopping"],
  empty: ["claiming", "drained", "empty", "stopping"],
  stopping: ["stopped"],
  stopped: []
}

/** The mode after a claim that asked for `asked` items (at least one) and found `found`. */
export const afterClaim = (found: number, asked: number): ClaimerMode =>
  found >= asked ? "claiming" : found === 0 ? "empty" : "drained"

/** `to`, if the table allows the change from `from`; else a defect (thrown). */
export const change = (from: ClaimerMode, to: ClaimerMode): ClaimerMode => {
  if (!ALLOWED[from].includes(to)) throw new Error(`docket: the claimer's mode cannot change from ${from} to ${to}`)
  return to
}
