/**
 * The pool's prefetch buffer: claimed items waiting for a slot, in claim order.
 * A FIFO with a moving head (no per-item array copies); items a kind limit
 * holds back stay in place and keep their order.
 */
import type { Claim } from "../Domain.js"

/** A buffered claim, when it was sent and when it came back. */
export interface Entry {
  readonly claim: Claim
  /** When the claim was sent (performance.now()): its lease started no earlier (the slots' deadline). */
  readonly at: number
  /**
   * When the claim came back and the item entered the buffer: its hold (how
   * long it waits for a slot) counts from here, not from `at`. A claim that
   * waited on SQLite's lock (busy timeout) or a slow database otherwise
   * delivers items already "held too long" that never waited for a slot.
   */
  readonly since: number
}

/** The buffer; see the module doc. */
export class ClaimBuffer {
  private items: Array<Entry | undefined> = []
  private head = 0
  private count = 0

  get size(): number {
    return this.count
  }

  /** Adds a claim sent at `at` that came back at `since` (at `at`, when not given). */
  push(claim: Claim, at: number, since: number = at): void {
    this.items.push({ claim, at, since })
    this.count++
  }

  /** Takes the first item `canStart` admits (every item, without it). */
  takeOne(canStart: ((claim: Claim) => boolean) | undefined): Entry | undefined {
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i]
      if (entry === undefined) continue
      if (canStart !== undefined && !canStart(entry.claim)) continue
      this.items[i] = undefined
      this.count--
      this.compact()
      return entry
    }
    return undefined
  }

  /** Whether some buffered item passes `canStart` (every item, without it). */
  some(canStart: ((claim: Claim) => boolean) | undefined): boolean {
    if (canStart === undefined) return this.count > 0
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i]
      if (entry !== undefined && canStart(entry.claim)) return true
    }
    return false
  }

  /** When the oldest buffered item came back (`since`), if any. */
  oldest(): number | undefined {
    return this.items[this.head]?.since
  }

  /**
   * Takes the items buffered before `cutoff` (they are the oldest, at the
   * front), less the first `keep` of them `canStart` admits (every item,
   * without it): free slots take those next, in this order (`takeOne`).
   */
  takeOlderThan(cutoff: number, keep = 0, canStart?: (claim: Claim) => boolean): Array<Claim> {
    const taken: Array<Claim> = []
    let kept = 0
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i]
      if (entry === undefined) continue
      if (entry.since >= cutoff) break
      if (kept < keep && (canStart === undefined || canStart(entry.claim))) {
        kept++
        continue
      }
      taken.push(entry.claim)
      this.items[i] = undefined
      this.count--
    }
    this.compact()
    return taken
  }

  /** Takes the buffered claims of these items (cancelled ones: they must not start). */
  takeItems(ids: ReadonlySet<number>): Array<Claim> {
    const taken: Array<Claim> = []
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i]
      if (entry === undefined || !ids.has(entry.claim.id)) continue
      taken.push(entry.claim)
      this.items[i] = undefined
      this.count--
    }
    this.compact()
    return taken
  }

  /** The items among `ids` of which a claim is buffered. */
  heldAmong(ids: ReadonlySet<number>): Array<number> {
    const held: Array<number> = []
    for (let i = this.head; i < this.items.length; i++) {
      const entry = this.items[i]
      if (entry !== undefined && ids.has(entry.claim.id)) held.push(entry.claim.id)
    }
    return held
  }

  takeAll(): Array<Claim> {
    const all = this.items.slice(this.head).flatMap((e) => (e === undefined ? [] : [e.claim]))
    this.items = []
    this.head = 0
    this.count = 0
    return all
  }

  private compact(): void {
    while (this.head < this.items.length && this.items[this.head] === undefined) this.head++
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
  }
}
