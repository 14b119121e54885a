/**
 * The browser suite's set-up: the system's Chromium driven by playwright-core
 * (which downloads no browser), a watch on every page for console errors,
 * uncaught exceptions and CSP violations, and reads of the database made
 * directly (better-sqlite3 or pg, not through the dashboard or QueueRepo).
 */
import Sqlite from "better-sqlite3"
import { existsSync } from "node:fs"
import pg from "pg"
import { type Browser, chromium, type Page } from "playwright-core"
import { IN_CI } from "./db.js"

/** Where the browser is: DOCKET_CHROMIUM, else Debian's /usr/bin/chromium. */
export const CHROMIUM = process.env.DOCKET_CHROMIUM ?? "/usr/bin/chromium"

/** Why the suite is skipped (null: it runs). Under CI a missing browser is an error, never a skip. */
export const browserMissing: string | null = (() => {
  if (existsSync(CHROMIUM)) return null
  const reason = `no Chromium at ${CHROMIUM} (install it: apt-get install -y chromium, or set DOCKET_CHROMIUM)`
  if (IN_CI) throw new Error(`the browser suite is required in CI: ${reason}`)
  console.warn(`browser suite skipped: ${reason}`)
  return reason
})()

export const launch = (): Promise<Browser> =>
  chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"], timeout: 30_000 })

/**
 * A page that records into `problems` its console errors and uncaught exceptions, and every
 * `securitypolicyviolation` event (listened to by a script the browser adds
 * before the page's own, which the page's CSP does not govern).
 */
export const watch = async (page: Page, problems: Array<string>): Promise<Page> => {
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()} (${m.location().url}) at ${page.url()}`)
  })
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message} at ${page.url()}`))
  await page.exposeFunction("__cspViolation", (text: string) => problems.push(`csp: ${text} at ${page.url()}`))
  // A string: the tests compile without the DOM's types.
  await page.addInitScript(`document.addEventListener("securitypolicyviolation", (e) => {
    window.__cspViolation(e.violatedDirective + " " + e.blockedURI + " " + e.sourceFile + ":" + e.lineNumber)
  })`)
  return page
}

/** Reads the database directly: one query, its rows. SQLite marks are `?`; PostgreSQL's `$n`. */
export const queryDb = async (url: string, sqlite: string, postgres: string, params: ReadonlyArray<unknown>) => {
  if (!url.startsWith("postgres")) {
    const db = new Sqlite(url, { readonly: true, fileMustExist: true })
    try {
      return db.prepare(sqlite).all(...params) as Array<Record<string, unknown>>
    } finally {
      db.close()
    }
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(postgres, [...params])).rows as Array<Record<string, unknown>>
  } finally {
    await client.end()
  }
}

/** An item's state as stored ("gone" when there is no row). */
export const stateInDb = async (url: string, id: number): Promise<string> => {
  const rows = await queryDb(url, "SELECT state FROM docket_items_all WHERE id = ?", "SELECT state FROM docket_items_all WHERE id = $1", [id])
  return rows.length === 0 ? "gone" : String(rows[0].state)
}

/** Whether a kind is paused as stored (no row: not paused). */
export const pausedInDb = async (url: string, kind: string): Promise<boolean> => {
  const rows = await queryDb(url, "SELECT paused FROM docket_kinds WHERE kind = ?", "SELECT paused FROM docket_kinds WHERE kind = $1", [kind])
  return rows.length === 1 && (rows[0].paused === true || rows[0].paused === 1)
}
