/**
 * The domain types of kinds as a person controls them (global limits, a
 * kind's groups and their limits) and of the groups' listing: part of
 * `Domain` (re-exported there and by `QueueRepo`), kept in a file of their
 * own so that Domain.ts stays one idea a section.
 */
import type * as Duration from "effect/Duration"

/**
 * A global rate: at most `limit` starts of a kind in any window of `period`,
 * across every process (e.g. `{ limit: 100, period: "1 minute" }`).
 */
export interface Rate {
  /** An integer from 1 to 10,000 (each is a row the claim keeps: the kind's last starts). */
  readonly limit: number
  /** A `Duration` input or milliseconds, from 1 ms to 31 days. */
  readonly period: Duration.DurationInput
}

/**
 * Limits on a kind across every worker process. `concurrency`: at most this
 * many of its items hold a live lease at once (an integer from 1 to
 * 1,000,000). `rate`: at most so many starts per period. Setting: null
 * removes a limit; undefined leaves it as it is.
 */
export interface GlobalLimits {
  readonly concurrency?: number | null | undefined
  readonly rate?: Rate | null | undefined
}

/**
 * A kind's limits on each of its groups (`EnqueueOptions.group`), across every
 * worker process: at most `concurrency` items of one group run at once; with
 * `ordered`, a group's items start in enqueue order (priority does not
 * reorder them inside a group) and only from its first `concurrency`
 * unfinished items, so with concurrency 1 the next starts only when the
 * previous is finished, waiting through its retries and their backoff
 * (strict). Items without a group are not limited by it.
 */
export interface PerGroup {
  /** An integer from 1 to 10,000. */
  readonly concurrency: number
  /** Default false. */
  readonly ordered?: boolean | undefined
  /**
   * What an ordered group does while its item that failed waits for its
   * retry (a last error, not due yet): "wait" (the default, strict: nothing
   * behind it starts until it has run again) or "continue" (the items behind
   * it go on; once due it runs at its place, ahead of the later ones).
   */
  readonly onFailure?: "wait" | "continue" | undefined
  /**
   * What a dead item does to its group: "release" (the default: the group
   * goes on without it) or "hold" (nothing of the group starts while it has a
   * dead item, until a person retries or deletes it; the other groups go on).
   */
  readonly onDead?: "release" | "hold" | undefined
  /**
   * At most `limit` starts of one group in any window of `period`, across
   * every worker process (a limit from 1 to 10,000, a period from 1 ms to 31
   * days). A start counts once its claim commits, whatever its worker does
   * after. Default: none.
   */
  readonly rate?: Rate | undefined
}

/** A kind's stored `perGroup`, as `docket kind list` shows it. */
export interface PerGroupInfo {
  /** At most this many of one group run at once; null: no limit (a rate only). */
  readonly concurrency: number | null
  /** A group's items start in enqueue order (only with a concurrency). */
  readonly ordered: boolean
  readonly onFailure: "wait" | "continue"
  readonly onDead: "release" | "hold"
  readonly rate: { readonly limit: number; readonly periodMs: number } | null
  /**
   * Who set the concurrency and rate: the handlers' declaration ("code") or
   * a person (`docket kind set --per-group-...`, kept until reset).
   * `ordered`, `onFailure` and `onDead` are always the code's.
   */
  readonly setBy: "code" | "person"
}

/** A kind as an operator sees it: its controls and its items by state. */
export interface KindInfo {
  readonly kind: string
  /** No worker starts its items (running ones finish). */
  readonly paused: boolean
  readonly concurrency: number | null
  readonly rate: { readonly limit: number; readonly periodMs: number } | null
  /** Who set the limits: a handler's declaration ("code", rewritten at each worker start) or a person (kept). */
  readonly limitsSetBy: "code" | "person"
  /** Its limits on each of its groups, as the claim obeys them; null when it has none (its groups are labels). */
  readonly perGroup: PerGroupInfo | null
  /** How many of its groups a person paused (`docket group pause`). */
  readonly pausedGroups: number
  readonly counts: {
    /** Waiting and due. */
    readonly waiting: number
    /** Waiting, due later. */
    readonly scheduled: number
    /** Holding a live lease. */
    readonly running: number
    /** Running, but the lease ended (the worker stopped or died): due again. */
    readonly expired: number
    /** Done and kept for the retention. */
    readonly done: number
    readonly dead: number
    readonly cancelled: number
  }
}

/** A group of a kind with unfinished items, as `docket group list` shows it. */
export interface GroupInfo {
  readonly group: string
  readonly counts: {
    /** Waiting and due. */
    readonly due: number
    /** Waiting, due later (a delay, or a retry's backoff). */
    readonly scheduled: number
    /** Claimed (a lease, live or ended). */
    readonly running: number
    /** Waiting after a failure (an attempt counted), for its retry. */
    readonly retrying: number
  }
  /** The earliest due time (epoch ms) among its waiting items; null when none waits. */
  readonly nextDueAt: number | null
  /** Its first unfinished item: in an ordered group, what the others wait behind. */
  readonly head: {
    readonly id: number
    readonly state: "waiting" | "running"
    readonly attempts: number
    readonly runAt: number
    readonly lastError: string | null
  }
  /** The kind's groups are ordered (`perGroup.ordered`): the others wait behind the first item. */
  readonly ordered: boolean
  /**
   * An ordered group held by a failure: its first item failed and waits for
   * its retry, and nothing behind it starts meanwhile.
   */
  readonly blocked: boolean
}

/** A page of groups, in group order; `cursor` gives the next (null after the last). */
export interface GroupPage {
  readonly groups: ReadonlyArray<GroupInfo>
  readonly cursor: string | null
}

/**
 * Which page of a kind's groups: after the previous page's cursor, at most
 * `limit` (1 to 1,000; default 100); or only the group `group` (none if it
 * has no unfinished items).
 */
export interface GroupListOptions {
  readonly after?: string | undefined
  readonly limit?: number | undefined
  readonly group?: string | undefined
}
