/**
 * Running the `docket` command as a child process (`node bin/docket.mjs`,
 * never through npx: dash would not pass signals on), and waiting on
 * observable conditions with bounded timeouts.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Effect, ManagedRuntime } from "effect"
import { vi } from "vitest"
import type * as QueueRepo from "../../src/QueueRepo.js"
import { QueueRepo as QueueRepoTag } from "../../src/QueueRepo.js"
import { freshPgDatabase, pgAvailable, repoLayer } from "./db.js"

// Every test file that runs the command takes this bound instead of the global
// 60 s: a test here runs the command as a child process again and again, and
// each start loads about 800 modules under tsx, 1 to 3 s on this 2-core machine
// while another test file runs beside it. In CI (2026-12-04) the README's
// sixteen commands took 52 s, and the sequence tests of test/cli/tasks.test.ts 49-55 s, too
// close to 60 s for a bound that is there to catch a hang, not to time them
// (and test/cli/kind.test.ts's own 60 s bound was hit once the suite had grown).
// Tests in these files give no lower bound of their own.
vi.setConfig({ testTimeout: 180_000 })

export const ROOT = fileURLToPath(new URL("../..", import.meta.url))

/**
 * `DOCKET_TEST_COMMAND=dist`: the command under test is the compiled one
 * (`node dist/cli/main.js`, what an installed package runs; `npm run build`
 * first), and task files import the compiled Docket. `npm test` builds and
 * sets it (so do the extra Node lines, scripts/ci-node-lines.sh): the tests
 * run the command that users install, and each of the suite's thousands of
 * starts skips tsx's compile of about 800 modules (0.53 s against 0.75 s a
 * start on a quiet machine, and twice that under the suite's load). Unset (a
 * single file run by hand), the command is bin/docket.mjs over the sources
 * under tsx, with no build; `npm start`'s test always runs that path.
 */
const COMPILED = process.env.DOCKET_TEST_COMMAND === "dist"
export const BIN = COMPILED ? join(ROOT, "dist", "cli", "main.js") : join(ROOT, "bin", "docket.mjs")

/** Imports a task file outside this package can use: absolute URLs of Docket and of Effect (the same instances). */
export const DOCKET_URL = pathToFileURL(join(ROOT, ...(COMPILED ? ["dist", "index.js"] : ["src", "index.ts"]))).href
export const EFFECT_URL = pathToFileURL(join(ROOT, "node_modules", "effect", "dist", "esm", "index.js")).href

export interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

export interface RunOptions {
  readonly env?: Record<string, string | undefined>
  readonly stdin?: string
  readonly cwd?: string
  readonly timeoutMs?: number
}

const childEnv = (env: Record<string, string | undefined> | undefined) => {
  const merged: Record<string, string | undefined> = {
    ...process.env,
    DOCKET_DATABASE_URL: undefined,
    DOCKET_SCHEMA: undefined,
    ...env
  }
  for (const key of Object.keys(merged)) if (merged[key] === undefined) delete merged[key]
  return merged as NodeJS.ProcessEnv
}

/** Runs `node <args>` from the repository to its end (killed after the timeout, default 30 s). */
export const runNode = (args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Result> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const timeoutMs = options.timeoutMs ?? 30_000
    const child = spawn(process.execPath, args, {
      cwd: options.cwd ?? ROOT,
      env: childEnv(options.env),
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`node ${args.join(" ")} did not finish in ${timeoutMs} ms\n${stdout}\n${stderr}`))
    }, timeoutMs)
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started })
    })
    child.stdin.end(options.stdin ?? "")
  })

/** Runs `docket <args>` to its end. */
export const docket = (args: ReadonlyArray<string>, options: RunOptions = {}): Promise<Result> =>
  runNode([BIN, ...args], options)

/** Runs several commands, at most `limit` at a time, results in order. */
export const docketAll = async (
  commands: ReadonlyArray<ReadonlyArray<string>>,
  options: RunOptions = {},
  limit = 3
): Promise<Array<Result>> => {
  const results: Array<Result> = new Array(commands.length)
  let next = 0
  const lane = async () => {
    while (next < commands.length) {
      const i = next++
      results[i] = await docket(commands[i], options)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, commands.length) }, lane))
  return results
}

/** A long-running `docket` process (a worker): its output as it comes, and a way to signal it. */
export interface Running {
  readonly child: ChildProcess
  stdout: string
  stderr: string
  /** Waits until stdout matches, or fails after the timeout (default 60 s: a worker's start took up to 21 s in a loaded full run). */
  readonly waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<void>
  /** Resolves when the process has exited. */
  readonly exited: Promise<Result>
}

export const start = (args: ReadonlyArray<string>, options: RunOptions = {}): Running =>
  startNode([BIN, ...args], options)

/** A long-running `node <args>` process from the repository (a fixture under tsx: `["--import", "tsx", file]`). */
export const startNode = (args: ReadonlyArray<string>, options: RunOptions = {}): Running => {
  const started = performance.now()
  const child = spawn(process.execPath, args, {
    cwd: options.cwd ?? ROOT,
    env: childEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"]
  })
  const waiters = new Set<() => void>()
  const running: Running = {
    child,
    stdout: "",
    stderr: "",
    waitFor: (pattern, timeoutMs = 60_000) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (pattern.test(running.stdout)) {
            waiters.delete(check)
            clearTimeout(timer)
            resolve()
          }
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`no ${pattern} in the output within ${timeoutMs} ms:\n${running.stdout}\n${running.stderr}`))
        }, timeoutMs)
        waiters.add(check)
        check()
      }),
    exited: new Promise<Result>((resolve) => {
      child.on("close", (code, signal) =>
        resolve({ code, signal, stdout: running.stdout, stderr: running.stderr, ms: performance.now() - started }))
    })
  }
  child.stdout!.setEncoding("utf8").on("data", (d: string) => {
    running.stdout += d
    for (const w of [...waiters]) w()
  })
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (running.stderr += d))
  return running
}

/** Polls `condition` until it holds, or fails after `timeoutMs` (default 60 s) saying what was awaited. */
export const waitUntil = async (
  what: string,
  condition: () => Promise<boolean> | boolean,
  timeoutMs = 60_000,
  everyMs = 50
): Promise<void> => {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** A temporary folder, with files written into it. */
export const tempDir = (prefix = "docket-cli-") => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  return {
    dir,
    path: (...parts: Array<string>) => join(dir, ...parts),
    write: (name: string, text: string) => {
      writeFileSync(join(dir, name), text)
      return join(dir, name)
    },
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}

/** The lines a command wrote to stderr (empty lines dropped). */
export const lines = (text: string) => text.split("\n").filter((l) => l.trim() !== "")

/** A place for a command test's queue: a SQLite file in a temporary folder, or a fresh PostgreSQL database. */
export interface CliBackend {
  readonly name: "sqlite" | "pg"
  /** True when PostgreSQL is not available (never with CI=true: support/db.ts fails then). */
  readonly skip: boolean
  /** A new, empty queue's URL; removing it is pushed onto `cleanups`. */
  readonly fresh: () => Promise<string>
}

/** Both backends for `describe.each`, their removals pushed onto the test file's `cleanups`. */
/** `docket stats --json`'s horizon when nothing holds it back: none on SQLite, the default threshold and no holder on PostgreSQL. */
export const noHorizon = (backend: "sqlite" | "pg") =>
  backend === "sqlite" ? null : { ageMs: 300_000, transactions: 100_000, holders: [] }

/**
 * The backends the command tests run on: both, unless DOCKET_TEST_CLI_BACKENDS
 * names fewer (scripts/ci-node-lines.sh: `sqlite` on the Node lines beside the
 * primary one, where the PostgreSQL driver, plain JavaScript, is run by the
 * conformance suites and better-sqlite3, the native addon built per line, is
 * what the command can differ on).
 */
const CLI_BACKENDS = (process.env.DOCKET_TEST_CLI_BACKENDS ?? "sqlite,pg").split(",").map((name) => name.trim())

export const cliBackends = (cleanups: Array<() => Promise<void> | void>): ReadonlyArray<CliBackend> =>
  allCliBackends(cleanups).filter((backend) => CLI_BACKENDS.includes(backend.name))

const allCliBackends = (cleanups: Array<() => Promise<void> | void>): ReadonlyArray<CliBackend> => [
  {
    name: "sqlite",
    skip: false,
    fresh: async () => {
      const d = tempDir()
      cleanups.push(d.remove)
      return d.path("queue.db")
    }
  },
  {
    name: "pg",
    skip: !pgAvailable,
    fresh: async () => {
      const db = await freshPgDatabase()
      cleanups.push(db.drop)
      return db.url
    }
  }
]

/**
 * Runs QueueRepo operations in the test's own process, on the database at
 * `url` (what a command wrote, read back; or items set up for a command).
 * The runtime is disposed with `cleanups`.
 */
export const openRepo = (cleanups: Array<() => Promise<void> | void>) => (url: string) => {
  const runtime = ManagedRuntime.make(repoLayer(url))
  cleanups.push(() => runtime.dispose())
  return <A, E>(f: (repo: QueueRepo.Service) => Effect.Effect<A, E>) => runtime.runPromise(Effect.flatMap(QueueRepoTag, f))
}
