/**
 * The tick computation (src/internal/recurring/ticks.ts) with fixed times:
 * effect's Cron across the 2026 DST changes in America/New_York (spring
 * forward 2026-03-08 02:00 EST -> 03:00 EDT; fall back 2026-11-01 02:00 EDT
 * -> 01:00 EST), seconds, UTC by default, and the missed modes' choice of ticks.
 * docs/concepts.md ("Recurring items") describes what these pin down.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Ticks from "../src/internal/recurring/ticks.js"

const cron = (expression: string, tz: string | null = null) => Either.getOrThrow(Ticks.parse(expression, tz))
const at = (iso: string) => Date.parse(iso)
const isoAll = (ticks: ReadonlyArray<number>) => ticks.map((t) => new Date(t).toISOString())
const NY = "America/New_York"

describe("ticks across DST in America/New_York", () => {
  it("spring forward: a daily 02:30 (a time that does not exist that day) fires once, at 03:30 EDT", () => {
    const due = Ticks.due(cron("30 2 * * *", NY), at("2026-03-07T07:30:00.000Z"), at("2026-03-10T12:00:00Z"))
    expect(isoAll(due.ticks)).toEqual([
      "2026-03-07T07:30:00.000Z", // 02:30 EST
      "2026-03-08T07:30:00.000Z", // 03:30 EDT: 02:30 did not exist
      "2026-03-09T06:30:00.000Z", // 02:30 EDT
      "2026-03-10T06:30:00.000Z"
    ])
    expect(new Date(due.next).toISOString()).toBe("2026-03-11T06:30:00.000Z")
  })

  it("spring forward: an hourly schedule has 23 ticks that day, one an hour of real time", () => {
    const c = cron("0 * * * *", NY)
    const day = Ticks.due(c, Ticks.firstAfter(c, at("2026-03-08T04:59:59Z")), at("2026-03-09T03:59:59Z"))
    expect(day.ticks.length).toBe(23)
    expect(isoAll(day.ticks.slice(0, 3))).toEqual([
      "2026-03-08T05:00:00.000Z", // 00:00 EST
      "2026-03-08T06:00:00.000Z", // 01:00 EST
      "2026-03-08T07:00:00.000Z" // 03:00 EDT
    ])
    for (let i = 1; i < day.ticks.length; i++) expect(day.ticks[i] - day.ticks[i - 1]).toBe(3_600_000)
  })

  it("fall back: a daily 01:30 (a time that happens twice) fires once, at its first occurrence (EDT)", () => {
    const due = Ticks.due(cron("30 1 * * *", NY), at("2026-10-31T05:30:00Z"), at("2026-11-02T12:00:00Z"))
    expect(isoAll(due.ticks)).toEqual([
      "2026-10-31T05:30:00.000Z", // 01:30 EDT
      "2026-11-01T05:30:00.000Z", // 01:30 EDT; not again at 01:30 EST (06:30Z)
      "2026-11-02T06:30:00.000Z" // 01:30 EST
    ])
  })

  it("fall back: an hourly schedule skips the repeated 01:00 EST hour (24 ticks in a 25-hour day)", () => {
    const c = cron("0 * * * *", NY)
    const day = Ticks.due(c, Ticks.firstAfter(c, at("2026-11-01T03:59:59Z")), at("2026-11-02T04:59:59Z"))
    expect(day.ticks.length).toBe(24)
    expect(isoAll(day.ticks.slice(0, 3))).toEqual([
      "2026-11-01T04:00:00.000Z", // 00:00 EDT
      "2026-11-01T05:00:00.000Z", // 01:00 EDT
      "2026-11-01T07:00:00.000Z" // 02:00 EST: 06:00Z (01:00 EST) has no tick
    ])
  })

  it("a daily 06:00 is 10:00Z in summer time and 11:00Z in winter time", () => {
    const c = cron("0 6 * * *", NY)
    expect(isoAll(Ticks.due(c, at("2026-03-07T11:00:00Z"), at("2026-03-08T23:00:00Z")).ticks)).toEqual([
      "2026-03-07T11:00:00.000Z",
      "2026-03-08T10:00:00.000Z"
    ])
    expect(isoAll(Ticks.due(c, at("2026-10-31T10:00:00Z"), at("2026-11-01T23:00:00Z")).ticks)).toEqual([
      "2026-10-31T10:00:00.000Z",
      "2026-11-01T11:00:00.000Z"
    ])
  })
})

describe("ticks", () => {
  it("no zone is UTC, whatever the process's zone; six fields give seconds; the next tick is strictly after", () => {
    const zone = process.env.TZ
    process.env.TZ = "Asia/Tokyo" // effect's Cron without a zone would read 06:00 as Tokyo's
    try {
      expect(new Date(Ticks.firstAfter(cron("0 6 * * *"), at("2026-03-08T00:00:00Z"))).toISOString()).toBe("2026-03-08T06:00:00.000Z")
    } finally {
      if (zone === undefined) delete process.env.TZ
      else process.env.TZ = zone
    }
    const seconds = cron("* * * * * *")
    expect(Ticks.firstAfter(seconds, at("2026-03-08T00:00:00.500Z"))).toBe(at("2026-03-08T00:00:01Z"))
    expect(Ticks.firstAfter(seconds, at("2026-03-08T00:00:01Z"))).toBe(at("2026-03-08T00:00:02Z"))
  })

  it("due: every tick from the stored next tick to now inclusive, bounded, the next one after them", () => {
    const c = cron("* * * * * *")
    const due = Ticks.due(c, at("2026-03-08T00:00:00Z"), at("2026-03-08T00:00:03Z"))
    expect(isoAll(due.ticks)).toEqual(isoAll([0, 1, 2, 3].map((s) => at("2026-03-08T00:00:00Z") + s * 1000)))
    expect(due.next).toBe(at("2026-03-08T00:00:04Z"))
    const bounded = Ticks.due(c, at("2026-03-08T00:00:00Z"), at("2026-03-08T01:00:00Z"), 10)
    expect(bounded.ticks.length).toBe(10)
    expect(bounded.next).toBe(at("2026-03-08T00:00:10Z"))
    expect(Ticks.due(c, at("2026-03-08T00:00:05Z"), at("2026-03-08T00:00:04.999Z")).ticks).toEqual([])
  })

  it("missed: skip none, one the latest, all the most recent within the bound; then from the next tick after now", () => {
    const c = cron("0 * * * *")
    const from = at("2026-03-08T00:00:00Z")
    const now = at("2026-03-08T05:30:00Z")
    const next = at("2026-03-08T06:00:00Z")
    expect(Ticks.missed("skip", c, from, now)).toEqual({ ticks: [], next })
    expect(Ticks.missed("one", c, from, now)).toEqual({ ticks: [at("2026-03-08T05:00:00Z")], next })
    expect(Ticks.missed("all", c, from, now).ticks.length).toBe(6)
    expect(isoAll(Ticks.missed("all", c, from, now, 2).ticks)).toEqual(["2026-03-08T04:00:00.000Z", "2026-03-08T05:00:00.000Z"])
    // Nothing due yet: nothing missed.
    expect(Ticks.missed("all", c, next, now)).toEqual({ ticks: [], next })
  })

  it("the latest tick at or before a time within a second or a minute of a tick is that tick", () => {
    const seconds = cron("* * * * * *")
    for (const offset of [0, 1, 300, 999]) {
      const now = at("2026-03-08T12:00:05Z") + offset
      expect(Ticks.latestAtOrBefore(seconds, now, 0), String(offset)).toBe(at("2026-03-08T12:00:05Z"))
      expect(Ticks.missed("one", seconds, at("2026-03-08T12:00:00Z"), now)).toEqual({
        ticks: [at("2026-03-08T12:00:05Z")],
        next: at("2026-03-08T12:00:06Z")
      })
    }
    const hourly = cron("0 * * * *")
    for (const offset of [0, 1, 59_999, 3_599_999]) {
      expect(Ticks.latestAtOrBefore(hourly, at("2026-03-08T12:00:00Z") + offset, 0), String(offset)).toBe(at("2026-03-08T12:00:00Z"))
    }
    expect(Ticks.latestAtOrBefore(hourly, at("2026-03-08T11:59:59.999Z"), 0)).toBe(at("2026-03-08T11:00:00Z"))
    expect(Ticks.latestAtOrBefore(hourly, at("2026-03-08T12:30:00Z"), at("2026-03-08T12:00:00.001Z"))).toBeUndefined()
    // "all" ends with the same latest tick and walks back over exact ticks.
    expect(isoAll(Ticks.missed("all", seconds, at("2026-03-08T12:00:02Z"), at("2026-03-08T12:00:05.300Z")).ticks)).toEqual([
      "2026-03-08T12:00:02.000Z", "2026-03-08T12:00:03.000Z", "2026-03-08T12:00:04.000Z", "2026-03-08T12:00:05.000Z"
    ])
  })

  it("a bad expression or zone is refused with effect's reason", () => {
    expect(Ticks.parse("61 * * * *", null)).toMatchObject({ _tag: "Left" })
    expect(Ticks.parse("0 6 * * *", "Mars/Olympus")).toEqual(Either.left("Invalid time zone in cron expression"))
  })
})
